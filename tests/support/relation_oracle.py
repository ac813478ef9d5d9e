"""An independent, slow reference for the filter relations (``cstrie.relations``).

It shares no code with ``cstrie/relations.py`` or ``cstrie/_relations.py``.  It
decides the relations by listing topics over a small alphabet, in order of length,
and asking the matching oracle of ``tests/support/oracle.py`` (``oracle.matches``,
``oracle.valid_topic``) about each one:

* ``is_subset(a, b)`` is False iff some valid topic t has ``matches(a, t)`` and
  not ``matches(b, t)`` (a *counterexample*);
* ``intersects(a, b)`` is True iff some valid topic t has ``matches(a, t)`` and
  ``matches(b, t)`` (a *witness*).

:func:`search` returns the first (a shortest) such topic or None.

Scope: the length limits ``max_levels`` and ``max_bytes`` are dropped from the
dialect for the topics (the relations quantify over topics of any length; see
``cstrie/relations.py``).  The patterns are still valid in the full dialect.

Why the alphabet is enough
==========================
:func:`alphabet` holds every literal word of ``a`` and ``b``; one *fresh* word f
(valid, not a literal, not starting with ``$``); ``$f`` when the dialect has the
``$`` rule (and ``$f`` is a valid word); the wildcard tokens as literal words when
topics may contain them; and ``""`` when words may be empty.  Take any valid topic
t and replace each word that is not in the alphabet by f, or by ``$f`` if it starts
with ``$``: the result t' is valid (same length, every word valid) and each
pattern matches t' iff it matches t, because a pattern word treats all non-literal
words alike (only its wildcards match them) and the ``$`` rule only asks whether the
first word starts with ``$``.  So a counterexample or witness exists iff one
exists over the alphabet.  (The extra words are redundant: a wildcard token in a
topic is such a non-literal word, and ``""`` is one unless it is a literal; they
are kept to test those rules directly.)

Why the search is complete (the length bound)
=============================================
Listing every topic up to some length is hopeless beyond toy patterns: a shortest
counterexample can need about (multis of ``a``) x (len(b) + 1) words (for example
``x.x.x.x.#.y`` against ``#.x.*.*.*.y.#`` in AMQP needs the ``#`` to take four
words: any shorter run puts an ``x`` four words before the ``y``).
Instead the listing is breadth-first and *prunes equivalent prefixes*.  Two topic
prefixes u and u' are equivalent when

* each pattern is in the same set of states after reading them
  (:func:`_start`/:func:`_step`: a pattern state is (word index, words taken by the
  multi there, capped at ``multi_min``); the ``$`` rule empties the set at the first
  word), and
* they have the same *validity class*: no word / one word that is ``""`` / one
  other word / two or more words.

Then for every continuation v, ``uv`` and ``u'v`` are matched by the same patterns
(the state sets decide that) and are both valid or both invalid (validity depends
only on the class, since every alphabet word is a valid word).  So only the first
prefix of each class needs extending, and the search visits each class once: it
stops when a length adds no new class, after at most (number of classes) levels,
which is the length bound.  A pattern of n words has 2 (n + 1) states, so there
are at most 4^(len(a)+1) x 4^(len(b)+1) x 4 classes and the search terminates.
The topics it does look at are decided by ``oracle.matches`` on the joined text,
and every time the state sets are checked against that answer, so a bug in
:func:`_step` cannot hide silently.  For tiny
patterns :func:`brute_search` lists every topic up to a fixed length without any
pruning, and the tests compare the two.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Sequence

import oracle

from cstrie.dialect import AMQP, MQTT, NATS, Dialect

__all__ = [
    "FUZZ_DIALECTS",
    "all_patterns",
    "alphabet",
    "brute_search",
    "expected_intersects",
    "expected_subset",
    "random_pair",
    "search",
    "unbounded",
]

State = frozenset[tuple[int, int]]

#: dialects the fuzz tests and ``stress/relations_oracle.py`` cover
FUZZ_DIALECTS: dict[str, Dialect] = {
    "amqp": AMQP,
    "mqtt": MQTT,
    "nats": NATS,
    # "**" anywhere, empty words and topic wildcards allowed
    "glob": Dialect(name="glob", separator="/", single="?", multi="**"),
    # a multi of one or more words anywhere
    "plus1": Dialect(name="plus1", separator=":", single="?", multi="*", multi_min=1),
    # the "$" rule with "#" anywhere
    "dollar": Dialect(name="dollar", separator="/", single="+", multi="#", dollar_rule=True),
    # the "$" rule, a multi of one or more words anywhere, MQTT-like strictness
    "dollar1": Dialect(
        name="dollar1",
        separator="/",
        single="+",
        multi="#",
        multi_min=1,
        dollar_rule=True,
        strict_wildcards=True,
        topic_wildcards=False,
        empty_topic=False,
        empty_words=False,
    ),
    # no single-level wildcard; a level limit (ignored for topics)
    "nosingle": Dialect(name="nosingle", separator=".", single=None, multi="%", max_levels=5),
}

WORDS = ["a", "b", "c"]


def unbounded(dialect: Dialect) -> Dialect:
    """``dialect`` without ``max_levels`` and ``max_bytes``: the topics the relations
    quantify over."""
    return dataclasses.replace(dialect, max_levels=None, max_bytes=None)


# ------------------------------------------------------------- alphabet
def _word_ok(d: Dialect, word: str) -> bool:
    """Is ``word`` a valid single topic word of ``d``?"""
    if word == "":
        return d.empty_words
    return d.separator not in word and oracle.valid_topic(d, word)


def _literals(d: Dialect, pattern: str) -> list[str]:
    return [w for w in oracle.words_of(d, pattern) if w not in (d.single, d.multi)]


def alphabet(dialect: Dialect, a: str, b: str) -> list[str]:
    """The words the search builds topics from (see the module docstring)."""
    d = unbounded(dialect)
    literals = _literals(d, a) + _literals(d, b)
    words = list(dict.fromkeys(literals))
    names = [f"f{i}" if i else "f" for i in range(len(words) + 2)]
    extra = [next(w for w in names if w not in words and _word_ok(d, w))]
    if d.dollar_rule:
        dollar = [w for w in ("$" + n for n in names) if w not in words and _word_ok(d, w)]
        extra += dollar[:1]
    if d.topic_wildcards:
        extra += [t for t in (d.single, d.multi) if t is not None]
    if d.empty_words:
        extra.append("")
    for word in extra:
        if word not in words and _word_ok(d, word):
            words.append(word)
    return words


# ------------------------------------------------------ pattern states
def _wild(d: Dialect, word: str) -> bool:
    return word in (d.single, d.multi)


def _close(d: Dialect, p: list[str], states: set[tuple[int, int]]) -> State:
    """Add the states a finished multi reaches without taking a word."""
    todo = list(states)
    out = set(states)
    while todo:
        i, k = todo.pop()
        if i < len(p) and p[i] == d.multi and k >= d.multi_min and (i + 1, 0) not in out:
            out.add((i + 1, 0))
            todo.append((i + 1, 0))
    return frozenset(out)


def _start(d: Dialect, p: list[str]) -> State:
    return _close(d, p, {(0, 0)})


def _step(d: Dialect, p: list[str], states: State, word: str, first: bool) -> State:
    """The states of pattern ``p`` after one more topic word."""
    if first and d.dollar_rule and p and _wild(d, p[0]) and word.startswith("$"):
        return frozenset()
    out: set[tuple[int, int]] = set()
    for i, k in states:
        if i == len(p):
            continue
        if p[i] == d.multi:
            out.add((i, min(k + 1, d.multi_min)))
        elif p[i] == d.single or p[i] == word:
            out.add((i + 1, 0))
    return _close(d, p, out)


def _accepts(p: list[str], states: State) -> bool:
    return (len(p), 0) in states


def _validity(topic: list[str]) -> int:
    """0: no word, 1: the one word is "", 2: one other word, 3: two or more."""
    if not topic:
        return 0
    if len(topic) == 1:
        return 1 if topic[0] == "" else 2
    return 3


def _valid(d: Dialect, topic: list[str]) -> bool:
    return topic != [""] and oracle.valid_topic(d, d.separator.join(topic))


# --------------------------------------------------------------- search
def search(dialect: Dialect, a: str, b: str, want_b: bool) -> list[str] | None:
    """A shortest valid topic (as words) that ``a`` matches and ``b`` matches iff
    ``want_b``, or None.  ``want_b=False`` looks for a counterexample to
    ``is_subset(a, b)``, ``want_b=True`` for a witness of ``intersects(a, b)``."""
    d = unbounded(dialect)
    pa, pb = oracle.words_of(d, a), oracle.words_of(d, b)
    words = alphabet(dialect, a, b)
    start: tuple[list[str], State, State] = ([], _start(d, pa), _start(d, pb))
    seen = {(start[1], start[2], 0)}
    level = [start]
    while level:
        following: list[tuple[list[str], State, State]] = []
        for topic, sa, sb in level:
            if _valid(d, topic):
                text = d.separator.join(topic)
                in_a, in_b = oracle.matches(d, a, text), oracle.matches(d, b, text)
                assert in_a == _accepts(pa, sa) and in_b == _accepts(pb, sb), (
                    f"state sets disagree with oracle.matches on {text!r}"
                )
                if in_a and in_b == want_b:
                    return topic
            for word in words:
                na = _step(d, pa, sa, word, not topic)
                if not na:
                    continue  # no continuation is matched by a
                nb = _step(d, pb, sb, word, not topic)
                if want_b and not nb:
                    continue
                longer = [*topic, word]
                key = (na, nb, _validity(longer))
                if key not in seen:
                    seen.add(key)
                    following.append((longer, na, nb))
        level = following
    return None


def expected_subset(dialect: Dialect, a: str, b: str) -> bool:
    return search(dialect, a, b, want_b=False) is None


def expected_intersects(dialect: Dialect, a: str, b: str) -> bool:
    return search(dialect, a, b, want_b=True) is not None


def brute_search(dialect: Dialect, a: str, b: str, want_b: bool, max_len: int) -> list[str] | None:
    """Like :func:`search`, but tries every topic of up to ``max_len`` words over the
    alphabet, without pruning (for tiny patterns only)."""
    d = unbounded(dialect)
    words = alphabet(dialect, a, b)
    for length in range(max_len + 1):
        for topic in itertools.product(words, repeat=length):
            t = list(topic)
            if not _valid(d, t):
                continue
            text = d.separator.join(t)
            if oracle.matches(d, a, text) and oracle.matches(d, b, text) == want_b:
                return t
    return None


# -------------------------------------------------------- random pairs
def _mutate(rng: random.Random, d: Dialect, words: list[str], widen: bool) -> list[str]:
    """``words`` with a few words replaced, inserted or dropped; with ``widen`` the
    new words are wildcards, so the result tends to be related to ``words``."""
    out = list(words)
    wild = [t for t in (d.single, d.multi) if t is not None]
    for _ in range(rng.randint(1, 2)):
        roll = rng.random()
        if out and roll < 0.5:
            i = rng.randrange(len(out))
            out[i] = rng.choice(wild) if (widen and wild) else rng.choice([*WORDS, *wild])
        elif roll < 0.8 and wild:
            out.insert(rng.randint(0, len(out)), rng.choice(wild) if widen else rng.choice(WORDS))
        elif out:
            del out[rng.randrange(len(out))]
    return out


def _as_pattern(d: Dialect, words: list[str]) -> str | None:
    text = d.separator.join(words)
    if text == "" and words:
        return None
    return text if oracle.valid_pattern(d, text) else None


def _dense(rng: random.Random, d: Dialect, max_len: int) -> str:
    """A pattern of up to ``max_len`` words, mostly wildcards and one repeated
    literal: the shapes where several multis interact."""
    wild = [t for t in (d.single, d.multi) if t is not None]
    tokens = ["a", "a", "b", *wild, *wild[-1:]]
    if d.empty_words:
        tokens.append("")
    if d.dollar_rule:
        tokens.append("$a")
    for _ in range(20):
        words = [rng.choice(tokens) for _ in range(rng.randint(0, max_len))]
        if d.dollar_rule and wild and rng.random() < 0.3:
            # a wildcard, then a "$" word that therefore cannot start the topic
            words[:0] = [rng.choice(wild), "$a"]
        text = _as_pattern(d, words)
        if text is not None:
            return text
    return "a"


def random_pair(rng: random.Random, d: Dialect, max_len: int = 4) -> tuple[str, str]:
    """Two valid patterns of about ``max_len`` words (wildcard-dense ones up to
    max_len + 3), often related: independent, or one a mutation of the other."""
    dense = rng.random() < 0.35

    def pattern() -> str:
        if dense:
            return _dense(rng, d, max_len + 3)
        return oracle.random_pattern(rng, d, WORDS, max_len)

    a = pattern()
    roll = rng.random()
    if roll < 0.3:
        return a, pattern()
    for _ in range(10):
        b = _as_pattern(d, _mutate(rng, d, oracle.words_of(d, a), widen=roll < 0.75))
        if b is not None:
            return (a, b) if rng.random() < 0.7 else (b, a)
    return a, a


def all_patterns(words: Sequence[str], d: Dialect, max_len: int) -> list[str]:
    """Every valid pattern of at most ``max_len`` words from ``words`` (exhaustive
    tests)."""
    out = []
    for length in range(max_len + 1):
        for combo in itertools.product(words, repeat=length):
            text = _as_pattern(d, list(combo))
            if text is not None:
                out.append(text)
    return list(dict.fromkeys(out))
