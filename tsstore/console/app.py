"""The console's web app: a Starlette application over the stores of a declaration, answering
the page's requests with the public verbs only (query, explain, count, bars, watch,
shard_census, cold_status, the capacity planner, the generated files' plans).

Every request must carry the console's token (in the URL the console prints, then as a
cookie), name the console's address, and, for the JSON interface, come from the console's own
page (:class:`Guard`); others are refused. Nothing here writes to the database. A query
runs in a worker thread; when the page cancels it, the page's request is answered at once and
the read in flight ends with its page (at most :data:`~tsstore.console.forms.MAX_PAGE` rows),
unseen. Errors a person can fix (a bad filter, an undeclared field) come back as
``{"error": message}`` with the commands' own message; a live view streams server-sent events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hmac
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import pandas as pd
from opentelemetry.trace import SpanKind
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tsstore import telemetry, ticks_to_frame
from tsstore.analytics.rollup import Rollup
from tsstore.console.forms import QueryForm, Reach, cursor_field, text_field
from tsstore.errors import StateError, TsstoreError, UsageError
from tsstore.indexes.datastore import plan_index_yaml
from tsstore.indexes.file import plan_index_file
from tsstore.layout.capacity import capacity_for
from tsstore.prices import Prices, prices_for
from tsstore.read.cost import ReadStats
from tsstore.rules.file import plan_rules_file
from tsstore.spec import NUMERIC_TYPES, SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.ticks import Tick

log = logging.getLogger(__name__)

#: The cookie that carries the token after the first page load, named with the console's port
#: (``tsstore_console_8080``): cookies do not tell ports apart, so each console keeps its own.
COOKIE = "tsstore_console"
#: The bars one chart request may draw at most (each a point per series on the chart).
MAX_BARS = 20_000
#: How the browser may keep an asset the page names by version.
CACHED = {"Cache-Control": "private, max-age=86400, immutable"}
#: The capacity planner's spare capacity; the plan first shown is the declared layout's rate.
HEADROOM = 1.25
#: How often a live stream says it is alive when no update came (seconds).
KEEPALIVE_SECONDS = 15.0
#: How often a live stream looks whether the console is stopping (seconds).
STOP_CHECK_SECONDS = 0.25


@dataclass
class Series:
    """One declared series the console shows: its store and its declared roll-ups."""

    spec: SeriesSpec
    store: TimeSeriesStore
    rollups: tuple[Rollup, ...] = ()
    rollup_stores: dict[str, TimeSeriesStore] = field(default_factory=dict)


@dataclass
class Console:
    """What the console serves: the declaration's series by collection, where they are, the
    token, and the folder whose generated files are compared with the declaration."""

    series: dict[str, Series]
    declaration: str
    where: str
    token: str
    mode: str = "native"
    files: Path = Path("indexes")
    #: Every series and roll-up the declaration holds (the generated files are made from all of
    #: them); ``None``: those of ``series``.
    declared: tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]] | None = None
    #: Where the console reads, as the commands it shows are told to read there.
    reach: Reach = Reach()
    #: Set when the console is told to stop: its live streams end (not cut by the server).
    stopping: threading.Event = field(default_factory=threading.Event)
    _running: dict[str, asyncio.Event] = field(default_factory=dict)
    #: Each series' facts as last read (``/api/series``): read once when the console starts, so the
    #: first view shows them at once; the page's *Refresh* reads them again.
    _facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def pick(self, collection: object) -> Series:
        known = ", ".join(self.series)
        if collection is None:
            raise UsageError(f"give collection: the series to read (declared: {known})")
        if not isinstance(collection, str) or collection not in self.series:
            raise UsageError(f"the declaration has no series {collection!r} (declared: {known})")
        return self.series[collection]


def make_app(console: Console, *, hosts: Iterable[str], port: int) -> Starlette:
    """The console's Starlette application, served on ``port`` at the address ``hosts`` name."""
    handlers = Handlers(console)
    routes = [
        Route("/", handlers.page),
        Route("/static/{name}", handlers.static),
        Route("/api/catalog", handlers.catalog),
        Route("/api/series", handlers.series),
        Route("/api/explain", handlers.explain, methods=["POST"]),
        Route("/api/query", handlers.query, methods=["POST"]),
        Route("/api/cancel", handlers.cancel, methods=["POST"]),
        Route("/api/bars", handlers.bars, methods=["POST"]),
        Route("/api/live", handlers.live),
        Route("/api/layout", handlers.layout),
        Route("/api/tiers", handlers.tiers),
    ]
    guard = Middleware(Guard, token=console.token, hosts=own_hosts(hosts, port), cookie=f"{COOKIE}_{port}")
    return Starlette(routes=routes, middleware=[guard])


