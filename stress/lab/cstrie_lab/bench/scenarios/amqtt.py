"""``amqtt``: an MQTT broker end to end, stock amqtt vs amqtt with cstrie.

Real clients over 127.0.0.1.  Each broker (stock :class:`amqtt.broker.Broker`
and :class:`cstrie.integrations.amqtt.CstrieBroker`) runs in a process of its
own, so its CPU time is its own; the clients run in this process: 50
paho-mqtt subscribers that hold ``N`` filters between them and one publisher,
QoS 0.

Filters, 10 per device (100 devices to a site), device ``d`` held by client
``d mod 50``: nine literal ``site/S/dev/D/mK`` (K = 0..8) and one wildcard,
``site/S/dev/D/+/alarm`` for an even device and ``site/S/dev/D/alarm/#`` for an
odd one: 90% literal, 10% with ``+`` or ``#``.  Messages go to random
devices: ``site/S/dev/D/mK`` or the alarm topic (``.../z3/alarm``,
``.../alarm/z3``); each matches exactly one filter, at every ``N``, so the work
per delivery is the same and only the routing changes with ``N``.

**(A) routing.**  A round publishes a batch and waits until every message
has reached its subscriber (each client's count is checked against the
filters it holds: the same deliveries from both brokers); its rate is
messages / (first publish to last delivery), and the broker's CPU per
message is its process's CPU time over the round / messages (user + system,
``time.process_time`` measured by the broker process itself).
Batches are calibrated per broker and size after an untimed warm-up round so
that a round takes about 0.5 s; the two brokers' rounds alternate.  Reported:
medians over rounds.  A third broker, cstrie with 100 filters, runs through
the whole phase and its rounds alternate with every size's: the ratio
"cstrie at N / cstrie at 100" compares rounds run side by side.  Floors (same
run): cstrie at 50,000 filters >= 0.8x cstrie at 100, and >= 30x stock at
50,000.

**(B) retained messages on SUBSCRIBE** (no network: both brokers in this
process, not started).  100,000 retained messages on ``site/S/dev/D/mK``
(the topics of 10,000 devices); the filter ``site/7/dev/+/m3`` hits 100 of
them.  Timed: the lookup (cstrie: ``list(retained_messages.query(f))``;
stock: its loop over every retained topic with ``Broker._matches``, as
``_publish_retained_messages_for_subscription`` runs it), and each broker's
whole ``_publish_retained_messages_for_subscription`` with a handler whose
publish does nothing (the time the event loop is blocked, plus scheduling 100
publishes).  Floor: the cstrie lookup <= 1 ms.

(A)'s CstrieBroker runs with its per-client bounds lifted: its clients hold
up to 1,000 filters each, over the default of 100.

**(C) what one client can cost the others** (real clients, a broker process
each, as in (A)).  A victim holds ``amp/1/2/3/4/5``, a publisher sends QoS 0
messages there, and an attacker holds what it asked for and the broker
granted: nothing (the baseline), one reader ``amp/#``, K shared
subscriptions ``$share/gI/amp/#`` (each its own share group), the 191
distinct filters that match the topic, or K shares and then the 191.
Three brokers: stock amqtt, CstrieBroker with its default bounds, and
CstrieBroker with them lifted.  For each broker a baseline broker (the
attacker holding nothing) lives through its attacks, and each attack's rounds
alternate with the baseline's; measured: the broker's CPU per message and
the copies of each message the attacker got.  Floor (same rounds): with the
default bounds, the worst attack raises CstrieBroker's CPU per message at
most 2x.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import multiprocessing as mp
import random
import socket
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cstrie_lab.bench.base import (
    BenchError,
    Context,
    Floor,
    MissingDependency,
    Result,
    Scenario,
    Table,
)
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.plots import lines, save
from cstrie_lab.bench.timing import calibrated_batch

NAME = "amqtt"
DEFAULT = [100, 1_000, 10_000, 50_000]
QUICK = [100, 1_000, 10_000]
CLIENTS = 50
PER_DEVICE = 10
DEVICES_PER_SITE = 100
ROUND_SECONDS = 0.5
MIN_BATCH = 10
MAX_BATCH = 5_000
SUBSCRIBE_CHUNK = 100
WAIT_SECONDS = 120.0
OWN_FLOOR = 0.8
STOCK_FLOOR = 30.0
FLOOR_SIZE, BASE_SIZE = 50_000, 100
#: (C): the topic the victim holds and the attacks are aimed at (6 levels:
#: 191 distinct filters match it), the end-of-round marker
AMP_TOPIC = "amp/1/2/3/4/5"
AMP_END = "end"
AMP_VARIANTS = ("stock", "cstrie", "cstrie-unbounded")
#: (row name, attack, k): see :func:`attack_filters`
AMP_ATTACKS = [
    ("reader: amp/#", "reader", 1),
    ("10 share groups", "shares", 10),
    ("500 share groups", "shares", 500),
    ("2,000 share groups", "shares", 2000),
    ("191 overlapping filters", "overlap", 191),
    ("2,000 share groups + 191 overlapping filters", "both", 2000),
]
#: (C): seconds without a new copy to the attacker that end a round
AMP_SETTLE = 0.05
#: the attacks ``--quick`` runs: a reader, and the worst a bounded broker grants
AMP_QUICK = ("reader: amp/#", "2,000 share groups + 191 overlapping filters")
#: the attacker may raise the broker's CPU per message at most this much (same rounds)
AMP_FLOOR = 2.0
RETAINED = 100_000
RETAINED_FILTER = "site/7/dev/+/m3"
RETAINED_HITS = 100
RETAINED_FLOOR_NS = 1_000_000.0
VARIANTS = ("stock", "cstrie")
#: the broker each routing variant runs: its clients hold up to 1,000 filters
#: each (50,000 filters, 50 clients), over CstrieBroker's default bound
ROUTING_BROKERS = {"stock": "stock", "cstrie": "cstrie-unbounded"}


def filters(n: int) -> list[str]:
    """The ``n`` filters (see the module docstring); filter ``i`` belongs to
    device ``i // 10``, held by client ``(i // 10) % 50``."""
    out = []
    for i in range(n):
        d, k = divmod(i, PER_DEVICE)
        dev = f"site/{d // DEVICES_PER_SITE}/dev/{d}"
        if k < PER_DEVICE - 1:
            out.append(f"{dev}/m{k}")
        else:
            out.append(f"{dev}/+/alarm" if d % 2 == 0 else f"{dev}/alarm/#")
    return out


