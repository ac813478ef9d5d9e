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

__all__ = ["REGISTRY", "get", "names"]

#: scenario name -> module (in the order "all" runs them)
REGISTRY: dict[str, str] = {
    "lookup-vs-paho": "cstrie.bench.scenarios.lookup_vs_paho",
    "scale": "cstrie.bench.scenarios.scale",
    "fan": "cstrie.bench.scenarios.fan",
    "memory": "cstrie.bench.scenarios.memory",
    "churn": "cstrie.bench.scenarios.churn",
}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Scenario:
    """The scenario called ``name`` (``KeyError`` if there is none)."""
    module = importlib.import_module(REGISTRY[name])
    scenario: Scenario = module.SCENARIO
    return scenario
