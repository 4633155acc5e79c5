"""An in-memory database with Firestore's semantics for what tsstore asks of one.

Documents live by path (``collection/id``, or ``collection/id/sub/id``) in collections.
Every write is a commit at a time in microseconds strictly after every time the database
gave before (a commit's or a read's), which becomes each written document's
``update_time`` (and ``create_time`` when it did not exist). Each document keeps its
versions, so a read at ``read_time=T`` sees the documents as they were at ``T``: versions
are kept for :data:`KEEP` (an hour, as Firestore keeps them without point-in-time
recovery) after the commit that replaced them (dropped at the document's next write after
that); a read at an older time is refused with
``FailedPrecondition`` as Firestore refuses it, and one at a time the database has not
reached with ``InvalidArgument`` ("cannot be in the future").

A :class:`Query` is one collection's filters, orders, cursor, limit and projection, run
as Firestore runs it (:meth:`MemoryDatabase.run`): the order completed with the inequality
fields and the document name, a document without an ordered or filtered field left out,
the filters Firestore refuses (the 30 values of an ``in``, the 10 of a ``not-in``, the 30
disjunctions, a second ``!=``) refused with ``InvalidArgument``. Counts,
sums and averages run over a query's documents (:meth:`MemoryDatabase.aggregate`).

Thread-safe: one lock around every read and commit (the stores read on several threads).
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import heapq
import math
import operator
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.api_core import exceptions as gexc

from tsstore.clock import ServerClock, local_us
from tsstore.limits import MAX_DISJUNCTIONS, MAX_IN_VALUES, MAX_NOT_IN_VALUES
from tsstore.memory.values import MISSING, NUMBER, at_path, copied, put_path, stored, type_order
from tsstore.ticks import Ordered
from tsstore.times import from_micros, to_micros

#: How long a replaced version stays readable (Firestore's read-time window without PITR).
KEEP = dt.timedelta(hours=1)
#: The field path that names the document itself in orders, filters and cursors.
NAME = "__name__"
#: Operators that filter by range (Firestore orders such a query by their fields first).
INEQUALITIES = ("<", "<=", ">", ">=", "!=", "not-in")

_US = dt.timedelta(microseconds=1)
#: The range operators, on two values of one type.
RANGES: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

#: What :meth:`MemoryDatabase.on_commit` calls: the paths a commit wrote, and its time (microseconds).
CommitHook = Callable[[Sequence[str], int], None]


def wall_us() -> int:
    """The wall clock in microseconds since the epoch (the default time source)."""
    return time.time_ns() // 1000


def us_of(when: dt.datetime) -> int:
    """An aware datetime (a naive one taken as UTC) in microseconds since the epoch."""
    return to_micros(when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc))


@dataclass(frozen=True)
class Version:
    """A document as one commit left it: ``data`` ``None`` when the commit deleted it."""

    at: int
    data: dict[str, Any] | None
    created: int | None


@dataclass(frozen=True)
class Found:
    """A document a read found: its id, its data (a copy, projected when asked), when it was
    created and last written, and the time it was read at."""

    id: str
    data: dict[str, Any]
    create_time: dt.datetime
    update_time: dt.datetime
    read_time: dt.datetime


@dataclass(frozen=True)
class Query:
    """A query of the documents of ``collection``: ``filters`` (``(field, op, value)``, ANDed;
    ``op`` one of ``==``, ``in``, ``<``, ``<=``, ``>``, ``>=``, ``!=``, ``not-in``), ``orders``
    (``(field, descending)``; :data:`NAME` for the document id), continued after the values
    ``after`` of the query's whole order (a prefix of it; the document id for :data:`NAME`),
    at most ``limit`` documents, only the fields ``select`` names (``None``: all)."""

    collection: str
    filters: tuple[tuple[str, str, Any], ...] = ()
    orders: tuple[tuple[str, bool], ...] = ()
    after: tuple[Any, ...] | None = None
    limit: int | None = None
    select: tuple[str, ...] | None = None

    def order(self) -> list[tuple[str, bool]]:
        """The query's whole order, as Firestore completes it: the explicit orders, then the
        inequality fields they leave out (sorted, in the last order's direction), then the
        document name in that direction."""
        orders = list(self.orders)
        last = orders[-1][1] if orders else False
        named = {f for f, _ in orders}
        for path in sorted({f for f, op, _ in self.filters if op in INEQUALITIES} - named - {NAME}):
            orders.append((path, last))
        if NAME not in named:
            orders.append((NAME, last))
        return orders


class _Reverse:
    """An :class:`Ordered` compared the other way round (a descending order's key)."""

    __slots__ = ("key",)

    def __init__(self, key: Ordered) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and self.key == other.key

    def __lt__(self, other: _Reverse) -> bool:
        return other.key < self.key


@dataclass(kw_only=True)
class MemoryDatabase:
    """Documents by path with their kept versions, committed and read as Firestore does (see
    the module). ``now``: the time source, microseconds since the epoch (the wall clock;
    a test may hand a counter); ``keep``: how long a replaced version stays readable."""

    now: Callable[[], int] = wall_us
    keep: dt.timedelta = KEEP
    #: The database's name, new for each: what names it in what outlives it (an ingest's checkpoint).
    name: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: The database's time as its answers tell it (:mod:`tsstore.clock`), told every time it gives.
    clock: ServerClock = field(default_factory=ServerClock, init=False, repr=False)
    _docs: dict[str, dict[str, list[Version]]] = field(default_factory=dict, init=False, repr=False)
    _last: int = field(default=0, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)
    _hooks: list[CommitHook] = field(default_factory=list, init=False, repr=False)

    def close(self) -> None:
        """Nothing to release (a client's ``close``, so code that closes its client may take
        a memory database); the documents stay readable."""

    # ------------------------------------------------------------------ time

    def _read_time(self, read_time: dt.datetime | None) -> int:
        """The time a read reads at, checked as Firestore checks it (under the lock)."""
        now = max(self.now(), self._last)
        if read_time is None:
            self._last = now
            self.clock.saw(from_micros(now), sent=local_us())
            return now
        asked = us_of(read_time)
        if asked > now:
            raise _error(gexc.InvalidArgument, f"read_time {read_time.isoformat()} cannot be in the future")
        if asked < now - self.keep // _US:
            raise _error(gexc.FailedPrecondition, f"read_time {read_time.isoformat()} is older than the versions kept")
        self._last = max(self._last, asked)  # no later commit may land at a time this read has seen
        return asked

    def _commit_time(self) -> int:
        """A new commit's time: strictly after every time given before (under the lock)."""
        self._last = max(self.now(), self._last + 1)
        self.clock.saw(from_micros(self._last), sent=local_us(), read=False)
        return self._last

    # ------------------------------------------------------------------ documents

    def _version(self, path: str, at: int) -> Version | None:
        """The version of the document at ``path`` a read at ``at`` sees (``None``: none)."""
        collection, doc_id = _split(path)
        return _at(self._docs.get(collection, {}).get(doc_id) or [], at)

    def _put(self, path: str, data: dict[str, Any] | None, at: int) -> None:
        """Add a version of the document at ``path`` committed at ``at`` (``None``: deleted),
        dropping versions no read may see any more."""
        collection, doc_id = _split(path)
        versions = self._docs.setdefault(collection, {}).setdefault(doc_id, [])
        before = versions[-1] if versions else None
        alive = before is not None and before.data is not None
        created = (before.created if alive and before is not None else at) if data is not None else None
        versions.append(Version(at, data, created))
        horizon = at - self.keep // _US
        while len(versions) > 1 and versions[1].at <= horizon:
            versions.pop(0)
        if len(versions) > 1 and versions[0].data is None and versions[0].at <= horizon:
            versions.pop(0)  # a deletion no read sees any more: the next version is the oldest seen

    def get(self, path: str, *, read_time: dt.datetime | None = None,
            fields: Sequence[str] | None = None) -> tuple[Found | None, dt.datetime]:  # fmt: skip
        """The document at ``path`` (``None``: there is none) and the time it was read at."""
        with self._lock:
            at = self._read_time(read_time)
            version = self._version(path, at)
        read = from_micros(at)
        if version is None or version.data is None:
            return None, read
        return _found(_split(path)[1], version, read, fields), read

    def commit(self, writes: Sequence[Write]) -> list[dt.datetime]:
        """Apply ``writes`` atomically at one commit time and return each one's answer: the
        time its document was last written after it (the commit's, or for a write that left
        its document as it was, the earlier time: Firestore's answer to such a write; a delete
        answers the commit's). Raises (nothing applied) ``NotFound``, ``FailedPrecondition`` or
        ``AlreadyExists`` when a write's precondition fails."""
        with self._lock:
            now = max(self.now(), self._last)
            current = {w.path: self._version(w.path, now) for w in writes}
            for w in writes:
                w.check(current[w.path])
            at = self._commit_time()
            answers = []
            for w in writes:
                before = current[w.path]
                was = before.data if before is not None else None
                after = w.applied(was, at)
                if before is not None and was is not None and after is not None and _identical(after, was):
                    answers.append(from_micros(before.at))  # nothing changed: the document keeps its time
                    continue
                if after is not None or was is not None:
                    self._put(w.path, after, at)
                    current[w.path] = self._version(w.path, at)
                answers.append(from_micros(at))
            for hook in list(self._hooks):
                hook([w.path for w in writes], at)
            return answers

    def on_commit(self, hook: CommitHook) -> Callable[[], None]:
        """Call ``hook(paths, at)`` once now (no paths, at a read's time), then after every
        commit, with the paths it wrote and its time, under the lock (so in commit order, before
        the commit returns); returns what stops it (the listeners, :mod:`tsstore.memory.listen`)."""
        with self._lock:
            hook((), self._read_time(None))
            self._hooks.append(hook)

        def stop() -> None:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return stop

    # ------------------------------------------------------------------ queries

    def run(self, query: Query, *, read_time: dt.datetime | None = None) -> tuple[list[Found], dt.datetime]:
        """The documents ``query`` returns, in its order, and the time they were read at."""
        check_filters(query.filters)
        order = query.order()
        with self._lock:
            at = self._read_time(read_time)
            living = self._living(query.collection, at)
        read = from_micros(at)
        keyed = _keyed(living, query.filters, order)
        if query.after is not None:
            cursor = _cursor_key(query.after, order)
            keyed = [k for k in keyed if cursor < k[0][: len(cursor)]]
        if query.limit is not None and query.limit < len(keyed):
            keyed = heapq.nsmallest(query.limit, keyed, key=_first)
        else:
            keyed.sort(key=_first)
        return [_found(doc_id, v, read, query.select) for _, doc_id, v in keyed], read

    def _living(self, collection: str, at: int) -> list[tuple[str, Version]]:
        """The documents of ``collection`` a read at ``at`` sees, with the version it sees
        (under the lock)."""
        return [(doc_id, v) for doc_id, versions in self._docs.get(collection, {}).items()
                if (v := _at(versions, at)) is not None and v.data is not None]  # fmt: skip

    def aggregate(self, query: Query, wanted: Iterable[tuple[str, str, str | None]], *,
                  read_time: dt.datetime | None = None) -> tuple[dict[str, Any], dt.datetime]:  # fmt: skip
        """``wanted`` (``(kind, alias, field)``: ``count``, ``sum`` or ``avg``) over the
        documents ``query`` returns, as Firestore answers them: a count an int; a sum of
        integers an int (a float once a double is among them or it leaves 64 bits), of nothing
        0; an average a float, of nothing ``None``; values that are no numbers left out."""
        found, read = self.run(query, read_time=read_time)
        answer: dict[str, Any] = {}
        for kind, alias, path in wanted:
            if kind == "count":
                answer[alias] = len(found)
                continue
            assert path is not None
            numbers = [v for d in found if type_order(v := at_path(d.data, path)) == NUMBER]
            answer[alias] = _sum(numbers) if kind == "sum" else (_sum(numbers) / len(numbers) if numbers else None)
        return answer, read


@dataclass(frozen=True)
class Write:
    """One write of a commit: ``data`` set (``None``: delete) at ``path``; ``merge``: only
    these fields (``fields``: dotted paths) changed, the rest kept; ``exists``: the document
    must exist (``True``: NOT_FOUND otherwise) or must not (``False``: ALREADY_EXISTS);
    ``written``: it must have been last written then (FAILED_PRECONDITION otherwise);
    ``server_time``: fields (dotted paths) set to the commit time; ``increments``: fields
    (dotted paths) each increased by an amount (a missing or non-numeric one taken as 0)."""

    path: str
    data: Mapping[str, Any] | None
    fields: tuple[str, ...] | None = None
    exists: bool | None = None
    written: dt.datetime | None = None
    server_time: tuple[str, ...] = ()
    increments: tuple[tuple[str, int | float], ...] = ()

    def check(self, before: Version | None) -> None:
        alive = before is not None and before.data is not None
        if self.exists is True and not alive:
            raise _error(gexc.NotFound, f"no document to update: {self.path}")
        if self.exists is False and alive:
            raise _error(gexc.AlreadyExists, f"document already exists: {self.path}")
        if self.written is not None and (not alive or before is None or from_micros(before.at) != self.written):
            why = f"the stored version of {self.path} does not match the required base version"
            raise _error(gexc.FailedPrecondition, why)

    def applied(self, was: dict[str, Any] | None, at: int) -> dict[str, Any] | None:
        """The document's data after this write, from ``was`` (``None``: none)."""
        if self.data is None and self.fields is None and not self.server_time and not self.increments:
            return None
        if self.fields is None:
            data: dict[str, Any] = stored(self.data or {})
        else:
            data = copied(was) if was is not None else {}
            source = self.data or {}
            for path in self.fields:
                value = source[path] if path in source else at_path(source, path)
                if value is not MISSING:
                    put_path(data, path, stored(value))
        for path in self.server_time:
            put_path(data, path, from_micros(at))
        for path, amount in self.increments:
            current = at_path(data, path)
            base = current if type_order(current) == NUMBER and current is not MISSING else 0
            put_path(data, path, base + amount)
        return data


def check_filters(filters: Iterable[tuple[str, str, Any]]) -> None:
    """Refuse filters as Firestore refuses them (``InvalidArgument``, its words): an ``in``
    of no values or of more than :data:`~tsstore.limits.MAX_IN_VALUES`, a ``not-in`` of more
    than :data:`~tsstore.limits.MAX_NOT_IN_VALUES` or beside an ``in``, two ``!=``/``not-in`` filters, and
    filters whose disjunctive normal form has more than
    :data:`~tsstore.limits.MAX_DISJUNCTIONS` terms."""
    terms, ops = 1, [op for _, op, _ in filters]
    for _, op, value in filters:
        if op in ("in", "not-in"):
            name, most = ("IN", MAX_IN_VALUES) if op == "in" else ("NOT_IN", MAX_NOT_IN_VALUES)
            values = list(value)
            if not values:
                raise _error(gexc.InvalidArgument, f"'{name}' requires an non-empty ArrayValue.")
            if len(values) > most:
                raise _error(gexc.InvalidArgument, f"'{name}' supports up to {most} comparison values.")
            if op == "in":
                terms *= len(values)
    if "not-in" in ops and "in" in ops:
        raise _error(gexc.InvalidArgument, "'NOT_IN' cannot be used in the same query with 'IN', "
                                           "'ARRAY_CONTAINS_ANY' or 'OR'.")  # fmt: skip
    if sum(op in ("!=", "not-in") for op in ops) > 1:
        raise _error(gexc.InvalidArgument, "Only a single 'NOT_EQUAL', 'NOT_IN', 'IS_NOT_NAN', or 'IS_NOT_NULL' "
                                           "filter allowed per query.")  # fmt: skip
    if terms > MAX_DISJUNCTIONS:
        why = (f"Too many disjunctions after normalization. Result had {terms} disjunctions which is more than "
               f"the maximum of {MAX_DISJUNCTIONS}")  # fmt: skip
        raise _error(gexc.InvalidArgument, why)


def _identical(a: Any, b: Any) -> bool:
    """Whether two stored values are the same value of the same type (``1`` and ``1.0`` are
    not, two NaNs are): a write that changes nothing of a document."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    return bool(a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


def _error(kind: type[gexc.GoogleAPICallError], message: str) -> gexc.GoogleAPICallError:
    """The exception the Python client raises for Firestore's answer ``kind``."""
    return kind(message)


def _split(path: str) -> tuple[str, str]:
    collection, _, doc_id = path.rpartition("/")
    if not collection or not doc_id:
        raise ValueError(f"document path {path!r} is not allowed; give collection/id (or a subcollection's path)")
    return collection, doc_id


def _at(versions: list[Version], at: int) -> Version | None:
    """The version among ``versions`` (oldest first) a read at ``at`` sees (``None``: none;
    a version whose ``data`` is ``None``: deleted then)."""
    if versions and versions[-1].at <= at:
        return versions[-1]  # the newest: what nearly every read sees
    i = bisect.bisect_right([v.at for v in versions], at)
    return versions[i - 1] if i else None


Keyed = tuple[tuple[Any, ...], str, Version]


def _first(keyed: Keyed) -> tuple[Any, ...]:
    return keyed[0]


def _keyed(living: Iterable[tuple[str, Version]], filters: Sequence[tuple[str, str, Any]],
           order: Sequence[tuple[str, bool]]) -> list[Keyed]:  # fmt: skip
    """The documents of ``living`` that every filter keeps and that hold every ordered field,
    each with its key in ``order`` (unsorted)."""
    tests = [(_getter(path), _test(op, value)) for path, op, value in filters]
    places = [(_getter(path) if path != NAME else None, desc) for path, desc in order]
    keyed = []
    for doc_id, version in living:
        data = version.data
        assert data is not None
        if not all((got := get(data)) is not MISSING and test(got) for get, test in tests):
            continue
        values = [doc_id if get is None else get(data) for get, _ in places]
        if MISSING not in values:  # (a document without an ordered field is left out)
            keyed.append((tuple(_directed(v, desc) for v, (_, desc) in zip(values, places)), doc_id, version))
    return keyed


def _getter(path: str) -> Callable[[Mapping[str, Any]], Any]:
    """What reads the dotted ``path`` of a document's data (:data:`MISSING` where it has none)."""
    if "." not in path:
        return lambda data: data.get(path, MISSING)
    return lambda data: at_path(data, path)


def _test(op: str, value: Any) -> Callable[[Any], bool]:
    """Whether a field's value passes the filter ``op value``, as Firestore filters: ``==``
    and ``in`` by value and type (``1 == 1.0``, ``1 != True``), a range within the value's
    type only (``2 < "a"`` matches nothing), ``!=`` and ``not-in`` any value but null (a
    ``not-in`` list holding null matches nothing)."""
    if op in ("==", "in", "!=", "not-in"):
        return _value_test(op, [value] if op in ("==", "!=") else list(value))
    compare = RANGES.get(op)
    if compare is None:
        raise _error(gexc.InvalidArgument, f"operator {op!r} is not served by the memory database; it serves "
                                           "==, in, not-in, !=, <, <=, > and >= (no array filters)")  # fmt: skip
    if isinstance(value, dt.datetime):  # stored times are aware: compared as they are
        time = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return lambda got: isinstance(got, dt.datetime) and compare(got, time)
    kind, bound = type_order(value), Ordered(value)
    return lambda got: type_order(got) == kind and compare(Ordered(got), bound)


def _value_test(op: str, values: list[Any]) -> Callable[[Any], bool]:
    """The test of ``==`` or ``in`` (``values`` matched), ``!=`` or ``not-in`` (not matched)."""
    if op in ("==", "in") and all(type(v) is str for v in values):
        strings = set(values)  # a string equals only the same string
        return lambda got: type(got) is str and got in strings
    targets = {Ordered(v) for v in values}
    if op in ("==", "in"):
        return lambda got: Ordered(got) in targets
    if op == "not-in" and Ordered(None) in targets:
        return lambda got: False
    return lambda got: got is not None and Ordered(got) not in targets


def _cursor_key(values: Sequence[Any], order: Sequence[tuple[str, bool]]) -> tuple[Any, ...]:
    if len(values) > len(order):
        why = f"a cursor of {len(values)} values is longer than the query's order ({len(order)})"
        raise _error(gexc.InvalidArgument, why)
    return tuple(_directed(_name_of(v) if path == NAME else v, desc) for v, (path, desc) in zip(values, order))


def _name_of(value: Any) -> Any:
    """A cursor's document name: an id, or a document reference (its id)."""
    return getattr(value, "id", value)


def _directed(value: Any, descending: bool) -> Any:
    ordered = Ordered(value)
    return _Reverse(ordered) if descending else ordered


def _found(doc_id: str, version: Version, read: dt.datetime, select: Sequence[str] | None) -> Found:
    data, created = version.data, version.created
    assert data is not None and created is not None  # a living version
    return Found(doc_id, _projected(data, select) if select is not None else copied(data), _time(created),
                 _time(version.at), read)  # fmt: skip


#: A time in microseconds as a datetime, the times of recent commits kept (a batch's documents share one).
_time = functools.lru_cache(maxsize=4096)(from_micros)


def _projected(data: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """Only the dotted paths ``fields`` of ``data`` that it holds, copied."""
    out: dict[str, Any] = {}
    for path in fields:
        value = at_path(data, path)
        if value is not MISSING:
            put_path(out, path, copied(value))
    return out


def _sum(numbers: list[Any]) -> int | float:
    if all(isinstance(n, int) for n in numbers):
        total = sum(numbers)
        if -(2**63) <= total < 2**63:
            return int(total)
    return math.fsum(numbers)
