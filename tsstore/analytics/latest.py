"""The newest tick of each of several series: which queries to send, and the frame they make.
No I/O; the stores send the queries.

For each series value ``v`` of the key field ``by``, the planner's own plan of "``by == v``
plus the caller's filters, newest first, limit 1" is run as one limit-1 query per shard
chunk: each chunk's newest tick is its first, so the series' newest is the newest of those
(in the plan's order: by timestamp, then document id). A series costs one billed read per
chunk, whether it holds ticks or not; all run concurrently at one snapshot. Where ``by ==
v`` is a series shape (``series_rate``), that is one limit-1 query per series.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tsstore.errors import QueryError
from tsstore.frames import ticks_to_frame
from tsstore.read.cost import ReadStats
from tsstore.read.engine import ChunkCursor
from tsstore.read.plan import QueryPlan, normalize_where
from tsstore.read.query import Query
from tsstore.spec import Direction, SeriesSpec
from tsstore.ticks import Tick

#: The query fields latest() takes (``before`` is its name for ``end``).
LATEST_OPTIONS = ("where", "end", "columns", "read_time")


@dataclass(frozen=True)
class LatestRequest:
    """One plan per series value, in the order the values were given."""

    spec: SeriesSpec
    by: str
    values: tuple[Any, ...]
    plans: tuple[QueryPlan, ...]

    @classmethod
    def planned(
        cls,
        spec: SeriesSpec,
        plan: Any,
        *,
        by: str,
        values: Iterable[Any],
        query: Query | None,
        options: Mapping[str, Any],
    ) -> LatestRequest:
        """Check the request and plan each series (``plan`` is the store's planner)."""
        options = dict(options)
        if "before" in options:
            if options.get("end") is not None:
                raise QueryError("give either before or end, not both (before is end)")
            options["end"] = options.pop("before")
        bounds = Query.of(query, options)
        bounds.only(LATEST_OPTIONS, "latest")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise QueryError(f"values must be a list of {by} values, got {values!r}")
        wanted = tuple(dict.fromkeys(values))
        if not wanted:
            raise QueryError(f"values is empty; name the {by} values whose newest tick you want")
        filters = normalize_where(bounds.where)
        if any(f.field == by for f in filters):
            raise QueryError(f"{by!r} is the series key here; give its values as values=, not in where")
        columns = None if bounds.columns is None else tuple(dict.fromkeys((*bounds.columns, by)))
        base = [(f.field, f.op, list(f.values) if f.op == "in" else f.values[0]) for f in filters]
        plans = tuple(
            plan(bounds.replace(where=[*base, (by, "==", v)], direction=Direction.DESC, limit=1, columns=columns))
            for v in wanted
        )
        return cls(spec, by, wanted, plans)

    @property
    def queries(self) -> int:
        return sum(len(p.chunks) for p in self.plans)

    def cursors(self, read_time: dt.datetime | None, stats: ReadStats) -> list[tuple[int, QueryPlan, ChunkCursor]]:
        """(series number, its plan, a limit-1 cursor) for every series and chunk."""
        return [
            (
                i,
                plan,
                ChunkCursor.of(plan, chunk, after=None, limit=1, read_time=read_time, stats=stats),
            )
            for i, plan in enumerate(self.plans)
            for chunk in plan.chunks
        ]

    def frame(self, found: Sequence[tuple[int, list[Tick]]]) -> pd.DataFrame:
        """The newest tick of each series as one row, indexed by the series key in the order
        the values were given; a series with no tick is a row of missing values (``NaT``
        timestamp), so every value asked for is answered."""
        newest: dict[int, Tick] = {}
        for i, ticks in found:
            for tick in ticks:
                if i not in newest or self.plans[i].key(tick) > self.plans[i].key(newest[i]):
                    newest[i] = tick
        held = [i for i in range(len(self.values)) if i in newest]
        frame = ticks_to_frame(
            self.spec, [newest[i] for i in held], columns=self.plans[0].columns if self.plans else None
        ).reset_index()
        frame.index = pd.Index([self.values[i] for i in held], name=self.by)
        return frame.drop(columns=[self.by], errors="ignore").reindex(pd.Index(self.values, name=self.by))
