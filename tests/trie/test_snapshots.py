"""Snapshots and copies, checked by behaviour.

Rules under test (docs/design.md, cstrie/trie.py, cstrie/registry.py):

* ``trie.snapshot()`` is a read-only view of the subscriptions at one moment: later
  writes to the trie (or to copies) never show through it, however many there are;
* a Snapshot cannot be written to (it has no write methods, and the engine refuses
  writes to its handle);
* ``trie.copy()`` / ``snapshot.copy()`` give writable tries independent of their
  source in both directions; snapshots of copies and copies of snapshots compose;
* ``len`` is exact for tries and snapshots alike, at every moment;
* iterating a snapshot while another thread mutates the trie yields exactly the
  snapshot's pairs;
* the registry keeps a subscriber mapped while any snapshot taken while it was
  subscribed is open, and frees it when that snapshot is dropped.
"""

from __future__ import annotations

import gc
import random
import threading
import weakref
from collections.abc import Hashable
from typing import Any

import oracle
import pytest
from helpers import Sub

from cstrie._binding import ffi, lib
from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.registry import LOCAL_FREE, STRIPES
from cstrie.trie import Snapshot, Trie

DIALECTS = {"amqp": AMQP, "mqtt": MQTT, "nats": NATS}
WORDS = ["a", "b", "c", "d", "ab", "$x"]
SUBS: list[Hashable] = [*range(6), "s", ("t", 1), frozenset({7})]

Pairs = set[tuple[str, Hashable]]


def populate(trie: Trie, d: Dialect, rng: random.Random, n: int) -> Pairs:
    pairs: Pairs = set()
    for _ in range(n):
        p = oracle.random_pattern(rng, d, WORDS, 4)
        s = rng.choice(SUBS)
        assert trie.subscribe(p, s) is ((p, s) not in pairs)
        pairs.add((p, s))
    return pairs


def churn(trie: Trie, d: Dialect, rng: random.Random, pairs: Pairs, n: int) -> None:
    """n random writes to trie, mirrored in pairs (the trie's model)."""
    for i in range(n):
        roll = rng.random()
        if roll < 0.45:
            p, s = oracle.random_pattern(rng, d, WORDS, 4), rng.choice(SUBS)
            assert trie.subscribe(p, s) is ((p, s) not in pairs)
            pairs.add((p, s))
        elif roll < 0.9 and pairs:
            pair = rng.choice(sorted(pairs, key=repr))
            assert trie.unsubscribe(*pair) is True
            pairs.discard(pair)
        elif roll < 0.995:
            p, s = oracle.random_pattern(rng, d, WORDS, 4), rng.choice(SUBS)
            assert trie.unsubscribe(p, s) is ((p, s) in pairs)
            pairs.discard((p, s))
        else:
            trie.clear()
            pairs.clear()
        if i % 97 == 0:
            trie.snapshot()  # new generations: later writes must copy paths again


def assert_state(reader: Trie | Snapshot, d: Dialect, pairs: Pairs, rng: random.Random) -> None:
    """Everything the reader answers agrees with ``pairs``."""
    assert len(reader) == len(pairs)
    listed = list(reader)
    assert len(listed) == len(pairs) and set(listed) == pairs
    subs = reader.subscriptions()
    assert sum(len(v) for v in subs.values()) == len(pairs)
    assert {(p, s) for p, lst in subs.items() for s in lst} == pairs
    for p in {p for p, _ in pairs}:
        assert set(reader.subscribers(p)) == {s for q, s in pairs if q == p}
    topics = [oracle.random_topic(rng, d, WORDS, 5) for _ in range(60)]
    many = reader.lookup_many(topics)
    for t, got_many in zip(topics, many, strict=True):
        want = oracle.expected_lookup(d, pairs, t)
        got = reader.lookup(t)
        assert len(got) == len(want) and set(got) == want, t
        assert set(got_many) == want, t
        assert set(reader.match(t)) == oracle.expected_match(d, pairs, t), t
        assert reader.has_subscribers(t) is bool(want), t
    reader.check_invariants(strict=True)


# ---------------------------------------------------------------- isolation
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_snapshot_unchanged_after_many_writes(name: str) -> None:
    d = DIALECTS[name]
    rng = random.Random(f"snap-writes-{name}")
    trie = Trie(d)
    live = populate(trie, d, rng, 300)
    snaps = []
    for _ in range(4):
        snaps.append((trie.snapshot(), set(live)))
        churn(trie, d, rng, live, 1500)
    assert_state(trie, d, live, rng)
    for snap, frozen in snaps:
        assert_state(snap, d, frozen, rng)
    trie.clear()
    for snap, frozen in snaps:
        assert len(snap) == len(frozen) and set(snap) == frozen


