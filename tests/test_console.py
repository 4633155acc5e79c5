"""The console in a real browser (Chromium from the system's packages, driven by Selenium) on
the emulator: each view loads, the query grid equals ``query_frame`` and its pages reach every
tick once, the chart's data equals ``bars``, the live view shows every tick written while it is
open once, a bad filter shows the command's message, a request without the token is refused.
The screenshots in docs/images/ are made here, from the demo's day: with TSSTORE_SCREENSHOTS=1
the tests write them there (``TSSTORE_SCREENSHOTS=1 .venv/bin/pytest tests/test_console.py``);
otherwise into a temporary folder, so that a test run leaves the checkout as it was."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
import shlex
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.cli import tsstore
from tests.conftest import unique_database_id
from tsstore import ColdTier, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.console.app import Console, Series
from tsstore.cli.console import emulator_of
from tsstore.console.forms import Reach
from tsstore.console.server import Serving, bind, serve_in_thread
from tsstore.declaration import load_declaration
from tsstore.demo import BARS_1MIN, SPEC
from tsstore.late import mark_id
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day
from tsstore.read.cost import ReadStats

ROOT = Path(__file__).resolve().parent.parent
#: Where the screenshots go: the docs' images with TSSTORE_SCREENSHOTS=1, else a scratch folder.
SHOTS = (ROOT / "docs" / "images" if os.environ.get("TSSTORE_SCREENSHOTS") == "1"
         else Path(tempfile.gettempdir()) / "tsstore-console-screenshots")  # fmt: skip
DAY = dt.date(2018, 12, 31)
TOKEN = "test-token-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[dict[str, Any]]:
    """The demo's series (its instruments and 3 000 ticks of its day) on a database of its
    own, and a console on it."""
    emulator = request.getfixturevalue("emulator")
    database = unique_database_id("console")
    client = emulator.client(database=database)
    store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False))
    store.write([*SEED_INSTRUMENTS, *trading_day(3000, day=DAY)])
    console = Console({SPEC.collection: Series(SPEC, store)}, "tsstore.demo:DECLARATION", "the test's emulator", TOKEN,
                      files=ROOT / "indexes", declared=load_declaration("tsstore.demo:DECLARATION"),
                      reach=Reach(database=database, emulator=emulator.address))  # fmt: skip
    serving: Serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))
    yield {"store": store, "url": serving.url, "client": client}
    serving.stop()
    store.close()
    client.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("the console's tests need Chromium and its driver: apt-get install chromium chromium-driver "
                    "(the README's test command installs them)", pytrace=False)  # fmt: skip
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                     "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console: CSP violations show there
    made = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    yield made
    made.quit()


def opened(browser: webdriver.Chrome, served: dict[str, Any]) -> webdriver.Chrome:
    """The page, its series' facts shown (and the chart form's defaults filled from them)."""
    browser.get(served["url"])
    wait(browser, lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-counted") == "true")
    return browser


def wait(browser: webdriver.Chrome, until: Callable[[webdriver.Chrome], Any], seconds: float = 60) -> Any:
    """``until`` once the page shows it; ``seconds`` bound a hang, not a speed (a loaded machine
    runs the browser, the server and the emulator slowly)."""
    from selenium.webdriver.support.ui import WebDriverWait  # here, not at collection (0.7 CPU-s in the lane too)

    return WebDriverWait(browser, seconds, poll_frequency=0.05).until(until)


def view(browser: webdriver.Chrome, name: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f"nav button[data-view={name}]").click()


def typed(browser: webdriver.Chrome, element_id: str, text: str) -> None:
    field = browser.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def asked(browser: webdriver.Chrome, served: dict[str, Any], name: str, fields: dict[str, str], button: str) -> Any:
    """The page opened on view ``name``, ``fields`` (by element id) typed, ``button`` pressed."""
    page = opened(browser, served)
    view(page, name)
    for element_id, text in fields.items():
        typed(page, element_id, text)
    page.find_element(By.ID, button).click()
    return page


def grid(browser: webdriver.Chrome, table_id: str) -> tuple[list[str], list[list[str]]]:
    """A table's header and cells as the page shows them (one script: quick on big grids)."""
    got: dict[str, Any] = browser.execute_script(
        "const t = document.getElementById(arguments[0]);"
        "return {head: [...t.querySelectorAll('thead th')].map(c => c.textContent),"
        " rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent))};",
        table_id,
    )
    return got["head"], got["rows"]


