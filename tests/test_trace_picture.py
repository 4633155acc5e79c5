"""A trace of a read, pictured: tsstore's spans go out through the SDK's own OTLP/HTTP exporter
into a receiver the test starts (``tests/otlp.py``: no Jaeger or Collector installs from a
registry here), from a store 80 ms away from the emulator (``tests/proxy.ProxyProcess``). The
test checks what arrived (one trace, each span's parent, each verb's figures equal to the
ReadStats its call returned), draws it as a waterfall page and photographs that page with the
system's headless Chromium. With TSSTORE_SCREENSHOTS=1 (as the console's screenshots) the
picture is ``docs/images/trace.png``, which ``docs/howto/traces.md`` shows; otherwise it goes
to the test's temporary folder, so a run leaves the checkout as it was."""

from __future__ import annotations

import html
import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.otlp import OtlpReceiver, Received
from tests.proxy import ProxyProcess
from tsstore import TimeSeriesStore, telemetry
from tsstore.demo import SPEC, demo_rows
from tsstore.local.emulator import emulator_client
from tsstore.read.cost import ReadStats
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "images" / "trace.png"
ROUND_TRIP = 0.080  # seconds between the store and the emulator, as from a nearby region
TICKS = 3000  # the demo day's first ticks (six batches of writes)
SERVICE = "tick-reader"
WIDTH, ROW, HEAD = 1200, 24, 64  # the page's pixels: its width, a span's row, the title above the rows


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    made = OtlpReceiver()
    yield made
    made.close()


@pytest.fixture
def exported(
    receiver: OtlpReceiver, otel_providers: dict[str, Any]
) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """An SDK provider of the test's own that exports over OTLP/HTTP to ``receiver`` (in batches, as
    an application's would) and keeps the same spans in memory, given to tsstore
    (``telemetry.configure``: the global provider is left alone)."""
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint)))
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    otel_providers["tracer_provider"] = provider
    telemetry.configure(**otel_providers)
    yield provider, kept
    provider.shutdown()


def _figures(span: Received) -> dict[str, int]:
    return {name: span.attributes[f"tsstore.{name}"] for name in telemetry.READ_ATTRIBUTES}


def _stats(stats: ReadStats) -> dict[str, int]:
    return {name: getattr(stats, name) for name in telemetry.READ_ATTRIBUTES}


