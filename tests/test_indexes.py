"""Index generation, the shared index check, merging, linting, and firebase-tools' own validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore
from google.cloud.firestore_v1.types import StructuredQuery

from tests.cli import Ran
from tests.cli import tsstore as run_tsstore
from tests.conftest import FirebaseTools
from tsstore import QueryError, QueryShape, SeriesSpec, SpecError, TimeSeriesStore
from tsstore.declaration import load_specs
from tsstore.indexes.build import generate, lint, merge, render
from tsstore.indexes.file import plan_index_file

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"

SEED = SeriesSpec("instruments", shapes=["instrumentType", "exchange", "price.currency"])

# The seed's own new composite indexes (seed 004, "Membuat indeks komposit baru"), verbatim.
SEED_INDEXES = [
    {
        "collectionGroup": "instruments",
        "queryScope": "COLLECTION",
        "fields": [
            {"fieldPath": "shard", "order": "DESCENDING"},
            {"fieldPath": field, "order": "ASCENDING"},
            {"fieldPath": "timestamp", "order": "DESCENDING"},
        ],
    }
    for field in ("exchange", "instrumentType", "price.currency")
]


# --- generation ---------------------------------------------------------------------------


def test_seed_declaration_yields_the_seed_indexes_and_overrides() -> None:
    document = generate([SEED])
    for index in SEED_INDEXES:
        assert index in document["indexes"]
    range_only = [i for i in document["indexes"] if [f["fieldPath"] for f in i["fields"]] == ["shard", "timestamp"]]
    assert [i["fields"][1]["order"] for i in range_only] == ["DESCENDING", "ASCENDING"]
    assert len(document["indexes"]) == 5
    assert document["fieldOverrides"] == [
        {"collectionGroup": "instruments", "fieldPath": "timestamp", "indexes": []},
        {"collectionGroup": "instruments", "fieldPath": "shard", "indexes": []},
    ]
    assert all(i["queryScope"] == "COLLECTION" for i in document["indexes"])


def test_golden_file() -> None:
    text = render(
        generate(
            [SEED, SeriesSpec("trades", shards=["a", "b"], shapes=[QueryShape(("venue", "side"), ("desc", "asc"))])]
        )
    )
    assert text == (GOLDEN / "seed-and-trades.indexes.json").read_text()
    assert text.endswith("}\n") and '\n  "indexes": [\n    {\n      "collectionGroup"' in text  # 2-space indent


def test_generation_is_deterministic_and_refuses_conflicts() -> None:
    other = SeriesSpec("alpha", shapes=["b"])
    assert render(generate([SEED, other])) == render(generate([other, SEED]))
    with pytest.raises(SpecError, match="two different SeriesSpecs declare collection 'instruments'"):
        generate([SEED, SeriesSpec("instruments")])
    with pytest.raises(SpecError, match="no SeriesSpec given"):
        generate([])


def test_generated_files_are_clean() -> None:
    assert lint(generate([SEED])) == []
    assert lint(json.loads((ROOT / "indexes" / "firestore.indexes.json").read_text())) == []


# --- one source of truth: what the store sends is served by what the file declares --------


def served_by(query_pb: Any, indexes: list[dict[str, Any]]) -> bool:
    """Whether one generated index serves ``query_pb``: its equality/IN filters are exactly the
    index's fields before the timestamp, and the query orders by the index's fields from the
    timestamp on (the range-filtered fields among them), each in its order, then __name__ in
    the last one's."""
    eq_fields: set[str] = set()
    range_fields: set[str] = set()
    filters = query_pb.where.composite_filter.filters or [query_pb.where]
    for f in filters:
        ff = f.field_filter
        if ff.op in (StructuredQuery.FieldFilter.Operator.EQUAL, StructuredQuery.FieldFilter.Operator.IN):
            eq_fields.add(ff.field.field_path)
        else:
            range_fields.add(ff.field.field_path)
    orders = [(o.field.field_path, o.direction.name) for o in query_pb.order_by]
    for index in indexes:
        fields = [(f["fieldPath"], f["order"]) for f in index["fields"]]
        at = next((i for i, (path, _) in enumerate(fields) if path == "timestamp"), None)
        if at is None:
            continue
        prefix, ordered = fields[:at], fields[at:]
        if (
            {path for path, _ in prefix} == eq_fields
            and range_fields <= {path for path, _ in ordered}
            and orders == [*ordered, ("__name__", ordered[-1][1])]
        ):
            return True
    return False


