"""The trie a user writes by hand: a ``dict`` per level, no lock, no validation.

This is the baseline users compare cstrie with (issue "Lookups at C speed", item
7): each level is a plain ``dict`` of word -> child ``dict``, the wildcards are
stored as ordinary words (``"+"``/``"*"``, ``"#"``), and the subscribers of a
pattern sit in a ``set`` under the key ``None`` of the level where it ends.  It
speaks MQTT (``/``, ``+``, ``#`` last, which also matches the parent level, and the
``$`` rule) and AMQP (``.``, ``*``, ``#`` anywhere: split points memoised per
(node, word), so ``#.#.#.a`` stays polynomial).

What it leaves out, on purpose, because a hand-written trie does:

* **no lock**: one thread at a time, or the caller's own lock;
* **no validation beyond splitting**: a pattern or topic is split on the
  separator and used as it is (``""`` is zero words, as in cstrie's AMQP).  An
  invalid MQTT filter (``a/#/b``, ``a+``) or a topic holding a wildcard is not
  refused; its answers are then whatever the walk finds.  An unhashable
  subscriber raises ``TypeError`` from the ``set``, possibly after empty levels
  were added (they hold nobody and change no answer).

It is not in :data:`cstrie_lab.classic.CLASSIC`, whose matchers validate like cstrie;
the benchmarks register it as the ``dict-trie`` matcher.

    >>> t = DictTrie("mqtt")
    >>> t.subscribe("sport/+/score", "alice"), t.subscribe("sport/#", "bob")
    (True, True)
    >>> sorted(t.lookup("sport/tennis/score"))
    ['alice', 'bob']
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["DictTrie"]

#: dialect -> (separator, one-word wildcard, many-word wildcard, '$' rule)
_RULES = {"mqtt": ("/", "+", "#", True), "amqp": (".", "*", "#", False)}


class DictTrie:
    """A dict-per-level topic trie for ``"mqtt"`` or ``"amqp"``; not thread safe."""

    def __init__(self, dialect: str = "mqtt") -> None:
        if dialect not in _RULES:
            raise ValueError(f"DictTrie speaks {' and '.join(_RULES)}, not {dialect!r}")
        self.dialect = dialect
        self._sep, self._one, self._many, self._dollar = _RULES[dialect]
        self._root: dict[Any, Any] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def subscribe(self, pattern: str, subscriber: Hashable) -> bool:
        """Add the pair; True if it was new."""
        node = self._root
        for word in pattern.split(self._sep) if pattern else ():
            child = node.get(word)
            if child is None:
                child = node[word] = {}
            node = child
        subs = node.get(None)
        if subs is None:
            node[None] = {subscriber}
        elif subscriber in subs:
            return False
        else:
            subs.add(subscriber)
        self._size += 1
        return True

    def unsubscribe(self, pattern: str, subscriber: Hashable) -> bool:
        """Remove the pair; True if it was there.  Levels left empty are pruned."""
        node = self._root
        path: list[tuple[dict[Any, Any], str]] = []
        for word in pattern.split(self._sep) if pattern else ():
            child = node.get(word)
            if child is None:
                return False
            path.append((node, word))
            node = child
        subs = node.get(None)
        if subs is None or subscriber not in subs:
            return False
        subs.remove(subscriber)
        self._size -= 1
        if not subs:
            del node[None]
            while path and not node:
                node, word = path.pop()
                del node[word]
        return True

    def lookup(self, topic: str) -> list[Hashable]:
        """Every subscriber of a pattern matching ``topic``, each once."""
        words = topic.split(self._sep) if topic else []
        n = len(words)
        one, many = self._one, self._many
        if self._dollar and n and words[0][:1] == "$":
            # MQTT: a filter starting with a wildcard never matches a '$' topic
            first = self._root.get(words[0])
            stack: list[tuple[dict[Any, Any], int]] = [] if first is None else [(first, 1)]
        else:
            stack = [(self._root, 0)]
        found: set[Hashable] = set()
        seen: set[tuple[int, int]] = set()
        while stack:
            node, i = stack.pop()
            rest = node.get(many)
            if rest is not None:
                if len(rest) == 1 and None in rest:  # '#' ends the pattern: all the rest
                    found.update(rest[None])
                else:  # '#' with words after it (AMQP): each split point once
                    for j in range(i, n + 1):
                        if (id(rest), j) not in seen:
                            seen.add((id(rest), j))
                            stack.append((rest, j))
            if i == n:
                subs = node.get(None)
                if subs:
                    found.update(subs)
                continue
            child = node.get(words[i])
            if child is not None:
                stack.append((child, i + 1))
            child = node.get(one)
            if child is not None:
                stack.append((child, i + 1))
        return list(found)
