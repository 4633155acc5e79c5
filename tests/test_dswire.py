"""Datastore mode's wire without the emulator: values and keys as the public client reads
them, and value filters asked as variants that give Native mode's answers in its order."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from typing import Any

import pytest
from google.cloud.datastore import helpers

from tsstore import QueryShape, SeriesSpec
from tsstore.dswire import kinds, queries
from tsstore.dswire.values import ENTITY_PB, decode_entity, encode_entity, key, key_path, partition
from tsstore.errors import ModeError
from tsstore.read.plan import plan_query
from tsstore.ticks import Tick

UTC = dt.timezone.utc
WHERE = partition("p", "db", None)


def public(value: Any) -> Any:
    """The public client's decoding, as plain values (its Entity is a dict; its times carry nanoseconds)."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items()}
    if isinstance(value, list):
        return [public(v) for v in value]
    if isinstance(value, dt.datetime):
        return dt.datetime(*value.timetuple()[:6], value.microsecond, tzinfo=UTC)
    return value


def test_the_raw_decoding_equals_the_public_clients_on_a_mixed_entity() -> None:
    data = {
        "symbol": "AAA", "n": 7, "big": 2**62, "price": {"micros": 1_234_500, "currency": "USD"},
        "deep": {"x": {"y": None}}, "ratio": 0.25, "flag": True, "off": False, "none": None, "blob": b"\x00\xff",
        "empty": {}, "list": [1, "a", 2.5],
        "at": dt.datetime(2024, 3, 10, 7, 30, 1, 123456, tzinfo=UTC), "long": "é" * 1000, "nothing": [],
    }  # fmt: skip
    pb = ENTITY_PB()
    pb.key.CopyFrom(key(WHERE, "ticks/id1"))
    encode_entity(pb, data)
    assert decode_entity(pb) == data
    assert public(dict(helpers.entity_from_protobuf(pb))) == data  # the public client reads what tsstore wrote
    assert pb.properties["long"].exclude_from_indexes  # over 1 500 bytes: Datastore mode would refuse it indexed
    assert not pb.properties["symbol"].exclude_from_indexes
    assert key_path(pb.key) == "ticks/id1"


@pytest.mark.parametrize(("value", "why"), [([[1]], "no array inside an array"), (object(), "type object")])
def test_a_value_datastore_mode_cannot_store_is_named(value: Any, why: str) -> None:
    with pytest.raises(ModeError, match=why):
        encode_entity(ENTITY_PB(), {"v": value})


SPEC = SeriesSpec("t", shapes=["symbol", QueryShape((), ("desc", "asc"), ranges=["v"])], shards=["a", "b"])


def variant_kinds(where: list[tuple[str, str, Any]]) -> list[tuple[tuple[str, str], ...]]:
    split = kinds.variants(plan_query(SPEC, where=where))
    assert split is not None
    return [v.kinds for v in split]


def test_a_number_range_reads_integers_and_doubles_and_ne_reads_every_kind() -> None:
    assert kinds.variants(plan_query(SPEC, where={"symbol": "AAA"})) is None  # text equality: as it is
    assert variant_kinds([("v", ">=", 10)]) == [(("v", "int"),), (("v", "double"),)]
    assert variant_kinds([("v", ">", "b")]) == [(("v", "str"),)]
    assert [k for ((_, k),) in variant_kinds([("v", "!=", 5)])] == list(kinds.KIND_BOUNDS)
    assert variant_kinds([("v", ">", 5), ("v", "<", "z")]) == []  # a value of two kinds at once: nothing
    [integers, doubles] = kinds.variants(plan_query(SPEC, where=[("v", ">", 10.5)])) or []
    assert ("v", ">=", 11) in integers.conditions and ("v", ">", 10.5) in doubles.conditions
    # a number in an equality is asked as both types, the text once
    split = kinds.variants(plan_query(SPEC, where={"symbol": ["AAA", 100]})) or []
    assert [v.conditions for v in split] == [(("symbol", "in", ("AAA", 100)),), (("symbol", "in", (100.0,)),)]


@pytest.mark.parametrize(
    ("value", "kind", "held", "descending", "want"),
    [
        (100, "int", False, False, ("", ">", 100)),
        (100, "double", True, False, ("", "==", 100.0)),
        (10.5, "int", True, False, kinds.NOTHING),  # no integer equals 10.5
        (10.5, "int", False, False, ("", ">=", 11)),
        (10.5, "int", False, True, ("", "<=", 10)),
        ("x", "int", False, False, kinds.NOTHING),  # ascending: every number comes before a string
        ("x", "int", False, True, kinds.EVERYTHING),
        (math.nan, "double", False, False, kinds.EVERYTHING),  # NaN comes before every number
        (math.nan, "nan", True, False, ("", "==", math.nan)),
    ],
)
def test_a_position_is_translated_into_each_kind_in_natives_order(
    value: Any, kind: str, held: bool, descending: bool, want: Any
) -> None:
    got = kinds.position(value, kind, held=held, descending=descending)
    if isinstance(want, tuple) and isinstance(want[2], float) and math.isnan(want[2]):
        assert isinstance(got, tuple) and got[:2] == want[:2] and math.isnan(got[2])
    else:
        assert got == want


