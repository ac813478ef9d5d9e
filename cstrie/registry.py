"""The subscriber registry: Python objects <-> the 64-bit ids the engine stores.

The registry is implemented in C (``native/hotpath/registry.c``), next to the
fast path that maps a lookup's ids to objects and subscribes and unsubscribes
without returning to Python; this module states its rules and adds the Python
conveniences.

One registry serves a *family*: a trie, its snapshots, its copies and theirs,
which share engine nodes and therefore ids.

An id is a slot in one Python list, ``objects`` (slot 0 is never used), so
mapping a lookup's ids to objects is one C-level ``list.__getitem__`` per id:
two memory reads (the slot, the object) where a dict of a million ints needed
four (index, entry, key object, value).

Rules (tests: ``tests/test_registry.py``, the races in ``tests/test_threads.py``):

1. An object has at most one id at a time.  A freed id's slot holds
   :data:`FREE` and is reused for a later new subscriber.
2. Each writable handle counts, per id, the (pattern, subscriber) pairs it holds
   (:class:`Counts`).  All changes to the counts of one subscriber happen under
   that subscriber's stripe lock, shared by the whole family, so racing threads
   see a consistent count.  The counts are split by stripe as well (one part
   per lock), so no other lock guards them.
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
from collections.abc import Iterator

from cstrie._hotpath import FREE, MAX_ATTEMPTS, STRIPES, Counts
from cstrie._hotpath import Registry as _RegistryCore
from cstrie.groups import GroupTable

__all__ = ["FREE", "MAX_ATTEMPTS", "STRIPES", "Counts", "Registry"]


class Registry(_RegistryCore):
    """Ids for the subscribers of one family of handles (a trie, its
    snapshots, its copies and theirs).  See the module docstring for the
    rules; every method is safe to call from many threads at once.

    >>> reg = Registry(); reg.lock_all(); i = reg.id_for("alice"); reg.unlock_all()
    >>> reg.objects[i], reg.existing_id("alice"), len(reg)
    ('alice', 1, 1)
    """

    __slots__ = ("groups",)

    def __init__(self) -> None:
        #: The family's share groups by name (cstrie.groups); a group's id is
        #: an id of this registry, like a subscriber's.
        self.groups = GroupTable()

    @contextlib.contextmanager
    def all_locks(self) -> Iterator[None]:
        """Hold every subscriber stripe lock (taken in index order, so it cannot
        deadlock with single-subscriber updates, which take one)."""
        self.lock_all()
        try:
            yield
        finally:
            self.unlock_all()
