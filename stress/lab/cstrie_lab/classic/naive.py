"""The naive matcher: a dict of patterns, every lookup scans them all.

Subscribing stores the pattern in a ``dict`` (pattern -> set of subscribers) together
with its compiled :data:`~cstrie_lab.classic.base.Program`, made once: the fewest words it
can match, its literal words at fixed positions read through one
``operator.itemgetter`` call, and a greedy check for the words between many-word
wildcards.  A lookup splits the topic once and tests every pattern, cheapest test
first: a pattern without a many-word wildcard only matches topics of its own word
count, one with them only topics of at least its minimum length.

Costs (``P`` distinct patterns, ``w`` topic words, ``s`` subscribers returned):
subscribe / unsubscribe O(pattern words); lookup O(P) length checks plus O(w) per
surviving pattern (O(w) per segment between many-word wildcards) plus O(s).

    >>> m = NaiveMatcher("amqp")
    >>> m.subscribe("a.*.c", "x"), m.subscribe("a.#", "y")
    (True, True)
    >>> sorted(m.lookup("a.b.c"))
    ['x', 'y']
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import ClassicMatcher, Getter, Middle, compile_pattern

__all__ = ["NaiveMatcher"]

# a Program followed by the pattern's subscribers
_Entry = tuple[int, bool, bool, Getter | None, Any, Middle | None, set[Hashable]]


class NaiveMatcher(ClassicMatcher):
    """Scan every pattern per lookup (all dialects).  Not thread safe."""

    name = "naive"
    description = "dict of compiled patterns; every lookup scans them all"
    thread_safe = False

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        super().__init__(dialect)
        # pattern -> (*program, subscribers): one flat tuple, unpacked once per scan step
        self._entries: dict[str, _Entry] = {}
        self._dollar_rule = self._dialect.dollar_rule

    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        entry = self._entries.get(pattern)
        if entry is None:
            program = compile_pattern(self._dialect, words)
            self._entries[pattern] = (*program, {subscriber})
            return True
        subs = entry[6]
        if subscriber in subs:
            return False
        subs.add(subscriber)
        return True

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        entry = self._entries.get(pattern)
        if entry is None or subscriber not in entry[6]:
            return False
        subs = entry[6]
        subs.discard(subscriber)
        if not subs:
            del self._entries[pattern]
        return True

    def lookup(self, topic: str) -> list[Hashable]:
        words = self._split_topic(topic)
        n = len(words)
        dollar = self._dollar_rule and n > 0 and words[0][:1] == "$"
        hits: list[set[Hashable]] = []
        for min_len, fixed, wild_first, getter, expected, middle, subs in self._entries.values():
            if fixed:
                if n != min_len:
                    continue
            elif n < min_len:
                continue
            if wild_first and dollar:
                continue
            if getter is not None and getter(words) != expected:
                continue
            if middle is not None and not middle(words, n):
                continue
            hits.append(subs)
        if not hits:
            return []
        if len(hits) == 1:
            return list(hits[0])
        return list(set().union(*hits))
