"""Series counters the writer keeps (``spec.count_by``): one sharded counter per series,
incremented with each batch the writer settles.

Counters live in the collection ``<collection>_counts``, one document per series. A batch's
increments and a receipt in ``<collection>_counts_receipts`` are one commit, so a commit
retried after a fault is applied once (:func:`~tsstore.counting.increment_counters`).
Counters run on any database (conditional writes, no transactions), their document asks
answered as the writer's side answers them (its backend's); the async store's
``series_counter`` gives the same counter awaited (:class:`~tsstore.counting.AsyncCounter`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from tsstore.asks import DocumentAnswers
from tsstore.counting import SyncCounter, increment_counters
from tsstore.errors import ConfigError
from tsstore.spec import SeriesSpec
from tsstore.ticks import get_path
from tsstore.write.sender import Written

#: Per-series counters live in the collection "<collection>_counts", one document per series.
COUNTERS_SUFFIX = "_counts"
#: A written batch's counter increments and a receipt in "<collection>_counts_receipts" are
#: one commit; the receipt is deleted once it has landed.
RECEIPTS_SUFFIX = "_receipts"


class SeriesCounters:
    """The counters of one spec's series, made on first use, their document asks answered by
    ``answer`` (as the writer's side answers them, on the store's sync client's database)."""

    def __init__(self, spec: SeriesSpec, *, answer: DocumentAnswers) -> None:
        self._spec, self._answer = spec, answer
        self._counters: dict[tuple[Any, ...], SyncCounter] = {}

    @staticmethod
    def key_of(spec: SeriesSpec, key: Mapping[str, Any]) -> tuple[Any, ...]:
        """A series key (``count_by`` fields → values) as the tuple of its values, checked."""
        if not spec.count_by:
            raise ConfigError(f"spec for {spec.collection!r} has no count_by fields; no series counters kept")
        if set(key) != set(spec.count_by):
            raise ConfigError(f"series key {dict(key)!r} must name exactly the count_by fields {list(spec.count_by)!r}")
        return tuple(key[f] for f in spec.count_by)

    def counter(self, values: tuple[Any, ...]) -> SyncCounter:
        """The counter of one series (created, with the spec's shard count, on first use)."""
        counter = self._counters.get(values)
        if counter is None:
            counter = SyncCounter(counter_path(self._spec, values), answer=self._answer)
            counter.create(shards=self._spec.counter_shards)
            self._counters[values] = counter
        return counter

    def count_written(self, batch: list[Written]) -> None:
        """One increment per series a written batch changed, all in one commit: +1 for each
        created tick; a replace that moved a tick to another series moves its count too.
        Ticks found already present count nothing, so a re-run never counts twice."""
        tally: dict[tuple[Any, ...], int] = {}
        paths = [f.split(".") for f in self._spec.count_by]
        for item in batch:
            if not isinstance(item.doc.data, dict):  # deletes and patches (reshard) count nothing
                continue
            key = tuple(get_path(item.doc.data, p) for p in paths)
            if item.outcome == "created":
                tally[key] = tally.get(key, 0) + 1
            elif item.outcome == "replaced" and item.previous is not None:
                old = tuple(get_path(item.previous, p) for p in paths)
                if old != key:
                    tally[key] = tally.get(key, 0) + 1
                    tally[old] = tally.get(old, 0) - 1
        if any(tally.values()):
            receipt = f"{self._spec.collection}{COUNTERS_SUFFIX}{RECEIPTS_SUFFIX}/{uuid.uuid4().hex}"
            increment_counters({self.counter(k): n for k, n in tally.items() if n}, receipt=receipt)


def counter_path(spec: SeriesSpec, values: tuple[Any, ...]) -> str:
    """The path of the counter of one series of ``spec`` (its ``count_by`` values)."""
    return f"{spec.collection}{COUNTERS_SUFFIX}/{series_document_id(values)}"


def series_document_id(values: tuple[Any, ...]) -> str:
    """A readable document id for a series key, or a hash when the values cannot make one."""
    text = "|".join(str(v) for v in values)
    if (
        all(isinstance(v, str) for v in values)
        and "/" not in text
        and text not in (".", "..")
        and (0 < len(text.encode()) <= 500 and not (text.startswith("__") and text.endswith("__")))
    ):
        return text
    return "h-" + hashlib.sha256(repr(values).encode()).hexdigest()[:32]
