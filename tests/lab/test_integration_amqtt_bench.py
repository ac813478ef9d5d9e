"""The ``amqtt`` benchmark scenario: its workload is what its docstring says, and it
runs end to end with real clients.  No assertion on any time or ratio (floors are
checked by ``cstrie bench --check-floors``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("amqtt")
pytest.importorskip("paho.mqtt")

from cstrie.dialect import MQTT
from cstrie_lab.bench import main
from cstrie_lab.bench.scenarios import amqtt as scenario


def test_filters_are_distinct_nine_in_ten_literal() -> None:
    fs = scenario.filters(2000)
    assert len(set(fs)) == 2000
    wild = [f for f in fs if "+" in f.split("/") or "#" in f.split("/")]
    assert len(wild) == 200
    for f in fs:
        MQTT.split_pattern(f)  # valid MQTT filters


def test_each_message_matches_exactly_one_filter_held_by_its_owner() -> None:
    """Checked with an independent matcher (paho's), on every filter."""
    from paho.mqtt.client import topic_matches_sub

    fs = scenario.filters(600)
    for i in random.Random(3).sample(range(600), 120):
        topic = scenario.topic_for(i)
        hits = [k for k, f in enumerate(fs) if topic_matches_sub(f, topic)]
        assert hits == [i], (topic, hits)
        assert scenario.owner(i) == (i // scenario.PER_DEVICE) % scenario.CLIENTS


def test_scenario_runs_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    argv = ["--scenario", "amqtt", "--sizes", "100,300", "--repeat", "1", "-q", "--quick"]
    assert main([*argv, "--json", str(out), "--seed", "7"]) == 0
    res = json.loads(out.read_text())["scenarios"]["amqtt"]
    assert res["error"] is None
    rows = res["tables"][0]["rows"]
    assert [row[0] for row in rows] == ["100", "300"]
    for n in ("100", "300"):
        for v in ("stock", "cstrie"):
            assert len(res["data"][n]["rates"][v]) == 1
    names = [f["name"] for f in res["floors"]]
    # 50,000 filters not run: no routing floor
    assert names == ["amqtt-retained-lookup", "amqtt-one-client-cost"]
    assert all(f["standard"] is False for f in res["floors"])
    # (C), --quick: a reader and the worst attack, on each broker
    amp = res["data"]["amplification"]
    assert sorted(amp) == sorted(scenario.AMP_QUICK)
    for attack in amp.values():
        assert sorted(attack) == sorted(scenario.AMP_VARIANTS)
    worst = amp["2,000 share groups + 191 overlapping filters"]
    assert worst["stock"]["granted"] == 2191 and worst["cstrie-unbounded"]["granted"] == 2191
    # 100 subscriptions, the end-of-round marker's among them; 10 shares among them
    assert worst["cstrie"]["granted"] == 99
    assert worst["stock"]["copies"] == 191  # one per matching ordinary filter
    assert worst["cstrie"]["copies"] == worst["cstrie-unbounded"]["copies"] == 1


def test_the_attacks_ask_for_what_their_names_say() -> None:
    """The 191 filters are distinct, valid, and each matches the topic
    (paho's matcher); so is every other filter an attack asks for."""
    from paho.mqtt.client import topic_matches_sub

    overlap = scenario.overlapping_filters(scenario.AMP_TOPIC)
    assert len(overlap) == len(set(overlap)) == 191
    for f in overlap:
        MQTT.split_pattern(f)
        assert topic_matches_sub(f, scenario.AMP_TOPIC), f
    shares = scenario.attack_filters("shares", 500)
    assert len(set(shares)) == 500
    assert all(topic_matches_sub(f.split("/", 2)[2], scenario.AMP_TOPIC) for f in shares)
    both = scenario.attack_filters("both", 10)
    assert both == shares[:10] + overlap
    assert scenario.attack_filters("none", 5) == []
    assert [
        topic_matches_sub(f, scenario.AMP_TOPIC) for f in scenario.attack_filters("reader", 0)
    ] == [True]
