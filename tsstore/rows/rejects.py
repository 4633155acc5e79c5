"""Rejected rows: what a row that was not written keeps (line, reason, text), and the reject
file (``line,reason,raw``) they go to."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Raw text kept of a rejected row in the reject file.
RAW_KEPT = 4096


@dataclass(frozen=True)
class Rejected:
    """A row that was not written: its line (row number for Parquet), why, and its text."""

    line: int
    reason: str
    raw: str


def clip_raw(text: str) -> str:
    """A rejected row's text for the reject file, cut short when huge."""
    if len(text) <= RAW_KEPT:
        return text
    return f"{text[:RAW_KEPT]}…[{len(text) - RAW_KEPT} more characters]"


def write_rejects(path: Path) -> tuple[Callable[[Rejected], None], Callable[[], None]]:
    """A reject sink writing ``line,reason,raw`` rows to ``path`` (appending, header once),
    and its closer."""
    new = not path.exists() or path.stat().st_size == 0
    handle: io.TextIOWrapper | None = None
    writer: Any = None

    def sink(rejected: Rejected) -> None:
        nonlocal handle, writer
        if handle is None:
            handle = open(path, "a", encoding="utf-8", newline="")
            writer = csv.writer(handle)
            if new:
                writer.writerow(["line", "reason", "raw"])
        writer.writerow(dataclasses.astuple(rejected))
        handle.flush()

    def close() -> None:
        if handle is not None:
            handle.close()

    return sink, close