def test_a_reads_trace_exported_over_otlp_arrives_whole_and_is_pictured(
    emulator: Any, database_id: str, receiver: OtlpReceiver, exported: tuple[TracerProvider, InMemorySpanExporter],
    tmp_path: Path, browser: Any,
) -> None:  # fmt: skip
    provider, kept = exported
    application = provider.get_tracer(SERVICE)
    proxy = ProxyProcess(emulator.address, round_trip=ROUND_TRIP)
    client = emulator_client(proxy.address, database=database_id)
    store = TimeSeriesStore(client, SPEC, write_options=EMULATOR_WRITE_OPTIONS)
    try:
        with application.start_as_current_span("write the demo day") as writing:
            written = store.write(list(demo_rows(TICKS)))
        with application.start_as_current_span("read the demo day") as reading:
            page = store.query(where={"symbol": "AAA"}, limit=50)
            counted = ReadStats()
            count = store.count(stats=counted)
            stream = store.iter_ticks(where={"exchange": "EXCHG1"})
            ticks = list(stream)
    finally:
        store.close()
        client.close()
        proxy.close()
    assert provider.force_flush()
    got = receiver.spans

    # What arrived is what the SDK made: every span, its ids, parent, times and attributes.
    made = {
        format(span.context.span_id, "016x"): (span.name, format(span.parent.span_id, "016x") if span.parent else "",
                                               span.start_time, span.end_time, dict(span.attributes or {}))
        for span in kept.get_finished_spans()
    }  # fmt: skip
    arrived = {span.span_id: (span.name, span.parent_id, span.start_ns, span.end_ns, span.attributes) for span in got}
    assert arrived == made
    assert {span.resource["service.name"] for span in got} == {SERVICE}
    traces = {name: [span for span in got if span.trace_id == format(root.get_span_context().trace_id, "032x")]
              for name, root in (("write", writing), ("read", reading))}  # fmt: skip
    assert len(traces["write"]) + len(traces["read"]) == len(got)

    # The verbs are their trace's root's children, in the order they were called, each with its call's figures.
    verbs = []
    for trace in traces.values():
        [root] = [span for span in trace if not span.parent_id]
        verbs += sorted((span for span in trace if span.parent_id == root.span_id), key=lambda span: span.start_ns)
    called = ("write", "query", "count", "iter_ticks")
    assert [span.name for span in verbs] == [f"{verb} {SPEC.collection}" for verb in called]
    assert {span.scope for span in got if span.parent_id} == {telemetry.SCOPE}
    write, query, counting, iterating = verbs
    assert {name: write.attributes[f"tsstore.ticks.{name}"] for name in telemetry.WRITE_ATTRIBUTES} == {
        name: getattr(written, name) for name in telemetry.WRITE_ATTRIBUTES
    }
    assert written.created == written.count > TICKS  # the seed's instruments too
    assert _figures(query) == _stats(page.stats) and len(page.ticks) == 50
    assert query.attributes["db.response.returned_rows"] == page.stats.documents
    assert _figures(counting) == _stats(counted) and count == written.count
    assert _figures(iterating) == _stats(stream.stats) and iterating.attributes["tsstore.documents"] == len(ticks) > 0

    # Under each verb, the spans of what it sent: commits, rounds of chunk queries, counts.
    # A call tried again after a fault (a loaded machine's emulator may time one out) is a retry span
    # under what failed; the rest is checked without them.
    retried = {span.parent_id for span in got if span.name == "tsstore.retry"}
    assert retried <= {span.span_id for span in got}
    got = [span for span in got if span.name != "tsstore.retry"]
    under = {verb.name: [span for span in got if span.parent_id == verb.span_id] for verb in verbs}
    commits = under[write.name]
    assert {span.name for span in commits} == {"tsstore.commit"}
    # under the commits, the writer's lease and read of the roll-ups' horizons (the demo declares 1-minute bars)
    views = [span for span in got if span.parent_id in {commit.span_id for commit in commits}]
    assert {span.name for span in views} == {"tsstore.late_view"}
    assert all(span.attributes == {"db.collection.name": SPEC.collection, "tsstore.horizons": 0} for span in views)
    assert len(got) == 2 + len(verbs) + sum(map(len, under.values())) + len(views)  # nothing deeper, nothing else
    sent = sum(span.attributes["tsstore.writes"] for span in commits)
    assert sent == written.count or (sent > written.count and retried)  # each tick sent once, or again after a fault
    rounds = under[query.name]
    assert {span.name for span in rounds} == {"tsstore.round"}
    assert len(rounds) == query.attributes["tsstore.round_trips"]
    assert sum(span.attributes["tsstore.queries"] for span in rounds) == query.attributes["tsstore.queries"]
    assert sum(span.attributes["tsstore.documents"] for span in rounds) == query.attributes["tsstore.documents"]
    counts = under[counting.name]
    assert {span.name for span in counts} == {"tsstore.count"}
    assert len(counts) == counting.attributes["tsstore.queries"]
    assert under[iterating.name] == []  # a stream without a limit reads its chunks to their end: no rounds
    # 80 ms away, every request waited at least one round trip (a floor, never a speed)
    assert all(span.seconds >= ROUND_TRIP for span in commits + rounds + counts + [iterating])

    folder = PICTURE.parent if os.environ.get("TSSTORE_SCREENSHOTS") == "1" else tmp_path
    away = f"{ROUND_TRIP * 1000:.0f} ms from the Firestore emulator"
    pictures = [("read", f"{SERVICE}: a page, a count and a stream of the demo day, {away}", PICTURE.name),
                ("write", f"{SERVICE}: the demo day written, {away}", "trace-write.png")]  # fmt: skip
    for name, title, shot in pictures:
        spans = traces[name]
        page_file = tmp_path / f"{name}.html"
        page_file.write_text(waterfall(spans, title=title))
        height = HEAD + ROW * len(spans)
        browser.get(page_file.as_uri())
        browser.set_window_size(WIDTH, height)
        inner = browser.execute_script("return [window.innerWidth, window.innerHeight]")
        # the page's own size, whatever the window's frame takes
        browser.set_window_size(2 * WIDTH - inner[0], 2 * height - inner[1])
        assert browser.execute_script("return [document.querySelectorAll('.span').length, window.innerWidth,"
                                      " window.innerHeight]") == [len(spans), WIDTH, height]  # fmt: skip
        assert browser.save_screenshot(str(folder / shot))
        assert png_size((folder / shot).read_bytes()) == (WIDTH, height)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system's packages, as the console's tests drive it."""
    from selenium import webdriver

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("picturing a trace needs Chromium and its driver: apt-get install chromium chromium-driver",
                    pytrace=False)  # fmt: skip
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--force-device-scale-factor=1", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(argument)
    made = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    yield made
    made.quit()


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its header chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


#: The attributes a span's row shows, each with its short name, where the span has it (a read's
#: figures on a write's span, all nought, are left out).
SHOWN = [("tsstore.ticks.created", "created"), ("tsstore.writes", "writes"), ("tsstore.queries", "queries"),
         ("tsstore.round_trips", "round trips"), ("tsstore.documents", "documents"),
         ("tsstore.billed_reads", "billed reads")]  # fmt: skip


def _shown(span: Received) -> str:
    read = span.attributes.get("tsstore.queries", 0) > 0 or span.name == "tsstore.round"
    figures = [f"{short} {span.attributes[name]}" for name, short in SHOWN if name in span.attributes
               and (read or name in ("tsstore.ticks.created", "tsstore.writes"))]  # fmt: skip
    return " · ".join([f"{span.seconds * 1000:.0f} ms", *figures])


def waterfall(spans: list[Received], *, title: str) -> str:
    """A trace as a waterfall page :data:`WIDTH` wide, :data:`HEAD` and a :data:`ROW` per span
    high: one row per span, under its parent (children by their start), its name indented by
    depth, its duration and :data:`SHOWN` attributes, its bar placed and sized by its start and
    duration on the trace's time axis."""
    children: dict[str, list[Received]] = {}
    for span in sorted(spans, key=lambda span: span.start_ns):
        children.setdefault(span.parent_id, []).append(span)
    rows: list[tuple[int, Received]] = []

    def visit(span: Received, depth: int) -> None:
        rows.append((depth, span))
        for child in children.get(span.span_id, []):
            visit(child, depth + 1)

    for root in children.get("", []):
        visit(root, 0)
    start = min(span.start_ns for span in spans)
    total = max(span.end_ns for span in spans) - start
    lines = []
    for depth, span in rows:
        left, width = 100 * (span.start_ns - start) / total, max(100 * (span.end_ns - span.start_ns) / total, 0.2)
        kind = "session" if depth == 0 else "verb" if depth == 1 else "child"
        lines.append(
            f'<div class="span {kind}">'
            f'<div class="name" style="padding-left:{8 + 16 * depth}px">{html.escape(span.name)}</div>'
            f'<div class="what">{html.escape(_shown(span))}</div>'
            f'<div class="axis"><div class="bar" style="left:{left:.3f}%;width:{width:.3f}%"></div></div></div>'
        )
    marks = "".join(f'<div class="mark" style="left:{share}%">{share * total / 100 / 1e9:.2f} s</div>'
                    for share in (0, 25, 50, 75))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>
