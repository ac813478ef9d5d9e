"""A lookup's walk answers from one state of the trie (linearizability).

Rule (``native/cstrie.h``, ``cst_lookup``): lookups, ``has_subscribers``,
``match``, ``route`` and each row of ``lookup_many`` return the trie's answer at
one moment inside the call, however many branches of the trie the walk reads.
The engine checks what a walk read and walks again when an update changed it;
after a few tries it freezes the trie (a read-only snapshot's O(1) step) and
walks the frozen generation.  These tests force that last path on every walk
(``cst_debug_set_walk_retries(0)``) and check that it answers exactly as the
slow oracle says, that updates after a freeze land in the live trie only, and
that the frozen generations are reclaimed.  The concurrent form of the rule
(a subscriber that is always on one of two matching filters is never missed)
is in ``tests/harness/test_harness.py``, ``test_*_is_one_state_across_branches``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

import pytest
from oracle import choose_seed, expected_lookup, random_pattern, random_topic, seeded_rng
from test_memory import stable_baseline, wait_for

from cstrie._binding import ffi, lib
from cstrie.dialect import resolve_dialect
from cstrie.trie import Trie

WORDS = ["a", "b", "c", "$sys", "d"]


def walk_counts() -> tuple[int, int]:
    rewalks = ffi.new("int64_t *")
    freezes = ffi.new("int64_t *")
    lib.cst_debug_walk_counts(rewalks, freezes)
    return int(rewalks[0]), int(freezes[0])


@pytest.fixture
def every_walk_freezes() -> Iterator[None]:
    lib.cst_debug_set_walk_retries(0)
    try:
        yield
    finally:
        lib.cst_debug_set_walk_retries(-1)


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
@pytest.mark.usefixtures("every_walk_freezes")
def test_frozen_walks_answer_as_the_oracle(dialect: str) -> None:
    seed = choose_seed()
    rng = seeded_rng(seed, "frozen", dialect)
    d = resolve_dialect(dialect)
    trie = Trie(dialect)
    pairs: set[tuple[str, Hashable]] = set()
    _, freezes0 = walk_counts()
    lookups = 0
    for step in range(1500):
        pattern = random_pattern(rng, d, WORDS, 5)
        sub = rng.randrange(12)
        if rng.random() < 0.6:
            assert trie.subscribe(pattern, sub) == ((pattern, sub) not in pairs), seed
            pairs.add((pattern, sub))
        elif pairs:
            p, s = sorted(pairs, key=repr)[rng.randrange(len(pairs))]
            assert trie.unsubscribe(p, s) is True, seed
            pairs.discard((p, s))
        topic = random_topic(rng, d, WORDS, 6)
        want = expected_lookup(d, pairs, topic)
        assert set(trie.lookup(topic)) == want, (seed, step, topic)
        assert trie.has_subscribers(topic) == bool(want), (seed, step, topic)
        assert {s for _, s in trie.match(topic)} == want, (seed, step, topic)
        assert [set(r) for r in trie.lookup_many([topic, topic])] == [want, want], seed
        lookups += 5
    trie.check_invariants(strict=True)
    assert len(trie) == len(pairs)
    _, freezes = walk_counts()
    assert freezes - freezes0 >= lookups  # every walk of the live trie froze it


@pytest.fixture
def every_trie_is_big() -> Iterator[None]:
    """Lookups walk in rounds (native/match.c, "A walk in rounds") in tries of
    any size, not only past 50,000 pairs."""
    lib.cst_debug_set_warm_pairs(0)
    try:
        yield
    finally:
        lib.cst_debug_set_warm_pairs(-1)


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
@pytest.mark.usefixtures("every_trie_is_big")
def test_walks_in_rounds_answer_as_the_oracle(dialect: str) -> None:
    """The rounds take MQTT and NATS topics of up to 16 words; AMQP and
    longer topics are warmed and walked.  Either way, the oracle's answer,
    on the live trie and on a read-only snapshot."""
    seed = choose_seed()
    rng = seeded_rng(seed, "rounds", dialect)
    d = resolve_dialect(dialect)
    trie = Trie(dialect)
    pairs: set[tuple[str, Hashable]] = set()
    for step in range(1500):
        pattern = random_pattern(rng, d, WORDS, 5)
        sub = rng.randrange(12)
        if rng.random() < 0.6:
            trie.subscribe(pattern, sub)
            pairs.add((pattern, sub))
        elif pairs:
            p, s = sorted(pairs, key=repr)[rng.randrange(len(pairs))]
            trie.unsubscribe(p, s)
            pairs.discard((p, s))
        topic = random_topic(rng, d, WORDS, 20 if step % 10 == 0 else 6)
        want = expected_lookup(d, pairs, topic)
        got = trie.lookup(topic)
        assert len(got) == len(set(got)) and set(got) == want, (seed, step, topic)
        assert [set(r) for r in trie.lookup_many([topic, topic])] == [want, want], seed
        if step % 50 == 0:
            snap = trie.snapshot()
            assert set(snap.lookup(topic)) == want, (seed, step, topic)
    trie.check_invariants(strict=True)


@pytest.mark.usefixtures("every_walk_freezes")
def test_updates_after_a_freeze_reach_the_live_trie_not_a_snapshot() -> None:
    trie = Trie("mqtt")
    trie.subscribe("a/+/c", 1)
    snap = trie.snapshot()
    assert trie.lookup("a/b/c") == [1]  # freezes the live generation
    trie.subscribe("a/#", 2)
    trie.unsubscribe("a/+/c", 1)
    assert trie.lookup("a/b/c") == [2]
    assert snap.lookup("a/b/c") == [1]
    trie.check_invariants(strict=True)


@pytest.mark.usefixtures("every_walk_freezes")
def test_routes_on_frozen_walks_pick_one_member_per_group() -> None:
    trie = Trie("mqtt")
    for m in range(5):
        trie.subscribe("$share/g/s/+", f"m{m}")
    trie.subscribe("s/#", "plain")
    seen = set()
    for _ in range(10):
        got = trie.route("s/x")
        assert "plain" in got and len(got) == 2
        seen.update(got)
    assert seen == {"plain", "m0", "m1", "m2", "m3", "m4"}  # round-robin over all five


@pytest.mark.usefixtures("every_walk_freezes")
def test_frozen_generations_are_reclaimed() -> None:
    base = stable_baseline()
    trie = Trie("amqp")
    for i in range(300):
        trie.subscribe(f"a.{i % 17}.*.#", i)
        trie.lookup(f"a.{i % 17}.x.y")  # a freeze: later writes copy the path
        if i % 3 == 0:
            trie.unsubscribe(f"a.{(i - 3) % 17}.*.#", i - 3)
    del trie
    assert wait_for(base) == base
