"""What differs between the database modes for a store, whose backend the client's mode
chooses (:func:`~tsstore.backend.backend_for`, by :func:`tsstore.databases.mode_of`):
Firestore in Native mode (a ``firestore.Client``: :mod:`tsstore.wire`) or in Datastore mode
(a ``datastore.Client``: :mod:`tsstore.dswire`, answered by :mod:`tsstore.datastore_mode`,
imported only for such a client: ``google-cloud-datastore`` is an extra).

- A writer's **side** (:class:`FirestoreSide`, :class:`~tsstore.datastore_mode.DatastoreSide`):
  what a bulk send asks of a sync client besides its writes (the late-tick guard, the series
  counters, the probe of the round trip, the project's clock).
- What a Datastore-mode store's requests hold as their collection (:class:`DatastoreKind`),
  and the words that refuse what Datastore mode does not have (real-time listeners).

No verb or request learns the mode: the asks are the same, only their answers differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from tsstore.clock import ServerClock
from tsstore.errors import ModeError
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.verbs.reading import clock_probe
from tsstore.wire import answer_document, late_guard, server_clock
from tsstore.write.marks import LateGuard

LIVE_REFUSED = (
    "live reads (watch, tail) need Firestore's real-time listeners, which Datastore mode does not have; poll with "
    "iter_ticks(start=the last tick's time) on a timer, or keep the series in a Native-mode database"
)


class FirestoreSide:
    """A Native-mode writer's side, on the sync client ``client()`` gives (made when first
    needed: the async store's sync twin)."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        return late_guard(self._client(), spec)

    def counters(self, spec: SeriesSpec) -> SeriesCounters:
        return SeriesCounters(self._client(), spec)  # answered as its mode answers (databases.document_answers)

    def probe(self, spec: SeriesSpec) -> None:
        answer_document(self._client(), clock_probe(spec))

    def clock(self) -> ServerClock:
        return server_clock(self._client())


@dataclass(frozen=True)
class DatastoreKind:
    """What a Datastore-mode store's requests (and the memory database's) hold as their
    collection: its kind's name, which a bulk send's transport takes. A Firestore query built on
    it (``firestore_queries()``: :func:`~tsstore.read.chunks.chunk_query` starts with a
    ``where``, or an ``order_by`` for a series plan without filters) is refused by name."""

    id: str

    def where(self, *args: object, **kwargs: object) -> NoReturn:
        raise ModeError(
            f"kind {self.id!r} is in Datastore mode, which takes no Firestore query; firestore_queries() shows Native "
            "mode's, and tsstore.dswire.queries builds Datastore mode's"
        )

    order_by = where
