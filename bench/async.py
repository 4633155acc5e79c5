"""200 concurrent limited queries: the async store on one event loop vs the sync store driven
from a pool of caller threads (16, or one per query).

Both stores run the same 200 queries (a symbol filter, a different end time each, newest
first, limit 50) against the same collection on one emulator, repetitions interleaved, with
their default concurrency (8 chunk queries at once: the sync store's reader threads, the
async store's gate). The script checks both return the same ticks at the same cost in
documents, then prints wall and client CPU side by side, the async/sync ratios and the
threads alive after each. The async store's target: no slower (<= 1.05x), no thread per query.

The emulator answers an `in` of n shard values by scanning the collection n times, so a
40-shard query costs it about n times a 3-shard one; the collections are kept small for that.

Run: python bench/async.py [--docs 1000] [--queries 200] [--repeats 3] [--shards 3 40]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import threading
from concurrent.futures import ThreadPoolExecutor

from _common import emulator, measure, verdict

from tsstore import AsyncTimeSeriesStore, Page, Query, QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.synthetic import INSTRUMENTS, trading_day

OPEN = dt.datetime(2019, 1, 2, 8, 0, tzinfo=dt.timezone.utc)
LIMIT = 50


def queries(count: int, *, seed: int) -> list[Query]:
    rng = random.Random(seed)
    symbols = [symbol for symbol, *_ in INSTRUMENTS]
    return [
        Query(
            where={"symbol": rng.choice(symbols)},
            end=OPEN + dt.timedelta(seconds=rng.randrange(3600, int(8.5 * 3600))),
            limit=LIMIT,
        )
        for _ in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shards", type=int, nargs="+", default=[3, 40])
    args = parser.parse_args()
    emu = emulator()
    loop = asyncio.new_event_loop()
    print(f"{args.queries} concurrent queries (symbol filter, limit {LIMIT}), {args.docs} docs per collection")
    print(f"{'shards':>6} {'chunks':>6} {'method':<18} {'wall':>8} {'cpu':>8} {'docs':>7} {'threads':>7}  async/this")
    try:
        for n_shards in args.shards:
            emu.reset()
            database = f"bench-async{n_shards}"
            spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(n_shards)], shapes=[QueryShape(("symbol",))])
            client, aclient = emu.client(database=database), emu.async_client(database=database)
            store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False, max_ops_per_second=100_000))
            store.write(trading_day(args.docs, seed=n_shards))
            astore = AsyncTimeSeriesStore(aclient, spec)
            batch = queries(args.queries, seed=n_shards)

            async def gather() -> list[Page]:
                return list(await asyncio.gather(*(astore.query(q) for q in batch)))

            def run_async() -> list[Page]:
                return loop.run_until_complete(gather())

            callers = {n: ThreadPoolExecutor(n, thread_name_prefix=f"caller{n}") for n in (16, args.queries)}

            def run_sync(pool: ThreadPoolExecutor) -> list[Page]:
                return list(pool.map(store.query, batch))

            methods = {"async, one loop": run_async}
            methods |= {f"sync, {n} threads": (lambda p=p: run_sync(p)) for n, p in callers.items()}
            answers, threads = {}, {}
            for name, fn in methods.items():  # the answers, and the threads alive just after each run
                answers[name] = fn()
                threads[name] = threading.active_count()
            ids = {name: [[t.id for t in page] for page in pages] for name, pages in answers.items()}
            docs = {name: sum(page.stats.documents for page in pages) for name, pages in answers.items()}
            assert all(v == ids["async, one loop"] for v in ids.values()), "the stores disagree"
            r = measure(methods, repeats=args.repeats, warm_up=False)
            base = r["async, one loop"]["wall"]
            for name, m in r.items():
                ratio = "" if name.startswith("async") else f"{base / m['wall']:.2f}x {verdict(base / m['wall'], 1.05)}"
                print(
                    f"{n_shards:>6} {len(store.plan(batch[0]).chunks):>6} {name:<18} {m['wall'] * 1000:>6.0f}ms "
                    f"{m['cpu'] * 1000:>6.0f}ms {docs[name]:>7} {threads[name]:>7}  {ratio}"
                )
            for pool in callers.values():
                pool.shutdown()
            store.close()
            client.close()
            loop.run_until_complete(_close(aclient))
    finally:
        loop.close()
        emu.stop()


async def _close(client: object) -> None:
    result = client.close()  # type: ignore[attr-defined]
    if asyncio.iscoroutine(result):
        await result


if __name__ == "__main__":
    main()
