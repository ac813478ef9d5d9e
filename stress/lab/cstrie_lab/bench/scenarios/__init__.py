"""The scenario registry.

Each scenario is one module of this package exposing ``SCENARIO`` (a
:class:`~cstrie_lab.bench.base.Scenario`).  To add one, write the module and add its
name here; ``cstrie bench --scenario NAME`` and the default "all" pick it up.
Modules are imported only when their scenario runs, so a scenario whose optional
dependency is missing does not stop the others.
"""

from __future__ import annotations

import importlib

from cstrie_lab.bench.base import Scenario

__all__ = ["GROUPS", "REGISTRY", "get", "names"]

#: scenario name -> module (in the order "all" runs them)
REGISTRY: dict[str, str] = {
    "lookup-vs-paho": "cstrie_lab.bench.scenarios.lookup_vs_paho",
    "vs-dict": "cstrie_lab.bench.scenarios.vs_dict",
    "scale": "cstrie_lab.bench.scenarios.scale",
    "fan": "cstrie_lab.bench.scenarios.fan",
    "memory": "cstrie_lab.bench.scenarios.memory",
    # 1M filters: uniform and Zipf-skewed traffic vs paho, lookup_many, memory
    "million": "cstrie_lab.bench.scenarios.million",
    "churn": "cstrie_lab.bench.scenarios.churn",
    # cstrie beside the classic matchers (``--scenario suite`` runs these)
    "suite-ops": "cstrie_lab.bench.scenarios.suite_ops",
    "suite-throughput": "cstrie_lab.bench.scenarios.suite_throughput",
    "suite-threads": "cstrie_lab.bench.scenarios.suite_threads",
    "suite-scale": "cstrie_lab.bench.scenarios.suite_scale",
    # cstrie inside kombu (Celery's messaging layer): real clients, memory transport
    "kombu": "cstrie_lab.bench.scenarios.kombu",
    # kombu's missing headers exchange: indexed vs binding by binding
    "kombu-headers": "cstrie_lab.bench.scenarios.kombu_headers",
    # cstrie inside amqtt (asyncio MQTT broker): paho clients over loopback
    "amqtt": "cstrie_lab.bench.scenarios.amqtt",
    # share groups (Trie.route vs Trie.lookup, round-robin spread)
    "route": "cstrie_lab.bench.scenarios.route",
    # the topic index (reverse queries: filter -> stored topics, retained messages)
    "reverse": "cstrie_lab.bench.scenarios.reverse",
    # the selector index (globs, URI templates, regexes): skipfilter cache vs every selector
    "selectors": "cstrie_lab.bench.scenarios.selectors",
    # the content index (headers routing) vs per-binding evaluation (issue 27)
    "content": "cstrie_lab.bench.scenarios.content",
}

#: names that stand for several scenarios on the command line
GROUPS: dict[str, list[str]] = {
    "suite": ["suite-ops", "suite-throughput", "suite-threads", "suite-scale"],
}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Scenario:
    """The scenario called ``name`` (``KeyError`` if there is none)."""
    module = importlib.import_module(REGISTRY[name])
    scenario: Scenario = module.SCENARIO
    return scenario
