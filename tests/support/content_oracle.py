"""The slow evaluator the content index is checked against: every binding
tested against every message, written from the rules of
:mod:`cstrie.content.criteria` (not with ``Criterion.test``), topics matched
by the topic rules' own oracle (``tests/support/oracle.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import oracle

from cstrie.content import AllOf, AnyOf, Criterion, Eq, Has, Not, OneOf, Prefix, Range, Suffix
from cstrie.dialect import resolve_dialect

_ABSENT = object()


def _kind(v: object) -> str | None:
    for t, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (bytes, "bytes")):
        if isinstance(v, t):
            return name
    return "none" if v is None else None


def same(a: object, b: object) -> bool:
    """Equality as the rules state it: same kind and equal value; NaN never."""
    ka, kb = _kind(a), _kind(b)
    if ka is None or ka != kb:
        return False
    if ka == "float" and (math.isnan(a) or math.isnan(b)):  # type: ignore[arg-type]
        return False
    return bool(a == b)


def holds(c: Criterion, fields: Mapping[str, Any]) -> bool:
    if isinstance(c, AllOf):
        return all(holds(x, fields) for x in c.criteria)
    if isinstance(c, AnyOf):
        return any(holds(x, fields) for x in c.criteria)
    if isinstance(c, Not):
        return not holds(c.criterion, fields)
    v = fields.get(c.field, _ABSENT) if isinstance(fields, dict) else _ABSENT  # type: ignore[attr-defined]
    if isinstance(c, Has):
        return v is not _ABSENT
    if v is _ABSENT:
        return False
    if isinstance(c, Eq):
        return same(v, c.value)
    if isinstance(c, OneOf):
        return any(same(v, x) for x in c.values)
    if isinstance(c, Prefix):
        return isinstance(v, str) and v[: len(c.text)] == c.text
    if isinstance(c, Suffix):
        return isinstance(v, str) and (not c.text or v[-len(c.text) :] == c.text)
    if isinstance(c, Range):
        if _kind(v) not in ("int", "float") or v != v:
            return False
        if c.low is not None and (v < c.low or (not c.low_inclusive and v == c.low)):
            return False
        return c.high is None or not (v > c.high or (not c.high_inclusive and v == c.high))
    raise AssertionError(c)


def expected(
    bindings: Iterable[tuple[Criterion, Any, str | None]],
    fields: dict[str, Any],
    topic: str | None,
    dialect: str = "amqp",
) -> set[Any]:
    """The subscribers a message should reach (as a set)."""
    d = resolve_dialect(dialect)
    return {
        s
        for c, s, t in bindings
        if (t is None or (topic is not None and oracle.matches(d, t, topic)))
        and holds(c, fields)
    }
