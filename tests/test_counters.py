"""Sharded counters on the emulator, in both database modes, and on the memory database (each
test takes ``client``, a ``firestore.Client``, a ``datastore.Client`` or a ``MemoryDatabase``):
concurrency, roll-ups, growth, healing, bad input. What the tests look at in the database they read by the client's own API."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import pytest
from google.api_core.exceptions import ResourceExhausted, ServiceUnavailable

from tests.conftest import unique_database_id
from tests.shared import EMULATOR_MODES, MODES, delete_doc, mode_client, put_doc, stored_doc, stored_docs
from tsstore import CounterError, FaultError, StateError, TsstoreError
from tsstore.asks import AddToDocs, Doc
from tsstore.counters import CounterValue, ShardedCounter, plan_counter_shards

T = TypeVar("T")

#: 16 threads at once: the contention is the point; 50 increments each keep every shard (and,
#: after a growth, the new ones) busy while the roll-ups run beside them.
THREADS, PER_THREAD = 16, 50


@pytest.fixture(params=MODES)
def client(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[Any]:
    """A client of each database mode on a database of this test's own."""
    made = mode_client(request, request.param, unique_database_id(request.node.name))
    try:
        yield made
    finally:
        made.close()


def counter_on(client: Any, path: str) -> ShardedCounter:
    """The counter at ``path`` on ``client``, made as users make it (its answers from the client's mode)."""
    return ShardedCounter(client, path)


def hammer(counter: ShardedCounter, *, during: object = None) -> list[int]:
    """16 threads x 50 increments of 1 on ``counter``, rolling up concurrently; ``during``
    (a callable) runs once when half the increments are done, beside the third quarter of
    each thread's; the last quarter waits for it to return. Returns the roll-ups seen."""
    done = 0
    lock = threading.Lock()
    half = threading.Event()
    after = threading.Event()  # ``during`` has returned (or there is none)
    stop = threading.Event()
    rollups: list[int] = []

    def work(_: int) -> None:
        nonlocal done
        for k in range(PER_THREAD):
            if k == PER_THREAD * 3 // 4:
                after.wait()
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
        after.set()
        for f in futures:
            f.result()
    stop.set()
    roller.join()
    return rollups


def test_16_threads_of_increments_count_exactly(client: Any) -> None:
    counter = counter_on(client, "counters/hits")
    assert counter.create(shards=10) == 10
    rollups = hammer(counter)
    assert counter.value() == THREADS * PER_THREAD
    assert counter.rollup().value == THREADS * PER_THREAD
    assert counter.read().value == THREADS * PER_THREAD and not counter.read().live
    # concurrent roll-ups only ever saw values that were true at some point: never more
    assert rollups and max(rollups) <= THREADS * PER_THREAD and rollups == sorted(rollups)
    shard_counts = [d["count"] for d in stored_docs(client, "counters/hits/shards").values()]
    assert len(shard_counts) == 10 and all(c > 0 for c in shard_counts)


def test_growing_the_shard_count_mid_run_loses_nothing(client: Any) -> None:
    counter = counter_on(client, "apps/a1/counters/events")  # any parent path
    counter.create(shards=10)
    hammer(counter, during=lambda: counter.grow(shards=20))
    assert counter.shards() == 20
    assert counter.value() == THREADS * PER_THREAD
    assert counter.rollup().value == THREADS * PER_THREAD
    new_shards = [d["count"] for i, d in stored_docs(client, "apps/a1/counters/events/shards").items() if int(i) >= 10]
    assert len(new_shards) == 10 and sum(new_shards) > 0  # increments after the growth used the new shards


def test_create_is_idempotent_and_resets_nothing(client: Any) -> None:
    counter = counter_on(client, "counters/likes")
    assert counter.create(shards=4) == 4
    counter.increment(7)
    assert counter.create(shards=9) == 4  # the existing counter stays as it was
    assert counter.value() == 7
    assert counter_on(client, "counters/likes").shards() == 4


def test_missing_shards_heal_and_batches_sum(client: Any) -> None:
    counter = counter_on(client, "counters/heal")
    counter.create(shards=5)
    for shard in stored_docs(client, "counters/heal/shards"):
        delete_doc(client, f"counters/heal/shards/{shard}")
    assert counter.value() == 0
    assert counter.increment_many([3, -1, 10, 0, -2] * 20) == 200
    counter.increment(-50)
    assert counter.value() == 150
    assert 1 <= len(stored_docs(client, "counters/heal/shards")) <= 5


