"""paho-mqtt's ``MQTTMatcher`` as the outside peer (MQTT only).

paho's matcher is a trie of topic levels (a ``dict`` of child levels per node, the
wildcards ``+``/``#`` stored as ordinary children) holding one value per filter;
``iter_match(topic)`` is a recursive generator trying, per level, the literal child,
``+`` and ``#``.  Here each filter's value is the ``set`` of its subscribers and a
lookup is the union of the sets ``iter_match`` yields.  Input is validated with the
MQTT dialect first, so errors are cstrie's (paho itself checks nothing).

Differences from the MQTT rules as cstrie implements them: none in the answers --
paho honours the ``$`` rule itself (a filter starting with ``+`` or ``#`` never
matches a topic starting with ``$``) and ``a/#`` matches ``a``.  One limit:
``iter_match`` nests a generator per level it walks, so a topic that walks a filter
about ``sys.getrecursionlimit()`` levels deep (1,000 by default; MQTT allows 65,536
levels) raises ``RecursionError``.  That is paho's behaviour and is kept.

Costs (``w`` levels, ``s`` subscribers returned): subscribe / unsubscribe O(w);
lookup O(trie nodes whose prefix matches a topic prefix) + O(s).

    >>> m = PahoMatcher("mqtt")
    >>> m.subscribe("sport/#", "x")
    True
    >>> m.lookup("sport")
    ['x']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any

from cstrie.dialect import MQTT, Dialect
from cstrie_lab.classic.base import ClassicMatcher

__all__ = ["PahoMatcher"]


class PahoMatcher(ClassicMatcher):
    """``paho.mqtt.matcher.MQTTMatcher`` with a set of subscribers per filter.

    Raises ``ValueError`` for any dialect but MQTT and
    :class:`cstrie_lab.bench.base.MissingDependency` when paho-mqtt is not installed.
    """

    name = "paho"
    description = "paho-mqtt MQTTMatcher (a set of subscribers per filter), MQTT only"
    thread_safe = False

    def __init__(self, dialect: str | Dialect = "mqtt") -> None:
        super().__init__(dialect)
        try:
            from paho.mqtt.matcher import MQTTMatcher
        except ImportError as exc:
            from cstrie_lab.bench.base import MissingDependency

            raise MissingDependency(
                "the paho matcher needs paho-mqtt (pip install paho-mqtt, or cstrie-lab[bench])"
            ) from exc
        factory: Any = MQTTMatcher  # an untyped library
        self._m: Any = factory()

    def _check_dialect(self, dialect: Dialect) -> None:
        if dataclasses.replace(dialect, name=MQTT.name) != MQTT:
            raise ValueError(
                f"the paho matcher speaks MQTT only (paho.mqtt.matcher hard-codes '/', "
                f"'+', '#' and the '$' rule), not the {dialect.name} dialect"
            )

    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        try:
            subs: set[Hashable] = self._m[pattern]
        except KeyError:
            self._m[pattern] = {subscriber}
            return True
        if subscriber in subs:
            return False
        subs.add(subscriber)
        return True

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        try:
            subs: set[Hashable] = self._m[pattern]
        except KeyError:
            return False
        if subscriber not in subs:
            return False
        subs.discard(subscriber)
        if not subs:
            del self._m[pattern]
        return True

    def lookup(self, topic: str) -> list[Hashable]:
        self._split_topic(topic)
        hits = list(self._m.iter_match(topic))
        if not hits:
            return []
        if len(hits) == 1:
            return list(hits[0])
        return list(set().union(*hits))
