"""The filter-relation API: the Dialect methods, argument validation, and hostile
input (huge level counts: no recursion, bounded time, ``max_levels`` enforced)."""

from __future__ import annotations

import time

import pytest

from cstrie import relations
from cstrie.dialect import AMQP, MQTT, NATS, Dialect


def test_dialect_methods_delegate() -> None:
    assert MQTT.is_subset("a/+/c", "a/#") is True
    assert MQTT.intersects("+/x", "$a/x") is False
    assert AMQP.is_subset("a.#", "a.*") is False
    assert NATS.intersects("a.*", "*.b") is True


def test_module_functions_take_a_dialect_or_a_name() -> None:
    assert relations.is_subset("mqtt", "a/b", "a/+") is True
    assert relations.is_subset(MQTT, "a/b", "a/+") is True
    assert relations.intersects("NATS", "a.>", "a") is False
    with pytest.raises(ValueError, match="unknown dialect"):
        relations.is_subset("stomp", "a", "a")


@pytest.mark.parametrize("method", ["is_subset", "intersects"])
def test_a_non_str_names_the_argument(method: str) -> None:
    test = getattr(MQTT, method)
    with pytest.raises(TypeError, match=r"^argument a: pattern must be a str, not int$"):
        test(7, "a")
    with pytest.raises(TypeError, match=r"^argument b: pattern must be a str, not bytes$"):
        test("a", b"a")


@pytest.mark.parametrize("method", ["is_subset", "intersects"])
def test_an_invalid_pattern_names_the_argument_and_the_rule(method: str) -> None:
    test = getattr(MQTT, method)
    with pytest.raises(ValueError, match=r"^argument b: .*'#' may only be the last word"):
        test("a", "a/#/b")
    with pytest.raises(ValueError, match=r"^argument a: .*must not be empty"):
        test("", "#")
    with pytest.raises(ValueError, match=r"^argument a: .*wildcard '\+' must fill"):
        test("a+", "#")
    with pytest.raises(ValueError, match=r"^argument b: .*U\+0000"):
        test("a", "a\x00")
    with pytest.raises(ValueError, match=r"^argument a: .*empty word"):
        getattr(NATS, method)("a..b", ">")


def test_max_levels_bounds_the_patterns() -> None:
    """AMQP allows 256 words: a 257-word pattern is refused before any work."""
    ok = ".".join(["#"] * 255 + ["a"])
    assert AMQP.is_subset(ok, "#.a") is True
    with pytest.raises(ValueError, match=r"^argument a: .*257 words.*max_levels"):
        AMQP.is_subset(ok + ".b", "#")
    with pytest.raises(ValueError, match=r"^argument b: .*max_levels"):
        AMQP.intersects("#", ok + ".b")


def _timed(fn: object, *args: str) -> tuple[bool, float]:
    start = time.perf_counter()
    result = fn(*args)  # type: ignore[operator]
    return result, time.perf_counter() - start


def test_mqtt_65535_levels_is_linear_and_does_not_recurse() -> None:
    """The longest MQTT filters: 65,535 empty levels, or "+" levels and "#"."""
    deep = "/" * 65534
    plus = "/".join(["+"] * 32767) + "/#"
    for fn, a, b, want in [
        (MQTT.is_subset, deep, deep, True),
        (MQTT.is_subset, deep, plus, True),
        (MQTT.is_subset, plus, deep, False),
        (MQTT.intersects, deep, plus, True),
        (MQTT.intersects, plus, plus, True),
        (MQTT.intersects, deep, deep[:-1], False),
    ]:
        result, seconds = _timed(fn, a, b)
        assert result is want
        assert seconds < 5, f"{seconds:.1f} s"


def test_amqp_worst_hash_patterns_are_polynomial() -> None:
    """256-word keys full of "#": no exponential blow-up (each call is at most
    O(m * n) = 65,536 steps)."""
    shapes = [
        ".".join(["#"] * 255 + ["a"]),
        ".".join(["#", "a"] * 128),
        ".".join(["a", "*"] * 128),
        ".".join(["*", "#"] * 128),
        ".".join(["#", "a", "*", "*", "b"] * 51),
    ]
    for a in shapes:
        for b in shapes:
            for fn in (AMQP.is_subset, AMQP.intersects):
                _, seconds = _timed(fn, a, b)
                assert seconds < 2, (fn.__name__, a[:20], b[:20], seconds)


def test_unlimited_custom_dialect_deep_patterns() -> None:
    """A custom dialect without max_levels: thousands of "**" levels are still
    polynomial and iterative (no RecursionError)."""
    d = Dialect(name="glob", separator="/", single="?", multi="**")
    a = "/".join(["**", "x"] * 1500)
    b = "/".join(["x", "?", "**"] * 1000)
    assert d.is_subset(a, a) is True
    assert d.is_subset(a, b) is False
    assert d.intersects(a, b) is True


def test_no_state_outlives_a_call() -> None:
    """Nothing is cached between calls (hostile inputs cannot grow memory)."""
    before = {k: v for k, v in vars(relations).items() if not k.startswith("__")}
    for i in range(200):
        AMQP.is_subset(f"a{i}.#", f"#.b{i}")
        AMQP.intersects(f"a{i}.#", f"#.b{i}")
    after = {k: v for k, v in vars(relations).items() if not k.startswith("__")}
    assert after.keys() == before.keys()
    assert not any(hasattr(v, "cache_info") for v in after.values())
