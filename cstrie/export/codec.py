"""Subscriber and dialect encoding shared by every format.

Subscribers
    ``str``, ``int`` and ``bytes`` (exactly those types, not subclasses; so not
    ``bool``) are stored as they are and come back as the same type and value;
    mixed types are fine.  Any other subscriber needs an ``encode`` callable
    (object -> str | int | bytes) when exporting and the matching ``decode``
    when loading.  When ``encode`` is given it is applied to *every* subscriber
    and the file records ``"subscriber_codec": "user"``; loading such a file
    without ``decode`` is an error (pass :func:`keep_encoded` to get the stored
    values themselves).  Every subscriber is checked before a byte is written.

Dialect
    All :class:`~cstrie.Dialect` fields are written as a JSON object and read
    back strictly (unknown or missing fields, wrong types: :class:`FormatError`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from cstrie.dialect import Dialect
from cstrie.export.errors import FormatError
from cstrie.groups import Group

__all__ = [
    "BYTES",
    "INT",
    "STR",
    "Decode",
    "Encode",
    "Plan",
    "Table",
    "dialect_from_json",
    "dialect_to_json",
    "encoded_kind",
    "json_value",
    "keep_encoded",
    "kind_name",
    "native_kind",
    "native_types",
    "not_storable",
    "plan",
    "prepare_table",
    "value_from_json",
]

STR, INT, BYTES = 0, 1, 2
_KINDS = {str: STR, int: INT, bytes: BYTES}
_NAMES = ("str", "int", "bytes")

Encode = Callable[[Any], "str | int | bytes"]
Decode = Callable[["str | int | bytes"], Any]


def kind_name(kind: int) -> str:
    return _NAMES[kind]


def keep_encoded(value: str | int | bytes) -> str | int | bytes:
    """A ``decode`` that keeps the stored values (for converting between formats
    without knowing the application's types)."""
    return value


@dataclasses.dataclass
class Table:
    """The distinct subscribers of a snapshot, ready to write.

    ``ids[k]`` is the engine id of the subscriber stored as ``values[k]`` (type
    ``kinds[k]``); ``codec`` is ``"native"`` or ``"user"``."""

    ids: list[int]
    values: list[str | int | bytes]
    kinds: bytes
    codec: str

    def index(self) -> dict[int, int]:
        """engine id -> 1-based table position."""
        return dict(zip(self.ids, range(1, len(self.ids) + 1), strict=True))

    @property
    def kind_set(self) -> set[int]:
        return set(self.kinds)


def _describe(obj: object) -> str:
    text = repr(obj)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} (type {type(obj).__qualname__})"


def prepare_table(ids: Sequence[int], objects: Sequence[Any], encode: Encode | None) -> Table:
    """Check and encode the subscribers with engine ids ``ids``.

    Raises ``TypeError`` naming the first subscriber that cannot be stored (or
    whose encoding is not a str/int/bytes) and ``ValueError`` when ``encode``
    gives two subscribers the same value.  Called before any output is made.
    """
    kinds = _KINDS
    values: list[str | int | bytes]
    if encode is None:
        values = [objects[i] for i in ids]
        try:
            kind_list = [kinds[type(v)] for v in values]
            for v in values:
                if type(v) is int and v.bit_length() > _MAX_INT_BITS:
                    raise not_storable(v)
        except KeyError:
            raise not_storable(next(v for v in values if type(v) not in kinds)) from None
        return Table(list(ids), values, bytes(kind_list), "native")
    values = []
    kind_list = []
    for i in ids:
        obj = objects[i]
        v = encode(obj)
        values.append(v)
        kind_list.append(encoded_kind(obj, v))
    if len(set(values)) != len(values):
        seen: dict[object, Any] = {}
        for i, v in zip(ids, values, strict=True):
            if v in seen:
                raise ValueError(
                    f"encode gave subscribers {_describe(seen[v])} and "
                    f"{_describe(objects[i])} the same value {v!r}; it must be one-to-one"
                )
            seen[v] = objects[i]
    return Table(list(ids), values, bytes(kind_list), "user")