def test_every_declared_shape_sends_queries_the_file_serves(client: firestore.Client) -> None:
    spec = SeriesSpec(
        "instruments",
        shards=[f"s{i}" for i in range(40)],
        shapes=[
            QueryShape(("exchange",), ("desc", "asc")),
            QueryShape(("instrumentType", "price.currency")),
            QueryShape(("symbol",), "asc"),
        ],
    )
    indexes = json.loads(render(generate([spec])))["indexes"]  # as the file on disk holds them
    store = TimeSeriesStore(client, spec)
    value = {"exchange": "E", "instrumentType": "etf", "price.currency": "USD", "symbol": ["A", "B"]}
    checked = 0
    for shape in spec.all_shapes():
        for direction in shape.directions:
            for bounds in ({}, {"start": "2024-01-01T00:00:00Z", "end": "2024-01-02T00:00:00Z"}):
                plan = store.plan(where={f: value[f] for f in shape.fields}, direction=direction, limit=10, **bounds)
                for query in store.firestore_queries(plan):
                    assert served_by(query._to_protobuf(), indexes), (shape, direction, bounds)
                    checked += 1
    # (range-only 2 + exchange 2 + two-field 1 directions) x 2 bounds x 2 chunks, plus symbol 1 direction
    # x 2 bounds x 3 chunks (its 2-value `in` halves the chunk size: 40 shards -> 14 + 13 + 13)
    assert checked == 5 * 2 * 2 + 1 * 2 * 3
    # a series shape's one query and a value-filtered shape's chunks are served by their indexes too
    both = SeriesSpec(
        "instruments",
        shards=[f"s{i}" for i in range(40)],
        shapes=[
            QueryShape(("symbol",), ("desc", "asc"), series_rate=20),
            QueryShape(("exchange",), ("desc", "asc"), ranges=("volume", "price.micros")),
        ],  # fmt: skip
    )
    indexes = json.loads(render(generate([both])))["indexes"]
    other = TimeSeriesStore(client, both)
    for direction in ("desc", "asc"):
        series = other.plan(where={"symbol": "A"}, direction=direction, limit=10)
        ranged = other.plan(
            where=[("exchange", "==", "E"), ("volume", ">=", 100), ("price.micros", "!=", 0)], direction=direction
        )
        for plan, queries in ((series, 1), (ranged, 2)):
            sent = other.firestore_queries(plan)
            assert len(sent) == queries and all(served_by(q._to_protobuf(), indexes) for q in sent)
            assert not served_by(sent[0]._to_protobuf(), json.loads(render(generate([spec])))["indexes"])
    # an undeclared shape is refused locally, naming the index it would need
    with pytest.raises(
        QueryError, match=r"query shape \[exchange, symbol\] is not declared .*shard DESC, exchange ASC"
    ):
        store.plan(where={"exchange": "E", "symbol": "A"})
    with pytest.raises(QueryError, match=r"not declared for direction 'desc'"):
        store.plan(where={"symbol": "A"}, direction="desc")


def test_served_by_can_fail() -> None:
    """The coverage check itself must be able to say no."""
    q = StructuredQuery()
    q.order_by.append(StructuredQuery.Order(field={"field_path": "timestamp"}, direction="ASCENDING"))
    q.order_by.append(StructuredQuery.Order(field={"field_path": "__name__"}, direction="ASCENDING"))
    q.where.field_filter.field.field_path = "shard"
    q.where.field_filter.op = StructuredQuery.FieldFilter.Operator.IN
    desc_only = [i for i in generate([SEED])["indexes"] if i["fields"][-1]["order"] == "DESCENDING"]
    assert not served_by(q, desc_only)
    assert served_by(q, generate([SEED])["indexes"])


# --- merging into an existing file --------------------------------------------------------