def topic_for(i: int) -> str:
    """A topic that matches filter ``i`` and no other filter."""
    d, k = divmod(i, PER_DEVICE)
    dev = f"site/{d // DEVICES_PER_SITE}/dev/{d}"
    if k < PER_DEVICE - 1:
        return f"{dev}/m{k}"
    return f"{dev}/z3/alarm" if d % 2 == 0 else f"{dev}/alarm/z3"


def owner(i: int) -> int:
    return (i // PER_DEVICE) % CLIENTS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def broker_config(port: int) -> dict[str, Any]:
    """One TCP listener on 127.0.0.1, anonymous clients, no other plugin
    (no ``$SYS`` publisher adding messages of its own)."""
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }


def make_broker(variant: str, config: dict[str, Any] | None) -> Any:
    """A stock amqtt ``Broker`` (``"stock"``) or a ``CstrieBroker`` (in a
    running loop): ``"cstrie"`` with its default per-client bounds,
    ``"cstrie-unbounded"`` with both lifted (None)."""
    if variant == "stock":
        from amqtt.broker import Broker

        return Broker(config)
    from cstrie.integrations.amqtt import CstrieBroker

    if variant == "cstrie-unbounded":
        return CstrieBroker(
            config, max_subscriptions_per_client=None, max_share_groups_per_client=None
        )
    return CstrieBroker(config)


