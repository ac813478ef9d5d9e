"""Bulk construction: Trie.from_pairs, Trie.from_buffers, Trie.subscribe_many.

Rule: a bulk-built trie holds exactly the given pairs (duplicates once) and
answers every lookup as a trie built by subscribe calls; an invalid input raises
and builds nothing.
"""

from __future__ import annotations

import random

import oracle
import pytest

from cstrie import _binding as nb
from cstrie.dialect import resolve_dialect
from cstrie.trie import Trie


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_from_pairs_equals_subscribe_loop(dialect: str) -> None:
    rng = random.Random(7)
    d = resolve_dialect(dialect)
    words = ["a", "b", "c", "dd", ""] if d.empty_words else ["a", "b", "c", "dd"]
    pairs = [(oracle.random_pattern(rng, d, words, 4), rng.randrange(40)) for _ in range(600)]
    pairs += pairs[:50]  # duplicates count once
    built = Trie.from_pairs(pairs, dialect)
    looped = Trie(dialect)
    for p, s in pairs:
        looped.subscribe(p, s)
    built.check_invariants()
    assert len(built) == len(looped) == len(set(pairs))
    assert sorted(built) == sorted(looped)
    for _ in range(300):
        topic = oracle.random_topic(rng, d, words, 5)
        assert sorted(built.lookup(topic)) == sorted(looped.lookup(topic))
    # A built trie is an ordinary trie: it can be changed afterwards.
    p, s = pairs[0]
    assert built.unsubscribe(p, s) is True
    assert built.subscribe(p, s) is True
    built.check_invariants()


def test_from_pairs_empty_and_zero_word_pattern() -> None:
    assert len(Trie.from_pairs([])) == 0
    t = Trie.from_pairs([("", "root"), ("#", "all")])
    assert sorted(t.lookup("")) == ["all", "root"]
    assert t.lookup("x") == ["all"]


def test_from_pairs_invalid_pattern_names_it() -> None:
    with pytest.raises(ValueError, match=r"'a/#/b'"):
        Trie.from_pairs([("a/b", 1), ("a/#/b", 2)], "mqtt")
    with pytest.raises(TypeError):
        Trie.from_pairs([(b"a.b", 1)])  # type: ignore[list-item]


def test_from_buffers_checks_refs_and_offsets() -> None:
    off = nb.ffi.new("int64_t[]", [0, 3])
    with pytest.raises(ValueError, match="subscriber #2"):
        Trie.from_buffers(b"a.b", off, nb.ffi.new("uint64_t[]", [2]), ["x"])
    with pytest.raises(ValueError, match="offsets"):
        Trie.from_buffers(
            b"a.b", nb.ffi.new("int64_t[]", [0]), nb.ffi.new("uint64_t[]", [1]), ["x"]
        )
    with pytest.raises(ValueError, match="twice"):
        Trie.from_buffers(b"a.b", off, nb.ffi.new("uint64_t[]", [1]), ["x", "x"])
    with pytest.raises(ValueError, match=r"subscriber #1, outside 1\.\.0"):
        Trie.from_buffers(b"a.b", off, nb.ffi.new("uint64_t[]", [1]), [])
    t = Trie.from_buffers(
        b"a.ba.c", nb.ffi.new("int64_t[]", [0, 3, 6]), nb.ffi.new("uint64_t[]", [1, 2]), ["x", "y"]
    )
    assert t.match("a.b") == [("a.b", "x")]
    assert t.match("a.c") == [("a.c", "y")]


def test_subscribe_many_counts_new_pairs_and_is_all_or_nothing_on_bad_input() -> None:
    t = Trie("mqtt")
    t.subscribe("a/b", "x")
    assert t.subscribe_many([("a/b", "x"), ("a/+", "y"), ("a/+", "y"), ("c/#", "x")]) == 2
    assert sorted(t) == [("a/+", "y"), ("a/b", "x"), ("c/#", "x")]
    before = sorted(t)
    with pytest.raises(ValueError, match="a/#/b"):
        t.subscribe_many([("z/z", "x"), ("a/#/b", "x")])
    assert sorted(t) == before
    with pytest.raises(TypeError):
        t.subscribe_many([("z/z", ["unhashable"])])
    assert sorted(t) == before
    t.check_invariants()
    # Ids made for the failed calls are not left behind.
    for p, s in before:
        t.unsubscribe(p, s)
    assert len(t._reg) == 0


def test_from_buffers_counts_pairs_per_subscriber_for_later_unsubscribes() -> None:
    """Duplicates count once; a subscriber stays until its last pair goes."""
    pats = [b"a.b", b"a.b", b"a.c", b"d", b"a.c"]
    off = nb.ffi.new("int64_t[]", [0, 3, 6, 9, 10, 13])
    refs = nb.ffi.new("uint64_t[]", [1, 1, 1, 2, 2])
    t = Trie.from_buffers(b"".join(pats), off, refs, ["x", "y"])
    assert len(t) == 4
    assert t.unsubscribe("a.b", "x") is True
    assert sorted(t.lookup("a.c")) == ["x", "y"]
    assert t.unsubscribe("a.c", "x") is True
    assert t.lookup("a.c") == ["y"]
    assert t.unsubscribe("a.c", "y") and t.unsubscribe("d", "y")
    assert len(t) == 0 and t.lookup("d") == []
    assert t.subscribe("d", "y") is True
