"""kombu's missing ``headers`` exchange, routed by a content index.

kombu's virtual transports (memory, Redis, SQS, filesystem, ...) implement the
direct, topic and fanout exchanges, "excluding the ``headers`` exchange"
(``kombu/transport/virtual/exchange.py``): declaring one works, binding to it
raises ``KeyError: 'headers'``.  :class:`CstrieHeadersExchange` is that exchange
type, with RabbitMQ's rules (:mod:`cstrie.content.rabbitmq`: ``x-match``
``all``/``any``/``all-with-x``/``any-with-x``, ``x-`` arguments skipped unless
``-with-x``, a void (``None``) argument asks for presence, other values for an
equal header, ``"abc"`` and ``b"abc"`` equal as AMQP long strings, ``1`` and
``1.0`` and ``True`` all different).  It keeps one
:class:`~cstrie.content.rabbitmq.HeadersExchange` per exchange, so a message
costs O(its headers + the matches), not O(bindings).  The channel classes of
:mod:`cstrie.integrations.kombu` install it (``exchange_types["headers"]``)
next to the topic exchange.

Table rows
----------
kombu stores a binding as a ``(routing_key, pattern, queue)`` row.  Here the
pattern is the binding's arguments as canonical JSON (:func:`encode_arguments`:
keys sorted, ASCII only, ``bytes`` that are UTF-8 stored as the string they
spell, other ``bytes`` as ``{"$b64": ...}``), a string because the Redis
transport joins the row into one set member.  A row is routed by its
``(canonical pattern, queue)``; the routing key only tells bindings apart, as
in RabbitMQ, where a headers exchange ignores it for routing.

Where kombu differs from RabbitMQ
---------------------------------
kombu's channel identifies a binding by ``(queue, exchange, routing_key)``,
without the arguments.  Binding a queue again with the same routing key and
other arguments would be silently ignored by kombu, so the integrated channel
refuses it (``ValueError``: unbind first, or give each binding of that queue
its own routing key, which the headers exchange ignores when routing).
Unbinding with arguments the binding was not made with removes nothing
(RabbitMQ: no such binding).

Limits
------
Every binding is checked before kombu records anything (``ValueError`` /
``TypeError`` naming the queue, the exchange and the problem): at most
:attr:`CstrieHeadersExchange.max_arguments` arguments (64), keys and string
values of at most :attr:`CstrieHeadersExchange.max_value_length` characters /
UTF-8 bytes (256), values ``str``, ``bytes``, ``bool``, ``int`` (64-bit),
``float`` (not NaN) or ``None``.  Subclass to change them.  A row that reached
a table some other way (another client writing the Redis store) and breaks
them makes publishes to that exchange raise ``ValueError`` naming it, until it
is unbound: no binding is dropped silently.

Restored messages (a reject with requeue, a closed channel's unacked
messages) are routed again by their headers: the integrated channels hand the
headers to :meth:`CstrieHeadersExchange.lookup` (kombu's ``_lookup`` passes
only the routing key); a channel class without the integration routes them as
a message with no headers.
"""

from __future__ import annotations

import base64
import builtins
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from kombu.transport.virtual.exchange import ExchangeType

from cstrie.content.rabbitmq import HeadersExchange, criteria
from cstrie.integrations._kombu_table import Index, IndexedTable, Mirrors, row

__all__ = [
    "MAX_ARGUMENTS",
    "MAX_VALUE_LENGTH",
    "CstrieHeadersExchange",
    "HeadersTable",
    "decode_arguments",
    "encode_arguments",
]

#: Default limits of a binding's arguments table.
MAX_ARGUMENTS = 64
MAX_VALUE_LENGTH = 256
_B64 = "$b64"


def _limits_error(msg: str) -> ValueError:
    return ValueError(msg[:300])


def _check_value(key: str, v: Any, max_len: int) -> Any:
    """``v`` as JSON stores it; ValueError/TypeError for what a binding cannot hold."""
    if isinstance(v, str):
        n = len(v.encode("utf-8", "surrogatepass"))
    elif isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        n = len(b)
        try:
            v = b.decode("utf-8")
        except UnicodeDecodeError:
            v = {_B64: base64.b64encode(b).decode("ascii")}
    elif v is None or isinstance(v, (bool, int, float)):
        return v  # criteria() checks the range of ints and NaN
    else:
        raise TypeError(
            f"binding argument {key!r} has a value of type {type(v).__name__}; the headers "
            "exchange matches str, bytes, bool, int, float and None (presence)"[:300]
        )
    if n > max_len:
        raise _limits_error(
            f"binding argument {key!r} has a value of {n} bytes; this exchange allows {max_len}"
        )
    return v