def shown(value: Any) -> str:
    """A frame's cell as the page shows it (the JSON the server sends, as text)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, (pd.Timestamp, dt.datetime)):
        return value.isoformat()
    return str(value)


def frame_cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    flat = frame.reset_index()
    return [str(c) for c in flat.columns], [[shown(v) for v in row] for row in flat.itertuples(index=False)]


def screenshot(browser: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SHOTS / f"console-{name}.png")), name


def test_the_series_view_shows_each_series_with_its_count_and_newest_tick(browser: webdriver.Chrome,
                                                                         served: dict[str, Any]) -> None:  # fmt: skip
    page = opened(browser, served)
    wait(page, lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-counted") == "true")
    card = page.find_element(By.CSS_SELECTOR, ".series-card[data-collection=instruments]")
    newest = served["store"].query(limit=1)[0]
    assert card.find_element(By.CLASS_NAME, "fact-ticks").text == f"{served['store'].count():,}"
    assert newest.id in card.find_element(By.CLASS_NAME, "fact-newest-tick").text
    assert "[symbol] desc/asc series" in card.find_element(By.CLASS_NAME, "fact-shapes").text
    screenshot(page, "series")


def test_the_query_grid_equals_query_frame_and_its_pages_reach_every_tick_once(
    browser: webdriver.Chrome, served: dict[str, Any]
) -> None:
    store = served["store"]
    fields = {"q-where": "exchange=EXCHG1", "q-start": "2018-12-31T09:00:00Z", "q-end": "2018-12-31T12:00:00Z",
              "q-limit": "100"}  # fmt: skip
    page = asked(browser, served, "query", fields, "q-run")
    wait(page, lambda b: "rows shown" in b.find_element(By.ID, "q-shown").text)
    window = {"where": {"exchange": "EXCHG1"}, "start": "2018-12-31T09:00:00Z", "end": "2018-12-31T12:00:00Z"}
    first = store.query_frame(limit=100, **window)
    head, rows = grid(page, "q-grid")
    assert (head, rows) == frame_cells(first)
    assert "chunk" in page.find_element(By.ID, "q-explain-out").text and "served by the index" in page.find_element(
        By.ID, "q-explain-out").text  # fmt: skip
    assert "billed read" in page.find_element(By.ID, "q-stats").text
    assert "tsstore query --database t-console-" in page.find_element(By.ID, "q-command").text
    screenshot(page, "query")
    while page.find_element(By.ID, "q-next").is_displayed():
        before = len(grid(page, "q-grid")[1])
        page.find_element(By.ID, "q-next").click()
        wait(page, lambda b, before=before: len(grid(b, "q-grid")[1]) > before)
    everything = store.query_frame(**window)
    assert len(everything) > 200  # three pages at least
    assert grid(page, "q-grid") == frame_cells(everything)  # every tick once, in order, over the pages
    ids_shown = [row[head.index("timestamp")] for row in grid(page, "q-grid")[1]]
    assert len(ids_shown) == len(everything)


def test_the_query_view_shows_the_price_before_and_after_beside_the_reads(browser: webdriver.Chrome,
                                                                         served: dict[str, Any]) -> None:  # fmt: skip
    store = served["store"]
    page = asked(browser, served, "query", {"q-where": "exchange=EXCHG2", "q-limit": "30"}, "q-run")
    wait(page, lambda b: "rows shown" in b.find_element(By.ID, "q-shown").text)
    told = store.explain(where={"exchange": "EXCHG2"}, limit=30)
    bound = told.cost()
    assert bound is not None
    explained, stats = page.find_element(By.ID, "q-explain-out").text, page.find_element(By.ID, "q-stats").text
    assert f"price of a page: {bound.describe()}" in explained  # before: the plan's bound
    billed = int(stats.split(" billed read")[0].rsplit(", ", 1)[1])
    after = ReadStats(billed_reads=billed).cost(told.prices)
    assert stats.endswith(f"; {after.describe()}") and after.reads <= bound.reads  # after: beside its reads
    assert "nam5 (no location declared) prices, Native mode, of 2026-11 (https://cloud.google.com/firestore/pricing)" in (
        stats)  # fmt: skip


def test_a_bad_filter_shows_the_commands_message(browser: webdriver.Chrome, served: dict[str, Any]) -> None:
    page = asked(browser, served, "query", {"q-where": "volume=>5"}, "q-run")
    message = wait(page, lambda b: b.find_element(By.ID, "q-error").text)
    typed_in_the_shell = tsstore("query", "--where", "volume=>5", env={"FIRESTORE_EMULATOR_HOST": "127.0.0.1:9"})
    assert typed_in_the_shell.returncode == 2 and typed_in_the_shell.stderr == f"Error: {message}\n"
    typed(page, "q-where", "color=red")
    page.find_element(By.ID, "q-run").click()
    wait(page, lambda b: "color" in b.find_element(By.ID, "q-error").text)
    error = page.find_element(By.ID, "q-error").text
    with pytest.raises(Exception) as raised:
        served["store"].query(where={"color": "red"}, limit=100)
    assert error == str(raised.value)
    screenshot(page, "query-error")


def test_the_charts_data_equals_bars_and_a_zoom_reloads_the_range(browser: webdriver.Chrome,
                                                                 served: dict[str, Any]) -> None:  # fmt: skip
    store = served["store"]
    fields = {"c-where": "symbol=AAA\nsymbol=CCC", "c-start": "2018-12-31T08:00:00Z", "c-end": "2018-12-31T17:00:00Z",
              "c-interval": "15min"}  # fmt: skip
    page = asked(browser, served, "chart", fields, "c-draw")
    wait(page, lambda b: "bars from" in b.find_element(By.ID, "c-source").text)
    sent = page.execute_script("return window.tsstoreConsole.bars")
    want = store.bars(interval="15min", by=["symbol"], price="price.micros", where={"symbol": ["AAA", "CCC"]},
                      start=dt.datetime(2018, 12, 31, 8, tzinfo=dt.timezone.utc),
                      end=dt.datetime(2018, 12, 31, 17, tzinfo=dt.timezone.utc))  # fmt: skip
    columns, rows = frame_cells(want)
    assert sent["bars"]["columns"] == columns
    assert [[shown(v) for v in row] for row in sent["bars"]["rows"]] == rows
    traces = page.execute_script("return document.getElementById('c-chart').data.map(t => [t.name, t.x.length])")
    per_symbol = want.index.get_level_values("symbol")
    assert sorted(traces) == sorted([[s, int((per_symbol == s).sum())] for s in ("AAA", "CCC")])
    screenshot(page, "chart")
    page.execute_script("Plotly.relayout('c-chart', {'xaxis.range[0]': '2018-12-31 10:00:00', "
                        "'xaxis.range[1]': '2018-12-31 12:00:00'})")  # fmt: skip
    wait(page, lambda b: b.find_element(By.ID, "c-start").get_attribute("value").startswith("2018-12-31T10:00"))
    wait(page, lambda b: b.execute_script("return window.tsstoreConsole.bars.bars.rows.length") < len(rows))
    zoomed = page.execute_script("return window.tsstoreConsole.bars.bars.rows")
    assert all("2018-12-31T10:00" <= row[1] < "2018-12-31T12:00" for row in zoomed)


def test_the_live_view_shows_every_tick_written_while_it_is_open_once(browser: webdriver.Chrome,
                                                                     served: dict[str, Any]) -> None:  # fmt: skip
    store = served["store"]
    page = opened(browser, served)
    view(page, "live")
    typed(page, "l-limit", "50")
    page.find_element(By.ID, "l-start").click()
    wait(page, lambda b: b.execute_script("return window.tsstoreConsole.liveSeen.length") >= 50)
    start = dt.datetime(2019, 1, 2, 9, tzinfo=dt.timezone.utc)
    written: list[str] = []
    for batch in range(3):
        rows = [{"symbol": "LIVE", "exchange": "EXCHG1", "instrumentType": "commonstock",
                 "price": {"currency": "USD", "micros": 1000 + i}, "volume": 100,
                 "timestamp": start + dt.timedelta(seconds=10 * batch + i)} for i in range(10)]  # fmt: skip
        written += store.write(rows).ids
        time.sleep(0.3)
    wait(page, lambda b: set(written) <= set(b.execute_script("return window.tsstoreConsole.liveSeen")))
    seen = page.execute_script("return window.tsstoreConsole.liveSeen")
    assert len(seen) == len(set(seen))  # none twice
    # Delivered in the order written: no tick of a write entered the page with an update before a
    # tick of an earlier write did (the ticks of one write, committed together, enter in any
    # grouping: one listener, over the demo's 3 shards), and the window shows them newest first.
    update = page.execute_script("return window.tsstoreConsole.liveUpdate")
    writes = [[update[i] for i in written[k:k + 10]] for k in range(0, len(written), 10)]
    assert all(max(earlier) <= min(later) for earlier, later in zip(writes, writes[1:])), writes
    head, rows = grid(page, "l-grid")
    shown_ids = [row[head.index("id")] for row in rows]
    assert [i for i in shown_ids if i in set(written)] == written[::-1]
    assert "delivery delay" in page.find_element(By.ID, "l-delay").text
    screenshot(page, "live")
    page.find_element(By.ID, "l-stop").click()


def test_the_chart_form_starts_with_the_series_shown_on_any_collection(browser: webdriver.Chrome,
                                                                      served: dict[str, Any]) -> None:  # fmt: skip
    """On a series that is not the demo's, the chart's price, ``by`` and ``where`` are its own
    (its measure, its key field, the device of its newest tick), and *Draw* draws its bars."""
    spec = SeriesSpec("sensors", shards=["a", "b"], shapes=["device"], key_fields=["device"],
                      columns={"device": "string", "celsius": "Float64"}, measures=["celsius"])  # fmt: skip
    store = TimeSeriesStore(served["client"], spec, write_options=WriteOptions(ramp=False))
    start = dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)
    store.write([{"device": device, "celsius": 20.0 + i, "timestamp": start + dt.timedelta(minutes=i)}
                 for i, device in enumerate(["boiler", "attic", "boiler", "cellar"])])  # fmt: skip
    console = Console({"sensors": Series(spec, store)}, "sensors.toml", "sensors", TOKEN)
    serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))
    try:
        page = opened(browser, {"url": serving.url})
        view(page, "chart")
        fields = {name: page.find_element(By.ID, f"c-{name}").get_attribute("value")
                  for name in ("price", "by", "where")}  # fmt: skip
        assert fields == {"price": "celsius", "by": "device", "where": "device=cellar"}
        page.find_element(By.ID, "c-draw").click()
        wait(page, lambda b: "bars from" in b.find_element(By.ID, "c-source").text)
        assert page.find_element(By.ID, "c-error").text == ""
        sent = page.execute_script("return window.tsstoreConsole.bars")
        want = store.bars(interval="1min", by=["device"], price="celsius", where={"device": "cellar"})
        assert sent["bars"]["columns"] == frame_cells(want)[0] and len(sent["bars"]["rows"]) == len(want) == 1
    finally:
        serving.stop()
        store.close()


def test_the_layout_view_shows_the_census_the_plan_and_the_files(browser: webdriver.Chrome,
                                                                 served: dict[str, Any]) -> None:  # fmt: skip
    page = opened(browser, served)
    view(page, "layout")
    wait(page, lambda b: b.find_element(By.ID, "y-census").text)
    assert f"instruments: {served['store'].count()} documents" in page.find_element(By.ID, "y-census").text
    assert "shards" in page.find_element(By.ID, "y-capacity").text
    files = page.find_element(By.ID, "y-files").text
    assert "firestore.indexes.json: current" in files and "firestore.rules: current" in files  # the repository's
    screenshot(page, "layout")


def test_the_series_view_shows_each_series_tiers_as_cold_status_says(
    browser: webdriver.Chrome, request: pytest.FixtureRequest, uses_emulator: None, tmp_path: Path
) -> None:
    """A series with a cold tier shows where its sealed history ends, what is sealed and its
    marked days (``/api/tiers``, which answers ``cold_status``); one without says none."""
    emulator = request.getfixturevalue("emulator")
    database = unique_database_id("console-tiers")
    client = emulator.client(database=database)
    spec = dataclasses.replace(SPEC, collection="trades", cold=ColdTier(tmp_path / "lake"))
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    second = DAY + dt.timedelta(days=1)
    store.write([*trading_day(200, day=DAY), *trading_day(100, day=second)])
    store.seal(until=dt.datetime.combine(second + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc))
    marked = dt.datetime.combine(second, dt.time(), tzinfo=dt.timezone.utc)  # as a writer marks a late tick's day
    client.document(f"tsstore_rollups/trades.cold/marks/{mark_id(marked)}").set({"bucket": marked})
    plain = TimeSeriesStore(client, SPEC)
    console = Console({"trades": Series(spec, store), SPEC.collection: Series(SPEC, plain)}, "tests", "the emulator",
                      TOKEN, reach=Reach(database=database, emulator=emulator.address))  # fmt: skip
    serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))
    try:
        asked = urllib.request.Request(serving.url.split("?")[0] + "api/tiers", headers={"X-Tsstore-Token": TOKEN})
        with urllib.request.urlopen(asked) as answer:
            tiers = json.load(answer)["tiers"]
        status = store.cold_status()
        assert tiers == [
            {"collection": "trades", "cold": {**dataclasses.asdict(status), "through": "2019-01-02T00:00:00+00:00",
                                              "sealed_at": status.sealed_at.isoformat(), "marked": ["2019-01-01"]}},
            {"collection": SPEC.collection, "cold": None},
        ]  # fmt: skip
        browser.get(serving.url)
        wait(browser, lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-tiers") == "true")
        card = browser.find_element(By.CSS_SELECTOR, ".series-card[data-collection=trades]")
        assert card.find_element(By.CLASS_NAME, "fact-cold-tier").text == (
            f"sealed through 2019-01-02T00:00:00+00:00 in {tmp_path / 'lake'}: 2 partition(s), 300 ticks, "
            f"{status.size:,} bytes; marked: 2019-01-01"
        )
        other = browser.find_element(By.CSS_SELECTOR, f".series-card[data-collection={SPEC.collection}]")
        assert other.find_element(By.CLASS_NAME, "fact-cold-tier").text == "none declared"
    finally:
        serving.stop()
        store.close()
        plain.close()
        client.close()


def refused_by_policy(browser: webdriver.Chrome) -> list[str]:
    """What the browser refused under the page's Content-Security-Policy since last asked."""
    return [entry["message"] for entry in browser.get_log("browser") if "Content Security Policy" in entry["message"]]


