"""Shared fixtures: every conformance test runs against each trie implementation.

``trie_cls`` is :class:`cstrie_lab.pytrie.PyTrie` and ``cstrie.Trie`` (the native engine):
every rule is checked on both, and a broken engine build fails the suite.

``matcher`` answers "does this one pattern match this topic?" through a real trie,
checking that ``lookup``, ``match`` and ``has_subscribers`` agree with each other and
with the independent oracle in ``tests/support/oracle.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import oracle  # tests/support/ is on sys.path (pyproject: pythonpath)
import pytest

from cstrie.dialect import Dialect, resolve_dialect
from cstrie.trie import Trie
from cstrie_lab.pytrie import PyTrie

#: the backstop behind pytest-timeout for a test hung in C (tests/support/watchdog.py)
pytest_plugins = ["watchdog"]

_IMPLEMENTATIONS = [pytest.param(PyTrie, id="PyTrie"), pytest.param(Trie, id="Trie")]


@pytest.fixture(params=_IMPLEMENTATIONS)
def trie_cls(request: pytest.FixtureRequest) -> Any:
    """A trie class: ``cls(dialect)`` with ``dialect`` a name or a Dialect."""
    return request.param


Matcher = Callable[[str | Dialect, str, str], bool]


@pytest.fixture
def matcher(trie_cls: Any) -> Matcher:
    """``matcher(dialect, pattern, topic) -> bool`` through a one-pattern trie.

    Also asserts that ``lookup``/``match``/``has_subscribers`` are consistent and that
    the oracle gives the same answer (so the rule tests check the oracle too).
    """

    def check(dialect: str | Dialect, pattern: str, topic: str) -> bool:
        d = resolve_dialect(dialect)
        trie = trie_cls(d)
        assert trie.subscribe(pattern, "sub") is True
        found = trie.lookup(topic)
        pairs = trie.match(topic)
        has = trie.has_subscribers(topic)
        result = bool(found == ["sub"])
        assert found in ([], ["sub"]), f"lookup({topic!r}) returned {found!r}"
        assert pairs == ([(pattern, "sub")] if result else []), f"match({topic!r}) = {pairs!r}"
        assert isinstance(has, bool), f"has_subscribers returned {has!r}"
        assert has == result, f"has_subscribers({topic!r}) = {has!r}, lookup = {found!r}"
        expected = oracle.matches(d, pattern, topic)
        assert expected == result, (
            f"{d.name}: trie says {pattern!r} {'matches' if result else 'does not match'} "
            f"{topic!r}, oracle says {expected}"
        )
        return result

    return check
