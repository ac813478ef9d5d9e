"""``cstrie bench``: the benchmark suite.

Every result is a ratio against a baseline measured in the same run (the machine
is shared and noisy): medians over repetitions, interleaved where two things are
compared.  Scenarios live one per module in :mod:`cstrie_lab.bench.scenarios` and
register in its ``REGISTRY``; timing helpers are in :mod:`cstrie_lab.bench.timing`,
workloads in :mod:`cstrie_lab.bench.workloads`, matchers in
:mod:`cstrie_lab.bench.matchers`.  See ``docs/benchmarks.md``.

Exit status: 0 done (and every floor passed, with ``--check-floors``), 1 a floor
failed (with ``--check-floors``) or a scenario could not measure, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from cstrie_lab.bench import scenarios as registry
from cstrie_lab.bench.base import BenchError, Context, Floor, MissingDependency, Result, Scenario
from cstrie_lab.bench.format import parse_size
from cstrie_lab.bench.machine import describe
from cstrie_lab.bench.progress import Progress
from cstrie_lab.bench.report import floors_table, markdown, plot_all, print_result, write_json

__all__ = ["add_parser", "build_parser", "main", "run"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_SEED = 20240601


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help=f"run this scenario (repeatable; default: all). One of: {', '.join(registry.names())}"
        "; or 'suite' for the four suite-* scenarios (cstrie beside the classic "
        "matchers: ops, throughput, threads, scale)",
    )
    p.add_argument(
        "--quick", action="store_true", help="small sizes and few repetitions (CI smoke, < 60 s)"
    )
    p.add_argument("--json", metavar="PATH", type=Path, help="write all results as JSON here")
    p.add_argument(
        "--plots", metavar="DIR", type=Path, help="write PNG plots here (needs matplotlib)"
    )
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"workload seed (default {DEFAULT_SEED})"
    )
    p.add_argument(
        "--check-floors", action="store_true", help="exit with status 1 if a floor is not met"
    )
    p.add_argument(
        "--sizes",
        action="append",
        metavar="[NAME=]N,N,...",
        help="override sizes (1000, 10k, 1M ...): for every selected scenario, or for NAME "
        "only; repeatable. Meaning per scenario: lookup-vs-paho filters, vs-dict random "
        "filters,IoT pairs,write pairs (10k,20k,50k), scale trie sizes "
        "(smallest is the baseline), fan subscribers, memory subscriptions, million filters[,"
        "distinct skewed topics] (1M,100k), churn cycles; "
        "suite-ops hot subscriptions, suite-throughput messages, suite-threads milliseconds "
        "per run (e.g. 500), suite-scale subscription counts; route filters; reverse topic-index "
        "sizes (multiples of 100; smallest is the baseline, the scans run at 100k or the "
        "largest)",
    )
    p.add_argument("--repeat", type=int, metavar="N", help="override the number of repetitions")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``bench`` subcommand on the ``cstrie`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="run the benchmark suite",
        description="Benchmarks of cstrie against paho-mqtt, PyTrie and a hand-written "
        "dict-per-level trie; scale, fan-out, "
        "memory and churn. Every figure is a ratio measured within one run.",
    )
    _configure(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser (``python -m cstrie_lab.bench``)."""
    p = argparse.ArgumentParser(prog="cstrie bench", description="cstrie benchmark suite")
    _configure(p)
    return p


def _select(names: list[str] | None) -> list[str]:
    known = registry.names()
    if not names:
        return known
    chosen: list[str] = []
    for n in names:
        if n == "all":
            chosen.extend(k for k in known if k not in chosen)
        elif n in registry.GROUPS:
            chosen.extend(k for k in registry.GROUPS[n] if k not in chosen)
        elif n not in known:
            raise ValueError(f"unknown scenario {n!r} (known: {', '.join(known)})")
        elif n not in chosen:
            chosen.append(n)
    return chosen


