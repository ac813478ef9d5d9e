"""Smoke tests of ``cstrie bench --scenario vs-dict`` (cstrie vs the dict-per-level
trie and paho: the floors of "Lookups at C speed").

Quick mode and tiny sizes; no assertion on any time or ratio (the machine is shared
and noisy): they check that the scenario runs, reports its four floors and its
tables, writes JSON and a plot, and fails (exit 1) when matchers disagree.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest

from cstrie_lab.bench import main
from cstrie_lab.bench import matchers as mk
from cstrie_lab.bench.workloads import (
    digits_mqtt,
    iot_pairs,
    iot_topics,
    random5_mqtt_filters,
    random5_topics,
)
from cstrie_lab.classic import DictTrie

pytest.importorskip("paho.mqtt.matcher")

FLOORS = {
    "vs-dict-random-paho": 10.0,
    "vs-dict-digits-paho": 10.0,
    "vs-dict-iot-dict": 5.0,
    "vs-dict-writes-dict": 2.0,
}


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "r.json"
    code = main(["--scenario", "vs-dict", "-q", "--seed", "7", "--json", str(out), *extra])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_quick_run_reports_floors_tables_and_plot(tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    code, doc = _run(tmp_path, "--quick", "--plots", str(plots))
    assert code == 0  # floors failing is not an error without --check-floors
    res = doc["scenarios"]["vs-dict"]
    assert res["error"] is None
    floors = {f["name"]: f for f in res["floors"]}
    assert {n: f["limit"] for n, f in floors.items()} == FLOORS
    for f in floors.values():
        assert f["kind"] == "min" and isinstance(f["passed"], bool) and f["measured"] > 0
    # --quick keeps the lookup workloads' sizes; only the writes shrink
    assert [floors[n]["standard"] for n in FLOORS] == [True, True, True, False]
    passes, lookups, writes = res["tables"]
    rows = [
        "10k random 5-level filters, random topics",
        "10k random 5-level filters, topics filled from filters",
        "1k digit filters (article)",
        "20k IoT pairs",
    ]
    for table in (passes, lookups):  # full passes (the floors') and interleaved batches
        assert [r[0] for r in table["rows"]] == rows
        assert {"paho", "dict-trie", "cstrie", "paho / cstrie", "dict-trie / cstrie"} <= set(
            table["columns"]
        )
    assert [r[0] for r in writes["rows"]] == ["cstrie", "dict-trie"]
    data = res["data"]
    for key in ("random", "random-filled", "digits", "iot"):
        assert set(data[key]["ns_per_lookup"]) == {"paho", "dict-trie", "cstrie"}
        assert set(data[key]["pass_ns_per_lookup"]) == {"paho", "dict-trie", "cstrie"}
        assert data[key]["topics"] == 2000
        assert data[key]["pass_topics"] == 5000  # --quick
        assert data[key]["pass_paho_over_cstrie"] > 0
    assert data["iot"]["paho_kind"] == "paho-sets"
    assert data["digits"]["filters"] == 1000
    assert data["writes"]["pairs"] == 10_000
    for name in ("cstrie", "dict-trie"):
        assert data["writes"][name]["total_s"] > 0
    if importlib.util.find_spec("matplotlib") is not None:
        assert (plots / "vs-dict.png").stat().st_size > 0


def test_sizes_override_and_indicative_floors(tmp_path: Path) -> None:
    code, doc = _run(tmp_path, "--sizes", "vs-dict=500,1000,1500", "--repeat", "2")
    assert code == 0
    res = doc["scenarios"]["vs-dict"]
    assert res["params"]["random_filters"] == 500
    assert res["params"]["iot_pairs"] == 1000
    assert res["data"]["writes"]["pairs"] == 1500
    standard = {f["name"]: f["standard"] for f in res["floors"]}
    # the digits workload is fixed by the article: its floor is always standard
    assert standard == {
        "vs-dict-random-paho": False,
        "vs-dict-digits-paho": True,
        "vs-dict-iot-dict": False,
        "vs-dict-writes-dict": False,
    }
    assert main(["--scenario", "vs-dict", "--sizes", "vs-dict=1,2,3,4", "-q"]) == 2


def test_disagreement_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(self: DictTrie, topic: str) -> list[Any]:
        return []

    monkeypatch.setattr(DictTrie, "lookup", wrong)
    code, doc = _run(tmp_path, "--quick")
    assert code == 1
    assert "disagree" in doc["scenarios"]["vs-dict"]["error"]


def test_workloads() -> None:
    filters = random5_mqtt_filters(random.Random(1), 2000)
    assert filters == random5_mqtt_filters(random.Random(1), 2000)
    assert len(set(filters)) == 2000
    assert all(f.count("/") == 4 and "#" not in f[:-1] for f in filters)
    topics = random5_topics(random.Random(2), filters, 300)
    t = DictTrie("mqtt")
    for i, f in enumerate(filters):
        t.subscribe(f, i)
    assert all(t.lookup(x) for x in topics)  # each topic matches the filter it came from
    assert all("+" not in x and "#" not in x and x.count("/") == 4 for x in topics)

    pairs = iot_pairs(random.Random(3), 5000)
    assert len(set(pairs)) == 5000
    wild = [f for f, _ in pairs if "+" in f or "#" in f]
    assert 0.07 < len(wild) / len(pairs) < 0.13  # ~10% wildcard filters
    assert all(len(x.split("/")) == 3 for x in iot_topics(random.Random(4), 100))

    dpairs, dtopics = digits_mqtt(random.Random(5), 400)
    shapes = ["/".join("+" if w == "+" else "d" for w in p.split("/")) for p, _ in dpairs]
    assert [shapes.count(s) for s in ("+/d/d", "d/+/d", "d/d/+", "d/d/d")] == [100, 20, 9, 871]
    assert len(dtopics) == 400 and all(len(x) == 5 for x in dtopics)


@pytest.mark.parametrize("kind", ["dict-trie", "paho-sets"])
def test_bench_matchers_agree_with_cstrie_on_iot(kind: str) -> None:
    pairs = iot_pairs(random.Random(6), 3000)
    ref, other = mk.make("cstrie", "mqtt"), mk.make(kind, "mqtt")
    ref.add_all(pairs)
    other.add_all(pairs)
    for f in ("#", "+/x/y", "$SYS/#"):  # the '$' rule, as the engine applies it
        ref.add(f, f)
        other.add(f, f)
    for topic in [*iot_topics(random.Random(7), 300), "$SYS/x/y", "a/x/y"]:
        got = other.lookup(topic)
        assert len(got) == len(set(got))
        assert sorted(got) == sorted(ref.lookup(topic)), topic
    other.batch(iot_topics(random.Random(8), 10))()
