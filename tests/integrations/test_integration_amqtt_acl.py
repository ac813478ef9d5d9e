"""Access control: amqtt's topic ACL plugin with real paho-mqtt clients over
127.0.0.1, each scenario on stock ``amqtt.broker.Broker`` and on
``CstrieBroker`` (``tests/support/amqtt_helpers.py``).

The plugin is configured as amqtt's documentation shows it, in the
``plugins`` section: ``TopicAccessControlListPlugin`` with ``acl`` (who may
subscribe to what) and ``publish_acl`` (who may publish where), each a
mapping of user name to topic filters.  (The documentation's YAML example
writes a list of one-entry mappings, which amqtt 0.12.1 refuses to load: its
``Config`` takes a mapping.)  Its ``receive-acl`` is read only from the
deprecated ``topic-check`` section in 0.12.1, so the one scenario that needs
it uses that.  amqtt's documentation also says that the entry ``#`` does not
grant ``$SYS`` topics (MQTT 4.7.2).

The rules, from that documentation and MQTT 3.1.1 / 5: a client receives
nothing its ACL does not grant; ``$SYS`` topics reach no filter starting with
a wildcard, shared or not (MQTT 4.7.2); a shared subscription
``$share/{ShareName}/{filter}`` (MQTT 5 4.8.2) reads what its filter matches.
Every scenario ends by checking, with paho's own matcher (``topic_matches_sub``,
which follows the ``$`` rule), that CstrieBroker sent no client a message
its ACL does not grant (stock's leaks are asserted where they happen:
differences 8-10 of ``cstrie/integrations/amqtt.py``).  Markers
(``Client.sync``) travel on ``sync/...``, which every user's ACL grants.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("amqtt")
pytest.importorskip("paho.mqtt")

from amqtt_helpers import (
    ACL_PLUGIN,
    LISTENERS,
    BrokerThread,
    Client,
    Delivery,
    RawClient,
    broker_config,
    running_broker,
    wait_until,
)
from paho.mqtt.client import topic_matches_sub

KINDS = ["stock", "cstrie"]
#: amqtt's $SYS plugin warns that it will need an extra; its deprecated
#: configuration (one scenario) warns too
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*psutil.*:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:.*deprecated.*:DeprecationWarning"),
]
SUBACK_FAILURE = 0x80
SYS_PLUGIN = "amqtt.plugins.sys.broker.BrokerSysPlugin"
#: the topic amqtt's $SYS plugin retains when the broker starts
SYS_VERSION = "$SYS/broker/version"


def within(entries: list[str], topic: str) -> bool:
    """An ACL grants ``topic`` when one of its entries matches it (paho's
    matcher, with the $ rule)."""
    return any(topic_matches_sub(entry, topic) for entry in entries)


class Acl:
    """A broker of one kind with amqtt's ACL plugin, and clients that
    connect under user names.  ``acl``/``publish_acl`` as the plugin's
    configuration; ``sync/#`` is added to each user's entries (markers).
    ``check()`` asserts that no CstrieBroker client received anything
    outside its user's ``acl`` (for stock it returns what did)."""

    def __init__(self, b: BrokerThread, acl: dict[str, list[str]]) -> None:
        self.b = b
        self.acl = acl
        self.clients: list[Client] = []

    @property
    def kind(self) -> str:
        return self.b.kind

    def connect(self, user: str, client_id: str | None = None, clean: bool = True) -> Client:
        c = Client(self.b.port, client_id, clean_session=clean, username=user)
        self.clients.append(c)
        c.connect()
        return c

    def outside(self, client: Client) -> list[Delivery]:
        """What ``client`` received (and has not taken) that its ACL does
        not grant."""
        return [d for d in client.deliveries if not within(self.acl[client.username], d.topic)]

    def sys_broadcast(self, topic: str, data: bytes) -> None:
        """amqtt's $SYS plugin broadcasts ``$SYS/broker/{topic}`` (its own
        path: ``BrokerContext.broadcast_message``)."""
        plugin: Any = self.b.broker.plugins_manager.get_plugin("BrokerSysPlugin")

        async def go() -> None:
            await plugin.schedule_broadcast_sys_topic(topic, data)

        self.b.run(go())


def with_sync(acl: dict[str, list[str]]) -> dict[str, list[str]]:
    return {user: [*entries, "sync/#"] for user, entries in acl.items()}


