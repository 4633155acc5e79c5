"""A series' cold tier as the declaration says it (:class:`ColdTier`): where its closed
partitions are sealed into Parquet, how long a partition is and when one is sealed; and the
declaration file's table of it (:func:`cold_from`). Plain data, like the late-data policy
(:mod:`tsstore.late`) and the clients' access (:mod:`tsstore.access`) beside it; the tier's
partition arithmetic, objects and manifest are :mod:`tsstore.cold`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tsstore.errors import SpecError, refuse_unknown_keys
from tsstore.times import bucket_start, to_duration

DAY = dt.timedelta(days=1)
_KEYS = ("path", "partition", "seal_after")


@dataclass(frozen=True)
class ColdTier:
    """Where a series' closed partitions are sealed into Parquet, and when.

    - ``path``: a local directory (made when first written to) or ``gs://bucket/prefix``
      (a Cloud Storage bucket, with the ``gcs`` extra: ``pip install 'tsstore[gcs]'``). In a
      declaration file a relative directory is relative to the file.
    - ``partition``: the span of one partition, a whole number of days in UTC (``"1D"``)
    - ``seal_after``: how long after a partition ends it is sealed (the time late ticks have
      to arrive in it); at least one partition (``"2D"``)
    """

    path: str
    partition: dt.timedelta
    seal_after: dt.timedelta

    def __init__(self, path: str | Path, *, partition: object = "1D", seal_after: object = "2D") -> None:
        if isinstance(path, Path):
            path = str(path)
        if not isinstance(path, str) or not path.strip():
            raise SpecError(f"cold tier path {path!r} is not allowed; give a local directory or gs://bucket/prefix")
        if path.startswith("gs://") and not path[len("gs://"):].split("/", 1)[0]:
            raise SpecError(f"cold tier path {path!r} names no bucket; give gs://bucket or gs://bucket/prefix")
        if "://" in path and not path.startswith("gs://"):
            raise SpecError(f"cold tier path {path!r} is not allowed; give a local directory or gs://bucket/prefix")
        span = _duration(partition, "partition")
        if span % DAY:
            raise SpecError(f"cold tier partition must be a whole number of days, got {partition!r}")
        after = _duration(seal_after, "seal_after")
        if after < span:
            raise SpecError(
                f"cold tier seal_after {seal_after!r} is shorter than its partition {partition!r}; give a "
                "seal_after of at least one partition, so late ticks have that long to arrive"
            )
        object.__setattr__(self, "path", path.rstrip("/") if path.startswith("gs://") else path)
        object.__setattr__(self, "partition", span)
        object.__setattr__(self, "seal_after", after)

    @property
    def local(self) -> bool:
        """Whether the tier is a local directory (not ``gs://``)."""
        return not self.path.startswith("gs://")

    def start_of(self, moment: dt.datetime) -> dt.datetime:
        """The start of the partition holding ``moment``: a multiple of the partition since the epoch.

        - ``moment``: an aware time"""
        return bucket_start(moment, self.partition)


def _duration(value: object, name: str) -> dt.timedelta:
    try:
        delta = to_duration(value, name=f"cold tier {name}")
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if delta <= dt.timedelta(0):
        raise SpecError(f"cold tier {name} {value!r} is not allowed; give a positive whole number of days ('1D')")
    return delta


def cold_from(value: ColdTier | Mapping[str, object] | None, *, source: str | None = None) -> ColdTier | None:
    """A tier from a :class:`ColdTier` or a declaration file's table (``path``, ``partition``,
    ``seal_after``); a relative local ``path`` is relative to the file ``source`` names."""
    if value is None or isinstance(value, ColdTier):
        return value
    if not isinstance(value, Mapping):
        raise SpecError(f"cold {value!r} is not allowed; give a ColdTier or a table of {', '.join(_KEYS)}")
    refuse_unknown_keys(value, _KEYS, where="the cold tier")
    if "path" not in value:
        raise SpecError("a cold tier needs 'path' (a local directory or gs://bucket/prefix)")
    path = value["path"]
    if isinstance(path, str) and source is not None and "://" not in path and not Path(path).is_absolute():
        path = str(Path(source).resolve().parent / path)
    options = {k: v for k, v in value.items() if k != "path"}
    return ColdTier(path, **options)  # type: ignore[arg-type]
