"""The regex matcher: one compiled regular expression per binding, scanned in full.

This is how kombu's in-memory topic exchange routes (a regex per binding key, every
binding tried per message), made exact for the dialect.  The topic is matched as
``separator + topic`` (the empty string for a topic of zero words), so every topic
word is "separator, word" and a pattern becomes a plain concatenation: a literal
word is ``S + re.escape(word)``, the one-word wildcard ``S + W`` and the many-word
wildcard ``(?:S W)*`` (``+`` when it needs at least one word), with ``S`` the escaped
separator and ``W`` "any text without the separator".  Hence AMQP ``a.#`` matches
``a``, ``*`` matches an empty word but not the zero-word topic ``""``, and the
``$`` rule is a leading negative look-ahead.  Each pattern is compiled once.

Costs (``P`` distinct patterns, ``t`` topic length): subscribe O(pattern length) to
compile (plus ``re``'s own cache); unsubscribe O(1); lookup O(P) ``fullmatch``
calls, each O(t) for ``+``/single wildcards and more with several ``#`` (the regex
engine backtracks over every way to split the topic).

    >>> m = RegexMatcher("amqp")
    >>> m.subscribe("a.#", "x"), m.subscribe("*", "y")
    (True, True)
    >>> sorted(m.lookup("a")), m.lookup("")
    (['x', 'y'], [])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import ClassicMatcher

__all__ = ["RegexMatcher", "pattern_regex"]


def pattern_regex(
    dialect: Dialect, words: list[str], escape: Callable[[str], str] = re.escape
) -> str:
    """The regular expression for a validated pattern's ``words``.

    It must match ``dialect.separator + topic`` in full (``""`` for a topic of no
    words), with ``.`` matching newlines for a multi-character separator.
    ``escape`` quotes literal text (another regex flavour passes its own: the
    Spark baseline's Java regexes).
    """
    sep = dialect.separator
    s = escape(sep)
    if len(sep) == 1:
        w = f"[^{s}]*"
    else:  # no occurrence of the separator may start inside a word
        w = f"(?:(?!{s}).)*"
    parts = []
    if dialect.dollar_rule and words and words[0] in (dialect.single, dialect.multi):
        parts.append(f"(?!{s}\\$)")  # the first word must not start with "$"
    for word in words:
        if word == dialect.multi:
            parts.append(f"(?:{s}{w}){'+' if dialect.multi_min else '*'}")
        elif word == dialect.single:
            parts.append(f"{s}{w}")
        else:
            parts.append(s + escape(word))
    return "".join(parts)


class RegexMatcher(ClassicMatcher):
    """A compiled regex per pattern, every one tried per lookup (all dialects)."""

    name = "regex"
    description = "a compiled regex per binding (kombu-style), every one tried per lookup"
    thread_safe = False

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        super().__init__(dialect)
        # pattern -> (compiled fullmatch, subscribers)
        self._entries: dict[str, tuple[Callable[[str], object], set[Hashable]]] = {}
        self._sep = self._dialect.separator

    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        entry = self._entries.get(pattern)
        if entry is None:
            regex = re.compile(pattern_regex(self._dialect, words), re.DOTALL)
            self._entries[pattern] = (regex.fullmatch, {subscriber})
            return True
        if subscriber in entry[1]:
            return False
        entry[1].add(subscriber)
        return True

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        entry = self._entries.get(pattern)
        if entry is None or subscriber not in entry[1]:
            return False
        entry[1].discard(subscriber)
        if not entry[1]:
            del self._entries[pattern]
        return True

    def lookup(self, topic: str) -> list[Hashable]:
        self._split_topic(topic)  # validation only: the regexes read the text
        text = self._sep + topic if topic else ""
        hits = [subs for fullmatch, subs in self._entries.values() if fullmatch(text)]
        if not hits:
            return []
        if len(hits) == 1:
            return list(hits[0])
        return list(set().union(*hits))