def test_the_page_sheds_its_token_and_works_under_its_content_security_policy(
    browser: webdriver.Chrome, served: dict[str, Any]
) -> None:
    """The address with the token is left for the bare one (the cookie holds the token); each
    view works with nothing refused under the policy, which is in force: an inline script
    added to the page does not run, and the browser says so."""
    browser.get_log("browser")
    page = asked(browser, served, "chart", {"c-interval": "30min"}, "c-draw")
    assert page.current_url == served["url"].split("?")[0]
    assert "token" not in page.execute_script("return location.href + document.referrer")
    wait(page, lambda b: "bars from" in b.find_element(By.ID, "c-source").text)
    view(page, "query")
    page.find_element(By.ID, "q-run").click()
    wait(page, lambda b: "rows shown" in b.find_element(By.ID, "q-shown").text)
    view(page, "layout")
    wait(page, lambda b: b.find_element(By.ID, "y-census").text)
    assert refused_by_policy(page) == []
    page.execute_script("const s = document.createElement('script'); s.textContent = 'window.inlineRan = true;';"
                        "document.head.appendChild(s);")  # fmt: skip
    assert page.execute_script("return window.inlineRan === undefined")
    assert any("inline script" in message for message in wait(page, refused_by_policy))


def test_a_page_of_another_origin_cannot_use_the_console(browser: webdriver.Chrome, served: dict[str, Any]) -> None:
    """A page served from another port of 127.0.0.1 (the same site: the browser sends the
    console's cookie with its requests) posts a query to the console from a form: refused."""
    import http.server

    console = served["url"].split("?")[0]
    form = (f'<form method="post" enctype="text/plain" action="{console}api/query">'
            '<input type="hidden" name=\'{"collection": "instruments", "limit": 3, "pad": "\' value=\'"}\'></form>'
            '<script>document.forms[0].submit()</script>')  # fmt: skip

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(form.encode())

        def log_message(self, *args: Any) -> None:
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        opened(browser, served)  # the browser holds the console's cookie
        browser.get(f"http://127.0.0.1:{evil.server_address[1]}/")
        wait(browser, lambda b: b.current_url.startswith(console + "api/query"))
        answer = wait(browser, lambda b: b.find_element(By.TAG_NAME, "body").text)
        assert json.loads(answer) == {"error": f"a page of http://127.0.0.1:{evil.server_address[1]} may not use "
                                               f"this console; only its own page ({console[:-1]}) may"}  # fmt: skip
    finally:
        evil.shutdown()
        evil.server_close()


