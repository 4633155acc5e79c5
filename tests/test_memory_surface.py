"""The memory database as a user reaches for it, without Java: ``TimeSeriesStore.memory`` and
``AsyncTimeSeriesStore.memory``, the plugin's ``tsstore_memory`` fixtures, ``tsstore demo
--memory`` and ``tsstore console --demo --memory``, and ``--memory`` refused by name by the
commands whose data another process keeps. No emulator."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli import tsstore
from tsstore import AsyncTimeSeriesStore, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.console.server import serve_in_thread
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.errors import ConfigError
from tsstore.memory import MemoryDatabase
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

pytest_plugins = ["pytester"]  # a user's tests, run in this process

SPEC = SeriesSpec("prices", shapes=["symbol"], key_fields=["symbol"])
T0 = dt.datetime(2024, 3, 1, 14, 30, tzinfo=dt.timezone.utc)
TICKS = [{"symbol": "AB"[i % 2], "timestamp": T0 + dt.timedelta(seconds=i), "v": i} for i in range(5)]


def test_the_memory_classmethods_make_stores_on_a_new_database_or_a_shared_one() -> None:
    database = MemoryDatabase()
    with TimeSeriesStore.memory(SPEC, database=database, page_size=3) as store:
        assert store.write(TICKS).created == 5
        assert store.write_options == EMULATOR_WRITE_OPTIONS  # no ramp unless asked
        assert store.client is database
        assert [t.data["v"] for t in store.query(where={"symbol": "A"})] == [4, 2, 0]

    async def shared_then_new() -> tuple[int, int, WriteOptions]:
        async with AsyncTimeSeriesStore.memory(SPEC, database=database) as shared:
            async with AsyncTimeSeriesStore.memory(SPEC, write_options=WriteOptions(ramp=False)) as new:
                return await shared.count(where={"symbol": "B"}), await new.count(), new.write_options

    assert asyncio.run(shared_then_new()) == (2, 0, WriteOptions(ramp=False))
    with TimeSeriesStore.memory(SPEC) as alone:
        assert alone.count() == 0 and isinstance(alone.client, MemoryDatabase) and alone.client is not database
    with pytest.raises(ConfigError, match="page_size"):  # the constructor's options, checked as it checks them
        TimeSeriesStore.memory(SPEC, page_size=0)
    with pytest.raises(TypeError):
        TimeSeriesStore.memory(SPEC, database)  # type: ignore[misc]  # keyword-only


def test_the_fixtures_give_a_store_of_any_series_on_the_tests_own_database(
    tsstore_memory: MemoryDatabase, tsstore_memory_store: Callable[..., TimeSeriesStore]
) -> None:
    store = tsstore_memory_store(SPEC)
    bars = tsstore_memory_store(SeriesSpec("bars"), page_size=2)
    store.write(TICKS)
    bars.write(TICKS[:2])
    assert store.client is bars.client is tsstore_memory
    assert (store.count(), bars.count(), bars.seat.page_size) == (5, 2, 2)
    with TimeSeriesStore.memory(SPEC, database=tsstore_memory) as again:
        assert again.count(where={"symbol": "A"}) == 3


USER_TESTS = '''
import datetime as dt

import pytest

from tsstore import SeriesSpec

SPEC = SeriesSpec("prices")
TICK = {"timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "v": 1}
MADE = []


def test_one(tsstore_memory_store):
    MADE.append(tsstore_memory_store(SPEC))
    MADE[0].write([TICK])
    assert MADE[0].count() == 1


def test_two_starts_empty_and_the_first_tests_store_was_closed(tsstore_memory_store):
    assert tsstore_memory_store(SPEC).count() == 0
    with pytest.raises(RuntimeError, match="after shutdown"):  # its reader threads were stopped
        MADE[0].count()
'''


def test_a_users_tests_get_a_new_database_each_and_their_stores_closed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[MemoryDatabase]:
    """Every memory database a command makes (the command's own, gone with it otherwise)."""
    import tsstore.cli.common

    databases: list[MemoryDatabase] = []

    def recorded() -> MemoryDatabase:
        databases.append(MemoryDatabase())
        return databases[-1]

    monkeypatch.setattr(tsstore.cli.common, "MemoryDatabase", recorded)
    return databases


def test_demo_memory_runs_in_this_process_and_every_count_it_prints_is_the_stores(
    made: list[MemoryDatabase], tmp_path: Path, spans: Any
) -> None:
    chart = tmp_path / "day.png"
    ran = tsstore("demo", "--memory", "--ticks", "300", "--chart", str(chart))
    assert ran.returncode == 0, ran.stderr
    finished = list(spans.get_finished_spans())  # the command is one span, every verb it called under it
    [command] = [span for span in finished if span.parent is None]
    verbs = [span for span in finished if span.parent and span.parent.span_id == command.context.span_id]
    assert command.name == "tsstore demo" and {"write instruments", "aggregate instruments"} <= {v.name for v in verbs}
    assert ran.stderr.startswith("tsstore: using a memory database in this process"), ran.stderr
    assert "the emulator runs" not in ran.stdout  # its note on the emulator's speed is not said here
    (database,) = made
    with TimeSeriesStore(database, DEMO_SPEC) as store:  # type: ignore[arg-type]
        wrote = re.search(r"^wrote ([\d,]+) ticks", ran.stdout, flags=re.M)
        assert wrote is not None and int(wrote[1].replace(",", "")) == store.count() == 303
        per_currency = re.findall(r"^  (\w{3}): +([\d,]+) ticks", ran.stdout, flags=re.M)
        assert len(per_currency) == 4, ran.stdout
        day = dt.datetime(2018, 12, 31, tzinfo=dt.timezone.utc)
        for currency, shown in per_currency:
            counted = store.count(where={"price.currency": currency}, start=day, end=day + dt.timedelta(days=1))
            assert int(shown.replace(",", "")) == counted > 0, currency
    assert f"written to {chart}" in ran.stdout and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_console_demo_memory_serves_the_demos_day_from_this_process(
    made: list[MemoryDatabase], monkeypatch: pytest.MonkeyPatch, spans: Any
) -> None:
    """The command as it runs, with the page's requests sent where the browser would send them
    (the server in a thread of the test instead of until Ctrl-C); each request is a span, the
    verbs it called under it."""
    import tsstore.cli.console as command

    monkeypatch.setattr(command, "DEMO_TICKS", 200)
    answers: dict[str, Any] = {}

    def serve(console: Any, sock: Any, **_: Any) -> None:
        serving = serve_in_thread(console, sock)
        base, token = serving.url.split("?token=")
        try:
            for path, body in (("api/series", None), ("api/query", {"collection": "instruments", "where":
                                                                    "symbol=AAA", "limit": 5})):  # fmt: skip
                data = None if body is None else json.dumps(body).encode()
                asked = urllib.request.Request(base + path, data=data, headers={"X-Tsstore-Token": token})
                with urllib.request.urlopen(asked, timeout=30) as answer:
                    answers[path] = json.load(answer)
        finally:
            serving.stop()

    monkeypatch.setattr(command, "serve_forever", serve)
    ran = tsstore("console", "--demo", "--memory", "--no-browser")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "wrote the demo's 203 ticks to 'instruments'\n"
    (database,) = made
    with TimeSeriesStore(database, DEMO_SPEC) as store:  # type: ignore[arg-type]
        assert answers["api/series"]["series"][0]["count"] == store.count() == 203
        newest = store.query(where={"symbol": "AAA"}, limit=5).ticks
        assert len(answers["api/query"]["rows"]) == len(newest) > 0
    finished = list(spans.get_finished_spans())
    [handler] = [span for span in finished if span.name == "console query"]
    assert handler.attributes["http.route"] == "/api/query"
    assert "query instruments" in [span.name for span in finished if span.parent and span.parent.span_id == handler.context.span_id]


NOT_HERE = "take it: tsstore demo --memory and tsstore console --demo --memory\n"


@pytest.mark.parametrize("args", [
    ("query", "--memory"), ("count", "--where", "symbol=AAA", "--memory"), ("ingest", "ticks.csv", "--memory"),
    ("indexes", "--memory"), ("emulator", "start", "--memory"), ("tail", "--memory"), ("backfill", "--memory"),
], ids=lambda args: args[0])  # fmt: skip
def test_memory_is_refused_by_name_where_the_data_is_another_processs(args: tuple[str, ...]) -> None:
    ran = tsstore(*args)
    assert ran.returncode == 2 and ran.stdout == "", ran
    assert ran.stderr.startswith(f"Error: --memory: tsstore {args[0]} takes no --memory. A memory database lives only "
                                 "in the process") and ran.stderr.endswith(NOT_HERE)  # fmt: skip


def test_memory_before_the_command_says_where_it_goes() -> None:
    ran = tsstore("--memory", "demo")
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == ("Error: --memory is an option of a command, not of tsstore: give it after the command, as "
                          "in tsstore demo --memory or tsstore console --demo --memory\n")  # fmt: skip


@pytest.mark.parametrize(("args", "said"), [
    (("demo", "--memory", "--project", "my-project"), "--memory with --project my-project: "),
    (("demo", "--memory", "--mode", "datastore", "--database", "other"), "--memory with --database other --mode "
                                                                         "datastore: "),
    (("console", "--memory"), "--memory without --demo: "),
], ids=["project", "mode", "console"])  # fmt: skip
def test_memory_with_another_place_or_nothing_to_show_is_a_usage_error(
    made: list[MemoryDatabase], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    import tsstore.cli.console as command

    monkeypatch.setattr(command, "serve_forever", lambda *_, **__: None)  # a console let through ends at once
    ran = tsstore(*args)
    assert ran.returncode == 2 and ran.stderr.startswith("Error: " + said), ran
    assert made == []  # refused before a database is made
