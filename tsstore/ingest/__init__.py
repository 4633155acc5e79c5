"""Load ticks from CSV, JSON Lines or Parquet files into a store, resumably.

Every row is parsed and coerced on its own: a bad row is rejected with its line number and
reason and never holds back the good ones. Rows go through the store's writer, whose ids
(with ``key_fields``) come from series key, time and, where needed, content and the row's
repeat number in the file (:mod:`tsstore.write.identity`), so writing a row again finds it
already present. A checkpoint file records the last line up to which every row is done
(stored or rejected) and how many rows before it went to the writer; a re-run after an
interruption skips those lines (counting their repeats as before) and reports them, and
rows after the checkpoint that an earlier run stored are found and reported as already
present, never stored twice.

Reading is chunked (CSV and JSON Lines line by line, Parquet by record batches), so memory
stays bounded whatever the file's size.

:mod:`~tsstore.ingest.run` is one ingest, :mod:`~tsstore.ingest.checkpoint` where a re-run
resumes; the rows are read, parsed and rejected by :mod:`tsstore.rows`, which knows no store
(Apache Beam's transforms read files with it too).
"""

from __future__ import annotations

from tsstore.errors import IngestError
from tsstore.ingest.checkpoint import default_checkpoint
from tsstore.ingest.run import IngestSummary, ingest_file
from tsstore.rows.parse import DEFAULT_MAX_FIELD_BYTES
from tsstore.rows.readers import FORMATS, detect_format
from tsstore.rows.rejects import Rejected, write_rejects

__all__ = [
    "DEFAULT_MAX_FIELD_BYTES",
    "FORMATS",
    "IngestError",
    "IngestSummary",
    "Rejected",
    "default_checkpoint",
    "detect_format",
    "ingest_file",
    "write_rejects",
]
