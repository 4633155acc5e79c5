"""A sealed partition's Parquet bytes, and the checksum of its document ids.

The table is :meth:`~tsstore.store.TimeSeriesStore.query_table`'s (the timestamp first, then
the frame's columns, typed as there) with the document ids as one more column,
:data:`ID_COLUMN`; its rows are sorted by time, then id, and written with zstd in row groups
of :data:`ROW_GROUP_ROWS` (each with its column statistics, which readers prune by).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

#: The column holding each tick's document id (as Beam's reads name it).
ID_COLUMN = "document_id"
#: The rows of one row group: small enough for a reader to skip most of a day by time.
ROW_GROUP_ROWS = 100_000
#: How the pages are compressed.
COMPRESSION = "zstd"


def with_ids(table: pa.Table, ids: list[str]) -> pa.Table:
    """``table`` with ``ids`` (one per row, in its order) as the column :data:`ID_COLUMN`."""
    return table.append_column(ID_COLUMN, pa.array(ids, pa.string()))


def sorted_rows(table: pa.Table, *, timestamp_field: str) -> pa.Table:
    """``table``'s rows by time, then document id."""
    return table.sort_by([(timestamp_field, "ascending"), (ID_COLUMN, "ascending")])


def parquet_bytes(table: pa.Table, *, row_group_rows: int = ROW_GROUP_ROWS) -> bytes:
    """``table`` as a Parquet file: zstd, row groups of at most ``row_group_rows`` rows."""
    out = io.BytesIO()
    pq.write_table(table, out, compression=COMPRESSION, row_group_size=row_group_rows)
    return out.getvalue()


def id_hash(doc_id: str) -> int:
    """A 64-bit hash of one document id."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "big")


def id_checksum(ids: Iterable[str]) -> str:
    """The checksum of a set of document ids, whatever their order: the xor of each id's
    64-bit hash, as 16 hex digits (a partition read again at another time with the same
    ticks has the same one; one tick more, less or another has another)."""
    total = 0
    for doc_id in ids:
        total ^= id_hash(doc_id)
    return f"{total:016x}"
