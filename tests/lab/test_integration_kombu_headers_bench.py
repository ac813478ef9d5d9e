"""The ``kombu-headers`` benchmark scenario: its workload is what its docstring says,
its baseline routes as RabbitMQ does, and it runs end to end.  No assertion on
any time or ratio (floors are checked by ``cstrie bench --check-floors``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("kombu")

from cstrie.content.rabbitmq import HeadersExchange
from cstrie_lab.bench import main
from cstrie_lab.bench.scenarios import kombu_headers as scenario


def test_workload_shape() -> None:
    binds = scenario.bindings(1000)
    assert len({(q, rk) for q, rk, _ in binds}) == 1000
    assert len({q for q, _, _ in binds}) == scenario.QUEUES
    for _, _, args in binds:
        assert args["x-match"] in ("all", "any") and 1 <= len(args) - 1 <= 4
    for h in scenario.messages(random.Random(1), 50):
        assert len(h) == 5 and set(h) <= set(scenario.FIELDS)


def test_plain_match_is_rabbitmqs_rule() -> None:
    # the baseline agrees with the adapter (tests/content/test_content_rabbitmq.py)
    rng = random.Random(5)
    fields, values = ["a", "b", "x-c"], ["s", 1, 1.0, True, None]
    for _ in range(300):
        args = {f: rng.choice(values) for f in rng.sample(fields, rng.randint(0, 3))}
        args["x-match"] = rng.choice(["all", "any", "all-with-x", "any-with-x"])
        headers = {f: rng.choice(values[:-1]) for f in rng.sample(fields, rng.randint(0, 3))}
        x = HeadersExchange()
        x.bind("q", args)
        want = x.route(headers) == ["q"]
        assert scenario.plain_match(args["x-match"], list(args.items()), headers) is want


def test_scenario_runs_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    argv = ["--scenario", "kombu-headers", "--sizes", "100,300", "--repeat", "1", "-q", "--quick"]
    assert main([*argv, "--json", str(out), "--seed", "7"]) == 0
    res = json.loads(out.read_text())["scenarios"]["kombu-headers"]
    assert res["error"] is None
    assert [row[0] for row in res["tables"][0]["rows"]] == ["100", "300"]
    assert [f["name"] for f in res["floors"]] == ["kombu-headers-100"]
    for n in ("100", "300"):
        assert res["data"][n]["per-binding"] and res["data"][n]["indexed"]
