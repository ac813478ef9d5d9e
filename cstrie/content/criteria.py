"""Criteria on message fields: the vocabulary of content subscriptions.

A criterion is an immutable value.  Leaves test one field of a message (a
mapping of field names to values); :class:`AllOf`, :class:`AnyOf` and
:class:`Not` combine them::

    >>> from cstrie.content.criteria import AllOf, AnyOf, Eq, Has, Not, Prefix, Range
    >>> c = AllOf(Eq("currency", "USD"), Has("urgent"), Not(Prefix("desk", "test-")))
    >>> c.test({"currency": "USD", "urgent": None, "desk": "fx-1"})
    True
    >>> Range("price", 10, 20, high_inclusive=False).test({"price": 20})
    False

Rules (the index, :class:`~cstrie.content.ContentIndex`, obeys them exactly;
``tests/content/test_content_criteria.py`` states them as tests):

=================  =========================================================
``Has(f)``         the message has field ``f`` (any value, ``None`` too)
``Eq(f, v)``       ``f`` is present and its value has ``v``'s type and value:
                   ``1``, ``1.0`` and ``True`` are three different values
                   (as RabbitMQ's ``=:=``); ``-0.0`` equals ``0.0``; a
                   str subclass counts as ``str`` (likewise int, float, bytes)
``OneOf(f, vs)``   ``Eq(f, v)`` for some ``v`` in ``vs`` (at least one value)
``Prefix(f, s)``   ``f`` holds a ``str`` that starts with ``s``
``Suffix(f, s)``   ``f`` holds a ``str`` that ends with ``s``
``Range(f, ...)``  ``f`` holds a number (``int`` or ``float``, never ``bool``)
                   within the bounds, compared exactly (``2**53 + 1 > 2.0**53``);
                   NaN is in no range; a bound of ``None`` is open
``Not(c)``         ``c`` is false (so ``Not(Eq(f, v))`` holds when ``f`` is absent)
``AllOf(*cs)``     every ``c`` holds; ``AllOf()`` always holds
``AnyOf(*cs)``     some ``c`` holds; ``AnyOf()`` never holds
=================  =========================================================

Values in criteria are ``str``, ``bytes``, ``int``, ``float``, ``bool`` or
``None``; NaN is refused (it equals nothing).  A message's values may be
anything: a value of another type satisfies ``Has`` only.  Field names are
``str``; a message's keys that are not ``str`` are ignored.

Two criteria are equal when they state the same test in the same words
(:attr:`Criterion.key`, a canonical text): ``Eq("a", 1) != Eq("a", True)``,
``OneOf("a", [1, 2]) == OneOf("a", [2, 1, 2])``.  ``AllOf(a, b)`` and
``AllOf(b, a)`` differ (the order is kept).

Constructing a criterion is O(its direct children); nesting deeper than
:data:`MAX_DEPTH` raises ``ValueError`` at once, so no deep structure is ever
walked.  The limits a broker sets (criteria per binding, values per set,
value length, depth) are checked by the index when it binds.

Every criterion converts to and from a JSON-ready form
(:meth:`Criterion.to_json`, :func:`from_json`), used by the export files.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "AllOf",
    "AnyOf",
    "Criterion",
    "Eq",
    "Has",
    "Not",
    "OneOf",
    "Prefix",
    "Range",
    "Suffix",
    "Value",
    "from_json",
    "value_token",
]

#: The deepest nesting any criterion may have (a leaf has depth 1); the
#: index's ``max_depth`` is at most this.
MAX_DEPTH = 64

Value = str | bytes | int | float | bool | None

_MISSING: Any = object()


# ------------------------------------------------------------------ values
def canonical(v: object) -> Value | object:
    """``v`` as the exact built-in type it counts as, or ``_MISSING`` when it
    is none of the value types.  O(1) (a subclass is copied: O(len))."""
    t = type(v)
    if t is str or t is int or t is float or t is bool or t is bytes or v is None:
        return v
    if isinstance(v, bool):  # pragma: no cover - bool cannot be subclassed
        return bool(v)
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, int):
        return int.__index__(v)
    if isinstance(v, float):
        return float.__float__(v)
    if isinstance(v, bytes):
        return bytes(v)
    missing: object = _MISSING
    return missing


def value_token(v: object) -> tuple[str, object] | None:
    """The (type tag, value) pair that equality compares, or None for a
    value no criterion can equal (another type, NaN).  ``-0.0`` becomes
    ``0.0``.  O(1) for the built-in types."""
    v = canonical(v)
    t = type(v)
    if t is str:
        return ("s", v)
    if t is bool:
        return ("b", v)
    if t is int:
        return ("i", v)
    if isinstance(v, float):
        if v != v:  # NaN
            return None
        return ("f", v + 0.0)  # -0.0 + 0.0 == 0.0
    if t is bytes:
        return ("y", v)
    if v is None:
        return ("n", None)
    return None


def _check_field(field: object) -> str:
    if type(field) is not str:
        if isinstance(field, str):
            return str.__str__(field)
        raise TypeError(f"a field name must be a str, not {type(field).__name__}")
    return field


def _check_value(v: object, what: str) -> Value:
    c = canonical(v)
    if c is _MISSING:
        raise TypeError(
            f"{what} must be a str, bytes, int, float, bool or None, not {type(v).__name__}"
        )
    if type(c) is float and c != c:
        raise ValueError(f"{what} is NaN, which equals nothing and is in no range")
    return c  # type: ignore[return-value]


def _check_text(v: object, what: str) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a str, not {type(v).__name__}")
    return str.__str__(v)


def _check_number(v: object, what: str) -> int | float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{what} must be an int, a float or None, not {type(v).__name__}")
    if isinstance(v, float):
        v = float.__float__(v)
        if v != v:
            raise ValueError(f"{what} is NaN; a range needs ordered bounds")
        return v
    return int.__index__(v)


def _value_key(v: Value) -> str:
    """An unambiguous text for a checked value (part of :attr:`Criterion.key`)."""
    tok = value_token(v)
    assert tok is not None
    tag, x = tok
    if isinstance(x, (float, bytes)):
        return tag + x.hex()
    return tag + repr(x)


def _value_json(v: Value) -> object:
    if type(v) is float:
        if math.isinf(v):
            return {"float": "inf" if v > 0 else "-inf"}
        return v
    if type(v) is bytes:
        return {"bytes": base64.b64encode(v).decode("ascii")}
    if type(v) is str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return {"text": base64.b64encode(v.encode("utf-8", "surrogatepass")).decode("ascii")}
    return v


def _value_from_json(obj: object) -> Value:
    if obj is None or type(obj) in (str, int, float, bool):
        return obj  # type: ignore[return-value]
    if type(obj) is dict and len(obj) == 1:
        ((tag, payload),) = obj.items()
        if tag == "float" and payload in ("inf", "-inf"):
            return float(payload)
        if tag in ("bytes", "text") and isinstance(payload, str):
            try:
                raw = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"invalid base64 in {obj!r}") from None
            if tag == "bytes":
                return raw
            try:
                return raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise ValueError(f"invalid UTF-8 in {obj!r}") from None
    raise ValueError(f"invalid value {obj!r}")


# --------------------------------------------------------------- criteria
class Criterion:
    """Base of every criterion: an immutable test on a message's fields.

    ``depth`` is 1 for a leaf; ``leaves`` counts the field tests.  ``key`` is
    the canonical text that equality and hashing use (computed on first
    use, O(size)).  ``test(fields)`` evaluates exactly (O(size)).
    """

    __slots__ = ("_key", "depth", "leaves")

    depth: int
    leaves: int
    _key: str | None

    def _text(self) -> str:
        raise NotImplementedError

    @property
    def key(self) -> str:
        k = self._key
        if k is None:
            k = self._text()
            object.__setattr__(self, "_key", k)
        return k

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Criterion):
            return NotImplemented
        return self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self._args()))})"

    def _args(self) -> tuple[object, ...]:
        raise NotImplementedError

    def test(self, fields: Mapping[str, Any]) -> bool:
        """Whether ``fields`` (a mapping) satisfies this criterion."""
        raise NotImplementedError

    def to_json(self) -> object:
        """A JSON-ready form; :func:`from_json` reads it back."""
        raise NotImplementedError

    def _init(self, depth: int, leaves: int) -> None:
        if depth > MAX_DEPTH:
            raise ValueError(f"criteria nested deeper than {MAX_DEPTH} levels")
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "leaves", leaves)
        object.__setattr__(self, "_key", None)


class _Leaf(Criterion):
    __slots__ = ("field",)

    field: str

    def __init__(self, field: str) -> None:
        object.__setattr__(self, "field", _check_field(field))
        self._init(1, 1)


class Has(_Leaf):
    """The message has field ``field`` (whatever its value, ``None`` too).

    >>> Has("urgent").test({"urgent": None}), Has("urgent").test({})
    (True, False)
    """

    __slots__ = ()

    def _text(self) -> str:
        return f"has({self.field!r})"

    def _args(self) -> tuple[object, ...]:
        return (self.field,)

    def test(self, fields: Mapping[str, Any]) -> bool:
        return self.field in fields

    def to_json(self) -> object:
        return {"has": self.field}


class Eq(_Leaf):
    """Field ``field`` holds ``value``: same type, same value (see the
    module's table).

    >>> Eq("n", 1).test({"n": 1}), Eq("n", 1).test({"n": 1.0}), Eq("n", 1).test({"n": True})
    (True, False, False)
    """

    __slots__ = ("token", "value")

    value: Value
    token: tuple[str, object]

    def __init__(self, field: str, value: Value) -> None:
        super().__init__(field)
        v = _check_value(value, "an Eq value")
        object.__setattr__(self, "value", v)
        object.__setattr__(self, "token", value_token(v))

    def _text(self) -> str:
        return f"eq({self.field!r},{_value_key(self.value)})"

    def _args(self) -> tuple[object, ...]:
        return (self.field, self.value)

    def test(self, fields: Mapping[str, Any]) -> bool:
        v = fields.get(self.field, _MISSING)
        return v is not _MISSING and value_token(v) == self.token

    def to_json(self) -> object:
        return {"eq": [self.field, _value_json(self.value)]}


class OneOf(_Leaf):
    """Field ``field`` holds one of ``values`` (as :class:`Eq` compares).

    >>> OneOf("ccy", ["USD", "EUR"]).test({"ccy": "EUR"})
    True
    """

    __slots__ = ("tokens", "values")

    values: tuple[Value, ...]
    tokens: frozenset[tuple[str, object]]

    def __init__(self, field: str, values: Iterable[Value]) -> None:
        super().__init__(field)
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise TypeError(
                f"OneOf values must be an iterable of values, not {type(values).__name__}"
            )
        seen: dict[tuple[str, object], Value] = {}
        for v in values:
            c = _check_value(v, "a OneOf value")
            seen.setdefault(value_token(c), c)  # type: ignore[arg-type]
        if not seen:
            raise ValueError("OneOf needs at least one value")
        keys = sorted(seen, key=lambda t: _value_key(seen[t]))
        object.__setattr__(self, "values", tuple(seen[t] for t in keys))
        object.__setattr__(self, "tokens", frozenset(keys))

    def _text(self) -> str:
        return f"in({self.field!r},{','.join(_value_key(v) for v in self.values)})"

    def _args(self) -> tuple[object, ...]:
        return (self.field, list(self.values))

    def test(self, fields: Mapping[str, Any]) -> bool:
        v = fields.get(self.field, _MISSING)
        return v is not _MISSING and value_token(v) in self.tokens

    def to_json(self) -> object:
        return {"in": [self.field, [_value_json(v) for v in self.values]]}


class _Affix(_Leaf):
    __slots__ = ("text",)

    text: str
    _op = ""

    def __init__(self, field: str, text: str) -> None:
        super().__init__(field)
        object.__setattr__(self, "text", _check_text(text, f"a {type(self).__name__} text"))

    def _text(self) -> str:
        return f"{self._op}({self.field!r},{self.text!r})"

    def _args(self) -> tuple[object, ...]:
        return (self.field, self.text)

    def to_json(self) -> object:
        return {self._op: [self.field, _value_json(self.text)]}


class Prefix(_Affix):
    """Field ``field`` holds a ``str`` starting with ``text`` (``""``: any str).

    >>> Prefix("type", "com.github.").test({"type": "com.github.push"})
    True
    """

    __slots__ = ()
    _op = "prefix"

    def test(self, fields: Mapping[str, Any]) -> bool:
        v = fields.get(self.field)
        return isinstance(v, str) and str.startswith(v, self.text)  # a subclass by its text


class Suffix(_Affix):
    """Field ``field`` holds a ``str`` ending with ``text``.

    >>> Suffix("subject", ".jpg").test({"subject": "cat.jpg"})
    True
    """

    __slots__ = ()
    _op = "suffix"

    def test(self, fields: Mapping[str, Any]) -> bool:
        v = fields.get(self.field)
        return isinstance(v, str) and str.endswith(v, self.text)


class Range(_Leaf):
    """Field ``field`` holds a number between ``low`` and ``high``.

    Bounds are inclusive unless ``low_inclusive``/``high_inclusive`` is
    false; ``None`` leaves that side open.  ``int`` and ``float`` compare
    exactly with each other; ``bool`` is not a number here; NaN is in no
    range.  An empty range (``low > high``, or equal bounds not both
    inclusive) is a ``ValueError``.

    >>> r = Range("price", 10, 20.5, high_inclusive=False)
    >>> r.test({"price": 10}), r.test({"price": 20.5}), r.test({"price": True})
    (True, False, False)
    """

    __slots__ = ("high", "high_inclusive", "low", "low_inclusive")

    low: int | float | None
    high: int | float | None
    low_inclusive: bool
    high_inclusive: bool

    def __init__(
        self,
        field: str,
        low: int | float | None = None,
        high: int | float | None = None,
        *,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
    ) -> None:
        super().__init__(field)
        lo = _check_number(low, "a Range low bound")
        hi = _check_number(high, "a Range high bound")
        if lo is not None and hi is not None:
            if lo > hi or (lo == hi and not (low_inclusive and high_inclusive)):
                raise ValueError(f"empty range for {field!r}: low {lo!r}, high {hi!r}")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)
        object.__setattr__(self, "low_inclusive", bool(low_inclusive) or lo is None)
        object.__setattr__(self, "high_inclusive", bool(high_inclusive) or hi is None)

    def _text(self) -> str:
        lo = "" if self.low is None else _value_key(self.low)
        hi = "" if self.high is None else _value_key(self.high)
        return (
            f"range({self.field!r},{'[' if self.low_inclusive else '('}{lo};"
            f"{hi}{']' if self.high_inclusive else ')'})"
        )

    def _args(self) -> tuple[object, ...]:
        return (self.field, self.low, self.high)

    def __repr__(self) -> str:
        extra = ""
        if not self.low_inclusive:
            extra += ", low_inclusive=False"
        if not self.high_inclusive:
            extra += ", high_inclusive=False"
        return f"Range({self.field!r}, {self.low!r}, {self.high!r}{extra})"

    def contains(self, v: object) -> bool:
        """Whether the value ``v`` is in the range (False for non-numbers)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            return False
        lo, hi = self.low, self.high
        if lo is not None and (v < lo or (v == lo and not self.low_inclusive)):
            return False
        return hi is None or not (v > hi or (v == hi and not self.high_inclusive))

    def test(self, fields: Mapping[str, Any]) -> bool:
        return self.contains(fields.get(self.field))

    def to_json(self) -> object:
        body: dict[str, object] = {"field": self.field}
        if self.low is not None:
            body["ge" if self.low_inclusive else "gt"] = _value_json(self.low)
        if self.high is not None:
            body["le" if self.high_inclusive else "lt"] = _value_json(self.high)
        return {"range": body}


class Not(Criterion):
    """The negation of ``criterion``.

    >>> Not(Eq("env", "test")).test({})
    True
    """

    __slots__ = ("criterion",)

    criterion: Criterion

    def __init__(self, criterion: Criterion) -> None:
        if not isinstance(criterion, Criterion):
            raise TypeError(f"Not needs a Criterion, not {type(criterion).__name__}")
        object.__setattr__(self, "criterion", criterion)
        self._init(criterion.depth + 1, criterion.leaves)

    def _text(self) -> str:
        return f"not({self.criterion.key})"

    def _args(self) -> tuple[object, ...]:
        return (self.criterion,)

    def test(self, fields: Mapping[str, Any]) -> bool:
        return not self.criterion.test(fields)

    def to_json(self) -> object:
        return {"not": self.criterion.to_json()}


class _Group(Criterion):
    __slots__ = ("criteria",)

    criteria: tuple[Criterion, ...]
    _op = ""

    def __init__(self, *criteria: Criterion) -> None:
        depth, leaves = 0, 0
        for c in criteria:
            if not isinstance(c, Criterion):
                raise TypeError(
                    f"{type(self).__name__} needs Criterion objects, not {type(c).__name__}"
                )
            depth = max(depth, c.depth)
            leaves += c.leaves
        object.__setattr__(self, "criteria", tuple(criteria))
        self._init(depth + 1, leaves)

    def _text(self) -> str:
        return f"{self._op}({','.join(c.key for c in self.criteria)})"

    def _args(self) -> tuple[object, ...]:
        return self.criteria

    def to_json(self) -> object:
        return {self._op: [c.to_json() for c in self.criteria]}


class AllOf(_Group):
    """Every criterion holds (``AllOf()`` always holds).

    >>> AllOf(Has("a"), Eq("b", 2)).test({"a": 1, "b": 2})
    True
    """

    __slots__ = ()
    _op = "all"

    def test(self, fields: Mapping[str, Any]) -> bool:
        return all(c.test(fields) for c in self.criteria)


class AnyOf(_Group):
    """Some criterion holds (``AnyOf()`` never holds).

    >>> AnyOf(Has("a"), Eq("b", 2)).test({"b": 2})
    True
    """

    __slots__ = ()
    _op = "any"

    def test(self, fields: Mapping[str, Any]) -> bool:
        return any(c.test(fields) for c in self.criteria)


# ------------------------------------------------------------------- JSON
def _pair(body: object, op: str) -> tuple[str, object]:
    if type(body) is not list or len(body) != 2 or type(body[0]) is not str:
        raise ValueError(f"{op!r} needs [field, value], not {body!r}"[:200])
    return body[0], body[1]


def from_json(obj: object, _depth: int = 1) -> Criterion:
    """The criterion of a JSON form written by :meth:`Criterion.to_json`.

    Raises ``ValueError`` naming what is wrong (also for nesting deeper than
    :data:`MAX_DEPTH`).

    >>> from_json({"all": [{"eq": ["a", 1]}, {"not": {"has": "b"}}]})
    AllOf(Eq('a', 1), Not(Has('b')))
    """
    if _depth > MAX_DEPTH:
        raise ValueError(f"criteria nested deeper than {MAX_DEPTH} levels")
    if type(obj) is not dict or len(obj) != 1:
        raise ValueError(f"a criterion is an object with one key, not {obj!r}"[:200])
    ((op, body),) = obj.items()
    try:
        if op == "has":
            if type(body) is not str:
                raise ValueError(f"'has' needs a field name, not {body!r}"[:200])
            return Has(body)
        if op == "eq":
            f, v = _pair(body, op)
            return Eq(f, _value_from_json(v))
        if op == "in":
            f, vs = _pair(body, op)
            if type(vs) is not list:
                raise ValueError("'in' needs a list of values")
            return OneOf(f, [_value_from_json(v) for v in vs])
        if op in ("prefix", "suffix"):
            f, v = _pair(body, op)
            text = _value_from_json(v)
            return (Prefix if op == "prefix" else Suffix)(f, text)  # type: ignore[arg-type]
        if op == "range":
            return _range_from_json(body)
        if op == "not":
            return Not(from_json(body, _depth + 1))
        if op in ("all", "any"):
            if type(body) is not list:
                raise ValueError(f"{op!r} needs a list of criteria")
            parts = [from_json(c, _depth + 1) for c in body]
            return AllOf(*parts) if op == "all" else AnyOf(*parts)
    except TypeError as e:
        raise ValueError(str(e)) from None
    raise ValueError(f"unknown criterion {op!r}"[:200])


def _range_from_json(body: object) -> Range:
    if type(body) is not dict or type(body.get("field")) is not str:
        raise ValueError("'range' needs an object with a 'field'")
    extra = set(body) - {"field", "ge", "gt", "le", "lt"}
    if extra or ("ge" in body and "gt" in body) or ("le" in body and "lt" in body):
        raise ValueError(f"invalid range bounds {sorted(body)}")
    lo = body.get("ge", body.get("gt"))
    hi = body.get("le", body.get("lt"))
    return Range(
        body["field"],
        None if lo is None else _value_from_json(lo),  # type: ignore[arg-type]
        None if hi is None else _value_from_json(hi),  # type: ignore[arg-type]
        low_inclusive="gt" not in body,
        high_inclusive="lt" not in body,
    )