def own_hosts(hosts: Iterable[str], port: int) -> frozenset[str]:
    """The ``Host`` headers that name the console served on ``port`` at ``hosts`` (names or
    addresses): the loopback names and ``hosts``, with the port (and without it on port 80, as
    browsers send it)."""
    names = {"127.0.0.1", "localhost", "[::1]", *(f"[{h}]" if ":" in h else h.lower() for h in hosts)}
    return frozenset({f"{name}:{port}" for name in names} | (names if port == 80 else set()))


#: The one inline style the page allows: the map styles plotly.js (4.1.1, of plotly 7.1) adds to the
#: page as it loads, whichever chart is drawn. The page's own chart styles are a file
#: (``static/chart.css``); a plotly that adds other styles is refused, which the tests see.
PLOTLY_MAP_STYLE = "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='"
#: What every answer says to the browser: scripts, styles, images and requests from the
#: console's own address only, no frame around it, no address passed on to other sites.
SECURITY_HEADERS = {
    "Content-Security-Policy": f"default-src 'self'; style-src 'self' {PLOTLY_MAP_STYLE}; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
#: The methods by which another page may still ask for the console's page and its files (a
#: link to it, its scripts); any other method, and every ``/api/`` answer (a read is billed, the
#: live stream holds listeners open), is for the console's own page only.
_PLAIN_METHODS = frozenset({"GET", "HEAD"})


class Guard:
    """Refuse every request not meant for this console, and mark every answer with
    :data:`SECURITY_HEADERS`.

    * A ``Host`` that is not the console's address (:func:`own_hosts`) is refused (400): a
      page of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends
      its own name.
    * The token must come with the request: in the URL (``?token=``), the cookie it sets, or an
      ``X-Tsstore-Token`` header (403 otherwise). The page's address with the token is
      answered by a redirect to the bare address that sets the cookie, so the token leaves the
      address bar and the history.
    * An ``/api/`` request or a POST from another origin is refused (403): its ``Origin`` must
      be the console's own, and without one its ``Sec-Fetch-Site`` (when the browser sends it)
      must be ``same-origin`` or ``none``. Another port of 127.0.0.1 is another origin but the
      same site, so the cookie alone would let its pages run the console's billed reads.
    """

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str], cookie: str) -> None:
        self.app, self.token, self.hosts, self.cookie = app, token, hosts, cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        request = Request(scope)
        refusal = self.refusal(request)
        if refusal is not None:
            await refusal(scope, receive, marked)
        elif request.method == "GET" and request.url.path == "/" and "token" in request.query_params:
            bare = RedirectResponse("/", status_code=303)
            bare.set_cookie(self.cookie, self.token, httponly=True, samesite="strict")
            await bare(scope, receive, marked)
        else:
            await self.app(scope, receive, marked)

    def refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "").lower()
        if host not in self.hosts:
            allowed = ", ".join(sorted(self.hosts))
            return JSONResponse({"error": f"Host {host!r} is not this console's address; it answers {allowed}"},
                                status_code=400)  # fmt: skip
        given = (request.query_params.get("token") or request.cookies.get(self.cookie)
                 or request.headers.get("x-tsstore-token"))  # fmt: skip
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            return JSONResponse({"error": "this console needs its token: open the address `tsstore console` printed "
                                          "(it ends in ?token=...)"}, status_code=403)  # fmt: skip
        origin, site = request.headers.get("origin"), request.headers.get("sec-fetch-site")
        guarded = request.method not in _PLAIN_METHODS or request.url.path.startswith("/api/")
        if origin is not None and origin != f"http://{host}":
            return JSONResponse({"error": f"a page of {origin} may not use this console; only its own page "
                                          f"(http://{host}) may"}, status_code=403)  # fmt: skip
        if guarded and origin is None and site not in (None, "same-origin", "none"):
            return JSONResponse({"error": f"a request from another page (Sec-Fetch-Site: {site}) may not use this "
                                          "console; only its own page may"}, status_code=403)  # fmt: skip
        return None


