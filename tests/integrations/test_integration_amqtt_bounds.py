"""Per-client bounds (difference 11 of ``cstrie/integrations/amqtt.py``):
``max_subscriptions_per_client`` (default 100) and
``max_share_groups_per_client`` (default 10), with real paho-mqtt clients
over 127.0.0.1; the scenarios that show the difference run on stock amqtt
too, which has no bound.

The rules: a SUBSCRIBE past a bound is refused with the MQTT failure code
0x80 (MQTT 3.1.1 3.9.3) and changes nothing; a SUBSCRIBE to a filter the
client holds replaces that subscription (MQTT-3.8.4-3), so it is never
refused by a bound; an UNSUBSCRIBE or the end of a session frees places;
each client has its own.  An option that is not a positive int or None is
refused with ``ValueError``/``TypeError`` naming it.  No timing here: what
the bounds buy is measured by ``cstrie bench --scenario amqtt`` (section
"one client's cost").
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("amqtt")
pytest.importorskip("paho.mqtt")

from amqtt_helpers import (
    LISTENERS,
    TIMEOUT,
    BrokerThread,
    Client,
    RawClient,
    broker_config,
    running_broker,
    wait_until,
)

from cstrie.integrations.amqtt import LIMITS, CstrieBroker

KINDS = ["stock", "cstrie"]
SUBACK_FAILURE = 0x80
DEFAULT_SUBS = 100
DEFAULT_SHARES = 10


@pytest.fixture
def made() -> Iterator[list[Client]]:
    clients: list[Client] = []
    yield clients
    for c in clients:
        c.close()


def connect(b: BrokerThread, made: list[Client], client_id: str | None = None) -> Client:
    c = Client(b.port, client_id)
    made.append(c)
    c.connect()
    return c


def test_the_defaults_are_documented_ones() -> None:
    assert LIMITS == {
        "max_subscriptions_per_client": DEFAULT_SUBS,
        "max_share_groups_per_client": DEFAULT_SHARES,
    }


# ----------------------------------------------------- subscriptions per client
@pytest.mark.parametrize("kind", KINDS)
def test_difference_11_a_client_holds_at_most_100_subscriptions(
    kind: str, made: list[Client]
) -> None:
    """At the default bound: the client's marker subscription and 99 more are
    granted, the 101st is refused, in the same SUBSCRIBE packet and in the
    next; a repeated filter is granted (it replaces, MQTT-3.8.4-3); an
    UNSUBSCRIBE frees a place.  The refused filter delivers nothing to it and
    nothing changes for another client subscribed to it.  Stock grants all."""
    with running_broker(kind) as b:
        c, other, pub = connect(b, made), connect(b, made), connect(b, made)
        first = [(f"f/{k}", 0) for k in range(DEFAULT_SUBS - 1)]
        codes = c.subscribe(*first, ("over/a", 1))
        assert codes[:-1] == [0] * len(first)
        assert other.subscribe(("over/a", 1), ("over/b", 1)) == [1, 1]
        again = c.subscribe(("over/b", 1), ("f/0", 1))
        held = b.filters_of(c.client_id)
        pub.publish("over/a", b"a", qos=1)
        pub.publish("f/0", b"f", qos=1)
        for x in (c, other):
            x.sync(via=pub)
        if kind == "stock":
            assert codes[-1] == 1 and again == [1, 1]
            assert len(held) == DEFAULT_SUBS + 2
            assert sorted(d.topic for d in c.take()) == ["f/0", "over/a"]
        else:
            assert codes[-1] == SUBACK_FAILURE and again == [SUBACK_FAILURE, 1]
            assert held == {f for f, _ in first} | {f"sync/{c.client_id}"}
            assert [(d.topic, d.qos) for d in c.take()] == [("f/0", 1)], "f/0 now at QoS 1"
            c.unsubscribe("f/1")
            assert c.subscribe(("over/a", 0), ("over/b", 0)) == [0, SUBACK_FAILURE]
        assert [d.topic for d in other.take()] == ["over/a"]
        b.check_routes()


@pytest.mark.parametrize("kind", KINDS)
def test_difference_11_a_client_holds_at_most_10_shared_subscriptions(
    kind: str, made: list[Client]
) -> None:
    """At the default bound: 10 shared subscriptions (other ShareNames or
    other filters) are granted, the 11th is refused and does not join its
    group, whose other member then gets every message; a repeated shared
    subscription is granted; ordinary subscriptions are still granted."""
    with running_broker(kind) as b:
        c, member, pub = connect(b, made), connect(b, made), connect(b, made)
        shares = [(f"$share/g{k}/s/{k % 2}/#", 0) for k in range(DEFAULT_SHARES)]
        assert c.subscribe(*shares) == [0] * DEFAULT_SHARES
        assert member.subscribe(("$share/late/s/#", 0)) == [0]
        codes = c.subscribe(("$share/late/s/#", 0), ("$share/g0/s/0/#", 1), ("s/plain", 0))
        for i in range(4):
            pub.publish(f"s/x{i}", b"m")
        member.sync(via=pub)
        got = sorted(d.topic for d in member.take())
        if kind == "stock":
            assert codes == [0, 1, 0]
            assert got == []
        else:
            assert codes == [SUBACK_FAILURE, 1, 0]
            assert got == [f"s/x{i}" for i in range(4)], "c never joined late"
            assert "$share/late/s/#" not in b.filters_of(c.client_id)
        b.check_routes()


def test_the_bounds_are_per_client_and_places_come_back_with_the_session(
    made: list[Client],
) -> None:
    """Each client has its own count.  A clean session's subscriptions end
    with its connection (MQTT 3.1.2.4), and so do their places; a persistent
    session keeps both."""
    with running_broker("cstrie", bounds={"max_subscriptions_per_client": 3}) as b:
        a, other = connect(b, made, "a"), connect(b, made)
        assert a.subscribe(("x/1", 0), ("x/2", 0), ("x/3", 0)) == [0, 0, SUBACK_FAILURE]
        assert other.subscribe(("x/1", 0), ("x/2", 0)) == [0, 0]
        a.disconnect()
        wait_until("a's filters are gone", lambda: not b.filters_of("a"))
        a.connect()
        assert a.subscribe(("x/3", 0), ("x/4", 0), ("x/5", 0)) == [0, 0, SUBACK_FAILURE]
        p = Client(b.port, "p", clean_session=False)
        made.append(p)
        p.connect()
        assert p.subscribe(("y/1", 1), ("y/2", 1)) == [1, 1]
        p.disconnect()
        wait_until("p is away", lambda: b.session_state("p") == "disconnected")
        assert p.connect(clean_session=False) is True
        assert p.subscribe(("y/3", 1), ("y/1", 0)) == [SUBACK_FAILURE, 0]
        b.check_routes()


# ------------------------------------------------------------------ options
def test_the_options_come_from_keywords_or_the_cstrie_section() -> None:
    """Keyword arguments win over the configuration's ``cstrie`` section,
    which wins over the defaults; None lifts a bound; amqtt never sees the
    section, and the caller's mapping is left as it was."""

    async def make(config: Any, **options: Any) -> CstrieBroker:
        return CstrieBroker(config, **options)

    def bounds(config: Any, **options: Any) -> tuple[int | None, int | None]:
        import asyncio

        broker = asyncio.run(make(config, **options))
        return broker.max_subscriptions_per_client, broker.max_share_groups_per_client

    section = {"max_subscriptions_per_client": 7, "max_share_groups_per_client": None}
    config = {**broker_config(), "cstrie": section}
    assert bounds(broker_config()) == (DEFAULT_SUBS, DEFAULT_SHARES)
    assert bounds(config) == (7, None)
    assert bounds(config, max_share_groups_per_client=3) == (7, 3)
    assert bounds(config, max_subscriptions_per_client=None) == (None, None)
    assert bounds({**broker_config(), "cstrie": None}) == (DEFAULT_SUBS, DEFAULT_SHARES)
    assert config["cstrie"] is section and section["max_subscriptions_per_client"] == 7


