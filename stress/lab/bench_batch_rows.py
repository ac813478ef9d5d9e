"""The Spark path's engine call alone, one build at a time: before/after pairs.

``cstrie.spark.engine.NativeMatcher`` (what each Spark worker builds: a bulk
build of the payload, then a read-only snapshot) over ``--filters`` random
5-level MQTT filters (the ``million`` scenario's generator and seed, pair
``i`` for filter ``i``) scans a column of 20,000 uniform topics through
``cst_lookup_batch`` in chunks of 65,536 pairs; prints the best of
``--passes`` in ns per row.  No Spark session: the JVM and the Arrow
transfer are left out.  Run it with each build in turn (swap the built
modules between runs), e.g.::

    python stress/lab/bench_batch_rows.py --filters 1000000
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
import pyarrow as pa

from cstrie.dialect import MQTT
from cstrie.spark import engine
from cstrie.spark.payload import Payload
from cstrie_lab.bench import DEFAULT_SEED
from cstrie_lab.bench.workloads import random5_mqtt_filters, random5_uniform_topics


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filters", type=int, default=1_000_000)
    ap.add_argument("--passes", type=int, default=5)
    a = ap.parse_args(argv)

    def rng(name: str) -> random.Random:  # as the bench's Context.rng
        return random.Random(f"{DEFAULT_SEED}:{name}")

    filters = random5_mqtt_filters(rng("million:filters"), a.filters)
    m = engine.NativeMatcher(Payload.from_pairs([(f, i) for i, f in enumerate(filters)], MQTT))
    col = pa.array(random5_uniform_topics(rng("million:topics"), 20_000), pa.string())
    best, pairs = float("inf"), 0
    for _ in range(a.passes):
        status = np.zeros(len(col), np.int8)
        t0 = time.perf_counter()
        pairs = sum(len(rows) for rows, _ in m.scan(col, status, 65_536))
        best = min(best, time.perf_counter() - t0)
    per_row = best / len(col) * 1e9
    print(f"{a.filters} filters: {per_row:.0f} ns per row, {pairs / len(col):.1f} pairs a row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