def test_snapshot_isolated_from_writes_below_shared_deep_paths() -> None:
    """Writes below shared deep paths (the lazily copied ones) stay invisible."""
    trie = Trie()
    for i in range(50):
        trie.subscribe("a.b.c.d.e." + str(i), i)
    snap = trie.snapshot()
    for i in range(50):
        trie.unsubscribe("a.b.c.d.e." + str(i), i)
        trie.subscribe("a.b.c.d.e." + str(i), -i - 1)
        trie.subscribe("a.b.c.d.e." + str(i) + ".f", i)
    assert sorted(snap.lookup("a.b.c.d.e.7")) == [7]
    assert snap.lookup("a.b.c.d.e.7.f") == []
    assert trie.lookup("a.b.c.d.e.7") == [-8]
    assert len(snap) == 50 and len(trie) == 100
    snap.check_invariants(strict=True)
    trie.check_invariants(strict=True)


# --------------------------------------------------------------- read-only
@pytest.mark.parametrize("method", ["subscribe", "unsubscribe", "clear"])
def test_snapshot_cannot_be_written(method: str) -> None:
    trie = Trie()
    trie.subscribe("a.b", 1)
    snap = trie.snapshot()
    fn = getattr(snap, method, None)
    if fn is not None:
        with pytest.raises(TypeError):
            fn() if method == "clear" else fn("a.b", 2)
    assert list(snap) == [("a.b", 1)]
    assert list(trie) == [("a.b", 1)]


def test_snapshot_engine_handle_refuses_writes() -> None:
    """Even below the Python API, the engine marks the handle read-only."""
    trie = Trie()
    trie.subscribe("a.b", 1)
    snap = trie.snapshot()
    assert lib.cst_is_readonly(snap._h) == 1
    assert lib.cst_is_readonly(trie._h) == 0
    assert lib.cst_subscribe(snap._h, b"x", 1, 99) == lib.CST_EREADONLY
    assert lib.cst_unsubscribe(snap._h, b"a.b", 3, 1) == lib.CST_EREADONLY
    assert lib.cst_clear(snap._h) == lib.CST_EREADONLY
    assert lib.cst_clear_take(snap._h) == ffi.NULL
    assert list(snap) == [("a.b", 1)]
    snap.check_invariants(strict=True)


def test_snapshot_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError):
        Snapshot()


# ------------------------------------------------------------------ copies
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_copy_independent_both_ways(name: str) -> None:
    d = DIALECTS[name]
    rng = random.Random(f"copy-{name}")
    trie = Trie(d)
    live = populate(trie, d, rng, 200)
    dup = trie.copy()
    assert isinstance(dup, Trie) and dup is not trie
    dup_pairs = set(live)
    assert_state(dup, d, dup_pairs, rng)
    churn(dup, d, rng, dup_pairs, 800)  # copy -> original?
    assert_state(trie, d, live, rng)
    churn(trie, d, rng, live, 800)  # original -> copy?
    assert_state(dup, d, dup_pairs, rng)
    assert_state(trie, d, live, rng)
    dup2 = dup.copy()  # a copy of a copy
    dup2_pairs = set(dup_pairs)
    dup.clear()
    dup_pairs.clear()
    assert_state(dup2, d, dup2_pairs, rng)
    assert_state(dup, d, dup_pairs, rng)
    assert_state(trie, d, live, rng)


def test_copy_protocol() -> None:
    import copy

    trie = Trie()
    trie.subscribe("a.*", "x")
    dup = copy.copy(trie)
    assert isinstance(dup, Trie)
    dup.subscribe("b", "y")
    assert list(trie) == [("a.*", "x")]
    assert sorted(dup) == [("a.*", "x"), ("b", "y")]


def test_snapshot_of_copy_and_copy_of_snapshot() -> None:
    rng = random.Random("compose")
    d = AMQP
    trie = Trie()
    live = populate(trie, d, rng, 150)
    dup = trie.copy()
    dup_pairs = set(live)
    churn(dup, d, rng, dup_pairs, 200)
    snap = dup.snapshot()  # snapshot of a copy
    frozen = set(dup_pairs)
    churn(dup, d, rng, dup_pairs, 400)
    churn(trie, d, rng, live, 400)
    assert_state(snap, d, frozen, rng)
    again = snap.snapshot()  # a snapshot of a snapshot is the same state
    assert_state(again, d, frozen, rng)
    writable = snap.copy()  # copy of a snapshot: writable, starts from the snapshot
    assert isinstance(writable, Trie)
    w_pairs = set(frozen)
    assert_state(writable, d, w_pairs, rng)
    churn(writable, d, rng, w_pairs, 400)
    assert_state(writable, d, w_pairs, rng)
    assert_state(snap, d, frozen, rng)
    assert_state(dup, d, dup_pairs, rng)
    assert_state(trie, d, live, rng)
    del snap, again
    gc.collect()
    assert_state(writable, d, w_pairs, rng)


