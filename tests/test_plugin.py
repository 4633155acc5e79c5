"""The pytest plugin tsstore ships, used as a user would: from this module, and from a user's
own project that has no conftest at all."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.cloud import firestore

from tsstore import SeriesSpec, TimeSeriesStore, pytest_plugin
from tsstore.errors import EmulatorError

pytestmark = pytest.mark.emulator  # every test here starts emulators of its own


def test_shipped_fixtures_give_an_isolated_database(tsstore_client: firestore.Client, tsstore_collection: str) -> None:
    store = TimeSeriesStore(tsstore_client, SeriesSpec(tsstore_collection))
    assert list(tsstore_client.collection(tsstore_collection).stream()) == []  # fresh
    store.write([{"timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "v": 1}])
    assert [t.data["v"] for t in store.query()] == [1]


USER_TEST = """
import datetime as dt
import os
from tsstore import SeriesSpec, TimeSeriesStore

def test_write_and_read(tsstore_client, tsstore_collection):
    store = TimeSeriesStore(tsstore_client, SeriesSpec(tsstore_collection, shapes=["symbol"]))
    store.write([{"symbol": "A", "timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)}])
    assert [t.data["symbol"] for t in store.query(where={"symbol": "A"})] == ["A"]

def test_isolated(tsstore_client, tsstore_collection, tsstore_emulator):
    assert list(tsstore_client.collection(tsstore_collection).stream()) == []
    with open(f"seen-by-{os.environ['PYTEST_XDIST_WORKER']}", "w") as seen:
        seen.write(f"{tsstore_emulator.address} {type(tsstore_emulator).__name__}")
"""


def test_plugin_works_in_a_project_without_conftest(tmp_path: Path) -> None:
    """Run with two xdist workers, each running every test (``--dist each``), and the ini
    option that shares one emulator: both workers reach the same one, started by the
    controller. (Without xdist, the testing guide's runs start one of their own.)"""
    (tmp_path / "test_mine.py").write_text(USER_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntsstore_share_emulator = true\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "each", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    seen = {path.name: path.read_text() for path in tmp_path.glob("seen-by-*")}
    assert set(seen) == {"seen-by-gw0", "seen-by-gw1"}
    assert len(set(seen.values())) == 1 and seen["seen-by-gw0"].endswith(" EmulatorAt"), seen


def test_a_shared_emulator_that_cannot_start_is_tried_once_and_each_worker_gets_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tries: list[str] = []

    def refuse(*, mode: str) -> None:
        tries.append(mode)
        raise EmulatorError(f"no Java here for {mode} mode: install a JDK 17")

    monkeypatch.setattr(pytest_plugin, "start_emulator", refuse)
    shared = [pytest_plugin._SharedEmulator("native"), pytest_plugin._SharedEmulator("datastore")]
    nodes = [SimpleNamespace(workerinput={"workerid": f"gw{k}"}) for k in range(3)]
    for node in nodes:
        for each in shared:
            each.pytest_configure_node(node)
    assert tries == ["native", "datastore"]  # each mode's emulator tried once
    for node in nodes:
        assert node.workerinput["tsstore_emulator"] is None
        assert node.workerinput["tsstore_emulator_error"] == "no Java here for native mode: install a JDK 17"
        assert node.workerinput["tsstore_datastore_emulator"] is None
        why = node.workerinput["tsstore_datastore_emulator_error"]
        assert why == "no Java here for datastore mode: install a JDK 17"
    for each in shared:
        each.pytest_unconfigure()  # nothing to stop


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("localhost", r"tsstore_emulator_host = 'localhost' is not HOST:PORT \(e.g. 127.0.0.1:8080, or \[::1\]:8080\), "
                      "the form FIRESTORE_EMULATOR_HOST takes"),
        ("https://127.0.0.1:8080", r"tsstore_emulator_host = 'https://127.0.0.1:8080' is not HOST:PORT"),
        ("::1:8080", r"tsstore_emulator_host = '::1:8080' is not HOST:PORT"),
        ("http://127.0.0.1:8080/v1", r"tsstore_emulator_host = 'http://127.0.0.1:8080/v1' is not HOST:PORT"),
        ("127.0.0.1:1", r"tsstore_emulator_host = '127.0.0.1:1': no Firestore emulator answers there; start one"),
        ("http://127.0.0.1:1/", r"tsstore_emulator_host = 'http://127.0.0.1:1/': no Firestore emulator answers there"),
    ],
)  # fmt: skip
def test_an_emulator_host_that_is_not_one_says_so(address: str, message: str) -> None:
    with pytest.raises(EmulatorError, match=message):
        pytest_plugin.running_emulator(address)


def test_an_emulator_host_given_as_a_url_is_the_emulator_there(emulator: Any) -> None:
    # The emulator's own URL, as its start-up log shows it: before, a raw "ValueError:
    # Invalid IPv6 URL" from the first call.
    assert pytest_plugin.running_emulator(f"http://{emulator.address}").address == emulator.address


def test_an_emulator_host_in_datastore_mode_is_refused_naming_its_mode(datastore_emulator: Any) -> None:
    # Before, accepted, and each test's first call failed with a raw InvalidArgument.
    message = (
        rf"tsstore_emulator_host = '{datastore_emulator.address}': that emulator runs Firestore in Datastore mode, "
        r"and tsstore_emulator's clients are firestore.Client \(Native mode\); name an emulator in Native mode"
    )
    with pytest.raises(EmulatorError, match=message):
        pytest_plugin.running_emulator(datastore_emulator.address)
