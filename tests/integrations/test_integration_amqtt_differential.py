"""Differential tests: one seeded script of real paho-mqtt client sessions, played
against stock amqtt's ``Broker`` and against ``CstrieBroker`` (a fresh broker
each), every delivery compared.

The script (:func:`make_script`): 4 clients connect (clean or persistent
session), subscribe (one or two filters per SUBSCRIBE, QoS 0-2, from a small
alphabet with empty levels, ``+``, ``#``, ``$SYS`` filters, ``$share`` filters
and a few invalid filters with U+0000), unsubscribe, publish (QoS 0/1, retained
or not, an empty retained payload clears), disconnect and reconnect; the broker
itself publishes (and retains) ``$SYS`` and ordinary topics as its plugins do.
Each client records every message it receives as (topic, payload, QoS, RETAIN),
tagged with the step that caused it, plus each SUBACK and CONNACK.

**Determinism.**  Every step waits for its acknowledgement (CONNACK, SUBACK,
UNSUBACK, PUBACK; for a DISCONNECT, until the broker marks the session
disconnected), then for a barrier: the acting client (or a driver client)
publishes a marker to every connected client's ``sync/<id>`` and to the
driver's, and waits until each got one.  amqtt broadcasts through one queue in
arrival order, one message after the other, and writes to a client in order,
so when the driver's marker arrives every message of the step has been routed
(even with no client connected, and copies queued for a disconnected session
included), both brokers see the same sequence of states, and every delivery
is attributed to its step.  A clean session that disconnected is removed
after the barrier, as amqtt's session monitor would within a second; the
monitor itself is stopped.  Removing a session deletes its filters from the
subscription dict, which stock's broadcast loop iterates while it awaits the
ACL plugin for each receiver: "dictionary changed size during iteration",
and the rest of the message's copies are lost.  Left to timing (the monitor's
tick, or a removal while the will was still routed), that lost a will's
copies, or a marker, in some runs.

**Comparison.**  Per client, step by step, in order; within a step (one action)
as a multiset, because MQTT leaves open the order of the retained messages one
SUBSCRIBE sends, and the brokers iterate differently (how often the order
differed is reported).  The documented differences
(``cstrie/integrations/amqtt.py``) stay in the script: SUBACKs are checked
against the model for each broker, and stock's deliveries are transformed
before the comparison; each transformation checks what it removes or
replaces, so a transformation that does not apply is a difference:

1. a CONNECT step: stock's QoS 0 RETAIN 1 deliveries are removed (CstrieBroker
   sends no retained messages on CONNECT); each must be a retained message of
   that moment (amqtt's queued messages are QoS >= 1);
2. a clean session that subscribes again to one of its filters with another
   QoS: stock keeps the first QoS, CstrieBroker the new one (persistent
   sessions and shares keep their QoS in the script: amqtt queues by QoS);
3. a filter with U+0000: CstrieBroker's SUBACK is 0x80 (stock grants it; such
   a filter matches no topic a client can publish);
4. ``$share/{g}/{f}`` (clean sessions only): stock never delivers through it;
   in CstrieBroker each shared subscription (ShareName and filter) that the
   topic matches must reach one of its connected members, whose one copy
   (12) may be that share's, at that member's QoS (capped as in 5);
5. a publish step: the copy goes at the minimum of the message's QoS and the
   subscription's, where stock uses the subscription's (or a plugin's or a
   will's given QoS); for a disconnected persistent session the same holds
   for the copy it queues (whether it queues is stock's rule, by stock's QoS);
6. a SUBSCRIBE step: stock's copy of a retained QoS 0 message, at the
   subscription's QoS, is replaced by one at QoS 0;
7. a CONNECT step resuming a persistent session: the copies stock queued
   while the session was away (RETAIN 1) are replaced by CstrieBroker's
   (RETAIN 0, QoS as in 5); a clean CONNECT drops them in both;
12. a publish step: stock's copies of the message to a client, one per
    matching filter, are replaced by CstrieBroker's one, at the highest of
    their QoS (as in 5); the same for what a disconnected session queues.

**The ACL run** (:func:`test_with_amqtts_acl_plugin_the_brokers_differ_only_as_documented`):
the same script with amqtt's ACL plugin configured (user name = client id;
each client's ``acl`` and ``publish_acl`` drawn per seed from a few entries,
plus ``sync/#`` for the markers).  The model computes what each broker
grants: stock by the plugin's level-by-level rule on the string as sent,
CstrieBroker by that rule on the routed filter and an entry covering it
(by enumeration over every topic of the script's alphabet; difference 8);
and which PUBLISH the plugin refuses (both brokers drop it).  More
transformations: 8, stock's copies and retained messages through a filter
only stock granted are removed; 9, a will CstrieBroker refuses (its
client may not publish there; such wills are never retained in the script)
loses stock's copies.  And a floor: 0 CstrieBroker deliveries outside the
receiving client's ACL (paho's matcher); stock's are counted.

A lost connection ("drop") publishes the client's will, which the
transformations treat as a publish at the will's QoS.  Left out of the
comparison, because amqtt's timing decides them in both brokers (see
:func:`compare`): a will's copy to its own client and a shared subscription's
pick of that client, which race with the end of its session; and the will of
a client that sent DISCONNECT, which amqtt sometimes publishes (a bug of its
protocol layer, kept by CstrieBroker; such wills are never retained in the
script).  The model also follows amqtt in keeping a resumed session's will
RETAIN flag.

0 differences are required.  Replay one seed with
``CSTRIE_AMQTT_DIFF_SEEDS=7 pytest tests/integrations/test_integration_amqtt_differential.py -s``
(comma-separated seeds; ``CSTRIE_AMQTT_DIFF_ACL_SEEDS`` for the ACL run,
``CSTRIE_AMQTT_DIFF_STEPS`` sets the script length).
"""

