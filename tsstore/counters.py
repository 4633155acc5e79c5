"""Distributed (sharded) counters: many increments a second on one logical count.

A Firestore document takes about one sustained write a second, so a hot counter is split
into N shard documents, each increment lands on a random one, and the value is their sum.
Layout (as in Firestore's distributed-counter guide), under any document path:

    {path}                   {"shards": N, "total": T, "total_as_of": time}   (the counter)
    {path}/shards/{i}        {"count": c}                                    (i = 0 … N-1)

The value is one ``sum()`` aggregation over the shards (billed one read per 1 000 index
entries), not a read of every shard. ``rollup()`` stores the current total in the counter
document with a plain set guarded by its as-of time, so repeated or concurrent roll-ups
never double-count and an older one never overwrites a newer one.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter as _Tally
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.cloud import firestore
from google.cloud.firestore_v1 import Increment
from google.cloud.firestore_v1.base_document import DocumentSnapshot

from .errors import CounterError
from .limits import DOCUMENT_WRITES_PER_SECOND

SHARDS_COLLECTION = "shards"
COUNT_FIELD = "count"
SHARDS_FIELD = "shards"
TOTAL_FIELD = "total"
AS_OF_FIELD = "total_as_of"


@dataclass(frozen=True)
class CounterValue:
    """A counter's value, when it was true, and whether it is live or a stored roll-up."""

    value: int
    as_of: dt.datetime
    live: bool


def plan_counter_shards(increments_per_second: float) -> int:
    """Shards needed for a sustained increment rate: one write a second per shard document."""
    if isinstance(increments_per_second, bool) or not isinstance(increments_per_second, (int, float)):
        raise CounterError(f"increments_per_second {increments_per_second!r} is not a number")
    if not (increments_per_second > 0 and math.isfinite(increments_per_second)):
        raise CounterError(f"increments_per_second {increments_per_second!r} must be positive and finite")
    return max(1, math.ceil(increments_per_second / DOCUMENT_WRITES_PER_SECOND))


def check_counter_path(path: object) -> str:
    """``path`` if it names a document (an even number of non-empty segments)."""
    if not isinstance(path, str) or not path.strip("/"):
        raise CounterError(f"counter path {path!r} is empty; give a document path such as 'counters/likes'")
    segments = path.strip("/").split("/")
    if any(not s for s in segments):
        raise CounterError(f"counter path {path!r} has an empty segment")
    if len(segments) % 2:
        raise CounterError(
            f"counter path {path!r} has {len(segments)} segments; a counter is a document, so its path needs an "
            "even number (collection/document[/collection/document…]), e.g. 'counters/likes'"
        )
    return "/".join(segments)


def _check_shard_count(shards: object) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise CounterError(f"shard count {shards!r} is not allowed; give a positive integer")
    return shards


def _check_amount(by: object) -> int:
    if isinstance(by, bool) or not isinstance(by, int):
        raise CounterError(f"increment {by!r} is a {type(by).__name__}; increments are integers (negative allowed)")
    return by


