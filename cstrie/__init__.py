"""cstrie: lock-free concurrent subscription trie for topic matching.

>>> import cstrie
>>> t = cstrie.Trie("mqtt")
>>> t.subscribe("sensors/+/temp", "dashboard")
True
>>> t.lookup("sensors/kitchen/temp")
['dashboard']
"""

from typing import TYPE_CHECKING

from cstrie._version import __version__ as __version__
from cstrie.dialect import AMQP, MQTT, NATS, Dialect, resolve_dialect

if TYPE_CHECKING:  # what __getattr__ below imports on first use, for type checkers
    from cstrie.export import load
    from cstrie.matcher import Matcher
    from cstrie.topics import TopicIndex, TopicSnapshot
    from cstrie.trie import Snapshot, Trie

__all__ = [
    "AMQP",
    "MQTT",
    "NATS",
    "Dialect",
    "Matcher",
    "Snapshot",
    "TopicIndex",
    "TopicSnapshot",
    "Trie",
    "load",
    "resolve_dialect",
]


def __getattr__(name: str) -> object:
    # The classes are imported on first use: ``import cstrie`` loads the
    # engine and the dialects only, not the formats or the topic index.
    if name in ("Trie", "Snapshot", "Matcher"):
        from cstrie import trie

        return getattr(trie, name)
    if name in ("TopicIndex", "TopicSnapshot"):
        from cstrie import topics

        return getattr(topics, name)
    if name == "load":
        from cstrie.export import load

        return load
    raise AttributeError(f"module 'cstrie' has no attribute {name!r}")
