"""Per-thread matching front-ends: :class:`Matcher`, kept as a thin alias.

``Trie.lookup`` (and ``has_subscribers``, ``match``, ``lookup_many``) is a C
method that calls the engine directly; no Python object of the trie but the
trie itself is touched on the way.  A :class:`Matcher` is those methods bound
once: ``trie.matcher().lookup`` *is* ``trie.lookup``.  Binding once still pays
on free-threaded CPython, where ``trie.lookup(t)`` in a loop takes a reference
to the shared trie object on every call (an atomic add on a cache line every
thread shares), and a bound method made by the thread itself does not (see
docs/free-threading.md, "Scaling")::

    import threading, cstrie

    trie = cstrie.Trie("mqtt")

    def worker(topics):
        lookup = trie.lookup          # or: trie.matcher().lookup
        for t in topics:
            lookup(t)

Answers are those of the trie (or snapshot) it was made from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cstrie.trie import Snapshot, Trie

__all__ = ["Matcher"]


class Matcher:
    """A trie's or snapshot's read methods, bound once (make one per thread).

    Complexity is that of ``Trie.lookup``.
    """

    __slots__ = ("has_subscribers", "lookup", "lookup_many", "match", "reader")

    lookup: Callable[[str], list[Any]]
    has_subscribers: Callable[[str], bool]
    match: Callable[[str], list[tuple[str, Any]]]
    lookup_many: Callable[[Iterable[str]], list[list[Any]]]

    def __init__(self, reader: Trie | Snapshot) -> None:
        self.reader = reader
        self.lookup = reader.lookup
        self.has_subscribers = reader.has_subscribers
        self.match = reader.match
        self.lookup_many = reader.lookup_many
