"""Issue 45: the console in a real browser (headless Chromium through Selenium) on the demo's
day of 20 000 ticks, on a private emulator.

1. **First view**: from asking the page's address to the series view shown and then the day's
   1-minute bars of three symbols drawn on the chart, with the day's 1-minute roll-up stored
   (the chart combines its bars: one read per stored bar) and without it (the chart reads
   the ticks). Target: under 1 s with the roll-up, after the data is there (the console has
   read each series' facts when it started). The browser's very first load, which parses and
   compiles plotly.js, is printed apart: the browser keeps both for later loads.
2. **Live delay**: ticks written one at a time while the live view is open; for each, when a
   plain ``watch`` in this process saw it and when the page did (both on this machine's clock),
   from the write's return. Target: the page within 250 ms of the plain listener (median).

``--round-trip 0.08`` puts the console's reads (and the plain listener's) that far from the
emulator, through a proxy in a process of its own (jitter a tenth of each way); ``--cut`` also
cuts its connections about once a second while the first views are timed. The data is written
past the proxy.

Run: python bench/console.py [--repeats 5] [--live-ticks 20] [--round-trip 0.08 [--cut]]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import shutil
import statistics
import threading
import time

from _common import emulator
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.proxy import ProxyProcess
from tsstore import TimeSeriesStore, WriteOptions
from tsstore.console.app import Console, Series
from tsstore.console.server import bind, serve_in_thread
from tsstore.demo import BARS_1MIN, SPEC
from tsstore.local.emulator import emulator_client
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day

DAY = dt.datetime(2018, 12, 31, tzinfo=dt.timezone.utc)


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def first_view(page: webdriver.Chrome, url: str) -> float:
    """Seconds from asking for the page to the day's 1-minute chart drawn."""
    page.get("about:blank")
    began = time.perf_counter()
    page.get(url)
    wait = WebDriverWait(page, 60, poll_frequency=0.01)
    wait.until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    page.execute_script(
        "document.querySelector('nav button[data-view=chart]').click();"
        "for (const [id, v] of Object.entries(arguments[0])) document.getElementById(id).value = v;"
        "document.getElementById('c-draw').click();",
        {"c-where": "symbol=AAA\nsymbol=CCC\nsymbol=EEE", "c-start": DAY.isoformat(),
         "c-end": (DAY + dt.timedelta(days=1)).isoformat(), "c-interval": "1min"},
    )  # fmt: skip
    wait.until(lambda b: b.execute_script("const c = document.getElementById('c-chart');"
                                          "return c.data && c.data.length === 3"))  # fmt: skip
    return time.perf_counter() - began


