"""Shared fixtures: one real Firestore emulator per test session, one database per test.

The emulator is never skipped: if it cannot start, every test that needs it errors with the
:class:`tsstore.errors.EmulatorError` message (which says what to install or what went wrong).
Named databases need no creation on the emulator, so a fresh database id per test isolates
tests from each other far more cheaply than deleting documents between them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from google.cloud import firestore

from tsstore.emulator import Emulator, start_emulator

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