def test_read_prefers_the_roll_up_and_says_how_old_it_is(client: Any) -> None:
    counter = counter_on(client, "counters/views")
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
def test_bad_counter_input(client: Any, action: object, message: str) -> None:
    counter = counter_on(client, "counters/bad")
    counter.create(shards=2)
    with pytest.raises(CounterError, match=message) as info:
        action(counter)  # type: ignore[operator]
    assert isinstance(info.value, TsstoreError) and isinstance(info.value, ValueError)
    assert counter.value() == 0 and counter.shards() == 2


@pytest.mark.parametrize(
    ("path", "message"),
    [("counters", "has 1 segments"), ("a/b/c", "has 3 segments"), ("", "is empty"), ("a//b", "empty segment")],
)
def test_counter_paths_must_name_documents(client: Any, path: str, message: str) -> None:
    with pytest.raises(CounterError, match=message):
        counter_on(client, path)


@pytest.mark.parametrize(
    "action",
    [lambda c: c.increment(), lambda c: c.rollup(), lambda c: c.grow(shards=3), lambda c: c.read()],
    ids=["increment", "rollup", "grow", "read"],
)
def test_missing_counter_is_an_error(client: Any, action: Callable[[ShardedCounter], object]) -> None:
    """A state (create it, and the same call works), not a usage error."""
    with pytest.raises(StateError, match="'counters/none' does not exist; create it first"):
        action(counter_on(client, "counters/none"))
    assert stored_doc(client, "counters/none") is None  # a roll-up made no shard-less counter document


@pytest.mark.parametrize(("rate", "shards"), [(0.5, 1), (1, 1), (10, 10), (250.5, 251)])
def test_plan_counter_shards(rate: float, shards: int) -> None:
    assert plan_counter_shards(rate) == shards


@pytest.mark.parametrize("rate", [0, -1, float("inf"), "5", True])
def test_plan_counter_shards_refuses_bad_rates(rate: object) -> None:
    with pytest.raises(CounterError):
        plan_counter_shards(rate)  # type: ignore[arg-type]


# ------------------------------------------------ contention on the counter document


