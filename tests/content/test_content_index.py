"""ContentIndex's API rules: bindings as a set of (criteria, subscriber,
topic), delivery once per subscriber, topics in each dialect, snapshots,
limits and hostile input (a clear error, nothing changed)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from cstrie import Dialect
from cstrie.content import (
    AllOf,
    AnyOf,
    Binding,
    ContentIndex,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
    Suffix,
)


def state(idx: ContentIndex) -> set[tuple[str, Any, str | None]]:
    return {(b.criteria.key, b.subscriber, b.topic) for b in idx.bindings()}


def counts(idx: ContentIndex) -> dict[str, int]:
    """stats() less the engine's memory figures (shared by the process)."""
    st = idx.stats()
    del st["engine_bytes"], st["nodes"]
    return st


def test_bind_unbind_are_set_operations() -> None:
    idx = ContentIndex()
    assert idx.bind(Eq("a", 1), "s") is True
    assert idx.bind(Eq("a", 1), "s") is False
    assert idx.bind(Eq("a", True), "s") is True  # a different criterion
    assert idx.bind(Eq("a", 1), "s", topic="x.*") is True
    assert len(idx) == 3
    assert idx.unbind(Eq("a", 1), "s") is True
    assert idx.unbind(Eq("a", 1), "s") is False
    assert idx.unbind(Eq("a", 1), "other") is False
    assert idx.match({"a": 1}) == []  # only the topic-filtered one is left
    assert idx.match({"a": 1}, topic="x.y") == ["s"]
    assert idx.match({"a": True}) == ["s"]
    assert len(idx) == 2


def test_subscriber_bound_twice_is_delivered_once_and_unbind_removes_one() -> None:
    idx = ContentIndex()
    idx.bind(Has("a"), "s")
    idx.bind(Eq("a", 1), "s")
    idx.bind(Has("a"), "t")
    assert sorted(idx.match({"a": 1})) == ["s", "t"]
    assert len(idx.match_bindings({"a": 1})) == 3
    idx.unbind(Has("a"), "s")
    assert sorted(idx.match({"a": 1})) == ["s", "t"]
    assert idx.match({"a": 2}) == ["t"]


def test_equal_subscribers_are_one_subscriber() -> None:
    idx = ContentIndex()
    idx.bind(Has("a"), 1)
    assert idx.bind(Has("a"), 1.0) is False  # 1 == 1.0 and hash equal, as in Trie
    assert idx.unbind(Has("a"), True) is True
    assert len(idx) == 0


def test_any_hashable_subscriber_and_unhashable_refused() -> None:
    idx = ContentIndex()
    sub = ("queue", frozenset({1}))
    idx.bind(Has("a"), sub)
    assert idx.match({"a": 0}) == [sub]
    with pytest.raises(TypeError):
        idx.bind(Has("a"), ["list"])
    with pytest.raises(TypeError):
        idx.unbind(Has("a"), {})
    assert len(idx) == 1


@pytest.mark.parametrize(
    ("dialect", "pattern", "topic", "ok"),
    [
        ("amqp", "stock.#", "stock", True),
        ("amqp", "stock.*", "stock", False),
        ("amqp", "#", "", True),
        ("amqp", "", "", True),
        ("amqp", "", "a", False),
        ("amqp", "a..b", "a..b", True),
        ("mqtt", "a/#", "a", True),
        ("mqtt", "+/x", "$SYS/x", False),  # the $ rule
        ("mqtt", "#", "$SYS/x", False),
        ("mqtt", "$SYS/#", "$SYS/x", True),
        ("mqtt", "+/+", "/x", True),
        ("nats", "a.>", "a", False),
        ("nats", "a.>", "a.b.c", True),
        ("nats", "*.b", "a.b", True),
    ],
)
def test_topic_filter_follows_the_dialect(dialect: str, pattern: str, topic: str, ok: bool) -> None:
    idx = ContentIndex(dialect)
    idx.bind(Not(Has("nothing")), "s", topic=pattern)
    assert (idx.match({}, topic) == ["s"]) is ok


def test_topic_bindings_need_a_message_topic() -> None:
    idx = ContentIndex()
    idx.bind(AllOf(), "s", topic="#")
    idx.bind(AllOf(), "t")
    assert idx.match({}) == ["t"]
    assert sorted(idx.match({}, topic="a")) == ["s", "t"]


def test_invalid_topics_and_patterns_are_refused_unchanged() -> None:
    idx = ContentIndex("mqtt")
    with pytest.raises(ValueError):
        idx.bind(Has("a"), "s", topic="a/#/b")
    with pytest.raises(ValueError):
        idx.match({"a": 1}, topic="a/+")
    with pytest.raises(TypeError):
        idx.match({"a": 1}, topic=b"a")  # type: ignore[arg-type]
    assert len(idx) == 0 and idx.bindings() == []


def test_fields_must_be_a_mapping() -> None:
    idx = ContentIndex()
    with pytest.raises(TypeError, match="mapping"):
        idx.match([("a", 1)])  # type: ignore[arg-type]


