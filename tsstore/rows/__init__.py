"""Tick files row by row: the file formats (:mod:`~tsstore.rows.readers`: CSV, JSON Lines and
Parquet, told apart), one row's cells into a record (:mod:`~tsstore.rows.parse`) and the rows
that are rejected (:mod:`~tsstore.rows.rejects`, and the reject file). Pure: no store; what
loads the records into one is :func:`tsstore.ingest.ingest_file` (and, on Apache Beam,
:class:`tsstore.beam.ReadTickFiles`).
"""
