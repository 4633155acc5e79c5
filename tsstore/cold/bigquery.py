"""BigQuery over a sealed tier in Cloud Storage: an external table over the objects the
manifest names now, and a load of the same objects into a table of BigQuery's own.

Both name every object (never a wildcard): a partition's folder can also hold an object no
manifest names (left by a kill, or by a sealer that lost) and the superseded generation of
a partition sealed again, which no reader may see. The hive ``date`` column comes from the
objects' names (``<collection>/date=YYYY-MM-DD/part-<generation>.parquet``). Plain text; BigQuery
runs nothing here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tsstore.errors import QueryError

#: A table BigQuery's DDL and ``bq`` both take: ``dataset.table`` or ``project.dataset.table``
#: (a project id of 6 to 30 lowercase letters, digits and hyphens; a dataset of letters, digits
#: and underscores; a table of letters, digits, underscores and hyphens).
_TABLE = re.compile(r"^(?:(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])\.)?(?P<dataset>\w+)\.(?P<table>[\w-]+)$", re.ASCII)


#: A column name BigQuery's Parquet loads and external tables take (without flexible column names).
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class BigQueryRecipe:
    """How BigQuery reads a series' sealed partitions: an external table over the objects
    the manifest names now (``external_table``, one GoogleSQL statement), or a load of them into
    a table of BigQuery's own (``load``, one ``bq`` command)."""

    #: The table both make (``dataset.table`` or ``project.dataset.table``).
    table: str
    #: The objects both read: the manifest's current generation of every sealed partition.
    uris: tuple[str, ...]
    #: The folder the hive ``date=`` parts follow (``gs://bucket/prefix/<collection>``).
    prefix: str
    #: The declared fields whose names BigQuery's Parquet reads do not take as column names
    #: (letters, digits and underscores, not first a digit), unless the project has its
    #: flexible column names: ``price.micros`` is a column of that name in the objects.
    unnamed: tuple[str, ...]
    #: ``CREATE OR REPLACE EXTERNAL TABLE ...``: run in BigQuery (the console, ``bq query``).
    external_table: str
    #: ``bq load --replace --source_format=PARQUET ...``: run in a shell with the Cloud SDK; the
    #: table's rows are replaced by the objects' (a load again after a seal holds each tick once).
    load: str

    def describe(self) -> str:
        """The statement, then the command, each under a line saying what it is (and first,
        the columns BigQuery does not take by their names)."""
        warned = ""
        if self.unnamed:
            warned = (f"-- BigQuery takes column names of letters, digits and underscores only (unless the project "
                      f"has flexible column names): {', '.join(self.unnamed)} will not read\n")  # fmt: skip
        return (f"{warned}-- an external table over the {len(self.uris)} sealed partition(s) (run in BigQuery):\n"
                f"{self.external_table}\n\n"
                f"-- or a load of the same objects into a table of BigQuery's own (run in a shell):\n"
                f"{self.load}")  # fmt: skip


def bigquery_table(table: object) -> str:
    """``table`` as ``bq`` names it (``dataset.table`` or ``project:dataset.table``), checked
    as a BigQuery table name (``dataset.table`` or ``project.dataset.table``); else a
    :class:`~tsstore.errors.QueryError` naming it."""
    found = _TABLE.match(table) if isinstance(table, str) else None
    if found is None:
        raise QueryError(f"cold_bigquery: table {table!r} is not allowed; give DATASET.TABLE or PROJECT.DATASET.TABLE "
                         "(a dataset of letters, digits and underscores)")  # fmt: skip
    project = found["project"]
    return f"{project + ':' if project else ''}{found['dataset']}.{found['table']}"


def bigquery_recipe(table: str, uris: Sequence[str], *, prefix: str, fields: Iterable[str] = ()) -> BigQueryRecipe:
    """The recipe for ``table`` over the Parquet objects at ``uris`` (``gs://`` URLs under
    ``prefix``, each in a ``date=YYYY-MM-DD`` folder) whose columns include ``fields``."""
    target = bigquery_table(table)
    unnamed = tuple(dict.fromkeys(name for name in fields if _COLUMN.match(name) is None))
    stray = [uri for uri in uris if not uri.startswith(prefix + "/date=")]
    if not prefix.startswith("gs://") or stray:
        raise QueryError(f"cold_bigquery: BigQuery reads gs:// objects in date= folders under {prefix!r}, not "
                         f"{stray[:1] or prefix!r}")  # fmt: skip
    if not uris:
        nothing = f"no partition under {prefix} is sealed yet: nothing to read"
        return BigQueryRecipe(table, (), prefix, unnamed, f"-- {nothing}", f"# {nothing}")
    listed = ",\n".join(f"    {_sql_text(uri)}" for uri in uris)
    statement = (f"CREATE OR REPLACE EXTERNAL TABLE `{table}`\nWITH PARTITION COLUMNS (date DATE)\nOPTIONS (\n"
                 f"  format = 'PARQUET',\n  hive_partition_uri_prefix = {_sql_text(prefix)},\n"
                 f"  uris = [\n{listed}\n  ]\n);")  # fmt: skip
    load = " \\\n  ".join([
        "bq load --replace --source_format=PARQUET --hive_partitioning_mode=CUSTOM",
        f"--hive_partitioning_source_uri_prefix={shlex.quote(prefix + '/{date:DATE}')}",
        shlex.quote(target),
        shlex.quote(",".join(uris)),
    ])  # fmt: skip
    return BigQueryRecipe(table, tuple(uris), prefix, unnamed, statement, load)


def _sql_text(value: str) -> str:
    """``value`` as a GoogleSQL string literal (single quotes; a quote or backslash escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
