"""Threaded smoke tests of one shared Trie (ordinary CPython; each test < 10 s).

cffi releases the GIL around every engine call, so the C core really runs
concurrently here too.  What is checked, from the spec:

* read-your-writes: a thread always sees its own completed subscribe/unsubscribe
  (lookup, has_subscribers, subscribers) while others write and read;
* racing subscribes/unsubscribes of the same subscriber (to different patterns,
  and to the same pairs) end in exactly the state their return values describe,
  and the registry holds no stale ids (``len(trie._reg)``);
* a snapshot taken at any moment is internally consistent: with a writer that
  adds k then k+1 in order, every snapshot (and copy) holds a prefix;
* ``check_invariants(strict=True)`` holds once the threads are done.

The last tests replay two interleavings deterministically (by running the
"other thread's" operation at the racy moment through a wrapper around the
binding call): they document races between ``copy()``/``snapshot()`` and the
subscriber registry.
"""

from __future__ import annotations

import gc
import random
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import oracle
import pytest
from helpers import JOIN_TIMEOUT, Sub, run_threads

import cstrie.trie as trie_module
from cstrie import _binding as nb
from cstrie.dialect import AMQP
from cstrie.trie import Trie


def mapped(trie: Trie) -> set[Hashable]:
    return set(trie._reg.live_objects())


def assert_registry_exact(trie: Trie) -> None:
    """No snapshot open: the registry maps exactly the subscribers with a pair."""
    assert mapped(trie) == {s for _, s in trie}
    assert all(trie._reg.maps(i) for _, ids in nb.iterate(trie._h) for i in ids)


# ----------------------------------------------------------- read-your-writes
def test_each_thread_sees_its_own_completed_updates() -> None:
    trie = Trie()
    # (pattern, a topic it matches): shared by all threads, so sets are contended
    patterns = [
        ("news.#", "news.sport.x"),
        ("news.*.x", "news.tv.x"),
        ("news.sport.x", "news.sport.x"),
        ("#", "other"),
        ("a.b.c.d", "a.b.c.d"),
        ("", ""),
    ]
    writers, per_writer, iterations = 4, 6, 1200
    finals: dict[int, set[tuple[str, Sub]]] = {}
    known = {Sub((w, j)) for w in range(writers) for j in range(per_writer)}
    stop = threading.Event()

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(w)
            mine: set[tuple[str, Sub]] = set()
            for _ in range(iterations):
                p, topic = rng.choice(patterns)
                sub = Sub((w, rng.randrange(per_writer)))
                if (p, sub) in mine:
                    assert trie.unsubscribe(p, sub) is True
                    mine.discard((p, sub))
                    assert sub not in trie.subscribers(p)
                else:
                    assert trie.subscribe(p, sub) is True
                    mine.add((p, sub))
                    assert sub in trie.subscribers(p)
                    assert trie.has_subscribers(topic) is True
                # sub belongs to this thread only: its own pairs decide the answers
                expect = any(s == sub and oracle.matches(AMQP, q, topic) for q, s in mine)
                assert (sub in trie.lookup(topic)) is expect
                assert any(q == p and s == sub for q, s in trie.match(topic)) is ((p, sub) in mine)
                own = {s for s in trie.subscribers(p) if s.name[0] == w}
                assert own == {s for q, s in mine if q == p}
            finals[w] = mine

        return run

    def reader() -> None:
        rng = random.Random("reader")
        while not stop.is_set():
            _, topic = rng.choice(patterns)
            got = trie.lookup(topic)
            assert len(got) == len(set(got))
            assert set(got) <= known
            many = trie.lookup_many([topic, "news.sport.x"])
            assert all(len(x) == len(set(x)) for x in many)

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for th in readers:
        th.start()
    try:
        run_threads([writer(w) for w in range(writers)])
    finally:
        stop.set()
        for th in readers:
            th.join(JOIN_TIMEOUT)
    expected = set().union(*finals.values())
    assert set(trie) == expected and len(trie) == len(expected)
    trie.check_invariants(strict=True)
    assert_registry_exact(trie)


