"""The topic index: stored topics with a value each, queried by filter.

A :class:`TopicIndex` answers the question a subscription trie answers, the
other way round: given a *filter*, which of the stored *topics* does it match?
That is what a broker asks for retained messages (a client subscribes to
``sensors/+/temp``: which retained topics does it get?) and for stored
subjects (nats-server's subject tree)::

    >>> from cstrie.topics import TopicIndex
    >>> retained = TopicIndex("mqtt")
    >>> retained.put("sensors/kitchen/temp", b"21.5")
    True
    >>> retained["sensors/attic/temp"] = b"17.0"
    >>> retained["$SYS/broker/uptime"] = b"42"
    >>> sorted(retained.query("sensors/+/temp"))
    [('sensors/attic/temp', b'17.0'), ('sensors/kitchen/temp', b'21.5')]
    >>> retained.count("#")          # the $ rule: "#" does not see $SYS topics
    2
    >>> retained.get("sensors/kitchen/temp")
    b'21.5'

The keys live in the same lock-free engine as :class:`cstrie.Trie` (a trie
of literal words; ``native/topic_index.c``): ``put``/``remove``/``get`` are
lock-free and linearizable, O(levels); :meth:`~TopicIndex.snapshot` is O(1);
and a query walks a snapshot taken at the call, so it answers for that
moment whatever is written while it is being read, and streams its results
in chunks (``query("#")`` over millions of topics never builds one list).  A
query costs what the filter's literal words leave open: a literal word is a
hash probe, a wildcard reads its whole level.

Values are any Python objects.  The engine stores a 64-bit id per topic;
the index maps ids to values (:class:`_Values`).  An id is never reused, and
a replaced or removed value is released once no snapshot or query that may
still see it is open.

``export`` writes the records of one snapshot to a topic index file (JSON
Lines, Parquet or binary; :mod:`cstrie.export`, values ``str``/``int``/
``bytes`` or ``encode=``) that :func:`cstrie.load` reads back as a
:class:`TopicIndex`, and ``tree`` gives the nested-dict view that
:mod:`cstrie.tree` renders (docs/topic-index.md, "Export, load and tree
views")::

    >>> import io, cstrie
    >>> buf = io.BytesIO(); retained.export(buf, "binary")
    3
    >>> sorted(cstrie.load(io.BytesIO(buf.getvalue())).query("sensors/#"))
    [('sensors/attic/temp', b'17.0'), ('sensors/kitchen/temp', b'21.5')]
    >>> retained.tree()["children"]["sensors"]["count"]
    2
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from cstrie import _binding as nb
from cstrie.dialect import Dialect, resolve_dialect

__all__ = ["TopicIndex", "TopicSnapshot"]

_MISSING: Any = object()


class _Values:
    """The values of one index family (an index and its snapshots) by id.

    Rules:

    1. Every id the engine holds (in the live index or in an open snapshot
       or query) is in ``by_id``.  An id is new for every put and never
       reused, so an id read from the engine names one value for ever.
    2. A put adds its id before the engine stores it; an id that left the
       live index (replaced or removed) is *retired* with the sequence number
       after that engine call, and dropped from ``by_id`` once no pin taken
       before it is open.  A pin's number is taken before its engine snapshot,
       so a snapshot that can hold a retired id has a pin older than the
       retirement.
    3. A reader of the live index that finds an id gone from ``by_id`` read
       it before a later update retired it: it reads again (``get``).

    One lock guards the sequence, the pins and the retired list; it is held
    for a few dictionary steps, never across an engine call.
    """

    __slots__ = ("by_id", "ids", "lock", "pins", "retired", "seq")

    def __init__(self) -> None:
        self.by_id: dict[int, object] = {}
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.seq = 0
        self.pins: dict[int, int] = {}  # token -> sequence number when pinned
        # (sequence number, id), in increasing sequence numbers
        self.retired: deque[tuple[int, int]] = deque()

    def add(self, value: object) -> int:
        with self.lock:
            ident = next(self.ids)
            self.by_id[ident] = value
        return ident

    def drop(self, ident: int) -> None:
        """ident never reached the engine (its put failed)."""
        with self.lock:
            self.by_id.pop(ident, None)

    def retire(self, ident: int) -> None:
        with self.lock:
            self.seq += 1
            if self.pins:
                self.retired.append((self.seq, ident))
            else:
                self.by_id.pop(ident, None)

    def pin(self) -> int:
        with self.lock:
            self.seq += 1
            self.pins[self.seq] = self.seq
            return self.seq

    def unpin(self, token: int) -> None:
        """Drop a pin, and the retired ids no open pin is older than: a
        prefix of ``retired`` (numbers grow), so O(ids freed + 1) amortised."""
        with self.lock:
            self.pins.pop(token, None)
            oldest = next(iter(self.pins), None)  # pins are added in number order
            retired = self.retired
            while retired and (oldest is None or retired[0][0] < oldest):
                self.by_id.pop(retired.popleft()[1], None)


class _Reader:
    """What :class:`TopicIndex` and :class:`TopicSnapshot` share."""

    __slots__ = ("__weakref__", "_dialect", "_handle", "_values")

    _handle: Any
    _dialect: Dialect
    _values: _Values

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    def _key(self, topic: object) -> bytes:
        return nb.encode(topic, "topic", self._dialect)

    def _value_of(self, ident: int) -> object:
        return self._values.by_id[ident]

    def get(self, topic: str, default: Any = None) -> Any:
        """The value stored under ``topic``, else ``default``.  O(levels).

        >>> idx = TopicIndex("mqtt"); idx["a/b"] = 1
        >>> idx.get("a/b"), idx.get("a/c", 0)
        (1, 0)
        """
        key = self._key(topic)
        while True:
            ident = nb.topic_get(self._handle, key, self._dialect, topic)
            if ident is None:
                return default
            try:
                return self._value_of(ident)
            except KeyError:
                continue  # replaced since it was read (rule 3): read again

    def __getitem__(self, topic: str) -> Any:
        value = self.get(topic, _MISSING)
        if value is _MISSING:
            raise KeyError(topic)
        return value

    def __contains__(self, topic: object) -> bool:
        return self.get(topic, _MISSING) is not _MISSING  # type: ignore[arg-type]

    def __len__(self) -> int:
        """The number of stored topics.  O(n) (a walk of the index)."""
        return nb.length(self._handle)

    def items(self) -> Iterator[tuple[str, Any]]:
        """Every (topic, value), from a snapshot taken now (streamed)."""
        token = self._values.pin()
        try:
            groups = nb.iterate(self._handle)
        except BaseException:
            self._values.unpin(token)
            raise
        return _Stream(self._values, token, _pairs_of(groups, self._values))

    def __iter__(self) -> Iterator[str]:
        return (topic for topic, _ in self.items())

    def query(self, filt: str) -> Iterator[tuple[str, Any]]:
        """Every stored (topic, value) that the filter ``filt`` matches.

        The answer is the index's at the call (a snapshot is taken now; an
        invalid filter raises ``ValueError`` now).  Results are streamed in
        chunks, each topic once, in no particular order.  Cost: the part of
        the index the filter's literal words leave open.

        >>> idx = TopicIndex("amqp")
        >>> for t in ("a.b.c", "a.x.c", "a.b", "q.b.c"): idx[t] = t.upper()
        >>> sorted(idx.query("a.*.c")), sorted(t for t, _ in idx.query("#.c"))
        ([('a.b.c', 'A.B.C'), ('a.x.c', 'A.X.C')], ['a.b.c', 'a.x.c', 'q.b.c'])
        """
        data = nb.encode(filt, "pattern", self._dialect)
        token = self._values.pin()
        try:
            chunks = nb.reverse_query(self._handle, data, self._dialect, filt)
        except BaseException:
            self._values.unpin(token)
            raise
        return _Stream(self._values, token, _results_of(chunks, self._values))

    def count(self, filt: str) -> int:
        """How many stored topics the filter matches (no values are read).

        >>> idx = TopicIndex("nats")
        >>> for t in ("a.b", "a.b.c", "a"): idx[t] = None
        >>> idx.count("a.>"), idx.count("a.*"), idx.count(">")
        (2, 1, 3)
        """
        data = nb.encode(filt, "pattern", self._dialect)
        return nb.reverse_count(self._handle, data, self._dialect, filt)

    def snapshot(self) -> TopicSnapshot:
        """A read-only :class:`TopicSnapshot` of this moment.  O(1)."""
        raise NotImplementedError  # TopicIndex and TopicSnapshot define it

    def export(
        self,
        dest: Any,
        format: str | None = None,
        *,
        encode: Callable[[Any], str | int | bytes] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Write the (topic, value) records of a snapshot taken now (O(1):
        writers may carry on) to ``dest`` (a path or a binary file) as JSON
        Lines, Parquet or the compact binary form; the format defaults from the
        suffix.  Values must be str, int or bytes unless ``encode`` (object ->
        str|int|bytes) is given (``TypeError`` before anything is written).
        Returns the number of topics written.  O(n), memory O(distinct values
        + one chunk).  :func:`cstrie.load` gives a :class:`TopicIndex` back.
        See :func:`cstrie.export.export` and docs/export.md.

        >>> import io, cstrie
        >>> idx = TopicIndex("nats"); idx["a.b"] = 1; idx["a.c"] = 1
        >>> buf = io.BytesIO(); idx.export(buf, "binary")
        2
        >>> sorted(cstrie.load(io.BytesIO(buf.getvalue())).items())
        [('a.b', 1), ('a.c', 1)]
        """
        from cstrie.export.writer import export

        return export(self, dest, format, encode, progress=progress)

    def tree(self, max_depth: int | None = None, *, values: bool = False) -> dict[str, Any]:
        """The topics as nested dicts (word -> children, with the number of
        topics below each node and, with ``values=True``, the value of the
        topic ending there), from one snapshot; :func:`cstrie.tree.render_text`
        and the other renderers draw it.  O(n * levels).  See
        :func:`cstrie.tree.tree`.

        >>> idx = TopicIndex("mqtt"); idx["a/b"] = 1; idx["a/c"] = 2
        >>> from cstrie.tree import render_text
        >>> print(render_text(idx.tree()))
        (root)  2
        └── a  2
            ├── b  1  (1 here)
            └── c  1  (1 here)
        """
        from cstrie.tree import tree

        return tree(self, max_depth, values=values)

    def stats(self) -> dict[str, int]:
        """Engine node counts (``pairs`` is the number of topics)."""
        return nb.stats(self._handle)

    def check_invariants(self, strict: bool = True) -> None:
        """Raise ``AssertionError`` if the engine's structure is broken."""
        msg = nb.check_invariants(self._handle, strict)
        if msg is not None:
            raise AssertionError(msg)

    def dump(self) -> str:
        """An indented dump of the engine's nodes (for debugging)."""
        return nb.dump(self._handle)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._dialect.name} with {len(self)} topics>"


