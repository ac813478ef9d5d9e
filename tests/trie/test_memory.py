"""No leaks, and clean out-of-memory behaviour, by counting engine allocations.

Every byte the engine owns comes from its injectable allocator (native/alloc.c):
``lib.cst_live_allocations()`` counts the live blocks, and
``lib.cst_fail_allocations_after(k)`` lets k more allocations succeed and fails
every later one until reset with ``-1``.

* Churn (subscribe/unsubscribe cycles with snapshots and copies taken and dropped),
  then dropping everything, ``gc.collect()`` and ``lib.cst_reclaim()``: the live
  count is back where it started.  The same with threads that start, work and exit
  (their retired nodes are handed over when the thread ends), and an idle thread
  must not stall reclamation.
* An allocation failure at any point of subscribe / unsubscribe / snapshot / copy /
  clear (and of len / stats / iteration, which take snapshots) raises MemoryError
  and leaves the trie exactly as it was; and no memory leaks on those error paths.
"""

from __future__ import annotations

import functools
import gc
import random
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from helpers import run_threads

from cstrie._binding import lib
from cstrie.trie import Trie


def settle() -> int:
    """Live engine allocations once garbage is collected and reclaimed."""
    gc.collect()
    lib.cst_reclaim()
    return int(lib.cst_live_allocations())


def stable_baseline() -> int:
    """The live count, once it stopped moving (threads of earlier tests may still be
    handing over their garbage as they end)."""
    last = settle()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = settle()
        if now == last:
            return now
        last = now
    return last


def wait_for(base: int, timeout: float = 5.0) -> int:
    """Poll until the live count is back to ``base`` (or the timeout); return it."""
    deadline = time.monotonic() + timeout
    now = settle()
    while now != base and time.monotonic() < deadline:
        time.sleep(0.02)
        now = settle()
    return now


# ------------------------------------------------------------------- churn
def churn(trie: Trie, rng: random.Random, cycles: int, keep: list[Any]) -> None:
    """subscribe/unsubscribe cycles; snapshots and copies taken and dropped."""
    words = ["a", "b", "c", "*", "#", "d", "e"]
    live: list[tuple[str, Hashable]] = []
    for i in range(cycles):
        pattern = ".".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
        sub: Hashable = rng.randrange(40) if rng.random() < 0.8 else ("obj", rng.randrange(5))
        if trie.subscribe(pattern, sub):
            live.append((pattern, sub))
        if live and rng.random() < 0.55:
            p, s = live.pop(rng.randrange(len(live)))
            assert trie.unsubscribe(p, s) is True
        if i % 10 == 0:
            trie.lookup(".".join(rng.choice("abcde") for _ in range(3)))
        if i % 97 == 0:
            keep.append(trie.snapshot())
            if len(keep) > 5:
                keep.pop(0)
        if i % 1000 == 0:
            dup = trie.copy()
            dup.subscribe("copy.only", i)
            dup.unsubscribe(*live[0]) if live else None
            keep.append(dup)
        if i % 5003 == 0:
            trie.clear()
            live.clear()
    for p, s in live:
        assert trie.unsubscribe(p, s) is True
    assert len(trie) == 0


def test_churn_returns_to_baseline() -> None:
    base = stable_baseline()
    trie = Trie()
    keep: list[Any] = []
    churn(trie, random.Random(7), 20_000, keep)
    trie.check_invariants(strict=True)
    keep.clear()
    # While the (now empty) trie is alive, reclaimed nodes are really gone: only
    # the trie's root and handle remain (well under a few dozen blocks).
    assert settle() - base < 32
    assert trie.stats()["nodes"] <= 2
    del trie
    assert wait_for(base) == base


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_dropping_a_populated_trie_with_views_frees_everything(dialect: str) -> None:
    base = stable_baseline()
    trie = Trie(dialect)
    sep = "/" if dialect == "mqtt" else "."
    for i in range(3000):
        trie.subscribe(sep.join(["x", str(i % 37), str(i)]), i % 11)
        trie.subscribe(sep.join(["fan", str(i % 3)]), i)  # large subscriber sets
    snaps = [trie.snapshot() for _ in range(3)]
    dup = snaps[1].copy()
    for i in range(0, 3000, 3):
        trie.unsubscribe(sep.join(["x", str(i % 37), str(i)]), i % 11)
        dup.subscribe(sep.join(["y", str(i)]), i)
    it = iter(trie)
    next(it)  # an iteration in progress holds its own snapshot
    assert settle() > base
    del trie, snaps, dup, it
    assert wait_for(base) == base


