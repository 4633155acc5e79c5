"""The public verbs of both stores, each declared once.

A verb is a request (:mod:`tsstore.verbs.request`) written in the room it belongs to
(:mod:`~tsstore.verbs.reading`, :mod:`~tsstore.verbs.aggregates`, :mod:`~tsstore.verbs.latest`,
:mod:`~tsstore.verbs.bars`, :mod:`~tsstore.verbs.asof`,
:mod:`~tsstore.verbs.writing`, :mod:`~tsstore.verbs.retention`, :mod:`~tsstore.verbs.cold`, :mod:`~tsstore.verbs.sealed`, :mod:`~tsstore.verbs.layout`,
:mod:`~tsstore.verbs.live`); :class:`Verbs` lists them. The sync store runs each on its
threads and returns the result; the async store awaits the same request on its loop. So the
two stores have the same verbs, options and answers by construction.
"""

from __future__ import annotations

from typing import Any, Unpack

from google.cloud.firestore_v1.base_query import BaseQuery

from tsstore.dswire import is_datastore_client
from tsstore.dswire.kinds import variants
from tsstore.prices import prices_for
from tsstore.read.chunks import chunk_query
from tsstore.read.explain import Explanation, explain
from tsstore.read.plan import QueryPlan
from tsstore.read.query import Query, QueryOptions
from tsstore.verbs import aggregates, cold, layout, reading, retention, rollups, sealed, writing
from tsstore.verbs import asof as asof_reads
from tsstore.verbs import bars as bar_reads
from tsstore.verbs import latest as latest_reads
from tsstore.verbs import live as live_reads
from tsstore.verbs.declare import counter, live, stream, verb
from tsstore.verbs.request import Seat

#: What the parameters of the verbs declared here mean (see :data:`tsstore.read.query.OPTION_HELP`).
PARAMETER_HELP = {"plan": "a :class:`~tsstore.read.plan.QueryPlan` (from :meth:`plan`)"}


class Verbs:
    """Every public verb, declared once for :class:`~tsstore.store.TimeSeriesStore` and
    :class:`~tsstore.aio.AsyncTimeSeriesStore`."""

    seat: Seat
    #: The store's client (its database's mode prices its reads).
    client: Any

    # reading
    query = verb(reading.query)
    iter_ticks = stream(reading.iter_ticks)
    query_frame = verb(reading.query_frame)
    query_table = verb(reading.query_table)
    query_polars = verb(reading.query_polars)
    stream_frames = stream(reading.stream_frames)
    stream_batches = stream(reading.stream_batches)
    stream_chunk = stream(reading.stream_chunk)
    count = verb(reading.count)
    server_time = verb(reading.server_time)
    # analytics
    aggregate = verb(aggregates.aggregate)
    explain_aggregate = verb(aggregates.explain_aggregate)
    latest = verb(latest_reads.latest)
    bars = verb(bar_reads.bars)
    aligned = verb(bar_reads.aligned)
    explain_bars = verb(bar_reads.explain_bars)
    asof = verb(asof_reads.asof)
    iter_asof = stream(asof_reads.iter_asof)
    rollup = verb(rollups.rollup)
    verify_rollup = verb(rollups.verify_rollup)
    rollup_coverage = verb(rollups.rollup_coverage)
    # writing, retention
    write = verb(writing.write)
    series_counter = counter(writing.series_counter)
    purge = verb(retention.purge)
    # the cold tier
    seal = verb(cold.seal)
    cold_sql = verb(sealed.cold_sql)
    verify_cold = verb(sealed.verify_cold)
    cold_status = verb(sealed.cold_status)
    cold_bigquery = verb(sealed.cold_bigquery)
    seal_plan = verb(cold.seal_plan)  # a seal in parts, as a Beam pipeline runs it (tsstore.beam)
    seal_partition = verb(cold.seal_partition)
    seal_switch = verb(cold.seal_switch)
    # layout
    shard_census = verb(layout.shard_census)
    reshard = verb(layout.reshard)
    # live
    watch = live(live_reads.watch)
    tail = live(live_reads.tail)

    def plan(self, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> QueryPlan:
        """The validated plan a query runs (no Firestore call). Every read verb takes a
        :class:`~tsstore.read.query.Query`, or its fields as keyword options: ``where``,
        ``start`` (inclusive), ``end`` (exclusive), ``direction``, ``limit``, ``columns``,
        ``cursor``, ``read_time``."""
        return reading.planned(self.seat, query, options)

    def explain(self, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> Explanation:
        """What a query would send and cost, without touching Firestore: its chunk queries,
        the composite index serving them, the reads a page takes lean and eager
        (``print(store.explain(...).describe())``), and the most a page can cost, priced at the
        declared location (``explain(...).cost()``, ``describe(cost=True)``)."""
        plan = self.plan(query, **options)
        if not is_datastore_client(self.client):
            return explain(plan)
        sent = variants(plan)  # each chunk query sent once per kind of value its value filters match
        return explain(plan, prices=prices_for(plan.spec.location, mode="datastore"), variants=len(sent or [None]))

    def firestore_queries(self, plan: QueryPlan) -> list[BaseQuery]:
        """The Firestore query each chunk of ``plan`` starts with, as sent (no Firestore call):
        for inspecting what tsstore asks of Firestore, e.g. which index serves it."""
        size = self.seat.page_size if plan.limit is None else min(plan.limit + 1, self.seat.page_size)
        return [chunk_query(self.seat.collection, plan, chunk, None, size) for chunk in plan.chunks]
