"""tsstore: high-rate time series in Google Cloud Firestore with sharded timestamps."""

from __future__ import annotations

from importlib import metadata as _metadata

from tsstore.access import ClientAccess
from tsstore.aio import AsyncTimeSeriesStore
from tsstore.analytics.aggregate import Aggregates
from tsstore.analytics.rollup import Rollup, RollupResult
from tsstore.counters import CounterValue, ShardedCounter
from tsstore.declaration import load_declaration
from tsstore.errors import (
    ConfigError,
    CounterError,
    CursorError,
    EmulatorError,
    FaultError,
    IngestError,
    Interrupted,
    LiveError,
    OptionError,
    PlotError,
    QueryError,
    RecordError,
    RetentionError,
    RetentionWarning,
    SchemaError,
    SnapshotExpiredError,
    SpecError,
    TsstoreError,
    UndeclaredShardsWarning,
    WriteError,
    WriteFailure,
)
from tsstore.layout.capacity import Capacity, Prices, capacity_for
from tsstore.layout.census import ShardCensus
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.read.query import Query
from tsstore.results import PurgeResult, ReshardResult, WriteResult
from tsstore.spec import Direction, QueryShape, RetiredShard, SeriesSpec, shards_for
from tsstore.store import TimeSeriesStore
from tsstore.ticks import Page, Tick
from tsstore.wire import quick_reconnects
from tsstore.write.options import WriteOptions

# Earlier names, kept so that existing imports keep working ("plan" now means a query plan only).
plan_shards = shards_for
plan_capacity = capacity_for
CapacityPlan = Capacity

try:
    __version__ = _metadata.version("tsstore")  # the installed distribution's, one source: pyproject.toml
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "Aggregates",
    "AsyncTimeSeriesStore",
    "Capacity",
    "Prices",
    "ReshardResult",
    "Rollup",
    "RollupResult",
    "RetiredShard",
    "ShardCensus",
    "UndeclaredShardsWarning",
    "capacity_for",
    "load_declaration",
    "ClientAccess",
    "ConfigError",
    "CounterError",
    "CounterValue",
    "PurgeResult",
    "ShardedCounter",
    "CursorError",
    "Direction",
    "EmulatorError",
    "IngestError",
    "Interrupted",
    "LiveError",
    "OptionError",
    "PlotError",
    "Page",
    "Query",
    "QueryError",
    "QueryPlan",
    "QueryShape",
    "RecordError",
    "RetentionError",
    "RetentionWarning",
    "SchemaError",
    "SeriesSpec",
    "FaultError",
    "SnapshotExpiredError",
    "SpecError",
    "Tick",
    "TimeSeriesStore",
    "TsstoreError",
    "WriteError",
    "WriteFailure",
    "WriteOptions",
    "WriteResult",
    "plan_query",
    "shards_for",
    "quick_reconnects",
]
