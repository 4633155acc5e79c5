"""``WriteTicks`` in Datastore mode: Beam's own Datastore connector does the writing.

The first two steps are the Native ones (prepare, identify: :mod:`tsstore.beam.write`). The
third differs: Beam's ``WriteToDatastore`` (``apache_beam.io.gcp.datastore.v1new``) sends
the entities, with its own batching, retries and the 500/50/5 ramp of seed 002
(``throttle_rampup``; ``hint_num_workers`` is the pipeline's ``workers``). What the connector
cannot tell (an upsert does not say whether it created), :class:`_Classify` decides first,
per flush of a bundle, by looking the ids up:

- nothing stored there: the entity is sent, counted ``created``;
- the same content: ``present``, or ``created`` when the entity's creation time is after the
  pipeline's start (an earlier attempt of this bundle sent it), and not sent again;
- another tick in a slot (``keep``): looked up again at its content id; ``replace``: sent,
  counted ``replaced``; ``error``: a dead letter. The rule is the sender's own
  (:func:`tsstore.write.sender.settle`).

Late ticks: the job holds one lease for the whole run (:class:`RunLease`), written before
the roll-ups' horizons are read and kept busy since then, so a roll-up that announces a new
horizon during the run waits for the run to end; each flush writes the marks its late ticks
need (:func:`tsstore.write.marks.decide` on that one view) before it yields their entities,
and a tick past the late window or in a purged bucket is a dead letter. An entity goes out
only after its marks, and lands while the lease still covers it.

Limits of the connector (Apache Beam 2.77): it writes a project's ``(default)`` database
only, and finds an emulator by ``DATASTORE_EMULATOR_HOST`` (:func:`emulator_env` sets it for
a local run). An indexed string over 1 500 bytes inside a map cannot be sent unindexed by
it: such a row is a dead letter here rather than a failed pipeline.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.gcp.datastore.v1new.datastoreio import WriteToDatastore
from apache_beam.io.gcp.datastore.v1new.types import Entity

from tsstore.beam.outputs import REJECTED, WRITTEN, Holding, Planned
from tsstore.beam.target import Target
from tsstore.errors import ConfigError
from tsstore.limits import MAX_INDEXED_VALUE_BYTES
from tsstore.spec import DuplicatePolicy, SeriesSpec
from tsstore.write.marks import View, decide, holds_from, remembered
from tsstore.write.sender import settle

#: Documents a classify step holds before it looks them up (and at the end of each bundle).
FLUSH_DOCS = 1_000


def check_target(spec: SeriesSpec, target: Target) -> None:
    """Refuse what Beam's connector cannot write to, naming it."""
    if target.database != "(default)":
        raise ConfigError(
            f"Beam's Datastore connector writes only a project's (default) database, not {target.database!r}; "
            f"load {spec.collection!r} there, or with tsstore ingest (any database)"
        )


@contextlib.contextmanager
def emulator_env(target: Target) -> Iterator[None]:
    """``DATASTORE_EMULATOR_HOST`` set to ``target``'s emulator while a local pipeline runs
    (the connector's clients, in the workers this process starts, find it there)."""
    if target.mode != "datastore" or target.emulator is None:
        yield
        return
    before = os.environ.get("DATASTORE_EMULATOR_HOST")
    os.environ["DATASTORE_EMULATOR_HOST"] = target.emulator
    try:
        yield
    finally:
        if before is None:
            del os.environ["DATASTORE_EMULATOR_HOST"]
        else:
            os.environ["DATASTORE_EMULATOR_HOST"] = before


class RunLease:
    """The late-tick lease of one Datastore-mode pipeline run (see the module doc): entered
    before the pipeline is built, left when it has finished. ``view`` is the roll-ups'
    horizons, read after the lease was first written; a thread rewrites the lease every
    ``late.refresh``, busy since that first write."""

    def __init__(self, spec: SeriesSpec, target: Target) -> None:
        from tsstore.dswire.calls import DatastoreCalls, DatastoreHorizons

        self._client = target.client()
        self.job = f"beam-{uuid.uuid4().hex[:16]}"
        self._io = DatastoreHorizons(DatastoreCalls(self._client), spec.collection, lease=self.job)
        self._lease: dict[str, Any] = {"source": spec.collection, "lease_seconds": spec.late.lease.total_seconds()}
        self._refresh = spec.late.refresh.total_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="tsstore-beam-lease", daemon=True)
        self.view = View(0.0, dt.datetime.min.replace(tzinfo=dt.UTC), ())

    def __enter__(self) -> RunLease:
        at = self._io.put_lease(self._lease)
        self._lease["busy_since"] = at
        self.view = View(0.0, at, tuple(h for h in self._io.horizons() if h.horizon is not None))
        self._thread.start()
        return self

    def _keep(self) -> None:
        while not self._stop.wait(self._refresh):
            with contextlib.suppress(Exception):  # a missed refresh: the next one, or the lease expires
                self._io.put_lease(self._lease)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self._io.drop_lease()
        finally:
            self._client.close()


def _nested_long_text(value: Any, top: bool = True) -> bool:
    """Whether ``value`` holds, inside a map, a string or bytes the connector would index
    and Datastore mode refuses (:func:`tsstore.dswire.values.unindexable`)."""
    from tsstore.dswire.values import unindexable

    if isinstance(value, dict):
        return any(_nested_long_text(v, False) for v in value.values())
    if isinstance(value, list):
        return any(_nested_long_text(v, top) for v in value)
    return not top and isinstance(value, (str, bytes)) and unindexable(value)


