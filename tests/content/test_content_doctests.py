"""The examples in cstrie.content's docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "cstrie.content",
    "cstrie.content.criteria",
    "cstrie.content.keys",
    "cstrie.content.index",
    "cstrie.content.export",
    "cstrie.content.rabbitmq",
    "cstrie.content.cloudevents",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
