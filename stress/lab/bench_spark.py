"""Benchmark: the Spark pipeline against its two baselines, in one Spark session.

The floors (issue "PySpark pipeline"), with 1,000,000 messages and 1,000 patterns
on ``local[2]``:

* the native ``mapInArrow`` pipeline (:class:`cstrie.spark.SparkMatcher`) at least
  3x faster than the *same* pipeline matching with the pure-Python
  :class:`cstrie_lab.pytrie.PyTrie` (``engine=PyMatcher``);
* at least 200x faster than a cross join of the messages with the subscriptions
  filtered by ``rlike`` (one regex per pattern, :mod:`cstrie_lab.spark`).
  That baseline takes minutes on the full set, so it runs on subsets of
  ``--rlike-messages`` messages and its time is extrapolated linearly to the
  full count from the largest subset (it is a nested loop: time grows with
  messages x patterns).  A least-squares line through the subsets is printed
  too (it subtracts the job's fixed cost, but on this machine it under-predicted
  real full runs by 17-25%, the linear extrapolation by at most 14%);
  ``--full-rlike`` also runs the baseline on every message, to check.

Every run is a full job ending in Spark's ``noop`` sink, so every output row is
produced and nothing is written.  Wall-clock seconds (the work happens in the
JVM and Python worker processes, not this one); the machine is shared and noisy,
so only ratios from one run mean anything: each round times the native and the
Python pipeline back to back and the medians are reported.  Before timing, one
small job per engine starts the Python workers and builds their matchers (a
long job pays that once per worker too; it is reported separately).

The subset is also matched by all three pipelines with ``count()``: the match
counts must agree, or the run fails.

Usage::

    python stress/lab/bench_spark.py                          # 1,000,000 x 1,000
    python stress/lab/bench_spark.py --messages 200000 --repeat 3 --check-floors
    python stress/lab/bench_spark.py --json out.json --master 'local[2]'

Exit status: 0 done (and floors met with --check-floors), 1 a floor missed or
the pipelines disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from typing import Any

FLOOR_PYTHON = 3.0
FLOOR_RLIKE = 200.0

# Topics look like "<region>.<service>.<entity>.<event>": 4 levels.
LEVELS = [
    [f"r{i}" for i in range(8)],
    [f"svc{i}" for i in range(25)],
    [f"e{i}" for i in range(200)],
    ["created", "updated", "deleted", "read", "failed"],
]


def make_patterns(n: int, seed: int, workload: str = "typical") -> list[tuple[str, str]]:
    """``n`` distinct AMQP patterns over the topic vocabulary, each with one of n/5
    subscribers.

    ``typical``: each level is ``*`` with probability 0.10; then 25% of the
    patterns keep their first 3 words and end in ``#`` (``r1.svc3.e7.#``), 2%
    start with ``#`` and keep the last 2-3 words (``#.e7.failed``), 1% have ``#``
    in the middle.  A message matches about 1.4 patterns on average; 83% match
    at least one.

    ``wild``: every word is ``#`` with probability 0.03 and ``*`` with 0.12,
    anywhere (many patterns with ``#`` before other words: the costliest case
    for every trie, since ``#`` may consume any number of words).
    """
    rng = random.Random(seed)
    out: dict[str, str] = {}
    while len(out) < n:
        if workload == "wild":
            words = []
            for level in LEVELS:
                roll = rng.random()
                words.append("#" if roll < 0.03 else "*" if roll < 0.15 else rng.choice(level))
            if words[-1] == "#" and words[-2] == "#":
                continue
        else:
            words = [("*" if rng.random() < 0.10 else rng.choice(level)) for level in LEVELS]
            roll = rng.random()
            if roll < 0.25:
                words = [*words[:3], "#"]
            elif roll < 0.27:
                words = ["#", *words[rng.randint(1, 2) :]]
            elif roll < 0.28:
                k = rng.randint(1, len(words) - 2)
                words = [*words[:k], "#", *words[k + 1 :]]
        out.setdefault(".".join(words), f"team-{rng.randrange(max(1, n // 5))}")
    return sorted(out.items())


def write_messages(path: str, n: int, seed: int, files: int = 16) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    cols = [np.array(level, dtype=object)[rng.integers(0, len(level), n)] for level in LEVELS]
    topics = [".".join(ws) for ws in zip(*cols, strict=True)]
    ids = np.arange(n, dtype=np.int64)
    os.makedirs(path, exist_ok=True)
    step = -(-n // files)
    for k, start in enumerate(range(0, n, step)):
        table = pa.table({"id": ids[start : start + step], "topic": topics[start : start + step]})
        pq.write_table(table, os.path.join(path, f"part-{k:03d}.parquet"))


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (fixed seconds, seconds per message) through the points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else my / mx
    return my - slope * mx, slope


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--patterns", type=int, default=1000)
    ap.add_argument("--workload", choices=("typical", "wild"), default="typical")
    ap.add_argument(
        "--rlike-messages",
        default="5000,20000",
        help="subset sizes for the rlike baseline, comma-separated (default 5000,20000)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="rounds of native + python")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=8, help="message files (and partitions)")
    ap.add_argument(
        "--batch-rows",
        type=int,
        default=10_000,
        help="spark.sql.execution.arrow.maxRecordsPerBatch (Spark's default)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--check-floors", action="store_true")
    ap.add_argument(
        "--full-rlike",
        action="store_true",
        help="also run the rlike baseline on all messages (minutes)",
    )
    args = ap.parse_args(argv)
    subsets = sorted(int(x) for x in args.rlike_messages.split(","))

    from cstrie import Trie
    from cstrie.spark import SparkMatcher
    from cstrie_lab.spark import PyMatcher, lab_session, rlike_match, with_regex

    spark = lab_session(
        args.master,
        "cstrie bench_spark",
        **{
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.files.openCostInBytes": str(1 << 30),  # one partition per file
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(args.batch_rows),
        },
    )
    results: dict[str, Any] = {
        "messages": args.messages,
        "patterns": args.patterns,
        "workload": args.workload,
        "rlike_subsets": subsets,
        "master": args.master,
        "batch_rows": args.batch_rows,
        "command": " ".join(["python", "stress/lab/bench_spark.py", *(argv or sys.argv[1:])]),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "spark": spark.version,
            "load_avg_start": os.getloadavg(),
        },
    }
    ok = True
    with tempfile.TemporaryDirectory(prefix="cstrie-bench-spark-") as tmp:
        pairs = make_patterns(args.patterns, args.seed, args.workload)
        trie = Trie.from_pairs(pairs)
        write_messages(os.path.join(tmp, "all"), args.messages, args.seed, args.partitions)
        msgs = spark.read.parquet(os.path.join(tmp, "all"))
        subs_df = with_regex(spark.createDataFrame(pairs, "pattern string, subscriber string"))
        subs_df = spark.createDataFrame(subs_df.toArrow())  # regexes computed once, local data
        parts = []
        for k, size in enumerate(subsets):
            path = os.path.join(tmp, f"sub{size}")
            write_messages(path, size, args.seed + 1 + k, files=2)
            parts.append(spark.read.parquet(path))
        native = SparkMatcher(trie, spark)
        python = SparkMatcher(trie, spark, engine=PyMatcher)
        results["partitions"] = msgs.rdd.getNumPartitions()

        # Warm-up: start the Python workers and build each engine's matcher in them.
        for name, m in (("native", native), ("python", python)):
            results[f"warmup_{name}_s"] = timed(lambda m=m: noop(m.match(parts[0])))
        counts = {
            "native": native.match(parts[0]).count(),
            "python": python.match(parts[0]).count(),
            "rlike": rlike_match(parts[0], subs_df).count(),
        }
        results["subset_matches"] = counts
        if len(set(counts.values())) != 1:
            print(f"the pipelines disagree on the subset: {counts}", file=sys.stderr)
            ok = False
        summary = native.summary(msgs)
        results["matches"] = summary["matches"]
        results["matched_messages"] = summary["matched"]

        t_native: list[float] = []
        t_python: list[float] = []
        for r in range(args.repeat):
            t_native.append(timed(lambda: noop(native.match(msgs))))
            t_python.append(timed(lambda: noop(python.match(msgs))))
            print(
                f"round {r + 1}: native {t_native[-1]:.2f} s, python {t_python[-1]:.2f} s",
                file=sys.stderr,
            )
        t_rlike = [
            (size, timed(lambda df=df: noop(rlike_match(df, subs_df))))
            for size, df in zip(subsets, parts, strict=True)
        ]
        t_native_sub = timed(lambda: noop(native.match(parts[-1])))
        if args.full_rlike:
            results["rlike_full_s"] = timed(lambda: noop(rlike_match(msgs, subs_df)))
            results["native_after_full_s"] = timed(lambda: noop(native.match(msgs)))
        results["load_avg_end"] = os.getloadavg()
    spark.stop()

    native_s = statistics.median(t_native)
    python_s = statistics.median(t_python)
    big, t_big = t_rlike[-1]
    linear_s = t_big * args.messages / big
    fixed, per_msg = fit(t_rlike)
    fitted_s = fixed + per_msg * args.messages
    results.update(
        native_s=native_s,
        python_s=python_s,
        native_rounds=t_native,
        python_rounds=t_python,
        rlike_subset_s=t_rlike,
        rlike_fit_fixed_s=fixed,
        rlike_fit_per_message_s=per_msg,
        rlike_linear_s=linear_s,
        rlike_fitted_s=fitted_s,
        native_subset_s=t_native_sub,
        native_msgs_per_s=args.messages / native_s,
        native_matches_per_s=summary["matches"] / native_s,
        python_msgs_per_s=args.messages / python_s,
        speedup_vs_python=python_s / native_s,
        speedup_vs_rlike_linear=linear_s / native_s,
        speedup_vs_rlike_fitted=fitted_s / native_s,
        speedup_vs_rlike_same_subset=t_big / t_native_sub,
    )
    speedup_rlike = results["speedup_vs_rlike_linear"]
    print(
        f"{args.messages:,} messages x {args.patterns:,} patterns ({args.workload}) on "
        f"{args.master}, {results['partitions']} partitions: {results['matches']:,} matches"
    )
    print(f"  native mapInArrow   {native_s:8.2f} s  {results['native_msgs_per_s']:>10,.0f} msg/s")
    print(
        f"  PyTrie mapInArrow   {python_s:8.2f} s  {results['python_msgs_per_s']:>10,.0f} msg/s"
        f"  native {results['speedup_vs_python']:.1f}x faster (floor {FLOOR_PYTHON:.0f}x)"
    )
    print(
        f"  crossJoin + rlike   {linear_s:8.0f} s  (linear from {big:,} messages: {t_big:.2f} s)"
        f"  native {speedup_rlike:.0f}x faster (floor {FLOOR_RLIKE:.0f}x)"
    )
    print(
        f"      least-squares line through the subsets: {fixed:.2f} s + {per_msg * 1e3:.3f} ms"
        f"/message = {fitted_s:.0f} s, native {results['speedup_vs_rlike_fitted']:.0f}x faster"
    )
    if "rlike_full_s" in results:
        full = results["rlike_full_s"]
        print(
            f"      full run: {full:.0f} s, native {full / native_s:.0f}x faster "
            f"(native again right after: {results['native_after_full_s']:.2f} s)"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    if args.check_floors:
        if results["speedup_vs_python"] < FLOOR_PYTHON:
            print("FLOOR MISSED: native vs PyTrie", file=sys.stderr)
            ok = False
        if speedup_rlike < FLOOR_RLIKE:
            print("FLOOR MISSED: native vs rlike", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