class _Classify(Holding):
    """Decides each planned document (see the module doc); outputs the entities to send,
    one dict of outcome counts per flush (``written``) and dead letters (``rejected``)."""

    flush_docs = FLUSH_DOCS

    def __init__(
        self, spec: SeriesSpec, target: Target, policy: DuplicatePolicy, view: View, job: str, started: float
    ) -> None:
        self._spec, self._target, self._policy = spec, target, policy
        self._view, self._job, self._started = view, job, started

    def connect(self) -> Any:
        from tsstore.dswire.calls import DatastoreCalls, DatastoreHorizons

        client = self._target.client()
        self._calls = DatastoreCalls(client)
        self._io = DatastoreHorizons(self._calls, self._spec.collection, lease=self._job)
        self._holds = remembered(holds_from(self._io, self._spec))  # the run has one view
        return client

    def flush(self) -> Iterator[Any]:
        """Look up what is held, decide each, write the late marks, then yield the entities."""
        sends: list[tuple[Planned, str, str]] = []  # (item, id, outcome)
        for item, why in self._decided(self.take_held(), sends):
            yield self.reject(item, why)
        ops = [(doc_id, item.doc.data, False) for item, doc_id, _ in sends]
        decision = decide(self._spec, self._view, ops, holds=self._holds)
        if decision.marks:
            self._io.put_marks(decision.marks)
        for index, (item, doc_id, outcome) in enumerate(sends):
            if index in decision.refused:
                yield self.reject(item, decision.refused[index])
                continue
            self.count(outcome)
            yield self.entity(doc_id, item)
        counts = self.take_counts()
        if counts:
            yield beam.pvalue.TaggedOutput(WRITTEN, counts)

    def _decided(self, held: list[Planned], sends: list[tuple[Planned, str, str]]) -> Iterator[tuple[Planned, str]]:
        """Settle each held document against what is stored (its content id looked up in a
        second round when another tick holds its slot); add what to send to ``sends``, yield
        the refused with why."""
        from tsstore.dswire.calls import get_stored

        def landed(created: float) -> bool:
            return created >= self._started

        pending = [(item, item.doc.id) for item in held]
        ignore = self._spec.shard_field
        while pending:
            stored = get_stored(self._calls, self._spec.collection, [doc_id for _, doc_id in pending])
            again: list[tuple[Planned, str]] = []
            for item, doc_id in pending:
                if _nested_long_text(item.doc.data):
                    yield item, (f"a text or bytes value over {MAX_INDEXED_VALUE_BYTES} bytes inside a map: Beam's "
                                 "Datastore connector would index it, which Datastore mode refuses; write it with "
                                 "tsstore ingest")  # fmt: skip
                    continue
                verdict = settle(item.doc, doc_id, stored.get(doc_id), policy=self._policy, ignore=ignore,
                                 landed=landed)  # fmt: skip
                if verdict.kind == "create":
                    sends.append((item, doc_id, "created"))
                elif verdict.kind == "replace":
                    sends.append((item, doc_id, "replaced"))
                elif verdict.kind == "written":
                    self.count(verdict.outcome)
                elif verdict.kind == "moved":
                    again.append((item, verdict.to))
                else:
                    yield item, verdict.why
            pending = again

    def entity(self, doc_id: str, item: Planned) -> Entity:
        """The entity of ``doc_id`` as the store's own writes encode it."""
        from google.cloud.datastore.helpers import entity_from_protobuf

        from tsstore.dswire.values import ENTITY_PB, encode_entity, key

        made = ENTITY_PB()
        made.key.CopyFrom(key(self._calls.where, f"{self._spec.collection}/{doc_id}"))
        assert isinstance(item.doc.data, dict)
        encode_entity(made, item.doc.data)
        made_entity: Entity = Entity.from_client_entity(entity_from_protobuf(made))  # type: ignore[no-untyped-call]
        return made_entity


class DatastoreSend(beam.PTransform[beam.PCollection[Any], dict[str, beam.PCollection[Any]]]):
    """Step 3 of :class:`~tsstore.beam.write.WriteTicks` in Datastore mode: classify, then
    Beam's ``WriteToDatastore``. Returns ``{"written": counts, "rejected": dead letters}``."""

    def __init__(
        self,
        spec: SeriesSpec,
        *,
        target: Target,
        policy: DuplicatePolicy,
        lease: RunLease,
        workers: int,
        ramp: bool,
        started: float,
    ) -> None:
        super().__init__()
        check_target(spec, target)
        self._classify = _Classify(spec, target, policy, lease.view, lease.job, started)
        self._write = WriteToDatastore(target.project, throttle_rampup=ramp, hint_num_workers=workers)

    def expand(self, planned: beam.PCollection[Any]) -> dict[str, beam.PCollection[Any]]:
        decided = planned | "Classify" >> beam.ParDo(self._classify).with_outputs(WRITTEN, REJECTED, main="entities")
        decided.entities | "WriteToDatastore" >> self._write
        return {WRITTEN: decided[WRITTEN], REJECTED: decided[REJECTED]}

