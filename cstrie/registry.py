"""The subscriber registry: Python objects <-> the 64-bit ids the engine stores.

One registry serves a *family*: a trie, its snapshots, its copies and theirs,
which share engine nodes and therefore ids.

An id is a slot in one Python list, ``objects`` (slot 0 is never used), so
mapping a lookup's ids to objects is one C-level ``list.__getitem__`` per id:
two memory reads (the slot, the object) where a dict of a million ints needed
four (index, entry, key object, value).

Rules (tests: ``tests/test_registry.py``, the races in ``tests/test_threads.py``):

1. An object has at most one id at a time.  A freed id's slot holds
   :data:`FREE` and is reused for a later new subscriber.
2. Each writable handle counts, per id, the (pattern, subscriber) pairs it holds.
   All changes to the counts of one subscriber happen under that subscriber's
   stripe lock, shared by the whole family, so racing threads see a consistent
   count.
3. An id is freed once no writable handle holds a pair for it and no snapshot
   taken while it was alive is still open ("pins" record when each snapshot and
   running iteration started).  So a snapshot's ids stay mapped while it is
   open, and only reads of a live trie can meet a freed or reused id.
4. ``freed`` counts the ids freed so far; it is raised (under the slot lock)
   before the slot is cleared, and a slot is reused only after it was freed.
   A read of a live trie reads ``freed``, asks the engine, maps the ids, and
   reads ``freed`` again: if it is unchanged, no id was freed (let alone
   reused) in between, so every id still named the object it named when the
   engine answered.  Otherwise the read is repeated (a fresh, later
   linearisation); after :data:`MAX_ATTEMPTS` it runs once holding the slot
   lock, where no id can be freed (:meth:`Registry.stable`).  Snapshots share
   the read methods and so the check; by rule 3 it never changes their answer
   (at most a free elsewhere in the family makes one ask the engine again).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from array import array
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

from cstrie._binding import ffi

__all__ = ["FREE", "MAX_ATTEMPTS", "Counts", "Registry"]

_STRIPES = 64
_T = TypeVar("_T")

MAX_ATTEMPTS = 64
"""How often a read of a live trie retries while ids are freed under it (each
retry is a fresh, later linearisation) before it takes the slot lock."""


class _Free:
    """The content of a slot whose id is not in use (rule 1)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<free id slot>"


FREE: Any = _Free()


class Counts(dict[int, int]):
    """Per-handle pair counts by id."""

    __slots__ = ("serial",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.serial = -1


class Registry:
    """Ids for the subscribers of one family of handles."""

    __slots__ = (
        "_died",
        "_free_slots",
        "_handle_serial",
        "_handles",
        "_ids",
        "_locks",
        "_meta",
        "_pins",
        "_seq",
        "_slot_lock",
        "freed",
        "freed_cell",
        "objects",
    )

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self.objects: list[Any] = [FREE]  # id -> object; FREE where unused
        self._free_slots = array("q")  # freed ids, reused last-in first-out
        self.freed = 0  # ids freed so far (rule 4)
        # The same count in C memory, for readers that must not share a Python
        # int with other threads (a Matcher on free-threaded CPython reads it
        # through its own cdata pointer).
        self.freed_cell = ffi.new("int64_t[1]")
        self._slot_lock = threading.Lock()  # objects, _free_slots and freed change under it
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
                with self._slot_lock:
                    self._count_free()
                    del self.objects[1:]
                    del self._free_slots[:]
                self._ids.clear()
                return
        if not counts:
            return
        for i in list(counts):
            obj = self.get(i)
            if obj is FREE:
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
        self.objects[1:] = objs

    def id_for(self, obj: Hashable) -> int:
        """The id of obj, made if needed (a freed slot first).  Call under
        ``lock_for(obj)``."""
        i = self._ids.get(obj)
        if i is None:
            with self._slot_lock:
                if self._free_slots:
                    i = self._free_slots.pop()
                    self.objects[i] = obj
                else:
                    i = len(self.objects)
                    self.objects.append(obj)
            self._ids[obj] = i
        return i

    def get(self, i: int) -> Any:
        """The object of id i, or :data:`FREE`."""
        objects = self.objects
        return objects[i] if 0 <= i < len(objects) else FREE

    def maps(self, i: int) -> bool:
        """True when id i names an object now."""
        return self.get(i) is not FREE

    def live_objects(self) -> list[Any]:
        """Every object that has an id now (a superset of any open snapshot's
        subscribers)."""
        return [o for o in self.objects if o is not FREE]

    def _count_free(self) -> None:
        """Raise ``freed`` and its C copy (under the slot lock)."""
        self.freed += 1
        self.freed_cell[0] = self.freed

    def stable(self, read: Callable[[], _T]) -> _T:
        """``read()`` (an engine read of a live handle that maps ids through
        ``objects``) repeated until no id was freed while it ran (rule 4)."""
        for _attempt in range(MAX_ATTEMPTS):
            seen = self.freed
            out = read()
            if self.freed == seen:
                return out
        with self._slot_lock:  # no id can be freed while it is held
            return read()

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
        # Under lock_for(obj), like every free of obj's id: if obj no longer
        # owns i, i was freed already and its slot may name another object.
        if self._ids.get(obj) != i:
            return
        del self._ids[obj]
        with self._slot_lock:
            self._count_free()  # before the slot changes: rule 4
            self.objects[i] = FREE
            self._free_slots.append(i)

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
            obj = self.get(i)
            if obj is FREE:
                continue
            with self.lock_for(obj):
                with self._meta:
                    if i in self._died or any(i in c for c in self._handles.values()):
                        continue
                self._free(i, obj)

    def __len__(self) -> int:
        """The number of ids in use."""
        return len(self._ids)
