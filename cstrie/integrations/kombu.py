"""kombu topic exchanges routed by a :class:`cstrie.Trie`.

kombu's virtual transports (memory, Redis, SQS, filesystem, ...) route a message
published to a topic exchange with :class:`kombu.transport.virtual.exchange.TopicExchange`,
which tries one regular expression per binding: O(bindings) per message.  This
module replaces that exchange type with :class:`CstrieTopicExchange`, which
keeps a ``cstrie.Trie("amqp")`` per exchange and answers in time independent of
the number of bindings (O(w * b + m): w words in the routing key, b wildcard
branches tried per level, m matches).  The same channels also install the
``headers`` exchange kombu lacks (:class:`CstrieHeadersExchange`, RabbitMQ's
rules on a content index: :mod:`cstrie.integrations.kombu_headers`).

Enabling it
-----------
* ``Connection(transport=MemoryTransport)``, or
  :func:`register` once and then ``Connection("cstrie-memory://")``: the in-memory
  transport (the same process-wide broker state as ``memory://``).
* ``Connection("redis://...", transport=RedisTransport)``, or ``cstrie-redis://``
  after :func:`register`.
* Any other virtual transport: ``make_transport(kombu.transport.SQS.Transport)``.
* Only the exchange type, for a channel class you subclass yourself:
  :func:`make_channel`, or put ``"topic": CstrieTopicExchange`` in its
  ``exchange_types``.  Routing is then correct but each lookup compares the
  whole table with the previous one (see "Routing tables" below).

Semantics (AMQP 0-9-1 topic exchange, as RabbitMQ)
--------------------------------------------------
Routing and binding keys are split into words on ``.``; ``*`` in a binding key
matches exactly one word, ``#`` zero or more words, anywhere in the key.  Words
may be empty (``a..b`` has three words) and the empty key has zero words.  A word
that merely contains ``*`` or ``#`` (``a*``, ``#b``) is a literal.  A message is
delivered once to each queue with at least one matching binding.

Where stock kombu differs (its regular expressions; pinned by
``tests/integrations/test_integration_kombu.py``):

* ``*`` never matches an empty word (``a.*.c`` misses ``a..c``).
* ``#`` next to a dot must match at least one word: ``a.#`` misses ``a``,
  ``#.a`` misses ``a``, ``a.#.b`` misses ``a.b``, ``#.#`` misses ``a``.  Only the
  key ``#`` alone matches zero words.
* kombu 5.3 to 5.6 (``*`` is ``.*?[^.]``): ``*`` also matches several words,
  ``a.*`` matches ``a.b.c``.  kombu 5.7 fixed that.
* A ``*`` inside a word is a regex quantifier: ``ab*`` matches ``a`` and ``abbb``
  but not the literal ``ab*``; a word that starts with ``*`` (``*a``) is an
  invalid regex, and every publish to that exchange raises ``re.error``.
* ``$`` also matches before a trailing newline: ``a.b`` matches ``"a.b\\n"``;
  and ``#`` does not match across a newline inside a word.

Keys cstrie refuses
-------------------
kombu takes any string; the AMQP dialect refuses keys of more than 256 words (an
AMQP 0-9-1 key is at most 255 bytes, so at most 256 words: every key RabbitMQ can
carry fits), text that is not valid UTF-8 (lone surrogates) and non-``str``
keys.  Binding such a key through an integrated channel raises ``ValueError`` /
``TypeError`` naming the key, before kombu records the binding.  Publishing with
such a routing key raises the same from ``basic_publish``.  A binding that
reached a table some other way (a stock kombu client sharing the Redis store)
makes publishes to that exchange raise ``ValueError`` naming it, until it is
unbound: the integration never drops a binding silently.

Routing tables
--------------
kombu keeps an exchange's bindings as a list of ``(routing_key, regex, queue)``
triples (the regex is kombu's own, stored unchanged so that stock clients that
share a store keep working).  Transports that keep the list in their broker
state (memory, SQS, filesystem, ...) get a :class:`TrieTable` there: a ``list``
subclass that keeps its trie in step with every mutation, so a lookup costs
nothing extra.  Transports that rebuild the list on every publish from an
external store (Redis reads a set per exchange with ``SMEMBERS``) hand the
exchange type a fresh list each time; the exchange type then keeps a mirror per
exchange and compares the list with it (O(bindings), but a C-level comparison,
far cheaper than a regex per binding and than the ``SMEMBERS`` itself) and
applies only the difference to the trie.  Bindings made by other processes are
therefore seen on the next publish.

Threads
-------
kombu may call from several threads.  Lookups are lock-free trie reads.  Every
change of a table and of its trie happens under the table's lock, and the
(routing_key, queue) multiplicities are counted there, so duplicate entries (two
binds racing past kombu's ``has_binding`` check) and concurrent binds and
unbinds leave the trie equal to the table.  Creating a topic exchange's table
and binding to it are serialised by a module lock, so no bind lands in a table
that is being replaced.  Mixing stock kombu channels with integrated ones in one
process stays correct: a table created by a stock channel stays a plain list and
is routed through the mirror.
"""

