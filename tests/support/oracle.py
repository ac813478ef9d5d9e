"""An independent, deliberately slow reference matcher written straight from the rules.

It shares no code with ``cstrie_lab.pytrie``, the native engine or even
``cstrie.dialect``'s splitting/validation: it reads only the *field values* of a
:class:`~cstrie.dialect.Dialect` and re-implements every rule from the dialect table
in docs/api.md ("Dialects") and the ``Dialect`` field documentation:

* a topic/pattern is its text split on the separator, except that the empty string
  is zero words (when the dialect allows the empty string at all);
* the ``single`` word matches exactly one word (any word, even an empty one);
* the ``multi`` word matches ``multi_min`` or more words (0 for AMQP/MQTT, 1 for NATS);
* every other pattern word matches only an identical topic word;
* with ``dollar_rule`` a pattern whose first word is a wildcard never matches a
  topic whose first word starts with ``$``;
* no character of ``forbidden`` may appear anywhere in a topic or pattern, and
  neither may have more than ``max_levels`` words.

Matching is a dynamic program over (pattern word index, topic word index), so
``#``-heavy patterns cost O(len(pattern) * len(topic)**2), never exponential.
Lookups scan every (pattern, subscriber) pair.  Obviously correct, not fast.

The module also provides the fuzz tests' random workload generators.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Hashable, Iterable, Sequence

from cstrie.dialect import AMQP, MQTT, NATS, Dialect

__all__ = [
    "FUZZ_DIALECTS",
    "choose_seed",
    "expected_lookup",
    "expected_match",
    "matches",
    "random_pattern",
    "random_topic",
    "seeded_rng",
    "valid_pattern",
    "valid_topic",
    "words_of",
]


# ---------------------------------------------------------------- splitting
def words_of(dialect: Dialect, text: str) -> list[str]:
    """The words of ``text``: zero words for "", else the separator-split pieces."""
    if text == "":
        return []
    return text.split(dialect.separator)


def _wildcards(dialect: Dialect) -> list[str]:
    return [t for t in (dialect.single, dialect.multi) if t is not None]


def _text_ok(dialect: Dialect, text: str) -> bool:
    """Rules shared by topics and patterns: UTF-8, U+0000, forbidden characters,
    byte length, word count, emptiness."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return False  # lone surrogates are not text
    if dialect.forbid_nul and "\x00" in text:
        return False
    if set(text) & set(dialect.forbidden):
        return False
    if dialect.max_bytes is not None and size > dialect.max_bytes:
        return False
    if dialect.max_levels is not None and len(words_of(dialect, text)) > dialect.max_levels:
        return False
    return text != "" or dialect.empty_topic


def valid_pattern(dialect: Dialect, pattern: str) -> bool:
    """True if ``pattern`` is a valid subscription pattern in ``dialect``."""
    if not _text_ok(dialect, pattern):
        return False
    words = words_of(dialect, pattern)
    for index, word in enumerate(words):
        if word == "" and not dialect.empty_words:
            return False
        if word == dialect.multi:
            # multi_last_only: the many-word wildcard may only be the last word.
            if dialect.multi_last_only and index != len(words) - 1:
                return False
        elif word == dialect.single:
            pass
        elif dialect.strict_wildcards and any(t in word for t in _wildcards(dialect)):
            return False  # "a+" / "a#b": a wildcard must fill its whole level
    return True


def valid_topic(dialect: Dialect, topic: str) -> bool:
    """True if ``topic`` is a valid concrete topic in ``dialect``."""
    if not _text_ok(dialect, topic):
        return False
    for word in words_of(dialect, topic):
        if word == "" and not dialect.empty_words:
            return False
        if not dialect.topic_wildcards:
            for token in _wildcards(dialect):
                if word == token:
                    return False
                if dialect.strict_wildcards and token in word:
                    return False
    return True


# ----------------------------------------------------------------- matching
def matches(dialect: Dialect, pattern: str, topic: str) -> bool:
    """True if the (valid) ``pattern`` matches the (valid) ``topic`` in ``dialect``.

    ``ok[i][j]`` says whether the pattern words from ``i`` on match the topic words
    from ``j`` on; it is filled from the ends backwards.
    """
    p = words_of(dialect, pattern)
    t = words_of(dialect, topic)
    wildcards = _wildcards(dialect)
    if dialect.dollar_rule and p and t and p[0] in wildcards and t[0].startswith("$"):
        return False
    m, n = len(p), len(t)
    ok = [[False] * (n + 1) for _ in range(m + 1)]
    ok[m][n] = True  # nothing left of either
    for i in range(m - 1, -1, -1):
        for j in range(n, -1, -1):
            word = p[i]
            if word == dialect.multi:
                # consume k >= multi_min topic words, then match the rest
                ok[i][j] = any(ok[i + 1][j + k] for k in range(dialect.multi_min, n - j + 1))
            elif word == dialect.single:
                ok[i][j] = j < n and ok[i + 1][j + 1]
            else:
                ok[i][j] = j < n and t[j] == word and ok[i + 1][j + 1]
    return ok[0][0]


