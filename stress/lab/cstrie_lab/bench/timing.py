"""Timing helpers: every number the suite reports is a median over repetitions.

The machine the suite runs on is shared and noisy, so the helpers follow three
rules:

* time a *batch* of operations with :func:`time.perf_counter_ns` and divide; a
  batch is kept short (a fraction of a millisecond, far below a scheduler time
  slice) so that on a busy machine most batches run uninterrupted: a preempted
  batch is an outlier the median ignores, a preempted long batch would not be;
* run warm-up batches first (caches, dict resizes, lazily created per-thread state)
  and then ``repeat`` timed batches, and summarise them by the median and the
  inter-quartile range (IQR), never the mean;
* when two things are compared, interleave their repetitions round-robin
  (:func:`interleave`), rotating the order each round, so a slow stretch of the
  machine hits both sides alike; the comparison is a ratio of medians.

The cyclic garbage collector is paused inside timed batches (as :mod:`timeit`
does) and run between them, so a collection triggered by one side is not billed to
the other.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Stats",
    "calibrated_batch",
    "chunks",
    "full_passes",
    "gc_paused",
    "interleave",
    "measure",
    "paired_ratio",
    "rotating",
    "summarize",
    "time_batch",
]


@dataclass(frozen=True)
class Stats:
    """A summary of repeated samples (for timings: nanoseconds per operation)."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int
    samples: tuple[float, ...] = field(default=(), repr=False)

    @property
    def iqr(self) -> float:
        """Inter-quartile range: q3 - q1."""
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float:
        """IQR relative to the median (0.05 = the middle half spreads 5%)."""
        return self.iqr / self.median if self.median else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "q1": self.q1,
            "q3": self.q3,
            "iqr": self.iqr,
            "min": self.min,
            "max": self.max,
            "n": self.n,
            "samples": list(self.samples),
        }


def summarize(samples: Sequence[float]) -> Stats:
    """Median, quartiles (inclusive method), min and max of ``samples``."""
    if not samples:
        raise ValueError("summarize() needs at least one sample")
    xs = sorted(float(x) for x in samples)
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Stats(
        median=statistics.median(xs),
        q1=q1,
        q3=q3,
        min=xs[0],
        max=xs[-1],
        n=len(xs),
        samples=tuple(float(x) for x in samples),
    )


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC for a timed section (restored afterwards)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def full_passes(
    cases: Mapping[str, Callable[[], object]], ops: int, rounds: int
) -> dict[str, dict[str, Any]]:
    """Time whole passes: each case runs once per round (it performs ``ops``
    operations), the cases taking turns in rotating order, the GC paused;
    round 0 warms up.  Per case, ns per operation: ``samples`` (every round),
    their ``best`` and their ``median``."""
    names = list(cases)
    samples: dict[str, list[float]] = {n: [] for n in names}
    clock = time.perf_counter_ns
    with gc_paused():
        for r in range(rounds + 1):
            k = r % len(names)
            for n in names[k:] + names[:k]:
                t0 = clock()
                cases[n]()
                if r:
                    samples[n].append((clock() - t0) / ops)
    return {
        n: {"best": min(v), "median": statistics.median(v), "samples": v}
        for n, v in samples.items()
    }


def time_batch(fn: Callable[[], object], ops: int) -> float:
    """Run ``fn`` once (it performs ``ops`` operations); nanoseconds per operation."""
    with gc_paused():
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
    return (t1 - t0) / max(ops, 1)


def measure(
    fn: Callable[[], object],
    ops: int,
    *,
    repeat: int,
    warmup: int = 1,
    tick: Callable[[], None] | None = None,
) -> Stats:
    """``warmup`` untimed then ``repeat`` timed runs of ``fn``; ns/op statistics."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        gc.collect(0)
        samples.append(time_batch(fn, ops))
        if tick is not None:
            tick()
    return summarize(samples)


def interleave(
    cases: Mapping[str, Callable[[], object]],
    ops: int | Mapping[str, int],
    *,
    repeat: int,
    warmup: int = 1,
    tick: Callable[[], None] | None = None,
) -> dict[str, Stats]:
    """Time several cases round-robin: ``repeat`` rounds, one batch of each per round.

    The order inside a round rotates, so no case always runs first (or right after
    the same neighbour).  ``ops`` is the number of operations one call of a case
    performs (one number for all, or one per case).  Returns ns/op per case.
    """
    names = list(cases)
    count = {n: (ops if isinstance(ops, int) else ops[n]) for n in names}
    for _ in range(warmup):
        for n in names:
            cases[n]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeat):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            gc.collect(0)
            samples[n].append(time_batch(cases[n], count[n]))
        if tick is not None:
            tick()
    return {n: summarize(s) for n, s in samples.items()}


def chunks(items: Sequence[Any], size: int) -> list[list[Any]]:
    """``items`` cut into consecutive lists of ``size`` (the last may be shorter)."""
    return [list(items[i : i + size]) for i in range(0, len(items), max(size, 1))]


def rotating(batches: Sequence[Callable[[], object]]) -> Callable[[], object]:
    """A callable that runs the next of ``batches`` on each call, cyclically.

    Short batches are less likely to be cut by the scheduler on a busy machine;
    rotating through several of them still covers the whole workload.
    """
    state = {"i": 0}

    def run() -> object:
        i = state["i"]
        state["i"] = (i + 1) % len(batches)
        return batches[i]()

    return run


def paired_ratio(num: Stats, den: Stats) -> Stats:
    """Per-round ratios num[i] / den[i] of two interleaved measurements.

    Its median is a robust ratio; its IQR says how stable the comparison was.
    """
    pairs = [a / b for a, b in zip(num.samples, den.samples, strict=False) if b > 0]
    return summarize(pairs or [float("nan")])


def calibrated_batch(
    run_round: Callable[[int], float], round_seconds: float, min_batch: int, max_batch: int
) -> int:
    """A batch size whose round takes about ``round_seconds``, for end-to-end
    rounds (a broker's publish and delivery).  ``run_round(size)`` runs one
    round of ``size`` items and returns its rate (items per second).  One
    untimed warm-up round of ``min_batch`` (caches, lazily compiled state),
    then batches doubling from ``min_batch`` until one takes a tenth of
    ``round_seconds``; the result is clamped to [min_batch, max_batch]."""
    run_round(min_batch)
    size = min_batch
    while True:
        rate = run_round(size)
        if size / rate >= round_seconds / 10 or size >= max_batch:
            return max(min_batch, min(max_batch, int(rate * round_seconds)))
        size *= 2
