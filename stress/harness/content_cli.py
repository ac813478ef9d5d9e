"""``python -m stress.harness --scenario content``: the content-index run.

For each thread count n (``--thread-counts``, default 2,4): n threads on one
:class:`cstrie.content.ContentIndex`, each running ``--ops`` operations
(``--mix R/W`` percent matches and binds/unbinds, a snapshot every
``--snapshot-every`` operations), recorded and checked
(:mod:`stress.harness.content`, :mod:`stress.harness.content_checker`).
Exit status as for the other scenarios: 0 ok, 1 a violation, 2 usage.

    python -m stress.harness --scenario content --thread-counts 2,4 \\
        --ops 20000 --seed 1 --no-progress
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["DEFAULTS", "main_content"]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2

DEFAULTS: dict[str, Any] = {
    "dialect": "amqp",
    "keys": 96,
    "mix": "70/30",
    "snapshot_every": 200,
    "ops": 5_000,
}


def main_content(args: argparse.Namespace, argv: list[str] | None) -> int:
    import cstrie.content  # noqa: F401  (before looking at the GIL: see cli._main)
    from stress.harness import report, scenario_cli
    from stress.harness.content import build_space, record_content
    from stress.harness.content_checker import CONTENT_CHECKS, check_content

    w = scenario_cli.workload(args, DEFAULTS, "content")
    if w is None:
        return EXIT_USAGE
    dialect, keys, snapshot_every, ops, mix = w.dialect, w.keys, w.snapshot_every, w.ops, w.mix
    counts = scenario_cli.thread_counts(args, [2, 4])
    seed = scenario_cli.seed(args)
    try:
        spaces = {n: build_space(dialect, keys, n, seed) for n in counts}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    run = scenario_cli.start(
        args,
        argv,
        seed,
        f"scenario content: ContentIndex, dialect {dialect}, {keys} bindings (each bound and "
        f"unbound by one thread), {len(spaces[counts[0]].messages)} messages, mix {mix} "
        f"match/write, snapshot every {snapshot_every or 'never'}, thread counts {counts}, "
        f"{ops:,} ops/thread",
    )
    if run is None:
        return EXIT_USAGE
    progress, clock, env = run.progress, run.clock, run.env
    data: dict[str, Any] = {
        "command": env["command"],
        "scenario": "content",
        "seed": seed,
        "gil_enabled": env["gil_enabled"],
        "environment": env,
        "config": {
            "dialect": dialect,
            "keys": keys,
            "mix": str(mix),
            "snapshot_every": snapshot_every,
            "ops_per_thread": ops,
            "thread_counts": counts,
        },
    }
    failed = False
    t_start = time.perf_counter()
    checks = []
    print("\n== content index: binds and unbinds while threads match, checked ==")
    for n in counts:
        history = record_content(
            spaces[n],
            ops,
            seed,
            clock,
            progress,
            f"content x{n}",
            read_percent=mix.lookup,
            snapshot_every=snapshot_every,
            timeout=args.timeout,
        )
        timed, wall = history.n_timed(), history.seconds
        kinds = history.kind_counts()
        print(
            f"  recorded {n} thread(s): {timed:,} operations in {wall:.2f} s: "
            + ", ".join(f"{v:,} {k}" for k, v in kinds.items()),
            flush=True,
        )
        rep = check_content(history, progress.step)
        progress.clear()
        st = rep.stats
        judged, busy = st["reads_judged"], st["reads_contended"]
        print(
            f"  checked content x{n}: {judged:,} answers judged as states ({busy:,} with a "
            f"write of a binding they depend on in flight)"
        )
        for name, what in CONTENT_CHECKS.items():
            c = rep.counts.get(name, 0)
            print(f"    {'FAIL' if c else 'ok  '} {name:<9} {c:>6} violation(s)  {what}")
        for check, message in rep.violations:
            print(f"    VIOLATION [{check}] {message}")
        hidden = rep.total - len(rep.violations)
        if hidden > 0:
            print(f"    ... and {hidden} more violation(s) not shown")
        entry: dict[str, Any] = {"threads": n, "ops": timed, "record_seconds": round(wall, 3)}
        entry.update(rep.to_dict())
        checks.append(entry)
        failed |= not rep.ok
    data["checks"] = checks
    data["violations"] = sum(c["violations"] for c in checks)
    data["operations"] = sum(c["ops"] for c in checks)
    clock.close()
    return report.finish(data, env, failed, t_start, seed, args.json)
