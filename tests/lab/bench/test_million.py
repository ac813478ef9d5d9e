"""Smoke tests of ``cstrie bench --scenario million`` (1M random filters vs paho
under uniform and Zipf-skewed traffic, lookup_many, memory) and of its Zipf
sampler.

Tiny sizes; no assertion on any time or ratio (the machine is shared and noisy):
they check the report's shape, that answers are compared before timing (the
cached trie's too), that the floors (the result cache's included) are reported,
and that the sampler follows the Zipf distribution and is deterministic under a
seed.
"""

from __future__ import annotations

import importlib.util
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cstrie.trie import Trie
from cstrie_lab.bench import main
from cstrie_lab.bench import matchers as mk
from cstrie_lab.bench.scenarios import million
from cstrie_lab.bench.workloads import (
    random5_mqtt_filters,
    random5_zipf_topics,
    zipf_cumulative,
    zipf_sample,
    zipf_share,
)
from cstrie_lab.classic import DictTrie

pytest.importorskip("paho.mqtt.matcher")

FLOORS = {
    "million-uniform-paho": 10.0,
    "million-lookup-many": 1.5,
    "million-memory": 200.0,
    "million-skewed-paho-cache": 25.0,
    "million-hot-cached-lookup": 150.0,
    "million-uniform-cache-cost": 1.05,
}


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "r.json"
    code = main(
        ["--scenario", "million", "-q", "--seed", "7", "--repeat", "2", "--json", str(out), *extra]
    )
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_tiny_run_reports_tables_floors_and_checked_answers(tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    code, doc = _run(tmp_path, "--quick", "--sizes", "million=2000,3000", "--plots", str(plots))
    assert code == 0  # floors failing is not an error without --check-floors
    res = doc["scenarios"]["million"]
    assert res["error"] is None
    p = res["params"]
    assert (p["filters"], p["zipf_distinct"], p["zipf_s"], p["many_batch"]) == (
        2000,
        3000,
        1.1,
        256,
    )
    assert p["result_cache_budget"] == million.CACHE_BUDGET and p["pass_topics"] == 5000

    floors = {f["name"]: f for f in res["floors"]}
    assert {n: f["limit"] for n, f in floors.items()} == FLOORS
    for f in floors.values():
        assert isinstance(f["passed"], bool) and f["standard"] is False
    for name in ("million-memory", "million-hot-cached-lookup", "million-uniform-cache-cost"):
        assert floors[name]["kind"] == "max"
    for name in ("million-uniform-paho", "million-lookup-many", "million-skewed-paho-cache"):
        assert floors[name]["kind"] == "min"

    lookups, cache, memory, ftable = res["tables"]
    assert [r[0] for r in lookups["rows"]] == [
        "uniform random words",
        "Zipf s=1.1 over 3k matching topics",
    ]
    assert {
        "paho",
        "cstrie",
        "cstrie, cache on",
        "paho / cstrie",
        "lookup / lookup_many",
        "paho / cstrie cache on",
    } <= set(lookups["columns"])
    assert [r[0] for r in cache["rows"]][:2] == ["uniform (a fresh topic list per pass)", "Zipf"]
    # one subscriber per filter, then the floor's shape (5,000 subscribers)
    assert [r[:2] for r in memory["rows"]] == [
        ["cstrie", "2k"],
        ["paho", "2k"],
        ["cstrie", "5,000"],
        ["paho", "5,000"],
    ]
    verdicts = {r[0]: r[-1] for r in ftable["rows"]}
    assert set(verdicts) == set(FLOORS)

    data = res["data"]
    assert data["answers_checked"] == (
        data["uniform"]["checked"]["topics"] + data["skewed"]["checked"]["topics"]
    )
    assert data["uniform"]["checked"]["topics"] == 500
    assert data["skewed"]["checked"]["topics"] >= 500  # the top ranks and a sample
    assert data["skewed"]["checked"]["mean_matches"] >= 1  # skewed topics all match
    # the skewed stream repeats topics: the cache serves most of it
    assert data["skewed"]["cache_stats"]["hits"] > data["skewed"]["cache_stats"]["misses"]
    assert data["hot_lookup_ns"]["on"] > 0 and data["hot_lookup_ns"]["off"] > 0
    cases = {"paho", "cstrie", "cstrie-many", "cstrie-cache"}
    for key, extra in (("uniform", {"cstrie-fresh"}), ("skewed", set())):
        d = data[key]
        assert set(d["pass_ns_per_lookup"]) == cases | extra
        assert all(len(v["samples"]) == 2 for v in d["pass_ns_per_lookup"].values())
        assert d["topics"] == 5000 and d["paho_over_cstrie"] > 0 and d["lookup_over_many"] > 0
    assert data["uniform"]["distinct"] > data["skewed"]["distinct"]  # skew repeats topics
    assert data["skewed"]["rank1_share_expected"] == pytest.approx(zipf_share(3000, 1.1))
    for impl in ("cstrie", "paho"):
        assert data["memory"][impl]["subscriptions"] == 2000
        assert data["memory_shared"][impl]["subscriptions"] == 2000
    assert data["memory"]["cstrie"]["engine_bytes_per_subscription"] > 0
    floor_mem = floors["million-memory"]["measured"]
    assert floor_mem == data["memory_shared"]["cstrie"]["bytes_per_subscription"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert (plots / "million.png").stat().st_size > 0


def test_sizes_are_checked() -> None:
    assert main(["--scenario", "million", "--sizes", "million=1,2,3", "-q"]) == 2


def test_disagreement_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mk.PahoMatcher, "lookup", lambda self, topic: [])
    code, doc = _run(tmp_path, "--quick", "--sizes", "million=1000,1000")
    assert code == 1
    assert "disagree" in doc["scenarios"]["million"]["error"]


def test_check_answers_compares_lookup_many() -> None:
    paho = mk.make("paho", "mqtt")
    trie = Trie("mqtt")
    for i, f in enumerate(("a/+", "a/#", "b/c")):
        paho.add(f, i)
        trie.subscribe(f, i)
    assert million.check_answers(paho, trie, ["a/x", "b/c", "z"]) == {
        "topics": 3,
        "mean_matches": 1.0,
    }

    class Wrong:
        lookup = trie.lookup

        def lookup_many(self, topics: list[str]) -> list[list[Any]]:
            return [[] for _ in topics]

    with pytest.raises(million.BenchError, match="disagree"):
        million.check_answers(paho, Wrong(), ["a/x"])


def test_zipf_sampler_follows_the_distribution() -> None:
    n, s, draws = 1000, 1.1, 100_000
    counts = Counter(zipf_sample(random.Random(11), list(range(n)), draws, s))
    h = sum(k**-s for k in range(1, n + 1))
    assert zipf_share(n, s) == pytest.approx(1 / h)
    assert zipf_cumulative(n, s)[-1] == pytest.approx(h)
    # rank 1's share within ~5 standard errors (sd ~0.0012 at 100k draws)
    assert counts[0] / draws == pytest.approx(1 / h, abs=0.006)
    # rank k against rank 1: k ** -s
    for rank in (2, 3, 5):
        assert counts[rank - 1] / counts[0] == pytest.approx(rank**-s, rel=0.06)
    assert set(counts) <= set(range(n)) and len(counts) > n // 2  # the tail is drawn too


def test_zipf_sampler_is_deterministic_under_a_seed() -> None:
    items = [f"t{i}" for i in range(500)]
    a = zipf_sample(random.Random(3), items, 2000, 1.1)
    assert a == zipf_sample(random.Random(3), items, 2000, 1.1)
    assert a != zipf_sample(random.Random(4), items, 2000, 1.1)
    assert zipf_sample(random.Random(3), ["only"], 5, 1.1) == ["only"] * 5
    with pytest.raises(ValueError):
        zipf_cumulative(0, 1.1)


def test_zipf_topics_match_their_filters() -> None:
    filters = random5_mqtt_filters(random.Random(1), 500)
    ranked, stream = random5_zipf_topics(random.Random(2), filters, 2000, 4000, 1.1)
    assert len(ranked) == len(set(ranked)) == 2000 and len(stream) == 4000
    assert set(stream) <= set(ranked)
    assert Counter(stream).most_common(1)[0][0] == ranked[0]
    assert (ranked, stream) == random5_zipf_topics(random.Random(2), filters, 2000, 4000, 1.1)
    t = DictTrie("mqtt")
    for i, f in enumerate(filters):
        t.subscribe(f, i)
    assert all(t.lookup(x) for x in ranked)  # every skewed topic matches a filter
    with pytest.raises(ValueError, match="distinct"):
        random5_zipf_topics(random.Random(2), ["a/b/c/d/e"], 2, 10, 1.1)