def _answered(work: Callable[..., Any]) -> Callable[..., Any]:
    """A handler whose refusals (a usage error: a bad filter, an undeclared field) answer
    ``{"error": ...}`` with status 400, as the commands print them."""

    async def handler(self: Handlers, request: Request) -> Response:
        try:
            with telemetry.operation(f"console {work.__name__}", {"http.route": request.url.path}, kind=SpanKind.SERVER):
                return JSONResponse(_plain(await work(self, request)))  # its verbs' spans under it
        except (TsstoreError, ValueError) as exc:
            return _refusal(exc)
        except Exception as exc:  # a bug: said as JSON to the page, with its traceback in the log
            log.exception("the console's %s failed", work.__name__)
            return JSONResponse({"error": f"the console failed: {type(exc).__name__}: {exc}"}, status_code=500)

    handler.__name__ = work.__name__
    return handler


def _refusal(exc: TsstoreError | ValueError) -> JSONResponse:
    """``{"error": ...}``: 400 for what was asked wrong (the commands' parsing of what was
    typed, a usage error, a bad value), 409 for what the store does not allow yet (a
    :class:`~tsstore.errors.StateError`), 500 for any other tsstore error."""
    status = 400 if isinstance(exc, (UsageError, ValueError)) else 409 if isinstance(exc, StateError) else 500
    return JSONResponse({"error": str(exc)}, status_code=status)