def encode_arguments(
    arguments: Mapping[str, Any] | None,
    max_arguments: int = MAX_ARGUMENTS,
    max_value_length: int = MAX_VALUE_LENGTH,
) -> str:
    """The canonical JSON of a binding's arguments (``None`` is ``{}``):
    equal tables as RabbitMQ tells them apart give equal strings.

    Checks everything first (RabbitMQ's rules through
    :func:`cstrie.content.rabbitmq.criteria`, then the limits):
    ``ValueError``/``TypeError`` naming the argument.  O(size of the table).

    >>> encode_arguments({"x-match": "any", "b": b"\\xff", "a": 1})
    '{"a":1,"b":{"$b64":"/w=="},"x-match":"any"}'
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise TypeError(f"binding arguments must be a mapping, not {type(arguments).__name__}")
    if len(arguments) > max_arguments:
        raise _limits_error(
            f"{len(arguments)} binding arguments; this exchange allows {max_arguments}"
        )
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        if not isinstance(k, str):
            raise TypeError(f"binding argument keys are str, not {type(k).__name__}")
        if len(k) > max_value_length:
            raise _limits_error(
                f"a binding argument key of {len(k)} characters; this exchange allows "
                f"{max_value_length}"
            )
        out[k] = _check_value(k, v, max_value_length)
    criteria(arguments)  # RabbitMQ's own checks (x-match, 64-bit ints, NaN)
    return json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def decode_arguments(
    pattern: Any,
    max_arguments: int = MAX_ARGUMENTS,
    max_value_length: int = MAX_VALUE_LENGTH,
) -> dict[str, Any]:
    """The arguments table a stored pattern stands for (its inverse:
    ``encode_arguments(decode_arguments(p)) `` is canonical).  ``ValueError``
    naming the problem for anything :func:`encode_arguments` would not have
    written, whoever wrote it.  O(len(pattern))."""
    if isinstance(pattern, bytes):
        pattern = pattern.decode("utf-8", "replace")
    if not isinstance(pattern, str):
        raise ValueError(f"a headers binding pattern is a JSON string, not {pattern!r}"[:300])
    bound = 64 + max_arguments * (12 * max_value_length + 64)
    if len(pattern) > bound:
        raise ValueError(f"a headers binding pattern of {len(pattern)} characters; at most {bound}")
    try:
        raw = json.loads(pattern)
    except (ValueError, RecursionError) as exc:
        msg = f"a headers binding pattern that is not JSON ({exc}): {pattern!r}"
        raise ValueError(msg[:300]) from None
    if not isinstance(raw, dict):
        raise ValueError(f"a headers binding pattern that is not a JSON object: {pattern!r}"[:300])
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if isinstance(v, dict):
            try:
                if list(v) != [_B64]:
                    raise ValueError
                v = base64.b64decode(v[_B64], validate=True)
            except (ValueError, TypeError):
                raise ValueError(
                    f"headers binding pattern: argument {k!r} is a table: {pattern!r}"[:300]
                ) from None
        elif isinstance(v, list):
            raise ValueError(f"headers binding pattern: argument {k!r} is an array"[:300])
        out[k] = v
    try:
        encode_arguments(out, max_arguments, max_value_length)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"headers binding pattern {pattern!r}: {exc}"[:300]) from None
    return out


class _HeadersIndex(Index[HeadersExchange]):
    """A :class:`HeadersExchange` of the rows: a row's key is its
    ``(canonical pattern, queue)``.  O(arguments) engine updates per change."""

    __slots__ = ()

    max_arguments: ClassVar[int] = MAX_ARGUMENTS
    max_value_length: ClassVar[int] = MAX_VALUE_LENGTH

    def key(self, entry: Any) -> tuple[str, Any]:
        _rkey, pattern, queue = row(entry)
        try:
            args = decode_arguments(pattern, self.max_arguments, self.max_value_length)
            return encode_arguments(args, self.max_arguments, self.max_value_length), queue
        except ValueError as exc:
            raise ValueError(f"cannot route binding of queue {queue!r}: {exc}"[:400]) from None

    def new(self) -> HeadersExchange:
        return HeadersExchange(
            max_criteria=self.max_arguments, max_value_length=self.max_value_length
        )

    def bind(self, engine: HeadersExchange, key: tuple[str, Any]) -> None:
        engine.bind(key[1], self._arguments(key[0]))

    def unbind(self, engine: HeadersExchange, key: tuple[str, Any]) -> None:
        engine.unbind(key[1], self._arguments(key[0]))

    def _arguments(self, pattern: str) -> dict[str, Any]:
        return decode_arguments(pattern, self.max_arguments, self.max_value_length)


class HeadersTable(IndexedTable):
    """A kombu routing table of a headers exchange that keeps a
    :class:`~cstrie.content.rabbitmq.HeadersExchange` in step (see
    :class:`~cstrie.integrations._kombu_table.IndexedTable` for the list
    methods).  :meth:`route` answers without a lock."""

    __slots__ = ()

    index_type = _HeadersIndex

    def route(self, headers: Mapping[str, Any] | None) -> list[Any]:
        """The queues a message with these headers reaches, each once.
        O(headers + matches)."""
        return self._index.engine.route(headers)  # type: ignore[no-any-return]


class CstrieHeadersExchange(ExchangeType):
    """kombu exchange type ``headers`` with RabbitMQ's rules, on a content index.

    ``prepare_bind`` stores the arguments as canonical JSON (checked:
    ``ValueError``/``TypeError``).  ``deliver`` routes a message by its
    headers: for a :class:`HeadersTable` a lock-free index lookup; for any
    other table (a list read from Redis per publish) a per-exchange mirror is
    brought in step first, under its lock.  Queues get the message once each;
    the ``deadletter_queue`` never (as kombu's topic exchange).
    """

    type = "headers"
    #: The table an integrated channel gives a headers exchange it creates.
    table_type: ClassVar[builtins.type[IndexedTable]] = HeadersTable
    max_arguments: ClassVar[int] = MAX_ARGUMENTS
    max_value_length: ClassVar[int] = MAX_VALUE_LENGTH

    #: The index of this class's limits (a subclass gets its own).
    index_type: ClassVar[builtins.type[_HeadersIndex]] = _HeadersIndex

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A subclass with other limits gets an index and a table with them.
        super().__init_subclass__(**kwargs)
        attrs = {"__slots__": (), "max_arguments": cls.max_arguments}
        attrs["max_value_length"] = cls.max_value_length
        cls.index_type = builtins.type(f"{cls.__name__}Index", (_HeadersIndex,), attrs)
        cls.table_type = builtins.type(
            f"{cls.__name__}Table", (HeadersTable,), {"__slots__": (), "index_type": cls.index_type}
        )

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        self._mirrors = Mirrors(self.index_type)
        self._local = threading.local()

    def prepare_bind(
        self, queue: Any, exchange: Any, routing_key: Any, arguments: Any
    ) -> tuple[Any, str, Any]:
        return routing_key, self.pattern(arguments), queue

    def pattern(self, arguments: Mapping[str, Any] | None) -> str:
        """The stored pattern of a binding with these arguments (:func:`encode_arguments`)."""
        return encode_arguments(arguments, self.max_arguments, self.max_value_length)

    @contextmanager
    def routing_headers(self, headers: Mapping[str, Any] | None) -> Iterator[None]:
        """Within the block, :meth:`lookup` in this thread routes by ``headers``."""
        prev = getattr(self._local, "headers", None)
        self._local.headers = headers
        try:
            yield
        finally:
            self._local.headers = prev

    def route(self, table: Any, exchange: Any, headers: Mapping[str, Any] | None) -> list[Any]:
        """The queues of ``table`` (the rows of ``exchange``) a message with
        ``headers`` reaches, each once."""
        try:
            if isinstance(table, HeadersTable):
                return table.route(headers)
            mirror = self._mirrors.get(exchange)
            with mirror.index.lock:
                mirror.sync(table)
                return mirror.index.engine.route(headers)  # type: ignore[no-any-return]
        except (TypeError, ValueError) as exc:
            raise builtins.type(exc)(f"headers exchange {exchange!r}: {exc}"[:500]) from None

    def lookup(self, table: Any, exchange: Any, routing_key: Any, default: Any) -> set[Any]:
        """The queues for the headers :meth:`routing_headers` set in this
        thread (none: a message without headers); the routing key is ignored."""
        return set(self.route(table, exchange, getattr(self._local, "headers", None)))

    def deliver(self, message: Any, exchange: Any, routing_key: Any, **kwargs: Any) -> None:
        channel = self.channel
        with self.routing_headers(message.get("headers")):
            queues = channel._lookup(exchange, routing_key)
        deadletter = channel.deadletter_queue
        put = channel._put
        for queue in queues:
            if queue and queue != deadletter:
                put(queue, message, **kwargs)
