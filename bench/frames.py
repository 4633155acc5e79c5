"""(b) Rows -> DataFrame, client CPU: tsstore's query_frame vs `get()` + `pd.json_normalize`.

Both read the same 10 000 ticks from the emulator (one chunk, newest first). The emulator
runs in another process, so `time.process_time()` here is the client's own cost: RPC
handling, decoding and building the frame.

Run: python bench/frames.py [--rows 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse

import pandas as pd
from _common import emulator, measure, verdict
from google.cloud import firestore

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.synthetic import trading_day


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    emu = emulator()
    try:
        client = emu.client(database="bench-frames")
        spec = SeriesSpec("ticks", key_fields=["symbol"])
        store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False, max_ops_per_second=100_000))
        store.write(trading_day(args.rows, seed=2))
        coll = client.collection("ticks")

        def ours() -> pd.DataFrame:
            return store.query_frame(limit=args.rows)

        def baseline() -> pd.DataFrame:
            snaps = coll.order_by("timestamp", direction=firestore.Query.DESCENDING).limit(args.rows).get()
            frame = pd.json_normalize([s.to_dict() for s in snaps])
            return frame.set_index(pd.DatetimeIndex(frame.pop("timestamp"), name="timestamp"))

        a, b = ours(), baseline()
        assert len(a) == len(b) == args.rows
        assert a["price.micros"].tolist() == b["price.micros"].tolist()
        r = measure({"tsstore": ours, "get+json_normalize": baseline}, repeats=args.repeats)
        ratio = r["tsstore"]["cpu"] / r["get+json_normalize"]["cpu"]
        print(f"rows -> DataFrame, {args.rows} rows, client CPU (median of {args.repeats})")
        for name, m in r.items():
            print(f"  {name:<20} cpu {m['cpu'] * 1000:7.0f} ms   wall {m['wall'] * 1000:7.0f} ms")
        print(f"  ratio tsstore / get+json_normalize: {ratio:.2f}x {verdict(ratio, 0.4)}")
        store.close()
        client.close()
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