class Handlers:
    """The console's requests, each on the console's stores."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._first_read = threading.Event()  # set once the facts read at start-up has ended
        threading.Thread(target=self._first_facts, name="tsstore-console-facts", daemon=True).start()

    def _first_facts(self) -> None:
        """Read the facts once as the console starts; what fails here is read, and said, again
        when the page asks."""
        try:
            asyncio.run(self._read_facts())
        except Exception as exc:
            log.info("the console's first read of the series' facts failed (the page asks again): %s", exc)
        finally:
            self._first_read.set()

    async def _read_facts(self) -> list[dict[str, Any]]:
        series = list(self.console.series.values())
        read = await asyncio.gather(*(_summary(s) for s in series))
        at = dt.datetime.now(dt.timezone.utc)
        for one, facts in zip(series, read):
            self.console._facts[one.spec.collection] = {**_declared(one), **facts, "as_of": at}
        return [self.console._facts[one.spec.collection] for one in series]

    async def page(self, request: Request) -> Response:
        from plotly import __version__ as plotly_version

        return HTMLResponse(_asset("index.html").decode().replace("plotly.min.js", f"plotly.min.js?v={plotly_version}"))

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name == "plotly.min.js":  # the chart library, as the plotly package ships it
            from plotly.offline import get_plotlyjs

            # Kept by the browser (the page asks for it by the package's version): Chromium then
            # also keeps its compiled code, which is most of a 4.8 MB script's load.
            return Response(get_plotlyjs(), media_type="text/javascript", headers=CACHED)
        kinds = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
        kind = next((k for suffix, k in kinds.items() if name.endswith(suffix)), None)
        if kind is None or "/" in name or name.startswith("."):
            return JSONResponse({"error": f"no asset {name!r}"}, status_code=404)
        try:
            return Response(_asset(name), media_type=kind)
        except FileNotFoundError:
            return JSONResponse({"error": f"no asset {name!r}"}, status_code=404)

    @_answered
    async def catalog(self, request: Request) -> Any:
        """What the declaration says of each series (no read): shapes, layout, roll-ups."""
        return {"where": self.console.where, "declaration": self.console.declaration, "mode": self.console.mode,
                "series": [_declared(s) for s in self.console.series.values()]}  # fmt: skip

    @_answered
    async def series(self, request: Request) -> Any:
        """Each declared series as stored: its count, its newest tick, and the span its
        roll-ups' bars cover, read concurrently (as of when they were read; ``?fresh=1``:
        now)."""
        fresh = bool(request.query_params.get("fresh"))
        if not fresh:  # the read at start-up, not a second one beside it
            await asyncio.to_thread(self._first_read.wait)
        known = [self.console._facts.get(c) for c in self.console.series]
        if fresh or any(f is None for f in known):
            return {"series": await self._read_facts()}
        return {"series": known}

    @_answered
    async def explain(self, request: Request) -> Any:
        data = await _json(request)
        chosen = self.console.pick(data.get("collection"))
        form = QueryForm.of(data)
        explained = chosen.store.explain(form.query(chosen.spec))
        bound = explained.cost()
        return {
            "text": explained.describe(cost=True),
            "price": None if bound is None else {"text": bound.describe(), "usd": bound.usd, "reads": bound.reads},
            "queries": list(explained.queries),
            "index": explained.index,
            "lean_reads": explained.lean_reads,
            "eager_reads": explained.eager_reads,
            "round_trips": explained.round_trips,
            "python": form.python(chosen.spec),
            "command": form.command(self.console.declaration, chosen.spec.collection, reach=self.console.reach),
        }

    @_answered
    async def query(self, request: Request) -> Any:
        """One page of the query: its rows as ``query_frame`` gives them, the cursor of the
        next, and what it cost; ``/api/cancel`` answers it at once (the read ends unseen)."""
        data = await _json(request)
        chosen = self.console.pick(data.get("collection"))
        form = QueryForm.of(data)
        query = form.query(chosen.spec, cursor=cursor_field(data))
        ask = text_field(data, "ask") or uuid.uuid4().hex
        cancelled = self.console._running.setdefault(ask, asyncio.Event())
        reading = asyncio.ensure_future(asyncio.to_thread(chosen.store.query, query))
        waiting = asyncio.ensure_future(cancelled.wait())
        try:
            await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.console._running.pop(ask, None)
            waiting.cancel()
        if not reading.done():  # the page stops waiting; the read in flight ends with its page, unseen
            reading.add_done_callback(lambda done: done.cancelled() or done.exception())
            return {"cancelled": True}
        page = reading.result()
        frame = ticks_to_frame(chosen.spec, page, columns=query.columns)
        command = form.command(self.console.declaration, chosen.spec.collection, reach=self.console.reach)
        prices = prices_for(chosen.spec.location, mode="datastore" if self.console.mode == "datastore" else "native")
        return {**_grid(frame), "cursor": page.cursor, "stats": _stats(page.stats, prices),
                "python": form.python(chosen.spec), "command": command}  # fmt: skip

    @_answered
    async def cancel(self, request: Request) -> Any:
        data = await _json(request)
        stop = self.console._running.get(text_field(data, "ask"))
        if stop is not None:
            stop.set()
        return {"cancelled": stop is not None}

    @_answered
    async def bars(self, request: Request) -> Any:
        data = await _json(request)
        chosen = self.console.pick(data.get("collection"))
        return await asyncio.to_thread(_bars, chosen, data)

    async def live(self, request: Request) -> Response:
        """The newest ticks of a query, merged over its chunks as they change: server-sent
        events, each a window update with the chunks' snapshot times."""
        try:
            chosen = self.console.pick(request.query_params.get("collection"))
            form = QueryForm.of({"where": request.query_params.get("where", ""),
                                 "limit": request.query_params.get("limit", "20")})  # fmt: skip
            query = form.query(chosen.spec)
            watch = chosen.store.watch(limit=form.limit, where=query.where, columns=query.columns)
        except (TsstoreError, ValueError) as exc:
            return _refusal(exc)
        return StreamingResponse(_events(watch, request, self.console.stopping), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})  # fmt: skip

    @_answered
    async def tiers(self, request: Request) -> Any:
        """Each series' tiers: for one with a cold tier, what its manifest and marks say now
        (``cold_status``: sealed through, partitions, ticks, bytes, marked partitions), read
        concurrently; ``null`` for one without."""
        series = list(self.console.series.values())
        found = await asyncio.gather(*(asyncio.to_thread(s.store.cold_status) for s in series if s.spec.cold))
        said = iter(found)
        return {"tiers": [{"collection": s.spec.collection,
                           "cold": dataclasses.asdict(next(said)) if s.spec.cold else None} for s in series]}

    @_answered
    async def layout(self, request: Request) -> Any:
        chosen = self.console.pick(request.query_params.get("collection"))
        rate = request.query_params.get("writes_per_second") or str(chosen.spec.max_write_rate / HEADROOM)
        return await asyncio.to_thread(_layout, self.console, chosen, rate)


# ------------------------------------------------------------------------------ the work


def _declared(series: Series) -> dict[str, Any]:
    spec = series.spec
    return {
        "collection": spec.collection,
        "shapes": [shape.describe() for shape in spec.all_shapes()],
        "shards": list(spec.shards),
        "retired": [str(r.value) for r in spec.retired],
        "rollups": [{"name": r.name, "collection": r.spec.collection, "interval": str(r.interval)}
                    for r in series.rollups],  # fmt: skip
        "write_rate": spec.max_write_rate,
        "chart": _chart_defaults(series),
        "cold": spec.cold.path if spec.cold is not None else None,
    }


