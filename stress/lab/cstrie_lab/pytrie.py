"""A plain pure-Python subscription trie: the honest baseline.

:class:`PyTrie` is what a careful Python programmer would write without a native
engine: one trie node per pattern word (a ``dict`` of literal word -> child plus one
slot for each wildcard), a ``set`` of subscribers on the node where a pattern ends,
and one :class:`threading.Lock` around every operation.  It has the same API subset
as the native :class:`cstrie.Trie`, and checks text in Python with
:mod:`cstrie_lab.words`, which refuses what the library refuses with the same errors.
The demo, the stress harness and the benchmarks use it as the baseline.

Complexities use ``w`` for the number of words in the pattern/topic and ``s`` for the
number of subscribers returned:

* ``subscribe`` / ``unsubscribe`` / ``subscribers``: O(w) (+ O(s) to copy the result).
* ``lookup`` / ``match`` / ``has_subscribers``: a backtracking walk that tries, at every
  level, the literal word, the one-word wildcard and the many-word wildcard.  Without
  a many-word wildcard followed by more words (always the case for MQTT and NATS,
  where it may only be last) every trie node is entered at most once per topic: the
  cost is O(number of trie nodes whose pattern prefix matches a topic prefix) + O(s),
  at most O(min(trie size, 2**w)) and in practice a few nodes per level.  A
  many-word wildcard that is the last word of its pattern (``a.#``) is answered in
  O(1) without walking the rest of the topic.  A many-word wildcard with words after
  it (AMQP ``#.a``) is tried for every split point, memoised on (node, word index):
  every state is entered at most once, so the walk is O(k * w) states and O(k * w**2)
  steps for ``k`` such wildcard nodes on the walked paths -- ``#.#.#.#.#.a`` against
  a 40-word topic stays polynomial instead of exploding combinatorially.
* ``len``: O(1).  ``iter`` and ``clear``: O(trie size) / O(1); ``iter`` copies a
  snapshot under the lock, so iterating never sees a half-done update.

The walk uses an explicit stack, not recursion, so a pattern with tens of thousands
of levels (MQTT allows 65,535 bytes) does not hit Python's recursion limit.

Example::

    >>> t = PyTrie("mqtt")
    >>> t.subscribe("sport/+/score", "alice")
    True
    >>> t.lookup("sport/tennis/score")
    ['alice']
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator

from cstrie.dialect import Dialect, resolve_dialect
from cstrie_lab.words import split_pattern, split_topic

__all__ = ["PyTrie"]


class _Node:
    """One trie level.

    ``children`` maps literal words to child nodes (the shared read-only
    :data:`_NO_CHILDREN` while there are none, to save one dict per leaf);
    ``single`` / ``multi`` are the children for the wildcard words; ``subs`` holds the
    subscribers of the pattern ending here (``None`` when there are none) and
    ``pattern`` that pattern's text.
    """

    __slots__ = ("children", "multi", "pattern", "single", "subs")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = _NO_CHILDREN
        self.single: _Node | None = None
        self.multi: _Node | None = None
        self.subs: set[Hashable] | None = None
        self.pattern: str = ""

    def is_empty(self) -> bool:
        """True when the node holds nothing and can be pruned.  O(1)."""
        return (
            self.subs is None and not self.children and self.single is None and self.multi is None
        )


# Shared by every node without literal children; never mutated (subscribe swaps in a
# fresh dict before adding the first child, unsubscribe swaps this back in).
_NO_CHILDREN: dict[str, _Node] = {}


class PyTrie:
    """A pure-Python subscription trie guarded by one lock.

    Args:
        dialect: a dialect name (``"amqp"``, ``"mqtt"``, ``"nats"``) or a
            :class:`~cstrie.dialect.Dialect`.

    Subscribers are any hashable objects, compared by ``==``/``hash``.  Every method is
    safe to call from many threads; they simply take turns on the lock.
    """

    __slots__ = (
        "_dialect",
        "_dollar",
        "_lock",
        "_multi",
        "_multi_min",
        "_root",
        "_single",
        "_size",
    )

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        d = resolve_dialect(dialect)
        self._dialect = d
        self._single = d.single
        self._multi = d.multi
        self._multi_min = d.multi_min
        self._dollar = d.dollar_rule
        self._lock = threading.Lock()
        self._root = _Node()
        self._size = 0

    # ----------------------------------------------------------------- basics
    @property
    def dialect(self) -> Dialect:
        """The :class:`~cstrie.dialect.Dialect` this trie matches with."""
        return self._dialect

    def __len__(self) -> int:
        """The number of (pattern, subscriber) pairs.  O(1)."""
        return self._size

    def __repr__(self) -> str:
        return f"PyTrie(dialect={self._dialect.name!r}, size={self._size})"

    def clear(self) -> None:
        """Remove every subscription.  O(1) (the old nodes are garbage collected)."""
        with self._lock:
            self._root = _Node()
            self._size = 0

    def __iter__(self) -> Iterator[tuple[str, Hashable]]:
        """Yield every (pattern, subscriber) pair, in no particular order.

        The pairs are copied under the lock first (O(trie size)), so the iteration is a
        consistent snapshot and concurrent updates cannot break it.
        """
        pairs: list[tuple[str, Hashable]] = []
        with self._lock:
            stack = [self._root]
            while stack:
                node = stack.pop()
                if node.subs:
                    pattern = node.pattern
                    pairs.extend((pattern, s) for s in node.subs)
                stack.extend(node.children.values())
                if node.single is not None:
                    stack.append(node.single)
                if node.multi is not None:
                    stack.append(node.multi)
        return iter(pairs)

    # ---------------------------------------------------------------- updates
    def subscribe(self, pattern: str, subscriber: Hashable) -> bool:
        """Subscribe ``subscriber`` to ``pattern``; True if the pair is new.

        Raises ``TypeError`` for a non-str pattern or an unhashable subscriber and
        ``ValueError`` for a pattern invalid in this dialect; the trie is then
        unchanged.  O(w).
        """
        words = split_pattern(self._dialect, pattern)
        hash(subscriber)  # unhashable: fail before touching the trie
        single = self._single
        multi = self._multi
        with self._lock:
            node = self._root
            for word in words:
                nxt: _Node | None
                if word == single:
                    nxt = node.single
                    if nxt is None:
                        nxt = node.single = _Node()
                elif word == multi:
                    nxt = node.multi
                    if nxt is None:
                        nxt = node.multi = _Node()
                else:
                    children = node.children
                    nxt = children.get(word)
                    if nxt is None:
                        if children is _NO_CHILDREN:
                            children = node.children = {}
                        nxt = children[word] = _Node()
                node = nxt
            subs = node.subs
            if subs is None:
                node.subs = {subscriber}
                node.pattern = pattern
            elif subscriber in subs:
                return False
            else:
                subs.add(subscriber)
            self._size += 1
            return True

    def unsubscribe(self, pattern: str, subscriber: Hashable) -> bool:
        """Remove the pair; True if it was there.  Empty nodes are pruned.

        Raises like :meth:`subscribe`; the trie is then unchanged.  O(w).
        """
        words = split_pattern(self._dialect, pattern)
        hash(subscriber)
        single = self._single
        multi = self._multi
        with self._lock:
            node = self._root
            path: list[tuple[_Node, str]] = []
            for word in words:
                if word == single:
                    nxt = node.single
                elif word == multi:
                    nxt = node.multi
                else:
                    nxt = node.children.get(word)
                if nxt is None:
                    return False
                path.append((node, word))
                node = nxt
            subs = node.subs
            if subs is None or subscriber not in subs:
                return False
            subs.discard(subscriber)
            self._size -= 1
            if subs:
                return True
            node.subs = None
            node.pattern = ""
            # Prune the now-empty tail of the path, deepest first.
            while path and node.is_empty():
                parent, word = path.pop()
                if word == single:
                    parent.single = None
                elif word == multi:
                    parent.multi = None
                else:
                    del parent.children[word]
                    if not parent.children:
                        parent.children = _NO_CHILDREN
                node = parent
            return True

    # ---------------------------------------------------------------- queries
    def subscribers(self, pattern: str) -> list[Hashable]:
        """The subscribers of exactly ``pattern`` (no matching).  O(w + s)."""
        words = split_pattern(self._dialect, pattern)
        single = self._single
        multi = self._multi
        with self._lock:
            node: _Node | None = self._root
            for word in words:
                assert node is not None
                if word == single:
                    node = node.single
                elif word == multi:
                    node = node.multi
                else:
                    node = node.children.get(word)
                if node is None:
                    return []
            assert node is not None
            return list(node.subs) if node.subs else []

    def lookup(self, topic: str) -> list[Hashable]:
        """Every subscriber of a pattern matching ``topic``, each once.

        Raises ``TypeError`` for a non-str and ``ValueError`` for a topic invalid in
        this dialect.  See the module docstring for the cost of the walk.
        """
        words = split_topic(self._dialect, topic)
        with self._lock:
            nodes = self._walk(words, False)
            if not nodes:
                return []
            if len(nodes) == 1:
                return list(nodes[0].subs or ())
            found: set[Hashable] = set()
            for node in nodes:
                found.update(node.subs or ())
            return list(found)

    def match(self, topic: str) -> list[tuple[str, Hashable]]:
        """Every (pattern, subscriber) pair whose pattern matches ``topic``, each once.

        Raises like :meth:`lookup`.
        """
        words = split_topic(self._dialect, topic)
        with self._lock:
            nodes = self._walk(words, False)
            # A node can be reached more than once (``#.a.#``); keep each once.
            return [(node.pattern, s) for node in dict.fromkeys(nodes) for s in node.subs or ()]

    def has_subscribers(self, topic: str) -> bool:
        """True if any pattern with a subscriber matches ``topic``.

        Stops at the first match.  Raises like :meth:`lookup`.
        """
        words = split_topic(self._dialect, topic)
        with self._lock:
            return bool(self._walk(words, True))

    def _walk(self, words: list[str], first: bool) -> list[_Node]:
        """The nodes with subscribers whose patterns match ``words`` (maybe repeated).

        A state is (node, i): the pattern prefix leading to ``node`` matched the first
        ``i`` topic words.  From a state the literal and one-word children consume one
        word; the many-word child consumes ``multi_min`` or more.  A many-word child
        with nothing below it matches all the rest at once; otherwise each of its split
        points is pushed once (memoised on ``(node, i)``), which bounds the walk
        polynomially.  With ``first`` the walk stops at the first node found.  Called
        with the lock held.
        """
        n = len(words)
        found: list[_Node] = []
        root = self._root
        stack: list[tuple[_Node, int]]
        if self._dollar and n and words[0][:1] == "$":
            # A pattern whose first word is a wildcard never matches a topic whose
            # first word starts with "$": only the literal first word may match.
            child = root.children.get(words[0])
            if child is None:
                return found
            stack = [(child, 1)]
        else:
            stack = [(root, 0)]
        multi_min = self._multi_min
        seen: set[int] | None = None
        pop = stack.pop
        push = stack.append
        while stack:
            node, i = pop()
            if i == n:
                if node.subs:
                    found.append(node)
                    if first:
                        return found
            else:
                child = node.children.get(words[i])
                if child is not None:
                    push((child, i + 1))
                child = node.single
                if child is not None:
                    push((child, i + 1))
            child = node.multi
            if child is None or i + multi_min > n:
                continue
            if child.children or child.single is not None or child.multi is not None:
                # '#' with more pattern words after it: try every split point once.
                if seen is None:
                    seen = set()
                base = id(child) * (n + 1)  # unique per (node, j) while nodes live
                for j in range(i + multi_min, n + 1):
                    key = base + j
                    if key not in seen:
                        seen.add(key)
                        push((child, j))
            elif child.subs:
                # '#' as the last pattern word swallows the rest of the topic.
                found.append(child)
                if first:
                    return found
        return found