EXISTING = """{
  // hand-written, with comments as the Firebase CLI allows
  "indexes": [
    {"collectionGroup": "users", "queryScope": "COLLECTION",
     "fields": [{"fieldPath": "country", "order": "ASCENDING"}, {"fieldPath": "age", "order": "DESCENDING"}]},
    /* the hotspot the guide says to delete */
    {"collectionGroup": "instruments", "queryScope": "COLLECTION",
     "fields": [{"fieldPath": "exchange", "order": "ASCENDING"}, {"fieldPath": "timestamp", "order": "DESCENDING"}]},
    {"collectionGroup": "instruments", "queryScope": "COLLECTION",
     "fields": [{"fieldPath": "symbol", "order": "ASCENDING"}, {"fieldPath": "exchange", "order": "ASCENDING"}]},
    {"collectionGroup": "instruments", "queryScope": "COLLECTION",
     "fields": [{"fieldPath": "shard", "order": "DESCENDING"}, {"fieldPath": "oldField", "order": "ASCENDING"},
                {"fieldPath": "timestamp", "order": "DESCENDING"}]},
    {"collectionGroup": "instruments", "queryScope": "COLLECTION",
     "fields": [{"fieldPath": "shard", "order": "DESCENDING"}, {"fieldPath": "exchange", "order": "ASCENDING"},
                {"fieldPath": "timestamp", "order": "DESCENDING"}]},
    {"collectionGroup": "orders", "queryScope": "COLLECTION_GROUP",
     "fields": [{"fieldPath": "status", "order": "ASCENDING"}, {"fieldPath": "timestamp", "order": "DESCENDING"}]},
  ],
  "fieldOverrides": [
    {"collectionGroup": "users", "fieldPath": "bio", "indexes": []},
    {"collectionGroup": "instruments", "fieldPath": "timestamp", "indexes": []},
  ]
}
"""


def test_merge_keeps_foreign_entries_replaces_ours_and_removes_stale(tmp_path: Path) -> None:
    path = tmp_path / "firestore.indexes.json"
    path.write_text(EXISTING)
    update = plan_index_file(path, [SEED])
    merged = json.loads(update.new_text)
    groups = [(i["collectionGroup"], [f["fieldPath"] for f in i["fields"]]) for i in merged["indexes"]]
    # foreign entries first, untouched and in their order
    assert groups[:3] == [
        ("users", ["country", "age"]),
        ("instruments", ["symbol", "exchange"]),
        ("orders", ["status", "timestamp"]),
    ]
    assert merged["indexes"][2]["queryScope"] == "COLLECTION_GROUP"
    assert merged["indexes"][3:] == generate([SEED])["indexes"]
    assert (
        merged["fieldOverrides"]
        == [{"collectionGroup": "users", "fieldPath": "bio", "indexes": []}] + generate([SEED])["fieldOverrides"]
    )
    report = update.report
    assert report.stale == ["instruments (exchange ASCENDING, timestamp DESCENDING)"]
    assert report.removed == ["instruments (shard DESCENDING, oldField ASCENDING, timestamp DESCENDING)"]
    assert report.unchanged == ["instruments (shard DESCENDING, exchange ASCENDING, timestamp DESCENDING)"]
    assert len(report.added) == 4
    assert report.summary() == (
        "indexes: 4 added, 1 unchanged, 1 removed, 1 stale timestamp index(es) without the shard removed; "
        "3 other index(es) and 1 other field override(s) kept; 2 field override(s) written"
    )
    assert update.dropped_comments and update.problems == ()
    # merging again changes nothing
    update.write()
    again = plan_index_file(path, [SEED])
    assert not again.changed and again.report.added == [] and len(again.report.unchanged) == 5


def test_merge_keeps_a_series_shapes_index_and_declares_each_index_once() -> None:
    spec = SeriesSpec(
        "instruments",
        shapes=[QueryShape(("symbol",), series_rate=50), QueryShape(("exchange",), "asc", ranges=("volume",))],
        measures=["volume"],
    )
    first, _ = merge({}, [spec])
    again, report = merge(first, [spec])
    assert again == first and not report.removed and not report.stale and not report.added
    generated = generate([spec])["indexes"]
    assert len({json.dumps(i) for i in generated}) == len(generated)  # sum(volume) reuses the range index
    assert {"fieldPath": "symbol", "order": "ASCENDING"} == generated[2]["fields"][0]  # no shard before it


def test_merge_can_keep_stale_indexes() -> None:
    import json5

    merged, report = merge(json5.loads(EXISTING), [SEED], keep_stale=True)
    fields = [[f["fieldPath"] for f in i["fields"]] for i in merged["indexes"] if i["collectionGroup"] == "instruments"]
    assert ["exchange", "timestamp"] in fields
    assert report.stale_kept and "kept" in report.summary()


