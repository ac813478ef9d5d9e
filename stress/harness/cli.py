"""Command line of the stress harness: ``python -m stress.harness --help``."""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import gc
import math
import os
import sys
import time
from typing import Any

__all__ = ["main", "parser"]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2  # as report.finish returns them

#: Length of the op sequence cycled by a --duration run (per thread).
RING = 1 << 16


def _thread_counts(text: str) -> list[int]:
    try:
        counts = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected e.g. 1,2,4, not {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("thread counts must be >= 1")
    return counts


def _positive_int(text: str) -> int:
    try:
        v = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return v


def parser() -> argparse.ArgumentParser:
    from stress.harness.runner import SUBSCRIBER_KINDS

    p = argparse.ArgumentParser(
        prog="python -m stress.harness",
        description=(
            "Multithreaded stress harness for cstrie: runs mixed lookups/updates/snapshots on "
            "1..N threads, measures throughput (cstrie with per-thread matchers, and with "
            "--baselines PyTrie and cstrie behind one global lock), and records every "
            "operation with stamps from a shared atomic counter to check that what each "
            "thread saw is linearizable. Exit status: 0 ok, 1 violations (or --min-ratio "
            "missed), 2 usage error or the GIL is on in a free-threaded build."
        ),
    )
    g = p.add_argument_group("workload")
    g.add_argument(
        "--scenario",
        choices=("mixed", "groups", "topics", "selectors", "content"),
        default="mixed",
        help="mixed (default): lookups, updates and snapshots on ordinary subscriptions; "
        "groups: share groups routed (trie.route, route_by_group) while members join and "
        "leave, then a round-robin fairness phase (see stress/harness/groups.py); topics: "
        "a TopicIndex put/removed/popped while threads get, query, count and snapshot it "
        "(see stress/harness/topics.py); selectors: a SelectorIndex added to and removed from "
        "while threads look up, every answer checked against brute force "
        "(see stress/harness/selectors.py); content: a ContentIndex bound/unbound while "
        "threads match messages on it and its snapshots (see stress/harness/content.py)",
    )
    g.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="maximum thread count: runs 1, 2, ..., N (default: CPU count)",
    )
    g.add_argument(
        "--thread-counts",
        type=_thread_counts,
        default=None,
        metavar="LIST",
        help="explicit thread counts, e.g. 1,2,4 (overrides --threads)",
    )
    g.add_argument(
        "--mix",
        default=None,
        metavar="L/U",
        help="percent of lookups/updates, e.g. 100/0, 90/10, 50/50 (default 90/10); topics: "
        "of reads/writes (default 50/50)",
    )
    g.add_argument(
        "--snapshot-every",
        type=int,
        default=None,
        metavar="K",
        help="every K-th operation of each thread is a snapshot (default 0: none); groups: "
        "every K-th message of each router also takes a snapshot and routes every topic on "
        "it (default 2000); topics: every K-th op of each thread is a snapshot, read at once "
        "and again at the thread's next one (default 250)",
    )
    g.add_argument(
        "--many-every",
        type=int,
        default=0,
        metavar="K",
        help="every K-th operation of each thread (unless a snapshot) is a trie.lookup_many "
        "of a batch of topics, several of them matching the crowd: --many-subs subscribers "
        "on a few extra patterns (crowd.*, crowd.#, crowd.<j>) that the updates write too, "
        "so each such row takes more than one engine call. Checked by (d): each row must be "
        "one state of the trie (default 0: none)",
    )
    g.add_argument(
        "--many-subs",
        type=_positive_int,
        default=4096,
        metavar="N",
        help="crowd subscribers with --many-every (default 4096: rows of ~1,600-2,400 "
        "subscribers, above the 1024 ids one engine call returns)",
    )
    g.add_argument(
        "--cache",
        type=int,
        default=0,
        metavar="BYTES",
        help="give every cstrie trie of the run a result cache of BYTES (Trie.set_cache; "
        "default 0: none); its lookups are recorded and checked like any other",
    )
    g.add_argument(
        "--subscribers",
        choices=SUBSCRIBER_KINDS,
        default="int",
        help="throughput runs only: each thread subscribes new int objects (default; a "
        "lookup hands every thread the registered one, so on CPython 3.13t the threads "
        "share its reference count) or interned strings (immortal on 3.13t)",
    )
    g.add_argument(
        "--keys",
        type=_positive_int,
        default=None,
        metavar="N",
        help="key space: number of (pattern, subscriber) pairs (default 1024); topics: "
        "number of topics (default 256)",
    )
    g.add_argument(
        "--dialect",
        choices=("amqp", "mqtt", "nats"),
        default=None,
        help="default amqp (mixed), mqtt (groups, topics)",
    )
    gr = p.add_argument_group("groups scenario")
    gr.add_argument(
        "--messages",
        type=_positive_int,
        default=200_000,
        metavar="N",
        help="messages routed per thread count, all routers together (default 200,000; "
        "the full run: 1000000)",
    )
    gr.add_argument(
        "--churners",
        type=_positive_int,
        default=None,
        metavar="K",
        help="of each thread count n, K threads join and leave members, n - K route "
        "(default n // 2)",
    )
    gr.add_argument(
        "--rr-messages",
        type=int,
        default=200_000,
        metavar="N",
        help="messages of the round-robin phase (fixed membership; default 200,000; the "
        "full run: 1000000; 0 skips the phase)",
    )
    gr.add_argument(
        "--rr-threads",
        type=_positive_int,
        default=2,
        metavar="N",
        help="routing threads of the round-robin phase (default 2)",
    )
    gr.add_argument(
        "--max-imbalance",
        type=float,
        default=2.0,
        metavar="PCT",
        help="round-robin floor: max |count - mean| / mean of a round-robin group's "
        "members, in percent (default 2)",
    )
    sp = p.add_argument_group("selectors scenario")
    sp.add_argument(
        "--compact-min",
        type=int,
        default=None,
        metavar="N",
        help="dead ids a compaction of the SelectorIndex waits for (default 64 in this "
        "scenario, so that runs compact often)",
    )
    tp = p.add_argument_group("topics scenario")
    tp.add_argument(
        "--shared-topics",
        type=int,
        default=None,
        metavar="N",
        help="topics every thread writes (default keys // 32, at least 2; the others are "
        "each written by one thread only)",
    )
    length = g.add_mutually_exclusive_group()
    length.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SEC",
        help="seconds per run (default 2.0 unless --ops is given)",
    )
    length.add_argument(
        "--ops",
        type=_positive_int,
        default=None,
        metavar="N",
        help="operations per thread per run (topics: default 20,000)",
    )
    g.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed (printed at start; same seed => same per-thread op sequences)",
    )
    o = p.add_argument_group("what to run")
    o.add_argument(
        "--measure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="timed runs without recording (throughput; default on)",
    )
    o.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="recorded runs checked for linearizability (default on)",
    )
    o.add_argument(
        "--baselines",
        action="store_true",
        help="also measure PyTrie (one lock) and cstrie behind one global Lock",
    )
    o.add_argument(
        "--check-baselines",
        action="store_true",
        help="also record and check the baselines (a check of the checker)",
    )
    o.add_argument(
        "--repeat",
        type=_positive_int,
        default=1,
        metavar="R",
        help="timed runs per (implementation, thread count); the best is kept (default 1)",
    )
    o.add_argument(
        "--clock",
        choices=("auto", "atomics", "perf"),
        default="auto",
        help="stamps for recorded runs: atomics counter (auto: if importable) or "
        "time.perf_counter_ns",
    )
    o.add_argument(
        "--min-ratio",
        type=float,
        default=None,
        metavar="X",
        help="fail (exit 1) if cstrie's 2-thread/1-thread throughput ratio is below X",
    )
    o.add_argument(
        "--gc",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="leave the cyclic GC on during runs (default); --no-gc shows what its "
        "stop-the-world collections cost the threads",
    )
    o.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SEC",
        help="a run whose threads are not done after SEC seconds is a hang: print every "
        "thread's stack and exit 1 (default 600)",
    )
    r = p.add_argument_group("output")
    r.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    r.add_argument("--json", metavar="PATH", help="write the full report as JSON")
    r.add_argument("--plot", metavar="PATH", help="write throughput vs threads as a PNG")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from stress.harness.runner import HangError

    try:
        return _main(args, argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except HangError as exc:
        # The stuck threads cannot be stopped: show where they are and leave.
        print(f"\nFAILED: {exc}; stacks of all threads:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_VIOLATION)


def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    if args.scenario == "groups":
        from stress.harness.group_cli import main_groups

        return main_groups(args, argv)
    if args.scenario == "selectors":
        from stress.harness.selectors import main_selectors

        return main_selectors(args, argv)
    if args.scenario == "topics":
        from stress.harness.topic_cli import main_topics

        return main_topics(args, argv)
    if args.scenario == "content":
        from stress.harness.content_cli import main_content

        return main_content(args, argv)
    if args.dialect is None:
        args.dialect = "amqp"
    if args.mix is None:
        args.mix = "90/10"
    if args.keys is None:
        args.keys = 1024
    if args.snapshot_every is None:
        args.snapshot_every = 0
    # Import the engine (and so cffi) before looking at the GIL: importing an
    # extension that does not declare free-threading support turns it back on.
    import cstrie.trie  # noqa: F401
    from stress.harness import report, scenario_cli
    from stress.harness.checker import check_history
    from stress.harness.clock import make_clock
    from stress.harness.impls import IMPLS, CstrieImpl, get_impl

    if args.cache < 0:
        print("cstrie stress: --cache must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    cstrie_impl = IMPLS["cstrie"]
    assert isinstance(cstrie_impl, CstrieImpl)
    cstrie_impl.cache_bytes = args.cache
    from stress.harness.progress import Progress
    from stress.harness.runner import measure, record
    from stress.harness.workload import Mix, build_keyspace, generate_ops

    try:
        mix = Mix.parse(args.mix)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.snapshot_every < 0:
        print("error: --snapshot-every must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    if args.many_every < 0:
        print("error: --many-every must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    if not (args.measure or args.check):
        print("error: nothing to do (--no-measure and --no-check)", file=sys.stderr)
        return EXIT_USAGE
    counts = args.thread_counts or list(range(1, (args.threads or os.cpu_count() or 2) + 1))
    seed = scenario_cli.seed(args)
    duration = None if args.ops is not None else (args.duration or 2.0)
    ops_per_seq = args.ops if args.ops is not None else RING
    period = math.lcm(args.snapshot_every or 1, args.many_every or 1)
    if period > 1 and args.ops is None:
        ops_per_seq = -(-RING // period) * period
    crowd = args.many_subs if args.many_every else 0
    progress = Progress(args.progress if args.progress is not None else sys.stderr.isatty())

    clock = None
    if args.check:
        try:
            clock = make_clock(args.clock)
        except ImportError as exc:
            print(f"error: --clock atomics: {exc}", file=sys.stderr)
            return EXIT_USAGE
        atexit.register(clock.close)  # before module teardown, whatever happens

    env = report.print_banner(argv, seed)
    length_text = f"{duration:g} s per run" if duration is not None else f"{args.ops:,} ops/thread"
    print(
        f"workload: dialect {args.dialect}, mix {mix} lookup/update, snapshot every "
        f"{args.snapshot_every or 'never'}, keys {args.keys}, thread counts {counts}, "
        f"{length_text}{'' if args.gc else ', gc off'}"
    )
    if crowd:
        print(
            f"lookup_many: every {args.many_every} ops, {crowd} crowd subscribers on "
            "crowd patterns (rows larger than one engine call)"
        )
    if clock is not None:
        print(f"clock: {clock.note}")
    if report.gil_wrongly_on(env):
        if clock is not None:
            clock.close()
        return EXIT_USAGE
    if not env["free_threaded_build"]:
        print(
            "note: not a free-threaded build: threads take turns on the GIL (cffi releases "
            "it around engine calls only)"
        )

    impls = ["cstrie"] + (["locked", "pytrie"] if args.baselines else [])
    check_impls = ["cstrie"] + (["locked", "pytrie"] if args.check_baselines else [])
    keyspaces: dict[int, Any] = {}
    seqs_cache: dict[tuple[int, bool], Any] = {}

    def workload(n: int, trie_lookups: bool) -> tuple[Any, Any]:
        if n not in keyspaces:
            keyspaces[n] = build_keyspace(args.dialect, args.keys, n, seed, crowd=crowd)
        key = (n, trie_lookups)
        if key not in seqs_cache:
            seqs_cache[key] = [
                generate_ops(
                    keyspaces[n],
                    t,
                    ops_per_seq,
                    mix,
                    args.snapshot_every,
                    seed,
                    trie_lookups=trie_lookups,
                    many_every=args.many_every,
                )
                for t in range(n)
            ]
        return keyspaces[n], seqs_cache[key]

    data: dict[str, Any] = {
        "command": env["command"],
        "seed": seed,
        "gil_enabled": env["gil_enabled"],
        "environment": env,
        "config": {
            "dialect": args.dialect,
            "mix": str(mix),
            "snapshot_every": args.snapshot_every,
            "many_every": args.many_every,
            "many_subs": crowd,
            "cache": args.cache,
            "subscribers": args.subscribers,
            "keys": args.keys,
            "thread_counts": counts,
            "duration": duration,
            "ops_per_thread": args.ops,
            "repeat": args.repeat,
            "implementations": impls,
        },
    }
    failed = False
    t_start = time.perf_counter()
    if not args.gc:
        gc.disable()
    data["config"]["gc"] = args.gc

    # ------------------------------------------------------------ measure
    if args.measure:
        print("\n== throughput (no recording) ==")
        results = []
        for rep in range(args.repeat):
            for n in counts:
                ks, seqs = workload(n, False)
                for name in impls:
                    impl = get_impl(name)
                    label = f"[{rep + 1}/{args.repeat}] {impl.label}"
                    res = measure(
                        impl,
                        ks,
                        seqs,
                        args.dialect,
                        duration,
                        progress,
                        f"{name} x{n}",
                        args.timeout,
                        args.subscribers,
                    )
                    results.append(res)
                    print(report.format_measure(res, label), flush=True)
        best = report.best_results(results)
        ratios = report.ratios(best)
        cpu_ratios = report.ratios(best, per_cpu=True)
        print("\n  best of each (ops/s):")
        for n in counts:
            row = "   ".join(
                f"{name} {best[(name, n)].ops_per_s:>11,.0f}" for name in impls if (name, n) in best
            )
            print(f"    {n:>2} threads: {row}")
        for name, rs in ratios.items():
            text = ", ".join(f"{k}: {v:.2f}x" for k, v in rs.items())
            eff = ", ".join(f"{k}: {v:.2f}" for k, v in cpu_ratios.get(name, {}).items())
            print(f"  scaling {name:<7} {text}   (ops per CPU-second, n/1: {eff})")
        short = [r for r in best.values() if r.threads > 1 and r.cpu_per_wall < 0.8 * r.threads]
        if short and env["cpus"] and any(r.threads <= env["cpus"] for r in short):
            print(
                "  note: some multi-thread runs got less than 80% of a core per thread "
                "(cpu/wall): a lock makes threads wait, or the machine was busy "
                f"(load average now {[round(x, 2) for x in os.getloadavg()]}); wall-clock "
                "ratios then understate scaling, the ops/CPU-second ratio does not"
            )
        vs = {}
        for n in counts:
            c = best.get(("cstrie", n))
            for base in ("pytrie", "locked"):
                b = best.get((base, n))
                if c and b and b.ops_per_s > 0:
                    vs.setdefault(base, {})[str(n)] = round(c.ops_per_s / b.ops_per_s, 2)
        for base, rs in vs.items():
            text = ", ".join(f"{k} thr: {v:.2f}x" for k, v in rs.items())
            print(f"  cstrie vs {base:<7} {text}")
        data["throughput"] = [r.to_dict() for r in results]
        data["best"] = [r.to_dict() for r in best.values()]
        data["ratios"] = ratios
        data["cpu_efficiency_ratios"] = cpu_ratios
        data["cstrie_vs_baselines"] = vs
        if args.min_ratio is not None:
            got = ratios.get("cstrie", {}).get("2/1")
            ok = got is not None and got >= args.min_ratio
            data["min_ratio"] = {"required": args.min_ratio, "measured": got, "ok": ok}
            print(
                f"  cstrie 2/1 ratio {got} {'>=' if ok else 'is below'} --min-ratio "
                f"{args.min_ratio}: {'ok' if ok else 'FAIL'}"
            )
            failed |= not ok
        if args.plot:
            title = (
                f"cstrie stress: {args.dialect}, mix {mix}, keys {args.keys}, "
                f"snapshot every {args.snapshot_every or '-'}; python {env['python']}"
                f"{' free-threaded' if env['free_threaded_build'] else ''}, "
                f"GIL {'on' if env['gil_enabled'] else 'off'}"
            )
            err = report.plot(args.plot, best, title)
            print(f"  plot: {err}" if err else f"  plot written to {args.plot}")

    # -------------------------------------------------------------- check
    if args.check:
        assert clock is not None
        print("\n== recorded runs, checked ==")
        checks = []
        for n in counts:
            ks, seqs = workload(n, True)
            for name in check_impls:
                impl = get_impl(name)
                history, wall = record(
                    impl,
                    ks,
                    seqs,
                    args.dialect,
                    duration,
                    clock,
                    progress,
                    f"record {name} x{n}",
                    args.timeout,
                )
                rate = history.n_ops / wall if wall > 0 else 0.0
                print(
                    f"  recorded {impl.label}, {n} thread(s): {history.n_ops:,} ops in "
                    f"{wall:.1f} s ({rate:,.0f} ops/s while recording)",
                    flush=True,
                )
                rep_ = check_history(history, progress.step)
                progress.clear()
                for line in report.format_check(rep_, f"checked {name} x{n}"):
                    print(line)
                entry = {
                    "impl": name,
                    "threads": n,
                    "ops": history.n_ops,
                    "record_seconds": round(wall, 3),
                    "clock": clock.kind,
                }
                entry.update(rep_.to_dict())
                checks.append(entry)
                failed |= not rep_.ok
                del history
        data["checks"] = checks
        data["clock"] = {"kind": clock.kind, "note": clock.note}
        data["violations"] = sum(c["violations"] for c in checks)
        clock.close()

    return report.finish(data, env, failed, t_start, seed, args.json)
