"""What ``import tsstore`` offers: each name is imported from its module on first use (see
``__init__.py``), and type checkers read the names from here."""

from .access import ClientAccess
from .aio import AsyncTimeSeriesStore
from .analytics.aggregate import Aggregates
from .analytics.bars import Bar
from .analytics.covered import CoveredPlan
from .analytics.rollup import Rollup, RollupResult, VerifyResult
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
    ModeError,
    OptionError,
    PlotError,
    QueryError,
    RecordError,
    RetentionError,
    RetentionWarning,
    RulesError,
    SchemaError,
    SnapshotExpiredError,
    SpecError,
    StateError,
    TsstoreError,
    UndeclaredShardsWarning,
    UsageError,
    WriteError,
    WriteFailure,
)
from .cold.bigquery import BigQueryRecipe
from .cold.checks import ColdStatus, ColdVerifyResult, PartitionCheck
from .cold.manifest import SealedPartition, SealResult
from .cold_tier import ColdTier
from .frames import ticks_to_frame
from .late import LatePolicy
from .layout.capacity import Capacity, capacity_for
from .layout.census import ShardCensus, ShardCount
from .live.aio import AsyncLive
from .live.listen import LiveTail, LiveWatch
from .live.state import TailTick, WindowUpdate
from .read.cost import ReadStats
from .read.explain import Explanation
from .read.plan import QueryPlan, plan_query
from .read.query import Query, Where
from .prices import Prices, ReadCost, prices_for
from .results import PurgeResult, ReshardResult, WriteResult
from .spec import Direction, DuplicatePolicy, QueryShape, RetiredShard, SeriesSpec, shards_for
from .store import TimeSeriesStore
from .ticks import Page, Tick
from .times import DurationLike, TimeLike, ZoneLike
from .verbs.declare import AsyncTickStream, TickStream
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
    "ReadCost",
    "prices_for",
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
    "SealResult",
    "SealedPartition",
    "ColdTier",
    "ColdVerifyResult",
    "PartitionCheck",
    "ColdStatus",
    "BigQueryRecipe",
    "ShardedCounter",
    "CursorError",
    "Direction",
    "EmulatorError",
    "IngestError",
    "Interrupted",
    "LiveError",
    "ModeError",
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
    "RulesError",
    "SchemaError",
    "SeriesSpec",
    "FaultError",
    "SnapshotExpiredError",
    "SpecError",
    "StateError",
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
    "ticks_to_frame",
    "quick_reconnects",
    "AsyncLive",
    "AsyncTickStream",
    "Bar",
    "CoveredPlan",
    "DuplicatePolicy",
    "DurationLike",
    "Explanation",
    "LatePolicy",
    "LiveTail",
    "LiveWatch",
    "ReadStats",
    "ShardCount",
    "TailTick",
    "TickStream",
    "TimeLike",
    "VerifyResult",
    "Where",
    "WindowUpdate",
    "ZoneLike",
]
