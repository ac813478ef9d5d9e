"""The full inverted bitmap: one bitmap per topic of a topic space known up front.

Every distinct pattern owns a slot (a bit position; freed positions are reused,
lowest first) holding its set of subscribers.  Each topic of the space has a bitmap
(a Python ``int``) with the bits of the patterns matching it, so subscribing a new
pattern tests it against every topic once and sets its bit where it matches, and
removing a pattern's last subscriber clears the bits it set.  A lookup is one
``dict`` lookup of the topic's bitmap and a decoding of its set bits into
subscribers; the decoded list is cached per topic until that topic's bitmap or a
matching slot's subscribers change (``cache=False`` decodes every time).  Topics
were validated when the space was given, so a lookup of a known topic re-checks
nothing; any other topic raises ``ValueError``.

Costs (``T`` topics in the space, ``B`` bit positions in use, ``m`` topics a
pattern matches, ``s`` subscribers returned): subscribe of a new pattern O(T)
pattern tests + O(m * B / 64) to rebuild the ``int`` bitmaps; a new subscriber of a
known pattern O(m) cache invalidations; unsubscribe O(m * B / 64) when it frees the
slot, else O(m); lookup O(1) + O(s) when cached, else O(set bits * B / 64) to decode.

    >>> m = InvertedBitmapMatcher("amqp", topics=["a.b", "a.c", "b"])
    >>> m.subscribe("a.*", "x"), m.subscribe("#", "y")
    (True, True)
    >>> sorted(m.lookup("a.c")), m.lookup("b")
    (['x', 'y'], ['y'])
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import (
    ClassicMatcher,
    compile_pattern,
    decode_bits,
    program_matches,
    topic_is_dollar,
)

__all__ = ["InvertedBitmapMatcher"]


class InvertedBitmapMatcher(ClassicMatcher):
    """A precomputed bitmap per topic (all dialects).  Not thread safe.

    Args:
        dialect: as for every classic matcher.
        topics: the topic space, validated here (``ValueError``/``TypeError`` for
            an invalid topic).  Required.
        cache: keep each topic's decoded subscriber list until it changes.
    """

    name = "inverted-bitmap"
    description = "a bitmap of matching patterns per topic of a space known up front"
    thread_safe = False

    def __init__(
        self, dialect: str | Dialect = "amqp", *, topics: Iterable[str], cache: bool = True
    ) -> None:
        super().__init__(dialect)
        split = self._split_topic
        d = self._dialect
        # topic -> (words, dollar) for matching new patterns; topic -> bitmap
        self._space: dict[str, tuple[list[str], bool]] = {}
        for topic in topics:
            if topic not in self._space:
                words = split(topic)
                self._space[topic] = (words, topic_is_dollar(d, words))
        self._bitmaps: dict[str, int] = dict.fromkeys(self._space, 0)
        self._slot_of: dict[str, int] = {}  # pattern -> bit position
        self._subs: list[set[Hashable] | None] = []  # bit position -> subscribers
        self._matched: list[list[str]] = []  # bit position -> topics whose bit is set
        self._free: list[int] = []  # a heap of freed bit positions
        self._use_cache = cache
        self._cache: dict[str, list[Hashable]] = {}

    @property
    def topics(self) -> list[str]:
        """The topic space, in the order given (duplicates dropped)."""
        return list(self._space)

    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        slot = self._slot_of.get(pattern)
        if slot is not None:
            subs = self._subs[slot]
            assert subs is not None
            if subscriber in subs:
                return False
            subs.add(subscriber)
            self._invalidate(self._matched[slot])
            return True
        program = compile_pattern(self._dialect, words)
        matched = [
            topic
            for topic, (twords, dollar) in self._space.items()
            if program_matches(program, twords, dollar)
        ]
        if self._free:
            slot = heapq.heappop(self._free)
            self._subs[slot] = {subscriber}
            self._matched[slot] = matched
        else:
            slot = len(self._subs)
            self._subs.append({subscriber})
            self._matched.append(matched)
        self._slot_of[pattern] = slot
        bit = 1 << slot
        bitmaps = self._bitmaps
        for topic in matched:
            bitmaps[topic] |= bit
        self._invalidate(matched)
        return True

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        slot = self._slot_of.get(pattern)
        if slot is None:
            return False
        subs = self._subs[slot]
        assert subs is not None
        if subscriber not in subs:
            return False
        subs.discard(subscriber)
        matched = self._matched[slot]
        if not subs:
            del self._slot_of[pattern]
            mask = ~(1 << slot)
            bitmaps = self._bitmaps
            for topic in matched:
                bitmaps[topic] &= mask
            self._subs[slot] = None
            self._matched[slot] = []
            heapq.heappush(self._free, slot)
        self._invalidate(matched)
        return True

    def _invalidate(self, topics: list[str]) -> None:
        cache = self._cache
        if cache:
            for topic in topics:
                cache.pop(topic, None)

    def lookup(self, topic: str) -> list[Hashable]:
        cached = self._cache.get(topic) if type(topic) is str else None
        if cached is not None:
            return list(cached)
        try:
            bits = self._bitmaps[topic]
        except (KeyError, TypeError):
            self._split_topic(topic)  # the dialect's own error for an invalid topic
            raise ValueError(f"topic {topic!r} is not in the topic space given up front") from None
        found = self._decode(bits)
        if self._use_cache:
            self._cache[topic] = found
            return list(found)
        return found

    def _decode(self, bits: int) -> list[Hashable]:
        if not bits:
            return []
        subs = self._subs
        if bits & (bits - 1) == 0:  # one pattern
            one = subs[bits.bit_length() - 1]
            assert one is not None
            return list(one)
        found: set[Hashable] = set()
        for slot in decode_bits(bits):
            one = subs[slot]
            assert one is not None
            found |= one
        return list(found)
