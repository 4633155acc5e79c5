"""What a sync store asks of a database, and the one place a client's database mode is
decided (:func:`backend_for`).

A :class:`Backend` answers the asks that touch the database (counts and aggregations, a
census's documents, document asks, chunk fetches, bulk sends), gives a live read its
listeners (:meth:`Backend.listener`: Native mode's and the memory database's) and a bulk
send its side (:class:`~tsstore.store_base.WriterSide`); the store (:mod:`tsstore.store`) answers every
other ask the same way whatever the database. Native mode's is
:class:`~tsstore.native_mode.NativeAnswers`, Datastore mode's
:class:`~tsstore.datastore_mode.DatastoreAnswers` (imported only for a ``datastore.Client``:
``google-cloud-datastore`` is an extra).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Protocol

from tsstore.asks import Doc, DocAsk
from tsstore.clock import ServerClock
from tsstore.databases import mode_of
from tsstore.memory import MemoryAnswers
from tsstore.live.listen import Listen
from tsstore.native_mode import NativeAnswers
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.spec import SeriesSpec
from tsstore.store_base import WriterSide
from tsstore.verbs.request import Aggregate, Count, Over
from tsstore.write.ops import Transport


class Backend(Protocol):
    """A database as a sync store asks of it."""

    @property
    def side(self) -> WriterSide:
        """What a bulk send asks of the database besides its writes."""

    @property
    def clock(self) -> ServerClock:
        """The project's clock, told every server time an answer carries."""

    def collection(self, spec: SeriesSpec) -> Any:
        """What ``spec``'s requests hold as their collection (their queries are built on it,
        and a bulk send's transport takes it)."""

    def listener(self) -> Listen:
        """The database's listeners, one per chunk query of a live read; a
        :class:`~tsstore.errors.ModeError` where the database has none."""

    def aggregate(self, ask: Count | Aggregate, values: Sequence[str]) -> Any:
        """The count, or ``{alias: value}``, of ``ask`` over the shard ``values``."""

    def documents(self, over: Over, read_time: dt.datetime | None) -> list[Doc]:
        """The documents of a census ask that names them."""

    def answer_document(self, ask: DocAsk) -> Any:
        """The answer to a document ask (one attempt)."""

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The read engine's fetch of ``plan``'s chunks."""

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """A bulk sender's send and lookup on ``collection`` (from :meth:`collection`)."""


def backend_for(client: Any, spec: SeriesSpec, *, fast: bool = True) -> Backend:
    """The backend of the store of ``spec`` on ``client``, by the database it talks to
    (:func:`tsstore.databases.mode_of`, which refuses any other client by name): Native mode on a
    ``firestore.Client``, Datastore mode on a ``datastore.Client``, the in-process database on a
    :class:`~tsstore.memory.MemoryDatabase` (``fast``: Native mode's queries and writes through
    the client's own stub)."""
    match mode_of(client):
        case "datastore":
            from tsstore.datastore_mode import DatastoreAnswers  # only with the datastore extra

            return DatastoreAnswers(client, spec)
        case "native":
            return NativeAnswers(client, spec, fast=fast)
        case "memory":
            return MemoryAnswers(client, spec)
