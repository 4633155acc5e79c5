"""Shared fixtures: one real Firestore emulator per test session, one database per test.

The emulator is never skipped: if it cannot start, every test that needs it errors with the
:class:`tsstore.errors.EmulatorError` message (which says what to install or what went wrong).
Named databases need no creation on the emulator, so a fresh database id per test isolates
tests from each other far more cheaply than deleting documents between them.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore

from tsstore.emulator import Emulator, start_emulator

VALIDATOR = Path(__file__).parent / "firebase" / "validate.js"

DATABASE_ID = re.compile(r"[a-z][a-z0-9-]{2,61}[a-z0-9]")


def unique_database_id(hint: str = "t") -> str:
    """A database id no other test uses, readable in emulator logs (``t-<test name>-<random>``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-")[:40].rstrip("-") or "t"
    database = f"t-{slug}-{uuid.uuid4().hex[:8]}"
    assert DATABASE_ID.fullmatch(database), database
    return database


@pytest.fixture(scope="session")
def emulator() -> Iterator[Emulator]:
    """The session's emulator; stopped (and its JVM gone) when the session ends."""
    running = start_emulator()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def database_id(request: pytest.FixtureRequest) -> str:
    """A database id unique to this test."""
    return unique_database_id(request.node.name)


@pytest.fixture
def client(emulator: Emulator, database_id: str) -> Iterator[firestore.Client]:
    """A client on this test's own database of the session emulator, closed afterwards."""
    made = emulator.client(database=database_id)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def collection_name() -> str:
    """A collection name unique to this test."""
    return f"ticks-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def firebase_tools() -> Path:
    """firebase-tools installed by the README's test command (npm install --prefix tests/firebase)."""
    module = VALIDATOR.parent / "node_modules" / "firebase-tools" / "package.json"
    if not module.exists():
        pytest.fail(f"firebase-tools is not installed: run `npm install --prefix {VALIDATOR.parent}` (see README)")
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