def run_together(calls: Sequence[Callable[[], T]]) -> list[T | Exception]:
    """Run each call on a thread of its own, all released at once by a barrier so they really
    overlap; each call's result, or the exception it raised, in the calls' order."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], T]) -> T | Exception:
        barrier.wait()
        try:
            return call()
        except Exception as error:  # collected: every thread's outcome is asserted on
            return error

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def lost_races(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tsstore.counting" and "lost a race" in r.getMessage()]


#: The races of threads on one document: on the emulator only (in the memory database a read
#: and the write after it seldom leave the GIL between them, so the threads rarely race at all).
ON_THE_EMULATOR = pytest.mark.parametrize("client", EMULATOR_MODES, indirect=True)

ROLLERS, ROLLUPS_EACH = 8, 3
INCREMENTERS, INCREMENTS_EACH = 16, 20


@ON_THE_EMULATOR
def test_concurrent_rollups_during_increments_all_succeed(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """8 schedulers x 3 roll-ups racing 16 incrementing threads: no roll-up fails, each stores or
    returns a total that was true at its as-of time, and the newest one is what stays stored."""
    caplog.set_level(logging.DEBUG, logger="tsstore.counting")
    path = "counters/rolled"
    counter = counter_on(client, path)
    counter.create(shards=8)

    def amount(thread: int, i: int) -> int:
        return 1 + (thread + i) % 3  # 1, 2 or 3: positive, so the value only ever rises

    total = sum(amount(t, i) for t in range(INCREMENTERS) for i in range(INCREMENTS_EACH))

    def increments(thread: int) -> list[CounterValue]:
        for i in range(INCREMENTS_EACH):
            counter.increment(amount(thread, i))
        return []

    def rollups() -> list[CounterValue]:
        scheduler = counter_on(client, path)  # each scheduler with its own handle, as in production
        return [scheduler.rollup() for _ in range(ROLLUPS_EACH)]

    calls: list[Callable[[], list[CounterValue]]] = [partial(increments, t) for t in range(INCREMENTERS)]
    outcomes = run_together(calls + [rollups] * ROLLERS)

    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert not errors, errors
    rolled = [v for o in outcomes if not isinstance(o, Exception) for v in o]
    assert len(rolled) == ROLLERS * ROLLUPS_EACH
    assert all(not v.live and 0 <= v.value <= total for v in rolled), rolled
    # each value was true at its as-of time: later as-of, never a smaller value (increments are positive)
    by_time = sorted(rolled, key=lambda v: v.as_of)
    assert [v.value for v in by_time] == sorted(v.value for v in rolled)
    # no older roll-up overwrote a newer one: the newest any caller saw is the one stored
    newest = by_time[-1]
    assert (counter.read().value, counter.read().as_of) == (newest.value, newest.as_of)

    final = counter.rollup()
    assert (final.value, final.live) == (total, False) and final.as_of >= newest.as_of
    assert counter.read() == final
    assert counter.value() == total
    # the roll-ups really raced: some lost (the document was written meanwhile) and decided again
    # (about 25 of 24 calls here)
    assert lost_races(caplog)


@ON_THE_EMULATOR
def test_concurrent_creates_agree_on_one_shard_count(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """8 writers create one counter at once, each asking for a different shard count: exactly
    one create lands, and every writer returns (and uses) the shard count that won. Run on
    fresh counters until the creates really raced (at most 5 times; every run is checked)."""
    caplog.set_level(logging.DEBUG, logger="tsstore.counting")
    requested = list(range(3, 11))
    for attempt in range(5):
        path = f"apps/a1/counts/series-{attempt}"

        def create(shards: int, path: str = path) -> int:
            return counter_on(client, path).create(shards=shards)  # each writer with its own handle

        outcomes = run_together([partial(create, n) for n in requested])

        assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
        assert len(set(outcomes)) == 1 and outcomes[0] in requested, outcomes
        count = outcomes[0]
        assert isinstance(count, int)
        assert stored_doc(client, path) == {"shards": count}
        shard_docs = {i: d["count"] for i, d in stored_docs(client, f"{path}/shards").items()}
        assert shard_docs == {str(i): 0 for i in range(count)}
        assert counter_on(client, path).create(shards=99) == count  # and still idempotent afterwards
        if lost_races(caplog):
            break
    # the creates really raced: the losers' creates were refused (the document existed) and they read the winner's
    assert lost_races(caplog)


@ON_THE_EMULATOR
def test_concurrent_grows_and_rollups_share_the_counter_document(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Grows and roll-ups rewriting the one counter document at once: grows to one target all
    succeed; grows to different targets end at the largest, each of the others either landing
    or, overtaken by a larger one, refused as the shrink it became. Every grow that returned
    had its new shard documents in place by then (winner or not), and no count is stranded."""
    caplog.set_level(logging.DEBUG, logger="tsstore.counting")
    path = "counters/grown"
    counter_on(client, path).create(shards=2)
    counter_on(client, path).increment_many([1] * 50)

    def grow(shards: int) -> tuple[int, set[str]]:
        grown = counter_on(client, path).grow(shards=shards)
        return grown, set(stored_docs(client, f"{path}/shards"))  # seen as it returns

    def rollup() -> CounterValue:
        return counter_on(client, path).rollup()

    outcomes = run_together([partial(grow, 6)] * 6 + [rollup] * 3)
    for outcome in outcomes[:6]:
        assert isinstance(outcome, tuple) and outcome[0] == 6 and {str(i) for i in range(6)} <= outcome[1], outcome
    assert all(isinstance(o, CounterValue) and o.value == 50 for o in outcomes[6:]), outcomes
    assert counter_on(client, path).shards() == 6

    targets = list(range(7, 15))
    mixed: list[Callable[[], object]] = [partial(grow, n) for n in targets]
    outcomes = run_together(mixed + [rollup] * 3)
    assert isinstance(outcomes[targets.index(14)], tuple)
    for target, outcome in zip(targets, outcomes):
        if isinstance(outcome, Exception):
            assert isinstance(outcome, CounterError) and f"shrinking to {target} is not supported" in str(outcome)
        else:
            assert isinstance(outcome, tuple) and outcome[0] == target, outcome
            assert {str(i) for i in range(target)} <= outcome[1]
    assert all(isinstance(o, CounterValue) and o.value == 50 for o in outcomes[len(targets) :]), outcomes

    counter = counter_on(client, path)
    assert counter.shards() == 14
    shard_docs = {i: d["count"] for i, d in stored_docs(client, f"{path}/shards").items()}
    assert sorted(shard_docs, key=int) == [str(i) for i in range(14)] and sum(shard_docs.values()) == 50
    assert counter.rollup().value == 50 and counter.read().value == 50
    assert lost_races(caplog)  # the grows and roll-ups really raced on the one document


