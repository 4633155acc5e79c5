"""Live reads from asyncio: :class:`AsyncLive` over the listeners' thread-side objects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from tsstore.live.listen import LIVENESS_CHECK
from tsstore.telemetry import VerbCall

T = TypeVar("T")


class AsyncLive(AsyncIterator[T]):
    """A live watch or tail as an async iterator. Its listeners start when ``async with``
    enters (so ticks written inside the block are seen), on :meth:`started`, or else on first
    use; each wait for the next item runs in a worker thread (listeners exist on the sync
    client only), so the event loop never blocks. ``async with`` or :meth:`close` stops every
    listener.

    - ``start``: an async function that starts the listeners and returns the live object (a
      :class:`~tsstore.live.listen.LiveWatch` or :class:`~tsstore.live.listen.LiveTail`)
    - ``step``: the name of the live object's method that waits for its next item, given a
      timeout in seconds (``"next_update"`` or ``"next_tick"``)"""

    def __init__(self, start: Callable[[], Awaitable[Any]], step: str) -> None:
        self._start = start
        self._step = step
        self._live: Any = None
        self._closed = False

    async def started(self) -> AsyncLive[T]:
        """Start listening now (once); a tail sees what is written from here on."""
        if self._live is None:
            self._live = await self._start()
            if self._closed:
                self._live.close()
        return self

    async def next(self, timeout: float | None = None) -> T | None:
        """The next item, or ``None`` after ``timeout`` seconds without one or once closed.

        - ``timeout``: how long to wait, in seconds; ``None``: until an item comes or the live
          read is closed"""
        await self.started()
        result: T | None = await asyncio.to_thread(getattr(self._live, self._step), timeout)
        return result

    async def __anext__(self) -> T:
        while not self._closed:
            item = await self.next(LIVENESS_CHECK)
            if item is not None:
                return item
            if self._live.closed:
                break
        raise StopAsyncIteration

    def close(self) -> None:
        self._closed = True
        if self._live is not None:
            self._live.close()

    def _trace(self, call: VerbCall) -> AsyncLive[T]:
        """This live read as the verb call ``call``: its span current while the listeners start,
        ended once they have (or have failed to)."""
        start = self._start

        async def started() -> Any:
            with call.ending(), call.running():
                return await start()

        self._start = started
        return self

    async def __aenter__(self) -> AsyncLive[T]:
        return await self.started()

    async def __aexit__(self, *exc: object) -> None:
        self.close()