def test_a_request_without_the_token_is_refused(served: dict[str, Any]) -> None:
    base = served["url"].split("?")[0]
    for path in ("", "api/series", "static/console.js"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + path, timeout=10)
        with refused.value:
            assert refused.value.code == 403
            assert "needs its token" in json.loads(refused.value.read())["error"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(base + "api/series?token=%C3%A9t%C3%A9", timeout=10)  # not even ASCII
    with refused.value:
        assert refused.value.code == 403
    wrong = urllib.request.Request(base + "api/series", headers={"X-Tsstore-Token": "guess"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(wrong, timeout=10)
    with refused.value:
        assert refused.value.code == 403


def test_the_console_binds_to_loopback_unless_told_otherwise() -> None:
    from tsstore.errors import UsageError

    with pytest.raises(UsageError, match=r"--host 0.0.0.0: the console binds to 127.0.0.1 only.*--allow-remote"):
        bind("0.0.0.0", 0, allow_remote=False)
    bind("127.0.0.1", 0, allow_remote=False).close()





def test_console_demo_is_one_command_that_serves_the_demos_day(emulator: Any, tmp_path: Path) -> None:
    """``tsstore console --demo`` writes the demo's day and serves it until Ctrl-C (here on the
    emulator FIRESTORE_EMULATOR_HOST names, in a database of its own)."""
    import os
    import signal
    import subprocess
    import sys

    from tsstore.cli.console import DEMO_TICKS

    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator.address, "TSSTORE_HOME": str(tmp_path / "home")}
    database = unique_database_id("console-demo")
    # The command as `python -m tsstore` runs it, with the demo's day at 2 000 ticks instead of
    # its 20 000: writing them was most of the test's time, and the size is not what it checks.
    assert DEMO_TICKS == 20_000
    launch = "import tsstore.cli.console as c; c.DEMO_TICKS = 2_000; from tsstore.cli import main; main()"
    command = [sys.executable, "-c", launch, "console", "--demo", "--no-browser", "--database", database]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            lines = [process.stdout.readline(), process.stdout.readline()]
            assert lines[0] == "wrote the demo's 2,003 ticks to 'instruments'\n", lines
            url = lines[1].split()[3]
            assert lines[1].startswith("tsstore console at http://127.0.0.1:") and "?token=" in url
            with urllib.request.urlopen(url.split("?")[0] + "api/series?token=" + url.split("token=")[1]) as answer:
                assert json.load(answer)["series"][0]["count"] == 2_003
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130 and out == "", (out, err)  # Ctrl-C ends it as it ends every command
    assert err.splitlines()[-1].startswith("interrupted: tsstore console stopped"), err


def test_the_console_serves_a_datastore_mode_series(datastore_emulator: Any) -> None:
    """On a ``datastore.Client`` the same views answer (the grid equals ``query_frame``); the
    live view says Datastore mode has no listeners, and the layout compares ``index.yaml``."""
    database = unique_database_id("console-ds")
    client = datastore_emulator.datastore_client(database=database)
    store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False))
    store.write(trading_day(400, day=DAY))
    declared = load_declaration("tsstore.demo:DECLARATION")
    reach = Reach(database=database, mode="datastore", emulator=emulator_of(client))  # as the command makes it
    console = Console({SPEC.collection: Series(SPEC, store)}, "tsstore.demo:DECLARATION", "datastore", TOKEN,
                      mode="datastore", files=ROOT / "indexes", declared=declared, reach=reach)  # fmt: skip
    serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))
    base, token = serving.url.split("?")[0], {"X-Tsstore-Token": TOKEN}

    def asked(path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        try:
            with urllib.request.urlopen(urllib.request.Request(base + path, data=data, headers=token)) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as refused:
            with refused:
                return refused.code, json.load(refused)

    try:
        assert asked("api/series")[1]["series"][0]["count"] == 400
        status, grid_answer = asked("api/query", {"collection": "instruments", "where": "symbol=AAA", "limit": 50})
        assert status == 200
        assert (grid_answer["columns"], [[shown(v) for v in row] for row in grid_answer["rows"]]) == frame_cells(
            store.query_frame(where={"symbol": "AAA"}, limit=50))  # fmt: skip
        words = shlex.split(grid_answer["command"])  # the command as shown: the emulator's variable, --mode datastore
        assert words[0] == f"DATASTORE_EMULATOR_HOST={datastore_emulator.address}" and "--mode" in words
        ran = tsstore(*words[2:], "--format", "csv", env=dict([words[0].split("=", 1)]))
        assert ran.returncode == 0, ran.stderr
        printed = pd.read_csv(io.StringIO(ran.stdout), dtype=str, keep_default_na=False)
        assert list(printed.columns) == grid_answer["columns"] and len(printed) == len(grid_answer["rows"]) > 0
        at = [pd.Timestamp(row[0]) for row in grid_answer["rows"]]
        assert [pd.Timestamp(t) for t in printed["timestamp"]] == at, "the command read other ticks"
        status, refused = asked("api/live?collection=instruments")
        assert status == 400 and "real-time listeners, which Datastore mode does not have" in refused["error"]
        status, layout = asked("api/layout?collection=instruments")
        assert status == 200 and list(layout["files"]) == ["datastore indexes"]
        assert layout["files"]["datastore indexes"]["path"].endswith("index.yaml")
    finally:
        serving.stop()
        store.close()
        client.close()


def test_a_query_cancelled_from_the_page_stops_its_wait(served: dict[str, Any], browser: webdriver.Chrome) -> None:
    """*Cancel* answers the page at once while the read is still under way (held here until the
    test lets it go), and the page says so; the read's page is dropped."""
    store = served["store"]
    held, entered = threading.Event(), threading.Event()

    class Held:
        """The store, its query held until the test lets it go."""

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def query(self, *args: Any, **kwargs: Any) -> Any:
            if args:  # the page's query (the facts read when the console starts ask by keyword)
                entered.set()
                held.wait(30)
            return store.query(*args, **kwargs)

    slow: Any = Held()
    console = Console({SPEC.collection: Series(SPEC, slow)}, "tsstore.demo:DECLARATION", "held", TOKEN)
    serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))
    try:
        page = asked(browser, {"url": serving.url}, "query", {"q-where": "symbol=AAA"}, "q-run")
        assert entered.wait(60)
        wait(page, lambda b: b.find_element(By.ID, "q-cancel").is_displayed())
        page.find_element(By.ID, "q-cancel").click()
        wait(page, lambda b: b.find_element(By.ID, "q-stats").text == "cancelled: nothing more is shown")
        assert not held.is_set() and grid(page, "q-grid") == ([], [])
    finally:
        held.set()
        serving.stop()