@pytest.mark.parametrize(
    ("options", "error", "names"),
    [
        ({"max_subscriptions_per_client": 0}, ValueError, "max_subscriptions_per_client"),
        ({"max_share_groups_per_client": -1}, ValueError, "max_share_groups_per_client"),
        ({"max_subscriptions_per_client": "10"}, TypeError, "max_subscriptions_per_client"),
        ({"max_subscriptions_per_client": 2.5}, TypeError, "max_subscriptions_per_client"),
        ({"max_share_groups_per_client": True}, TypeError, "max_share_groups_per_client"),
        ({"max_subscription_per_client": 5}, ValueError, "max_subscription_per_client"),
    ],
)
def test_a_bad_option_is_refused_by_name(
    options: dict[str, Any], error: type[Exception], names: str
) -> None:
    import asyncio

    async def make(config: Any) -> CstrieBroker:
        return CstrieBroker(config)

    with pytest.raises(error, match=names):
        asyncio.run(make({**broker_config(), "cstrie": options}))
    with pytest.raises(TypeError, match="mapping"):
        asyncio.run(make({**broker_config(), "cstrie": [1]}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_command_reads_the_cstrie_section(tmp_path: Path) -> None:
    """``python -m cstrie.integrations.amqtt -c broker.yaml`` (amqtt's command
    with CstrieBroker) takes the bounds from the file's ``cstrie`` section."""
    port = _free_port()
    listener = {**LISTENERS["default"], "bind": f"127.0.0.1:{port}"}
    config = tmp_path / "broker.yaml"
    config.write_text(
        "listeners:\n"
        f"  default: {{type: tcp, bind: '{listener['bind']}'}}\n"
        "plugins:\n"
        "  amqtt.plugins.authentication.AnonymousAuthPlugin: {allow_anonymous: true}\n"
        "cstrie:\n"
        "  max_subscriptions_per_client: 2\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "cstrie.integrations.amqtt", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 3 * TIMEOUT
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                raw = RawClient(port, "cli")
                break
            except OSError:
                assert time.monotonic() < deadline, "the broker did not listen"
                time.sleep(0.1)
        try:
            assert raw.subscribe(("a", 0), ("b", 1), ("c", 0)) == [0, 1, SUBACK_FAILURE]
        finally:
            raw.close()
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
