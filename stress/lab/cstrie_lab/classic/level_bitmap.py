"""The optimised inverted bitmap of OpenAMQ and WSO2: bitmap tables per topic level.

Each wildcard pattern owns a bit.  Level ``i`` has a ``dict`` word -> bitmap (an
``int``) of patterns with that literal there, an "other" row (patterns accepting
any word there: ``*``, or past the words of a pattern ending in ``#``) and a "null"
row (patterns of at most ``i`` words).  A lookup ANDs ``row(word) | other`` level
by level, stopping at 0, then the "null" row of the topic's length.  Wildcard-free
patterns sit in an exact ``dict`` (WSO2); trailing wildcards are normalised
(``a.#.*`` = ``a.*.#``, NATS ``a.>`` = ``a.*.#``); an AMQP ``#`` before a literal
(``#.a``, ``a.#.b.#``) enters as its nearest superset, its words after the last
``#`` go in tables read from the topic's end, and the rare candidates left are
post-filtered with the compiled pattern (OpenAMQ's "discard false positives").

Costs (``D`` levels = most pattern words, ``B`` bits in use, ``w`` topic words,
``c`` post-filtered candidates, ``s`` subscribers returned): subscribe / unsubscribe
of a pattern's first / last subscriber O(D * B / 64), else O(1); lookup
O(min(w, D) * B / 64) with early exit + O(c * w) + O(s).

    >>> m = LevelBitmapMatcher("amqp")
    >>> m.subscribe("forex.*", "x"), m.subscribe("forex.#", "y"), m.subscribe("trade", "z")
    (True, True, True)
    >>> sorted(m.lookup("forex.eur")), sorted(m.lookup("forex")), m.lookup("trade")
    (['x', 'y'], ['y'], ['z'])
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import (
    ClassicMatcher,
    Program,
    compile_pattern,
    decode_bits,
    program_matches,
)

__all__ = ["LevelBitmapMatcher", "bitmap_shape"]


def bitmap_shape(dialect: Dialect, words: list[str]) -> tuple[list[str | None], bool, bool]:
    """The pattern as ``(fixed words, ends in a many-word wildcard, exact)``.

    Fixed words are literals, or ``None`` for the one-word wildcard.  A trailing run
    of wildcards holding a many-word wildcard becomes one-word wildcards (one per
    ``single``, ``multi_min`` per ``multi``) followed by a single zero-or-more
    wildcard: the same set of topics (``exact`` is true).  When a many-word wildcard
    is followed by a literal word somewhere, the shape is the nearest superset
    expressible as per-level rows -- the words before the first many-word wildcard,
    one-word wildcards up to the pattern's minimum length, then zero-or-more -- and
    ``exact`` is false: its matches must be post-filtered.
    """
    single, multi = dialect.single, dialect.multi
    j = len(words)
    while j > 0 and words[j - 1] in (single, multi):
        j -= 1
    head = words[:j]
    if multi is not None and multi in head:
        first = head.index(multi)
        multis = words.count(multi)
        min_len = len(words) - multis + dialect.multi_min * multis
        prefix: list[str | None] = [None if w == single else w for w in words[:first]]
        return prefix + [None] * (min_len - first), True, False
    fixed: list[str | None] = [None if w == single else w for w in head]
    tail = words[j:]
    multis = tail.count(multi) if multi is not None else 0
    if not multis:
        fixed.extend([None] * len(tail))
        return fixed, False, True
    fixed.extend([None] * (len(tail) - multis + dialect.multi_min * multis))
    return fixed, True, True


class _Levels:
    """Per-level tables over the bit positions of some patterns.

    ``rows[i]`` maps a word to the patterns with that literal at level ``i``;
    ``other[i]`` holds the patterns accepting any word there (a one-word wildcard,
    or past the fixed words of an *open* pattern: one ending in a many-word
    wildcard); ``null[j]`` the patterns of at most ``j`` fixed words.  There are
    ``depth`` = the most fixed words levels; they grow and shrink with the patterns.
    """

    __slots__ = ("all", "lengths", "null", "open", "other", "rows")

    def __init__(self) -> None:
        self.rows: list[dict[str, int]] = []
        self.other: list[int] = []
        self.null: list[int] = [0]  # depth + 1 entries
        self.open = 0
        self.all = 0
        self.lengths: dict[int, int] = {}  # fixed-word count -> how many patterns

    def add(self, bit: int, fixed: list[str | None], is_open: bool) -> None:
        rows, other, null = self.rows, self.other, self.null
        length = len(fixed)
        self.lengths[length] = self.lengths.get(length, 0) + 1
        depth = len(rows)
        if length > depth:
            # New levels: every pattern so far is shorter, so it is "null" there,
            # and the open ones accept any word there ("other").
            for _ in range(depth, length):
                rows.append({})
                other.append(self.open)
                null.append(self.all)
            depth = length
        for i, word in enumerate(fixed):
            if word is None:
                other[i] |= bit
            else:
                row = rows[i]
                row[word] = row.get(word, 0) | bit
        if is_open:
            for i in range(length, depth):
                other[i] |= bit
            self.open |= bit
        for j in range(length, depth + 1):
            null[j] |= bit
        self.all |= bit

    def remove(self, bit: int, fixed: list[str | None], is_open: bool) -> None:
        rows, other, null = self.rows, self.other, self.null
        mask = ~bit
        depth = len(rows)
        length = len(fixed)
        for i, word in enumerate(fixed):
            if word is None:
                other[i] &= mask
            else:
                row = rows[i]
                left = row[word] & mask
                if left:
                    row[word] = left
                else:
                    del row[word]
        if is_open:
            for i in range(length, depth):
                other[i] &= mask
            self.open &= mask
        for j in range(length, depth + 1):
            null[j] &= mask
        self.all &= mask
        count = self.lengths[length] - 1
        if count:
            self.lengths[length] = count
            return
        del self.lengths[length]
        new_depth = max(self.lengths, default=0)
        if new_depth < depth:  # drop the levels no pattern reaches any more
            del rows[new_depth:]
            del other[new_depth:]
            del null[new_depth + 1 :]


class _Slot:
    """One bitmap pattern: its subscribers and its shape; for a superset shape also
    the words after its last ``#`` (read from the topic's end) and the program
    that post-filters it."""

    __slots__ = ("fixed", "multi", "program", "subs", "suffix", "wild_first")

    def __init__(
        self,
        subs: set[Hashable],
        fixed: list[str | None],
        multi: bool,
        wild_first: bool,
        suffix: list[str | None],
        program: Program | None,
    ) -> None:
        self.subs = subs
        self.fixed = fixed
        self.multi = multi
        self.wild_first = wild_first
        self.suffix = suffix
        self.program = program


class LevelBitmapMatcher(ClassicMatcher):
    """Per-level inverted bitmaps with "null"/"other" rows (all dialects).

    Not thread safe.
    """

    name = "level-bitmap"
    description = "optimised inverted bitmap: per-level word/other/null rows ANDed, early exit"
    thread_safe = False

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        super().__init__(dialect)
        self._dollar_rule = self._dialect.dollar_rule
        self._exact: dict[str, set[Hashable]] = {}  # wildcard-free pattern -> subscribers
        self._fwd = _Levels()  # every bitmap pattern, from the topic's start
        self._back = _Levels()  # superset patterns' last words, from the topic's end
        self._wild_first = 0  # patterns the "$" rule applies to
        self._slot_of: dict[str, int] = {}
        self._slots: list[_Slot | None] = []
        self._free: list[int] = []  # a heap of freed bit positions

    @property
    def levels(self) -> int:
        """How many per-level tables there are (the longest bitmap pattern)."""
        return len(self._fwd.rows)

    # ---------------------------------------------------------------- updates
    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        subs = self._exact.get(pattern)
        if subs is None:
            slot = self._slot_of.get(pattern)
            if slot is not None:
                one = self._slots[slot]
                assert one is not None
                subs = one.subs
        if subs is not None:
            if subscriber in subs:
                return False
            subs.add(subscriber)
            return True
        d = self._dialect
        if d.single not in words and d.multi not in words:
            self._exact[pattern] = {subscriber}
            return True
        fixed, multi, exact = bitmap_shape(d, words)
        wild_first = bool(d.dollar_rule and words[0] in (d.single, d.multi))
        suffix: list[str | None] = []
        program = None
        if not exact:
            program = compile_pattern(d, words)
            for word in reversed(words):
                if word == d.multi:
                    break
                suffix.append(None if word == d.single else word)
        one = _Slot({subscriber}, fixed, multi, wild_first, suffix, program)
        if self._free:
            slot = heapq.heappop(self._free)
            self._slots[slot] = one
        else:
            slot = len(self._slots)
            self._slots.append(one)
        self._slot_of[pattern] = slot
        bit = 1 << slot
        self._fwd.add(bit, fixed, multi)
        if program is not None:
            self._back.add(bit, suffix, True)
        if wild_first:
            self._wild_first |= bit
        return True

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        subs = self._exact.get(pattern)
        if subs is not None:
            if subscriber not in subs:
                return False
            subs.discard(subscriber)
            if not subs:
                del self._exact[pattern]
            return True
        slot = self._slot_of.get(pattern)
        if slot is None:
            return False
        one = self._slots[slot]
        assert one is not None
        if subscriber not in one.subs:
            return False
        one.subs.discard(subscriber)
        if not one.subs:
            del self._slot_of[pattern]
            bit = 1 << slot
            self._fwd.remove(bit, one.fixed, one.multi)
            if one.program is not None:
                self._back.remove(bit, one.suffix, True)
            self._wild_first &= ~bit
            self._slots[slot] = None
            heapq.heappush(self._free, slot)
        return True

    # ---------------------------------------------------------------- lookups
    def lookup(self, topic: str) -> list[Hashable]:
        words = self._split_topic(topic)
        hits: list[set[Hashable]] = []
        exact = self._exact.get(topic)
        if exact is not None:
            hits.append(exact)
        fwd = self._fwd
        bits = fwd.all
        if bits:
            for row, other, word in zip(fwd.rows, fwd.other, words, strict=False):
                bits &= row.get(word, 0) | other
                if not bits:
                    break
            else:
                n, depth = len(words), len(fwd.rows)
                if n < depth:
                    bits &= fwd.null[n]
                elif n > depth:
                    bits &= fwd.open
            if bits and self._dollar_rule and words and words[0][:1] == "$":
                bits &= ~self._wild_first
            back = self._back
            if bits & back.all:
                # superset patterns: their last words, read from the topic's end
                # (the forward pass already checked the topic is long enough)
                keep = back.all
                for row, other, word in zip(back.rows, back.other, reversed(words), strict=False):
                    keep &= row.get(word, 0) | other
                    if not keep:
                        break
                bits &= keep | ~back.all
            if bits:
                slots = self._slots
                for slot in decode_bits(bits):
                    one = slots[slot]
                    assert one is not None
                    program = one.program
                    if program is None or program_matches(program, words, False):
                        hits.append(one.subs)
        if not hits:
            return []
        if len(hits) == 1:
            return list(hits[0])
        return list(set().union(*hits))
