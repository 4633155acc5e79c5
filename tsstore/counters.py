"""Distributed (sharded) counters on a client's database: ``ShardedCounter(client, path)``.

What a counter is, its layout and its verbs as requests are :mod:`tsstore.counting`, which
runs them over any answer to a document ask; a counter here answers them on the database of
the client it is given (a ``firestore.Client``, a ``datastore.Client`` or a
:class:`~tsstore.memory.MemoryDatabase`, told apart by :func:`tsstore.databases.mode_of`).
The names users import from here (:class:`AsyncCounter`, :class:`CounterValue`,
:func:`plan_counter_shards`, ...) are :mod:`tsstore.counting`'s.
"""

from __future__ import annotations

from typing import Any

from tsstore import counting
from tsstore.asks import DocumentAnswers
from tsstore.counting import (
    COUNT_FIELD,
    MAX_COUNTER_SHARDS,
    SHARDS_COLLECTION,
    AsyncCounter,
    AsyncDocumentAnswers,
    CounterValue,
    SyncCounter,
    increment_counters,
    plan_counter_shards,
)
from tsstore.databases import document_answers

__all__ = [
    "COUNT_FIELD",
    "MAX_COUNTER_SHARDS",
    "SHARDS_COLLECTION",
    "AsyncCounter",
    "AsyncDocumentAnswers",
    "CounterValue",
    "ShardedCounter",
    "SyncCounter",
    "increment_counters",
    "plan_counter_shards",
]

#: What the parameters of :class:`ShardedCounter` mean (its methods' are :mod:`tsstore.counting`'s).
PARAMETER_HELP = {
    **counting.PARAMETER_HELP,
    "client": "a ready ``google.cloud.firestore.Client``, a ``google.cloud.datastore.Client`` for a database in "
    "Datastore mode, or a :class:`~tsstore.memory.MemoryDatabase`; the counter never closes it.",
    "answer": "how a document ask is answered, one attempt (default: as ``client``'s database answers it, "
    ":func:`tsstore.databases.document_answers`)",
}


class ShardedCounter(SyncCounter):
    """One distributed counter at a document path of the caller's choosing, on a
    ``firestore.Client`` or, in Datastore mode, a ``datastore.Client`` (the path's documents
    are then entities: ``counters/likes/shards/3`` is shard 3 under the key ``counters/likes``),
    or a :class:`~tsstore.memory.MemoryDatabase`.

    Every call to the database is a document ask (:mod:`tsstore.asks`) answered on the
    client's database (:func:`tsstore.databases.document_answers`), or by ``answer``; each is
    tried again after faults as the stores try theirs, except a lone :meth:`increment`, which
    is not idempotent (see there)."""

    def __init__(self, client: Any, path: str, *, answer: DocumentAnswers | None = None) -> None:
        super().__init__(path, answer=answer if answer is not None else document_answers(client))
        self.client = client
