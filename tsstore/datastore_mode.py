"""How the sync store answers in Firestore's Datastore mode (a module of its own:
``google-cloud-datastore`` is an extra, imported only for a ``datastore.Client``): the asks
that touch the database (counts and aggregations, a census's documents, document asks, chunk
fetches, bulk sends) on :mod:`tsstore.dswire`'s calls, a writer's side, and the words that
refuse what Datastore mode does not have (real-time listeners)."""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from tsstore.asks import Doc, DocAsk
from tsstore.census_asks import Ask
from tsstore.clock import ServerClock
from tsstore.dswire import kinds, queries
from tsstore.dswire.calls import DatastoreCalls, DatastoreHorizons, answer_document, read_ticks, transport
from tsstore.dswire.values import decode_entity, key_path
from tsstore.errors import ModeError
from tsstore.live.listen import Listen
from tsstore.databases import DatastoreKind
from tsstore.read.chunks import ChunkTicks
from tsstore.read.engine import Fetch
from tsstore.read.merge import merge_streams, take
from tsstore.read.plan import QueryPlan
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position, Tick
from tsstore.verbs.reading import clock_probe
from tsstore.verbs.request import Aggregate, Count, Over
from tsstore.write.marks import LateGuard
from tsstore.write.ops import Transport


LIVE_REFUSED = (
    "live reads (watch, tail) need Firestore's real-time listeners, which Datastore mode does not have; poll with "
    "iter_ticks(start=the last tick's time) on a timer, or keep the series in a Native-mode database"
)


class DatastoreSide:
    """A Datastore-mode writer's side."""

    def __init__(self, calls: DatastoreCalls) -> None:
        self._calls = calls

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        horizons = DatastoreHorizons(self._calls, spec.collection, lease=uuid.uuid4().hex)
        return LateGuard(spec, horizons)

    def counters(self, spec: SeriesSpec) -> SeriesCounters:
        return SeriesCounters(spec, answer=functools.partial(answer_document, self._calls))

    def probe(self, spec: SeriesSpec) -> None:
        answer_document(self._calls, clock_probe(spec))

    def clock(self) -> ServerClock:
        return self._calls.clock


class DatastoreAnswers:
    """The sync store's answers in Datastore mode, on a ``datastore.Client``, for the store of
    ``spec``."""

    def __init__(self, client: Any, spec: SeriesSpec) -> None:
        self.calls, self._spec = DatastoreCalls(client), spec
        self.side = DatastoreSide(self.calls)
        self.clock: ServerClock = self.calls.clock

    def collection(self, spec: SeriesSpec) -> DatastoreKind:
        """What the requests of ``spec`` hold as their collection: its kind's name."""
        return DatastoreKind(spec.collection)

    def listener(self) -> Listen:
        """Refused: Datastore mode has no real-time listeners (:data:`LIVE_REFUSED`)."""
        raise ModeError(LIVE_REFUSED)

    def aggregate(self, ask: Count | Aggregate, values: Sequence[str]) -> Any:
        """The count, or ``{alias: value}``, of ``ask`` over ``values``: over a plan with value
        filters, the sum of its variants' (:mod:`tsstore.dswire.kinds`; an average weighted by
        each variant's count)."""
        over = ask.over
        split = kinds.variants(over.plan) if isinstance(over, ChunkTicks) else None
        wanted = [("count", "n", None)] if isinstance(ask, Count) else list(ask.aggregations)
        if split is not None:
            wanted.append(("count", "_n", None))
        answers = [self.calls.aggregate(query, wanted, ask.read_time) for query in self._queries(over, values, split)]
        if isinstance(ask, Count):
            return sum(int(answer["n"] or 0) for answer in answers)
        if split is None:
            [answer] = answers
            return answer
        combined: dict[str, Any] = {}
        for kind, alias, _ in ask.aggregations:
            got = [(answer[alias], int(answer["_n"] or 0)) for answer in answers if answer[alias] is not None]
            if kind == "avg":
                weight = sum(n for _, n in got)
                combined[alias] = sum(value * n for value, n in got) / weight if weight else None
            else:
                combined[alias] = sum(value for value, _ in got)
        return combined

    def documents(self, over: Over, read_time: dt.datetime | None) -> list[Doc]:
        """The documents of a census ask that names them (:class:`~tsstore.layout.census.FirstValue`)."""
        assert not isinstance(over, ChunkTicks)
        spec = self._spec
        [query] = self._queries(over, (), None)
        found, read = self.calls.collect(query, read_time=read_time, mask=[spec.shard_field])
        return [Doc(key_path(r.entity.key).rsplit("/", 1)[-1], decode_entity(r.entity), None, read) for r in found]

    def answer_document(self, ask: DocAsk) -> Any:
        return answer_document(self.calls, ask)

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The engine's fetch of ``plan``'s chunks (:data:`~tsstore.read.engine.Fetch`)."""
        spec, where = plan.spec, self.calls.where
        mask = list(plan.columns) if plan.columns is not None else None

        split = kinds.variants(plan)

        def one(chunk: tuple[str, ...], after: Position | None, limit: int | None, read_time: dt.datetime | None,
                variant: kinds.Variant | None) -> Iterator[Tick]:  # fmt: skip
            asked = [queries.chunk_query(where, plan, chunk, variant=variant)] if after is None else queries.continued(
                where, plan, chunk, after, variant=variant)  # fmt: skip
            if not asked:
                return iter(())
            return read_ticks(self.calls, asked, timestamp_field=spec.timestamp_field, read_time=read_time,
                              mask=mask, limit=limit)  # fmt: skip

        def fetch(chunk: tuple[str, ...], after: Position | None, limit: int | None,
                  read_time: dt.datetime | None) -> Iterator[Tick]:  # fmt: skip
            if split is None:
                return one(chunk, after, limit, read_time, None)
            if read_time is None:  # the variants at one snapshot: the clock's, or one read of it
                read_time = self.calls.clock.now() or self.calls.lookup([clock_probe(spec).path])[1]
            streams = [kinds.kept(plan, variant, one(chunk, after, limit, read_time, variant)) for variant in split]
            return take(merge_streams(streams, descending=plan.descending, key=plan.key), limit)

        return fetch

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection`` (a :class:`DatastoreKind`)."""
        send, lookup = transport(self.calls, collection.id, timeout=timeout)
        return send, lookup

    def _queries(self, over: Over, values: Sequence[str], split: list[kinds.Variant] | None) -> list[Any]:
        """The queries an aggregation over ``over`` runs: one, or one per variant."""
        if isinstance(over, ChunkTicks):
            where, plan, chunk = self.calls.where, over.plan, tuple(values)
            # Variants that differ only in the kind they keep (integers and timestamps, text
            # and bytes) send one query: a count cannot drop what a read drops.
            unique = list({v.conditions: v for v in split}.values()) if split is not None else [None]
            return [queries.chunk_query(where, plan, chunk, also_by=over.also_by, variant=v) for v in unique]
        census: Ask = over
        return [queries.census_query(self.calls.where, self._spec, census)]
