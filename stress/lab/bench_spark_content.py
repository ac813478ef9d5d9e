"""Benchmark: content matching of a message log in Spark, against a
per-binding evaluation in the same Spark session.

Workload: the ``content`` scenario's (``cstrie_lab.bench.scenarios.content``):
headers-exchange bindings of 1-4 header conditions (80% ``x-match: all``),
messages of 5 headers, values drawn from ``--values`` (default 5,000).  The
log is a DataFrame ``(id long, headers map<string,string>)`` of ``--messages``
rows in ``--partitions`` partitions, cached before timing.

Compared, per size (``--sizes``, default 1,000 and 10,000 bindings), both
through ``mapInArrow`` on the same log, both answering one row per
(message, queue), each job ending in Spark's ``noop`` sink:

- ``index``: :meth:`cstrie.spark.SparkContentMatcher.match` with
  ``bindings=False`` on the :class:`~cstrie.content.rabbitmq.HeadersExchange`;
- ``plain``: a Python function that tests every binding against every row
  (RabbitMQ's ``match_all``/``match_any``, the content scenario's
  ``plain_router``), the bindings shipped in the function.

Both must produce the same number of rows.  Rounds alternate index and plain
(``--repeat``); reported: the median seconds of each, rows/s, and the ratio
plain / index of the medians.

    python stress/lab/bench_spark_content.py
    python stress/lab/bench_spark_content.py --messages 20000 --sizes 1000,10000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any


class PlainRouter:
    """The picklable ``mapInArrow`` function of the baseline: every binding
    tested against every row (built once per task from the bindings)."""

    def __init__(self, bindings: list[tuple[str, dict[str, Any]]]) -> None:
        self.bindings = bindings

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from cstrie_lab.bench.scenarios.content import plain_router

        route = plain_router(self.bindings)
        for batch in batches:
            ids = batch.column(0).to_pylist()
            rows: list[int] = []
            queues: list[str] = []
            for i, h in zip(ids, batch.column(1).to_pylist(), strict=True):
                if h is None:
                    continue
                for q in route({k: v for k, v in h if v is not None}):
                    rows.append(i)
                    queues.append(q)
            yield pa.RecordBatch.from_arrays(
                [pa.array(rows, pa.int64()), pa.array(queues, pa.string())],
                names=["id", "subscriber"],
            )


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--sizes", default="1000,10000", help="bindings, comma-separated")
    ap.add_argument("--values", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]

    from cstrie.content.rabbitmq import HeadersExchange
    from cstrie.spark import SparkContentMatcher
    from cstrie_lab.bench.scenarios.content import workload
    from cstrie_lab.spark import lab_session

    spark = lab_session(args.master, "cstrie bench_spark_content")
    results: dict[str, Any] = {
        "command": " ".join(
            ["python", "stress/lab/bench_spark_content.py", *(argv or sys.argv[1:])]
        ),
        "messages": args.messages,
        "values": args.values,
        "master": args.master,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "spark": spark.version,
            "load_avg_start": os.getloadavg(),
        },
        "sizes": {},
    }
    schema = "id long, headers map<string,string>"
    out_schema = "id long, subscriber string"
    for n in sizes:
        rng = random.Random(args.seed)
        bindings, msgs = workload(rng, n, args.values, args.messages)
        x = HeadersExchange()
        for q, a in bindings:
            x.bind(q, a)
        log = spark.createDataFrame(list(enumerate(msgs)), schema).repartition(args.partitions)
        log = log.cache()
        log.count()
        t0 = time.perf_counter()
        cm = SparkContentMatcher(x, spark)
        setup = time.perf_counter() - t0

        def index(cm: Any = cm, log: Any = log) -> Any:
            return cm.match(log, "headers", bindings=False)

        def plain(log: Any = log, bindings: Any = bindings) -> Any:
            return log.mapInArrow(PlainRouter(bindings), out_schema)

        rows = {"index": index().count(), "plain": plain().count()}  # also warms the workers
        if rows["index"] != rows["plain"]:
            print(f"MISMATCH at {n} bindings: {rows}", file=sys.stderr)
            return 1
        times: dict[str, list[float]] = {"index": [], "plain": []}
        for _ in range(args.repeat):
            for name, job in (("index", index), ("plain", plain)):
                times[name].append(
                    timed(lambda job=job: job().write.format("noop").mode("overwrite").save())
                )
        med = {k: statistics.median(v) for k, v in times.items()}
        entry = {
            "bindings": n,
            "payload_bytes": len(cm.raw),
            "driver_setup_s": round(setup, 3),
            "rows": rows["index"],
            "seconds": {k: [round(t, 3) for t in v] for k, v in times.items()},
            "messages_per_s": {k: round(args.messages / v) for k, v in med.items()},
            "ratio_plain_over_index": round(med["plain"] / med["index"], 2),
        }
        results["sizes"][str(n)] = entry
        print(json.dumps(entry), flush=True)
        cm.destroy()
        log.unpersist()
    results["machine"]["load_avg_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
