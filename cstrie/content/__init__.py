"""Content-based routing: subscriptions on message fields, indexed.

A :class:`ContentIndex` binds subscribers to *criteria* on a message's
fields (presence, equality, membership, prefix, suffix, numeric ranges,
negation, all/any), optionally with a topic filter, and answers "which
subscribers want this message?" through an index on the lock-free engine,
not by testing every binding::

    >>> from cstrie.content import ContentIndex, AllOf, AnyOf, Eq, Has, Not, Prefix
    >>> idx = ContentIndex()
    >>> idx.bind(AllOf(Eq("currency", "USD"), Has("urgent")), "desk-1")
    True
    >>> idx.bind(AnyOf(Prefix("symbol", "IBM"), Not(Has("symbol"))), "desk-2", topic="stock.#")
    True
    >>> sorted(idx.match({"currency": "USD", "urgent": True}, topic="stock.nyse"))
    ['desk-1', 'desk-2']

Modules, one concept each:

- :mod:`cstrie.content.criteria`: the criteria and their exact rules
- :mod:`cstrie.content.keys`: how criteria and fields become engine keys
- :mod:`cstrie.content.index`: :class:`ContentIndex`, :class:`ContentSnapshot`
- :mod:`cstrie.content.export`: the JSON Lines file (:func:`load`)
- :mod:`cstrie.content.rabbitmq`: AMQP 0-9-1 headers exchange semantics
- :mod:`cstrie.content.cloudevents`: CloudEvents Subscriptions API filters

See docs/api.md ("Content index") and docs/design.md ("Content index").
"""

from cstrie.content.criteria import (
    AllOf,
    AnyOf,
    Criterion,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
    Suffix,
    from_json,
)
from cstrie.content.index import Binding, ContentIndex, ContentSnapshot

load = ContentIndex.load

__all__ = [
    "AllOf",
    "AnyOf",
    "Binding",
    "ContentIndex",
    "ContentSnapshot",
    "Criterion",
    "Eq",
    "Has",
    "Not",
    "OneOf",
    "Prefix",
    "Range",
    "Suffix",
    "from_json",
    "load",
]