def _serve(variant: str, port: int, conn: Any) -> None:
    """The broker process: start, say ready, answer "cpu" with its CPU time
    so far (``time.process_time``: user + system of all its threads, at the
    clock's resolution), run until told to stop."""
    import logging

    logging.disable(logging.WARNING)

    async def main() -> None:
        broker = make_broker(variant, broker_config(port))
        await broker.start()
        conn.send("ready")
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, conn.recv) == "cpu":
            conn.send(time.process_time())
        await broker.shutdown()

    asyncio.run(main())


class _Clients:
    """50 subscribers holding ``n`` filters and one publisher, on one broker."""

    def __init__(self, port: int, n: int) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.n = n
        self.counts = [0] * CLIENTS
        self.lock = threading.Condition()
        self.subs = []
        acked = [0]

        def on_subscribe(*_: Any) -> None:
            with self.lock:
                acked[0] += 1
                self.lock.notify_all()

        fs = filters(n)
        packets = 0
        for c in range(CLIENTS):
            cl = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-sub-{c}")
            cl.on_message = self._counter(c)
            cl.on_subscribe = on_subscribe
            cl.connect("127.0.0.1", port, keepalive=600)
            cl.loop_start()
            self.subs.append(cl)
            mine = [(f, 0) for i, f in enumerate(fs) if owner(i) == c]
            for k in range(0, len(mine), SUBSCRIBE_CHUNK):
                self._subscribe(cl, mine[k : k + SUBSCRIBE_CHUNK])
                packets += 1
        self._wait(lambda: acked[0] >= packets, f"SUBACKs of {packets} SUBSCRIBE packets")
        self.pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-pub")
        self.pub.connect("127.0.0.1", port, keepalive=600)
        self.pub.loop_start()

    @staticmethod
    def _subscribe(client: Any, topics: list[tuple[str, int]]) -> None:
        import paho.mqtt.client as mqtt

        for _ in range(1000):
            rc = client.subscribe(topics)[0]
            if rc == mqtt.MQTT_ERR_SUCCESS:
                return
            time.sleep(0.01)  # not connected yet
        raise BenchError(f"paho could not send a SUBSCRIBE (rc {rc})")

    def _counter(self, c: int) -> Callable[..., None]:
        def on_message(*_: Any) -> None:
            with self.lock:
                self.counts[c] += 1
                self.lock.notify_all()

        return on_message

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        with self.lock:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(f"timed out after {WAIT_SECONDS:.0f} s waiting for {what}")
                self.lock.wait(min(left, 1.0))

    def round(self, picks: list[int]) -> float:
        """Publish a message to each filter in ``picks``; seconds until all
        arrived.  Checks each client got exactly its messages."""
        want = [0] * CLIENTS
        for i in picks:
            want[owner(i)] += 1
        with self.lock:
            self.counts = [0] * CLIENTS
        total = len(picks)
        publish = self.pub.publish
        t0 = time.perf_counter()
        for i in picks:
            publish(topic_for(i), b"x", qos=0)
        self._wait(lambda: sum(self.counts) >= total, f"{total} deliveries")
        elapsed = time.perf_counter() - t0
        time.sleep(0.05)  # a duplicate would arrive now
        with self.lock:
            if self.counts != want:
                raise BenchError(f"deliveries per client {self.counts} != expected {want}")
        return elapsed

    def close(self) -> None:
        for cl in [*self.subs, self.pub]:
            cl.disconnect()
            cl.loop_stop()