def _chart_defaults(series: Series) -> dict[str, str]:
    """What the chart form starts with for ``series``: the price and ``by`` fields of its first
    roll-up, else its first numeric measure (or column) and its key fields."""
    spec = series.spec
    numeric = (*spec.measures, *(name for name, kind in spec.columns if kind in NUMERIC_TYPES))
    if series.rollups:
        return {"price": series.rollups[0].price, "by": ",".join(series.rollups[0].by)}
    return {"price": numeric[0] if numeric else "", "by": ",".join(spec.key_fields)}


def _key_condition(series: Series, tick: Tick | None) -> str:
    """A ``where`` line naming the series of ``tick`` (its first ``by`` field's value), so the
    chart's first draw shows a series that exists; empty without one."""
    by = _chart_defaults(series)["by"].split(",")[0]
    value: Any = tick.data if tick is not None and by else None
    for part in by.split(".") if by else ():
        value = value.get(part) if isinstance(value, Mapping) else None
    return f"{by}={value}" if isinstance(value, (str, int)) and not isinstance(value, bool) else ""


async def _summary(series: Series) -> dict[str, Any]:
    store = series.store
    count, newest, spans = await asyncio.gather(
        asyncio.to_thread(store.count), asyncio.to_thread(store.query, limit=1),
        asyncio.gather(*(asyncio.to_thread(store.rollup_coverage, r) for r in series.rollups)),
    )  # fmt: skip
    return {
        "count": count,
        "newest": _tick_row(newest[0]) if len(newest) else None,
        "chart_where": _key_condition(series, newest[0] if len(newest) else None),
        "covers": {r.name: list(span) if span is not None else None for r, span in zip(series.rollups, spans)},
    }


def _bars(series: Series, data: Mapping[str, Any]) -> dict[str, Any]:
    form = QueryForm.of({"where": data.get("where"), "start": data.get("start"), "end": data.get("end"), "limit": 1})
    query = form.query(series.spec)
    interval = text_field(data, "interval").strip() or "1min"
    options: dict[str, Any] = {"interval": interval, "where": query.where, "start": query.start, "end": query.end}
    for name in ("tz", "origin", "fill"):
        if text_field(data, name).strip():
            options[name] = text_field(data, name).strip()
    by = [b.strip() for b in text_field(data, "by").split(",") if b.strip()] or None
    price = text_field(data, "price").strip() or _chart_defaults(series)["price"]
    if not price:
        raise UsageError(f"give price: a numeric field of {series.spec.collection!r}")
    source, frame = _from_rollup(series, options, by)
    if frame is None:
        frame = series.store.bars(price=price, by=by, **options)
        source = f"ticks of {series.spec.collection!r}" + (f" ({source})" if source else "")
    if len(frame) > MAX_BARS:
        raise UsageError(f"{len(frame)} bars: more than the {MAX_BARS} a chart draws; widen the interval or narrow "
                         "the range")  # fmt: skip
    return {"source": source, "by": by or [], "bars": _grid(frame)}


def _from_rollup(series: Series, options: dict[str, Any], by: list[str] | None) -> tuple[str, pd.DataFrame | None]:
    """Bars combined from a declared roll-up whose bars fill the asked ones and reach the
    range's end, with what was used; else why not (and ``None``). A range that starts before
    the roll-up's span is still answered from it when no tick matches before the span (one
    ``count``, one read): the bars of a day asked from midnight, its first tick at 08:00."""
    why = ""
    start, end = options.get("start"), options.get("end")
    for rollup in series.rollups:
        if list(rollup.by) != (by or []):
            continue
        span = series.store.rollup_coverage(rollup)
        begin, before = start, ""  # before the span, where no tick matches: the bars answer from the span's start
        if span is not None and start is not None and end is not None and start < span[0] < end <= span[1] and (
            series.store.count(where=options["where"], start=start, end=span[0]) == 0
        ):
            begin, before = span[0], f"; no tick before {span[0].isoformat()}"
        if span is None or begin is None or end is None or not span[0] <= begin < end <= span[1]:
            covered = "no stored bars yet" if span is None else f"its bars cover {span[0]} to {span[1]}"
            why = f"roll-up {rollup.name!r} not used: {covered}, not the whole range asked"
            continue
        try:
            combined = series.rollup_stores[rollup.name].bars(combine=True, by=by, **{**options, "start": begin})
            return f"roll-up {rollup.name!r} ({rollup.interval} bars, combined{before})", combined
        except (UsageError, StateError) as exc:
            why = f"roll-up {rollup.name!r} not used: {exc}"
    return why, None


