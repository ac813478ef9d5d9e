"""The ``route`` bench scenario's workloads and answer check (share groups).

Tiny sizes; no assertion on any time or ratio (floors are checked by
``cstrie bench --check-floors``).
"""

from __future__ import annotations

import random

import pytest

from cstrie_lab.bench.base import BenchError
from cstrie_lab.bench.scenarios import route


def test_mqtt_workload_shape() -> None:
    w, none, some = route.mqtt_workload(random.Random(5), 1000, 400)
    assert len(w.filters) == 1000 and len(w.members) == 100  # 10% of the filters shared
    assert all(2 <= len(m) <= 10 for m in w.members.values())
    assert len(none) == len(some) == 400
    for t in none:
        assert w.ref.lookup(t) == [] and w.trie.lookup(t)  # ordinary subscribers, no group
    for t in some:
        assert 1 <= len(w.ref.lookup(t)) <= 3 and w.trie.lookup(t)
    assert w.subscriptions == len(w.trie)


def test_nats_workload_shape() -> None:
    w, topics = route.nats_workload(random.Random(5), 1000, 300)
    assert len(w.filters) == 1000 and w.subscriptions == len(w.trie)
    for t in topics:
        groups = w.ref.lookup(t)
        assert 1 <= len(groups) <= 2 and any(g.startswith("q-") for g in groups)
        assert len(w.trie.lookup(t)) >= 3  # two monitors and a tracer at least


def test_check_accepts_right_answers_and_rejects_wrong_ones() -> None:
    w, _, some = route.mqtt_workload(random.Random(5), 1000, 200)
    shape = route._check(w, some)
    assert 1 <= shape["groups_per_topic"] <= 3 and shape["members_per_group"] >= 2
    group = w.ref.lookup(some[0])[0]
    w.members[group] = {-1}  # the trie's members are no longer the expected ones
    with pytest.raises(BenchError, match="wrong answer"):
        route._check(w, some)


def test_round_robin_counts_every_message() -> None:
    rr = route.round_robin(10_000, 2)
    assert rr["messages"] == 10_000 and sum(rr["counts"]) == 10_000
    assert rr["not_one_member"] == 0 and rr["imbalance_percent"] >= 0