from __future__ import annotations

import builtins
import threading
from typing import Any, ClassVar

try:
    from kombu.transport import TRANSPORT_ALIASES
    from kombu.transport import memory as _memory
    from kombu.transport import virtual as _virtual
    from kombu.transport.virtual.exchange import TopicExchange
except ImportError as exc:  # pragma: no cover - exercised only without kombu
    raise ImportError(
        "cstrie.integrations.kombu needs kombu 5.3 or newer: pip install 'cstrie[kombu]'"
    ) from exc

from cstrie.dialect import AMQP, shown
from cstrie.integrations._kombu_table import Index, IndexedTable, Mirrors, row
from cstrie.integrations.kombu_headers import CstrieHeadersExchange
from cstrie.trie import Trie

__all__ = [
    "ALIASES",
    "CstrieChannelMixin",
    "CstrieHeadersExchange",
    "CstrieTopicExchange",
    "MemoryChannel",
    "MemoryTransport",
    "RedisChannel",  # noqa: F822 - made on first use by __getattr__
    "RedisTransport",  # noqa: F822
    "TrieTable",
    "check_binding_key",
    "make_channel",
    "make_transport",
    "register",
]

#: Transport aliases :func:`register` adds to kombu's ``TRANSPORT_ALIASES``
#: (``Connection("cstrie-memory://")``).
ALIASES: dict[str, str] = {
    "cstrie-memory": "cstrie.integrations.kombu:MemoryTransport",
    "cstrie-redis": "cstrie.integrations.kombu:RedisTransport",
}

_Key = tuple[Any, Any]

#: ``type``: channel methods below have a parameter of that name (kombu's).
type_of = type


def _binding_error(exc: Exception, rkey: object, queue: object) -> Exception:
    key = shown(rkey) if isinstance(rkey, str) else repr(rkey)
    return type(exc)(f"cannot route binding key {key} of queue {queue!r} with cstrie: {exc}")


def _routing_key_error(exc: Exception, exchange: object) -> Exception:
    return type(exc)(f"routing key of a message to topic exchange {exchange!r}: {exc}")


class _TrieIndex(Index[Trie]):
    """A ``Trie("amqp")`` of routing_key -> queue: a row's key is its
    ``(routing_key, queue)``.  O(w + log n) per update."""

    __slots__ = ()

    def key(self, entry: Any) -> _Key:
        rkey, _regex, queue = row(entry)
        return rkey, queue

    def new(self) -> Trie:
        return Trie(AMQP)

    def bind(self, engine: Trie, key: _Key) -> None:
        try:
            engine.subscribe(key[0], key[1])
        except (TypeError, ValueError) as exc:
            raise _binding_error(exc, key[0], key[1]) from None

    def unbind(self, engine: Trie, key: _Key) -> None:
        engine.unsubscribe(key[0], key[1])


class TrieTable(IndexedTable):
    """A kombu routing table that keeps a ``cstrie.Trie("amqp")`` in step.

    A ``list`` of ``(routing_key, regex, queue)`` triples, as kombu's virtual
    channel keeps per exchange (``state.exchanges[name]["table"]``).  Every
    mutating list method updates the trie under the table's lock (see
    :class:`~cstrie.integrations._kombu_table.IndexedTable`).  An entry whose
    routing key the AMQP dialect refuses raises ``ValueError`` /
    ``TypeError`` naming it, and the table stays as it was.  :meth:`route`
    answers from the trie without a lock.

    Costs: ``append`` O(w + log n); slice assignment and ``extend`` O(k) trie
    updates for k entries written or replaced (a whole-table ``t[:] = ...`` is
    O(n) dictionary work, as kombu's own unbind already is O(n));
    :meth:`discard` O(n) C-level scan plus O(w + log n).
    """

    __slots__ = ()

    index_type = _TrieIndex

    def route(self, routing_key: str) -> list[Any]:
        """The queues of every entry whose binding key matches ``routing_key``,
        each once.  Lock-free.  O(w * b + m)."""
        return self._index.engine.lookup(routing_key)  # type: ignore[no-any-return]

    @property
    def trie(self) -> Trie:
        """The trie (binding key -> queue) kept in step with this table."""
        return self._index.engine  # type: ignore[no-any-return]