def test_native_rules_decide_what_a_variant_keeps() -> None:
    plan = plan_query(SPEC, where=[("v", "!=", 100)])
    split = {v.kinds[0][1]: v for v in kinds.variants(plan) or []}
    tick = {"v": 100.0}  # Native mode: 100.0 equals 100, so != drops it
    assert not split["double"].keeps(plan, tick)
    assert split["time"].keeps(plan, {"v": dt.datetime(2024, 1, 1, tzinfo=UTC)})
    assert not split["int"].keeps(plan, {"v": dt.datetime(2024, 1, 1, tzinfo=UTC)})  # its kind is the time variant's
    assert not split["int"].keeps(plan, {"v": None}) and not split["int"].keeps(plan, {})


def test_a_chunk_continued_after_a_tie_is_read_as_disjoint_queries_in_order() -> None:
    plan = plan_query(SPEC, where=[("v", ">=", 10)], direction="asc")
    [integers, _] = kinds.variants(plan) or []
    at = dt.datetime(2024, 1, 1, tzinfo=UTC)
    after = plan.key(Tick("id5", at, {"v": 12.5}))
    asked = queries.continued(WHERE, plan, ("a",), after, variant=integers)
    # no integer equals 12.5: the levels holding it are left out; the integers beyond it at
    # that time (from 13), then every later time
    assert len(asked) == 2
    first = asked[0].filter.composite_filter.filters
    assert any(f.property_filter.property.name == "v" and f.property_filter.value.integer_value == 13 for f in first)


