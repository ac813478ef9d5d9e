"""The public API contract of ``cstrie.Trie`` / ``cstrie.Snapshot``.

Return types, what counts as a subscriber (any hashable; equal objects are one
subscriber), errors that leave the trie unchanged, the shape of
``subscriptions()``, ``lookup_many`` versus ``lookup``, ``stats()``, ``repr``,
``dump()``, module identities, and scale: one pattern with 100,000 subscribers, one
level with 100,000 words.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

import pytest

import cstrie
import cstrie.trie
from cstrie.dialect import MQTT, Dialect
from cstrie.trie import Snapshot, Trie


def state(trie: Trie | Snapshot) -> tuple[Any, ...]:
    return (sorted(trie, key=repr), len(trie), sorted(trie._reg.live_objects(), key=repr))


# ------------------------------------------------------------ module level
def test_public_names_are_the_implementation_classes() -> None:
    assert cstrie.Trie is cstrie.trie.Trie
    assert cstrie.Snapshot is cstrie.trie.Snapshot
    assert "Trie" in cstrie.__all__ and "Snapshot" in cstrie.__all__
    with pytest.raises(AttributeError):
        _ = cstrie.NoSuchThing  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["amqp", "mqtt", "nats", "AMQP"])
def test_dialect_by_name(name: str) -> None:
    trie = Trie(name)
    assert trie.dialect.name == name.lower()
    assert isinstance(trie.dialect, Dialect)
    assert Trie().dialect.name == "amqp"
    assert Trie(MQTT).dialect is MQTT


def test_bad_dialect() -> None:
    with pytest.raises(ValueError):
        Trie("stomp")
    with pytest.raises(TypeError):
        Trie(5)  # type: ignore[arg-type]


# ------------------------------------------------------------ return types
def test_return_types() -> None:
    trie = Trie()
    assert trie.subscribe("a.*", "s") is True
    assert trie.subscribe("a.*", "s") is False
    assert trie.subscribe("a.#", 2) is True
    found = trie.lookup("a.b")
    assert type(found) is list and len(found) == 2 and set(found) == {2, "s"}
    pairs = trie.match("a.b")
    assert type(pairs) is list
    assert all(type(p) is tuple and len(p) == 2 and type(p[0]) is str for p in pairs)
    assert len(pairs) == 2 and set(pairs) == {("a.#", 2), ("a.*", "s")}
    assert trie.has_subscribers("a.b") is True
    assert trie.has_subscribers("b") is False
    many = trie.lookup_many(["a.b", "b"])
    assert type(many) is list and all(type(x) is list for x in many)
    assert trie.subscribers("a.*") == ["s"]
    assert trie.subscribers("nothing") == []
    subs = trie.subscriptions()
    assert type(subs) is dict
    assert type(len(trie)) is int and len(trie) == 2
    assert all(type(x) is tuple and len(x) == 2 for x in trie)
    assert isinstance(trie.snapshot(), Snapshot)
    assert type(trie.copy()) is Trie
    assert trie.check_invariants() is None
    assert trie.check_invariants(strict=False) is None
    assert type(trie.dump()) is str
    stats = trie.stats()
    assert type(stats) is dict and all(type(v) is int for v in stats.values())
    assert trie.unsubscribe("a.*", "s") is True
    assert trie.unsubscribe("a.*", "s") is False
    assert trie.unsubscribe("never.subscribed", "nobody") is False
    assert bool(trie) is True
    trie.clear()
    assert bool(trie) is False


def test_snapshot_read_methods_have_the_same_types() -> None:
    trie = Trie()
    trie.subscribe("a.*", "s")
    snap = trie.snapshot()
    assert snap.lookup("a.b") == ["s"]
    assert snap.match("a.b") == [("a.*", "s")]
    assert snap.has_subscribers("a.b") is True
    assert snap.lookup_many(["a.b", "x"]) == [["s"], []]
    assert snap.subscribers("a.*") == ["s"]
    assert snap.subscriptions() == {"a.*": ["s"]}
    assert len(snap) == 1 and list(snap) == [("a.*", "s")]
    assert type(snap.copy()) is Trie
    assert snap.dialect is trie.dialect
    assert type(snap.stats()) is dict


# --------------------------------------------------------------- hashables
class Named:
    """Equal when the names are equal; all instances share one hash value, so the
    registry must tell unequal ones apart by ``==``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Named) and other.name == self.name

    def __hash__(self) -> int:
        return 42

    def __repr__(self) -> str:
        return f"Named({self.name!r})"