class _Rig:
    """A broker process of one variant with its clients."""

    def __init__(self, variant: str, make_clients: Callable[[int], Any]) -> None:
        self.variant = variant
        port = _free_port()
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(variant, port, child), daemon=True)
        self.proc.start()
        if not self.conn.poll(60) or self.conn.recv() != "ready":
            self.proc.kill()
            raise BenchError(f"the {variant} broker did not start")
        try:
            self.clients = make_clients(port)
        except BaseException:
            self.stop()
            raise

    def cpu(self) -> float:
        """The broker process's CPU seconds so far (it measures itself: the
        kernel's per-process tick counts are 10 ms coarse)."""
        self.conn.send("cpu")
        return float(self.conn.recv())

    def round(self, picks: list[int]) -> tuple[float, float]:
        """(messages/s, broker CPU seconds per message) of one round:
        ``picks`` says what to publish (see the clients' ``round``)."""
        c0 = self.cpu()
        elapsed = self.clients.round(picks)
        return len(picks) / elapsed, (self.cpu() - c0) / len(picks)

    def stop(self) -> None:
        if hasattr(self, "clients"):
            self.clients.close()
        self.conn.send("stop")
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


def _batch(rig: _Rig, rng: random.Random, n: int) -> int:
    """A batch that takes about ROUND_SECONDS on this broker and size."""
    return calibrated_batch(
        lambda size: rig.round([rng.randrange(n) for _ in range(size)])[0],
        ROUND_SECONDS,
        MIN_BATCH,
        MAX_BATCH,
    )


def _routing(
    ctx: Context, res: Result, sizes: list[int], repeat: int
) -> dict[int, dict[str, float]]:
    """Stock and cstrie at each size, plus a cstrie broker with BASE_SIZE
    filters that lives through the whole phase: its rounds alternate with
    each size's rounds, so "cstrie at N / cstrie at 100" compares rounds run
    side by side, whatever else the machine does meanwhile."""
    rng = ctx.rng(NAME)
    table = Table(
        f"routing: messages/s and broker CPU per message, {CLIENTS} paho subscribers + 1 "
        f"publisher, QoS 0 (median of {repeat} rounds)",
        [
            "filters",
            "stock msg/s",
            "cstrie msg/s",
            "cstrie / stock",
            f"cstrie / cstrie at {BASE_SIZE} (same rounds)",
            "stock CPU/msg",
            "cstrie CPU/msg",
        ],
    )
    med: dict[int, dict[str, float]] = {}
    ref = _Rig(ROUTING_BROKERS["cstrie"], functools.partial(_Clients, n=BASE_SIZE))
    try:
        ref_batch = _batch(ref, rng, BASE_SIZE)
        for n in sizes:
            kinds = (*VARIANTS, "ref")
            rates: dict[str, list[float]] = {v: [] for v in kinds}
            cpus: dict[str, list[float]] = {v: [] for v in kinds}
            with ctx.progress.task(f"{NAME}: {fmt_size(n)} filters", repeat * 3) as task:
                rigs: dict[str, _Rig] = {}
                try:
                    for v in VARIANTS:
                        rigs[v] = _Rig(ROUTING_BROKERS[v], functools.partial(_Clients, n=n))
                    batches = {v: _batch(rig, rng, n) for v, rig in rigs.items()}
                    rigs["ref"], batches["ref"] = ref, ref_batch
                    gc.collect()
                    for r in range(repeat):
                        for v in kinds[r % 3 :] + kinds[: r % 3]:
                            size = BASE_SIZE if v == "ref" else n
                            picks = [rng.randrange(size) for _ in range(batches[v])]
                            rate, cpu = rigs[v].round(picks)
                            rates[v].append(rate)
                            cpus[v].append(cpu)
                            task.advance()
                finally:
                    for v, rig in rigs.items():
                        if v != "ref":
                            rig.stop()
            m = {v: statistics.median(rates[v]) for v in kinds}
            m.update({f"{v}_cpu": statistics.median(cpus[v]) for v in kinds})
            med[n] = m
            table.add(
                f"{n:,}",
                f"{m['stock']:,.0f}",
                f"{m['cstrie']:,.0f}",
                fmt_ratio(m["cstrie"] / m["stock"]),
                fmt_ratio(m["cstrie"] / m["ref"]),
                fmt_ns(m["stock_cpu"] * 1e9),
                fmt_ns(m["cstrie_cpu"] * 1e9),
            )
            res.data[str(n)] = {"rates": rates, "cpu": cpus, "batches": batches}
    finally:
        ref.stop()
    res.tables.append(table)
    return med


