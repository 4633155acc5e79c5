"""A request run without Firestore: each ask answered by a test's own function for its type.

``run(request, {GetDoc: ..., FindDocs: ...}, until=Send)`` steps a verb's request (see
:mod:`tsstore.verbs.request`) as a driver would, a list of asks answered one by one in
order, and returns its result and every ask it made. An ask whose type has no answer stops
the run with :class:`Unanswered` (the test's way to see how far a request got, and what
it asked there), unless it is of the type ``until`` names, where the run stops quietly.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tsstore.asks import Doc
from tsstore.spec import SeriesSpec
from tsstore.verbs.request import Request, Seat, Snapshots, step

Answers = Mapping[type, Callable[[Any], Any]]


class Unanswered(Exception):
    """The request asked something the script has no answer for."""

    def __init__(self, ask: Any, asked: list[Any]) -> None:
        super().__init__(f"no answer for {ask!r}")
        self.ask, self.asked = ask, asked


@dataclass
class Ran:
    """What a scripted run gave: the result (``None`` when it stopped at ``until``), the asks
    in the order they were made, the same asks by round trip (those asked together in one),
    and the ask it stopped at."""

    result: Any
    asked: list[Any] = field(default_factory=list)
    stopped_at: Any = None
    rounds: list[list[Any]] = field(default_factory=list)

    def of(self, kind: type) -> list[Any]:
        """The asks of one type, in order."""
        return [a for a in self.asked if isinstance(a, kind)]


def run(request: Request[Any], answers: Answers, *, until: type | None = None) -> Ran:
    """Run ``request`` to its result, answering each ask with ``answers[type(ask)]``."""
    ran = Ran(None)

    def answer(ask: Any) -> Any:
        if isinstance(ask, list):
            return [answer(one) for one in ask]
        ran.asked.append(ask)
        if until is not None and isinstance(ask, until):
            raise _Stop(ask)
        for kind, respond in answers.items():
            if isinstance(ask, kind):
                return respond(ask)
        raise Unanswered(ask, ran.asked)

    def answer_round(asked: Any) -> Any:
        ran.rounds.append(list(asked) if isinstance(asked, list) else [asked])
        return answer(asked)

    done, value = step(request, None)
    try:
        while not done:
            done, value = step(request, answer_round(value))
    except _Stop as stop:
        ran.stopped_at = stop.ask
        request.close()
        return ran
    ran.result = value
    return ran


class _Stop(Exception):
    def __init__(self, ask: Any) -> None:
        self.ask = ask


def seat(spec: SeriesSpec, *, page_size: int = 2000, lean: bool = True, snapshots: Snapshots = "read") -> Seat:
    """A request's view of a store that has no client: requests that only ask build nothing."""
    return Seat(spec, None, page_size, lean, snapshots)


def doc(path: str, data: Mapping[str, Any] | None, *, at: dt.datetime | None = None) -> Doc:
    """A document as a driver answers it: its id (the path's last part) and data, read at
    ``at`` and (when it exists) last written then."""
    exists = data is not None
    return Doc(path.rsplit("/", 1)[-1], dict(data) if exists else None, at if exists else None, at)


def documents(held: Mapping[str, Mapping[str, Any]], *, now: dt.datetime) -> Callable[[Any], Doc]:
    """Answers for :class:`~tsstore.asks.GetDoc`: the documents ``held`` by path, others
    missing, read at ``now``."""
    return lambda ask: doc(ask.path, held.get(ask.path), at=now)