def _results_of(
    chunks: Iterator[list[tuple[bytes, int]]], values: _Values
) -> Iterator[tuple[str, Any]]:
    by_id = values.by_id
    for chunk in chunks:
        for raw, ident in chunk:
            yield raw.decode(), by_id[ident]


def _pairs_of(
    groups: Iterator[tuple[bytes, list[int]]], values: _Values
) -> Iterator[tuple[str, Any]]:
    by_id = values.by_id
    for raw, ids in groups:
        topic = raw.decode()
        for ident in ids:
            yield topic, by_id[ident]


class _Stream:
    """An iterator that holds a pin on the values while it is open: released
    when it is exhausted, closed or collected."""

    __slots__ = ("__weakref__", "_done", "_it")

    def __init__(self, values: _Values, token: int, it: Iterator[tuple[str, Any]]) -> None:
        self._it = it
        self._done = weakref.finalize(self, values.unpin, token)

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> tuple[str, Any]:
        try:
            return next(self._it)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        """Stop: release the values now; the iterator yields nothing more."""
        self._it = iter(())
        self._done()


class TopicSnapshot(_Reader):
    """A read-only view of a :class:`TopicIndex` at one moment (O(1) to
    take, unaffected by later writes)."""

    __slots__ = ("_pin",)
    _pin: Any

    def __init__(self) -> None:
        raise TypeError("take a TopicSnapshot with TopicIndex.snapshot()")

    @classmethod
    def _make(cls, index: TopicIndex) -> TopicSnapshot:
        snap = cls.__new__(cls)
        values = index._values
        token = values.pin()
        try:
            snap._handle = nb.snapshot(index._handle, True)
        except BaseException:
            values.unpin(token)
            raise
        snap._dialect = index._dialect
        snap._values = values
        snap._pin = weakref.finalize(snap, values.unpin, token)
        return snap

    def snapshot(self) -> TopicSnapshot:
        """This snapshot itself (it never changes)."""
        return self