@contextmanager
def acl_broker(
    kind: str,
    acl: dict[str, list[str]],
    publish_acl: dict[str, list[str]] | None = None,
    *,
    config: dict[str, Any] | None = None,
) -> Iterator[Acl]:
    """``kind``'s broker with the ACL plugin (and amqtt's $SYS plugin, not
    broadcasting on its own: it retains its version topic at start), or with
    ``config``; the clients are closed, the routes checked and the ACL floor
    checked at the end."""
    acl = with_sync(acl)
    plugin: dict[str, Any] = {"acl": acl}
    if publish_acl is not None:
        plugin["publish_acl"] = with_sync(publish_acl)
    config = config or broker_config({ACL_PLUGIN: plugin, SYS_PLUGIN: {"sys_interval": 0}})
    with running_broker(kind, config=config) as b:
        world = Acl(b, acl)
        try:
            yield world
            if kind == "cstrie":
                leaks = {c.client_id: world.outside(c) for c in world.clients}
                assert not any(leaks.values()), f"delivered outside the ACL: {leaks}"
        finally:
            for c in world.clients:
                c.close()
        b.check_routes()


def topics(deliveries: list[Delivery]) -> list[str]:
    return sorted(d.topic for d in deliveries)


# ------------------------------------------------------- $share and the ACL
@pytest.mark.parametrize("kind", KINDS)
def test_difference_8_a_share_is_checked_on_the_filter_it_routes(kind: str) -> None:
    """Difference 8, the bypass: with the entries ``+/alice/#`` and
    ``+/k/#``, alice's ``$share/alice/#``, ``$share/k/#`` and
    ``$share/k/$SYS/#`` are granted by stock, which checks the string as sent
    and routes it as an ordinary filter that matches nothing.  CstrieBroker
    routes their filters (``#``, ``$SYS/#``), which the ACL does not grant:
    refused.  ``$share/g/+/alice/#`` routes ``+/alice/#``: granted by
    CstrieBroker, refused by stock (whose ``$share`` level and ShareName do
    not fit the entries)."""
    acl = {"alice": ["+/alice/#", "+/k/#"], "bob": ["bob/#"]}
    with acl_broker(kind, acl) as w:
        alice, bob = w.connect("alice"), w.connect("bob")
        asked = ["$share/alice/#", "$share/k/#", "$share/k/$SYS/#", "$share/g/+/alice/#"]
        codes = alice.subscribe(*((f, 1) for f in asked))
        for t in ("bob/secret", "site1/bob/secret", "site1/alice/news", "x/k/y"):
            bob.publish(t, t.encode(), qos=1)
        w.sys_broadcast("uptime", b"1")
        alice.sync(via=bob)
        if kind == "stock":
            assert codes == [1, 1, 1, SUBACK_FAILURE]
            assert alice.take() == []
        else:
            assert codes == [SUBACK_FAILURE] * 3 + [1]
            assert topics(alice.take()) == ["site1/alice/news"]
        granted = {f for f, code in zip(asked, codes, strict=True) if code != SUBACK_FAILURE}
        assert w.b.filters_of(alice.client_id) == {*granted, f"sync/{alice.client_id}"}


@pytest.mark.parametrize("kind", KINDS)
def test_difference_8_an_entry_grants_only_the_topics_it_matches(kind: str) -> None:
    """Difference 8: amqtt's plugin compares a filter with its entries level
    by level, so stock lets the entry ``+`` (one-level topics) grant ``#``
    (every topic) and ``a/+`` grant ``a/#``, and delivers ``a/b/c`` outside
    the ACL.  CstrieBroker grants a filter only when an entry matches every
    topic the filter matches."""
    with acl_broker(kind, {"carol": ["+", "a/+"], "pub": ["p"]}) as w:
        carol, pub = w.connect("carol"), w.connect("pub")
        codes = carol.subscribe(("#", 0), ("a/#", 0), ("+/+", 0), ("+", 0), ("a/+", 0))
        for t in ("x", "a/b", "a/b/c", "b/c"):
            pub.publish(t, t.encode())
        carol.sync(via=pub)
        if kind == "stock":
            assert codes == [0, 0, SUBACK_FAILURE, 0, 0]
            assert w.outside(carol), "stock leaks through # and a/#"
            assert Counter(d.topic for d in carol.take()) == Counter(
                ["x", "x", "a/b", "a/b", "a/b", "a/b/c", "a/b/c", "b/c"]
            )
        else:
            assert codes == [SUBACK_FAILURE, SUBACK_FAILURE, SUBACK_FAILURE, 0, 0]
            assert topics(carol.take()) == ["a/b", "x"]


