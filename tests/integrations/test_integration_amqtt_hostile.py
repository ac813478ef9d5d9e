"""Hostile filters and topics given to CstrieBroker's subscription table, router
and retained store directly (no network: the paths a SUBSCRIBE and a PUBLISH
reach).  Each must be answered (stored and routed, or refused with SUBACK 0x80),
never crash or hang, and leave the broker's tables in agreement
(``check_routes``).  The limits are MQTT's: a topic or filter is a UTF-8 string
of at most 65,535 bytes without U+0000 (MQTT 3.1.1 1.5.3, 4.7.3)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest

pytest.importorskip("amqtt")

from amqtt.broker import RetainedApplicationMessage
from amqtt.session import Session

from cstrie.integrations.amqtt import SUBACK_FAILURE, CstrieBroker

CONFIG = {
    "listeners": {"default": {"type": "tcp", "bind": "127.0.0.1:0"}},
    "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
}


def _session(cid: str) -> Session:
    s = Session()
    s.client_id = cid
    return s


def run(coro_fn: Any, **options: Any) -> Any:
    """``coro_fn(broker)`` on a new CstrieBroker (``options``: its keyword
    arguments), then its routes are checked."""

    async def main() -> Any:
        broker = CstrieBroker(CONFIG, **options)
        out = await coro_fn(broker)
        broker.check_routes()
        return out

    return asyncio.run(main())


async def routed(broker: CstrieBroker, topic: str) -> list[str]:
    """The filters a broadcast of ``topic`` reaches (through the broker's own
    routing step), as (client id, filter) pairs."""
    seen: list[str] = []

    async def record(broadcast: Any, session: Session, qos: int, tasks: Any) -> None:
        seen.append(session.client_id)

    broker._deliver = record  # type: ignore[method-assign]
    await broker._broadcast_message(None, topic, b"x")
    await broker._run_broadcast(deque())
    return seen


def test_widest_filter_is_stored_and_routes_the_deepest_topic() -> None:
    widest = "/".join(["+"] * 32768)  # 65,535 bytes
    deepest = "/" * 32767  # 32,768 empty levels, 32,767 bytes

    async def go(b: CstrieBroker) -> Any:
        code = await b.add_subscription((widest, 1), _session("c"))
        return code, await routed(b, deepest), await routed(b, "a")

    code, hit, miss = run(go)
    assert code == 1
    assert hit == ["c"] and miss == []


def test_oversized_and_nul_filters_are_refused_and_nothing_is_stored() -> None:
    bad = [
        "a" * 65536,  # one byte over MQTT's string limit
        "a/\x00/b",  # U+0000 (MQTT-4.7.3-2)
        "",  # the empty filter (MQTT-4.7.3-1)
        "$share/g",  # a share without a filter
        "$share//a",  # an empty ShareName
        "$share/g+/a",  # a wildcard in the ShareName
        "a/#/b",
        "a+",
    ]

    async def go(b: CstrieBroker) -> Any:
        s = _session("c")
        codes = [await b.add_subscription((f, 0), s) for f in bad]
        return codes, dict(b.subscriptions)

    codes, subs = run(go)
    assert codes == [SUBACK_FAILURE] * len(bad)
    assert subs == {}


def test_a_topic_the_router_refuses_is_dropped_not_raised() -> None:
    """A plugin can broadcast any string (amqtt's BrokerContext.broadcast_message);
    one the MQTT rules refuse reaches nobody and the broadcast loop goes on."""

    async def go(b: CstrieBroker) -> Any:
        await b.add_subscription(("#", 0), _session("c"))
        return [await routed(b, t) for t in ("a\x00b", "a" * 65536, "ok")]

    assert run(go) == [[], [], ["c"]]


def test_deep_and_long_retained_topics_are_stored_and_found() -> None:
    deep = "/".join(["x"] * 20000)
    long_word = "w" * 65535

    async def go(b: CstrieBroker) -> Any:
        store = b.retained_messages
        for t in (deep, long_word, "a/b"):
            store[t] = RetainedApplicationMessage(None, t, b"r", 0)
        with pytest.raises(ValueError):
            store["a\x00"] = RetainedApplicationMessage(None, "a\x00", b"r", 0)
        found = sorted(t for t, _ in store.query("#"))
        return found, len(store), "a\x00" in store, store.get("a" * 65536)

    found, n, has_nul, missing = run(go)
    assert found == sorted([deep, long_word, "a/b"])
    assert n == 3 and has_nul is False and missing is None


def test_many_shares_of_one_client_leave_no_trace_when_it_goes() -> None:
    """With the per-client bounds lifted (None), as an operator may."""

    async def go(b: CstrieBroker) -> Any:
        s = _session("c")
        for k in range(300):
            assert await b.add_subscription((f"$share/g{k % 7}/t/{k}/#", 1), s) == 1
            assert await b.add_subscription((f"t/{k}/+", 0), s) == 0
        b.check_routes()
        await b._del_all_subscriptions(s)
        return dict(b.subscriptions), b._routes.subscriptions()

    subs, routes = run(go, max_subscriptions_per_client=None, max_share_groups_per_client=None)
    assert subs == {} and routes == {}


def test_a_plugin_cannot_subscribe_a_client_past_its_bounds() -> None:
    """amqtt's ``BrokerContext.add_subscription`` (what plugins, and the
    persistence plugin restoring sessions, call) goes through the same
    bounds: past them it subscribes nothing."""

    async def go(b: CstrieBroker) -> Any:
        context = b.plugins_manager.context
        for k in range(5):
            await context.add_subscription("c", f"a/{k}", 0)
        await context.add_subscription("c", "$share/g/x", 0)
        await context.add_subscription("c", "$share/h/x", 0)
        return sorted(b.subscriptions)

    assert run(go, max_subscriptions_per_client=4, max_share_groups_per_client=1) == [
        f"a/{k}" for k in range(4)
    ]
    assert run(go, max_subscriptions_per_client=6, max_share_groups_per_client=1) == [
        "$share/g/x",
        *(f"a/{k}" for k in range(5)),
    ]
