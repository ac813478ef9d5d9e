"""AMQP topic rules (the default dialect), one rule per test, written from the rules table:

    amqp | separator "." | "*" exactly one word | "#" zero or more words, anywhere in
    the pattern | empty key = zero words; "a..b" has an empty middle word; topics may
    contain "*"/"#" words as literals; at most 256 words (max_levels).

The API semantics shared by every dialect (each subscriber once, match pairs,
hashable subscribers, subscribe/unsubscribe results) are tested here too, in the
default dialect.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from cstrie.dialect import AMQP

Matcher = Callable[..., bool]  # the ``matcher`` fixture: (dialect, pattern, topic) -> bool


def test_separator_splits_words(matcher: Matcher) -> None:
    """Rule: the separator is "."; a plain word matches only an identical word."""
    assert matcher("amqp", "a.b", "a.b")
    assert not matcher("amqp", "a.b", "a.c")
    assert not matcher("amqp", "a.b", "a")
    assert not matcher("amqp", "a.b", "a.b.c")
    assert not matcher("amqp", "a.b", "ab")
    assert not matcher("amqp", "a/b", "a.b")  # "/" is an ordinary character here
    assert matcher("amqp", "a/b", "a/b")
    assert not matcher("amqp", "A", "a")  # words are compared exactly


def test_star_matches_exactly_one_word(matcher: Matcher) -> None:
    """Rule: "*" matches exactly one word."""
    assert matcher("amqp", "*", "a")
    assert matcher("amqp", "a.*", "a.b")
    assert matcher("amqp", "*.b", "a.b")
    assert matcher("amqp", "*.*", "x.y")
    assert not matcher("amqp", "a.*", "a.b.c")
    assert not matcher("amqp", "*", "a.b")


def test_star_does_not_match_zero_words(matcher: Matcher) -> None:
    """Rule: "*" matches exactly one word, so never zero words."""
    assert not matcher("amqp", "*", "")
    assert not matcher("amqp", "a.*", "a")
    assert not matcher("amqp", "*.a", "a")
    assert not matcher("amqp", "a.*.b", "a.b")


def test_star_matches_an_empty_word(matcher: Matcher) -> None:
    """Rule: "a..b" has an empty middle word -- an empty word is still one word for "*"."""
    assert matcher("amqp", "a.*.b", "a..b")
    assert matcher("amqp", "a.*", "a.")
    assert matcher("amqp", "*.b", ".b")
    assert matcher("amqp", "*.*", ".")


def test_hash_zero_words_at_end(matcher: Matcher) -> None:
    """Rule: "#" matches zero or more words -- at the end of a pattern."""
    assert matcher("amqp", "a.#", "a")
    assert matcher("amqp", "a.#", "a.b")
    assert matcher("amqp", "a.#", "a.b.c.d")
    assert not matcher("amqp", "a.#", "b")
    assert not matcher("amqp", "a.#", "b.a")
    assert not matcher("amqp", "a.#", "")


def test_hash_zero_words_at_start(matcher: Matcher) -> None:
    """Rule: "#" matches zero or more words anywhere -- at the start of a pattern."""
    assert matcher("amqp", "#.a", "a")
    assert matcher("amqp", "#.a", "x.a")
    assert matcher("amqp", "#.a", "x.y.z.a")
    assert matcher("amqp", "#.a", "a.a")
    assert not matcher("amqp", "#.a", "a.x")
    assert not matcher("amqp", "#.a", "")


def test_hash_zero_words_in_middle(matcher: Matcher) -> None:
    """Rule: "#" matches zero or more words anywhere -- in the middle of a pattern."""
    assert matcher("amqp", "a.#.b", "a.b")
    assert matcher("amqp", "a.#.b", "a.x.b")
    assert matcher("amqp", "a.#.b", "a.x.y.b")
    assert matcher("amqp", "a.#.b", "a.b.b")
    assert matcher("amqp", "a.#.b", "a..b")  # the empty middle word
    assert not matcher("amqp", "a.#.b", "a.x")
    assert not matcher("amqp", "a.#.b", "a.b.x")
    assert not matcher("amqp", "a.#.b", "b")


def test_hash_alone_matches_everything(matcher: Matcher) -> None:
    """Rule: "#" matches zero or more words, so alone it matches every topic, even ""."""
    for topic in ("", "a", "a.b", ".", "$SYS.x", "*", "#"):
        assert matcher("amqp", "#", topic), topic


def test_hash_hash(matcher: Matcher) -> None:
    """Rule: each "#" matches zero or more words, so "#.#" matches what "#" does."""
    for topic in ("", "a", "a.b", "a.b.c"):
        assert matcher("amqp", "#.#", topic), topic
    assert matcher("amqp", "a.#.#.b", "a.b")
    assert matcher("amqp", "a.#.#.b", "a.x.y.z.b")
    assert matcher("amqp", "#.#.a", "a")
    assert not matcher("amqp", "#.#.a", "a.b")


def test_hash_with_star_needs_the_star_word(matcher: Matcher) -> None:
    """Rule: "#" may match zero words but "*" still needs exactly one."""
    assert not matcher("amqp", "#.*", "")
    assert matcher("amqp", "#.*", "a")
    assert matcher("amqp", "*.#", "a")
    assert matcher("amqp", "*.#", "a.b.c")
    assert not matcher("amqp", "*.*.#", "a")
    assert matcher("amqp", "*.*.#", "a.b")
    assert matcher("amqp", "#.*.#", "a.b.c")
    assert matcher("amqp", "a.#.*", "a.b")
    assert not matcher("amqp", "a.#.*", "a")


def test_many_hashes_stay_polynomial(matcher: Matcher) -> None:
    """Rule: "#" anywhere -- a pattern made of many "#" must be matched by search
    that does not explode (no timing assertion: exponential search would not finish)."""
    long_a = ".".join(["x"] * 39 + ["a"])
    long_b = ".".join(["x"] * 40)
    assert matcher("amqp", "#.#.#.#.#.a", long_a)
    assert not matcher("amqp", "#.#.#.#.#.a", long_b)
    assert not matcher("amqp", "#.a.#.a.#.a.#.b", ".".join(["a"] * 40))
    assert matcher("amqp", "#.a.#.a.#.a.#.b", ".".join(["a"] * 40 + ["b"]))


@pytest.mark.parametrize("hashes", [2, 8, 64, 255])
def test_a_lookup_visits_each_search_state_a_bounded_number_of_times(hashes: int) -> None:
    """Rule (hostile input): a lookup's search over "#" anywhere has at most
    (pattern words + 1) x (topic words + 1) states, (S-node, words consumed), and
    costs O(states): each state is taken once, and each "#" hands each word
    index out once, however many ways lead to it.  The engine's step counter
    (states taken off the walk's work stack) stays within 4 per state for the
    worst filters AMQP allows against the longest topic (256 words)."""
    from cstrie._binding import lib
    from cstrie.trie import Trie

    trie = Trie("amqp")
    pattern = ".".join(["#"] * hashes + ["z"])
    trie.subscribe(pattern, "z")
    trie.subscribe(".".join(["#"] * hashes), "all")
    for n in (1, 100, 256):
        topic = ".".join(["a"] * n)
        assert trie.lookup(topic) == ["all"]
        states = (hashes + 2) * (n + 1)
        steps = lib.cst_debug_last_walk_steps()
        assert 0 < steps <= 4 * states, (hashes, n, steps, states)
        assert trie.has_subscribers(topic[:-1] + "z")


def test_empty_key_is_zero_words(matcher: Matcher) -> None:
    """Rule: empty key = zero words."""
    assert matcher("amqp", "", "")
    assert matcher("amqp", "#", "")
    assert not matcher("amqp", "", "a")
    assert not matcher("amqp", "*", "")
    assert not matcher("amqp", "a", "")
    assert not matcher("amqp", "", ".")  # "." is two empty words, not zero


def test_empty_words(matcher: Matcher) -> None:
    """Rule: "a..b" has an empty middle word; an empty word matches only an empty word."""
    assert matcher("amqp", "a..b", "a..b")
    assert not matcher("amqp", "a..b", "a.b")
    assert not matcher("amqp", "a..b", "a.x.b")
    assert matcher("amqp", ".", ".")
    assert not matcher("amqp", ".", "..")
    assert matcher("amqp", "a.", "a.")
    assert not matcher("amqp", "a.", "a")
    assert matcher("amqp", ".a", ".a")


def test_topic_may_contain_wildcard_words_as_literals(matcher: Matcher) -> None:
    """Rule: topics may contain "*"/"#" words as literals: they are ordinary words there,
    matched by wildcards like any word, and "#" in a topic is one word, not many."""
    assert matcher("amqp", "a.*", "a.*")
    assert matcher("amqp", "a.*", "a.#")
    assert matcher("amqp", "a.#", "a.#")
    assert matcher("amqp", "*", "#")
    assert not matcher("amqp", "a.b", "a.*")
    assert not matcher("amqp", "a.b.c", "a.#")  # topic "#" does not stand for words
    assert not matcher("amqp", "a", "*")
    assert not matcher("amqp", "*.*", "#")  # one literal word


def test_wildcards_only_as_whole_words(matcher: Matcher) -> None:
    """Rule: "*"/"#" are wildcards as pattern words; inside a longer word they are
    ordinary characters (AMQP has no "must fill the level" rule)."""
    assert matcher("amqp", "a*", "a*")
    assert not matcher("amqp", "a*", "ab")
    assert matcher("amqp", "a.b#", "a.b#")
    assert not matcher("amqp", "a.b#", "a.b.c")


def test_default_dialect_is_amqp(trie_cls: Any) -> None:
    """Rule: amqp is the default dialect."""
    trie = trie_cls()
    trie.subscribe("a.#", 1)
    assert trie.lookup("a") == [1]
    assert trie.lookup("a.b.c") == [1]


# ----------------------------------------------------------------- word limit
# RabbitMQ's binding and routing keys are AMQP 0-9-1 short strings (at most 255
# bytes), split on "." by rabbit_db_topic_exchange:split_topic_key_binary/1: 255
# separators give the most words, 256 (empty ones).  AMQP's max_levels is 256.
def _calls(trie: Any, pattern: str, topic: str) -> list[Callable[[], object]]:
    return [
        lambda: trie.subscribe(pattern, "new"),
        lambda: trie.unsubscribe(pattern, "s"),
        lambda: trie.subscribers(pattern),
        lambda: trie.lookup(topic),
        lambda: trie.match(topic),
        lambda: trie.has_subscribers(topic),
    ]


def test_longest_short_string_keys_fit(trie_cls: Any) -> None:
    """Rule: every key a 255-byte short string can hold is valid: 256 empty words,
    128 "#" words (RabbitMQ's own longest-key case) and 256 words of anything."""
    assert AMQP.max_levels == 256
    trie = trie_cls("amqp")
    dots = "." * 255  # 255 bytes, 256 empty words
    hashes = ".".join(["#"] * 128)  # 255 bytes
    words = ".".join(["w"] * 255 + ["end"])  # 256 words (no byte limit in cstrie)
    for k, pattern in enumerate((dots, hashes, words, ".".join(["*"] * 256))):
        assert trie.subscribe(pattern, k) is True
    assert sorted(trie.lookup(dots)) == [0, 1, 3]
    assert sorted(trie.lookup(words)) == [1, 2, 3]
    assert trie.lookup(".".join(["x"] * 256)) == [1, 3]


@pytest.mark.parametrize("extra", [1, 2, 1000])
def test_more_than_256_words_invalid(trie_cls: Any, extra: int) -> None:
    """Rule: at most 256 words in a pattern or a topic: one past the limit is a
    ValueError naming the limit, and the trie is unchanged."""
    trie = trie_cls("amqp")
    trie.subscribe("#", "s")
    trie.subscribe("a.#", "t")
    before = sorted(iter(trie))
    n = 256 + extra
    for text in ("." * (n - 1), ".".join(["a"] * n), ".".join(["#"] * n)):
        topic = text.replace("#", "x")
        for call in _calls(trie, text, topic):
            with pytest.raises(ValueError, match=re.escape(f"{n} words; amqp allows at most 256")):
                call()
    assert sorted(iter(trie)) == before


def test_hostile_sizes_fail_fast(trie_cls: Any) -> None:
    """Rule: the word limit is what keeps "#" anywhere cheap: a 40,000-word pattern of
    "#" and a 40,000-word topic (O(m * n) states without the limit) are refused."""
    trie = trie_cls("amqp")
    pattern = ".".join(["#"] * 40000)
    topic = ".".join(["a"] * 40000)
    for call in _calls(trie, pattern, topic):
        with pytest.raises(ValueError, match="at most 256"):
            call()
    assert len(trie) == 0


def test_any_number_of_hashes(matcher: Matcher) -> None:
    """Rule: "#" anywhere, any number of times.  (RabbitMQ 4.x's validate_binding
    refuses binding keys with more than two "#" words, MAX_HASH_WILDCARDS: a
    deliberate difference, docs/api.md.)"""
    assert matcher("amqp", "#.#.#", "a")
    assert matcher("amqp", "#.a.#.b.#.c.#", "x.a.b.y.c")
    assert not matcher("amqp", "#.a.#.b.#.c.#", "x.a.c.y.b")


def test_spaces_and_controls_are_ordinary(matcher: Matcher) -> None:
    """Rule: a short string is bytes: whitespace, control characters and U+0000 are
    ordinary word characters (no forbidden characters in AMQP)."""
    assert AMQP.forbidden == "" and not AMQP.forbid_nul
    assert matcher("amqp", "a b.*", "a b.c d")
    assert matcher("amqp", "\t.\x00", "\t.\x00")
    assert not matcher("amqp", "a b", "ab")


# --------------------------------------------------------------- API semantics
def test_each_subscriber_once(trie_cls: Any) -> None:
    """Each matching subscriber is returned once even if several of its patterns match."""
    trie = trie_cls("amqp")
    for pattern in ("a.b", "a.*", "#", "a.#", "*.b", "#.b", "#.#"):
        assert trie.subscribe(pattern, "s")
    trie.subscribe("a.b", "t")
    found = trie.lookup("a.b")
    assert sorted(found) == ["s", "t"]
    assert trie.has_subscribers("a.b")


def test_match_returns_pattern_subscriber_pairs(trie_cls: Any) -> None:
    """match() returns one (pattern, subscriber) pair per matching subscription."""
    trie = trie_cls("amqp")
    trie.subscribe("a.*", "s")
    trie.subscribe("#", "s")
    trie.subscribe("a.b", "t")
    trie.subscribe("a.#.b", "u")
    trie.subscribe("x.#", "v")
    pairs = trie.match("a.b")
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == {("a.*", "s"), ("#", "s"), ("a.b", "t"), ("a.#.b", "u")}
    assert all(isinstance(p, tuple) and len(p) == 2 for p in pairs)
    assert trie.match("q") == [("#", "s")]


def test_no_match(trie_cls: Any) -> None:
    """A topic matched by no pattern gives nothing."""
    trie = trie_cls("amqp")
    assert trie.lookup("a") == []
    assert trie.match("a") == []
    assert not trie.has_subscribers("a")
    trie.subscribe("b", 1)
    assert trie.lookup("a") == []
    assert trie.match("a") == []
    assert not trie.has_subscribers("a")


def test_subscribers_of_any_hashable_type(trie_cls: Any) -> None:
    """Subscribers are any hashable objects: tuples, ints, strings, None, frozensets."""
    trie = trie_cls("amqp")
    subs = [("conn", 7), 42, "alice", None, frozenset({1, 2}), ("nested", ("t", 1))]
    for s in subs:
        assert trie.subscribe("a.*", s)
    found = trie.lookup("a.b")
    assert len(found) == len(subs)
    for s in subs:
        assert s in found
    assert sorted(trie.match("a.b"), key=repr) == sorted((("a.*", s) for s in subs), key=repr)


class _Key:
    """A subscriber compared by value: equal-but-distinct instances are the same one."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.value == self.value

    def __hash__(self) -> int:
        return hash(("_Key", self.value))


def test_subscribers_compared_by_equality_not_identity(trie_cls: Any) -> None:
    """Subscribers are compared by ==/hash: two equal-but-distinct objects are one
    subscriber (a second subscribe is not new; either one unsubscribes it)."""
    trie = trie_cls("amqp")
    first, second = _Key(1), _Key(1)
    assert first is not second
    assert trie.subscribe("a", first) is True
    assert trie.subscribe("a", second) is False
    assert len(trie) == 1
    assert trie.lookup("a") == [_Key(1)]
    assert trie.subscribe("b", second) is True
    assert trie.lookup("a") == [first]
    assert trie.unsubscribe("a", second) is True
    assert trie.unsubscribe("a", first) is False
    assert trie.lookup("a") == []
    assert trie.lookup("b") == [_Key(1)]
    # distinct values stay distinct
    assert trie.subscribe("a", _Key(2)) is True
    assert trie.subscribe("a", (1, 2)) is True
    assert trie.subscribe("a", (1, 2)) is False  # equal tuples
    assert trie.subscribe("a", 7) is True
    assert trie.subscribe("a", 7.0) is False  # 7 == 7.0 and hash(7) == hash(7.0)
    assert len(trie) == 4


def test_subscribe_and_unsubscribe_results(trie_cls: Any) -> None:
    """subscribe() is True when the pair is new; unsubscribe() True when it was there."""
    trie = trie_cls("amqp")
    assert trie.subscribe("a.#", 1) is True
    assert trie.subscribe("a.#", 1) is False
    assert trie.subscribe("a.#", 2) is True
    assert trie.subscribe("a", 1) is True
    assert len(trie) == 3
    assert sorted(trie.subscribers("a.#")) == [1, 2]
    assert trie.subscribers("a.*") == []
    assert trie.subscribers("zzz") == []
    assert trie.unsubscribe("a.#", 3) is False
    assert trie.unsubscribe("a.*", 1) is False
    assert trie.unsubscribe("nothing.here", 1) is False
    assert trie.unsubscribe("a.#", 1) is True
    assert trie.unsubscribe("a.#", 1) is False
    assert len(trie) == 2
    assert trie.lookup("a.b") == [2]
    assert sorted(trie.lookup("a")) == [1, 2]


def test_unsubscribe_leaves_other_patterns(trie_cls: Any) -> None:
    """Removing a pattern removes only that pattern, also where paths are shared."""
    trie = trie_cls("amqp")
    trie.subscribe("a", "x")
    trie.subscribe("a.b", "y")
    trie.subscribe("a.b.c", "z")
    trie.subscribe("a.#", "w")
    assert trie.unsubscribe("a.b", "y")
    assert sorted(trie.lookup("a.b.c")) == ["w", "z"]
    assert sorted(trie.lookup("a")) == ["w", "x"]
    assert trie.lookup("a.b") == ["w"]
    assert trie.unsubscribe("a.b.c", "z")
    assert trie.unsubscribe("a", "x")
    assert trie.lookup("a.b.c") == ["w"]
    assert trie.unsubscribe("a.#", "w")
    assert len(trie) == 0
    assert list(trie) == []
    assert not trie.has_subscribers("a")


def test_len_iter_clear(trie_cls: Any) -> None:
    """len() counts (pattern, subscriber) pairs, iter() yields them, clear() empties."""
    trie = trie_cls("amqp")
    pairs = {("a.b", 1), ("a.b", 2), ("#", 1), ("", 3), ("a..b", 4), ("*.*", (5, 6))}
    for p, s in pairs:
        trie.subscribe(p, s)
    assert len(trie) == len(pairs)
    listed = list(iter(trie))
    assert len(listed) == len(pairs)
    assert set(listed) == pairs
    trie.clear()
    assert len(trie) == 0
    assert list(trie) == []
    assert trie.lookup("a.b") == []
    assert trie.subscribe("a.b", 1) is True  # usable after clear
    assert list(trie) == [("a.b", 1)]