class CstrieTopicExchange(TopicExchange):
    """kombu's ``topic`` exchange type with AMQP-exact routing by a cstrie trie.

    :meth:`lookup` returns the set of queues, as the stock type does.  For a
    :class:`TrieTable` it is a lock-free trie lookup, O(w * b + m) whatever the
    number of bindings; for any other table (a list read from Redis per publish,
    or one a stock channel created) the exchange type first brings a per-exchange
    mirror in step with it (see the module docstring), under the mirror's lock.

    ``prepare_bind`` is inherited: the stored entry keeps kombu's regex, so
    stock clients sharing a store (Redis) keep routing and unbinding as before.
    """

    type = "topic"
    #: The table an integrated channel gives a topic exchange it creates.
    table_type: ClassVar[builtins.type[IndexedTable]] = TrieTable

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        self._mirrors = Mirrors(_TrieIndex)

    def lookup(self, table: Any, exchange: Any, routing_key: Any, default: Any) -> set[Any]:
        """The queues whose binding keys match ``routing_key`` (AMQP rules)."""
        if isinstance(table, TrieTable):
            try:
                return set(table._index.engine.lookup(routing_key))
            except (TypeError, ValueError) as exc:
                raise _routing_key_error(exc, exchange) from None
        mirror = self._mirrors.get(exchange)
        with mirror.index.lock:
            mirror.sync(table)
            try:
                return set(mirror.index.engine.lookup(routing_key))
            except (TypeError, ValueError) as exc:
                raise _routing_key_error(exc, exchange) from None


def check_binding_key(routing_key: object) -> None:
    """Raise ``TypeError`` / ``ValueError`` naming the problem if the AMQP dialect
    refuses ``routing_key`` as a binding key.  O(len(routing_key))."""
    AMQP.split_pattern(routing_key)


#: The exchange types the integrated channels install (kombu's ``exchange_types``).
EXCHANGE_TYPES: dict[str, builtins.type[Any]] = {
    "topic": CstrieTopicExchange,
    "headers": CstrieHeadersExchange,
}

#: Serialises the creation of a topic exchange's table (and its replacement by a
#: TrieTable) with binds through integrated channels.
_TABLE_LOCK = threading.RLock()


