"""What several test modules share: the oracles (answers computed without tsstore's read
path: sorting, pandas, Arrow) and the data sets they are checked on, so that no test module
imports another."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from tsstore import QueryShape, SeriesSpec, Tick, shards_for
from tsstore.dswire import is_datastore_client
from tsstore.asks import DocAsk
from tsstore.databases import document_answers
from tsstore.memory import MemoryDatabase, Query
from tsstore.memory.database import Write
from tsstore.ticks import sort_key

UTC = dt.timezone.utc


# ------------------------------------------------------------ ticks, and their order by brute force

PAGES = 3  # pages followed per case, two cursors (the emulator scans the collection once per `in` value)
SHARDS = [f"s{i:02d}" for i in range(40)]  # 2 chunks of 20; 4 of 10 with an `in` of 3
SPEC = SeriesSpec("skew", shards=SHARDS, shapes=[QueryShape("symbol", ("desc", "asc"))], key_fields=["symbol", "n"])
# The emulator scans the collection for every query (once per `in` value), so the skewed data
# is small: 360 ticks in 60 ms (~6 share each ms); HOT is drawn twice as often as the others,
# so it has ~120 ticks (a page of 100 HOT ticks still fits) and the others ~60 each.
TICKS, MILLISECONDS = 360, 60


def skewed_rows() -> list[dict[str, Any]]:
    """The skewed ticks: HOT in one shard value, TWO in two, the rest anywhere; about six share
    each millisecond."""
    rng = random.Random(3)
    base = dt.datetime(2024, 1, 2, 9, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    for n in range(TICKS):
        symbol = rng.choice(["AAA", "BBB", "CCC", "HOT", "HOT", "TWO"])
        row: dict[str, Any] = {
            "symbol": symbol,
            "n": n,
            "timestamp": base + dt.timedelta(milliseconds=rng.randrange(MILLISECONDS)),
        }
        if symbol == "HOT":
            row["shard"] = "s07"  # every HOT tick in one shard: one chunk holds them all
        elif symbol == "TWO":
            row["shard"] = rng.choice(["s03", "s31"])  # two chunks, the rest run dry at once
        rows.append(row)
    return rows


def brute_force(ticks: list[Tick], symbols: list[str] | None, descending: bool) -> list[Tick]:
    kept = [t for t in ticks if symbols is None or t.data["symbol"] in symbols]
    return sorted(kept, key=sort_key, reverse=descending)


# ----------------------------------------------------------------- series, and bars from pandas

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SYMBOLS = ["AAA", "BBB", "CCC", "DDD"]


def spec(collection: str, shards: int, **options: Any) -> SeriesSpec:
    return SeriesSpec(
        collection,
        shards=shards_for(shards * 500),
        shapes=[QueryShape("symbol", ("desc", "asc")), QueryShape("exchange"), QueryShape(("exchange", "symbol"))],
        key_fields=["symbol", "n"],
        measures=["price.micros", "volume"],
        **options,
    )


def ticks(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row: dict[str, Any] = {
            "symbol": rng.choice(SYMBOLS),
            "exchange": rng.choice(["X1", "X2"]),
            "n": i,
            "timestamp": T0 + dt.timedelta(seconds=rng.randrange(7200)),
            "price": {"micros": rng.randrange(10**11, 10**12)},  # sums beyond 2**53: exact only as integers
            "volume": rng.randrange(1, 50) * 100,
        }
        if i % 17 == 0:
            del row["volume"]  # a tick without the measure: counted, but not in its sum or average
        rows.append(row)
    return rows


def oracle_bars(rows: list[dict[str, Any]], ids: tuple[str, ...], interval: str, start: Any, end: Any) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "symbol": [r["symbol"] for r in rows],
            "id": list(ids),
            "timestamp": pd.DatetimeIndex([r["timestamp"] for r in rows]),
            "price": [r["price"]["micros"] for r in rows],
            "volume": [r.get("volume", 0) for r in rows],
        }
    )
    frame = frame[(frame["timestamp"] >= start) & (frame["timestamp"] < end)]
    frame = frame.sort_values(["timestamp", "id"]).set_index("timestamp")  # the engine's order
    grouped = frame.groupby("symbol")
    ohlc = grouped["price"].resample(interval).ohlc()
    ohlc["count"] = grouped["price"].resample(interval).count()
    ohlc["volume"] = grouped["volume"].resample(interval).sum()
    return ohlc[ohlc["count"] > 0]  # resample fills empty intervals; bars leave them out


# ------------------------------------------------------------------------- frames, from Arrow

def arrow_of(frame: pd.DataFrame) -> pa.Table:
    """What Arrow makes of a frame, its time index as the first column (pandas' metadata left
    out; pyarrow 25 reads a zoned column through ``Series.values``, which pandas 3.1 warns of)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.Pandas4Warning)
        return pa.Table.from_pandas(frame.reset_index(), preserve_index=False).replace_schema_metadata(None)


