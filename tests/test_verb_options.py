"""The census of the verbs' keyword options: every option of every public query and write verb
of both stores, given a value of the wrong type, a value out of its range and an unknown name,
is refused before anything is read or written, with a usage error naming the value.

No emulator: the stores' clients never connect, and each store's one way to Firestore (the
ask its driver answers) says so instead, so an option that reaches Firestore unchecked fails
its case (as one refused later with Python's own error does). A write's documents are
prepared at that point, as its job would prepare them, so a record option is checked too.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import firestore

from tsstore import AsyncTimeSeriesStore, QueryShape, SeriesSpec, TimeSeriesStore
from tsstore.errors import UsageError
from tsstore.verbs.request import Send

UTC = dt.timezone.utc
T = dt.datetime(2019, 1, 2, 9, tzinfo=UTC)
NAIVE = dt.datetime(2019, 1, 2, 9)
SPEC = SeriesSpec("t", key_fields=["symbol"], shapes=["symbol", QueryShape([], ranges=["v"])], measures=["p"],
                  columns={"symbol": "string", "p": "Int64", "v": "Int64"})  # fmt: skip


class Reached(Exception):
    """The verb asked Firestore: nothing refused the option before."""


def reach(ask: Any) -> Any:
    if isinstance(ask, Send):  # the job would prepare the documents first
        list(ask.making.docs(iter(())))
    raise Reached(repr(ask)[:200])


class SyncStore(TimeSeriesStore):
    def _answer(self, ask: Any) -> Any:
        return reach(ask)

    def _ticks(self, read: Any) -> Any:
        return reach(read)


class AsyncStore(AsyncTimeSeriesStore):
    async def _answer(self, ask: Any) -> Any:
        return reach(ask)

    def _ticks(self, read: Any) -> Any:
        return reach(read)


#: The query and write verbs, and the options each needs besides the one tried.
VERBS: dict[str, dict[str, Any]] = {
    "query": {}, "iter_ticks": {}, "query_frame": {}, "query_table": {}, "stream_frames": {},
    "stream_batches": {}, "count": {}, "aggregate": {}, "explain_aggregate": {"rollups": []},
    "latest": {"by": "symbol", "values": ["A"]}, "bars": {"interval": "1h", "price": "p"},
    "aligned": {"interval": "1h", "by": "symbol", "price": "p"}, "asof": {}, "iter_asof": {},
    "write": {}, "purge": {"before": T}, "plan": {}, "explain": {}, "seal": {}, "cold_sql": {},
    "verify_cold": {}, "cold_status": {}, "cold_bigquery": {},
}  # fmt: skip
#: What each verb takes positionally (a write: its records).
POSITIONAL: dict[str, tuple[Any, ...]] = {"write": ([{"symbol": "A", "timestamp": T, "p": 1}],),
                                          "cold_bigquery": ("analytics.ticks",)}  # fmt: skip

#: A value of the wrong type for every option of those verbs.
WRONG_TYPE: dict[str, Any] = {
    "where": 5, "start": 5, "end": 5, "before": 5, "origin": 5, "read_time": "2019-01-02T09:00:00Z",
    "direction": 5, "limit": "5", "columns": 5, "cursor": 5, "rows": "5", "stats": "x", "count": "yes",
    "sum": 5, "avg": 5, "min": 5, "max": 5, "std": 5, "rollups": "name", "by": 5, "values": 5,
    "interval": [1], "price": 5, "volume": 5, "tz": 5, "fill": 5, "moments": "yes", "combine": "yes", "value": 5,
    "right_spec": "quotes", "tolerance": [1], "allow_exact_matches": "yes", "prefix": 5, "ids": "yes",
    "naive": 5, "on_duplicate": 5, "on_progress": "x", "on_reject": "x", "on_written": "x", "on_status": "x",
    "skip_first": "5", "keep_ids": "yes", "dry_run": "yes", "past_rollups": "yes", "correct": "yes", "until": 5,
    "name": 5,
}  # fmt: skip
#: A value of the right type out of what the option allows, where the option has a range.
OUT_OF_RANGE: dict[str, Any] = {
    "where": {"symbol": []}, "start": NAIVE, "end": NAIVE, "before": NAIVE, "read_time": NAIVE,
    "direction": "sideways", "limit": 0, "columns": ["nosuch"], "cursor": "garbage", "rows": 0,
    "sum": ["nosuch"], "avg": ["nosuch"], "min": ["nosuch"], "max": ["nosuch"], "std": ["nosuch"],
    "by": "nosuch", "values": [], "interval": "-1min", "price": "nosuch", "volume": "nosuch", "tz": "Mars/Base",
    "origin": "25:00", "fill": "sideways", "value": "nosuch", "tolerance": "-5s", "prefix": "",
    "naive": "Mars/Olympus", "on_duplicate": "merge", "skip_first": -1, "until": NAIVE, "name": " ",
}  # fmt: skip


def options_of(verb: str) -> list[str]:
    """The keyword options of ``verb`` as the store's signature shows them (plan and explain
    take the query's)."""
    shown = TimeSeriesStore.query if verb in ("plan", "explain") else getattr(TimeSeriesStore, verb)
    return [p.name for p in inspect.signature(shown).parameters.values() if p.kind is p.KEYWORD_ONLY]


