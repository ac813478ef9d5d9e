"""Benchmark: the content index vs RabbitMQ's per-binding headers matching.

Workload (issue 27): messages of 5 headers drawn from 10 header names, each
with one of ``--values`` values; bindings of 1-4 header conditions (x-match
``all`` for 80%, ``any`` for 20%), at 1,000 / 10,000 / 100,000 bindings.

Compared, per message, in one process and interleaved round by round:

- ``plain``: RabbitMQ's algorithm written plainly in Python: every binding's
  arguments checked against the message's headers (``rabbit_exchange_type_
  headers``: ``match_all``/``match_any`` over the arguments);
- ``index``: :class:`cstrie.content.rabbitmq.HeadersExchange` (the adapter:
  header conversion, the index's lookups, verification, one answer per queue).

Both must give the same queues for every message (checked).  Floors: the index
>= 50x ``plain`` at 10,000 bindings; the index's cost per message at 100,000
bindings within 3x of its cost at 1,000.  Times are medians of per-round means
(``time.perf_counter``); only the ratios mean anything on a shared machine.

Usage::

    python stress/lab/bench_content.py                      # 1k, 10k, 100k; 5 rounds
    python stress/lab/bench_content.py --sizes 1000,10000 --rounds 3 --check-floors

Exit status: 0 done (and floors met with --check-floors), 1 a floor missed or
the answers differ.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cstrie.content.rabbitmq import HeadersExchange

FIELDS = [f"h{i}" for i in range(10)]
_MISSING = object()


def workload(
    n: int, values: int, messages: int, seed: int
) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    r = random.Random(f"{seed}/{n}")
    bindings = []
    for i in range(n):
        args: dict[str, Any] = {"x-match": "all" if r.random() < 0.8 else "any"}
        for f in r.sample(FIELDS, r.randint(1, 4)):
            args[f] = f"v{r.randrange(values)}"
        bindings.append((f"q{i}", args))
    msgs = [
        {f: f"v{r.randrange(values)}" for f in r.sample(FIELDS, 5)} for _ in range(messages)
    ]
    return bindings, msgs


def plain_router(
    bindings: list[tuple[str, dict[str, Any]]],
) -> Callable[[dict[str, Any]], list[str]]:
    """RabbitMQ's per-binding evaluation, plainly: each binding's arguments
    against the headers (x-match and other x- arguments skipped)."""
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


def per_message(route: Callable[[dict[str, Any]], list[str]], msgs: list[dict[str, Any]]) -> float:
    t0 = time.perf_counter()
    for m in msgs:
        route(m)
    return (time.perf_counter() - t0) / len(msgs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--values", type=int, default=5000, help="values per header name")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--check-floors", action="store_true")
    a = p.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    impl = platform.python_implementation()
    print(f"# {impl} {platform.python_version()} on {platform.machine()}")
    print("| bindings | build s | plain us/msg | index us/msg | speed-up | matches/msg |")
    print("|---:|---:|---:|---:|---:|---:|")
    cost: dict[int, float] = {}
    speedup: dict[int, float] = {}
    failed = False
    for n in sizes:
        bindings, msgs = workload(n, a.values, 2000, a.seed)
        plain = plain_router(bindings)
        x = HeadersExchange()
        t0 = time.perf_counter()
        for q, args in bindings:
            x.bind(q, args)
        build = time.perf_counter() - t0
        few = msgs[: max(20, 200_000 // n)]  # plain is slow: fewer messages at large sizes
        matches = 0
        for m in few:
            got, want = sorted(x.route(m)), sorted(plain(m))
            if got != want:
                print(f"MISMATCH at {n} bindings for {m}: {got} != {want}", file=sys.stderr)
                return 1
            matches += len(got)
        ts_plain, ts_index = [], []
        for _ in range(a.rounds):
            ts_plain.append(per_message(plain, few))
            ts_index.append(per_message(x.route, msgs))
        tp, ti = statistics.median(ts_plain), statistics.median(ts_index)
        cost[n], speedup[n] = ti, tp / ti
        print(
            f"| {n:,} | {build:.2f} | {tp * 1e6:,.1f} | {ti * 1e6:.2f} | {tp / ti:,.0f}x "
            f"| {matches / len(few):.2f} |"
        )
    if min(sizes) in cost and max(sizes) in cost:
        growth = cost[max(sizes)] / cost[min(sizes)]
        print(f"\nindex cost per message at {max(sizes):,} / at {min(sizes):,}: {growth:.2f}x")
        if a.check_floors and max(sizes) >= 100_000 and growth > 3:
            print("FLOOR MISSED: cost growth > 3x", file=sys.stderr)
            failed = True
    if a.check_floors and 10_000 in speedup and speedup[10_000] < 50:
        print("FLOOR MISSED: < 50x plain at 10,000 bindings", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
