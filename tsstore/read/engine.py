"""Run a planned query's chunks: lean pages, resumable streams, one merge.

A *fetch* function (the store's) starts one chunk's Firestore query and returns its ticks
in query order: ``fetch(chunk, after, limit, read_time)``, ``after`` the (timestamp, id)
to resume after, ``limit`` ``None`` for no limit. Everything else is here:

- :func:`read_page`: the first ``rows`` ticks of the merge, exact: lean asks first, up to
  LEAN_REFILLS lean refills, then one refill of all that may still be missing; each round
  concurrent over the chunks (:mod:`tsstore.read.cost`).
- :class:`ChunkStream`: one chunk as one streaming query (gRPC flow control delivers it
  as it is consumed), resumed after its last tick on a transient error, and, when the
  snapshot it reads at expires and the caller did not fix ``read_time``, continued at a
  newer one.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future

from google.api_core import exceptions as gexc

from tsstore.read.cost import ReadStats, lean_asks, lean_refills, refill_asks
from tsstore.read.merge import merge_streams, take
from tsstore.ticks import Tick

Chunk = tuple[str, ...]
Position = tuple[dt.datetime, str]
Fetch = Callable[[Chunk, Position | None, int | None, dt.datetime | None], Iterator[Tick]]

#: Transient errors after which a chunk read resumes after the last tick it returned.
TRANSIENT = (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.InternalServerError, gexc.Aborted)
READ_ATTEMPTS = 5
#: Refill rounds that ask each chunk only its lean share of what may still be missing;
#: the round after them asks for all of it, so a page never takes more than
#: LEAN_REFILLS + 2 rounds (and usually one or two).
LEAN_REFILLS = 2


def snapshot_expired(exc: BaseException) -> bool:
    """Whether Firestore refused a read because its ``read_time`` is older than it keeps."""
    return isinstance(exc, gexc.FailedPrecondition) and "read_time" in str(exc)


def read_page(
    *,
    chunks: Sequence[Chunk],
    fetch: Fetch,
    pool: Executor,
    rows: int,
    after: Position | None,
    read_time: dt.datetime | None,
    descending: bool,
    stats: ReadStats,
    lean: bool = True,
) -> list[Tick]:
    """The first ``rows`` ticks of all chunks merged in query order: exactly what asking
    every chunk for ``rows`` would give (which ``lean=False`` does: one round, about
    chunks × rows documents), for about ``rows`` documents read."""
    stats.chunks = len(chunks)
    sizes = [len(c) for c in chunks]
    asks = lean_asks(rows, sizes) if lean else [rows] * len(chunks)
    lists = _round(pool, fetch, [(c, after, a) for c, a in zip(chunks, asks)], read_time, stats)
    if len(chunks) == 1:
        return lists[0][:rows]  # the server's order is the query's order
    for refill in range(LEAN_REFILLS + 1):
        order = {tick.id: pos for pos, tick in enumerate(merge_streams(lists, descending=descending))}
        ranks = [None if len(got) < ask else order[got[-1].id] + 1 for got, ask in zip(lists, asks)]
        needed = refill_asks(rows, ranks)  # enough to be exact; lean rounds ask less
        todo = [i for i, more in enumerate(needed) if more]
        if not todo:
            break
        if refill < LEAN_REFILLS:
            needed = lean_refills(needed, sizes)
        stats.refills += len(todo)
        requests = [(chunks[i], (lists[i][-1].timestamp, lists[i][-1].id), needed[i]) for i in todo]
        for i, more in zip(todo, _round(pool, fetch, requests, read_time, stats)):
            lists[i].extend(more)
            asks[i] = len(lists[i]) if len(more) == needed[i] else len(lists[i]) + 1  # + 1: it ran dry
    return list(take(merge_streams(lists, descending=descending), rows))


def _round(
    pool: Executor,
    fetch: Fetch,
    requests: Sequence[tuple[Chunk, Position | None, int]],
    read_time: dt.datetime | None,
    stats: ReadStats,
) -> list[list[Tick]]:
    """Fetch every request concurrently: one round trip of waiting."""
    # A limited ChunkStream read to its end: resumed after its last tick on transient errors.
    futures = [
        pool.submit(list, ChunkStream(fetch, chunk, after=after, limit=ask, read_time=read_time, stats=stats))
        for chunk, after, ask in requests
    ]
    stats.waited()
    return [future.result() for future in futures]


class ChunkStream(Iterator[Tick]):
    """One chunk's ticks from one streaming query, consumed as the merge needs them. Given a
    ``pool``, the query is opened there at once, so every chunk's query is in flight
    together (the client waits for a stream's first result when it opens it).

    After a transient error it resumes after its last tick. If Firestore refuses the
    snapshot as too old and ``renew`` is given (the caller did not fix ``read_time``), it
    continues after its last tick at the snapshot ``renew()`` returns; otherwise the error
    goes to the caller.
    """

    def __init__(
        self,
        fetch: Fetch,
        chunk: Chunk,
        *,
        after: Position | None,
        limit: int | None,
        read_time: dt.datetime | None,
        stats: ReadStats,
        renew: Callable[[], dt.datetime] | None = None,
        pool: Executor | None = None,
    ) -> None:
        self._fetch, self._chunk, self._after, self._left = fetch, chunk, after, limit
        self._read_time, self._stats, self._renew = read_time, stats, renew
        self._failures = 0
        self._returned = 0  # by the query now open
        self._it: Iterator[Tick] | None = None
        self._opening: Future[Iterator[Tick]] | None = None
        self._done = limit == 0
        if pool is not None and not self._done:
            self._opening = pool.submit(self._open)

    def _open(self) -> Iterator[Tick]:
        self._returned = 0
        self._stats.query_done(0)  # billed at least once, returned documents are added below
        return self._fetch(self._chunk, self._after, self._left, self._read_time)

    def __next__(self) -> Tick:
        while not self._done:
            try:
                if self._it is None:
                    opening, self._opening = self._opening, None
                    self._it = opening.result() if opening is not None else self._open()
                tick = next(self._it)
            except StopIteration:
                self._done = True
                break
            except TRANSIENT:
                self._failures += 1
                if self._failures >= READ_ATTEMPTS:
                    raise
                self._it = None
                time.sleep(0.1 * 2 ** (self._failures - 1))
                continue
            except gexc.FailedPrecondition as exc:
                if self._renew is None or not snapshot_expired(exc):
                    raise
                self._read_time, self._it = self._renew(), None
                continue
            self._returned += 1
            self._stats.document_returned(first_of_query=self._returned == 1)
            self._after = (tick.timestamp, tick.id)
            if self._left is not None:
                self._left -= 1
                self._done = self._left == 0
            return tick
        raise StopIteration
