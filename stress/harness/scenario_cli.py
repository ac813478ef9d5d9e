"""What the checked scenarios' command lines share (``topics``, ``content``,
``groups``, ``selectors``, and the seed of every scenario): the workload
options read with a scenario's own defaults, the thread counts and the seed,
and the start of a run (progress display, clock, banner, the GIL check).

Each returns None after printing the usage error, so a scenario's ``main``
returns :data:`EXIT_USAGE` at once.
"""

from __future__ import annotations

import argparse
import atexit
import random
import sys
from dataclasses import dataclass
from typing import Any

from stress.harness.workload import Mix

__all__ = [
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATION",
    "Run",
    "Workload",
    "seed",
    "start",
    "thread_counts",
    "workload",
]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2  # as report.finish returns them


def _usage(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


@dataclass(frozen=True)
class Workload:
    """The shared workload options of one run."""

    dialect: str
    keys: int
    snapshot_every: int
    ops: int
    mix: Mix


def workload(args: argparse.Namespace, defaults: dict[str, Any], scenario: str) -> Workload | None:
    """``--dialect``, ``--keys``, ``--snapshot-every``, ``--ops`` and ``--mix``
    with ``defaults`` for those not given; a checked run of ``--ops``
    operations per thread (no ``--duration``, no ``--no-check``)."""
    try:
        mix = Mix.parse(args.mix or defaults["mix"])
    except ValueError as exc:
        _usage(str(exc))
        return None
    snapshot_every = (
        defaults["snapshot_every"] if args.snapshot_every is None else args.snapshot_every
    )
    if args.duration is not None:
        _usage(f"the {scenario} scenario runs --ops operations per thread, not --duration")
        return None
    if snapshot_every < 0:
        _usage("--snapshot-every must be >= 0")
        return None
    if not args.check:
        _usage(f"the {scenario} scenario is a checked run (drop --no-check)")
        return None
    return Workload(
        dialect=args.dialect or defaults["dialect"],
        keys=args.keys if args.keys is not None else defaults["keys"],
        snapshot_every=snapshot_every,
        ops=args.ops if args.ops is not None else defaults["ops"],
        mix=mix,
    )


def thread_counts(args: argparse.Namespace, default: list[int]) -> list[int]:
    """``--thread-counts``, else ``--threads`` alone, else ``default``."""
    return args.thread_counts or ([args.threads] if args.threads else default)


def seed(args: argparse.Namespace) -> int:
    """``--seed``, else a fresh one (printed by the run, so it can be replayed)."""
    return args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**9)


@dataclass(frozen=True)
class Run:
    """A started run: its progress display, its clock (closed at exit) and
    the environment the banner printed."""

    progress: Any
    clock: Any
    env: dict[str, Any]


def start(args: argparse.Namespace, argv: list[str] | None, seed: int, banner: str) -> Run | None:
    """The progress display, the ``--clock``, then the banner (the command
    line, the seed, ``banner``, the clock); None if the clock cannot be had
    or the GIL is on in a free-threaded build."""
    from stress.harness import report
    from stress.harness.clock import make_clock
    from stress.harness.progress import Progress

    progress = Progress(args.progress if args.progress is not None else sys.stderr.isatty())
    try:
        clock = make_clock(args.clock)
    except ImportError as exc:
        _usage(f"--clock atomics: {exc}")
        return None
    atexit.register(clock.close)
    env = report.print_banner(argv, seed)
    print(banner)
    print(f"clock: {clock.note}")
    if report.gil_wrongly_on(env):
        clock.close()
        return None
    return Run(progress, clock, env)
