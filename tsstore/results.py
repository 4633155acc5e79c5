"""What the writing verbs return: public result types, in one place (the reads' results
live beside what builds them: :class:`~tsstore.ticks.Page`,
:class:`~tsstore.analytics.aggregate.Aggregates`, :class:`~tsstore.layout.census.ShardCensus`,
:class:`~tsstore.analytics.rollup.RollupResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class WriteResult:
    """What a write did with the records it sent, in input order.

    ``count`` records are now stored: ``created`` new documents, ``present`` ticks that were
    already stored with the same content (a re-run, a retried write), ``replaced`` ticks that
    overwrote another with the same key and time (``on_duplicate="replace"``). ``ids`` are
    their document ids (empty when asked not to keep them). ``unsettled`` records were not
    confirmed when Ctrl-C stopped the write (a re-run settles them).
    """

    #: Records now stored (``created + present + replaced``).
    count: int
    #: Their document ids, in input order (empty when asked not to keep them).
    ids: tuple[str, ...]
    #: New documents.
    created: int = 0
    #: Ticks already stored with the same content (a re-run, a retried write).
    present: int = 0
    #: Ticks that overwrote another of the same key and time (``on_duplicate="replace"``).
    replaced: int = 0
    #: Records not confirmed when Ctrl-C stopped the write (a re-run settles them).
    unsettled: int = 0

    def describe(self, what: str = "documents") -> str:
        """One line: how many are stored, and how (``wrote 12 documents: 10 new, 2 already
        stored``), and how many a Ctrl-C left unconfirmed.

        - ``what``: what the documents are called in the line (``"ticks"``, ``"bars"``)"""
        parts = [f"{self.created} new", f"{self.present} already stored"]
        if self.replaced:
            parts.append(f"{self.replaced} replaced")
        unsettled = f"; {self.unsettled} unconfirmed (a re-run settles them)" if self.unsettled else ""
        return f"wrote {self.count} {what}: {', '.join(parts)}{unsettled}"


@dataclass(frozen=True)
class PurgeResult:
    """What a purge matched (counted first) and deleted; a dry run deletes nothing."""

    #: Ticks in the range, counted before deleting.
    matched: int
    #: Ticks deleted (0 on a dry run).
    deleted: int
    #: Whether this was a dry run (nothing deleted).
    dry_run: bool


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard did: ``moved`` ticks rewritten from retired shard values onto active
    ones (same ids and content), ``vanished`` ticks deleted meanwhile (a purge, TTL) and so
    not moved, and ``remaining`` ticks under each retired value when it finished (0 each when
    done: the value can then leave the declaration), after ``passes`` passes."""

    #: Ticks rewritten from retired shard values onto active ones (same ids and content).
    moved: int
    #: Ticks deleted meanwhile (a purge, TTL), and so not moved.
    vanished: int
    #: Ticks left under each retired value when it finished (0 each when done).
    remaining: Mapping[str, int]
    #: How many passes over the retired values it made.
    passes: int

    def describe(self) -> str:
        left = sum(self.remaining.values())
        state = "they now hold no tick" if not left else f"{left} ticks remain under them (run it again)"
        values = ", ".join(self.remaining) or "none"
        gone = f"; {self.vanished} were deleted meanwhile" if self.vanished else ""
        return f"moved {self.moved} ticks off retired shard values {values}{gone}; {state}"
