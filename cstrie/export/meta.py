"""The header record every format writes, and the steps shared by loaders.

Two kinds of file share the formats: *subscription* files (a
:class:`~cstrie.Trie`: header ``"format": "cstrie-<fmt>"``) and *topic index*
files (a :class:`~cstrie.TopicIndex`: ``"format": "cstrie-topics-<fmt>"``,
versioned on their own, see :data:`TOPICS_VERSION`).  The format name tells
them apart, so a reader that knows only subscription files (cstrie before
topic files) refuses a topic file with its FormatError ("not a cstrie <fmt>
export (header format is 'cstrie-topics-<fmt>')") instead of loading its
topics as patterns.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from cstrie._version import __version__
from cstrie.dialect import Dialect
from cstrie.export.codec import Decode, dialect_from_json, dialect_to_json
from cstrie.export.errors import FormatError

if TYPE_CHECKING:
    from cstrie.topics import TopicIndex
    from cstrie.trie import Trie

__all__ = [
    "GROUPS_SINCE",
    "JSON_ERRORS",
    "SUBSCRIPTIONS",
    "TOPICS",
    "TOPICS_VERSION",
    "VERSION",
    "Classes",
    "Membership",
    "build_trie",
    "check_any_meta",
    "check_meta",
    "check_policies",
    "check_topic_meta",
    "content_of",
    "make_meta",
    "make_topic_meta",
]

#: The version written by this cstrie into every format's header.  Loaders read
#: every version up to it and refuse newer ones with a FormatError (version 1
#: readers, cstrie before share groups, refuse version 2 files that way).
#:
#: 1. (pattern, subscriber) pairs.
#: 2. also share-group memberships (filter, member, group name) and the policy
#:    of each group that has one; a version 1 file has none.
VERSION = 2
#: The first version whose files may hold share-group memberships.
GROUPS_SINCE = 2

#: The version of the topic index files (``"format": "cstrie-topics-<fmt>"``),
#: counted apart from :data:`VERSION`.
#:
#: 1. (topic, value) records and a dialect.
TOPICS_VERSION = 1

#: What a file holds, as :func:`content_of` names it.
SUBSCRIPTIONS, TOPICS = "subscriptions", "topics"

#: A membership read from a file: (filter, 1-based index into the file's
#: subscriber values, group name).
Membership = tuple[str, int, str]

Progress = Callable[[int, int], None]


class Classes(NamedTuple):
    """The classes a loaded file becomes, which :func:`cstrie.export.load` hands
    to the readers: ``Trie.export`` and ``TopicIndex.export`` import the
    formats, so the formats do not import the classes."""

    trie: type[Trie]
    topic_index: type[TopicIndex]


def make_meta(fmt: str, dialect: Dialect, codec: str, **extra: Any) -> dict[str, Any]:
    return {
        "format": f"cstrie-{fmt}",
        "version": VERSION,
        "dialect": dialect_to_json(dialect),
        "subscriber_codec": codec,
        "writer": f"cstrie {__version__}",
        **extra,
    }


def make_topic_meta(fmt: str, dialect: Dialect, codec: str, **extra: Any) -> dict[str, Any]:
    """The header of a topic index file (``value_codec`` where a subscription
    file has ``subscriber_codec``)."""
    return {
        "format": f"cstrie-topics-{fmt}",
        "version": TOPICS_VERSION,
        "dialect": dialect_to_json(dialect),
        "value_codec": codec,
        "writer": f"cstrie {__version__}",
        **extra,
    }


def content_of(meta: object, fmt: str) -> str:
    """:data:`TOPICS` when ``meta`` is the header of a topic index file of
    format ``fmt``, else :data:`SUBSCRIPTIONS` (:func:`check_meta` then says
    whether it is a valid one)."""
    if isinstance(meta, dict) and meta.get("format") == f"cstrie-topics-{fmt}":
        return TOPICS
    return SUBSCRIPTIONS


def _check_header(
    meta: object, fmt: str, name: str, newest: int, codec_key: str
) -> tuple[Dialect, str]:
    if not isinstance(meta, dict):
        raise FormatError(f"the {fmt} header is not a JSON object")
    if meta.get("format") != name:
        raise FormatError(f"not a cstrie {fmt} export (header format is {meta.get('format')!r})")
    version = meta.get("version")
    if type(version) is not int or version < 1:
        raise FormatError(f"invalid format version {version!r}")
    if version > newest:
        raise FormatError(
            f"format version {version} is newer than this cstrie reads (up to {newest}); "
            "upgrade cstrie"
        )
    codec = meta.get(codec_key)
    if codec not in ("native", "user"):
        raise FormatError(f"invalid {codec_key} {codec!r}")
    return dialect_from_json(meta.get("dialect")), codec


def check_meta(meta: object, fmt: str) -> tuple[Dialect, str]:
    """Validate the header of a subscription file; returns its dialect and
    subscriber codec."""
    return _check_header(meta, fmt, f"cstrie-{fmt}", VERSION, "subscriber_codec")


def check_topic_meta(meta: object, fmt: str) -> tuple[Dialect, str]:
    """Validate the header of a topic index file; returns its dialect and
    value codec."""
    return _check_header(meta, fmt, f"cstrie-topics-{fmt}", TOPICS_VERSION, "value_codec")


def check_any_meta(meta: object, fmt: str) -> tuple[Dialect, str, str]:
    """Validate a header of either kind: (dialect, codec, :func:`content_of`)."""
    content = content_of(meta, fmt)
    check = check_topic_meta if content == TOPICS else check_meta
    return (*check(meta, fmt), content)


def version_of(meta: dict[str, Any]) -> int:
    """The format version of a header that :func:`check_meta` accepted."""
    version: int = meta["version"]
    return version


def check_policies(obj: object) -> dict[str, str] | None:
    """The ``{group name: policy name}`` record of a file (strict), None when
    the file has none."""
    from cstrie.groups import POLICIES

    if obj is None:
        return None
    if not isinstance(obj, dict) or not all(
        type(k) is str and type(v) is str and v in POLICIES for k, v in obj.items()
    ):
        raise FormatError(
            f"invalid group policies {obj!r}: expected {{group name: one of {sorted(POLICIES)}}}"
        )
    return obj


def check_distinct(values: list[Any]) -> None:
    """A subscriber table read from a file must not list a value twice.  (The
    readers that number the values they parse, JSON Lines' and Parquet's
    dictionary encoding, make them distinct and need no check.)"""
    if len(set(values)) != len(values):
        raise FormatError("the subscriber table lists a subscriber twice (corrupt file)")


def decode_values(
    values: list[Any], codec: str, decode: Decode | None, what: str = "subscribers"
) -> list[Any]:
    """Apply ``decode`` to the stored (distinct) subscriber values (``what``:
    how the error names them)."""
    if codec == "user" and decode is None:
        raise ValueError(
            f"the {what} in this file were written with encode=; pass decode= to "
            "load them (or decode=cstrie.export.keep_encoded for the stored values)"
        )
    if decode is None:
        return values
    return [decode(v) for v in values]


#: What :func:`json.loads` raises for text that is not JSON (ValueError, its
#: UnicodeDecodeError included) or that nests deeper than the interpreter's
#: recursion limit (RecursionError): a file's JSON is refused for either.
JSON_ERRORS = (ValueError, RecursionError)


def check_offsets(offsets: array[int], data_len: int, what: str = "pattern") -> None:
    """The n+1 offsets of a file's byte table: they must start at 0, never
    decrease and end at ``data_len``, so every item lies inside the data.
    Checked whole before anything reads an item (the engine's bulk build
    checks them again)."""
    if not offsets or offsets[0] != 0 or offsets[-1] != data_len:
        raise FormatError(f"{what} offsets do not cover the {what} data (corrupt file)")
    if not all(map(operator.le, offsets, islice(offsets, 1, None))):
        k = next(k for k in range(len(offsets) - 1) if offsets[k] > offsets[k + 1])
        raise FormatError(
            f"{what} offsets decrease at {what} {k} ({offsets[k]} > {offsets[k + 1]}; corrupt file)"
        )


def check_utf8(data: bytes | memoryview, offsets: array[int], what: str = "pattern") -> None:
    """Each pattern (``what``) must be valid UTF-8 on its own.  ``offsets``
    must have passed :func:`check_offsets`."""
    raw = bytes(data)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what} data is not valid UTF-8 at byte {exc.start}") from None
    if raw.isascii():
        return
    # Valid as a whole; make sure no pattern starts inside a character.
    for k, o in enumerate(islice(offsets, 0, len(offsets) - 1)):
        if 0 <= o < len(raw) and raw[o] & 0xC0 == 0x80:
            raise FormatError(f"{what} {k} starts inside a UTF-8 character (corrupt file)")


def build_trie(
    trie_cls: type[Trie],
    data: Any,
    offsets: Any,
    refs: Any,
    subscribers: list[Any],
    dialect: Dialect,
    memberships: list[Membership] | None = None,
    policies: dict[str, str] | None = None,
) -> Any:
    """``trie_cls.from_buffers`` (``trie_cls`` is :class:`~cstrie.Trie`) with
    the file's errors reported as FormatError, then the share-group memberships
    (each member ``subscribers[ref - 1]``, joined one by one: the bulk build
    knows no groups) and the groups' policies (when given, exactly the groups
    of the memberships)."""
    from cstrie.groups import Shared

    try:
        trie = trie_cls.from_buffers(data, offsets, refs, subscribers, dialect)
    except ValueError as exc:
        if "appears twice" in str(exc):
            raise ValueError(f"decode made two subscribers equal: {exc}") from None
        raise FormatError(f"the file's subscriptions are invalid: {exc}") from None
    if memberships:
        n = len(subscribers)
        subscribe = trie.subscribe
        for k, (filt, ref, group) in enumerate(memberships):
            if not 1 <= ref <= n:
                raise FormatError(
                    f"membership {k} refers to subscriber #{ref}, outside 1..{n} (corrupt file)"
                )
            try:
                subscribe(Shared(filt, group), subscribers[ref - 1])
            except (ValueError, TypeError) as exc:
                raise FormatError(
                    f"the file's group membership {k} ({filt!r} in group {group!r}) is "
                    f"invalid: {exc}"
                ) from None
    if policies is not None:
        named = {group for _, _, group in memberships or ()}
        if set(policies) != named:
            raise FormatError(
                f"the file's group policies name the groups {sorted(policies)}, its "
                f"memberships {sorted(named)}"
            )
    for name, policy in (policies or {}).items():
        try:
            trie.set_group_policy(name, policy)
        except (ValueError, TypeError) as exc:
            raise FormatError(f"invalid group policy for {name!r}: {exc}") from None
    return trie
