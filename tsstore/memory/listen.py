"""The memory database's real-time listeners (:class:`MemoryListener`, one per chunk query of
a live read: :meth:`tsstore.memory.answers.MemoryAnswers.listen`), with Firestore's snapshot
semantics as tsstore's live reads use them: a first snapshot of what the query returns when the listener
starts, then one snapshot for each commit that changes what it returns (a document that
enters, leaves or changes), in commit order, each at its commit's time, with the documents it
added. A commit that changes nothing the query returns makes no snapshot, as the client
reports none.

Each snapshot is taken under the database's lock, on the committing thread, before the
commit returns (a write on the emulator also returns only after its listeners were told): the
query is run again at the commit's time, so a listener costs one query per commit to its
collection. A listener stops only when unsubscribed: there is no connection to lose.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tsstore.live.listen import OnSnapshot
from tsstore.memory.database import Found, MemoryDatabase, Query
from tsstore.times import from_micros


class MemoryListener:
    """One listener on ``query`` of ``database``, calling ``on_snapshot`` with its first
    snapshot (before it is made) and then once for each commit that changes what ``query``
    returns (see the module)."""

    def __init__(self, database: MemoryDatabase, query: Query, on_snapshot: OnSnapshot) -> None:
        self._database, self._query, self._on_snapshot = database, query, on_snapshot
        self._held: dict[str, dt.datetime] | None = None  # each document the last snapshot held: its update time
        self._stop = database.on_commit(self._committed)
        self.is_active = True

    def unsubscribe(self) -> None:
        self.is_active = False
        self._stop()

    def _committed(self, paths: Sequence[str], at: int) -> None:
        if self._held is not None and not any(path.rpartition("/")[0] == self._query.collection for path in paths):
            return  # nothing of the query's collection was written
        found, read = self._database.run(self._query, read_time=from_micros(at))
        held = {f.id: f.update_time for f in found}
        before = self._held
        if before is not None and held == before:
            return
        self._held = held
        added = [f for f in found if before is None or f.id not in before]
        self._on_snapshot([Reported(f) for f in found], [Reported(f) for f in added], read)


@dataclass(frozen=True, slots=True)
class Reported:
    """A document a memory listener reports (:class:`~tsstore.live.listen.Reported`)."""

    found: Found

    @property
    def id(self) -> str:
        return self.found.id

    @property
    def create_time(self) -> dt.datetime:
        return self.found.create_time

    def to_dict(self) -> dict[str, Any]:
        return self.found.data
