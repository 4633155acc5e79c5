"""How a store's bulk sends become jobs (:class:`Writer`, which each store holds): a sender on
the store's transport, paced by the collection's ramp, as many batches in flight as the round
trip asks, its settled batches counted into the series counters, its late writes marked.

What it asks of the database besides the writes is a :class:`WriterSide` (each backend has
one); what it asks of a send is a :class:`Sending` (:class:`tsstore.verbs.request.Send` is one):
what it makes and reports (its :class:`Making`) and whom it tells (:class:`SendOptions`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from tsstore.clock import ServerClock
from tsstore.spec import DuplicatePolicy, SeriesSpec
from tsstore.ticks import Tick
from tsstore.write.job import Job, bulk_sender
from tsstore.write.marks import LateGuard
from tsstore.write.ops import Transport
from tsstore.write.options import WriteOptions
from tsstore.write.prepare import PreparedDoc
from tsstore.write.ramp import RampLimiter
from tsstore.write.sender import BulkSender, Written
from tsstore.write.window import Window

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Counting(Protocol):
    """The series counters of one collection, as a job feeds them its settled batches."""

    def count_written(self, batch: list[Written], /) -> None: ...


C = TypeVar("C", bound=Counting)
C_co = TypeVar("C_co", bound=Counting, covariant=True)


class WriterSide(Protocol[C_co]):
    """What a bulk send asks of the database besides its writes, on a sync client: a backend's
    (:class:`tsstore.native_mode.FirestoreSide`, :class:`tsstore.datastore_mode.DatastoreSide`, the
    memory database's)."""

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        """The guard that marks the job's late writes into ``spec``'s collection."""

    def counters(self, spec: SeriesSpec) -> C_co:
        """The series counters of ``spec``'s collection."""

    def probe(self, spec: SeriesSpec) -> None:
        """Read the server's time once (the round trip is then known)."""

    def clock(self) -> ServerClock:
        """The project's clock."""


class Making(Protocol[R_co]):
    """What a bulk send writes and reports: its documents, made from the ticks read (an
    iterator the sender's thread consumes; empty when the send reads nothing); what each
    settled batch means to the verb (``settled``, in the sender's calling thread); and the
    result the sender's counts give, which is also what Ctrl-C or a refusal reports as done.
    A verb's making subclasses it (and so takes its ``settled``)."""

    def docs(self, ticks: Iterator[Tick], /) -> Iterable[PreparedDoc]: ...

    def settled(self, batch: list[Written], /) -> None:
        """Nothing, unless the verb keeps what its batches settled (a write's ids)."""
        return None

    def result(self, sender: BulkSender, /) -> R_co: ...


@dataclass(frozen=True)
class SendOptions:
    """How a send's sender treats what it finds and whom it tells: ``on_duplicate`` (a tick
    whose key and time are stored with other content), ``on_progress`` (documents settled
    since the last call), ``on_status`` (what the sender waits for, or ``None``)."""

    on_duplicate: DuplicatePolicy = "keep"
    on_progress: Callable[[int], None] | None = None
    on_status: Callable[[str | None], None] | None = None


class Sending(Protocol[R_co]):
    """A bulk send as the writer takes it: its making, into ``spec``'s collection (None: the
    store's), counted or not, the refusal codes it takes as an answer, its name and options."""

    @property
    def making(self) -> Making[R_co]: ...

    @property
    def spec(self) -> SeriesSpec | None: ...

    @property
    def counted(self) -> bool: ...

    @property
    def tolerate(self) -> frozenset[int]: ...

    @property
    def what(self) -> str: ...

    @property
    def options(self) -> SendOptions: ...


class Writer(Generic[C]):
    """How a store's bulk sends become jobs: a sender on the backend's ``transport`` (called
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
        side: WriterSide[C],
        transport: Callable[..., Transport],
        collection_of: Callable[[SeriesSpec], Any],
    ) -> None:
        self.spec, self.options = spec, options
        self._side, self._transport, self._collection_of = side, transport, collection_of
        self._limiters: dict[str, tuple[RampLimiter, int]] = {}
        self._counters: dict[str, C] = {}

    def series(self, spec: SeriesSpec) -> C:
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

    def job(self, ask: Sending[R], ticks: Iterator[Tick]) -> Job[R]:
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
        return Job(sender, making.docs(ticks), lambda: making.result(sender), ask.what, ask.tolerate, guard.close,
                   collection=spec.collection)  # fmt: skip

    def _limiter(self, spec: SeriesSpec) -> tuple[RampLimiter, int]:
        """The ramp of ``spec``'s collection (from 500 ops/s, or the ceiling unramped, up to
        the write options' ceiling or the spec's capacity), and the largest batch it sends: a
        batch never needs more tokens than the slowest second holds."""
        if spec.collection not in self._limiters:
            ceiling = self.options.max_ops_per_second or spec.max_write_rate
            initial = ceiling if not self.options.ramp else min(self.options.initial_ops_per_second, ceiling)
            self._limiters[spec.collection] = (RampLimiter(initial=initial, ceiling=ceiling), initial)
        return self._limiters[spec.collection]
