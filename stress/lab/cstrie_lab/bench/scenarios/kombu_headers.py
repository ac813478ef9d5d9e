"""``kombu-headers``: messages per second through a headers exchange on kombu's
memory transport, the indexed exchange vs the same exchange binding by binding.

kombu has no headers exchange of its own, so the baseline is cstrie's
:class:`~cstrie.integrations.kombu_headers.CstrieHeadersExchange` with its
``route`` replaced by RabbitMQ's algorithm written plainly in Python
(:class:`PerBindingHeadersExchange`: every binding's arguments checked against
the message's headers, ``rabbit_exchange_type_headers``), installed the same way
(``exchange_types["headers"]`` of the integrated memory channel).  Same kombu
code path, same table rows, only the routing differs.

Workload (issue 27): messages carry 5 of 10 header names (``h0``..``h9``), each
with one of 1,000 values; ``N`` bindings of 1-4 header conditions (``x-match``
``all`` for 80%, ``any`` for 20%) spread over 100 queues (a queue's bindings
told apart by their routing keys).  Real kombu clients: a ``Producer``
publishes JSON messages with those headers, one ``Consumer`` on all queues
receives them through ``Connection.drain_events``; a round publishes a batch and
drains every delivery (the count of deliveries is known from the index, and a
sample of messages is checked to get the same queues from both exchanges).
Batches are calibrated per variant to about 0.4 s; reported: the median of
the rounds, the two variants interleaved.  Floors (ratios in one run):
indexed / per-binding >= 30 at 10,000 bindings, >= 1.0 at 100.
"""

from __future__ import annotations

import gc
import random
import statistics
from collections.abc import Mapping
from typing import Any

from cstrie_lab.bench.base import (
    BenchError,
    Context,
    MissingDependency,
    Result,
    Scenario,
    Table,
)
from cstrie_lab.bench.format import fmt_ratio, fmt_size
from cstrie_lab.bench.scenarios.kombu import Rig, add_floor
from cstrie_lab.bench.timing import calibrated_batch

NAME = "kombu-headers"
DEFAULT = [100, 1_000, 10_000]
QUICK = [100, 1_000]
QUEUES = 100
FIELDS = [f"h{i}" for i in range(10)]
VALUES = 1_000
ROUND_SECONDS = 0.4
MIN_BATCH = 10
MAX_BATCH = 20_000
CHECKED = 50  # messages per size whose queues both exchanges must agree on
FLOORS = {10_000: 30.0, 100: 1.0}
_MISSING = object()


def bindings(n: int, seed: int = 27) -> list[tuple[str, str, dict[str, Any]]]:
    """``n`` (queue, routing key, arguments) bindings (see the module docstring)."""
    r = random.Random(f"{seed}/{n}")
    out = []
    for i in range(n):
        args: dict[str, Any] = {"x-match": "all" if r.random() < 0.8 else "any"}
        for f in r.sample(FIELDS, r.randint(1, 4)):
            args[f] = f"v{r.randrange(VALUES)}"
        out.append((f"q{i % QUEUES}", f"b{i}", args))
    return out


