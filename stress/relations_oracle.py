"""Filter relations against the independent oracle, at scale.

    python stress/relations_oracle.py [--count 100000] [--seed N] [--jobs 2]
                                      [--dialects amqp,mqtt,...] [--max-len 5]

For every dialect of ``tests/support/relation_oracle.py``'s ``FUZZ_DIALECTS`` (or those
named), ``--count`` random pattern pairs (``random_pair``: independent, or one
a widened/narrowed mutation of the other) are checked twice each:
``is_subset(a, b)`` against the oracle's counterexample search and
``intersects(a, b)`` against its witness search.  ``--count`` is pairs, so a
dialect gets 2 x count relation checks.  The work is split into ``--jobs``
processes by chunks, each with its own ``random.Random(f"{seed}/{dialect}/{chunk}")``,
so a run is reproducible from (seed, count, max-len) whatever the job count.

Prints one line per dialect (checks, mismatches, how many answers were True,
the longest counterexample and witness the oracle needed, seconds) and every
mismatch with the pair and the oracle's topic; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

import relation_oracle as ro  # noqa: E402

from cstrie.relations import intersects, is_subset  # noqa: E402

CHUNK = 5000


@dataclass
class Tally:
    """What one chunk (or, summed, one dialect) found."""

    checks: int = 0
    subset: int = 0  # pairs where is_subset was True
    meet: int = 0  # pairs where intersects was True
    long_counter: int = 0  # words in the longest counterexample the oracle found
    long_witness: int = 0
    cpu: float = 0.0
    bad: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.checks += other.checks
        self.subset += other.subset
        self.meet += other.meet
        self.long_counter = max(self.long_counter, other.long_counter)
        self.long_witness = max(self.long_witness, other.long_witness)
        self.cpu += other.cpu
        self.bad += other.bad


def _chunk(job: tuple[str, int, int, int, int]) -> tuple[str, Tally]:
    name, seed, index, count, max_len = job
    d = ro.FUZZ_DIALECTS[name]
    rng = random.Random(f"{seed}/{name}/{index}")
    t = Tally()
    started = time.process_time()
    for _ in range(count):
        a, b = ro.random_pair(rng, d, max_len)
        counter = ro.search(d, a, b, want_b=False)
        witness = ro.search(d, a, b, want_b=True)
        sub, meet = is_subset(d, a, b), intersects(d, a, b)
        if sub is not (counter is None):
            t.bad.append(
                f"{name}: is_subset({a!r}, {b!r}) = {sub}; oracle counterexample {counter}"
            )
        if meet is not (witness is not None):
            t.bad.append(f"{name}: intersects({a!r}, {b!r}) = {meet}; oracle witness {witness}")
        t.checks += 2
        t.subset += sub
        t.meet += meet
        t.long_counter = max(t.long_counter, len(counter or ()))
        t.long_witness = max(t.long_witness, len(witness or ()))
    t.cpu = time.process_time() - started
    return name, t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="pairs per dialect")
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--dialects", default=",".join(ro.FUZZ_DIALECTS))
    parser.add_argument("--max-len", type=int, default=5, help="words per random pattern")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    names = [n for n in args.dialects.split(",") if n]
    unknown = [n for n in names if n not in ro.FUZZ_DIALECTS]
    if unknown:
        parser.error(f"unknown dialects {unknown}; known: {sorted(ro.FUZZ_DIALECTS)}")
    print(
        f"seed {seed}, {args.count:,} pairs per dialect, max {args.max_len} words, "
        f"{args.jobs} job(s)",
        flush=True,
    )
    jobs = [
        (name, seed, i, min(CHUNK, args.count - i * CHUNK), args.max_len)
        for name in names
        for i in range((args.count + CHUNK - 1) // CHUNK)
    ]
    totals = {name: Tally() for name in names}
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, part in pool.map(_chunk, jobs):
            t = totals[name]
            t.add(part)
            if t.checks == 2 * args.count:
                pairs = args.count
                print(
                    f"{name:9} {t.checks:>9,} checks  {len(t.bad)} mismatches  "
                    f"subset true {t.subset:,}/{pairs:,}  intersects true {t.meet:,}/{pairs:,}  "
                    f"longest counterexample {t.long_counter} / witness {t.long_witness} "
                    f"words  {t.cpu:.0f} cpu-s",
                    flush=True,
                )
    mismatches = [line for t in totals.values() for line in t.bad]
    for line in mismatches[:50]:
        print("MISMATCH", line)
    total = sum(t.checks for t in totals.values())
    print(
        f"total {total:,} checks, {len(mismatches)} mismatches (seed {seed}), "
        f"{time.perf_counter() - started:.0f} s"
    )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