class ShardedCounter:
    """One distributed counter at a document path of the caller's choosing."""

    def __init__(self, client: firestore.Client, path: str) -> None:
        self.client = client
        self.path = check_counter_path(path)
        self.ref = client.document(self.path)
        self._shards_ref = self.ref.collection(SHARDS_COLLECTION)
        self._known_shards: int | None = None

    def __repr__(self) -> str:
        return f"ShardedCounter({self.path!r})"

    def create(self, *, shards: int) -> int:
        """Create the counter with ``shards`` shards, or leave an existing one as it is.

        Idempotent: creating twice is not an error and resets nothing. Returns the shard
        count in effect (the existing one if the counter was there already).
        """
        _check_shard_count(shards)
        transaction = self.client.transaction()

        @firestore.transactional
        def create_once(tx: firestore.Transaction) -> int:
            snap = self.ref.get(transaction=tx)
            if snap.exists:
                return _shard_count(snap, self.path)
            tx.set(self.ref, {SHARDS_FIELD: shards})
            return shards

        count = create_once(transaction)
        self._ensure_shard_docs(0, count)
        self._known_shards = count
        return count

    def shards(self) -> int:
        """The counter's shard count (read from the counter document)."""
        snap = self.ref.get()
        if not snap.exists:
            raise CounterError(f"counter {self.path!r} does not exist; create it first")
        self._known_shards = _shard_count(snap, self.path)
        return self._known_shards

    def increment(self, by: int = 1) -> None:
        """Add ``by`` (any integer) to a random shard. A missing shard document is created by
        the merge, so a shard lost or not yet made heals on its next increment."""
        amount = _check_amount(by)
        shard = random.randrange(self._shard_count())
        self._shards_ref.document(str(shard)).set({COUNT_FIELD: Increment(amount)}, merge=True)

    def increment_many(self, amounts: Iterable[int]) -> int:
        """Apply many increments in one commit: each goes to a random shard, and each touched
        shard gets one transform with its sum. Returns the total added."""
        n = self._shard_count()
        per_shard: _Tally[int] = _Tally()
        for by in amounts:
            per_shard[random.randrange(n)] += _check_amount(by)
        batch = self.client.batch()
        for shard, amount in sorted(per_shard.items()):
            if amount:
                batch.set(self._shards_ref.document(str(shard)), {COUNT_FIELD: Increment(amount)}, merge=True)
        if len(batch):
            batch.commit()
        return sum(per_shard.values())

    def value(self) -> int:
        """The live value: one ``sum()`` aggregation over the shard documents."""
        return self._live().value

    def rollup(self) -> CounterValue:
        """Store the live total in the counter document and return it.

        A set, never an increment: repeating it, or racing another roll-up, cannot count
        anything twice; a roll-up older than the stored one leaves the stored one alone.
        """
        live = self._live()
        transaction = self.client.transaction()

        @firestore.transactional
        def store_if_newer(tx: firestore.Transaction) -> CounterValue:
            snap = self.ref.get(transaction=tx)
            stored = _stored(snap)
            if stored is not None and stored.as_of >= live.as_of:
                return stored
            tx.set(self.ref, {TOTAL_FIELD: live.value, AS_OF_FIELD: live.as_of}, merge=True)
            return CounterValue(live.value, live.as_of, live=False)

        return store_if_newer(transaction)

    def read(self, *, live: bool = False) -> CounterValue:
        """The stored roll-up (cheap: one document read, possibly stale; see ``as_of``), or the
        live sum with ``live=True`` or when no roll-up has been stored yet."""
        if not live:
            snap = self.ref.get()
            if not snap.exists:
                raise CounterError(f"counter {self.path!r} does not exist; create it first")
            stored = _stored(snap)
            if stored is not None:
                return stored
        return self._live()

    def grow(self, *, shards: int) -> int:
        """Raise the shard count to ``shards``. Counts stay where they are (the value sums every
        shard document), new shards start at zero. Shrinking is refused: it would strand counts."""
        _check_shard_count(shards)
        transaction = self.client.transaction()

        @firestore.transactional
        def raise_count(tx: firestore.Transaction) -> int:
            snap = self.ref.get(transaction=tx)
            if not snap.exists:
                raise CounterError(f"counter {self.path!r} does not exist; create it first")
            current = _shard_count(snap, self.path)
            if shards < current:
                raise CounterError(
                    f"counter {self.path!r} has {current} shards; shrinking to {shards} is not supported "
                    "(counts on removed shards would be lost)"
                )
            if shards > current:
                tx.update(self.ref, {SHARDS_FIELD: shards})
            return current

        previous = raise_count(transaction)
        self._ensure_shard_docs(previous, shards)
        self._known_shards = shards
        return shards

    # -------------------------------------------------------------------- internals

    def _shard_count(self) -> int:
        return self._known_shards if self._known_shards is not None else self.shards()

    def _ensure_shard_docs(self, start: int, stop: int) -> None:
        # Increment(0) with merge creates a missing shard at 0 and leaves an existing one as it is.
        for first in range(start, stop, 500):
            batch = self.client.batch()
            for shard in range(first, min(stop, first + 500)):
                batch.set(self._shards_ref.document(str(shard)), {COUNT_FIELD: Increment(0)}, merge=True)
            batch.commit()

    def _live(self) -> CounterValue:
        [[result]] = self._shards_ref.sum(COUNT_FIELD).get()
        # The emulator reports an empty sum as 0.0; counts are integers.
        return CounterValue(int(result.value or 0), result.read_time, live=True)


def increment_counters(client: firestore.Client, amounts: Mapping[ShardedCounter, int]) -> None:
    """One commit holding one increment per counter (each on a random shard of its own)."""
    batch = client.batch()
    for counter, amount in amounts.items():
        if amount:
            shard = random.randrange(counter._shard_count())
            batch.set(
                counter._shards_ref.document(str(shard)), {COUNT_FIELD: Increment(_check_amount(amount))}, merge=True
            )
    if len(batch):
        batch.commit()


def _shard_count(snap: DocumentSnapshot, path: str) -> int:
    data: dict[str, Any] = snap.to_dict() or {}
    value = data.get(SHARDS_FIELD)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CounterError(f"counter {path!r} has no valid '{SHARDS_FIELD}' field (found {value!r})")
    return value


def _stored(snap: DocumentSnapshot) -> CounterValue | None:
    data: dict[str, Any] = snap.to_dict() or {}
    if TOTAL_FIELD not in data or AS_OF_FIELD not in data:
        return None
    return CounterValue(int(data[TOTAL_FIELD]), data[AS_OF_FIELD], live=False)
