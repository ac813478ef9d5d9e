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

Rules (tests: ``tests/trie/test_registry.py``, the races in ``tests/trie/test_threads.py``):

1. An object has at most one id at a time.  A freed id's slot holds
   :data:`FREE` and is reused for a later new subscriber: first by one of
   the same stripe (each stripe keeps up to :data:`LOCAL_FREE` freed ids of
   its own, so a client leaving and another arriving take no lock that
   every thread takes), else by any (the stripes' overflow goes to one
   shared ring).  A new slot is made only when no freed id is ready in the
   new subscriber's stripe or the ring, so ``objects`` never holds more
   than the most ids alive at once plus ``STRIPES * LOCAL_FREE`` (1,792)
   waiting ids, plus those freed within the last two epochs (rule 4).
2. Each writable handle counts, per id, the (pattern, subscriber) pairs it holds
   (:class:`Counts`).  All changes to the counts of one subscriber happen under
   that subscriber's stripe lock, shared by the whole family, so racing threads
   see a consistent count.  The counts are split by stripe as well (one part
   per lock), so no other lock guards them.
3. An id is freed once no writable handle holds a pair for it and no open
   *pin* may hold one.  A snapshot pins before it asks the engine for its
   snapshot (so nothing it may hold is freed meanwhile) and marks the pin
   done once the engine handle exists; births, pins and deaths take numbers
   from one counter.  A pin may hold an id unless it started after the id's
   last pair left (its snapshot came later), or was done before the id was
   born (no pair of it was in the engine yet).  So a snapshot's ids stay
   mapped while it is open, an id born and gone while it is open is freed at
   once, and only reads of a live trie can meet a freed or reused id.
   Iterations pin like snapshots (and are never marked done).
4. A read of a live trie asks the engine and maps the ids of its answer
   inside one *read section* (the engine's epochs, ``cst_read_enter``): a
   freed id's slot holds :data:`FREE` at once and is reused only two epochs
   after the free, when no read section that was open then is still open.
   So a read never maps an id to a subscriber that took its slot after the
   engine answered; an id freed in between maps to ``FREE``, and the read
   runs again (a fresh, later linearisation).  Only that read, the one that
   met the freed id, runs again: frees elsewhere cost readers nothing (no
   shared counter to read).  After :data:`MAX_ATTEMPTS` such races a read
   takes a *read pin*, which holds every id until the read ends, and runs
   until it meets no freed id (only the frees already begun can still
   happen: one per thread).  An id that never reached the engine (a
   subscribe that failed) is reusable at once: no read can have it.
   ``freed`` counts the ids freed so far (a statistic).
5. No user code runs under a registry lock: a subscriber's ``__hash__`` runs
   before the stripe lock is taken, ``__eq__`` with the locks dropped (and
   the lookup made again if the table changed meanwhile), and a reference the
   registry drops while it holds a lock (the slot of a freed id, which may be
   the subscriber's last) is released once the thread holds none.  So a
   subscriber's ``__del__``, ``__hash__`` and ``__eq__`` may call any method
   of the trie.
"""

from __future__ import annotations

from cstrie._hotpath import FREE, LOCAL_FREE, MAX_ATTEMPTS, STRIPES, Counts
from cstrie._hotpath import Registry as _RegistryCore
from cstrie.groups import GroupTable

__all__ = ["FREE", "LOCAL_FREE", "MAX_ATTEMPTS", "STRIPES", "Counts", "Registry"]


class Registry(_RegistryCore):
    """Ids for the subscribers of one family of handles (a trie, its
    snapshots, its copies and theirs).  See the module docstring for the
    rules; every method is safe to call from many threads at once.

    >>> reg = Registry(); reg.adopt(["alice", "bob"])
    >>> reg.objects[2], reg.existing_id("alice"), len(reg)
    ('bob', 1, 2)
    """

    __slots__ = ("groups",)

    def __init__(self) -> None:
        #: The family's share groups by name (cstrie.groups); a group's id is
        #: an id of this registry, like a subscriber's.
        self.groups = GroupTable()
