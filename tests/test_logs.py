"""The package's log records: one ``tsstore`` hierarchy, quiet until the application says
otherwise, no print in the library, the spans' field names on the records, and the
command's ``--log-level`` / ``TSSTORE_LOG_LEVEL`` showing them on stderr only."""

from __future__ import annotations

import ast
import datetime as dt
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gexc

from tests.cli import tsstore
from tsstore import SeriesSpec, TimeSeriesStore
from tsstore.cli.logs import LEVELS, FieldsFormatter
from tsstore.ingest import ingest_file
from tsstore.logs import (
    DB_COLLECTION,
    DB_OPERATION,
    ERROR_TYPE,
    FAULTS_RETRIED,
    TICKS_REJECTED,
    TICKS_WRITTEN,
    fields_of,
)
from tsstore.read.cost import ReadStats
from tsstore.write.prepare import PreparedDoc
from tsstore.write.ramp import RampLimiter
from tsstore.write.sender import BulkSender

PACKAGE = Path(__file__).resolve().parent.parent / "tsstore"
#: The command's own output is the CLI's to write: everything else is the library.
CLI = PACKAGE / "cli"
#: What a read costs, as ReadStats counts it and the spans name it (``tsstore.<name>``).
COSTS = ("chunks", "queries", "round_trips", "documents", "billed_reads", "index_reads", "refills", "snapshot_reads")
T0 = dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.timezone.utc)


def modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(PACKAGE.rglob("*.py"))]


def calls(tree: ast.Module) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_every_logger_the_package_makes_is_named_by_its_module_under_tsstore() -> None:
    """A module's logger is ``getLogger(__name__)``; a name of the package's spelled out is
    ``tsstore`` itself, where the handlers go (another package's is the CLI quieting it)."""
    loggers = []
    for path, tree in modules():
        for node in tree.body:  # the module's own loggers
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and "getLogger" in ast.unparse(node):
                loggers.append(f"{path.relative_to(PACKAGE)}: {ast.unparse(node.value)}")
        for call in calls(tree):
            if isinstance(call.func, ast.Attribute) and call.func.attr == "getLogger":
                [arg] = call.args
                spelled = arg.value if isinstance(arg, ast.Constant) else ""
                assert spelled == "tsstore" or not spelled.startswith("tsstore"), f"{path}:{call.lineno}: {spelled}"
    assert len(loggers) > 10 and [m for m in loggers if not m.endswith("getLogger(__name__)")] == []


