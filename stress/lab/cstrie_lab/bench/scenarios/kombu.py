"""``kombu``: messages per second through kombu's memory transport, stock vs cstrie.

Real kombu clients end to end: a ``Producer`` publishes JSON messages to a topic
exchange and one ``Consumer`` on all queues receives them through
``Connection.drain_events``.  The stock memory transport routes each message with
``TopicExchange.lookup`` (one regex per binding); the integrated one
(:mod:`cstrie.integrations.kombu`) with a trie.  Both run in the same process and
the same rounds, each on a broker state of its own.

Bindings, IoT-like (``N`` distinct binding keys, 4 per device; devices 250 to a
line and 20 lines to a site; the queue of device ``d`` is ``q{d mod 100}``, so
at most 100 queues whatever ``N``)::

    site.S.line.L.dev.D.cmd        site.S.line.L.dev.D.config.#
    site.S.line.L.dev.D.*.status   site.S.#.L.dev.D.alarm

Messages go to random bound devices: ``...dev.D.cmd``, ``...dev.D.config.net.wifi``,
``...dev.D.temp.status`` and ``site.S.line.L.dev.D.alarm``; each matches exactly
one binding, under AMQP and under stock kombu's regexes alike (the run checks
that both transports deliver every message once).

A round publishes a batch and drains it; its rate is messages / (publish + drain)
time.  Batch sizes are calibrated per transport and size, after an untimed
warm-up round, so that a round takes about 0.4 s (at least 10 messages).
Reported: the median rate over rounds, the rounds of the two transports
interleaved.  Floors (ratios in one run): cstrie /
stock >= 30 at 10,000 bindings, >= 1.0 at 100 bindings.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
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
from cstrie_lab.bench.format import fmt_ratio, fmt_size
from cstrie_lab.bench.plots import lines, save
from cstrie_lab.bench.timing import calibrated_batch

NAME = "kombu"
DEFAULT = [100, 1_000, 10_000, 50_000]
QUICK = [100, 1_000, 10_000]
QUEUES = 100
ROUND_SECONDS = 0.4
MIN_BATCH = 10
MAX_BATCH = 20_000
FLOORS = {10_000: 30.0, 100: 1.0}
_DEVICES_PER_LINE = 250
_LINES_PER_SITE = 20


def _place(device: int) -> tuple[str, str, str]:
    site = device // (_DEVICES_PER_LINE * _LINES_PER_SITE)
    line = (device // _DEVICES_PER_LINE) % _LINES_PER_SITE
    return f"s{site:03d}", f"l{line:02d}", f"d{device % _DEVICES_PER_LINE:03d}"


def binding_keys(n: int) -> list[tuple[str, str]]:
    """``n`` distinct (binding key, queue) pairs (see the module docstring)."""
    out = []
    for i in range(n):
        device = i // 4
        s, ln, d = _place(device)
        dev = f"site.{s}.line.{ln}.dev.{d}"
        key = (
            f"{dev}.cmd",
            f"{dev}.config.#",
            f"{dev}.*.status",
            f"site.{s}.#.{ln}.dev.{d}.alarm",
        )[i % 4]
        out.append((key, f"q{device % QUEUES}"))
    return out


def routing_keys(rng: random.Random, n: int, count: int) -> list[str]:
    """``count`` routing keys, each matching exactly one of ``binding_keys(n)``."""
    out = []
    for _ in range(count):
        i = rng.randrange(n)
        s, ln, d = _place(i // 4)
        dev = f"site.{s}.line.{ln}.dev.{d}"
        out.append(
            (f"{dev}.cmd", f"{dev}.config.net.wifi", f"{dev}.temp.status", f"{dev}.alarm")[i % 4]
        )
    return out


class Rig:
    """One transport class on a broker state of its own, an exchange with the
    given bindings, a producer and one consumer on all the queues (shared by
    the kombu scenarios)."""

    def __init__(
        self, transport_cls: type[Any], exchange: Any, per_queue: dict[str, list[Any]], rows: int
    ) -> None:
        from kombu import Connection, Consumer, Queue
        from kombu.transport import virtual

        # a broker state and message store of its own (memory:// shares both process-wide)
        channel_cls = type("BenchChannel", (transport_cls.Channel,), {"queues": {}})
        self.transport = type(
            "BenchTransport",
            (transport_cls,),
            {"Channel": channel_cls, "global_state": virtual.BrokerState()},
        )
        self.conn = Connection(transport=self.transport)
        self.channel = self.conn.channel()
        self.exchange = exchange
        queues = [Queue(q, bindings=bs) for q, bs in per_queue.items()]
        for q in queues:
            q(self.channel).declare()
        table = self.channel.state.exchanges[exchange.name]["table"]
        if len(table) != rows:
            raise BenchError(f"kombu holds {len(table)} bindings, expected {rows}")
        self.producer = self.conn.Producer(self.channel, exchange=self.exchange)
        self.received = 0
        self.consumer = Consumer(
            self.channel, queues, callbacks=[self._on_message], no_ack=True, auto_declare=False
        )
        self.consumer.consume()

    def _on_message(self, body: Any, message: Any) -> None:
        self.received += 1

    def round(self, publishes: list[dict[str, Any]], deliveries: int) -> float:
        """Publish one message per keyword set of ``publishes`` (``routing_key``,
        ``headers``) and drain the ``deliveries`` they make; messages per second."""
        publish, drain = self.producer.publish, self.conn.drain_events
        self.received = 0
        t0 = time.perf_counter()
        for i, kw in enumerate(publishes):
            publish({"i": i}, serializer="json", **kw)
        while self.received < deliveries:
            try:
                drain(timeout=1.0)
            except TimeoutError:
                raise BenchError(
                    f"{self.received} of {deliveries} deliveries arrived: routing lost messages"
                ) from None
        elapsed = time.perf_counter() - t0
        if self.received != deliveries:
            raise BenchError(f"{self.received} deliveries, expected {deliveries}")
        return len(publishes) / elapsed

    def close(self) -> None:
        self.consumer.cancel()
        self.conn.release()


def topic_rig(transport_cls: type[Any], n: int) -> Rig:
    """A :class:`Rig` with ``n`` IoT bindings on the topic exchange ``iot``."""
    from kombu import Exchange, binding

    exchange = Exchange("iot", type="topic")
    per_queue: dict[str, list[Any]] = {}
    for key, queue in binding_keys(n):
        per_queue.setdefault(queue, []).append(binding(exchange, routing_key=key))
    return Rig(transport_cls, exchange, per_queue, n)


def topic_round(rig: Rig, keys: list[str]) -> float:
    """Publish to ``keys`` (each matching one binding) and drain; messages per second."""
    return rig.round([{"routing_key": k} for k in keys], len(keys))


def add_floor(
    res: Result, ctx: Context, name: str, description: str, measured: float, limit: float
) -> None:
    """A ``min`` floor on a ratio of this run (indicative only with ``--quick``)."""
    res.floors.append(
        Floor(
            name=name,
            description=description,
            measured=measured,
            limit=limit,
            kind="min",
            standard=not ctx.quick,
            indicative="--quick (fewer rounds)",
        )
    )


def _batch(rig: Rig, rng: random.Random, n: int) -> int:
    """A batch that takes about ROUND_SECONDS (stock kombu compiles its regexes
    on the first lookups: the warm-up round)."""
    return calibrated_batch(
        lambda size: topic_round(rig, routing_keys(rng, n, size)),
        ROUND_SECONDS,
        MIN_BATCH,
        MAX_BATCH,
    )


def run(ctx: Context) -> Result:
    try:
        import kombu
        from kombu.transport import memory

        from cstrie.integrations.kombu import MemoryTransport
    except ImportError as exc:
        raise MissingDependency(
            f"kombu is not installed ({exc}): pip install 'cstrie[kombu]'"
        ) from None
    sizes, _ = ctx.pick_sizes(DEFAULT, QUICK)
    repeat = ctx.pick_repeat(5, 2)
    rng = ctx.rng(NAME)
    res = Result(NAME, params={"sizes": sizes, "repeat": repeat, "kombu": kombu.__version__})
    table = Table(
        f"kombu {kombu.__version__} memory transport, topic exchange: messages/s "
        f"(publish + consume, median of {repeat} rounds)",
        ["bindings", "stock kombu", "cstrie", "cstrie / stock", "batch stock / cstrie"],
    )
    variants = {"stock": memory.Transport, "cstrie": MemoryTransport}
    for n in sizes:
        rates: dict[str, list[float]] = {v: [] for v in variants}
        batches: dict[str, int] = {}
        with ctx.progress.task(f"{NAME}: {fmt_size(n)} bindings", repeat * 2) as task:
            rigs = {v: topic_rig(cls, n) for v, cls in variants.items()}
            try:
                for v, rig in rigs.items():
                    batches[v] = _batch(rig, rng, n)
                gc.collect()
                for _ in range(repeat):
                    for v, rig in rigs.items():
                        rates[v].append(topic_round(rig, routing_keys(rng, n, batches[v])))
                        task.advance()
            finally:
                for rig in rigs.values():
                    rig.close()
        stock, ours = statistics.median(rates["stock"]), statistics.median(rates["cstrie"])
        ratio = ours / stock
        table.add(
            f"{n:,}",
            f"{stock:,.0f}",
            f"{ours:,.0f}",
            fmt_ratio(ratio),
            f"{batches['stock']:,} / {batches['cstrie']:,}",
        )
        res.data[str(n)] = {"stock": rates["stock"], "cstrie": rates["cstrie"], "ratio": ratio}
        if n in FLOORS:
            desc = f"cstrie / stock kombu messages/s at {n:,} bindings"
            add_floor(res, ctx, f"kombu-{fmt_size(n)}", desc, ratio, FLOORS[n])
    res.tables.append(table)
    missing = [n for n in FLOORS if n not in sizes]
    if missing:
        res.notes.append(f"no floor checked for {missing} bindings: not among the sizes run")
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in res.data)
    fig, ax = plt.subplots(figsize=(7, 4))
    lines(
        ax,
        sizes,
        {
            "stock kombu (regex per binding)": [
                statistics.median(res.data[str(n)]["stock"]) for n in sizes
            ],
            "kombu + cstrie": [statistics.median(res.data[str(n)]["cstrie"]) for n in sizes],
        },
        xlabel="bindings on the topic exchange",
        ylabel="messages/s (publish + consume)",
        title=f"kombu {res.params.get('kombu', '')} memory transport, IoT binding keys",
        loglog=True,
    )
    path = out / "kombu.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "kombu memory transport end to end: stock regex routing vs cstrie", run, plot
)