from __future__ import annotations

import functools
import itertools
import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("amqtt")
pytest.importorskip("paho.mqtt")

from amqtt.plugins.topic_checking import TopicAccessControlListPlugin
from amqtt_helpers import (
    ACL_PLUGIN,
    BrokerThread,
    Client,
    Delivery,
    broker_config,
    running_broker,
    wait_until,
)
from paho.mqtt.client import topic_matches_sub

from cstrie.integrations.amqtt import LIMITS

SEEDS = [int(s) for s in os.environ.get("CSTRIE_AMQTT_DIFF_SEEDS", "1,2,3,4,5,6,7,8").split(",")]
ACL_SEEDS = [
    int(s) for s in os.environ.get("CSTRIE_AMQTT_DIFF_ACL_SEEDS", "11,13,19,24").split(",")
]
STEPS = int(os.environ.get("CSTRIE_AMQTT_DIFF_STEPS", "300"))
CLIENTS = [f"c{i}" for i in range(4)]
DRIVER = "driver"
SUBACK_FAILURE = 0x80

WORDS = ["a", "b", ""]
FILTER_WORDS = ["a", "b", "", "+", "+"]
SPECIAL_FILTERS = ["#", "+/#", "$SYS/#", "$SYS/+", "$SYS/a/#", "+/+"]
INVALID_FILTERS = ["a/\x00", "\x00/#"]
GROUPS = ["g1", "g2"]
#: the ACL run: each client's ``acl`` and ``publish_acl`` (amqtt's ACL plugin,
#: user name = client id) are 1-3 of these, plus ``sync/#`` for the markers
ACL_ENTRIES = ["#", "+", "+/+", "+/#", "a/#", "a/+", "+/b", "b/#", "a", "a/b", "$SYS/#", "+/a/#"]
#: every topic of up to 5 levels over the script's words, a word standing for
#: every other word ("z") and a "$" word: a filter of the script (at most 4
#: levels) matches a topic an ACL entry (at most 3) does not only if one of
#: these is such a topic
UNIVERSE = [
    "/".join(words)
    for n in range(1, 6)
    for words in itertools.product(["a", "b", "", "z", "$SYS"], repeat=n)
]
MAX_SHARES = LIMITS["max_share_groups_per_client"]


# ------------------------------------------------------------------ matching
def matches(topic_filter: str, topic: str) -> bool:
    """MQTT 3.1.1 section 4.7 (for a valid filter), with the $ rule (4.7.2)."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    f, t = topic_filter.split("/"), topic.split("/")
    for i, word in enumerate(f):
        if word == "#":
            return True
        if i >= len(t) or (word != "+" and word != t[i]):
            return False
    return len(f) == len(t)


def share_of(topic_filter: str) -> tuple[str, str] | None:
    """(group, inner filter) of ``$share/{group}/{filter}``, else None."""
    if not topic_filter.startswith("$share/"):
        return None
    _, group, inner = topic_filter.split("/", 2)
    return group, inner


# ------------------------------------------------------------------ the ACL
Acl = dict[str, list[str]]


@functools.cache
def _topics_of(topic_filter: str) -> frozenset[str]:
    return frozenset(t for t in UNIVERSE if matches(topic_filter, t))


def entry_covers(entry: str, topic_filter: str) -> bool:
    """MQTT's reading of an ACL entry, by enumeration (not by the broker's
    rule): the entry matches every topic the filter matches."""
    return _topics_of(topic_filter) <= _topics_of(entry)


def stock_grants(acl: Acl | None, client: str, topic_filter: str) -> bool:
    """amqtt's plugin (stock): an entry fits the SUBSCRIBE string as sent,
    level by level (its own ``topic_ac``)."""
    if acl is None:
        return True
    return any(TopicAccessControlListPlugin.topic_ac(topic_filter, e) for e in acl[client])


def cstrie_grants(acl: Acl | None, client: str, topic_filter: str) -> bool:
    """Difference 8: the plugin asked about the filter that is routed (the
    inner filter of a ``$share``), and an entry that covers it."""
    if topic_filter in INVALID_FILTERS:
        return False
    if acl is None:
        return True
    share = share_of(topic_filter)
    routed = share[1] if share else topic_filter
    return stock_grants(acl, client, routed) and any(entry_covers(e, routed) for e in acl[client])


def may_publish(publish_acl: Acl | None, client: str, topic: str, kind: str) -> bool:
    """A PUBLISH (or will) to ``topic`` under amqtt's ``publish_acl``:
    ``kind`` "stock" (the plugin, level by level) or "cstrie" (that, and an
    entry that matches the topic)."""
    if publish_acl is None:
        return True
    entries = publish_acl[client]
    ok = any(TopicAccessControlListPlugin.topic_ac(topic, e) for e in entries)
    return ok and (kind == "stock" or any(matches(e, topic) for e in entries))


def within(acl: Acl, client: str, topic: str) -> bool:
    """The ACL grants ``client`` the topic (paho's matcher, another one)."""
    return any(topic_matches_sub(e, topic) for e in acl[client])


def make_acl(rng: random.Random) -> tuple[Acl, Acl]:
    """(acl, publish_acl) for every client and the driver: 1-4 entries to
    subscribe, and to publish ``#`` or 1-3 entries."""

    def entries(most: int) -> list[str]:
        return [*rng.sample(ACL_ENTRIES, rng.randint(1, most)), "sync/#"]

    acl = {c: entries(4) for c in CLIENTS}
    # half the clients may publish anywhere, so most messages are routed
    publish = {c: ["#"] if rng.random() < 0.5 else entries(3) for c in CLIENTS}
    acl[DRIVER] = publish[DRIVER] = ["sync/#"]
    return acl, publish


# ------------------------------------------------------------------ the script
@dataclass
class Step:
    kind: str  # connect | disconnect | drop | subscribe | unsubscribe | publish | broker_publish
    actor: str | None
    clean: bool = True
    #: connect: the will set for the connection (topic, payload, QoS, retain), or None;
    #: drop: the will the broker publishes (also in topic, payload, qos, retain);
    #: disconnect: the will the DISCONNECT discards
    will: tuple[str, bytes, int, bool] | None = None
    filters: list[tuple[str, int]] = field(default_factory=list)
    topic: str = ""
    payload: bytes = b""
    qos: int | None = 0
    retain: bool = False
    # what the model knew before the step, for the transformations
    retained: dict[str, bytes] = field(default_factory=dict)
    #: topic -> the QoS its retained message was published with (None: a
    #: plugin's, given without one), before the step
    retained_qos: dict[str, int | None] = field(default_factory=dict)
    #: client -> {filter: (first QoS, last QoS)} of its session, after the step
    #: (CstrieBroker's subscriptions)
    sessions: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    #: client -> the ordinary filters stock granted and CstrieBroker refused
    #: (difference 8, the ACL run), after the step
    stock_only: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    connected: set[str] = field(default_factory=set)
    #: a client's PUBLISH that publish_acl refuses (both brokers drop it)
    refused: bool = False
    #: a will CstrieBroker does not publish and stock does (difference 9)
    will_refused: bool = False
    #: subscribe: each broker's SUBACK by the model
    stock_codes: list[int] = field(default_factory=list)
    cstrie_codes: list[int] = field(default_factory=list)


@dataclass
class Model:
    connected: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(CLIENTS, False))
    clean: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(CLIENTS, True))
    #: client -> {filter: (first QoS, last QoS)} of its current session
    subs: dict[str, dict[str, tuple[int, int]]] = field(
        default_factory=lambda: {c: {} for c in CLIENTS}
    )
    #: client -> the ordinary filters only stock holds (see Step.stock_only)
    stock_only: dict[str, dict[str, tuple[int, int]]] = field(
        default_factory=lambda: {c: {} for c in CLIENTS}
    )
    retained: dict[str, bytes] = field(default_factory=dict)
    retained_qos: dict[str, int | None] = field(default_factory=dict)
    will: dict[str, tuple[str, bytes, int, bool] | None] = field(default_factory=dict)
    #: client -> the will RETAIN flag of its session in the broker (None: no
    #: session).  amqtt keeps a resumed session's flag when the client comes
    #: back with another will (it copies the will's other fields): both brokers
    session_will_retain: dict[str, bool | None] = field(default_factory=dict)


