"""The classic broker structure: a topic trie behind one lock.

This is :class:`cstrie_lab.pytrie.PyTrie` under the classic interface (a thin subclass,
no code of its own): one node per pattern word (a ``dict`` of literal words plus a
slot per wildcard), the subscribers of a pattern on its last node, and one
:class:`threading.Lock` taken by every operation, the way RabbitMQ and ZeroMQ
style tries are made safe for many threads.  A lookup walks the literal, one-word
and many-word branches level by level (memoised split points for AMQP ``#``).

Costs (``w`` pattern/topic words, ``s`` subscribers returned): subscribe /
unsubscribe O(w); lookup O(trie nodes whose prefix matches a topic prefix) + O(s),
typically a few nodes per level; all of it serialised on the lock.

    >>> m = LockedTrieMatcher("mqtt")
    >>> m.subscribe("sport/+/score", "alice")
    True
    >>> m.lookup("sport/tennis/score")
    ['alice']
"""

from __future__ import annotations

from collections.abc import Hashable

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import ClassicMatcher
from cstrie_lab.pytrie import PyTrie

__all__ = ["LockedTrieMatcher"]


class LockedTrieMatcher(PyTrie, ClassicMatcher):
    """:class:`~cstrie_lab.pytrie.PyTrie` as a classic matcher (all dialects, thread safe).

    ``subscribe``, ``unsubscribe``, ``lookup`` and ``len`` are PyTrie's own (first in
    the method resolution order); they validate exactly as the base class does.
    """

    name = "locked-trie"
    description = "pure-Python trie behind one threading.Lock (cstrie_lab.pytrie.PyTrie)"
    thread_safe = True

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        PyTrie.__init__(self, dialect)

    # PyTrie does its own updates; these keep the abstract base satisfied.
    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        return PyTrie.subscribe(self, pattern, subscriber)

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        return PyTrie.unsubscribe(self, pattern, subscriber)
