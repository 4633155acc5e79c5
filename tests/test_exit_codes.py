"""The exit-code census (issue 58): every way a command refuses ends with the code of its
kind. 1, a runtime failure: the command was right, but Firestore, the files or what is
stored do not allow it now (a ``StateError`` from the library: a counter not created yet, a
roll-up or its source that has not run, a range past what a roll-up has stored, a roll-up
record another declaration wrote). 2, a usage error: the command, a value, the declaration
or an input file is wrong, and fixing the command fixes it (a ``UsageError``). Never 0 for
a command that did not do what was asked.

Commands run as ``tests/test_doors.py`` runs them (in this process, on the emulator, each
test with a database of its own); the state a case needs is written with the client first.
"""

from __future__ import annotations

import datetime as dt
import os
import pty
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore

from tests.cli import one_error, tsstore
from tests.shared import PLAIN
from tsstore import errors
from tsstore.cli.exits import FAILED, USAGE, failure_of
from tsstore.late import WATERMARKS

UTC = dt.timezone.utc
T = dt.datetime(2019, 1, 2, 9, tzinfo=UTC)

LAYERS = PLAIN + """
[[rollup]]
source = "plain"
interval = "1min"
by = "symbol"
price = "price.micros"

[[rollup]]
source = "plain_1min"
interval = "1h"
"""

#: The demo's roll-up record as a run of it writes it, its watermark at ``T``.
DEMO_RECORD = {"source": "instruments", "interval_seconds": 60.0, "watermark": T}


def demo_record(**changed: Any) -> Callable[[firestore.Client], None]:
    def write(client: firestore.Client) -> None:
        client.collection(WATERMARKS).document("instruments_1min").set({**DEMO_RECORD, **changed})

    return write


def counter_document(data: dict[str, Any]) -> Callable[[firestore.Client], None]:
    def write(client: firestore.Client) -> None:
        client.document("counters/bad").set(data)

    return write


def nothing(client: firestore.Client) -> None:
    """A database as a new project has it: nothing stored."""


#: (what it is, the state written first, the arguments, the exit code, words of the one
#: ``Error:`` line). "{tmp}" is the test's folder (the files below are in it).
CASES: list[tuple[str, Callable[[firestore.Client], None], tuple[str, ...], int, str]] = [
    # what is stored does not allow it now: 1 (each exited 2, or 0, before)
    ("counter get, no counter", nothing, ("counter", "get", "counters/none"), FAILED,
     "counter 'counters/none' does not exist; create it first"),
    ("counter incr, no counter", nothing, ("counter", "incr", "counters/none"), FAILED, "does not exist"),
    ("counter rollup, no counter", nothing, ("counter", "rollup", "counters/none"), FAILED, "does not exist"),
    ("counter grow, no counter", nothing, ("counter", "grow", "counters/none", "--shards", "4"), FAILED,
     "does not exist"),
    ("counter incr, a counter document without a shard count", counter_document({"shards": "x"}),
     ("counter", "incr", "counters/bad"), FAILED, "counter 'counters/bad' has no valid 'shards' field (found 'x')"),
    ("rollup --verify before the roll-up ran", nothing, ("rollup", "--verify"), FAILED,
     "roll-up 'instruments_1min' has not run yet: nothing stored to verify; run it first"),
    ("bars --combine before the roll-up ran", nothing,
     ("bars", "--collection", "instruments_1min", "--combine", "--interval", "1h"), FAILED,
     "roll-up 'instruments_1min' has not run yet: its collection 'instruments_1min' holds no bars to combine"),
    ("rollup of a roll-up whose source never ran", nothing,
     ("rollup", "--spec", "{tmp}/layers.toml", "--rollup", "plain_1min_1h"), FAILED,
     "nothing rolled up: its source, roll-up 'plain_1min', has not run yet; run it first "
     "(tsstore rollup --rollup plain_1min), then this one"),
    ("rollup over a record another declaration wrote", demo_record(interval_seconds=300.0), ("rollup",), FAILED,
     "the watermark of roll-up 'instruments_1min' was written for source 'instruments' every 300.0 s"),
    ("bars --combine on a roll-up record without a watermark", demo_record(watermark=None),
     ("bars", "--collection", "instruments_1min", "--combine", "--interval", "1h"), FAILED,
     "roll-up 'instruments_1min' has stored no bars yet: run it first (tsstore rollup)"),
    ("bars --combine past the roll-up's watermark", demo_record(),
     ("bars", "--collection", "instruments_1min", "--combine", "--interval", "1h", "--end", "2019-01-03T00:00:00Z"),
     FAILED, "end 2019-01-03T00:00:00Z is after the watermark of roll-up 'instruments_1min'"),
    ("rollup --verify --since past the roll-up's watermark", demo_record(),
     ("rollup", "--verify", "--since", "2019-01-03T00:00:00Z"), FAILED,
     "is not before the watermark of roll-up 'instruments_1min' (2019-01-02T09:00:00+00:00): nothing rolled up "
     "there to verify yet"),
    # a wrong command, value, declaration or input file: 2 (each exited 1 before)
    ("ingest --time-column the header lacks", nothing, ("ingest", "{tmp}/ticks.csv", "--time-column", "ts"), USAGE,
     "the header has no 'ts' column"),
    ("ingest a file without a time column", nothing, ("ingest", "{tmp}/notime.csv"), USAGE,
     "the header has no 'timestamp' column (found ['symbol', 'when'])"),
    ("ingest an empty file", nothing, ("ingest", "{tmp}/empty.csv"), USAGE,
     "empty.csv is empty (0 bytes: no header, no rows); there is nothing to ingest"),
    ("ingest a header naming a column twice", nothing, ("ingest", "{tmp}/twice.csv"), USAGE,
     "the header names ['symbol'] more than once"),
    ("ingest into a series without key_fields", nothing, ("ingest", "{tmp}/ticks.csv", "--spec", "{tmp}/nokey.toml"),
     USAGE, "the spec for 'nokey' has no key_fields"),
    # the neighbours that stay usage errors, though they depend on what is stored
    ("counter grow to fewer shards than stored", counter_document({"shards": 4}),
     ("counter", "grow", "counters/bad", "--shards", "2"), USAGE,
     "counter 'counters/bad' has 4 shards; shrinking to 2 is not supported"),
    ("bars --combine on a series no roll-up stores", nothing,
     ("bars", "--spec", "{tmp}/plain.toml", "--interval", "1h", "--combine"), USAGE,
     "--combine reads a roll-up's bars, and 'plain' has no roll-up record"),
]