def not_storable(v: object, what: str = "subscriber") -> TypeError:
    """The error for a ``what`` that cannot be stored as it is."""
    if type(v) is int:
        return TypeError(
            f"cannot export the int {what} of {v.bit_length()} bits: "
            f"ints up to {_MAX_INT_BITS} bits are stored; pass encode="
        )
    return TypeError(
        f"cannot export {what} {_describe(v)}: only str, int and bytes are "
        "stored as they are; pass encode= (object -> str|int|bytes) to export "
        "and decode= to load"
    )


def native_kind(v: object, what: str = "subscriber") -> int:
    """The kind (:data:`STR`, :data:`INT`, :data:`BYTES`) ``v`` is stored as;
    ``TypeError`` (:func:`not_storable`) when it cannot be."""
    k = _KINDS.get(type(v))
    if k is None or (k == INT and v.bit_length() > _MAX_INT_BITS):  # type: ignore[attr-defined]
        raise not_storable(v, what)
    return k


def encoded_kind(obj: object, v: object) -> int:
    """The kind of ``v = encode(obj)``; ``TypeError`` when ``encode`` did not
    return a storable str, int or bytes."""
    k = _KINDS.get(type(v))
    if k is None or (k == INT and v.bit_length() > _MAX_INT_BITS):  # type: ignore[attr-defined]
        raise TypeError(
            f"encode({_describe(obj)}) returned {_describe(v)}; it must return a str, int or bytes"
        )
    return k


@dataclasses.dataclass
class Plan:
    """How one export stores its subscribers.

    ``values`` maps every engine id of the snapshot (maybe more) to the value to
    store (the registry's id -> object list itself, or a dict); ``members`` are
    those values (each once) and ``kinds`` the kinds among them.  ``shared`` is
    False when the snapshot certainly holds no share-group membership (then
    the exporters skip the walk that collects them)."""

    values: Sequence[Any] | dict[int, str | int | bytes]
    members: list[Any]
    kinds: set[int]
    codec: str
    total: int | None = None
    shared: bool = True


#: ints longer than this many bits are refused up front: str() and JSON cannot
#: write them (sys.get_int_max_str_digits is 4300 digits by default)
MAX_INT_BITS = _MAX_INT_BITS = 14000


def native_types(values: Any, types: set[type] | None = None) -> set[type] | None:
    """The types among ``values`` (``types``, when known) if all can be stored
    as they are, else None."""
    if types is None:
        types = set(map(type, values))
    if not types <= _KINDS.keys():
        return None
    if int in types and any(v.bit_length() > _MAX_INT_BITS for v in values if type(v) is int):
        return None
    return types


def plan(snap: Any, encode: Encode | None) -> Plan:
    """Check the subscribers of ``snap`` before anything is written.

    Fast path: when every object the snapshot's registry knows (a superset of
    its subscribers) is a str, int or bytes, nothing more is needed.  Otherwise
    (or with ``encode``) the snapshot's distinct subscribers are collected and
    checked one by one (:func:`prepare_table`).
    """
    from cstrie.export.source import distinct_ids

    if encode is None:
        # The live registry list serves the lookups: the snapshot pins its ids.
        # Share groups have registry ids too (their Group objects): they are no
        # subscribers, and there are none when no membership exists.
        live = snap._reg.live_objects()
        present = set(map(type, live))
        shared = Group in present
        if shared:
            live = [o for o in live if type(o) is not Group]
            present.discard(Group)
        types = native_types(live, present)
        if types is not None:
            return Plan(snap._reg.objects, live, {_KINDS[t] for t in types}, "native", None, shared)
    ids, total, memberships = distinct_ids(snap)
    table = prepare_table(ids, snap._reg.objects, encode)
    return Plan(
        dict(zip(table.ids, table.values, strict=True)),
        table.values,
        table.kind_set,
        table.codec,
        total,
        memberships > 0,
    )