# ------------------------------------------------------------------- documents Firestore refuses

def too_deep() -> dict[str, Any]:
    """21 nested maps: one more than Firestore stores (the writer's validation refuses it
    too; these tests go below that validation on purpose)."""
    deep: dict[str, Any] = {"v": 1}
    for _ in range(20):
        deep = {"d": deep}
    return {"deep": deep}


# --------------------------------------------------------------- declarations the CLI tests write

#: A declaration file of one series, ``plain``: no roll-up, no retired shard values (the CLI's
#: census tests write it as plain.toml).
PLAIN = """
[[series]]
collection = "plain"
key_fields = ["symbol"]
columns = { symbol = "string", "price.micros" = "Int64" }
shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }]
"""


# ------------------------------------------------------------------------- the database modes

#: Firestore in Native mode and in Datastore mode, each on its session emulator: what a test
#: that needs the emulator itself (a command, a live listener, an asyncio client) runs on.
EMULATOR_MODES = ("native", "datastore")

#: Both emulator modes and the memory database (:class:`~tsstore.memory.MemoryDatabase`):
#: what an oracle test runs on, the same answers expected of each. The emulator modes carry
#: the ``emulator`` mark, the memory one the ``memory`` mark (and never the emulator's: a run
#: of ``-m "not emulator"`` keeps it, and ``uses_emulator`` does not mark it).
MODES = (
    pytest.param("native", marks=pytest.mark.emulator),
    pytest.param("datastore", marks=pytest.mark.emulator),
    pytest.param("memory", marks=pytest.mark.memory),
)
#: Each of :data:`MODES`, for a test that runs on some of them (``parametrize("mode", [NATIVE, MEMORY])``).
NATIVE, DATASTORE, MEMORY = MODES


def mode_client(request: Any, mode: str, database: str) -> Any:
    """A client of ``mode`` on its session emulator (``emulator`` or ``datastore_emulator``),
    on ``database``: a ``firestore.Client`` or a ``datastore.Client``; for ``memory`` a new,
    empty :class:`~tsstore.memory.MemoryDatabase` (``database`` names nothing there)."""
    if mode == "memory":
        return MemoryDatabase()
    if mode == "native":
        return request.getfixturevalue("emulator").client(database=database)
    return request.getfixturevalue("datastore_emulator").datastore_client(database=database)


def answers_of(client: Any) -> Callable[[DocAsk], Any]:
    """How document asks are answered on a client :func:`mode_client` made (one attempt each),
    as its mode answers them (:func:`tsstore.databases.document_answers`)."""
    return document_answers(client)


def cli_env(request: Any, mode: str) -> dict[str, str]:
    """The environment that points ``tsstore`` commands at the session emulator of ``mode``."""
    if mode == "native":
        return {"FIRESTORE_EMULATOR_HOST": request.getfixturevalue("emulator").address}
    return {"DATASTORE_EMULATOR_HOST": request.getfixturevalue("datastore_emulator").address, "TSSTORE_MODE": mode}


def database_of(store: Any) -> str:
    """The database id a store's client is on, in either mode."""
    client = store.client
    return str(client.database if is_datastore_client(client) else client._database)


@contextlib.asynccontextmanager
async def async_twin(store: Any, request: Any) -> AsyncIterator[Any]:
    """The client an async store on ``store``'s database takes: a ``firestore.AsyncClient``
    on the session emulator (closed afterwards), or in Datastore mode the store's own
    ``datastore.Client`` (there is no asyncio one), or the store's own memory database."""
    if is_datastore_client(store.client) or isinstance(store.client, MemoryDatabase):
        yield store.client
        return
    client = request.getfixturevalue("emulator").async_client(database=store.client._database)
    try:
        yield client
    finally:
        client.close()


def stored_ids(client: Any, collection: str) -> list[str]:
    """The ids of every document of ``collection``, read by the client's own public API in
    either mode (keys only: no tsstore code in between), or the memory database's own."""
    if isinstance(client, MemoryDatabase):
        return [found.id for found in client.run(Query(collection, select=()))[0]]
    if hasattr(client, "collection"):
        return [doc.id for doc in client.collection(collection).select([]).stream()]
    query = client.query(kind=collection)
    query.keys_only()
    return [entity.key.name for entity in query.fetch()]


