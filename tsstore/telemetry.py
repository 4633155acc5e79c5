"""What tsstore tells OpenTelemetry: a span per verb call with what it cost, child spans for its
rounds of chunk queries, its commits and its retries, and metrics beside them.

Only ``opentelemetry-api`` is used: with no SDK configured every span and instrument is the API's
no-op; a verb asks of it to start and end one span and to add its figures to the metrics (about
25 us a call), a stream's items pass as they come. An application that configures an SDK
(``TracerProvider``, ``MeterProvider``, or :func:`configure`) gets tsstore's spans and metrics
under the instrumentation scope ``tsstore``.

A verb's span carries the database conventions' attributes (``db.system.name``, by
:data:`tsstore.logs.SYSTEMS`, ``db.collection.name``, ``db.operation.name``) and tsstore's own
(:data:`READ_ATTRIBUTES`: the figures of every :class:`~tsstore.read.cost.ReadStats` made or given
during the call, so they equal what the call returns; :data:`WRITE_ATTRIBUTES` from a write's
result). The reference lists them all
(``docs/reference/telemetry.md``).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol, TypeVar

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from tsstore.logs import DB_COLLECTION, DB_OPERATION, ERROR_TYPE, backend_fields, error_type

try:
    _VERSION = metadata.version("tsstore")
except metadata.PackageNotFoundError:  # pragma: no cover - a checkout used without installing it
    _VERSION = "0+unknown"

#: The instrumentation scope of every span and instrument.
SCOPE = "tsstore"
#: The :class:`~tsstore.read.cost.ReadStats` figures a verb's span carries, each as
#: ``tsstore.<name>`` (``documents`` also as the conventions' ``db.response.returned_rows``).
READ_ATTRIBUTES = (
    "chunks", "queries", "round_trips", "documents", "billed_reads", "index_reads", "refills", "snapshot_reads",
    "objects", "object_bytes",
)  # fmt: skip
#: A write's result figures its verb's span carries, each as ``tsstore.ticks.<name>``.
WRITE_ATTRIBUTES = ("count", "created", "present", "replaced", "unsettled")

class _Instruments:
    """tsstore's tracer and metric instruments, from one tracer provider and one meter provider."""

    def __init__(self, tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None) -> None:
        self.tracer = trace.get_tracer(SCOPE, _VERSION, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, _VERSION, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "db.client.operation.duration", unit="s", description="How long a verb of a tsstore store took"
        )
        counter = meter.create_counter
        self.billed_reads = counter("tsstore.billed_reads", unit="{read}", description="Document reads billed")
        self.documents = counter("tsstore.documents", unit="{document}", description="Documents returned")
        self.round_trips = counter("tsstore.round_trips", unit="{round_trip}", description="Waves of requests waited")
        self.ticks_written = counter("tsstore.ticks.written", unit="{tick}", description="Ticks created or replaced")
        self.retries = counter("tsstore.retries", unit="{retry}", description="Calls tried again after a fault")
        self.commits = counter("tsstore.commits", unit="{request}", description="Batch write requests sent")
        self.ticks_rejected = counter("tsstore.ticks.rejected", unit="{tick}", description="Rows of a file rejected")
        self.marks_written = counter("tsstore.marks.written", unit="{mark}", description="Late-tick marks written")
        self.rollup_lag = meter.create_gauge(
            "tsstore.rollup.lag", unit="s", description="How far a roll-up's watermark is behind the time it ran"
        )


#: The global providers' (each call through the API's proxies: an SDK configured later is used).
_now = _Instruments(None, None)


def configure(*, tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None) -> None:
    """Record tsstore's spans with ``tracer_provider`` and its metrics with ``meter_provider``
    instead of the global providers (``None``: the global one, as without this call); as an
    instrumentation library's ``tracer_provider=`` option, for an application that keeps
    providers of its own, or a test."""
    global _now
    _now = _Instruments(tracer_provider, meter_provider)


class Counted(Protocol):
    """What a verb's span reads its figures from: a :class:`~tsstore.read.cost.ReadStats`."""

    chunks: int
    queries: int
    round_trips: int
    documents: int
    billed_reads: int
    index_reads: int
    refills: int
    snapshot_reads: int
    objects: int
    object_bytes: int


@dataclass
class _Call:
    """What one verb call read: the read stats made during it, and those given to it with
    their figures when it began (the call's share is the difference)."""

    made: list[Counted] = field(default_factory=list)
    given: list[tuple[Counted, tuple[int, ...]]] = field(default_factory=list)

    def figures(self) -> dict[str, int]:
        sums = dict.fromkeys(READ_ATTRIBUTES, 0)
        for stats in self.made:
            for name in READ_ATTRIBUTES:
                sums[name] += getattr(stats, name)
        for stats, before in self.given:
            for name, was in zip(READ_ATTRIBUTES, before):
                # the chunks a plan fans out over are set, not added: the call's are the figure after it
                sums[name] += getattr(stats, name) - (0 if name == "chunks" else was)
        return sums


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("tsstore_call", default=None)


def read_made(stats: Counted) -> None:
    """Count ``stats`` (a new :class:`~tsstore.read.cost.ReadStats`) in the verb call that made it, if any."""
    call = _CALL.get()
    if call is not None:
        call.made.append(stats)


def _figures_of(stats: Counted) -> tuple[int, ...]:
    return tuple(getattr(stats, name) for name in READ_ATTRIBUTES)


R = TypeVar("R")


