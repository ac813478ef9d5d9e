"""Shared by the kombu integration tests: the word-level matching models the
differential tests compare against, checks of a routing table's routing counted
per entry, sessions of real kombu clients, and a real ``redis-server`` for the
Redis transport's tests.

Only imported by modules that ran ``pytest.importorskip("kombu")`` first.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import redis_server
from kombu import Connection, Consumer, Exchange, Queue, binding
from kombu.transport import memory as kmemory
from kombu.transport import virtual as kvirtual
from kombu.transport.virtual.exchange import TopicExchange

from cstrie.integrations.kombu import CstrieTopicExchange

# ----------------------------------------------------------------- the models
#
# A key is its text split on ".", except that "" is zero words.  The AMQP model is
# written from AMQP 0-9-1 section 3.1.3.3 (and RabbitMQ's treatment of empty
# words): "*" one word, "#" zero or more words, any other word only itself.  The
# stock models are the differences docs/brokers.md documents for kombu's regexes,
# restricted to keys without newlines and without "*" inside a word (those are
# pinned by example tests instead):
#
#   kombu 5.7:      "*" one non-empty word;  "#" one or more words (each may be
#                   empty), but the key "#" alone matches zero or more.
#   kombu 5.3-5.6:  "*" one or more words, the last one non-empty;  "#" as 5.7.


def words(text: str) -> list[str]:
    return text.split(".") if text else []


def model_match(pattern: str, topic: str, rules: str) -> bool:
    """Does ``pattern`` match ``topic`` under ``rules`` ("amqp", "kombu5.7", "kombu5.3")?"""
    p, t = words(pattern), words(topic)
    star = {"amqp": "one", "kombu5.7": "one-nonempty", "kombu5.3": "several-last-nonempty"}[rules]
    hash_min = 0 if rules == "amqp" or p == ["#"] else 1

    @cache
    def m(i: int, j: int) -> bool:
        if i == len(p):
            return j == len(t)
        w = p[i]
        if w == "#":
            return any(m(i + 1, k) for k in range(j + hash_min, len(t) + 1))
        if w == "*":
            if star == "one":
                return j < len(t) and m(i + 1, j + 1)
            if star == "one-nonempty":
                return j < len(t) and t[j] != "" and m(i + 1, j + 1)
            return any(t[k - 1] != "" and m(i + 1, k) for k in range(j + 1, len(t) + 1))
        return j < len(t) and t[j] == w and m(i + 1, j + 1)

    return m(0, 0)


class Kombu57TopicExchange(TopicExchange):  # type: ignore[misc]
    """kombu 5.7's topic exchange (whatever kombu is installed): its regex table."""

    wildcards = {"*": r"[^\.]+", "#": r".*?"}  # noqa: RUF012 - kombu's own attribute
    _compiled: dict[str, Any] = {}  # noqa: RUF012


class Kombu53TopicExchange(TopicExchange):  # type: ignore[misc]
    """kombu 5.3-5.6's topic exchange: its regex table."""

    wildcards = {"*": r".*?[^\.]", "#": r".*?"}  # noqa: RUF012
    _compiled: dict[str, Any] = {}  # noqa: RUF012


#: The stock rules of the installed kombu (None: a regex table nobody documented).
INSTALLED_RULES = {
    v.wildcards["*"]: k
    for k, v in (("kombu5.7", Kombu57TopicExchange), ("kombu5.3", Kombu53TopicExchange))
}.get(TopicExchange.wildcards["*"])
if TopicExchange.wildcards["#"] != r".*?":
    INSTALLED_RULES = None


def stock_matches(pattern: str, topic: str, rules: str) -> bool:
    """kombu's regex lookup for one binding: the installed ``TopicExchange`` code
    with the regex table of ``rules`` ("kombu5.7", "kombu5.3" or "installed")."""
    cls = {
        "kombu5.7": Kombu57TopicExchange,
        "kombu5.3": Kombu53TopicExchange,
        "installed": TopicExchange,
    }[rules]
    e = cls(None)
    table = [(pattern, e.key_to_pattern(pattern), "q")]
    return bool(e.lookup(table, "x", topic, None))