def _layout(console: Console, series: Series, rate: str) -> dict[str, Any]:
    census = series.store.shard_census()
    try:
        writes = float(rate)
    except ValueError:
        raise UsageError(f"writes_per_second {rate!r} is not a number") from None
    plan = capacity_for(writes, spec=series.spec, headroom=HEADROOM)
    specs, rollups = console.declared or (tuple(s.spec for s in console.series.values()),
                                          tuple(r for s in console.series.values() for r in s.rollups))  # fmt: skip
    every = (*specs, *(r.spec for r in rollups))  # the index files hold the roll-ups' collections too
    if console.mode == "datastore":  # the files this mode deploys
        files = {"datastore indexes": plan_index_yaml(console.files / "index.yaml", every)}
    else:
        files = {"indexes": plan_index_file(console.files / "firestore.indexes.json", every),
                 "rules": plan_rules_file(console.files / "firestore.rules", specs, rollups)}  # fmt: skip
    return {
        "census": census.describe(),
        "problems": census.problems(),
        "capacity": plan.describe(series.spec),
        "files": {name: {"path": str(update.path), "current": not update.changed, "diff": update.diff()}
                  for name, update in files.items()},  # fmt: skip
    }


async def _events(watch: Any, request: Request, stopping: threading.Event) -> AsyncIterator[str]:
    """Server-sent events of ``watch``'s updates until the page goes away or the console
    stops (then the stream ends itself, before the server would cancel it)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = threading.Event()

    def pump() -> None:
        try:
            while not done.is_set():
                update = watch.next_update(timeout=0.5)
                if update is not None:
                    loop.call_soon_threadsafe(queue.put_nowait, update)
        except Exception as exc:  # the stream says what stopped it, once
            loop.call_soon_threadsafe(queue.put_nowait, exc)

    thread = threading.Thread(target=pump, name="tsstore-console-live", daemon=True)
    thread.start()
    quiet = 0.0  # seconds since the stream last sent something
    try:
        while not stopping.is_set() and not await request.is_disconnected():
            try:
                update = await asyncio.wait_for(queue.get(), timeout=STOP_CHECK_SECONDS)
            except asyncio.TimeoutError:
                quiet += STOP_CHECK_SECONDS
                if quiet >= KEEPALIVE_SECONDS:
                    quiet = 0.0
                    yield ": alive\n\n"
                continue
            quiet = 0.0
            if isinstance(update, Exception):
                yield f"event: failed\ndata: {json.dumps({'error': str(update)})}\n\n"
                return
            payload = {
                "sent": time.time(),
                "read_times": [t.timestamp() if t is not None else None for t in update.read_times],
                "window": [_tick_row(t) for t in update.window],
                "entered": [t.id for t in update.entered],
            }
            yield f"data: {json.dumps(_plain(payload))}\n\n"
    finally:
        done.set()
        watch.close()


# ------------------------------------------------------------------------------ shapes of answers


def _grid(frame: pd.DataFrame) -> dict[str, Any]:
    """A frame as a grid: its index and columns by name, rows as lists of plain values."""
    flat = frame.reset_index()
    rows = [[_plain(v) for v in row] for row in flat.itertuples(index=False)]
    return {"columns": [str(c) for c in flat.columns], "rows": rows}


def _tick_row(tick: Tick) -> dict[str, Any]:
    return {"id": tick.id, "timestamp": tick.timestamp, "data": tick.data}


def _stats(stats: ReadStats, prices: Prices) -> dict[str, Any]:
    """What a page cost: its reads, and their price at ``prices`` (after the read)."""
    priced = stats.cost(prices)
    return {"text": stats.describe(), "queries": stats.queries, "documents": stats.documents,
            "billed_reads": stats.billed_reads, "round_trips": stats.round_trips, "chunks": stats.chunks,
            "price": {"text": priced.describe(), "usd": priced.usd}}  # fmt: skip


def _plain(value: Any) -> Any:
    """``value`` as JSON takes it: times as ISO-8601 text, missing values as null."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.datetime, pd.Timestamp)):
        return value.isoformat()
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)):
        return value.item() if hasattr(value, "item") else value
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return str(value)


async def _json(request: Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise UsageError("the request's body is not JSON") from None
    if not isinstance(data, dict):
        raise UsageError("the request's body is not a JSON object")
    return data


def _asset(name: str) -> bytes:
    return (files("tsstore.console") / "static" / name).read_bytes()


__all__: Sequence[str] = ["Console", "Series", "make_app"]
