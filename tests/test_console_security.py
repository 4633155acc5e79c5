"""Who the console answers, over HTTP on a console served on the emulator: only requests that
name its address in ``Host`` (not a name rebound to 127.0.0.1), carry its token, and, for its
JSON interface and every POST, come from its own page (not another port of 127.0.0.1); every
answer carries the browser's security headers; the page's address sheds its token; every bad
field of a request is a 400 in the commands' words; the query's command, run as shown, prints
the grid's rows; the command stops cleanly on SIGINT and SIGTERM with a live view open; and
``--demo``/``--host`` refuse what they cannot do. The browser's side is in test_console.py."""

from __future__ import annotations

import datetime as dt
import io
import os
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.cli import tsstore
from tests.conftest import unique_database_id
from tsstore import TimeSeriesStore, WriteOptions
from tsstore.console.app import SECURITY_HEADERS, Console, Series
from tsstore.console.forms import Reach
from tsstore.console.server import bind, serve_in_thread
from tsstore.demo import SPEC
from tsstore.errors import UsageError
from tsstore.local.synthetic import trading_day

DAY = dt.date(2018, 12, 31)
TOKEN = "test-token-" + uuid.uuid4().hex
DECLARATION = "tsstore.demo:DECLARATION"


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[dict[str, Any]]:
    """300 ticks of the demo's day on a database of its own, a console on them, and an HTTP
    client that carries the token (and names the console's address, as httpx does)."""
    emulator = request.getfixturevalue("emulator")
    database = unique_database_id("console-doors")
    client = emulator.client(database=database)
    store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False))
    store.write(trading_day(300, day=DAY))
    console = Console({SPEC.collection: Series(SPEC, store)}, DECLARATION, "the test's emulator", TOKEN,
                      reach=Reach(database=database, emulator=emulator.address))  # fmt: skip
    serving = serve_in_thread(console, bind("127.0.0.1", 0, allow_remote=False))
    base = serving.url.split("?")[0]
    with httpx.Client(base_url=base, headers={"X-Tsstore-Token": TOKEN}, timeout=30) as http:
        yield {"store": store, "url": serving.url, "base": base, "http": http, "emulator": emulator,
               "database": database, "port": serving.sock.getsockname()[1]}  # fmt: skip
    serving.stop()
    store.close()
    client.close()


QUERY = {"collection": "instruments", "where": "symbol=AAA", "limit": 5}


def test_a_host_that_does_not_name_the_console_is_refused(served: dict[str, Any]) -> None:
    """DNS rebinding: a page of evil.example, its name made to resolve to 127.0.0.1, sends
    ``Host: evil.example``; with the cookie it would read the series."""
    http, port = served["http"], served["port"]
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1"):
        refused = http.get("api/series", headers={"Host": host})
        assert refused.status_code == 400, host
        assert refused.json()["error"].startswith(f"Host {host!r} is not this console's address"), host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert http.get("api/catalog", headers={"Host": host}).status_code == 200, host


@pytest.mark.parametrize(("headers", "said"), [
    ({"Origin": "http://127.0.0.1:1"}, "a page of http://127.0.0.1:1 may not use this console"),
    ({"Origin": "http://evil.example"}, "a page of http://evil.example may not use this console"),
    ({"Origin": "null"}, "a page of null may not use this console"),
    ({"Sec-Fetch-Site": "cross-site"}, "a request from another page (Sec-Fetch-Site: cross-site)"),
    ({"Sec-Fetch-Site": "same-site"}, "a request from another page (Sec-Fetch-Site: same-site)"),
])  # fmt: skip
def test_a_post_or_live_stream_from_another_origin_is_refused(served: dict[str, Any], headers: dict[str, str],
                                                              said: str) -> None:  # fmt: skip
    """Another port of 127.0.0.1 is the same site: the browser sends the console's cookie with
    its pages' requests, so only the origin tells them from the console's own page."""
    http = served["http"]
    for asked in (http.build_request("POST", "api/query", json=QUERY, headers=headers),
                  http.build_request("GET", "api/live?collection=instruments", headers=headers),
                  http.build_request("GET", "api/series", headers=headers)):  # fmt: skip
        refused = http.send(asked)
        assert refused.status_code == 403, (asked.url, headers)
        assert refused.json()["error"].startswith(said), (asked.url, refused.json())