# Keys on which stock kombu (either regex table) and AMQP agree: non-empty words and
# no "*" (the 5.3-5.6 "*" spans words), "#" only as a whole key.
SAFE_BINDINGS = ["a", "b", "a.b", "a.c", "b.c.a", "c.c", "#", "a.b.c"]
SAFE_KEYS = ["a", "b", "a.b", "a.c", "b.c.a", "c.c", "a.b.c", "c", "b.b", "a.a.a.a"]


# ------------------------------------------------------ routing tables, counted
#
# A kombu routing table is a list of (binding key, regex, queue) entries; a
# message is delivered once to each queue with at least one matching entry.  The
# same (binding key, queue) may be in the table several times (kombu keeps every
# entry it is given): the queue stays routed until the last of them is gone, so a
# table's routing is a count per pair, not a set.


def pair_counts(entries: Iterable[Any]) -> Counter[tuple[Any, Any]]:
    """(binding key, queue) -> how many of ``entries`` hold that pair."""
    return Counter((rkey, queue) for rkey, _regex, queue in entries)


def amqp_routes(entries: Iterable[Any], topic: str) -> Counter[Any]:
    """queue -> how many of ``entries`` route ``topic`` to it (AMQP rules)."""
    return Counter(queue for rkey, _regex, queue in entries if model_match(rkey, topic, "amqp"))


def assert_in_step(table: Any) -> None:
    """``table`` (a ``TrieTable``) counts each (binding key, queue) pair as often as
    its list holds it, and its trie holds exactly the pairs counted at least once."""
    want = pair_counts(list(table))
    assert dict(table._index.counts) == dict(want)
    trie = {(p, q) for p, subs in table.trie.subscriptions().items() for q in subs}
    assert trie == set(want)
    assert len(table.trie) == len(want)


def assert_routes_as(table: Any, model: Sequence[Any], topics: Iterable[str]) -> None:
    """For each topic: the queues ``table`` routes it to (its trie, and the
    integrated exchange type kombu calls) are those ``model``'s entries route it to,
    and the table counts as many entries per queue as ``model`` has."""
    exchange = CstrieTopicExchange(None)
    for topic in topics:
        want = amqp_routes(model, topic)
        assert set(table.route(topic)) == set(want), topic
        assert exchange.lookup(table, "x", topic, None) == set(want), topic
        counted: Counter[Any] = Counter()
        for (rkey, queue), n in table._index.counts.items():
            if model_match(rkey, topic, "amqp"):
                counted[queue] += n
        assert counted == want, topic


def assert_drains_as_a_list(table: Any, topics: Sequence[str]) -> None:
    """Pop every entry of ``table`` one at a time, alternately from the middle and
    the end; after each pop it routes as a plain list of the entries left, and once
    empty it routes nothing.  Only the routing is compared (no bookkeeping): a
    table that counts a pair too often keeps routing a queue after its last entry."""
    left = list(table)
    while left:
        i = len(left) // 2 if len(left) % 2 else -1
        assert table.pop(i) == left.pop(i)
        for topic in topics:
            assert set(table.route(topic)) == set(amqp_routes(left, topic)), (topic, left)
    assert list(table) == [] and len(table.trie) == 0


# ------------------------------------------------------------- real sessions
def isolated(transport_cls: type[Any]) -> type[Any]:
    """A memory transport class with a broker state and message queues of its own
    (``memory://`` keeps both process-wide, so sessions would see each other)."""
    channel = type(f"Iso{transport_cls.Channel.__name__}", (transport_cls.Channel,), {"queues": {}})
    return type(
        f"Iso{transport_cls.__name__}",
        (transport_cls,),
        {"Channel": channel, "global_state": kvirtual.BrokerState()},
    )


STOCK: type[Any] = kmemory.Transport


def drain_all(conn: Connection, channel: Any, names: Iterable[str]) -> dict[str, list[Any]]:
    """Every message waiting in the named queues, by kombu ``Consumer`` callbacks
    and ``Connection.drain_events``: queue -> [(payload["i"], routing_key)]."""
    got: dict[str, list[Any]] = {n: [] for n in names}
    if not got:
        return got
    consumers = []
    for name in got:
        c = Consumer(channel, [Queue(name, no_declare=True)], no_ack=True, auto_declare=False)

        def on_message(body: Any, message: Any, into: list[Any] = got[name]) -> None:
            into.append((body["i"], message.delivery_info["routing_key"]))

        c.register_callback(on_message)
        c.consume()
        consumers.append(c)
    while True:
        try:
            conn.drain_events(timeout=0.02)
        except TimeoutError:
            break
    for c in consumers:
        c.cancel()
    return got


