"""Regex selectors: ``re.fullmatch`` semantics on the linear-time subset, and a
clear refusal of everything outside it (written from the rule in
``cstrie.selectors.regex``, checked against ``re`` itself).  Seeded by
``CSTRIE_SEED`` (printed)."""

from __future__ import annotations

import re

import oracle
import pytest

from cstrie.selectors.regex import Regex

SEED = oracle.choose_seed()

ATOMS = [
    "a",
    "b",
    ".",
    "[ab]",
    "[^a]",
    r"\d",
    r"\w",
    r"\s",
    r"\W",
    "(a|b)",
    "(ab|a)",
    "x",
    r"\.",
    "[a-c]",
    "[^\\d\n]",
    "(?s:.)",
    "é",
    "[é-ü]",
    "(?:a|)",
    "()",
]
QUANTS = ["", "", "*", "+", "?", "{2}", "{1,3}", "*?", "{0,2}", "{2,}"]
TOPIC_CHARS = "ab.x1_\n é٣"  # ٣: an Arabic-Indic digit, \d in Unicode


def random_pattern(rng: object) -> str:
    import random

    assert isinstance(rng, random.Random)
    pat = "".join(rng.choice(ATOMS) + rng.choice(QUANTS) for _ in range(rng.randint(1, 4)))
    if rng.random() < 0.25:
        pat = "(" + pat + ")" + rng.choice(QUANTS)
    if rng.random() < 0.25:
        pat = pat + "|" + rng.choice(ATOMS)
    if rng.random() < 0.15:
        pat = "^" + pat + "$"
    if rng.random() < 0.1:
        pat = "(?a)" + pat
    if rng.random() < 0.1:
        pat = "(?s)" + pat
    return pat


def test_fullmatch_semantics_fuzz() -> None:
    rng = oracle.seeded_rng(SEED, "selectors", "regex")
    for _ in range(2500):
        pat = random_pattern(rng)
        r = Regex(pat)
        for _ in range(15):
            t = "".join(rng.choice(TOPIC_CHARS) for _ in range(rng.randint(0, 7)))
            assert r.match(t) == (re.fullmatch(pat, t) is not None), (pat, t)


@pytest.mark.parametrize(
    ("pattern", "what"),
    [
        (r"(a)\1", "backreferences"),
        (r"(?P<x>a)(?P=x)", "backreferences"),
        (r"(a)?(?(1)b|c)", "backreferences"),
        (r"(?=a)a", "lookahead"),
        (r"(?!a)b", "lookahead"),
        (r"(?<=a)b", "lookahead"),
        (r"(?i)a", "case-insensitive"),
        (r"a(?i:b)", "case-insensitive"),
        (r"a\bb", "anchor"),
        (r"a^b", "anchor"),
        (r"a*+", "possessive"),
        (r"(?>a*)a", "atomic"),
        (r"(", "invalid regular expression"),
        ("(" * 5000 + ")" * 5000, "nested too deeply"),
    ],
)
def test_refused_constructs_name_themselves(pattern: str, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        Regex(pattern)


def test_counted_repeats_past_the_state_bound_are_refused() -> None:
    with pytest.raises(ValueError, match="too complex"):
        Regex("(a{100}){100}", max_states=4096)
    assert Regex("(a{10}){10}", max_states=4096).match("a" * 100)


@pytest.mark.parametrize("pattern", [r"(a+)+b", r"(a|a)*b", r"a*a*a*a*a*a*b", r"(a|aa)+b"])
def test_catastrophic_patterns_answer_like_re_on_short_topics(pattern: str) -> None:
    """The classic catastrophic-backtracking patterns: the same answers as ``re``
    where ``re`` is still quick, and an answer at 50,000 characters."""
    r = Regex(pattern)
    for n in range(12):
        for t in ("a" * n, "a" * n + "b", "a" * n + "c"):
            assert r.match(t) == (re.fullmatch(pattern, t) is not None)
    assert not r.match("a" * 50_000 + "c")
    assert r.match("a" * 50_000 + "b")
    states, chars = r.automaton.memo_size()
    assert states <= 64 and chars <= 512


def test_anchors_at_the_ends_change_nothing() -> None:
    for pat in ("^ab$", r"\Aab\Z", "^a|b$", "ab$"):
        r = Regex(pat)
        for t in ("ab", "a", "b", "ab\n", ""):
            assert r.match(t) == (re.fullmatch(pat, t) is not None), (pat, t)
