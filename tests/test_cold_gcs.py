"""The cold tier in a Cloud Storage bucket, against fake-gcs-server (the real JSON API, its
generations and preconditions, resumable uploads): the object protocol as a local directory
keeps it, an object whose stored bytes are wrong never answered as placed, a seal to a bucket
equal to a seal to a directory, and a seal through a proxy that cuts the connection while
objects of several MB upload."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from google.api_core import exceptions as gexc
from google.cloud import storage

from tests.cli import run_cli
from tests.conftest import GcsAt, unique_database_id
from tests.scripted import seat
from tests.shared import T0, stored_doc, ticks
from tests.shared import spec as shared_spec
from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.cold import gcs
from tsstore.cold.gcs import GcsObjects, gcs_kind
from tsstore.cold.objects import Damaged, ObjectStoreError, ObjectUrls, Placed, Taken, answer_object
from tsstore.cold.parquet import ID_COLUMN
from tsstore.cold_tier import ColdTier
from tsstore.errors import ConfigError, FaultError
from tsstore.faults import Backoff
from tsstore.verbs import cold
from tsstore.verbs.request import answer

NAME = "ticks/date=2026-11-01/part-1.parquet"


# ---------------------------------------------------------------------------- the object protocol


def test_a_bucket_never_replaces_an_object(gcs_bucket: str) -> None:
    objects = GcsObjects(gcs_bucket, "lake")
    placed = objects.put_new(NAME, b"first")
    assert isinstance(placed, Placed) and placed.size == 5 and placed.generation > 0
    assert objects.put_new(NAME, b"second") == Taken(NAME)  # the bucket refused it: 412 on if_generation_match=0
    assert objects.get(NAME) == b"first"
    [listed] = objects.list("ticks/")
    assert (listed.name, listed.generation, listed.size) == (NAME, placed.generation, 5)
    assert storage.Client().bucket(gcs_bucket).get_blob(f"lake/{NAME}").size == 5  # under the prefix
    assert not objects.delete(NAME, generation=placed.generation + 1)  # another generation: left alone
    assert objects.get(NAME) == b"first"
    assert objects.delete(NAME, generation=placed.generation) and not objects.delete(NAME)
    assert objects.get(NAME) is None and objects.list("ticks/") == []
    assert objects.url(NAME) == f"gs://{gcs_bucket}/lake/{NAME}"


def test_a_large_object_goes_up_in_a_resumable_upload_and_is_checked(
    gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gcs, "RESUMABLE_ABOVE", 256 * 1024)
    monkeypatch.setattr(gcs, "CHUNK_BYTES", 256 * 1024)
    data = random.Random(1).randbytes(1024 * 1024 + 17)
    objects = GcsObjects(gcs_bucket)
    placed = objects.put_new(NAME, data)
    assert isinstance(placed, Placed) and placed.size == len(data)
    assert objects.get(NAME) == data
    assert objects.put_new(NAME, data) == Taken(NAME)


class Garbling(GcsObjects):
    """Stores one byte more than it is given, as a resumed upload was seen to."""

    def _upload(self, blob: Any, data: bytes) -> Any:
        return super()._upload(blob, data + b"!")


def test_an_object_whose_stored_bytes_are_wrong_is_deleted_and_never_placed(gcs_bucket: str) -> None:
    objects = Garbling(gcs_bucket)
    damaged = objects.put_new(NAME, b"twelve bytes")
    assert damaged == Damaged(NAME, "13 bytes were stored of the 12 written")
    assert objects.list("") == []  # deleted: nothing a later sealer could take for its own


def test_an_object_of_the_right_size_with_wrong_bytes_is_damaged(gcs_bucket: str) -> None:
    class Flipping(GcsObjects):
        def _upload(self, blob: Any, data: bytes) -> Any:
            return super()._upload(blob, data[::-1])

    damaged = Flipping(gcs_bucket).put_new(NAME, b"abc")
    assert isinstance(damaged, Damaged) and "CRC32C" in damaged.why
    assert GcsObjects(gcs_bucket).get(NAME) is None


def _status(code: int) -> Exception:
    return gexc.from_http_status(code, "said so")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (_status(429), "overload"),
        (_status(500), "fault"),
        (_status(502), "fault"),
        (_status(503), "fault"),
        (_status(501), None),
        (_status(403), None),
        (_status(412), None),
        (requests.exceptions.ConnectionError("reset"), "fault"),
        (requests.exceptions.ReadTimeout("slow"), "fault"),
        (ConnectionResetError("reset"), "fault"),
        (ValueError("no"), None),
    ],
)
def test_which_cloud_storage_failures_are_tried_again(error: Exception, kind: str | None) -> None:
    assert gcs_kind(error) == kind


def test_a_call_that_keeps_failing_is_tried_for_the_budget_then_named() -> None:
    clock = [0.0]
    attempts = []

    def cut() -> None:
        attempts.append(clock[0])
        raise requests.exceptions.ConnectionError("Connection aborted.")

    backoff = Backoff(budget=5.0, clock=lambda: clock[0], rand=lambda: 0.5)
    with pytest.raises(FaultError, match=r"writing gs://b/x failed: every attempt for 3 s failed before Cloud Storage "
                       r"answered \(6 attempts; last: ConnectionError: Connection aborted.\)"):
        gcs.call(cut, what="writing gs://b/x", backoff=backoff,
                 sleep=lambda pause: clock.__setitem__(0, clock[0] + pause))  # fmt: skip
    assert attempts == [0.0, 0.1, 0.30000000000000004, 0.7000000000000001, 1.5, 3.1]  # paused 0.1, 0.2, 0.4, ...


def refuse(error: Exception) -> None:
    raise error


def test_a_refusal_is_not_tried_again() -> None:
    with pytest.raises(ObjectStoreError, match=r"reading gs://b/x: Cloud Storage refused it \(Forbidden: no\)"):
        gcs.call(lambda: refuse(gexc.Forbidden("no")), what="reading gs://b/x", sleep=pytest.fail)
    with pytest.raises(gexc.PreconditionFailed):  # an answer its caller takes: the name is taken
        gcs.call(lambda: refuse(gexc.PreconditionFailed("taken")), what="x", sleep=pytest.fail)


def test_a_missing_bucket_is_named(gcs_server: GcsAt, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.url)
    with pytest.raises(ObjectStoreError, match="writing gs://no-such-bucket-here/x: there is no bucket 'no-such-bu"):
        GcsObjects("no-such-bucket-here").put_new("x", b"x")


def test_a_missing_extra_is_refused_by_name_before_anything_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.cloud.storage", None)
    spec = SeriesSpec("ticks", cold=ColdTier("gs://bucket/lake"))
    with pytest.raises(ConfigError, match=r"google-cloud-storage, which is not installed: pip install 'tsstore\[gcs\]"):
        answer(cold.seal(seat(spec)), lambda ask: pytest.fail(f"asked {ask!r}"))


def test_the_view_over_a_bucket_names_gs_urls() -> None:
    objects = GcsObjects("bucket", "lake")
    urls = answer_object(objects, ObjectUrls((NAME,)))
    assert urls == [f"gs://bucket/lake/{NAME}"]


# ---------------------------------------------------------------------------- sealing to a bucket, on the emulator


def _rows() -> list[dict[str, Any]]:
    return [{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % 3)} for row in ticks(60, seed=6)]


def test_a_seal_to_a_bucket_equals_a_seal_to_a_directory(
    emulator: Any, gcs_bucket: str, collection_name: str, tmp_path: Path
) -> None:
    start = T0.replace(hour=0)
    end = start + dt.timedelta(days=3)
    entries, tables = {}, {}
    for where, path in (("local", str(tmp_path / "lake")), ("gcs", f"gs://{gcs_bucket}/lake")):
        client = emulator.client(database=unique_database_id(f"gcs-{where}"))
        spec = shared_spec(collection_name, 3, cold=ColdTier(path))
        with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
            store.write(_rows())
            sealed = store.seal(until=end)
            assert sealed.rows == 60
            entries[where] = stored_doc(client, f"tsstore_cold/{collection_name}")["partitions"]
            view = store.cold_sql()
        client.close()
        tables[where] = [_read(path, entry["object"]) for _, entry in sorted(entries[where].items())]
        if where == "gcs":
            assert f"'gs://{gcs_bucket}/lake/{collection_name}/date=2026-03-02/part-1.parquet'" in view
            copy = storage.Client().bucket(gcs_bucket).get_blob(f"lake/{collection_name}/_manifest/3.json")
            assert copy.content_type == "application/json" and len(json.loads(copy.download_as_bytes())) > 0
    differ = ("object_generation", "sealed_at")
    assert {label: {k: v for k, v in e.items() if k not in differ} for label, e in entries["gcs"].items()} == {
        label: {k: v for k, v in e.items() if k not in differ} for label, e in entries["local"].items()
    }
    assert len(entries["gcs"]) == 3
    assert [t.to_pylist() for t in tables["gcs"]] == [t.to_pylist() for t in tables["local"]]


def _read(path: str, name: str) -> pa.Table:
    if path.startswith("gs://"):
        return pq.read_table(io.BytesIO(GcsObjects.at(path).get(name) or b""))
    return pq.read_table(Path(path) / name)


def test_the_seal_command_prints_a_view_over_gs_urls(
    emulator: Any, gcs_bucket: str, collection_name: str, tmp_path: Path
) -> None:
    database = unique_database_id("seal-gcs-sql")
    (tmp_path / "app.toml").write_text(
        f'[[series]]\ncollection = "{collection_name}"\nshards = ["s0", "s1", "s2"]\nkey_fields = ["symbol", "n"]\n'
        f'cold = {{ path = "gs://{gcs_bucket}/lake" }}\n'
    )
    client = emulator.client(database=database)
    with TimeSeriesStore(client, shared_spec(collection_name, 3), write_options=WriteOptions(ramp=False)) as store:
        store.write([{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % 2)} for row in ticks(20, 2)])
    client.close()
    common = ("--spec", "app.toml", "--database", database)
    sealed = run_cli("seal", *common, "--until", "2026-03-04T00:00:00Z", emulator=emulator, cwd=tmp_path)
    assert sealed.returncode == 0, sealed.stderr
    sql = run_cli("seal", *common, "--sql", emulator=emulator, cwd=tmp_path)
    assert sql.returncode == 0, sql.stderr
    assert sql.stdout == (
        f'CREATE OR REPLACE VIEW "{collection_name}" AS\nSELECT * FROM read_parquet([\n'
        f"    'gs://{gcs_bucket}/lake/{collection_name}/date=2026-03-02/part-1.parquet',\n"
        f"    'gs://{gcs_bucket}/lake/{collection_name}/date=2026-03-03/part-1.parquet'\n"
        "], hive_partitioning = true, union_by_name = true);\n"
    )
    declared = (tmp_path / "app.toml").read_text()
    (tmp_path / "app.toml").write_text(declared.replace(gcs_bucket, "no-such-bucket-here"))
    missing = run_cli("seal", *common, "--until", "2026-03-04T00:00:00Z", emulator=emulator, cwd=tmp_path)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert f"Error: listing gs://no-such-bucket-here/lake/{collection_name}/date=: there is no bucket" in missing.stderr
    assert "there is no bucket 'no-such-bucket-here'; create it, or give another gs:// path" in missing.stderr


def test_a_seal_through_cuts_seals_each_day_once_with_checked_bytes(
    emulator: Any, gcs_server: GcsAt, gcs_bucket: str, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects of about 1.2 MB each go up in resumable 256 KiB chunks through a proxy that cuts
    every connection about once a second: each day is sealed once, and the manifest names
    only objects whose bytes are the day's rows as query_table reads them."""
    monkeypatch.setattr(gcs, "RESUMABLE_ABOVE", 256 * 1024)
    monkeypatch.setattr(gcs, "CHUNK_BYTES", 256 * 1024)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://{gcs_server.proxy.address}")
    uploads: list[str] = []
    upload = GcsObjects._upload

    def cut_mid_way(objects: GcsObjects, blob: Any, data: bytes) -> Any:
        """Each Parquet object's first upload is cut a moment after it starts, besides the timed cuts."""
        if blob.name.endswith(".parquet") and blob.name not in uploads:
            threading.Timer(0.03, gcs_server.proxy.cut).start()
        uploads.append(blob.name)
        return upload(objects, blob, data)

    monkeypatch.setattr(GcsObjects, "_upload", cut_mid_way)
    noise = random.Random(3)
    rows = [{"symbol": "AAA", "n": i, "timestamp": T0 + dt.timedelta(days=i % 3, seconds=i),
             "blob": noise.randbytes(3_000).hex()} for i in range(1_200)]  # fmt: skip
    client = emulator.client(database=unique_database_id("gcs-cuts"))
    spec = SeriesSpec(collection_name, key_fields=["symbol", "n"], cold=ColdTier(f"gs://{gcs_bucket}/lake"))
    start, end = T0.replace(hour=0), T0.replace(hour=0) + dt.timedelta(days=3)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write(rows)
        with gcs_server.proxy.cutting(every=1.0, seed=4):
            sealed = store.seal(until=end)
        assert len(uploads) > len(set(uploads))  # an upload was cut and made again
        assert ([p.label for p in sealed.sealed], sealed.rows) == (["2026-03-02", "2026-03-03", "2026-03-04"], 1_200)
        assert min(p.size for p in sealed.sealed) > 1_000_000
        days = [store.query_table(start=start + dt.timedelta(days=d), end=start + dt.timedelta(days=d + 1),
                                  direction="asc") for d in range(3)]  # fmt: skip
        partitions = stored_doc(client, f"tsstore_cold/{collection_name}")["partitions"]
    client.close()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.url)
    objects = GcsObjects(gcs_bucket, "lake")
    for day, (label, entry) in zip(days, sorted(partitions.items())):
        data = objects.get(entry["object"])
        assert data is not None and len(data) == entry["bytes"]
        got = pq.read_table(io.BytesIO(data))
        assert got.select(day.column_names).to_pylist() == day.to_pylist(), label  # with the shard and the ids besides
        assert set(got.column_names) - set(day.column_names) == {ID_COLUMN, spec.shard_field}
    assert gcs_server.proxy.cuts >= 1
