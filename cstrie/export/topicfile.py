"""What every format shares for topic index files (``cstrie-topics-<fmt>``).

A topic index file holds one :class:`~cstrie.TopicSnapshot`: its dialect and
its (topic, value) records, each topic once.  Values follow the subscriber
codec's rules (:mod:`cstrie.export.codec`): ``str``, ``int`` and ``bytes`` are
stored as they are, anything else needs ``encode``/``decode``.  Unlike
subscribers, values need not be distinct (many topics may share one) and
``encode`` need not be one-to-one.

Writing (:func:`plan`, :class:`ValueTable`): the formats walk the snapshot in
engine chunks (:func:`cstrie.export.source.chunks`: a topic snapshot's groups
are (topic, value id) pairs), turn each chunk's value ids into stored values
with :meth:`TopicPlan.stored` and, where the format keeps a table of distinct
values, number them with a :class:`ValueTable`.  Every value is checked before
a byte is written: when every object the index family holds (a superset of
the snapshot's values) is a ``str``, ``int`` or ``bytes`` that is one C-speed
pass; otherwise, or with ``encode``, a first walk of the snapshot checks (and
encodes) each distinct value object once.

Loading (:func:`build_index`): the topics as one UTF-8 blob with Arrow-style
offsets, each topic's 1-based reference into the distinct values, and the
values; the index is filled by engine puts (the engine checks every topic
against the dialect; an invalid or repeated topic is a
:class:`~cstrie.export.FormatError` and nothing is returned).

>>> from cstrie import TopicIndex
>>> from cstrie.export.topicfile import build_index
>>> idx = build_index(TopicIndex, b"a/bc/d", [0, 3, 6], [1, 1], ["v"], "mqtt")
>>> sorted(idx.items())
[('a/b', 'v'), ('c/d', 'v')]
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Callable, Sequence
from itertools import compress, islice, repeat
from typing import TYPE_CHECKING, Any

from cstrie import _binding as nb
from cstrie.dialect import Dialect, resolve_dialect
from cstrie.export.codec import (
    _KINDS,
    MAX_INT_BITS,
    Decode,
    Encode,
    encoded_kind,
    native_kind,
)
from cstrie.export.errors import FormatError
from cstrie.export.meta import decode_values
from cstrie.export.source import chunks

if TYPE_CHECKING:
    from cstrie.topics import TopicIndex

__all__ = ["TopicPlan", "ValueTable", "build_index", "plan"]

Stored = str | int | bytes


class TopicPlan:
    """How one export stores the values of a topic snapshot.

    :meth:`stored` gives the stored value of each engine id of a chunk;
    ``kinds`` are the kinds among the stored values (maybe more), ``members``
    the stored values (each value object once, maybe more: what Parquet checks
    its column type against), ``codec`` ``"native"`` or ``"user"`` and
    ``total`` the number of topics when a first walk counted them."""

    def __init__(
        self,
        stored: Callable[[Any], list[Stored]],
        kinds: set[int],
        members: list[Stored],
        codec: str,
        total: int | None,
    ) -> None:
        self.stored = stored
        self.kinds = kinds
        self.members = members
        self.codec = codec
        self.total = total


def plan(snap: Any, encode: Encode | None, members: bool = False) -> TopicPlan:
    """Check (and with ``encode``, encode) the values of the topic snapshot
    ``snap`` before anything is written.  ``TypeError`` names the first value
    that cannot be stored (or whose encoding is not a str, int or bytes).
    ``members``: collect the distinct stored values (Parquet checks its
    column type against them).

    O(values in the index family) at C speed, with no copy of them, when they
    are all storable as they are and ``encode`` is None; else one walk of the
    snapshot, calling ``encode`` once per distinct value object.  Memory
    O(distinct values).
    """
    values = snap._values
    by_id = values.by_id
    if encode is None:
        # C-speed passes over the family's values (a superset of the
        # snapshot's), under the lock that writers take to change by_id
        with values.lock:
            found = set(map(type, by_id.values()))
            ok = found <= _KINDS.keys()
            if ok and int in found:
                ints = compress(
                    by_id.values(), map(operator.is_, map(type, by_id.values()), repeat(int))
                )
                ok = max(map(int.bit_length, ints), default=0) <= MAX_INT_BITS
            distinct: list[Stored] = list(dict.fromkeys(by_id.values())) if ok and members else []
        if ok:

            def direct(ids: Any) -> list[Stored]:
                return list(map(by_id.__getitem__, ids))

            return TopicPlan(direct, {_KINDS[t] for t in found}, distinct, "native", None)
    # One stored value per value object, keyed by id(): the snapshot's pin
    # keeps every object it can reach alive, so no id() is reused meanwhile.
    cache: dict[int, Stored] = {}
    kinds: set[int] = set()
    total = 0
    for c in chunks(snap, per_pair=True):
        total += len(c.ids)
        for ident in c.ids:
            obj = by_id[ident]
            key = id(obj)
            if key in cache:
                continue
            if encode is None:
                kinds.add(native_kind(obj, "value"))
                cache[key] = obj
            else:
                v = encode(obj)
                kinds.add(encoded_kind(obj, v))
                cache[key] = v

    def cached(ids: Any) -> list[Stored]:
        return [cache[id(by_id[i])] for i in ids]

    return TopicPlan(
        cached, kinds, list(cache.values()), "native" if encode is None else "user", total
    )


class ValueTable:
    """Stored values -> 1, 2, 3, ... in order of first appearance (equal values
    share a number): the table of distinct values a file keeps once."""

    __slots__ = ("_index", "values")

    def __init__(self) -> None:
        self._index: dict[Stored, int] = {}
        self.values: list[Stored] = []

    def __len__(self) -> int:
        return len(self.values)

    def refs(self, stored: list[Stored]) -> array[int]:
        """The numbers of ``stored`` (an ``array('Q')``), new values numbered in
        order and appended to :attr:`values`."""
        index = self._index
        table = self.values
        out = array("Q")
        append = out.append
        for v in stored:
            # the value's kind is part of the key: 1, "1" and b"1" stay three
            # (they are unequal anyway; True can never be stored)
            k = index.get(v)
            if k is None:
                table.append(v)
                k = index[v] = len(table)
            append(k)
        return out


def build_index(
    index_cls: type[TopicIndex],
    data: Any,
    offsets: Sequence[int],
    refs: Sequence[int],
    values: list[Any],
    dialect: str | Dialect,
) -> Any:
    """A new ``index_cls`` (:class:`~cstrie.TopicIndex`) holding topic ``k`` =
    ``data[offsets[k]:offsets[k + 1]]`` (UTF-8) with value ``values[refs[k] - 1]``.

    Everything read from a file is checked: offsets (start at 0, never
    decrease, end at the data's length), references (in ``1..len(values)``),
    UTF-8, every topic against the dialect (by the engine) and that no topic
    comes twice; any fault is a :class:`FormatError` and no index is returned.
    O(n * levels): one engine put per topic.
    """
    d = resolve_dialect(dialect)
    n = len(refs)
    if len(offsets) != n + 1:
        raise FormatError(f"{len(offsets)} topic offsets for {n} topics (corrupt file)")
    view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    if offsets[0] != 0 or offsets[n] != len(view):
        raise FormatError("topic offsets do not cover the topic data (corrupt file)")
    if not all(map(operator.le, offsets, islice(offsets, 1, None))):
        raise FormatError("topic offsets decrease (corrupt file)")
    nv = len(values)
    if n and (min(refs) < 1 or max(refs) > nv):
        bad = next(k for k, r in enumerate(refs) if not 1 <= r <= nv)
        raise FormatError(
            f"topic {bad} refers to value #{refs[bad]}, outside 1..{nv} (corrupt file)"
        )
    raw = bytes(view)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"topic data is not valid UTF-8 at byte {exc.start}") from None
    if not raw.isascii():
        for k in range(n):  # no topic may start inside a character
            o = offsets[k]
            if o < len(raw) and raw[o] & 0xC0 == 0x80:
                raise FormatError(f"topic {k} starts inside a UTF-8 character (corrupt file)")
    index = index_cls(d)
    handle = index._handle
    failed = nb.topic_put_table(handle, raw, offsets)
    if failed is not None:
        k, r = failed
        text = raw[offsets[k] : offsets[k + 1]].decode("utf-8")
        if r == 0:
            raise FormatError(f"topic {text!r} is in the file twice (corrupt file)")
        try:
            nb.raise_status(r, d, "topic", text)
        except ValueError as exc:
            raise FormatError(f"the file's topic {k} is invalid: {exc}") from None
    store = index._values
    store.by_id.update(
        zip(range(1, n + 1), map(values.__getitem__, map((-1).__add__, refs)), strict=True)
    )
    store.ids = itertools.count(n + 1)
    return index


def load_values(values: list[Any], codec: str, decode: Decode | None) -> list[Any]:
    """The file's stored (distinct) values, decoded as the codec and ``decode``
    say (once per stored value)."""
    return decode_values(values, codec, decode, "values")
