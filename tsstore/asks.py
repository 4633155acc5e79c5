"""Asks as data: what a request asks of Firestore, answered by a driver.

An ask is a frozen dataclass of :class:`Asking` ``[T]``, answered with a ``T``; it carries
paths, field values and times, never a client or a callable, so a request can be run and
checked by a test that answers its asks itself. ``answer = yield from ask(GetDoc(...))``
yields one and types its answer; :func:`asked_together` yields several, answered
concurrently. :mod:`tsstore.wire` builds each Firestore call from an ask, once for both
drivers (:mod:`tsstore.store`, :mod:`tsstore.aio`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from google.api_core import exceptions as gexc

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
#: What an ask is answered with: an ask answered with a ``bool`` is one answered with an ``object``.
Answer = TypeVar("Answer", covariant=True)


class Asking(Generic[Answer]):
    """An ask answered with a ``T``: ``answer = yield from ask(GetDoc(...))`` types the
    answer. A driver answers each kind with one handler, building the Firestore call from the
    ask's data (paths, field values, times: no client, no callable), and tries it again after
    faults; ``what`` names the call in the error when every attempt failed."""

    what: str


class DatabaseAsking(Asking[Answer]):
    """An ask the store's database answers, in one call of its backend: a document ask (here),
    a count, an aggregation or a census's documents (:mod:`tsstore.verbs.request`). Each store
    answers every such kind in one case (:func:`tsstore.backend.answered`), tried again after
    faults the same way."""


def step(request: Generator[A, Any, B], reply: object) -> tuple[Literal[False], A] | tuple[Literal[True], B]:
    """Give ``request`` (a verb's, or a counter's) the answer to its last ask: (False, its next
    ask) or (True, its result)."""
    try:
        return False, request.send(reply)
    except StopIteration as done:
        return True, done.value


def ask(question: Asking[T]) -> Generator[Asking[T], T, T]:
    """Yield one ask and return its answer, typed (``doc = yield from ask(GetDoc(path))``)."""
    answer = yield question
    return answer


def asked_together(questions: Sequence[Asking[T]]) -> Generator[list[Asking[T]], list[T], list[T]]:
    """Yield asks to be answered concurrently and return their answers, in order."""
    answers = yield list(questions)
    return answers


def asked_with(
    first: Sequence[Asking[A]], second: Sequence[Asking[B]]
) -> Generator[list[Asking[Any]], list[Any], tuple[list[A], list[B]]]:
    """Yield two groups of asks, answered by two types, to be answered concurrently (one
    list); their answers, typed, group by group (``[doc], marks = yield from asked_with([GetDoc(...)], [...])``)."""
    answers = yield [*first, *second]
    return answers[: len(first)], answers[len(first) :]


#: A document's fields as the clients give and take them: names to values, maps nesting
#: (a value is whatever a field may hold, hence ``Any``).
Fields = dict[str, Any]


@dataclass(frozen=True)
class Doc:
    """A document as read: its ``id``, its ``data`` (``None``: it does not exist), when it was
    last written and the time it was read at."""

    id: str
    data: Fields | None
    update_time: dt.datetime | None
    read_time: dt.datetime | None


@dataclass(frozen=True)
class GetDoc(DatabaseAsking[Doc]):
    """The document at ``path`` (``collection/id``), only ``fields`` of it (``None``: all),
    at ``read_time`` (``None``: now)."""

    path: str
    what: str
    fields: tuple[str, ...] | None = None
    read_time: dt.datetime | None = None


@dataclass(frozen=True)
class SetDoc(DatabaseAsking[dt.datetime]):
    """Write ``data`` to the document at ``path`` (merged into what it holds when ``merge``),
    with the ``server_time`` fields set to the server's commit time; answers when it was
    written."""

    path: str
    data: Mapping[str, Any]
    what: str
    merge: bool = False
    server_time: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeleteDoc(DatabaseAsking[bool]):
    """Delete the document at ``path`` if it was last written at ``written`` (``None``:
    whenever); answers ``False`` when it was written again since."""

    path: str
    what: str
    written: dt.datetime | None = None


@dataclass(frozen=True)
class FindDocs(DatabaseAsking[list[Doc]]):
    """The documents of the collection at ``collection`` (a path) that pass every ``where``
    condition (``(field, operator, value)``), at ``read_time`` (``None``: now)."""

    collection: str
    what: str
    where: tuple[tuple[str, str, Any], ...] = ()
    read_time: dt.datetime | None = None


@dataclass(frozen=True)
class CreateDoc(DatabaseAsking[dt.datetime | None]):
    """Create the document at ``path`` with ``data``; answers its write time (what a next
    :class:`UpdateDoc` gives as ``written``), or ``None`` (nothing written) when it exists
    already."""

    path: str
    data: Mapping[str, Any]
    what: str


@dataclass(frozen=True)
class UpdateDoc(DatabaseAsking[dt.datetime | None]):
    """Set the fields ``data`` names (dotted paths to values, as Firestore's update takes them)
    in the document at ``path`` (the rest stays), if it was last written at ``written``;
    answers its new write time, or ``None`` (nothing written) when it was written again or
    deleted since."""

    path: str
    data: Mapping[str, Any]
    written: dt.datetime
    what: str


@dataclass(frozen=True)
class AddToDocs(DatabaseAsking[bool]):
    """One atomic commit adding ``amount`` to the integer ``field`` of each ``(path, field,
    amount)`` (a missing document or field counts from 0; the rest of the document stays),
    which also creates the empty document ``receipt`` when one is named. Answers ``False``
    when the receipt existed: an earlier attempt of this commit landed, this one did not."""

    adds: tuple[tuple[str, str, int], ...]
    what: str
    receipt: str | None = None


@dataclass(frozen=True)
class SumDocs(DatabaseAsking[tuple[int | float, dt.datetime | None]]):
    """The sum of ``field`` over the documents of the collection at ``collection`` (one
    aggregation, not a read of each) and the time it was true at."""

    collection: str
    field: str
    what: str


@dataclass(frozen=True)
class KnownTime(Asking[dt.datetime | None]):
    """The server's time now, estimated from this process's recent answers on the store's
    project (:mod:`tsstore.clock`), no call made; ``None`` when no answer told it lately.
    ``at_least``: a lower bound of it instead (:meth:`~tsstore.clock.ServerClock.at_least`),
    known while any answer arrives."""

    at_least: bool = False
    what: str = "the server's time, estimated"


#: The document asks: each answered by one handler of each driver.
DocAsk = GetDoc | SetDoc | DeleteDoc | FindDocs | CreateDoc | UpdateDoc | AddToDocs | SumDocs

#: The answer to a document ask on one database, one attempt (faults are the caller's to retry).
DocumentAnswers = Callable[[DocAsk], Any]


def refused(ask: DocAsk, exc: gexc.GoogleAPICallError) -> bool:
    """Whether ``exc`` is the database's "no" to a conditional ask, answered :func:`refusal`:
    a delete or update of a document written again since (FAILED_PRECONDITION; an update of
    one deleted since: NOT_FOUND), a create of one that exists, an add whose receipt exists
    (ALREADY_EXISTS). Both modes' wires answer by it."""
    match ask:
        case DeleteDoc(written=written):
            return written is not None and isinstance(exc, gexc.FailedPrecondition)
        case UpdateDoc():
            return isinstance(exc, (gexc.FailedPrecondition, gexc.NotFound))
        case CreateDoc():
            return isinstance(exc, gexc.AlreadyExists)
        case AddToDocs(receipt=receipt):
            return receipt is not None and isinstance(exc, gexc.AlreadyExists)
    return False


def refusal(ask: DocAsk) -> bool | None:
    """The answer to a conditional ask the database refused (:func:`refused`): ``None`` for a
    create or an update (which answer a write time when they land), else ``False``."""
    return None if isinstance(ask, (CreateDoc, UpdateDoc)) else False
