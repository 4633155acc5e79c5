"""Shared fixtures: one real Firestore emulator per test session, one database per test.

The emulator is never skipped: if it cannot start, every test that needs it errors with the
:class:`tsstore.errors.EmulatorError` message (which says what to install or what went wrong).
Named databases need no creation on the emulator, so a fresh database id per test isolates
tests from each other far more cheaply than deleting documents between them. The fixtures
come from the plugin tsstore ships (``tsstore.local.pytest_plugin``), so users get the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore

from tsstore.local.emulator import EmulatorAt
from tsstore.local.pytest_plugin import unique_database_id

VALIDATOR = Path(__file__).parent / "firebase" / "validate.js"

# Bytecode caches on, for the processes the suite starts (xdist's workers, the pytest runs and
# commands of the docs and tests): with PYTHONDONTWRITEBYTECODE set, as some machines and
# containers set it, every pytest process rewrote the asserts of tsstore's and hypothesis'
# 180 modules again (collecting took 10.3 s instead of 4.1 s, measured).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "emulator: needs the Firestore emulator (a JVM); given to every test that uses the emulator fixture, and "
        "set by hand on those that start one themselves. `pytest -m 'not emulator'` runs the rest.",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tsstore_emulator" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.emulator)


# tsstore's own tests use the fixtures the package ships to users (tsstore.local.pytest_plugin),
# under shorter names.


@pytest.fixture(scope="session")
def emulator(tsstore_emulator: EmulatorAt) -> EmulatorAt:
    """The session's emulator (the plugin's ``tsstore_emulator``)."""
    return tsstore_emulator


@pytest.fixture
def client(tsstore_client: firestore.Client) -> firestore.Client:
    """A client on this test's own database (the plugin's ``tsstore_client``)."""
    return tsstore_client


@pytest.fixture
def database_id(request: pytest.FixtureRequest) -> str:
    """A database id unique to this test."""
    return unique_database_id(request.node.name)


@pytest.fixture
def collection_name(tsstore_collection: str) -> str:
    """A collection name unique to this test (the plugin's ``tsstore_collection``)."""
    return tsstore_collection


@pytest.fixture(scope="session")
def firebase_tools() -> Path:
    """firebase-tools installed by the README's test command (npm install --prefix tests/firebase)."""
    module = VALIDATOR.parent / "node_modules" / "firebase-tools" / "package.json"
    if not module.exists():
        pytest.fail(f"firebase-tools is not installed: run `npm install --prefix {VALIDATOR.parent} --ignore-scripts` (see README)")
    assert (
        json.loads(module.read_text())["version"]
        == json.loads((VALIDATOR.parent / "package.json").read_text())["dependencies"]["firebase-tools"]
    )
    return VALIDATOR


def firebase_validate(validator: Path, kind: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(["node", str(validator), kind, str(path)], capture_output=True, text=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (done.returncode == 0) == result["ok"], done
    return result