def test_the_consoles_own_page_may_post(served: dict[str, Any]) -> None:
    http, port = served["http"], served["port"]
    for headers in ({"Origin": f"http://127.0.0.1:{port}"}, {"Sec-Fetch-Site": "same-origin"}, {}):
        answered = http.post("api/query", json=QUERY, headers=headers)
        assert answered.status_code == 200 and len(answered.json()["rows"]) == 5, headers
    page_by_name = http.post("api/query", json=QUERY, headers={"Host": f"localhost:{port}",
                                                                "Origin": f"http://localhost:{port}"})  # fmt: skip
    assert page_by_name.status_code == 200


def test_the_pages_address_sheds_its_token_for_a_cookie(served: dict[str, Any]) -> None:
    """The address the command prints (with ``?token=``) answers with a redirect to the bare
    address, setting the cookie: the token leaves the address bar and the history."""
    with httpx.Client(timeout=30) as browser:  # no token header: a browser's own requests
        first = browser.get(served["url"])
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"tsstore_console_{served['port']}={TOKEN};"), cookie
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        page = browser.get(served["base"])  # the cookie, kept by the client
        assert page.status_code == 200 and "<title>tsstore console</title>" in page.text


def test_every_answer_carries_the_security_headers(served: dict[str, Any]) -> None:
    http = served["http"]
    answers = [http.get(""), http.get("static/console.js"), http.get("static/plotly.min.js"), http.get("api/series"),
               http.post("api/query", json={"where": "x"}), http.get("api/series", headers={"X-Tsstore-Token": "no"}),
               http.get("api/series", headers={"Host": "evil.example"}), http.get(served["url"])]  # fmt: skip
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 400, 403, 400, 303]
    for answer in answers:
        assert {name: answer.headers.get(name) for name in SECURITY_HEADERS} == SECURITY_HEADERS, answer.url
    assert "default-src 'self'" in SECURITY_HEADERS["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in SECURITY_HEADERS["Content-Security-Policy"]


@pytest.mark.parametrize(("path", "body", "said"), [
    ("api/query", {**QUERY, "cursor": 5}, "cursor 5 is not a tsstore cursor: give the text a page answered"),
    ("api/query", {**QUERY, "cursor": "xyz"}, "cursor 'xyz' is not a tsstore cursor"),
    ("api/query", {**QUERY, "cursor": ["a"]}, "cursor ['a'] is not a tsstore cursor"),
    ("api/query", {**QUERY, "ask": 7}, "ask 7 is not text"),
    ("api/query", {**QUERY, "where": 5}, "where 5 is not text; give one condition a line"),
    ("api/query", {**QUERY, "limit": "many"}, "limit 'many' is not allowed; give a whole number from 1 to 1000"),
    ("api/query", {**QUERY, "limit": 2.5}, "limit 2.5 is not allowed"),
    ("api/query", {**QUERY, "direction": ["asc"]}, "direction ['asc'] is not allowed; give desc or asc"),
    ("api/query", {**QUERY, "start": 20181231}, "start 20181231 is not text"),
    ("api/query", {**QUERY, "start": "yesterday-ish"}, "--start 'yesterday-ish' is not a time"),
    ("api/query", {"where": "symbol=AAA"}, "give collection: the series to read (declared: instruments)"),
    ("api/query", {**QUERY, "collection": 3}, "the declaration has no series 3 (declared: instruments)"),
    ("api/explain", {**QUERY, "columns": 1}, "columns 1 is not text"),
    ("api/cancel", {"ask": {"id": 1}}, "ask {'id': 1} is not text"),
    ("api/bars", {"collection": "instruments", "interval": 60}, "interval 60 is not text"),
    ("api/bars", {"collection": "instruments", "by": ["symbol"]}, "by ['symbol'] is not text"),
    ("api/bars", {"collection": "instruments", "price": 1}, "price 1 is not text"),
    ("api/bars", {"collection": "instruments", "fill": True}, "fill True is not text"),
    ("api/query", b"{not json", "the request's body is not JSON"),
    ("api/query", b"", "the request's body is not JSON"),
    ("api/query", [QUERY], "the request's body is not a JSON object"),
])  # fmt: skip
def test_every_bad_field_is_a_400_in_the_commands_words(served: dict[str, Any], path: str, body: Any,
                                                        said: str) -> None:  # fmt: skip
    http = served["http"]
    answer = http.post(path, content=body) if isinstance(body, bytes) else http.post(path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"].startswith(said), answer.json()


def test_the_query_as_a_command_prints_the_grids_rows(served: dict[str, Any]) -> None:
    """The command the page shows, run as shown (its environment and options: the emulator,
    the database), prints the rows of the grid; without them it would read the local store's
    default database, which holds none of them."""
    asked = {"collection": "instruments", "where": "exchange=EXCHG1", "start": "2018-12-31T09:00:00Z",
             "end": "2018-12-31T12:00:00Z", "limit": 7, "direction": "asc", "columns": "symbol,price.micros"}
    grid = served["http"].post("api/query", json=asked).json()
    words = shlex.split(grid["command"])
    env = dict(word.split("=", 1) for word in words[:words.index("tsstore")])
    assert env == {"FIRESTORE_EMULATOR_HOST": served["emulator"].address}
    assert words[words.index("--database") + 1] == served["database"]
    ran = tsstore(*words[words.index("tsstore") + 1:], "--format", "csv", env=env)
    assert ran.returncode == 0, ran.stderr
    printed = pd.read_csv(io.StringIO(ran.stdout), dtype=str, keep_default_na=False)
    assert list(printed.columns) == grid["columns"]
    assert len(grid["rows"]) == 7
    shown = [[pd.Timestamp(row[0]).isoformat(), *(str(v) for v in row[1:])] for row in grid["rows"]]
    assert [[pd.Timestamp(row[0]).isoformat(), *row[1:]] for row in printed.values.tolist()] == shown


def test_demo_refuses_a_project_and_host_refuses_a_port() -> None:
    refused = tsstore("console", "--demo", "--project", "my-project", "--no-browser")
    assert refused.returncode == 2
    assert refused.stderr == ("Error: --demo writes the demo's 20,000 ticks before it shows them, so it runs on a "
                              "temporary emulator only: leave out --project my-project (or give --spec to look at that "
                              "project's series)\n")  # fmt: skip
    for given, address, port in (("127.0.0.1:8080", "127.0.0.1", "8080"), ("localhost:80", "localhost", "80"),
                                 ("[::1]:8080", "::1", "8080")):  # fmt: skip
        with pytest.raises(UsageError) as raised:
            bind(given, 0, allow_remote=False)
        assert str(raised.value) == (f"--host {given}: give the address alone and the port with --port (--host "
                                     f"{address} --port {port})")  # fmt: skip
    ran = tsstore("console", "--host", "127.0.0.1:8080", "--no-browser", env={"FIRESTORE_EMULATOR_HOST": "127.0.0.1:9"})
    assert ran.returncode == 2 and "give the address alone and the port with --port" in ran.stderr
    assert "--allow-remote" not in ran.stderr


@pytest.mark.parametrize(("sent", "code", "said"), [
    (signal.SIGINT, 130, "interrupted: tsstore console stopped"),
    (signal.SIGTERM, 143, "terminated: tsstore console stopped"),
])  # fmt: skip
def test_a_signal_stops_the_console_cleanly_with_a_live_view_open(emulator: Any, tmp_path: Path, sent: int,
                                                                  code: int, said: str) -> None:  # fmt: skip
    """Ctrl-C (SIGINT) or SIGTERM while a live view streams: the stream ends, the command exits
    130 or 143 with one line on stderr, no traceback of the stream's task."""
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator.address, "TSSTORE_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "tsstore", "console", "--no-browser", "--database",
               unique_database_id("console-signal")]  # fmt: skip
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().split()[3]
            base, token = url.split("?token=")
            with httpx.Client(base_url=base, headers={"X-Tsstore-Token": token}, timeout=60) as http:
                with http.stream("GET", "api/live", params={"collection": "instruments", "limit": "5"}) as live:
                    assert live.status_code == 200
                    lines = live.iter_lines()
                    assert next(line for line in lines if line.startswith("data: "))  # the first window
                    process.send_signal(sent)
                    list(lines)  # to the stream's end, which the console wrote (a cut stream raises here)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == code, (process.returncode, err)
    assert out == "" and "Traceback" not in err and "Exception" not in err, err
    assert err.splitlines()[-1].startswith(said), err