#: The files the cases name, in the test's folder.
FILES = {
    "plain.toml": PLAIN,
    "layers.toml": LAYERS,
    "nokey.toml": '[[series]]\ncollection = "nokey"\n',
    "ticks.csv": "symbol,timestamp\nAAA,2019-01-02T09:00:00Z\n",
    "notime.csv": "symbol,when\nAAA,2019-01-02T09:00:00Z\n",
    "twice.csv": "symbol,timestamp,symbol\nAAA,2019-01-02T09:00:00Z,BBB\n",
    "empty.csv": "",
}


@pytest.fixture
def census(emulator: Any, database_id: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The test's folder with :data:`FILES`, the commands' environment (its own database on
    the emulator) and a client of that database."""
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    client = emulator.client(database=database_id)
    yield {"tmp": tmp_path, "client": client,
           "env": {"FIRESTORE_EMULATOR_HOST": emulator.address, "TSSTORE_DATABASE": database_id, "TSSTORE_SPEC": None}}
    client.close()


@pytest.mark.parametrize(("what", "stored", "args", "code", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_refusal_exits_with_the_code_of_its_kind(
    census: dict[str, Any], what: str, stored: Callable[[firestore.Client], None], args: tuple[str, ...], code: int,
    words: str,
) -> None:  # fmt: skip
    stored(census["client"])
    args = tuple(a.replace("{tmp}", str(census["tmp"])) for a in args)
    ran = tsstore(*args, env=census["env"], cwd=census["tmp"])
    assert ran.returncode == code, (what, ran.returncode, ran.stdout, ran.stderr)
    assert words in one_error(ran)


def test_bars_an_older_tsstore_stored_are_a_runtime_failure_until_rolled_up_again(census: dict[str, Any]) -> None:
    """An average from roll-up bars stored without their price sums (by a tsstore before
    them): the command is right, the stored bars do not allow it until the roll-up runs again
    over them (1, and the line says so); after that run it answers (0)."""
    (census["tmp"] / "priced.csv").write_text(
        "symbol,timestamp,price.micros\n" + "".join(f"AAA,2019-01-02T09:0{m}:00Z,{10 + m}\n" for m in range(6))
    )
    spec = ("--spec", "layers.toml")
    span = ("--start", "2019-01-02T09:00:00Z", "--end", "2019-01-02T09:05:00Z")

    def run(*args: str) -> Any:
        return tsstore(*args, env=census["env"], cwd=census["tmp"])

    assert run("ingest", "priced.csv", *spec, "--collection", "plain").returncode == 0
    rollup = ("rollup", *spec, "--rollup", "plain_1min", "--since", "2019-01-02T09:00:00Z")
    assert run(*rollup, "--until", "2019-01-02T09:05:00Z").returncode == 0
    for bar in census["client"].collection("plain_1min").stream():
        bar.reference.update({"sum": firestore.DELETE_FIELD, "m2": firestore.DELETE_FIELD})
    average = ("aggregate", *spec, "--collection", "plain", "--rollup", "plain_1min", "--avg", "price.micros", *span)
    ran = run(*average)
    assert ran.returncode == FAILED, (ran.stdout, ran.stderr)
    assert "roll-up 'plain_1min' holds a bar at 2019-01-02T09:00:00+00:00 without its price sums (stored by an " \
           "older tsstore); run it again from before that time" in one_error(ran)  # fmt: skip
    assert run(*rollup, "--until", "2019-01-02T09:05:00Z").returncode == 0  # as the line says: stored again
    again = run(*average, "--format", "json")
    assert again.returncode == 0 and '"avg(price.micros)": 12.0' in again.stdout, (again.stdout, again.stderr)


def test_a_console_port_in_use_is_a_runtime_failure(census: dict[str, Any]) -> None:
    """The address is right but taken now: 1, and the line says what to do; a host that is not
    an address stays a usage error."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        ran = tsstore("console", "--no-browser", "--port", port, env=census["env"], cwd=census["tmp"])
    assert ran.returncode == FAILED, (ran.stdout, ran.stderr)
    assert f"cannot serve the console on 127.0.0.1:{port}" in one_error(ran) and "another --port" in ran.stderr


def test_a_package_not_installed_is_a_runtime_failure(census: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--mode datastore`` without google-cloud-datastore: the command is right and the
    machine lacks a package (1, as for charts without matplotlib), not a usage error."""
    import google.cloud

    monkeypatch.setitem(sys.modules, "google.cloud.datastore", None)  # its import fails, as when not installed
    monkeypatch.delattr(google.cloud, "datastore", raising=False)
    ran = tsstore("count", "--mode", "datastore", "--project", "my-project", "--spec", "plain.toml",
                  env={"FIRESTORE_EMULATOR_HOST": None, "DATASTORE_EMULATOR_HOST": None}, cwd=census["tmp"])  # fmt: skip
    assert ran.returncode == FAILED, (ran.stdout, ran.stderr)
    assert one_error(ran) == "Error: Datastore mode needs google-cloud-datastore: pip install 'tsstore[datastore]'"


def test_arrow_on_a_terminal_is_a_usage_error(census: dict[str, Any]) -> None:
    """``--format arrow`` with stdout on a terminal and no ``-o``: the command is wrong (2),
    said before a byte is written. A terminal needs a process of its own."""
    parent, child = pty.openpty()
    try:
        env = {**os.environ, **{k: v for k, v in census["env"].items() if v is not None}}
        command = [sys.executable, "-m", "tsstore", "query", "--limit", "5", "--format", "arrow"]
        done = subprocess.run(command, env=env, cwd=census["tmp"], stdout=child, stderr=subprocess.PIPE, text=True,
                              timeout=120)  # fmt: skip
    finally:
        os.close(child)
        os.close(parent)
    assert done.returncode == USAGE, done.stderr
    assert "Error: --format arrow writes binary: give --output FILE or pipe it on" in done.stderr


#: Each error class the library raises, and the exit code a command ends with on it.
CLASSES: list[tuple[BaseException, int]] = [
    (errors.StateError("x"), FAILED),
    (errors.RetentionError("x", limit=None, rollups=["r"]), FAILED),
    (errors.FaultError("x"), FAILED),
    (errors.WriteError([errors.WriteFailure(0, "id", 10, "x")], written=0), FAILED),
    (errors.SnapshotExpiredError("x", returned=0, cursor=None), FAILED),
    (errors.SchemaError("x"), FAILED),
    (errors.LiveError("x"), FAILED),
    (errors.PlotError("x"), FAILED),
    (errors.EmulatorError("x"), FAILED),
    (errors.UsageError("x"), USAGE),
    (errors.SpecError("x"), USAGE),
    (errors.ConfigError("x"), USAGE),
    (errors.QueryError("x"), USAGE),
    (errors.ModeError("x"), USAGE),
    (errors.CounterError("x"), USAGE),
    (errors.CursorError("x"), USAGE),
    (errors.OptionError("v", ["a"], ["b"]), USAGE),
    (errors.IngestError("x"), USAGE),
]


@pytest.mark.parametrize(("error", "code"), CLASSES, ids=[type(c[0]).__name__ for c in CLASSES])
def test_each_error_class_has_the_exit_code_of_its_kind(error: BaseException, code: int) -> None:
    failure = failure_of(error)
    assert failure is not None and failure.exit_code == code


def test_a_state_error_is_a_runtime_failure_not_a_value_error() -> None:
    """What is stored is not a bad value: ``except ValueError`` does not take a StateError
    (nor a RetentionError, one of them), ``except TsstoreError`` takes every one."""
    for state in (errors.StateError("x"), errors.RetentionError("x", limit=None, rollups=[])):
        assert isinstance(state, errors.TsstoreError) and not isinstance(state, (ValueError, errors.UsageError))
    assert isinstance(errors.IngestError("x"), errors.UsageError)
