"""Ingest as a user runs it, where it used to stop badly: hostile files and Ctrl-C."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli import Ran
from tests.cli import tsstore as run_tsstore
from tests.proxy import DistanceProxy
from tsstore.local.emulator import Emulator
from tsstore.local.synthetic import CSV_COLUMNS, flat_row, trading_day

SPEC_TOML = """
[[series]]
collection = "ticks"
key_fields = ["symbol"]
columns = {"price.micros" = "Int64", size = "Float64", note = "string"}
"""
HEADER = "timestamp,symbol,price.micros,size,note"
#: Bytes a second the interrupted ingest's proxy carries each way: under 1 000 ticks a second.
TRICKLE = 1_000_000


def env_for(emulator: Emulator) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_CLOUD_PROJECT"}
    env["FIRESTORE_EMULATOR_HOST"] = emulator.address
    return env


def tsstore(emulator: Emulator, database: str, *args: str, cwd: Path) -> Ran:
    return run_tsstore(*args, "--database", database, env={**env_for(emulator), "GOOGLE_CLOUD_PROJECT": None}, cwd=cwd)


# (line text, expected reject reason or None for a good row); lines end in CRLF, the file
# starts with a byte-order mark.
HOSTILE = [
    (HEADER, None),
    ("2019-01-02T09:00:00+00:00,AAA,100,1.5,", None),
    ("0001-01-01T00:00:00+01:00,AAA,100,1.5,", "outside the times Firestore stores"),
    ('2019-01-02T09:00:01+00:00,"A,B",101,2,"quoted, with a comma"', None),
    ("2019-01-02T09:00:02+00:00,AAA,102,nan,", "'nan' is not a finite number"),
    ("2019-01-02T09:00:03+00:00,AAA,103,-inf,", "'-inf' is not a finite number"),
    ("2016-12-31T23:59:60+00:00,AAA,104,1,", "is a leap second"),
    ("2019-01-02T09:00:04+00:00,,105,1,", "key field 'symbol' is missing"),
    ("2019-01-02T09:00:05+00:00,AAA,106", "has 3 fields, the header has 5"),
    ('2019-01-02T09:00:06+00:00,AAA,107,1,"ab"cd', "malformed CSV"),
    ("2019-01-02T09:00:07+00:00,BBB,108,1,", None),
    ("2019-01-02T09:00:08+00:00,AAA,109,1," + "x" * (1024 * 1024 + 10), "column 'note' is 1048586 bytes; at most 1500"),
    ("2019-01-02T09:00:09+00:00,AAA,NaN,1,", "'NaN' is not an integer"),
    ("9999-12-31T23:59:59-05:00,AAA,110,1,", "outside the times Firestore stores"),
    ("2019-01-02T09:00:10+00:00,AAA,111,1e400,", "is not a finite number"),
    ("2019-01-02T09:00:11+00:00,CCC,112,3.25,", None),
    ('2019-01-02T09:00:12+00:00,AAA,113,1,"never closed', "malformed CSV"),
]


def test_hostile_rows_are_rejects_and_never_end_the_run(emulator: Emulator, database_id: str, tmp_path: Path) -> None:
    (tmp_path / "ticks.toml").write_text(SPEC_TOML)
    text = "\r\n".join(line for line, _ in HOSTILE) + "\r\n"
    (tmp_path / "hostile.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    done = tsstore(emulator, database_id, "ingest", "hostile.csv", "--spec", "ticks.toml", cwd=tmp_path)
    assert done.returncode == 4, done.stderr  # finished, with rows rejected
    assert "Traceback" not in done.stderr
    good = sum(1 for _, reason in HOSTILE[1:] if reason is None)
    bad = [(n, reason) for n, (_, reason) in enumerate(HOSTILE, start=1) if reason]
    summary = done.stdout.strip().splitlines()[-1]
    assert f"{len(HOSTILE) - 1} rows read: {good} stored new, 0 already present, {len(bad)} rejected;" in summary
    with open(tmp_path / "hostile.csv.rejects.csv", newline="", encoding="utf-8") as handle:
        rejects = [(int(row["line"]), row["reason"]) for row in csv.DictReader(handle)]
    assert [line for line, _ in rejects] == [n for n, _ in bad]
    for (line, reason), (_, expected) in zip(rejects, bad):
        assert expected in reason, (line, reason)
    counted = tsstore(emulator, database_id, "count", "--spec", "ticks.toml", cwd=tmp_path)
    assert counted.stdout.strip() == str(good), counted.stderr
    frame = tsstore(emulator, database_id, "query", "--spec", "ticks.toml", "--format", "jsonl", cwd=tmp_path)
    symbols = sorted(json.loads(line)["symbol"] for line in frame.stdout.splitlines())
    assert symbols == ["A,B", "AAA", "BBB", "CCC"]
    # The finished run left no checkpoint: a re-run reads every row again and stores nothing twice.
    rerun = tsstore(emulator, database_id, "ingest", "hostile.csv", "--spec", "ticks.toml", cwd=tmp_path)
    assert f"0 stored new, {good} already present" in rerun.stdout and "checkpoint removed" in rerun.stdout


def checkpoint_line(folder: Path) -> int:
    for path in folder.glob("*.tsstore-checkpoint.json"):
        try:
            return int(json.loads(path.read_text())["line"])
        except (ValueError, KeyError, OSError):
            return 0
    return 0


def test_ctrl_c_prints_what_was_done_and_the_same_command_resumes(
    emulator: Emulator, database_id: str, tmp_path: Path
) -> None:
    # The first run reaches the emulator through a proxy that carries TRICKLE bytes a second
    # (a tick's write is ~1.3 kB), so it is far from done when the Ctrl-C lands, after its
    # first checkpoint past line 1 000, however fast the machine: its 8 batches in flight share
    # the trickle and end together, so it stops having read ~6 000-10 000 rows (measured at
    # 0.6 and 2 MB/s), and the resume writes the rest. (Straight to the emulator, 10 000 rows
    # were once all done before the first checkpoint passed line 1 000, in CI: the file had
    # 30 000 rows, most of them written by the resume, 11 CPU-s more than now.)
    total = 15_000
    path = tmp_path / "day.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for tick in trading_day(total, seed=11):
            writer.writerow(flat_row(tick))
    command = [sys.executable, "-m", "tsstore", "ingest", str(path), "--database", database_id]
    proxy = DistanceProxy(emulator.address, round_trip=0.0, bandwidth=TRICKLE)
    # as a context, so a failed check still closes its pipes (a ResourceWarning would fail the worker's next test)
    with contextlib.closing(proxy), subprocess.Popen(
        command, env={**env_for(emulator), "FIRESTORE_EMULATOR_HOST": proxy.address}, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as first:  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None and checkpoint_line(tmp_path) < 1000:
            time.sleep(0.05)
        assert first.poll() is None, "the run finished before it could be interrupted"
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)  # a guard against a hang, not a speed check
    assert first.returncode == 130, err
    assert "Traceback" not in err and "Aborted!" not in err
    summary = out.strip().splitlines()[-1]
    numbers = dict(
        (part.split(" ", 1)[1], int(part.split(" ", 1)[0]))
        for part in summary.split(" rows read: ")[1].split(";")[0].split(", ")
    )
    read = int(summary.split(": ")[1].split(" rows read")[0])
    line = checkpoint_line(tmp_path)
    assert f"interrupted: every row up to line {line} is done (checkpoint saved)" in err
    assert "run the same command to resume:\n  tsstore ingest " in err
    # Stopped mid-run: rows are usually left for the resume. Every row may have been read
    # already, its batches in flight (a free machine once read all 10 000 before the stop
    # landed), or even done: the checkpoint is saved every 0.5 s, and the emulator takes
    # 10 000 rows in about a second, so the stop may land as the run finishes (seen once).
    assert sum(numbers.values()) == read and 0 < read <= total and line - 1 <= total
    # The checkpoint passes only rows that are done: it stays behind stored rows when an
    # earlier batch was unconfirmed at the stop, or the Ctrl-C landed between the writer
    # counting a batch and the checkpoint's tracker hearing of it (then every row after that
    # batch waits behind it: seen once, 4 500 rows); the resume finds those present.
    unconfirmed = numbers.get("not confirmed", 0)
    assert line - 1 <= read - unconfirmed

    second = tsstore(emulator, database_id, "ingest", str(path), cwd=tmp_path)  # the same command, run to its end
    assert second.returncode == 0, second.stderr
    resumed = second.stdout.strip().splitlines()[-1]
    assert f"{line - 1} rows up to line {line} skipped" in resumed
    created_again = int(resumed.split(" rows read: ")[1].split(" stored new")[0])
    present_again = int(resumed.split(" stored new, ")[1].split(" already present")[0])
    # Past the checkpoint, each row the first run stored is found present (and those of its
    # unconfirmed batches that landed), no other.
    stored_past = numbers["stored new"] - (line - 1)
    assert stored_past <= present_again <= stored_past + unconfirmed
    # Nothing lost, nothing twice: the two runs created exactly the file's rows, the first run's
    # own count of them short by its unconfirmed batches that landed (through the trickle, a
    # batch the run gave up on at the Ctrl-C often still reaches the emulator: seen, 500 rows).
    landed = present_again - stored_past
    assert numbers["stored new"] + landed + created_again == total
    counted = tsstore(emulator, database_id, "count", cwd=tmp_path)
    assert counted.stdout.strip() == str(total), counted.stderr
