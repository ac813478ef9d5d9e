"""The ``reverse`` bench scenario (the topic index): its workload,
its answer checks, and the report's shape in quick mode.

No assertion on any time or ratio (the machine is shared and noisy; floors are
checked by ``cstrie bench --check-floors``, not by tests).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from cstrie.topics import TopicIndex
from cstrie_lab.bench import main
from cstrie_lab.bench.base import BenchError
from cstrie_lab.bench.scenarios import reverse

paho = pytest.importorskip("paho.mqtt.client")

FLOORS = {"reverse-query-vs-n": ("max", 3.0), "reverse-query-vs-scan": ("min", 100.0)}


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "r.json"
    code = main(["--scenario", "reverse", "-q", "--seed", "7", "--json", str(out), *extra])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_quick_run_report_shape(tmp_path: Path) -> None:
    code, doc = _run(tmp_path, "--quick", "--repeat", "2")
    assert code == 0  # a failing floor is not an error without --check-floors
    res = doc["scenarios"]["reverse"]
    assert res["error"] is None
    assert res["params"]["sizes"] == [1_000, 100_000] and res["params"]["scan_size"] == 100_000
    floors = {f["name"]: f for f in res["floors"]}
    assert {n: (f["kind"], f["limit"]) for n, f in floors.items()} == FLOORS
    for f in floors.values():
        assert isinstance(f["passed"], bool) and f["measured"] > 0
    # --quick stops at 100k: the size floor is indicative; the scan floor is at its size
    assert floors["reverse-query-vs-n"]["standard"] is False
    assert "100k" in floors["reverse-query-vs-n"]["description"]
    assert floors["reverse-query-vs-scan"]["standard"] is True

    sizes, scans, writes = res["tables"]
    assert [r[0] for r in sizes["rows"]] == ["1k", "100k"]
    assert [r[:2] for r in scans["rows"]] == [
        ["site7/+/temp", "10"],
        ["site7/#", "100"],
        ["#", "100,000"],
    ]
    assert len(scans["columns"]) == len(scans["rows"][0])
    assert [r[0] for r in writes["rows"]] == ["put new", "put replace", "remove"]

    data = res["data"]
    assert set(data["sizes"]) == {"1000", "100000"}
    for row in data["sizes"].values():
        assert row["query"]["n"] == 2 and row["count"]["median"] > 0
    assert data["scans"]["#"]["matches"] == 100_000
    for row in data["scans"].values():
        assert set(row["ns"]) == {"query", "count", "regex scan", "paho scan"}
        assert row["regex_over_query"] > 0 and row["paho_over_query"] > 0
    assert set(data["writes"]) == {"put new", "put replace", "remove"}
    assert all(w["index_over_dict"] > 0 for w in data["writes"].values())


def test_other_sizes_are_indicative(tmp_path: Path) -> None:
    code, doc = _run(tmp_path, "--sizes", "reverse=1000,2000", "--repeat", "2")
    assert code == 0
    res = doc["scenarios"]["reverse"]
    assert res["params"]["scan_size"] == 2000  # no 100k: the scans run at the largest
    assert [f["standard"] for f in res["floors"]] == [False, False]
    assert res["data"]["scans"]["#"]["matches"] == 2000


@pytest.mark.parametrize("sizes", ["1000", "1050,2000", "700,2000"])
def test_bad_sizes_are_usage_errors(sizes: str) -> None:
    assert main(["--scenario", "reverse", "-q", "--sizes", sizes]) == 2


def test_workload_matches_exactly_ten_at_every_size() -> None:
    for n in (800, 1000, 20_000):
        idx, d, _ = reverse.build(n)
        assert len(idx) == len(d) == n
        assert sorted(idx.query(reverse.FILTER)) == sorted(
            (t, d[t]) for t in reverse.expected(reverse.FILTER, n)
        )
        assert idx.count(reverse.FILTER) == 10 and idx.count("site7/#") == 100
        assert reverse.check_answers(idx, d, "#") == n


def test_mqtt_regex_agrees_with_paho_and_the_index() -> None:
    filters = ["#", "+", "+/+", "a/#", "a/+", "+/b/#", "a/+/c", "$SYS/#", "+/#", "a//c", "/#"]
    topics = ["a", "a/b", "a/b/c", "a//c", "/", "/a", "$SYS/x", "$SYS", "b/b", "a/", "x/b/q/r"]
    idx = TopicIndex("mqtt")
    for t in topics:
        idx[t] = t
    for f, t in itertools.product(filters, topics):
        want = paho.topic_matches_sub(f, t)
        assert bool(reverse.mqtt_regex(f).fullmatch(t)) == want, (f, t)
    for f in filters:
        assert sorted(t for t, _ in idx.query(f)) == sorted(
            t for t in topics if paho.topic_matches_sub(f, t)
        ), f


def test_check_answers_rejects_a_wrong_index() -> None:
    idx, d, _ = reverse.build(1000)
    idx.put("site7/dev99/temp", -1)  # a topic the dict (and the expected answer) lacks
    with pytest.raises(BenchError, match="query for 'site7/\\+/temp'"):
        reverse.check_answers(idx, d, reverse.FILTER)


def test_writes_leave_index_and_dict_as_they_were() -> None:
    idx, d, _ = reverse.build(1000)
    new, old = reverse.write_topics(1000, random.Random(3))
    assert len({t for b in new for t in b}) == reverse.WRITE_BATCH * reverse.WRITE_BATCHES
    assert all(t in d for b in old for t in b) and not any(t in d for b in new for t in b)
    w = reverse.writes(idx, d, new, old, repeat=3)
    assert set(w) == set(reverse.WRITE_OPS)
    assert all(v["index"].n == v["dict"].n == 3 for v in w.values())
    assert len(idx) == len(d) == 1000 and all(t not in idx for b in new for t in b)
