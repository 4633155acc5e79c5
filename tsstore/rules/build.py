"""The security rules block for a declaration's collections, from the same objects the
queries and the index file read (pure: text in, text out).

One ``match`` per collection tsstore keeps for a series: its ticks, its series counters
(``<collection>_counts``, where the series are counted) and each roll-up's bars and watermark
document. What each lets a client do is the declaration's :class:`~tsstore.access.ClientAccess`:

- reads: ``get`` under the read condition; ``list`` under it, with a query ``limit`` of
  at most ``max_limit`` and no ``offset`` (a query without a limit could be billed for the
  whole collection, and the documents an offset skips are billed too). A counter's shard
  documents are listed without a limit: there are only ``counter_shards`` of them, and a
  count is one ``sum()`` over them.
- creates: a tick whose fields are exactly the declared ones (the shard among the active
  values, the timestamp a timestamp, the key fields present, every other declared field
  absent, null or of its declared type, and the expiry the writer would set); never an update
  or a delete. Where the series are counted, an update of a counter shard's ``count`` that
  only adds to it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tsstore.access import ClientAccess
from tsstore.analytics.rollup import Rollup
from tsstore.cold.tier import horizon_name
from tsstore.counting import COUNT_FIELD, SHARDS_COLLECTION
from tsstore.errors import SpecError
from tsstore.late import MARKS, WATERMARKS
from tsstore.series_counters import COUNTERS_SUFFIX
from tsstore.spec import SeriesSpec
from tsstore.times import interval_label

INDENT = "  "
#: A collection id a rules path may name as it is; others are matched by a wildcard and compared.
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
#: Names that cannot follow a dot in a rules expression (the language's keywords).
_RESERVED = frozenset("allow else false function if in is let match null return rules_version service true".split())
#: The rules type test for each declared column type (``object``: any value).
_TYPE_TESTS = {
    "string": "is string",
    "Int64": "is int",
    "Float64": "is number",
    "boolean": "is bool",
    "datetime": "is timestamp",
}


def quote(text: str) -> str:
    """``text`` as a rules string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _member(base: str, name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name not in _RESERVED:
        return f"{base}.{name}"
    return f"{base}[{quote(name)}]"


@dataclass
class _Field:
    """One node of a tick's declared fields: a leaf with its test, or a map of children."""

    test: str | None = None  # a leaf: "is string", "in [...]", "any"; None: a map
    required: bool = False  # else it may be absent or null
    children: dict[str, _Field] = field(default_factory=dict)

    def needed(self) -> bool:
        return self.required or any(c.needed() for c in self.children.values())


def _tick_fields(spec: SeriesSpec) -> _Field:
    """The declared fields of ``spec``'s ticks, as a tree of dotted paths."""
    kinds = dict(spec.columns)
    leaves: dict[str, tuple[str, bool]] = {}  # path -> (test, required)

    def declare(path: str, test: str, *, required: bool = False) -> None:
        if path not in leaves or required:  # the first test stands, unless a required one comes
            leaves[path] = (test, required)

    scalar = "scalar"
    for path in (*spec.filter_fields, *spec.count_by):
        declare(path, _TYPE_TESTS.get(kinds.get(path, ""), scalar))
    for path in spec.measures:
        declare(path, _TYPE_TESTS.get(kinds.get(path, ""), "is number"))
    for path, kind in spec.columns:
        declare(path, _TYPE_TESTS.get(kind, "any"))
    for path in spec.key_fields:
        declare(path, _TYPE_TESTS.get(kinds.get(path, ""), scalar), required=True)
    declare(spec.timestamp_field, "is timestamp", required=True)
    shards = ", ".join(quote(s) for s in spec.shards)
    declare(spec.shard_field, f"in [{shards}]", required=True)
    if spec.expire_after is not None:
        declare(spec.expire_field, "expiry", required=True)
    root = _Field()
    for path in sorted(leaves):
        test, required = leaves[path]
        node = root
        *parents, leaf = path.split(".")
        for i, part in enumerate(parents):
            node = node.children.setdefault(part, _Field())
            if node.test is not None:
                raise SpecError(
                    f"{spec.collection}: field {'.'.join(parents[: i + 1])!r} is declared as a value and as a map "
                    f"holding {path!r}; a client create cannot be checked against both"
                )
        if leaf in node.children and node.children[leaf].children:
            raise SpecError(f"{spec.collection}: field {path!r} is declared as a value and as a map of other fields")
        node.children[leaf] = _Field(test, required)
    return root


def _checks(node: _Field, ref: str, spec: SeriesSpec) -> Iterator[str]:
    """The conditions a map ``ref`` meets when it holds exactly ``node``'s fields."""
    names = ", ".join(quote(n) for n in node.children)
    yield f"{ref}.keys().hasOnly([{names}])"
    required = [n for n, child in node.children.items() if child.needed()]
    if required:
        yield f"{ref}.keys().hasAll([{', '.join(quote(n) for n in required)}])"
    for name, child in node.children.items():
        value = _member(ref, name)
        if child.test is None:
            nested = "".join(
                f"\n{INDENT * 2}&& " + c.replace("\n", f"\n{INDENT * 2}") for c in _checks(child, value, spec)
            )
            test = f"({value} is map{nested})"
        elif child.test == "any":
            continue
        elif child.test == "scalar":
            test = f"({value} is string || {value} is number || {value} is bool || {value} is timestamp)"
        elif child.test == "expiry":
            test = f"{value} == {_path('d', spec.timestamp_field)} + {_duration(spec)}"
        else:
            test = f"{value} {child.test}"
        if child.needed():
            yield test
        else:  # absent, null (as the writer stores None), or as declared
            yield f"(!({quote(name)} in {ref}) || {value} == null || {test})"


def _path(base: str, dotted: str) -> str:
    ref = base
    for part in dotted.split("."):
        ref = _member(ref, part)
    return ref


def _duration(spec: SeriesSpec) -> str:
    assert spec.expire_after is not None
    micros = spec.expire_after // dt.timedelta(microseconds=1)
    if micros % 1_000_000 == 0:
        return f"duration.value({micros // 1_000_000}, 's')"
    return f"duration.value({micros * 1000}, 'ns')"


def _condition(access: ClientAccess, who: str) -> str:
    """The rules condition for ``who`` (``access.read`` or ``access.create``)."""
    if who == "public":
        return "true"
    if who == "signed-in":
        return "request.auth != null"
    assert who == "custom" and access.condition is not None
    return f"({access.condition})"


@dataclass(frozen=True)
class _Match:
    """One ``match`` block: a path, a guard for a collection matched by wildcard, statements."""

    path: str
    guard: str | None
    lines: list[str]
    nested: list["_Match"] = field(default_factory=list)

    def render(self, depth: int) -> Iterator[str]:
        pad = INDENT * depth
        yield f"{pad}match {self.path} {{"
        for line in self.lines:
            yield from (f"{pad}{INDENT}{part}" for part in line.split("\n"))
        for inner in self.nested:
            yield from inner.render(depth + 1)
        yield f"{pad}}}"


def _segment(collection: str, variable: str) -> tuple[str, str | None]:
    """A rules path segment for ``collection``, and the guard a wildcard segment needs."""
    if _PLAIN_SEGMENT.fullmatch(collection):
        return collection, None
    return f"{{{variable}}}", f"{variable} == {quote(collection)}"


#: A generated line longer than this puts each of its conditions on a line of its own.
_WIDTH = 100


def _allow(methods: str, guard: str | None, *conditions: str) -> str:
    parts = [c for c in (guard, *conditions) if c and c != "true"] or ["true"]
    line = f"allow {methods}: if {' && '.join(parts)};"
    return line if len(line) <= _WIDTH else f"allow {methods}: if {f'{chr(10)}{INDENT * 2}&& '.join(parts)};"


def _reads(access: ClientAccess, guard: str | None, *, bounded: bool = True) -> list[str]:
    if not access.reads:
        return []
    who = _condition(access, access.read)
    if not bounded:
        return [_allow("get, list", guard, who)]
    bound = (f"request.query.limit <= {access.max_limit}", "request.query.offset == 0")  # skipped ones are billed too
    return [_allow("get", guard, who), _allow("list", guard, who, *bound)]


def _series_block(spec: SeriesSpec, document: str, rollups: Sequence[Rollup] = ()) -> _Match:
    segment, guard = _segment(spec.collection, "collection")
    access = spec.access
    lines = _reads(access, guard)
    if access.creates:
        checks = f"\n{INDENT * 3}&& ".join(
            c.replace("\n", f"\n{INDENT * 3}") for c in _checks(_tick_fields(spec), "d", spec)
        )
        lines += ["function validTick(d) {", f"{INDENT}return {checks};", "}"]
        marked = []
        horizons = _horizons(spec, rollups)
        if horizons:
            lines += _MARKED.splitlines()
            stamp = _path("request.resource.data", spec.timestamp_field)
            marked = [f"markedIfLate({stamp}, {quote(name)}, {interval // dt.timedelta(milliseconds=1)})"
                      for name, interval in horizons]  # fmt: skip
        conditions = (_condition(access, access.create), "validTick(request.resource.data)", *marked)
        lines.append(_allow("create", guard, *conditions))
    return _Match(f"/{segment}/{{{document}}}", guard, lines)


#: A client's tick in a bucket a roll-up has stored (before its watermark, or the end a run
#: under way announced), or in a partition the cold tier has sealed (or is sealing), must come
#: with that bucket's mark, written in the same commit (its nonce changed), as tsstore's
#: writers do (tsstore.late).
_MARKED = f"""function markedIfLate(t, rollup, ms) {{
  let state = /databases/$(database)/documents/{WATERMARKS}/$(rollup);
  let bucket = t.toMillis() - t.toMillis() % ms;
  let mark = /databases/$(database)/documents/{WATERMARKS}/$(rollup)/{MARKS}/$(string(bucket));
  return !exists(state)
    || bucket >= get(state).data.get('closing', get(state).data.get('watermark', timestamp.value(0))).toMillis()
    || (existsAfter(mark) && (!exists(mark) || getAfter(mark).data.nonce != get(mark).data.nonce));
}}"""


def _horizons(spec: SeriesSpec, rollups: Sequence[Rollup]) -> list[tuple[str, dt.timedelta]]:
    """The horizons a client's late tick of ``spec`` is marked for (name, bucket size): each
    roll-up of it, and its cold tier (its partitions sealed: ``<collection>.cold``)."""
    cold = [(horizon_name(spec.collection), spec.cold.partition)] if spec.cold is not None else []
    return [(r.name, r.interval) for r in rollups] + cold


def _marks_block(name: str, access: ClientAccess) -> _Match:
    """What a client that may create ticks may write of the marks of horizon ``name`` (a
    roll-up, or a cold tier): a mark named by its bucket, holding the bucket and a nonce."""
    segment, guard = _segment(name, "rollup")
    new = "request.resource.data"
    checks = (
        _condition(access, access.create),
        f"{new}.keys().hasOnly(['bucket', 'nonce'])",
        f"{new}.bucket is timestamp",
        f"{new}.nonce is string",
        f"mark == string({new}.bucket.toMillis())",
    )
    return _Match(f"/{WATERMARKS}/{segment}/{MARKS}/{{mark}}", guard, [_allow("create, update", guard, *checks)])


def _counters_block(spec: SeriesSpec) -> _Match:
    segment, guard = _segment(f"{spec.collection}{COUNTERS_SUFFIX}", "counters")
    access = spec.access
    shard_lines = _reads(access, guard, bounded=False)
    if access.creates:
        new, old = "request.resource.data", "resource.data"
        shard_lines.append(
            _allow(
                "update",
                guard,
                _condition(access, access.create),
                f"{new}.diff({old}).affectedKeys().hasOnly([{quote(COUNT_FIELD)}])",
                f"{_member(new, COUNT_FIELD)} is int",
                f"{_member(new, COUNT_FIELD)} > {_member(old, COUNT_FIELD)}",
            )
        )
    shards = _Match(f"/{SHARDS_COLLECTION}/{{shard}}", None, shard_lines)
    return _Match(f"/{segment}/{{series}}", guard, _reads(access, guard), [shards])


def rules_lines(specs: Sequence[SeriesSpec], rollups: Sequence[Rollup] = ()) -> list[str]:
    """The lines of the generated block (without its markers), indented for a place directly
    inside ``match /databases/{database}/documents``: one ``match`` per collection clients
    may use, and a comment for each collection they may not."""
    rolled = {r.spec.collection: r for r in rollups}
    lines: list[str] = []
    for name, spec in _declared_collections(specs, rollups).items():
        rollup = rolled.get(name)
        what = f" ({interval_label(rollup.interval)} bars of {rollup.source.collection})" if rollup else ""
        lines.append(f"// {name}{what}: {spec.access.describe()}")
        if spec.access.reads or spec.access.creates:
            lines += _collection_lines(spec, rollup, [r for r in rollups if r.source.collection == name])
    return lines


def _declared_collections(specs: Sequence[SeriesSpec], rollups: Sequence[Rollup]) -> dict[str, SeriesSpec]:
    """Every collection the declarations name (the roll-ups' sources and bars too), each
    declared once."""
    if not specs and not rollups:
        raise SpecError("no SeriesSpec given; declare at least one")
    for given, kind in ((specs, SeriesSpec), (rollups, Rollup)):
        if isinstance(given, (str, kind)) or any(not isinstance(item, kind) for item in given):
            wrong = given if isinstance(given, (str, kind)) else next(i for i in given if not isinstance(i, kind))
            raise SpecError(f"rules are made from a list of {kind.__name__} declarations, got {wrong!r}")
    series: dict[str, SeriesSpec] = {}
    for spec in (*specs, *(r.source for r in rollups), *(r.spec for r in rollups)):
        if series.setdefault(spec.collection, spec) != spec:
            raise SpecError(f"two different SeriesSpecs declare collection {spec.collection!r}; declare it once")
    return series


def _collection_lines(spec: SeriesSpec, rollup: Rollup | None, rolled_up: list[Rollup]) -> list[str]:
    """The matches of one collection clients may use: its documents; the late-tick marks of
    the roll-ups of it when clients create ticks; its series counters; a roll-up's watermark."""
    late = rolled_up if spec.access.creates else []
    lines = list(_series_block(spec, "bar" if rollup else "tick", late).render(0))
    for name, _ in _horizons(spec, late) if spec.access.creates else []:
        lines.append(f"// {WATERMARKS}/{name}/{MARKS}: late-tick marks clients write with their ticks")
        lines += _marks_block(name, spec.access).render(0)
    if spec.count_by:
        lines.append(f"// {spec.collection}{COUNTERS_SUFFIX}: its series counters, read like it")
        lines += _counters_block(spec).render(0)
    if rollup is not None and spec.access.reads:
        segment, guard = _segment(spec.collection, "rollup")
        reads = [_allow("get", guard, _condition(spec.access, spec.access.read))]
        lines.append(f"// {WATERMARKS}/{spec.collection}: how far the roll-up has been written")
        lines += _Match(f"/{WATERMARKS}/{segment}", guard, reads).render(0)
    return lines
