"""The AMQP 0-9-1 headers exchange, as RabbitMQ 4.x routes it, on the index.

RabbitMQ's ``rabbit_exchange_type_headers`` tests each binding's arguments
against the message's headers, binding by binding.  The rules it applies,
which :func:`criteria` translates into a :class:`~cstrie.content.Criterion`:

- ``x-match`` picks the mode: ``all`` (also when absent), ``any``,
  ``all-with-x`` or ``any-with-x``; any other value is refused when binding
  (RabbitMQ's ``validate_binding``), as is a value that is not a string.
- The ``x-match`` argument itself is never a condition.  In ``all``/``any``
  every other argument whose key starts with ``x-`` is skipped too; the
  ``-with-x`` modes keep them.
- An argument whose value is void (``None`` here) asks only that the header
  be present, with any value; any other argument asks that the header be
  present with an equal value (Erlang's ``=:=`` on the decoded values, so
  types are not compared but ``1`` and ``1.0`` differ, as do ``true`` and
  ``1``).
- ``all`` with no argument left matches every message; ``any`` with none
  matches no message.
- Every header of the message counts, ``x-`` ones included.

Values as a Python client (py-amqp, kombu) sends them: ``str`` and
``bytes`` are both AMQP long strings, so ``"abc"`` and ``b"abc"`` are equal
(both become the UTF-8 bytes here); ``bool`` is a boolean; ``int`` an
integer (at most 64 bits in a binding, as py-amqp can encode); ``float`` a
double (NaN refused).  Decimals, timestamps, tables and arrays are refused
in a binding (``TypeError``); in a message they only make the header
present.

>>> from cstrie.content.rabbitmq import HeadersExchange
>>> x = HeadersExchange()
>>> x.bind("q1", {"x-match": "all", "foo": "bar", "fuu": "ber"})
True
>>> x.bind("q2", {"x-match": "any", "foo": "bar", "fuu": "ber"})
True
>>> sorted(x.route({"foo": "bar", "fuu": "ber"})), x.route({"foo": "bar"}), x.route({})
(['q1', 'q2'], ['q2'], [])
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from cstrie.content.criteria import AllOf, AnyOf, Criterion, Eq, Has
from cstrie.content.index import ContentIndex

__all__ = ["MODES", "HeadersExchange", "criteria", "headers_fields"]

#: The ``x-match`` values RabbitMQ accepts.
MODES = ("all", "any", "all-with-x", "any-with-x")
_INT64 = 1 << 63


class _Opaque:
    """A header value no binding can equal (a decimal, timestamp, table...)."""

    __slots__ = ()


_OPAQUE = _Opaque()


def _binding_value(key: str, v: object) -> bytes | int | float | bool:
    if isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        if not -_INT64 <= v < _INT64:
            raise ValueError(f"binding argument {key!r}: {v} does not fit an AMQP long long")
        return int(v)
    if isinstance(v, float):
        if v != v:
            raise ValueError(f"binding argument {key!r} is NaN, which AMQP cannot carry")
        return float(v)
    raise TypeError(
        f"binding argument {key!r} has a value of type {type(v).__name__}; this adapter "
        "matches strings, bytes, booleans, integers, floats and None (presence)"
    )


def _mode(arguments: Mapping[str, Any]) -> str:
    m = arguments.get("x-match", "all")
    if isinstance(m, (bytes, bytearray)):
        try:
            m = bytes(m).decode("utf-8")
        except UnicodeDecodeError:
            pass
    if not isinstance(m, str):
        raise ValueError(
            f"Invalid x-match field type {type(m).__name__} (value {m!r}); expected longstr"[:300]
        )
    if m not in MODES:
        raise ValueError(
            f"Invalid x-match field value {m!r}; expected all, any, all-with-x, or any-with-x"[:300]
        )
    return m


def criteria(arguments: Mapping[str, Any]) -> Criterion:
    """The criterion a headers-exchange binding with these arguments stands
    for (see the module's rules).  ``ValueError``/``TypeError`` for
    arguments RabbitMQ refuses or this adapter cannot represent.

    >>> criteria({"x-match": "any-with-x", "x-fruit": "apple", "k": None})
    AnyOf(Eq('x-fruit', b'apple'), Has('k'))
    """
    if not isinstance(arguments, Mapping):
        raise TypeError(f"binding arguments must be a mapping, not {type(arguments).__name__}")
    mode = _mode(arguments)
    with_x = mode.endswith("-with-x")
    parts: list[Criterion] = []
    for k, v in arguments.items():
        if not isinstance(k, str):
            raise TypeError(f"binding argument keys are str, not {type(k).__name__}")
        if k == "x-match" or (not with_x and k.startswith("x-")):
            continue
        parts.append(Has(k) if v is None else Eq(k, _binding_value(k, v)))
    return AllOf(*parts) if mode.startswith("all") else AnyOf(*parts)


def headers_fields(headers: Mapping[str, Any] | None) -> dict[str, Any]:
    """A message's headers as the fields the index matches (strings as
    UTF-8 bytes, values no binding can equal as an opaque marker).
    ``None`` (no headers) is no fields."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping or None, not {type(headers).__name__}")
    out: dict[str, Any] = {}
    for k, v in headers.items():
        if isinstance(v, str):
            v = v.encode("utf-8", "surrogatepass")
        elif isinstance(v, (bytearray, memoryview)):
            v = bytes(v)
        elif v is not None and not isinstance(v, (bytes, int, float)):
            v = _OPAQUE
        out[k] = v
    return out


def _wire(v: object) -> object:
    """A value as it travels in an AMQP table: ``str`` and ``bytes`` are both
    one long string (py-amqp sends a ``str`` UTF-8 encoded)."""
    if isinstance(v, str):
        return v.encode("utf-8", "surrogatepass")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v


def _args_key(arguments: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """The arguments table as RabbitMQ tells bindings apart: every argument,
    ``x-`` ones included, by its value on the wire and that value's type
    (``"abc"`` and ``b"abc"`` are one binding; ``1`` and ``1.0`` two)."""
    return tuple(
        sorted((k, type(w).__name__, repr(w)) for k, v in arguments.items() for w in (_wire(v),))
    )


class HeadersExchange:
    """A headers exchange: queues bound with argument tables, messages
    routed by their headers (RabbitMQ's rules, see the module).

    A queue is any hashable name; a (queue, arguments) pair is one binding
    (binding it again is a no-op, as in RabbitMQ); a message reaches each
    queue once however many of its bindings match.  ``limits`` go to the
    :class:`~cstrie.content.ContentIndex` underneath.  Thread-safe; ``route``
    takes no lock.
    """

    __slots__ = ("index",)

    def __init__(self, **limits: Any) -> None:
        self.index = ContentIndex("amqp", **limits)

    def bind(self, queue: Hashable, arguments: Mapping[str, Any]) -> bool:
        """Bind ``queue`` with an arguments table; True if the binding is new."""
        return self.index.bind(criteria(arguments), (queue, _args_key(arguments)))

    def unbind(self, queue: Hashable, arguments: Mapping[str, Any]) -> bool:
        """Remove that binding; True if it was there."""
        return self.index.unbind(criteria(arguments), (queue, _args_key(arguments)))

    def route(self, headers: Mapping[str, Any] | None) -> list[Any]:
        """The queues a message with these headers reaches, each once."""
        return list(dict.fromkeys(q for q, _ in self.index.match_every(headers_fields(headers))))
