"""Sharded counters on the emulator: concurrency, roll-ups, growth, healing, bad input."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.cloud import firestore

from tsstore import CounterError, TsstoreError
from tsstore.counters import ShardedCounter, plan_counter_shards

THREADS, PER_THREAD = 16, 1000


def hammer(counter: ShardedCounter, *, during: object = None) -> list[int]:
    """16 threads x 1 000 increments of 1 on ``counter``, rolling up concurrently; ``during``
    (a callable) runs once when half the increments are done. Returns the roll-ups seen."""
    done = 0
    lock = threading.Lock()
    half = threading.Event()
    stop = threading.Event()
    rollups: list[int] = []

    def work(_: int) -> None:
        nonlocal done
        for _ in range(PER_THREAD):
            counter.increment()
            with lock:
                done += 1
                if done == THREADS * PER_THREAD // 2:
                    half.set()

    def roll() -> None:
        while not stop.is_set():
            rollups.append(counter.rollup().value)

    roller = threading.Thread(target=roll)
    roller.start()
    with ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(work, i) for i in range(THREADS)]
        if during is not None:
            half.wait()
            during()  # type: ignore[operator]
        for f in futures:
            f.result()
    stop.set()
    roller.join()
    return rollups


def test_16_threads_of_increments_count_exactly(client: firestore.Client) -> None:
    counter = ShardedCounter(client, "counters/hits")
    assert counter.create(shards=10) == 10
    rollups = hammer(counter)
    assert counter.value() == THREADS * PER_THREAD
    assert counter.rollup().value == THREADS * PER_THREAD
    assert counter.read().value == THREADS * PER_THREAD and not counter.read().live
    # concurrent roll-ups only ever saw values that were true at some point: never more
    assert rollups and max(rollups) <= THREADS * PER_THREAD and rollups == sorted(rollups)
    shard_counts = [d.get("count") for d in client.collection("counters/hits/shards").stream()]
    assert len(shard_counts) == 10 and all(c > 0 for c in shard_counts)


def test_growing_the_shard_count_mid_run_loses_nothing(client: firestore.Client) -> None:
    counter = ShardedCounter(client, "apps/a1/counters/events")  # any parent path
    counter.create(shards=10)
    hammer(counter, during=lambda: counter.grow(shards=20))
    assert counter.shards() == 20
    assert counter.value() == THREADS * PER_THREAD
    assert counter.rollup().value == THREADS * PER_THREAD
    new_shards = [
        d.get("count") for d in client.collection("apps/a1/counters/events/shards").stream() if int(d.id) >= 10
    ]
    assert len(new_shards) == 10 and sum(new_shards) > 0  # increments after the growth used the new shards


def test_create_is_idempotent_and_resets_nothing(client: firestore.Client) -> None:
    counter = ShardedCounter(client, "counters/likes")
    assert counter.create(shards=4) == 4
    counter.increment(7)
    assert counter.create(shards=9) == 4  # the existing counter stays as it was
    assert counter.value() == 7
    assert ShardedCounter(client, "counters/likes").shards() == 4


def test_missing_shards_heal_and_batches_sum(client: firestore.Client) -> None:
    counter = ShardedCounter(client, "counters/heal")
    counter.create(shards=5)
    for doc in client.collection("counters/heal/shards").stream():
        doc.reference.delete()
    assert counter.value() == 0
    assert counter.increment_many([3, -1, 10, 0, -2] * 20) == 200
    counter.increment(-50)
    assert counter.value() == 150
    assert 1 <= len(list(client.collection("counters/heal/shards").stream())) <= 5


def test_read_prefers_the_roll_up_and_says_how_old_it_is(client: firestore.Client) -> None:
    counter = ShardedCounter(client, "counters/views")
    counter.create(shards=3)
    counter.increment(5)
    before = counter.read()
    assert before.live and before.value == 5  # no roll-up yet: the live sum
    rolled = counter.rollup()
    counter.increment(2)
    stale = counter.read()
    assert (stale.value, stale.live, stale.as_of) == (5, False, rolled.as_of)
    fresh = counter.read(live=True)
    assert fresh.value == 7 and fresh.as_of > rolled.as_of
    assert counter.rollup().value == 7


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda c: c.create(shards=0), "shard count 0 is not allowed"),
        (lambda c: c.create(shards=-3), "shard count -3 is not allowed"),
        (lambda c: c.create(shards=True), "shard count True is not allowed"),
        (lambda c: c.increment(1.5), "increment 1.5 is a float; increments are integers"),
        (lambda c: c.increment("2"), "increment '2' is a str"),
        (lambda c: c.increment_many([1, 2.0]), "increment 2.0 is a float"),
        (lambda c: c.grow(shards=1), "shrinking to 1 is not supported"),
    ],
)
def test_bad_counter_input(client: firestore.Client, action: object, message: str) -> None:
    counter = ShardedCounter(client, "counters/bad")
    counter.create(shards=2)
    with pytest.raises(CounterError, match=message) as info:
        action(counter)  # type: ignore[operator]
    assert isinstance(info.value, TsstoreError) and isinstance(info.value, ValueError)
    assert counter.value() == 0 and counter.shards() == 2


@pytest.mark.parametrize(
    ("path", "message"),
    [("counters", "has 1 segments"), ("a/b/c", "has 3 segments"), ("", "is empty"), ("a//b", "empty segment")],
)
def test_counter_paths_must_name_documents(client: firestore.Client, path: str, message: str) -> None:
    with pytest.raises(CounterError, match=message):
        ShardedCounter(client, path)


def test_missing_counter_is_an_error(client: firestore.Client) -> None:
    with pytest.raises(CounterError, match="does not exist; create it first"):
        ShardedCounter(client, "counters/none").increment()


@pytest.mark.parametrize(("rate", "shards"), [(0.5, 1), (1, 1), (10, 10), (250.5, 251)])
def test_plan_counter_shards(rate: float, shards: int) -> None:
    assert plan_counter_shards(rate) == shards


@pytest.mark.parametrize("rate", [0, -1, float("inf"), "5", True])
def test_plan_counter_shards_refuses_bad_rates(rate: object) -> None:
    with pytest.raises(CounterError):
        plan_counter_shards(rate)  # type: ignore[arg-type]