class CstrieChannelMixin(_virtual.Channel):
    """Channel behaviour of the integration; use :func:`make_channel`.

    * ``exchange_types["topic"]`` is :class:`CstrieTopicExchange`;
    * a topic exchange this channel creates gets a :class:`TrieTable` as its
      table, when the transport keeps tables in its broker state (it does not
      override ``get_table``);
    * ``queue_bind`` to a topic exchange checks the binding key first
      (``ValueError`` / ``TypeError`` before kombu records anything);
    * ``queue_unbind`` from a :class:`TrieTable` removes the entry with a
      C-level scan instead of rebuilding the list.
    """

    exchange_types: ClassVar[dict[str, Any]] = {
        **_virtual.Channel.exchange_types,
        **EXCHANGE_TYPES,
    }

    def _cstrie_local_tables(self) -> bool:
        return type(self).get_table is _virtual.Channel.get_table

    def _cstrie_topic(self, exchange: Any) -> bool:
        return isinstance(self.typeof(exchange), CstrieTopicExchange)

    def exchange_declare(
        self,
        exchange: Any = None,
        type: Any = "direct",
        durable: bool = False,
        auto_delete: bool = False,
        arguments: Any = None,
        nowait: bool = False,
        passive: bool = False,
    ) -> Any:
        kwargs = {
            "exchange": exchange,
            "type": type,
            "durable": durable,
            "auto_delete": auto_delete,
            "arguments": arguments,
            "nowait": nowait,
            "passive": passive,
        }
        if passive or not self._cstrie_local_tables():
            return super().exchange_declare(**kwargs)
        name = exchange or f"amq.{type or 'direct'}"
        with _TABLE_LOCK:
            existed = name in self.state.exchanges
            result = super().exchange_declare(**kwargs)
            table_type = getattr(self.typeof(name), "table_type", None)
            if not existed and table_type is not None:
                record = self.state.exchanges[name]
                table = record.get("table")
                if type_of(table) is list:
                    record["table"] = table_type(table)
            return result

    def queue_bind(
        self,
        queue: Any,
        exchange: Any = None,
        routing_key: Any = "",
        arguments: Any = None,
        **kwargs: Any,
    ) -> Any:
        target = exchange or "amq.direct"
        if isinstance(self.typeof(target), CstrieHeadersExchange):
            return self._cstrie_headers_bind(queue, target, routing_key, arguments, **kwargs)
        if not self._cstrie_topic(target):
            return super().queue_bind(queue, exchange, routing_key, arguments, **kwargs)
        try:
            check_binding_key(routing_key)
        except (TypeError, ValueError) as exc:
            raise type_of(exc)(
                f"cannot bind queue {queue!r} to topic exchange {target!r}: {exc}"
            ) from None
        if not self._cstrie_local_tables():
            return super().queue_bind(queue, exchange, routing_key, arguments, **kwargs)
        with _TABLE_LOCK:
            return super().queue_bind(queue, exchange, routing_key, arguments, **kwargs)

    def queue_unbind(
        self,
        queue: Any,
        exchange: Any = None,
        routing_key: Any = "",
        arguments: Any = None,
        **kwargs: Any,
    ) -> Any:
        ex = self.typeof(exchange)
        if isinstance(ex, CstrieHeadersExchange) and not self._cstrie_headers_bound(
            ex, queue, exchange, routing_key, arguments
        ):
            return None  # no binding with these arguments: RabbitMQ removes nothing
        record = self.state.exchanges.get(exchange) if self._cstrie_local_tables() else None
        table = record.get("table") if record else None
        if not isinstance(table, IndexedTable):
            return super().queue_unbind(queue, exchange, routing_key, arguments, **kwargs)
        # kombu's queue_unbind, with the O(n) list rebuild replaced by discard().
        self.state.binding_delete(queue, exchange, routing_key)
        meta = self.typeof(exchange).prepare_bind(queue, exchange, routing_key, arguments)
        table.discard(meta)
        return None

    # ------------------------------------------------------------ headers
    def _cstrie_headers_bound(
        self, ex: CstrieHeadersExchange, queue: Any, exchange: Any, rkey: Any, arguments: Any
    ) -> bool:
        """Whether kombu's record of (queue, exchange, rkey), if any, has these
        arguments (as RabbitMQ compares tables); checks ``arguments`` first."""
        try:
            pattern = ex.pattern(arguments)
        except (TypeError, ValueError) as exc:
            raise type_of(exc)(
                f"headers exchange {exchange!r}, queue {queue!r}: {exc}"[:400]
            ) from None
        key = (queue, exchange, rkey)
        if not self.state.has_binding(*key):
            return True
        return bool(ex.pattern(self.state.bindings[_virtual.base.binding_key_t(*key)]) == pattern)

    def _cstrie_headers_bind(
        self, queue: Any, exchange: Any, rkey: Any, arguments: Any, **kwargs: Any
    ) -> Any:
        ex = self.typeof(exchange)
        try:
            ex.pattern(arguments)
        except (TypeError, ValueError) as exc:
            raise type_of(exc)(
                f"cannot bind queue {queue!r} to headers exchange {exchange!r}: {exc}"[:400]
            ) from None
        with _TABLE_LOCK:
            if not self._cstrie_headers_bound(ex, queue, exchange, rkey, arguments):
                raise ValueError(
                    f"queue {queue!r} is already bound to headers exchange {exchange!r} with "
                    f"routing key {rkey!r} and other arguments; kombu keeps one binding per "
                    "(queue, exchange, routing key): unbind it first, or bind with another "
                    "routing key (a headers exchange ignores it)"[:500]
                )
            return super().queue_bind(queue, exchange, rkey, arguments, **kwargs)

    def _cstrie_headers_of(self, exchange: Any) -> CstrieHeadersExchange | None:
        ex = self.typeof(exchange) if exchange else None
        return ex if isinstance(ex, CstrieHeadersExchange) else None

    def _restore(self, message: Any, *args: Any, **kwargs: Any) -> Any:
        # kombu routes a restored message again with its routing key only; a
        # headers exchange needs its headers.
        ex = self._cstrie_headers_of(message.delivery_info.get("exchange"))
        if ex is None:
            return super()._restore(message, *args, **kwargs)
        with ex.routing_headers(message.headers):
            return super()._restore(message, *args, **kwargs)

    def _do_restore_message(
        self, payload: Any, exchange: Any, routing_key: Any, *args: Any, **kwargs: Any
    ) -> Any:
        # The Redis transport's restore of unacked messages (not on every channel).
        restore = super()._do_restore_message
        ex = self._cstrie_headers_of(exchange)
        if ex is None:
            return restore(payload, exchange, routing_key, *args, **kwargs)
        headers = payload.get("headers") if isinstance(payload, dict) else None
        with ex.routing_headers(headers):
            return restore(payload, exchange, routing_key, *args, **kwargs)