@pytest.mark.parametrize("kind", KINDS)
def test_difference_8_the_entry_hash_grants_no_sys_topic(kind: str) -> None:
    """amqtt's documentation: a single ``#`` does not grant ``$`` topics (MQTT
    4.7.2); ``$SYS/#`` must be listed.  Stock's plugin grants ``$SYS/#`` on
    ``#`` anyway and sends the $SYS plugin's retained and live messages;
    CstrieBroker refuses it.  ``#`` and ``$share/g/#`` receive no $SYS topic
    in either."""
    with acl_broker(kind, {"dave": ["#"]}) as w:
        dave, other = w.connect("dave"), w.connect("dave")
        codes = dave.subscribe(("$SYS/#", 0), ("#", 0))
        assert other.subscribe(("$share/g/#", 0)) == [0]
        w.sys_broadcast("uptime", b"1")
        dave.publish("d/x", b"d")
        for c in (dave, other):
            c.sync(via=dave)
        got = topics(dave.take())
        if kind == "stock":
            assert codes == [0, 0]
            assert got == sorted(["$SYS/broker/uptime", SYS_VERSION, "d/x"])
            assert other.take() == []
        else:
            assert codes == [SUBACK_FAILURE, 0]
            assert got == ["d/x"]
            assert topics(other.take()) == ["d/x"]


@pytest.mark.parametrize("kind", KINDS)
def test_sys_reaches_no_wildcard_or_shared_subscription_that_does_not_name_it(kind: str) -> None:
    """MQTT 4.7.2 for every kind of subscription, with an ACL that grants
    everything (``#`` and ``$SYS/#``): ``$SYS`` topics, live from the $SYS
    plugin and retained (its version topic, sent on SUBSCRIBE), reach the
    filters that start with ``$SYS`` and no filter that starts with a
    wildcard, ordinary or shared.  Stock routes no ``$share``."""
    naming = ["$SYS/#", "$SYS/broker/+", "$share/g/$SYS/#"]
    wild = ["#", "+/broker/#", "+/+/+", "$share/h/#", "$share/i/+/broker/#"]
    with acl_broker(kind, {"ops": ["#", "$SYS/#"]}) as w:
        subs = {f: w.connect("ops") for f in naming + wild}
        for f, c in subs.items():
            assert c.subscribe((f, 0)) == [0]
        w.sys_broadcast("uptime", b"1")
        pub = w.connect("ops")
        pub.publish("a/broker/x", b"a")
        got = {}
        for f, c in subs.items():
            c.sync(via=pub)
            got[f] = {d.topic for d in c.take()}
    live_and_retained = {"$SYS/broker/uptime", SYS_VERSION}
    for f in naming + wild:
        if kind == "stock" and f.startswith("$share/"):
            assert got[f] == set(), f
        elif f in naming:
            # no retained message for a shared subscription (MQTT 5 4.8.2)
            want = {"$SYS/broker/uptime"} if f.startswith("$share/") else live_and_retained
            assert got[f] == want, f
        else:
            assert got[f] == {"a/broker/x"}, f


@pytest.mark.parametrize("kind", KINDS)
def test_a_share_name_follows_the_mqtt_5_rules(kind: str) -> None:
    """MQTT 5 4.8.2: a ShareName is at least one character and contains no
    ``/``, ``+`` or ``#``, and a filter follows it.  CstrieBroker refuses
    the rest with 0x80, whatever the ACL grants, and holds nothing for
    them; stock reads each as an ordinary filter (refusing ``$share/g#/x``
    for its misplaced ``#``)."""
    with acl_broker(kind, {"user": ["#", "$SYS/#"]}) as w:
        raw = RawClient(w.b.port, "raw")  # paho will not send $share/g#/x
        try:
            bad = ["$share/+/x", "$share//x", "$share/g#/x", "$share/g", "$share/g/"]
            codes = raw.subscribe(*((f, 0) for f in bad))
            held = w.b.filters_of("raw")
        finally:
            raw.close()
        if kind == "stock":
            assert codes == [0, 0, SUBACK_FAILURE, 0, 0]
            assert held == {f for f, code in zip(bad, codes, strict=True) if code == 0}
        else:
            assert codes == [SUBACK_FAILURE] * len(bad)
            assert held == set()