def test_a_write_that_lost_a_race_decides_again_on_a_fresh_read(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Another writer changes the counter document between our read and our write: the
    conditional update is refused, and the next decision sees their change."""
    caplog.set_level(logging.DEBUG, logger="tsstore.counting")
    counter = counter_on(client, "counters/race")
    counter.create(shards=2)
    seen: list[Any] = []

    def decide(doc: Doc) -> tuple[int, dict[str, Any] | None]:
        assert doc.data is not None
        seen.append(doc.data["shards"])
        if len(seen) == 1:
            counter_on(client, "counters/race").grow(shards=5)  # the rival write
        return len(seen), {"decided": len(seen)}

    assert counter._run(counter._write_counter_doc(decide, verb="test")) == 2
    assert seen == [2, 5]
    assert stored_doc(client, "counters/race") == {"shards": 5, "decided": 2}
    [lost] = lost_races(caplog)
    assert lost.startswith("counter 'counters/race': test lost a race (it was written or deleted meanwhile)")


def test_a_create_that_lost_a_race_adopts_the_winner(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The counter document appears between our read (missing) and our create: the create fails
    is refused and the next decision keeps the winner's document."""
    caplog.set_level(logging.DEBUG, logger="tsstore.counting")
    counter = counter_on(client, "counters/late")
    seen: list[bool] = []

    def decide(doc: Doc) -> tuple[int, dict[str, Any] | None]:
        seen.append(doc.data is not None)
        if doc.data is not None:
            return doc.data["shards"], None
        counter_on(client, "counters/late").create(shards=7)  # the rival create
        return 3, {"shards": 3}

    assert counter._run(counter._write_counter_doc(decide, verb="create")) == 7
    assert seen == [False, True]
    assert stored_doc(client, "counters/late") == {"shards": 7}
    assert counter.create(shards=3) == 7
    [lost] = lost_races(caplog)
    assert lost.startswith("counter 'counters/late': create lost a race (it was created meanwhile)")


def test_endless_contention_is_a_counter_error_naming_the_path(client: Any) -> None:
    counter = counter_on(client, "counters/busy")
    counter.create(shards=2)
    pokes = 0

    def decide(doc: Doc) -> tuple[None, dict[str, Any] | None]:
        nonlocal pokes
        pokes += 1
        put_doc(client, "counters/busy", {"shards": 2, "pokes": pokes})  # someone rewrites it after every read of ours
        return None, {"ours": True}

    with pytest.raises(
        StateError,
        match=r"^counter 'counters/busy': rollup gave up after 3 attempts; each time another writer \(create, "
        r"rollup or grow\) changed the counter document 'counters/busy' between our read and our conditional "
        r"write \(last: it was written or deleted meanwhile\)$",
    ):
        counter._run(counter._write_counter_doc(decide, verb="rollup", attempts=3))
    assert stored_doc(client, "counters/busy") == {"shards": 2, "pokes": 3}  # none of our writes landed


def test_rollup_never_overwrites_a_newer_stored_one(client: Any) -> None:
    counter = counter_on(client, "counters/ahead")
    counter.create(shards=2)
    counter.increment(4)
    newer = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)  # a roll-up stored after ours will read
    put_doc(client, "counters/ahead", {"shards": 2, "total": 9, "total_as_of": newer})
    assert counter.rollup() == CounterValue(9, newer, live=False)
    assert counter.read() == CounterValue(9, newer, live=False) and counter.value() == 4


def test_a_lone_increment_is_sent_again_only_when_refused(client: Any) -> None:
    """An increment Firestore refused (overloaded: nothing written) is sent again and counts
    once; one cut off before its answer is not sent again (it may have landed) and says so."""
    counter = counter_on(client, "counters/lone")
    counter.create(shards=2)
    real, trouble = counter._answer, [ResourceExhausted("busy")]

    def answer(ask: Any) -> Any:
        if isinstance(ask, AddToDocs) and trouble:
            failure = trouble.pop(0)
            if isinstance(failure, ServiceUnavailable):
                real(ask)  # this one lands, and its answer is lost
            raise failure
        return real(ask)

    counter._answer = answer
    counter.increment(3)  # refused once, then sent again
    assert counter.value() == 3 and not trouble
    trouble.append(ServiceUnavailable("connection reset"))
    cut = r"^adding 2 to counter 'counters/lone': the call was cut off \(UNAVAILABLE: connection reset\) and may"
    with pytest.raises(FaultError, match=cut + " or may not have landed; read the counter"):
        counter.increment(2)
    assert counter.value() == 5  # it had landed: counted once, not twice
