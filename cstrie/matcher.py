"""Per-thread matching front-ends: :class:`Matcher`.

On free-threaded CPython every Python object that several threads touch on the
hot path costs an atomic reference-count update on a shared cache line. A
``Trie`` is shared by design, and so are its handle, its registry and a module's
``lib`` functions. A :class:`Matcher` is the same trie seen through objects
that belong to one thread: its own cdata handle and function pointers, its own
result buffer, and its own view of the registry's count of freed ids (read in C
memory, so threads share no Python int). Create one per thread::

    import threading, cstrie

    trie = cstrie.Trie("mqtt")
    local = threading.local()

    def on_message(topic):
        m = getattr(local, "m", None) or setattr(local, "m", trie.matcher()) or local.m
        return m.lookup(topic)

Answers are the same as ``trie.lookup`` (same engine call, same linearisation
point). A matcher made from a :class:`~cstrie.Snapshot` matches that snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cstrie import _binding as nb
from cstrie.registry import MAX_ATTEMPTS

if TYPE_CHECKING:
    from cstrie.trie import _Reader

__all__ = ["Matcher"]


class Matcher:
    """Read-only, single-thread view of a trie or snapshot for fast lookups.

    Not thread-safe by itself: use one per thread.  Complexity is that of
    ``Trie.lookup``.
    """

    __slots__ = (
        "_cap",
        "_dialect",
        "_freed",
        "_h",
        "_has",
        "_ids",
        "_lookup",
        "_objects",
        "_owner",
        "_reader",
    )

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader  # keeps the engine handle alive; not used on the hot path
        self._owner = reader._h
        self._h = nb.ffi.cast("cst_trie *", reader._h)
        self._lookup = nb.ffi.cast(nb.LOOKUP_SIG, nb.ffi.addressof(nb.lib, "cst_lookup"))
        self._has = nb.ffi.cast(nb.HAS_SIG, nb.ffi.addressof(nb.lib, "cst_has_subscribers"))
        self._cap = 256
        self._ids = nb.ffi.new("uint64_t[]", self._cap)
        reg = reader._reg
        self._objects = reg.objects.__getitem__
        self._freed = nb.ffi.cast("int64_t *", reg.freed_cell)  # this matcher's own cdata
        self._dialect = reader._dialect

    def lookup(self, topic: str) -> list[Any]:
        """Same as :meth:`cstrie.Trie.lookup`."""
        if type(topic) is not str:
            return self._reader.lookup(topic)
        try:
            data = topic.encode()
        except UnicodeEncodeError:
            return self._reader.lookup(topic)
        freed = self._freed
        for _attempt in range(MAX_ATTEMPTS):
            seen = freed[0]  # Registry rule 4, as Registry.stable
            n = self._lookup(self._h, data, len(data), self._ids, self._cap)
            if n < 0:
                nb.raise_status(n, self._dialect, "topic", topic)
            if n > self._cap:
                self._cap = 1 << (n - 1).bit_length()
                self._ids = nb.ffi.new("uint64_t[]", self._cap)
                continue
            res = list(map(self._objects, nb.ffi.unpack(self._ids, n)))
            if freed[0] == seen:
                return res
        return self._reader.lookup(topic)  # ids keep being freed: the shared path

    def has_subscribers(self, topic: str) -> bool:
        """Same as :meth:`cstrie.Trie.has_subscribers`."""
        if type(topic) is not str:
            return self._reader.has_subscribers(topic)
        try:
            data = topic.encode()
        except UnicodeEncodeError:
            return self._reader.has_subscribers(topic)
        r = self._has(self._h, data, len(data))
        if r < 0:
            nb.raise_status(r, self._dialect, "topic", topic)
        return bool(r)

    def match(self, topic: str) -> list[tuple[str, Any]]:
        """Same as :meth:`cstrie.Trie.match`."""
        return self._reader.match(topic)

    def lookup_many(self, topics: Iterable[str]) -> list[list[Any]]:
        """Same as :meth:`cstrie.Trie.lookup_many`."""
        return self._reader.lookup_many(topics)
