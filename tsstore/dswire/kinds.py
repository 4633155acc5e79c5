"""Value filters in Datastore mode with Native mode's answers, in Native mode's order.

The two modes compare values differently (measured on the emulator; Datastore mode's own
documentation orders mixed types the same way):

- Native mode compares integers and doubles as numbers (``100 == 100.0``), orders kinds as
  null < booleans < NaN < numbers < timestamps < strings < bytes, and a range condition
  matches only values of its bound's kind (``!=``: every value but null and the bound).
- Datastore mode orders null < integers and timestamps (one fixed-point type, compared by value
  in microseconds) < booleans < byte and text strings < doubles (NaN after every double);
  integers and doubles are different types (``100 != 100.0``); a range condition matches
  everything beyond its bound in that total order (``v >= 1000`` also returns strings and
  doubles) and ``!=`` also matches null.

So a Datastore-mode chunk query with value filters is sent as **variants**
(:class:`Variant`), one per kind of value Native mode would match on each range-filtered
field (a number: integers and doubles; ``!=``: every kind), each bounded to the part of
Datastore's order that holds that kind. Within one kind both modes order alike, so each
variant's answer is in the plan's order once the values of other kinds sharing its part
(timestamps among integers, bytes among strings) are dropped (:meth:`Variant.keeps`, Native
mode's rule written out); the variants are disjoint and are merged in the plan's order. A
number in an equality filter is asked as an integer and as a double (Datastore's equality is
type-strict). Each variant bills at least one read, like any query. A continued chunk
translates its position into each variant's kind (:func:`position`).

Counts and aggregations sum their variants' answers, so on a field that holds integers and
timestamps both, a count under a number range also counts the timestamps there (Datastore
orders them as one type); no read returns them.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tsstore.read.plan import Filter, QueryPlan

#: A condition: (property, operator, value).
Condition = tuple[str, str, Any]

_FIXED = ((">=", -(2**63)), ("<=", 2**63 - 1))  # integers and timestamps
_TEXT = ((">=", b""), ("<", -math.inf))  # byte strings and text, below the doubles
#: Each kind of value tsstore reads: the bounds of the part of Datastore's order holding it.
KIND_BOUNDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "int": _FIXED,
    "time": _FIXED,
    "bool": ((">=", False), ("<=", True)),
    "str": _TEXT,
    "bytes": _TEXT,
    "double": ((">=", -math.inf), ("<", math.nan)),  # NaN sorts after every double
    "nan": (("==", math.nan),),
}
#: Each kind's place in Native mode's order of values.
NATIVE_RANK = {"null": 0, "bool": 1, "nan": 2, "int": 3, "double": 3, "time": 4, "str": 5, "bytes": 6}
_MISSING = object()
#: What a translated condition can be besides a condition: nothing of the kind matches, or all of it does.
NOTHING, EVERYTHING = "nothing", "everything"


def kind_of(value: Any) -> str:
    """A value's kind as this module sorts them (``"other"`` for kinds tsstore does not filter)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else "double"
    if isinstance(value, dt.datetime):
        return "time"
    if isinstance(value, str):
        return "str"
    return "bytes" if isinstance(value, bytes) else "other"


def _native(kind: str) -> str:
    return "number" if kind in ("int", "double", "nan") else kind


def _equal(value: Any, bound: Any) -> bool:
    if _native(kind_of(value)) != _native(kind_of(bound)):
        return False
    if kind_of(value) == kind_of(bound) == "nan":
        return True
    return bool(value == bound)


def _value_at(data: Any, field: str) -> Any:
    """The value at dotted path ``field``, or ``_MISSING`` when the path is absent."""
    for part in field.split("."):
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data


def native_match(data: Any, f: Filter) -> bool:
    """Whether ``data`` meets ``f`` as Native mode decides it."""
    value = _value_at(data, f.field)
    if value is _MISSING:
        return False
    if f.op == "==":
        return _equal(value, f.values[0])
    if f.op == "in":
        return any(_equal(value, bound) for bound in f.values)
    if value is None:
        return False
    bound = f.values[0]
    if f.op == "!=":
        return not _equal(value, bound)
    if _native(kind_of(value)) != _native(kind_of(bound)) or kind_of(value) == "nan" or kind_of(bound) == "nan":
        return False
    compare = {"<": value < bound, "<=": value <= bound, ">": value > bound, ">=": value >= bound}
    return bool(compare[f.op])


@dataclass(frozen=True)
class Variant:
    """One query of a chunk's variants: its value ``conditions`` (for Datastore mode) and the
    ``kinds`` of value it reads on each range-filtered field."""

    conditions: tuple[Condition, ...]
    kinds: tuple[tuple[str, str], ...]

    def keeps(self, plan: QueryPlan, data: Any) -> bool:
        """Whether a tick this variant read is one of its answers: its range fields hold this
        variant's kinds, and it meets every range condition as Native mode decides."""
        if any(kind_of(_value_at(data, field)) != kind for field, kind in self.kinds):
            return False
        # Equalities are the server's (exact, with each number asked in both types); the
        # range fields are always read (a projection keeps them: the merge needs them).
        return all(native_match(data, f) for f in plan.ranges)


