"""A small OTLP/HTTP receiver for tests: what a collector is to an application's exporter, on a
free loopback port. It takes ``POST /v1/traces`` with a protobuf ``ExportTraceServiceRequest``
(``application/x-protobuf``, gzipped or not, as the SDK's ``OTLPSpanExporter`` sends it), keeps
every span it was sent as a :class:`Received` (ids as hex, attributes as Python values) and
answers as a collector does; anything else is refused with 404 or 415. No backend installs here
(no Jaeger or Collector package in PyPI, npm or Debian), so the tests that picture a trace
receive it themselves."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class Received:
    """One span as the receiver got it."""

    trace_id: str
    span_id: str
    parent_id: str  # "" for a trace's root
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    status: int  # the protocol's StatusCode: 0 unset, 1 ok, 2 error

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def value_of(value: AnyValue) -> Any:
    """An attribute's value as Python's (a list for an array)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return None if kind is None else getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


@dataclass
class OtlpReceiver:
    """Listening on ``127.0.0.1:<free port>`` once made; :attr:`endpoint` is what an exporter's
    ``endpoint=`` takes (``/v1/traces`` included), :attr:`base` what ``OTEL_EXPORTER_OTLP_ENDPOINT``
    takes. :meth:`close` stops it."""

    spans: list[Received] = field(default_factory=list)
    requests: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/traces":
                    self._answer(404, b"")
                elif self.headers.get("Content-Type") != PROTOBUF:
                    self._answer(415, b"")
                else:
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    receiver._take(ExportTraceServiceRequest.FromString(body))
                    self._answer(200, ExportTraceServiceResponse().SerializeToString())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", PROTOBUF)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
                pass  # each request on stderr would fill a test's output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.endpoint = f"{self.base}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="otlp-receiver")
        self._thread.start()

    def _take(self, request: ExportTraceServiceRequest) -> None:
        received = [
            Received(
                trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(),
                name=span.name, start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                attributes=_attributes(span.attributes), resource=_attributes(spans.resource.attributes),
                scope=scoped.scope.name, status=span.status.code,
            )  # fmt: skip
            for spans in request.resource_spans
            for scoped in spans.scope_spans
            for span in scoped.spans
        ]
        with self._lock:
            self.requests += 1
            self.spans.extend(received)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