def stored_docs(client: Any, collection: str) -> dict[str, dict[str, Any]]:
    """The documents of ``collection`` (a path: ``counters/likes/shards``) by id, read by the
    client's own public API in either mode (in Datastore mode, the entities of the path's kind
    under its parent key), or the memory database's own."""
    if isinstance(client, MemoryDatabase):
        return {found.id: found.data for found in client.run(Query(collection))[0]}
    if hasattr(client, "collection"):
        return {doc.id: doc.to_dict() for doc in client.collection(collection).stream()}
    *parent, kind = collection.split("/")
    query = client.query(kind=kind, ancestor=client.key(*parent) if parent else None)
    return {entity.key.name: dict(entity) for entity in query.fetch() if entity.key.parent == query.ancestor}


def stored_doc(client: Any, path: str) -> dict[str, Any] | None:
    """The document at ``path``, or ``None``, read by the client's own public API in either
    mode, or the memory database's own."""
    if isinstance(client, MemoryDatabase):
        found = client.get(path)[0]
        return found.data if found is not None else None
    if hasattr(client, "document"):
        snapshot = client.document(path).get()
        return snapshot.to_dict() if snapshot.exists else None
    entity = client.get(client.key(*path.split("/")))
    return dict(entity) if entity is not None else None


def put_doc(client: Any, path: str, data: dict[str, Any]) -> None:
    """Write ``data`` over the document at ``path``, by the client's own public API in either
    mode, or the memory database's own."""
    if isinstance(client, MemoryDatabase):
        client.commit([Write(path, data)])
        return
    if hasattr(client, "document"):
        client.document(path).set(data)
        return
    entity = client.entity(client.key(*path.split("/")))
    entity.update(data)
    client.put(entity)


def delete_doc(client: Any, path: str) -> None:
    """Delete the document at ``path``, by the client's own public API in either mode, or the
    memory database's own."""
    if isinstance(client, MemoryDatabase):
        client.commit([Write(path, None)])
    elif hasattr(client, "document"):
        client.document(path).delete()
    else:
        client.delete(client.key(*path.split("/")))


#: A tick file of every kind of malformed row (the demo's columns), each with the reason ingest
#: gives for it: ``tsstore ingest`` and Beam's backfill reject alike.
HEADER = "timestamp,symbol,exchange,instrumentType,price.currency,price.micros,volume,note"


def good(i: int) -> str:
    return f"2019-01-02T09:00:{i:02d}.000001+00:00,SYM{i},EXCHG1,commonstock,USD,{1000 + i},100,"


MALFORMED = [
    (HEADER, None),
    (good(1), None),
    ("yesterday noon,AAA,EXCHG1,commonstock,USD,1,1,", "column 'timestamp': 'yesterday noon' is not an ISO-8601 time"),
    (",AAA,EXCHG1,commonstock,USD,1,1,", "timestamp 'timestamp' is missing"),
    (
        "2019-01-02T09:00:00,AAA,EXCHG1,commonstock,USD,1,1,",
        "has no timezone; give an offset or choose a timezone policy",
    ),
    (good(2), None),
    (
        "2019-01-02T09:00:03+00:00,AAA,EXCHG1,commonstock,USD,12.5.1,1,",
        "column 'price.micros': '12.5.1' is not an integer",
    ),
    ("2019-01-02T09:00:04+00:00,AAA,EXCHG1,commonstock,USD,1,1,hello", "unknown column 'note' has a value (strict"),
    ("", "empty line"),
    ("2019-01-02T09:00:05+00:00,AAA,EXCHG1,commonstock,USD,1", "has 6 fields, the header has 8"),
    (
        "2019-01-02T09:00:06+00:00," + "X" * 2000 + ",EXCHG1,commonstock,USD,1,1,",
        "column 'symbol' is 2000 bytes; at most 1500",
    ),
    ("2019-01-02T09:00:07+00:00,B\udcffD,EXCHG1,commonstock,USD,1,1,", "invalid UTF-8"),
    (HEADER, "repeated header row"),
    ("2019-01-02T09:00:08.1234567+00:00,AAA,EXCHG1,commonstock,USD,1,1,", "has sub-microsecond digits"),
    ("2019-01-02T09:00:09+00:00,AAA,EXCHG1,commonstock,USD,1,1,,", "has 9 fields, the header has 8"),
    (good(3), None),
    (good(4), None),
]


def write_malformed(path: Path) -> None:
    text = "\n".join(line for line, _ in MALFORMED) + "\n"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
