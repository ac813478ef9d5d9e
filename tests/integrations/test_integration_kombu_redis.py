"""The kombu integration on kombu's Redis transport, against a real ``redis-server``.

The tests start one ``redis-server`` (per test process) on 127.0.0.1 at a free
port, with persistence off, empty it before each test and stop it at the end.
Stock kombu (``kombu.transport.redis.Transport``) and the integration
(``cstrie.integrations.kombu.RedisTransport``) connect to it with
``Connection("redis://127.0.0.1:PORT/0")`` and real producers and consumers.

Rules: the integrated transport delivers as AMQP 0-9-1's topic exchange routes
(each queue with a matching binding gets the message once); stock kombu as its
regexes do (the documented differences, ``docs/brokers.md``); where the two rule
sets agree, the two transports deliver the same messages.  Redis keeps an
exchange's bindings in a set in the store, shared by every client, so a binding
any client adds is routed by every client's next publish.

``make test`` installs Debian's ``redis-server`` with apt-get when it is missing
(``.ci/redis-server``); where that could not be done the tests skip, saying so.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("kombu")
pytest.importorskip("redis")  # the client library kombu's Redis transport uses

import kombu_helpers as kh
from kombu import Connection, Exchange, Queue
from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kredis
from kombu_helpers import SAFE_BINDINGS, SAFE_KEYS

from cstrie.integrations import kombu as ck

STOCK = kredis.Transport
OURS = ck.RedisTransport
RULES = kh.INSTALLED_RULES
LONG = ".".join(["w"] * 257)  # one word more than an AMQP key can have


def _session(url: str, transport: type[Any], exchange: str = "rx") -> Any:
    c = Connection(url, transport=transport)
    ch = c.channel()
    return c, ch, c.Producer(ch, exchange=Exchange(exchange, type="topic"))


def _get_all(ch: Any, names: list[str]) -> dict[str, list[Any]]:
    """Every waiting message of the named queues, by ``Queue.get``: queue -> [payload["i"]]."""
    out: dict[str, list[Any]] = {}
    for n in names:
        got = out[n] = []
        while (m := Queue(n, no_declare=True)(ch).get(no_ack=True)) is not None:
            got.append(m.payload["i"])
    return out


def test_redis_store_bindings_of_other_clients_are_seen(redis_url: str) -> None:
    """Redis keeps bindings in a set per exchange: a binding a stock client adds to the
    store is routed by the integrated client on its next publish."""
    sc, sch, sp = _session(redis_url, STOCK)
    oc, och, op = _session(redis_url, OURS)
    try:
        ex = Exchange("rx", type="topic")
        Queue("r1", ex, routing_key="a.*")(och).declare()
        op.publish({"i": 0}, routing_key="a.b")
        Queue("r2", ex, routing_key="a.#")(sch).declare()  # a stock client binds
        op.publish({"i": 1}, routing_key="a.c")
        op.publish({"i": 2}, routing_key="a")
        sp.publish({"i": 3}, routing_key="a")  # stock kombu misses "a.#" ~ "a"
        assert _get_all(och, ["r1", "r2"]) == {"r1": [0, 1], "r2": [1, 2]}
    finally:
        sc.release()
        oc.release()


def test_redis_store_with_a_refused_binding_raises_naming_it(redis_url: str) -> None:
    sc, sch, _ = _session(redis_url, STOCK)
    oc, och, op = _session(redis_url, OURS)
    try:
        ex = Exchange("rx", type="topic")
        Queue("r1", ex, routing_key="a")(och).declare()
        with pytest.raises(ValueError, match="257 words"):
            Queue("r2", ex, routing_key=LONG)(och).declare()  # refused at bind
        Queue("r3", ex, routing_key=LONG)(sch).declare()  # a stock client stores it anyway
        with pytest.raises(ValueError, match="257 words") as info:
            op.publish({"i": 0}, routing_key="a")
        assert "of queue 'r3'" in str(info.value)
    finally:
        sc.release()
        oc.release()


def test_redis_session_stock_vs_integrated(redis_url: str) -> None:
    """The same binds and publishes deliver the same messages on stock and integrated
    kombu, on keys where both agree, and AMQP's on the documented differences."""
    results = {}
    for name, transport in (("stock", STOCK), ("ours", OURS)):
        c, ch, p = _session(redis_url, transport)
        try:
            ex = Exchange(f"rx-{name}", type="topic")
            for i, key in enumerate([*SAFE_BINDINGS, "a.#"]):
                Queue(f"{name}-{i}", ex, routing_key=key)(ch).declare()
            for i, key in enumerate(SAFE_KEYS):
                p.publish({"i": i}, exchange=ex, routing_key=key)
            results[name] = _get_all(ch, [f"{name}-{i}" for i in range(len(SAFE_BINDINGS) + 1)])
        finally:
            c.release()
    stock = list(results["stock"].values())
    ours = list(results["ours"].values())
    assert ours[:-1] == stock[:-1]
    a_hash = [i for i, k in enumerate(SAFE_KEYS) if k.startswith("a")]
    assert ours[-1] == a_hash  # "a.#" matches "a" itself
    assert stock[-1] == [i for i in a_hash if SAFE_KEYS[i] != "a"]


