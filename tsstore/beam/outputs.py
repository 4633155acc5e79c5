"""What the steps of a Beam write pass each other and give back: output tags, rows with
their source, dead letters, planned documents, and the one way a step's last outputs leave
``finish_bundle``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from tsstore.write.prepare import PreparedDoc

#: The tags of :class:`~tsstore.beam.write.WriteTicks`' outputs.
WRITTEN, REJECTED = "written", "rejected"
#: Metric namespace of every count a transform here reports.
METRICS = "tsstore"
class Sourced(NamedTuple):
    """A row with where it came from: its file (any name of the input it belongs to) and
    line. Rows of one source are numbered as one ingest of that file numbers them."""

    source: str
    line: int
    row: Mapping[str, Any]


class DeadLetter(NamedTuple):
    """A row that was not written: where it came from, why, and its text (line 0: a whole
    file that could not be read, or a plain row, which has no line)."""

    source: str
    line: int
    reason: str
    raw: str


def as_sourced(element: Any) -> Sourced:
    """``element`` with its source: a :class:`Sourced` as is, a plain row as one of the input ``""``."""
    return element if isinstance(element, Sourced) else Sourced("", 0, element)


def raw_text(row: Any) -> str:
    """A row as text for a dead letter (JSON where it can be)."""
    try:
        return json.dumps(row, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(row)


@dataclasses.dataclass(frozen=True, slots=True)
class Planned:
    """One row after identity: the document to send, or the outcome it already has
    (``"present"``, ``"replaced"``) because another row of the group carries its tick."""

    source: str
    line: int
    doc: PreparedDoc
    settled: str | None = None


def windowed(outputs: Iterable[Any]) -> Iterator[Any]:
    """Outputs of ``finish_bundle`` (main or tagged), each in the global window."""
    for output in outputs:
        value, tag = (output.value, output.tag) if isinstance(output, beam.pvalue.TaggedOutput) else (output, None)
        made = WindowedValue(value, GlobalWindow().max_timestamp(), (GlobalWindow(),))
        yield made if tag is None else beam.pvalue.TaggedOutput(tag, made)


class Holding(beam.DoFn):
    """A send step's frame: it holds the planned documents of a bundle and ``flush``-es them
    every ``flush_docs`` and at the bundle's end; documents already settled by identity are
    only counted. Subclasses make the worker's client (``connect``) and send (``flush``),
    counting with ``count`` and refusing with ``reject``."""

    flush_docs = 1_000

    def connect(self) -> Any:
        """The worker's client (closed at teardown)."""
        raise NotImplementedError

    def flush(self) -> Iterator[Any]:
        """Send what ``take_held`` gives; yield dead letters and the counts."""
        raise NotImplementedError

    def setup(self) -> None:
        self._client = self.connect()
        self._counters = {name: Metrics.counter(METRICS, name) for name in ("created", "present", "replaced")}
        self._rejected = Metrics.counter(METRICS, "rejected")

    def teardown(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()

    def start_bundle(self) -> None:
        self._held: list[Planned] = []
        self._counts: dict[str, int] = {}

    def process(self, planned: list[Planned]) -> Iterator[Any]:
        for item in planned:
            if item.settled is not None:
                self.count(item.settled)
            else:
                self._held.append(item)
        if len(self._held) >= self.flush_docs:
            yield from self.flush()

    def finish_bundle(self) -> Iterator[Any]:
        yield from windowed(self.flush())

    def count(self, outcome: str, n: int = 1) -> None:
        """``n`` documents more with this outcome (a Beam metric, and the next counts output)."""
        self._counts[outcome] = self._counts.get(outcome, 0) + n
        self._counters[outcome].inc(n)

    def reject(self, item: Planned, why: str) -> beam.pvalue.TaggedOutput[str, DeadLetter]:
        """The dead letter of ``item``."""
        self._rejected.inc()
        return beam.pvalue.TaggedOutput(REJECTED, DeadLetter(item.source, item.line, why, raw_text(item.doc.data)))

    def take_held(self) -> list[Planned]:
        held, self._held = self._held, []
        return held

    def take_counts(self) -> dict[str, int]:
        counts, self._counts = self._counts, {}
        return counts