def test_the_chart_takes_a_rollups_bars_where_they_cover_the_range_and_says_so(served: dict[str, Any]) -> None:
    """With the day's 1-minute roll-up stored, 15-minute bars inside its span are combined from
    it (and equal the bars of the ticks); a range past its span is read from the ticks, and the
    answer says which and why."""
    store, client = served["store"], served["client"]
    bars_store = TimeSeriesStore(client, BARS_1MIN.spec)
    start = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.timezone.utc)
    store.rollup(BARS_1MIN, since=start + dt.timedelta(hours=8), until=start + dt.timedelta(hours=12))  # 4 hours
    console = Console({SPEC.collection: Series(SPEC, store, (BARS_1MIN,), {BARS_1MIN.name: bars_store})},
                      "tsstore.demo:DECLARATION", "rolled", TOKEN)  # fmt: skip
    serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))

    def chart(end: dt.datetime, begin: dt.datetime = start + dt.timedelta(hours=8)) -> dict[str, Any]:
        body = {"collection": "instruments", "interval": "15min", "by": "symbol", "where": "symbol=AAA",
                "start": begin.isoformat(), "end": end.isoformat()}  # fmt: skip
        asked = urllib.request.Request(serving.url.split("?")[0] + "api/bars", data=json.dumps(body).encode(),
                                       headers={"X-Tsstore-Token": TOKEN})  # fmt: skip
        with urllib.request.urlopen(asked) as answer:
            got: dict[str, Any] = json.load(answer)
        return got

    try:
        inside = chart(start + dt.timedelta(hours=12))
        assert inside["source"] == "roll-up 'instruments_1min' (0:01:00 bars, combined)"
        want = store.bars(interval="15min", by="symbol", price="price.micros", volume="volume", where={"symbol": "AAA"},
                          start=start + dt.timedelta(hours=8), end=start + dt.timedelta(hours=12))  # fmt: skip
        got = pd.DataFrame(inside["bars"]["rows"], columns=inside["bars"]["columns"])
        assert len(got) == len(want) > 0
        for column in ("open", "high", "low", "close", "count", "volume"):
            assert list(got[column]) == [int(v) for v in want[column]], column
        past = chart(start + dt.timedelta(hours=17))
        assert past["source"].startswith("ticks of 'instruments' (roll-up 'instruments_1min' not used: its bars cover")
        # from 07:00, an hour before the roll-up's span and the day's first tick: still its bars (one count says so)
        early = chart(start + dt.timedelta(hours=12), begin=start + dt.timedelta(hours=7))
        assert early["source"].endswith("combined; no tick before 2018-12-31T08:00:00+00:00)")
        assert early["bars"]["rows"] == inside["bars"]["rows"]
        # a later run leaves a gap: its span starts at 13:00, and ticks from 12:30 to 13:00 are not in it
        store.rollup(BARS_1MIN, since=start + dt.timedelta(hours=13), until=start + dt.timedelta(hours=14))
        gap = chart(start + dt.timedelta(hours=14), begin=start + dt.timedelta(hours=12, minutes=30))
        assert gap["source"].startswith("ticks of 'instruments' (roll-up 'instruments_1min' not used: its bars cover "
                                        "2018-12-31 13:00:00+00:00 to")  # fmt: skip
    finally:
        serving.stop()
        bars_store.close()
