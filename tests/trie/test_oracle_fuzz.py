"""Random workloads checked against the independent slow matcher in ``oracle.py``.

Every test draws from ``random.Random`` seeded by ``CSTRIE_SEED`` (a fresh seed each
run unless that variable is set; under pytest-xdist all workers share one).  The seed
is printed, and pytest shows it with any failure: replay with

    CSTRIE_SEED=<seed> python -m pytest tests/trie/test_oracle_fuzz.py

The hypothesis tests at the end shrink a failure to a minimal pattern/topic.
"""

from __future__ import annotations

import random
import string
from collections.abc import Hashable
from typing import Any

import oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie.dialect import AMQP, Dialect
from cstrie_lab.pytrie import PyTrie

SEED = oracle.choose_seed()
DIALECTS = oracle.FUZZ_DIALECTS
WORDS = ["a", "b", "c", "ab", "$x"]
SUBSCRIBERS: list[Hashable] = [*range(8), "s0", "s1", ("t", 1), ("t", 2), frozenset({3})]


def _rng(*parts: str) -> random.Random:
    return oracle.seeded_rng(SEED, *parts)


def _sorted(items: Any) -> list[Any]:
    return sorted(items, key=repr)


def _check_queries(trie: Any, d: Dialect, model: set[tuple[str, Hashable]], topic: str) -> None:
    """lookup / match / has_subscribers of ``topic`` agree with the oracle."""
    want_pairs = oracle.expected_match(d, model, topic)
    want_subs = oracle.expected_lookup(d, model, topic)
    found = trie.lookup(topic)
    pairs = trie.match(topic)
    ctx = f"{d.name} topic {topic!r} (CSTRIE_SEED={SEED})"
    assert len(found) == len(set(found)), f"duplicate subscribers from lookup: {ctx}"
    assert set(found) == want_subs, ctx
    assert len(pairs) == len(set(pairs)), f"duplicate pairs from match: {ctx}"
    assert set(pairs) == want_pairs, ctx
    assert trie.has_subscribers(topic) is bool(want_subs), ctx


def _check_contents(trie: Any, model: set[tuple[str, Hashable]]) -> None:
    listed = list(iter(trie))
    assert len(trie) == len(model), f"len (CSTRIE_SEED={SEED})"
    assert len(listed) == len(model), f"iter count (CSTRIE_SEED={SEED})"
    assert set(listed) == model, f"iter pairs (CSTRIE_SEED={SEED})"


@pytest.mark.parametrize("name", list(DIALECTS))
def test_random_workload(trie_cls: Any, name: str) -> None:
    """Subscribe a few hundred random patterns, unsubscribe some, then check many random
    topics, the pair listing and subscribers(pattern) against the oracle."""
    d = DIALECTS[name]
    rng = _rng(name, "workload")
    trie = trie_cls(d)
    model: set[tuple[str, Hashable]] = set()
    for _ in range(300):
        pattern = oracle.random_pattern(rng, d, WORDS, 5)
        sub = rng.choice(SUBSCRIBERS)
        assert trie.subscribe(pattern, sub) is ((pattern, sub) not in model), (pattern, sub)
        model.add((pattern, sub))
    for pair in rng.sample(_sorted(model), len(model) // 3):
        assert trie.unsubscribe(*pair) is True, pair
        model.discard(pair)
    for _ in range(60):  # mostly absent pairs
        pattern = oracle.random_pattern(rng, d, WORDS, 5)
        sub = rng.choice(SUBSCRIBERS)
        assert trie.unsubscribe(pattern, sub) is ((pattern, sub) in model), (pattern, sub)
        model.discard((pattern, sub))
    _check_contents(trie, model)
    patterns = {p for p, _ in model} | {oracle.random_pattern(rng, d, WORDS, 5) for _ in range(30)}
    for pattern in _sorted(patterns):
        want = {s for p, s in model if p == pattern}
        got = trie.subscribers(pattern)
        assert len(got) == len(want) and set(got) == want, (pattern, SEED)
    for _ in range(300):
        _check_queries(trie, d, model, oracle.random_topic(rng, d, WORDS, 6))


@pytest.mark.parametrize("name", list(DIALECTS))
def test_random_interleaved_operations(trie_cls: Any, name: str) -> None:
    """A random sequence of subscribe / unsubscribe / queries with a small trie that
    grows and shrinks (so pruning is exercised), checked step by step; finally
    everything is removed and the trie must be empty."""
    d = DIALECTS[name]
    rng = _rng(name, "interleaved")
    trie = trie_cls(d)
    model: set[tuple[str, Hashable]] = set()
    for _ in range(1500):
        op = rng.random()
        if op < 0.35:
            pattern = oracle.random_pattern(rng, d, WORDS[:3], 4)
            sub = rng.choice(SUBSCRIBERS[:4])
            assert trie.subscribe(pattern, sub) is ((pattern, sub) not in model)
            model.add((pattern, sub))
        elif op < 0.65 and model:
            pattern, sub = rng.choice(_sorted(model))
            assert trie.unsubscribe(pattern, sub) is True
            model.discard((pattern, sub))
        elif op < 0.7:
            pattern = oracle.random_pattern(rng, d, WORDS[:3], 4)
            sub = rng.choice(SUBSCRIBERS[:4])
            assert trie.unsubscribe(pattern, sub) is ((pattern, sub) in model)
            model.discard((pattern, sub))
        else:
            _check_queries(trie, d, model, oracle.random_topic(rng, d, WORDS[:3], 5))
    _check_contents(trie, model)
    for pattern, sub in _sorted(model):
        assert trie.unsubscribe(pattern, sub) is True
    model.clear()
    _check_contents(trie, model)
    for _ in range(20):
        topic = oracle.random_topic(rng, d, WORDS, 5)
        assert trie.lookup(topic) == [] and trie.match(topic) == []
        assert not trie.has_subscribers(topic)
    if isinstance(trie, PyTrie):  # every node pruned
        assert trie._root.is_empty()


@pytest.mark.parametrize("name", ["amqp", "glob", "plus1", "dollar"])
def test_random_many_word_wildcards_long_topics(trie_cls: Any, name: str) -> None:
    """Dialects where the many-word wildcard may appear anywhere: long patterns full of
    wildcards against long topics over a two-word vocabulary (backtracking-heavy)."""
    d = DIALECTS[name]
    rng = _rng(name, "long")
    trie = trie_cls(d)
    model: set[tuple[str, Hashable]] = set()
    for i in range(60):
        pattern = oracle.random_pattern(rng, d, ["a", "b"], 10)
        trie.subscribe(pattern, i % 7)
        model.add((pattern, i % 7))
    for _ in range(60):
        _check_queries(trie, d, model, oracle.random_topic(rng, d, ["a", "b"], 30))


def _junk(rng: random.Random, d: Dialect) -> str:
    """A short random string over the characters that matter to validation."""
    alphabet = [d.separator, "a", "b", "$", "\x00", "\u00e9", "\ud800", " ", "\t", "\x0b"]
    alphabet += [t for t in (d.single, d.multi) if t is not None]
    alphabet += [d.separator] * 2 + ["a"] * 3
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))


