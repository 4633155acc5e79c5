"""As-of joins (``store.asof``, ``store.iter_asof``) against ``pandas.merge_asof`` on the same ticks.

The oracle is pandas: ``merge_asof(left, right, on=time, by=..., direction=..., tolerance=...,
allow_exact_matches=...)`` with both sides sorted as the read engine orders them (timestamp,
then document id), so among right ticks at one time ``backward`` takes the last,
``forward`` the first, and ``nearest`` ties go backward, as pandas does.

- Pure (no Firestore): :class:`AsofJoiner` fed by :func:`merged` equals the oracle on a
  hand-made tie-dense case in every mode (3 directions x exact or not x tolerance ``None``,
  0, 2 s x ``by`` none, one key, two keys one of them nested), then a hypothesis property on
  random ticks crowded into few seconds (ties within each side and across the sides);
  :func:`amerged` gives :func:`merged`'s stream; memory: with a tolerance, forward and
  nearest joins hold at most the left ticks of one tolerance window, backward joins nothing.
- On the emulator: trades written twice (3 and 40 shard values, explicit shards so one
  timestamp spreads over both chunks), quotes in another collection (3 shards, timestamp
  field ``time``), on 100 ms slots with deliberate tie groups. ``store.asof`` in every
  direction, with and without ``tolerance`` and ``by``, ``allow_exact_matches=False``, left
  ranges that make the right range default, and a same-collection join: each equal to the
  oracle on ``query_frame`` results (left ``n`` in order, the matched right ids, times and a
  value column), and by default the very frame ``merge_asof`` makes of them (the ``by`` fields
  once, no ids). ``iter_asof`` gives the frame's rows, the async store the same frame, and
  with a tolerance the right read costs one tolerance window, not the right collection;
  projected ``columns`` keep the ``by`` fields and the match's time under ``right.time``;
  ``tsstore asof`` prints the join. Pure: :func:`~tsstore.ticks.without_paths` drops the ``by`` fields from a match.
- Refusals: one :class:`QueryError` naming the bad value.

Also: a tolerance that is no finite duration (nan, inf, 1e20, ``"NaT"``) is a QueryError naming
it, a join without any match keeps its ``right.*`` columns, and a join's ``stats.chunks`` counts
the chunks of both reads.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import itertools
import random
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli import tsstore
from tests.shared import EMULATOR_MODES, MODES, async_twin, mode_client
from tsstore import AsyncTimeSeriesStore, QueryError, QueryShape, SeriesSpec, TimeSeriesStore
from tsstore.analytics.asof import DIRECTIONS, LEFT, RIGHT, AsofJoiner, amerged, merged, priority
from tsstore.pytest_plugin import unique_database_id
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.ticks import Tick, without_paths
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

UTC = dt.timezone.utc
T0 = dt.datetime(2025, 6, 2, 14, 30, tzinfo=UTC)
SEC = dt.timedelta(seconds=1)
BYS: list[tuple[str, ...]] = [(), ("sym",), ("sym", "venue.code")]
TOLERANCES: list[dt.timedelta | None] = [None, dt.timedelta(0), 2 * SEC]
FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own


# ------------------------------------------------------------------------------ the oracle (pure)


def tick(side: str, i: int, second: int, sym: str, venue: str = "V1") -> Tick:
    """A tick at ``T0 + second``; ids sort by side and number (``l007``, ``r012``)."""
    at = T0 + second * SEC
    return Tick(f"{side}{i:03d}", at, {"sym": sym, "venue": {"code": venue}, "timestamp": at})


def in_read_order(ticks: Iterable[Tick]) -> list[Tick]:
    return sorted(ticks, key=lambda t: (t.timestamp, t.id))


def oracle(
    left: Sequence[Tick],
    right: Sequence[Tick],
    *,
    direction: str,
    by: Sequence[str],
    tolerance: dt.timedelta | None,
    allow_exact_matches: bool,
) -> list[tuple[str, str | None]]:
    """(left id, matched right id or None) in left order, by ``pandas.merge_asof``."""

    def frame(ticks: Sequence[Tick], name: str) -> pd.DataFrame:
        times = pd.to_datetime([t.timestamp for t in ticks], utc=True).as_unit("us")
        columns: dict[str, Any] = {"t": times, name: [t.id for t in ticks]}
        for field in by:
            columns[field] = [t.data["venue"]["code"] if field == "venue.code" else t.data[field] for t in ticks]
        return pd.DataFrame(columns)

    if not right:  # nothing to match (and no dtype pandas would infer for an empty by column)
        return [(t.id, None) for t in left]
    options: dict[str, Any] = {"direction": direction, "allow_exact_matches": allow_exact_matches}
    if by:
        options["by"] = list(by)
    if tolerance is not None:
        options["tolerance"] = pd.Timedelta(tolerance)
    joined = pd.merge_asof(frame(left, "lid"), frame(right, "rid"), on="t", **options)
    return [(lid, None if pd.isna(rid) else rid) for lid, rid in zip(joined["lid"], joined["rid"])]


def join(
    left: Sequence[Tick],
    right: Sequence[Tick],
    *,
    direction: Any,
    by: Sequence[str],
    tolerance: dt.timedelta | None,
    allow_exact_matches: bool,
) -> list[tuple[str, str | None]]:
    joiner = AsofJoiner(direction, by, tolerance, allow_exact_matches)
    pairs = []
    for side, item in merged(left, right, priority(direction, allow_exact_matches)):
        pairs.extend(joiner.add(side, item))
    pairs.extend(joiner.rest())
    return [(a.id, None if b is None else b.id) for a, b in pairs]


def tie_dense() -> tuple[list[Tick], list[Tick]]:
    """Hand-made ticks: both sides at the same seconds, several right ticks of one series at
    one second, gaps of exactly the tolerance (2 s), left ticks equidistant from two right
    ticks (nearest ties), a series only on one side, and left ticks before any right tick."""
    left_at = [(0, "A"), (1, "A"), (1, "A"), (2, "B"), (3, "A"), (3, "B"), (3, "A"), (5, "A"), (6, "B"), (7, "A"),
               (9, "A"), (9, "B"), (9, "C"), (11, "A"), (14, "B"), (20, "A"), (20, "A")]  # fmt: skip
    right_at = [(1, "A"), (1, "A"), (1, "B"), (3, "A"), (3, "A"), (3, "A"), (5, "B"), (7, "A"), (7, "B"), (9, "A"),
                (9, "A"), (12, "B"), (13, "A"), (16, "B"), (18, "A")]  # fmt: skip
    venues = ["V1", "V2"]
    left = [tick("l", i, s, sym, venues[i % 2 if sym == "A" else 0]) for i, (s, sym) in enumerate(left_at)]
    right = [tick("r", i, s, sym, venues[(i // 2) % 2 if sym == "A" else 0]) for i, (s, sym) in enumerate(right_at)]
    return in_read_order(left), in_read_order(right)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_joiner_equals_merge_asof_in_every_mode_on_dense_ties(direction: str) -> None:
    left, right = tie_dense()
    matched: set[tuple[str, str]] = set()
    for exact, tolerance, by in itertools.product([True, False], TOLERANCES, BYS):
        mode: dict[str, Any] = {"direction": direction, "by": by, "tolerance": tolerance, "allow_exact_matches": exact}
        want = oracle(left, right, **mode)
        assert join(left, right, **mode) == want, mode
        matched |= {(a, b) for a, b in want if b is not None}
    # the case is as dense as promised: matches at exact times, several right ticks at one time
    at = {t.id: t.timestamp for t in [*left, *right]}
    assert any(at[a] == at[b] for a, b in matched) and any(at[a] != at[b] for a, b in matched)
    assert len([t for t in right if t.timestamp == T0 + 3 * SEC and t.data["sym"] == "A"]) == 3


def test_ties_go_the_pandas_way() -> None:
    """Three right ticks at one time: backward takes the last (greatest id), forward the first;
    nearest takes the backward one when both are as near."""
    right = in_read_order([tick("r", 2, 5, "A"), tick("r", 0, 5, "A"), tick("r", 1, 5, "A"), tick("r", 3, 9, "A")])
    left = [tick("l", 0, 5, "A"), tick("l", 1, 7, "A")]
    plain: dict[str, Any] = {"by": (), "tolerance": None, "allow_exact_matches": True}
    assert join(left, right, direction="backward", **plain) == [("l000", "r002"), ("l001", "r002")]
    assert join(left, right, direction="forward", **plain) == [("l000", "r000"), ("l001", "r003")]
    assert join(left, right, direction="nearest", **plain) == [("l000", "r002"), ("l001", "r002")]
    inexact: dict[str, Any] = {**plain, "allow_exact_matches": False}
    assert join(left, right, direction="forward", **inexact) == [("l000", "r003"), ("l001", "r003")]
    assert join(left, right, direction="backward", **inexact) == [("l000", None), ("l001", "r002")]


sides = st.lists(st.tuples(st.integers(0, 12), st.sampled_from("AB"), st.sampled_from(["V1", "V2"])), max_size=30)


@pytest.mark.parametrize("direction", DIRECTIONS)
@settings(max_examples=60, deadline=None)
@given(
    left_at=sides.filter(bool),
    right_at=sides,
    exact=st.booleans(),
    tolerance=st.sampled_from(TOLERANCES),
    by=st.sampled_from(BYS),
)
def test_the_joiner_equals_merge_asof_on_random_ties(
    direction: str,
    left_at: list[tuple[int, str, str]],
    right_at: list[tuple[int, str, str]],
    exact: bool,
    tolerance: dt.timedelta | None,
    by: tuple[str, ...],
) -> None:
    left = in_read_order(tick("l", i, *at) for i, at in enumerate(left_at))
    right = in_read_order(tick("r", i, *at) for i, at in enumerate(right_at))
    mode: dict[str, Any] = {"direction": direction, "by": by, "tolerance": tolerance, "allow_exact_matches": exact}
    got = join(left, right, **mode)
    assert [lid for lid, _ in got] == [t.id for t in left]  # each left tick once, in its order
    assert got == oracle(left, right, **mode)


async def aiter_of(ticks: Sequence[Tick]) -> AsyncIterator[Tick]:
    for item in ticks:
        await asyncio.sleep(0)
        yield item


@pytest.mark.parametrize("ranks", [(0, 1), (1, 0)])
def test_amerged_streams_what_merged_streams(ranks: tuple[int, int]) -> None:
    rng = random.Random(11)
    for _ in range(30):
        left = in_read_order(tick("l", i, rng.randrange(8), "A") for i in range(rng.randrange(20)))
        right = in_read_order(tick("r", i, rng.randrange(8), "A") for i in range(rng.randrange(20)))

        async def run(left: list[Tick] = left, right: list[Tick] = right) -> list[tuple[int, str]]:
            return [(side, t.id) async for side, t in amerged(aiter_of(left), aiter_of(right), ranks)]

        want = [(side, t.id) for side, t in merged(left, right, ranks)]
        assert asyncio.run(run()) == want and len(want) == len(left) + len(right)
        # at one time, the side of the lower rank first
        first = LEFT if ranks[LEFT] < ranks[RIGHT] else RIGHT
        at = {t.id: t.timestamp for t in [*left, *right]}
        for (s1, a), (s2, b) in zip(want, want[1:]):
            assert at[a] < at[b] or (at[a] == at[b] and (s1 == s2 or s1 == first))


def busy_day(seed: int) -> tuple[list[Tick], list[Tick]]:
    """About 2 000 ticks each side over 10 minutes, 3 series, whole seconds (ties)."""
    rng = random.Random(seed)
    left = in_read_order(tick("l", i, rng.randrange(600), rng.choice("ABC")) for i in range(2000))
    right = in_read_order(tick("r", i, rng.randrange(600), rng.choice("ABC")) for i in range(1500))
    return left, right


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("direction", ["forward", "nearest"])
def test_with_a_tolerance_the_joiner_holds_one_tolerance_window_of_left_ticks(direction: Any, exact: bool) -> None:
    tolerance = 3 * SEC
    left, right = busy_day(5)
    joiner = AsofJoiner(direction, ("sym",), tolerance, exact)
    window: deque[dt.datetime] = deque()  # the left ticks added so far within one tolerance of now
    most = waited = 0
    out = []
    for side, item in merged(left, right, priority(direction, exact)):
        out.extend(joiner.add(side, item))
        if side == LEFT:
            window.append(item.timestamp)
        while window and window[0] < item.timestamp - tolerance:
            window.popleft()
        held = len(joiner._queue)
        still_open = sum(not w.done for waiting in joiner._open.values() for w in waiting)
        assert held <= len(window) and len(joiner._deadlines) <= len(window) and still_open <= len(window)
        most, waited = max(most, held), waited + held
    out.extend(joiner.rest())
    assert most > 1 and waited > 0  # it did wait for later right ticks
    mode: dict[str, Any] = {"direction": direction, "by": ("sym",), "tolerance": tolerance}
    mode["allow_exact_matches"] = exact
    assert [(a.id, None if b is None else b.id) for a, b in out] == oracle(left, right, **mode)


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("tolerance", [None, 3 * SEC])
def test_a_backward_join_never_holds_a_left_tick(tolerance: dt.timedelta | None, exact: bool) -> None:
    left, right = busy_day(6)
    joiner = AsofJoiner("backward", ("sym",), tolerance, exact)
    for side, item in merged(left, right, priority("backward", exact)):
        done = joiner.add(side, item)
        assert len(done) == (side == LEFT) and not joiner._queue and not joiner._deadlines
        assert not any(joiner._open.values())
    assert joiner.rest() == []


def test_without_drops_fields_at_dotted_paths_and_maps_left_empty() -> None:
    data = {"sym": "A", "venue": {"code": "V1"}, "bid": {"micros": 5, "currency": "USD"}, "shard": "s1"}
    names = ["shard", "sym", "venue.code", "bid.currency", "absent", "sym.x"]
    assert without_paths(data, names, prune=True) == {"bid": {"micros": 5}}
    assert without_paths(data, names) == {"venue": {}, "bid": {"micros": 5}}  # an emptied map stays unless pruned
    assert data["venue"] == {"code": "V1"} and data["bid"] == {"micros": 5, "currency": "USD"}  # not changed
    assert without_paths(data, ["absent", "venue.absent"], prune=True) is data  # nothing to drop: no copy


# ------------------------------------------------------------------------------ on the emulator

SLOT = dt.timedelta(milliseconds=100)
SLOTS = 200  # 20 s of 100 ms slots
SYMBOLS = ["AAA", "BBB", "CCC"]
TIE_SLOTS = [40, 90, 150]  # 3 left and 3 right ticks of AAA at one time, on several shards
SHAPES = [QueryShape("symbol", ("desc", "asc")), QueryShape("exchange", ("desc", "asc"))]
QUOTE_SHARDS = ["q0", "q1", "q2"]
QUOTES = SeriesSpec("quotes", shards=QUOTE_SHARDS, timestamp_field="time", key_fields=["symbol", "n"], shapes=SHAPES)


def trades_spec(shards: int) -> SeriesSpec:
    return SeriesSpec(
        f"trades{shards}", shards=[f"s{i:02d}" for i in range(shards)], key_fields=["symbol", "n"], shapes=SHAPES
    )


def make_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Trades (no shard yet) and quotes on 100 ms slots: ties within and across the sides."""
    rng = random.Random(2025)
    trades: list[dict[str, Any]] = [
        {"symbol": rng.choice(SYMBOLS), "exchange": rng.choice(["X1", "X2"]), "n": i,
         "timestamp": T0 + rng.randrange(SLOTS) * SLOT, "price": {"micros": rng.randrange(1, 10**6)}}
        for i in range(240)
    ]  # fmt: skip
    quotes: list[dict[str, Any]] = [
        {"symbol": rng.choice(SYMBOLS), "exchange": rng.choice(["X1", "X2"]), "n": i,
         "time": T0 + rng.randrange(SLOTS) * SLOT, "shard": rng.choice(QUOTE_SHARDS),
         "bid": {"micros": rng.randrange(1, 10**6)}}
        for i in range(320)
    ]  # fmt: skip
    for g, slot in enumerate(TIE_SLOTS):
        for j in range(3):
            trades.append({"symbol": "AAA", "exchange": "X1", "n": 1000 + 10 * g + j, "timestamp": T0 + slot * SLOT,
                           "price": {"micros": 7 + j}})  # fmt: skip
            quotes.append({"symbol": "AAA", "exchange": "X2", "n": 1000 + 10 * g + j, "time": T0 + slot * SLOT,
                           "shard": QUOTE_SHARDS[j], "bid": {"micros": 70 + j}})  # fmt: skip
    return trades, quotes