async def _retained(res: Result, repeat: int) -> dict[str, float]:
    from amqtt.broker import RetainedApplicationMessage
    from amqtt.session import Session

    class _Handler:
        async def mqtt_publish(self, *_: Any, **__: Any) -> None:
            return None

    brokers = {v: make_broker(v, broker_config(_free_port())) for v in VARIANTS}
    devices = RETAINED // PER_DEVICE
    topics = [
        f"site/{d // DEVICES_PER_SITE}/dev/{d}/m{k}"
        for d in range(devices)
        for k in range(PER_DEVICE)
    ]
    session = Session()
    session.client_id = "bench"
    for b in brokers.values():
        store = b._retained_messages
        for t in topics:
            store[t] = RetainedApplicationMessage(None, t, b"r", 0)
        b._sessions["bench"] = (session, _Handler())
    stock, ours = brokers["stock"], brokers["cstrie"]
    found = [t for t in stock._retained_messages if stock._matches(t, RETAINED_FILTER)]
    got = [t for t, _ in ours._retained_messages.query(RETAINED_FILTER)]
    if len(found) != RETAINED_HITS or sorted(found) != sorted(got):
        raise BenchError(f"retained lookup: stock {len(found)} topics, cstrie {len(got)}")

    def stock_lookup() -> object:
        return [
            r for t, r in stock._retained_messages.items() if stock._matches(t, RETAINED_FILTER)
        ]

    def cstrie_lookup() -> object:
        return list(ours._retained_messages.query(RETAINED_FILTER))

    samples: dict[str, list[float]] = {
        k: [] for k in ("stock", "cstrie", "stock_sub", "cstrie_sub")
    }
    for _ in range(repeat):
        for name, fn in (("stock", stock_lookup), ("cstrie", cstrie_lookup)):
            t0 = time.perf_counter_ns()
            fn()
            samples[name].append(time.perf_counter_ns() - t0)
        for name, b in (("stock_sub", stock), ("cstrie_sub", ours)):
            t0 = time.perf_counter_ns()
            await b._publish_retained_messages_for_subscription((RETAINED_FILTER, 0), session)
            samples[name].append(time.perf_counter_ns() - t0)
    med = {k: statistics.median(v) for k, v in samples.items()}
    table = Table(
        f"retained messages on SUBSCRIBE: {RETAINED:,} retained, filter {RETAINED_FILTER} "
        f"hitting {RETAINED_HITS} (median of {repeat})",
        ["", "stock amqtt", "cstrie", "stock / cstrie"],
    )
    table.add(
        "lookup",
        fmt_ns(med["stock"]),
        fmt_ns(med["cstrie"]),
        fmt_ratio(med["stock"] / med["cstrie"]),
    )
    table.add(
        "whole method (100 no-op publishes)",
        fmt_ns(med["stock_sub"]),
        fmt_ns(med["cstrie_sub"]),
        fmt_ratio(med["stock_sub"] / med["cstrie_sub"]),
    )
    res.tables.append(table)
    res.data["retained"] = samples
    return med


# ------------------------------------------------- (C) one client's cost
def overlapping_filters(topic: str) -> list[str]:
    """Every distinct filter that matches ``topic`` (MQTT rules): each level
    literal or ``+``, then optionally ``#`` after any prefix; the literal
    ones first, then by the number of wildcards."""
    words = topic.split("/")
    out: set[str] = set()
    for mask in range(1 << len(words)):
        levels = ["+" if mask >> i & 1 else w for i, w in enumerate(words)]
        out.add("/".join(levels))
        for cut in range(len(levels) + 1):
            out.add("/".join([*levels[:cut], "#"]))
    return sorted(out, key=lambda f: (f.count("+") + f.count("#"), len(f), f))


