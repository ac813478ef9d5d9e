"""The classic topic-matching algorithms, for comparison with cstrie.

Every matcher has :class:`cstrie.Trie`'s update/lookup interface and its exact
answers (as sets), validates input the same way, and registers in :data:`CLASSIC`:

===================  ==========================================================
``naive``            a dict of compiled patterns; every lookup scans them all
``inverted-bitmap``  a precomputed bitmap per topic (the topic space is given
                     up front: ``topics=``)
``level-bitmap``     the optimised inverted bitmap: per-level word/"other"/"null"
                     rows ANDed with early exit, plus an exact-topic ``dict``
``locked-trie``      a pure-Python trie behind one lock (:mod:`cstrie_lab.pytrie`)
``regex``            a compiled regex per binding, kombu-style
``lazy-dfa``         a DFA over topic words built lazily, dropped on every update
                     (RabbitMQ's experiment)
``paho``             paho-mqtt's ``MQTTMatcher`` (MQTT only; needs paho-mqtt)
===================  ==========================================================

Only ``locked-trie`` may be called from many threads at once (``thread_safe``).

:class:`DictTrie` (:mod:`cstrie_lab.classic.dict_trie`) is here too but not in
:data:`CLASSIC`: it is the trie a user writes by hand (a ``dict`` per level, MQTT
and AMQP, no lock, no validation beyond splitting), the baseline of ``cstrie bench
--scenario vs-dict`` and of the demo, registered as the bench matcher ``dict-trie``.

    >>> m = make_classic("level-bitmap", dialect="mqtt")
    >>> m.subscribe("sensors/+/temp", "a")
    True
    >>> m.lookup("sensors/k1/temp")
    ['a']
"""

from __future__ import annotations

from typing import Any

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import ClassicMatcher
from cstrie_lab.classic.dict_trie import DictTrie
from cstrie_lab.classic.inverted_bitmap import InvertedBitmapMatcher
from cstrie_lab.classic.lazy_dfa import LazyDFA
from cstrie_lab.classic.level_bitmap import LevelBitmapMatcher
from cstrie_lab.classic.locked_trie import LockedTrieMatcher
from cstrie_lab.classic.naive import NaiveMatcher
from cstrie_lab.classic.paho_matcher import PahoMatcher
from cstrie_lab.classic.regex_bindings import RegexMatcher

__all__ = [
    "CLASSIC",
    "ClassicMatcher",
    "DictTrie",
    "InvertedBitmapMatcher",
    "LazyDFA",
    "LevelBitmapMatcher",
    "LockedTrieMatcher",
    "NaiveMatcher",
    "PahoMatcher",
    "RegexMatcher",
    "make_classic",
]

#: matcher name -> class, in the order tables list them
CLASSIC: dict[str, type[ClassicMatcher]] = {
    cls.name: cls
    for cls in (
        NaiveMatcher,
        InvertedBitmapMatcher,
        LevelBitmapMatcher,
        LockedTrieMatcher,
        RegexMatcher,
        LazyDFA,
        PahoMatcher,
    )
}


def make_classic(name: str, dialect: str | Dialect = "amqp", **options: Any) -> ClassicMatcher:
    """A new ``CLASSIC[name]`` matcher; ``options`` go to its constructor.

    Raises ``ValueError`` naming the known matchers when ``name`` is not one of them.
    """
    try:
        cls = CLASSIC[name]
    except KeyError:
        raise ValueError(
            f"unknown classic matcher {name!r}; expected one of {list(CLASSIC)}"
        ) from None
    factory: Any = cls  # the constructors take different keyword options
    matcher: ClassicMatcher = factory(dialect, **options)
    return matcher
