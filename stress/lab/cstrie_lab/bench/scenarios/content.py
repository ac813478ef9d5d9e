"""``content``: the content index against per-binding headers matching (issue 27).

Workload: messages of 5 headers drawn from 10 header names, each with one of
``V`` values; bindings of 1-4 header conditions (``x-match: all`` for 80%,
``any`` for 20%), queue ``q<i>`` for binding ``i``, at 1,000 / 10,000 /
100,000 bindings (``--quick``: 1,000 / 10,000).  Two workloads: V = 5,000
(a message's value is shared by ~n/10,000 bindings per condition: matches grow
with n) and V = 100,000 (matches stay rare).

Compared per message:

- ``plain``: RabbitMQ's algorithm (``rabbit_exchange_type_headers``:
  ``match_all``/``match_any`` over each binding's arguments) written plainly
  in Python, binding by binding;
- ``index``: :class:`cstrie.content.rabbitmq.HeadersExchange` (header
  conversion, the index's lookups, verification, one answer per queue).

Both must route every checked message to the same queues.  Every size's
exchange is built first; then batches of every (matcher, size) are
interleaved round-robin (index: 32 messages; plain: fewer at larger sizes),
so the cost growth from 1,000 to 100,000 bindings is a ratio of rounds run
side by side.  Floors (per workload): index >= 50x plain at 10,000 bindings;
index cost per message at 100,000 bindings <= 3x its cost at 1,000 (the
paired per-round ratio's median).  ``--sizes content=A,B[,C]``: the smallest
and largest sizes are the growth pair.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from cstrie.content.rabbitmq import HeadersExchange
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ratio, fmt_size
from cstrie_lab.bench.timing import chunks, interleave, paired_ratio, rotating

NAME = "content"
DEFAULT = [1_000, 10_000, 100_000]
QUICK = [1_000, 10_000]
VALUES = (5_000, 100_000)
FIELDS = [f"h{i}" for i in range(10)]
MESSAGES = 2_000
CHUNK = 32
CHECKED = 200  # messages whose answers are compared, per size (fewer at large sizes)
FLOOR_SPEEDUP = 50.0
FLOOR_SPEEDUP_SIZE = 10_000
FLOOR_GROWTH = 3.0
_MISSING = object()

Bindings = list[tuple[str, dict[str, Any]]]


def workload(
    rng: random.Random, n: int, values: int, messages: int
) -> tuple[Bindings, list[dict[str, Any]]]:
    """``n`` bindings (queue, arguments) and ``messages`` header tables."""
    bindings: Bindings = []
    for i in range(n):
        args: dict[str, Any] = {"x-match": "all" if rng.random() < 0.8 else "any"}
        for f in rng.sample(FIELDS, rng.randint(1, 4)):
            args[f] = f"v{rng.randrange(values)}"
        bindings.append((f"q{i}", args))
    msgs = [
        {f: f"v{rng.randrange(values)}" for f in rng.sample(FIELDS, 5)} for _ in range(messages)
    ]
    return bindings, msgs


def plain_router(bindings: Bindings) -> Callable[[dict[str, Any]], list[str]]:
    """RabbitMQ's per-binding evaluation, plainly: each binding's arguments
    against the headers (``x-match`` and other ``x-`` arguments skipped, a
    void argument testing presence)."""
    table = [(q, args.get("x-match", "all"), list(args.items())) for q, args in bindings]

    def route(headers: dict[str, Any]) -> list[str]:
        out: dict[str, None] = {}
        get = headers.get
        for queue, mode, args in table:
            if mode == "any":
                ok = False
                for k, v in args:
                    if k.startswith("x-"):
                        continue
                    if (v is None and k in headers) or get(k, _MISSING) == v:
                        ok = True
                        break
            else:
                ok = True
                for k, v in args:
                    if k.startswith("x-"):
                        continue
                    if not (k in headers if v is None else get(k, _MISSING) == v):
                        ok = False
                        break
            if ok:
                out[queue] = None
        return list(out)

    return route


def check(
    exchange: HeadersExchange,
    plain: Callable[[dict[str, Any]], list[str]],
    msgs: list[dict[str, Any]],
    label: str,
) -> float:
    """Both route every message of ``msgs`` to the same queues (else
    :class:`BenchError`); the mean queues per message."""
    total = 0
    for m in msgs:
        got, want = sorted(exchange.route(m)), sorted(plain(m))
        if got != want:
            raise BenchError(f"{label}: wrong answer for {m}: index {got}, plain {want}")
        total += len(got)
    return total / max(len(msgs), 1)


def _batch(route: Callable[[dict[str, Any]], object], msgs: list[dict[str, Any]]) -> Any:
    def run() -> None:
        for m in msgs:
            route(m)

    return run


def _workload(
    ctx: Context, res: Result, table: Table, values: int, sizes: list[int], repeat: int
) -> dict[str, Any]:
    rng = ctx.rng(f"{NAME}:{values}")
    cases: dict[str, Callable[[], object]] = {}
    ops: dict[str, int] = {}
    info: dict[int, dict[str, float]] = {}
    for n in sizes:
        bindings, msgs = workload(rng, n, values, MESSAGES)
        with ctx.progress.task(f"{NAME}: {values:,} values: build {fmt_size(n)}", 1):
            x = HeadersExchange()
            t0 = time.perf_counter()
            for q, args in bindings:
                x.bind(q, args)
            build = time.perf_counter() - t0
        plain = plain_router(bindings)
        few = max(1, CHUNK * 1_000 // n)  # plain messages per batch: ~constant time
        checked = msgs[: max(20, CHECKED * 1_000 // n)]
        matches = check(x, plain, checked, f"{values:,} values, {fmt_size(n)} bindings")
        info[n] = {"build_s": build, "matches": matches, "plain_batch": few}
        cases[f"index-{n}"] = rotating([_batch(x.route, p) for p in chunks(msgs, CHUNK)])
        ops[f"index-{n}"] = CHUNK
        cases[f"plain-{n}"] = rotating([_batch(plain, p) for p in chunks(msgs[: few * 8], few)])
        ops[f"plain-{n}"] = few
    with ctx.progress.task(f"{NAME}: {values:,} values: time", repeat) as task:
        stats = interleave(cases, ops, repeat=repeat, warmup=2, tick=task.advance)
    lo, hi = min(sizes), max(sizes)
    for n in sizes:
        ix, pl = stats[f"index-{n}"], stats[f"plain-{n}"]
        table.add(
            f"{values:,}",
            fmt_size(n),
            f"{info[n]['build_s']:.2f}",
            f"{pl.median / 1e3:,.1f}",
            f"{ix.median / 1e3:.2f}",
            fmt_ratio(pl.median / ix.median),
            f"{info[n]['matches']:.2f}",
            fmt_ratio(ix.median / stats[f"index-{lo}"].median),
        )
    growth = paired_ratio(stats[f"index-{hi}"], stats[f"index-{lo}"])
    standard = sizes == DEFAULT
    if FLOOR_SPEEDUP_SIZE in sizes or not standard:
        n = FLOOR_SPEEDUP_SIZE if FLOOR_SPEEDUP_SIZE in sizes else sizes[-1]
        res.floors.append(
            Floor(
                name=f"content-vs-plain-{values}",
                description=f"plain / index cost per message at {fmt_size(n)} bindings, "
                f"{values:,} values per header",
                measured=stats[f"plain-{n}"].median / stats[f"index-{n}"].median,
                limit=FLOOR_SPEEDUP,
                kind="min",
                standard=standard,
            )
        )
    if len(sizes) > 1:
        res.floors.append(
            Floor(
                name=f"content-growth-{values}",
                description=f"index cost per message at {fmt_size(hi)} / at {fmt_size(lo)} "
                f"bindings, {values:,} values per header (paired rounds' median)",
                measured=growth.median,
                limit=FLOOR_GROWTH,
                kind="max",
                standard=standard,
            )
        )
    return {
        "sizes": {str(n): {**info[n]} for n in sizes},
        "ns_per_message": {k: s.to_dict() for k, s in stats.items()},
        "growth": growth.to_dict(),
    }


def run(ctx: Context) -> Result:
    sizes, _ = ctx.pick_sizes(DEFAULT, QUICK)
    sizes = sorted(sizes)
    repeat = ctx.pick_repeat(60, 30)
    res = Result(NAME, params={"sizes": sizes, "values": list(VALUES), "repeat": repeat})
    table = Table(
        "Headers routing cost per message (median us): plain per-binding vs the content index",
        [
            "values/header",
            "bindings",
            "build s",
            "plain us/msg",
            "index us/msg",
            "plain / index",
            "queues/msg",
            "index vs smallest",
        ],
    )
    for values in VALUES:
        res.data[str(values)] = _workload(ctx, res, table, values, sizes, repeat)
    res.tables.append(table)
    res.notes.append(
        "With 5,000 values per header a message's values are shared by more bindings as n "
        "grows (queues/msg grows ~100x from 1k to 100k): the index's work per message follows "
        "its hits, candidates and matches, which grow with n on that workload."
    )
    return res


SCENARIO = Scenario(NAME, "content index vs per-binding headers matching (issue 27)", run)
