"""kombu routing tables that keep an index in step (one per exchange type).

kombu's virtual channel keeps an exchange's bindings as a list of
``(routing_key, pattern, queue)`` rows (``state.exchanges[name]["table"]``) and
hands that list to the exchange type on every publish.  An exchange type that
routes through an index (a trie for topic, a content index for headers) needs
the index to hold exactly the rows of the table.  Two ways, shared here:

* :class:`IndexedTable`: a ``list`` subclass that updates its index under a
  lock on every mutation (transports that keep tables in their broker state:
  memory, SQS, filesystem, ...); a lookup then costs nothing extra.
* :class:`Mirror`: for a table rebuilt per publish from an external store
  (Redis ``SMEMBERS``) or one a stock channel made: the rows last seen and the
  index; :meth:`Mirror.sync` compares (C-level, O(n)) and applies only the
  difference.

An :class:`Index` subclass says what a row means: :meth:`Index.key` (the part
of the row routing depends on, e.g. ``(routing_key, queue)``), and
:meth:`Index.bind` / :meth:`Index.unbind` / :meth:`Index.new` on its engine.
It counts each key's multiplicity (kombu can hold equal rows twice when two
binds race past ``has_binding``), so only the first copy binds and only the
last unbinds.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, SupportsIndex, TypeVar, overload

__all__ = ["Index", "IndexedTable", "Mirror", "row"]

E = TypeVar("E")


def row(entry: Any) -> tuple[Any, Any, Any]:
    """``entry`` as a ``(routing_key, pattern, queue)`` triple; ``TypeError`` otherwise."""
    try:
        if isinstance(entry, (str, bytes)):
            raise TypeError
        rkey, pattern, queue = entry
    except (TypeError, ValueError):
        raise TypeError(
            "a kombu routing table entry must be a (routing_key, pattern, queue) triple, "
            f"not {entry!r}"[:300]
        ) from None
    return rkey, pattern, queue


class Index(Generic[E]):
    """An engine ``E`` holding the keys of a table's rows, with the multiplicity
    of each key (only positive counts kept).  Writers hold ``lock``; readers
    use ``engine`` without it.  Subclasses define :meth:`key`, :meth:`new`,
    :meth:`bind`, :meth:`unbind`."""

    __slots__ = ("counts", "engine", "lock")

    def __init__(self) -> None:
        self.engine: E = self.new()
        self.counts: dict[Any, int] = {}
        self.lock = threading.Lock()

    # ---------------------------------------------------------- subclass API
    def key(self, entry: Any) -> Any:
        """The hashable part of a table row that routing depends on."""
        raise NotImplementedError

    def new(self) -> E:
        """A fresh, empty engine."""
        raise NotImplementedError

    def bind(self, engine: E, key: Any) -> None:
        """Add ``key`` to ``engine``; ``ValueError``/``TypeError`` naming it if refused."""
        raise NotImplementedError

    def unbind(self, engine: E, key: Any) -> None:
        """Remove ``key`` (bound before) from ``engine``."""
        raise NotImplementedError

    # ------------------------------------------------------------- counting
    def add(self, keys: Iterable[Any]) -> None:
        """Count each key once more; bind the keys that were absent.

        All or nothing: a key the engine refuses raises its ``ValueError`` /
        ``TypeError`` with the engine and counts as they were.  O(k) engine
        updates for k keys.
        """
        counts, engine = self.counts, self.engine
        batch = Counter(keys)
        fresh: list[Any] = []
        for key in batch:
            if key in counts:
                continue
            try:
                self.bind(engine, key)
            except (TypeError, ValueError):
                for done in fresh:
                    self.unbind(engine, done)
                raise
            fresh.append(key)
        for key, n in batch.items():
            counts[key] = counts.get(key, 0) + n

    def remove(self, keys: Iterable[Any]) -> None:
        """Count each key once less; unbind the keys that reach zero.  Only for
        keys the mirrored table held (so counted here)."""
        counts = self.counts
        for key, n in Counter(keys).items():
            left = counts[key] - n
            if left < 0:  # pragma: no cover - a bookkeeping bug, never input
                raise AssertionError(f"binding {key!r} removed more often than added")
            if left:
                counts[key] = left
            else:
                del counts[key]
                self.unbind(self.engine, key)

    def reset(self) -> None:
        """Forget everything: a fresh engine replaces the old one in one store."""
        self.counts = {}
        self.engine = self.new()


class IndexedTable(list[Any]):
    """A kombu routing table (a ``list`` of ``(routing_key, pattern, queue)``
    rows) that keeps an :class:`Index` (``index_type``) in step.

    Every mutating list method (``append``, ``extend``, ``insert``,
    ``remove``, ``pop``, ``clear``, item and slice assignment and deletion,
    ``+=``, ``*=``) updates the index under the table's lock; ``sort`` and
    ``reverse`` change no routing.  A row the index refuses raises its
    ``ValueError`` / ``TypeError`` and the table stays as it was.

    Costs: ``append`` one index update; slice assignment and ``extend`` O(k)
    updates for k rows written or replaced; :meth:`discard` an O(n) C-level
    scan plus one update.
    """

    __slots__ = ("_index",)

    index_type: ClassVar[type[Index[Any]]]
    _index: Index[Any]

    def __init__(self, entries: Iterable[Any] = (), /) -> None:
        try:
            index = self._index
        except AttributeError:
            index = self._index = self.index_type()
        items = list(entries)
        key = index.key
        with index.lock:
            index.add(map(key, items))
            old = list(self)
            list.__init__(self, items)
            index.remove(map(key, old))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))

    def append(self, entry: Any, /) -> None:
        index = self._index
        with index.lock:
            index.add([index.key(entry)])
            list.append(self, entry)

    def extend(self, entries: Iterable[Any], /) -> None:
        items = list(entries)
        index = self._index
        with index.lock:
            index.add(map(index.key, items))
            list.extend(self, items)

    def __iadd__(self, entries: Iterable[Any], /) -> IndexedTable:  # type: ignore[misc]
        self.extend(entries)
        return self

    def insert(self, i: SupportsIndex, entry: Any, /) -> None:
        index = self._index
        with index.lock:
            index.add([index.key(entry)])
            list.insert(self, i, entry)

    def remove(self, entry: Any, /) -> None:
        index = self._index
        with index.lock:
            list.remove(self, entry)  # ValueError if absent: nothing changed
            index.remove([index.key(entry)])

    def discard(self, entry: Any, /) -> int:
        """Remove every entry equal to ``entry`` (kombu's unbind); return how many."""
        index = self._index
        with index.lock:
            n = 0
            while True:
                try:
                    list.remove(self, entry)
                except ValueError:
                    break
                n += 1
            if n:
                index.remove([index.key(entry)] * n)
            return n

    def pop(self, i: SupportsIndex = -1, /) -> Any:
        index = self._index
        with index.lock:
            entry = list.pop(self, i)
            index.remove([index.key(entry)])
            return entry

    def clear(self) -> None:
        index = self._index
        with index.lock:
            list.clear(self)
            index.reset()

    @overload
    def __setitem__(self, i: SupportsIndex, entry: Any, /) -> None: ...
    @overload
    def __setitem__(self, i: slice, entries: Iterable[Any], /) -> None: ...
    def __setitem__(self, i: SupportsIndex | slice, value: Any, /) -> None:
        index = self._index
        key = index.key
        with index.lock:
            if isinstance(i, slice):
                new = list(value)
                old = list.__getitem__(self, i)
            else:
                new = [value]
                old = [list.__getitem__(self, i)]  # IndexError: nothing changed
            index.add(map(key, new))
            try:
                list.__setitem__(self, i, new if isinstance(i, slice) else value)
            except BaseException:  # e.g. an extended slice of the wrong length
                index.remove(map(key, new))
                raise
            index.remove(map(key, old))

    def __delitem__(self, i: SupportsIndex | slice, /) -> None:
        index = self._index
        with index.lock:
            got = list.__getitem__(self, i)
            old = got if isinstance(i, slice) else [got]
            list.__delitem__(self, i)
            index.remove(map(index.key, old))

    def __imul__(self, n: SupportsIndex, /) -> IndexedTable:
        index = self._index
        with index.lock:
            items = list(self)
            list.__imul__(self, n)
            times = n.__index__()
            if times <= 0:
                index.reset()
            elif times > 1:
                index.add(map(index.key, items * (times - 1)))
        return self


class Mirror:
    """The index of a table that is not an :class:`IndexedTable` (a plain list,
    or a fresh list per publish from an external store), and the rows it
    reflects."""

    __slots__ = ("index", "rows")

    def __init__(self, index: Index[Any]) -> None:
        self.index = index
        self.rows: list[Any] = []

    def sync(self, table: Iterable[Any]) -> None:
        """Make the index reflect ``table``.  Caller holds ``index.lock``.

        O(n) C-level comparison when nothing changed; otherwise O(n) counting
        plus O(d) index updates for d changed rows.
        """
        rows = table if type(table) is list else list(table)
        if rows == self.rows:
            return
        key = self.index.key
        old = Counter(map(key, self.rows))
        new = Counter(map(key, rows))
        self.index.add((new - old).elements())
        self.index.remove((old - new).elements())
        self.rows = list(rows)


class Mirrors:
    """One :class:`Mirror` per exchange name, made on first use."""

    __slots__ = ("_by_name", "_lock", "_make")

    def __init__(self, make: type[Index[Any]]) -> None:
        self._make = make
        self._by_name: dict[Any, Mirror] = {}
        self._lock = threading.Lock()

    def get(self, exchange: Any) -> Mirror:
        mirror = self._by_name.get(exchange)
        if mirror is None:
            with self._lock:
                mirror = self._by_name.setdefault(exchange, Mirror(self._make()))
        return mirror