def _topic(rng: random.Random) -> str:
    topic = "/".join(rng.choice(WORDS) for _ in range(rng.choice([1, 2, 2, 3])))
    return topic or "a"


def _filter(rng: random.Random, clean: bool, dollar_shares: bool = False) -> str:
    r = rng.random()
    if r < 0.04:
        return rng.choice(INVALID_FILTERS)
    if r < 0.2:
        f = rng.choice(SPECIAL_FILTERS)
    else:
        words = [rng.choice(FILTER_WORDS) for _ in range(rng.choice([1, 2, 2, 3]))]
        if rng.random() < 0.25:
            words.append("#")
        f = "/".join(words) or "+"  # paho refuses the empty filter
    if clean and rng.random() < 0.15 and (dollar_shares or not f.startswith("$")):
        f = f"$share/{rng.choice(GROUPS)}/{f}"
    return f


def make_script(
    seed: int,
    steps: int = STEPS,
    acl: Acl | None = None,
    publish_acl: Acl | None = None,
) -> list[Step]:
    """The script of ``seed``; with ``acl`` (and ``publish_acl``), the model
    follows what each broker grants (difference 8), which PUBLISH both drop
    and which will CstrieBroker does not publish (difference 9)."""
    rng = random.Random(seed)
    m = Model()
    script: list[Step] = []
    for n in range(steps):
        actor = rng.choice(CLIENTS)
        snapshot, snapshot_qos = dict(m.retained), dict(m.retained_qos)
        if not m.connected[actor]:
            kind = rng.choices(["connect", "broker_publish"], [5, 1])[0]
        else:
            kind = rng.choices(
                ["publish", "subscribe", "unsubscribe", "disconnect", "drop", "broker_publish"],
                [35, 24, 6, 4, 3, 8],
            )[0]
        step = Step(
            kind,
            actor if kind != "broker_publish" else None,
            retained=snapshot,
            retained_qos=snapshot_qos,
        )
        if kind == "connect":
            step.clean = rng.random() < 0.5
            if step.clean or m.clean[actor]:
                # a clean connect ends the old session; a clean one had ended
                m.subs[actor], m.stock_only[actor] = {}, {}
            m.clean[actor] = step.clean
            m.connected[actor] = True
            if rng.random() < 0.5:
                qos, retain = rng.choice([0, 1, 2]), rng.random() < 0.3
                step.will = (_topic(rng), f"w{n}".encode(), qos, retain)
            if step.will is not None and not may_publish(
                publish_acl, actor, step.will[0], "cstrie"
            ):
                # a will CstrieBroker refuses is retained by stock only: keep
                # what is retained in step (no RETAIN; none for a resumed
                # session whose kept RETAIN flag is set)
                resumed = not step.clean and m.session_will_retain.get(actor)
                step.will = None if resumed else (*step.will[:3], False)
            m.will[actor] = step.will
            if step.clean or m.session_will_retain.get(actor) is None:
                m.session_will_retain[actor] = step.will is not None and step.will[3]
        elif kind in ("disconnect", "drop"):
            m.connected[actor] = False
            if m.clean[actor]:
                m.subs[actor], m.stock_only[actor] = {}, {}
            will = m.will.get(actor)
            if will is not None:
                will = step.will = (*will[:3], bool(m.session_will_retain[actor]))
            if m.clean[actor]:
                m.session_will_retain[actor] = None  # the session ends
            if kind == "disconnect" and will is not None and will[3]:
                # amqtt may publish the will of a DISCONNECT (see compare); a
                # retained one would change what is retained: such clients drop
                kind = step.kind = "drop"
            if kind == "drop" and will is not None:
                # the broker publishes the will, forcing its QoS as amqtt does
                step.will = will
                step.topic, step.payload, step.qos, step.retain = will
                step.will_refused = not may_publish(publish_acl, actor, step.topic, "cstrie")
                assert not (step.will_refused and step.retain), "the model keeps retained in step"
                if step.retain:
                    m.retained[step.topic] = step.payload
                    m.retained_qos[step.topic] = step.qos
        elif kind == "subscribe":
            mine, extra = m.subs[actor], m.stock_only[actor]
            chosen: dict[str, int] = {}
            for _ in range(rng.choice([1, 1, 2])):
                f = _filter(rng, m.clean[actor], dollar_shares=acl is not None)
                qos = rng.randint(0, 2)
                held = mine.get(f) or extra.get(f)
                if held and (not m.clean[actor] or share_of(f)):
                    qos = held[1]  # amqtt queues and shares by QoS: keep it (see above)
                chosen[f] = qos
            step.filters = list(chosen.items())
            for f, qos in step.filters:
                step.stock_codes.append(qos if stock_grants(acl, actor, f) else SUBACK_FAILURE)
                shares = sum(share_of(g) is not None for g in mine)
                bounded = share_of(f) is not None and f not in mine and shares >= MAX_SHARES
                if cstrie_grants(acl, actor, f) and not bounded:
                    target = mine
                elif stock_grants(acl, actor, f) and not share_of(f) and f not in INVALID_FILTERS:
                    target = extra
                else:
                    step.cstrie_codes.append(SUBACK_FAILURE)
                    continue
                step.cstrie_codes.append(qos if target is mine else SUBACK_FAILURE)
                target[f] = (target[f][0], qos) if f in target else (qos, qos)
        elif kind == "unsubscribe":
            mine, extra = m.subs[actor], m.stock_only[actor]
            options = sorted({**mine, **extra}) or ["a/#"]
            f = rng.choice(options) if rng.random() < 0.85 else _filter(rng, False)
            step.filters = [(f, 0)]
            mine.pop(f, None)
            extra.pop(f, None)
        else:  # publish, broker_publish
            step.topic = _topic(rng)
            if kind == "broker_publish" and rng.random() < 0.6:
                step.topic = "$SYS/" + _topic(rng)
            step.retain = rng.random() < 0.3
            step.payload = f"s{n}".encode() if not (step.retain and rng.random() < 0.2) else b""
            if kind == "publish":
                step.qos = rng.choice([0, 1])
                ok = may_publish(publish_acl, actor, step.topic, "cstrie")
                assert ok == may_publish(publish_acl, actor, step.topic, "stock"), "the model"
                step.refused = not ok
            else:
                step.qos = rng.choice([None, None, 0, 1])
            if step.retain and not step.refused:
                if step.payload:
                    m.retained[step.topic] = step.payload
                    m.retained_qos[step.topic] = step.qos
                else:
                    m.retained.pop(step.topic, None)
                    m.retained_qos.pop(step.topic, None)
        step.sessions = {c: dict(s) for c, s in m.subs.items()}
        step.stock_only = {c: dict(s) for c, s in m.stock_only.items()}
        step.connected = {c for c, up in m.connected.items() if up}
        script.append(step)
    return script


