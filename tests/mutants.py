"""Whether a property test bites: the same property, run on code changed on purpose (a bucket
edge moved by 1 µs, a tie between two ticks broken the other way), must find a failing
example. A property that passes on the changed code as well could not tell them apart.

A change is made with pytest's ``monkeypatch`` for the one test that checks it, so no other
test sees it; the property then runs its generate phase only (no shrinking: the first failing
example is enough) on the strategies it is declared with, or on narrower ones that aim at
what was changed (a tie shows only in ``open`` and ``close``), derandomized so that whether
it bites does not change from run to run.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import HypothesisException
from hypothesis.strategies import SearchStrategy

from tsstore.analytics.bars import Bar
from tsstore.analytics.buckets import Buckets

US = dt.timedelta(microseconds=1)


def bites(test: Any, *strategies: SearchStrategy[Any], examples: int = 400, **named: SearchStrategy[Any]) -> str:
    """Run property ``test`` (a ``@given`` test) on ``strategies`` (or ``named`` ones) and return
    the error its first failing example raised; fail when it finds none in ``examples`` tries."""
    probe = settings(
        max_examples=examples, deadline=None, phases=[Phase.generate], database=None, report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck), derandomize=True,  # the same examples every run: no flakes
    )(given(*strategies, **named)(test.hypothesis.inner_test))  # fmt: skip
    try:
        probe()
    except HypothesisException:
        raise
    except Exception as error:  # the property's own failure: an assertion, or the code refusing
        return f"{type(error).__name__}: {error}"
    pytest.fail(f"{test.__name__} passed {examples} examples on code changed on purpose")


def edge_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bucket edge 1 µs later: a tick exactly on an edge falls in the earlier bucket."""
    start = Buckets.start
    monkeypatch.setattr(Buckets, "start", lambda self, when: start(self, when - US))


def tie_flipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ticks at one instant taken in the other order: the later one (by id) opens the bar."""
    absorb = Bar.absorb

    def flipped(self: Bar, part: Bar, *, earlier: bool) -> None:
        tied = part.open_at is not None and part.open_at in (self.open_at, self.close_at)
        absorb(self, part, earlier=not earlier if tied else earlier)

    monkeypatch.setattr(Bar, "absorb", flipped)


Mutation = Callable[[pytest.MonkeyPatch], None]


@functools.total_ordering
class Backwards:
    """A document id that sorts the other way: ties broken by id are broken in reverse."""

    def __init__(self, id: str) -> None:
        self.id = id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Backwards) and self.id == other.id

    def __lt__(self, other: Backwards) -> bool:
        return self.id > other.id

    def __hash__(self) -> int:
        return hash(self.id)
