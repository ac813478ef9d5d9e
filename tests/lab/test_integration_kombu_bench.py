"""The ``kombu`` benchmark scenario: its workload is what its docstring says, and it
runs end to end.  No assertion on any time or ratio (floors are checked by
``cstrie bench --check-floors``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("kombu")

import kombu_helpers as kh

from cstrie_lab.bench import main
from cstrie_lab.bench.scenarios import kombu as scenario


def test_workload_keys_are_distinct_and_each_message_matches_one_binding() -> None:
    pairs = scenario.binding_keys(2000)
    assert len(set(pairs)) == 2000
    assert len({q for _, q in pairs}) == scenario.QUEUES
    keys = [k for k, _ in pairs]
    for topic in scenario.routing_keys(random.Random(1), 2000, 40):
        for rules in ("amqp", "kombu5.7", "kombu5.3"):
            assert sum(kh.model_match(k, topic, rules) for k in keys) == 1, (topic, rules)


def test_scenario_runs_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    argv = ["--scenario", "kombu", "--sizes", "100,300", "--repeat", "1", "-q", "--quick"]
    assert main([*argv, "--json", str(out), "--seed", "7"]) == 0
    res = json.loads(out.read_text())["scenarios"]["kombu"]
    assert res["error"] is None
    assert [row[0] for row in res["tables"][0]["rows"]] == ["100", "300"]
    assert [f["name"] for f in res["floors"]] == ["kombu-100"]
    assert res["floors"][0]["standard"] is False  # --quick: indicative only
    for n in ("100", "300"):
        assert res["data"][n]["stock"] and res["data"][n]["cstrie"]
