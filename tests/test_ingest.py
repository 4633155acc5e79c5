"""Ingest on the emulator: malformed rows, formats, checkpoints, and a real interrupted run."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.cloud import firestore

from tests.cli import Ran
from tests.cli import tsstore as run_tsstore
from tests.shared import HEADER, MALFORMED, good, write_malformed
from tsstore import TimeSeriesStore
from tsstore.demo import SPEC
from tsstore.ingest import IngestError, Rejected, ingest_file
from tsstore.rows.parse import BadRow, RowParser
from tsstore.local.synthetic import CSV_COLUMNS, flat_row, trading_day
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own


def stored(client: firestore.Client, collection: str = "instruments") -> dict[str, dict[str, Any]]:
    return {d.id: d.to_dict() or {} for d in client.collection(collection).stream()}


def test_every_kind_of_malformed_row_is_rejected_with_its_line(client: firestore.Client, tmp_path: Path) -> None:
    path = tmp_path / "ticks.csv"
    write_malformed(path)
    rejects: list[Rejected] = []
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    summary = ingest_file(store, path, strict=True, on_reject=rejects.append)
    expected = [(n, reason) for n, (_, reason) in enumerate(MALFORMED, start=1) if reason and n > 1]
    assert len(expected) >= 10
    assert [r.line for r in rejects] == [n for n, _ in expected]
    for rejected, (_, reason) in zip(rejects, expected):
        assert reason in rejected.reason, (rejected, reason)
    assert (summary.written, summary.rejected, summary.skipped) == (4, len(expected), 0)
    docs = stored(client)
    assert sorted(d["symbol"] for d in docs.values()) == ["SYM1", "SYM2", "SYM3", "SYM4"]
    one = next(d for d in docs.values() if d["symbol"] == "SYM1")
    assert one["price"] == {"currency": "USD", "micros": 1001} and one["volume"] == 100 and "note" not in one


def test_an_ingest_is_one_span_over_its_write_and_counts_its_rejected_rows(
    tmp_path: Path, spans: Any, metric_points: Callable[[], dict[tuple[str, str], Any]]
) -> None:
    path = tmp_path / "ticks.csv"
    write_malformed(path)
    summary = ingest_file(TimeSeriesStore.memory(SPEC), path, strict=True)
    finished = list(spans.get_finished_spans())
    [root] = [span for span in finished if span.parent is None]
    [write] = [span for span in finished if span.name == f"write {SPEC.collection}"]
    assert root.name == f"ingest {SPEC.collection}" and write.parent.span_id == root.context.span_id
    assert (root.attributes["tsstore.ticks.written"], root.attributes["tsstore.ticks.rejected"]) == (
        summary.written, summary.rejected)  # fmt: skip
    assert summary.rejected >= 10 and metric_points()[("tsstore.ticks.rejected", SPEC.collection)].value == summary.rejected


def test_naive_policy_and_non_strict_mode(client: firestore.Client, tmp_path: Path) -> None:
    path = tmp_path / "ticks.csv"
    write_malformed(path)
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    rejects: list[Rejected] = []
    summary = ingest_file(store, path, naive="utc", on_reject=rejects.append, checkpoint=tmp_path / "ck.json")
    # the naive row and the row with an undeclared column's value are now accepted
    assert summary.written == 6
    assert not any("no timezone" in r.reason or "unknown column" in r.reason for r in rejects)
    noted = next(d for d in stored(client).values() if d.get("note"))
    assert noted["note"] == "hello"


def test_naive_times_in_a_named_zone(client: firestore.Client, tmp_path: Path) -> None:
    path = tmp_path / "rome.csv"
    path.write_text(
        "timestamp,symbol,exchange,instrumentType,price.currency,price.micros,volume\n"
        "2019-07-01T10:00:00,AAA,EXCHG1,commonstock,EUR,1,1\n"  # summer: UTC+2
        "2019-01-02T10:00:00,BBB,EXCHG1,commonstock,EUR,1,1\n"  # winter: UTC+1
    )
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    assert ingest_file(store, path, naive="Europe/Rome").written == 2
    times = {d["symbol"]: d["timestamp"] for d in stored(client).values()}
    assert times["AAA"].hour == 8 and times["BBB"].hour == 9 and times["AAA"].utcoffset() == dt.timedelta(0)
    with pytest.raises(IngestError, match="timezone policy 'Mars/Olympus' is not allowed"):
        ingest_file(store, path, naive="Mars/Olympus")


def test_file_level_problems_are_errors(client: firestore.Client, tmp_path: Path) -> None:
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    dupes = tmp_path / "dupes.csv"
    dupes.write_text("timestamp,symbol,symbol\n")
    with pytest.raises(IngestError, match=r"names \['symbol'\] more than once"):
        ingest_file(store, dupes)
    no_time = tmp_path / "no_time.csv"
    no_time.write_text("symbol,exchange\nA,B\n")
    with pytest.raises(IngestError, match="has no 'timestamp' column"):
        ingest_file(store, no_time)
    unknown = tmp_path / "ticks.txt"
    unknown.write_text("x")
    with pytest.raises(IngestError, match="cannot tell the format"):
        ingest_file(store, unknown)


def test_csv_jsonl_and_parquet_give_the_same_documents(emulator: Any, tmp_path: Path) -> None:
    n = 200
    ticks = list(trading_day(n, seed=12))
    rows = [flat_row(t) for t in ticks]
    with open(tmp_path / "t.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with open(tmp_path / "t.jsonl", "w") as handle:  # nested objects here, dotted names in the CSV
        for t in ticks:
            handle.write(json.dumps({**t, "timestamp": t["timestamp"].isoformat()}) + "\n")
    table = pa.table(
        {
            "timestamp": pa.array([t["timestamp"] for t in ticks], pa.timestamp("us", tz="UTC")),
            **{c: [r[c] for r in rows] for c in CSV_COLUMNS if c != "timestamp"},
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    results = []
    for name in ("t.csv", "t.jsonl", "t.parquet"):
        client = emulator.client(database=f"fmt-{name.split('.')[1]}-{os.getpid()}")
        summary = ingest_file(TimeSeriesStore(client, SPEC, write_options=FAST), tmp_path / name)
        assert (summary.written, summary.rejected) == (n, 0), name
        results.append(stored(client))
        client.close()
    assert results[0] == results[1] == results[2]
    assert len(results[0]) == n


# --- interrupted for real, then resumed ----------------------------------------------------------


def day_file(path: Path, total: int, *, seed: int) -> Path:
    """A CSV of ``total`` ticks of one trading day at ``path``."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(flat_row(t) for t in trading_day(total, seed=seed))
    return path