def expected_match(
    dialect: Dialect, pairs: Iterable[tuple[str, Hashable]], topic: str
) -> set[tuple[str, Hashable]]:
    """Every (pattern, subscriber) pair among ``pairs`` whose pattern matches ``topic``."""
    return {(p, s) for p, s in pairs if matches(dialect, p, topic)}


def expected_lookup(
    dialect: Dialect, pairs: Iterable[tuple[str, Hashable]], topic: str
) -> set[Hashable]:
    """Every subscriber among ``pairs`` with a pattern matching ``topic``."""
    return {s for p, s in pairs if matches(dialect, p, topic)}


# ------------------------------------------------------- random workloads
def _usable_words(dialect: Dialect, words: Sequence[str]) -> list[str]:
    """The non-empty literal words of ``words`` that are legal in ``dialect``."""
    out = []
    for word in words:
        if not word or dialect.separator in word or word in _wildcards(dialect):
            continue
        if dialect.forbid_nul and "\x00" in word:
            continue
        if set(word) & set(dialect.forbidden):
            continue
        if dialect.strict_wildcards and any(t in word for t in _wildcards(dialect)):
            continue
        out.append(word)
    if not out:
        raise ValueError("no usable literal words for this dialect")
    return out


def _literal(rng: random.Random, dialect: Dialect, pool: list[str], first: bool) -> str:
    roll = rng.random()
    if dialect.empty_words and roll < 0.08:
        return ""
    if dialect.dollar_rule and first and roll < 0.25:
        return "$" + rng.choice(pool)
    return rng.choice(pool)


def _length(rng: random.Random, dialect: Dialect, max_len: int) -> int:
    low = 0 if dialect.empty_topic else 1
    if dialect.max_levels is not None:
        max_len = min(max_len, dialect.max_levels)
    return rng.randint(low, max(low, max_len))


def random_pattern(rng: random.Random, dialect: Dialect, words: Sequence[str], max_len: int) -> str:
    """A random valid pattern of at most ``max_len`` words (at least one if needed).

    Words are drawn from ``words`` (illegal ones are skipped), plus empty words where
    the dialect allows them, ``$``-prefixed first words where it has the dollar rule,
    and wildcards at every legal position.
    """
    pool = _usable_words(dialect, words)
    length = _length(rng, dialect, max_len)
    out = []
    for i in range(length):
        last = i == length - 1
        roll = rng.random()
        if dialect.multi is not None and roll < 0.18 and (last or not dialect.multi_last_only):
            out.append(dialect.multi)
        elif dialect.single is not None and roll < 0.38:
            out.append(dialect.single)
        else:
            out.append(_literal(rng, dialect, pool, i == 0))
    text = dialect.separator.join(out)
    if text == "" and not dialect.empty_topic:  # one empty word joins to ""
        text = rng.choice(pool)
    assert valid_pattern(dialect, text), text
    return text


def random_topic(rng: random.Random, dialect: Dialect, words: Sequence[str], max_len: int) -> str:
    """A random valid topic of at most ``max_len`` words (at least one if needed).

    Like :func:`random_pattern` but without wildcards, except that where the dialect
    lets topics hold wildcard words (AMQP) they appear sometimes as literal words.
    """
    pool = _usable_words(dialect, words)
    literal_wildcards = _wildcards(dialect) if dialect.topic_wildcards else []
    length = _length(rng, dialect, max_len)
    out = []
    for i in range(length):
        if literal_wildcards and rng.random() < 0.05:
            out.append(rng.choice(literal_wildcards))
        else:
            out.append(_literal(rng, dialect, pool, i == 0))
    text = dialect.separator.join(out)
    if text == "" and not dialect.empty_topic:
        text = rng.choice(pool)
    assert valid_topic(dialect, text), text
    return text


# ------------------------------------------------------- replayable seeds
def choose_seed() -> int:
    """The fuzz tests' seed: ``CSTRIE_SEED`` when set, else one per test run
    (the same in every xdist worker), else a fresh one.  Printed on failure,
    so a run replays with ``CSTRIE_SEED=<seed>``."""
    env = os.environ.get("CSTRIE_SEED", "").strip()
    if env:
        return int(env)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every xdist worker
    if run:
        return int(hashlib.sha256(run.encode()).hexdigest()[:8], 16)
    return random.SystemRandom().randrange(2**32)


def seeded_rng(seed: int, *parts: str) -> random.Random:
    """A generator for one test, reproducible from ``seed`` and the test's
    ``parts`` (the replay command is printed for failures)."""
    print(f"replay with CSTRIE_SEED={seed}")
    return random.Random("/".join([str(seed), *parts]))


#: the built-in dialects and custom ones that exercise the general fields
FUZZ_DIALECTS: dict[str, Dialect] = {
    "amqp": AMQP,
    "mqtt": MQTT,
    "nats": NATS,
    "glob": Dialect(name="glob", separator="/", single="?", multi="**"),
    "plus1": Dialect(name="plus1", separator=":", single="?", multi="*", multi_min=1),
    "dollar": Dialect(name="dollar", separator="/", single="+", multi="#", dollar_rule=True),
    # a level limit and forbidden characters on a dialect with "**" anywhere
    "limited": Dialect(
        name="limited", separator="/", single="?", multi="**", max_levels=3, forbidden=" "
    ),
}
