"""The object store a cold tier's path names: a local directory, or a Cloud Storage bucket."""

from __future__ import annotations

from tsstore.cold.gcs import GcsObjects
from tsstore.cold.objects import LocalObjects, Objects


def objects_at(path: str) -> Objects:
    """The object store at ``path``: :class:`~tsstore.cold.gcs.GcsObjects` for
    ``gs://bucket/prefix`` (its client made at its first call), else a local directory."""
    if path.startswith("gs://"):
        return GcsObjects.at(path)
    return LocalObjects(path)
