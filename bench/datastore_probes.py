"""Stage-1 probes of the Firestore emulator in Datastore mode (issue 44): each prints what it saw.

Needs google-cloud-datastore (not a dependency yet). Run: python bench/datastore_probes.py [p2 p9 ...]
What it printed on 2026-11-27 is in notes/datastore-mode-design.md, section 9.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import time
import traceback
import urllib.request

from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import datastore
from google.cloud.datastore.query import And, Or, PropertyFilter

from tsstore.local.emulator import find_emulator_command, free_port

PROJECT = "probe"
UTC = dt.timezone.utc


def start() -> tuple[subprocess.Popen[bytes], int, float]:
    port = free_port()
    command = [*find_emulator_command(), "--host=127.0.0.1", f"--port={port}", "--database-mode=datastore-mode"]
    began = time.monotonic()
    log = open("/tmp/ds-emulator.log", "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    while time.monotonic() - began < 60:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.1)
    return process, port, time.monotonic() - began


def client(port: int, *, database: str = "", namespace: str | None = None) -> datastore.Client:
    return datastore.Client(
        project=PROJECT, database=database, namespace=namespace, credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=f"http://127.0.0.1:{port}"),
    )


def probe(name: str):
    def wrap(fn):
        def run(*args):
            print(f"\n== {name}")
            try:
                fn(*args)
            except Exception as exc:  # a probe's failure is its finding
                print(f"   RAISED {type(exc).__name__}: {str(exc)[:400]}")
                traceback.print_exc(limit=2, file=sys.stdout)
        return run
    return wrap


def attempt(label: str, call) -> None:
    """Print whether ``call()`` was accepted or what it raised."""
    try:
        call()
        print(f"   {label}: accepted")
    except Exception as exc:
        print(f"   {label}: {type(exc).__name__} {str(exc)[:200]}")


def put(c: datastore.Client, kind: str, n: int, *, shards: int = 40) -> list[datastore.Entity]:
    base = dt.datetime(2026, 1, 2, 9, tzinfo=UTC)
    made = []
    for i in range(n):
        e = datastore.Entity(c.key(kind, f"t{i:05d}"))
        e.update({"symbol": f"S{i % 5}", "shard": f"s{i % shards:02d}", "timestamp": base + dt.timedelta(microseconds=i * 1001),
                  "price": datastore.Entity(), "volume": i})
        e["price"].update({"currency": "USD", "micros": 1000 + i})
        made.append(e)
    for k in range(0, n, 500):
        c.put_multi(made[k:k + 500])
    return made


@probe("P1 start, ready line, preview note; a Native client against it")
def p1(port: int, seconds: float) -> None:
    print(f"   ready in {seconds:.1f} s")
    text = open("/tmp/ds-emulator.log", errors="replace").read()
    print("   log lines:", [l for l in text.splitlines() if "preview" in l.lower() or "running" in l.lower() or "mode" in l.lower()][:6])
    from google.cloud import firestore
    os.environ["FIRESTORE_EMULATOR_HOST"] = f"127.0.0.1:{port}"
    try:
        f = firestore.Client(project=PROJECT)
        f.collection("c").document("d").set({"a": 1})
        print("   native set: accepted", f.collection("c").document("d").get().to_dict())
    finally:
        del os.environ["FIRESTORE_EMULATOR_HOST"]


@probe("P2 named databases and namespaces isolate; reset")
def p2(port: int) -> None:
    a, b, n = client(port, database="db-a"), client(port, database="db-b"), client(port, database="db-a", namespace="ns1")
    a.put(datastore.Entity(a.key("K", "x")))
    print("   db-a has x:", a.get(a.key("K", "x")) is not None, "db-b has x:", b.get(b.key("K", "x")) is not None,
          "db-a/ns1 has x:", n.get(n.key("K", "x")) is not None)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/reset", method="POST")
    with urllib.request.urlopen(req) as answer:
        print("   POST /reset:", answer.status)
    print("   after reset db-a has x:", a.get(a.key("K", "x")) is not None)
    b.put(datastore.Entity(b.key("K", "y")))
    path = f"/emulator/v1/projects/{PROJECT}/databases/db-b/documents"
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="DELETE")
    try:
        with urllib.request.urlopen(req) as answer:
            print("   DELETE per database:", answer.status, "db-b has y:", b.get(b.key("K", "y")) is not None)
    except Exception as exc:
        print("   DELETE per database raised", exc)


@probe("P3 commit limits: 501 mutations; one key twice")
def p3(port: int) -> None:
    c = client(port, database="p3")
    many = [datastore.Entity(c.key("K", f"k{i}")) for i in range(501)]
    attempt("501 in one commit", lambda: c.put_multi(many))
    twice = [datastore.Entity(c.key("K", "same")), datastore.Entity(c.key("K", "same"))]
    attempt("one key twice (non-transactional)", lambda: c.put_multi(twice))


@probe("P4 insert on an existing key (raw commit, both modes)")
def p4(port: int) -> None:
    from google.cloud.datastore_v1.types import datastore as ds_pb
    c = client(port, database="p4")
    c.put(datastore.Entity(c.key("K", "there")))
    api = c._datastore_api
    from google.cloud.datastore.helpers import entity_to_protobuf
    for mode in ("NON_TRANSACTIONAL", "TRANSACTIONAL"):
        ents = [datastore.Entity(c.key("K", f"{mode}-new{i}")) for i in range(3)] + [datastore.Entity(c.key("K", "there"))]
        mutations = [ds_pb.Mutation(insert=entity_to_protobuf(e)._pb) for e in ents]
        request = {"project_id": PROJECT, "database_id": "p4", "mode": getattr(ds_pb.CommitRequest.Mode, mode), "mutations": mutations}
        if mode == "TRANSACTIONAL":
            request["single_use_transaction"] = {"read_write": {}}
        try:
            answer = api.commit(request=request)
            print(f"   {mode}: accepted; results", [(r.version, bool(r.conflict_detected)) for r in answer.mutation_results])
        except Exception as exc:
            print(f"   {mode}: {type(exc).__name__} {str(exc)[:200]}")
        print("   the new ones landed:", [c.get(c.key("K", f"{mode}-new{i}")) is not None for i in range(3)])


@probe("P7/P8 read_time on lookup, query, aggregation; IN 30/31; order; cursors; batch size")
def p7(port: int) -> None:
    c = client(port, database="p7")
    put(c, "T", 1200)
    q = c.query(kind="T")
    q.add_filter(filter=PropertyFilter("shard", "IN", [f"s{i:02d}" for i in range(30)]))
    q.order = ["-timestamp"]
    got = list(q.fetch(limit=50))
    ts = [e["timestamp"] for e in got]
    print("   IN 30 + order -timestamp + limit 50:", len(got), "sorted desc:", ts == sorted(ts, reverse=True), "micros kept:", ts[0].microsecond)
    q31 = c.query(kind="T")
    q31.add_filter(filter=PropertyFilter("shard", "IN", [f"s{i:02d}" for i in range(31)]))
    attempt("IN 31", lambda: list(q31.fetch(limit=1)))
    later = dt.datetime.now(UTC)
    time.sleep(0.05)
    c.put(datastore.Entity(c.key("T", "late")))
    whole = c.query(kind="T")
    try:
        print("   count at read_time before the late put:", list(c.aggregation_query(whole).count(alias="n").fetch(read_time=later))[0][0].value,
              "now:", list(c.aggregation_query(whole).count(alias="n").fetch())[0][0].value)
    except Exception as exc:
        print("   aggregation read_time:", type(exc).__name__, str(exc)[:200])
    try:
        print("   get at read_time before:", c.get(c.key("T", "late"), read_time=later), "now:", c.get(c.key("T", "late")) is not None)
    except Exception as exc:
        print("   lookup read_time:", type(exc).__name__, str(exc)[:200])
    it = q.fetch(limit=2000)
    pages = list(it.pages)
    print("   entities per RunQuery batch (no limit asked beyond 2000):", [len(list(p)) for p in pages][:6])
    it = q.fetch(limit=10)
    first = list(it)
    cursor = it.next_page_token
    nxt = list(q.fetch(limit=10, start_cursor=cursor))
    print("   start_cursor with IN + order: next page continues:", nxt[0]["timestamp"] < first[-1]["timestamp"] if nxt else "empty")
    s = c.aggregation_query(whole).sum("price.micros", alias="s").avg("price.micros", alias="a")
    print("   sum/avg price.micros:", [(r.alias, r.value) for r in list(s.fetch())[0]])
    nested = c.query(kind="T")
    nested.add_filter(filter=PropertyFilter("price.micros", ">=", 2000))
    print("   filter on price.micros >= 2000:", len(list(nested.fetch())))


@probe("P9 OR with __key__; disjunctions IN[30] x OR[2]")
def p9(port: int) -> None:
    c = client(port, database="p7")
    t = dt.datetime(2026, 1, 2, 9, tzinfo=UTC) + dt.timedelta(microseconds=600 * 1001)
    q = c.query(kind="T")
    key = c.key("T", "t00600")
    q.add_filter(filter=And([PropertyFilter("shard", "IN", [f"s{i:02d}" for i in range(15)]),
                             Or([PropertyFilter("timestamp", "<", t), And([PropertyFilter("timestamp", "=", t), PropertyFilter("__key__", "<", key)])])]))
    q.order = ["-timestamp", "-__key__"]
    try:
        got = list(q.fetch(limit=5))
        print("   IN 15 AND (ts < t OR (ts = t AND key < k)):", [e.key.name for e in got])
    except Exception as exc:
        print("   OR start-after:", type(exc).__name__, str(exc)[:300])
    q2 = c.query(kind="T")
    q2.add_filter(filter=And([PropertyFilter("shard", "IN", [f"s{i:02d}" for i in range(30)]),
                              Or([PropertyFilter("timestamp", "<", t), PropertyFilter("volume", "=", 3)])]))
    attempt("IN 30 x OR 2 (60 disjunctions)", lambda: list(q2.fetch(limit=1)))


@probe("P11/P13/P14 mixed types; long indexed string; avg of nothing; 6 aggregations")
def p14(port: int) -> None:
    c = client(port, database="p14")
    for name, v in (("i", 2), ("f", 2.0), ("t", dt.datetime(2026, 1, 1, tzinfo=UTC))):
        e = datastore.Entity(c.key("M", name)); e["v"] = v; c.put(e)
    q = c.query(kind="M"); q.order = ["v"]
    print("   order of 2, 2.0, a timestamp:", [e.key.name for e in q.fetch()])
    e = datastore.Entity(c.key("M", "long")); e["s"] = "x" * 1600
    try:
        c.put(e); print("   indexed string of 1600 bytes: accepted")
    except Exception as exc:
        print("   indexed string of 1600 bytes:", type(exc).__name__, str(exc)[:150])
    empty = c.query(kind="Nothing")
    try:
        r = list(c.aggregation_query(empty).avg("v", alias="a").sum("v", alias="s").count(alias="n").fetch())[0]
        print("   avg/sum/count of nothing:", [(x.alias, x.value) for x in r])
    except Exception as exc:
        print("   aggregation of nothing:", type(exc).__name__, str(exc)[:150])
    agg = c.aggregation_query(c.query(kind="M"))
    for k in range(6):
        agg.count(alias=f"n{k}")
    try:
        list(agg.fetch()); print("   6 aggregations: accepted")
    except Exception as exc:
        print("   6 aggregations:", type(exc).__name__, str(exc)[:150])


@probe("P16 projection and keys-only")
def p16(port: int) -> None:
    c = client(port, database="p7")
    q = c.query(kind="T", projection=["timestamp"])
    try:
        print("   projection:", list(q.fetch(limit=2))[:1])
    except Exception as exc:
        print("   projection:", type(exc).__name__, str(exc)[:150])
    k = c.query(kind="T"); k.keys_only()
    try:
        print("   keys only:", [e.key.name for e in k.fetch(limit=2)])
    except Exception as exc:
        print("   keys only:", type(exc).__name__, str(exc)[:150])


@probe("Throughput: put_multi of 20 000 entities, 4 threads of 500")
def speed(port: int) -> None:
    from concurrent.futures import ThreadPoolExecutor
    c = client(port, database="speed")
    base = dt.datetime(2026, 1, 2, 9, tzinfo=UTC)
    ents = []
    for i in range(20000):
        e = datastore.Entity(c.key("W", f"w{i:05d}"))
        e.update({"symbol": f"S{i % 5}", "shard": f"s{i % 40:02d}", "timestamp": base + dt.timedelta(microseconds=i), "volume": i})
        ents.append(e)
    began = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(c.put_multi, [ents[k:k + 500] for k in range(0, 20000, 500)]))
    took = time.perf_counter() - began
    print(f"   {20000 / took:,.0f} entities/s")


def main() -> None:
    process, port, seconds = start()
    try:
        if len(sys.argv) < 2:
            p1(port, seconds)
        elif "p9" in sys.argv:
            put(client(port, database="p7"), "T", 1200)
        for fn in (p2, p3, p4, p7, p9, p14, p16, speed) if len(sys.argv) < 2 else [globals()[a] for a in sys.argv[1:]]:
            fn(port)
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
