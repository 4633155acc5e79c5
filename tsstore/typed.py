"""What a person types, read as the verbs' options: a time (ISO-8601, a bare date, or a time
without an offset in a named zone), a ``--where`` condition typed by the declaration, a list
of columns checked against it. The commands read their options with these
(:mod:`tsstore.cli`), and the console its forms (:mod:`tsstore.console.forms`), so both refuse
a bad value in the same words: a :class:`~tsstore.errors.UsageError` naming the value and
what is allowed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any

from tsstore.errors import UsageError
from tsstore.spec import SeriesSpec
from tsstore.times import naive_zone, parse_iso

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_time(text: str | None, *, option: str, naive: str | None) -> dt.datetime | None:
    """A time typed for ``option``: ISO-8601 with an offset (``2019-01-02T09:30:00Z``), a
    bare date (midnight in the ``--naive`` zone, UTC without it), or a time without an
    offset read in the ``--naive`` zone; ``None`` when not given."""
    if text is None:
        return None
    zone: dt.tzinfo | None = None
    if naive is not None:
        try:
            zone = naive_zone(naive)
        except ValueError:
            raise UsageError(f"--naive {naive!r} is not utc or an IANA time zone such as Europe/London") from None
    try:
        parsed = parse_iso(text.strip())
    except ValueError as exc:
        raise UsageError(f"{option} {text!r} is not a time ({exc}): write ISO-8601 such as 2019-01-02T09:30:00Z, "
                    "or a date such as 2019-01-02") from None  # fmt: skip
    if parsed.tzinfo is not None:
        return parsed
    if _DATE.fullmatch(text.strip()):
        return parsed.replace(tzinfo=zone or dt.timezone.utc)
    if zone is None:
        raise UsageError(f"{option} {text} has no UTC offset: write it with one ({text}Z for UTC) "
                    "or add --naive utc (or --naive Europe/London) to read such times in that zone")  # fmt: skip
    return parsed.replace(tzinfo=zone)


def parse_value(raw: str, *, field: str | None = None, spec: SeriesSpec | None = None, typed: str | None = None) -> Any:
    """A value typed on the command line for ``field``. A field the declaration types is read
    as that type (a string column keeps ``7203`` a string; an Int64 column wants an
    integer); any other field is JSON when it parses as JSON (numbers, true/false, null),
    else the plain string. Double quotes (``'"5"'``) always make a string. ``typed`` is what
    the user typed, for the error (default ``field=raw``)."""
    said = typed or f"{field}={raw}"
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        return _json_or(raw, raw[1:-1])
    kind = dict(spec.columns).get(field) if spec is not None and field is not None else None
    if kind == "string":
        return raw
    if kind in ("Int64", "Float64"):
        try:
            number: int | float = int(raw) if kind == "Int64" else float(raw)
        except ValueError:
            try:  # a decimal bound on an integer field compares as Firestore compares numbers
                number = float(raw)
            except ValueError:
                number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"--where {said!r}: {field} is declared {kind}, and {raw!r} is not a finite number") from None
        return number
    if kind == "boolean":
        if raw.lower() not in ("true", "false"):
            raise UsageError(f"--where {said!r}: {field} is declared boolean; give true or false")
        return raw.lower() == "true"
    return _json_or(raw, raw)


def _json_or(raw: str, otherwise: Any) -> Any:
    """``raw`` read as JSON, or ``otherwise`` when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return otherwise


#: ``--where`` operators, longest first so ``>=`` is not read as ``>`` then ``=VALUE``.
_WHERE = re.compile(r"^\s*([^<>=!\s]+)\s*(<=|>=|!=|==|<|>|=)(.*)$", re.S)


def parse_where(items: tuple[str, ...], *, spec: SeriesSpec | None = None) -> list[tuple[str, str, Any]]:
    """``FIELD=VALUE`` (equality; a field given twice becomes ``in``) and range conditions
    ``FIELD<VALUE``, ``<=``, ``>``, ``>=``, ``!=`` on a shape's range fields, as filter
    triples (values read by :func:`parse_value`)."""
    equal: dict[str, Any] = {}
    ranges: list[tuple[str, str, Any]] = []
    for item in items:
        match = _WHERE.match(item)
        if match is None:
            raise UsageError(
                f"--where {item!r} is not FIELD=VALUE or FIELD<op>VALUE with op one of <, <=, >, >=, != "
                "(e.g. --where symbol=AAA --where 'volume>=10000')"
            )
        field, op, raw = match.group(1), match.group(2), match.group(3).strip()
        if spec is not None and field == spec.shard_field:
            raise UsageError(f"--where {item!r}: {field!r} is tsstore's shard field, not a filter; every read already "
                        "covers every shard value (filter on the series' own fields)")  # fmt: skip
        value = parse_value(raw, field=field, spec=spec, typed=item)
        if op in ("=", "=="):
            held = equal.get(field, _UNSET)
            equal[field] = value if held is _UNSET else [*held, value] if isinstance(held, list) else [held, value]
        else:
            ranges.append((field, op, value))
    return [(f, "in" if isinstance(v, list) else "==", v) for f, v in equal.items()] + ranges


_UNSET = object()


def parse_columns(
    columns: str | None, *, spec: SeriesSpec | None = None, option: str = "--columns"
) -> list[str] | None:
    """``--columns a,b`` (or the ``option`` named) as a list of field names (``None``: every
    field). When the declaration lists its columns, a name it does not know is refused
    (:meth:`~tsstore.spec.SeriesSpec.check_columns`, as the library refuses it)."""
    if not columns:
        return None
    names = [c.strip() for c in columns.split(",") if c.strip()]
    if spec is not None:
        spec.check_columns(names, option=option)  # the library's own check, worded with the option
    return names