@dataclass
class Written:
    trades: dict[int, TimeSeriesStore]  # by shard count: the same ticks
    rows: list[dict[str, Any]]  # the trades written
    quotes: list[dict[str, Any]]  # the quotes written
    quote_ids: dict[int, str]  # quote n -> its document id
    quote_frame: pd.DataFrame  # every quote, oldest first
    database: str
    mode: str


@pytest.fixture(scope="module", params=MODES)
def written(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[Written]:
    """The trades at 3 and 40 shard values and the quotes, in each database mode."""
    database = unique_database_id("asof")
    client = mode_client(request, request.param, database)
    trades, quotes = make_rows()
    stores = {}
    for shards in (3, 40):
        spec = trades_spec(shards)
        rng = random.Random(shards)
        rows = [{**row, "shard": rng.choice(spec.shards)} for row in trades]
        for row in rows:  # the three trades of a tie group a third of the shard values apart: over every chunk
            if row["n"] >= 1000:
                row["shard"] = spec.shards[(row["n"] % 10 * shards // 3 + row["n"] // 10) % shards]
        store = TimeSeriesStore(client, spec, write_options=FAST, page_size=100)
        assert store.write(rows).created == len(rows)
        stores[shards] = store
    quote_store = TimeSeriesStore(client, QUOTES, write_options=FAST)
    result = quote_store.write(quotes)
    assert result.created == len(quotes)
    quote_ids = {row["n"]: i for row, i in zip(quotes, result.ids)}
    frame = quote_store.query_frame(direction="asc")
    # the oracle's right side is in the read order: (time, document id)
    assert list(frame["n"]) == [r["n"] for r in sorted(quotes, key=lambda r: (r["time"], quote_ids[r["n"]]))]
    # 40 shard values: two chunks, and each tie group of trades spread over both
    chunks = stores[40].plan().chunks
    assert len(chunks) == 2 and len(stores[3].plan().chunks) == 1
    for slot in TIE_SLOTS:
        group = stores[40].query_frame(start=T0 + slot * SLOT, end=T0 + (slot + 1) * SLOT, columns=["shard", "n"])
        assert all(set(group["shard"]) & set(chunk) for chunk in chunks)
    yield Written(stores, trades, quotes, quote_ids, frame, database, request.param)
    quote_store.close()
    for store in stores.values():
        store.close()
    client.close()


def cells(frame: pd.DataFrame, column: str) -> list[Any]:
    """A column as Python values, None where missing (a frame without the column: all None)."""
    if column not in frame:
        return [None] * len(frame)
    return [None if pd.isna(v) else (int(v) if isinstance(v, float) else v) for v in frame[column].astype(object)]


def expected(
    left: pd.DataFrame,
    right: pd.DataFrame,
    quote_ids: dict[int, str],
    *,
    by: Sequence[str],
    direction: str,
    tolerance: dt.timedelta | None,
    allow_exact_matches: bool,
) -> dict[str, list[Any]]:
    """``merge_asof`` of two ``query_frame`` results: per left row in order, its ``n``, time,
    and its match's ``n``, id, time and bid."""
    lf = pd.DataFrame({"t": left.index, **{f: cells(left, f) for f in ("n", *by)}})
    rf = pd.DataFrame(
        {"t": right.index, "rn": cells(right, "n"), "rtime": right.index, "rbid": cells(right, "bid.micros"),
         **{f: cells(right, f) for f in by}}
    )  # fmt: skip
    options: dict[str, Any] = {"direction": direction, "allow_exact_matches": allow_exact_matches}
    if by:
        options["by"] = list(by)
    if tolerance is not None:
        options["tolerance"] = pd.Timedelta(tolerance)
    joined = pd.merge_asof(lf, rf, on="t", **options)
    rn = cells(joined, "rn")
    return {
        "t": list(joined["t"]),
        "n": cells(joined, "n"),
        "right.n": rn,
        "right.id": [None if n is None else quote_ids[n] for n in rn],
        "right.time": cells(joined, "rtime"),
        "right.bid.micros": cells(joined, "rbid"),
    }


def got_of(frame: pd.DataFrame) -> dict[str, list[Any]]:
    return {"t": list(frame.index), **{c: cells(frame, c) for c in ("n", "right.n", "right.id", "right.time",
                                                                   "right.bid.micros")}}  # fmt: skip


@dataclass(frozen=True)
class Case:
    name: str
    left: Query
    by: tuple[str, ...] = ("symbol",)
    direction: str = "backward"
    tolerance: dt.timedelta | None = None
    allow_exact_matches: bool = True

    def options(self) -> dict[str, Any]:
        return {"by": self.by, "direction": self.direction, "tolerance": self.tolerance,
                "allow_exact_matches": self.allow_exact_matches}  # fmt: skip


MS250 = dt.timedelta(milliseconds=250)
CASES = [
    Case("backward-by", Query()),
    Case(
        "backward-by-tolerance-range",
        Query(where={"symbol": ["AAA", "BBB"]}, start=T0 + 5 * SEC, end=T0 + 15 * SEC),
        tolerance=MS250,
    ),  # fmt: skip
    Case("backward-exact-only", Query(start=T0 + 5 * SEC), by=(), tolerance=dt.timedelta(0)),
    Case("backward-by-inexact-from-mid", Query(start=T0 + 10 * SEC), allow_exact_matches=False),
    Case("forward-by-range", Query(start=T0 + 3 * SEC, end=T0 + 12 * SEC), direction="forward"),
    Case("forward-by-tolerance-inexact", Query(), direction="forward", tolerance=MS250, allow_exact_matches=False),
    Case("nearest-by-tolerance-one-symbol", Query(where={"symbol": "AAA"}), direction="nearest", tolerance=MS250),
    Case("nearest-inexact-from-mid", Query(start=T0 + 8 * SEC), by=(), direction="nearest", allow_exact_matches=False),
    Case("nearest-by-range", Query(start=T0 + 2 * SEC, end=T0 + 18 * SEC), direction="nearest"),
]


def left_frame(store: TimeSeriesStore, query: Query) -> pd.DataFrame:
    return store.query_frame(query.replace(direction="asc"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("shards", [3, 40])
def test_asof_equals_merge_asof_on_the_same_ticks(written: Written, shards: int, case: Case) -> None:
    store = written.trades[shards]
    got = store.asof(case.left, right_spec=QUOTES, ids=True, **case.options())
    want = expected(left_frame(store, case.left), written.quote_frame, written.quote_ids, **case.options())
    assert got_of(got) == want
    assert any(n is not None for n in want["right.n"])
    assert str(got.index.tz) == "UTC" and got.index.name == "timestamp"
    if case.name == "backward-by":  # every tie group joins its last quote (the greatest id)
        for slot in TIE_SLOTS:
            last = max((r for r in written.quotes if r["time"] == T0 + slot * SLOT and r["symbol"] == "AAA"),
                       key=lambda r: written.quote_ids[r["n"]])  # fmt: skip
            rows = got[(got.index == T0 + slot * SLOT) & (got["symbol"] == "AAA")]
            assert len(rows) >= 3 and set(rows["right.id"]) == {written.quote_ids[last["n"]]}


@pytest.mark.parametrize("shards", [3, 40])
def test_a_join_within_one_collection_takes_each_sides_filter(written: Written, shards: int) -> None:
    store = written.trades[shards]
    left, right = Query(where={"exchange": "X1"}, start=T0 + 4 * SEC), Query(where={"exchange": "X2"})
    options: dict[str, Any] = {"by": ("symbol",), "direction": "nearest", "tolerance": dt.timedelta(milliseconds=400)}
    got = store.asof(left, right, prefix="other", **options)
    lf, rf = left_frame(store, left), left_frame(store, right)
    want = pd.merge_asof(
        pd.DataFrame({"t": lf.index, "symbol": cells(lf, "symbol"), "n": cells(lf, "n")}),
        pd.DataFrame({"t": rf.index, "symbol": cells(rf, "symbol"), "rn": cells(rf, "n"), "rt": rf.index}),
        on="t", by="symbol", direction="nearest", tolerance=pd.Timedelta(milliseconds=400),
    )  # fmt: skip
    assert cells(got, "n") == cells(want, "n") and list(got.index) == list(want["t"])
    assert cells(got, "other.n") == cells(want, "rn") and cells(got, "other.timestamp") == cells(want, "rt")
    assert set(cells(got, "exchange")) == {"X1"} and set(cells(got, "other.exchange")) == {"X2", None}
    assert 0 < sum(n is not None for n in cells(got, "other.n")) < len(got)


def test_iter_asof_streams_the_frames_rows(written: Written) -> None:
    store = written.trades[40]
    case = CASES[6]  # nearest, by symbol, a tolerance, one symbol
    frame = store.asof(case.left, right_spec=QUOTES, ids=True, **case.options())
    stream = store.iter_asof(case.left, right_spec=QUOTES, **case.options())
    ticks = list(stream)
    assert [t.id for t in ticks] == [t.id for t in store.iter_ticks(case.left.replace(direction="asc"))]
    assert [t.data["n"] for t in ticks] == cells(frame, "n") and [t.timestamp for t in ticks] == list(frame.index)
    for t, rid, rtime, rbid in zip(ticks, cells(frame, "right.id"), cells(frame, "right.time"),
                                   cells(frame, "right.bid.micros")):  # fmt: skip
        if rid is None:
            assert "right" not in t.data
        else:
            match = t.data["right"]
            assert (match["id"], match["time"], match["bid"]["micros"]) == (rid, rtime, rbid)
            assert "symbol" not in match and abs(match["time"] - t.timestamp) <= MS250  # by: the left's
    assert stream.stats.documents >= len(ticks) and stream.stats.queries >= 2


def test_the_async_store_gives_the_same_frames(written: Written, request: pytest.FixtureRequest) -> None:
    store = written.trades[40]
    cases = [CASES[1], CASES[7]]

    async def run() -> tuple[list[pd.DataFrame], list[str]]:
        async with async_twin(store, request) as client:
            astore = AsyncTimeSeriesStore(client, store.spec, page_size=100)
            frames = [await astore.asof(c.left, right_spec=QUOTES, **c.options()) for c in cases]
            stream = astore.iter_asof(cases[1].left, right_spec=QUOTES, **cases[1].options())
            ids = [t.id async for t in stream]
            return frames, ids

    frames, ids = asyncio.run(run())
    for case, frame in zip(cases, frames):
        pd.testing.assert_frame_equal(frame, store.asof(case.left, right_spec=QUOTES, **case.options()))
    assert ids == [t.id for t in store.iter_asof(cases[1].left, right_spec=QUOTES, **cases[1].options())]


@pytest.mark.parametrize(
    "direction, tolerance",
    [("backward", MS250), ("forward", MS250), ("nearest", MS250), ("backward", None), ("forward", None)],
)
def test_the_right_range_defaults_to_what_can_match(
    written: Written, direction: str, tolerance: dt.timedelta | None
) -> None:
    store = written.trades[40]
    start, end = T0 + 10 * SEC, T0 + 11 * SEC
    left = Query(where={"symbol": "BBB"}, start=start, end=end)
    stats = ReadStats()
    got = store.asof(
        left, right_spec=QUOTES, by="symbol", direction=direction, tolerance=tolerance, ids=True, stats=stats
    )
    lf = left_frame(store, left)
    options: dict[str, Any] = {"by": ("symbol",), "direction": direction, "tolerance": tolerance}
    options["allow_exact_matches"] = True
    assert got_of(got) == expected(lf, written.quote_frame, written.quote_ids, **options)  # as with every quote
    reach = tolerance if tolerance is not None else dt.timedelta(days=1)
    low = start if direction == "forward" else start - reach
    high = end if direction == "backward" else end + reach
    window = [q for q in written.quotes if low <= q["time"] < high]
    assert stats.documents == len(lf) + len(window)
    if tolerance is not None:  # a narrow left range reads a tolerance window of quotes, not all of them
        assert len(window) < len(written.quotes) / 8


@pytest.mark.parametrize("shards", [3, 40])
def test_the_frame_is_merge_asof_of_two_query_frames(written: Written, shards: int) -> None:
    """By default the frame is ``pandas.merge_asof`` of the two ``query_frame`` results, the
    right one's columns under ``right.`` but the ``by`` field, which it has once, plus the
    match's time: no document id, nothing twice."""
    store = written.trades[shards]
    got = store.asof(right_spec=QUOTES, by="symbol", direction="nearest", tolerance=MS250)
    right = written.quote_frame.rename(columns=lambda c: c if c == "symbol" else f"right.{c}")
    right["right.time"] = right.index
    want = pd.merge_asof(left_frame(store, Query()), right, left_index=True, right_index=True, by="symbol",
                         direction="nearest", tolerance=pd.Timedelta(MS250))  # fmt: skip
    assert 0 < want["right.time"].notna().sum() < len(want)
    pd.testing.assert_frame_equal(got.sort_index(axis=1), want.sort_index(axis=1))


def test_projected_columns_keep_the_by_fields_on_both_sides(written: Written) -> None:
    store = written.trades[3]
    left, right = Query(columns=["price"], end=T0 + 6 * SEC), Query(columns=["bid"])
    got = store.asof(left, right, right_spec=QUOTES, by="symbol", ids=True)
    # the match's timestamp under the quotes' own timestamp field name (time); symbol once, the left's
    want_columns = ["price.micros", "right.bid.micros", "right.id", "right.time", "symbol"]
    assert sorted(got.columns) == want_columns
    case = Case("projected", Query(end=T0 + 6 * SEC))
    want = expected(left_frame(store, case.left), written.quote_frame, written.quote_ids, **case.options())
    projected = ("n", "right.n")  # not read
    assert {k: v for k, v in got_of(got).items() if k not in projected} == {
        k: v for k, v in want.items() if k not in projected
    }


def test_a_join_without_any_match_still_has_the_right_columns(written: Written) -> None:
    for ids in (False, True):  # nothing can match
        got = written.trades[3].asof(right_spec=QUOTES, tolerance=0, allow_exact_matches=False, ids=ids)
        assert len(got) == len(written.rows)
        assert "right.time" in got.columns and got["right.time"].isna().all()
        assert ("right.id" in got.columns) == ids and "right.symbol" not in got.columns


def test_a_joins_stats_count_the_chunks_of_both_reads(written: Written) -> None:
    store = written.trades[40]
    stats = ReadStats()
    store.asof(Query(end=T0 + 2 * SEC), right_spec=QUOTES, stats=stats)
    assert stats.chunks == len(store.plan().chunks) + 1  # 2 chunks of trades, 1 of quotes


SHAPES_TOML = (
    'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] },'
    ' { fields = ["exchange"], directions = ["desc", "asc"] }]\n'
)


@pytest.mark.parametrize("written", EMULATOR_MODES, indirect=True)  # a command: on the emulator
def test_the_command_prints_the_join(written: Written, request: pytest.FixtureRequest, tmp_path: Any) -> None:
    store = written.trades[3]
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "trades3"\nshards = ["s00", "s01", "s02"]\nkey_fields = ["symbol", "n"]\n'
        + SHAPES_TOML
        + '[[series]]\ncollection = "quotes"\nshards = ["q0", "q1", "q2"]\ntimestamp_field = "time"\n'
        'key_fields = ["symbol", "n"]\n' + SHAPES_TOML
    )  # fmt: skip
    if written.mode == "datastore":
        address = request.getfixturevalue("datastore_emulator").address
        env = {"DATASTORE_EMULATOR_HOST": address, "TSSTORE_MODE": "datastore"}
    else:
        env = {"FIRESTORE_EMULATOR_HOST": request.getfixturevalue("emulator").address}
    where: dict[str, Any] = {"cwd": tmp_path, "env": env}
    common = ("asof", "--spec", "spec.toml", "--collection", "trades3", "--database", written.database)
    done = tsstore(*common, "--right", "quotes", "--right-where", "exchange=X2", "--right-columns", "n",
                   "--by", "symbol", "--direction", "nearest", "--tolerance", "250ms", "--ids", "--format", "csv",
                   **where)  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = pd.read_csv(io.StringIO(done.stdout), index_col=0)
    want = store.asof(Query(), Query(where={"exchange": "X2"}, columns=["n"]), right_spec=QUOTES, by="symbol",
                      direction="nearest", tolerance=MS250, ids=True)  # fmt: skip
    assert sorted(printed.columns) == sorted(want.columns) and "right.symbol" not in printed.columns
    assert 0 < printed["right.n"].notna().sum() < len(printed)
    for column in ("n", "right.n", "right.id"):
        assert cells(printed, column) == cells(want, column)
    refused = tsstore(*common, "--right", "nosuch", **where)
    assert refused.returncode == 2 and "nosuch" in refused.stderr and "quotes" in refused.stderr


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "options, message",
    [
        ({"direction": "sideways"}, r"direction='sideways' is not allowed .*backward, forward, nearest"),
        ({"tolerance": "-5s"}, r"tolerance '-5s' is negative"),
        ({"tolerance": "soon"}, r"tolerance 'soon' is not a duration"),
        ({"prefix": "price.x"}, r"prefix 'price.x' must be a plain field name"),
        ({"prefix": "symbol", "by": "symbol"}, r"prefix 'symbol' must be a plain field name"),
        ({"left": Query(limit=5)}, r"asof \(left query\) does not take limit"),
        ({"right": Query(direction="asc")}, r"asof \(right query\) does not take direction"),
    ],
    ids=["direction", "negative-tolerance", "not-a-duration", "dotted-prefix", "prefix-is-by", "limit", "direction-q"],
)
def test_bad_options_are_one_query_error_naming_the_value(
    written: Written, options: dict[str, Any], message: str
) -> None:
    store, options = written.trades[3], dict(options)
    left, right = options.pop("left", None), options.pop("right", None)
    with pytest.raises(QueryError, match=message):
        store.asof(left, right, right_spec=QUOTES, **options)
    with pytest.raises(QueryError, match=message):
        list(store.iter_asof(left, right, right_spec=QUOTES, **options))


@pytest.mark.parametrize("tolerance", [float("nan"), float("inf"), 1e20, "NaT"], ids=["nan", "inf", "huge", "NaT"])
def test_a_tolerance_that_is_no_duration_is_a_query_error_naming_it(written: Written, tolerance: object) -> None:
    with pytest.raises(QueryError, match=r"tolerance .*(not a duration|negative|too large|out of range)"):
        written.trades[3].asof(right_spec=QUOTES, tolerance=tolerance)
