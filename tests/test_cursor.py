"""Cursors: round trip, tamper and cross-query detection."""

from __future__ import annotations

import datetime as dt

import pytest

from tsstore import CursorError, SeriesSpec, plan_query
from tsstore.read.cursor import decode_cursor, encode_cursor

UTC = dt.timezone.utc
SPEC = SeriesSpec("t", shapes=[("exchange",)])
T = dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_round_trip_keeps_microseconds_and_id() -> None:
    plan = plan_query(SPEC, where={"exchange": "E"}, limit=10)
    token = encode_cursor(plan, (T, "doc-1"))
    assert decode_cursor(plan_query(SPEC, where={"exchange": "E"}, limit=99), token) == (T, "doc-1")


def test_cursor_from_another_query_is_refused() -> None:
    token = encode_cursor(plan_query(SPEC, where={"exchange": "E"}), (T, "doc-1"))
    with pytest.raises(CursorError, match="different query"):
        decode_cursor(plan_query(SPEC, where={"exchange": "F"}), token)
    with pytest.raises(CursorError, match="different query"):
        decode_cursor(plan_query(SPEC, where={"exchange": "E"}, direction="desc", start=T), token)


@pytest.mark.parametrize("token", ["", "garbage!!", "eyJ2IjoxfQ"])
def test_malformed_cursor(token: str) -> None:
    with pytest.raises(CursorError, match="not a tsstore cursor"):
        decode_cursor(plan_query(SPEC), token)
