"""Firestore's unit prices by location, kept as data: one table that every figure of money
in tsstore comes from (a read's price after it ran, :class:`~tsstore.read.cost.ReadStats`;
a query's bound before, :class:`~tsstore.read.explain.Explanation`; a month of a write rate,
:func:`~tsstore.layout.capacity.capacity_for`).

The prices are Standard edition's list prices in USD, as Google's pricing page gave them on
the date each row says (:data:`PRICES_READ`). Datastore mode is billed by the same table:
its pricing page sends the reader to Firestore's prices by location, an entity read, write
or delete costing what a document read, write or delete costs there
(:data:`DATASTORE_SAME_AS_NATIVE`). An aggregation (``count()``, ``sum()``, ``avg()``) and
the index entries a query with two or more range fields reads are billed as reads (one per
batch of up to 1 000 entries), so they take the read price.

A location the table does not hold is refused by name (:func:`prices_for`): a bill at some
other location's prices would look right and be wrong. An undeclared location is priced at
:data:`DEFAULT_LOCATION`, and every figure says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from tsstore.errors import SpecError

#: Where the prices were read: Firestore's pricing page (Native mode) and Datastore mode's.
FIRESTORE_PRICING = "https://cloud.google.com/firestore/pricing"
DATASTORE_PRICING = "https://cloud.google.com/datastore/pricing"
#: When they were read (year and month).
PRICES_READ = "2026-11"
#: The location a declaration that names none is priced at: the multi-region most projects
#: start in, and with eur3 the dearest row of the table (so an undeclared bill is not low).
DEFAULT_LOCATION = "nam5"
#: Datastore mode's entity reads, writes and deletes cost what Native mode's document reads,
#: writes and deletes cost at the same location (its pricing page prices by Firestore's table).
DATASTORE_SAME_AS_NATIVE = True

#: A database's mode, as a bill names its units (documents or entities).
PriceMode = Literal["native", "datastore"]
_PER = 100_000


@dataclass(frozen=True)
class Prices:
    """Firestore's unit prices in USD at one location (Standard edition). :func:`prices_for`
    gives a row of the table; pass your own for a negotiated price or another currency."""

    #: When these prices were read (year and month), shown beside every figure of money.
    as_of: str = PRICES_READ
    #: The location they are for (``nam5``, ``us-central1``, ...), shown beside every figure.
    location: str = DEFAULT_LOCATION
    #: USD per 100 000 document reads (and per 100 000 batches of index entries an aggregation,
    #: or a query with two or more range fields, reads).
    reads_per_100k: float = 0.06
    #: USD per 100 000 document writes.
    writes_per_100k: float = 0.18
    #: USD per 100 000 document deletes.
    deletes_per_100k: float = 0.02
    #: USD per GiB stored for a month (documents and their index entries).
    storage_gib_month: float = 0.18
    #: Where the prices were read.
    source: str = FIRESTORE_PRICING
    #: The database mode they price (Datastore mode bills entities at the same prices).
    mode: PriceMode = "native"
    #: Whether the location was declared; ``False``: none was, so :data:`DEFAULT_LOCATION`'s
    #: prices stand in, and :meth:`describe` says so.
    declared: bool = True

    def reads(self, count: float) -> float:
        """USD for ``count`` billed reads.

        - ``count``: how many billed reads"""
        return count / _PER * self.reads_per_100k

    def writes(self, count: float) -> float:
        """USD for ``count`` writes.

        - ``count``: how many writes"""
        return count / _PER * self.writes_per_100k

    def deletes(self, count: float) -> float:
        """USD for ``count`` deletes.

        - ``count``: how many deletes"""
        return count / _PER * self.deletes_per_100k

    def storage(self, gib_months: float) -> float:
        """USD for storage.

        - ``gib_months``: GiB stored times months (1 GiB for a month, or 30 GiB for a day of 30)"""
        return gib_months * self.storage_gib_month

    def describe(self) -> str:
        """Which prices these are: location, mode, date and source, in one phrase."""
        where = self.location if self.declared else f"{self.location} (no location declared)"
        mode = "Datastore mode" if self.mode == "datastore" else "Native mode"
        return f"{where} prices, {mode}, of {self.as_of} ({self.source})"


def _row(location: str, reads: float, writes: float, deletes: float, storage: float) -> Prices:
    return Prices(location=location, reads_per_100k=reads, writes_per_100k=writes, deletes_per_100k=deletes,
                  storage_gib_month=storage)  # fmt: skip


#: Native mode's prices by location: reads, writes and deletes per 100 000, storage per GiB-month.
#: When the table was written, the multi-region reads, writes and deletes (0.06, 0.18, 0.02) were
#: checked against stored copies of the pricing page, and the US regions' reads and writes (0.03,
#: 0.09) against a guide quoting it; the other figures are the published ones as known then, not
#: checked again (the page draws its table by location with a script). Check a row before you
#: rely on it.
PRICE_TABLE: Mapping[str, Prices] = {
    row.location: row
    for row in (
        # multi-regions
        _row("nam5", 0.06, 0.18, 0.02, 0.18),
        _row("eur3", 0.06, 0.18, 0.02, 0.18),
        # regions
        _row("us-central1", 0.03, 0.09, 0.01, 0.15),
        _row("us-east1", 0.03, 0.09, 0.01, 0.15),
        _row("europe-west1", 0.03, 0.09, 0.01, 0.15),
        _row("europe-west3", 0.039, 0.117, 0.013, 0.18),
        _row("asia-northeast1", 0.038, 0.115, 0.013, 0.18),
    )
}
#: The default row: the prices of :data:`DEFAULT_LOCATION`.
PRICES = PRICE_TABLE[DEFAULT_LOCATION]
_MODES: tuple[PriceMode, ...] = ("native", "datastore")


def check_location(location: object) -> str | None:
    """``location`` if the table prices it (or ``None``: not declared); else a
    :class:`~tsstore.errors.SpecError` naming it and the locations it holds."""
    if location is None:
        return None
    if not isinstance(location, str) or location not in PRICE_TABLE:
        raise SpecError(
            f"location {location!r} has no price in tsstore's table; give one of {', '.join(PRICE_TABLE)} "
            "(or leave location out: priced at nam5)"
        )
    return location


def prices_for(location: str | None, *, mode: PriceMode = "native") -> Prices:
    """The table's prices at ``location`` in ``mode``.

    - ``location``: a location of :data:`PRICE_TABLE` (a multi-region such as ``nam5``, or a
      region such as ``us-central1``); ``None``: none declared, priced at
      :data:`DEFAULT_LOCATION` and said so
    - ``mode``: ``"native"`` or ``"datastore"`` (the same prices, from Datastore mode's page)"""
    if mode not in _MODES:
        raise SpecError(f"mode {mode!r} is not allowed; give native or datastore")
    row = PRICE_TABLE[check_location(location) or DEFAULT_LOCATION]
    if mode == "datastore":
        row = replace(row, mode="datastore", source=DATASTORE_PRICING)
    return replace(row, declared=location is not None)


def usd(amount: float) -> str:
    """``amount`` dollars as text: cents from a dollar up (``1,234.50``), else two significant
    digits (``0.036``, ``0.0000036``), so a read's price never shows as ``0.00``."""
    if amount == 0:
        return "0.00"
    if abs(amount) >= 1:
        return f"{amount:,.2f}"
    digits = max(2, 1 - math.floor(math.log10(abs(amount))))
    return f"{amount:.{digits}f}"


@dataclass(frozen=True)
class ReadCost:
    """The money of billed reads: after a read (:meth:`~tsstore.read.cost.ReadStats.cost`) or
    the bound before it (:meth:`~tsstore.read.explain.Explanation.cost`)."""

    #: The billed reads priced (documents, minimum charges, aggregations' and index entries' batches).
    reads: int
    #: Their price in USD.
    usd: float
    #: The prices used (location, mode, source, date).
    prices: Prices
    #: Whether this is an upper bound from a plan (before the read) rather than what was read.
    bound: bool = False

    @classmethod
    def of(cls, reads: int, prices: Prices, *, bound: bool = False) -> "ReadCost":
        """``reads`` billed reads at ``prices``.

        - ``reads``: how many billed reads
        - ``prices``: the unit prices
        - ``bound``: whether ``reads`` is an upper bound (before a read)"""
        return cls(reads, prices.reads(reads), prices, bound)

    def describe(self) -> str:
        return (
            f"{'at most ' if self.bound else ''}USD {usd(self.usd)} ({self.reads} billed "
            f"read{'' if self.reads == 1 else 's'}) at {self.prices.describe()}"
        )