class Session:
    """One kombu connection on an isolated memory transport with a topic exchange."""

    def __init__(self, transport_cls: type[Any], exchange: str = "session") -> None:
        self.transport = isolated(transport_cls)
        self.conn = Connection(transport=self.transport)
        self.channel = self.conn.channel()
        self.exchange = Exchange(exchange, type="topic")
        self.exchange(self.channel).declare()
        self.producer = self.conn.Producer(self.channel, exchange=self.exchange)
        self.queues: set[str] = set()

    def close(self) -> None:
        self.conn.release()

    @property
    def table(self) -> Any:
        return self.channel.state.exchanges[self.exchange.name]["table"]

    def bind(self, queue: str, keys: Sequence[str]) -> None:
        """Declare ``queue`` bound with each of ``keys`` (kombu ``Queue(bindings=...)``)."""
        q = Queue(queue, bindings=[binding(self.exchange, routing_key=k) for k in keys])
        q(self.channel).declare()
        self.queues.add(queue)

    def unbind(self, queue: str, key: str) -> None:
        Queue(queue, no_declare=True)(self.channel).unbind_from(self.exchange, routing_key=key)

    def delete(self, queue: str) -> None:
        Queue(queue, no_declare=True)(self.channel).delete()

    def publish(self, keys: Sequence[str], start: int = 0) -> None:
        for i, k in enumerate(keys, start):
            self.producer.publish({"i": i}, routing_key=k, serializer="json")

    def get_all(self) -> dict[str, list[Any]]:
        """Every waiting message, by ``Queue.get`` (basic_get)."""
        out: dict[str, list[Any]] = {}
        for name in sorted(self.queues):
            bound = Queue(name, no_declare=True)(self.channel)
            got = out[name] = []
            while (m := bound.get(no_ack=True)) is not None:
                got.append((m.payload["i"], m.delivery_info["routing_key"]))
        return out

    def drain(self) -> dict[str, list[Any]]:
        return drain_all(self.conn, self.channel, sorted(self.queues))


def run_session(
    transport_cls: type[Any],
    bindings: dict[str, list[str]],
    keys: Sequence[str],
    *,
    consume: str = "get",
) -> dict[str, list[Any]]:
    """Bind, publish one message per key (payload ``{"i": index}``), collect all."""
    s = Session(transport_cls)
    try:
        for queue, qkeys in bindings.items():
            s.bind(queue, qkeys)
        s.publish(keys)
        return s.get_all() if consume == "get" else s.drain()
    finally:
        s.close()


def expected(
    bindings: dict[str, list[str]], keys: Sequence[str], rules: str
) -> dict[str, list[Any]]:
    """What a session should deliver under ``rules``: each queue gets, in order,
    every message with at least one matching binding, once."""
    return {
        q: [(i, k) for i, k in enumerate(keys) if any(model_match(b, k, rules) for b in qkeys)]
        for q, qkeys in sorted(bindings.items())
    }


# ------------------------------------------------------- a real redis-server
# (tests/support/redis_server.py, shared with the selector index's Redis oracle)
REDIS_SERVER = redis_server.REDIS_SERVER
RedisServer = redis_server.RedisServer


def drain_counted(
    conn: Connection, channel: Any, names: Iterable[str], count: int, limit: float = 60.0
) -> dict[str, list[Any]]:
    """Consume from the named queues with kombu ``Consumer`` callbacks and
    ``Connection.drain_events`` until ``count`` messages came or ``limit`` seconds
    passed: queue -> [(payload["i"], routing_key)].  For transports whose
    deliveries take a round trip (Redis): the caller knows how many to expect,
    and then checks that nothing is left waiting."""
    got: dict[str, list[Any]] = {n: [] for n in names}
    consumers = []
    for name in got:
        c = Consumer(channel, [Queue(name, no_declare=True)], no_ack=True, auto_declare=False)

        def on_message(body: Any, message: Any, into: list[Any] = got[name]) -> None:
            into.append((body["i"], message.delivery_info["routing_key"]))

        c.register_callback(on_message)
        c.consume()
        consumers.append(c)
    deadline = time.monotonic() + limit
    while sum(map(len, got.values())) < count and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            conn.drain_events(timeout=0.5)
    for c in consumers:
        c.cancel()
    return got
