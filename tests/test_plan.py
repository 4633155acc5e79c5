"""Pure tests of query planning, chunking and merging (no Firestore)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.mutants import Backwards, bites
from tsstore import Direction, QueryError, QueryShape, SeriesSpec, Tick, plan_query
from tsstore.limits import MAX_DISJUNCTIONS, MAX_IN_VALUES
from tsstore.read.merge import merge_streams, take
from tsstore.read.plan import QueryPlan, chunk_shards, chunk_size, normalize_where
from tsstore.read.query import Query
from tsstore.ticks import Ordered, sort_key

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 1, 1, tzinfo=UTC)


def spec_with(n_shards: int, *shapes: object) -> SeriesSpec:
    return SeriesSpec(
        "t",
        shards=[f"s{i}" for i in range(n_shards)],
        shapes=[QueryShape(tuple(s) if not isinstance(s, str) else (s,), ("desc", "asc")) for s in shapes],
    )


@pytest.mark.parametrize(
    ("n_shards", "where", "expected_sizes"),
    [
        (1, None, [1]),
        (3, None, [3]),
        (30, None, [30]),
        (31, None, [16, 15]),
        (40, None, [20, 20]),
        (65, None, [22, 22, 21]),
        (3, {"symbol": ["a", "b"]}, [3]),
        (30, {"symbol": ["a", "b"]}, [15, 15]),
        (30, {"symbol": ["a", "b", "c"], "exchange": "E"}, [10, 10, 10]),
        (7, {"symbol": [str(i) for i in range(10)]}, [3, 2, 2]),
        (5, {"symbol": [str(i) for i in range(30)]}, [1, 1, 1, 1, 1]),
        (60, {"exchange": "E"}, [30, 30]),
    ],
)
def test_chunk_plan_table(n_shards: int, where: object, expected_sizes: list[int]) -> None:
    spec = spec_with(n_shards, ("symbol",), ("exchange", "symbol"), ("exchange",))
    plan = plan_query(spec, where=where)  # type: ignore[arg-type]
    assert [len(c) for c in plan.chunks] == expected_sizes
    assert [s for c in plan.chunks for s in c] == list(spec.shards)


@given(
    n_shards=st.integers(1, 200),
    in_sizes=st.lists(st.integers(1, 30), max_size=3),
)
def test_chunk_plan_respects_disjunction_budget(n_shards: int, in_sizes: list[int]) -> None:
    product = math.prod(in_sizes)
    filters = normalize_where({f"f{i}": [str(v) for v in range(n)] for i, n in enumerate(in_sizes)})
    if product > MAX_DISJUNCTIONS:
        with pytest.raises(QueryError, match=f"{product} disjunctions"):
            chunk_size(filters)
        return
    size = chunk_size(filters)
    assert size == min(MAX_DISJUNCTIONS // product, MAX_IN_VALUES)
    shards = [f"s{i}" for i in range(n_shards)]
    chunks = chunk_shards(shards, size)
    assert [s for c in chunks for s in c] == shards  # every shard once, in order
    assert len(chunks) == math.ceil(n_shards / size)  # as few queries as the budget allows
    assert all(len(c) * product <= MAX_DISJUNCTIONS for c in chunks)
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1  # even


# --- merge against a brute-force oracle -------------------------------------------------

tick_rows = st.lists(
    st.tuples(
        st.integers(0, 20),  # few distinct timestamps: many ties
        st.integers(0, 64),  # shard number
        st.sampled_from(["A", "B", "C", "D"]),  # symbol
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(
    rows=tick_rows,
    n_shards=st.sampled_from([1, 3, 30, 31, 65]),
    descending=st.booleans(),
    limit=st.one_of(st.none(), st.integers(1, 50)),
    symbols=st.one_of(st.none(), st.lists(st.sampled_from(["A", "B", "C", "D"]), min_size=1, max_size=4, unique=True)),
)
def test_fan_out_merge_equals_oracle(
    rows: list[tuple[int, int, str]], n_shards: int, descending: bool, limit: int | None, symbols: list[str] | None
) -> None:
    spec = spec_with(n_shards, ("symbol",))
    ticks = [
        Tick(f"id{i:04d}", T0 + dt.timedelta(seconds=t), {"shard": f"s{s % n_shards}", "symbol": sym})
        for i, (t, s, sym) in enumerate(rows)
    ]
    plan = plan_query(
        spec,
        where=None if symbols is None else {"symbol": symbols},
        direction="desc" if descending else "asc",
        limit=limit,
    )

    def matches(t: Tick) -> bool:
        return symbols is None or t.data["symbol"] in symbols

    # What Firestore returns per chunk: matching docs of the chunk's shards, ordered by
    # (timestamp, __name__) in the query direction, cut at the limit.
    def server(chunk: tuple[str, ...]) -> list[Tick]:
        got = sorted((t for t in ticks if t.data["shard"] in chunk and matches(t)), key=sort_key, reverse=descending)
        return got if limit is None else got[:limit]

    merged = list(take(merge_streams([server(c) for c in plan.chunks], descending=descending), limit))
    oracle = sorted((t for t in ticks if matches(t)), key=sort_key, reverse=descending)
    if limit is not None:
        oracle = oracle[:limit]
    assert merged == oracle


# --- validation -------------------------------------------------------------------------

SPEC = SeriesSpec("instruments", shapes=["exchange", "instrumentType", ("exchange", "symbol")])
RANGED = SeriesSpec(
    "instruments",
    shards=[f"s{i}" for i in range(40)],
    shapes=[
        QueryShape(["symbol"], ("desc", "asc"), series_rate=100),
        QueryShape(["exchange"], ("desc", "asc"), ranges=["volume"]),
        QueryShape([], ("desc", "asc"), ranges=["v", "w"]),
    ],
)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"where": [("exchange", "<", "A")]}, r"range condition on \['exchange'\]: no query shape declares it"),
        ({"where": [("exchange", "!=", "A")]}, r"range condition on \['exchange'\]: no query shape declares it"),
        ({"where": [("exchange", "not-in", ["A"])]}, r"operator 'not-in' .*allowed: ==, in, <, <=, >, >=, !="),
        ({"where": [("volume", ">", 1)]}, r"undeclared field\(s\) \['volume'\]"),
        ({"where": [("exchange", "==", "E"), ("exchange", ">", "A")]}, r"field 'exchange' is filtered twice"),
        ({"where": [("v", ">", 1), ("v", "==", 2)]}, r"field 'v' is filtered twice"),
        ({"where": [("v", ">", None)]}, r"v > None: a range condition compares with one value"),
        ({"where": [("v", ">", [1, 2])]}, r"a range condition compares with one value"),
        ({"where": [("v", ">=", float("nan"))]}, r"^v >= nan: Firestore takes no NaN as a range bound"),
        ({"where": [("v", "!=", 1), ("w", "!=", 2)]}, r"one '!=' filter per query"),
        ({"where": [("exchange", "not-in", ["A"])]}, r"operator 'not-in'"),
        ({"where": [("exchange", "like", "A")]}, r"operator 'like' .*unknown operator"),
        ({"where": {"exchange": [str(i) for i in range(31)]}}, r"'in' on 'exchange' has 31 values; .* at most 30"),
        ({"where": {"exchange": []}}, r"'in' on 'exchange' has no values"),
        ({"where": [("exchange", "in", "EX")]}, r"'in' on 'exchange' needs a list"),
        ({"where": {"symbol": "A"}}, r"query shape \[symbol\] is not declared"),
        ({"where": {"currency": "USD"}}, r"undeclared field\(s\) \['currency'\]"),
        (
            {"where": {"exchange": "A"}, "direction": "asc"},
            r"not declared for direction 'asc': it needs the composite index "
            r"instruments \(shard DESC, exchange ASC, timestamp ASC\)",
        ),
        ({"direction": "sideways"}, r"direction 'sideways' is not allowed"),
        ({"limit": 0}, r"limit 0 is not allowed"),
        ({"limit": -5}, r"limit -5 is not allowed"),
        ({"limit": 2.5}, r"limit 2.5 is not allowed"),
        ({"start": dt.datetime(2024, 1, 1)}, r"start 2024-01-01T00:00:00 is naive"),
        ({"end": "yesterday"}, r"end 'yesterday' is not an ISO-8601 time"),
        ({"start": T0, "end": T0}, r"empty time range"),
        ({"where": [("exchange", "==")]}, r"is not a \(field, operator, value\) triple"),
        ({"columns": ["bad field"]}, r"column 'bad field' is not a valid field path"),
        # values Firestore refuses in a filter (a text counts its UTF-8 bytes and one): named before sending
        ({"where": {"exchange": "é" * 750}},
         r"^filter on 'exchange': the str value 'ééé.* is 1501 bytes as Firestore counts a text .*at most 1500 bytes "
         r"in a query, so no filter finds"),
        ({"where": [("exchange", "in", ["A", b"x" * 1501])]},
         r"filter on 'exchange': the bytes value .* 1501 bytes long"),
        ({"where": [("v", ">=", "a" * 1500)]}, r"filter on 'v': .* 1501 bytes"),
        # tsstore's own fields: the planner picks the shards, start/end bound the time
        ({"where": [("shard", "in", ["x"])]}, r"^filter shard in \['x'\]: 'shard' is tsstore's shard field, chosen by "
                                              r"tsstore .*the query planner already covers every shard value"),
        ({"where": (("timestamp", ">=", T0),)}, r"^filter timestamp >= .*'timestamp' is the series' time field; give "
                                                r"the time range as start= \(inclusive\) and end= \(exclusive\)"),
        # a tuple in a mapping: an operator pair or the values of 'in'? neither is guessed
        ({"where": {"v": (">=", 1000)}}, r"^where=\{'v': \('>=', 1000\)\}: a tuple in a where mapping .*write "
                                         r"\[\('v', op, value\)\] for a condition, or a list for 'in'"),
        ({"where": 5}, r"^where=5 is not allowed; give a mapping"),
        ({"columns": 5}, r"^columns=5 is not allowed; give a list of field names"),
        ({"read_time": dt.datetime(2024, 1, 1)}, r"^read_time datetime.datetime\(2024, 1, 1, 0, 0\) is not allowed"),
        ({"cursor": 5}, r"^cursor 5 is not allowed; give the cursor text of a page"),
    ],
)
def test_bad_queries_name_the_value(kwargs: dict[str, object], message: str) -> None:
    from tsstore import TsstoreError

    with pytest.raises(QueryError, match=message) as info:
        plan_query(RANGED if "('v'" in str(kwargs.get("where", "")) else SPEC, **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, TsstoreError) and isinstance(info.value, ValueError)


def test_a_filter_value_is_sent_up_to_the_size_firestore_compares() -> None:
    """Measured on the emulator: Native mode takes a text of 1 499 UTF-8 bytes in a filter and
    refuses one of 1 500 (it counts one more), bytes up to 1 500; Datastore mode takes 1 500.
    The planner takes what both take."""
    assert plan_query(SPEC, where={"exchange": "a" * 1499}).filters[0].values == ("a" * 1499,)
    assert plan_query(SPEC, where={"exchange": ["é" * 749, b"x" * 1500]}).filters[0].op == "in"
    with pytest.raises(QueryError, match="1501 bytes"):
        plan_query(SPEC, where={"exchange": "a" * 1500})


def test_plan_normalizes_times_directions_and_projection() -> None:
    plan = plan_query(
        SPEC,
        where=[("symbol", "in", ["B", "A", "B"]), ("exchange", "==", "E")],
        start="2024-01-01T00:00:00Z",
        end=dt.datetime(2024, 1, 2, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        direction="DESC",
        columns=["price.micros"],
    )
    assert plan.direction is Direction.DESC
    assert plan.start == T0 and plan.end == T0 + dt.timedelta(days=1)
    assert [(f.field, f.op, f.values) for f in plan.filters] == [
        ("exchange", "==", ("E",)),
        ("symbol", "in", ("B", "A")),
    ]
    assert plan.columns == ("timestamp", "price.micros")
    assert [f.field_path for f in plan.index.fields] == ["shard", "exchange", "symbol", "timestamp"]
    assert plan.index.fields[-1].order == "DESCENDING"


def test_a_query_value_and_keyword_options_plan_the_same() -> None:
    from tsstore.read.query import Query

    spec = SeriesSpec("q", shapes=[QueryShape("symbol")])
    q = Query(where={"symbol": ["AAA", "BBB"]}, start="2024-01-01T00:00:00Z", limit=5)
    assert plan_query(spec, q) == plan_query(
        spec, where={"symbol": ["AAA", "BBB"]}, start="2024-01-01T00:00:00Z", limit=5
    )
    assert plan_query(spec, q, limit=7).limit == 7 and q.limit == 5  # options override, the value stays
    assert q.replace(direction="asc").direction == "asc"
    with pytest.raises(QueryError, match="unknown query option.*limt.*allowed: .*limit"):
        plan_query(spec, limt=5)
    with pytest.raises(QueryError, match="count does not take cursor, limit"):
        Query(limit=3, cursor="x").only(("where", "start", "end", "read_time"), "count")


# --- series shapes and value filters ----------------------------------------------------------


def test_a_series_shape_is_one_query_without_the_shard() -> None:
    plan = plan_query(RANGED, where={"symbol": "AAA"}, limit=100, start=T0)
    assert plan.series and plan.chunks == ((),)  # no shard filter: every value, one query
    assert [f.field_path for f in plan.index.fields] == ["symbol", "timestamp"]
    assert plan_query(RANGED, where={"symbol": ["A", "B"]}).chunks == ((),)  # `in` on the series field too
    sharded = plan_query(RANGED, where=[("exchange", "==", "E"), ("volume", ">", 0)], limit=100)
    assert not sharded.series and [len(c) for c in sharded.chunks] == [20, 20]


def test_range_conditions_order_after_the_timestamp() -> None:
    plan = plan_query(RANGED, where=[("w", "<", 5), ("v", ">=", 1), ("v", "<", 9)], direction="asc", columns=["symbol"])
    assert [(f.field, f.op) for f in plan.ranges] == [("v", "<"), ("v", ">="), ("w", "<")] and not plan.filters
    assert plan.order_fields == ("v", "w")
    assert [(f.field_path, f.order) for f in plan.index.fields] == [
        ("shard", "DESCENDING"),
        ("timestamp", "ASCENDING"),
        ("v", "ASCENDING"),
        ("w", "ASCENDING"),
    ]
    assert plan.columns == ("timestamp", "symbol", "v", "w")  # the merge needs the order fields
    tick = Tick("id1", T0, {"v": 3, "w": "x"})
    assert plan.key(tick) == (T0, Ordered(3), Ordered("x"), "id1")
    with pytest.raises(QueryError, match=r"query shape \[\(time range\)\] ranges \[v\] is not declared"):
        plan_query(RANGED, where=[("v", ">", 1)])


def test_ordered_follows_firestores_order_of_types() -> None:
    values = [{"a": 1}, [1, 2], b"\x00", "a", dt.datetime(2024, 1, 1, tzinfo=UTC), 2.5, 2, float("nan"), True, None]
    assert [o.raw for o in sorted(map(Ordered, values))] == values[::-1]
    assert Ordered(2) == Ordered(2.0) and Ordered("b") > Ordered("a") and Ordered(10) < Ordered("1")
    assert hash(Ordered(2)) == hash(Ordered(2.0)) and len({Ordered([1, {"a": 2}]), Ordered((1, {"a": 2.0}))}) == 1


value_rows = st.lists(
    st.tuples(
        st.integers(0, 10),  # few distinct timestamps: many ties
        st.integers(0, 64),  # shard number
        st.one_of(st.integers(0, 5), st.sampled_from(["a", "b"])),  # a value of either type
    ),
    max_size=100,
)


MERGE_CASES = {"rows": value_rows, "n_shards": st.sampled_from([3, 31, 65]), "descending": st.booleans(),
               "limit": st.integers(1, 40)}  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(**MERGE_CASES)
def test_value_ordered_merge_equals_oracle(
    rows: list[tuple[int, int, int | str]], n_shards: int, descending: bool, limit: int
) -> None:
    spec = SeriesSpec(
        "t", shards=[f"s{i}" for i in range(n_shards)], shapes=[QueryShape([], ("desc", "asc"), ranges=["v"])]
    )
    ticks = [Tick(f"id{i:04d}", T0 + dt.timedelta(seconds=t), {"shard": f"s{s % n_shards}", "v": v})
             for i, (t, s, v) in enumerate(rows)]  # fmt: skip
    plan = plan_query(spec, where=[("v", "!=", 3)], direction="desc" if descending else "asc", limit=limit)

    def firestore_order(t: Tick) -> tuple[object, ...]:  # numbers before strings, then by value, then id
        v = t.data["v"]
        return (t.timestamp, isinstance(v, str), v, t.id)

    def server(chunk: tuple[str, ...]) -> list[Tick]:
        got = sorted((t for t in ticks if t.data["shard"] in chunk and t.data["v"] != 3), key=firestore_order)
        return (got[::-1] if descending else got)[:limit]

    merged = list(take(merge_streams([server(c) for c in plan.chunks], descending=descending, key=plan.key), limit))
    oracle = sorted((t for t in ticks if t.data["v"] != 3), key=firestore_order, reverse=descending)[:limit]
    assert merged == oracle


def test_the_value_merge_property_fails_when_a_tie_is_broken_the_other_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks tied on timestamp and value merged by id the other way: the property above finds
    a merge out of Firestore's order."""
    key = QueryPlan.key
    monkeypatch.setattr(QueryPlan, "key", lambda self, tick: (*key(self, tick)[:-1], Backwards(tick.id)))
    assert bites(test_value_ordered_merge_equals_oracle, **MERGE_CASES)


