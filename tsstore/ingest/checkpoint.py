"""Where an interrupted ingest resumes: the checkpoint file and the watermark it records.

The checkpoint names what it belongs to (the file, the target, the reading options) and the
last line up to which every row is done, stored or rejected; the watermark finds that line
while the writer confirms batches out of order.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tsstore.spec import SeriesSpec

#: The checkpoint's format; a checkpoint of another version is not resumed from.
CHECKPOINT_VERSION = 2


def file_identity(path: Path, spec: SeriesSpec) -> dict[str, Any]:
    """What a checkpoint belongs to: the file (size, mtime, first MiB) and the collection."""
    stat = path.stat()
    with open(path, "rb") as handle:
        head = hashlib.sha256(handle.read(1 << 20)).hexdigest()
    return {
        "file": str(path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "head_sha256": head,
        "collection": spec.collection,
    }


def default_checkpoint(source: Path, identity: Mapping[str, Any]) -> Path:
    """``<file>.<target>.tsstore-checkpoint.json`` beside the input, where ``<target>`` is a short
    hash of project, database and collection: loading one file into two targets keeps two
    checkpoints."""
    target = json.dumps([identity.get("project"), identity.get("database"), identity.get("collection")])
    return source.with_name(f"{source.name}.{hashlib.sha256(target.encode()).hexdigest()[:8]}.tsstore-checkpoint.json")


class Checkpoint:
    """The checkpoint file: loaded once, saved atomically whenever the watermark moves."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.saved_line = 0
        self.saved_at = 0.0

    def load(self, identity: Mapping[str, Any]) -> tuple[int, int]:
        """(line, records): every row up to ``line`` is done, and ``records`` of them went
        to the writer. (0, 0) when there is no checkpoint for this identity."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return 0, 0
        if not isinstance(data, dict) or data.get("identity") != dict(identity):
            return 0, 0  # another file, or this one changed: start over (creates make that safe)
        line, records = data.get("line"), data.get("records")
        if not (isinstance(line, int) and isinstance(records, int) and 0 <= records <= line):
            return 0, 0
        self.saved_line = line
        return line, records

    def save(self, identity: Mapping[str, Any], line: int, records: int) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"identity": dict(identity), "line": line, "records": records}, indent=2))
        os.replace(tmp, self.path)  # atomic: a kill never leaves half a checkpoint
        self.saved_line, self.saved_at = line, time.perf_counter()

    def remove(self) -> None:
        """The file is done: forget it, so a later ingest of it reads every row again."""
        self.path.unlink(missing_ok=True)


class Watermark:
    """The last line up to which every row is done, while batches finish out of order, and
    how many of the rows up to it went to the writer (``records``).

    Rows enter in input order; the writer's record positions count only the rows sent to it
    (rejected rows are done at once), starting after the ``records`` an earlier run did.
    Parallel deques hold the not-yet-passed rows.
    """

    def __init__(self, start: int, records: int) -> None:
        self.line = start
        self.records = records
        self._lines: deque[int] = deque()
        self._done: deque[bool] = deque()
        self._to_writer: deque[bool] = deque()
        self._slot_of: dict[int, int] = {}  # writer position -> absolute slot number, until confirmed
        self._sent = records
        self._base = 0  # absolute slot number of self._lines[0]

    @property
    def pending(self) -> int:
        """Rows handed to the writer and not yet confirmed."""
        return len(self._slot_of)

    def sent(self, line: int) -> None:
        self._slot_of[self._sent] = self._base + len(self._lines)
        self._sent += 1
        self._lines.append(line)
        self._done.append(False)
        self._to_writer.append(True)

    def done_now(self, line: int) -> None:
        self._lines.append(line)
        self._done.append(True)
        self._to_writer.append(False)
        self._advance()

    def line_of(self, index: int) -> int:
        slot = self._slot_of.get(index, -1) - self._base
        return self._lines[slot] if 0 <= slot < len(self._lines) else 0

    def confirm(self, indexes: list[int]) -> None:
        done, base, slot_of = self._done, self._base, self._slot_of
        for index in indexes:
            slot = slot_of.pop(index, -1) - base
            if slot >= 0:
                done[slot] = True
        self._advance()

    def _advance(self) -> None:
        lines, done, to_writer = self._lines, self._done, self._to_writer
        while done and done[0]:
            done.popleft()
            self.records += to_writer.popleft()
            self.line = lines.popleft()
            self._base += 1