@pytest.mark.parametrize(
    "sub",
    [
        0,
        -(2**70),
        "text",
        b"bytes",
        ("tuple", 1, ("nested",)),
        frozenset({1, 2}),
        None,
        3.5,
        Named("n"),
        Dialect(name="as-subscriber"),
    ],
    ids=repr,
)
def test_any_hashable_is_a_subscriber(sub: Hashable) -> None:
    trie = Trie()
    assert trie.subscribe("a.b", sub) is True
    assert trie.subscribe("a.b", sub) is False
    assert trie.lookup("a.b") == [sub]
    assert trie.lookup("a.b")[0] is sub
    assert trie.match("a.b") == [("a.b", sub)]
    assert trie.lookup_many(["a.b"]) == [[sub]]
    assert trie.subscribers("a.b") == [sub]
    assert list(trie) == [("a.b", sub)]
    assert trie.subscriptions() == {"a.b": [sub]}
    assert trie.unsubscribe("a.b", sub) is True
    assert trie.lookup("a.b") == []
    assert len(trie._reg) == 0


def test_equal_but_distinct_objects_count_once() -> None:
    trie = Trie()
    first = ("t", 1)
    assert trie.subscribe("a", first) is True
    assert trie.subscribe("a", tuple(["t", 1])) is False
    assert trie.subscribe("a", frozenset({1})) is True
    assert trie.subscribe("a", frozenset([1])) is False
    assert trie.subscribe("a", 1) is True
    assert trie.subscribe("a", 1.0) is False  # 1 == 1.0 == True
    assert trie.subscribe("a", True) is False
    assert trie.subscribe("a", Named("x")) is True
    assert trie.subscribe("a", Named("x")) is False
    assert trie.subscribe("a", Named("y")) is True  # same hash, not equal: another one
    found = trie.lookup("a")
    assert len(found) == 5
    assert set(found) == {first, frozenset({1}), 1, Named("x"), Named("y")}
    assert any(x is first for x in found)  # the first object subscribed is returned
    assert len(trie) == 5 and len(trie._reg) == 5
    assert trie.unsubscribe("a", 1.0) is True  # any equal object unsubscribes
    assert trie.unsubscribe("a", True) is False
    assert trie.unsubscribe("a", ("t", 1)) is True
    assert sorted(map(repr, trie.lookup("a"))) == ["Named('x')", "Named('y')", "frozenset({1})"]
    assert len(trie._reg) == 3


def test_equal_subscriber_on_several_patterns_is_one_subscriber() -> None:
    trie = Trie()
    trie.subscribe("a.*", ("s", 1))
    trie.subscribe("a.#", ("s", 1))
    trie.subscribe("#", ("s", 1))
    assert trie.lookup("a.b") == [("s", 1)]  # each subscriber once
    assert len(trie.match("a.b")) == 3
    assert trie.stats()["subscribers"] == 1


@pytest.mark.parametrize("bad", [[1], {"k": 1}, {1, 2}, bytearray(b"x"), ([1],)], ids=repr)
def test_unhashable_subscriber_is_type_error_and_changes_nothing(bad: Any) -> None:
    trie = Trie()
    trie.subscribe("a.b", "x")
    trie.subscribe("c", 1)
    before = state(trie)
    with pytest.raises(TypeError):
        trie.subscribe("a.b", bad)
    with pytest.raises(TypeError):
        trie.subscribe("new.pattern", bad)
    with pytest.raises(TypeError):
        trie.unsubscribe("a.b", bad)
    assert state(trie) == before
    trie.check_invariants(strict=True)


def test_subscriber_whose_hash_raises_changes_nothing() -> None:
    class Exploding:
        def __hash__(self) -> int:
            raise RuntimeError("no hash today")

    trie = Trie()
    trie.subscribe("a", "x")
    before = state(trie)
    with pytest.raises(RuntimeError, match="no hash today"):
        trie.subscribe("a", Exploding())
    assert state(trie) == before


def test_bad_pattern_changes_nothing() -> None:
    trie = Trie("mqtt")
    trie.subscribe("a/+", "x")
    before = state(trie)
    for bad in ["a/#/b", "", "a+/b", "a\x00"]:
        with pytest.raises(ValueError):
            trie.subscribe(bad, "new")
        with pytest.raises(ValueError):
            trie.unsubscribe(bad, "x")
    for wrong in [None, 5, b"a/b"]:
        with pytest.raises(TypeError):
            trie.subscribe(wrong, "new")  # type: ignore[arg-type]
    assert state(trie) == before