# ------------------------------------------------------- same subscriber races
def test_same_subscriber_to_different_patterns_from_many_threads() -> None:
    trie = Trie()
    nthreads, per_thread = 6, 250
    for _round in range(3):
        shared = Sub("shared")  # a fresh but equal object each round

        def subscribe_all(k: int, obj: Sub = shared) -> Callable[[], None]:
            def run() -> None:
                for j in range(per_thread):
                    assert trie.subscribe(f"p{k}.{j}.#", obj) is True
                    assert trie.subscribe("common.*", obj) in (True, False)

            return run

        run_threads([subscribe_all(k) for k in range(nthreads)])
        assert len(trie) == nthreads * per_thread + 1
        assert len(trie._reg) == 1
        assert trie.lookup("p3.7.x.y") == [shared]
        assert trie.subscribers("common.*") == [shared]
        trie.check_invariants(strict=True)

        def unsubscribe_all(k: int, obj: Sub = shared) -> Callable[[], None]:
            def run() -> None:
                for j in range(per_thread):
                    assert trie.unsubscribe(f"p{k}.{j}.#", obj) is True
                    trie.unsubscribe("common.*", obj)
                    trie.lookup(f"p{k}.{j}")

            return run

        run_threads([unsubscribe_all(k) for k in range(nthreads)])
        assert len(trie) == 0
        assert list(trie) == []
        assert len(trie._reg) == 0, trie._reg.objects
        trie.check_invariants(strict=True)