def test_snapshot_is_o1_consistent_and_survives_updates() -> None:
    idx = ContentIndex()
    idx.bind(Eq("a", 1), "s")
    snap = idx.snapshot()
    idx.unbind(Eq("a", 1), "s")
    idx.bind(Eq("a", 1), "t")
    gc.collect()
    assert snap.match({"a": 1}) == ["s"]
    assert idx.match({"a": 1}) == ["t"]
    assert len(snap) == 1
    assert snap.bindings() == [Binding(Eq("a", 1), "s", None)]


def test_stats() -> None:
    idx = ContentIndex()
    idx.bind(Eq("a", 1), "s")
    idx.bind(Not(Has("a")), "s")
    idx.bind(Range("n", 1, 2), "t", topic="x")
    st = idx.stats()
    assert st["bindings"] == 3
    assert st["subscribers"] == 2
    assert st["with_topic"] == 1
    assert st["always"] == 1
    assert st["patterns"] > 3 and st["engine_bytes"] > 0


def test_never_matching_binding_is_kept_but_not_a_candidate() -> None:
    idx = ContentIndex()
    assert idx.bind(AnyOf(), "s")
    assert idx.stats()["always"] == 0
    assert idx.match({"a": 1}) == []
    assert len(idx) == 1 and idx.unbind(AnyOf(), "s")


@pytest.mark.parametrize(
    ("limit", "value", "criteria", "message"),
    [
        ("max_criteria", 3, AllOf(Has("a"), Has("b"), Has("c"), Has("d")), "4 field tests"),
        ("max_values", 2, OneOf("a", [1, 2, 3]), "3 values"),
        ("max_value_length", 4, Eq("a", "xxxxx"), "length 5"),
        ("max_value_length", 4, Eq("a", b"xxxxx"), "length 5"),
        ("max_value_length", 4, Prefix("a", "xxxxx"), "length 5"),
        ("max_value_length", 4, Suffix("a", "xxxxx"), "length 5"),
        ("max_value_length", 4, Has("abcde"), "field name of 5"),
        ("max_value_length", 4, Eq("a", 1 << 17), "bits"),
        ("max_depth", 2, Not(Not(Has("a"))), "nested 3 deep"),
        ("max_patterns", 20, OneOf("a", range(21)), "21 index patterns"),
    ],
)
def test_limits_refuse_before_any_change(
    limit: str, value: int, criteria: Any, message: str
) -> None:
    idx = ContentIndex(**{limit: value})
    idx.bind(Has("z"), "keep")
    before = counts(idx)
    with pytest.raises(ValueError, match=message):
        idx.bind(criteria, "s")
    assert counts(idx) == before
    assert state(idx) == {(Has("z").key, "keep", None)}


