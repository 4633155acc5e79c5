"""The spans and metrics a store's verbs give OpenTelemetry, read back through the SDK's in-memory
exporter and reader: one span per verb call whose figures are the call's ``ReadStats`` and what
went over the wire (the chunk queries the backend was asked to send and the documents they
returned), child spans for rounds, database asks, commits and retries, on both stores in both
database modes and on the memory database."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import firestore
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.shared import MEMORY, MODES, NATIVE, mode_client
from tsstore import AsyncTimeSeriesStore, SeriesSpec, TimeSeriesStore, logs, telemetry
from tsstore.asks import GetDoc
from tsstore.cold_tier import ColdTier
from tsstore.demo import BARS_1MIN, SPEC, demo_rows
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.verbs import Verbs, declare
from tsstore.verbs.reading import CLOCK_PROBE_ID
from tsstore.verbs.request import Aggregate, Count, Documents
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
TICKS = 700  # the demo's day's first ticks: two batches of writes


class Wire:
    """What a store's backend was asked to send: chunk queries (each fetch), counts, aggregations
    and census reads, and reads of the server's time; and the documents they returned."""

    def __init__(self) -> None:
        self.queries = 0
        self.documents = 0

    def tap(self, backend: Any) -> None:
        """Count every query ``backend`` (a sync backend, or Native mode's async one) sends."""
        fetcher, answer = backend.fetcher, backend.answer
        if inspect.iscoroutinefunction(answer):
            backend.fetcher = lambda plan: self._afetch(fetcher(plan))
            backend.answer = self._aanswer(answer)
        else:
            backend.fetcher = lambda plan: self._fetch(fetcher(plan))
            backend.answer = self._answer(answer)

    def _fetch(self, fetch: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def fetched(*args: Any) -> Iterator[Any]:
            self.queries += 1
            for tick in fetch(*args):
                self.documents += 1
                yield tick

        return fetched

    def _afetch(self, fetch: Callable[..., Any]) -> Callable[..., Any]:
        async def fetched(*args: Any) -> AsyncIterator[Any]:
            ticks = await fetch(*args)
            self.queries += 1

            async def counted() -> AsyncIterator[Any]:
                async for tick in ticks:
                    self.documents += 1
                    yield tick

            return counted()

        return fetched

    def _sent(self, ask: Any, answer: Any) -> None:
        if isinstance(ask, (Count, Aggregate)) or (isinstance(ask, GetDoc) and ask.path.endswith(CLOCK_PROBE_ID)):
            self.queries += 1
        elif isinstance(ask, Documents):
            self.queries += 1
            self.documents += len(answer)

    def _answer(self, answer: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def answered(ask: Any) -> Any:
            got = answer(ask)
            self._sent(ask, got)
            return got

        return answered

    def _aanswer(self, answer: Callable[[Any], Any]) -> Callable[[Any], Any]:
        async def answered(ask: Any) -> Any:
            got = await answer(ask)
            self._sent(ask, got)
            return got

        return answered


def wire_of(store: Any) -> Wire:
    wire = Wire()
    backend = store._backend
    wire.tap(getattr(backend, "_backend", backend))  # a sync backend in threads: the one it calls
    return wire


#: Each read verb as a test calls it: its name, arguments and options (and a new ``stats`` if it takes one);
#: the async store's call is the same, awaited (or iterated with ``async for``).
READS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("query", (), {"limit": 40, "where": {"symbol": "AAA"}}),
    ("query", (), {"limit": 300}),
    ("iter_ticks", (), {"where": {"symbol": ["AAA", "BBB"]}}),
    ("stream_frames", (), {"rows": 100}),
    ("query_frame", (), {"limit": 120}),
    ("count", (), {"where": {"exchange": "EXCHG1"}}),
    ("aggregate", (), {"sum": ["volume"], "where": {"symbol": "AAA"}}),
    ("latest", (), {"by": "symbol", "values": ["AAA", "BBB"]}),
    ("bars", (), {"interval": "1h", "price": "price.micros", "volume": "volume"}),
    ("aligned", (), {"interval": "1h", "by": "symbol", "price": "price.micros", "where": {"symbol": ["AAA", "BBB"]}}),
    ("asof", (Query(where={"symbol": "AAA"}), Query(where={"symbol": "BBB"})), {}),
    ("query_table", (), {"limit": 50}),
    ("query_polars", (), {"limit": 30}),
    ("iter_asof", (Query(where={"symbol": "AAA"}), Query(where={"symbol": "BBB"})), {}),
    ("server_time", (), {}),
    ("stream_batches", (), {"rows": 100}),
    ("shard_census", (), {}),
    ("purge", (), {"end": "2018-12-31T09:00:00Z", "dry_run": True}),
    ("rollup", (BARS_1MIN,), {}),
    ("verify_rollup", (BARS_1MIN,), {}),
    ("rollup_coverage", (BARS_1MIN,), {}),
    ("explain_aggregate", (), {"rollups": [BARS_1MIN]}),
]
#: Verbs whose ReadStats also count documents of tsstore's own (a tier's manifest, late marks),
#: which :class:`Wire` leaves out: their spans are held to their ReadStats alone.
OWN_DOCUMENTS = {"explain_aggregate", "explain_bars"}


def _stats_of(result: Any, given: ReadStats | None) -> ReadStats | None:
    """What the call returned it cost: the stats it was given, or its result's (a page's, a stream's)."""
    if given is not None:
        return given
    return getattr(result, "stats", None)


def _given(verb: Any, options: dict[str, Any]) -> tuple[dict[str, Any], ReadStats | None]:
    """``options`` with a new ``stats`` when ``verb`` takes one (then given back too)."""
    if "stats" not in inspect.signature(verb).parameters:
        return options, None
    given = ReadStats()
    return {**options, "stats": given}, given


def _call_sync(
    store: TimeSeriesStore, name: str, args: tuple[Any, ...], options: dict[str, Any]
) -> tuple[Any, ReadStats | None]:
    verb = getattr(store, name)
    options, given = _given(verb, options)
    result = verb(*args, **options)
    if isinstance(result, declare.TickStream):
        list(result)
    return result, _stats_of(result, given)


async def _call_async(
    store: AsyncTimeSeriesStore, name: str, args: tuple[Any, ...], options: dict[str, Any]
) -> tuple[Any, ReadStats | None]:
    verb = getattr(store, name)
    options, given = _given(verb, options)
    result = verb(*args, **options)
    if isinstance(result, declare.AsyncTickStream):
        [item async for item in result]
    else:
        result = await result
    return result, _stats_of(result, given)


async def _call(store: Any, name: str, args: tuple[Any, ...], options: dict[str, Any]) -> tuple[Any, ReadStats | None]:
    """:func:`_call_sync` or :func:`_call_async`, by the store."""
    if isinstance(store, AsyncTimeSeriesStore):
        return await _call_async(store, name, args, options)
    return _call_sync(store, name, args, options)


STORES = pytest.mark.parametrize("driver", ["sync", "async"])


def _store(driver: str, request: pytest.FixtureRequest, client: Any, spec: SeriesSpec, database_id: str) -> Any:
    """The store of ``driver`` on ``client``'s database (Native mode's async store on an AsyncClient)."""
    if driver == "sync":
        return TimeSeriesStore(client, spec, write_options=EMULATOR_WRITE_OPTIONS)
    if isinstance(client, firestore.Client):
        client = request.getfixturevalue("emulator").async_client(database=database_id)
    return AsyncTimeSeriesStore(client, spec, write_options=EMULATOR_WRITE_OPTIONS)


def _root(spans: list[ReadableSpan]) -> ReadableSpan:
    [root] = [span for span in spans if span.parent is None]
    return root


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [span for span in spans if span.parent is not None and span.parent.span_id == parent.context.span_id]


def _check_read(
    name: str, spans: list[ReadableSpan], stats: ReadStats | None, wire: Wire | None, mode: str,
    collection: str = SPEC.collection,
) -> None:
    root = _root(spans)
    attributes = dict(root.attributes or {})
    assert root.name == f"{name} {collection}"
    assert attributes["db.operation.name"] == name and attributes["db.collection.name"] == collection
    system = {"native": "gcp.firestore", "datastore": "gcp.firestore", "memory": "tsstore.memory"}[mode]
    assert attributes["db.system.name"] == system and attributes["tsstore.mode"] == mode
    figures = {field: attributes[f"tsstore.{field}"] for field in telemetry.READ_ATTRIBUTES}
    if stats is not None:  # the call returned what it cost: the span says the same
        assert figures == {field: getattr(stats, field) for field in telemetry.READ_ATTRIBUTES}
    if wire is None:  # its ReadStats count documents of tsstore's own (OWN_DOCUMENTS), which this wire leaves out
        return
    assert (figures["queries"], figures["documents"]) == (wire.queries, wire.documents)
    assert attributes["db.response.returned_rows"] == wire.documents
    assert figures["billed_reads"] >= max(figures["queries"], figures["documents"])
    rounds = [span for span in _children(spans, root) if span.name == "tsstore.round"]
    if rounds:  # a page's rounds: chunk queries the wire sent (with streams' and the server's time's beside them)
        assert 0 < sum(r.attributes["tsstore.queries"] for r in rounds) <= wire.queries - _asked(spans, root)
        assert sum(r.attributes["tsstore.documents"] for r in rounds) <= wire.documents


def _asked(spans: list[ReadableSpan], root: ReadableSpan) -> int:
    """The counts, aggregations and census reads under ``root`` (each its own child span)."""
    asks = ("tsstore.count", "tsstore.aggregate", "tsstore.documents")
    return sum(span.name in asks for span in _children(spans, root))


def _rows() -> list[dict[str, Any]]:
    """The demo's first :data:`TICKS` ticks (every one distinct)."""
    return list(demo_rows(TICKS))[:TICKS]


@pytest.mark.parametrize("mode", MODES)
def test_each_read_verbs_span_of_the_sync_store_is_its_read_stats_and_the_wire(
    mode: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter, database_id: str
) -> None:
    store = TimeSeriesStore(mode_client(request, mode, database_id), SPEC, write_options=EMULATOR_WRITE_OPTIONS)
    written = store.write(_rows())
    [write_span] = [span for span in spans.get_finished_spans() if span.parent is None]
    assert write_span.name == f"write {SPEC.collection}"
    assert write_span.attributes["tsstore.ticks.created"] == written.created == TICKS
    commits = [span for span in spans.get_finished_spans() if span.name == "tsstore.commit"]
    assert commits and all(span.parent.span_id == write_span.context.span_id for span in commits)
    assert sum(span.attributes["tsstore.writes"] for span in commits) >= TICKS  # every tick sent, a retry again
    for name, args, options in READS:
        spans.clear()
        wire = wire_of(store)
        _, stats = _call_sync(store, name, args, options)
        _check_read(name, list(spans.get_finished_spans()), stats, None if name in OWN_DOCUMENTS else wire, mode)
    bars = TimeSeriesStore(store.client, BARS_1MIN.spec)  # rolled up above: where its bars come from
    spans.clear()
    _, stats = _call_sync(bars, "explain_bars", (), {"interval": "1h"})
    _check_read("explain_bars", list(spans.get_finished_spans()), stats, None, mode, BARS_1MIN.spec.collection)


@pytest.mark.parametrize("mode", MODES)
def test_each_read_verbs_span_of_the_async_store_is_its_read_stats_and_the_wire(
    mode: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter, database_id: str
) -> None:
    client = mode_client(request, mode, database_id)
    if mode == "native":
        client = request.getfixturevalue("emulator").async_client(database=database_id)

    async def story() -> None:
        async with AsyncTimeSeriesStore(client, SPEC, write_options=EMULATOR_WRITE_OPTIONS) as store:
            written = await store.write(_rows())
            [write] = [span for span in spans.get_finished_spans() if span.parent is None]
            assert write.attributes["tsstore.ticks.created"] == written.created == TICKS
            assert any(span.name == "tsstore.commit" for span in spans.get_finished_spans())
            for name, args, options in READS:
                spans.clear()
                wire = wire_of(store)
                _, stats = await _call_async(store, name, args, options)
                sent = None if name in OWN_DOCUMENTS else wire
                _check_read(name, list(spans.get_finished_spans()), stats, sent, mode)
        async with AsyncTimeSeriesStore(client, BARS_1MIN.spec) as bars:  # rolled up above
            spans.clear()
            _, stats = await _call_async(bars, "explain_bars", (), {"interval": "1h"})
            _check_read("explain_bars", list(spans.get_finished_spans()), stats, None, mode, BARS_1MIN.spec.collection)

    asyncio.run(story())


def test_a_stream_dropped_before_its_end_ends_its_span_with_what_it_read(spans: InMemorySpanExporter) -> None:
    store = TimeSeriesStore.memory(SPEC)
    store.write(_rows())
    spans.clear()
    stream = store.iter_ticks()
    next(stream)
    assert not [span for span in spans.get_finished_spans() if span.parent is None]  # still reading
    stats = stream.stats
    del stream
    root = _root(list(spans.get_finished_spans()))
    assert root.attributes["tsstore.documents"] == stats.documents > 0


def test_a_failing_verb_ends_its_span_with_the_error(spans: InMemorySpanExporter) -> None:
    store = TimeSeriesStore.memory(SPEC)
    with pytest.raises(Exception) as raised:
        store.query(where={"nosuchfield": 1})
    root = _root(list(spans.get_finished_spans()))
    assert root.attributes["error.type"] == type(raised.value).__qualname__
    assert root.status.status_code.name == "ERROR"


def test_a_retry_after_a_fault_is_a_span_under_the_verbs(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TimeSeriesStore.memory(SPEC)
    store.write(_rows())
    answer, failed = store._backend.answer, []

    def flaky(ask: Any) -> Any:
        if isinstance(ask, Count) and not failed:
            failed.append(ask)
            raise gexc.ServiceUnavailable("Socket closed")
        return answer(ask)

    monkeypatch.setattr(store._backend, "answer", flaky)
    monkeypatch.setattr("tsstore.faults.time.sleep", lambda seconds: None)
    spans.clear()
    assert store.count() == TICKS
    finished = list(spans.get_finished_spans())
    root = _root(finished)
    counts = {span.context.span_id for span in _children(finished, root) if span.name == "tsstore.count"}
    [retry] = [span for span in finished if span.name == "tsstore.retry"]
    assert retry.parent.span_id in counts and retry.attributes["error.type"] == "UNAVAILABLE"  # as the logs say it


def test_every_public_verb_of_both_stores_is_declared_so_each_call_opens_a_span() -> None:
    """A verb is a descriptor of :mod:`tsstore.verbs.declare`, which opens its call's span: a public
    method of a store that is not one would go untraced."""
    offline = {"plan", "explain", "firestore_queries"}  # what a query would send: no call to trace
    public = {name for name in dir(TimeSeriesStore) if not name.startswith("_")} - {"close", "memory", *offline}
    declared = {name for name in public if isinstance(inspect.getattr_static(Verbs, name, None), declare._Declared)}
    undeclared = sorted(public - declared)
    assert undeclared == []


def test_a_verbs_call_is_measured_by_the_metrics(metric_points: Callable[[], dict[tuple[str, str], Any]]) -> None:
    store = TimeSeriesStore.memory(SPEC)
    store.write(_rows())
    page = store.query(limit=25)
    points = metric_points()
    assert points[("tsstore.ticks.written", "write")].value == TICKS
    assert points[("tsstore.billed_reads", "query")].value == page.stats.billed_reads
    assert points[("tsstore.documents", "query")].value == page.stats.documents
    assert points[("db.client.operation.duration", "query")].count == 1


def test_the_reference_names_every_span_attribute_and_instrument() -> None:
    """docs/reference/telemetry.md lists each span, attribute and instrument the code makes (found
    in the code: the instruments, the figures, and every name given to a span or an attribute)."""
    reference = (ROOT / "docs" / "reference" / "telemetry.md").read_text()
    instruments = {value._name for value in vars(telemetry._now).values() if hasattr(value, "_unit")}
    fields = {value for name, value in vars(logs).items() if name.isupper() and isinstance(value, str)}
    names = {*instruments, *(f"tsstore.{name}" for name in telemetry.READ_ATTRIBUTES),
             *(f"tsstore.ticks.{name}" for name in telemetry.WRITE_ATTRIBUTES), *fields}  # fmt: skip
    for path in (ROOT / "tsstore").rglob("*.py"):
        code = path.read_text()
        names |= {f"tsstore.{name}" for name in re.findall(r'telemetry\.child\("(\w+)"', code)}
        if "telemetry" in code:  # the names given to attributes where spans are made
            names |= set(re.findall(r'"((?:tsstore|db|error)\.[a-z_]+(?:\.[a-z_]+)*)"[:,]', code))
    assert len(names) > 30
    assert sorted(name for name in names if f"`{name}`" not in reference) == []


def test_configure_without_providers_puts_tsstore_back_on_the_global_ones(spans: InMemorySpanExporter) -> None:
    store = TimeSeriesStore.memory(SPEC)
    store.count()
    assert [span.name for span in spans.get_finished_spans() if span.parent is None] == [f"count {SPEC.collection}"]
    telemetry.configure()  # the global providers: none configured in the tests, so nothing recorded
    store.count()
    assert [span.name for span in spans.get_finished_spans() if span.parent is None] == [f"count {SPEC.collection}"]


#: The verbs of a series with a cold tier and series counters, after a write, in this order:
#: sealing (planned, then done), looking at what is sealed, a read across the seam, a series'
#: counter, a reshard; each as :data:`READS`' are (not cold_bigquery: it wants a bucket, gs://).
SEALED: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("seal_plan", (), {"until": "2019-01-01T00:00:00Z"}),
    ("seal", (), {"until": "2019-01-01T00:00:00Z"}),
    ("cold_status", (), {}),
    ("verify_cold", (), {}),
    ("cold_sql", (), {}),
    ("query", (), {"limit": 150, "start": "2018-12-31T00:00:00Z"}),
    ("series_counter", ({"symbol": "AAA"},), {}),
    ("reshard", (), {}),
]


@STORES
@pytest.mark.parametrize("mode", MODES)
def test_the_cold_tier_counter_and_reshard_verbs_spans_are_their_read_stats_and_the_wire(
    mode: str, driver: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter, database_id: str,
    tmp_path: Path,
) -> None:
    spec = _tiered(tmp_path / "lake", count_by=["symbol"])
    client = mode_client(request, mode, database_id)
    TimeSeriesStore(client, spec, write_options=EMULATOR_WRITE_OPTIONS).write(_rows())
    read_objects = 0

    async def story() -> None:
        nonlocal read_objects
        store = _store(driver, request, client, spec, database_id)
        for name, args, options in SEALED:
            spans.clear()
            wire = wire_of(store)
            _, stats = await _call(store, name, args, options)
            sent = None if name == "query" else wire  # a read across the seam counts the tiers' own documents
            _check_read(name, list(spans.get_finished_spans()), stats, sent, mode)
            read_objects += _root(list(spans.get_finished_spans())).attributes["tsstore.objects"]
        store.close()

    asyncio.run(story())
    assert read_objects > 0  # the read across the seam read sealed partitions: the span says so


def _tiered(path: Any, **options: Any) -> SeriesSpec:
    """The demo's series with a cold tier at ``path``."""
    return SeriesSpec("instruments", key_fields=["symbol"], shapes=SPEC.shapes, columns=SPEC.columns,
                      measures=SPEC.measures, cold=ColdTier(path), **options)  # fmt: skip


@pytest.mark.parametrize("mode", [NATIVE, MEMORY])  # Datastore mode has no listeners: refused by name
def test_a_live_verbs_span_is_its_start_its_reads_the_wires(
    mode: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter, database_id: str
) -> None:
    """A live verb's span lasts while its listeners start (what it reads then: a tail's read of
    the server's time, when not told where to begin), on the async store when they start (at
    ``async with``); the updates come after, outside it."""
    client = mode_client(request, mode, database_id)
    store = TimeSeriesStore(client, SPEC, write_options=EMULATOR_WRITE_OPTIONS)
    store.write(_rows())
    for name, options in (("watch", {"limit": 5}), ("tail", {})):
        spans.clear()
        wire = wire_of(store)
        with getattr(store, name)(**options):
            _check_read(name, list(spans.get_finished_spans()), None, wire, mode)
    if mode == "native":
        client = request.getfixturevalue("emulator").async_client(database=database_id)

    async def story() -> None:
        async with AsyncTimeSeriesStore(client, SPEC) as live_store:
            for name, options in (("watch", {"limit": 5}), ("tail", {})):
                spans.clear()
                wire = wire_of(live_store)
                opened = getattr(live_store, name)(**options)
                assert not spans.get_finished_spans()  # nothing started yet
                async with opened:
                    _check_read(name, list(spans.get_finished_spans()), None, wire, mode)
                    assert name == "watch" or wire.queries == 1  # a tail read the server's time in its span

    asyncio.run(story())


@STORES
@pytest.mark.parametrize("mode", MODES)
def test_a_seal_in_parts_and_one_chunks_stream_are_spans_of_their_read_stats_and_the_wire(
    mode: str, driver: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter, database_id: str,
    tmp_path: Path,
) -> None:
    """The verbs a Beam pipeline runs in parts: a seal's partitions and its switch, a chunk's stream."""
    spec = _tiered(tmp_path / "lake")
    client = mode_client(request, mode, database_id)
    TimeSeriesStore(client, spec, write_options=EMULATOR_WRITE_OPTIONS).write(_rows())

    async def story() -> None:
        store = _store(driver, request, client, spec, database_id)
        sealing, _ = await _call(store, "seal_plan", (), {"until": "2019-01-01T00:00:00Z"})
        plan = store.plan(limit=40)
        written = []
        for name, args, options in [*(("seal_partition", (unit,), {"sealing": sealing}) for unit in sealing.units),
                                    ("stream_chunk", (plan, plan.chunks[0]), {"read_time": None}),
                                    ("seal_switch", (sealing, written), {})]:  # fmt: skip
            spans.clear()
            wire = wire_of(store)
            result, stats = await _call(store, name, args, options)
            _check_read(name, list(spans.get_finished_spans()), stats, wire, mode)
            if name == "seal_partition":
                written.append((args[0], result))
        assert written and result.sealed  # the switch's
        store.close()

    asyncio.run(story())


@STORES
def test_the_bigquery_recipe_of_a_bucket_is_a_span_that_reads_no_document(
    driver: str, request: pytest.FixtureRequest, spans: InMemorySpanExporter, gcs_bucket: str
) -> None:
    """``cold_bigquery`` (a tier in a bucket, fake-gcs-server here) reads the manifest's object
    and no document: its span says so, as the wire does."""
    spec = _tiered(f"gs://{gcs_bucket}/lake")
    sealer = TimeSeriesStore.memory(spec)
    sealer.write(_rows())
    sealer.seal(until="2019-01-01T00:00:00Z")

    async def story() -> None:
        store = _store(driver, request, sealer.client, spec, "")
        spans.clear()
        wire = wire_of(store)
        await _call(store, "cold_bigquery", ("project.dataset.ticks",), {})
        _check_read("cold_bigquery", list(spans.get_finished_spans()), None, wire, "memory")

    asyncio.run(story())