class TopicIndex(_Reader):
    """A concurrent map from literal topics to values, queried by filter.

    ``dialect`` is ``"amqp"`` (the default), ``"mqtt"``, ``"nats"`` or a
    :class:`~cstrie.dialect.Dialect`; topics follow its topic rules (what
    :meth:`cstrie.Trie.lookup` accepts), filters its pattern rules.  Invalid
    text raises ``ValueError`` (``TypeError`` for a non-str) and changes
    nothing.  Every method may be called from any number of threads.

    A topic index knows no share groups: an MQTT ``$share/{name}/{filter}``
    given to :meth:`query` is an ordinary filter whose first level is the
    literal word ``$share`` (it matches stored ``$share/...`` topics only).
    MQTT 5 sends no retained messages for a shared subscription (section
    4.8.2); to query with the share's filter, split it first with
    :func:`cstrie.groups.split_shared`.
    """

    __slots__ = ()

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        self._dialect = resolve_dialect(dialect)
        self._handle = nb.new_handle(self._dialect)
        self._values = _Values()

    def put(self, topic: str, value: object) -> bool:
        """Store ``value`` under ``topic``: True if the topic is new, False if
        its previous value was replaced.  Lock-free in the engine, O(levels).

        >>> idx = TopicIndex("mqtt")
        >>> idx.put("a/b", 1), idx.put("a/b", 2), idx["a/b"]
        (True, False, 2)
        """
        key = self._key(topic)
        ident = self._values.add(value)
        try:
            new, old = nb.topic_put(self._handle, key, ident, self._dialect, topic)
        except BaseException:
            self._values.drop(ident)
            raise
        if not new:
            self._values.retire(old)
        return new

    def __setitem__(self, topic: str, value: object) -> None:
        self.put(topic, value)

    def pop(self, topic: str, default: Any = _MISSING) -> Any:
        """Remove ``topic`` and return its value (``default``, or
        ``KeyError``, when it is not stored)."""
        key = self._key(topic)
        old = nb.topic_remove(self._handle, key, self._dialect, topic)
        if old is None:
            if default is _MISSING:
                raise KeyError(topic)
            return default
        value = self._values.by_id[old]
        self._values.retire(old)
        return value

    def remove(self, topic: str) -> bool:
        """Remove ``topic``; True if it was stored."""
        return self.pop(topic, _MISSING_OK) is not _MISSING_OK

    def __delitem__(self, topic: str) -> None:
        self.pop(topic)

    def clear(self) -> None:
        """Remove every topic (one atomic step: a query sees all or none)."""
        old = nb.clear_take(self._handle)
        for _, ids in nb.iterate(old):
            for ident in ids:
                self._values.retire(ident)

    def snapshot(self) -> TopicSnapshot:
        """A read-only :class:`TopicSnapshot` of this moment.  O(1)."""
        return TopicSnapshot._make(self)


_MISSING_OK: Any = object()
