"""The ``cstrie bench`` command itself: options, exit codes, JSON shape.

Tiny sizes only, and no assertion on any time or ratio (the machine is shared and
noisy; floors are checked by ``cstrie bench --check-floors``, not by tests).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cstrie_lab.bench import main
from cstrie_lab.bench.base import Floor
from cstrie_lab.bench.format import fmt_size, parse_size
from cstrie_lab.bench.timing import interleave, paired_ratio, summarize
from cstrie_lab.bench.workloads import (
    broker_pairs,
    matching_topics,
    random_mqtt_filters,
    scale_pairs,
    scale_topics,
)

TINY = {
    "lookup-vs-paho": "300",
    "scale": "500,2000",
    "fan": "2000",
    "memory": "2000",
    "million": "2000",
    "churn": "3000",
    "route": "1000",
    "content": "200,2000",
}


def test_summarize_median_and_quartiles() -> None:
    s = summarize([5, 1, 3, 2, 4])
    assert (s.median, s.q1, s.q3, s.min, s.max, s.n) == (3, 2, 4, 1, 5, 5)
    assert s.iqr == 2
    assert summarize([7]).iqr == 0
    with pytest.raises(ValueError):
        summarize([])


def test_interleave_and_paired_ratio_shapes() -> None:
    calls: list[str] = []
    stats = interleave(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        1,
        repeat=4,
        warmup=1,
    )
    assert calls.count("a") == calls.count("b") == 5
    assert calls[2:4] == ["a", "b"] and calls[4:6] == ["b", "a"]  # order rotates
    assert stats["a"].n == 4
    assert paired_ratio(stats["a"], stats["b"]).n == 4


@pytest.mark.parametrize(
    ("text", "value"), [("1000", 1000), ("10k", 10_000), ("1M", 1_000_000), ("2.5k", 2500)]
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "x", "0", "-5", "1.5"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_fmt_size() -> None:
    assert [fmt_size(n) for n in (999, 1000, 100_000, 1_000_000, 1234)] == [
        "999",
        "1k",
        "100k",
        "1M",
        "1234",
    ]


def test_floor_verdicts() -> None:
    assert Floor("a", "", measured=1.9, limit=2.0).passed
    assert not Floor("a", "", measured=2.1, limit=2.0).passed
    assert Floor("a", "", measured=12, limit=10, kind="min").passed
    assert not Floor("a", "", measured=math.nan, limit=10, kind="min").passed


def test_workloads_are_seeded_and_well_formed() -> None:
    import random

    a = random_mqtt_filters(random.Random(3), 500)
    assert a == random_mqtt_filters(random.Random(3), 500)
    assert len(set(a)) == 500
    assert all(3 <= f.count("/") + 1 <= 6 for f in a)
    assert all("#" not in f[:-1] for f in a)
    topics = matching_topics(random.Random(4), a, 50)
    assert all("+" not in t and "#" not in t for t in topics)
    assert len(scale_pairs(1234)) == 1234
    t = scale_topics(random.Random(5), 1234, 20)
    assert len({len(x) for x in t}) == 1  # same shape, same length
    assert len(broker_pairs(10)) == 40


def test_list_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    assert "lookup-vs-paho" in capsys.readouterr().out
    assert main(["--scenario", "nope"]) == 2
    assert main(["--sizes", "ten"]) == 2
    assert main(["--sizes", "nope=10"]) == 2
    assert main(["--repeat", "0"]) == 2
    assert main(["--scenario", "scale", "--sizes", "1000"]) == 2  # needs two sizes


@pytest.mark.parametrize("scenario", list(TINY))
def test_scenario_runs_and_writes_json(scenario: str, tmp_path: Path) -> None:
    if scenario in ("lookup-vs-paho", "million"):
        pytest.importorskip("paho.mqtt.matcher")
    out = tmp_path / "r.json"
    code = main(
        [
            "--scenario",
            scenario,
            "--sizes",
            TINY[scenario],
            "--repeat",
            "2",
            "-q",
            "--quick",
            "--json",
            str(out),
            "--seed",
            "7",
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["options"]["seed"] == 7
    assert doc["machine"]["nproc"] >= 1
    res = doc["scenarios"][scenario]
    assert res["error"] is None
    assert res["tables"] and res["tables"][0]["rows"]
    assert res["floors"], "every scenario checks at least one floor"
    for f in res["floors"]:
        assert f["standard"] is False  # tiny sizes are never the floor sizes
        assert isinstance(f["passed"], bool)
