"""CloudEvents Subscriptions API filters (spec section 3.2.4), on the index.

The six REQUIRED filter dialects, each a JSON object with one key:

==========================  ================================================
``{"exact": {a: v, ...}}``  every attribute ``a`` is present and equals ``v``
``{"prefix": {a: v, ...}}`` every attribute ``a`` starts with ``v``
``{"suffix": {a: v, ...}}`` every attribute ``a`` ends with ``v``
``{"all": [f, ...]}``       every nested filter is true (at least one)
``{"any": [f, ...]}``       some nested filter is true (at least one)
``{"not": f}``              the nested filter is false
==========================  ================================================

A subscription's ``filters`` array is true when every filter in it is true;
an empty array (or no filters) is true.  Comparisons are case sensitive, on
the attribute's string form.  Attribute names and values in ``exact``,
``prefix`` and ``suffix`` MUST NOT be empty; names are CloudEvents attribute
names (lower-case ASCII letters and digits, spec "Attribute Naming
Convention"), so a name outside that alphabet, which no event can carry, is
refused.  A dialect this adapter does not know (``sql`` included, an
OPTIONAL one) is refused, as the spec requires of a subscription manager.
Each refusal is a ``ValueError`` (``TypeError`` for a wrong JSON type).

An attribute the event does not carry makes ``exact``, ``prefix`` and
``suffix`` false (as CloudEvents SQL's TCK ``subscriptions_api_recreations``
has it: ``LIKE`` and ``=`` on a missing attribute are false), and ``not``
of such a filter true.  Event attribute values are compared in their
canonical string form: a str as it is, a Boolean as ``true``/``false``, an
Integer in decimal, Binary as base64; ``None`` is an absent attribute, and
``data``/``data_base64`` are the payload, not attributes.

>>> from cstrie.content import ContentIndex
>>> from cstrie.content.cloudevents import event_fields, filter_criteria
>>> idx = ContentIndex()
>>> f = [{"prefix": {"type": "com.github."}}, {"not": {"exact": {"subject": "wip"}}}]
>>> idx.bind(filter_criteria(f), "sink-1")
True
>>> idx.match(event_fields({"specversion": "1.0", "id": "1", "source": "/gh",
...                         "type": "com.github.push"}))
['sink-1']
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from cstrie.content.criteria import MAX_DEPTH, AllOf, AnyOf, Criterion, Eq, Not, Prefix, Suffix

__all__ = ["DIALECTS", "event_fields", "filter_criteria"]

#: The filter dialects this adapter implements (the spec's REQUIRED ones).
DIALECTS = ("exact", "prefix", "suffix", "all", "any", "not")
_NAME = re.compile(r"[a-z0-9]+")
_LEAF = {"exact": Eq, "prefix": Prefix, "suffix": Suffix}
_PAYLOAD = ("data", "data_base64")


def filter_criteria(filters: object) -> Criterion:
    """The criterion of a subscription's ``filters`` (a list of filter
    expressions, true when all are; ``None`` or ``[]`` always true) or of
    one filter expression (a dict).  See the module for the rules."""
    if filters is None:
        return AllOf()
    if isinstance(filters, list):
        return AllOf(*(_expression(f, 1) for f in filters))
    return _expression(filters, 1)


def _expression(f: object, depth: int) -> Criterion:
    if depth > MAX_DEPTH:
        raise ValueError(f"filters nested deeper than {MAX_DEPTH} levels")
    if not isinstance(f, Mapping):
        raise TypeError(f"a filter expression is an object, not {type(f).__name__}")
    if len(f) != 1:
        names = sorted(map(str, f))
        raise ValueError(f"a filter expression names exactly one dialect, not {names}"[:300])
    ((dialect, body),) = f.items()
    if dialect in _LEAF:
        if not isinstance(body, Mapping):
            raise TypeError(f"{dialect!r} needs an object of attribute names to strings")
        if not body:
            raise ValueError(f"{dialect!r} names no attribute")
        leaf = _LEAF[dialect]
        parts = []
        for name, value in body.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ValueError(
                    f"{dialect!r}: {name!r} is not a CloudEvents attribute name "
                    "(lower-case ASCII letters and digits, not empty)"[:300]
                )
            if not isinstance(value, str):
                raise TypeError(f"{dialect!r}: the value of {name!r} must be a string")
            if not value:
                raise ValueError(f"{dialect!r}: the value of {name!r} must not be empty")
            parts.append(leaf(name, value))
        return parts[0] if len(parts) == 1 else AllOf(*parts)
    if dialect in ("all", "any"):
        if not isinstance(body, list):
            raise TypeError(f"{dialect!r} needs an array of filter expressions")
        if not body:
            raise ValueError(f"{dialect!r} needs at least one filter expression")
        nested = [_expression(x, depth + 1) for x in body]
        return AllOf(*nested) if dialect == "all" else AnyOf(*nested)
    if dialect == "not":
        return Not(_expression(body, depth + 1))
    supported = ", ".join(DIALECTS)
    raise ValueError(f"unsupported filter dialect {dialect!r}; supported: {supported}"[:300])


def _canonical(name: str, v: object) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    raise TypeError(
        f"event attribute {name!r} has a value of type {type(v).__name__}; give its "
        "CloudEvents string form"[:300]
    )


def event_fields(event: Mapping[str, Any]) -> dict[str, str]:
    """An event's context attributes as the fields the index matches (their
    canonical strings).  ``TypeError`` for a value with no canonical form
    here (a float, a dict...)."""
    if not isinstance(event, Mapping):
        raise TypeError(f"an event must be a mapping, not {type(event).__name__}")
    return {
        k: _canonical(k, v)
        for k, v in event.items()
        if isinstance(k, str) and k not in _PAYLOAD and v is not None
    }
