"""``WriteTicks``: the store's writer as a Beam transform, exact under bundle retries.

Three steps, each a DoFn:

1. **Prepare** (:class:`_Prepare`): each row goes through the store's own
   :func:`~tsstore.write.prepare.prepare_records` (validation, naive-time policy, id, shard).
   A row it refuses goes to the dead-letter output with its reason.
2. **Identify** (:class:`_Identify`), after a ``GroupByKey`` on the slot id (key values and
   time): the identity rule of :mod:`tsstore.write.identity` needs every row of one base
   together, whatever bundle or worker read it. Rows are ordered by (source, line), so the
   result does not depend on how Beam split the input, and numbered as one ingest of each
   source would number them: a row repeated whole *k* + 1 times in one source is *k* + 1
   ticks, and sources repeating each other store the tick once (the extra rows count as
   already present). ``replace`` sends only the last row of a base by (source, line),
   sources in name order (the others count as replaced by it); ``error`` refuses a second
   row of a base in one source.
3. **Send** (:class:`_Send`): the documents of a bundle go through the store's
   :class:`~tsstore.write.sender.BulkSender` as creates, at the pace of the process's share
   of the pipeline's ramp (:mod:`tsstore.beam.ramp`). Every id belongs to one group and so
   to one bundle; when Beam runs a bundle again, its creates find their documents, and
   those created since the pipeline started count as created (the sender's
   ``created_since``), so the counts stay exact and nothing is stored twice. Documents
   Firestore refuses after retries go to the dead-letter output.

Counts are Beam metrics (namespace ``tsstore``: ``created``, ``present``, ``replaced``,
``rejected``), for watching a run, and one dict of outcome counts per flush on the
``written`` output, for summing exactly: runners discard the outputs of a failed bundle
attempt, while the DirectRunner's bundle executor keeps the metrics of every attempt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from tsstore.beam.datastore import DatastoreSend, RunLease, check_target
from tsstore.beam.outputs import (
    METRICS,
    REJECTED,
    WRITTEN,
    DeadLetter,
    Holding,
    Planned,
    as_sourced,
    raw_text,
)
from tsstore.beam.ramp import PipelineRamp, process_limiter
from tsstore.beam.target import Target
from tsstore.errors import ConfigError, RecordError
from tsstore.spec import DuplicatePolicy, SeriesSpec, check_policy
from tsstore.ticks import get_path
from tsstore.times import NaivePolicy
from tsstore.wire import late_guard, server_clock, transport
from tsstore.write.identity import (
    content_digest,
    fingerprint,
    id_from_digest,
    repeated_base,
)
from tsstore.write.job import bulk_sender
from tsstore.write.ops import Transport
from tsstore.write.prepare import PreparedDoc, check_naive, prepare_records
from tsstore.write.sender import BulkSender
from tsstore.write.window import Window

#: Documents a send step holds before it sends them (and at the end of each bundle).
FLUSH_DOCS = 5_000


class _Prepare(beam.DoFn):
    def __init__(self, spec: SeriesSpec, naive: NaivePolicy) -> None:
        self._spec, self._naive = spec, naive

    def setup(self) -> None:
        self._rejected = Metrics.counter(METRICS, "rejected")

    def process(self, element: Any) -> Iterator[Any]:
        source, line, row = as_sourced(element)
        try:
            # "keep" fills in the content fingerprint that step 2 groups repeats by.
            doc = next(prepare_records(self._spec, [row], naive=self._naive, on_duplicate="keep"))
        except RecordError as error:
            self._rejected.inc()
            yield beam.pvalue.TaggedOutput(REJECTED, DeadLetter(source, line, error.reason, raw_text(row)))
            return
        yield doc.id, (source, line, doc)


class _Identify(beam.DoFn):
    def __init__(self, spec: SeriesSpec, policy: DuplicatePolicy) -> None:
        self._spec, self._policy = spec, policy

    def setup(self) -> None:
        self._rejected = Metrics.counter(METRICS, "rejected")

    def process(self, group: tuple[str, Iterable[tuple[str, int, PreparedDoc]]]) -> Iterator[Any]:
        planned = list(self._plan(self.ordered(self._spec, group[1])))
        for item in planned:
            if isinstance(item, DeadLetter):
                self._rejected.inc()
                yield beam.pvalue.TaggedOutput(REJECTED, item)
        yield [item for item in planned if isinstance(item, Planned)]

    @staticmethod
    def ordered(
        spec: SeriesSpec, items: Iterable[tuple[str, int, PreparedDoc]]
    ) -> list[tuple[str, int, PreparedDoc, bytes]]:
        """A group's rows with their content fingerprints, in (source, line, content) order:
        the same whatever order Beam delivered them in."""
        ignore = spec.shard_field
        return sorted(
            ((source, line, doc, doc.content or fingerprint(_data(doc), ignore=ignore)) for source, line, doc in items),
            key=lambda item: (item[0], item[1], item[3]),
        )

    def _plan(self, rows: list[tuple[str, int, PreparedDoc, bytes]]) -> Iterator[Planned | DeadLetter]:
        if self._policy == "replace":
            *earlier, (source, line, last, content) = rows
            for i, (src, ln, doc, fp) in enumerate(earlier):
                following = rows[i + 1][3]
                yield Planned(src, ln, doc, "present" if fp == following else "replaced")
            yield Planned(source, line, last)
            return
        repeats: dict[tuple[str, bytes], int] = {}  # (source, content) -> rows so far
        made: dict[bytes, int] = {}  # content -> documents planned (repeat numbers 0..n-1)
        first_of_source: dict[str, PreparedDoc] = {}
        for source, line, doc, content in rows:
            if self._policy == "error" and source in first_of_source:
                first = first_of_source[source]
                assert first.base is not None
                when = get_path(_data(doc), self._spec.timestamp_field.split("."))
                yield DeadLetter(source, line, repeated_base(first.base[:-1], when), raw_text(_data(doc)))
                continue
            first_of_source.setdefault(source, doc)
            k = repeats.get((source, content), 0)
            repeats[(source, content)] = k + 1
            if k < made.get(content, 0):  # another source holds this repeat: it is one tick
                yield Planned(source, line, doc, "present")
                continue
            made[content] = k + 1
            if k and doc.base is not None:
                doc = dataclasses.replace(
                    doc, id=id_from_digest(content_digest(doc.base, content, k)), repeat=k, at_slot=False
                )
            yield Planned(source, line, doc)


def _data(doc: PreparedDoc) -> dict[str, Any]:
    assert isinstance(doc.data, dict)  # prepared rows are whole documents
    return doc.data


class _Send(Holding):
    """Sends the planned documents of a bundle (see the module doc)."""

    flush_docs = FLUSH_DOCS

    def __init__(
        self,
        spec: SeriesSpec,
        target: Target,
        ramp: PipelineRamp,
        policy: DuplicatePolicy,
        max_attempts: int,
    ) -> None:
        self._spec, self._target, self._ramp = spec, target, ramp
        self._policy, self._max_attempts = policy, max_attempts

    def connect(self) -> Any:
        client = self._target.client()
        self._collection = client.collection(self._spec.collection)
        self._limiter = process_limiter(self._target.key(self._spec.collection), self._ramp)
        return client

    def flush(self) -> Iterator[Any]:
        """Send what is held; yield a dead letter per refused document, then the counts."""
        held = self.take_held()
        if held:
            guard = late_guard(self._client, self._spec)
            timeout = self._spec.late.send_timeout.total_seconds()
            sender = self.sender(guard.guard(transport(self._collection, timeout=timeout)))
            try:
                sender.send_all(dataclasses.replace(item.doc, index=i) for i, item in enumerate(held))
            finally:
                guard.close()
            for outcome, n in sender.counts.items():
                if n:
                    self.count(outcome, n)
            for failure in sender.failures:
                yield self.reject(held[failure.index], failure.reason)
        counts = self.take_counts()
        if counts:
            yield counts

    def sender(self, sends: Transport) -> BulkSender:
        """A sender on ``sends`` (the collection's transport, its late writes marked), with as
        many batches in flight as carry this worker's share of the ramp across the round trip
        its calls took (:mod:`tsstore.write.window`)."""
        window = Window(round_trip=server_clock(self._client).round_trip)
        return bulk_sender(sends, self._spec, pace=self._limiter,
                           batch_docs=self._ramp.batch_docs, max_attempts=self._max_attempts,
                           on_duplicate=self._policy, created_since=self._ramp.start, window=window)  # fmt: skip


class WriteTicks(beam.PTransform[beam.PCollection[Any], dict[str, beam.PCollection[Any]]]):
    """Write rows (mappings, or :class:`Sourced` rows) to ``spec``'s collection.

    Returns ``{"written": counts, "rejected": dead letters}``: one dict of outcome counts
    (``created``, ``present``, ``replaced``) per flush, and a :class:`DeadLetter` for every
    row not written (refused by the
    preparation, a second row of a base under ``on_duplicate="error"``, or refused by
    Firestore after ``max_attempts``). Rows equal ``created + present + replaced + rejected``
    (also as Beam metrics, namespace :data:`METRICS`).

    ``target`` is where the workers write (:class:`~tsstore.beam.target.Target`);
    ``workers`` the number of processes that write at once, which divides the ramp
    (:mod:`tsstore.beam.ramp`); ``start`` the wall-clock time the ramp is measured from
    (default: when the transform is made, so every worker agrees); ``ramp=False`` starts at
    the ceiling (an emulator). ``spec.key_fields`` are required: random ids would store a
    tick twice whenever Beam runs a bundle again.

    A Datastore-mode ``target`` sends through Beam's own Datastore connector
    (:mod:`tsstore.beam.datastore`), and needs the run's ``lease``: build and run the
    pipeline inside ``with RunLease(spec, target) as lease:``.
    """

    def __init__(
        self,
        spec: SeriesSpec,
        *,
        target: Target,
        workers: int,
        naive: NaivePolicy = "error",
        on_duplicate: DuplicatePolicy | None = None,
        ramp: bool = True,
        max_ops_per_second: int | None = None,
        start: float | None = None,
        max_attempts: int = 15,
        lease: RunLease | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(spec, SeriesSpec):
            raise ConfigError(f"spec must be a SeriesSpec, got {type(spec).__name__}")
        if not spec.key_fields:
            raise ConfigError(
                f"the spec for {spec.collection!r} has no key_fields: ids would be random, so a bundle Beam runs "
                "again would store its ticks twice; declare key_fields (e.g. ['symbol'])"
            )
        if spec.count_by:
            raise ConfigError(
                f"the spec for {spec.collection!r} keeps series counters (count_by {list(spec.count_by)}), whose "
                "increments a bundle run again would repeat; write it with the store (tsstore ingest) instead"
            )
        check_naive(naive)
        try:
            self._policy = check_policy(spec.on_duplicate if on_duplicate is None else on_duplicate)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts {max_attempts!r} is not allowed; give a positive integer")
        self._spec, self._target, self._naive, self._max_attempts = spec, target, naive, max_attempts
        self.ramp = PipelineRamp.for_spec(
            spec, workers=workers, start=start, max_ops_per_second=max_ops_per_second, ramp=ramp
        )
        self._lease, self._workers, self._ramped = lease, workers, ramp
        if target.mode == "datastore":
            check_target(spec, target)
            if lease is None:
                raise ConfigError(
                    f"writing {spec.collection!r} in Datastore mode needs the run's late-tick lease: build and run "
                    "the pipeline inside `with RunLease(spec, target) as lease:` and pass lease=lease"
                )
            if max_ops_per_second is not None:
                raise ConfigError(
                    "max_ops_per_second is not taken in Datastore mode: Beam's connector keeps its own ramp "
                    "(500 writes/s, 50% more every 5 minutes); pass ramp=False to send at the emulator's pace"
                )

    def expand(self, rows: beam.PCollection[Any]) -> dict[str, beam.PCollection[Any]]:
        prepared = rows | "Prepare" >> beam.ParDo(_Prepare(self._spec, self._naive)).with_outputs(REJECTED, main="docs")
        identified = (
            prepared.docs
            | "GroupBySlot" >> beam.GroupByKey()
            | "Identify" >> beam.ParDo(_Identify(self._spec, self._policy)).with_outputs(REJECTED, main="planned")
        )
        sent = self._send(identified.planned)
        rejected = (prepared[REJECTED], identified[REJECTED], sent[REJECTED]) | "Rejected" >> beam.Flatten()
        return {WRITTEN: sent[WRITTEN], REJECTED: rejected}

    def _send(self, planned: beam.PCollection[Any]) -> dict[str, beam.PCollection[Any]]:
        if self._lease is not None and self._target.mode == "datastore":
            send = DatastoreSend(self._spec, target=self._target, policy=self._policy, lease=self._lease,
                                 workers=self._workers, ramp=self._ramped, started=self.ramp.start)  # fmt: skip
            sent: dict[str, beam.PCollection[Any]] = planned | "Send" >> send
            return sent
        out = planned | "Send" >> beam.ParDo(self._send_dofn()).with_outputs(REJECTED, main=WRITTEN)
        return {WRITTEN: out[WRITTEN], REJECTED: out[REJECTED]}

    def _send_dofn(self) -> beam.DoFn:
        return _Send(self._spec, self._target, self.ramp, self._policy, self._max_attempts)