# ------------------------------------------------------------------ playing
@dataclass
class Recording:
    #: client -> step -> deliveries in arrival order
    deliveries: dict[str, dict[int, list[Delivery]]] = field(default_factory=dict)
    subacks: dict[int, list[int]] = field(default_factory=dict)
    connacks: dict[int, bool] = field(default_factory=dict)


async def _end_if_clean(broker: Any, client_id: str) -> None:
    """What amqtt's session monitor (stopped in :func:`play`) does within a
    second to a disconnected clean (or anonymous) session, done now."""
    entry = broker._sessions.get(client_id)
    if entry is None or entry[0].transitions.state != "disconnected":
        return
    if entry[0].is_anonymous or entry[0].clean_session:
        await broker._cleanup_session(client_id)


def play(
    kind: str, script: list[Step], acl: Acl | None = None, publish_acl: Acl | None = None
) -> Recording:
    """Play ``script`` on a fresh broker of ``kind``; with ``acl``, amqtt's
    ACL plugin is configured with it (and ``publish_acl``), and each client
    connects with its client id as user name."""
    rec = Recording(deliveries={c: {} for c in CLIENTS})
    config = None
    if acl is not None:
        plugin: dict[str, Any] = {"acl": acl}
        if publish_acl is not None:
            plugin["publish_acl"] = publish_acl
        config = broker_config({ACL_PLUGIN: plugin})
    # amqtt's session monitor off: _end_if_clean does its work at the end of
    # the step (see the module's "Determinism")
    with running_broker(kind, config=config, session_monitor=False) as b:
        clients = {c: Client(b.port, c, username=c) for c in CLIENTS}
        driver = Client(b.port, DRIVER, username=DRIVER)
        try:
            driver.connect()
            for n, step in enumerate(script):
                try:
                    _play_step(b, clients, driver, n, step, rec)
                except AssertionError as exc:
                    raise AssertionError(f"{kind}, step {n} {step.kind}: {exc}") from None
                b.check_routes()
        finally:
            for c in [*clients.values(), driver]:
                c.close()
        b.check_routes()
    return rec


