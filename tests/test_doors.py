"""The bad-input census: every door a user can knock on with a wrong value answers with one
short message that names the value, the right exit code, and no traceback.

CLI cases run through click's runner in this process (``tests/cli.py``): an exception that
escapes a command fails the test with its traceback, so "no traceback" is checked by the
test passing. Library cases call the Python API. Exit codes: 2 for usage errors, 1 for
runtime failures (see ``tsstore.cli.exits``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
import pyarrow.ipc
import pytest
from google.cloud import firestore

from tests.cli import Ran, one_error, subcommands, tsstore
from tests.shared import PLAIN, mode_client, stored_ids
from tsstore import (
    AsyncTimeSeriesStore,
    ConfigError,
    CursorError,
    OptionError,
    QueryError,
    QueryShape,
    RecordError,
    SeriesSpec,
    SpecError,
    TimeSeriesStore,
)
from tsstore.analytics.rollup import Rollup
from tsstore.counters import ShardedCounter
from tsstore.errors import CounterError, EmulatorError
from tsstore.rules.file import render_rules
from tsstore.write.options import WriteOptions

UTC = dt.timezone.utc
T = "2019-01-02T09:00:00Z"

#: (arguments, exit code, words the one-line message must hold). "{tmp}" is the test's
#: folder; "plain.toml" (``PLAIN``) declares no roll-up and no retired shard values.
CLI_CASES: list[tuple[tuple[str, ...], int, str]] = [
    (("query", "--limit", "99999999999999999999"), 2, "99999999999999999999"),
    (("query", "--limit", "0"), 2, "0 is not in the range"),
    (("query", "--limit", "ten"), 2, "'ten' is not a valid integer"),
    (("query", "--start", "2018-12-31T12:00:00"), 2, "--start 2018-12-31T12:00:00 has no UTC offset"),
    (("query", "--end", "yesterday"), 2, "--end 'yesterday' is not a time"),
    (("query", "--naive", "Mars/Olympus", "--start", "2018-12-31T12:00:00"), 2, "--naive 'Mars/Olympus'"),
    (("query", "--start", "2019-13-40"), 2, "--start '2019-13-40' is not a time"),
    (("query", "--where", "symbolAAA"), 2, "--where 'symbolAAA' is not FIELD=VALUE"),
    (("query", "--where", "=AAA"), 2, "--where '=AAA' is not FIELD=VALUE"),
    (("query", "--where", "shard=x"), 2, "'shard' is tsstore's shard field"),
    (("query", "--where", "price.micros=abc"), 2, "'abc' is not a finite number"),
    (("query", "--where", "nosuch=1"), 2, "nosuch"),
    (("query", "--columns", "nosuch"), 2, "--columns nosuch: not declared"),
    (("query", "--format", "csv", "-o", "{tmp}/missing/dir/x.csv"), 2, "missing/dir does not exist"),
    (("query", "--format", "csv", "-o", "{tmp}"), 2, "is a folder"),
    (("query", "--format", "parquet"), 2, "--format parquet needs --output FILE"),
    (("query", "--format", "xml"), 2, "'xml' is not one of"),
    (("query", "--plot", "{tmp}/chart.txt"), 2, "give a .png, .svg, .pdf file"),
    (("query", "--plot", "{tmp}/missing/chart.png"), 2, "missing does not exist"),
    (("query", "--direction", "sideways"), 2, "'sideways' is not one of"),
    (("query", "--limit", "5", "--cursor", "garbage"), 2, "cursor"),
    (("query", "--cursor", "garbage"), 2, "--cursor continues a page: give --limit too"),
    (("query", "--spec", "{tmp}/nosuch.toml"), 2, "nosuch.toml"),
    (("query", "--spec", "tsstore.demo:NOPE"), 2, "NOPE"),
    (("query", "--collection", "nosuch"), 2, "declares no series 'nosuch'"),
    (("query", "--where", "exchange=X", "--where", "symbol=AAA"), 2, "exchange"),
    (("count", "--limit", "5"), 2, "No such option '--limit'"),
    (("count", "--start", "2019-01-02T10:00:00Z", "--end", "2019-01-02T09:00:00Z"), 2, "start"),
    (("explain", "--where", "instrumentType=etf", "--where", "exchange=X"), 2, "index"),
    (("query", "--where", "volume~3"), 2, "is not FIELD=VALUE or FIELD<op>VALUE"),
    (("query", "--where", "exchange=X", "--where", "volume>=many"), 2, "volume is declared Int64, and 'many' is not a finite number"),
    (("explain", "--where", "symbol>=A"), 2, "range condition on ['symbol']: no query shape declares it"),
    (("explain", "--where", "volume>=5"), 2, "query shape [(time range)] ranges [volume] is not declared"),
    (("bars", "--interval", "7"), 2, "interval '7' has no unit"),
    (("bars", "--interval", "-1min"), 2, "interval"),
    (("bars", "--interval", "soon"), 2, "soon"),
    (("bars", "--interval", "1min", "--plot", "{tmp}/bars.txt"), 2, "bars.txt"),
    (("rollup", "--spec", "{tmp}/plain.toml"), 2, "declares no roll-up of 'plain'"),
    (("rollup", "--rollup", "nosuch"), 2, "declares no roll-up 'nosuch'"),
    (("rollup", "--since", "2019-01-02T09:00"), 2, "--since 2019-01-02T09:00 has no UTC offset"),
    (("latest",), 2, "Missing argument 'VALUES...'"),
    (("latest", "--by", "nosuch", "AAA"), 2, "nosuch"),
    (("latest", "--by", "symbol", "AAA", "--before", "noon"), 2, "--before 'noon' is not a time"),
    (("latest", "--by", "symbol", "AAA", "--columns", "nosuch"), 2, "--columns nosuch"),
    (("purge", "--before", T, "--start", T), 2, "either before (everything older) or start/end"),
    (("purge", "--yes"), 2, "give --before T, or --start T and/or --end T"),
    (("seal",), 2, "collection 'instruments' declares no cold tier; declare one"),
    (("count", "--database", "bad_db_name!"), 2, "'bad_db_name!' is not a database id"),
    (("purge", "--before", "2019-01-02T00:00:00"), 2, "--before 2019-01-02T00:00:00 has no UTC offset"),
    (("aggregate", "--sum", "nosuch"), 2, "nosuch"),
    (("aggregate", "--avg", "symbol"), 2, "symbol"),
    (("counter", "create", "counters/c", "--shards", "100000000"), 2, "100000000 is not in the range"),
    (("counter", "create", "counters/c", "--shards", "0"), 2, "0 is not in the range"),
    (("counter", "create", "badpath", "--shards", "2"), 2, "'badpath'"),
    (("counter", "incr", "counters/c", "--by", "99999999999999999999"), 2, "99999999999999999999"),
    (("counter", "grow", "counters/c", "--shards", "-1"), 2, "-1 is not in the range"),
    (("tail", "--lateness", "soon"), 2, "soon"),
    (("tail", "--since", "then"), 2, "--since 'then' is not a time"),
    (("watch", "--limit", "0"), 2, "0 is not in the range"),
    (("shards", "--since", "2019-01-02 09:00"), 2, "has no UTC offset"),
    (("reshard",), 2, "declares no retired shard values"),
    (("reshard", "--max-rate", "0"), 2, "0 is not in the range"),
    (("capacity", "--writes-per-second", "100", "--retention", "forever"), 2, "forever"),
    (("capacity",), 2, "Missing option '--writes-per-second'"),
    (("indexes",), 2, "which declaration? give --spec"),
    (("indexes", "--spec", "{tmp}/nosuch.toml"), 2, "nosuch.toml"),
    (("ingest", "{tmp}/nosuch.csv"), 2, "nosuch.csv"),
    (("ingest", "{tmp}/ticks.txt"), 2, "cannot tell the format"),
    (("ingest", "{tmp}/ticks.csv", "--max-field-bytes", "0"), 2, "0 is not in the range"),
    (("ingest", "{tmp}/ticks.csv", "--naive", "Mars/Olympus"), 2, "Mars/Olympus"),
    (("ingest", "{tmp}/ticks.csv", "--on-duplicate", "merge"), 2, "'merge' is not one of"),
    (("backfill", "{tmp}/ticks.csv", "--wokers", "40"), 2, "unknown option(s) --wokers"),
    (("export", "--to", "{tmp}/out", "--region", "eu", "--wokers", "4"), 2, "unknown option(s) --wokers"),
    (("shards", "--check", "--collection", "instruments_1min"), 1, "shards --check"),
    (("emulator", "restart"), 2, "No such command 'restart'"),
    # fields a verb reads are the declaration's, and defaults never the demo's field names
    (("bars", "--spec", "{tmp}/plain.toml", "--interval", "1h"), 2,
     "which field is the price of 'plain'? give --price FIELD (numeric fields declared: price.micros)"),
    (("aligned", "--spec", "{tmp}/plain.toml", "--interval", "1h", "--by", "symbol"), 2, "give --price FIELD"),
    (("bars", "--interval", "1h", "--by", "nosuch"), 2, "bars: by field 'nosuch' is not a field of 'instruments'"),
    (("bars", "--interval", "1h", "--price", "nosuch"), 2, "bars: --price 'nosuch' is not a field of 'instruments'"),
    (("bars", "--interval", "1h", "--volume", "size"), 2, "bars: --volume 'size' is not a field of 'instruments'"),
    (("aligned", "--interval", "1h", "--by", "nosuch"), 2, "by field 'nosuch' is not a field"),
    (("asof", "--by", "nosuch"), 2, "asof: by field 'nosuch' is not a field of 'instruments'"),
    (("bars", "--spec", "{tmp}/plain.toml", "--interval", "1h", "--combine"), 2,
     "--combine reads a roll-up's bars, and 'plain' has no roll-up record (tsstore_rollups/plain): run its roll-up first (tsstore rollup), or make the bars from the ticks with --price"),
    (("bars", "--interval", "7min", "--origin", "09:30"), 2,
     "origin '09:30' is a time of day, which puts edges at that time on every day: the interval must divide 24h"),
    (("bars", "--interval", "1h", "--origin", "soon"), 2, "--origin 'soon' is not a time"),
    (("count", "--where", "volume>=nan", "--where", "exchange=X"), 2, "'nan' is not a finite number"),
    (("count", "--where", "volume>=inf", "--where", "exchange=X"), 2, "'inf' is not a finite number"),
    # no write without naming its target: the demo's declaration is the local store's only
    (("ingest", "{tmp}/ticks.csv", "--project", "my-project"), 2,
     "which declaration? give --spec (or TSSTORE_SPEC): without one this command would write to the demo's "
     "collection 'instruments' in project 'my-project'"),
    (("purge", "--before", T, "--yes", "--project", "my-project"), 2, "which declaration? give --spec"),
    (("rollup", "--project", "my-project"), 2, "which declaration? give --spec"),
    (("backfill", "{tmp}/ticks.csv", "--project", "my-project"), 2, "which declaration? give --spec"),
    (("count", "--project", "My_Project"), 2, "'My_Project' is not a Google Cloud project id"),
    (("count", "--spec", "{tmp}/two.toml"), 2, "declares collection 't' twice; declare each collection once"),
    (("rollup", "--spec", "{tmp}/late.toml"), 2, "roll-up source 't_1h' is not a series or roll-up declared above it"),
    (("rules", "--spec", "{tmp}/plain.toml", "--file", "{tmp}/plain.toml/sub/firestore.rules"), 2,
     "plain.toml is a file, not a folder"),
    (("rollup", "--rollup", "instruments_1min", "--since", "2019-01-02T10:00:00Z", "--until", "2019-01-02T09:00:00Z"),
     2, "--since 2019-01-02T10:00:00+00:00 is not before --until 2019-01-02T09:00:00+00:00"),
    (("ingest", "{tmp}/ticks.csv", "--time-column", "ts"), 2, "the header has no 'ts' column"),
    (("ingest", "{tmp}/ticks.csv", "--time-unit", "min"), 2, "'min' is not one of"),
    (("ingest", "{tmp}/notime.csv"), 2, "the header has no 'timestamp' column (found ['symbol', 'when']); name the "
                                        "time column with --time-column"),
    # one duration grammar: a number needs its unit, and a duration is whole microseconds
    (("asof", "--tolerance", "5"), 2, "--tolerance '5' has no unit: write e.g. '5s', '5min', '5h' or '5D'"),
    (("tail", "--lateness", "5"), 2, "--lateness '5' has no unit"),
    (("capacity", "--writes-per-second", "100", "--retention", "5"), 2, "--retention '5' has no unit"),
    (("capacity", "--writes-per-second", "100", "--retention", "0D"), 2, "--retention '0D' is not positive"),
    (("capacity", "--writes-per-second", "100", "--series", "5", "--tier", "1min=5"), 2,
     "--tier 1min=5: retention '5' has no unit"),
    (("capacity", "--writes-per-second", "100", "--series", "5", "--tier", "1min=0s"), 2,
     "--tier 1min=0s: retention '0s' is not positive"),
    (("bars", "--interval", "1ns"), 2, "--interval '1ns' is not a whole number of microseconds"),
    (("bars", "--interval", "1.5"), 2, "--interval '1.5' has no unit"),
    # CLI messages name options, not Python keywords
    (("bars", "--interval", "1h", "--tz", "Mars/Base"), 2, "--tz 'Mars/Base' is not a time zone"),
    (("aligned", "--interval", "1h", "--by", "symbol", "--value", "volume"), 2,
     "--value 'volume' needs --volume, the volume field"),
    (("aggregate", "--min", "price.micros"), 2, "give --rollup of this series"),
    (("nosuchcommand",), 2, "No such command 'nosuchcommand'"),
    # the census of issue 58: each answered off the convention before
    (("counter", "get", "a/b/c"), 2, "counter path 'a/b/c' has 3 segments"),
    (("counter", "rollup", ""), 2, "counter path '' is empty"),
    (("emulator", "start", "--rules", "{tmp}/nosuch.rules"), 2, "'{tmp}/nosuch.rules' does not exist"),
    (("emulator", "status", "--mode", "weird"), 2, "'weird' is not one of 'native', 'datastore'"),
    (("emulator", "stop", "--mode", "weird"), 2, "'weird' is not one of 'native', 'datastore'"),
    (("console", "--port", "99999"), 2, "99999 is not in the range"),
    (("demo", "--ticks", "-1"), 2, "-1 is not in the range"),
    (("demo", "--chart", "{tmp}/chart.txt"), 2, "chart.txt: give a .png, .svg, .pdf file"),
    (("capacity", "--writes-per-second", "100", "--collection", "instruments"), 2,
     "--collection 'instruments' picks a series of the declaration: give --spec too"),
    (("capacity", "--writes-per-second", "100", "--pages-per-day", "-3"), 2, "-3.0 is not in the range x>=0"),
    (("capacity", "--writes-per-second", "100", "--headroom", "-1"), 2, "--headroom -1.0 is not allowed"),
    (("capacity", "--writes-per-second", "-5"), 2, "--writes-per-second -5.0 is not allowed"),
    (("backfill", "{tmp}/nosuch*.csv"), 2, "'{tmp}/nosuch*.csv' names no file"),
    (("export", "--to", "{tmp}/ticks.csv/part"), 2, "--to {tmp}/ticks.csv/part: {tmp}/ticks.csv is a file, not a folder"),
    (("tail", "--lateness", "-5s"), 2, "--lateness '-5s' is negative; give a duration of 0 or more"),
    (("ingest", "{tmp}/empty.csv"), 2, "empty.csv is empty (0 bytes: no header, no rows); there is nothing to ingest"),
    (("ingest", "{tmp}/ticks.csv", "--rejects", "{tmp}/nodir/r.csv"), 2, "the folder {tmp}/nodir does not exist"),
    (("ingest", "{tmp}/ticks.csv", "--checkpoint", "{tmp}/nodir/c.json"), 2, "the folder {tmp}/nodir does not exist"),
    (("query", "--limit", "5", "--format", "csv", "-o", "{tmp}/x.parquet"), 2,
     "--format csv contradicts --output {tmp}/x.parquet, a .parquet file (parquet); give --format parquet"),
    (("query", "--format", "parquet", "-o", "{tmp}/x.csv"), 2, "--format parquet contradicts --output {tmp}/x.csv"),
    (("query", "--plot", "{tmp}/chart.png", "--plot-y", "nosuch"), 2, "--plot-y nosuch: not declared in 'instruments'"),
    (("query", "--plot", "{tmp}/chart.png", "--plot-by", "nosuch"), 2, "--plot-by nosuch: not declared"),
    (("purge", "--before", T, "--yes", "--where", "nosuch=1"), 2, "nosuch"),
    (("indexes", "--spec", "{tmp}/plain.toml", "--mode", "datastore"), 2,
     "Datastore mode's composite indexes are an index.yaml, not firestore.indexes.json: write it with "
     "`tsstore datastore-indexes"),
    (("rules", "--spec", "{tmp}/plain.toml", "--mode", "datastore"), 2, "Datastore mode has no security rules"),
    (("tail", "--mode", "datastore"), 2, "poll instead: run `tsstore query --mode datastore --direction asc --start T`"),
    (("watch", "--mode", "datastore"), 2, "tsstore watch reads live with Firestore's real-time listeners"),
]


@pytest.fixture
def doors(emulator: Any, database_id: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    (tmp_path / "plain.toml").write_text(PLAIN)
    (tmp_path / "two.toml").write_text('[[series]]\ncollection = "t"\n\n[[series]]\ncollection = "t"\n')
    (tmp_path / "late.toml").write_text('[[series]]\ncollection = "t"\n\n[[rollup]]\nsource = "t_1h"\n'
                                        'interval = "1D"\n\n[[rollup]]\nsource = "t"\ninterval = "1h"\n')  # fmt: skip
    (tmp_path / "ticks.txt").write_text("symbol,timestamp\nAAA,2019-01-02T09:00:00Z\n")
    (tmp_path / "ticks.csv").write_text("symbol,timestamp\nAAA,2019-01-02T09:00:00Z\n")
    (tmp_path / "notime.csv").write_text("symbol,when\nAAA,2019-01-02T09:00:00Z\n")
    (tmp_path / "empty.csv").write_text("")
    # TSSTORE_DATABASE stands for --database on every command.
    env = {"FIRESTORE_EMULATOR_HOST": emulator.address, "TSSTORE_DATABASE": database_id, "TSSTORE_SPEC": None}
    client = emulator.client(database=database_id)
    yield {"env": env, "tmp": tmp_path, "client": client}
    client.close()


def run(doors: dict[str, Any], *args: str, env: dict[str, str | None] | None = None) -> Any:
    args = tuple(a.replace("{tmp}", str(doors["tmp"])) for a in args)
    return tsstore(*args, env={**doors["env"], **(env or {})}, cwd=doors["tmp"])


@pytest.mark.parametrize(("args", "code", "words"), CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_a_bad_command_line_gets_one_line_naming_the_value(
    doors: dict[str, Any], args: tuple[str, ...], code: int, words: str
) -> None:
    ran = run(doors, *args)
    assert ran.returncode == code, (ran.returncode, ran.stdout, ran.stderr)
    error = one_error(ran)
    assert words.replace("{tmp}", str(doors["tmp"])) in error, error
    assert len(error) < 400  # one line a person reads, not a dump


LAYERS = PLAIN + """
[[rollup]]
source = "plain"
interval = "1min"
by = "symbol"