# ------------------------------------------------------------------ wills
@pytest.mark.parametrize("kind", KINDS)
def test_difference_9_a_will_may_not_write_a_dollar_topic(kind: str) -> None:
    """Difference 9, MQTT 4.7.2 (the server should stop clients exchanging
    messages on ``$`` topics; amqtt refuses a PUBLISH there): a will on
    ``$SYS/...`` is published and retained by stock, so any client can write
    the broker's status topics; CstrieBroker publishes and retains nothing."""
    with acl_broker(kind, {"ops": ["$SYS/#"], "w": ["w/#"]}) as w:
        watcher = w.connect("ops")
        assert watcher.subscribe(("$SYS/broker/clients/#", 0)) == [0]
        dying = Client(w.b.port, "w", username="w")
        dying.set_will("$SYS/broker/clients/connected", b"0", retain=True)
        try:
            dying.connect()
            dying.drop()
            wait_until("w is gone", lambda: w.b.session_state("w") != "connected")
        finally:
            dying.close()
        watcher.sync(via=w.connect("ops"))
        retained = w.b.call(lambda b: sorted(b.retained_messages))
        if kind == "stock":
            assert watcher.take() == [Delivery("$SYS/broker/clients/connected", b"0", 0, False)]
            assert retained == ["$SYS/broker/clients/connected", SYS_VERSION]
        else:
            assert watcher.take() == []
            assert retained == [SYS_VERSION]


@pytest.mark.parametrize("kind", KINDS)
def test_difference_9_a_will_needs_its_clients_publish_acl(kind: str) -> None:
    """Difference 9: a will is published only where its client may publish
    (``publish_acl``).  Stock routes and retains a will on ``bob/cmd`` from
    a client that may publish only to ``w/#``; both brokers publish its will
    on ``w/status``."""
    acl = {"bob": ["bob/#", "w/#"], "w": ["w/#"]}
    with acl_broker(kind, acl, publish_acl={"w": ["w/#"], "bob": ["bob/#"]}) as w:
        bob = w.connect("bob")
        assert bob.subscribe(("bob/#", 0), ("w/#", 0)) == [0, 0]
        for cid, topic in (("w1", "bob/cmd"), ("w2", "w/status")):
            dying = Client(w.b.port, cid, username="w")
            dying.set_will(topic, b"gone", retain=True)
            try:
                dying.connect()
                dying.drop()
                wait_until(f"{cid} is gone", lambda c=cid: w.b.session_state(c) != "connected")
            finally:
                dying.close()
        bob.sync(via=w.connect("bob"))
        retained = w.b.call(lambda b: sorted(b.retained_messages))
        if kind == "stock":
            assert topics(bob.take()) == ["bob/cmd", "w/status"]
            assert retained == [SYS_VERSION, "bob/cmd", "w/status"]
        else:
            assert topics(bob.take()) == ["w/status"]
            assert retained == [SYS_VERSION, "w/status"]


# ---------------------------------------------------- what a client receives
@pytest.mark.parametrize("kind", KINDS)
def test_difference_10_retained_messages_pass_the_receive_acl(kind: str) -> None:
    """Difference 10: the plugin's ``receive-acl`` (deprecated ``topic-check``
    configuration, the only one that reads it in amqtt 0.12.1) decides what a
    client may receive.  Both brokers check it for a live message; stock
    sends the retained messages a new subscription matches without it."""
    acl = with_sync({"u": ["r/#"]})
    config = {
        "listeners": LISTENERS,
        "auth": {"plugins": ["auth_anonymous"], "allow-anonymous": False},
        "topic-check": {
            "enabled": True,
            "plugins": ["topic_acl"],
            "acl": acl,
            "receive-acl": with_sync({"u": ["r/public"]}),
        },
    }
    with acl_broker(kind, {}, config=config) as w:
        w.acl = with_sync({"u": ["r/public"]})  # what u may receive
        pub = w.connect("u")
        pub.publish("r/secret", b"s", retain=True)
        pub.publish("r/public", b"p", retain=True)
        sub = w.connect("u")
        assert sub.subscribe(("r/#", 0)) == [0]
        sub.sync(via=pub)
        retained = topics(sub.take())
        pub.publish("r/secret", b"s2")
        pub.publish("r/public", b"p2")
        sub.sync(via=pub)
        assert topics(sub.take()) == ["r/public"]
        assert retained == (["r/public", "r/secret"] if kind == "stock" else ["r/public"])


