"""The headers exchange adapter, from RabbitMQ's rules and its own tests:
deps/rabbit/test/exchanges_SUITE.erl (headers_exchange,
headers_exchange_key_presence_only), dead_lettering_SUITE.erl
(dead_letter_headers_first_death_route), amqp_client_SUITE.erl and
rabbitmq_mqtt v5_SUITE.erl (x-match any / all-with-x with x- keys), and
rabbit_exchange_type_headers.erl (validate_binding, match/match_x)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from cstrie.content.rabbitmq import HeadersExchange, criteria, headers_fields


def test_exchanges_suite_headers_exchange() -> None:
    x = HeadersExchange()
    x.bind("q", {"x-match": "all", "foo": "bar", "fuu": "ber"})
    x.bind("alt", {"x-match": "any", "foo": "bar", "fuu": "ber"})
    assert sorted(x.route({"foo": "bar", "fuu": "ber"})) == ["alt", "q"]  # msg1
    assert x.route({"foo": "bar"}) == ["alt"]  # msg2
    assert x.route(None) == []  # msg3: no headers


def test_exchanges_suite_key_presence_only() -> None:
    x = HeadersExchange()
    x.bind("all", {"x-match": "all-with-x", "foo": None, "x-foo": None})
    x.bind("any", {"x-match": "any-with-x", "foo": None, "x-foo": None})
    assert sorted(x.route({"foo": "anything", "x-foo": 42})) == ["all", "any"]
    assert x.route({"foo": "whatever"}) == ["any"]
    assert x.route({"x-foo": "something"}) == ["any"]
    assert x.route({"other": "value"}) == []
    assert x.route({}) == []


def test_dead_lettering_suite_first_death_route() -> None:
    x = HeadersExchange()
    x.bind(
        "expired",
        {"x-match": "all-with-x", "x-first-death-reason": "expired", "x-first-death-queue": "q1"},
    )
    x.bind("rejected", {"x-match": "any-with-x", "x-first-death-reason": "rejected"})
    assert x.route({"x-first-death-reason": "expired", "x-first-death-queue": "q1"}) == ["expired"]
    assert x.route({"x-first-death-reason": "expired", "x-first-death-queue": "q2"}) == []
    assert x.route({"x-first-death-reason": "rejected", "x-first-death-queue": "q2"}) == [
        "rejected"
    ]


def test_mqtt_v5_suite_user_properties() -> None:
    x = HeadersExchange()
    x.bind("q1", {"x-match": "any", "k1": "v1", "k2": "v2"})
    x.bind("q2", {"x-match": "all-with-x", "k1": "v1", "k2": "v2", "x-k3": "🐇"})
    assert sorted(x.route({"k1": "v1", "k2": "v2", "x-k3": "🐇"})) == ["q1", "q2"]
    assert x.route({}) == []
    assert x.route({"k1": "nope"}) == []
    assert x.route({"k2": "v2"}) == ["q1"]


def test_amqp_client_suite_any_with_x() -> None:
    x = HeadersExchange()
    x.bind("apple", {"x-fruit": "apple", "x-match": "any-with-x"})
    x.bind("banana", {"x-fruit": "banana", "x-match": "any-with-x"})
    assert x.route({"x-fruit": "apple"}) == ["apple"]
    assert x.route({"x-fruit": "banana"}) == ["banana"]
    assert x.route({}) == []


def test_x_keys_are_skipped_without_with_x() -> None:
    x = HeadersExchange()
    x.bind("all", {"x-match": "all", "x-foo": "bar", "a": 1})
    x.bind("any", {"x-match": "any", "x-foo": "bar"})
    assert x.route({"a": 1}) == ["all"]  # x-foo not needed
    assert x.route({"x-foo": "bar"}) == []  # and never enough for "any"


def test_no_matchable_arguments() -> None:
    x = HeadersExchange()
    x.bind("all", {})  # x-match absent: all, nothing to check: every message
    x.bind("all2", {"x-match": "all", "x-ignored": 1})
    x.bind("any", {"x-match": "any"})  # any of nothing: no message
    assert sorted(x.route({})) == ["all", "all2"]
    assert sorted(x.route({"a": 1})) == ["all", "all2"]


@pytest.mark.parametrize(
    ("bound", "header", "equal"),
    [
        ("abc", "abc", True),
        ("abc", b"abc", True),  # both AMQP long strings
        (b"\xc3\xa9", "é", True),
        ("abc", "ABC", False),
        (1, 1, True),
        (1, 1.0, False),  # Erlang =:=
        (1, True, False),
        (True, True, True),
        (2**40, 2**40, True),
        (1.5, 1.5, True),
        (1, "1", False),
        ("x", None, False),
        (1, Decimal(1), False),
    ],
)
def test_value_equality(bound: Any, header: Any, equal: bool) -> None:
    x = HeadersExchange()
    x.bind("q", {"k": bound})
    assert (x.route({"k": header}) == ["q"]) is equal


def test_void_header_is_present() -> None:
    x = HeadersExchange()
    x.bind("q", {"k": None})
    assert x.route({"k": None}) == ["q"]
    assert x.route({"k": Decimal("1.5")}) == ["q"]
    assert x.route({"k": {"nested": 1}}) == ["q"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"x-match": "some"}, "Invalid x-match field value"),
        ({"x-match": 1}, "Invalid x-match field type"),
        ({"x-match": None}, "Invalid x-match field type"),
        ({"k": float("nan")}, "NaN"),
        ({"k": 2**63}, "long long"),
    ],
)
def test_refused_bindings(args: dict[str, Any], error: str) -> None:
    x = HeadersExchange()
    with pytest.raises(ValueError, match=error):
        x.bind("q", args)
    assert len(x.index) == 0


@pytest.mark.parametrize("value", [Decimal(1), [1], {"a": 1}, object()])
def test_unsupported_binding_values(value: Any) -> None:
    with pytest.raises(TypeError, match="type"):
        criteria({"k": value})


def test_x_match_as_bytes_and_binding_identity() -> None:
    x = HeadersExchange()
    assert x.bind("q", {"x-match": b"any", "a": 1, "b": 2})
    assert x.bind("q", {"x-match": b"any", "a": 1, "b": 2}) is False
    assert x.bind("q", {"x-match": "any", "a": 1, "b": 2, "x-note": "other binding"})
    assert x.route({"b": 2}) == ["q"]  # once, though two bindings match
    assert x.unbind("q", {"x-match": b"any", "a": 1, "b": 2})
    assert x.route({"b": 2}) == ["q"]  # the other binding still routes
    assert x.unbind("q", {"x-match": "any", "a": 1, "b": 2, "x-note": "other binding"})
    assert x.route({"b": 2}) == []


def test_headers_fields() -> None:
    assert headers_fields(None) == {}
    assert headers_fields({"a": "é", "b": 1})["a"] == "é".encode()
    with pytest.raises(TypeError):
        headers_fields([("a", 1)])  # type: ignore[arg-type]
