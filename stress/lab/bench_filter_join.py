"""Time ``cstrie.spark.engine.run_join`` (the worker side of ``filter_join``)
on one Arrow batch, outside Spark: the whole call, and apart from it the
index build (one ``put`` per distinct topic) and one ``count`` per filter.

Topics: random 4-word AMQP topics over ``bench_spark.LEVELS``; filters:
``bench_spark.make_patterns`` (the ``typical`` mix).  The table in
docs/spark.md ("Which filters match which stored topics") comes from
``python stress/lab/bench_filter_join.py``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import LEVELS, make_patterns

from cstrie.dialect import AMQP
from cstrie.spark import engine
from cstrie.spark.payload import digest
from cstrie.topics import TopicIndex


def topics(rng: np.random.Generator, n: int) -> list[str]:
    cols = [np.array(level, dtype=object)[rng.integers(0, len(level), n)] for level in LEVELS]
    return [".".join(words) for words in zip(*cols, strict=True)]


def main() -> None:
    rng = np.random.default_rng(1)
    for nfil in (100, 1000, 10000):
        pats = [p for p, _ in make_patterns(nfil, 7)]
        raw = engine.FilterSet.to_bytes(pa.table({"filter": pats}))
        schema = pa.schema([("filter", pa.string()), ("topic", pa.string())])
        plan = engine.JoinPlan(digest(raw), AMQP, schema)
        for n in (10_000, 100_000):
            col = pa.array(topics(rng, n))
            batch = pa.record_batch([col], names=["topic"])
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                rows = sum(b.num_rows for b in engine.run_join(raw, plan, iter([batch])))
                runs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            idx = TopicIndex("amqp")
            for k, t in enumerate(set(col.to_pylist())):
                idx.put(t, k)
            build = time.perf_counter() - t0
            t0 = time.perf_counter()
            for p in pats:
                idx.count(p)
            counts = time.perf_counter() - t0
            print(
                f"filters={nfil:6d} topics={n:7d} pairs={rows:8d} "
                f"run_join={min(runs) * 1e3:8.1f} ms  build={build * 1e3:6.1f} ms  "
                f"counts={counts * 1e3:7.1f} ms ({counts / nfil * 1e6:.1f} us each)"
            )


if __name__ == "__main__":
    main()
