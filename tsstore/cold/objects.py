"""Object stores as data-driven I/O: the asks a request yields for the cold tier's objects,
the :class:`Objects` protocol a driver answers them through, and its local-directory
implementation.

An object is written once under a name that must not exist (:meth:`Objects.put_new`): the
answer is :class:`Placed` (with the store's generation of it) or :class:`Taken` (the name
exists; nothing was written). That is what makes sealing exactly once: the object is never
replaced, and the manifest switch decides which object readers see. A local directory writes
a temporary file, syncs it and links it to the final name (a link fails when the name
exists), so a half-written object is never seen under its name. A bucket
(:mod:`tsstore.cold.gcs`) writes with ``if_generation_match=0`` and checks the stored bytes
before it answers :class:`Placed`; an object whose bytes it finds wrong is deleted and the
answer is :class:`Damaged`. :func:`objects_at` (:mod:`tsstore.cold.stores`) gives the store a
tier's path names.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tsstore.asks import Asking
from tsstore.errors import ConfigError, TsstoreError


@dataclass(frozen=True)
class Placed:
    """An object written: its name, the store's generation of it and its size in bytes."""

    name: str
    generation: int
    size: int


@dataclass(frozen=True)
class Taken:
    """An object not written, since its name exists."""

    name: str


@dataclass(frozen=True)
class Damaged:
    """An object written whose stored bytes were not the ones sent (``why``), deleted since:
    nothing is under its name from this write; the writer tries again under another name."""

    name: str
    why: str


@dataclass(frozen=True)
class ObjectInfo:
    """An object as listed: its name, generation, size and when it was written."""

    name: str
    generation: int
    size: int
    updated: dt.datetime


class Objects(Protocol):
    """An object store under one root: names are ``/``-separated paths below it."""

    def put_new(self, name: str, data: bytes) -> Placed | Taken | Damaged:
        """Write ``data`` as ``name`` unless that name exists (then :class:`Taken`, nothing
        written); :class:`Placed` only once the stored object is known to hold ``data``."""
        ...

    def get(self, name: str) -> bytes | None:
        """The bytes of ``name`` (``None``: no such object)."""
        ...

    def list(self, prefix: str) -> list[ObjectInfo]:
        """The objects whose names start with ``prefix``, by name."""
        ...

    def delete(self, name: str, *, generation: int | None = None) -> bool:
        """Delete ``name`` (only its generation ``generation``, when given); ``False`` when
        it did not exist (or another generation is under the name now)."""
        ...

    def url(self, name: str) -> str:
        """Where an open tool reads ``name`` (a local path, ``gs://...``)."""
        ...


class LocalObjects:
    """Objects as files under the directory ``root`` (made when first written to)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def _path(self, name: str) -> Path:
        parts = name.split("/")
        if not name or any(part in ("", ".", "..") for part in parts):
            raise ConfigError(f"object name {name!r} is not allowed; give a relative path without '.' or '..' parts")
        return self.root.joinpath(*parts)

    def put_new(self, name: str, data: bytes) -> Placed | Taken:
        final = self._path(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        _drop_stale_temporaries(final.parent)
        temporary = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
        try:
            with open(temporary, "xb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(temporary, final)  # fails when the name exists: never replaced, never half-written
            except FileExistsError:
                return Taken(name)
        finally:
            temporary.unlink(missing_ok=True)
        _sync_directory(final.parent)
        return Placed(name, final.stat().st_mtime_ns, len(data))

    def get(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[ObjectInfo]:
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.rglob("*"):
            name = path.relative_to(self.root).as_posix()
            if path.is_file() and name.startswith(prefix) and not path.name.startswith("."):
                stat = path.stat()
                updated = dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc)
                found.append(ObjectInfo(name, stat.st_mtime_ns, stat.st_size, updated))
        return sorted(found, key=lambda info: info.name)

    def delete(self, name: str, *, generation: int | None = None) -> bool:
        path = self._path(name)
        try:
            if generation is not None and path.stat().st_mtime_ns != generation:
                return False
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def url(self, name: str) -> str:
        return str(self._path(name))


#: How old a temporary file must be before a write into its directory deletes it: a writer
#: killed between writing its bytes and naming them leaves one (never read: no name is it).
STALE_TEMPORARY = dt.timedelta(hours=1)


def _drop_stale_temporaries(directory: Path) -> None:
    """Delete the temporary files in ``directory`` older than :data:`STALE_TEMPORARY`."""
    oldest = time.time() - STALE_TEMPORARY.total_seconds()
    for path in directory.glob(".*.tmp"):
        try:
            if path.stat().st_mtime < oldest:
                path.unlink()
        except FileNotFoundError:  # another writer's, gone meanwhile
            continue


def _sync_directory(directory: Path) -> None:
    """Make a link just made in ``directory`` survive a crash of the machine."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------------- the asks


@dataclass(frozen=True)
class PutObject(Asking[Placed | Taken | Damaged]):
    """Write ``data`` as object ``name`` unless the name exists."""

    name: str
    data: bytes
    what: str


@dataclass(frozen=True)
class GetObject(Asking[bytes | None]):
    """The bytes of object ``name`` (``None``: none)."""

    name: str
    what: str


@dataclass(frozen=True)
class ListObjects(Asking[list[ObjectInfo]]):
    """The objects whose names start with ``prefix``."""

    prefix: str
    what: str


@dataclass(frozen=True)
class DeleteObject(Asking[bool]):
    """Delete object ``name`` (only its generation ``generation``, when given); answers
    ``False`` when it did not exist."""

    name: str
    what: str
    generation: int | None = None


@dataclass(frozen=True)
class ObjectUrls(Asking[list[str]]):
    """Where an open tool reads each of ``names``."""

    names: tuple[str, ...]
    what: str = "naming the cold tier's objects"


#: The asks a driver answers through the store's :class:`Objects` (:func:`answer_object`).
ObjectAsk = PutObject | GetObject | ListObjects | DeleteObject | ObjectUrls


class ObjectStoreError(TsstoreError):
    """A call to the cold tier's object store failed."""


def answer_object(objects: Objects, ask: ObjectAsk) -> object:
    """The answer to ``ask`` from ``objects`` (both drivers answer through this)."""
    try:
        match ask:
            case PutObject(name=name, data=data):
                return objects.put_new(name, data)
            case GetObject(name=name):
                return objects.get(name)
            case ListObjects(prefix=prefix):
                return objects.list(prefix)
            case DeleteObject(name=name, generation=generation):
                return objects.delete(name, generation=generation)
            case ObjectUrls(names=names):
                return [objects.url(name) for name in names]
    except OSError as exc:
        raise ObjectStoreError(f"{ask.what}: {exc}") from exc
    raise TypeError(f"not an object ask: {ask!r}")  # pragma: no cover - ObjectAsk is the five above