# ----------------------------------------------------------------- threads
def _worker(shared: Trie, k: int, detach: bool) -> Callable[[], None]:
    def run() -> None:
        rng = random.Random(k)
        own = Trie()
        keep: list[Any] = []
        churn(own, rng, 2000, keep)
        for i in range(2000):
            shared.subscribe(f"t{k}.{i % 50}", i % 7)
            if i % 100 == 0:
                keep.append(shared.snapshot())
            shared.unsubscribe(f"t{k}.{(i * 3) % 50}", (i * 3) % 7)
            shared.lookup(f"t{k}.{i % 50}")
        del own, keep  # before detaching: dropping them runs engine code here
        gc.collect()
        if detach:
            lib.cst_thread_detach()

    return run


@pytest.mark.parametrize("detach", [False, True], ids=["thread-exit", "explicit-detach"])
def test_threads_that_work_and_exit_leak_nothing(detach: bool) -> None:
    base = stable_baseline()
    shared = Trie()
    for _round in range(2):  # a second round reuses the finished threads' records
        run_threads([_worker(shared, k + 4 * _round, detach) for k in range(4)])
    shared.check_invariants(strict=True)
    shared.clear()
    del shared
    # After join() the OS thread may still be running its exit hooks (which hand its
    # retired nodes over): poll instead of asserting at once.
    assert wait_for(base) == base


def test_idle_thread_does_not_stall_reclamation() -> None:
    other = Trie()
    ready, release = threading.Event(), threading.Event()

    def idle() -> None:
        other.lookup("a.b")  # registers this thread with the reclaimer
        other.has_subscribers("a")
        ready.set()
        release.wait(30)

    th = threading.Thread(target=idle)
    th.start()
    try:
        assert ready.wait(10)
        base = stable_baseline()
        trie = Trie()
        for i in range(5000):
            trie.subscribe(f"a.{i % 100}", i)
            if i % 500 == 0:
                trie.snapshot()
            trie.unsubscribe(f"a.{i % 100}", i)
        del trie
        # the idle thread is alive but outside any epoch section: no stall
        assert wait_for(base) == base
        assert th.is_alive()
    finally:
        release.set()
        th.join(30)


# -------------------------------------------------------- out of memory
def populated() -> Trie:
    trie = Trie()
    for i in range(60):
        trie.subscribe(f"a.{i % 7}.{i % 3}", f"s{i % 5}")
        trie.subscribe(f"#.{i % 4}", i)  # sets of 15 subscribers
    for i in range(100):
        trie.subscribe(f"wide.{i}", "w")  # a wide level: new words hit hash slots
    trie.subscribe("x.y.z", "deep")
    trie.subscribe("pair", "p1")
    trie.subscribe("pair", "p2")
    trie.subscribe("p", "q")
    trie.subscribe("", "empty-key")
    return trie


TOPICS = ["a.1.1", "a.6.2", "x.y.z", "pair", "p", "", "wide.7", "q.1", "z.2", "a.b.c.d.e"]


def observe(trie: Trie) -> tuple[Any, ...]:
    return (
        sorted(trie, key=repr),
        len(trie),
        [sorted(trie.lookup(t), key=repr) for t in TOPICS],
    )


def mapped(trie: Trie) -> list[Hashable]:
    return sorted(trie._reg.live_objects(), key=repr)


def _sub(pattern: str, sub: Hashable) -> Callable[[Trie], Any]:
    def op(trie: Trie) -> Any:
        assert trie.subscribe(pattern, sub) is True
        return ("sub", pattern, sub)

    return op


def _unsub(pattern: str, sub: Hashable) -> Callable[[Trie], Any]:
    def op(trie: Trie) -> Any:
        assert trie.unsubscribe(pattern, sub) is True
        return ("unsub", pattern, sub)

    return op