# ------------------------------------------------------------ subscriptions
def test_subscriptions_shape() -> None:
    trie = Trie()
    assert trie.subscriptions() == {}
    trie.subscribe("a.*", 1)
    trie.subscribe("a.*", 2)
    trie.subscribe("#", 1)
    trie.subscribe("", "empty-key")
    trie.subscribe("gone", 9)
    trie.unsubscribe("gone", 9)
    subs = trie.subscriptions()
    assert set(subs) == {"a.*", "#", ""}  # no pattern without subscribers
    assert sorted(subs["a.*"]) == [1, 2]
    assert subs["#"] == [1]
    assert subs[""] == ["empty-key"]
    subs["a.*"].append(3)  # a plain copy: changing it changes nothing
    subs["new"] = [4]
    assert sorted(trie.subscriptions()["a.*"]) == [1, 2]
    assert "new" not in trie.subscriptions()
    assert sum(len(v) for v in trie.subscriptions().values()) == len(trie)


def test_subscriptions_with_large_sets_and_many_patterns() -> None:
    trie = Trie()
    for i in range(70_000):  # more ids than one iteration chunk
        trie.subscribe("big.#", i)
    for i in range(20_000):  # more patterns than one iteration chunk
        trie.subscribe(f"p.{i}", i)
    subs = trie.subscriptions()
    assert len(subs) == 20_001
    assert len(subs["big.#"]) == 70_000 and set(subs["big.#"]) == set(range(70_000))
    assert all(subs[f"p.{i}"] == [i] for i in range(0, 20_000, 997))
    assert len(list(trie)) == 90_000 == len(trie)


# -------------------------------------------------------------- lookup_many
@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_lookup_many_equals_lookups(dialect: str) -> None:
    d = cstrie.trie.resolve_dialect(dialect)
    sep, one = d.separator, d.single
    assert one is not None
    trie = Trie(d)
    patterns = [sep.join(p) for p in (["a", one], ["a", "b"], [one, "b"], ["x"], ["a", d.multi])]
    for i, p in enumerate(patterns):
        trie.subscribe(p, i)
        trie.subscribe(p, "all")
    topics = [sep.join(t) for t in (["a", "b"], ["a", "c"], ["x"], ["q"], ["a", "b", "c"])]
    topics = topics * 3
    want = [trie.lookup(t) for t in topics]
    got = trie.lookup_many(topics)
    assert [sorted(x, key=repr) for x in got] == [sorted(x, key=repr) for x in want]
    assert trie.lookup_many(iter(topics)) == got  # any iterable
    assert trie.lookup_many([]) == []
    assert trie.snapshot().lookup_many(topics) == got


@pytest.mark.parametrize(
    ("dialect", "bad"), [("mqtt", "a/+"), ("mqtt", ""), ("nats", "a..b"), ("nats", "a.>")]
)
def test_lookup_many_with_an_invalid_topic_raises_value_error(dialect: str, bad: str) -> None:
    trie = Trie(dialect)
    trie.subscribe("a", 1)
    with pytest.raises(ValueError):
        trie.lookup(bad)
    with pytest.raises(ValueError):
        trie.lookup_many(["a", bad, "a"])
    assert trie.lookup_many(["a", "a"]) == [[1], [1]]


def test_lookup_many_non_str_is_type_error() -> None:
    trie = Trie()
    with pytest.raises(TypeError):
        trie.lookup_many(["a", 5])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        trie.lookup(None)  # type: ignore[arg-type]


def test_lookup_many_with_none_subscriber() -> None:
    """None is a hashable subscriber like any other (lookup_many must not confuse it
    with a freed id)."""
    trie = Trie()
    trie.subscribe("a", "x")
    trie.subscribe("a", None)
    trie.subscribe("#", "y")
    want = [sorted(trie.lookup(t), key=repr) for t in ("a", "b")]
    got = [sorted(x, key=repr) for x in trie.lookup_many(["a", "b"])]
    assert got == want == [sorted(["x", None, "y"], key=repr), ["y"]]


# -------------------------------------------------------------------- stats
STAT_KEYS = {"subscriptions", "patterns", "subscribers", "nodes", "lookups"}


def test_stats_after_known_operations() -> None:
    trie = Trie()
    s0 = trie.stats()
    assert STAT_KEYS <= set(s0)
    assert (s0["subscriptions"], s0["patterns"], s0["subscribers"], s0["lookups"]) == (0, 0, 0, 0)
    empty_nodes = s0["nodes"]
    assert empty_nodes >= 1
    trie.subscribe("a.b", "x")
    trie.subscribe("a.b", "y")
    trie.subscribe("a.*", "x")
    trie.subscribe("c", "z")
    for _ in range(5):
        trie.lookup("a.b")
    s1 = trie.stats()
    assert s1["subscriptions"] == 4
    assert s1["patterns"] == 3
    assert s1["subscribers"] == 3
    assert s1["nodes"] > empty_nodes
    assert s1["lookups"] == 5
    trie.lookup_many(["a.b", "c", "d"])
    assert trie.stats()["lookups"] == 8
    trie.unsubscribe("a.b", "y")
    trie.unsubscribe("c", "z")
    s2 = trie.stats()
    assert (s2["subscriptions"], s2["patterns"], s2["subscribers"]) == (2, 2, 1)
    trie.clear()
    s3 = trie.stats()
    assert (s3["subscriptions"], s3["patterns"], s3["subscribers"]) == (0, 0, 0)
    assert s3["nodes"] == empty_nodes
    assert s3["lookups"] >= 8


