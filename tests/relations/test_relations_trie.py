"""``Trie.intersecting(filter)``: the stored subscriptions that share a topic
with a filter (NATS ``ReverseMatch``, interest propagation between servers).

Rule: a (pattern, subscriber) pair is returned exactly when some valid topic
matches both the pattern and the filter (``relation_oracle.expected_intersects``,
which enumerates topics over a small alphabet), each pair once; share-group
memberships are not subscriptions of the pattern and are left out.  The
engine walk only proposes candidates; these tests check the final answer
against the independent oracle, with a printed, replayable seed
(``CSTRIE_SEED``).
"""

from __future__ import annotations

import pytest
import relation_oracle as ro
from oracle import choose_seed, random_pattern, seeded_rng

from cstrie.dialect import resolve_dialect
from cstrie.trie import Trie

WORDS = ["a", "b", "$s", ""]


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_intersecting_agrees_with_the_oracle(dialect: str) -> None:
    seed = choose_seed()
    rng = seeded_rng(seed, "intersecting", dialect)
    d = resolve_dialect(dialect)
    for _ in range(6):
        trie = Trie(dialect)
        pairs = set()
        for i in range(60):
            p = random_pattern(rng, d, WORDS, 4)
            trie.subscribe(p, i % 5)
            pairs.add((p, i % 5))
        for _ in range(25):
            f = random_pattern(rng, d, WORDS, 4)
            got = trie.intersecting(f)
            want = {(p, s) for p, s in pairs if ro.expected_intersects(d, f, p)}
            assert len(got) == len(set(got)), (seed, f)
            assert set(got) == want, (seed, f, sorted(set(got) ^ want))


def test_rules_from_the_specs() -> None:
    t = Trie("mqtt")
    for f in ["sensors/+/temp", "sensors/#", "$SYS/#", "+/x", "#", "a/b"]:
        t.subscribe(f, f)
    # "+/#" and "#" never match a "$" topic, so they do not meet "$SYS/#"
    assert {p for p, _ in t.intersecting("$SYS/x")} == {"$SYS/#"}
    assert {p for p, _ in t.intersecting("sensors/kitchen/+")} == {
        "sensors/+/temp",
        "sensors/#",
        "#",
    }
    # "sensors/#" matches its parent level "sensors"
    assert {p for p, _ in t.intersecting("sensors")} == {"sensors/#", "#"}
    amqp = Trie("amqp")
    for f in ["a.#.b", "#.c", "a.*", "*.*.*"]:
        amqp.subscribe(f, f)
    # "#" anywhere: "a.#.b" and "#.c" never meet (a topic ends in b or in c)
    assert {p for p, _ in amqp.intersecting("#.c")} == {"#.c", "*.*.*", "a.*"}  # a.c
    assert {p for p, _ in amqp.intersecting("a.b")} == {"a.#.b", "a.*"}
    nats = Trie("nats")
    for f in ["a.>", "a", "*.b"]:
        nats.subscribe(f, f)
    # '>' needs at least one token: "a.>" does not meet "a"
    assert {p for p, _ in nats.intersecting("a")} == {"a"}
    assert {p for p, _ in nats.intersecting("a.b")} == {"a.>", "*.b"}


def test_groups_are_not_returned_and_bad_filters_raise() -> None:
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "member")
    t.subscribe("a/b", "plain")
    assert t.intersecting("a/#") == [("a/b", "plain")]
    with pytest.raises(ValueError):
        t.intersecting("a/#/b")
    with pytest.raises(TypeError):
        t.intersecting(b"a/b")  # type: ignore[arg-type]
    snap = t.snapshot()
    t.unsubscribe("a/b", "plain")
    assert snap.intersecting("a/b") == [("a/b", "plain")]
    assert t.intersecting("a/b") == []
