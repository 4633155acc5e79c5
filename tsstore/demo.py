"""The demo's declaration: the seed's ``instruments`` collection and its query shapes.

``tsstore demo`` writes and queries it; ``tsstore indexes tsstore.demo:SPEC`` generates
the repository's ``indexes/firestore.indexes.json`` from it.
"""

from __future__ import annotations

from tsstore.spec import QueryShape, SeriesSpec

_BOTH = ("desc", "asc")

SPEC = SeriesSpec(
    "instruments",
    shapes=[QueryShape((f,), _BOTH) for f in ("instrumentType", "exchange", "price.currency", "symbol")],
    key_fields=["symbol"],
    columns={
        "symbol": "string",
        "exchange": "string",
        "instrumentType": "string",
        "price.currency": "string",
        "price.micros": "Int64",
        "volume": "Int64",
    },
)
