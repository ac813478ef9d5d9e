"""MQTT rules, one by one, with real paho-mqtt clients over 127.0.0.1 against an
in-process ``CstrieBroker`` (``tests/support/amqtt_helpers.py``).

Written from MQTT 3.1.1 (and MQTT 5 for shared subscriptions); section numbers
in the docstrings.  The places where the integration deliberately differs from
stock amqtt 0.12 (``cstrie/integrations/amqtt.py``, differences 1-12) run the
same scenario on stock ``amqtt.broker.Broker`` too and assert the difference;
differences 8-10 (access control) are in ``test_integration_amqtt_acl.py``,
11 (per-client bounds) in ``test_integration_amqtt_bounds.py``.  After every
scenario the broker's routes must equal its subscriptions (``check_routes``).

No sleeps: "nothing else arrived" is checked with a marker message
(``Client.sync``) published after the messages under test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("amqtt")
pytest.importorskip("paho.mqtt")

from amqtt_helpers import (
    BrokerThread,
    Client,
    Delivery,
    RawClient,
    running_broker,
    wait_until,
)

BOTH = pytest.mark.parametrize("broker", ["stock", "cstrie"], indirect=True)
Connect = Callable[..., Client]


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerThread]:
    """A CstrieBroker (or ``request.param``'s kind); its routes are checked
    after the scenario, once its clients are gone."""
    kind = getattr(request, "param", "cstrie")
    with running_broker(kind) as b:
        yield b
        b.check_routes()


@pytest.fixture
def connect(broker: BrokerThread) -> Iterator[Connect]:
    """``connect(client_id=None, clean_session=True)``: a connected Client."""
    made: list[Client] = []

    def make(client_id: str | None = None, clean_session: bool = True) -> Client:
        c = Client(broker.port, client_id, clean_session=clean_session)
        made.append(c)
        c.connect()
        return c

    yield make
    for c in made:
        c.close()


def topics(deliveries: list[Delivery]) -> list[str]:
    return [d.topic for d in deliveries]


def lose_connection_with_will(
    broker: BrokerThread, topic: str, payload: bytes, qos: int = 0, retain: bool = False
) -> None:
    """Client "w" connects with this will and loses its connection (no
    DISCONNECT), so the broker publishes the will; returns once the broker
    no longer has "w" connected."""
    dying = Client(broker.port, "w")
    dying.set_will(topic, payload, qos=qos, retain=retain)
    try:
        dying.connect()
        dying.drop()
        wait_until("w's session is not connected", lambda: broker.session_state("w") != "connected")
    finally:
        dying.close()


def persistent_session_away(broker: BrokerThread, connect: Connect, *filters: str) -> Client:
    """Client "p" with a persistent session subscribed to ``filters`` at QoS 1,
    disconnected (the broker has it disconnected when this returns)."""
    sub = connect("p", clean_session=False)
    assert sub.subscribe(*((f, 1) for f in filters)) == [1] * len(filters)
    sub.disconnect()
    wait_until("p is disconnected", lambda: broker.session_state("p") == "disconnected")
    return sub


# ------------------------------------------------------------- wildcards
#: every topic published; each filter below must receive exactly the ones listed
TOPICS = [
    "a", "ab", "x", "a/", "a/b", "a/c", "a//c", "a/b/c", "a/b/d", "a/b/c/", "a/b/c/d",
    "A/b/c", "/", "//", "/y", "x/", "x/y", "b/a", "b/a/c",
]  # fmt: skip
#: filter -> the topics of TOPICS it matches (MQTT 3.1.1 section 4.7)
WILDCARDS: dict[str, set[str]] = {
    # "+" matches exactly one level, which may be empty (4.7.1.3)
    "a/+/c": {"a/b/c", "a//c"},
    "+": {"a", "ab", "x"},
    "+/+": {"a/", "a/b", "a/c", "/", "/y", "x/", "x/y", "b/a"},
    # "#" matches its parent level and any number of levels below (4.7.1.2)
    "a/#": {"a", "a/", "a/b", "a/c", "a//c", "a/b/c", "a/b/d", "a/b/c/", "a/b/c/d"},
    "a/+/#": {"a/", "a/b", "a/c", "a//c", "a/b/c", "a/b/d", "a/b/c/", "a/b/c/d"},
    "/#": {"/", "//", "/y"},
    "#": set(TOPICS),
    # no wildcard: the whole topic, every level equal, case-sensitive (4.7.3)
    "a/b/c": {"a/b/c"},
}


def test_plus_and_hash_match_their_levels(broker: BrokerThread, connect: Connect) -> None:
    subs = {f: connect() for f in WILDCARDS}
    for f, c in subs.items():
        assert c.subscribe((f, 0)) == [0]
    pub = connect()
    for t in TOPICS:
        pub.publish(t, t.encode())
    for f, c in subs.items():
        c.sync(via=pub)
        got = topics(c.take())
        assert got == [t for t in TOPICS if t in WILDCARDS[f]], f"{f!r} received {got}"


def test_filters_starting_with_a_wildcard_do_not_see_dollar_topics(
    broker: BrokerThread, connect: Connect
) -> None:
    """MQTT-4.7.2-1: "#" and "+/..." do not match topics starting with "$";
    "$SYS/#" does.  Clients may not publish $ topics, so the broker publishes
    them (as its $SYS plugin would)."""
    filters = {
        "#": {"a/x"},
        "+/x": {"a/x"},
        "+/+/b": set(),
        "$SYS/#": {"$SYS/x", "$SYS/a/b"},
        "$SYS/+": {"$SYS/x"},
        "$SYS/+/b": {"$SYS/a/b"},
    }
    subs = {f: connect() for f in filters}
    for f, c in subs.items():
        assert c.subscribe((f, 0)) == [0]
    for t in ("$SYS/x", "$SYS/a/b"):
        broker.run(broker.broker.internal_message_broadcast(t, t.encode()))
    pub = connect()
    pub.publish("a/x", b"a/x")
    for f, c in subs.items():
        c.sync(via=pub)
        assert set(topics(c.take())) == filters[f], f


# ------------------------------------------------------------------ QoS
def test_each_subscriber_gets_its_subscriptions_qos(broker: BrokerThread, connect: Connect) -> None:
    """3.8.4 / 3.9.3: the SUBACK grants the QoS asked for; a message published
    at QoS 2 reaches each subscriber at its granted QoS (the minimum of the two)."""
    subs = [connect() for _ in range(3)]
    for qos, c in enumerate(subs):
        assert c.subscribe(("q/#", qos)) == [qos]
    pub = connect()
    pub.publish("q/x", b"m", qos=2)
    for qos, c in enumerate(subs):
        c.sync(via=pub)
        assert c.take() == [Delivery("q/x", b"m", qos, False)]


def test_max_qos_caps_the_granted_qos() -> None:
    """A server may grant a lower QoS than asked (3.8.4); amqtt's "max-qos"."""
    with running_broker("cstrie", max_qos=1) as b:
        sub, pub = Client(b.port), Client(b.port)
        try:
            sub.connect()
            pub.connect()
            assert sub.subscribe(("q/#", 2), ("r/#", 0)) == [1, 0]
            pub.publish("q/x", b"m", qos=2)
            sub.sync(via=pub)
            assert sub.take() == [Delivery("q/x", b"m", 1, False)]
        finally:
            sub.close()
            pub.close()
        b.check_routes()


@BOTH
def test_difference_5_delivery_qos_is_at_most_the_publishers(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 5, 3.8.4: a message reaches a subscriber at the minimum of
    the QoS it was published with and the subscription's.  Stock sends a
    client's PUBLISH at the subscription's QoS, above the publisher's."""
    subs = [connect() for _ in range(3)]
    for qos, c in enumerate(subs):
        assert c.subscribe(("q/#", qos)) == [qos]
    pub = connect()
    pub.publish("q/0", b"m0", qos=0)
    pub.publish("q/1", b"m1", qos=1)
    for sub_qos, c in enumerate(subs):
        c.sync(via=pub)
        if broker.kind == "stock":
            want = [Delivery("q/0", b"m0", sub_qos, False), Delivery("q/1", b"m1", sub_qos, False)]
        else:
            want = [
                Delivery("q/0", b"m0", 0, False),
                Delivery("q/1", b"m1", min(1, sub_qos), False),
            ]
        assert c.take() == want, sub_qos


@BOTH
def test_difference_5_a_will_is_delivered_at_most_at_the_granted_qos(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 5 for a will (3.1.2.6: published as a message of the will's
    QoS): a QoS 2 will reaches a QoS 0 subscriber at QoS 0.  Stock sends the
    will at its own QoS to every subscriber, above what it granted."""
    low, high = connect(), connect()
    assert low.subscribe(("w/#", 0)) == [0]
    assert high.subscribe(("w/#", 2)) == [2]
    lose_connection_with_will(broker, "w/gone", b"bye", qos=2)
    pub = connect()
    for c, granted in ((low, 0), (high, 2)):
        c.sync(via=pub)
        qos = 2 if broker.kind == "stock" else granted
        assert c.take() == [Delivery("w/gone", b"bye", qos, False)]


@BOTH
def test_difference_5_a_plugin_broadcast_is_capped_by_the_subscription(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 5 for ``internal_message_broadcast`` (what plugins call): a
    QoS 2 broadcast reaches a QoS 1 subscriber at QoS 1 (stock: 2); one
    without a QoS goes at each subscription's QoS, in both brokers."""
    sub, pub = connect(), connect()
    assert sub.subscribe(("b/#", 1)) == [1]
    broker.run(broker.broker.internal_message_broadcast("b/forced", b"f", 2))
    broker.run(broker.broker.internal_message_broadcast("b/free", b"n"))
    sub.sync(via=pub)
    forced = 2 if broker.kind == "stock" else 1
    # as a multiset: a QoS 2 message reaches the client after its PUBREL
    assert Counter(sub.take()) == Counter(
        [Delivery("b/forced", b"f", forced, False), Delivery("b/free", b"n", 1, False)]
    )


@BOTH
def test_difference_5_a_queued_qos0_message_arrives_at_qos0(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 5 for a disconnected persistent session: amqtt queues what
    arrives for its QoS 1 subscription, a QoS 0 message too (3.1.2.4 allows
    storing those), and sends it on reconnect at the minimum of the two QoS,
    so at QoS 0.  Stock sends it at the subscription's QoS 1."""
    sub = persistent_session_away(broker, connect, "p/#")
    pub = connect()
    pub.publish("p/0", b"0", qos=0)
    pub.publish("p/1", b"1", qos=1)
    assert sub.connect(clean_session=False) is True
    sub.sync(via=pub)
    got = [(d.topic, d.qos) for d in sub.take()]
    assert got == [("p/0", 1 if broker.kind == "stock" else 0), ("p/1", 1)]


# ------------------------------------------------------------- retained
def test_subscribe_delivers_the_matching_retained_messages(
    broker: BrokerThread, connect: Connect
) -> None:
    """3.3.1.3: a new subscription receives the retained message of every topic
    it matches, with RETAIN set, at the minimum of the message's QoS and the
    subscription's; a message that arrives afterwards has RETAIN 0."""
    pub = connect()
    pub.publish("r/a", b"1", qos=1, retain=True)
    pub.publish("r/b", b"2", qos=2, retain=True)
    pub.publish("r/a/b", b"3", qos=1, retain=True)
    pub.publish("s/x", b"4", qos=1, retain=True)
    sub = connect()
    assert sub.subscribe(("r/+", 1)) == [1]
    sub.sync(via=pub)
    assert Counter(sub.take()) == Counter(
        [Delivery("r/a", b"1", 1, True), Delivery("r/b", b"2", 1, True)]
    )
    low = connect()
    assert low.subscribe(("r/#", 0)) == [0]
    low.sync(via=pub)
    assert Counter(low.take()) == Counter(
        Delivery(t, p, 0, True) for t, p in (("r/a", b"1"), ("r/b", b"2"), ("r/a/b", b"3"))
    )
    # MQTT-3.3.1-9: to an established subscription, RETAIN is 0
    pub.publish("r/a", b"5", qos=1, retain=True)
    sub.sync(via=pub)
    assert sub.take() == [Delivery("r/a", b"5", 1, False)]


@BOTH
def test_difference_6_a_retained_qos0_message_is_sent_at_qos0(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 6, 3.3.1.3 / 3.8.4: a retained message goes to a new
    subscription at the minimum of its QoS and the subscription's, so a QoS 0
    one at QoS 0.  Stock's ``retained.qos or qos`` sends it at the
    subscription's QoS."""
    pub = connect()
    pub.publish("r/b", b"2", qos=0, retain=True)
    sub = connect()
    assert sub.subscribe(("r/+", 1)) == [1]
    sub.sync(via=pub)
    qos = 1 if broker.kind == "stock" else 0
    assert sub.take() == [Delivery("r/b", b"2", qos, True)]


def test_an_empty_retained_message_clears_the_topic(broker: BrokerThread, connect: Connect) -> None:
    """MQTT-3.3.1-10/-11: a retained PUBLISH with no payload removes the
    retained message and is delivered as normal to current subscribers."""
    pub, live = connect(), connect()
    assert live.subscribe(("r/#", 0)) == [0]
    pub.publish("r/a", b"kept", retain=True)
    pub.publish("r/b", b"kept too", retain=True)
    pub.publish("r/a", b"", retain=True)
    live.sync(via=pub)
    assert topics(live.take()) == ["r/a", "r/b", "r/a"]
    late = connect()
    assert late.subscribe(("r/#", 0)) == [0]
    late.sync(via=pub)
    assert late.take() == [Delivery("r/b", b"kept too", 0, True)]
    assert broker.call(lambda b: sorted(b.retained_messages)) == ["r/b"]


@BOTH
def test_difference_1_no_retained_messages_on_connect(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 1: a client that reconnects to its persistent session is sent
    no retained message (3.3.1.3 sends them when a subscription is made).  Stock
    amqtt sends, at QoS 0, the retained messages matching every filter in the
    broker, its own (d/#) and another client's (e/#) alike."""
    # a QoS 0 subscription: amqtt queues nothing for it while the client is away
    persistent = connect("p", clean_session=False)
    assert persistent.subscribe(("d/#", 0)) == [0]
    other, pub = connect(), connect()
    assert other.subscribe(("e/#", 0)) == [0]
    persistent.disconnect()
    wait_until("p's session is disconnected", lambda: broker.session_state("p") == "disconnected")
    pub.publish("d/x", b"retained for d", qos=0, retain=True)
    pub.publish("e/y", b"retained for e", qos=0, retain=True)
    other.sync(via=pub)
    assert persistent.connect(clean_session=False) is True  # the session was kept
    persistent.sync(via=pub)
    got = persistent.take()
    if broker.kind == "stock":
        sent = [
            Delivery("d/x", b"retained for d", 0, True),
            Delivery("e/y", b"retained for e", 0, True),
        ]
        assert Counter(got) == Counter(sent)
    else:
        assert got == []


# ------------------------------------------------------- (re)subscribing
@BOTH
def test_difference_2_a_repeated_subscribe_replaces_the_qos(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 2, MQTT-3.8.4-3: a SUBSCRIBE to a filter the client already
    has replaces that subscription (new QoS, one copy).  Stock keeps the first
    QoS while its SUBACK grants the new one."""
    sub, pub = connect(), connect()
    assert sub.subscribe(("q/x", 0)) == [0]
    assert sub.subscribe(("q/x", 1)) == [1]
    pub.publish("q/x", b"m", qos=1)
    sub.sync(via=pub)
    qos = 0 if broker.kind == "stock" else 1
    assert sub.take() == [Delivery("q/x", b"m", qos, False)]
    assert broker.call(lambda b: [q for _, q in b._subscriptions["q/x"]]) == [qos]


@BOTH
def test_difference_3_invalid_filters_are_refused(broker: BrokerThread, connect: Connect) -> None:
    """Difference 3: the empty filter (MQTT-4.7.3-1) and a filter with U+0000
    (MQTT-4.7.3-2) get SUBACK 0x80 like misplaced wildcards (4.7.1); stock
    grants the first two."""
    raw = RawClient(broker.port, "raw-sub")
    try:
        codes = raw.subscribe(("", 0), ("a/\x00", 1), ("a/#/b", 0), ("a+", 0), ("ok/x", 1))
    finally:
        raw.close()
    if broker.kind == "stock":
        assert codes == [0, 1, 0x80, 0x80, 1]
    else:
        assert codes == [0x80, 0x80, 0x80, 0x80, 1]


@BOTH
def test_difference_3_a_topic_with_u0000_is_refused(broker: BrokerThread, connect: Connect) -> None:
    """Difference 3: a PUBLISH whose topic has U+0000 (MQTT-4.7.3-2) is a
    protocol violation (4.8): CstrieBroker handles it as amqtt handles a topic
    with a wildcard, routing nothing and ending the client's message loop (so
    the next PUBLISH on that connection is not routed either); stock routes
    both.  (amqtt ends the loop without closing the socket.)"""
    watcher = connect()
    assert watcher.subscribe(("#", 0)) == [0]

    def connections(b: Any) -> int:
        return int(b._servers["default"].conn_count)

    raw = RawClient(broker.port, "raw-pub")
    try:
        n = broker.call(connections)
        raw.publish("a/\x00", b"nul")
        raw.publish("after", b"next")
        if broker.kind == "stock":
            assert topics(watcher.wait_deliveries(2)) == ["a/\x00", "after"]
        else:
            wait_until("the message loop ended", lambda: broker.call(connections) == n - 1)
            watcher.sync(via=connect())
            assert watcher.take() == []
    finally:
        raw.close()


@BOTH
def test_difference_3_a_will_with_u0000_is_neither_routed_nor_retained(
    broker: BrokerThread, connect: Connect
) -> None:
    """A will whose topic has U+0000 (MQTT-4.7.3-2), sent when its client's
    connection is lost: CstrieBroker's retained index cannot hold the topic, so
    it routes and retains nothing and ends the session (a ValueError escaping
    amqtt's disconnect handling would leave the session connected for good);
    stock routes and retains the will."""
    watcher = connect()
    assert watcher.subscribe(("#", 0)) == [0]
    lose_connection_with_will(broker, "a/\x00", b"will", retain=True)
    watcher.sync(via=connect())
    retained = broker.call(lambda b: list(b.retained_messages))
    if broker.kind == "stock":
        assert topics(watcher.take()) == ["a/\x00"]
        assert retained == ["a/\x00"]
    else:
        assert watcher.take() == []
        assert retained == []


# ------------------------------------------------------------- $share
@BOTH
def test_difference_4_one_delivery_per_share_group_round_robin(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 4, MQTT 5 4.8.2: each message matching $share/g/s/# goes to
    exactly one member of g (round-robin: in turns); an ordinary subscriber of
    the same filter gets every message.  Stock treats the filter as a literal
    one starting with the word "$share", which no client may publish to."""
    members = [connect() for _ in range(3)]
    for m in members:
        assert m.subscribe(("$share/g/s/#", 1)) == [1]
    ordinary, pub = connect(), connect()
    assert ordinary.subscribe(("s/#", 0)) == [0]
    n = 30
    for i in range(n):
        pub.publish(f"s/{i}", str(i).encode(), qos=1)
    got = []
    for m in [*members, ordinary]:
        m.sync(via=pub)
        got.append(m.take())
    assert sorted(topics(got[-1])) == sorted(f"s/{i}" for i in range(n))
    shared = [d for ds in got[:-1] for d in ds]
    if broker.kind == "stock":
        assert shared == []
        return
    assert sorted(topics(shared)) == sorted(f"s/{i}" for i in range(n)), "once per message"
    assert all(d.qos == 1 and not d.retain for d in shared)
    assert [len(ds) for ds in got[:-1]] == [n // 3] * 3, "round-robin spreads evenly"


def test_difference_4_a_shared_subscription_is_its_name_and_its_filter(
    broker: BrokerThread, connect: Connect
) -> None:
    """MQTT 5 4.8.2: $share/g/t/# and $share/g/t/+ are two shared
    subscriptions (same ShareName, other filter), so a message matching both
    is sent to one member of each; $share/h/t/+ is a third.  A member of two
    of them that both pick gets one copy (difference 12)."""
    a, b, c = connect(), connect(), connect()
    assert a.subscribe(("$share/g/t/#", 0)) == [0]
    assert b.subscribe(("$share/g/t/+", 0)) == [0]
    assert c.subscribe(("$share/h/t/+", 0), ("$share/g/t/#", 0)) == [0, 0]
    pub = connect()
    n = 6
    for i in range(n):
        pub.publish(f"t/{i}", b"m")
    got = {}
    for name, client in (("a", a), ("b", b), ("c", c)):
        client.sync(via=pub)
        got[name] = Counter(topics(client.take()))
    each = Counter(f"t/{i}" for i in range(n))
    # t/# (g) has members a and c, t/+ (g) has b alone, t/+ (h) has c alone
    assert got["b"] == each, "g's t/+ delivers every message to its one member"
    assert got["c"] == each, "h's t/+ picks c every time; picked by g's t/# too, c gets one copy"
    assert got["a"] in (
        Counter(f"t/{i}" for i in range(0, n, 2)),
        Counter(f"t/{i}" for i in range(1, n, 2)),
    ), "g's t/# alternates between a and c"


def test_difference_4_an_offline_share_member_is_passed_over(
    broker: BrokerThread, connect: Connect
) -> None:
    """A member whose session is disconnected (persistent, so still a member)
    gets nothing; the connected members get every message, each once."""
    online = [connect() for _ in range(2)]
    offline = connect("offline", clean_session=False)
    for m in [*online, offline]:
        assert m.subscribe(("$share/g/s/#", 0)) == [0]
    offline.disconnect()
    wait_until("offline is disconnected", lambda: broker.session_state("offline") == "disconnected")
    pub = connect()
    n = 12
    for i in range(n):
        pub.publish(f"s/{i}", b"x")
    got = []
    for m in online:
        m.sync(via=pub)
        got += m.take()
    assert sorted(topics(got)) == sorted(f"s/{i}" for i in range(n))
    assert offline.connect(clean_session=False) is True
    offline.sync(via=pub)
    assert offline.take() == []


@BOTH
def test_difference_4_no_retained_message_for_a_share(
    broker: BrokerThread, connect: Connect
) -> None:
    """MQTT 5 4.8.2: no retained message is sent for a shared subscription;
    an ordinary one on the same filter gets it."""
    pub = connect()
    pub.publish("s/r", b"retained", qos=1, retain=True)
    member, ordinary = connect(), connect()
    assert member.subscribe(("$share/g/s/#", 1)) == [1]
    assert ordinary.subscribe(("s/#", 1)) == [1]
    for c in (member, ordinary):
        c.sync(via=pub)
    assert member.take() == []
    assert ordinary.take() == [Delivery("s/r", b"retained", 1, True)]


# ------------------------------------------------------ session lifecycle
def test_unsubscribe_stops_deliveries(broker: BrokerThread, connect: Connect) -> None:
    """3.10.4: after UNSUBACK the filter delivers nothing more to the client."""
    sub, pub = connect(), connect()
    assert sub.subscribe(("u/#", 0), ("u/+", 0)) == [0, 0]
    pub.publish("u/1", b"a")
    pub.publish("u/1/x", b"a")
    sub.sync(via=pub)
    assert topics(sub.take()) == ["u/1", "u/1/x"]
    sub.unsubscribe("u/#")
    pub.publish("u/2", b"b")
    pub.publish("u/2/x", b"b")
    sub.sync(via=pub)
    assert topics(sub.take()) == ["u/2"]
    sub.unsubscribe("u/+")
    pub.publish("u/3", b"c")
    sub.sync(via=pub)
    assert sub.take() == []
    assert broker.filters_of(sub.client_id) == {"sync/" + sub.client_id}


def test_a_clean_sessions_subscriptions_end_with_its_connection(
    broker: BrokerThread, connect: Connect
) -> None:
    """3.1.2.4: a clean session lasts as long as its network connection; its
    subscriptions go when it disconnects (amqtt's session monitor removes them
    within a second), and the client id reconnects to no session."""
    sub = connect("clean")
    assert sub.subscribe(("a/#", 1), ("b/+", 0), ("$share/g/c", 1)) == [1, 0, 1]
    keep = connect()
    assert keep.subscribe(("a/#", 0)) == [0]
    sub.disconnect()
    wait_until("the clean session's filters are gone", lambda: not broker.filters_of("clean"))
    broker.check_routes()
    assert broker.filters_of(keep.client_id) == {"a/#", "sync/" + keep.client_id}
    assert sub.connect(clean_session=False) is False


def test_a_persistent_session_gets_the_qos1_messages_sent_while_offline(
    broker: BrokerThread, connect: Connect
) -> None:
    """3.1.2.4: a session with CleanSession 0 keeps its subscriptions and the
    QoS 1 and 2 messages that arrive while it is disconnected, in order; QoS 0
    ones may be dropped, and amqtt drops them (here those of a QoS 0
    subscription; difference 5 covers a QoS 0 message)."""
    sub = connect("p", clean_session=False)
    assert sub.subscribe(("p/#", 1), ("z/#", 0)) == [1, 0]
    sub.disconnect()
    wait_until("p is disconnected", lambda: broker.session_state("p") == "disconnected")
    pub = connect()
    pub.publish("p/1", b"1", qos=1)
    pub.publish("p/2", b"2", qos=1)
    pub.publish("z/3", b"3", qos=1)
    assert broker.filters_of("p") == {"p/#", "z/#", "sync/p"}
    assert sub.connect(clean_session=False) is True
    sub.sync(via=pub)
    got = sub.take()
    assert [(d.topic, d.payload, d.qos) for d in got] == [("p/1", b"1", 1), ("p/2", b"2", 1)]


@BOTH
def test_difference_7_queued_messages_are_not_marked_retained(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 7, MQTT-3.3.1-9: a message queued for a disconnected session
    matches a subscription it already had, so it is sent with RETAIN 0 when the
    session reconnects.  Stock sets RETAIN 1."""
    sub = persistent_session_away(broker, connect, "p/#")
    pub = connect()
    pub.publish("p/1", b"1", qos=1)
    assert sub.connect(clean_session=False) is True
    sub.sync(via=pub)
    assert sub.take() == [Delivery("p/1", b"1", 1, broker.kind == "stock")]


@BOTH
def test_difference_12_one_copy_per_client_at_the_highest_qos(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 12, MQTT 3.1.1 3.3.5: a client whose filters overlap gets
    the message respecting the highest QoS of the matching subscriptions; a
    copy per further filter is allowed, not required.  CstrieBroker sends one
    copy, at the highest QoS (capped by the message's, difference 5); stock
    one per matching filter, each at its filter's QoS."""
    sub, pub = connect(), connect()
    assert sub.subscribe(("o/#", 0), ("o/+", 1), ("o/x", 1), ("o/y", 0)) == [0, 1, 1, 0]
    pub.publish("o/x", b"m1", qos=1)
    pub.publish("o/x", b"m0", qos=0)
    pub.publish("o/y", b"y", qos=1)
    sub.sync(via=pub)
    got = Counter(sub.take())
    if broker.kind == "stock":
        copies = [("o/x", b"m1", q) for q in (0, 1, 1)] + [("o/x", b"m0", q) for q in (0, 1, 1)]
        copies += [("o/y", b"y", q) for q in (0, 1, 0)]
    else:
        copies = [("o/x", b"m1", 1), ("o/x", b"m0", 0), ("o/y", b"y", 1)]
    assert got == Counter(Delivery(t, p, q, False) for t, p, q in copies)


@BOTH
def test_difference_12_a_share_pick_and_an_ordinary_filter_make_one_copy(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 12 with a shared subscription: a client that is the only
    member of $share/g/s/# (so picked for every message) and also holds s/+
    gets each message once, at the higher of the two QoS; another client in
    a second share group on the same filter still gets every message (each
    group sends each message to one member).  Stock routes no $share."""
    sub, other, pub = connect(), connect(), connect()
    assert sub.subscribe(("$share/g/s/#", 1), ("s/+", 0)) == [1, 0]
    assert other.subscribe(("$share/h/s/#", 0)) == [0]
    for i in range(4):
        pub.publish(f"s/{i}", b"m", qos=1)
    for c in (sub, other):
        c.sync(via=pub)
    each = [f"s/{i}" for i in range(4)]
    got, others = sub.take(), other.take()
    if broker.kind == "stock":
        assert sorted(topics(got)) == each and all(d.qos == 0 for d in got)
        assert others == []
    else:
        assert sorted(topics(got)) == each and all(d.qos == 1 for d in got)
        assert sorted(topics(others)) == each


@BOTH
def test_difference_12_a_disconnected_session_queues_one_copy(
    broker: BrokerThread, connect: Connect
) -> None:
    """Difference 12 for a disconnected persistent session: what it queues
    through overlapping QoS 1 filters comes back as one copy per message.
    Stock queues and sends one per filter (with RETAIN 1, difference 7)."""
    sub = persistent_session_away(broker, connect, "p/#", "p/+")
    pub = connect()
    pub.publish("p/1", b"1", qos=1)
    assert sub.connect(clean_session=False) is True
    sub.sync(via=pub)
    if broker.kind == "stock":
        assert sub.take() == [Delivery("p/1", b"1", 1, True)] * 2
    else:
        assert sub.take() == [Delivery("p/1", b"1", 1, False)]
