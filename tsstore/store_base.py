"""What both stores are besides their driver: the declaration, the collection, and how a
bulk send becomes a job (:class:`Writer`, which each store holds). The verbs are
:class:`~tsstore.verbs.Verbs`'; the stores add how asks are answered: :mod:`tsstore.store`
on threads, :mod:`tsstore.aio` on an event loop."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar, get_args

from tsstore.clock import ServerClock
from tsstore.cold.objects import GetObject, ObjectAsk, Objects, answer_object
from tsstore.cold.stores import objects_at
from tsstore.errors import ConfigError
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick
from tsstore.verbs import Verbs
from tsstore.verbs.request import Seat, Send, Snapshots
from tsstore.write.job import Job, bulk_sender
from tsstore.write.marks import LateGuard
from tsstore.write.ops import Transport
from tsstore.write.options import WriteOptions
from tsstore.write.ramp import RampLimiter
from tsstore.write.sender import Written
from tsstore.write.window import Window

R = TypeVar("R")

#: The largest ``limit`` an iteration reads as one lean page; above it (and without a
#: limit) each chunk is one streaming query, resumed after its last tick if it breaks off.
DEFAULT_PAGE_SIZE = 2000

#: How many chunk queries (RunQuery or aggregation requests) a store runs at once: the sync
#: store's reader threads, the async store's gate. Queries beyond it wait their turn, which
#: keeps many concurrent callers from swamping the server (the emulator fails requests with
#: UNKNOWN after minutes when some hundred heavy queries arrive together).
DEFAULT_CONCURRENCY = 8


def check_options(spec: object, *, page_size: object, snapshots: object) -> None:
    """Refuse, by name, a store's options that cannot be (before its database is asked anything)."""
    if not isinstance(spec, SeriesSpec):
        raise ConfigError(f"spec must be a SeriesSpec, got {type(spec).__name__}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ConfigError(f"page_size {page_size!r} is not allowed; give a positive integer")
    if snapshots not in get_args(Snapshots):
        raise ConfigError(f"snapshots {snapshots!r} is not allowed; give 'read' or 'estimated'")


class StoreBase(Verbs):
    """A store of one collection, whatever its driver and database: the declaration, the
    collection as the database's requests hold it, and the cold tier's objects. Its driver
    adds how asks are answered, and holds a :class:`Writer` for its bulk sends."""

    def __init__(
        self, spec: SeriesSpec, client: Any, *, collection_of: Callable[[SeriesSpec], Any], clock: ServerClock,
        write_options: WriteOptions, page_size: int, lean: bool, snapshots: Snapshots,
    ) -> None:  # fmt: skip
        self.spec = spec  # checked by the driver first (check_options)
        self.client = client
        self.write_options = write_options
        #: The collection of a series (the store's own, a roll-up's, an as-of join's right
        #: side), as the database's requests hold it; the project's clock.
        self._collection_of, self._clock = collection_of, clock
        self._collection = collection_of(spec)
        self.seat = Seat(spec, self._collection, page_size, lean, snapshots)
        self._objects: Objects | None = None

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


class WriterSide(Protocol):
    """What a bulk send asks of the database besides its writes, on a sync client: a backend's
    (:class:`tsstore.native_mode.FirestoreSide`, :class:`tsstore.datastore_mode.DatastoreSide`, the
    memory database's)."""

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        """The guard that marks the job's late writes into ``spec``'s collection."""

    def counters(self, spec: SeriesSpec) -> SeriesCounters:
        """The series counters of ``spec``'s collection."""

    def probe(self, spec: SeriesSpec) -> None:
        """Read the server's time once (the round trip is then known)."""

    def clock(self) -> ServerClock:
        """The project's clock."""


class Writer:
    """How a store's bulk sends become jobs: a sender on the driver's ``transport`` (called
    with a collection and ``timeout=``, the seconds each send may take), paced by the collection's
    ramp, its settled batches counted into the series counters when the send asks, its late
    writes marked by a guard; the counters and guards are the backend's ``side``.

    One ramp per collection written, for every write, purge and reshard of the store: its
    traffic to the collection is one stream, so a second write continues the ramp instead
    of starting at 500 again. As many batches are in flight as carry the ramp's rate across the
    network's round trip (:mod:`tsstore.write.window`), known from the project's recent calls
    (:meth:`~tsstore.clock.ServerClock.round_trip`), or measured by reading the server's time
    once (one read) when a job's sender first needs it unknown."""

    def __init__(
        self,
        spec: SeriesSpec,
        options: WriteOptions,
        *,
        side: WriterSide,
        transport: Callable[..., Transport],
        collection_of: Callable[[SeriesSpec], Any],
    ) -> None:
        self.spec, self.options = spec, options
        self._side, self._transport, self._collection_of = side, transport, collection_of
        self._limiters: dict[str, tuple[RampLimiter, int]] = {}
        self._counters: dict[str, SeriesCounters] = {}

    def series(self, spec: SeriesSpec) -> SeriesCounters:
        """The series counters of ``spec``'s collection, on the sync client (made once)."""
        if spec.collection not in self._counters:
            self._counters[spec.collection] = self._side.counters(spec)
        return self._counters[spec.collection]

    def _round_trip(self, spec: SeriesSpec) -> Callable[[], float | None]:
        """The network's round trip as the project's clock knows it; the first time the sender
        asks without it known, measured by reading the server's time twice (two reads of a
        document that does not exist) on a thread of its own, beside the first batches rather
        than before them: never on an event loop, and no batch waits for it. Until they answer,
        and if they fail, the round trip is unknown (the window then keeps its least)."""
        clock = self._side.clock()
        measuring = False

        def measure() -> None:
            # Any failure (a fault, the client closed under it) only leaves the round trip
            # unknown; nothing of this thread may reach the user as a traceback. The first
            # call on a new channel also sets its connection up (handshakes of its own): the
            # clock keeps the shorter call. A writer through the cutting proxy of
            # bench/faults.py took its 0.27 s for the round trip (the second took 0.01-0.06 s),
            # kept 12-15 batches in flight instead of 4-6, each answered after more than the
            # ~1 s between cuts, and sent 2.5 times its documents (a clean run, once).
            with contextlib.suppress(Exception):
                self._side.probe(spec)
                self._side.probe(spec)

        def round_trip() -> float | None:
            nonlocal measuring
            if not measuring and clock.round_trip() is None:
                measuring = True
                threading.Thread(target=measure, daemon=True, name="tsstore-round-trip").start()
            return clock.round_trip()

        return round_trip

    def job(self, ask: Send[R], ticks: Iterator[Tick]) -> Job[R]:
        """The job that runs ``ask`` over ``ticks``."""
        spec, making, options = ask.spec or self.spec, ask.making, ask.options
        count = self.series(spec).count_written if ask.counted else None

        def written(batch: list[Written]) -> None:  # every settled batch: the counters, then the verb
            if count is not None:
                count(batch)
            making.settled(batch)

        guard = self._side.late_guard(spec)
        timeout = spec.late.send_timeout.total_seconds()
        transport = guard.guard(self._transport(self._collection_of(spec), timeout=timeout))
        limiter, batch_docs = self._limiter(spec)
        sender = bulk_sender(
            transport, spec, pace=limiter, batch_docs=batch_docs, max_attempts=self.options.max_attempts,
            on_duplicate=options.on_duplicate, on_progress=options.on_progress, on_status=options.on_status,
            on_written=written, window=Window(round_trip=self._round_trip(spec)),
        )  # fmt: skip
        return Job(sender, making.docs(ticks), lambda: making.result(sender), ask.what, ask.tolerate, guard.close)

    def _limiter(self, spec: SeriesSpec) -> tuple[RampLimiter, int]:
        """The ramp of ``spec``'s collection (from 500 ops/s, or the ceiling unramped, up to
        the write options' ceiling or the spec's capacity), and the largest batch it sends: a
        batch never needs more tokens than the slowest second holds."""
        if spec.collection not in self._limiters:
            ceiling = self.options.max_ops_per_second or spec.max_write_rate
            initial = ceiling if not self.options.ramp else min(self.options.initial_ops_per_second, ceiling)
            self._limiters[spec.collection] = (RampLimiter(initial=initial, ceiling=ceiling), initial)
        return self._limiters[spec.collection]
