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
message is its process's user + system time over the round / messages.
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
"""

from __future__ import annotations

import asyncio
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

from cstrie.bench.base import BenchError, Context, Floor, MissingDependency, Result, Scenario, Table
from cstrie.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie.bench.plots import lines, save
from cstrie.bench.timing import calibrated_batch

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
    """The broker process: start, say ready, run until told to stop."""
    import logging

    logging.disable(logging.WARNING)

    async def main() -> None:
        broker = make_broker(variant, broker_config(port))
        await broker.start()
        conn.send("ready")
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
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

    def __init__(self, variant: str, n: int) -> None:
        import psutil

        self.variant = variant
        port = _free_port()
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(variant, port, child), daemon=True)
        self.proc.start()
        if not self.conn.poll(60) or self.conn.recv() != "ready":
            self.proc.kill()
            raise BenchError(f"the {variant} broker did not start")
        self.ps = psutil.Process(self.proc.pid)
        try:
            self.clients = _Clients(port, n)
        except BaseException:
            self.stop()
            raise

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def round(self, picks: list[int]) -> tuple[float, float]:
        """(messages/s, broker CPU seconds per message) of one round."""
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
    ref = _Rig(ROUTING_BROKERS["cstrie"], BASE_SIZE)
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
                        rigs[v] = _Rig(ROUTING_BROKERS[v], n)
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


def run(ctx: Context) -> Result:
    try:
        import amqtt
        import paho.mqtt.client  # noqa: F401
        import psutil  # noqa: F401

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