def messages(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` header tables of 5 headers each."""
    return [{f: f"v{rng.randrange(VALUES)}" for f in rng.sample(FIELDS, 5)} for _ in range(count)]


def plain_match(mode: str, args: list[tuple[str, Any]], headers: Mapping[str, Any]) -> bool:
    """One binding against one message, as RabbitMQ does it: ``all``/``any``
    over the arguments, ``x-`` ones skipped unless ``-with-x``, a void
    argument asks for presence, any other for an equal value of the same type."""
    with_x = mode.endswith("-with-x")
    want_all = mode.startswith("all")
    for k, v in args:
        if k == "x-match" or (not with_x and k.startswith("x-")):
            continue
        h = headers.get(k, _MISSING)
        hit = h is not _MISSING and (v is None or (type(h) is type(v) and h == v))
        if hit != want_all:
            return hit  # any: a hit decides; all: a miss decides
    return want_all


def _exchange_types() -> tuple[type[Any], type[Any]]:
    from cstrie.integrations import kombu as ck
    from cstrie.integrations.kombu_headers import CstrieHeadersExchange, decode_arguments

    class PerBindingHeadersExchange(CstrieHeadersExchange):
        """The headers exchange binding by binding (the baseline): the table
        kept as kombu's plain list, its rows parsed once per change."""

        table_type = None  # type: ignore[assignment]

        def __init__(self, channel: Any) -> None:
            super().__init__(channel)
            self._parsed: dict[Any, tuple[list[Any], list[Any]]] = {}

        def route(self, table: Any, exchange: Any, headers: Mapping[str, Any] | None) -> list[Any]:
            rows, parsed = self._parsed.get(exchange, ([], []))
            if rows != table:
                rows = list(table)
                parsed = []
                for _rk, pattern, queue in rows:
                    args = decode_arguments(pattern)
                    parsed.append((queue, args.get("x-match", "all"), list(args.items())))
                self._parsed[exchange] = (rows, parsed)
            h = headers or {}
            out: dict[Any, None] = {}
            for queue, mode, args in parsed:
                if queue not in out and plain_match(mode, args, h):
                    out[queue] = None
            return list(out)

    channel = type(
        "PerBindingMemoryChannel",
        (ck.MemoryChannel,),
        {
            "exchange_types": {
                **ck.MemoryChannel.exchange_types,
                "headers": PerBindingHeadersExchange,
            }
        },
    )
    transport = type("PerBindingMemoryTransport", (ck.MemoryTransport,), {"Channel": channel})
    return ck.MemoryTransport, transport


def headers_rig(transport_cls: type[Any], binds: list[tuple[str, str, dict[str, Any]]]) -> Rig:
    """A :class:`~cstrie_lab.bench.scenarios.kombu.Rig` with the bindings on the
    headers exchange ``hx``."""
    from kombu import Exchange, binding

    exchange = Exchange("hx", type="headers")
    per_queue: dict[str, list[Any]] = {}
    for q, rk, args in binds:
        per_queue.setdefault(q, []).append(binding(exchange, routing_key=rk, arguments=args))
    return Rig(transport_cls, exchange, per_queue, len(binds))


def headers_round(rig: Rig, msgs: list[dict[str, Any]], deliveries: int) -> float:
    return rig.round([{"headers": h} for h in msgs], deliveries)


def route(rig: Rig, headers: dict[str, Any]) -> list[Any]:
    """The queues the rig channel's exchange type routes ``headers`` to."""
    ex = rig.channel.typeof("hx")
    return list(ex.route(rig.channel.get_table("hx"), "hx", headers))


def run(ctx: Context) -> Result:
    try:
        import kombu

        from cstrie.content.rabbitmq import HeadersExchange

        indexed, per_binding = _exchange_types()
    except ImportError as exc:
        raise MissingDependency(
            f"kombu is not installed ({exc}): pip install 'cstrie[kombu]'"
        ) from None
    sizes, _ = ctx.pick_sizes(DEFAULT, QUICK)
    repeat = ctx.pick_repeat(5, 2)
    rng = ctx.rng(NAME)
    res = Result(NAME, params={"sizes": sizes, "repeat": repeat, "kombu": kombu.__version__})
    table = Table(
        f"kombu {kombu.__version__} memory transport, headers exchange: messages/s "
        f"(publish + consume, median of {repeat} rounds)",
        ["bindings", "per binding", "indexed", "indexed / per binding", "deliveries/msg"],
    )
    variants = {"per-binding": per_binding, "indexed": indexed}
    for n in sizes:
        binds = bindings(n)
        oracle = HeadersExchange()
        for q, rk, args in binds:
            oracle.bind((q, rk), args)

        def deliveries(msgs: list[dict[str, Any]], oracle: Any = oracle) -> int:
            return sum(len({q for q, _ in oracle.route(h)}) for h in msgs)

        rates: dict[str, list[float]] = {v: [] for v in variants}
        batches: dict[str, int] = {}
        per_msg: list[float] = []
        with ctx.progress.task(f"{NAME}: {fmt_size(n)} bindings", repeat * 2) as task:
            rigs = {v: headers_rig(cls, binds) for v, cls in variants.items()}
            try:
                for h in messages(rng, CHECKED):
                    answers = {v: sorted(route(rig, h)) for v, rig in rigs.items()}
                    want = sorted({q for q, _ in oracle.route(h)})
                    if any(a != want for a in answers.values()):
                        raise BenchError(f"queues differ for {h}: {answers} vs {want}")
                for v, rig in rigs.items():

                    def one(size: int, rig: Rig = rig) -> float:
                        msgs = messages(rng, size)
                        return headers_round(rig, msgs, deliveries(msgs))

                    batches[v] = calibrated_batch(one, ROUND_SECONDS, MIN_BATCH, MAX_BATCH)
                gc.collect()
                for _ in range(repeat):
                    for v, rig in rigs.items():
                        msgs = messages(rng, batches[v])
                        d = deliveries(msgs)
                        per_msg.append(d / len(msgs))
                        rates[v].append(headers_round(rig, msgs, d))
                        task.advance()
            finally:
                for rig in rigs.values():
                    rig.close()
        base, ours = statistics.median(rates["per-binding"]), statistics.median(rates["indexed"])
        ratio = ours / base
        table.add(
            f"{n:,}",
            f"{base:,.0f}",
            f"{ours:,.0f}",
            fmt_ratio(ratio),
            f"{statistics.mean(per_msg):.2f}",
        )
        res.data[str(n)] = {
            "per-binding": rates["per-binding"],
            "indexed": rates["indexed"],
            "ratio": ratio,
        }
        if n in FLOORS:
            desc = f"indexed / per-binding headers exchange msg/s at {n:,} bindings"
            add_floor(res, ctx, f"kombu-headers-{fmt_size(n)}", desc, ratio, FLOORS[n])
    res.tables.append(table)
    missing = [n for n in FLOORS if n not in sizes]
    if missing:
        res.notes.append(f"no floor checked for {missing} bindings: not among the sizes run")
    return res


SCENARIO = Scenario(
    NAME,
    "kombu memory transport, headers exchange end to end: per-binding vs indexed",
    run,
)