# --------------------------------------------------------------------- len
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_len_exact_at_every_moment(name: str) -> None:
    """len() of tries, copies and snapshots, interleaved with writes (the engine
    caches sizes in frozen nodes shared with the live trie)."""
    d = DIALECTS[name]
    rng = random.Random(f"len-{name}")
    trie = Trie(d)
    live: Pairs = set()
    held: list[tuple[Any, Pairs]] = []
    for step in range(1500):
        churn(trie, d, rng, live, 1)
        if step % 7 == 0:
            assert len(trie) == len(live)
        if step % 50 == 0:
            held.append((trie.snapshot(), set(live)))
        if step % 300 == 0:
            held.append((trie.copy(), set(live)))
        if step % 23 == 0:
            for h, pairs in held:
                assert len(h) == len(pairs)
    for h, pairs in held:
        assert len(h) == len(pairs)
        assert len(list(h)) == len(pairs)
    assert len(trie) == len(live) == len(list(trie))


def test_len_of_empty_and_single() -> None:
    trie = Trie()
    assert len(trie) == 0 and not trie
    snap0 = trie.snapshot()
    trie.subscribe("", "empty-key")  # the zero-word pattern counts too
    assert len(trie) == 1 and trie
    assert len(snap0) == 0 and not snap0
    assert len(trie.snapshot()) == 1


# --------------------------------------------------------------- iteration
def test_iterating_snapshot_while_trie_mutates_in_another_thread() -> None:
    trie = Trie()
    frozen: Pairs = set()
    for i in range(20_000):  # more groups than one engine iteration chunk holds
        p = f"p.{i % 7}.{i}"
        trie.subscribe(p, i % 13)
        frozen.add((p, i % 13))
    for i in range(300):
        trie.subscribe("fan.#", i)  # one big subscriber set
        frozen.add(("fan.#", i))
    snap = trie.snapshot()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        rng = random.Random(1)
        try:
            while not stop.is_set():
                i = rng.randrange(20_000)
                trie.unsubscribe(f"p.{i % 7}.{i}", i % 13)
                trie.subscribe(f"p.{i % 7}.{i}.new", i)
                trie.subscribe("fan.#", 1000 + i)
                if rng.random() < 0.002:
                    trie.clear()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    th = threading.Thread(target=writer)
    th.start()
    try:
        for _ in range(3):
            listed = list(snap)
            assert len(listed) == len(frozen)
            assert set(listed) == frozen
            assert len(snap) == len(frozen)
            subs = snap.subscriptions()
            assert sorted(subs["fan.#"]) == list(range(300))
    finally:
        stop.set()
        th.join()
    assert not errors, errors
    snap.check_invariants(strict=True)
    trie.check_invariants(strict=True)


def test_lazy_iteration_is_a_consistent_view() -> None:
    """An iterator over the live trie describes the moment it started; one over a
    snapshot the snapshot's moment, whatever happens between next() calls."""
    trie = Trie()
    for i in range(100):
        trie.subscribe(f"k.{i}", i)
    expected = {(f"k.{i}", i) for i in range(100)}
    snap = trie.snapshot()
    it_live, it_snap = iter(trie), iter(snap)
    got_live, got_snap = [next(it_live)], [next(it_snap)]
    for i in range(100):
        trie.unsubscribe(f"k.{i}", i)
        trie.subscribe(f"new.{i}", i)
    got_live.extend(it_live)
    got_snap.extend(it_snap)
    assert set(got_live) == expected and len(got_live) == 100
    assert set(got_snap) == expected and len(got_snap) == 100


# ---------------------------------------------------------------- registry
def test_subscriber_held_only_by_snapshot_stays_mapped_then_is_freed() -> None:
    trie = Trie()
    obj = Sub("only-in-snapshot")
    keep = Sub("kept")
    trie.subscribe("a.b", obj)
    trie.subscribe("a.*", obj)
    trie.subscribe("k", keep)
    snap = trie.snapshot()
    assert trie.unsubscribe("a.b", obj) and trie.unsubscribe("a.*", obj)
    assert trie.lookup("a.b") == []
    got = snap.lookup("a.b")
    assert got == [obj] and got[0] is obj
    assert {s for _, s in snap.match("a.b")} == {obj}
    assert any(s is obj for _, s in snap)
    assert len(trie._reg) == 2
    assert trie.stats()["subscriptions"] == 1
    del snap, got
    gc.collect()
    assert len(trie._reg) == 1
    assert list(trie._reg.live_objects()) == [keep]
    trie.unsubscribe("k", keep)
    assert len(trie._reg) == 0