def attack_filters(attack: str, k: int) -> list[str]:
    """What the attacking client asks for in the attack ``attack`` with
    ``k``: ``"shares"`` k shared subscriptions ``$share/gI/amp/#``, each its
    own share group; ``"overlap"`` the first k of :func:`overlapping_filters`
    of the topic; ``"both"`` the shares, then every overlapping filter (so
    a bounded broker grants as many shares as it allows, then ordinary
    filters up to its other bound); ``"reader"`` one ``amp/#`` (k ignored);
    ``"none"`` nothing."""
    shares = [f"$share/g{i}/{AMP_TOPIC.split('/')[0]}/#" for i in range(k)]
    overlap = overlapping_filters(AMP_TOPIC)[:k]
    return {
        "none": [],
        "reader": [AMP_TOPIC.split("/")[0] + "/#"],
        "shares": shares,
        "overlap": overlap,
        "both": shares + overlapping_filters(AMP_TOPIC),
    }[attack]


class _Attack:
    """One broker's clients for (C): a victim subscribed to ``AMP_TOPIC``,
    an attacker holding ``filters`` (as many as the broker grants), and a
    publisher.  Both subscribers also hold ``AMP_END`` (the end-of-round
    marker), which counts as one of the attacker's subscriptions."""

    def __init__(self, port: int, filters: list[str]) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.lock = threading.Condition()
        self.victim = 0
        self.copies = 0
        self.ended: set[str] = set()
        self.codes: dict[str, list[int]] = {"victim": [], "attacker": []}
        self.acked = 0

        def on_subscribe(who: str) -> Callable[..., None]:
            def record(_c: Any, _u: Any, _mid: Any, codes: Any, _p: Any = None) -> None:
                with self.lock:
                    self.codes[who] += [int(getattr(rc, "value", rc)) for rc in codes]
                    self.acked += 1
                    self.lock.notify_all()

            return record

        def on_message(who: str) -> Callable[..., None]:
            def record(_c: Any, _u: Any, msg: Any) -> None:
                with self.lock:
                    if msg.topic == AMP_END:
                        self.ended.add(who)
                    elif who == "victim":
                        self.victim += 1
                    else:
                        self.copies += 1
                    self.lock.notify_all()

            return record

        self.subs = []
        packets = 0
        for who, wanted in (("victim", [AMP_END, AMP_TOPIC]), ("attacker", [AMP_END, *filters])):
            cl = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"amp-{who}")
            cl.on_message = on_message(who)
            cl.on_subscribe = on_subscribe(who)
            cl.connect("127.0.0.1", port, keepalive=600)
            cl.loop_start()
            self.subs.append(cl)
            for k in range(0, len(wanted), SUBSCRIBE_CHUNK):
                _Clients._subscribe(cl, [(f, 0) for f in wanted[k : k + SUBSCRIBE_CHUNK]])
                packets += 1
        self._wait(lambda: self.acked >= packets, f"SUBACKs of {packets} SUBSCRIBE packets")
        if any(code >= 0x80 for code in self.codes["victim"]):
            raise BenchError(f"the victim's subscriptions were refused: {self.codes['victim']}")
        #: the attacker's subscriptions the broker granted, its marker's left out
        self.granted = sum(code < 0x80 for code in self.codes["attacker"]) - 1
        self.pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="amp-pub")
        self.pub.connect("127.0.0.1", port, keepalive=600)
        self.pub.loop_start()

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        with self.lock:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(f"timed out after {WAIT_SECONDS:.0f} s waiting for {what}")
                self.lock.wait(min(left, 1.0))

    def round(self, picks: list[int]) -> float:
        """Publish ``len(picks)`` messages to ``AMP_TOPIC`` and the marker;
        seconds until the victim has every message and both subscribers the
        marker (after every copy the broker sent them before it)."""
        total = len(picks)
        with self.lock:
            self.victim = self.copies = 0
            self.ended = set()
        t0 = time.perf_counter()
        for _ in picks:
            self.pub.publish(AMP_TOPIC, b"x", qos=0)
        self.pub.publish(AMP_END, b"", qos=0)
        self._wait(
            lambda: self.victim >= total and len(self.ended) == 2, f"{total} messages and markers"
        )
        elapsed = time.perf_counter() - t0
        # the attacker's copies still in flight (a broker that sends each copy
        # as a task of its own may send the marker before the last of them)
        # arrive, so the round's CPU counts them all
        seen = -1
        while True:
            with self.lock:
                if self.copies == seen:
                    break
                seen = self.copies
            time.sleep(AMP_SETTLE)
        with self.lock:
            if self.victim != total:
                raise BenchError(f"the victim got {self.victim} messages, not {total}")
            self.last_copies = self.copies / total
        return elapsed

    def close(self) -> None:
        for cl in [*self.subs, self.pub]:
            cl.disconnect()
            cl.loop_stop()


