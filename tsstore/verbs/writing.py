"""Writing ticks and the series counters the writer keeps, as requests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tsstore.asks import ask
from tsstore.counting import SeriesCounter
from tsstore.errors import RecordError
from tsstore.frames import frame_to_records
from tsstore.results import WriteResult
from tsstore.series_counters import SeriesCounters
from tsstore.spec import DuplicatePolicy
from tsstore.ticks import Tick
from tsstore.times import NaivePolicy
from tsstore.verbs.request import CounterFor, Request, Seat, Send
from tsstore.write.prepare import PreparedDoc, prepare_records
from tsstore.write.sender import BulkSender, Written
from tsstore.write.writer import Making, SendOptions

ProgressCallback = Callable[[int], None]


#: What each parameter of these verbs means (the API reference describes a parameter from
#: here unless the verb's docstring says more).
PARAMETER_HELP = {
    "records": "the ticks: mappings (nested maps for dotted fields) or a DataFrame with dotted column names "
    "and the time as a column or a ``DatetimeIndex``",
    "naive": "what a time without a zone means: ``\"error\"`` (refuse it), ``\"utc\"`` or an IANA zone",
    "on_duplicate": "a tick with the key and time of a stored one but other content: ``\"keep\"`` both, "
    "``\"replace\"`` it or ``\"error\"``; ``None``: the spec's",
    "on_progress": "called with the number of documents confirmed since the last call",
    "on_reject": "called with each invalid record's :class:`~tsstore.errors.RecordError`, the write going on "
    "without it; ``None``: the first one raises",
    "on_written": "called with the input positions of the records each batch settled",
    "on_status": "called with what the writer waits for (a retry and why), or ``None`` once it goes on",
    "skip_first": "records an earlier run wrote (a resumed ingest): numbered for their ids, not sent",
    "keep_ids": "whether the result lists every document id (``False`` keeps memory flat for huge inputs)",
    "key": "the series: its ``count_by`` fields and their values (``{\"symbol\": \"AAA\"}``)",
}


def write(
    seat: Seat,
    records: Iterable[Mapping[str, object]] | pd.DataFrame,
    /,
    *,
    naive: NaivePolicy = "error",
    on_duplicate: DuplicatePolicy | None = None,
    on_progress: ProgressCallback | None = None,
    on_reject: Callable[[RecordError], None] | None = None,
    on_written: Callable[[list[int]], None] | None = None,
    on_status: Callable[[str | None], None] | None = None,
    skip_first: int = 0,
    keep_ids: bool = True,
) -> Request[WriteResult]:
    """Write ticks (mappings, or a DataFrame with dotted column names) and return what was
    stored. Every record is validated before it is queued; a bad record raises
    :class:`~tsstore.errors.RecordError` naming its position, after the records before it
    have been sent (a re-run of the same input stores nothing twice). Firestore refusals
    that persist after retries raise :class:`~tsstore.errors.WriteError` naming each
    refused record; every other record is written.

    Ticks sharing key fields and timestamp are handled by ``on_duplicate`` (default: the
    spec's, ``"keep"``); see :mod:`tsstore.write.identity`. ``naive`` says what a time
    without a zone means: ``"error"``, ``"utc"``, or an IANA zone such as ``"Europe/Rome"``
    (as ``tsstore ingest --naive``). ``on_progress`` is called with the
    number of documents confirmed since the last call, ``on_status`` with what the writer
    is waiting for (retries and why) or ``None``. With ``spec.count_by``, each written batch
    adds its newly created ticks to each series' counter in one commit, so a re-written tick
    is never counted twice (see :meth:`series_counter`).

    ``on_reject``, if given, receives each invalid record's :class:`RecordError` and the
    write goes on without it (the result then holds only what was written);
    ``on_written`` receives the input positions of the records each batch settled. The
    first ``skip_first`` records were written by an earlier run (a resumed ingest): they
    are numbered for identity but not sent. ``keep_ids=False`` returns no ids, keeping
    memory flat for huge inputs. Ctrl-C raises :class:`~tsstore.errors.Interrupted` with
    the result so far once the batches in flight are settled (or 10 s have passed)."""
    spec = seat.spec
    rows = frame_to_records(spec, records) if isinstance(records, pd.DataFrame) else records
    policy = spec.on_duplicate if on_duplicate is None else on_duplicate
    docs = prepare_records(spec, rows, naive=naive, on_duplicate=policy, on_reject=on_reject, skip_first=skip_first)
    options = SendOptions(on_duplicate=policy, on_progress=on_progress, on_status=on_status)
    sending = Send(_Writing(docs, keep_ids, on_written), "write", counted=bool(spec.count_by), options=options)
    return (yield from ask(sending))


@dataclass(frozen=True)
class _Writing(Making[WriteResult]):
    """A write's documents (prepared as the sender takes them), the ids of those settled
    (by input position, when ``keep_ids``), and the caller's ``on_written``."""

    prepared: Iterable[PreparedDoc]
    keep_ids: bool
    on_written: Callable[[list[int]], None] | None
    ids: dict[int, str] = field(default_factory=dict)

    def docs(self, ticks: Iterator[Tick]) -> Iterable[PreparedDoc]:
        return self.prepared

    def settled(self, batch: list[Written]) -> None:
        if self.keep_ids:
            self.ids.update((item.doc.index, item.id) for item in batch)
        if self.on_written is not None:
            self.on_written([item.doc.index for item in batch])

    def result(self, sender: BulkSender) -> WriteResult:
        return written_result(sender, self.ids)


def written_result(sender: BulkSender, ids: Mapping[int, str]) -> WriteResult:
    """What a write's sender stored; ``ids`` by input position."""
    counts = sender.counts
    return WriteResult(
        count=sender.written,
        ids=tuple(ids[i] for i in sorted(ids)),
        created=counts["created"],
        present=counts["present"],
        replaced=counts["replaced"],
        unsettled=sender.unsettled,
    )


def series_counter(seat: Seat, key: Mapping[str, Any]) -> Request[SeriesCounter]:
    """The sharded counter the writer keeps for one series (``spec.count_by`` fields →
    values), e.g. ``store.series_counter({"symbol": "AAA"}).read(live=True)``.

    Counters count the ticks the writer created: writing the same tick again counts
    nothing. Purges do not decrement them, and a process killed between a batch and its
    counter increment leaves that batch uncounted; :meth:`count` is the exact figure. The
    sync store gives a :class:`~tsstore.counting.SyncCounter` (a
    :class:`~tsstore.ShardedCounter`'s verbs, on the store's database), the async store an
    :class:`~tsstore.counting.AsyncCounter`: the same methods, awaited."""
    return (yield from ask(CounterFor(SeriesCounters.key_of(seat.spec, key))))
