"""cstrie: lock-free concurrent subscription trie for topic matching.

>>> import cstrie
>>> t = cstrie.Trie("mqtt")
>>> t.subscribe("sensors/+/temp", "dashboard")
True
>>> t.lookup("sensors/kitchen/temp")
['dashboard']
"""

from cstrie.dialect import AMQP, MQTT, NATS, Dialect, resolve_dialect

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
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The engine is imported lazily so that cstrie.dialect, and the pure-Python
    # tries built on it, work (and their tests run) even where the extension is
    # not built.
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