def test_a_filter_on_an_undeclared_field_names_the_shape_and_index_to_declare() -> None:
    """As every other refusal of a query does: the shape to declare and the index it needs."""
    spec = SeriesSpec("t", shapes=[QueryShape("symbol")])
    with pytest.raises(QueryError) as refused:
        plan_query(spec, Query(where=[("venue", "==", "X"), ("size", ">=", 3)]))
    text = str(refused.value)
    assert "Declare QueryShape(['venue'], ranges=['size']) in the SeriesSpec" in text
    assert "composite index t (shard DESC, venue ASC, timestamp DESC, size DESC)" in text


@pytest.mark.parametrize(
    ("name", "text", "advice"),
    [
        ("decl.toml", '[[series]]\ncollection = "t"\nshapes = ["symbol"]\n',
         '{ fields = ["venue"], ranges = ["size"] } in the shapes = [...] line of series \'t\' in {path}'),
        ("decl.json", '{"series": [{"collection": "t", "shapes": ["symbol"]}]}',
         '{"fields": ["venue"], "ranges": ["size"]} in the "shapes" list of series \'t\' in {path}'),
    ],
)  # fmt: skip
def test_the_shape_to_declare_is_worded_for_the_file_the_declaration_came_from(
    tmp_path: Path, name: str, text: str, advice: str
) -> None:
    from tsstore.declaration import load_specs

    path = tmp_path / name
    path.write_text(text)
    [spec] = load_specs(str(path))
    assert spec == SeriesSpec("t", shapes=[QueryShape("symbol")])  # where it came from is not what it declares
    for where in ([("venue", "==", "X"), ("size", ">=", 3)], [("symbol", "==", "A"), ("size", ">=", 3)]):
        with pytest.raises(QueryError) as refused:
            plan_query(spec, Query(where=where))
        assert "QueryShape" not in str(refused.value), str(refused.value)
    with pytest.raises(QueryError) as refused:
        plan_query(spec, Query(where=[("venue", "==", "X"), ("size", ">=", 3)]))
    wording = advice.replace("{path}", str(path))
    assert f"Declare {wording} (Firestore serves it" in str(refused.value), str(refused.value)
