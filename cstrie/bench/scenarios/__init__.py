"""The scenario registry.

Each scenario is one module of this package exposing ``SCENARIO`` (a
:class:`~cstrie.bench.base.Scenario`).  To add one, write the module and add its
name here; ``cstrie bench --scenario NAME`` and the default "all" pick it up.
Modules are imported only when their scenario runs, so a scenario whose optional
dependency is missing does not stop the others.
"""

from __future__ import annotations

import importlib

from cstrie.bench.base import Scenario

__all__ = ["GROUPS", "REGISTRY", "get", "names"]

#: scenario name -> module (in the order "all" runs them)
REGISTRY: dict[str, str] = {
    "lookup-vs-paho": "cstrie.bench.scenarios.lookup_vs_paho",
    "vs-dict": "cstrie.bench.scenarios.vs_dict",
    "scale": "cstrie.bench.scenarios.scale",
    "fan": "cstrie.bench.scenarios.fan",
    "memory": "cstrie.bench.scenarios.memory",
    "churn": "cstrie.bench.scenarios.churn",
    # issue 5: cstrie beside the classic matchers (``--scenario suite`` runs these)
    "suite-ops": "cstrie.bench.scenarios.suite_ops",
    "suite-throughput": "cstrie.bench.scenarios.suite_throughput",
    "suite-threads": "cstrie.bench.scenarios.suite_threads",
    "suite-scale": "cstrie.bench.scenarios.suite_scale",
    # cstrie inside kombu (Celery's messaging layer): real clients, memory transport
    "kombu": "cstrie.bench.scenarios.kombu",
    # cstrie inside amqtt (asyncio MQTT broker): paho clients over loopback
    "amqtt": "cstrie.bench.scenarios.amqtt",
    # issue 14: share groups (Trie.route vs Trie.lookup, round-robin spread)
    "route": "cstrie.bench.scenarios.route",
    # issue 15: the topic index (reverse queries: filter -> stored topics, retained messages)
    "reverse": "cstrie.bench.scenarios.reverse",
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
