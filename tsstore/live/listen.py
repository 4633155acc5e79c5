"""Listeners, one per chunk query, feeding :mod:`tsstore.live.state`: a live read as an ask
(:class:`ListenWindow`, :class:`ListenTail`: the plan, its bounds and the columns shown, as
data), answered by :func:`start` over the database's :class:`Listen` (one listener on one
:class:`ChunkQuery`), which each backend gives: the client's real-time listeners in Native
mode (:func:`tsstore.native_mode.listener`), the memory database's own
(:mod:`tsstore.memory.listen`); Datastore mode has none.

In Native mode the client runs each listener (``Query.on_snapshot``) on threads of its own
and reopens its stream after recoverable errors, resuming from its last snapshot; the
snapshot after a reopen (or after a RESET that drops documents received) is rebuilt from one
query at its read time (:func:`tsstore.wire.listen`: what the emulator sends there may lack
documents for good). Every listener's callback only puts the snapshot on one queue; the
caller's thread drains the queue, so a burst of snapshots on several chunks becomes one
update. A listener that stops without being closed (an error the client does not recover
from) raises :class:`LiveError`.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, overload

from tsstore.asks import Asking
from tsstore.errors import LiveError
from tsstore.live.state import TailState, TailTick, WindowState, WindowUpdate
from tsstore.logs import FAULTS_RETRIED
from tsstore.read.chunks import Chunk
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.ticks import Tick, get_path
from tsstore.times import plain_datetime

#: How often an idle reader checks that its listeners still run (seconds).
LIVENESS_CHECK = 1.0
#: How long starting a watch or tail waits for every listener's first report (seconds).
START_TIMEOUT = 60.0
#: A tail's replacement listener that has made no first report after this many seconds is
#: replaced in turn (a loaded emulator was seen never to answer one; the listener it was to
#: replace kept reporting, but the chunk's bound, and so the tail's memory, stopped moving).
STALL_TIMEOUT = 15.0
#: A listener the client gave up on is listened to again, up to this many times a minute
#: without a report in between; past that its error is final (:class:`LiveError`).
RELISTENS_PER_MINUTE = 3

log = logging.getLogger(__name__)

#: What the parameters the live objects share mean (the API reference describes a parameter
#: from here unless its docstring says more).
PARAMETER_HELP = {
    "decode": "turns a reported document into a :class:`~tsstore.ticks.Tick` (:func:`decoder`: its "
    "timestamp, and only the columns asked when a read named them)",
    "timeout": "how long to wait, in seconds; ``None``: until an item comes or the live read is closed",
    "listen": "the database's listener on one chunk query (:class:`Listen`), which the store's backend gives",
}


# ---------------------------------------------------------------------------- what a backend answers


@dataclass(frozen=True)
class ChunkQuery:
    """One listener's query, as data: ``plan``'s query over the shard values ``chunk``, in
    the plan's direction, at most ``limit`` documents (``None``: every match). Each backend
    builds its database's query from it, as it builds a read's."""

    plan: QueryPlan
    chunk: Chunk
    limit: int | None


class Reported(Protocol):
    """A document as a listener reports it: the client's ``DocumentSnapshot``, or the memory
    database's."""

    @property
    def id(self) -> str: ...

    @property
    def create_time(self) -> dt.datetime: ...

    def to_dict(self) -> dict[str, Any] | None: ...


#: What a listener calls with each snapshot: every document its query holds then (in the
#: query's order when the listener was made ``ordered``), the documents this snapshot added
#: (new matches: the first snapshot's are all it holds), and the snapshot's read time.
OnSnapshot = Callable[[Sequence[Reported], Sequence[Reported], dt.datetime], None]


class Subscription(Protocol):
    """A running listener: whether it still runs (a client gives one up on some errors), and
    how it is stopped."""

    @property
    def is_active(self) -> bool: ...

    def unsubscribe(self) -> None: ...


class Listen(Protocol):
    """A database's listeners: ``listen(query, on_snapshot, ordered=...)`` starts one on
    ``query`` that calls ``on_snapshot`` with its first snapshot, then with one for each
    change of what the query returns, in commit order (``ordered``: ``False`` when the caller
    needs neither the documents nor the changes in the query's order: a tail)."""

    def __call__(self, query: ChunkQuery, on_snapshot: OnSnapshot, /, *, ordered: bool) -> Subscription: ...


@dataclass(frozen=True)
class ListenWindow(Asking["LiveWatch"]):
    """A watch: the newest ``limit`` ticks of ``plan`` (newest first, every column: one
    listener per chunk, each on its chunk's newest ``limit``), shown as ``columns`` (``None``:
    every column)."""

    plan: QueryPlan
    limit: int
    columns: tuple[str, ...] | None
    what: str = "listening to the newest ticks"


