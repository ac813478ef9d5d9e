"""The subscriber registry: Python objects <-> the 64-bit ids the engine stores.

One registry serves a *family*: a trie, its snapshots, its copies and theirs,
which share engine nodes and therefore ids.

Rules (each has a test in ``tests/test_registry.py``):

1. An object has at most one id at a time; ids are never reused (a counter), so
   an id names one object forever and a stale id can never name another object.
2. Each writable handle counts, per id, the (pattern, subscriber) pairs it holds.
   All changes to the counts of one subscriber happen under that subscriber's
   stripe lock, shared by the whole family, so racing threads see a consistent
   count.
3. An id is freed once no writable handle holds a pair for it and no snapshot
   taken while it was alive is still open ("pins" record when each snapshot and
   running iteration started).  A lookup whose result names an id that was
   freed in the meantime is simply repeated (the id's last pair was removed
   after the engine answered; the repeat linearises after that removal).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections.abc import Hashable, Iterator
from typing import Any

__all__ = ["Counts", "Registry"]

_STRIPES = 64


class Counts(dict[int, int]):
    """Per-handle pair counts by id (a dict subclass so it can be weakly referenced)."""

    __slots__ = ("__weakref__",)


class Registry:
    """Ids for the subscribers of one family of handles."""

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self.objects: dict[int, Any] = {}
        self._next = itertools.count(1)
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._meta = threading.Lock()  # pins, deaths, the handle list
        self._seq = 0
        self._pins: dict[int, int] = {}
        self._died: dict[int, int] = {}
        self._handles: weakref.WeakValueDictionary[int, Counts] = weakref.WeakValueDictionary()
        self._handle_serial = itertools.count()

    # --------------------------------------------------------------- handles
    def new_counts(self, source: Counts | None = None) -> Counts:
        """Counts for a new writable handle (a copy starts with its source's)."""
        counts = Counts(source) if source else Counts()
        with self._meta:
            self._handles[next(self._handle_serial)] = counts
        return counts

    def lock_for(self, obj: Hashable) -> threading.Lock:
        return self._locks[hash(obj) % _STRIPES]

    @contextlib.contextmanager
    def all_locks(self) -> Iterator[None]:
        """Hold every stripe lock (in index order, so it cannot deadlock with
        single-subscriber updates, which take one)."""
        for lock in self._locks:
            lock.acquire()
        try:
            yield
        finally:
            for lock in reversed(self._locks):
                lock.release()

    # ------------------------------------------------------------------ ids
    def id_for(self, obj: Hashable) -> int:
        """The id of obj, made if needed.  Call under ``lock_for(obj)``."""
        i = self._ids.get(obj)
        if i is None:
            i = next(self._next)
            self.objects[i] = obj
            self._ids[obj] = i
        return i

    def existing_id(self, obj: Hashable) -> int | None:
        return self._ids.get(obj)

    def added(self, counts: Counts, i: int) -> None:
        """A pair for id i was added to the handle owning counts (under the lock)."""
        counts[i] = counts.get(i, 0) + 1

    def removed(self, counts: Counts, i: int, obj: Hashable) -> None:
        """A pair for id i was removed (under ``lock_for(obj)``)."""
        left = counts.get(i, 0) - 1
        if left > 0:
            counts[i] = left
            return
        counts.pop(i, None)
        self._maybe_dead(i, obj)

    def forget_unused(self, i: int, obj: Hashable) -> None:
        """An id made for a subscribe that added nothing (under the lock)."""
        self._maybe_dead(i, obj)

    def _maybe_dead(self, i: int, obj: Hashable) -> None:
        with self._meta:
            if any(i in c for c in self._handles.values()):
                return
            self._seq += 1
            if self._pins:
                self._died[i] = self._seq
                return
        self._free(i, obj)

    def _free(self, i: int, obj: Hashable) -> None:
        if self._ids.get(obj) == i:
            del self._ids[obj]
        self.objects.pop(i, None)

    # ----------------------------------------------------------------- pins
    def pin(self) -> int:
        """Record that a snapshot starts now; returns its pin token."""
        with self._meta:
            self._seq += 1
            token = self._seq
            self._pins[token] = token
            return token

    def unpin(self, token: int) -> None:
        """A snapshot is gone: free the ids that only older snapshots kept."""
        with self._meta:
            self._pins.pop(token, None)
            oldest = min(self._pins, default=None)
            ready = [i for i, t in self._died.items() if oldest is None or t < oldest]
            for i in ready:
                del self._died[i]
        for i in ready:
            obj = self.objects.get(i)
            if obj is None:
                continue
            with self.lock_for(obj):
                with self._meta:
                    if i in self._died or any(i in c for c in self._handles.values()):
                        continue
                self._free(i, obj)

    def __len__(self) -> int:
        return len(self.objects)
