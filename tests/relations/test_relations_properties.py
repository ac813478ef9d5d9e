"""Algebraic properties of the filter relations (hypothesis), and their agreement
with the matcher: whatever ``is_subset`` / ``intersects`` say must hold for every
topic the real engine (``cstrie.Trie``) is asked about.

A failure shrinks to a minimal pair of patterns; hypothesis prints it.
"""

from __future__ import annotations

import random

import oracle
import relation_oracle as ro
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie.dialect import Dialect
from cstrie.relations import intersects, is_subset
from cstrie.trie import Trie

DIALECTS = list(ro.FUZZ_DIALECTS.values())
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)


@st.composite
def dialect_and_patterns(draw: st.DrawFn, count: int) -> tuple[Dialect, list[str]]:
    """A dialect and ``count`` valid patterns of it, over few literals so that
    they overlap often."""
    d = draw(st.sampled_from(DIALECTS))
    tokens = ["a", "b", "$a", "", *(t for t in (d.single, d.multi) if t is not None)]
    patterns = []
    for _ in range(count):
        words = draw(st.lists(st.sampled_from(tokens), max_size=5))
        text = d.separator.join(words)
        if text == "" and words:
            text = "a"
        if not oracle.valid_pattern(d, text):
            text = "a"  # e.g. a multi that must be last, or an empty word in NATS
        patterns.append(text)
    return d, patterns


@SETTINGS
@given(dialect_and_patterns(1))
def test_reflexive(case: tuple[Dialect, list[str]]) -> None:
    d, (a,) = case
    assert is_subset(d, a, a)


@SETTINGS
@given(dialect_and_patterns(1))
def test_every_pattern_matches_some_topic(case: tuple[Dialect, list[str]]) -> None:
    """No valid pattern is empty, so each intersects itself."""
    d, (a,) = case
    assert intersects(d, a, a)


@SETTINGS
@given(dialect_and_patterns(2))
def test_intersects_is_symmetric(case: tuple[Dialect, list[str]]) -> None:
    d, (a, b) = case
    assert intersects(d, a, b) is intersects(d, b, a)


@SETTINGS
@given(dialect_and_patterns(2))
def test_subset_implies_intersects(case: tuple[Dialect, list[str]]) -> None:
    """a within b and a matching something: they share a topic."""
    d, (a, b) = case
    if is_subset(d, a, b) and intersects(d, a, a):
        assert intersects(d, a, b)


@SETTINGS
@given(dialect_and_patterns(3))
def test_transitive(case: tuple[Dialect, list[str]]) -> None:
    d, (a, b, c) = case
    if is_subset(d, a, b) and is_subset(d, b, c):
        assert is_subset(d, a, c)
    if is_subset(d, a, b) and intersects(d, c, a):
        assert intersects(d, c, b)  # b holds every topic c shares with a


@SETTINGS
@given(dialect_and_patterns(2), st.integers(0, 2**32 - 1))
def test_agrees_with_the_matcher(case: tuple[Dialect, list[str]], seed: int) -> None:
    """Subscribe both patterns to a real trie and look up sample topics (over the
    patterns' literals): a topic matched by a but not b refutes is_subset, one
    matched by both proves intersects."""
    d, (a, b) = case
    trie = Trie(d)
    trie.subscribe(a, "a")
    trie.subscribe(b, "b")
    subset, meet = is_subset(d, a, b), intersects(d, a, b)
    rng = random.Random(seed)
    pool = [w for w in ro.alphabet(d, a, b) if w and w not in (d.single, d.multi)] or ["a"]
    for _ in range(60):
        found = set(trie.lookup(oracle.random_topic(rng, d, pool, 6)))
        if "a" in found:
            assert subset <= ("b" in found), (a, b, found)
            assert meet >= ("b" in found), (a, b, found)