@dataclass(frozen=True)
class ListenTail(Asking["LiveTail"]):
    """A tail: the ticks of ``plan`` (every column, from ``since`` minus ``lateness`` on)
    whose documents are created from ``since`` on, each once; ``lateness`` and ``hold`` as
    :class:`LiveTail` takes them; shown as ``columns`` (``None``: every column)."""

    plan: QueryPlan
    since: dt.datetime
    lateness: dt.timedelta
    hold: int
    columns: tuple[str, ...] | None
    what: str = "listening to new ticks"


@overload
def start(ask: ListenWindow, listen: Listen) -> LiveWatch: ...
@overload
def start(ask: ListenTail, listen: Listen) -> LiveTail: ...
def start(ask: ListenWindow | ListenTail, listen: Listen) -> LiveWatch | LiveTail:
    """The answer to a live read's ask: its listeners started on ``listen`` (returns once each
    has made its first report)."""
    return LiveWatch(ask, listen) if isinstance(ask, ListenWindow) else LiveTail(ask, listen)


# ---------------------------------------------------------------------------- the listeners

Event = tuple[Hashable, Sequence[Reported], Sequence[Reported], dt.datetime]


class Listeners:
    """Listeners on ``listen``'s database keyed by the caller; their snapshots in arrival
    order from :meth:`events`.

    - ``ordered``: whether each snapshot's documents come in the query's order (a tail needs
      no order, and sorting what a listener holds at every snapshot is its main cost)"""

    def __init__(self, listen: Listen, *, ordered: bool) -> None:
        self._listen = listen
        self._ordered = ordered
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._watches: dict[Hashable, Subscription] = {}
        self._queries: dict[Hashable, ChunkQuery] = {}
        self._deaths: dict[Hashable, deque[float]] = {}
        self._lock = threading.Lock()
        self.closed = False
        self.relistens = 0

    def listen(self, key: Hashable, query: ChunkQuery) -> None:
        def on_snapshot(docs: Sequence[Reported], added: Sequence[Reported], read_time: dt.datetime) -> None:
            self._deaths.pop(key, None)  # it reports: the deaths before count no more
            self._queue.put((key, docs, added, read_time))

        with self._lock:
            if self.closed:
                return
            self._queries[key] = query
            self._watches[key] = self._listen(query, on_snapshot, ordered=self._ordered)

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._watches)

    def stop(self, key: Hashable) -> None:
        with self._lock:
            watch = self._watches.pop(key, None)
            self._queries.pop(key, None)
        if watch is not None:
            watch.unsubscribe()

    def events(self, timeout: float | None) -> list[Event]:
        """The snapshots that arrived: waits up to ``timeout`` for the first, then takes every
        one already queued. Empty on a timeout or once closed; raises :class:`LiveError` when
        a listener stopped by itself."""
        self.check()
        try:
            first = self._queue.get(timeout=timeout)
        except queue.Empty:
            return []
        out = []
        item: Event | None = first
        while item is not None:
            out.append(item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        return out

    def check(self) -> None:
        """Listen again to what a listener the client gave up on listened to (its first
        report then says what is there now: a tail delivers what it had not, a watch redraws);
        raise :class:`LiveError` when that keeps happening without a report in between (the
        client gives a listener up on each cut connection, CANCELLED: a network cut every
        second is not a listener that cannot work)."""
        with self._lock:
            dead = [key for key, watch in self._watches.items() if not watch.is_active]
        now = time.monotonic()
        for key in dead:
            if self.closed:
                return
            deaths = self._deaths.setdefault(key, deque())
            deaths.append(now)
            while deaths and deaths[0] < now - 60:
                deaths.popleft()
            chunk = key[0] if isinstance(key, tuple) else key
            if len(deaths) > RELISTENS_PER_MINUTE:
                raise LiveError(
                    f"the listener on chunk {chunk} stopped {len(deaths)} times within a minute on errors the client "
                    "does not recover from (the client logged why)"
                )
            self.relistens += 1
            log.warning("the client gave up the listener on chunk %s (it logged why): listening again, %d time(s) "
                        "within a minute", chunk, len(deaths), extra={FAULTS_RETRIED: 1})  # fmt: skip
            self.listen(key, self._queries[key])

    def close(self) -> None:
        with self._lock:
            self.closed = True
            watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.unsubscribe()
        self._queue.put(None)


class _Live:
    """What a watch and a tail share: the listeners, ``close`` and the context manager."""

    def __init__(self, listen: Listen, decode: Callable[[Reported], Tick], *, ordered: bool) -> None:
        self._listeners = Listeners(listen, ordered=ordered)
        self._decode = decode

    def _listen_all(self, queries: dict[Hashable, ChunkQuery], handle: Callable[[Event], None]) -> None:
        """Start a listener on each of ``queries`` and return once each has made its first
        report (each handled); on an error, none is left running."""
        try:
            for key, query in queries.items():
                self._listeners.listen(key, query)
        except BaseException:
            self.close()
            raise
        self._await_first(set(queries), handle)

    def close(self) -> None:
        """Stop every listener (and its threads); iteration then ends."""
        self._listeners.close()

    def _await_first(self, keys: set[Hashable], handle: Callable[[Event], None]) -> None:
        """Return once every listener of ``keys`` has made its first report (each handled),
        so that whatever is written after the watch or tail is made, every listener reports:
        a write racing a listener's start can otherwise slip between its first snapshot and
        its changes (seen on the emulator)."""
        deadline = time.monotonic() + START_TIMEOUT
        waiting = set(keys)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise LiveError(f"{len(waiting)} listener(s) made no first report within {START_TIMEOUT:g} s")
            try:
                events = self._listeners.events(min(left, LIVENESS_CHECK))
            except LiveError:
                self.close()
                raise
            for event in events:
                waiting.discard(event[0])
                handle(event)

    @property
    def closed(self) -> bool:
        return self._listeners.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LiveWatch(_Live, Iterator[WindowUpdate]):
    """The newest ticks over every chunk, kept current: iterate for each
    :class:`~tsstore.live.state.WindowUpdate`; :meth:`next_update` waits with a timeout.
    Making one starts the listeners and returns once each has made its first report.

    - ``ask``: the watch's plan (one listener per chunk, each on the chunk's newest ``limit``
      matches), how many ticks the window holds (the newest of the chunks' latest reports
      together, merged in the plan's order: timestamp, range-filtered value fields, document
      id) and the columns shown"""

    def __init__(self, ask: ListenWindow, listen: Listen) -> None:
        plan = ask.plan
        super().__init__(listen, decoder(plan.spec.timestamp_field, ask.columns), ordered=True)
        self._state = WindowState(len(plan.chunks), ask.limit, key=plan.key)
        self._listen_all({i: ChunkQuery(plan, chunk, ask.limit) for i, chunk in enumerate(plan.chunks)}, self._report)

    def _report(self, event: Event) -> None:
        key, docs, _, read_time = event
        assert isinstance(key, int)  # a chunk's index
        self._state.report(key, (self._decode(d) for d in docs), read_time)

    def next_update(self, timeout: float | None = None) -> WindowUpdate | None:
        """The next update, or ``None`` when ``timeout`` seconds pass without one or the
        watch is closed; ``timeout=0`` polls (what has arrived, without waiting)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        wait = 0.0  # first what has arrived and what the reports already taken hold, without waiting
        while not self._listeners.closed:
            for event in self._listeners.events(wait):  # what has arrived is taken even when the time is up
                self._report(event)
            update = self._state.update()
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if update is not None or left == 0:
                return update
            wait = LIVENESS_CHECK if left is None else min(left, LIVENESS_CHECK)
        return None

    def __next__(self) -> WindowUpdate:
        update = self.next_update()
        if update is None:
            raise StopIteration
        return update


class LiveTail(_Live, Iterator[TailTick]):
    """Every tick written from ``since`` on, once each, in the order the listeners report
    them; ``late`` marks one older than a tick delivered before it. A chunk's listener is
    restarted from the tail's moving bound (:meth:`TailState.bound`) once it holds more than
    ``hold`` documents, so memory stays bounded. Making one starts the listeners and returns
    once each has made its first report.

    - ``ask``: the tail's plan (one listener per chunk, two while the first is being
      replaced, each on its chunk's ticks from the chunk's bound on), its ``since``,
      ``lateness`` and ``hold`` (restart a chunk's listener from the tail's moving bound once
      it holds more than this many documents), and the columns shown"""

    def __init__(self, ask: ListenTail, listen: Listen) -> None:
        # what a tail delivers comes from the snapshots' additions, in any order
        super().__init__(listen, decoder(ask.plan.spec.timestamp_field, ask.columns), ordered=False)
        state = self._state = TailState(since=ask.since, lateness=ask.lateness)
        self._plan = ask.plan
        self._hold = ask.hold
        chunks = len(ask.plan.chunks)
        self._ready: deque[TailTick] = deque()
        self._generation = [0] * chunks  # the listener each chunk is moving to
        self._bounds = [state.bound()] * chunks
        self._reported: list[dt.datetime | None] = [None] * chunks  # the newest tick each chunk reported
        self._pending: dict[int, float] = {}  # chunk -> when its replacement listener started
        self.restarts = 0
        self.stalls = 0
        self._handed = self._handed_late = 0
        self._listen_all({(chunk, 0): self._query_from(chunk, self._bounds[chunk]) for chunk in range(chunks)},
                         lambda event: self._take(*event[:3]))  # fmt: skip

    @property
    def delivered(self) -> int:
        """Ticks handed to the caller so far (a tick accepted but not yet taken is not)."""
        return self._handed

    @property
    def late(self) -> int:
        """How many of the ticks handed to the caller were late."""
        return self._handed_late

    def next_tick(self, timeout: float | None = None) -> TailTick | None:
        """The next tick, or ``None`` when ``timeout`` seconds pass without one or the tail is
        closed; ``timeout=0`` polls (what has arrived, without waiting)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready:
            if self._listeners.closed:
                return None
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            wait = LIVENESS_CHECK if left is None else min(left, LIVENESS_CHECK)
            for key, docs, added, _ in self._listeners.events(wait):  # taken even when the time is up
                self._take(key, docs, added)
            self._replace_stalled()
            if left == 0 and not self._ready:
                return None
        tick = self._ready.popleft()
        self._handed += 1
        self._handed_late += tick.late
        return tick

    def __next__(self) -> TailTick:
        tick = self.next_tick()
        if tick is None:
            raise StopIteration
        return tick

    def _take(self, key: Hashable, docs: Sequence[Reported], added: Sequence[Reported]) -> None:
        assert isinstance(key, tuple)  # (chunk, the listener's generation)
        chunk, generation = key
        current = generation == self._generation[chunk]
        if current and self._pending.pop(chunk, None) is not None:  # the new listener reports:
            for older in self._listeners.keys():  # the ones it replaces may go
                if isinstance(older, tuple) and older[0] == chunk and older[1] < generation:
                    self._listeners.stop(older)
        for document in added:
            tick = self._decode(document)
            newest = self._reported[chunk]
            self._reported[chunk] = tick.timestamp if newest is None else max(newest, tick.timestamp)
            delivered = self._state.offer(tick, plain_datetime(document.create_time))
            if delivered is not None:
                self._ready.append(delivered)
        if current and len(docs) > self._hold:
            self._move_on(chunk)

    def _move_on(self, chunk: int) -> None:
        # A chunk's bound moves only past what its own listener reported: listeners lag each
        # other by seconds, and one bound for all would skip what a lagging chunk has not sent.
        reported = self._reported[chunk]
        if reported is None:
            return
        bound = min(self._state.bound(), reported - self._state.lateness)
        if bound <= self._bounds[chunk]:
            return  # nothing to gain yet: the documents held are all within the lateness
        self._bounds[chunk] = bound
        self.restarts += 1
        log.debug("chunk %d's listener holds more than %d documents: it listens again from %s", chunk, self._hold,
                  bound.isoformat())  # fmt: skip
        self._listen_from(chunk, bound)
        self._state.forget_before(min(self._bounds))

    def _query_from(self, chunk: int, bound: dt.datetime) -> ChunkQuery:
        """The query of chunk ``chunk``'s ticks at or after ``bound``, which a listener of
        that chunk starts on."""
        plan = plan_query(self._plan.spec, self._plan.query.replace(start=bound), direction=self._plan.direction)
        return ChunkQuery(plan, self._plan.chunks[chunk], None)

    def _listen_from(self, chunk: int, bound: dt.datetime) -> None:
        self._generation[chunk] += 1
        self._pending[chunk] = time.monotonic()
        self._listeners.listen((chunk, self._generation[chunk]), self._query_from(chunk, bound))

    def _replace_stalled(self) -> None:
        """Replace a replacement listener that has not reported for :data:`STALL_TIMEOUT`
        seconds by another from the same bound (the listener before it keeps reporting)."""
        now = time.monotonic()
        for chunk, started in list(self._pending.items()):
            if now - started > STALL_TIMEOUT:
                self._listeners.stop((chunk, self._generation[chunk]))
                self.stalls += 1
                self._listen_from(chunk, self._bounds[chunk])


def decoder(timestamp_field: str, columns: Sequence[str] | None) -> Callable[[Reported], Tick]:
    """A reported document as a :class:`Tick` (only ``columns`` and the timestamp, when given)."""
    path = timestamp_field.split(".")

    def decode(doc: Reported) -> Tick:
        data = doc.to_dict() or {}  # the client builds a new dict on every call: once
        timestamp = plain_datetime(get_path(data, path))
        return Tick(doc.id, timestamp, data if columns is None else _project(data, columns))

    return decode


def _project(data: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column in columns:
        *parents, last = column.split(".")
        source: Any = data
        for part in parents:
            source = source.get(part) if isinstance(source, dict) else None
        if isinstance(source, dict) and last in source:
            target = out
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = source[last]
    return out