def make_channel(base: type[Any], name: str | None = None) -> type[Any]:
    """A subclass of the virtual channel class ``base`` with the integration,
    called ``name`` (default ``"Cstrie" + base.__name__``).

    ``base.exchange_types`` is kept but for ``"topic"``.  A class that already
    has the integration is returned as it is.  ``TypeError`` for anything that
    is not a kombu virtual channel class.  O(1).
    """
    if not (isinstance(base, type) and issubclass(base, _virtual.Channel)):
        raise TypeError(f"make_channel() needs a kombu virtual Channel class, not {base!r}")
    if issubclass(base, CstrieChannelMixin):
        return base
    return type_of(
        name or f"Cstrie{base.__name__}",
        (CstrieChannelMixin, base),
        {
            "__module__": __name__,
            "__doc__": f"{base.__module__}.{base.__qualname__} with cstrie topic routing.",
            "exchange_types": {**base.exchange_types, **EXCHANGE_TYPES},
        },
    )


def make_transport(base: type[Any], name: str | None = None) -> type[Any]:
    """A subclass of the virtual transport class ``base`` whose channels route
    topic exchanges with cstrie (``Channel = make_channel(base.Channel)``),
    called ``name`` (default ``"Cstrie" + base.__name__``).

    Only kombu's virtual transports route in Python; ``pyamqp`` and other
    transports to a real broker let the broker route, so they raise
    ``TypeError``.  O(1).
    """
    if not (isinstance(base, type) and issubclass(base, _virtual.Transport)):
        raise TypeError(
            f"make_transport() needs a kombu virtual Transport class (memory, redis, SQS, "
            f"...), not {base!r}; transports to a real AMQP broker let the broker route"
        )
    if issubclass(base.Channel, CstrieChannelMixin):
        return base
    channel_name = (
        f"{name[: -len('Transport')]}Channel" if name and name.endswith("Transport") else None
    )
    return type_of(
        name or f"Cstrie{base.__name__}",
        (base,),
        {
            "__module__": __name__,
            "__doc__": f"{base.__module__}.{base.__qualname__} with cstrie topic routing.",
            "Channel": make_channel(base.Channel, channel_name),
        },
    )


class MemoryChannel(CstrieChannelMixin, _memory.Channel):
    """kombu's in-memory channel with cstrie topic routing."""

    exchange_types: ClassVar[dict[str, Any]] = {
        **_memory.Channel.exchange_types,
        **EXCHANGE_TYPES,
    }


class MemoryTransport(_memory.Transport):
    """kombu's in-memory transport (same process-wide broker state as
    ``memory://``) with cstrie topic routing."""

    Channel = MemoryChannel


def __getattr__(name: str) -> Any:
    # The Redis classes are made on first use: importing kombu.transport.redis
    # costs time, and most users of this module never need it.
    if name in ("RedisTransport", "RedisChannel"):
        from kombu.transport import redis as _redis

        transport = make_transport(_redis.Transport, "RedisTransport")
        globals().update(RedisTransport=transport, RedisChannel=transport.Channel)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """Add the transport aliases of :data:`ALIASES` to kombu
    (``Connection("cstrie-memory://")``, ``cstrie-redis://host:6379/0``).

    Idempotent.  ``ValueError`` if an alias is already taken by something else.
    """
    for alias, path in ALIASES.items():
        current = TRANSPORT_ALIASES.setdefault(alias, path)
        if current != path:
            raise ValueError(f"kombu transport alias {alias!r} is already taken by {current!r}")