def test_stats_lookups_are_per_handle() -> None:
    trie = Trie()
    trie.subscribe("a", 1)
    trie.lookup("a")
    snap = trie.snapshot()
    snap.lookup("a")
    snap.lookup("a")
    assert snap.stats()["lookups"] == 2
    assert trie.stats()["lookups"] == 1


def test_stats_counts_each_lookup_once_even_with_many_results() -> None:
    trie = Trie()
    for i in range(300):
        trie.subscribe("a", i)
    results: list[int] = []
    th = threading.Thread(target=lambda: results.append(len(trie.lookup("a"))))
    th.start()  # a fresh thread: a fresh result buffer
    th.join()
    assert results == [300]
    assert trie.stats()["lookups"] == 1


def test_stats_subscribers_counts_only_this_trie() -> None:
    trie = Trie()
    trie.subscribe("a", "mine")
    dup = trie.copy()
    dup.subscribe("b", "only-in-copy")
    assert dup.stats()["subscribers"] == 2
    assert trie.stats()["subscribers"] == 1


# --------------------------------------------------------------- repr, dump
def test_repr() -> None:
    trie = Trie("mqtt")
    trie.subscribe("a/+", 1)
    trie.subscribe("a/#", 2)
    r = repr(trie)
    assert r.startswith("<cstrie.Trie") and "mqtt" in r and "pairs=2" in r
    snap = trie.snapshot()
    trie.subscribe("b", 3)
    rs = repr(snap)
    assert rs.startswith("<cstrie.Snapshot") and "mqtt" in rs and "pairs=2" in rs
    assert "pairs=3" in repr(trie)


def test_dump_mentions_the_words() -> None:
    trie = Trie()
    words = ["alpha", "beta", "gamma", "delta"]
    trie.subscribe("alpha.beta", 1)
    trie.subscribe("gamma.*.delta", 2)
    trie.subscribe("alpha.#", 3)
    text = trie.dump()
    for w in [*words, "*", "#"]:
        assert w in text, w
    assert "alpha" in trie.snapshot().dump()
    trie.clear()
    assert "alpha" not in trie.dump()


# ------------------------------------------------------------------- scale
def test_pattern_with_100000_subscribers() -> None:
    trie = Trie()
    n = 100_000
    for i in range(n):
        assert trie.subscribe("news.#", i) is True
    trie.subscribe("news.sport", "one-more")
    found = trie.lookup("news.sport")
    assert len(found) == n + 1 and set(found) == set(range(n)) | {"one-more"}
    assert len(trie.lookup("news")) == n
    assert len(trie.subscribers("news.#")) == n
    assert len(trie.match("news.x")) == n
    many = trie.lookup_many(["news.a", "other", "news.sport"])
    assert len(many[0]) == n and many[1] == [] and len(many[2]) == n + 1
    assert len(trie) == n + 1
    for i in range(0, n, 2):
        assert trie.unsubscribe("news.#", i) is True
    found = trie.lookup("news.x")
    assert len(found) == n // 2 and set(found) == set(range(1, n, 2))
    trie.check_invariants(strict=True)


def test_100000_words_at_one_level() -> None:
    trie = Trie()
    n = 100_000
    for i in range(n):
        assert trie.subscribe(f"w{i}", i) is True
    assert len(trie) == n
    for i in range(n):
        assert trie.lookup(f"w{i}") == [i]
    assert trie.lookup(f"w{n}") == [] and trie.lookup("w") == []
    assert trie.lookup_many([f"w{i}" for i in range(0, n, 1000)]) == [
        [i] for i in range(0, n, 1000)
    ]
    trie.check_invariants(strict=True)
    for i in range(0, n, 3):
        assert trie.unsubscribe(f"w{i}", i) is True
    assert all(trie.has_subscribers(f"w{i}") is (i % 3 != 0) for i in range(0, n, 7))
    assert len(trie) == n - len(range(0, n, 3))
    trie.check_invariants(strict=True)