def ingest_until(path: Path, home: Path, until: Callable[[], bool]) -> subprocess.Popen[str]:
    """``tsstore ingest PATH`` in a process of its own, on the local store in ``home`` (started by
    the ingest if it does not run), once ``until()`` holds while it runs (4 minutes at most)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
    env.update(TSSTORE_HOME=str(home))
    command = [sys.executable, "-m", "tsstore", "ingest", str(path)]
    running = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and running.poll() is None and not until():
        time.sleep(0.05)
    return running


@pytest.mark.emulator  # it starts an emulator of its own
def test_interrupted_ingest_resumes_without_duplicates_and_one_whose_store_stops_ends(tmp_path: Path) -> None:
    """20 000 rows into the local store (as `tsstore ingest` uses it with no emulator or
    project configured: the first run starts it), killed with SIGKILL midway, then run again;
    then another ingest into that store, whose store is killed under it."""
    path = tmp_path / "day.csv"
    # Enough rows that the first run is far from done when a checkpoint passes a quarter of
    # them (saved every 0.5 s or more): it is asserted still running when killed. (6 000 rows
    # took about half a second on a fast day here: the run ended before a checkpoint passed.)
    total = 20_000
    day_file(path, total, seed=99)

    def checkpoint_line() -> int:
        found = list(tmp_path.glob("day.csv.*.tsstore-checkpoint.json"))
        return json.loads(found[0].read_text())["line"] if found else 0

    home = tmp_path / "home"

    def tsstore(*args: str) -> Ran:
        return run_tsstore(*args, env={"FIRESTORE_EMULATOR_HOST": None, "GOOGLE_CLOUD_PROJECT": None,
                                       "TSSTORE_HOME": str(home)})  # fmt: skip

    first: subprocess.Popen[str] | None = None
    stopped: subprocess.Popen[str] | None = None
    try:
        # No `tsstore emulator start` first: the ingest starts the local store itself (a
        # detached process of its own, which the kill below leaves running).
        # Killed at its first checkpoint: on a quiet machine 20 000 rows were done before one
        # passed a quarter of them.
        first = ingest_until(path, home, lambda: checkpoint_line() > 0)
        assert first.poll() is None, "the first run finished before it could be interrupted"
        first.send_signal(signal.SIGKILL)  # no chance to clean up: the hardest case
        _, err = first.communicate(timeout=60)
        assert first.returncode == -signal.SIGKILL
        assert "started the local store at" in err and "ingesting" in err  # where, and the progress bar
        stopped_at = checkpoint_line()
        assert 0 < stopped_at < total + 1

        second = tsstore("ingest", str(path))
        assert second.returncode == 0, second.stderr
        summary = second.stdout.strip().splitlines()[-1]
        read = int(summary.split(": ", 1)[1].split(" rows read")[0])
        created = int(summary.split(" rows read: ")[1].split(" stored new")[0])
        present = int(summary.split(" stored new, ")[1].split(" already present")[0])
        assert f"; {stopped_at - 1} rows up to line {stopped_at} skipped" in summary  # all but the header
        assert read + stopped_at - 1 == total and created + present == read

        counted = tsstore("count")
        assert counted.stdout.strip() == str(total), counted.stderr  # exactly: none lost, none twice
        newest = tsstore("query", "--limit", "3", "--format", "jsonl")
        stamps = [json.loads(line)["timestamp"] for line in newest.stdout.splitlines()]
        assert len(stamps) == 3 and stamps == sorted(stamps, reverse=True)

        # The CI run, on the same store (a store of its own cost a JVM start): the local
        # store stopped under a running ingest, which then met "Connection refused" for 7 minutes
        # and ended with exit 4 and rows rejected. Here the store's processes are killed (by the
        # PIDs in its state file) midway: the ingest ends with exit 1, saying what stopped, where
        # the store's log is and how to go on.
        more = day_file(tmp_path / "more.csv", 60_000, seed=98)  # far from done when its first checkpoint is saved
        stopped = ingest_until(more, home, lambda: bool(list(tmp_path.glob("more.csv.*.tsstore-checkpoint.json"))))
        assert stopped.poll() is None, "the ingest finished before its store could be stopped"
        state = json.loads((home / "emulator.json").read_text())
        for pid in (state["emulator_pid"], state["pid"]):
            os.kill(pid, signal.SIGKILL)
        # Generous: noticed within seconds; before, it retried for minutes.
        _, err = stopped.communicate(timeout=120)
        assert stopped.returncode == 1, err
        said = err.splitlines()[-2:]
        assert said[0].startswith(f"Error: the local store at {state['address']} stopped while this command used it: ")
        assert f"its log: {home / 'emulator.log'}. Start it again (`tsstore emulator start`" in said[0]
        assert said[1] == f"  tsstore ingest {more}"
    finally:
        for started in (first, stopped):
            if started is not None and started.stdout is not None and not started.stdout.closed:  # a check failed first
                if started.poll() is None:
                    started.kill()
                started.communicate(timeout=60)  # its pipes closed here, not left to warn in the next test
        tsstore("emulator", "stop")


def test_review_cases_bom_overflow_surrogates_and_checkpoint_scope(emulator: Any, tmp_path: Path) -> None:
    # A byte-order mark (spreadsheet export) is not part of the first column's name.
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (HEADER + "\n" + good(5) + "\n").encode())
    a = emulator.client(database=f"rv-a-{os.getpid()}")
    store_a = TimeSeriesStore(a, SPEC, write_options=FAST)
    assert ingest_file(store_a, bom).written == 1
    # JSON values that would crash a converter reject their row only.
    lines = tmp_path / "odd.jsonl"
    lines.write_text(
        '{"timestamp": "2019-01-02T09:00:00+00:00", "symbol": "OK1", "volume": 5}\n'
        '{"timestamp": "2019-01-02T09:00:01+00:00", "symbol": "INF", "volume": Infinity}\n'
        '{"timestamp": "2019-01-02T09:00:02+00:00", "symbol": "\\ud800"}\n'
        '{"timestamp": "2019-01-02T09:00:03+00:00", "symbol": "OK2", "volume": 7}\n'
    )
    rejects: list[Rejected] = []
    summary = ingest_file(store_a, lines, on_reject=rejects.append)
    assert summary.written == 2 and [r.line for r in rejects] == [2, 3]
    assert "not an integer" in rejects[0].reason and "not valid Unicode" in rejects[1].reason
    # The checkpoint belongs to one target: the same file into another database is written there too.
    b = emulator.client(database=f"rv-b-{os.getpid()}")
    assert ingest_file(TimeSeriesStore(b, SPEC, write_options=FAST), bom).written == 1
    again = ingest_file(store_a, bom)  # a finished file leaves no checkpoint: read again, stored once
    assert (again.skipped, again.created, again.present) == (0, 0, 1)
    a.close()
    b.close()


def test_a_time_column_of_numbers_since_the_epoch_is_read_in_its_unit() -> None:
    """``--time-column``/``--time-unit``: the same instant from seconds, ms, us and ns; a
    number that is not whole microseconds, or not a number, is the row's reject reason; a
    missing time column, or a timestamp column beside it, stops the file with one line."""
    at = dt.datetime(2019, 1, 2, 9, 34, 0, 250_000, tzinfo=dt.timezone.utc)
    for unit, value in (("s", "1546421640.25"), ("ms", "1546421640250"), ("us", "1546421640250000"),
                        ("ns", "1546421640250000000")):  # fmt: skip
        parser = RowParser(SPEC, zone=None, strict=False, max_field_bytes=100, time_column="ts", time_unit=unit)
        record = parser.compile(["ts", "symbol"])([value, "AAA"])
        assert record == {"timestamp": at, "symbol": "AAA"}, unit
        assert "ts" not in record
    nanos = RowParser(SPEC, zone=None, strict=False, max_field_bytes=100, time_column="ts", time_unit="ns")
    with pytest.raises(BadRow, match="'1546421640250000001' ns is not a whole number of microseconds"):
        nanos.compile(["ts", "symbol"])(["1546421640250000001", "AAA"])
    with pytest.raises(BadRow, match="'soon' is not a number of ns since 1970"):
        nanos.compile(["ts", "symbol"])(["soon", "AAA"])
    with pytest.raises(IngestError, match=r"the time column 'ts' is not in the file \(columns: time, symbol\)"):
        nanos.compile(["time", "symbol"])
    with pytest.raises(IngestError, match="has a 'timestamp' column besides the time column 'ts'; drop one"):
        nanos.compile(["ts", "timestamp"])
    with pytest.raises(IngestError, match="time unit 'min' is not one of s, ms, us, ns"):
        RowParser(SPEC, zone=None, strict=False, max_field_bytes=100, time_unit="min")