OPS: dict[str, Callable[[Trie], Any]] = {
    "subscribe-new-deep-pattern": _sub("n.e.w.p.a.t", "new"),
    "subscribe-new-word-in-wide-level": _sub("wide.new", "w"),
    "subscribe-second-subscriber": _sub("p", "new"),
    "subscribe-into-large-set": _sub("#.1", 999),
    "subscribe-under-existing-word": _sub("x.y.z.w", "deep"),
    "subscribe-zero-word-pattern": _sub("", "another"),
    "unsubscribe-deep-leaf": _unsub("x.y.z", "deep"),
    "unsubscribe-from-large-set": _unsub("#.1", 1),
    "unsubscribe-pair-to-single": _unsub("pair", "p1"),
    "unsubscribe-top-word": _unsub("p", "q"),
    "unsubscribe-wide-word": _unsub("wide.42", "w"),
    "snapshot": lambda t: ("snapshot", t.snapshot()),
    "copy": lambda t: ("copy", t.copy()),
    "copy-of-snapshot": lambda t: ("copy", t.snapshot().copy()),
    "clear": lambda t: (t.clear(), ("clear",))[1],
    "len": lambda t: ("len", len(t)),
    "stats": lambda t: ("stats", t.stats()),
    "iterate": lambda t: ("iterate", list(t)),
}


@pytest.mark.parametrize(
    "name",
    list(OPS),
)
@pytest.mark.parametrize("with_snapshot", [False, True], ids=["plain", "after-snapshot"])
def test_out_of_memory_leaves_trie_unchanged(name: str, with_snapshot: bool) -> None:
    """For k = 0, 1, 2, ...: let k allocations succeed, then fail.  Until the
    operation succeeds, each attempt raises MemoryError and changes nothing."""
    base = stable_baseline()
    op = OPS[name]
    failures = 0
    for k in range(300):
        trie = populated()
        # With a snapshot open, every write must first copy its path (more allocations).
        held = trie.snapshot() if with_snapshot else None
        before = observe(trie)
        before_mapped = mapped(trie)
        lib.cst_fail_allocations_after(k)
        try:
            result = op(trie)
        except MemoryError:
            result = None
        finally:
            lib.cst_fail_allocations_after(-1)
        if result is None:
            failures += 1
            assert observe(trie) == before, f"{name}: k={k} raised MemoryError but changed"
            trie.check_invariants(strict=True)
            # The registry forgets a subscriber made for the failed call (at once, or
            # when the open snapshot goes: ids that die while one is open wait for it).
            del held
            gc.collect()
            assert mapped(trie) == before_mapped, f"{name}: k={k} registry changed"
            # and the trie is still fully usable
            assert trie.subscribe("after.oom", "ok") is True
            assert trie.lookup("after.oom") == ["ok"]
            trie.check_invariants(strict=False)
            del trie
            continue
        # success: the operation did exactly what it should
        kind = result[0]
        after = observe(trie)
        if kind == "sub":
            assert set(after[0]) == set(before[0]) | {(result[1], result[2])}
        elif kind == "unsub":
            assert set(after[0]) == set(before[0]) - {(result[1], result[2])}
        elif kind == "clear":
            assert after[0] == [] and after[1] == 0
        else:
            assert after == before
            if kind in ("snapshot", "copy"):
                assert sorted(result[1], key=repr) == before[0]
            if kind == "len":
                assert result[1] == before[1]
            if kind == "iterate":
                assert sorted(result[1], key=repr) == before[0]
        trie.check_invariants(strict=False)
        break
    else:
        pytest.fail(f"{name} never succeeded")
    assert failures >= 1, f"{name}: the first allocation was not even attempted"
    del trie, held, result
    assert wait_for(base) == base, "memory leaked on an out-of-memory path"


def test_out_of_memory_in_cleanup_then_compact() -> None:
    """When the unsubscribe's best-effort cleanup cannot allocate, the removal still
    succeeds and every answer is right; a tomb may be left (a quiescent trie can fail
    the strict check) until ``compact()`` - or a later write through it - removes it."""
    for k in range(40):
        trie = Trie()
        trie.subscribe("x.y.z", "deep")
        trie.subscribe("x", "top")
        trie.subscribe("x.q", "other")
        trie.unsubscribe("x.q", "other")
        lib.cst_fail_allocations_after(k)
        try:
            removed = trie.unsubscribe("x.y.z", "deep")
        except MemoryError:
            removed = False
        finally:
            lib.cst_fail_allocations_after(-1)
        if not removed:
            assert sorted(trie) == [("x", "top"), ("x.y.z", "deep")]
            trie.check_invariants(strict=True)
            continue
        assert sorted(trie) == [("x", "top")]
        assert trie.lookup("x.y.z") == [] and trie.lookup("x") == ["top"]
        trie.check_invariants(strict=False)
        trie.compact()
        trie.check_invariants(strict=True)
        assert sorted(trie) == [("x", "top")]
        assert trie.subscribe("x.y.z", "again") is True
        trie.check_invariants(strict=True)


