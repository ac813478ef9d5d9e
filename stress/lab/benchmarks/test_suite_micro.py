"""Micro benchmarks (pytest-benchmark) of workload (a) of the classic-matchers suite, per matcher.

subscribe, unsubscribe and lookup, cold (an empty matcher; lookups on one holding
only ``foo.*.baz.qux.quux``) and hot (1,000 random 5-word subscriptions plus
``foo.*.baz.qux.quux``), for cstrie and every classic matcher of
:mod:`cstrie_lab.classic` -- the workload of ``cstrie bench --scenario suite-ops``
(:func:`cstrie_lab.bench.workloads.ops_workload`; paho on its exact MQTT translation).

Run them with ``pytest stress/lab/benchmarks/test_suite_micro.py -p no:xdist`` (add
``--benchmark-json`` to keep the numbers, ``-k lookup`` for a subset).  Under
pytest-xdist pytest-benchmark switches itself off and each body runs once, as a
plain test.  Nothing here asserts a time: the assertions check the answers (the
same as cstrie's) and the return values.

A subscribe is timed on a pair the matcher does not hold (the setup removes the
previous one, untimed), an unsubscribe on a pair it holds (the setup adds it), so
the matcher stays at its size whatever the number of rounds.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from cstrie_lab.bench import suite
from cstrie_lab.bench.workloads import OpsWorkload, ops_workload

pytest.importorskip("pytest_benchmark")

STATES = ("cold", "hot")
ROUNDS = 300


@pytest.fixture(scope="module")
def workload() -> OpsWorkload:
    return ops_workload(random.Random(20240601))


def _build(kind: str, state: str, w: OpsWorkload, lookups: bool) -> suite.Entry:
    try:
        e = suite.new_entry(kind, w.topic_space)
    except suite.Skipped as exc:
        pytest.skip(str(exc))
    pairs = list(w.hot) if state == "hot" else []
    if state == "hot" or lookups:
        pairs.append(w.subject)
    e.build(e.pairs(pairs))
    return e


@pytest.fixture(scope="module")
def expected(workload: OpsWorkload) -> dict[str, dict[str, list[Any]]]:
    """cstrie's answers to the lookup topics, cold and hot."""
    out = {}
    for state in STATES:
        e = _build("cstrie", state, workload, lookups=True)
        out[state] = {t: sorted(e.matcher.lookup(t)) for t in set(workload.lookups)}
    return out


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", suite.KINDS)
def test_subscribe(benchmark: Any, kind: str, state: str, workload: OpsWorkload) -> None:
    e = _build(kind, state, workload, lookups=False)
    sub, unsub, _ = e.matcher.ops()
    size = e.size()
    pairs = itertools.cycle(e.pairs(workload.writes))
    last: list[tuple[str, Any]] = []

    def setup() -> tuple[tuple[str, Any], dict[str, Any]]:
        if last:
            unsub(*last.pop())
        p = next(pairs)
        last.append(p)
        return p, {}

    assert benchmark.pedantic(sub, setup=setup, rounds=ROUNDS) is True
    assert e.size() == size + 1


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", suite.KINDS)
def test_unsubscribe(benchmark: Any, kind: str, state: str, workload: OpsWorkload) -> None:
    e = _build(kind, state, workload, lookups=False)
    sub, unsub, _ = e.matcher.ops()
    size = e.size()
    pairs = itertools.cycle(e.pairs(workload.writes))

    def setup() -> tuple[tuple[str, Any], dict[str, Any]]:
        p = next(pairs)
        sub(*p)
        return p, {}

    assert benchmark.pedantic(unsub, setup=setup, rounds=ROUNDS) is True
    assert e.size() == size


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", suite.KINDS)
def test_lookup(
    benchmark: Any,
    kind: str,
    state: str,
    workload: OpsWorkload,
    expected: dict[str, dict[str, list[Any]]],
) -> None:
    e = _build(kind, state, workload, lookups=True)
    lookup = e.matcher.ops()[2]
    topics = list(zip(workload.lookups, e.topics(workload.lookups), strict=True))
    it = itertools.cycle(topics)

    def one() -> tuple[str, list[Any]]:
        original, topic = next(it)
        return original, lookup(topic)

    original, found = benchmark(one)
    assert sorted(found) == expected[state][original]
    assert len(found) >= 1  # every lookup topic matches foo.*.baz.qux.quux
