"""Micro benchmarks (pytest-benchmark) of cstrie and PyTrie on a 10k-subscription trie.

Run them with ``pytest stress/lab/benchmarks -p no:xdist`` (add ``--benchmark-json``
to keep the numbers).  Under pytest-xdist pytest-benchmark disables itself and
each benchmark body runs once, as a plain test.  Nothing here asserts a time:
the assertions check the answers, so a broken engine fails here too.

Workload: 10,000 random MQTT filters (:func:`cstrie_lab.bench.workloads.random_mqtt_filters`,
the ``lookup-vs-paho`` shape), one subscriber each; topics made from the filters.
PyTrie has no O(1) snapshot: its ``snapshot`` benchmark is ``list(trie)``, the
consistent copy a PyTrie user would make.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from cstrie.trie import Trie
from cstrie_lab.bench.workloads import matching_topics, random_mqtt_filters
from cstrie_lab.pytrie import PyTrie

pytest.importorskip("pytest_benchmark")

SIZE = 10_000
IMPLS = [pytest.param(Trie, id="cstrie"), pytest.param(PyTrie, id="PyTrie")]


@pytest.fixture(scope="module")
def workload() -> tuple[list[str], list[str], dict[str, int]]:
    rng = random.Random(20240601)
    filters = random_mqtt_filters(rng, SIZE)
    topics = matching_topics(rng, filters, 1_000)
    # expected match counts from PyTrie, checked against every implementation
    ref = PyTrie("mqtt")
    for i, f in enumerate(filters):
        ref.subscribe(f, i)
    expected = {t: len(ref.lookup(t)) for t in topics}
    return filters, topics, expected


@pytest.fixture(scope="module", params=IMPLS)
def trie(request: pytest.FixtureRequest, workload: Any) -> Any:
    filters, _, _ = workload
    t = request.param("mqtt")
    for i, f in enumerate(filters):
        t.subscribe(f, i)
    assert len(t) == SIZE
    return t


def test_lookup(benchmark: Any, trie: Any, workload: Any) -> None:
    _, topics, expected = workload
    it = itertools.cycle(topics)
    lookup = trie.lookup

    def one() -> tuple[str, list[Any]]:
        t = next(it)
        return t, lookup(t)

    topic, found = benchmark(one)
    assert len(found) == expected[topic] >= 1


def test_has_subscribers(benchmark: Any, trie: Any, workload: Any) -> None:
    _, topics, _ = workload
    it = itertools.cycle(topics)
    has = trie.has_subscribers
    assert benchmark(lambda: has(next(it))) is True


def test_match(benchmark: Any, trie: Any, workload: Any) -> None:
    _, topics, expected = workload
    it = itertools.cycle(topics)
    match = trie.match

    def one() -> tuple[str, list[tuple[str, Any]]]:
        t = next(it)
        return t, match(t)

    topic, pairs = benchmark(one)
    assert len(pairs) == expected[topic]


def test_subscribe_unsubscribe(benchmark: Any, trie: Any) -> None:
    counter = itertools.count()

    def cycle() -> tuple[bool, bool]:
        i = next(counter)
        pattern = f"bench/new{i % 1000}/+/status"
        return trie.subscribe(pattern, ("bench", i)), trie.unsubscribe(pattern, ("bench", i))

    assert benchmark(cycle) == (True, True)
    assert len(trie) == SIZE


def test_snapshot(benchmark: Any, trie: Any) -> None:
    if isinstance(trie, Trie):
        snap = benchmark(trie.snapshot)
        assert len(snap) == SIZE
    else:
        pairs = benchmark(lambda: list(trie))
        assert len(pairs) == SIZE