def _play_step(
    b: BrokerThread,
    clients: dict[str, Client],
    driver: Client,
    n: int,
    step: Step,
    rec: Recording,
) -> None:
    actor = clients[step.actor] if step.actor else None
    if step.kind == "connect":
        assert actor is not None
        if step.will is None:
            actor.clear_will()
        else:
            actor.set_will(*step.will)
        rec.connacks[n] = actor.connect(clean_session=step.clean)
    elif step.kind in ("disconnect", "drop"):
        assert actor is not None
        if step.kind == "drop":
            actor.drop()
        else:
            actor.disconnect()
        wait_until(
            f"step {n}: the broker saw {actor.client_id} disconnect",
            lambda: b.session_state(actor.client_id) in (None, "disconnected"),
        )
        # the session ends after the barrier (below): its will is routed first
    elif step.kind == "subscribe":
        assert actor is not None
        rec.subacks[n] = actor.subscribe(*step.filters)
    elif step.kind == "unsubscribe":
        assert actor is not None
        actor.unsubscribe(*(f for f, _ in step.filters))
    elif step.kind == "publish":
        assert actor is not None and step.qos is not None
        actor.publish(step.topic, step.payload, step.qos, step.retain)
    else:
        broker = b.broker

        async def publish() -> None:
            await broker.internal_message_broadcast(step.topic, step.payload, step.qos)
            if step.retain:
                await broker.retain_message(None, step.topic, step.payload, step.qos)

        b.run(publish())
    # the barrier: a marker to every connected client and to the driver,
    # which is always connected, so the barrier also holds when no client is:
    # the driver's marker is routed after the step's messages, so they are
    # all routed (sent, or queued for a disconnected session) when it arrives
    sender = actor if actor is not None and step.kind not in ("disconnect", "drop") else driver
    marker = f"step {n}".encode()
    up = [*(clients[c] for c in sorted(step.connected)), driver]
    for client in up:
        sender.send_marker(client.client_id, marker)
    for client in up:
        client.wait_marker(marker)
    for c, client in clients.items():
        got = client.take()
        if got:
            rec.deliveries[c][n] = got
    if step.kind in ("disconnect", "drop"):
        # only now, with the will routed (see the module's "Determinism")
        assert actor is not None
        b.run(_end_if_clean(b.broker, actor.client_id))


# ------------------------------------------------------------------ comparing
@dataclass
class Comparison:
    differences: list[str] = field(default_factory=list)
    compared: int = 0
    transformed: Counter[str] = field(default_factory=Counter)
    order_differed: int = 0
    #: the ACL run: deliveries each broker made that the client's ACL does
    #: not grant
    outside_acl: Counter[str] = field(default_factory=Counter)


def _matching_share_groups(step: Step, topic: str) -> dict[str, dict[str, int]]:
    """shared subscription (MQTT 5 4.8.2: ShareName and filter, so the whole
    share filter) matching ``topic`` -> {connected member: its QoS}."""
    out: dict[str, dict[str, int]] = {}
    for c in step.connected:
        for f, (_, qos) in step.sessions[c].items():
            share = share_of(f)
            if share and matches(share[1], topic):
                out.setdefault(f, {})[c] = qos
    return out


def spec_qos(step: Step, sub_qos: int) -> int:
    """The QoS a publish step's message reaches a subscription with, by the
    spec (difference 5): the minimum of the message's and the subscription's;
    a plugin's broadcast without a QoS goes at the subscription's."""
    return sub_qos if step.qos is None else min(step.qos, sub_qos)


def stock_qos(step: Step, first: int) -> int:
    """The QoS stock delivers a publish step's message with through a filter
    first subscribed at ``first``: the subscription's, or the QoS a plugin or
    a will gives (stock forces it)."""
    if step.kind in ("broker_publish", "drop") and step.qos is not None:
        return step.qos
    return first


def publishes(step: Step) -> bool:
    """A step whose message stock routes: a client's PUBLISH that its
    publish_acl allows, a plugin's publish, or a lost connection with a will
    (which CstrieBroker may refuse: ``step.will_refused``)."""
    return (step.kind in ("publish", "broker_publish") and not step.refused) or (
        step.kind == "drop" and step.will is not None
    )


def forced(step: Step) -> bool:
    """A publish step whose QoS the broker forces on every copy (a will, a
    plugin's broadcast with a QoS)."""
    return step.kind in ("broker_publish", "drop") and step.qos is not None


#: client -> what was queued for its disconnected session, per message:
#: (stock's copies, CstrieBroker's one copy or None)
Queued = dict[str, list[tuple[list[Delivery], Delivery | None]]]

#: why a filter's SUBACK differs (transformation counts)
SUBACK_REASONS = {
    "invalid": "3: SUBACK of an invalid filter",
    "share": "8: SUBACK of a share, checked on its filter (or 11: over its bound)",
    "plain": "8: SUBACK of a filter no ACL entry covers",
}