class VerbCall:
    """One call of a verb as OpenTelemetry sees it: its span (current while the call runs in
    :meth:`running`), the read stats it makes or is given, and its end (:meth:`end`, once)."""

    def __init__(self, operation: str, collection: str, mode: str, given: object = None) -> None:
        self._attributes: dict[str, AttributeValue] = {**backend_fields(mode, collection), DB_OPERATION: operation}
        name = f"{operation} {collection}"
        self._span: Span = _now.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=self._attributes)
        self._started = time.perf_counter()
        self._call = _Call()
        if all(isinstance(getattr(given, name, None), int) for name in READ_ATTRIBUTES):  # a ReadStats
            counted: Counted = given  # type: ignore[assignment]  # it has every figure
            self._call.given.append((counted, _figures_of(counted)))
        self._result: object = None
        self._ended = False

    @property
    def recording(self) -> bool:
        """Whether its span is recorded (an SDK is configured and samples it)."""
        return self._span.is_recording()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The span current and the call's read stats counted while the body runs."""
        token = _CALL.set(self._call)
        try:
            if not self._span.get_span_context().is_valid:  # the API's no-op: no span to make current
                yield
                return
            with trace.use_span(self._span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield
        finally:
            _CALL.reset(token)

    @contextlib.contextmanager
    def ending(self, *, at_end: bool = True) -> Iterator[None]:
        """The call ended when the body ends: with its error, or without one (finished, or a
        stream closed before its end: what it read so far); ``at_end`` false: by an error only
        (a stream's call, started by the body, ends with the stream)."""
        try:
            yield
        except GeneratorExit:
            self.end()
            raise
        except BaseException as exc:
            self.end(error=exc)
            raise
        if at_end:
            self.end()

    def returned(self, result: R) -> R:
        """``result``, which the call's end reads its figures from (a write's, a roll-up's)."""
        self._result = result
        return result

    def end(self, *, error: BaseException | None = None) -> None:
        """End the span with the call's figures (and its result's: :meth:`returned`), or ``error``."""
        if self._ended:
            return
        self._ended = True
        figures = self._call.figures()
        attributes = dict(self._attributes)
        if error is not None:
            attributes[ERROR_TYPE] = error_type(error)
        now = _now
        now.duration.record(time.perf_counter() - self._started, attributes)
        now.billed_reads.add(figures["billed_reads"], self._attributes)
        now.documents.add(figures["documents"], self._attributes)
        now.round_trips.add(figures["round_trips"], self._attributes)
        result = self._result
        written = _write_figures(result)
        if written:
            now.ticks_written.add(written["created"] + written["replaced"], self._attributes)
        watermark = getattr(result, "watermark", None)
        if isinstance(watermark, dt.datetime) and watermark.tzinfo is not None:  # a roll-up's run
            now.rollup_lag.set((dt.datetime.now(dt.timezone.utc) - watermark).total_seconds(), self._attributes)
        span = self._span
        if span.is_recording():
            span.set_attributes({f"tsstore.{name}": value for name, value in figures.items()})
            span.set_attribute("db.response.returned_rows", figures["documents"])
            span.set_attributes({f"tsstore.ticks.{name}": value for name, value in written.items()})
            if error is not None:
                span.set_attribute(ERROR_TYPE, attributes[ERROR_TYPE])
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()


def _write_figures(result: object) -> dict[str, int]:
    """A write's result's figures (``WRITE_ATTRIBUTES``), or none for any other result."""
    if not all(isinstance(getattr(result, name, None), int) for name in WRITE_ATTRIBUTES):
        return {}
    return {name: getattr(result, name) for name in WRITE_ATTRIBUTES}


def called(call: VerbCall, body: Callable[[], R], *, ends: bool = True) -> R:
    """``body()`` as the call ``call``, which then ends with its result or its error (``ends``
    false: only with an error; a stream's call ends with the stream)."""
    with call.ending(at_end=ends), call.running():
        result = body()  # a stream's is not kept: the stream holds the call, and is dropped when its reader drops it
        return call.returned(result) if ends else result


@contextlib.contextmanager
def operation(
    name: str, attributes: Mapping[str, AttributeValue], *, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span]:
    """A span of work around verb calls (an ingest, a console request: ``kind`` server): ``name``,
    current while the body runs, its verbs' spans under it; an error escaping it is recorded."""
    with _now.tracer.start_as_current_span(name, kind=kind, attributes=attributes) as span:
        yield span


@contextlib.contextmanager
def child(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[Span]:
    """A child span of the current one (a round of chunk queries, a commit), ended when the body
    ends; an error escaping it is recorded on it."""
    with _now.tracer.start_as_current_span(f"tsstore.{name}", attributes=attributes) as span:
        yield span


def retried(what: str, error: BaseException, pause: float) -> None:
    """Tell of a call tried again after ``error`` (a fault or an overload), after ``pause`` seconds:
    a ``tsstore.retry`` span under the current one, and the retries counter."""
    attributes: dict[str, AttributeValue] = {ERROR_TYPE: error_type(error), "tsstore.retry.what": what,
                                             "tsstore.retry.pause_s": pause}  # fmt: skip
    _now.retries.add(1, {ERROR_TYPE: attributes[ERROR_TYPE]})
    _now.tracer.start_span("tsstore.retry", attributes=attributes).end()


def committed() -> None:
    """Count one batch write request sent."""
    _now.commits.add(1)


def rejected(collection: str) -> None:
    """Count one row of a tick file rejected for ``collection``."""
    _now.ticks_rejected.add(1, {DB_COLLECTION: collection})


def marked(collection: str, marks: int) -> None:
    """Count ``marks`` late-tick marks written for ``collection``."""
    _now.marks_written.add(marks, {DB_COLLECTION: collection})


def in_context(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` run in a copy of this thread's context (the current span, the verb call) when
    called in another thread (a pool's worker)."""
    context = contextvars.copy_context()

    def run(*args: Any) -> R:
        return context.copy().run(fn, *args)

    return run
