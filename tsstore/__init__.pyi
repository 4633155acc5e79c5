"""What ``import tsstore`` offers: each name is imported from its module on first use (see
``__init__.py``), and type checkers read the names from here."""

from .access import ClientAccess
from .aio import AsyncTimeSeriesStore
from .analytics.aggregate import Aggregates
from .analytics.rollup import Rollup, RollupResult
from .counters import CounterValue, ShardedCounter
from .declaration import load_declaration
from .errors import (
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
    UsageError,
    WriteError,
    WriteFailure,
)
from .layout.capacity import Capacity, Prices, capacity_for
from .layout.census import ShardCensus
from .read.plan import QueryPlan, plan_query
from .read.query import Query
from .results import PurgeResult, ReshardResult, WriteResult
from .spec import Direction, QueryShape, RetiredShard, SeriesSpec, shards_for
from .store import TimeSeriesStore
from .ticks import Page, Tick
from .wire import quick_reconnects
from .write.options import WriteOptions

# Earlier names, kept so that existing imports keep working ("plan" now means a query plan only).
plan_shards = shards_for
plan_capacity = capacity_for
CapacityPlan = Capacity

__version__: str

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
    "UsageError",
    "WriteError",
    "WriteFailure",
    "WriteOptions",
    "WriteResult",
    "plan_query",
    "shards_for",
    "quick_reconnects",
]