def test_redis_unbind_leaves_the_store_as_stock_does(redis_url: str) -> None:
    """kombu's queue_unbind on Redis rebuilds only the list it read: the binding stays
    in the store, on stock and integrated kombu alike (docs/brokers.md)."""
    for transport in (STOCK, OURS):
        c, ch, p = _session(redis_url, transport)
        try:
            ex = Exchange("unbind-rx", type="topic")
            q = Queue("u1", ex, routing_key="a.*")
            q(ch).declare()
            q(ch).unbind_from(ex, routing_key="a.*")
            assert [(k, name) for k, _, name in ch.get_table("unbind-rx")] == [("a.*", "u1")]
            p.publish({"i": 0}, exchange=ex, routing_key="a.b")
            assert _get_all(ch, ["u1"]) == {"u1": [0]}
        finally:
            c.release()


def _consumer_session(
    url: str, transport: type[Any], name: str, bindings: dict[str, list[str]], keys: list[str]
) -> dict[str, list[Any]]:
    """Bind each queue with its keys, publish one message per key with a Producer,
    receive with Consumers until the messages the rules route have come, then check
    that nothing else is waiting: queue -> [(index, routing key)]."""
    rules = "amqp" if transport is OURS else RULES
    assert rules is not None
    want = kh.expected(bindings, keys, rules)
    c, ch, p = _session(url, transport, exchange=f"rx-{name}")
    try:
        ex = Exchange(f"rx-{name}", type="topic")
        for q, qkeys in bindings.items():
            for k in qkeys:
                Queue(f"{name}-{q}", ex, routing_key=k)(ch).declare()
        for i, k in enumerate(keys):
            p.publish({"i": i}, routing_key=k, serializer="json")
        got = kh.drain_counted(
            c, ch, [f"{name}-{q}" for q in bindings], sum(map(len, want.values()))
        )
        for q in bindings:
            assert Queue(f"{name}-{q}", no_declare=True)(ch).get(no_ack=True) is None, q
        return {q: got[f"{name}-{q}"] for q in sorted(bindings)}
    finally:
        c.release()


@pytest.mark.skipif(RULES is None, reason="the installed kombu's regex table is not documented")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_redis_consumers_stock_vs_integrated_random(redis_url: str, seed: int) -> None:
    """Random bindings (words a, b, c, the empty word, * and #) and routing keys, real
    Producers and Consumers on the Redis transport: the integrated transport delivers
    AMQP's messages, stock kombu its documented model's, and the two deliver the same
    messages wherever the models agree."""
    rng = random.Random(seed)
    alphabet = ["a", "b", "c", "", "*", "#"]
    bindings = {
        f"q{i}": [
            ".".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
            for _ in range(rng.randint(1, 4))
        ]
        for i in range(8)
    }
    keys = [".".join(rng.choice("abc") for _ in range(rng.randint(0, 4))) for _ in range(50)]
    empties = ["a", "b", ""]
    keys += [".".join(rng.choice(empties) for _ in range(rng.randint(1, 4))) for _ in range(20)]
    ours = _consumer_session(redis_url, OURS, "ours", bindings, keys)
    stock = _consumer_session(redis_url, STOCK, "stock", bindings, keys)
    assert ours == kh.expected(bindings, keys, "amqp")
    assert RULES is not None
    assert stock == kh.expected(bindings, keys, RULES)
    for q, qkeys in bindings.items():
        agree = {
            (i, k)
            for i, k in enumerate(keys)
            if any(kh.model_match(b, k, "amqp") for b in qkeys)
            == any(kh.model_match(b, k, RULES) for b in qkeys)
        }
        assert [d for d in ours[q] if d in agree] == [d for d in stock[q] if d in agree]


def test_redis_alias_after_register_connects_and_routes(redis_url: str) -> None:
    """``register()`` then ``Connection("cstrie-redis://...")``: the integrated Redis
    transport, routing by AMQP's rules ("a.#" matches "a")."""
    saved = dict(TRANSPORT_ALIASES)
    try:
        ck.register()
        with Connection(redis_url.replace("redis://", "cstrie-redis://", 1)) as c:
            assert isinstance(c.transport, ck.RedisTransport)
            ch = c.channel()
            ex = Exchange("alias-rx", type="topic")
            Queue("al", ex, routing_key="a.#")(ch).declare()
            c.Producer(ch, exchange=ex).publish({"i": 0}, routing_key="a")
            got = kh.drain_counted(c, ch, ["al"], 1)
            assert got == {"al": [(0, "a")]}
    finally:
        TRANSPORT_ALIASES.clear()
        TRANSPORT_ALIASES.update(saved)