@pytest.mark.parametrize(
    "dialect",
    [
        *DIALECTS.values(),
        Dialect(
            name="strict",
            strict_wildcards=True,
            topic_wildcards=False,
            empty_topic=False,
            empty_words=False,
            max_bytes=6,
            forbid_nul=True,
            forbidden="\t\x00",
            max_levels=3,
        ),
    ],
    ids=lambda d: d.name,
)
def test_random_validation(trie_cls: Any, dialect: Dialect) -> None:
    """A random string is rejected (ValueError) exactly when the oracle's reading of the
    rules says it is invalid, as a pattern and as a topic; valid ones match as the
    oracle says."""
    rng = _rng(dialect.name, "validation")
    for _ in range(1500):
        text = _junk(rng, dialect)
        trie = trie_cls(dialect)
        ctx = f"{dialect.name}: {text!r} (CSTRIE_SEED={SEED})"
        pattern_ok = oracle.valid_pattern(dialect, text)
        topic_ok = oracle.valid_topic(dialect, text)
        try:
            trie.subscribe(text, 1)
        except ValueError:
            assert not pattern_ok, "valid pattern rejected: " + ctx
        else:
            assert pattern_ok, "invalid pattern accepted: " + ctx
        try:
            found = trie.lookup(text)
        except ValueError:
            assert not topic_ok, "valid topic rejected: " + ctx
        else:
            assert topic_ok, "invalid topic accepted: " + ctx
            assert (found == [1]) is (pattern_ok and oracle.matches(dialect, text, text)), ctx


# ------------------------------------------------------------------ hypothesis
def _texts(d: Dialect, *, pattern: bool) -> st.SearchStrategy[str]:
    """Valid patterns (or topics) of d: joined word lists, filtered by the oracle."""
    words = ["a", "b", "", "$a", "a$"]
    if pattern:
        words += [t for t in (d.single, d.multi) if t is not None]
    valid = oracle.valid_pattern if pattern else oracle.valid_topic
    lists = st.lists(st.sampled_from(words), max_size=6)
    return lists.map(d.separator.join).filter(lambda s: valid(d, s))


_HYPOTHESIS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize("name", list(DIALECTS))
@_HYPOTHESIS
@given(data=st.data())
def test_hypothesis_lookup_matches_oracle(trie_cls: Any, name: str, data: st.DataObject) -> None:
    """Any small set of patterns and any topic: lookup/match/has_subscribers agree with
    the oracle (hypothesis shrinks a failure to a minimal example)."""
    d = DIALECTS[name]
    patterns = data.draw(st.lists(_texts(d, pattern=True), max_size=6), label="patterns")
    topic = data.draw(_texts(d, pattern=False), label="topic")
    trie = trie_cls(d)
    model: set[tuple[str, Hashable]] = set()
    for i, pattern in enumerate(patterns):
        trie.subscribe(pattern, i % 3)
        model.add((pattern, i % 3))
    _check_queries(trie, d, model, topic)


@_HYPOTHESIS
@given(
    pattern=st.text(alphabet=string.ascii_lowercase[:3] + ".*#", max_size=10),
    topic=st.text(alphabet=string.ascii_lowercase[:3] + ".*#", max_size=10),
)
def test_hypothesis_amqp_any_strings(trie_cls: Any, pattern: str, topic: str) -> None:
    """AMQP accepts every string as a pattern and a topic; matching agrees with the oracle."""
    trie = trie_cls("amqp")
    trie.subscribe(pattern, "s")
    assert (trie.lookup(topic) == ["s"]) is oracle.matches(AMQP, pattern, topic)
