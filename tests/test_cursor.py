"""Cursors: round trip, tamper and cross-query detection."""

from __future__ import annotations

import datetime as dt

import pytest

from tsstore import CursorError, QueryShape, SeriesSpec, plan_query
from tsstore.read.cursor import cursor_snapshot, decode_cursor, encode_cursor
from tsstore.ticks import Ordered

UTC = dt.timezone.utc
SPEC = SeriesSpec("t", shapes=[("exchange",)])
T = dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_round_trip_keeps_microseconds_and_id() -> None:
    plan = plan_query(SPEC, where={"exchange": "E"}, limit=10)
    token = encode_cursor(plan, (T, "doc-1"))
    assert decode_cursor(plan_query(SPEC, where={"exchange": "E"}, limit=99), token) == (T, "doc-1")


def test_a_cursor_carries_its_pages_snapshot_and_one_without_carries_none() -> None:
    plan = plan_query(SPEC, where={"exchange": "E"}, limit=10)
    read_at = T + dt.timedelta(minutes=5, microseconds=7)
    token = encode_cursor(plan, (T, "doc-1"), snapshot=read_at)
    assert cursor_snapshot(token) == read_at and decode_cursor(plan, token) == (T, "doc-1")
    assert cursor_snapshot(encode_cursor(plan, (T, "doc-1"))) is None
    assert cursor_snapshot("garbage!!") is None and cursor_snapshot("WzFd") is None  # "[1]": not a cursor


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


RANGED = SeriesSpec("t", shapes=[QueryShape(["exchange"], ranges=["v", "w"])])


@pytest.mark.parametrize("value", [7, -(2**63), 2.5, float("inf"), "text", True, None, b"\x00\xff", T])
def test_a_range_querys_cursor_carries_the_order_values(value: object) -> None:
    plan = plan_query(RANGED, where=[("exchange", "==", "E"), ("v", "!=", 0), ("w", ">", 1)], limit=10)
    token = encode_cursor(plan, (T, Ordered(value), Ordered(3), "doc-1"))
    position = decode_cursor(plan, token)
    assert position == (T, Ordered(value), Ordered(3), "doc-1")
    assert type(position[1].raw) is type(value)  # an integer stays an integer, bytes stay bytes
    with pytest.raises(CursorError, match="different query"):  # the same filters without a range
        decode_cursor(plan_query(RANGED, where=[("exchange", "==", "E"), ("v", "!=", 0), ("w", ">", 2)]), token)


def test_a_cursor_cannot_hold_a_map() -> None:
    plan = plan_query(RANGED, where=[("exchange", "==", "E"), ("v", "!=", 0), ("w", ">", 1)], limit=10)
    with pytest.raises(CursorError, match="cannot hold the dict value"):
        encode_cursor(plan, (T, Ordered({"a": 1}), Ordered(3), "doc-1"))
