"""The package's log records: one ``tsstore`` logger hierarchy, quiet until the application
says otherwise, and the names of the records' structured fields.

Every module that logs takes ``logging.getLogger(__name__)``, so every logger sits under
``tsstore``; the package gives that logger a ``NullHandler`` (``tsstore/__init__.py``) and
nothing else: the application (the ``tsstore`` command among them, ``--log-level``) decides
where records go and from which level. What a record is about travels in ``extra=`` under
the names the spans give their attributes, so a log line and a span of the same work say it
in the same words (``log.warning(..., extra={DB_COLLECTION: "ticks", ERROR_TYPE: "UNAVAILABLE"})``).
Each of these names holds a dot and no attribute of a plain ``LogRecord`` does, which is how
a handler tells them from the rest (:func:`fields_of`).

The levels: ``DEBUG`` for each request's detail, ``INFO`` for a verb's outcome, ``WARNING``
for a fault tried again and data refused. Nothing is logged per tick.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = [
    "BILLED_READS",
    "CHUNKS",
    "DB_COLLECTION",
    "DB_OPERATION",
    "DB_SYSTEM",
    "DOCUMENTS",
    "ERROR_TYPE",
    "FAULTS_RETRIED",
    "INDEX_READS",
    "MARKS_WRITTEN",
    "MODE",
    "QUERIES",
    "REFILLS",
    "ROUND_TRIPS",
    "SNAPSHOT_READS",
    "SYSTEMS",
    "TICKS_REJECTED",
    "TICKS_WRITTEN",
    "backend_fields",
    "error_type",
    "fields_of",
]

#: ``gcp.firestore`` (Native or Datastore mode), or ``tsstore.memory``.
DB_SYSTEM = "db.system.name"
DB_COLLECTION = "db.collection.name"
#: The verb, or the request a record is about.
DB_OPERATION = "db.operation.name"
#: ``native``, ``datastore`` or ``memory``.
MODE = "tsstore.mode"
CHUNKS = "tsstore.chunks"
QUERIES = "tsstore.queries"
ROUND_TRIPS = "tsstore.round_trips"
DOCUMENTS = "tsstore.documents"
BILLED_READS = "tsstore.billed_reads"
INDEX_READS = "tsstore.index_reads"
REFILLS = "tsstore.refills"
SNAPSHOT_READS = "tsstore.snapshot_reads"
TICKS_WRITTEN = "tsstore.ticks.written"
TICKS_REJECTED = "tsstore.ticks.rejected"
#: The calls (or writes) a record tries again after a fault or an overload.
FAULTS_RETRIED = "tsstore.faults.retried"
MARKS_WRITTEN = "tsstore.marks.written"
#: What went wrong: a gRPC status name (``UNAVAILABLE``) or an exception's class.
ERROR_TYPE = "error.type"

#: The systems of :data:`DB_SYSTEM`, by mode (the conventions name no value for Firestore:
#: ``gcp.firestore`` follows their ``gcp.spanner``; the memory database is tsstore's).
SYSTEMS = {"native": "gcp.firestore", "datastore": "gcp.firestore", "memory": "tsstore.memory"}


def backend_fields(mode: str, collection: str) -> dict[str, str]:
    """The fields naming ``collection`` of a database of ``mode`` (``native``, ``datastore``,
    ``memory``): what a store's backend says of itself in its records."""
    return {DB_SYSTEM: SYSTEMS[mode], MODE: mode, DB_COLLECTION: collection}


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of ``record``: its attributes whose names hold a dot, in the
    order they were given."""
    return {name: value for name, value in vars(record).items() if "." in name}



def error_type(exc: BaseException) -> str:
    """What went wrong, as a record's or a span's ``error.type``: the gRPC status's name
    (``UNAVAILABLE``), or the exception's class."""
    code = getattr(exc, "grpc_status_code", None)  # google.api_core's (not imported: commands start without gRPC)
    return str(code.name) if code is not None else type(exc).__name__
