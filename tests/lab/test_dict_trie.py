"""The hand-written dict-per-level trie (:class:`cstrie_lab.classic.DictTrie`), checked
against the independent oracle (``tests/support/oracle.py``) in both dialects it speaks.

It is the benchmarks' baseline, so its answers must be right: random
subscribe/unsubscribe batches, each followed by lookups that must equal the
oracle's answer as a set, with each subscriber once.  It validates nothing, so
only valid input is used.

Seeded by ``CSTRIE_SEED`` (a fresh seed each run unless set); failures carry it:

    CSTRIE_SEED=<seed> python -m pytest tests/lab/test_dict_trie.py
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Hashable

import oracle
import pytest

from cstrie.dialect import AMQP, MQTT, Dialect
from cstrie_lab.classic import CLASSIC, DictTrie

SEED = int(os.environ.get("CSTRIE_SEED", "").strip() or random.SystemRandom().randrange(2**32))
REPLAY = f"replay with CSTRIE_SEED={SEED}"
DIALECTS: dict[str, Dialect] = {"mqtt": MQTT, "amqp": AMQP}
WORDS = ["a", "b", "c", "$x", "+x"]
SUBSCRIBERS: list[Hashable] = [*range(5), "s0", ("t", 1)]

EDGE_PATTERNS = {
    "mqtt": ["#", "+", "+/#", "$x/#", "$x", "$x/+", "a/#", "a/+", "/+", "+/+", "/", "a//b",
             "+//+", "a", "a/b/#", "+/b/#", "+/$x"],
    "amqp": ["", "#", "*", "#.#", "#.#.a", "a.#.b.#", "#.a.#", "a.#", "#.a", "*.#", "#.*",
             "a.*.#.b", "a..b", "*.*", ".", "a.#.#.b", "#.*.#", "a", "a.b", "$x.#", "a.#.*"],
}  # fmt: skip
EDGE_TOPICS = {
    "mqtt": ["a", "/", "//", "a/b", "a//b", "$x", "$x/a", "$SYS", "$SYS/a/b", "a/$x", "/a",
             "$", "$/b", "b/b"],
    "amqp": ["", ".", "a", "b", "a.b", "a..b", "b.a", "a.a", "a.b.a.b", "a.x.b.y", "*", "#",
             "a.*", "a.#", "$x", "$x.a", "a.b.c.d.e.f.b", ".."],
}  # fmt: skip


def answer(t: DictTrie, topic: str) -> set[Hashable]:
    found = t.lookup(topic)
    assert isinstance(found, list)
    assert len(found) == len(set(found)), f"lookup({topic!r}) repeats a subscriber: {found!r}"
    return set(found)


def test_not_a_classic_matcher_and_dialects() -> None:
    assert "dict-trie" not in CLASSIC  # CLASSIC's matchers validate; this one does not
    assert DictTrie().dialect == "mqtt"
    with pytest.raises(ValueError, match="mqtt and amqp"):
        DictTrie("nats")


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_random_workload_matches_oracle(dialect: str) -> None:
    d = DIALECTS[dialect]
    rng = random.Random(f"{SEED}/dict-trie/{dialect}")
    patterns = EDGE_PATTERNS[dialect] + [oracle.random_pattern(rng, d, WORDS, 6) for _ in range(80)]
    topics = EDGE_TOPICS[dialect] + [oracle.random_topic(rng, d, WORDS, 6) for _ in range(60)]
    topics = list(dict.fromkeys(topics))
    t = DictTrie(dialect)
    pairs: set[tuple[str, Hashable]] = set()
    for batch in range(8):
        for _ in range(50):
            if (batch < 5 and rng.random() < 0.7) or not pairs:
                pair = (rng.choice(patterns), rng.choice(SUBSCRIBERS))
                assert t.subscribe(*pair) is (pair not in pairs), f"{REPLAY}: subscribe{pair}"
                pairs.add(pair)
            else:
                if rng.random() < 0.8:
                    pair = rng.choice(sorted(pairs, key=repr))
                else:
                    pair = (rng.choice(patterns), rng.choice(SUBSCRIBERS))
                assert t.unsubscribe(*pair) is (pair in pairs), f"{REPLAY}: unsubscribe{pair}"
                pairs.discard(pair)
        assert len(t) == len(pairs)
        for topic in topics:
            want = oracle.expected_lookup(d, pairs, topic)
            assert answer(t, topic) == want, f"{REPLAY}: {dialect} batch {batch}: {topic!r}"
    for pair in list(pairs):
        assert t.unsubscribe(*pair)
    assert len(t) == 0
    assert t._root == {}, "every level is pruned once the trie is empty"


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_edge_patterns_one_subscriber_each(dialect: str) -> None:
    d = DIALECTS[dialect]
    t = DictTrie(dialect)
    pairs = [(p, i) for i, p in enumerate(EDGE_PATTERNS[dialect])]
    for p, i in pairs:
        assert t.subscribe(p, i)
    for topic in EDGE_TOPICS[dialect]:
        assert answer(t, topic) == oracle.expected_lookup(d, pairs, topic), topic


@pytest.mark.parametrize(
    ("pattern", "topic", "hit"),
    [
        ("a/#", "a", True),  # '#' also matches the parent level
        ("a/#", "a/b/c", True),
        ("#", "$SYS/x", False),
        ("+/x", "$SYS/x", False),
        ("+/#", "$SYS", False),
        ("$SYS/#", "$SYS", True),
        ("a/+", "a/$x", True),  # only the first level's '$' counts
        ("+/+", "/", True),
    ],
)
def test_mqtt_rules(pattern: str, topic: str, hit: bool) -> None:
    assert oracle.matches(MQTT, pattern, topic) is hit
    t = DictTrie("mqtt")
    t.subscribe(pattern, "s")
    assert t.lookup(topic) == (["s"] if hit else [])


def test_subscriber_in_several_patterns_is_returned_once() -> None:
    t = DictTrie("amqp")
    for p in ("a.#", "#", "a.*", "*.*", "#.b", "a.b"):
        t.subscribe(p, "same")
    assert t.lookup("a.b") == ["same"]


def test_unsubscribe_prunes_only_empty_levels() -> None:
    t = DictTrie("mqtt")
    t.subscribe("a/b/c", 1)
    t.subscribe("a/b", 2)
    assert t.unsubscribe("a/b/c", 1)
    assert t._root == {"a": {"b": {None: {2}}}}
    assert not t.unsubscribe("a/b/c", 1)
    assert not t.unsubscribe("a/b", 3)
    assert t.unsubscribe("a/b", 2)
    assert t._root == {}


def test_amqp_hashes_are_memoised() -> None:
    """``#.#.#...`` against a long topic: each (level, split point) is walked once."""
    t = DictTrie("amqp")
    t.subscribe(".".join(["#"] * 12 + ["a"]), 1)
    t.subscribe(".".join(["#"] * 12 + ["b"]), 2)
    topic = ".".join(["x"] * 60 + ["a"])
    start = time.perf_counter()
    assert t.lookup(topic) == [1]
    assert time.perf_counter() - start < 5  # exponential would be ~60**12 steps
