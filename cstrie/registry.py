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
from collections.abc import Hashable, Iterator
from typing import Any

__all__ = ["Counts", "Registry"]

_STRIPES = 64


class Counts(dict[int, int]):
    """Per-handle pair counts by id."""

    __slots__ = ("serial",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.serial = -1


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
        self._handles: dict[int, Counts] = {}
        self._handle_serial = itertools.count()

    # --------------------------------------------------------------- handles
    def new_counts(self, source: Counts | None = None) -> Counts:
        """Counts for a new writable handle (a copy starts with its source's).

        The owner must call :meth:`drop_handle` with ``counts.serial`` when it
        is collected (``Trie`` registers a ``weakref.finalize`` for that).
        """
        counts = Counts(source) if source else Counts()
        with self._meta:
            counts.serial = next(self._handle_serial)
            self._handles[counts.serial] = counts
        return counts

    def discard_handle(self, serial: int) -> None:
        """Forget counts that never belonged to a live handle (a failed copy).
        Frees nothing: a copy's counts only repeat its source's."""
        with self._meta:
            self._handles.pop(serial, None)

    def drop_handle(self, serial: int) -> None:
        """A writable handle is gone: free the ids that only it held (rule 3)."""
        with self._meta:
            counts = self._handles.pop(serial, None)
            if counts and not self._handles and not self._pins:
                # The last handle and no snapshot: every id is dead at once
                # (nothing can make a handle of this family again).
                self.objects.clear()
                self._ids.clear()
                return
        if not counts:
            return
        for i in list(counts):
            obj = self.objects.get(i)
            if obj is None:
                continue
            with self.lock_for(obj):
                self._maybe_dead(i, obj)

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
    def adopt(self, objs: list[Any]) -> None:
        """Give ``objs`` the ids 1, 2, ... in order, in a new, empty registry.

        ``ValueError`` if two of them are equal (they would be one subscriber);
        ``TypeError`` if one is unhashable.  O(n) at C speed (bulk loads).
        """
        if self._ids:
            raise RuntimeError("adopt() needs an empty registry")
        n = len(objs)
        ids = dict(zip(objs, range(1, n + 1), strict=True))
        if len(ids) != n:
            seen: set[Any] = set()
            for obj in objs:
                if obj in seen:
                    raise ValueError(f"subscriber {obj!r} appears twice in the subscriber table")
                seen.add(obj)
        self._ids = ids
        self.objects = dict(zip(range(1, n + 1), objs, strict=True))
        self._next = itertools.count(n + 1)

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
        # Fast path: one writable handle and no open snapshot.  Safe without
        # _meta: a snapshot pins before it takes the engine snapshot (which
        # then cannot hold the pair just removed), and a copy holds every
        # stripe lock, ours included, while it is made.
        if not self._pins:
            handles = list(self._handles.values())
            if len(handles) <= 1:
                if not any(i in c for c in handles):
                    self._free(i, obj)
                return
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