# --- linting what the CLI would silently accept ---------------------------------------------


def test_lint_finds_what_the_cli_silently_accepts() -> None:
    document = {
        "indexes": [
            {"collectionGroup": "c", "queryScope": "COLLECTION", "fields": [{"fieldPath": "a", "order": "ASCENDING"}]},
            {
                "collectionGroup": "c",
                "queryScope": "COLLECTION",
                "colour": "red",
                "fields": [
                    {"fieldPath": "a", "order": "ASCENDING", "arrayConfig": "CONTAINS"},
                    {"fieldPath": "b", "ordr": "ASCENDING", "order": "DESCENDING"},
                ],
            },
        ],
        "fieldOverrides": [{"collectionGroup": "c", "fieldPath": "x", "indexes": [], "tll": True}],
        "extra": 1,
    }
    problems = lint(document)
    assert any("unknown top-level key 'extra'" in p for p in problems)
    assert any("at least two fields" in p and "indexes[0]" in p for p in problems)
    assert any("unknown key 'colour'" in p for p in problems)
    assert any("has order and arrayConfig; the CLI keeps only 'order'" in p for p in problems)
    assert any("unknown key 'ordr'" in p for p in problems)
    assert any("unknown key 'tll'" in p for p in problems)
    assert len(problems) == 6


# --- firebase-tools' own validation ------------------------------------------------------------


def test_firebase_tools_accepts_generated_and_merged_files(firebase_tools: FirebaseTools, tmp_path: Path) -> None:
    generated = tmp_path / "generated.json"
    generated.write_text(render(generate([SEED])))
    assert firebase_tools.validate("indexes", generated) == {"ok": True, "indexes": 5, "fieldOverrides": 2}
    merged = tmp_path / "merged" / "firestore.indexes.json"
    merged.parent.mkdir()
    merged.write_text(EXISTING)
    plan_index_file(merged, [SEED]).write()
    assert firebase_tools.validate("indexes", merged)["indexes"] == 8
    assert firebase_tools.validate("config", merged.parent / "firebase.json") == {"ok": True}
    for committed in ("firestore.indexes.json",):
        assert firebase_tools.validate("indexes", ROOT / "indexes" / committed)["ok"]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ({"indexes": [{"collectionGroup": "c", "queryScope": "NOPE", "fields": []}]}, "queryScope"),
        ({"indexes": [{"collectionGroup": "c", "queryScope": "COLLECTION", "fields": [{"fieldPath": "a"}]}]}, "order"),
        ({"indexes": [], "fieldOverrides": [{"collectionGroup": "c", "fieldPath": "t"}]}, "indexes"),
        (
            {"indexes": [{"collectionGroup": "c", "queryScope": "COLLECTION", "fields": [{"order": "ASCENDING"}]}]},
            "fieldPath",
        ),
        (
            {
                "indexes": [],
                "fieldOverrides": [{"collectionGroup": "c", "fieldPath": "t", "indexes": [], "ttl": "yes"}],
            },
            "ttl",
        ),
    ],
)
def test_firebase_tools_rejects_broken_files(
    firebase_tools: FirebaseTools, tmp_path: Path, broken: dict[str, Any], message: str
) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    result = firebase_tools.validate("indexes", path)
    assert not result["ok"] and message in result["error"]


# --- the CLI, as a user runs it ----------------------------------------------------------------


def tsstore(*args: str, cwd: Path) -> Ran:
    return run_tsstore(*args, cwd=cwd)


