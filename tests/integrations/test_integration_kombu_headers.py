"""kombu's headers exchange (cstrie.integrations.kombu_headers) with real producers
and consumers, on the memory transport and on the Redis transport against a real
``redis-server`` (tests/integrations/conftest.py).

Rules, from RabbitMQ (``rabbit_exchange_type_headers.erl`` and its docs): a
binding's arguments are matched against the message's headers; ``x-match``
``all`` (also when absent) needs every argument, ``any`` one of them; ``x-``
arguments count only in ``all-with-x`` / ``any-with-x``; a void argument asks for
presence; values compare with Erlang's ``=:=`` (``1`` is not ``1.0`` nor
``true``; ``"abc"`` and ``b"abc"`` are both long strings); ``all`` with nothing to
check takes every message, ``any`` none; each queue gets a message once.  The
scenarios mirror RabbitMQ's own tests (exchanges_SUITE, dead_lettering_SUITE,
amqp_client_SUITE, rabbitmq_mqtt v5_SUITE), as tests/content/test_content_rabbitmq.py
ports them to the adapter, here end to end through kombu.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any, ClassVar

import pytest

pytest.importorskip("kombu")

import kombu_helpers as kh
from kombu import Connection, Exchange, Queue
from kombu.transport import memory as kmemory

from cstrie.integrations import kombu as ck
from cstrie.integrations import kombu_headers as khd

MEMORY = "memory"
REDIS = "redis"


# ------------------------------------------------------------------ sessions
class Broker:
    """One kombu connection, a headers exchange ``hx`` and helpers."""

    def __init__(self, conn: Connection, exchange: str = "hx") -> None:
        self.conn = conn
        self.ch = conn.channel()
        self.ex = Exchange(exchange, type="headers")
        self.producer = conn.Producer(self.ch, exchange=self.ex)
        self.n = 0

    def bind(self, queue: str, arguments: Any, routing_key: str = "") -> Queue:
        q = Queue(queue, self.ex, routing_key=routing_key, binding_arguments=arguments)(self.ch)
        q.declare()
        return q

    def unbind(self, queue: str, arguments: Any, routing_key: str = "") -> None:
        Queue(queue, self.ex, no_declare=True)(self.ch).unbind_from(
            self.ex, routing_key=routing_key, arguments=arguments
        )

    def publish(self, headers: Mapping[str, Any] | None) -> int:
        self.n += 1
        self.producer.publish({"i": self.n}, headers=headers, serializer="json")
        return self.n

    def received(self, queues: list[str]) -> dict[str, list[int]]:
        """Every waiting message of the queues, by Consumer callbacks and drain_events."""
        if self.conn.transport_cls == REDIS or "Redis" in type(self.conn.transport).__name__:
            waiting = sum(self.size(q) for q in queues)
            got = kh.drain_counted(self.conn, self.ch, queues, waiting, limit=10)
        else:
            got = kh.drain_all(self.conn, self.ch, queues)
        for q in queues:
            assert self.size(q) == 0
        return {q: sorted(i for i, _ in got[q]) for q in queues}

    def size(self, queue: str) -> int:
        return int(self.ch._size(queue))

    def table(self) -> Any:
        return self.ch.get_table(self.ex.name)


@pytest.fixture(params=[MEMORY, REDIS])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    if request.param == MEMORY:
        conn = Connection(transport=kh.isolated(ck.MemoryTransport))
    else:
        url = request.getfixturevalue("redis_url")
        conn = Connection(url, transport=ck.RedisTransport)
    with conn:
        yield Broker(conn)


@pytest.fixture
def memory() -> Iterator[Broker]:
    with Connection(transport=kh.isolated(ck.MemoryTransport)) as conn:
        yield Broker(conn)


def _one_each(b: Broker, names: list[str], headers: Mapping[str, Any] | None) -> list[str]:
    """The queues one message with ``headers`` reached (each at most once)."""
    i = b.publish(headers)
    got = b.received(names)
    for q, ids in got.items():
        assert ids in ([], [i]), (q, ids)
    return sorted(q for q, ids in got.items() if ids)


# ------------------------------------------------------- RabbitMQ's own tests
def test_exchanges_suite_headers_exchange(broker: Broker) -> None:
    broker.bind("q", {"x-match": "all", "foo": "bar", "fuu": "ber"})
    broker.bind("alt", {"x-match": "any", "foo": "bar", "fuu": "ber"})
    names = ["q", "alt"]
    assert _one_each(broker, names, {"foo": "bar", "fuu": "ber"}) == ["alt", "q"]
    assert _one_each(broker, names, {"foo": "bar"}) == ["alt"]
    assert _one_each(broker, names, None) == []


def test_exchanges_suite_key_presence_only(broker: Broker) -> None:
    broker.bind("all", {"x-match": "all-with-x", "foo": None, "x-foo": None})
    broker.bind("any", {"x-match": "any-with-x", "foo": None, "x-foo": None})
    names = ["all", "any"]
    assert _one_each(broker, names, {"foo": "anything", "x-foo": 42}) == ["all", "any"]
    assert _one_each(broker, names, {"foo": "whatever"}) == ["any"]
    assert _one_each(broker, names, {"x-foo": "something"}) == ["any"]
    assert _one_each(broker, names, {"other": "value"}) == []
    assert _one_each(broker, names, {}) == []


def test_dead_lettering_suite_first_death_route(broker: Broker) -> None:
    broker.bind(
        "expired",
        {"x-match": "all-with-x", "x-first-death-reason": "expired", "x-first-death-queue": "q1"},
    )
    broker.bind("rejected", {"x-match": "any-with-x", "x-first-death-reason": "rejected"})
    names = ["expired", "rejected"]
    h = {"x-first-death-reason": "expired", "x-first-death-queue": "q1"}
    assert _one_each(broker, names, h) == ["expired"]
    h = {"x-first-death-reason": "expired", "x-first-death-queue": "q2"}
    assert _one_each(broker, names, h) == []
    h = {"x-first-death-reason": "rejected", "x-first-death-queue": "q2"}
    assert _one_each(broker, names, h) == ["rejected"]


def test_mqtt_v5_suite_user_properties(broker: Broker) -> None:
    broker.bind("q1", {"x-match": "any", "k1": "v1", "k2": "v2"})
    broker.bind("q2", {"x-match": "all-with-x", "k1": "v1", "k2": "v2", "x-k3": "🐇"})
    names = ["q1", "q2"]
    assert _one_each(broker, names, {"k1": "v1", "k2": "v2", "x-k3": "🐇"}) == ["q1", "q2"]
    assert _one_each(broker, names, {}) == []
    assert _one_each(broker, names, {"k1": "nope"}) == []
    assert _one_each(broker, names, {"k2": "v2"}) == ["q1"]


def test_amqp_client_suite_any_with_x(broker: Broker) -> None:
    broker.bind("apple", {"x-fruit": "apple", "x-match": "any-with-x"})
    broker.bind("banana", {"x-fruit": "banana", "x-match": "any-with-x"})
    names = ["apple", "banana"]
    assert _one_each(broker, names, {"x-fruit": "apple"}) == ["apple"]
    assert _one_each(broker, names, {"x-fruit": "banana"}) == ["banana"]
    assert _one_each(broker, names, {}) == []


def test_x_arguments_skipped_without_with_x(broker: Broker) -> None:
    broker.bind("all", {"x-match": "all", "x-foo": "bar", "a": 1})
    broker.bind("any", {"x-match": "any", "x-foo": "bar"})
    assert _one_each(broker, ["all", "any"], {"a": 1}) == ["all"]
    assert _one_each(broker, ["all", "any"], {"x-foo": "bar"}) == []


def test_nothing_to_check(broker: Broker) -> None:
    broker.bind("all", {})  # x-match absent: all of nothing: every message
    broker.bind("none", None)  # no binding arguments at all: the same
    broker.bind("all2", {"x-match": "all", "x-ignored": 1})
    broker.bind("any", {"x-match": "any"})  # any of nothing: no message
    names = ["all", "none", "all2", "any"]
    assert _one_each(broker, names, {}) == ["all", "all2", "none"]
    assert _one_each(broker, names, {"a": 1}) == ["all", "all2", "none"]


# JSON carries these types through Redis; bytes and Decimal only through memory.
JSON_VALUES = [
    ("abc", "abc", True),
    ("abc", "ABC", False),
    (1, 1, True),
    (1, 1.0, False),  # Erlang =:=
    (1, True, False),
    (True, True, True),
    (2**40, 2**40, True),
    (-(2**63), -(2**63), True),
    (1.5, 1.5, True),
    (1, "1", False),
    ("x", None, False),
]


@pytest.mark.parametrize(("bound", "header", "equal"), JSON_VALUES)
def test_value_equality(broker: Broker, bound: Any, header: Any, equal: bool) -> None:
    broker.bind("q", {"k": bound})
    assert (_one_each(broker, ["q"], {"k": header}) == ["q"]) is equal


@pytest.mark.parametrize(
    ("bound", "header", "equal"),
    [
        ("abc", b"abc", True),
        (b"\xc3\xa9", "é", True),
        (b"\xff", b"\xff", True),
        (1, Decimal(1), False),
    ],
)
def test_value_equality_python_types(memory: Broker, bound: Any, header: Any, equal: bool) -> None:
    memory.bind("q", {"k": bound})
    memory.producer.publish({"i": 1}, headers={"k": header})
    got = kh.drain_all(memory.conn, memory.ch, ["q"])["q"]
    assert (len(got) == 1) is equal


def test_void_argument_is_presence(broker: Broker) -> None:
    broker.bind("q", {"k": None})
    assert _one_each(broker, ["q"], {"k": None}) == ["q"]
    assert _one_each(broker, ["q"], {"k": {"nested": 1}}) == ["q"]
    assert _one_each(broker, ["q"], {"k": [1, 2]}) == ["q"]
    assert _one_each(broker, ["q"], {"kk": 1}) == []


# ------------------------------------------------ bindings, queues, unbinding
def test_one_queue_two_bindings_gets_a_message_once_and_unbinds_one_by_one(
    broker: Broker,
) -> None:
    # kombu keeps one binding per (queue, exchange, routing key): two bindings of
    # one queue take two routing keys, which the headers exchange ignores
    a = {"x-match": "any", "a": 1, "b": 2}
    b = {"x-match": "any", "a": 1, "b": 2, "x-note": "other binding"}
    broker.bind("q", a, routing_key="one")
    broker.bind("q", b, routing_key="two")
    broker.bind("q", a, routing_key="one")  # again: a no-op
    assert _one_each(broker, ["q"], {"b": 2}) == ["q"]  # once, though both match
    broker.unbind("q", a, routing_key="one")
    if broker.ch.supports_fanout and "Redis" in type(broker.ch).__name__:
        # kombu's Redis queue_unbind leaves the store's set as it is (stock
        # behaviour, docs/brokers.md): remove the member as kombu's _delete does
        broker.ch._delete("q", "hx", *broker.ex_type().prepare_bind("q", "hx", "one", a))
    assert _one_each(broker, ["q"], {"b": 2}) == ["q"]  # the other binding still routes
    assert _one_each(broker, ["q"], {"x-note": "other binding"}) == []


Broker.ex_type = lambda self: self.ch.typeof(self.ex.name)  # type: ignore[attr-defined]


def test_same_queue_and_key_with_other_arguments_is_refused(memory: Broker) -> None:
    memory.bind("q", {"a": 1})
    with pytest.raises(ValueError, match="already bound to headers exchange 'hx'"):
        memory.bind("q", {"a": 2})
    assert [r[2] for r in memory.table()] == ["q"]
    assert _one_each(memory, ["q"], {"a": 1}) == ["q"]
    assert _one_each(memory, ["q"], {"a": 2}) == []


def test_unbind_with_other_arguments_removes_nothing(memory: Broker) -> None:
    memory.bind("q", {"a": 1})
    memory.unbind("q", {"a": 2})  # RabbitMQ: no such binding
    assert _one_each(memory, ["q"], {"a": 1}) == ["q"]
    memory.unbind("q", {"a": 1})
    assert list(memory.table()) == []
    assert _one_each(memory, ["q"], {"a": 1}) == []
    memory.bind("q", {"a": 2})  # and it can be bound anew with other arguments
    assert _one_each(memory, ["q"], {"a": 2}) == ["q"]


def _rabbit_route(bindings: list[tuple[str, dict[str, Any]]], headers: dict[str, Any]) -> set[str]:
    """RabbitMQ's headers exchange, binding by binding, written from its rules
    (JSON values only: str, int, bool, float, None)."""
    out = set()
    for queue, args in bindings:
        mode = args.get("x-match", "all")
        checks = [
            (k, v)
            for k, v in args.items()
            if k != "x-match" and (mode.endswith("-with-x") or not k.startswith("x-"))
        ]

        def ok(k: str, v: Any) -> bool:
            if k not in headers:
                return False
            h = headers[k]
            return v is None or (type(h) is type(v) and h == v)

        hits = [ok(k, v) for k, v in checks]
        if all(hits) if mode.startswith("all") else any(hits):
            out.add(queue)
    return out


def test_random_bindings_deliver_as_rabbitmq(broker: Broker) -> None:
    rng = random.Random(27)
    fields = ["a", "b", "c", "x-d", "e"]
    values = ["s", "t", 1, 2, 1.0, True, None]
    queues = [f"q{i}" for i in range(12)]
    bindings: list[tuple[str, dict[str, Any]]] = []
    for n, q in enumerate(queues * 3):
        args: dict[str, Any] = {
            f: rng.choice(values) for f in rng.sample(fields, rng.randint(0, 3))
        }
        if rng.random() < 0.8:
            args["x-match"] = rng.choice(["all", "any", "all-with-x", "any-with-x"])
        broker.bind(q, args, routing_key=f"k{n}")
        bindings.append((q, args))
    for _ in range(40):
        headers = {
            f: rng.choice([v for v in values if v is not None] + ["u", 3])
            for f in rng.sample(fields, rng.randint(0, 5))
        }
        assert _one_each(broker, queues, headers) == sorted(_rabbit_route(bindings, headers)), (
            headers
        )


def test_simple_queue_round_trip(memory: Broker) -> None:
    broker = memory
    q = Queue("sq", broker.ex, binding_arguments={"x-match": "all", "kind": "job"})
    with broker.conn.SimpleQueue(q) as sq:
        sq.put({"i": 1}, headers={"kind": "job"})
        sq.put({"i": 2}, headers={"kind": "other"})
        sq.put({"i": 3}, headers={"kind": "job", "extra": 1})
        got = [sq.get(timeout=5).payload["i"] for _ in range(2)]
        assert got == [1, 3]
        assert len(sq) == 0


def test_rejected_message_requeued_by_its_headers(broker: Broker) -> None:
    broker.bind("q1", {"k": "a"})
    broker.bind("q2", {"k": "b"})
    broker.publish({"k": "a"})
    q1 = Queue("q1", no_declare=True)(broker.ch)
    m = None
    for _ in range(50):
        if (m := q1.get()) is not None:
            break
    assert m is not None
    m.requeue()  # basic_reject(requeue=True): kombu routes it again through the exchange
    got = broker.received(["q1", "q2"])
    assert got == {"q1": [1], "q2": []}


# ---------------------------------------------------------- hostile bindings
HOSTILE: list[tuple[Any, type[Exception], str]] = [
    ({f"k{i}": i for i in range(65)}, ValueError, "65 binding arguments; this exchange allows 64"),
    ({f"x-{i}": i for i in range(10_000)}, ValueError, "10000 binding arguments"),
    ({"k": "v" * 257}, ValueError, "257 bytes; this exchange allows 256"),
    ({"k": "é" * 129}, ValueError, "258 bytes"),
    ({"k" * 257: 1}, ValueError, "key of 257 characters"),
    ({"k": Decimal(1)}, TypeError, "type Decimal"),
    ({"k": [1]}, TypeError, "type list"),
    ({"k": {"a": 1}}, TypeError, "type dict"),
    ({"k": object()}, TypeError, "type object"),
    ({1: "v"}, TypeError, "keys are str"),
    ({"x-match": "some"}, ValueError, "Invalid x-match field value"),
    ({"x-match": 1}, ValueError, "Invalid x-match field type"),
    ({"k": float("nan")}, ValueError, "NaN"),
    ({"k": 2**63}, ValueError, "long long"),
    ([("k", 1)], TypeError, "must be a mapping"),
]


@pytest.mark.parametrize(("args", "error", "message"), HOSTILE)
def test_hostile_arguments_refused_before_anything_changes(
    broker: Broker, args: Any, error: type[Exception], message: str
) -> None:
    broker.bind("ok", {"k": 1})
    with pytest.raises(error, match=message) as info:
        broker.bind("q", args)
    assert "queue 'q'" in str(info.value) and "'hx'" in str(info.value)
    assert not broker.ch.state.has_binding("q", "hx", "")
    assert sorted(r[2] for r in broker.table()) == ["ok"]
    assert _one_each(broker, ["ok", "q"], {"k": 1}) == ["ok"]


def test_limits_are_class_attributes_a_subclass_can_raise() -> None:
    class Wide(khd.CstrieHeadersExchange):
        max_arguments = 100

    class Channel(ck.MemoryChannel):
        exchange_types: ClassVar[dict[str, Any]] = {
            **ck.MemoryChannel.exchange_types,
            "headers": Wide,
        }
        queues: ClassVar[dict[str, Any]] = {}

    transport = type(
        "T",
        (kmemory.Transport,),
        {"Channel": Channel, "global_state": kmemory.Transport.global_state.__class__()},
    )
    with Connection(transport=transport) as conn:
        b = Broker(conn)
        b.bind("q", {f"x-{i}": i for i in range(100)})
        with pytest.raises(ValueError, match="101 binding arguments; this exchange allows 100"):
            b.bind("q2", {f"x-{i}": i for i in range(101)})


def test_redis_row_written_by_another_client_is_routed_or_named(redis_url: str) -> None:
    with (
        Connection(redis_url, transport=ck.RedisTransport) as c1,
        Connection(redis_url, transport=ck.RedisTransport) as c2,
    ):
        b1, b2 = Broker(c1), Broker(c2)
        b1.bind("q1", {"k": "a"})
        b2.bind("q2", {"k": "a", "x-match": "any", "j": 1})  # another connection binds
        assert _one_each(b1, ["q1", "q2"], {"k": "a"}) == ["q1", "q2"]
        sep = b1.ch.sep
        key = b1.ch.keyprefix_queue % ("hx",)
        client = b1.ch.client
        for bad, why in [
            ("not json", "not JSON"),
            ('{"k":[1]}', "is an array"),
            ('{"k":{"t":1}}', "is a table"),
            ('{"x-match":"some"}', "Invalid x-match"),
            ("[" * 100_000, "not JSON"),  # nested past the parser's recursion limit
            ("[" * 300_000, "characters; at most"),
        ]:
            member = sep.join(["", bad, "evil"])
            client.sadd(key, member)
            with pytest.raises(ValueError, match=why) as info:
                b1.publish({"k": "a"})
            assert "queue 'evil'" in str(info.value) and "'hx'" in str(info.value)
            client.srem(key, member)
        assert _one_each(b1, ["q1", "q2"], {"k": "a"}) == ["q1", "q2"]


def test_redis_unacked_messages_restored_by_their_headers(redis_url: str) -> None:
    with Connection(redis_url, transport=ck.RedisTransport) as conn:
        b = Broker(conn)
        b.bind("q1", {"k": "a"})
        b.bind("q2", {"k": "b"})
        b.publish({"k": "a"})
        q1 = Queue("q1", no_declare=True)(b.ch)
        m = None
        for _ in range(50):
            if (m := q1.get()) is not None:
                break
        assert m is not None  # not acked: kept in the unacked hash
        b.ch.qos.restore_unacked_once()
        assert b.received(["q1", "q2"]) == {"q1": [1], "q2": []}


# ------------------------------------------------------ tables kept in step
def test_headers_table_changed_behind_kombus_back_routes_as_its_rows(memory: Broker) -> None:
    memory.bind("q1", {"k": 1})
    table = memory.table()
    assert isinstance(table, khd.HeadersTable)
    pat = khd.encode_arguments({"k": 2})
    table.append(("", pat, "q2"))
    table.append(("dup", pat, "q2"))
    assert sorted(table.route({"k": 2})) == ["q2"]
    table.remove(("", pat, "q2"))
    assert table.route({"k": 2}) == ["q2"]  # one row left
    del table[-1]
    assert table.route({"k": 2}) == []
    with pytest.raises(ValueError, match="not JSON"):
        table.append(("", "nope", "q3"))
    assert [r[2] for r in table] == ["q1"]
    table[:] = [("", khd.encode_arguments({"j": None}), "q4")]
    assert table.route({"k": 1}) == [] and table.route({"j": 0}) == ["q4"]
    table.clear()
    assert table.route({"j": 0}) == []


def test_a_plain_list_table_is_routed_through_a_mirror(memory: Broker) -> None:
    # a table made elsewhere (say a channel without the integration) stays a list
    memory.ch.state.exchanges["hx"] = {
        "type": "headers",
        "durable": True,
        "auto_delete": False,
        "arguments": {},
        "table": [],
    }
    memory.bind("q1", {"k": 1})
    assert type(memory.table()) is list
    assert _one_each(memory, ["q1"], {"k": 1}) == ["q1"]
    memory.table().append(("", khd.encode_arguments({"k": 1}), "q2"))
    assert _one_each(memory, ["q1", "q2"], {"k": 1}) == ["q1", "q2"]


@pytest.mark.parametrize(
    "args",
    [{}, {"x-match": b"any", "a": b"\xff", "b": "é", "c": 1.0, "d": -1, "e": None, "f": True}],
)
def test_pattern_round_trip_is_canonical(args: dict[str, Any]) -> None:
    p = khd.encode_arguments(args)
    assert p.isascii() and "\x06" not in p
    assert khd.encode_arguments(khd.decode_arguments(p)) == p
    assert khd.encode_arguments(dict(reversed(list(args.items())))) == p


# ------------------------------------------- found in cstrie.content (not changed here)
def test_content_adapter_str_and_bytes_arguments_are_one_binding() -> None:
    from cstrie.content.rabbitmq import HeadersExchange

    x = HeadersExchange()
    assert x.bind("q", {"k": "abc"})
    assert x.bind("q", {"k": b"abc"}) is False  # the same table on the wire
    assert x.unbind("q", {"k": b"abc"})
    assert x.route({"k": "abc"}) == []


def test_integration_str_and_bytes_arguments_are_one_binding(memory: Broker) -> None:
    memory.bind("q", {"k": "abc"})
    memory.bind("q", {"k": b"abc"})  # the same binding: no ValueError, no second row
    assert len(memory.table()) == 1
    memory.unbind("q", {"k": b"abc"})
    assert list(memory.table()) == []
    assert _one_each(memory, ["q"], {"k": "abc"}) == []