def test_out_of_memory_creating_a_trie() -> None:
    lib.cst_fail_allocations_after(0)
    try:
        with pytest.raises(MemoryError):
            Trie()
    finally:
        lib.cst_fail_allocations_after(-1)
    trie = Trie()
    assert trie.subscribe("a", 1) is True


def test_out_of_memory_for_a_new_subscriber_leaves_no_registry_entry() -> None:
    trie = Trie()
    trie.subscribe("a", "old")
    lib.cst_fail_allocations_after(0)
    try:
        with pytest.raises(MemoryError):
            trie.subscribe("b.c", "brand-new")
    finally:
        lib.cst_fail_allocations_after(-1)
    assert set(trie._reg.live_objects()) == {"old"}
    assert list(trie) == [("a", "old")]
    assert trie.subscribe("b.c", "brand-new") is True


# Bulk builds of 16,384 pairs or more carve their nodes from 2 MiB node blocks
# (native/alloc.c); the tests below run both ways, whatever their size.
BLOCK_THRESHOLD = 16384


@pytest.fixture(params=["malloc", "node-blocks"])
def build_memory(request: pytest.FixtureRequest) -> Any:
    lib.cst_debug_set_block_threshold(0 if request.param == "node-blocks" else 1 << 62)
    yield request.param
    lib.cst_debug_set_block_threshold(BLOCK_THRESHOLD)


def test_out_of_memory_in_bulk_build_builds_nothing_and_leaks_nothing(build_memory: str) -> None:
    """``Trie.from_pairs`` (the engine's bulk build) either returns the whole trie
    or raises MemoryError; a failure at any allocation frees every node it made."""
    pairs = [(f"a.{i % 7}.{i % 3}", f"s{i % 5}") for i in range(60)]
    pairs += [(f"#.{i % 4}", i) for i in range(60)]  # subscriber sets
    pairs += [(f"wide.{i}", "w") for i in range(100)]  # deeper hash levels
    pairs += [("", "empty-key"), ("a.*", "x"), ("a.1.0", "s1")]  # spec slots, a duplicate
    expected = sorted(set(pairs), key=repr)
    base = stable_baseline()
    failures = 0
    for k in range(0, 2000, 7):
        lib.cst_fail_allocations_after(k)
        try:
            trie = Trie.from_pairs(pairs)
        except MemoryError:
            failures += 1
            continue
        finally:
            lib.cst_fail_allocations_after(-1)
        assert sorted(trie, key=repr) == expected
        trie.check_invariants(strict=True)
        del trie
        break
    else:
        pytest.fail("from_pairs never succeeded")
    assert failures >= 10, "the injected failures did not reach the build"
    assert wait_for(base) == base, "memory leaked on an out-of-memory path of the bulk build"


def test_bulk_built_trie_gives_back_its_node_blocks(build_memory: str) -> None:
    """A bulk-built trie updated by other threads, snapshotted, emptied and
    dropped gives back every node and every node block it had."""
    base = stable_baseline()
    pairs = [(f"t/{i % 50}/d{i}/{('x', 'y', '+')[i % 3]}", f"s{i % 97}") for i in range(6000)]
    pairs += [("t/#", "all"), ("+/+/+/x", "xs")]
    trie = Trie.from_pairs(pairs, "mqtt")
    snap = trie.snapshot()

    def remove(t: Trie, k: int) -> None:
        for p, s in pairs[k::2]:
            t.unsubscribe(p, s)

    halves = [functools.partial(remove, trie, k) for k in (0, 1)]
    run_threads(halves)
    assert len(trie) == 0 and len(snap) == len(pairs)
    assert sorted(trie.lookup("t/3/d3/x"), key=str) == []
    assert sorted(snap.lookup("t/3/d3/x"), key=str) == ["all", "s3", "xs"]
    trie.subscribe("t/3/d3/x", "again")
    trie.check_invariants(strict=True)
    del snap, halves
    trie.clear()
    del trie
    assert wait_for(base) == base, f"bulk build ({build_memory}) kept memory after the trie died"