def test_cli_writes_checks_and_prints(tmp_path: Path) -> None:
    (tmp_path / "myschema.py").write_text(
        "from tsstore import SeriesSpec\n"
        "TICKS = SeriesSpec('instruments', shapes=['instrumentType', 'exchange', 'price.currency'])\n"
    )
    missing = tsstore("indexes", "myschema:TICKS", "--check", cwd=tmp_path)
    assert missing.returncode == 1 and "does not exist" in missing.stdout
    written = tsstore("indexes", "myschema:TICKS", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "indexes: 5 added, 0 unchanged, 0 removed" in written.stdout
    assert (tmp_path / "indexes" / "firebase.json").exists()
    ok = tsstore("indexes", "myschema:TICKS", "--check", cwd=tmp_path)
    assert ok.returncode == 0 and "up to date" in ok.stdout
    printed = tsstore("indexes", "myschema:TICKS", "--stdout", cwd=tmp_path)
    assert printed.stdout == (tmp_path / "indexes" / "firestore.indexes.json").read_text()
    # the declaration changes: the file on disk is stale, and --check says how
    (tmp_path / "myschema.py").write_text(
        "from tsstore import SeriesSpec\nTICKS = SeriesSpec('instruments', shapes=['instrumentType', 'symbol'])\n"
    )
    stale = tsstore("indexes", "myschema:TICKS", "--check", cwd=tmp_path)
    assert stale.returncode == 1
    assert '+          "fieldPath": "symbol",' in stale.stdout and '-          "fieldPath": "exchange",' in stale.stdout
    assert "is not what myschema:TICKS yields; run: tsstore indexes --spec myschema:TICKS" in stale.stderr


def test_cli_reports_stale_indexes_and_bad_declarations(tmp_path: Path) -> None:
    (tmp_path / "indexes").mkdir()
    (tmp_path / "indexes" / "firestore.indexes.json").write_text(EXISTING)
    (tmp_path / "series.toml").write_text(
        '[[series]]\ncollection = "instruments"\nshapes = ["instrumentType", "exchange", "price.currency"]\n'
    )
    done = tsstore("indexes", "series.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning: stale index instruments (exchange ASCENDING, timestamp DESCENDING)" in done.stderr
    assert "comments and trailing commas" in done.stderr
    bad = tsstore("indexes", "nosuchmodule:X", cwd=tmp_path)
    assert bad.returncode == 2 and "cannot import 'nosuchmodule'" in bad.stderr


def test_repository_index_file_matches_the_demo_declaration() -> None:
    update = plan_index_file(ROOT / "indexes" / "firestore.indexes.json", load_specs("tsstore.demo:DECLARATION"))
    assert not update.changed, update.diff()


# --- declarations in files ---------------------------------------------------------------------


def test_toml_declaration(tmp_path: Path) -> None:
    path = tmp_path / "series.toml"
    path.write_text(
        """
[[series]]
collection = "ticks"
writes_per_second = 1200
key_fields = ["symbol"]
shapes = [
  "exchange", ["exchange", "symbol"], {fields = ["venue"], directions = ["desc", "asc"]},
  {fields = ["symbol"], series_rate = 40}, {fields = ["venue"], ranges = ["volume"]},
]
columns = {symbol = "string", "price.micros" = "Int64"}
"""
    )
    [spec] = load_specs(str(path))
    assert spec == SeriesSpec(
        "ticks",
        shards=["s0", "s1", "s2"],
        key_fields=["symbol"],
        shapes=[
            "exchange",
            ("exchange", "symbol"),
            QueryShape(("venue",), ("desc", "asc")),
            QueryShape(("symbol",), series_rate=40),
            QueryShape(("venue",), ranges=("volume",)),
        ],
        columns={"symbol": "string", "price.micros": "Int64"},
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[[series]]\ncollection = 'a'\nshard = ['x']\n",
            r"unknown key\(s\) \['shard'\] .*allowed: collection, shards",
        ),
        ("[[series]]\nshards = ['x']\n", "needs 'collection'"),
        ("series = []\n", "non-empty 'series' list"),
        ("[[series]]\ncollection = 'a'\nshards = []\n", r"series\[0\]: shards is empty"),
        (
            "[[series]]\ncollection = 'a'\nshapes = [{fields = ['b'], dir = 'asc'}]\n",
            r"unknown key\(s\) \['dir'\] in shape",
        ),
        ("not toml = = 1", "does not parse"),
    ],
)
def test_bad_declaration_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "series.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_specs(str(path))


def test_a_removed_ttl_field_loses_its_override(tmp_path: Path) -> None:
    import datetime as dt

    path = tmp_path / "firestore.indexes.json"
    with_ttl = SeriesSpec("instruments", expire_after=dt.timedelta(days=7), expire_field="expiresAt")
    plan_index_file(path, [with_ttl]).write()
    assert '"ttl": true' in path.read_text()
    update = plan_index_file(path, [SeriesSpec("instruments")])
    assert '"ttl"' not in update.new_text
    assert "TTL override instruments.expiresAt" in update.report.removed
