"""A user's program: type-checked with ``mypy --strict`` against the installed
cstrie by tests/package/test_typing.py (never run).  Every call here is correct, so
mypy must report nothing."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from typing_extensions import assert_type

import cstrie
from cstrie import Dialect, Snapshot, Trie
from cstrie.groups import Shared


def build() -> Trie:
    t = cstrie.Trie("mqtt")
    assert_type(t.subscribe("sensors/+/temp", "dashboard"), bool)
    assert_type(t.subscribe("sensors/#", 7), bool)
    assert_type(t.subscribe("jobs/#", "w1", group="workers"), bool)
    assert_type(t.subscribe("$share/workers/jobs/#", ("w", 2)), bool)
    assert_type(t.subscribe(Shared("jobs/#", "workers"), "w3"), bool)
    assert_type(t.unsubscribe("sensors/#", 7), bool)
    assert_type(t.unsubscribe("jobs/#", "w1", group="workers"), bool)
    assert_type(t.subscribe_many([("a/b", "x"), ("a/+", "y")]), int)
    return t


def read(t: Trie) -> None:
    assert_type(t.lookup("sensors/kitchen/temp"), list[Any])
    assert_type(t.lookup(topic="sensors/kitchen/temp"), list[Any])
    assert_type(t.has_subscribers("sensors/kitchen/temp"), bool)
    assert_type(t.match("sensors/kitchen/temp"), list[tuple[str, Any]])
    assert_type(t.lookup_many(["a/b", "c/d"]), list[list[Any]])
    assert_type(t.lookup_many(iter(("a/b",))), list[list[Any]])
    assert_type(t.route("jobs/1"), list[Any])
    assert_type(t.route("jobs/1", "client-7"), list[Any])
    assert_type(t.route("jobs/1", key=b"client-7"), list[Any])
    assert_type(t.route("jobs/1", 42), list[Any])
    assert_type(t.route_by_group("jobs/1"), tuple[list[Any], dict[str, Any]])
    assert_type(t.subscribers("sensors/+/temp"), list[Any])
    assert_type(t.dialect, Dialect)
    assert_type(len(t), int)


def snapshots(t: Trie) -> Snapshot:
    snap = t.snapshot()
    assert_type(snap, Snapshot)
    assert_type(snap.lookup("sensors/kitchen/temp"), list[Any])
    assert_type(snap.match("a/b"), list[tuple[str, Any]])
    assert_type(snap.snapshot(), Snapshot)
    assert_type(snap.copy(), Trie)
    assert_type(t.copy(), Trie)
    pairs: dict[str | Shared, list[Any]] = snap.subscriptions()
    for pattern, subscriber in snap:
        assert_type(pattern, str | Shared)
        assert_type(subscriber, Any)
    del pairs
    return snap


def from_pairs(pairs: list[tuple[str, Hashable]]) -> Trie:
    amqp = Trie.from_pairs(pairs)
    assert_type(amqp, Trie)
    assert_type(Trie.from_pairs(pairs, cstrie.NATS).lookup("a.b"), list[Any])
    return amqp


read(build())
snapshots(from_pairs([("stock.*.nyse", "alice")]))
