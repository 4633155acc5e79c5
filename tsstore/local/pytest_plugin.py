"""A pytest plugin for testing your own code on the real Firestore emulator.

Installed with tsstore (entry point ``pytest11``), so its fixtures are available in any
test suite without a conftest:

- ``tsstore_emulator`` (session): a running emulator, started once, stopped at the end;
  never skipped: if it cannot start, tests error with the reason (what to install).
- ``tsstore_client``: a ``google.cloud.firestore.Client`` on a database of its own, so
  tests never see each other's documents (the emulator needs no database creation).
- ``tsstore_collection``: a collection name unique to the test.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from google.cloud import firestore

from tsstore.limits import DATABASE_ID_PATTERN
from tsstore.local.emulator import Emulator, start_emulator

_DATABASE_ID = re.compile(DATABASE_ID_PATTERN)


def unique_database_id(hint: str = "t") -> str:
    """A database id no other test uses, readable in emulator logs (``t-<test name>-<random>``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-")[:40].rstrip("-") or "t"
    database = f"t-{slug}-{uuid.uuid4().hex[:8]}"
    assert _DATABASE_ID.fullmatch(database), database
    return database


@pytest.fixture(scope="session")
def tsstore_emulator() -> Iterator[Emulator]:
    """The session's Firestore emulator; stopped (its JVM gone) when the session ends."""
    running = start_emulator()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def tsstore_client(tsstore_emulator: Emulator, request: pytest.FixtureRequest) -> Iterator[firestore.Client]:
    """A client on a database of this test's own, closed afterwards."""
    made = tsstore_emulator.client(database=unique_database_id(request.node.name))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def tsstore_collection() -> str:
    """A collection name unique to this test."""
    return f"ticks-{uuid.uuid4().hex[:12]}"
