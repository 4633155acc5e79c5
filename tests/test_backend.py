"""The one place a client's database mode is decided (``tsstore.backend.backend_for``): a
``firestore.Client`` is Native mode, a ``datastore.Client`` Datastore mode, anything else is
refused by name, by both stores, before anything is asked. No emulator: a client is made
without a call."""

from __future__ import annotations

import asyncio

import pytest

from tsstore import AsyncTimeSeriesStore, SeriesSpec, TimeSeriesStore
from tsstore.backend import backend_for
from tsstore.datastore_mode import DatastoreAnswers
from tsstore.errors import ConfigError, ModeError
from tsstore.local.emulator import datastore_client, emulator_client
from tsstore.modes import LIVE_REFUSED, DatastoreKind
from tsstore.native_mode import NativeAnswers

SPEC = SeriesSpec("ticks")
NOT_A_CLIENT = r"client builtins\.dict is not allowed; give a google\.cloud\.firestore\.Client \(Native mode\) or a google\.cloud\.datastore\.Client \(Datastore mode\)"  # noqa: E501


def test_each_client_gets_its_databases_backend_and_collections() -> None:
    native = backend_for(emulator_client("127.0.0.1:1"), SPEC)
    assert isinstance(native, NativeAnswers)
    assert native.collection(SPEC).id == "ticks" and native.collection(SeriesSpec("bars")).id == "bars"
    datastore = backend_for(datastore_client("127.0.0.1:1"), SPEC)
    assert isinstance(datastore, DatastoreAnswers)
    assert datastore.collection(SeriesSpec("bars")) == DatastoreKind("bars")
    with pytest.raises(ModeError) as refused:  # no listeners in Datastore mode, said before any read
        datastore.live_collection(SPEC)
    assert str(refused.value) == LIVE_REFUSED


def test_a_client_of_no_known_database_is_refused_by_name_by_both_stores() -> None:
    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        backend_for({}, SPEC)
    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        TimeSeriesStore({}, SPEC)  # type: ignore[arg-type]

    async def made() -> None:
        AsyncTimeSeriesStore({}, SPEC)  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        asyncio.run(made())