def test_what_datastore_mode_lacks_is_one_clear_error_before_any_call() -> None:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import datastore

    from tsstore import AsyncTimeSeriesStore, TimeSeriesStore

    # A real client on an address nothing listens at: every refusal below comes before a call.
    client = datastore.Client(project="p", credentials=AnonymousCredentials(),
                              client_options=ClientOptions(api_endpoint="http://127.0.0.1:9"))  # fmt: skip
    store = TimeSeriesStore(client, SPEC)
    with pytest.raises(ModeError, match="Datastore mode, which takes no Firestore query"):
        store.firestore_queries(store.plan())
    with pytest.raises(ModeError, match="real-time listeners, which Datastore mode does not have; poll with"):
        store.watch(limit=5)
    astore = AsyncTimeSeriesStore(client, SPEC)  # served, by the sync store in threads; its live reads are not
    with pytest.raises(ModeError, match="real-time listeners"):
        astore.tail(since=dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
    astore.close()
    store.close()


GCLOUD_PARSE = """
import json, sys
from googlecloudsdk.appengine.datastore import datastore_index
parsed = datastore_index.ParseIndexDefinitions(sys.stdin.read())
print(json.dumps([[i.kind, i.ancestor, [[p.name, p.direction] for p in i.properties]] for i in parsed.indexes]))
"""


def test_the_index_yaml_is_what_gclouds_own_parser_reads_back() -> None:
    """The demo's declaration and one with measures and a series shape, as gcloud's own
    ``index.yaml`` parser (the one ``gcloud datastore indexes create`` runs) reads them."""
    import json
    import subprocess
    import sys

    from tsstore.demo import SPEC as DEMO
    from tsstore.indexes.build import declared_indexes
    from tsstore.indexes.datastore import datastore_indexes, render_index_yaml
    from tsstore.local.emulator import WELL_KNOWN_SDK_ROOTS

    lib = next((root / "lib" for root in WELL_KNOWN_SDK_ROOTS if (root / "lib" / "googlecloudsdk").is_dir()), None)
    assert lib is not None, f"the Google Cloud SDK's lib/ is not under {WELL_KNOWN_SDK_ROOTS} (it ships the emulator)"
    other = SeriesSpec("trades", shards=["a", "b"], shapes=["venue", QueryShape(("symbol",), series_rate=50)],
                       key_fields=["symbol"], measures=["qty"])  # fmt: skip
    text = render_index_yaml([DEMO, other])
    done = subprocess.run([sys.executable, "-c", GCLOUD_PARSE], input=text, capture_output=True, text=True,
                          env={"PYTHONPATH": f"{lib}:{lib / 'third_party'}"}, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    want = [[e["kind"], False, [[p["name"], p["direction"]] for p in e["properties"]]]
            for e in datastore_indexes([DEMO, other])]  # fmt: skip
    assert parsed == want and len(parsed) == len(set(declared_indexes(DEMO)) | set(declared_indexes(other)))
    # a descending order ends in the key, descending; an ascending one leaves it implicit
    assert all(props[-2][1] == "desc" if props[-1][0] == "__key__" else props[-1][1] == "asc" for _, _, props in parsed)
    assert any(props[-1] == ["__key__", "desc"] for _, _, props in parsed)


def test_the_datastore_indexes_command_writes_checks_and_names_a_stale_file(tmp_path: Any) -> None:
    from tests.cli import tsstore

    (tmp_path / "series.toml").write_text('[[series]]\ncollection = "ticks"\nshapes = ["symbol"]\n')
    wrote = tsstore("datastore-indexes", "--spec", "series.toml", cwd=tmp_path)
    assert wrote.returncode == 0 and "wrote indexes/index.yaml" in wrote.stdout, wrote.stderr
    text = (tmp_path / "indexes" / "index.yaml").read_text()
    assert "- kind: ticks" in text and "  - name: __key__\n    direction: desc" in text
    assert tsstore("datastore-indexes", "--spec", "series.toml", "--check", cwd=tmp_path).returncode == 0
    (tmp_path / "indexes" / "index.yaml").write_text(text.replace("direction: desc", "direction: asc", 1))
    stale = tsstore("datastore-indexes", "--spec", "series.toml", "--check", cwd=tmp_path)
    assert stale.returncode == 1 and "is not what series.toml yields; run: tsstore datastore-indexes" in stale.stderr
    assert "+    direction: desc" in stale.stdout  # the diff says what the declaration wants


def test_a_merge_names_the_leaf_paths_it_sets() -> None:
    from tsstore.dswire.calls import leaf_paths

    changes = {"by": {"AAA": 1, "a.b": {"c": 2}}, "empty": {}, "x`y": None, "n": 3}
    assert leaf_paths(changes) == ["by.AAA", "by.`a.b`.c", "empty", "`x\\`y`", "n"]


def test_merges_from_two_writers_at_once_keep_every_field(datastore_emulator: Any) -> None:
    """A merge (a roll-up's watermark, retention's horizon in the same document) is one write
    the server merges (its property mask): two threads merging 15 fields each into one map of
    one entity at once lose none (a read, then a write of the whole entity, lost some)."""
    from concurrent.futures import ThreadPoolExecutor

    from tsstore.asks import GetDoc, SetDoc
    from tsstore.dswire.calls import DatastoreCalls, answer_document

    calls = DatastoreCalls(datastore_emulator.datastore_client(database=f"merge-{uuid.uuid4().hex[:10]}"))

    def merges(writer: str) -> None:
        for n in range(15):
            answer_document(calls, SetDoc("tsstore_rollups/bars", {"by": {f"{writer}{n}": n}}, "a merge", merge=True))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(merges, ["a", "b"]))
    stored = answer_document(calls, GetDoc("tsstore_rollups/bars", "the document")).data
    assert stored == {"by": {f"{w}{n}": n for w in "ab" for n in range(15)}}


def test_a_read_larger_than_the_client_takes_comes_in_batches_at_one_read_time(datastore_emulator: Any) -> None:
    """The emulator answers a query in one batch however large; the client takes 4 MB. 3 000
    ticks of 1.4 KB each (4.3 MB) are read whole, in order, and a page of 2 600 of them: each
    RunQuery call asks for at most ``BATCH_ENTITIES``, one still too large for the client is
    asked again for half as many, and the rest follows by cursor."""
    from tsstore import TimeSeriesStore, WriteOptions
    from tsstore.dswire.calls import BATCH_ENTITIES

    assert BATCH_ENTITIES > 3_000  # so the first call's answer is the one too large
    client = datastore_emulator.datastore_client(database=f"big-{uuid.uuid4().hex[:10]}")
    store = TimeSeriesStore(client, SeriesSpec("ticks", shards=["a", "b", "c"], key_fields=["n"]),
                            write_options=WriteOptions(ramp=False))  # fmt: skip
    t0 = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
    store.write([{"n": n, "timestamp": t0 + dt.timedelta(seconds=n), "note": f"{n:05d}" + "x" * 1_400}
                 for n in range(3_000)])  # fmt: skip
    every = [tick.data["n"] for tick in store.iter_ticks()]
    assert every == list(range(2_999, -1, -1))
    assert [tick.data["n"] for tick in store.query(limit=2_600, direction="asc")] == list(range(2_600))
