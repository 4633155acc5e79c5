"""Live reads as requests: a window of the newest ticks kept current, and a tail of every
tick as it is written. Each plans, and asks for its listeners as data
(:class:`~tsstore.live.listen.ListenWindow`, :class:`~tsstore.live.listen.ListenTail`); the
store's backend answers with the live object, its listeners started on the database's own
(:func:`tsstore.live.listen.start`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from tsstore.asks import ask
from tsstore.errors import ConfigError, QueryError
from tsstore.live.listen import ListenTail, ListenWindow, LiveTail, LiveWatch
from tsstore.live.state import TailTick, WindowUpdate
from tsstore.read.plan import oldest_first, plan_query
from tsstore.read.query import Query, Where, given
from tsstore.spec import Direction
from tsstore.times import TimeLike, to_utc
from tsstore.verbs.declare import Listening
from tsstore.verbs.reading import server_time
from tsstore.verbs.request import Request, Seat

#: How far behind the newest delivered tick a tail still sees a tick, and how many documents
#: a tail's chunk listener holds before it moves on (see :func:`tail`). A tail holds about
#: write rate x lateness documents (plus ``hold`` per chunk at most before it moves on): 30 s
#: at 1 000 ticks/s is 30 000.
DEFAULT_LATENESS = dt.timedelta(seconds=30)
DEFAULT_HOLD = 10_000


#: What each parameter of these verbs means (the API reference describes a parameter from
#: here unless the verb's docstring says more).
PARAMETER_HELP = {
    "since": "deliver the ticks written from this instant on; ``None``: the server's time now",
    "lateness": "how much older than the newest delivered tick a tick may be and still be on time "
    "(older ones come marked ``late``)",
    "hold": "restart a chunk's listener from the moving bound once it holds this many documents (bounds memory)",
}


def watch(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    limit: int,
    where: Where = None,
    columns: Iterable[str] | None = None,
) -> Listening[LiveWatch, WindowUpdate]:
    """The newest ``limit`` ticks matching ``where`` (projected to ``columns``), kept
    current: iterate for a :class:`~tsstore.live.state.WindowUpdate` each time the window
    changes (``window``, ``entered``, ``left``, each chunk's ``read_times``).

    One listener per shard chunk, on the chunk's query limited to ``limit`` newest first;
    the window merges the chunks' reports by (timestamp, id). Snapshots that arrive
    together on several chunks make one update. Each chunk's part of a window is as of its
    own snapshot time, and each chunk's time only moves forward. ``close()`` (or ``with``)
    stops every listener."""
    q = Query.of(query, {"limit": limit, **given(where=where, columns=columns)})
    q.only(("where", "limit", "columns"), "watch")
    shown = plan_query(seat.spec, q).columns
    plan = plan_query(seat.spec, q.replace(columns=None), direction=Direction.DESC)
    return Listening(ask(ListenWindow(plan, limit, shown)), "next_update")


def tail(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    since: TimeLike | None = None,
    lateness: dt.timedelta = DEFAULT_LATENESS,
    hold: int = DEFAULT_HOLD,
    where: Where = None,
    columns: Iterable[str] | None = None,
) -> Listening[LiveTail, TailTick]:
    """Every tick matching ``where`` that is written from ``since`` (default: the server's
    time now) on, once each, in the order they arrive, as
    :class:`~tsstore.live.state.TailTick` values (``tick``, ``late``, ``created``).

    A tick is seen when its timestamp is at most ``lateness`` older than the newest tick
    delivered; an older one is marked ``late``. Each chunk's listener reads from that
    moving bound on and is restarted from it once it holds more than ``hold`` documents,
    so memory stays bounded however long the tail runs. Reconnections are the client's
    (its listeners resume); a tick reported again is not delivered again. ``close()``
    stops every listener."""
    q = Query.of(query, given(where=where, columns=columns))
    q.only(("where", "columns"), "tail")
    if not isinstance(lateness, dt.timedelta) or lateness < dt.timedelta(0):
        raise ConfigError(f"lateness {lateness!r} is not allowed; give a timedelta of zero or more")
    if isinstance(hold, bool) or not isinstance(hold, int) or hold < 1:
        raise ConfigError(f"hold {hold!r} is not allowed; give a positive number of documents")
    shown = plan_query(seat.spec, q).columns
    try:
        since_t = None if since is None else to_utc(since, name="since")
    except ValueError as exc:
        raise QueryError(str(exc)) from None

    def opening() -> Request[LiveTail]:
        begin = since_t if since_t is not None else (yield from server_time(seat))
        base = oldest_first(seat.spec, q.replace(columns=None, start=begin - lateness))  # TailState.bound() at first
        return (yield from ask(ListenTail(base, begin, lateness, hold, shown)))

    return Listening(opening(), "next_tick")
