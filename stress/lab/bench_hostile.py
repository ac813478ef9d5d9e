"""What hostile patterns and clients cost one lookup or one route.

    python stress/lab/bench_hostile.py [--quick]

Rows (each the median of a few calls, after one warm-up):

* AMQP '#' anywhere against a topic of 256 copies of one word (RabbitMQ's
  longest key): 2,000 patterns of one '#' and a tail of 50-127 '*'/word;
  the same behind a 3-10 word prefix; 2,000 random patterns of 50-256 words
  over '#', '*' and the word; one pattern of 255 '#' and 'b'.
* route_by_group with K share groups of one member on '#' (MQTT), K = 0,
  1,000, 10,000 and 100,000: the cost per group delivered.

Run it with two builds (before/after) on the same machine, one after the
other, and compare the rows: the figures are whole-call times.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def amqp_rows(quick: bool) -> None:
    from cstrie import Trie

    rng = random.Random(1)
    n = 400 if quick else 2000
    topic = ".".join(["a"] * 256)
    sets = {
        f"{n} x '#' + 50-127 of '*'/'a'": [
            "#." + ".".join(rng.choice("*a") for _ in range(rng.randint(50, 127))) for _ in range(n)
        ],
        f"{n} x 3-10 prefix, '#', 50-127 tail": [
            ".".join(rng.choice("*a") for _ in range(rng.randint(3, 10)))
            + ".#."
            + ".".join(rng.choice("*a") for _ in range(rng.randint(50, 127)))
            for _ in range(n)
        ],
        f"{n // 10 if quick else 800} random 50-256 over '#','*','a'": [
            ".".join(rng.choice(["#", "*", "a"]) for _ in range(rng.randint(50, 256)))
            for _ in range(n // 10 if quick else 800)
        ],
        "one pattern of 255 '#' then 'b'": [".".join(["#"] * 255 + ["b"])],
    }
    for name, pats in sets.items():
        t = Trie("amqp")
        for k, p in enumerate(pats):
            t.subscribe(p, k % 50)
        reps = 3
        dt = median_time(lambda t=t: t.lookup(topic), reps)
        print(f"amqp  {name:42s} lookup {dt * 1e3:10.2f} ms", flush=True)


def route_rows(quick: bool) -> None:
    from cstrie import Trie

    for k in (0, 1_000, 10_000) if quick else (0, 1_000, 10_000, 100_000):
        t = Trie("mqtt")
        for g in range(k):
            t.subscribe(f"$share/g{g}/#", "c1")
        t.subscribe("#", "c2")
        reps = max(3, min(200, 200_000 // max(k, 1)))
        dt = median_time(lambda t=t: t.route_by_group("a/b"), reps)
        per = dt / k * 1e9 if k else 0.0
        print(
            f"route K={k:<7d} route_by_group {dt * 1e6:10.1f} us   {per:6.0f} ns per group",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sets (a smoke run)")
    ap.add_argument("--only", choices=["amqp", "route"], default=None)
    args = ap.parse_args(argv)
    if args.only in (None, "amqp"):
        amqp_rows(args.quick)
    if args.only in (None, "route"):
        route_rows(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