def _amplification(ctx: Context, res: Result, repeat: int) -> dict[str, dict[str, float]]:
    """For each broker variant, a baseline broker (the attacker holds nothing)
    lives through the variant's attacks; each attack's broker runs its rounds
    alternating with the baseline's, so "attack / baseline" compares rounds
    run side by side."""
    table = Table(
        f"one client's cost: broker CPU per message from another client, the attacker "
        f"holding what it asked for and was granted (median of {repeat} rounds)",
        [
            "attack (asked)",
            *(f"{v} CPU/msg (granted, copies/msg)" for v in AMP_VARIANTS),
            *(f"{v} / its baseline" for v in AMP_VARIANTS),
        ],
    )
    attacks = [a for a in AMP_ATTACKS if not ctx.quick or a[0] in AMP_QUICK]
    out: dict[str, dict[str, float]] = {}
    cells: dict[str, dict[str, str]] = {}
    ratios: dict[str, dict[str, str]] = {}
    data: dict[str, Any] = {}
    rng = ctx.rng(NAME + "-amp")
    for v in AMP_VARIANTS:
        with ctx.progress.task(f"{NAME}: one client's cost, {v}", len(attacks) * repeat) as task:
            base = _Rig(v, functools.partial(_Attack, filters=[]))
            try:
                base_batch = _batch(base, rng, 1)
                for name, attack, k in attacks:
                    rig = _Rig(v, functools.partial(_Attack, filters=attack_filters(attack, k)))
                    try:
                        batch = _batch(rig, rng, 1)
                        own: list[float] = []
                        ref: list[float] = []
                        copies: list[float] = []
                        for r in range(repeat):
                            pair = [(rig, batch, own), (base, base_batch, ref)]
                            for one, size, into in pair[r % 2 :] + pair[: r % 2]:
                                into.append(one.round([0] * size)[1])
                            copies.append(rig.clients.last_copies)
                            task.advance()
                        granted = rig.clients.granted
                    finally:
                        rig.stop()
                    m = {
                        "cpu": statistics.median(own),
                        "base": statistics.median(ref),
                        "granted": granted,
                        "copies": statistics.median(copies),
                    }
                    m["ratio"] = m["cpu"] / m["base"]
                    out.setdefault(name, {})[v] = m["ratio"]
                    cells.setdefault(name, {})[v] = (
                        f"{fmt_ns(m['cpu'] * 1e9)} ({granted:,}, {m['copies']:g})"
                    )
                    ratios.setdefault(name, {})[v] = fmt_ratio(m["ratio"])
                    data.setdefault(name, {})[v] = {"rounds": own, "base_rounds": ref, **m}
            finally:
                base.stop()
    for name, _, _ in attacks:
        table.add(
            name, *(cells[name][v] for v in AMP_VARIANTS), *(ratios[name][v] for v in AMP_VARIANTS)
        )
    res.tables.append(table)
    res.data["amplification"] = data
    return out