def test_subscriber_freed_only_after_every_older_snapshot() -> None:
    trie = Trie()
    obj = Sub("x")
    trie.subscribe("a", obj)
    s1 = trie.snapshot()
    s2 = trie.snapshot()
    trie.unsubscribe("a", obj)
    s3 = trie.snapshot()  # taken after the death: does not hold obj
    assert s3.lookup("a") == []
    del s1
    gc.collect()
    assert len(trie._reg) == 1 and s2.lookup("a") == [obj]
    del s2
    gc.collect()
    assert len(trie._reg) == 0
    assert len(s3) == 0


def test_resubscribe_while_snapshot_holds_the_subscriber() -> None:
    trie = Trie()
    obj = Sub("r")
    trie.subscribe("a", obj)
    snap = trie.snapshot()
    trie.unsubscribe("a", obj)
    assert trie.subscribe("b", obj) is True
    del snap
    gc.collect()
    assert trie.lookup("b") == [obj]  # still mapped: the live trie holds it again
    assert len(trie._reg) == 1
    trie.unsubscribe("b", obj)
    assert len(trie._reg) == 0


def test_copy_of_snapshot_keeps_its_subscribers_mapped() -> None:
    trie = Trie()
    obj = Sub("c")
    trie.subscribe("a", obj)
    snap = trie.snapshot()
    trie.unsubscribe("a", obj)
    writable = snap.copy()
    del snap
    gc.collect()
    assert writable.lookup("a") == [obj]  # the copy holds a pair: obj stays mapped
    assert len(trie._reg) == 1
    assert writable.unsubscribe("a", obj) is True
    assert len(trie._reg) == 0


def test_clear_frees_registry_entries() -> None:
    trie = Trie()
    for i in range(50):
        trie.subscribe(f"a.{i}", Sub(str(i % 10)))
    assert len(trie._reg) == 10
    snap = trie.snapshot()
    trie.clear()
    assert len(trie) == 0 and len(snap) == 50
    assert len(trie._reg) == 10  # the snapshot still maps them
    del snap
    gc.collect()
    assert len(trie._reg) == 0


@pytest.mark.parametrize("drop", ["copy", "original"])
def test_dropping_a_handle_frees_its_subscribers(drop: str) -> None:
    trie = Trie()
    trie.subscribe("a", "shared")
    dup = trie.copy()
    if drop == "copy":
        dup.subscribe("b", "only-in-dropped")
        survivor = trie
        del dup
    else:
        trie.subscribe("b", "only-in-dropped")
        survivor = dup
        del trie
    gc.collect()
    assert set(survivor._reg.live_objects()) == {"shared"}


# ------------------------------------------------ registry rule 3, exactly
def test_subscribers_that_arrive_and_leave_after_a_snapshot_are_freed_at_once() -> None:
    """Rule 3: an id is kept for an open snapshot only if that snapshot may
    hold one of its pairs.  10,000 clients (10 KB each) that join after the
    snapshot and leave are freed as they leave: the registry does not grow,
    the objects are collected, and the snapshot still answers as it was."""
    import weakref

    class Client:
        def __init__(self, n: int) -> None:
            self.n = n
            self.buf = bytearray(10_000)

    trie = Trie("mqtt")
    trie.subscribe("keep/#", "k")
    snap = trie.snapshot()
    refs = []
    for n in range(10_000):
        c = Client(n)
        refs.append(weakref.ref(c))
        trie.subscribe(f"dev/{n % 97}/+", c)
        trie.subscribe("dev/#", c)
        trie.unsubscribe(f"dev/{n % 97}/+", c)
        trie.unsubscribe("dev/#", c)
        del c
    assert len(trie._reg) == 1
    assert sum(r() is not None for r in refs) == 0
    # slot 0, "k", and slots reused: at most those waiting in the stripes
    assert len(trie._reg.objects) <= 2 + STRIPES * LOCAL_FREE
    assert sorted(snap) == [("keep/#", "k")]


