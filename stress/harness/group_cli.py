"""``python -m stress.harness --scenario groups``: the share-group run.

For each thread count n (``--thread-counts``, default 4; each at least 2):
``n - k`` routers and ``k = --churners`` (default n // 2) churners, recorded
and checked (:mod:`stress.harness.groups`, :mod:`stress.harness.group_checker`),
then the round-robin phase once.  Exit status as for the mixed scenario: 0 ok,
1 a violation or the round-robin floor missed, 2 usage (or the GIL on in a
free-threaded build).

The full run (>= 1,000,000 routed messages per thread count, and 1,000,000 in
the round-robin phase)::

    python -m stress.harness --scenario groups --thread-counts 2,4 \\
        --messages 1000000 --rr-messages 1000000 --seed 1 --no-progress

(with ``PYTHON_GIL=0`` on a free-threaded interpreter).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["main_groups"]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2  # as report.finish returns them


def main_groups(args: argparse.Namespace, argv: list[str] | None) -> int:
    import cstrie.trie  # noqa: F401  (before looking at the GIL: see cli._main)
    from stress.harness import report, scenario_cli
    from stress.harness.group_checker import GROUP_CHECKS, check_groups, check_round_robin
    from stress.harness.groups import build_space, record_groups, run_round_robin

    dialect = args.dialect or "mqtt"
    snapshot_every = 2000 if args.snapshot_every is None else args.snapshot_every
    if snapshot_every < 0:
        print("error: --snapshot-every must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    if args.rr_messages < 0:
        print("error: --rr-messages must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    counts = args.thread_counts or [args.threads or 4]
    plan = []
    for n in counts:
        k = args.churners if args.churners is not None else max(1, n // 2)
        if n - k < 1:
            print(
                f"error: {n} threads with {k} churner(s) leave no router: the groups "
                "scenario needs n >= 2 and --churners < n",
                file=sys.stderr,
            )
            return EXIT_USAGE
        plan.append((n, n - k, k))
    if not args.check:
        print("error: the groups scenario is a checked run (drop --no-check)", file=sys.stderr)
        return EXIT_USAGE
    seed = scenario_cli.seed(args)
    run = scenario_cli.start(
        args,
        argv,
        seed,
        f"scenario groups: dialect {dialect}, {args.messages:,} messages per thread count, "
        f"(threads, routers, churners) {[p for p in plan]}, snapshot every "
        f"{snapshot_every or 'never'} messages per router; round-robin phase "
        f"{args.rr_messages:,} messages on {args.rr_threads} threads, floor "
        f"{args.max_imbalance:g}%",
    )
    if run is None:
        return EXIT_USAGE
    progress, clock, env = run.progress, run.clock, run.env

    data: dict[str, Any] = {
        "command": env["command"],
        "scenario": "groups",
        "seed": seed,
        "gil_enabled": env["gil_enabled"],
        "environment": env,
        "config": {
            "dialect": dialect,
            "messages": args.messages,
            "plan": [{"threads": n, "routers": r, "churners": k} for n, r, k in plan],
            "snapshot_every": snapshot_every,
            "rr_messages": args.rr_messages,
            "rr_threads": args.rr_threads,
            "max_imbalance_percent": args.max_imbalance,
        },
    }
    failed = False
    t_start = time.perf_counter()
    checks = []
    print("\n== share groups: routes while members join and leave, checked ==")
    for n, routers, churners in plan:
        space = build_space(dialect, churners)
        history = record_groups(
            space,
            routers,
            args.messages,
            seed,
            clock,
            progress,
            f"groups x{n}",
            snapshot_every=snapshot_every,
            timeout=args.timeout,
        )
        wall = history.seconds
        print(
            f"  recorded {n} threads ({routers} routing, {churners} joining/leaving): "
            f"{history.n_messages:,} messages, {history.n_churn_ops:,} joins/leaves, "
            f"{len(history.snapshots)} snapshots in {wall:.1f} s "
            f"({history.n_messages / wall if wall > 0 else 0:,.0f} messages/s while recording)",
            flush=True,
        )
        rep = check_groups(history, progress.step)
        progress.clear()
        st = rep.stats
        obs, busy = st.get("group_observations", 0), st.get("group_observations_contended", 0)
        print(
            f"  checked groups x{n}: {st['messages']:,} messages ({st['routed_by_group']:,} "
            f"route_by_group, {st['routed_plain']:,} route), {obs:,} group observations "
            f"({busy:,} = {100 * busy / obs if obs else 0:.2f}% overlapping a join or leave "
            f"of the group), {st['anchored_deliveries']:,} anchored deliveries, "
            f"{st['snapshot_routes']:,} routes on {st['snapshots']} snapshots, in "
            f"{st['seconds']['total']:.1f} s"
        )
        for name, what in GROUP_CHECKS.items():
            c = rep.counts.get(name, 0)
            print(f"    {'FAIL' if c else 'ok  '} {name:<12} {c:>6} violation(s)  {what}")
        for v in rep.violations:
            print(f"    VIOLATION [{v.check}] {v.message}")
        hidden = rep.total - len(rep.violations)
        if hidden > 0:
            print(f"    ... and {hidden} more violation(s) not shown")
        entry = {"threads": n, "routers": routers, "churners": churners, "clock": clock.kind}
        entry.update(rep.to_dict())
        checks.append(entry)
        failed |= not rep.ok
        del history
    data["checks"] = checks
    data["violations"] = sum(c["violations"] for c in checks)
    data["messages"] = sum(c["stats"]["messages"] for c in checks)

    if args.rr_messages:
        print("\n== round-robin spread: fixed membership ==")
        rr = run_round_robin(dialect, args.rr_messages, args.rr_threads, seed, progress)
        problems = check_round_robin(rr, args.max_imbalance / 100)
        for g, policy in rr.policies.items():
            counts_text = ", ".join(f"{k} {v:,}" for k, v in rr.counts[g].items())
            floor = (
                f"(floor {args.max_imbalance:g}%)"
                if policy == "round-robin"
                else "(no floor: for comparison)"
            )
            print(
                f"  {g:<10} {policy:<12} imbalance {100 * rr.imbalance[g]:.4f}% {floor}: "
                f"{counts_text}"
            )
        rate = rr.messages / rr.seconds if rr.seconds > 0 else 0
        print(
            f"  {rr.messages:,} messages on {rr.threads} threads in {rr.seconds:.1f} s "
            f"({rate:,.0f}/s); messages not reaching every group once: {rr.bad_messages}"
        )
        for p in problems:
            print(f"    FAIL {p}")
        rr_data = rr.to_dict()
        rr_data["problems"] = problems
        rr_data["max_round_robin_imbalance"] = max(
            v for g, v in rr.imbalance.items() if rr.policies[g] == "round-robin"
        )
        data["round_robin"] = rr_data
        failed |= bool(problems)

    clock.close()
    return report.finish(data, env, failed, t_start, seed, args.json)
