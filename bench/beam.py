"""`tsstore backfill` (Beam, DirectRunner, W worker processes) vs `tsstore ingest` (one
process per file, one after another) on the same public files, side by side.

The data is real: the first --rows rows of `flights-3m.parquet` from the npm package
vega-datasets (fetched with `npm pack vega-datasets` unless --data names the file), split
into --files Parquet files. Its times are naive (read as UTC); routes repeat within a minute
(two flights with the same origin, destination and minute are two ticks). Both commands run
as a user runs them, against the same emulator, each round on an emptied database, the order
alternating between rounds. After every run the collection's count() must equal the
printed "stored new" and the rows of the files.

On two cores the emulator, Beam's runner and its workers share the CPUs, so backfill need
not be faster here; what matters is the per-worker rate, which sets how many Dataflow
workers a collection's write ceiling (500/s per shard value) can use.

Run: python bench/beam.py [--rows 200000] [--files 4] [--workers 2] [--repeats 2] [--data PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from _common import emulator

from tsstore.local.emulator import DEFAULT_PROJECT

SPEC = """
[[series]]
collection = "flights"
timestamp_field = "date"
key_fields = ["origin", "destination"]
shards = ["a", "b", "c", "d", "e", "f", "g", "h"]
columns = {delay = "Int64", distance = "Int64", origin = "string", destination = "string"}
"""
CACHE = Path.home() / ".cache" / "tsstore-bench"


def flights_file(given: str | None) -> Path:
    if given:
        return Path(given)
    target = CACHE / "flights-3m.parquet"
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        packed = subprocess.run(
            ["npm", "pack", "vega-datasets", "--silent"], cwd=CACHE, capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        subprocess.run(["tar", "xzf", packed, "package/data/flights-3m.parquet"], cwd=CACHE, check=True)
        (CACHE / "package" / "data" / "flights-3m.parquet").rename(target)
    return target


def split(source: Path, folder: Path, *, rows: int, files: int) -> list[Path]:
    table = pq.read_table(source).slice(0, rows)
    per = -(-rows // files)
    paths = []
    for i in range(files):
        path = folder / f"flights-{i}.parquet"
        pq.write_table(table.slice(i * per, per), path)
        paths.append(path)
    return paths


def run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data", default=None, help="flights-3m.parquet (default: fetched with npm pack)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tsstore-bench-beam-"))
    paths = split(flights_file(args.data), folder, rows=args.rows, files=args.files)
    (folder / "flights.toml").write_text(SPEC)
    emu = emulator(max_heap="6g")
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emu.address, "GOOGLE_CLOUD_PROJECT": DEFAULT_PROJECT}
    tsstore = [sys.executable, "-m", "tsstore"]
    spec = ["--spec", str(folder / "flights.toml"), "--naive", "utc"]
    seconds: dict[str, list[float]] = {"backfill": [], "ingest": []}
    try:
        for round_ in range(args.repeats):
            for name in sorted(seconds, reverse=bool(round_ % 2)):
                database = f"{name}-{round_}"
                where = ["--database", database]
                if name == "backfill":
                    took, out = run(
                        [*tsstore, "backfill", str(folder / "*.parquet"), *spec, *where, "--workers", str(args.workers)]
                        + ["--rejects", str(folder / f"rejects-{round_}.csv")],
                        env,
                    )
                    created = int(re.search(r"(\d+) stored new", out).group(1))  # type: ignore[union-attr]
                else:
                    took, created = 0.0, 0
                    for path in paths:
                        t, out = run(
                            [*tsstore, "ingest", str(path), *spec, *where]
                            + ["--checkpoint", str(folder / f"{path.name}.{round_}.ck")],
                            env,
                        )
                        took += t
                        created += int(re.search(r"(\d+) stored new", out).group(1))  # type: ignore[union-attr]
                client = emu.client(database=database)
                counted = client.collection("flights").count().get()[0][0].value
                client.close()
                if not counted == created == args.rows:
                    raise SystemExit(f"{name}: printed {created} stored new, count() says {counted}, rows {args.rows}")
                seconds[name].append(took)
                print(f"# round {round_}: {name} {args.rows} rows in {took:.1f} s", file=sys.stderr)
    finally:
        emu.stop()
    rate = {name: args.rows / statistics.median(s) for name, s in seconds.items()}
    print(f"backfill vs ingest, {args.rows} flights in {args.files} Parquet files, median of {args.repeats} rounds")
    print(f"  tsstore ingest (one process per file):      {rate['ingest']:8,.0f} rows/s")
    print(f"  tsstore backfill (DirectRunner, {args.workers} workers):  {rate['backfill']:8,.0f} rows/s")
    print(f"  ratio backfill / ingest: {rate['backfill'] / rate['ingest']:.2f}x")
    per_worker = rate["backfill"] / args.workers
    print(f"  per worker process: {per_worker:,.0f} rows/s (sharing {os.cpu_count()} CPUs with the emulator)")
    for shards in (10, 90):
        ceiling = 500 * shards
        print(f"  {shards} shards (ceiling {ceiling:,}/s): about {-(-ceiling // max(1, int(per_worker)))} such workers")


if __name__ == "__main__":
    main()