def live_delays(
    page: webdriver.Chrome, url: str, store: TimeSeriesStore, listener: TimeSeriesStore, ticks: int
) -> list[tuple[float, float]]:
    """(plain listener, page) seconds after each write returned, per tick: ``store`` writes,
    ``listener`` watches (as far from the emulator as the console's reads)."""
    page.get(url)
    wait = WebDriverWait(page, 60, poll_frequency=0.005)
    wait.until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    page.find_element(By.CSS_SELECTOR, "nav button[data-view=live]").click()
    page.find_element(By.ID, "l-start").click()
    wait.until(lambda b: b.execute_script("return window.tsstoreConsole.liveDelays.length") > 0)
    plain: dict[str, float] = {}
    watch = listener.watch(limit=20)
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            update = watch.next_update(timeout=0.2)
            if update is not None:
                now = time.time()
                for tick in update.entered:
                    plain.setdefault(tick.id, now)

    thread = threading.Thread(target=listen)
    thread.start()
    time.sleep(1.0)
    written: dict[str, float] = {}
    base = DAY + dt.timedelta(days=2)
    for i in range(ticks):
        row = {"symbol": "LIVE", "exchange": "EXCHG1", "instrumentType": "commonstock", "volume": 1,
               "price": {"currency": "USD", "micros": i}, "timestamp": base + dt.timedelta(seconds=i)}  # fmt: skip
        [tick_id] = store.write([row]).ids
        written[tick_id] = time.time()
        time.sleep(0.4)
    time.sleep(1.0)
    stop.set()
    thread.join()
    watch.close()
    # when each id first reached the page (the page's clock is this machine's)
    arrivals: dict[str, float] = page.execute_script("return window.tsstoreConsole.liveArrivals")
    page.find_element(By.ID, "l-stop").click()
    return [(plain[i] - t, arrivals[i] / 1000 - t) for i, t in written.items() if i in plain and i in arrivals]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--live-ticks", type=int, default=20)
    parser.add_argument("--round-trip", type=float, default=0.0, help="seconds between the console and the emulator")
    parser.add_argument("--cut", action="store_true", help="cut the console's connections about once a second")
    args = parser.parse_args()
    if args.cut and not args.round_trip:
        parser.error("--cut needs --round-trip (the proxy that cuts)")
    emu = emulator()
    page = browser()
    rtt = args.round_trip
    proxy = ProxyProcess(emu.address, round_trip=rtt, jitter=rtt / 20) if rtt else None
    try:
        client = emu.client(database="console-bench")
        store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False))
        store.write([*SEED_INSTRUMENTS, *trading_day(20_000, day=DAY.date())])
        store.rollup(BARS_1MIN, since=DAY, until=DAY + dt.timedelta(days=1))
        reader = emulator_client(proxy.address, database="console-bench") if proxy else client
        ticks, bars = TimeSeriesStore(reader, SPEC), TimeSeriesStore(reader, BARS_1MIN.spec)
        where = f"{rtt * 1000:.0f} ms away{' with cuts' if args.cut else ''}" if proxy else "on the loopback"
        print(f"the console reads {where}")
        plain = Console({SPEC.collection: Series(SPEC, ticks)}, "tsstore.demo:DECLARATION", "bench", "t1")
        rolled = Console({SPEC.collection: Series(SPEC, ticks, (BARS_1MIN,), {BARS_1MIN.name: bars})},
                         "tsstore.demo:DECLARATION", "bench", "t2")  # fmt: skip
        served = [serve_in_thread(c, bind("127.0.0.1", 0, allow_remote=False)) for c in (plain, rolled)]
        times: dict[str, list[float]] = {"ticks": [], "roll-up": []}
        # warm-up: the browser keeps plotly.js and its compiled code; the emulator warms up
        cold = [first_view(page, served[1].url), first_view(page, served[0].url)]
        print(f"the browser's very first load (plotly.js parsed and compiled, 4.8 MB): {cold[0]:.3f} s with the "
              f"roll-up, then {cold[1]:.3f} s from ticks")  # fmt: skip
        with proxy.cutting(every=1.0) if proxy and args.cut else contextlib.nullcontext():
            for _ in range(args.repeats):
                times["ticks"].append(first_view(page, served[0].url))
                times["roll-up"].append(first_view(page, served[1].url))
        if proxy and args.cut:
            print(f"connections cut while the first views were timed: {proxy.cuts}")
        source = page.find_element(By.ID, "c-source").text
        for name, got in times.items():
            print(f"first view, 1-minute chart of the 20 000-tick day from {name}: median "
                  f"{statistics.median(got):.3f} s (min {min(got):.3f}, max {max(got):.3f})")  # fmt: skip
        print(f"  the chart said: {source}")
        best = statistics.median(times["roll-up"])
        print(f"first view with the roll-up: {best:.3f} s: {'met' if best < 1.0 else 'NOT met'} (target < 1 s)")
        delays = live_delays(page, served[0].url, store, ticks, args.live_ticks)
        behind = [p - q for q, p in delays]
        print(f"live: {len(delays)} of {args.live_ticks} ticks seen by both; plain listener median "
              f"{statistics.median(q for q, _ in delays) * 1000:.0f} ms after the write, page median "
              f"{statistics.median(p for _, p in delays) * 1000:.0f} ms; page behind the listener: median "
              f"{statistics.median(behind) * 1000:.0f} ms, max {max(behind) * 1000:.0f} ms: "
              f"{'met' if statistics.median(behind) <= 0.25 else 'NOT met'} (target <= 250 ms)")  # fmt: skip
        for s in served:
            s.stop()
    finally:
        page.quit()
        if proxy:
            proxy.close()
        emu.stop()


if __name__ == "__main__":
    main()