def compare(
    script: list[Step], stock: Recording, cstrie: Recording, acl: Acl | None = None
) -> Comparison:
    cmp = Comparison()
    diff = cmp.differences.append
    queued: Queued = {}
    # A will's copy to its own client (through the client's own filter) races,
    # in both brokers, with the end of the session: amqtt routes the will
    # while it stops the connection's handler, so the copy is lost, or queued
    # for a persistent session, depending on which task runs first.  Left out.
    own_wills = {(s.actor, s.payload) for s in script if s.kind == "drop" and s.will}
    # amqtt 0.12 (both brokers) sometimes publishes the will of a client that
    # sent DISCONNECT (MQTT-3.14.4-3 says to discard it): its reader loop
    # cancels the DISCONNECT's task when the connection closes right after, and
    # a failed write to the closing connection reports a lost connection.  Which
    # happens depends on timing, so those copies are left out of both.
    discarded = {s.will[1] for s in script if s.kind == "disconnect" and s.will}

    def recorded(rec: Recording, c: str, n: int) -> Counter[Delivery]:
        out: Counter[Delivery] = Counter()
        for d in rec.deliveries[c].get(n, []):
            if d.payload in discarded:
                cmp.transformed[f"will of a DISCONNECT sent by {kind_of[id(rec)]} (left out)"] += 1
            elif (c, d.payload) not in own_wills:
                out[d] += 1
        return out

    kind_of = {id(stock): "stock", id(cstrie): "cstrie"}

    for n, step in enumerate(script):
        # SUBACKs, each broker's against the model (differences 3, 8, 11)
        if step.kind == "subscribe":
            if stock.subacks[n] != step.stock_codes:
                diff(
                    f"step {n} {step.filters}: stock's SUBACK {stock.subacks[n]}, "
                    f"the model's {step.stock_codes}"
                )
            if cstrie.subacks[n] != step.cstrie_codes:
                diff(
                    f"step {n} {step.filters}: SUBACK {cstrie.subacks[n]}, "
                    f"the model's {step.cstrie_codes}"
                )
            for (f, _), a, b in zip(step.filters, step.stock_codes, step.cstrie_codes, strict=True):
                if a != b:
                    why = "invalid" if f in INVALID_FILTERS else "share" if share_of(f) else "plain"
                    cmp.transformed[SUBACK_REASONS[why]] += 1
        if step.kind == "connect" and stock.connacks[n] != cstrie.connacks[n]:
            diff(f"step {n}: session present {cstrie.connacks[n]}, stock {stock.connacks[n]}")
        expected = {c: recorded(stock, c, n) for c in CLIENTS}
        got = {c: recorded(cstrie, c, n) for c in CLIENTS}
        _transform(n, step, expected, cmp, queued)
        if acl is not None:
            for c in CLIENTS:
                for d in cstrie.deliveries[c].get(n, []):
                    cmp.outside_acl["cstrie"] += not within(acl, c, d.topic)
                for d in stock.deliveries[c].get(n, []):
                    cmp.outside_acl["stock"] += not within(acl, c, d.topic)
        # difference 4 (shares) and 12 (one copy per client): the step's
        # message reaches each client at most once; a share that picked the
        # client may raise its QoS, or be the copy
        routed = publishes(step) and not step.will_refused
        groups = _matching_share_groups(step, step.topic) if routed else {}
        share_qos: dict[str, set[int]] = {c: set() for c in CLIENTS}
        for members in groups.values():
            for c, qos in members.items():
                share_qos[c].add(spec_qos(step, qos))

        message = (step.topic, step.payload, False)
        has_copy: set[str] = set()
        for c in CLIENTS:
            want = [
                d
                for d in expected[c].elements()
                if routed and (d.topic, d.payload, d.retain) == message
            ]
            have = [
                d for d in got[c].elements() if routed and (d.topic, d.payload, d.retain) == message
            ]
            rest_want = expected[c] - Counter(want)
            rest_have = got[c] - Counter(have)
            where = f"step {n} {step.kind} {step.topic!r}: {c}"
            if rest_want - rest_have:
                diff(f"{where} lacks {dict(rest_want - rest_have)}")
            if rest_have - rest_want:
                diff(f"{where} got extra {dict(rest_have - rest_want)}")
            cmp.compared += sum(got[c].values())
            if len(have) > 1 or len(want) > 1:
                diff(f"step {n} {step.topic!r}: {c} got {have}, expected {want}: one copy at most")
                continue
            if have:
                has_copy.add(c)
                d = have[0]
                if want and d.qos == want[0].qos:
                    pass
                elif d.qos in share_qos[c] and (not want or d.qos > want[0].qos):
                    cmp.transformed["4: the copy of a share that picked the client"] += 1
                else:
                    diff(
                        f"step {n} {step.topic!r}: {c} got {d}, expected {want} "
                        f"(or a share's QoS in {sorted(share_qos[c])})"
                    )
            elif want:
                diff(f"step {n} {step.kind} {step.topic!r}: {c} lacks {want[0]}")
            if Counter(cstrie.deliveries[c].get(n, [])) == Counter(stock.deliveries[c].get(n, [])):
                if cstrie.deliveries[c].get(n, []) != stock.deliveries[c].get(n, []):
                    cmp.order_differed += 1
        # every matching share group sent the message to a member
        # the same race as own_wills for a shared subscription the dying
        # client was in: the broker may pick it while its connection ends,
        # and the copy is lost
        dying: set[str] = set()
        if step.kind == "drop" and step.actor is not None and n:
            dying = set(script[n - 1].sessions[step.actor])
        for group, members in groups.items():
            if has_copy & set(members):
                cmp.transformed["4: share group reached"] += 1
            elif group in dying:
                cmp.transformed["4: share copy to a dying member"] += 1
            else:
                diff(f"step {n} {step.topic!r}: no copy for share group {group} {members}")
    return cmp


def _take(n: int, mine: Counter[Delivery], old: Delivery, cmp: Comparison) -> bool:
    """Remove stock's delivery ``old`` from ``mine``; a missing one is a
    difference (False)."""
    if mine[old] < 1:
        cmp.differences.append(f"step {n}: stock's {old} to transform is missing")
        return False
    mine[old] -= 1
    return True