def test_a_subscriber_born_before_a_snapshot_stays_until_it_closes() -> None:
    """Rule 3, the other side: a subscriber whose pair was in the trie when the
    snapshot was taken stays mapped (and alive) while the snapshot is open,
    even if it subscribed after an older, still open snapshot."""
    trie = Trie()
    older = trie.snapshot()
    obj = Sub("between")
    trie.subscribe("a", obj)
    snap = trie.snapshot()
    trie.unsubscribe("a", obj)
    assert len(trie._reg) == 1
    assert snap.lookup("a") == [obj] and older.lookup("a") == []
    del snap
    gc.collect()
    assert len(trie._reg) == 0
    del older


def test_an_iteration_in_progress_keeps_every_id_that_dies_meanwhile() -> None:
    """Rule 3: an iteration pins before it takes its own engine snapshot and
    never says when that snapshot exists, so an id that dies while it runs is
    kept (its pairs may be in what it walks) until the iteration ends."""
    trie = Trie()
    for k in range(3):
        trie.subscribe(f"p{k}", Sub(str(k)))
    it = iter(trie)
    first = next(it)
    obj = Sub("late")
    trie.subscribe("late", obj)
    trie.unsubscribe("late", obj)
    assert len(trie._reg) == 4  # "late" is kept while the iteration runs
    rest = list(it)
    assert len([first, *rest]) == 3
    gc.collect()
    assert len(trie._reg) == 3


# -- snapshots taken by many threads ------------------------------------------
#
# A snapshot holds its parent's dialect and registry through a reference that
# the thread taking it made (one per thread, kept by the parent, hotpath.h:
# Anchor).  What a user sees must not change: snapshots from any number of
# threads read exactly, keep their subscribers mapped after the trie is gone,
# cycles through them are collected, and a trie goes with its last reference.


class Holder:
    """A subscriber that can hold a snapshot and be weakly referenced."""

    snap: object = None
    own: object = None


def test_snapshots_from_more_threads_than_a_handle_keeps_references_for() -> None:
    """80 threads (more than the 64 per-thread references a handle keeps) each
    take snapshots of one trie and read them; every snapshot answers as the
    trie did, also after the trie is dropped."""
    trie = Trie(MQTT)
    subs = [Sub(("s", k)) for k in range(40)]
    for k, s in enumerate(subs):
        trie.subscribe(f"a/{k % 5}/+", s)
        trie.subscribe("a/#", s)
    topics = [f"a/{k}/x" for k in range(6)]
    want = [sorted(map(repr, trie.lookup(t))) for t in topics]
    snaps: list[list[Snapshot]] = [[] for _ in range(80)]
    barrier = threading.Barrier(80)
    errors: list[BaseException] = []

    def take(k: int, snapshot: Any = trie.snapshot) -> None:
        try:
            barrier.wait(30)
            for _ in range(3):
                s = snapshot()
                assert [sorted(map(repr, s.lookup(t))) for t in topics] == want
                snaps[k].append(s)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=take, args=(k,)) for k in range(80)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and all(len(row) == 3 for row in snaps)
    for s in subs:
        trie.unsubscribe("a/#", s)
    del trie, take
    gc.collect()
    for row in snaps:
        for s in row:
            assert [sorted(map(repr, s.lookup(t))) for t in topics] == want


def test_a_trie_whose_snapshots_are_gone_is_freed_without_the_collector() -> None:
    """Snapshots taken by several threads and dropped leave no cycle: the trie,
    its registry and its subscribers go with their last reference."""
    was = gc.isenabled()
    gc.disable()
    try:
        trie = Trie(AMQP)
        sub = Holder()
        trie.subscribe("a.*", sub)

        seen: list[bool] = []

        def take(snapshot: Any = trie.snapshot, sub: object = sub) -> None:
            seen.append(snapshot().lookup("a.b") == [sub])

        for _ in range(3):
            t = threading.Thread(target=take)
            t.start()
            t.join(30)
        take()
        assert seen == [True] * 4
        gone_trie, gone_sub = weakref.ref(trie), weakref.ref(sub)
        del trie, sub, take
        assert gone_trie() is None and gone_sub() is None
    finally:
        if was:
            gc.enable()


def test_a_subscriber_holding_a_snapshot_of_its_trie_is_collected() -> None:
    """A cycle subscriber -> snapshot -> (registry) -> subscriber, made from
    two threads, is found by the cyclic collector."""
    trie = Trie(AMQP)
    sub = Holder()
    trie.subscribe("a.*", sub)

    def hold(sub: Holder = sub, snapshot: Any = trie.snapshot) -> None:
        sub.snap = snapshot()

    t = threading.Thread(target=hold)
    t.start()
    t.join(30)
    sub.own = trie.snapshot()
    gone_trie, gone_sub = weakref.ref(trie), weakref.ref(sub)
    del trie, sub, t, hold
    gc.collect()
    assert gone_trie() is None and gone_sub() is None