def doors() -> list[tuple[str, str, str, Any]]:
    found = []
    for verb in VERBS:
        for option in options_of(verb):
            found.append((verb, "wrong type", option, WRONG_TYPE[option]))
            if option in OUT_OF_RANGE:
                found.append((verb, "out of range", option, OUT_OF_RANGE[option]))
        found.append((verb, "unknown name", "nosuch", 1))
    return found


DOORS = doors()


def named(value: Any) -> list[str]:
    """The ways a message may name ``value``."""
    ways = [repr(value), str(value)]
    if isinstance(value, dt.datetime):
        ways.append(value.isoformat())
    if isinstance(value, list) and value:
        ways.append(str(value[0]))
    if isinstance(value, dict):  # {"symbol": []}: the field and its empty list
        ways.extend(f"{field!r} has no values" for field in value)
    if value == []:
        ways.append("is empty")
    return ways


def sync_call(verb: str, kwargs: dict[str, Any]) -> None:
    store = SyncStore(firestore.Client(project="census", credentials=AnonymousCredentials()), SPEC)
    try:
        result = getattr(store, verb)(*POSITIONAL.get(verb, ()), **kwargs)
        if hasattr(result, "__next__"):
            next(result)
    finally:
        store.close()


def async_call(verb: str, kwargs: dict[str, Any]) -> None:
    async def main() -> None:
        client = firestore.AsyncClient(project="census", credentials=AnonymousCredentials())
        store = AsyncStore(client, SPEC)
        try:
            result = getattr(store, verb)(*POSITIONAL.get(verb, ()), **kwargs)
            if hasattr(result, "__anext__"):
                await anext(result)
            elif inspect.isawaitable(result):
                await result
        finally:
            store.close()

    asyncio.run(main())


@pytest.mark.parametrize("call", [sync_call, async_call], ids=["sync", "async"])
@pytest.mark.parametrize(("verb", "kind", "option", "value"), DOORS, ids=[f"{d[0]} {d[1]} {d[2]}" for d in DOORS])
def test_every_option_of_every_verb_is_refused_before_firestore_naming_the_value(
    call: Any, verb: str, kind: str, option: str, value: Any
) -> None:
    needs = {} if verb == "purge" and option in ("start", "end") else VERBS[verb]  # purge: before or a range
    kwargs = {**needs, option: value}
    with pytest.raises(UsageError) as refused:
        call(verb, kwargs)
    message = str(refused.value)
    assert any(way in message for way in named(option if kind == "unknown name" else value)), message
    assert len(message) < 400 and "\n" not in message, message


def test_the_census_has_a_wrong_value_for_every_option_and_counts_its_doors() -> None:
    """A new option joins the census (its wrong value), and the numbers the report gives stay true."""
    every = {option for verb in VERBS for option in options_of(verb)}
    assert every <= set(WRONG_TYPE), every - set(WRONG_TYPE)
    assert (len(VERBS), len(DOORS)) == (23, 313)


def test_the_library_and_the_command_line_check_columns_with_one_check() -> None:
    """A declared field, a map holding declared fields, tsstore's shard and expiry fields are
    columns; a name the declaration does not know is refused in the same words, the command
    line naming its option."""
    from tsstore.typed import parse_columns

    spec = SeriesSpec("t", columns={"symbol": "string", "price.micros": "Int64"}, expire_after=dt.timedelta(days=1))
    spec.check_columns(["symbol", "price", "price.micros", "shard", "expireAt"])
    declared = r"not declared in 't' \(declared: price.micros, symbol, timestamp\)$"
    with pytest.raises(UsageError, match=rf"^columns nosuch: {declared}"):
        spec.check_columns(["symbol", "nosuch"])
    with pytest.raises(UsageError, match=rf"^--columns nosuch: {declared}"):
        parse_columns("symbol,nosuch", spec=spec)
    with pytest.raises(UsageError, match=r"^columns expireAt: not declared"):
        SeriesSpec("t", columns={"symbol": "string"}).check_columns(["expireAt"])  # no expiry declared


def test_a_where_field_named_as_an_option_stays_the_field_in_the_command_line_words() -> None:
    """A refused ``--where`` item quotes what was typed, so the command line's rewording of
    keywords into options (``limit=5`` is ``--limit 5``) leaves a field that shares an
    option's name as the user wrote it."""
    from tsstore.cli.exits import speak_cli
    from tsstore.cli.query import query_ticks as query
    from tsstore.typed import parse_where

    spec = SeriesSpec("t", columns={"limit": "Int64", "live": "boolean"})
    for item, said in (("limit=abc", "limit is declared Int64"), ("live=maybe", "live is declared boolean")):
        with pytest.raises(UsageError) as refused:
            parse_where((item,), spec=spec)
        assert speak_cli(str(refused.value), query).startswith(f"--where {item!r}: {said}")
    with pytest.raises(UsageError) as refused:
        parse_where(("shard=3",), spec=spec)
    assert speak_cli(str(refused.value), query).startswith("--where 'shard=3': 'shard' is tsstore's shard field")
