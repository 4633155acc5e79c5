"""Load the application's series declaration: one source for the application and the CLI.

A declaration is either an import path, ``package.module:NAME``, where ``NAME`` is a
:class:`~tsstore.spec.SeriesSpec` or a list of specs and :class:`~tsstore.analytics.rollup.Rollup`
values (the application's own objects), or a TOML/JSON file with a ``series`` list of tables
(see :func:`~tsstore.spec.spec_from_mapping`) and optionally a ``rollup`` list (see
:func:`~tsstore.analytics.rollup.rollup_from_mapping`). A roll-up's own spec counts among the specs, so
its indexes are generated and the read verbs reach it by its collection.
"""

from __future__ import annotations

import importlib
import json
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

from tsstore.analytics.rollup import Rollup, refuse_cold_name, rollup_from_mapping
from tsstore.errors import SpecError
from tsstore.spec import SeriesSpec, spec_from_mapping


def load_specs(ref: str) -> tuple[SeriesSpec, ...]:
    """The specs ``ref`` names (a ``module:NAME`` import path or a .toml/.json file): its
    series, then its roll-ups' specs."""
    specs, rollups = load_declaration(ref)
    return specs + tuple(r.spec for r in rollups)


def load_declaration(ref: str) -> tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]]:
    """The series and the roll-ups a declaration holds; a collection declared twice is
    refused (a read would answer from whichever came first).

    - ``ref``: a ``.toml`` or ``.json`` file with a ``[[series]]`` list, or an import path
      ``package.module:NAME`` naming a :class:`~tsstore.spec.SeriesSpec`, a roll-up or a
      sequence of them"""
    specs, rollups = _load(ref)
    names = [spec.collection for spec in specs] + [rollup.name for rollup in rollups]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise SpecError(f"declaration {ref!r} declares collection {twice[0]!r} twice; declare each collection once")
    for rollup in rollups:
        for spec in specs:
            refuse_cold_name(rollup.name, spec)
    return specs, rollups


def _load(ref: str) -> tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]]:
    path = Path(ref)
    if path.suffix in (".toml", ".json") or path.is_file():
        return _from_file(path)
    if ":" not in ref:
        raise SpecError(
            f"declaration {ref!r} is neither a file nor an import path; use 'package.module:NAME' "
            "or a .toml/.json file with a [[series]] list"
        )
    module_name, _, attr = ref.partition(":")
    # Like `python -m`, look in the current directory first, so the application's own
    # modules import without being installed.
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SpecError(f"cannot import {module_name!r} for declaration {ref!r}: {exc}") from exc
    except Exception as exc:  # the application's own module failed as it ran (a syntax error, a NameError...)
        raise SpecError(
            f"importing {module_name!r} for declaration {ref!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise SpecError(f"module {module_name!r} has no {attr!r} (declaration {ref!r})") from None
    return _as_specs(value, ref)


def _from_file(path: Path) -> tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read declaration file {str(path)!r}: {exc.strerror}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"declaration file {str(path)!r} does not parse: {exc}") from exc
    series = data.get("series") if isinstance(data, dict) else None
    if not isinstance(series, list) or not series:
        raise SpecError(f"declaration file {str(path)!r} needs a non-empty 'series' list of tables")
    specs = []
    for i, item in enumerate(series):
        try:
            specs.append(spec_from_mapping(item, source=str(path)))
        except SpecError as exc:
            raise SpecError(f"{path}: series[{i}]: {exc}") from None
    tables = data.get("rollup", [])
    if not isinstance(tables, list):
        raise SpecError(f"declaration file {str(path)!r}: 'rollup' must be a list of tables ([[rollup]])")
    sources: dict[str, SeriesSpec | Rollup] = {spec.collection: spec for spec in specs}
    rollups = []
    for i, item in enumerate(tables):
        try:
            rollups.append(rollup_from_mapping(item, sources))
        except SpecError as exc:
            raise SpecError(f"{path}: rollup[{i}]: {exc}") from None
        sources[rollups[-1].name] = rollups[-1]  # a later roll-up may roll this one up
    return tuple(specs), tuple(rollups)


def _as_specs(value: object, ref: str) -> tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]]:
    if isinstance(value, SeriesSpec):
        return (value,), ()
    if isinstance(value, Rollup):
        return (value.source,), (value,)
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        items = tuple(value)
        if items and all(isinstance(v, (SeriesSpec, Rollup)) for v in items):
            rollups = tuple(v for v in items if isinstance(v, Rollup))
            specs = [v for v in items if isinstance(v, SeriesSpec)]
            specs += [r.source for r in rollups if r.finer is None and r.source not in specs]
            return tuple(specs), rollups
    raise SpecError(f"{ref!r} is a {type(value).__name__}, not a SeriesSpec or a list of SeriesSpecs and Rollups")
