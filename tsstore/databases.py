"""Which database a client talks to: the one place a client's database mode is decided
(:func:`mode_of`), where its data lives (:func:`location_of`), how each mode answers a
document ask (:func:`document_answers`), and what a Datastore-mode or a memory database's
requests hold as their collection (:class:`DatastoreKind`).

The stores' backends (:func:`tsstore.backend.backend_for`) take their mode from here, and so
does a counter made from a bare client (``ShardedCounter(client, path)``, :mod:`tsstore.counters`)
on a floor below the backends. Native mode's client and
Datastore mode's are told here (their wires stand on this floor). A database defined on a
higher floor (the memory database, :mod:`tsstore.memory`) registers its client's type and its
document answers when its package is imported (:func:`register`), which it is before any of its
clients exists; so nothing here imports upward, and nothing sniffs a client anywhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from google.cloud import firestore

from tsstore.asks import DocumentAnswers
from tsstore.dswire import is_datastore_client
from tsstore.errors import ConfigError, ModeError
from tsstore.wire import answer_document, database_id

#: The databases tsstore runs on: Firestore in Native mode, in Datastore mode, in this process.
Mode = Literal["native", "datastore", "memory"]

#: Databases defined above this floor: their client's type → their mode and document answers.
_REGISTERED: dict[type, tuple[Mode, Callable[[Any], DocumentAnswers]]] = {}


def register(mode: Mode, kind: type, documents: Callable[[Any], DocumentAnswers]) -> None:
    """Let clients of type ``kind`` be a database in ``mode``, whose document asks
    ``documents(client)`` answers (called by the module defining ``kind``, at its import)."""
    _REGISTERED[kind] = (mode, documents)


def mode_of(client: object) -> Mode:
    """The database ``client`` talks to: Native mode on a ``firestore.Client`` or
    ``AsyncClient``, Datastore mode on a ``datastore.Client`` (told without importing it: users
    of Native mode need not install it), or a registered one's; anything else is refused by name."""
    if isinstance(client, (firestore.Client, firestore.AsyncClient)):
        return "native"
    if is_datastore_client(client):
        return "datastore"
    return _registered(client)[0]


def location_of(client: Any) -> tuple[str, str]:
    """The project and the database ``client``'s data lives in (``(default)`` unless it names
    one); a memory database's are ``memory`` and its own name, new for each database, so what
    outlives one (an ingest's checkpoint) is never taken for another's."""
    match mode_of(client):
        case "native":
            return str(client.project), database_id(client)
        case "datastore":
            return str(client.project), str(client.database or "(default)")
        case "memory":
            return "memory", str(client.name)


def document_answers(client: object) -> DocumentAnswers:
    """The answer to a document ask on the sync ``client``'s database, one attempt."""
    if isinstance(client, firestore.AsyncClient):
        raise ConfigError("a counter takes a sync client (firestore.Client); from an AsyncTimeSeriesStore, await "
                          "its series_counter(...)")  # fmt: skip
    match mode_of(client):
        case "native":
            return functools.partial(answer_document, client)
        case "datastore":
            from tsstore.dswire.calls import DatastoreCalls  # only with the datastore extra
            from tsstore.dswire.calls import answer_document as datastore_answer

            return functools.partial(datastore_answer, DatastoreCalls(client))
        case "memory":
            return _registered(client)[1](client)


def _registered(client: object) -> tuple[Mode, Callable[[Any], DocumentAnswers]]:
    for kind, entry in _REGISTERED.items():
        if isinstance(client, kind):
            return entry
    raise ConfigError(
        f"client {type(client).__module__}.{type(client).__name__} is not allowed; give a "
        "google.cloud.firestore.Client (Native mode), a google.cloud.datastore.Client (Datastore mode) or a "
        "tsstore.memory.MemoryDatabase"
    )


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