def _as_kind(value: Any, kind: str) -> Any:
    """``value`` as a value of ``kind`` (a number converted), or ``_MISSING`` when none of that
    kind equals it."""
    if kind_of(value) == kind:
        return value
    if kind == "double" and kind_of(value) == "int":
        return float(value)
    if kind == "int" and kind_of(value) == "double" and value == int(value) and abs(value) < 2**63:
        return int(value)
    return _MISSING


def position(value: Any, kind: str, *, held: bool, descending: bool) -> Condition | str:
    """A position's ``value`` on a range field, as the condition that holds a variant of
    ``kind`` at it (``held``) or beyond it in the plan's direction, in Native mode's order:
    ``(op, bound)`` with the field left empty, :data:`NOTHING` or :data:`EVERYTHING`."""
    mine, theirs = NATIVE_RANK[kind], NATIVE_RANK.get(kind_of(value), 7)
    if mine != theirs:
        if held:
            return NOTHING
        return EVERYTHING if (mine < theirs) == descending else NOTHING
    if kind == "nan":
        return ("", "==", math.nan) if held else NOTHING  # NaNs are equal: none is beyond another
    converted = _as_kind(value, kind)
    if held:
        return NOTHING if converted is _MISSING else ("", "==", converted)
    if converted is not _MISSING:
        return ("", "<" if descending else ">", converted)
    # a double position among the integers: the integers strictly beyond it
    edge = math.floor(value) if descending else math.ceil(value)
    return ("", "<=" if descending else ">=", int(edge))


def _range_conditions(f: Filter, kind: str) -> list[Condition] | None:
    """``f`` (a range condition) within ``kind``; ``None``: nothing of the kind matches."""
    bound = f.values[0]
    if f.op == "!=":  # the same condition for each kind of a part of the order (a count sends it once)
        if kind == "nan":
            return []
        sharing = [k for k, bounds in KIND_BOUNDS.items() if bounds == KIND_BOUNDS[kind]]
        converted = next((c for c in (_as_kind(bound, k) for k in sharing) if c is not _MISSING), _MISSING)
        return [] if converted is _MISSING else [(f.field, "!=", converted)]
    converted = _as_kind(bound, kind)
    if converted is not _MISSING:
        return [(f.field, f.op, converted)]
    if kind == "int" and kind_of(bound) == "double":  # 10.5 among the integers: loosened to whole numbers
        low = f.op in (">", ">=")
        return [(f.field, ">=" if low else "<=", int(math.ceil(bound) if low else math.floor(bound)))]
    return None


def _range_variants(field: str, ranged: Sequence[Filter]) -> list[tuple[list[Condition], str]]:
    if any(f.op == "!=" for f in ranged):
        kinds = [k for k in KIND_BOUNDS]
    else:
        natives = {_native(kind_of(f.values[0])) for f in ranged}
        if len(natives) != 1 or "number" in natives and any(kind_of(f.values[0]) == "nan" for f in ranged):
            return []  # a value of two kinds at once, or beyond NaN: Native mode matches nothing
        [native] = natives
        kinds = ["int", "double"] if native == "number" else [native]
    made = []
    for kind in kinds:
        if kind not in KIND_BOUNDS:
            continue
        conditions = [(field, op, bound) for op, bound in KIND_BOUNDS[kind]]
        for f in ranged:
            extra = _range_conditions(f, kind)
            if extra is None:
                break
            conditions += extra
        else:
            made.append((conditions, kind))
    return made


def _equality_variants(field: str, f: Filter) -> list[list[Condition]]:
    """One field's ``==``/``in``: each number as an integer and as a double, the rest once."""
    values = list(f.values)
    numbers = [v for v in values if _native(kind_of(v)) == "number"]
    if not numbers:
        return [[(field, f.op, f.values if f.op == "in" else f.values[0])]]
    rest = [v for v in values if _native(kind_of(v)) != "number"]
    made = []
    for kind, extra in (("int", rest), ("double", [])):
        chosen = [*extra, *(c for c in (_as_kind(v, kind) for v in numbers) if c is not _MISSING)]
        if chosen:
            made.append([(field, "in", tuple(chosen))])
    return made


def variants(plan: QueryPlan) -> list[Variant] | None:
    """The variants of ``plan``'s chunk queries (see the module), or ``None`` when its value
    filters need none (no range condition, no number in an equality)."""
    if not plan.ranges and not any(_native(kind_of(v)) == "number" for f in plan.filters for v in f.values):
        return None
    parts: list[list[tuple[list[Condition], tuple[tuple[str, str], ...]]]] = []
    for f in plan.filters:
        parts.append([(conditions, ()) for conditions in _equality_variants(f.field, f)])
    ranged: dict[str, list[Filter]] = {}
    for f in plan.ranges:
        ranged.setdefault(f.field, []).append(f)
    for field, held in ranged.items():
        parts.append([(conditions, ((field, kind),)) for conditions, kind in _range_variants(field, held)])
    return [
        Variant(tuple(c for conditions, _ in combo for c in conditions), tuple(k for _, kinds in combo for k in kinds))
        for combo in itertools.product(*parts)
    ]


def kept(plan: QueryPlan, variant: Variant, ticks: Iterable[Any]) -> Iterable[Any]:
    """The ticks of ``variant`` that are its answers (:meth:`Variant.keeps`)."""
    return (t for t in ticks if variant.keeps(plan, t.data))