def run(ctx: Context) -> Result:
    try:
        import amqtt
        import paho.mqtt.client  # noqa: F401

        import cstrie.integrations.amqtt  # noqa: F401
    except ImportError as exc:
        raise MissingDependency(
            f"amqtt or paho-mqtt is not installed ({exc}): pip install 'cstrie[amqtt,bench]'"
        ) from None
    import logging

    logging.getLogger("amqtt").setLevel(logging.ERROR)
    logging.getLogger("cstrie").setLevel(logging.ERROR)
    sizes, _ = ctx.pick_sizes(DEFAULT, QUICK)
    repeat = ctx.pick_repeat(5, 2)
    res = Result(NAME, params={"sizes": sizes, "repeat": repeat, "amqtt": amqtt.__version__})
    med = _routing(ctx, res, sizes, repeat)

    def floor(name: str, description: str, measured: float, limit: float, **kw: Any) -> None:
        res.floors.append(
            Floor(
                name=name,
                description=description,
                measured=measured,
                limit=limit,
                standard=not ctx.quick,
                indicative="--quick (fewer rounds)",
                **kw,
            )
        )

    if FLOOR_SIZE in med:
        m = med[FLOOR_SIZE]
        floor(
            f"amqtt-own-{fmt_size(FLOOR_SIZE)}",
            f"cstrie msg/s at {FLOOR_SIZE:,} filters / at {BASE_SIZE} filters",
            m["cstrie"] / m["ref"],
            OWN_FLOOR,
            kind="min",
        )
        floor(
            f"amqtt-stock-{fmt_size(FLOOR_SIZE)}",
            f"cstrie / stock amqtt msg/s at {FLOOR_SIZE:,} filters",
            m["cstrie"] / m["stock"],
            STOCK_FLOOR,
            kind="min",
        )
    else:
        res.notes.append(
            f"no routing floor checked: {FLOOR_SIZE:,} filters not among the sizes run"
        )
    ret = asyncio.run(_retained(res, ctx.pick_repeat(25, 5)))
    floor(
        "amqtt-retained-lookup",
        f"cstrie retained lookup at {RETAINED:,} retained, {RETAINED_HITS} hits",
        ret["cstrie"] / 1000,
        RETAINED_FLOOR_NS / 1000,
        kind="max",
        unit="us",
    )
    amp = _amplification(ctx, res, ctx.pick_repeat(7, 2))
    worst = max(amp, key=lambda name: amp[name]["cstrie"])
    floor(
        "amqtt-one-client-cost",
        f"cstrie (default bounds) broker CPU per message with one attacking client / "
        f"without (worst attack: {worst})",
        amp[worst]["cstrie"],
        AMP_FLOOR,
        kind="max",
    )
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in res.data if n.isdigit())
    if not sizes:
        return []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    med = {v: [statistics.median(res.data[str(n)]["rates"][v]) for n in sizes] for v in VARIANTS}
    cpu = {
        v: [statistics.median(res.data[str(n)]["cpu"][v]) * 1e6 for n in sizes] for v in VARIANTS
    }
    names = {"stock": "stock amqtt (scan of every filter)", "cstrie": "amqtt + cstrie"}
    lines(
        ax1,
        sizes,
        {names[v]: med[v] for v in VARIANTS},
        xlabel="topic filters held by 50 clients",
        ylabel="messages/s (publish to delivery)",
        title=f"amqtt {res.params.get('amqtt', '')}: throughput",
        loglog=True,
    )
    lines(
        ax2,
        sizes,
        {names[v]: cpu[v] for v in VARIANTS},
        xlabel="topic filters held by 50 clients",
        ylabel="broker CPU per message (us)",
        title="broker CPU per message",
        loglog=True,
    )
    path = out / "amqtt.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "amqtt broker end to end with paho clients: stock filter scan vs cstrie", run, plot
)