def test_bindings_per_subscriber_limit() -> None:
    idx = ContentIndex(max_bindings_per_subscriber=2)
    idx.bind(Has("a"), "s")
    idx.bind(Has("b"), "s")
    assert idx.bind(Has("a"), "s") is False  # not new: no limit hit
    with pytest.raises(ValueError, match="2 bindings"):
        idx.bind(Has("c"), "s")
    assert idx.bind(Has("c"), "t")
    idx.unbind(Has("a"), "s")
    assert idx.bind(Has("c"), "s")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_criteria": 0},
        {"max_depth": 65},
        {"range_patterns": 15},
        {"max_values": True},
        {"max_patterns": 1.5},
    ],
)
def test_bad_limits(kwargs: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        ContentIndex(**kwargs)


def test_dialect_must_suit_the_key_space() -> None:
    with pytest.raises(ValueError, match="many-level wildcard"):
        ContentIndex(Dialect(multi=None))
    with pytest.raises(ValueError, match="letters or digits"):
        ContentIndex(Dialect(separator="x"))
    idx = ContentIndex(Dialect(separator="/", single="+", multi="~"))  # "~" taken: another escape
    idx.bind(Prefix("f~", "a~b"), "s", topic="a/~")
    assert idx.match({"f~": "a~bc"}, topic="a/x") == ["s"]
    assert idx.match({"f~": "a~"}, topic="a/x") == []


def test_hostile_values_in_messages() -> None:
    idx = ContentIndex(max_value_length=8)
    idx.bind(Prefix("s", "abc"), "p")
    idx.bind(Suffix("s", "xyz"), "q")
    idx.bind(Range("n", 0, 10), "r")
    idx.bind(Eq("n", 5), "e")
    huge = "abc" + "\x00./#+*>~ \ud800" * 100_000 + "xyz"
    assert sorted(idx.match({"s": huge})) == ["p", "q"]
    assert idx.match({"n": float("nan")}) == []
    assert idx.match({"n": 10**100_000}) == []  # a huge int: no str() conversion
    assert idx.match({"n": -(10**5000)}) == []
    assert sorted(idx.match({"n": 5})) == ["e", "r"]
    assert idx.match({"x" * 1_000_000: 1, ("tuple",): 1, None: 2}) == []
    assert idx.match({"n": [5], "s": {"abc": 1}}) == []
    assert idx.match({"n": True}) == []  # bool is no number


def test_values_with_separators_and_wildcards_are_literal() -> None:
    for dialect in ("amqp", "mqtt", "nats"):
        idx = ContentIndex(dialect)
        idx.bind(Eq("a.b/c", "x.#/+*>"), "e")
        idx.bind(Prefix("a.b/c", "x.#"), "p")
        idx.bind(Eq("a.b/c", ""), "empty")
        assert sorted(idx.match({"a.b/c": "x.#/+*>"})) == ["e", "p"]
        assert idx.match({"a.b/c": "x.y"}) == []
        assert idx.match({"a.b/c": "x.#"}) == ["p"]
        assert idx.match({"a.b/c": ""}) == ["empty"]
        assert idx.match({"a": "x.#/+*>"}) == []


def test_many_clauses_past_the_code_space_stay_correct() -> None:
    idx = ContentIndex(max_criteria=400, max_depth=3)
    c = AllOf(*(Has(f"f{i}") for i in range(300)))
    idx.bind(c, "s")
    fields = {f"f{i}": 1 for i in range(300)}
    assert idx.match(fields) == ["s"]
    del fields["f299"]
    assert idx.match(fields) == []


def test_range_indexing_is_coarse_but_exact() -> None:
    idx = ContentIndex(range_patterns=16)
    idx.bind(Range("n", 10, 100, high_inclusive=False), "s")
    for v, ok in [(9.99, False), (10, True), (99.999, True), (100, False), (127, False)]:
        assert (idx.match({"n": v}) == ["s"]) is ok


def test_failed_bind_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    idx = ContentIndex()
    idx.bind(Has("a"), "keep")
    before = counts(idx)
    trie = idx._trie
    calls = []

    class Boom(Exception):
        pass

    real = type(trie).subscribe

    def failing(self: Any, pattern: Any, sub: Any, **kw: Any) -> bool:
        calls.append(pattern)
        if pattern.startswith("b."):
            raise Boom
        return bool(real(self, pattern, sub, **kw))

    monkeypatch.setattr(type(trie), "subscribe", failing)
    with pytest.raises(Boom):
        idx.bind(AllOf(Eq("x", 1), Eq("y", 2)), "s")
    monkeypatch.undo()
    assert calls
    assert counts(idx) == before
    assert idx.bind(AllOf(Eq("x", 1), Eq("y", 2)), "s")  # the slot was released


def test_a_subscribers_repr_runs_outside_its_lock() -> None:
    """The limit's error names the subscriber with its ``repr``: user code,
    which may call the index back (here: unbind the subscriber's other
    binding), so it runs once the subscriber's lock is released.  Under
    the lock it deadlocked."""
    import threading

    idx = ContentIndex(max_bindings_per_subscriber=1)

    class Chatty:
        def __repr__(self) -> str:
            idx.unbind(Eq("a", 1), self)
            return "Chatty()"

    s = Chatty()
    assert idx.bind(Eq("a", 1), s)
    errors: list[BaseException] = []

    def bind_one_too_many() -> None:
        try:
            idx.bind(Eq("b", 2), s)
        except ValueError as e:
            errors.append(e)

    t = threading.Thread(target=bind_one_too_many, daemon=True)
    t.start()
    t.join(timeout=10)
    assert not t.is_alive(), "bind deadlocked running the subscriber's __repr__ under its lock"
    assert len(errors) == 1 and "Chatty()" in str(errors[0])
    assert len(idx) == 0  # the repr's unbind ran


def test_hit_counting_takes_each_clause_once_and_refuses_other_items() -> None:
    """The candidates of a message's hits (``binding << 16 | clauses << 8 |
    clause`` codes): a binding whose every clause was hit, however many keys
    hit one clause; nothing that is not such a code is accepted."""
    from cstrie._hotpath import content_candidates

    def code(b: int, n: int, i: int) -> int:
        return b << 16 | n << 8 | i

    rows = [
        [code(1, 2, 0), code(2, 3, 0), code(5, 1, 0)],
        [code(1, 2, 0), code(2, 3, 1)],  # binding 1's clause 0 hit twice
        [code(2, 3, 1), code(3, 2, 1), code(2**40, 1, 0)],
        [],
    ]
    assert sorted(content_candidates(rows)) == [5, 2**40]  # 1: one clause of 2; 2: 2 of 3
    rows[0].append(code(1, 2, 1))
    rows[3].append(code(2, 3, 2))
    assert sorted(content_candidates(rows)) == [1, 2, 5, 2**40]
    assert content_candidates([]) == [] and content_candidates([[], []]) == []
    for bad in ([[1.5]], [["x"]], [[-1]], [[5]], [[2**64]], [[True]]):
        with pytest.raises((TypeError, ValueError)):
            content_candidates(bad)  # type: ignore[arg-type]
    for bad_rows in ((), [()], None):
        with pytest.raises(TypeError):
            content_candidates(bad_rows)  # type: ignore[arg-type]