def _transform(
    n: int, step: Step, expected: dict[str, Counter[Delivery]], cmp: Comparison, queued: Queued
) -> None:
    """Apply differences 1, 2, 5-7, 9 and 12 to stock's deliveries of step
    ``n`` (3, 8 and 11 are on SUBACKs, 4 adds copies: see :func:`compare`)."""
    count = cmp.transformed
    if step.kind == "connect":
        assert step.actor is not None
        mine = expected[step.actor]
        for d in list(mine.elements()):
            if d.qos == 0 and d.retain:
                mine[d] -= 1
                count["1: retained on CONNECT"] += 1
                if step.retained.get(d.topic) != d.payload:
                    cmp.differences.append(f"step {n}: stock sent {d} on CONNECT, not retained")
        # the copies queued while the session was away (a clean connect drops them)
        for olds, new in queued.pop(step.actor, []):
            if step.clean:
                continue
            if all(_take(n, mine, old, cmp) for old in olds) and new is not None:
                mine[new] += 1
            if new is not None:
                count["7: queued, RETAIN 0"] += 1
            if len(olds) > 1:
                count["12: queued copies merged into one"] += len(olds) - 1
        expected[step.actor] = +mine
    elif step.kind == "subscribe":
        assert step.actor is not None
        mine = expected[step.actor]
        # difference 8: the retained messages stock sent for a filter that
        # only it granted
        for (f, _), a, b in zip(step.filters, step.stock_codes, step.cstrie_codes, strict=True):
            if a == b or share_of(f) or f in INVALID_FILTERS:
                continue
            for topic, payload in step.retained.items():
                if matches(f, topic):
                    sent = [
                        d
                        for d in mine
                        if mine[d] > 0 and d.retain and (d.topic, d.payload) == (topic, payload)
                    ]
                    if sent and _take(n, mine, sent[0], cmp):
                        count["8: retained through a filter only stock granted"] += 1
                    elif not sent:
                        cmp.differences.append(f"step {n}: stock sent no retained {topic} for {f}")
        for d in list(mine.elements()):
            # difference 6: a retained QoS 0 message at QoS 0
            if d.retain and d.qos and step.retained_qos.get(d.topic, -1) == 0:
                if _take(n, mine, d, cmp):
                    mine[Delivery(d.topic, d.payload, 0, True)] += 1
                count["6: retained QoS 0 at QoS 0"] += 1
        expected[step.actor] = +mine
    elif publishes(step):
        for c in CLIENTS:
            if step.kind == "drop" and c == step.actor:
                continue  # its own will (see own_wills in compare)
            ours = {
                f: q
                for f, q in step.sessions[c].items()
                if not share_of(f) and matches(f, step.topic)
            }
            theirs = {f: q for f, q in step.stock_only[c].items() if matches(f, step.topic)}
            # stock: one copy per matching filter, at stock's QoS
            old_qos = [stock_qos(step, first) for first, _ in [*ours.values(), *theirs.values()]]
            # CstrieBroker: one copy, at the highest QoS (difference 12), none
            # for a will it refuses (difference 9)
            top = max((last for _, last in ours.values()), default=None)
            if step.will_refused or top is None:
                top = None
            if c not in step.connected:
                # a persistent session queues by stock's QoS 1 or 2 (amqtt's
                # rule), sent with RETAIN 1 by stock; CstrieBroker queues its
                # one copy by that rule
                olds = [Delivery(step.topic, step.payload, q, True) for q in old_qos if q]
                new = None
                if top is not None and (step.qos if forced(step) else top):
                    new = Delivery(step.topic, step.payload, spec_qos(step, top), False)
                if olds or new:
                    queued.setdefault(c, []).append((olds, new))
                continue
            olds = [Delivery(step.topic, step.payload, q, False) for q in old_qos]
            mine = expected[c]
            if all(_take(n, mine, old, cmp) for old in olds) and top is not None:
                new_copy = Delivery(step.topic, step.payload, spec_qos(step, top), False)
                mine[new_copy] += 1
                if new_copy.qos != max(d.qos for d in olds):
                    label = (
                        "2: QoS of a repeated SUBSCRIBE"
                        if any(a != b for a, b in ours.values())
                        else "5: QoS"
                    )
                    count[label] += 1
            merged = {
                "12: copies merged into one": len(ours) - 1,
                "8: copies through filters only stock granted": len(theirs),
                "9: copies of a will CstrieBroker refused": len(olds) if step.will_refused else 0,
            }
            count.update({k: v for k, v in merged.items() if v > 0})
            expected[c] = +mine


# ------------------------------------------------------------------ the tests
def test_the_script_exercises_every_kind_of_step() -> None:
    """The generator's output, whatever the seeds: each action, each documented
    difference's trigger (reconnects with retained messages, repeated SUBSCRIBE
    with another QoS, invalid filters, shares, retained QoS 0 messages, a QoS
    capped by the message's, live and queued) appears in the default seeds."""
    seen: Counter[str] = Counter()
    for seed in (1, 2, 3, 4, 5, 6, 7, 8):
        script = make_script(seed, 90)
        for k, step in enumerate(script):
            seen[step.kind] += 1
            seen["retained at a reconnect"] += step.kind == "connect" and bool(step.retained)
            seen["invalid filter"] += any(f in INVALID_FILTERS for f, _ in step.filters)
            seen["share"] += any(share_of(f) for f, _ in step.filters)
            seen["$SYS"] += step.topic.startswith("$SYS")
            seen["retained QoS 0 at a SUBSCRIBE"] += step.kind == "subscribe" and (
                0 in step.retained_qos.values()
            )
            seen["will"] += step.kind == "drop" and step.will is not None
            if publishes(step) and step.qos is not None:
                for c, filters in step.sessions.items():
                    for f, (_, q) in filters.items():
                        if matches(f, step.topic) and spec_qos(step, q) != stock_qos(step, q):
                            where = "live" if c in step.connected else "queued"
                            seen[f"QoS capped, {where}"] += 1
            if step.kind == "subscribe" and k and step.actor:
                before = script[k - 1].sessions[step.actor]
                seen["QoS changed"] += any(
                    f in before and before[f][1] != q for f, q in step.filters
                )
    kinds = [
        "connect", "disconnect", "drop", "subscribe", "unsubscribe", "publish", "broker_publish"
    ]  # fmt: skip
    triggers = [
        "retained at a reconnect", "invalid filter", "share", "$SYS", "QoS changed",
        "retained QoS 0 at a SUBSCRIBE", "QoS capped, live", "QoS capped, queued", "will",
    ]  # fmt: skip
    for what in kinds + triggers:
        assert seen[what] > 0, (what, seen)