[[rollup]]
source = "plain_1min"
interval = "1h"
"""


def test_a_rollup_of_a_rollup_runs_by_its_name_and_names_its_source_when_that_has_not_run(
    doors: dict[str, Any],
) -> None:
    """``--rollup`` names a declared roll-up of a roll-up (once "not declared": it was looked
    for among the series' own); before its source has run it says so, naming it."""
    (doors["tmp"] / "layers.toml").write_text(LAYERS)
    ran = run(doors, "rollup", "--spec", "{tmp}/layers.toml", "--rollup", "plain_1min_1h")
    assert ran.returncode == 1, ran.stderr  # not done: what is stored does not allow it yet
    assert one_error(ran) == "Error: " + (
        "nothing rolled up: its source, roll-up 'plain_1min', has not run yet; run it first "
        "(tsstore rollup --rollup plain_1min), then this one"
    )
    wrong = run(doors, "rollup", "--spec", "{tmp}/layers.toml", "--rollup", "plain_1min_1h", "--collection", "plain")
    assert wrong.returncode == 2
    assert "roll-up 'plain_1min_1h' rolls up 'plain_1min', not --collection 'plain'; leave out --collection" in (
        one_error(wrong)
    )


def test_every_command_that_prints_rows_writes_them_to_an_output_file_as_query_does(doors: dict[str, Any]) -> None:
    """``-o/--output`` (which ``--format arrow`` on a terminal asks for) on bars, aligned,
    latest and asof: the file holds the rows the command prints, in the format its suffix
    names when ``--format`` is not given (Parquet too), and stderr says how many."""
    import pyarrow.parquet as pq

    spec = SeriesSpec("plain", key_fields=["symbol"])
    TimeSeriesStore(doors["client"], spec).write(
        [{"symbol": s, "timestamp": dt.datetime(2019, 1, 2, 9, m, tzinfo=UTC), "price": {"micros": 10 + m}}
         for m in range(0, 50, 7) for s in ("A", "B")]  # fmt: skip
    )
    plain = ("--spec", "{tmp}/plain.toml")
    bars = (*plain, "--interval", "15min", "--price", "price.micros", "--by", "symbol")
    commands = {
        "bars": ("bars", *bars), "aligned": ("aligned", *bars), "latest": ("latest", *plain, "--by", "symbol", "A", "B"),
        "asof": ("asof", *plain, "--where", "symbol=A", "--right-where", "symbol=B", "--right-columns", "price.micros"),
    }  # fmt: skip
    for name, command in commands.items():
        printed = run(doors, *command, "--format", "csv")
        assert printed.returncode == 0, printed.stderr
        rows = len(printed.stdout.strip().splitlines()) - 1
        ran = run(doors, *command, "--format", "arrow", "-o", "{tmp}/rows.arrow")
        assert ran.returncode == 0, ran.stderr
        table = pa.ipc.open_stream((doors["tmp"] / "rows.arrow").read_bytes()).read_all()
        assert table.num_rows == rows > 0 and f"wrote {rows} row(s) to " in ran.stderr, name
        assert ran.stdout == ""
        named = run(doors, *command, "-o", f"{{tmp}}/{name}.parquet")  # the suffix names the format
        assert named.returncode == 0, named.stderr
        assert pq.read_table(doors["tmp"] / f"{name}.parquet").num_rows == rows, name
        contradicted = run(doors, *command, "--format", "csv", "-o", "{tmp}/x.parquet")
        assert contradicted.returncode == 2 and "--format csv contradicts --output" in contradicted.stderr, name


def test_a_variable_that_stands_for_an_option_is_named_in_its_error(doors: dict[str, Any]) -> None:
    spec = run(doors, "count", env={"TSSTORE_SPEC": "nosuch.toml"})
    assert spec.returncode == 2 and "(from TSSTORE_SPEC=nosuch.toml)" in one_error(spec)
    project = run(doors, "count", env={"TSSTORE_PROJECT": "Bad Project"})
    assert project.returncode == 2 and "TSSTORE_PROJECT='Bad Project' is not a Google Cloud project id" in one_error(
        project
    )


def test_a_rules_file_in_a_new_folder_says_it_made_the_folder(doors: dict[str, Any]) -> None:
    ran = run(doors, "rules", "--spec", "plain.toml", "--file", "deploy/firestore.rules")
    assert ran.returncode == 0 and ran.stdout.splitlines()[0] == "made folder deploy", ran.stdout
    assert (doors["tmp"] / "deploy" / "firestore.rules").is_file()


def test_a_project_without_credentials_says_how_to_log_in(doors: dict[str, Any], tmp_path: Path) -> None:
    nowhere = {"FIRESTORE_EMULATOR_HOST": None, "GOOGLE_APPLICATION_CREDENTIALS": None,
               "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "NO_GCE_CHECK": "True"}  # fmt: skip
    for args in (("query", "--project", "my-project"), ("count",), ("counter", "get", "counters/c")):
        ran = run(doors, *args, env={**nowhere, "TSSTORE_PROJECT": "my-project"})
        assert ran.returncode == 1
        assert "gcloud auth application-default login" in one_error(ran)


def test_typed_values_and_dates_the_cli_accepts(doors: dict[str, Any]) -> None:
    # A ticker code that looks like a number stays a string where the column is a string.
    plan = run(doors, "explain", "--where", "symbol=7203", "--limit", "5")
    assert plan.returncode == 0 and "'7203'" in plan.stdout, plan.stdout
    quoted = run(doors, "explain", "--where", 'symbol="7203"', "--limit", "5")
    assert "'7203'" in quoted.stdout
    # A decimal bound on an Int64 field is a number all the same (Firestore compares numbers by value).
    decimal = run(doors, "explain", "--where", "exchange=X", "--where", "volume>=10.5")
    assert decimal.returncode == 0 and "volume >= 10.5" in decimal.stdout, (decimal.stdout, decimal.stderr)
    none = run(doors, "query", "--where", "symbol=7203")
    assert none.returncode == 0 and none.stdout == "(no rows)\n"
    # A bare date is midnight UTC, or midnight in the --naive zone.
    bare = run(doors, "explain", "--start", "2018-12-31", "--limit", "5")
    assert bare.returncode == 0 and "timestamp >= 2018-12-31T00:00:00+00:00" in bare.stdout, bare.stdout
    zoned = run(doors, "explain", "--start", "2018-12-31T09:00:00", "--naive", "Asia/Tokyo", "--limit", "5")
    assert zoned.returncode == 0 and "timestamp >= 2018-12-31T00:00:00+00:00" in zoned.stdout, zoned.stdout


def test_a_read_that_finds_nothing_says_so_once(doors: dict[str, Any]) -> None:
    for args in (("query", "--limit", "5"), ("query",), ("bars", "--interval", "1h"), ("asof",),
                 ("aligned", "--interval", "1h", "--by", "symbol")):  # fmt: skip
        ran = run(doors, *args)
        assert ran.returncode == 0 and ran.stdout == "(no rows)\n", (args, ran.stdout, ran.stderr)
    drawn = run(doors, "query", "--plot", "{tmp}/chart.png")  # no line to draw: no chart, and no legend of none
    assert drawn.returncode == 0 and f"no rows, so no chart: {doors['tmp']}/chart.png not written" in drawn.stderr
    assert not (doors["tmp"] / "chart.png").exists()


def test_the_help_lists_every_exit_code() -> None:
    listed = " ".join(tsstore("--help").stdout.split())
    assert "Exit codes: 0 done, 1 a runtime failure (the command was right; Firestore or what is stored does not " \
           "allow it now), 2 a usage error (fixing the command fixes it), 3 not running (emulator status), 4 done " \
           "with rows rejected (ingest, backfill), 130 Ctrl-C." in listed, listed  # fmt: skip


def test_a_collection_name_with_a_typo_is_warned_about(doors: dict[str, Any]) -> None:
    doors["client"].collection("instruments").document("x").set({"symbol": "AAA"})
    (doors["tmp"] / "typo.toml").write_text(PLAIN.replace('"plain"', '"instrumnets"'))
    for args in (("count",), ("query", "--limit", "5"), ("shards",)):
        ran = run(doors, *args, "--spec", "typo.toml")
        assert ran.returncode == 0, ran.stderr
        assert "warning: collection 'instrumnets' holds no documents" in ran.stderr
        assert "collections here: instruments" in ran.stderr


def test_a_finished_ingest_leaves_no_checkpoint_so_a_later_one_reads_every_row(doors: dict[str, Any]) -> None:
    source = doors["tmp"] / "day.csv"
    source.write_text("symbol,timestamp,price.micros\nAAA,2019-01-02T09:00:00Z,1\nBBB,2019-01-02T09:00:01Z,2\n")
    first = run(doors, "ingest", str(source), "--spec", "plain.toml")
    assert "2 stored new" in first.stdout and "checkpoint removed" in first.stdout, first.stdout
    assert f"database {doors['env']['TSSTORE_DATABASE']}; writing to collection plain" in first.stderr
    assert not list(doors["tmp"].glob("*.tsstore-checkpoint.json"))
    again = run(doors, "ingest", str(source), "--spec", "plain.toml")
    assert "2 rows read: 0 stored new, 2 already present" in again.stdout, again.stdout


def test_an_unclosed_quote_rejects_its_own_line_only(doors: dict[str, Any]) -> None:
    source = doors["tmp"] / "quote.csv"
    lines = [f"S{i},2019-01-02T09:00:0{i}Z,{i}" for i in range(8)]
    lines[2] = '"' + lines[2]  # opened, never closed
    source.write_text("symbol,timestamp,price.micros\n" + "\n".join(lines) + "\n")
    ran = run(doors, "ingest", str(source), "--spec", "plain.toml")
    assert "8 rows read: 7 stored new, 0 already present, 1 rejected" in ran.stdout, ran.stdout
    rejects = (doors["tmp"] / "quote.csv.rejects.csv").read_text()
    assert "4,a quote opened on this line is not closed" in rejects and '""S2,2019' in rejects


def test_a_writer_refusal_names_the_whole_field_and_keeps_the_row(doors: dict[str, Any]) -> None:
    source = doors["tmp"] / "huge.jsonl"
    good = '{"symbol": "A", "timestamp": "2019-01-02T09:00:00Z", "price": {"micros": 5}}'
    bad = '{"symbol": "B", "timestamp": "2019-01-02T09:00:00Z", "price": {"big": 100000000000000000000}}'
    source.write_text(good + "\n" + bad + "\n")
    ran = run(doors, "ingest", str(source), "--spec", "plain.toml")
    assert "1 rejected" in ran.stdout, ran.stdout
    rejects = (doors["tmp"] / "huge.jsonl.rejects.csv").read_text()
    assert "field 'price.big'" in rejects and "100000000000000000000" in rejects.split("\n", 2)[1]


# ------------------------------------------------------------------------- the Python API

AT = dt.datetime(2019, 1, 2, 9, tzinfo=UTC)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


LIBRARY_CASES: list[tuple[str, Any, type[Exception], str]] = [
    ("naive time", lambda s: s.write([{"symbol": "A", "timestamp": dt.datetime(2019, 1, 2)}]), RecordError, "naive"),
    ("NaN time", lambda s: s.write([{"symbol": "A", "timestamp": math.nan}]), RecordError, "timestamp"),
    ("NaT time", lambda s: s.write([{"symbol": "A", "timestamp": __import__("pandas").NaT}]), RecordError, "NaT"),
    (
        "2 MiB document",
        lambda s: s.write([{"symbol": "A", "timestamp": AT, "blob": "x" * (2 << 20)}]),
        RecordError,
        "1048576",
    ),  # fmt: skip
    ("21 levels", lambda s: s.write([{"symbol": "A", "timestamp": AT, "deep": nested(21)}]), RecordError, "20 levels"),
    (
        "int over 64 bits",
        lambda s: s.write([{"symbol": "A", "timestamp": AT, "price": {"micros": 2**70}}]),
        RecordError,
        "field 'price.micros' holds 1180591620717411303424",
    ),  # fmt: skip
    ("missing key", lambda s: s.write([{"timestamp": AT}]), RecordError, "key field 'symbol' is missing"),
    ("dotted name", lambda s: s.write([{"symbol": "A", "timestamp": AT, "a.b": 1}]), RecordError, "'a.b'"),
    ("unknown keyword", lambda s: s.query(limt=5), OptionError, "limt"),
    ("unknown write keyword", lambda s: s.write([], on_dup="keep"), OptionError, "on_dup"),
    ("limit too big", lambda s: s.query(limit=2**40), QueryError, str(2**40)),
    ("limit a string", lambda s: s.query(limit="5"), QueryError, "'5'"),
    ("count with a limit", lambda s: s.count(limit=5), QueryError, "limit"),
    ("bad time text", lambda s: s.query(start="yesterday"), QueryError, "yesterday"),
    ("naive start", lambda s: s.query(start=dt.datetime(2019, 1, 2)), QueryError, "naive"),
    ("purge before and start", lambda s: s.purge(before=AT, start=AT), QueryError, "not both"),
    ("purge everything", lambda s: s.purge(), QueryError, "time bound"),
    ("interval without unit", lambda s: s.bars(interval="7", price="p"), QueryError, "'7' has no unit"),
    ("undeclared shape", lambda s: s.query(where={"exchange": "X"}), QueryError, "exchange"),
    ("filter on the shard", lambda s: s.query(where={"shard": "x"}), QueryError, "shard"),
    ("unknown direction", lambda s: s.query(direction="up"), QueryError, "'up'"),
    ("bad column type", lambda s: SeriesSpec("x", columns={"a": "text"}), SpecError, "'text'"),
    ("undeclared price", lambda s: s.bars(interval="1h", price="nosuch"), QueryError, "price 'nosuch' is not a field"),
    ("undeclared by", lambda s: s.aligned(interval="1h", by="nosuch", price="p"), QueryError, "by field 'nosuch'"),
    ("undeclared as-of by", lambda s: s.asof(by="nosuch"), QueryError, "asof: by field 'nosuch' is not a field"),
    ("as-of right_spec a name", lambda s: s.asof(right_spec="quotes"), QueryError, "right_spec takes a SeriesSpec"),
    ("string bound", lambda s: s.count(where=[("v", ">=", "1000")]), QueryError,
     "v >= '1000': 'v' is declared Int64, and Firestore matches no Int64 value with the str '1000'"),
    ("number for a string", lambda s: s.query(where={"symbol": 7203}), QueryError, "give a string"),
    ("bool for a number", lambda s: s.count(where=[("v", ">", True)]), QueryError, "with the bool True"),
    ("NaN bound", lambda s: s.count(where=[("v", ">", math.nan)]), QueryError, "Firestore takes no NaN"),
    ("combine on ticks", lambda s: s.bars(interval="1h", combine=True), QueryError, "has no roll-up record"),
    ("origin a time of day, a step not of a day", lambda s: s.bars(interval="7min", price="p", origin="09:30"),
     QueryError, "the interval must divide 24h (e.g. '1min', '15min', '30min', '1h', '2h', '4h', '1D'), and '7min'"),
    ("roll-up by months", lambda s: Rollup(s.spec, interval="1M"), SpecError,
     "a roll-up's bars are fixed steps from the UTC epoch (e.g. '1min', '15min', '1h', '1D', '1W'); months are not"),
    ("roll-up of no length", lambda s: Rollup(s.spec, interval="0s"), SpecError, "roll-up interval '0s' is not posi"),
    ("verify a roll-up by name", lambda s: s.verify_rollup("t_1min"), QueryError,
     "verify_rollup takes the roll-up's declaration, a Rollup (Rollup(spec, interval=...), or one of "
     "load_declaration(...)'s), not str 't_1min' (the CLI takes the name: tsstore rollup --rollup t_1min)"),
    ("run a roll-up by name", lambda s: s.rollup("t_1min"), QueryError, "rollup takes the roll-up's declaration"),
    ("a roll-up's coverage by name", lambda s: s.rollup_coverage(None), QueryError,
     "rollup_coverage takes the roll-up's declaration, a Rollup"),
    ("flag as text", lambda s: s.purge(before=AT, past_rollups="false"), QueryError,
     "purge: past_rollups='false' is not allowed; give True or False"),
    ("moments as text", lambda s: s.bars(interval="1h", price="p", moments="yes"), QueryError, "moments='yes'"),
    ("query as a dict", lambda s: s.asof({"where": {"symbol": "A"}}), QueryError, "must be a tsstore.Query"),
    ("aligned by None", lambda s: s.aligned(interval="1h", by=None, price="p"), QueryError, "aligned needs by="),
    ("purge rollups by name", lambda s: s.purge(before=AT, rollups="name"), QueryError,
     "purge: rollups takes Rollup declarations, got str 'name'"),
    ("rules from names", lambda s: render_rules(["instruments"]), SpecError, "list of SeriesSpec declarations"),
    ("async store on a sync client", lambda s: AsyncTimeSeriesStore(s.client, s.spec), ConfigError,
     "AsyncTimeSeriesStore takes a firestore.AsyncClient"),
    ("tolerance without unit", lambda s: s.asof(tolerance="5"), QueryError, "tolerance '5' has no unit"),
    ("interval finer than 1 us", lambda s: s.bars(interval="1ns", price="p"), QueryError, "whole number of micro"),
    ("duration 1.5", lambda s: s.bars(interval="1.5", price="p"), QueryError, "interval '1.5' has no unit"),
]


@pytest.fixture
def store(client: firestore.Client, collection_name: str) -> Any:
    spec = SeriesSpec(collection_name, key_fields=["symbol"], shapes=["symbol", QueryShape([], ranges=["v"])],
                      columns={"symbol": "string", "p": "Int64", "v": "Int64"})  # fmt: skip
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as opened:
        yield opened


@pytest.mark.parametrize(("name", "call", "error", "words"), LIBRARY_CASES, ids=[c[0] for c in LIBRARY_CASES])
def test_a_bad_library_call_raises_one_error_naming_the_value(
    store: TimeSeriesStore, name: str, call: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as raised:
        call(store)
    assert words in str(raised.value), str(raised.value)
    assert store.count(start=dt.datetime(1970, 1, 1, tzinfo=UTC)) == 0  # nothing half-written


def test_a_cursor_from_another_query_is_refused(store: TimeSeriesStore) -> None:
    store.write([{"symbol": s, "timestamp": AT + dt.timedelta(seconds=i)} for i, s in enumerate("ABABAB")])
    page = store.query(where={"symbol": "A"}, limit=1)
    assert page.cursor is not None
    with pytest.raises(CursorError, match="belongs to a different query"):
        store.query(where={"symbol": "B"}, limit=1, cursor=page.cursor)


def test_a_counter_with_too_many_shards_is_refused_before_anything_is_written(client: firestore.Client) -> None:
    counter = ShardedCounter(client, "counters/huge")
    with pytest.raises(CounterError, match="100000000 is not allowed; give an integer from 1 to 10000"):
        counter.create(shards=100_000_000)
    assert not client.document("counters/huge").get().exists


def test_every_command_that_prints_figures_or_rows_prints_json(doors: dict[str, Any]) -> None:
    source = doors["tmp"] / "day.csv"
    source.write_text("symbol,timestamp,price.micros\nAAA,2019-01-02T09:00:00Z,1\nBBB,2019-01-02T09:00:01Z,2\n")
    # TSSTORE_SPEC stands for --spec, as TSSTORE_DATABASE does for --database.
    env = {"TSSTORE_SPEC": "plain.toml"}
    ingested = json.loads(run(doors, "ingest", str(source), "--json", env=env).stdout)
    assert (ingested["rows"], ingested["created"], ingested["rejected"]) == (2, 2, 0)
    assert json.loads(run(doors, "count", "--format", "json", env=env).stdout) == {"count": 2}
    rows = [json.loads(line) for line in run(doors, "query", "--format", "json", env=env).stdout.splitlines()]
    assert [r["symbol"] for r in rows] == ["BBB", "AAA"] and rows[0]["price"]["micros"] == 2
    census = json.loads(run(doors, "shards", "--format", "json", env=env).stdout)
    assert census["total"] == 2
    dry = json.loads(run(doors, "purge", "--before", "2019-01-02T09:00:01Z", "--dry-run", "--format", "json",
                         env=env).stdout)  # fmt: skip
    assert (dry["matched"], dry["deleted"], dry["dry_run"]) == (1, 0, True)
    explained = json.loads(run(doors, "explain", "--limit", "10", "--format", "json", env=env).stdout)
    assert explained["chunks"] == 1 and explained["lean_reads"] == 11 and "plain (shard DESC" in explained["index"]
    plan = json.loads(run(doors, "capacity", "--writes-per-second", "2000", "--format", "json").stdout)
    assert len(plan["shards"]) == 5 and plan["writes_per_second"] == 2000
    aggregate = json.loads(run(doors, "aggregate", "--format", "json").stdout)  # the demo's declaration
    assert aggregate == {"count": 0}
    run(doors, "counter", "create", "counters/c", "--shards", "2")
    run(doors, "counter", "incr", "counters/c", "--by", "3")
    got = json.loads(run(doors, "counter", "get", "counters/c", "--live", "--format", "json").stdout)
    assert (got["value"], got["live"]) == (3, True)
    latest = run(doors, "latest", "--by", "symbol", "AAA", "--format", "json", env=env)
    assert json.loads(latest.stdout)["price"]["micros"] == 1


def test_a_renamed_command_still_runs_under_its_old_name_and_says_the_new_one() -> None:
    """``tsstore plan`` (the capacity planner's first name) answers as ``tsstore capacity``
    does, says once on standard error what it is called now, and is left out of the help."""
    args = ("--writes-per-second", "3000", "--retention", "30 days")
    old, new = tsstore("plan", *args), tsstore("capacity", *args)
    assert old.returncode == new.returncode == 0 and old.stdout == new.stdout and "8 shards" in new.stdout
    assert old.stderr.count("It is now 'tsstore capacity', with the same options.") == 1 and not new.stderr
    listed = tsstore("--help").stdout
    assert "  capacity " in listed and "  plan " not in listed


RETIRED = """
[[series]]
collection = "moving"
key_fields = ["symbol"]
shards = ["a", "b"]
retired = ["old"]
"""

#: Every command, with the place Ctrl-C lands in it: "ask" (the store's first request of
#: Firestore), "write" (a bulk write under way: a store's write job), "counter" (a counter's
#: first call) or, for another command, the call that does its work (a Beam pipeline's run,
#: the local store's supervisor, a plan).
CTRL_C: list[tuple[tuple[str, ...], str, str]] = [
    (("query", "--limit", "5"), "ask", ""),
    (("query",), "ask", ""),
    (("count",), "ask", ""),
    (("explain", "--limit", "5"), "tsstore.cli.query.plan_query", ""),
    (("latest", "--by", "symbol", "AAA"), "ask", ""),
    (("aggregate",), "ask", ""),
    (("bars", "--interval", "1h"), "ask", ""),
    (("aligned", "--interval", "1h", "--by", "symbol"), "ask", ""),
    (("asof", "--by", "symbol", "--tolerance", "5s"), "ask", ""),
    (("shards",), "ask", ""),
    (("watch", "--limit", "5"), "ask", ""),
    (("tail",), "ask", ""),
    (("purge", "--before", "2019-01-02T12:00:00Z", "--past-rollups", "--yes"), "write", "deleted"),
    (("rollup",), "write", "before the interrupt"),
    (("ingest", "{tmp}/day.csv", "--spec", "{tmp}/moving.toml"), "write", "checkpoint saved"),
    (("reshard", "--spec", "{tmp}/moving.toml"), "write", "before the interrupt"),
    (("seal", "--spec", "{tmp}/cold.toml", "--until", "2019-01-05T00:00:00Z"), "ask",
     "sealed 0 partition(s) (0 ticks) before the interrupt"),
    (("counter", "create", "counters/c", "--shards", "2"), "counter", ""),
    (("counter", "incr", "counters/c"), "counter", ""),
    (("counter", "get", "counters/c"), "counter", ""),
    (("counter", "grow", "counters/c", "--shards", "4"), "counter", ""),
    (("counter", "rollup", "counters/c"), "counter", ""),
    (("demo", "--ticks", "100"), "ask", ""),
    (("backfill", "{tmp}/day.csv", "--spec", "{tmp}/moving.toml"), "tsstore.beam.backfill", ""),
    (("export", "--spec", "{tmp}/moving.toml", "--to", "{tmp}/out/part"), "tsstore.beam.export", ""),
    (("emulator", "start"), "tsstore.local.supervisor.start", ""),
    (("emulator", "status"), "tsstore.local.supervisor.status", ""),
    (("emulator", "stop"), "tsstore.local.supervisor.stop", ""),
    (("capacity", "--writes-per-second", "2000"), "tsstore.cli.layout.capacity_for", ""),
    (("indexes", "tsstore.demo:DECLARATION", "--stdout"), "tsstore.cli.deploy.plan_index_file", ""),
    (("rules", "tsstore.demo:DECLARATION", "--stdout"), "tsstore.cli.deploy.plan_rules_file", ""),
    (("datastore-indexes", "tsstore.demo:DECLARATION", "--stdout"), "tsstore.cli.deploy.plan_index_yaml", ""),
    (("console", "--no-browser"), "tsstore.cli.console.serve_forever", ""),
]


@pytest.fixture
def stocked(doors: dict[str, Any]) -> dict[str, Any]:
    """The doors' database with demo ticks, and ticks under a retired shard value of ``moving``."""
    from tsstore.demo import SPEC
    from tsstore.local.synthetic import trading_day

    TimeSeriesStore(doors["client"], SPEC, write_options=WriteOptions(ramp=False)).write(trading_day(60, seed=3))
    old = SeriesSpec("moving", key_fields=["symbol"], shards=["old"])
    TimeSeriesStore(doors["client"], old, write_options=WriteOptions(ramp=False)).write(trading_day(20, seed=4))
    (doors["tmp"] / "moving.toml").write_text(RETIRED)
    (doors["tmp"] / "cold.toml").write_text(RETIRED + 'cold = { path = "lake" }\n')
    (doors["tmp"] / "day.csv").write_text("symbol,timestamp\n" + "".join(
        f"S{i},2019-01-02T09:{i // 60:02d}:{i % 60:02d}Z\n" for i in range(120)))  # fmt: skip
    return doors


@pytest.mark.parametrize(("args", "where", "said"), CTRL_C, ids=[" ".join(c[0]) for c in CTRL_C])
def test_ctrl_c_in_every_command_says_what_was_done_and_exits_130(
    stocked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], where: str, said: str
) -> None:
    from tsstore.cli import exits
    from tsstore.counters import ShardedCounter
    from tsstore.write.job import Job

    def stop(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    if where == "ask":
        for name in ("_answer", "_ticks", "_listen"):  # a request's asks, a stream's chunks, the listeners
            monkeypatch.setattr(TimeSeriesStore, name, stop)
    elif where == "write":
        monkeypatch.setattr(Job, "_send", stop)
    elif where == "counter":
        for name in ("create", "increment", "read", "grow", "rollup"):
            monkeypatch.setattr(ShardedCounter, name, stop)
    else:  # a command that only plans and prints: Ctrl-C while it plans
        monkeypatch.setattr(where, stop)
    # A command that leaves threads waiting on Firestore ends with os._exit (see exits.exit_interrupted):
    # here, in the test's process, it raises SystemExit as a finished command would.
    monkeypatch.setattr(exits.os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    home = {"TSSTORE_HOME": str(stocked["tmp"] / "home")}  # never the developer's own local store
    if args[:2] == ("emulator", "start"):  # tests/cli.py runs it as a process, where no patch reaches
        from click.testing import CliRunner

        from tsstore.cli import main

        result = CliRunner().invoke(main, list(args), env=home, catch_exceptions=False)
        ran = Ran(args, result.exit_code, result.stdout, result.stderr)
    else:
        ran = run(stocked, *args, env=home)
    assert ran.returncode == 130, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr and "Error" not in ran.stderr, ran.stderr
    assert any(line.startswith("interrupted: ") for line in ran.stderr.splitlines()), ran.stderr
    assert said in ran.stdout + ran.stderr, (ran.stdout, ran.stderr)


def test_the_ctrl_c_cases_cover_every_command() -> None:
    import click

    from tsstore.cli import main

    def leaves(group: click.Group, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for name, command in subcommands(group).items():
            if command.hidden:
                continue
            found |= leaves(command, (*prefix, name)) if isinstance(command, click.Group) else {(*prefix, name)}
        return found

    covered = {args[: 2 if args[0] in ("counter", "emulator") else 1] for args, _, _ in CTRL_C}
    assert covered == leaves(main, ()), leaves(main, ()) ^ covered


def test_a_rejected_time_is_named_by_the_files_own_column(doors: dict[str, Any]) -> None:
    """A time column given with ``--time-column`` is named as the file names it in each rejected
    row's reason (vega-datasets' stocks.csv writes dates as 'Jan 1 2000')."""
    (doors["tmp"] / "stocks.csv").write_text("symbol,date,price\nMSFT,Jan 1 2000,39.81\nMSFT,2000-02-01,36.35\n")
    ran = run(doors, "ingest", "{tmp}/stocks.csv", "--spec", "{tmp}/plain.toml", "--time-column", "date",
              "--naive", "utc")  # fmt: skip
    assert ran.returncode == 4 and "2 rows read: 1 stored new" in ran.stdout, (ran.stdout, ran.stderr)
    rejects = (doors["tmp"] / "stocks.csv.rejects.csv").read_text()
    assert "column 'date': 'Jan 1 2000' is not an ISO-8601 time" in rejects, rejects


@pytest.mark.parametrize("asked", ["native", "datastore"])
def test_a_command_on_an_emulator_of_the_other_mode_names_both_modes(
    doors: dict[str, Any], datastore_emulator: Any, asked: str
) -> None:
    """The emulator refuses a client of the mode it does not run with gcloud's words
    ("Database mode not set to Firestore Mode. If using the gCloud CLI, please specify the
    --database-mode flag."); the command says which mode each side is and what to set."""
    if asked == "native":  # FIRESTORE_EMULATOR_HOST names an emulator in Datastore mode
        env = {"FIRESTORE_EMULATOR_HOST": datastore_emulator.address}
        words = ["the emulator runs Firestore in Datastore mode, and this command asked for Native mode: give "
                 "--mode datastore", "DATASTORE_EMULATOR_HOST"]  # fmt: skip
    else:  # DATASTORE_EMULATOR_HOST names the emulator in Native mode
        env = {"TSSTORE_MODE": "datastore", "DATASTORE_EMULATOR_HOST": doors["env"]["FIRESTORE_EMULATOR_HOST"]}
        words = ["the emulator runs Firestore in Native mode, and this command asked for Datastore mode (--mode "
                 "datastore): leave --mode out", "FIRESTORE_EMULATOR_HOST"]  # fmt: skip
    ran = run(doors, "count", env=env)
    assert ran.returncode == 1
    error = one_error(ran)
    assert all(w in error for w in words) and "gCloud" not in error, error


def test_a_bad_time_zone_is_refused_before_the_local_store_is_started(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"FIRESTORE_EMULATOR_HOST": None, "GOOGLE_CLOUD_PROJECT": None, "TSSTORE_HOME": str(home)}
    try:
        for command in ("bars", "aligned"):
            ran = tsstore(command, "--interval", "1D", "--by", "symbol", "--tz", "America/New_Yrok", env=env,
                          cwd=tmp_path)  # fmt: skip
            assert ran.returncode == 2, ran.stderr
            assert one_error(ran) == (
                "Error: --tz 'America/New_Yrok' is not a time zone; give an IANA name such as 'America/New_York', "
                "or 'UTC'"
            )
            assert "local store" not in ran.stderr and not (home / "emulator.json").exists()
    finally:
        if (home / "emulator.json").exists():  # started by a run before the fix: stopped again
            tsstore("emulator", "stop", env=env, cwd=tmp_path)


@pytest.mark.parametrize("client_mode", ["native", "datastore"])
def test_a_store_on_an_emulator_of_the_other_mode_names_both_modes(
    emulator: Any, datastore_emulator: Any, database_id: str, client_mode: str
) -> None:
    if client_mode == "native":
        client = datastore_emulator.client(database=database_id)
        words = ("the emulator runs Firestore in Datastore mode, and the store's client is a firestore.Client "
                 "(Native mode): give the store a datastore.Client")  # fmt: skip
    else:
        client = emulator.datastore_client(database=database_id)
        words = ("the emulator runs Firestore in Native mode, and the store's client is a datastore.Client "
                 "(Datastore mode): give the store a firestore.Client")  # fmt: skip
    spec = SeriesSpec("modes", key_fields=["symbol"], shapes=["symbol"])
    with TimeSeriesStore(client, spec) as store:
        for verb in (store.count, lambda: store.query(where={"symbol": "AAA"}, limit=5), lambda: list(store.iter_ticks())):
            with pytest.raises(EmulatorError, match=re.escape(words)):
                verb()
    client.close()


@pytest.mark.parametrize("mode", ["native", "datastore"])
def test_a_text_too_long_to_filter_on_is_refused_alike_in_both_modes_before_firestore(
    request: pytest.FixtureRequest, uses_emulator: None, database_id: str, mode: str
) -> None:
    """Measured here: Firestore answers a filter on a text of 1 500 bytes or more with a raw
    InvalidArgument (Native mode: "too large to be used in a query"; Datastore mode, over 1 500:
    "longer than 1500 bytes"). Native mode stores a 2 000-byte text in an indexed field, and
    Datastore mode stores it unindexed; no filter finds it in either. Both refuse it alike now:
    the write rejects the record, the filter is refused before it is sent."""
    client = mode_client(request, mode, database_id)
    spec = SeriesSpec("long", key_fields=["symbol"], shapes=["symbol"], columns={"symbol": "string"})
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    rejected: list[RecordError] = []
    result = store.write([{"symbol": "s" * 2000, "timestamp": AT}, {"symbol": "A", "timestamp": AT}],
                         on_reject=rejected.append)  # fmt: skip
    assert result.created == 1 and [r.index for r in rejected] == [0], (result, rejected)
    assert "field 'symbol' is 2001 bytes" in rejected[0].reason and "no filter would find" in rejected[0].reason
    assert stored_ids(client, "long") == list(result.ids)
    for where in ({"symbol": "s" * 2000}, [("symbol", "in", ["A", "s" * 1500])]):
        with pytest.raises(QueryError, match="Firestore compares indexed values of at most 1500 bytes in a query"):
            store.count(where=where)
    assert store.count(where={"symbol": "s" * 1499}) == 0  # the longest text both modes take in a filter
    assert store.count(where={"symbol": ["A", "s" * 1499]}) == 1


#: Each command as the census below calls it before its hostile option: what it needs besides
#: (its arguments, a required option). Commands that take no declaration, time or filter
#: (``counter``, ``emulator``) have their doors in CLI_CASES.
CENSUS_BASE: dict[str, tuple[str, ...]] = {
    "count": (), "aggregate": (), "latest": ("--by", "symbol", "AAA"), "bars": ("--interval", "1h"),
    "aligned": ("--interval", "1h", "--by", "symbol"), "asof": (), "rollup": (), "explain": (),
    "purge": ("--before", T, "--yes"), "query": (), "shards": (), "reshard": (), "tail": (), "watch": ("--once",),
    "ingest": ("{tmp}/ticks.csv",), "backfill": ("{tmp}/ticks.csv",), "export": ("--to", "{tmp}/out/part"),
    "capacity": ("--writes-per-second", "100"), "indexes": ("--stdout",), "rules": ("--stdout",),
    "datastore-indexes": ("--stdout",), "demo": ("--ticks", "1", "--no-chart"), "console": ("--no-browser",),
    "seal": (),
}  # fmt: skip

#: Hostile values of the options many commands share: (option, value, words of the one line).
#: A declaration that does not load is a usage error, whatever is wrong with it.
CENSUS_DOORS: list[tuple[str, str, str]] = [
    ("--spec", "{tmp}/broken.toml", "broken.toml' does not parse"),
    ("--spec", "{tmp}/nosuch.toml", "nosuch.toml"),
    ("--spec", "brokenmod:X", "importing 'brokenmod' for declaration 'brokenmod:X' failed: SyntaxError"),
    ("--spec", "{tmp}/badtype.toml", "column 'a' has type 'text'"),
    ("--collection", "nosuch", "nosuch"),
    ("--start", "yesterday", "--start 'yesterday' is not a time"),
    ("--where", "nosuch=1", "nosuch"),
]


def census_cases() -> list[tuple[tuple[str, ...], str]]:
    """Every command of CENSUS_BASE with each shared door it has."""
    from tsstore.cli import main

    cases = []
    commands = subcommands(main)
    for name, base in CENSUS_BASE.items():
        options = {opt for param in commands[name].params for opt in param.opts}
        for option, value, words in CENSUS_DOORS:
            if option in options and not (name == "demo" and option == "--collection"):  # demo's: a name to write to
                cases.append(((name, *base, option, value), words))
    return cases


CENSUS = census_cases()


@pytest.fixture
def census(doors: dict[str, Any]) -> dict[str, Any]:
    """The doors' folder with declarations that do not load."""
    (doors["tmp"] / "broken.toml").write_text("[[series]\ncollection =")
    (doors["tmp"] / "badtype.toml").write_text('[[series]]\ncollection = "b"\ncolumns = { a = "text" }\n')
    (doors["tmp"] / "brokenmod.py").write_text("X = (\n")
    return doors


@pytest.mark.parametrize(("args", "words"), CENSUS, ids=[" ".join(c[0]) for c in CENSUS])
def test_the_census_every_shared_door_of_every_command_is_a_usage_error(
    census: dict[str, Any], args: tuple[str, ...], words: str
) -> None:
    """A declaration that does not load, a series it does not declare, a time that is not one
    and a field no shape declares: exit 2 with one ``Error:`` line naming the value, from every
    command that takes that option, before anything is read or written."""
    ran = run(census, *args, env={"TSSTORE_HOME": str(census["tmp"] / "home")})
    assert ran.returncode == 2, (ran.returncode, ran.stdout, ran.stderr)
    assert words.replace("{tmp}", str(census["tmp"])) in one_error(ran)


def test_the_census_covers_every_command() -> None:
    """Every command (and each of counter's and emulator's) has its doors tried: in the census
    or in CLI_CASES."""
    from tsstore.cli import main

    leaves = set()
    for name, command in subcommands(main).items():
        if isinstance(command, click.Group):
            leaves |= {f"{name} {sub}" for sub in subcommands(command)}
        elif not command.hidden:
            leaves.add(name)
    tried = set(CENSUS_BASE) | {" ".join(a[:2]) if a[0] in ("counter", "emulator") else a[0] for a, _, _ in CLI_CASES}
    assert leaves <= tried, sorted(leaves - tried)
