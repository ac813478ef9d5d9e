"""``python -m stress.harness --scenario topics``: the topic-index run.

For each thread count n (``--thread-counts``, default 2,4): n threads on one
:class:`cstrie.topics.TopicIndex`, each running ``--ops`` operations
(``--mix R/W`` percent reads and writes, a snapshot every
``--snapshot-every`` operations), recorded and checked
(:mod:`stress.harness.topics`, :mod:`stress.harness.topic_checker`).  Exit
status as for the other scenarios: 0 ok, 1 a violation, 2 usage (or the GIL
on in a free-threaded build).

The full run (1,000,000 operations at 2 threads, 2,000,000 at 4)::

    python -m stress.harness --scenario topics --thread-counts 2,4 \\
        --ops 500000 --seed 1 --no-progress

(with ``PYTHON_GIL=0`` on a free-threaded interpreter).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["DEFAULTS", "main_topics"]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2  # as report.finish returns them

#: defaults of the shared options in this scenario
DEFAULTS: dict[str, Any] = {
    "dialect": "mqtt",
    "keys": 256,
    "mix": "50/50",
    "snapshot_every": 250,
    "ops": 20_000,
}


def main_topics(args: argparse.Namespace, argv: list[str] | None) -> int:
    import cstrie.topics  # noqa: F401  (before looking at the GIL: see cli._main)
    from stress.harness import report, scenario_cli
    from stress.harness.topic_checker import TOPIC_CHECKS, check_topics
    from stress.harness.topics import build_space, record_topics

    w = scenario_cli.workload(args, DEFAULTS, "topics")
    if w is None:
        return EXIT_USAGE
    dialect, keys, snapshot_every, ops, mix = w.dialect, w.keys, w.snapshot_every, w.ops, w.mix
    if args.shared_topics is not None and args.shared_topics < 0:
        print("error: --shared-topics must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    counts = scenario_cli.thread_counts(args, [2, 4])
    seed = scenario_cli.seed(args)
    spaces = {}
    try:
        for n in counts:
            spaces[n] = build_space(dialect, keys, n, seed, args.shared_topics)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    first = spaces[counts[0]]
    run = scenario_cli.start(
        args,
        argv,
        seed,
        f"scenario topics: TopicIndex, dialect {dialect}, {keys} topics "
        f"({len(first.shared)} shared, the rest owned by one thread each), "
        f"{len(first.filters)} filters ({', '.join(sorted(set(first.shapes)))}), mix {mix} "
        f"read/write, snapshot every {snapshot_every or 'never'}, thread counts {counts}, "
        f"{ops:,} ops/thread",
    )
    if run is None:
        return EXIT_USAGE
    progress, clock, env = run.progress, run.clock, run.env

    data: dict[str, Any] = {
        "command": env["command"],
        "scenario": "topics",
        "seed": seed,
        "gil_enabled": env["gil_enabled"],
        "environment": env,
        "config": {
            "dialect": dialect,
            "keys": keys,
            "shared_topics": len(first.shared),
            "filters": first.filters,
            "mix": str(mix),
            "snapshot_every": snapshot_every,
            "ops_per_thread": ops,
            "thread_counts": counts,
        },
    }
    failed = False
    t_start = time.perf_counter()
    checks = []
    print("\n== topic index: puts, removes and pops while threads query, checked ==")
    for n in counts:
        space = spaces[n]
        history = record_topics(
            space,
            ops,
            seed,
            clock,
            progress,
            f"topics x{n}",
            read_percent=mix.lookup,
            snapshot_every=snapshot_every,
            timeout=args.timeout,
        )
        wall = history.seconds
        timed = history.n_timed()
        rate = timed / wall if wall > 0 else 0.0
        kinds = history.kind_counts()
        print(
            f"  recorded {n} thread(s): {timed:,} operations in {wall:.2f} s "
            f"({rate:,.0f} ops/s while recording): "
            + ", ".join(f"{v:,} {k}" for k, v in kinds.items()),
            flush=True,
        )
        rep = check_topics(history, progress.step)
        progress.clear()
        st = rep.stats
        judged, busy = st["reads_judged"], st["reads_contended"]
        print(
            f"  checked topics x{n}: {st['operations']:,} operations, {judged:,} reads judged "
            f"as states ({busy:,} = {100 * busy / judged if judged else 0:.1f}% with a write "
            f"of their scope in flight), {st['query_pairs']:,} query pairs, "
            f"{st['shared_events']:,} events on {st['shared_topics']} shared topics, in "
            f"{st['seconds']['total']:.1f} s"
        )
        for name, what in TOPIC_CHECKS.items():
            c = rep.counts.get(name, 0)
            print(f"    {'FAIL' if c else 'ok  '} {name:<16} {c:>6} violation(s)  {what}")
        for v in rep.violations:
            print(f"    VIOLATION [{v.check}] {v.message}")
        hidden = rep.total - len(rep.violations)
        if hidden > 0:
            print(f"    ... and {hidden} more violation(s) not shown")
        entry = {
            "threads": n,
            "ops": timed,
            "record_seconds": round(wall, 3),
            "ops_per_s": round(rate, 1),
            "clock": clock.kind,
        }
        entry.update(rep.to_dict())
        checks.append(entry)
        failed |= not rep.ok
        del history
    data["checks"] = checks
    data["violations"] = sum(c["violations"] for c in checks)
    data["operations"] = sum(c["ops"] for c in checks)

    clock.close()
    return report.finish(data, env, failed, t_start, seed, args.json)