def test_racing_updates_of_the_same_pairs_end_as_their_results_say() -> None:
    """Threads subscribe and unsubscribe the same few pairs at random.  For each
    pair, successful subscribes and unsubscribes alternate, so (successes of
    subscribe) - (successes of unsubscribe) is 0 or 1 and says whether it is there."""
    trie = Trie()
    pairs = [(p, Sub(s)) for p in ("a.b", "a.*", "#", "a.b.c") for s in range(3)]
    tallies: list[Counter[tuple[str, Sub]]] = []

    def worker(seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(seed)
            tally: Counter[tuple[str, Sub]] = Counter()
            for _ in range(3000):
                p, s = rng.choice(pairs)
                if rng.random() < 0.5:
                    tally[(p, s)] += trie.subscribe(p, Sub(s.name))  # equal, not identical
                else:
                    tally[(p, s)] -= trie.unsubscribe(p, Sub(s.name))
                if rng.random() < 0.1:
                    got = trie.lookup("a.b")
                    assert len(got) == len(set(got))
            tallies.append(tally)

        return run

    run_threads([worker(seed) for seed in range(5)])
    total: Counter[tuple[str, Sub]] = Counter()
    for tally in tallies:
        total.update(tally)
    present = set(trie)
    for pair in pairs:
        assert total[pair] in (0, 1), (pair, total[pair])
        assert (pair in present) == (total[pair] == 1), pair
    assert len(trie) == len(present)
    trie.check_invariants(strict=True)
    assert_registry_exact(trie)
    for p, s in sorted(present, key=repr):
        trie.unsubscribe(p, s)
    assert len(trie._reg) == 0


def test_concurrent_clear_with_writers() -> None:
    trie = Trie()
    stop = threading.Event()

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(w)
            for i in range(2000):
                trie.subscribe(f"w{w}.{rng.randrange(20)}", Sub(rng.randrange(8)))
                trie.unsubscribe(f"w{w}.{rng.randrange(20)}", Sub(rng.randrange(8)))
                if i % 50 == 0:
                    trie.lookup(f"w{w}.3")

        return run

    def clearer() -> None:
        while not stop.is_set():
            trie.clear()

    th = threading.Thread(target=clearer, daemon=True)
    th.start()
    try:
        run_threads([writer(w) for w in range(3)])
    finally:
        stop.set()
        th.join(JOIN_TIMEOUT)
    trie.check_invariants(strict=True)
    assert_registry_exact(trie)
    trie.clear()
    assert len(trie) == 0 and len(trie._reg) == 0


# ------------------------------------------------------ consistent snapshots
@pytest.mark.parametrize("kind", ["snapshot", "copy"])
def test_concurrent_snapshots_hold_a_prefix(kind: str) -> None:
    """A writer subscribes pattern k then k+1 in order, then removes them in order;
    every snapshot (or copy) taken meanwhile holds a prefix (then a suffix)."""
    trie = Trie()
    n = 1500
    done = threading.Event()
    taken = threading.Event()
    start = threading.Barrier(3)
    seen: list[int] = []

    def writer() -> None:
        # The updates are C calls that never release the GIL, so with the GIL
        # the writer could finish within one switch interval: it starts with the
        # takers and yields every few updates, so that snapshots overlap it.
        start.wait()
        try:
            for k in range(n):
                trie.subscribe(f"seq.{k % 10}.{k}", k)
                trie.subscribe("fan", k)
                if k % 50 == 0:
                    time.sleep(0)
                if k == n // 2:
                    # On a loaded machine the takers may not run at all before the
                    # writer ends: wait here, half-way, until one view is taken.
                    taken.wait(timeout=30)
            for k in range(n):
                trie.unsubscribe(f"seq.{k % 10}.{k}", k)
                trie.unsubscribe("fan", k)
                if k % 50 == 0:
                    time.sleep(0)
        finally:
            done.set()

    def consistent(ks: list[int], fan: int) -> bool:
        """The state after some prefix of the writer's operations?"""
        adding = ks == list(range(len(ks))) and len(ks) - fan in (0, 1)
        removing = ks == list(range(n - len(ks), n)) and fan - len(ks) in (0, 1)
        return adding or removing

    def taker() -> None:
        start.wait()
        while not done.is_set():
            view: Any = trie.snapshot() if kind == "snapshot" else trie.copy()
            # Read at the engine level (patterns carry k; "fan" is counted), so that
            # the registry races documented at the end of this file cannot interfere.
            ks: list[int] = []
            fan = 0
            for pat, ids in nb.iterate(view._h):
                if pat == b"fan":
                    fan += len(ids)
                else:
                    ks.append(int(pat.rsplit(b".", 1)[1]))
            ks.sort()
            assert consistent(ks, fan), (ks[:3], ks[-3:], len(ks), fan)
            assert len(view) == len(ks) + fan
            seen.append(len(ks))
            taken.set()
            # not strict: a view taken while an unsubscribe is half-way may hold its
            # tomb (the update is in flight in the source, never finished in the view)
            view.check_invariants(strict=False)

    run_threads([writer, taker, taker])
    assert seen, "no snapshot was taken while the writer ran"
    assert len(trie) == 0
    trie.check_invariants(strict=True)
    if kind == "snapshot":
        # (copies that were alive when a subscriber left keep it mapped forever: see
        # test_dropping_a_handle_frees_its_subscribers in test_snapshots.py)
        gc.collect()
        assert len(trie._reg) == 0


def test_snapshot_answers_do_not_move_while_writers_run() -> None:
    trie = Trie()
    for k in range(400):
        # anchor every subscriber so none is ever freed: registry races aside
        trie.subscribe("anchor", k)
    for k in range(200):
        trie.subscribe(f"a.{k}", k)
    stop = threading.Event()

    def writer() -> None:
        k = 200
        while not stop.is_set():
            trie.subscribe(f"a.{k % 400}", k % 400)
            trie.unsubscribe(f"a.{(k * 7) % 400}", (k * 7) % 400)
            k += 1

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    try:
        for _ in range(30):
            snap = trie.snapshot()
            first = sorted(snap, key=repr)
            for _ in range(3):
                assert sorted(snap, key=repr) == first
                assert len(snap) == len(first)
                for k in range(0, 400, 37):
                    assert sorted(snap.lookup(f"a.{k}")) == sorted(
                        s for p, s in first if p == f"a.{k}"
                    )
    finally:
        stop.set()
        th.join(JOIN_TIMEOUT)
    trie.check_invariants(strict=True)


# ------------------------------------- deterministic replays of registry races
class Racer:
    """Runs "another thread's" operation at the racy moment (``fire``).  It waits a
    little for it; if a fixed implementation makes it wait for a lock, it finishes
    later and ``finish`` joins it, so a fix is not mistaken for the bug."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.thread: threading.Thread | None = None

    def fire(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self.fn, daemon=True)
            self.thread.start()
            self.thread.join(2.0)

    def finish(self) -> None:
        if self.thread is None:
            pytest.skip("the replayed interleaving point was not reached: API changed")
        self.thread.join(JOIN_TIMEOUT)
        assert not self.thread.is_alive()


def _unmapped_ids(handle: Any, trie: Trie) -> list[int]:
    return [i for _, ids in nb.iterate(handle) for i in ids if not trie._reg.maps(i)]


def test_copy_racing_with_subscribe_keeps_subscriber_mapped(monkeypatch: Any) -> None:
    trie = Trie()
    trie.subscribe("b", "y")
    real = nb.snapshot
    racer = Racer(lambda: trie.subscribe("a", "x"))

    def racing(handle: Any, readonly: bool) -> Any:
        if not readonly:  # inside copy(): another thread subscribes just now
            racer.fire()
        return real(handle, readonly)

    monkeypatch.setattr(trie_module.nb, "snapshot", racing)
    dup = trie.copy()
    monkeypatch.undo()
    racer.finish()
    # copy() holds every subscriber lock, so the racing subscribe lands either
    # wholly before the copy or wholly after it: never half-counted.
    held = sorted(dup)
    assert held in ([("a", "x"), ("b", "y")], [("b", "y")])
    assert trie.unsubscribe("a", "x") is True  # the original drops it
    assert _unmapped_ids(dup._h, dup) == []
    assert sorted(dup) == held


def test_snapshot_racing_with_last_unsubscribe_keeps_subscriber_mapped(
    monkeypatch: Any,
) -> None:
    trie = Trie()
    trie.subscribe("a", "x")
    real = nb.snapshot
    racer = Racer(lambda: trie.unsubscribe("a", "x"))

    def racing(handle: Any, readonly: bool) -> Any:
        h = real(handle, readonly)
        if readonly:  # the engine snapshot exists; another thread unsubscribes now
            racer.fire()
        return h

    monkeypatch.setattr(trie_module.nb, "snapshot", racing)
    snap = trie.snapshot()
    monkeypatch.undo()
    racer.finish()
    assert list(trie) == []
    assert _unmapped_ids(snap._h, trie) == []  # (fails: 'x' was freed)
    assert list(snap) == [("a", "x")]


def test_threads_freeing_ids_at_once_keep_the_registry_whole() -> None:
    """Rule (registry rule 1, under threads): ids freed by threads at the same
    time all go back to the free list, and the registry stays consistent.  Two
    threads subscribe 3,000 subscribers each (distinct ones, so different stripe
    locks), then unsubscribe them all at once: every unsubscribe frees an id,
    so the shared free list grows again and again while both threads free.
    (It once grew under the stripe lock alone: two threads reallocated it at
    the same time, and the process aborted with a double free.)  Run in a
    child process, so that a crash fails the test."""
    from helpers import run_isolated

    code = textwrap.dedent(
        """
        import threading
        from cstrie import Trie

        for rnd in range(60):
            trie = Trie("mqtt")
            start = threading.Barrier(2)
            errors = []

            def work(k):
                try:
                    subs = [f"t{k}-s{i}" for i in range(3000)]
                    for i, s in enumerate(subs):
                        trie.subscribe(f"a/{i % 50}", s)
                    start.wait()
                    for i, s in enumerate(subs):
                        assert trie.unsubscribe(f"a/{i % 50}", s)
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert not errors, errors
            assert len(trie) == 0 and len(trie._reg) == 0, (len(trie), len(trie._reg))
            trie.subscribe("x", "again")  # reuses a freed slot
            assert trie.lookup("x") == ["again"]
            trie.check_invariants(strict=True)
        print("ok")
        """
    )
    assert run_isolated(code, timeout=300).strip() == "ok"