def _sizes(specs: list[str] | None, selected: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for spec in specs or []:
        name, eq, values = spec.rpartition("=")
        targets = [name] if eq else selected
        if eq and name not in registry.names():
            raise ValueError(f"--sizes: unknown scenario {name!r}")
        parsed = [parse_size(v) for v in values.split(",") if v.strip()]
        if not parsed:
            raise ValueError(f"--sizes: no sizes in {spec!r}")
        for t in targets:
            out[t] = parsed
    return out


def _usage(message: str) -> int:
    print(f"cstrie bench: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    """Run the selected scenarios; print tables; write JSON/plots; exit status."""
    if args.list:
        for name in registry.names():
            print(f"{name:16} {registry.get(name).summary}")
        for group, members in registry.GROUPS.items():
            print(f"{group:16} = {', '.join(members)}")
        return EXIT_OK
    try:
        selected = _select(args.scenario)
        sizes = _sizes(args.sizes, selected)
    except ValueError as exc:
        return _usage(str(exc))
    if args.repeat is not None and args.repeat < 1:
        return _usage("--repeat must be at least 1")
    if args.plots is not None and args.plots.exists() and not args.plots.is_dir():
        return _usage(f"--plots {args.plots} is not a directory")

    progress = Progress(enabled=not args.quiet)
    machine = describe()
    started = time.time()
    print(f"# cstrie bench  (seed {args.seed}{', quick' if args.quick else ''})")
    print(
        f"machine: {machine['nproc']} CPUs, {machine['cpu_model']}; Python {machine['python']}"
        f"{' free-threaded' if machine['free_threaded_build'] else ''}"
        f", GIL {'on' if machine['gil_enabled'] else 'off'}; "
        f"load {', '.join(f'{x:.2f}' for x in machine['loadavg_at_start'])}"
    )
    eng = machine["engine"]
    if eng:
        dirty = eng.get("git_dirty")
        sha, head = eng.get("native_sha256", "?"), eng.get("git_head", "?")
        print(
            f"engine: _native sha256 {sha}, git {head}"
            + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")
        )
    load = machine["loadavg_at_start"]
    if load and load[0] > machine["nproc"]:
        print(
            f"warning: the machine is busy (load {load[0]:.1f} on {machine['nproc']} CPUs): "
            "expect wide IQRs; ratios are measured within this run"
        )
    sys.stdout.flush()

    done: list[tuple[Scenario, Result]] = []
    failed_to_measure = False
    for name in selected:
        scenario = registry.get(name)
        ctx = Context(
            seed=args.seed,
            quick=args.quick,
            sizes=sizes.get(name),
            repeat=args.repeat,
            progress=progress,
            plots=args.plots,
        )
        t0 = time.perf_counter()
        try:
            res = scenario.run(ctx)
        except MissingDependency as exc:
            res = Result(name, error=f"skipped: {exc}")
            failed_to_measure = failed_to_measure or args.check_floors
        except BenchError as exc:
            res = Result(name, error=str(exc))
            failed_to_measure = True
        except ValueError as exc:
            return _usage(f"{name}: {exc}")
        res.seconds = time.perf_counter() - t0
        if res.error and not res.error.startswith("skipped"):
            failed_to_measure = True
        print_result(res)
        done.append((scenario, res))

    floors: list[tuple[str, Floor]] = [(r.name, f) for _, r in done for f in r.floors]
    if floors:
        print(markdown(floors_table(floors)))
    all_passed = all(f.passed for _, f in floors)
    doc = {
        "schema": 1,
        "tool": "cstrie bench",
        "argv": sys.argv[1:],
        "options": {
            "scenarios": selected,
            "quick": args.quick,
            "seed": args.seed,
            "sizes": sizes,
            "repeat": args.repeat,
            "check_floors": args.check_floors,
        },
        "machine": machine,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": time.time() - started,
        "scenarios": {r.name: r.to_dict() for _, r in done},
        "floors": [dict(f.to_dict(), scenario=s) for s, f in floors],
        "all_floors_passed": all_passed,
    }
    if args.json is not None:
        write_json(args.json, doc)
        print(f"\nJSON written to {args.json}")
    if args.plots is not None:
        for path in plot_all(done, args.plots):
            print(f"plot: {path}")
    print(f"seed {args.seed}; {doc['seconds']:.0f}s")
    if failed_to_measure:
        return EXIT_FAILED
    if args.check_floors and not all_passed:
        return EXIT_FAILED
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (ValueError, TypeError, OSError) as exc:
        return _usage(str(exc))
    except KeyboardInterrupt:
        return 130