body {{ margin: 0; font: 12px/1 "DejaVu Sans", sans-serif; color: #1d2733; background: #fff; overflow: hidden; }}
h1 {{ font-size: 15px; margin: 0; padding: 12px 8px 0; height: {HEAD - 28}px; box-sizing: border-box; }}
.scale, .span {{ display: flex; height: {ROW}px; align-items: center; }}
.scale {{ height: 28px; border-bottom: 1px solid #ccd3db; color: #56606b; }}
.name, .what {{ flex: none; white-space: nowrap; overflow: hidden; line-height: 16px; box-sizing: border-box; }}
.name {{ width: 220px; }} .what {{ width: 440px; color: #36414d; }}
.axis {{ position: relative; flex: 1; height: 100%; margin-right: 12px; }}
.mark {{ position: absolute; bottom: 0; height: 18px; padding-left: 3px; border-left: 1px solid #9aa5b1; }}
.bar {{ position: absolute; top: 5px; height: {ROW - 10}px; border-radius: 2px; }}
.session .bar {{ background: #8a6fb8; }} .verb .bar {{ background: #2f6fb3; }} .child .bar {{ background: #86b6e3; }}
.verb .name {{ font-weight: bold; }}
.span:nth-child(even) {{ background: #f4f6f8; }}
</style></head><body><h1>{html.escape(title)}</h1>
<div class="scale"><div class="name" style="padding-left:8px">span</div><div class="what">duration · attributes</div>
<div class="axis">{marks}</div></div>
<div>{"".join(lines)}</div></body></html>"""
