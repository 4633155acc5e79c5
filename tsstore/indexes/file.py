"""The index files on disk: ``firestore.indexes.json`` (merged in place) and ``firebase.json``.

``firebase deploy --only firestore:indexes`` reads ``firebase.json`` in the current
directory, which names the index file. The index file may hold comments (the Firebase CLI
allows them); they are read, but a rewritten file no longer has them, and the update says
so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5

from tsstore.deploy import GeneratedFile, plan_firebase_json
from tsstore.errors import SpecError
from tsstore.indexes.build import MergeReport, lint, merge, render
from tsstore.spec import SeriesSpec

DEFAULT_INDEX_FILE = Path("indexes/firestore.indexes.json")


@dataclass(frozen=True)
class IndexFileUpdate(GeneratedFile):
    """What updating one index file would do (nothing is written until :meth:`write`)."""

    report: MergeReport
    problems: tuple[str, ...]
    dropped_comments: bool


def plan_index_file(path: Path, specs: Sequence[SeriesSpec], *, keep_stale: bool = False) -> IndexFileUpdate:
    """Read ``path`` if it exists and compute its update for ``specs``."""
    old_text = path.read_text(encoding="utf-8") if path.exists() else None
    existing: Any = {}
    if old_text is not None and old_text.strip():
        try:
            existing = json5.loads(old_text)
        except ValueError as exc:
            raise SpecError(f"index file {str(path)!r} is not valid JSON (comments allowed): {exc}") from exc
        if not isinstance(existing, dict):
            raise SpecError(f"index file {str(path)!r} holds a {type(existing).__name__}, not an object")
    merged, report = merge(existing, specs, keep_stale=keep_stale)
    new_text = render(merged)
    dropped = old_text is not None and _has_comments(old_text, existing)
    firebase = plan_firebase_json(path.parent, "indexes", path.name)
    return IndexFileUpdate(path, old_text, new_text, firebase, report, tuple(lint(merged)), dropped)


def _has_comments(text: str, parsed: Any) -> bool:
    """Whether ``text`` is more than the JSON it parses to (comments or trailing commas)."""
    try:
        differs: bool = json.loads(text) != parsed
        return differs
    except ValueError:
        return True
