"""The pytest plugin tsstore ships, used as a user would: from this module, and from a user's
own project that has no conftest at all."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

from google.cloud import firestore

from tsstore import SeriesSpec, TimeSeriesStore


def test_shipped_fixtures_give_an_isolated_database(tsstore_client: firestore.Client, tsstore_collection: str) -> None:
    store = TimeSeriesStore(tsstore_client, SeriesSpec(tsstore_collection))
    assert list(tsstore_client.collection(tsstore_collection).stream()) == []  # fresh
    store.write([{"timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "v": 1}])
    assert [t.data["v"] for t in store.query()] == [1]


USER_TEST = """
import datetime as dt
from tsstore import SeriesSpec, TimeSeriesStore

def test_write_and_read(tsstore_client, tsstore_collection):
    store = TimeSeriesStore(tsstore_client, SeriesSpec(tsstore_collection, shapes=["symbol"]))
    store.write([{"symbol": "A", "timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)}])
    assert [t.data["symbol"] for t in store.query(where={"symbol": "A"})] == ["A"]

def test_isolated(tsstore_client, tsstore_collection):
    assert list(tsstore_client.collection(tsstore_collection).stream()) == []
"""


def test_plugin_works_in_a_project_without_conftest(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(USER_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
