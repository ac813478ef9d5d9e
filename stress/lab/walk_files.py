"""Write the lookup workloads of ``cstrie bench`` as files for stress/walk_engine.c.

One pattern or topic a line, MQTT, into ``--out`` (default ``walk-files/``),
drawn from the same seeded generators as the scenarios (``--seed``, the
bench's default), so the files hold the very filters and topics they time:

* ``random10k.filters`` / ``.topics``: 10,000 random 5-level filters and 20,000
  uniformly random topics (the ``vs-dict`` workload);
* ``digits.filters`` / ``.topics``: the article's 1,000 three-digit filters and
  50,000 topics (``vs-dict``);
* ``iot50k.pairs``: the 50,000 IoT write pairs of ``vs-dict``, one
  ``pattern<TAB>subscriber`` a line, client ``clientK`` written as ``K + 1``
  (for stress/write_engine.c);
* ``random1m.filters`` / ``.topics`` (with ``--million``): 1,000,000 random
  filters and 20,000 uniform topics (the ``million`` workload).

Then, per build (``make -C stress walk``)::

    stress/bin/walk_engine walk-files/random10k.filters walk-files/random10k.topics
    stress/bin/write_engine walk-files/iot50k.pairs      # make -C stress write
    valgrind --tool=callgrind stress/bin/walk_engine ... --passes 3   # instructions
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from cstrie_lab.bench import DEFAULT_SEED
from cstrie_lab.bench.workloads import (
    digits_mqtt,
    iot_pairs,
    random5_mqtt_filters,
    random5_uniform_topics,
)


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("walk-files"))
    ap.add_argument("--million", action="store_true", help="also the 1M-filter workload")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)

    def rng(name: str) -> random.Random:  # as the bench's Context.rng
        return random.Random(f"{a.seed}:{name}")

    _write(a.out / "random10k.filters", random5_mqtt_filters(rng("vs-dict:random"), 10_000))
    _write(a.out / "random10k.topics", random5_uniform_topics(rng("vs-dict:random-topics"), 20_000))
    pairs, topics = digits_mqtt(rng("vs-dict:digits"), 50_000)
    _write(a.out / "digits.filters", [p for p, _ in pairs])
    _write(a.out / "digits.topics", topics)
    writes = iot_pairs(rng("vs-dict:writes"), 50_000)
    _write(a.out / "iot50k.pairs", [f"{p}\t{int(c.removeprefix('client')) + 1}" for p, c in writes])
    if a.million:
        _write(a.out / "random1m.filters", random5_mqtt_filters(rng("million:filters"), 1_000_000))
        _write(a.out / "random1m.topics", random5_uniform_topics(rng("million:topics"), 20_000))
    print(f"wrote the workloads into {a.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
