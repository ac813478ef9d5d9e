"""The rules of the criteria (cstrie.content.criteria's table), one test each,
checked on Criterion.test and on an index holding the criterion (so the index
and the verifier agree on every rule)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from cstrie.content import (
    AllOf,
    AnyOf,
    ContentIndex,
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
from cstrie.content.criteria import MAX_DEPTH


def holds(c: Criterion, fields: dict[str, Any]) -> bool:
    """c.test(fields), and the same answer from an index holding only c."""
    idx = ContentIndex(max_depth=MAX_DEPTH)
    idx.bind(c, "s")
    via_index = idx.match(fields) == ["s"]
    assert c.test(fields) == via_index, (c, fields)
    return via_index


class IntSub(int):
    pass


class StrSub(str):
    pass


def test_has_is_presence_whatever_the_value() -> None:
    assert holds(Has("u"), {"u": None})
    assert holds(Has("u"), {"u": object()})
    assert holds(Has("u"), {"u": [1, 2]})
    assert not holds(Has("u"), {"v": 1})
    assert not holds(Has("u"), {})


@pytest.mark.parametrize(
    ("want", "got", "equal"),
    [
        ("USD", "USD", True),
        ("USD", "usd", False),
        (1, 1, True),
        (1, 1.0, False),  # type and value, as RabbitMQ's =:=
        (1, True, False),
        (True, 1, False),
        (True, True, True),
        (0, False, False),
        (1.5, 1.5, True),
        (0.0, -0.0, True),
        (-0.0, 0.0, True),
        (None, None, True),
        (None, "None", False),
        (b"x", b"x", True),
        (b"x", "x", False),
        ("x", b"x", False),
        (2**100, 2**100, True),
        (2**100, float(2**100), False),
        (float("inf"), float("inf"), True),
        (1.0, float("nan"), False),
        (3, IntSub(3), True),  # a subclass counts as its base type
        ("a", StrSub("a"), True),
    ],
)
def test_eq_compares_type_and_value(want: Any, got: Any, equal: bool) -> None:
    assert holds(Eq("f", want), {"f": got}) is equal


def test_eq_needs_the_field_and_never_matches_other_types() -> None:
    assert not holds(Eq("f", "x"), {})
    assert not holds(Eq("f", "x"), {"f": ["x"]})
    assert not holds(Eq("f", 1), {"f": "1"})


def test_one_of_is_eq_on_some_value() -> None:
    c = OneOf("ccy", ["USD", "EUR", 1])
    assert holds(c, {"ccy": "EUR"})
    assert holds(c, {"ccy": 1})
    assert not holds(c, {"ccy": True})
    assert not holds(c, {"ccy": 1.0})
    assert not holds(c, {"ccy": "GBP"})
    assert not holds(c, {})


def test_one_of_keeps_1_and_true_apart() -> None:
    c = OneOf("f", [1, True, 1.0])
    assert len(c.values) == 3
    for v in (1, True, 1.0):
        assert holds(c, {"f": v})
    assert not holds(c, {"f": 0})


@pytest.mark.parametrize(
    ("text", "value", "ok"),
    [
        ("com.github.", "com.github.push", True),
        ("com.github.", "com.github.", True),
        ("com.github.", "com.github", False),
        ("", "", True),
        ("", "anything", True),
        ("a#b", "a#bc", True),
        ("a.b", "a/b", False),
        ("é~", "é~x", True),
        ("x", b"xyz", False),  # str only
        ("1", 1, False),
    ],
)
def test_prefix(text: str, value: Any, ok: bool) -> None:
    assert holds(Prefix("f", text), {"f": value}) is ok


@pytest.mark.parametrize(
    ("text", "value", "ok"),
    [
        (".jpg", "cat.jpg", True),
        (".jpg", ".jpg", True),
        (".jpg", "jpg", False),
        ("", "", True),
        ("", "x", True),
        ("/spec", "github.com/cloudevents/spec", True),
        ("x", b"x", False),
    ],
)
def test_suffix(text: str, value: Any, ok: bool) -> None:
    assert holds(Suffix("f", text), {"f": value}) is ok


def test_prefix_and_suffix_need_a_present_str() -> None:
    assert not holds(Prefix("f", ""), {})
    assert not holds(Suffix("f", ""), {"f": None})


@pytest.mark.parametrize(
    ("lo", "hi", "lo_in", "hi_in", "value", "ok"),
    [
        (10, 20, True, True, 10, True),
        (10, 20, True, True, 20, True),
        (10, 20, False, True, 10, False),
        (10, 20, True, False, 20, False),
        (10, 20, True, False, 19.999, True),
        (10, 20, True, True, 9.999, False),
        (None, 0, True, True, -math.inf, True),
        (0, None, True, True, math.inf, True),
        (0, None, True, True, float("nan"), False),  # NaN is in no range
        (None, None, True, True, float("nan"), False),
        (None, None, True, True, True, False),  # bool is not a number
        (0, 1, True, True, False, False),
        (None, None, True, True, "5", False),
        (2**53, 2**53, True, True, 2**53 + 1, False),  # exact, not through doubles
        (2**53 + 1, None, True, True, 2.0**53, False),
        (None, 2.0**53, True, True, 2**53 + 1, False),
        (2**70, 2**70 + 1, True, True, 2**70 + 1, True),
        (2**2000, None, True, True, 2**2001, True),  # beyond the doubles' range
        (None, -(2**2000), True, True, -(2**2001), True),
        (-1, 1, True, True, -0.0, True),
        (0, 0, True, True, -0.0, True),
        (-0.5, 0.5, False, False, 0, True),
    ],
)
def test_range(lo: Any, hi: Any, lo_in: bool, hi_in: bool, value: Any, ok: bool) -> None:
    c = Range("f", lo, hi, low_inclusive=lo_in, high_inclusive=hi_in)
    assert holds(c, {"f": value}) is ok


def test_empty_or_unordered_ranges_are_refused() -> None:
    with pytest.raises(ValueError, match="empty range"):
        Range("f", 2, 1)
    with pytest.raises(ValueError, match="empty range"):
        Range("f", 1, 1, low_inclusive=False)
    with pytest.raises(ValueError, match="NaN"):
        Range("f", float("nan"), 1)
    with pytest.raises(TypeError, match="int, a float"):
        Range("f", True, 2)
    with pytest.raises(TypeError):
        Range("f", "1", 2)


def test_not_inverts_and_holds_on_absent_fields() -> None:
    assert holds(Not(Eq("env", "test")), {})
    assert holds(Not(Eq("env", "test")), {"env": "prod"})
    assert not holds(Not(Eq("env", "test")), {"env": "test"})
    assert holds(Not(Not(Has("a"))), {"a": 1})


def test_all_and_any() -> None:
    assert holds(AllOf(), {})
    assert not holds(AnyOf(), {"a": 1})
    assert holds(AllOf(Has("a"), Eq("b", 2)), {"a": 0, "b": 2})
    assert not holds(AllOf(Has("a"), Eq("b", 2)), {"a": 0, "b": 3})
    assert holds(AnyOf(Has("a"), Eq("b", 2)), {"b": 2})
    assert not holds(AnyOf(Has("a"), Eq("b", 2)), {"b": 3})
    assert holds(AnyOf(AnyOf(), Has("a")), {"a": 1})
    assert holds(AnyOf(Eq("a", 1), Not(Has("b"))), {})


def test_non_str_message_keys_are_ignored() -> None:
    assert not holds(Has("1"), {1: "x"})
    assert holds(Not(Has("1")), {1: "x"})


def test_equality_of_criteria_is_by_canonical_text() -> None:
    assert Eq("a", 1) != Eq("a", True)
    assert Eq("a", 1) != Eq("a", 1.0)
    assert Eq("a", 0.0) == Eq("a", -0.0)
    assert OneOf("a", [1, 2]) == OneOf("a", [2, 1, 2])
    assert AllOf(Has("a"), Has("b")) != AllOf(Has("b"), Has("a"))
    assert Range("a", 1, 2) != Range("a", 1, 2, high_inclusive=False)
    assert len({Eq("a", 1), Eq("a", 1), Eq("a", True)}) == 2


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Has(1),
        lambda: Eq("a", [1]),
        lambda: Eq("a", {}),
        lambda: OneOf("a", "abc"),
        lambda: OneOf("a", [[1]]),
        lambda: Prefix("a", b"x"),
        lambda: Suffix("a", 1),
        lambda: Not("a"),
        lambda: AllOf(Has("a"), "b"),
    ],
)
def test_wrong_types_raise_type_error(bad: Any) -> None:
    with pytest.raises(TypeError):
        bad()


def test_nan_and_empty_sets_raise_value_error() -> None:
    with pytest.raises(ValueError, match="NaN"):
        Eq("a", float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        OneOf("a", [1, float("nan")])
    with pytest.raises(ValueError, match="at least one"):
        OneOf("a", [])


def test_nesting_is_bounded_at_construction() -> None:
    c: Criterion = Has("a")
    for _ in range(MAX_DEPTH - 1):
        c = Not(c)
    assert c.depth == MAX_DEPTH
    with pytest.raises(ValueError, match="nested deeper"):
        Not(c)
    with pytest.raises(ValueError, match="nested deeper"):
        AllOf(Has("b"), c)


def test_criteria_are_immutable() -> None:
    c = Eq("a", 1)
    with pytest.raises(AttributeError):
        c.value = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "c",
    [
        Has("a"),
        Eq("a", "x"),
        Eq("a", b"\x00\xff"),
        Eq("a", 1.5),
        Eq("a", float("-inf")),
        Eq("a", None),
        Eq("a", True),
        Eq("a", 2**80),
        Eq("a", "\ud800"),
        OneOf("a", [1, "1", True, 1.0, None]),
        Prefix("a", "x."),
        Suffix("a", ""),
        Range("a", 1, 2.5, high_inclusive=False),
        Range("a", None, 3),
        Range("a", float("-inf"), None, low_inclusive=False),
        Not(AllOf(Has("a"), AnyOf(Eq("b", 1), Not(Has("c"))))),
        AllOf(),
        AnyOf(),
    ],
)
def test_json_round_trip(c: Criterion) -> None:
    import json

    back = from_json(json.loads(json.dumps(c.to_json())))
    assert back == c and back.key == c.key


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"has": 1},
        {"eq": ["a"]},
        {"eq": "a"},
        {"in": ["a", "x"]},
        {"in": ["a", []]},
        {"range": {"field": "a", "ge": 1, "gt": 1}},
        {"range": {"field": "a", "ge": "x"}},
        {"range": {"field": "a", "ge": 2, "le": 1}},
        {"range": {"x": 1}},
        {"not": [{"has": "a"}]},
        {"all": {"has": "a"}},
        {"xor": []},
        {"eq": ["a", {"bytes": "!!"}]},
        {"eq": ["a", {"float": "nan"}]},
        {"has": "a", "eq": ["a", 1]},
    ],
)
def test_bad_json_raises_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        from_json(bad)


def test_deep_json_is_refused_without_recursing() -> None:
    obj: object = {"has": "a"}
    for _ in range(10_000):
        obj = {"not": obj}
    with pytest.raises(ValueError, match="nested deeper"):
        from_json(obj)