def acl_of(seed: int) -> tuple[Acl, Acl]:
    """The ACL run's (acl, publish_acl) for ``seed``."""
    return make_acl(random.Random(f"acl:{seed}"))


def test_the_acl_script_exercises_the_access_control_differences() -> None:
    """The ACL run's seeds: shares refused or granted otherwise than stock
    (checked on their filters), filters only stock grants (entries that do
    not cover them) that then deliver outside the ACL in stock, wills
    CstrieBroker refuses, PUBLISHes both refuse, and CstrieBroker's routes
    (shares, refused-by-stock shares on their filters) in use."""
    seen: Counter[str] = Counter()
    for seed in ACL_SEEDS:
        acl, publish_acl = acl_of(seed)
        for step in make_script(seed, STEPS, acl, publish_acl):
            codes = zip(step.stock_codes, step.cstrie_codes, strict=True)
            for (f, _), (a, b) in zip(step.filters if step.stock_codes else [], codes, strict=True):
                if share_of(f) and a != b:
                    seen["share: " + ("granted" if b != SUBACK_FAILURE else "refused")] += 1
                if not share_of(f) and a != b and f not in INVALID_FILTERS:
                    seen["only stock grants"] += 1
            seen["publish refused"] += step.refused
            seen["will refused"] += step.will_refused
            if publishes(step):
                for c, filters in step.stock_only.items():
                    for f in filters:
                        if matches(f, step.topic) and not within(acl, c, step.topic):
                            seen["stock delivers outside the ACL"] += 1
    for what in (
        "share: granted", "share: refused", "only stock grants", "publish refused",
        "will refused", "stock delivers outside the ACL",
    ):  # fmt: skip
        assert seen[what] > 0, (what, seen)


def test_entry_covers_follows_the_mqtt_rules() -> None:
    """The ACL run's reading of an entry (by enumeration), on the cases
    amqtt's documentation and MQTT 4.7 settle."""
    assert entry_covers("#", "a/b") and entry_covers("+/alice/#", "x/alice/y/#")
    assert not entry_covers("#", "$SYS/#") and entry_covers("$SYS/#", "$SYS/+")
    assert not entry_covers("+", "#") and not entry_covers("a/+", "a/#")
    assert entry_covers("a/#", "a") and not entry_covers("+/alice/#", "#")


def test_matches_follows_the_mqtt_rules() -> None:
    """The comparison's own matcher (used by transformations 2 and 4)."""
    assert matches("a/+/c", "a//c") and matches("a/#", "a") and matches("#", "a/b")
    assert not matches("#", "$SYS/a") and not matches("+/a", "$SYS/a")
    assert matches("$SYS/#", "$SYS/a") and not matches("a/+", "a/b/c")
    assert matches("+/+", "/") and not matches("+", "/")


@pytest.fixture(scope="module")
def totals() -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    yield counts
    print(f"\namqtt differential: seeds {SEEDS}, {STEPS} steps each: {dict(counts)}")


@pytest.mark.parametrize("seed", SEEDS)
def test_stock_and_cstrie_brokers_deliver_the_same(seed: int, totals: Counter[str]) -> None:
    script = make_script(seed)
    stock = play("stock", script)
    cstrie = play("cstrie", script)
    cmp = compare(script, stock, cstrie)
    print(
        f"seed {seed}: {len(script)} steps, {cmp.compared} deliveries compared, "
        f"transformed {dict(cmp.transformed)}, order differed within {cmp.order_differed} steps"
    )
    totals["deliveries compared"] += cmp.compared
    totals["steps"] += len(script)
    totals.update(cmp.transformed)
    assert cmp.compared > 0
    shown = "\n".join(cmp.differences[:20])
    assert not cmp.differences, (
        f"seed {seed} (replay: CSTRIE_AMQTT_DIFF_SEEDS={seed}): "
        f"{len(cmp.differences)} differences:\n{shown}"
    )


@pytest.mark.parametrize("seed", ACL_SEEDS)
def test_with_amqtts_acl_plugin_the_brokers_differ_only_as_documented(
    seed: int, totals: Counter[str]
) -> None:
    """The script with amqtt's ACL plugin on (each client's ``acl`` and
    ``publish_acl`` drawn per seed): every SUBACK of each broker as the
    model says, every delivery compared after the transformations (8 and 9
    included), and not one CstrieBroker delivery outside the ACL."""
    acl, publish_acl = acl_of(seed)
    script = make_script(seed, STEPS, acl, publish_acl)
    stock = play("stock", script, acl, publish_acl)
    cstrie = play("cstrie", script, acl, publish_acl)
    cmp = compare(script, stock, cstrie, acl)
    print(
        f"seed {seed} with the ACL {acl}, publish ACL {publish_acl}: {len(script)} steps, "
        f"{cmp.compared} deliveries compared, transformed {dict(cmp.transformed)}, "
        f"outside the ACL {dict(cmp.outside_acl)}"
    )
    totals["ACL run: deliveries compared"] += cmp.compared
    totals["ACL run: steps"] += len(script)
    totals.update({f"ACL run: outside the ACL, {k}": v for k, v in cmp.outside_acl.items()})
    totals.update({f"ACL run: {k}": v for k, v in cmp.transformed.items()})
    assert cmp.compared > 0
    assert cmp.outside_acl["cstrie"] == 0
    shown = "\n".join(cmp.differences[:20])
    assert not cmp.differences, (
        f"seed {seed} (replay: CSTRIE_AMQTT_DIFF_ACL_SEEDS={seed}): "
        f"{len(cmp.differences)} differences:\n{shown}"
    )
