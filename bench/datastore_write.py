"""Issue 44: the writer in Firestore's Datastore mode against the client's own ``put_multi`` in
threads, side by side on one Datastore-mode emulator.

Each run writes the same ``--ticks`` ticks (40 shard values) into a database of its own: by
``TimeSeriesStore.write`` (ramp off: the emulator needs none; atomic commits of creates), and
by ``put_multi`` of the same entities (the same ids and properties, prepared beforehand so it
pays no validation) in ``--threads`` threads of 500. After one warm-up run of each, the two
alternate ``--repeats`` times; "x put_multi" is the median of each repeat's ratio. Each run is
checked afterwards: exactly the ticks sent are stored (a keys-only read of the kind).

``--cut`` adds tsstore through the cutting proxy of the tests (``tests/proxy.py``: every
connection cut about once a second while the write runs), ``--round-trip MS`` apart from the
emulator, its rate against the clean direct tsstore run of the same repeat, and its stored keys
checked the same way (nothing lost, nothing twice).

Run: python bench/datastore_write.py [--ticks 20000] [--repeats 3] [--threads 4] [--cut [--round-trip 80]]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _common import emulator_in

from tests.proxy import ProxyProcess
from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.emulator import datastore_client
from tsstore.local.synthetic import trading_day
from tsstore.write.prepare import prepare_records

KIND = "ticks"


def stored(client: Any) -> set[str]:
    """Every key name of the kind, read 10 000 at a time (the emulator answers one keys-only
    query of 60 000 entities with a 9.6 MB batch, over gRPC's 4 MB default)."""
    query = client.query(kind=KIND)
    query.keys_only()
    names: set[str] = set()
    cursor = None
    while True:
        page = query.fetch(limit=10_000, start_cursor=cursor)
        got = [entity.key.name for entity in page]
        names.update(got)
        cursor = page.next_page_token
        if len(got) < 10_000 or not cursor:
            return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--cut", action="store_true", help="also write through the cutting proxy")
    parser.add_argument("--round-trip", type=float, default=0.0, help="the cutting proxy's round trip, ms")
    args = parser.parse_args()
    from google.cloud import datastore

    emu = emulator_in("datastore")
    spec = SeriesSpec(KIND, shards=[f"s{i:02d}" for i in range(40)], key_fields=["symbol"])
    rows = list(trading_day(args.ticks, seed=5))
    prepared = [(d.id, d.data) for d in prepare_records(spec, rows)]
    want = {doc_id for doc_id, _ in prepared}
    runs = 0
    cut_counts: list[int] = []

    def fresh(address: str | None = None) -> Any:
        nonlocal runs
        runs += 1
        return datastore_client(address or emu.address, database=f"w-{runs}")

    def by_tsstore(proxy: ProxyProcess | None = None) -> tuple[float, Any]:
        client = fresh(None if proxy is None else proxy.address)
        store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
        began = time.perf_counter()
        if proxy is None:
            store.write(rows)
        else:
            before = proxy.cuts
            with proxy.cutting(every=1.0, seed=runs):
                store.write(rows)
            cut_counts.append(proxy.cuts - before)
        took = time.perf_counter() - began
        store.close()
        return took, emu.datastore_client(database=f"w-{runs}")  # the check reads past the proxy

    def by_put_multi() -> tuple[float, Any]:
        client = fresh()
        entities = []
        for doc_id, data in prepared:
            entity = datastore.Entity(client.key(KIND, doc_id))
            entity.update(data)
            entities.append(entity)
        batches = [entities[i : i + 500] for i in range(0, len(entities), 500)]
        began = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(client.put_multi, batches))
        return time.perf_counter() - began, client

    methods: dict[str, Any] = {"tsstore": by_tsstore, "put_multi": by_put_multi}
    proxy = ProxyProcess(emu.address, round_trip=args.round_trip / 1000) if args.cut else None
    if proxy is not None:
        methods["tsstore cut"] = lambda: by_tsstore(proxy)
    rates: dict[str, list[float]] = {name: [] for name in methods}
    try:
        for fn in methods.values():  # warm-up: the emulator's JIT
            fn()
        for repeat in range(args.repeats):
            order = list(methods) if repeat % 2 == 0 else list(reversed(methods))
            for name in order:
                took, client = methods[name]()
                got = stored(client)
                assert got == want, f"{name}: {len(want - got)} missing, {len(got - want)} extra"
                rates[name].append(args.ticks / took)
        ratios = [t / p for t, p in zip(rates["tsstore"], rates["put_multi"])]
        print(f"Datastore mode, {args.ticks} ticks, 40 shard values, after a warm-up; medians of {args.repeats}")
        for name, got in rates.items():
            print(f"  {name:>10}: {statistics.median(got):8.0f} ticks/s  (each: {', '.join(f'{r:.0f}' for r in got)})")
        print(f"  tsstore {statistics.median(ratios):.2f}x put_multi (each: {', '.join(f'{r:.2f}' for r in ratios)}); "
              "every run stored exactly the ticks sent")
        if proxy is not None:
            slow = [c / t for t, c in zip(rates["tsstore"], rates["tsstore cut"])]
            print(f"  tsstore through cuts at {args.round_trip:.0f} ms: {statistics.median(slow):.2f}x "
                  "its clean direct rate "
                  f"(each: {', '.join(f'{r:.2f}' for r in slow)}; connections cut per run: "
                  f"{', '.join(map(str, cut_counts[1:]))}): nothing lost, nothing twice")
    finally:
        if proxy is not None:
            proxy.close()
        emu.stop()


if __name__ == "__main__":
    main()
