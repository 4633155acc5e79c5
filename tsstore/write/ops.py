"""The writer's vocabulary: one write (:data:`WriteOp`, a :class:`Patch`), its answer
(:data:`WriteStatus`), a stored document (:class:`Stored`) and the two calls a sender is
given (:data:`Transport`). The sender speaks it; the transport (:mod:`tsstore.wire`) encodes
and decodes it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: (gRPC status code, message) of one write in a BatchWrite response; code 0 is success.
WriteStatus = tuple[int, str]


@dataclass(frozen=True)
class Patch:
    """Change only these fields (dotted paths to values) of a document that must exist
    (Firestore refuses it with NOT_FOUND otherwise); the rest of the document stays."""

    fields: dict[str, Any]
    #: The patched tick's time, when the patch changes a sealed tick: the day of the cold
    #: tier it changes is marked (a roll-up's bars hold no patched field); ``None``: none.
    timestamp: dt.datetime | None = None


@dataclass(frozen=True)
class Erase:
    """Delete a tick to correct the data: unlike a plain delete (``None``, retention), the
    roll-ups that hold its bucket are told (:mod:`tsstore.write.marks`), so they drop it too."""

    timestamp: dt.datetime


#: One write: document id, data (``None`` deletes the document, an :class:`Erase` deletes
#: it and marks its bucket, a :class:`Patch` changes some fields of an existing one), and
#: whether it may only create the document (Firestore then refuses it with ALREADY_EXISTS
#: if the id is taken).
WriteOp = tuple[str, "dict[str, Any] | Patch | Erase | None", bool]

#: gRPC status codes of a create whose document exists, and of a patch whose document does not.
ALREADY_EXISTS, NOT_FOUND = 6, 5


@dataclass(frozen=True)
class Stored:
    """A document as it is stored: its data and when it was created."""

    data: dict[str, Any]
    create_time: dt.datetime


#: What a sender sends on: a batch of writes -> one status per write, and ids -> the stored
#: documents among them (one driver's client, sync or async).
Transport = tuple[Callable[[list[WriteOp]], list[WriteStatus]], Callable[[list[str]], "dict[str, Stored]"]]