# ------------------------------------------------------------------ dialect
_DIALECT_FIELDS = {f.name: f for f in dataclasses.fields(Dialect)}
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "separator": (str,),
    "single": (str, type(None)),
    "multi": (str, type(None)),
    "multi_min": (int,),
    "multi_last_only": (bool,),
    "strict_wildcards": (bool,),
    "topic_wildcards": (bool,),
    "empty_topic": (bool,),
    "empty_words": (bool,),
    "dollar_rule": (bool,),
    "max_bytes": (int, type(None)),
    "forbid_nul": (bool,),
    "forbidden": (str,),
    "max_levels": (int, type(None)),
    "share_prefix": (str, type(None)),
}
assert set(_FIELD_TYPES) == set(_DIALECT_FIELDS), "update _FIELD_TYPES with Dialect"
#: Fields added after files were first written.  A file without one was written
#: when the rule did not exist, so it loads with the field's default, which is
#: the old behaviour (no forbidden characters, no level limit) -- also for a
#: built-in dialect whose current value differs: an old "amqp" file loads
#: without AMQP's 256-word limit and an old "nats" file without its whitespace
#: rule, so every pattern it holds still loads and every topic matches as before.
#: An "mqtt" file from before share groups loads without ``share_prefix``: its
#: patterns were ordinary filters (``$share/g/x`` included) and stay so.
_ADDED_FIELDS = ("forbidden", "max_levels", "share_prefix")
assert all(_DIALECT_FIELDS[f].default is not dataclasses.MISSING for f in _ADDED_FIELDS)


def dialect_to_json(d: Dialect) -> dict[str, Any]:
    """Every field of ``d`` as a JSON-ready dict."""
    return dataclasses.asdict(d)


def dialect_from_json(obj: object) -> Dialect:
    """The :class:`Dialect` written by :func:`dialect_to_json` (strict: every
    field, no unknown one; only the fields added later may be missing, see
    ``_ADDED_FIELDS``)."""
    if not isinstance(obj, dict):
        raise FormatError("the dialect is not a JSON object")
    missing = sorted(set(_FIELD_TYPES) - set(obj) - set(_ADDED_FIELDS))
    extra = sorted(set(obj) - set(_FIELD_TYPES))
    if missing or extra:
        raise FormatError(
            f"the dialect record has missing fields {missing} / unknown fields {extra}"
        )
    for name, types in _FIELD_TYPES.items():
        if name not in obj:
            continue
        v = obj[name]
        if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
            raise FormatError(f"dialect field {name!r} has the wrong type: {v!r}")
    try:
        d = Dialect(**obj)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"invalid dialect in file: {exc}") from None
    # The engine's form of the dialect: a limit past its integer types is
    # refused here, not by the trie the loader makes next.
    for name in ("max_bytes", "max_levels"):
        v = obj.get(name)
        if v is not None and v >= 1 << 64:
            raise FormatError(
                f"dialect field {name!r} = {v} is past the engine's limit (2**64 - 1)"
            )
    from cstrie._binding import NativeDialect

    try:
        NativeDialect(d)
    except (OverflowError, TypeError, ValueError) as exc:
        raise FormatError(f"invalid dialect in file: {exc}") from None
    return d


# ------------------------------------------------------------ JSON values
def json_value(v: str | int | bytes) -> object:
    """A stored subscriber as a JSON value: str and int as themselves, bytes as
    ``{"bytes": "<base64>"}``, and a str that is not valid UTF-8 text (it holds
    a lone surrogate) as ``{"text": "<base64 of its UTF-8, surrogates passed
    through>"}``: JSON's own ``\\u`` escapes would read a lone high surrogate
    followed by a lone low one back as one character."""
    if type(v) is bytes:
        return {"bytes": base64.b64encode(v).decode("ascii")}
    if type(v) is str and not _is_utf8_text(v):
        return {"text": surrogate_text_b64(v)}
    return v


def _is_utf8_text(v: str) -> bool:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def surrogate_text_b64(v: str) -> str:
    """The ``{"text": ...}`` payload of a str with lone surrogates."""
    return base64.b64encode(v.encode("utf-8", "surrogatepass")).decode("ascii")


def value_from_json(v: object, what: str = "subscriber") -> str | int | bytes:
    """The inverse of :func:`json_value` (strict: raises ``FormatError``
    naming the value a ``what``)."""
    if type(v) is str or type(v) is int:
        return v
    if type(v) is dict and len(v) == 1:
        b = v.get("bytes")
        if isinstance(b, str):
            try:
                return base64.b64decode(b, validate=True)
            except (binascii.Error, ValueError):
                pass
        t = v.get("text")
        if isinstance(t, str):
            try:
                return base64.b64decode(t, validate=True).decode("utf-8", "surrogatepass")
            except (binascii.Error, ValueError):
                pass
    raise FormatError(
        f"invalid {what} value {v!r}: expected a string, an integer, "
        '{"bytes": "<base64>"} or {"text": "<base64>"}'
    )