def test_the_library_prints_nothing_and_writes_to_no_standard_stream() -> None:
    found = []
    for path, tree in modules():
        if path.is_relative_to(CLI):
            continue
        for call in calls(tree):
            func = call.func
            if isinstance(func, ast.Name) and func.id == "print":
                found.append(f"{path}:{call.lineno}: print")
            if isinstance(func, ast.Attribute) and func.attr == "write" and ast.unparse(func.value) in (
                "sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__"
            ):  # fmt: skip
                found.append(f"{path}:{call.lineno}: {ast.unparse(func)}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [f"{path}:{node.lineno}: imports click" for name in names if name.split(".")[0] == "click"]
    assert found == []


#: A fault tried again by the library, with logging as Python starts: records are made (a
#: record factory lists them on stdout) and nothing reaches stderr.
QUIET = textwrap.dedent("""
    import json, logging
    from google.api_core import exceptions as gexc
    from tsstore import faults

    made = []
    plain = logging.getLogRecordFactory()
    def factory(*args, **kwargs):
        record = plain(*args, **kwargs)
        made.append(record)
        return record
    logging.setLogRecordFactory(factory)

    answers = iter([gexc.ServiceUnavailable("Stream removed"), 42])
    def call():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer
    assert faults.call(call, what="reading a document", sleep=lambda seconds: None) == 42
    print(json.dumps([[r.name, r.levelname, r.getMessage(), r.__dict__.get("error.type")] for r in made]))
""")


def test_a_fault_tried_again_is_a_warning_record_and_nothing_on_stderr_until_the_application_says() -> None:
    ran = subprocess.run([sys.executable, "-c", QUIET], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stderr == ""
    [[name, level, message, error]] = json.loads(ran.stdout)
    assert (name, level, error) == ("tsstore.faults", "WARNING", "UNAVAILABLE")
    assert message.startswith("reading a document: UNAVAILABLE: Stream removed; trying again in ")


def doc(index: int) -> PreparedDoc:
    return PreparedDoc(index, f"id{index}", {"i": index}, 100)


def test_writes_sent_again_and_the_throttle_are_warnings_with_the_spans_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request cut without an answer, then writes refused as overload: each is sent again,
    and each time a warning says how many and why, as the spans say it."""
    answers = iter(["cut", "busy"])

    def send(writes: list[Any]) -> list[tuple[int, str]]:
        match next(answers, "ok"):
            case "cut":
                raise gexc.ServiceUnavailable("Socket closed")
            case "busy":
                return [(8, "too much")] * len(writes)  # RESOURCE_EXHAUSTED, each write
        return [(0, "")] * len(writes)

    caplog.set_level(logging.INFO, logger="tsstore")
    sender = BulkSender(send=send, lookup=lambda ids: {}, pace=RampLimiter(ceiling=500), max_attempts=3)
    sender.send_all([doc(i) for i in range(7)])
    assert sender.written == 7 and not sender.failures
    said = [(r.name, r.levelname, fields_of(r)) for r in caplog.records]
    assert ("tsstore.write.sender", "WARNING", {ERROR_TYPE: "UNAVAILABLE", FAULTS_RETRIED: 7}) in said
    assert ("tsstore.write.sender", "WARNING", {ERROR_TYPE: "RESOURCE_EXHAUSTED", FAULTS_RETRIED: 7}) in said
    throttled = [r.getMessage() for r in caplog.records if r.name == "tsstore.write.ramp" and r.levelname == "WARNING"]
    assert len(throttled) == 1 and throttled[0].startswith("Firestore refuses writes as overload (7 so far)")


def test_a_read_verb_says_what_it_found_and_what_it_cost_in_the_spans_words(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tsstore")
    store = TimeSeriesStore.memory(SeriesSpec("quotes", shards=["a", "b"], key_fields=["symbol"]))
    store.write([{"symbol": "AAA", "timestamp": T0 + dt.timedelta(seconds=i), "bid": i} for i in range(5)])
    page, cost = store.query(limit=2), ReadStats()
    assert store.count(stats=cost) == 5
    told = {r.getMessage().split(";")[0]: fields_of(r) for r in caplog.records if r.name == "tsstore.verbs.reading"}
    for verb, stats in (("query of 'quotes': 2 tick(s)", page.stats), ("count of 'quotes': 5 tick(s)", cost)):
        fields = told[verb]
        assert fields.pop(DB_COLLECTION) == "quotes" and fields.pop(DB_OPERATION) == verb.split()[0]
        assert fields == {f"tsstore.{name}": getattr(stats, name) for name in COSTS} and fields["tsstore.queries"]


def test_an_ingest_with_rows_rejected_is_a_warning_saying_what_it_stored_and_rejected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tsstore")
    ticks = tmp_path / "ticks.csv"
    ticks.write_text("timestamp,symbol,bid\n2024-05-01T09:30:00Z,AAA,1\nsoon,AAA,2\n2024-05-01T09:30:01Z,AAA,3\n")
    store = TimeSeriesStore.memory(SeriesSpec("quotes", shards=["a", "b"], key_fields=["symbol"]))
    assert ingest_file(store, ticks).rejected == 1
    [told] = [r for r in caplog.records if r.name == "tsstore.ingest.run"]
    assert told.levelname == "WARNING" and told.getMessage().startswith(f"ingest of {ticks}: 3 rows read: 2 stored new")
    assert fields_of(told) == {DB_COLLECTION: "quotes", DB_OPERATION: "ingest", TICKS_WRITTEN: 2, TICKS_REJECTED: 1}


def test_a_line_holds_the_level_the_logger_the_message_and_the_fields_quoted_where_needed() -> None:
    record = logging.LogRecord("tsstore.write.job", logging.INFO, __file__, 1, "wrote %d", (3,), None)
    record.__dict__.update({"db.collection.name": "ticks", TICKS_WRITTEN: 3, "error.type": "a b"})
    line = FieldsFormatter().format(record)
    assert line == 'INFO tsstore.write.job: wrote 3 | db.collection.name=ticks tsstore.ticks.written=3 error.type="a b"'
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        failed = logging.LogRecord("tsstore.console.app", logging.ERROR, __file__, 1, "it failed", (), sys.exc_info())
    assert FieldsFormatter().format(failed) == "ERROR tsstore.console.app: it failed (ValueError: bad value)"


def test_the_level_shows_the_records_on_stderr_and_nothing_of_them_on_stdout(tmp_path: Path) -> None:
    package = logging.getLogger("tsstore")
    before = (package.level, list(package.handlers))
    shown = tsstore("--log-level", "debug", "demo", "--memory", "--ticks", "20", "--no-chart", cwd=tmp_path)
    assert (package.level, package.handlers) == before  # the command's logging ends with it
    assert shown.returncode == 0, shown.stderr
    lines = shown.stderr.replace("\r", "\n").splitlines()
    asked = [line for line in lines if line.startswith("DEBUG tsstore.backend: ")]
    assert asked and all("| db.system.name=tsstore.memory tsstore.mode=memory db.collection.name=instruments "
                         "db.operation.name=" in line for line in asked)  # fmt: skip
    written = "INFO tsstore.write.job: write of 'instruments': 23 document(s) written | db.collection.name=instruments"
    assert any(line.startswith(written) and "tsstore.ticks.written=23 tsstore.ticks.rejected=0" in line
               for line in lines)  # fmt: skip
    assert "tsstore." not in shown.stdout and "wrote 23 ticks" in shown.stdout
    by_env = tsstore("demo", "--memory", "--ticks", "20", "--no-chart", cwd=tmp_path, env={"TSSTORE_LOG_LEVEL": "INFO"})
    assert by_env.returncode == 0 and written in by_env.stderr and "DEBUG" not in by_env.stderr
    quiet = tsstore("demo", "--memory", "--ticks", "20", "--no-chart", cwd=tmp_path)
    assert quiet.returncode == 0 and "tsstore.write.job" not in quiet.stderr  # WARNING by default


def test_the_option_wins_over_the_environment_and_json_output_stays_json(
    emulator: Any, database_id: str, tmp_path: Path
) -> None:
    env = {"FIRESTORE_EMULATOR_HOST": emulator.address, "TSSTORE_HOME": str(tmp_path / "home")}
    wrote = tsstore("demo", "--ticks", "7", "--no-chart", "--database", database_id, cwd=tmp_path, env=env)
    assert wrote.returncode == 0, wrote.stderr
    env["TSSTORE_LOG_LEVEL"] = "error"
    counted = tsstore("--log-level", "DEBUG", "count", "--collection", "instruments", "--database", database_id,
                      "--format", "json", cwd=tmp_path, env=env)  # fmt: skip
    assert counted.returncode == 0 and json.loads(counted.stdout) == {"count": 10}
    asked = "DEBUG tsstore.backend: counting ticks | db.system.name=gcp.firestore tsstore.mode=native " \
            "db.collection.name=instruments db.operation.name=Count"  # fmt: skip
    assert asked in counted.stderr.splitlines()


@pytest.mark.parametrize(
    ("args", "env"), [(("--log-level", "loud"), {}), ((), {"TSSTORE_LOG_LEVEL": "loud"})], ids=["option", "environment"]
)
def test_a_level_it_does_not_know_is_refused_by_name_with_the_levels_it_knows(
    args: tuple[str, ...], env: dict[str, str]
) -> None:
    refused = tsstore(*args, "emulator", "status", env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [said] = [line for line in refused.stderr.splitlines() if line.startswith("Error: ")]
    assert "'loud' is not one of" in said and "TSSTORE_LOG_LEVEL" in said
    assert all(f"'{level.lower()}'" in said for level in LEVELS)