@pytest.mark.parametrize("kind", KINDS)
def test_difference_8_a_resumed_session_gets_only_what_its_new_user_may_read(kind: str) -> None:
    """Difference 8, checked when a message goes out: client id ``dev``
    subscribes to ``alice/#`` as alice in a persistent session and comes back
    as bob (amqtt resumes a session by client id and takes the new user
    name).  Stock sends bob what alice's subscription queued and what it
    matches afterwards; CstrieBroker sends bob nothing his ACL does not
    grant.  Either way bob may UNSUBSCRIBE the filter he inherited (an
    UNSUBSCRIBE needs no permission: MQTT 3.10.4)."""
    with acl_broker(kind, {"alice": ["alice/#"], "bob": ["bob/#"], "pub": ["p"]}) as w:
        dev = w.connect("alice", "dev", clean=False)
        assert dev.subscribe(("alice/#", 1)) == [1]
        dev.disconnect()
        wait_until("dev is away", lambda: w.b.session_state("dev") == "disconnected")
        pub, watch = w.connect("pub"), w.connect("alice")
        assert watch.subscribe(("alice/#", 0)) == [0]
        pub.publish("alice/1", b"queued", qos=1)
        # amqtt acknowledges a PUBLISH before it routes it: once a later
        # message reached watch, alice/1 is queued for dev
        watch.sync(via=pub)
        assert dev.connect(clean_session=False, username="bob") is True
        pub.publish("alice/2", b"live", qos=1)
        dev.sync(via=pub)
        if kind == "stock":
            assert topics(dev.take()) == ["alice/1", "alice/2"]
        else:
            assert dev.take() == []
        dev.unsubscribe("alice/#")
        assert w.b.filters_of("dev") == {"sync/dev"}
        pub.publish("alice/3", b"after", qos=1)
        dev.sync(via=pub)
        assert dev.take() == []


# ------------------------------------------------------------- UNSUBSCRIBE
def test_unsubscribe_removes_exactly_the_subscription_its_string_made() -> None:
    """MQTT 3.10.4 and 5 4.8.2: an UNSUBSCRIBE removes the subscription whose
    filter is the same string: ``$share/g/u/#`` leaves share g on ``u/#``,
    and nothing else.  The routed filter ``u/#``, another ShareName, or a
    malformed share change nothing (amqtt's UNSUBACK has no failure code);
    the client's other subscriptions and the group's other members keep
    theirs."""
    with acl_broker("cstrie", {"u": ["u/#"]}) as w:
        c1, c2, pub = w.connect("u"), w.connect("u"), w.connect("u")
        assert c1.subscribe(("$share/g/u/#", 0), ("u/+", 0)) == [0, 0]
        assert c2.subscribe(("$share/g/u/#", 0)) == [0]
        held = w.b.filters_of(c1.client_id)
        for other in ("u/#", "$share/h/u/#", "$share/g", "$share//u/#", "$share/g/u/+"):
            c1.unsubscribe(other)
            assert w.b.filters_of(c1.client_id) == held, other
        w.b.check_routes()
        n = 4
        for i in range(n):
            pub.publish(f"u/{i}/x", b"m")
        for c in (c1, c2):
            c.sync(via=pub)
        assert len(c1.take()) + len(c2.take()) == n, "share g still has both members"
        c1.unsubscribe("$share/g/u/#")
        assert w.b.filters_of(c1.client_id) == held - {"$share/g/u/#"}
        for i in range(n):
            pub.publish(f"u/{i}/x", b"m")
        pub.publish("u/y", b"m")
        for c in (c1, c2):
            c.sync(via=pub)
        assert topics(c1.take()) == ["u/y"], "u/+ stays"
        assert topics(c2.take()) == sorted([*(f"u/{i}/x" for i in range(n)), "u/y"])


def test_a_user_the_acl_does_not_list_gets_nothing() -> None:
    """amqtt's plugin: a user name without entries may subscribe to nothing,
    through ``$share`` neither."""
    with acl_broker("cstrie", {"pub": ["#"]}) as w:
        w.acl["nobody"] = []
        nobody = Client(w.b.port, username="nobody")
        w.clients.append(nobody)
        with pytest.raises(AssertionError):
            nobody.connect()  # connected, but its marker subscription is refused
        codes = nobody.subscribe(("#", 0), ("$share/g/#", 0), ("a", 0), ("$share/g/a", 0))
        assert codes == [SUBACK_FAILURE] * 4
        assert w.b.filters_of(nobody.client_id) == set()
