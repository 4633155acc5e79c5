"""What both stores are besides their driver: the declaration, the collection, the database's
clock, the writer of their bulk sends (:class:`~tsstore.write.writer.Writer`) and the asks
answered the same on both (the time, the cold tier's objects). The verbs are
:class:`~tsstore.verbs.Verbs`'; the stores add how asks are answered: :mod:`tsstore.store`
on threads, :mod:`tsstore.aio` on an event loop."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar, get_args

from tsstore.asks import KnownTime
from tsstore.backend import Database
from tsstore.databases import mode_of
from tsstore.cold.objects import GetObject, ObjectAsk, Objects, answer_object
from tsstore.cold.stores import objects_at
from tsstore.errors import ConfigError
from tsstore.memory import MemoryDatabase
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.verbs import Verbs
from tsstore.verbs.request import Seat, Snapshots
from tsstore.write.options import EMULATOR_WRITE_OPTIONS, WriteOptions
from tsstore.write.writer import Writer

#: The largest ``limit`` an iteration reads as one lean page; above it (and without a
#: limit) each chunk is one streaming query, resumed after its last tick if it breaks off.
DEFAULT_PAGE_SIZE = 2000

#: How many chunk queries (RunQuery or aggregation requests) a store runs at once: the sync
#: store's reader threads, the async store's gate. Queries beyond it wait their turn, which
#: keeps many concurrent callers from swamping the server (the emulator fails requests with
#: UNKNOWN after minutes when some hundred heavy queries arrive together).
DEFAULT_CONCURRENCY = 8

B = TypeVar("B", bound=Database)


def _check_options(spec: object, *, page_size: object, snapshots: object) -> None:
    """Refuse, by name, a store's options that cannot be (before its database is asked anything)."""
    if not isinstance(spec, SeriesSpec):
        raise ConfigError(f"spec must be a SeriesSpec, got {type(spec).__name__}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ConfigError(f"page_size {page_size!r} is not allowed; give a positive integer")
    if snapshots not in get_args(Snapshots):
        raise ConfigError(f"snapshots {snapshots!r} is not allowed; give 'read' or 'estimated'")


class StoreBase(Verbs, Generic[B]):
    """A store of one collection on the database its ``backend()`` makes (a sync or an async
    backend), whatever its driver: the declaration, the collection as the database's requests
    hold it, the project's clock, the writer of its bulk sends, and the cold tier's objects. Its
    driver adds how asks are answered."""

    def __init__(
        self, spec: SeriesSpec, client: Any, backend: Callable[[], B], *, write_options: WriteOptions, page_size: int,
        lean: bool, snapshots: Snapshots,
    ) -> None:  # fmt: skip
        _check_options(spec, page_size=page_size, snapshots=snapshots)
        self._backend = database = backend()  # once the options are checked, before anything is asked of it
        self.spec = spec
        self.client = client
        self.mode: str = mode_of(client)  # what its spans name as the database
        self.write_options = write_options
        self._collection = database.collection(spec)  # as the database's requests hold it
        self.seat = Seat(spec, self._collection, page_size, lean, snapshots)
        self._writer: Writer[SeriesCounters] = Writer(
            spec, write_options, side=database.side, collection_of=database.collection, transport=database.transport
        )
        self._objects: Objects | None = None

    @classmethod
    def memory(cls, spec: SeriesSpec, *, database: MemoryDatabase | None = None, **options: Any) -> Self:
        """The store of ``spec`` on a :class:`~tsstore.memory.MemoryDatabase`, in this process
        and without Java, for tests of code that uses tsstore: ``TimeSeriesStore.memory(spec)``
        (``AsyncTimeSeriesStore.memory(spec)`` for the asyncio store).

        - ``spec``: the :class:`~tsstore.spec.SeriesSpec` of the collection.
        - ``database``: the memory database to use, so that stores share their data (one per
          series, a sync and an asyncio one); a new, empty one when not given.
        - ``options``: the constructor's keyword options; ``write_options`` is
          :data:`~tsstore.write.options.EMULATOR_WRITE_OPTIONS` unless given (no ramp: nothing
          to warm up, where the default ramp paces a write at 500 documents a second).
        """
        options.setdefault("write_options", EMULATOR_WRITE_OPTIONS)
        store: Callable[..., Self] = cls  # the store's own constructor: (client, spec, **options)
        return store(MemoryDatabase() if database is None else database, spec, **options)

    def _time(self, ask: KnownTime) -> dt.datetime | None:
        """The server's time as the project's clock knows it (at least it, when the ask says)."""
        clock = self._backend.clock
        return clock.at_least() if ask.at_least else clock.now()

    def _answer_object(self, ask: ObjectAsk) -> Any:
        """The answer to an ask of the cold tier's objects, from the store its declaration names."""
        if self.spec.cold is None:  # pragma: no cover - the requests refuse a series without a cold tier first
            raise ConfigError(f"collection {self.spec.collection!r} declares no cold tier")
        if self._objects is None:  # one per store: a bucket's client is made once, at its first call
            self._objects = objects_at(self.spec.cold.path)
        return answer_object(self._objects, ask)

    def _object_bytes(self, name: str) -> bytes | None:
        """The bytes of the cold tier's object ``name`` (``None``: there is none)."""
        data: bytes | None = self._answer_object(GetObject(name, f"reading {name} from the cold tier"))
        return data
