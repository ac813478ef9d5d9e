"""The selector index's cache of per-topic results, within a byte budget.

One entry per topic (or per tuple of the topics of one update): the bitmap of
the matching subscriber ids (a Python int), the subscribers themselves in id
order (a tuple, so a hit is one copy), the index version it was computed at
(its watermark) and a reference bit. Each entry is charged its real size:
``sys.getsizeof`` of the topic, the bitmap, the tuple and the entry object,
plus :data:`SLOT_BYTES` for its slots in the dict and in the eviction ring (the
subscribers are not charged: the index holds them anyway). A put that does not
fit evicts by CLOCK (second chance: an entry read since the hand last passed it
is kept once more) until it fits; an entry larger than the whole budget is not
kept. So ``bytes <= budget`` always.

Reads (:meth:`ResultCache.get`) take no lock: one dict read.  Puts, evictions
and clears take the cache's lock, and hand back what they dropped so that the
caller releases it after the lock (a subscriber's ``__del__`` never runs under
it).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import Any

__all__ = ["SLOT_BYTES", "Entry", "ResultCache"]

#: a topic, or the topics of one update (published to several)
Key = str | tuple[str, ...]

#: charged per entry for its dict slot (hash, key, value, and the index array
#: at the dict's load factor) and its slot in the eviction ring
SLOT_BYTES = 64


class Entry:
    """One cached topic (immutable but for ``ref``)."""

    __slots__ = ("bits", "cost", "ref", "result", "version")

    def __init__(
        self, version: Any, bits: int, result: tuple[Any, ...], topic: str | tuple[str, ...]
    ) -> None:
        self.version = version
        self.bits = bits
        self.result = result
        self.ref = False
        key = sys.getsizeof(topic)
        if type(topic) is tuple:  # the topics of one update, each charged
            key += sum(sys.getsizeof(t) for t in topic)
        self.cost = (
            key
            + sys.getsizeof(bits)
            + sys.getsizeof(result)
            + sys.getsizeof(self)
            + SLOT_BYTES
        )


class ResultCache:
    """Topic -> :class:`Entry`, within ``budget`` bytes (0: nothing is kept)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._map: dict[Key, Entry] = {}
        self._ring: deque[Key] = deque()
        self._lock = threading.Lock()
        self.bytes = 0
        self.fills = 0
        self.refreshes = 0
        self.skipped = 0
        self.evicted = 0
        self.clears = 0

    def get(self, topic: Key) -> Entry | None:
        return self._map.get(topic)

    def put(self, topic: Key, entry: Entry) -> list[Any]:
        """Keep ``entry`` for ``topic``, evicting as needed; returns what was
        dropped (release it after the caller's locks)."""
        dropped: list[Any] = []
        if entry.cost > self.budget:
            with self._lock:
                self.skipped += 1
                old = self._map.pop(topic, None)
                if old is not None:
                    self.bytes -= old.cost
                    dropped.append(old)
            return dropped
        with self._lock:
            old = self._map.get(topic)
            if old is not None:
                if old.version.seq > entry.version.seq:
                    return dropped  # a later answer is already there
                self.bytes -= old.cost
                dropped.append(old)
                self.refreshes += 1
            else:
                self.fills += 1
            while self.bytes + entry.cost > self.budget and self._ring:
                key = self._ring.popleft()
                victim = self._map.get(key)
                if victim is None or key == topic:
                    if key == topic and victim is not None:
                        self._ring.append(key)
                    continue
                if victim.ref:
                    victim.ref = False
                    self._ring.append(key)
                    continue
                del self._map[key]
                self.bytes -= victim.cost
                self.evicted += 1
                dropped.append(victim)
            self._map[topic] = entry
            self.bytes += entry.cost
            if old is None:
                self._ring.append(topic)
        return dropped

    def clear(self) -> list[Any]:
        """Drop every entry; returns them (release them after the caller's locks)."""
        with self._lock:
            dropped: list[Any] = [self._map, self._ring]
            self._map = {}
            self._ring = deque()
            self.bytes = 0
            self.clears += 1
        return dropped

    def __len__(self) -> int:
        return len(self._map)

    def entries(self) -> list[tuple[Key, Entry]]:
        """A copy of the entries (for checks and tests)."""
        with self._lock:
            return list(self._map.items())
