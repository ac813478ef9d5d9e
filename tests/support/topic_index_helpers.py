"""Checks shared by the ``TopicIndex`` test modules (importable as
``topic_index_helpers``: pytest runs with ``tests`` on the path).

A model of an index is a plain ``dict`` topic -> value.  Values may be
unhashable (dicts, lists) or ``None``, so answers are compared as dicts, and a
value must come back as the very object that was put (``is``), as a dict
would hand it back.  What a filter should match comes from the independent
oracle (``tests/support/oracle.py``), never from ``cstrie``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import oracle

from cstrie.dialect import Dialect

__all__ = ["check_contents", "check_query", "collect", "expected_query", "same_values"]


def expected_query(d: Dialect, model: Mapping[str, Any], f: str) -> dict[str, Any]:
    """What ``query(f)`` must answer: every stored pair whose topic ``f`` matches."""
    return {t: v for t, v in model.items() if oracle.matches(d, f, t)}


def collect(pairs: Iterable[tuple[str, Any]], ctx: str = "") -> dict[str, Any]:
    """The pairs of a query or ``items()`` as a dict; asserts each is a
    ``(str, value)`` pair and that no topic comes twice."""
    out: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, tuple) and len(pair) == 2, (
            f"not a (topic, value) pair: {pair!r} {ctx}"
        )
        topic, value = pair
        assert isinstance(topic, str), f"topic {topic!r} is not a str {ctx}"
        assert topic not in out, f"topic {topic!r} came twice {ctx}"
        out[topic] = value
    return out


def same_values(got: Mapping[str, Any], want: Mapping[str, Any], ctx: str = "") -> None:
    """``got`` and ``want`` have the same topics, and each value is the object put."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"missing {missing!r}, unexpected {extra!r} {ctx}"
    for topic, value in want.items():
        assert got[topic] is value, (
            f"topic {topic!r}: got value {got[topic]!r}, expected {value!r} (the object put) {ctx}"
        )


def check_query(
    reader: Any, d: Dialect, model: Mapping[str, Any], f: str, ctx: str = ""
) -> dict[str, Any]:
    """``query(f)`` and ``count(f)`` of ``reader`` (an index or a snapshot) agree
    with the oracle over ``model``; returns the expected answer."""
    want = expected_query(d, model, f)
    where = f"[{d.name} filter {f!r}] {ctx}"
    got = collect(reader.query(f), where)
    same_values(got, want, where)
    n = reader.count(f)
    assert isinstance(n, int) and not isinstance(n, bool), f"count returned {n!r} {where}"
    assert n == len(want), f"count {n} != {len(want)} {where}"
    return want


def check_contents(reader: Any, model: Mapping[str, Any], ctx: str = "") -> None:
    """len / iter / items / get / [] / in of ``reader`` describe exactly ``model``."""
    assert len(reader) == len(model), f"len {len(reader)} != {len(model)} {ctx}"
    topics = list(iter(reader))
    assert len(topics) == len(set(topics)), f"iter repeated a topic: {topics!r} {ctx}"
    assert set(topics) == set(model), f"iter {sorted(topics)!r} != {sorted(model)!r} {ctx}"
    same_values(collect(reader.items(), ctx), model, ctx)
    for topic, value in model.items():
        assert topic in reader, f"{topic!r} not in reader {ctx}"
        assert reader[topic] is value, f"reader[{topic!r}] {ctx}"
        assert reader.get(topic) is value, f"reader.get({topic!r}) {ctx}"
