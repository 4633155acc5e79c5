"""The one exception root of tsstore and its categories.

Two categories matter to a caller deciding what to do: a usage error (:class:`UsageError`:
the call, a value, a declaration or an input file is wrong, and fixing the call fixes it)
and a runtime failure (every other :class:`TsstoreError`: the call was right, but Firestore,
the network, the files or what is stored do not allow it now; among them
:class:`StateError`, what is stored does not allow it yet). Usage errors (and a bad
record) also subclass ``ValueError`` so callers that already catch ``ValueError`` keep
working. Every message names the bad value and what is allowed instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: What the exceptions' parameters mean (the reference shows each beside its exception; for
#: the errors it names, this wins over the query options' glossary).
PARAMETER_HELP = {
    "message": "what went wrong, in one line (the exception's text).",
    "limit": "how far the purge may go: the earliest watermark of the roll-ups holding it back "
    "(``None`` when a declared roll-up has never run).",
    "rollups": "the names of the roll-ups that hold the purge back.",
    "returned": "how many ticks were delivered before the failure.",
    "cursor": "continues right after the last tick delivered (``None`` if none was, or the read "
    "has no order to continue in).",
    "verb": "the verb that was called.",
    "unknown": "the keyword options it does not take.",
    "allowed": "the keyword options it takes.",
    "partial": "what was done before the stop (the verb's own result type).",
    "index": "the record's position in the input (0-based).",
    "reason": "the rule the record breaks.",
    "failures": "each refused record, as a :class:`WriteFailure`.",
    "written": "how many records did land.",
    "result": "what those were (a write's or a purge's result).",
}


class TsstoreError(Exception):
    """Root of every error raised by tsstore."""


class UsageError(TsstoreError, ValueError):
    """The caller asked for something that cannot be: a declaration, an option, a query, a
    counter's use or an input file (the command line exits 2 on one; its subclasses say
    which). Fixing the call fixes it, whatever is stored."""


class StateError(TsstoreError):
    """The call is right, but what is stored does not allow it now: a counter not created
    yet, a roll-up that has not run (or not up to the range asked), a roll-up record another
    declaration wrote, roll-up bars stored without what the question needs, a counter
    document other writers keep changing, a purge a roll-up holds back
    (:class:`RetentionError`). Not a ``ValueError``: the same call succeeds once the store is
    as the message says (the command line exits 1 on one)."""


class SpecError(UsageError):
    """A series declaration (``SeriesSpec``/``QueryShape``) is invalid."""


def refuse_unknown_keys(table: Iterable[str], allowed: Sequence[str], *, where: str) -> None:
    """Refuse a declaration table (a file's, or a mapping given in Python) holding a key that
    is not ``allowed``, naming the keys and ``where`` they were found."""
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise SpecError(f"unknown key(s) {unknown} in {where}; allowed: {', '.join(allowed)}")


class ConfigError(UsageError):
    """An option given to a tsstore object is invalid."""


class RecordError(TsstoreError, ValueError):
    """A record given to the writer cannot be written as it is.

    ``index`` is the record's position in the input (0-based), ``reason`` the rule broken.
    """

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"record {index}: {reason}")
        self.index = index
        self.reason = reason


class QueryError(UsageError):
    """A query asks for something tsstore or Firestore cannot serve."""


class ModeError(UsageError):
    """What Firestore in Datastore mode does not have (listeners, security rules), or what
    tsstore does not serve there yet; the message says what to use instead."""


class RetentionError(StateError):
    """A purge would delete ticks that a roll-up of them has not rolled up yet.

    ``limit`` is how far the purge may go (the earliest roll-up watermark; ``None`` when a
    declared roll-up has never run), ``rollups`` the roll-ups that hold it back."""

    def __init__(self, message: str, *, limit: object, rollups: Sequence[str]) -> None:
        super().__init__(message)
        self.limit = limit
        self.rollups = tuple(rollups)


class OptionError(QueryError, TypeError):
    """A verb was given a keyword option it does not take (a ``TypeError``, as Python's own
    for a wrong keyword, and a :class:`QueryError`); the message names the verb and the
    options it takes."""

    def __init__(self, verb: str, unknown: list[str], allowed: list[str]) -> None:
        super().__init__(
            f"{verb}() got unknown option(s) {', '.join(unknown)}; it takes {', '.join(allowed) or 'none'}"
        )


class CounterError(UsageError):
    """A sharded counter was used wrongly (bad path, shard count or increment, a shrink). A
    counter that does not exist is a :class:`StateError`, an increment cut off before its
    answer a :class:`FaultError`."""


class SnapshotExpiredError(TsstoreError):
    """A read at one ``read_time`` lasted longer than Firestore keeps that snapshot (one hour;
    seven days with point-in-time recovery). ``returned`` ticks were delivered before it
    failed; ``cursor`` (``None`` if none were) continues right after the last of them."""

    def __init__(self, message: str, *, returned: int, cursor: str | None) -> None:
        super().__init__(message)
        self.returned = returned
        self.cursor = cursor


class FaultError(TsstoreError):
    """Every attempt of one call failed before Firestore answered (or Firestore kept refusing
    the work) for longer than tsstore retries a call (:data:`tsstore.faults.FAULT_BUDGET_SECONDS`
    of trouble in a row), or a call that is not safe to send twice (a counter's
    ``increment``) was cut off before its answer, so it may or may not have landed.
    ``returned`` ticks were delivered before it; ``cursor`` (``None`` if none were, or the
    read has no order to continue in) continues right after the last of them."""

    def __init__(self, message: str, *, returned: int = 0, cursor: str | None = None) -> None:
        super().__init__(message)
        self.returned = returned
        self.cursor = cursor


class CursorError(QueryError):
    """A pagination cursor is malformed or belongs to another query."""


#: The code of a write tsstore refused itself, unsent (a late tick its declaration does not
#: fold in): outside gRPC's status codes (0 to 16), so no reader takes it for Firestore's.
REFUSED_UNSENT = 100


@dataclass(frozen=True)
class WriteFailure:
    """One document Firestore refused after all retries, or tsstore refused unsent."""

    #: The record's position in what the write was given (0-based).
    index: int
    #: The id of the document refused.
    document_id: str
    #: The gRPC status code of the refusal (6, ALREADY_EXISTS: the duplicate policy), or
    #: :data:`REFUSED_UNSENT` (tsstore refused it, never sent).
    code: int
    #: What Firestore (or tsstore) said.
    message: str

    @property
    def by_policy(self) -> bool:
        """Refused by the duplicate policy (gRPC ALREADY_EXISTS, 6: another tick holds the id),
        which is final, not by Firestore after retries."""
        return self.code == 6

    @property
    def by_tsstore(self) -> bool:
        """Refused by tsstore before it was sent (:data:`REFUSED_UNSENT`), not by Firestore."""
        return self.code == REFUSED_UNSENT

    @property
    def reason(self) -> str:
        """Why the record is not stored, for a reject line: the policy's and tsstore's own
        refusals word themselves; anything else is Firestore's."""
        return self.message if self.by_policy or self.by_tsstore else f"Firestore refused it: {self.message}"


class WriteError(TsstoreError):
    """Firestore refused some documents after all retries; nothing was dropped silently.

    ``failures`` names each refused record; ``written`` counts those that did land, and
    ``result`` (a :class:`~tsstore.store.WriteResult` or
    :class:`~tsstore.store.PurgeResult`) says what they were.
    """

    def __init__(self, failures: Sequence[WriteFailure], written: int, result: object = None) -> None:
        first = failures[0]
        why = first.message if first.by_tsstore else f"code {first.code}: {first.message}"
        super().__init__(
            f"{len(failures)} of {written + len(failures)} documents were not written; "
            f"first: record {first.index} (id {first.document_id}): {why}"
        )
        self.failures = tuple(failures)
        self.written = written
        self.result = result


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a long write, purge or ingest once it had settled what it could in a
    bounded time. ``partial`` says what was done (the verb's own result type).

    A ``KeyboardInterrupt`` (so ``except Exception`` never swallows it), not a
    :class:`TsstoreError`: it is the user's stop, not a failure.
    """

    def __init__(self, partial: object, message: str) -> None:
        super().__init__(message)
        self.partial = partial


class SchemaError(TsstoreError):
    """Stored values do not fit the column types the spec declares."""


class EmulatorError(TsstoreError):
    """The local Firestore emulator could not be found, started or reached, or runs the other
    database mode than the client given (it refuses every call of such a client)."""


class RulesError(EmulatorError, UsageError):
    """A security rules file the emulator cannot take: it does not compile, cannot be read, or
    was given to Datastore mode, which has no rules (a usage error: the command line exits 2)."""


class IngestError(UsageError):
    """A file as a whole cannot be ingested (empty, unknown format, bad header, not the
    format it names) or an ingest option is not allowed: a usage error, as the file is part
    of what was asked (a file the system cannot read is an ``OSError``); a bad row is a
    reject, never this."""


class LiveError(TsstoreError):
    """A listener stopped on an error the client does not recover from."""


class PlotError(TsstoreError):
    """A chart could not be drawn: the extra is missing, or the request is not drawable."""


class TsstoreWarning(UserWarning):
    """Root of the warnings tsstore gives (the command line prints them as ``warning:`` lines)."""


class RetentionWarning(TsstoreWarning):
    """A roll-up reads ticks that their TTL (``expire_after``) may already have deleted: the
    bars of that stretch may be short of ticks."""


class UndeclaredShardsWarning(TsstoreWarning):
    """A read found documents under shard values the declaration does not list: they are out
    of view until they are declared (``retired``). ``store.shard_census()`` names them."""
