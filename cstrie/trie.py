"""The public classes: :class:`Trie` (writable) and :class:`Snapshot` (read-only).

Both are thin wrappers over an engine handle (see :mod:`cstrie._binding`) and a
:class:`~cstrie.registry.Registry` that maps subscriber objects to engine ids.

Complexities (n = subscriptions, w = words in the topic, m = matches):

=====================  =====================================================
``subscribe``          O(w + log n) copies; lock-free in the engine
``unsubscribe``        O(w + log n)
``lookup``/``match``   O(w * b + m), b = wildcard branches tried per level;
                       below AMQP ``#``: each node once, O(w / 64) per node
``has_subscribers``    stops at the first match
``snapshot``/``copy``  O(1) in the engine (``copy`` also copies the handle's
                       per-subscriber count table, a C-level dict copy)
``len``                exact; O(changed paths) after the first call
``route``              a lookup, plus O(log m) per matching share group of m
                       members (sticky: O(m)); lock-free
=====================  =====================================================

Example::

    >>> from cstrie import Trie
    >>> t = Trie()                      # AMQP rules
    >>> t.subscribe("stock.*.nyse", "alice")
    True
    >>> t.subscribe("stock.#", "bob")
    True
    >>> sorted(t.lookup("stock.ibm.nyse"))
    ['alice', 'bob']
    >>> s = t.snapshot(); t.unsubscribe("stock.#", "bob")
    True
    >>> t.lookup("stock.ibm.nyse"), sorted(s.lookup("stock.ibm.nyse"))
    (['alice'], ['alice', 'bob'])
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import accumulate
from typing import Any

from cstrie import _binding as nb
from cstrie._hotpath import Reader, Writer
from cstrie.dialect import Dialect, resolve_dialect
from cstrie.groups import GroupTable, Shared, check_group, split_shared
from cstrie.matcher import Matcher
from cstrie.registry import Counts, Registry

__all__ = ["Snapshot", "Trie"]


def _split_any(dialect: Dialect, pattern: object) -> tuple[Any, str | None]:
    """(filter, group name or None) of a pattern given as a str (in the
    dialect's share syntax or not) or a Shared."""
    if isinstance(pattern, Shared):
        return pattern.pattern, check_group(dialect, pattern.group)
    if isinstance(pattern, str):
        return split_shared(dialect, pattern)
    return pattern, None


class _ReadMethods:
    """The read methods :class:`Trie` and :class:`Snapshot` share, beside the
    hot ones their C base serves (``lookup``, ``has_subscribers``, ``match``,
    ``lookup_many``, ``route``, ``route_by_group``, ``snapshot``: see
    ``cstrie._hotpath.Reader``)."""

    __slots__ = ()

    _h: Any
    _dialect: Dialect
    _reg: Registry

    @property
    def dialect(self) -> Dialect:
        """The :class:`~cstrie.Dialect` this trie matches with."""
        return self._dialect

    def route_many(
        self, topics: Iterable[str], keys: Iterable[object] | None = None
    ) -> list[list[Any]]:
        """``[self.route(t, k) for t, k in zip(topics, keys)]`` (``keys`` None: each
        topic is its own key).  Each row is one route (one walk)."""
        route = self.route  # type: ignore[attr-defined]
        if keys is None:
            return [route(t) for t in topics]
        return [route(t, k) for t, k in zip(topics, keys, strict=True)]

    def _shared_args(self, pattern: object, group: object) -> tuple[Any, str | None]:
        """(filter, group name or None) of a subscription written either way;
        ValueError/TypeError for a bad group or both ways at once.  The C
        ``subscribe``/``unsubscribe`` ask it when a pattern may name a group."""
        pattern, named = _split_any(self._dialect, pattern)
        if named is not None:
            if group is not None:
                raise ValueError(
                    f"pattern names group {named!r} and group={group!r} is given as well"
                )
            return pattern, check_group(self._dialect, named)
        if group is None:
            return pattern, None
        return pattern, check_group(self._dialect, group)

    def intersecting(self, filt: str) -> list[tuple[str, Any]]:
        """Every (pattern, subscriber) pair whose pattern shares at least one
        topic with the filter ``filt`` (NATS ``ReverseMatch``: which
        subscriptions overlap a new one?).  Exact, like
        :meth:`Dialect.intersects <cstrie.dialect.Dialect.intersects>`; share-group
        memberships are not included.

        The engine walks the filter down one snapshot of the trie (stored
        literal words probed, stored wildcards read), keeping per level the
        positions of the filter still alive; each pattern it reaches is
        confirmed with the exact relation, O(m * n).  Patterns the walk
        leaves out share no topic with the filter.

        >>> import cstrie
        >>> t = cstrie.Trie("mqtt")
        >>> for f, s in [("a/+/c", 1), ("a/b/#", 2), ("x/#", 3), ("$SYS/#", 4)]:
        ...     _ = t.subscribe(f, s)
        >>> sorted(t.intersecting("a/b/+"))
        [('a/+/c', 1), ('a/b/#', 2)]
        >>> sorted(t.intersecting("+/#"))    # "+/#" never matches a $ topic
        [('a/+/c', 1), ('a/b/#', 2), ('x/#', 3)]
        """
        from cstrie.relations import intersects

        data = nb.encode(filt, "pattern", self._dialect)
        snap = self.snapshot()  # type: ignore[attr-defined]  # the C base's
        out: list[tuple[str, Any]] = []
        for chunk in nb.reverse_query(snap._h, data, self._dialect, filt, filters=True):
            for raw, _ in chunk:
                pattern = raw.decode()
                if intersects(self._dialect, filt, pattern):
                    out.extend((pattern, s) for s in snap.subscribers(pattern))
        return out

    def subscribers(self, pattern: str | Shared, group: str | None = None) -> list[Any]:
        """The subscribers of exactly ``pattern`` (wildcards taken literally as
        pattern words, not expanded); with a group (``group=``, a
        :class:`~cstrie.groups.Shared` or MQTT's ``$share/g/filter``), the
        group's members on that filter.  O(w + s) for s subscribers."""
        filt, name = self._shared_args(pattern, group)
        data = nb.encode(filt, "pattern", self._dialect)
        objs = self._reg.objects
        if name is not None:
            g = self._group_table.find(name)
            if g is None:
                return []
            gid = self._reg.existing_id(g)
            if gid is None:
                return []

            def members() -> list[Any]:
                ids = nb.share_members(self._h, data, gid, self._dialect, filt)
                return list(map(objs.__getitem__, ids))

            got: list[Any] = self._reg.stable(members)
            return got

        def read() -> list[Any]:
            return list(map(objs.__getitem__, nb.subscribers(self._h, data, self._dialect, filt)))

        out: list[Any] = self._reg.stable(read)
        return out

    @property
    def _group_table(self) -> GroupTable:
        table: GroupTable = self._reg.groups
        return table

    def group_policy(self, group: str) -> str:
        """The selection policy of ``group``: ``"round-robin"`` (the default),
        ``"random"`` or ``"sticky"``.  Shared by the trie's family."""
        return self._group_table.policy(check_group(self._dialect, group))

    def set_group_policy(self, group: str, policy: str) -> None:
        """Choose how ``group`` picks its member for each message (see
        :mod:`cstrie.groups`, rule 4).  Takes effect for every route that starts
        after it returns; the setting stays when the group empties."""
        self._group_table.set_policy(check_group(self._dialect, group), policy)

    # ------------------------------------------------------------ whole trie
    def _entries(self) -> Iterator[tuple[str | Shared, list[Any]]]:
        for key, _, subs in self._entries_with_ids():
            yield key, subs

    def _entries_with_ids(self) -> Iterator[tuple[str | Shared, int, list[Any]]]:
        """(pattern or Shared(filter, group), group id or 0, subscribers)."""
        token = self._reg.pin()
        try:
            objs = self._reg.objects
            for pat, share, ids in nb.iterate_shared(self._h):
                key: str | Shared = pat.decode()
                if share:
                    key = Shared(key, objs[share].name)  # type: ignore[arg-type]
                yield key, share, [objs[i] for i in ids]
        finally:
            self._reg.unpin(token)

    def __iter__(self) -> Iterator[tuple[str | Shared, Any]]:
        """(pattern, subscriber) pairs of a consistent snapshot taken now; a
        group membership comes as (:class:`~cstrie.groups.Shared`, member)."""
        for pat, subs in self._entries():
            for s in subs:
                yield pat, s

    def subscriptions(self) -> dict[str | Shared, list[Any]]:
        """pattern -> subscribers, from one consistent snapshot; group
        memberships under :class:`~cstrie.groups.Shared` (filter, group) keys."""
        out: dict[str | Shared, list[Any]] = {}
        for pat, subs in self._entries():
            out.setdefault(pat, []).extend(subs)
        return out

    def __len__(self) -> int:
        """The number of (pattern, subscriber) pairs (exact, consistent)."""
        return nb.length(self._h)

    def __bool__(self) -> bool:
        return len(self) > 0

    def stats(self) -> dict[str, int]:
        """Counts for a dashboard: subscriptions, patterns, subscribers, nodes by
        kind, lookups served, engine memory.  O(n): walks a snapshot."""
        s = nb.stats(self._h)
        return {
            "subscriptions": s["pairs"],
            "patterns": s["patterns"],
            "subscribers": self._distinct_subscribers(s["share_groups"] > 0),
            "nodes": s["inodes"] + s["cnodes"] + s["snodes"] + s["tnodes"] + s["lnodes"],
            "inodes": s["inodes"],
            "cnodes": s["cnodes"],
            "snodes": s["snodes"],
            "tnodes": s["tnodes"],
            "lnodes": s["lnodes"],
            "set_nodes": s["setnodes"],
            "max_depth": s["max_depth"],
            "lookups": s["lookups"],
            "generation": s["generation"],
            "shared_subscriptions": s["share_pairs"],
            "shared_filters": s["share_groups"],
            "engine_bytes": nb.live_bytes(),
        }

    def _distinct_subscribers(self, shares: bool) -> int:
        return len({i for _, _, ids in nb.iterate_shared(self._h) for i in ids})

    # ---------------------------------------------------------------- export
    def export(
        self,
        dest: Any,
        format: str | None = None,
        *,
        encode: Callable[[Any], str | int | bytes] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Write a consistent snapshot of the subscriptions to ``dest`` (a path or a
        binary file) as JSON Lines, Parquet or the compact binary form; the format
        defaults from the suffix.  See :func:`cstrie.export.export` and
        docs/export.md.  Returns the number of pairs written."""
        from cstrie.export.writer import export

        return export(self, dest, format, encode, progress=progress)

    def tree(self, max_depth: int | None = None, *, subscribers: bool = True) -> dict[str, Any]:
        """The subscriptions as nested dicts (word -> children, with counts and
        subscribers at each node), from one snapshot.  See :func:`cstrie.tree.tree`."""
        from cstrie.tree import tree

        return tree(self, max_depth, subscribers=subscribers)

    # ---------------------------------------------------------------- debug
    def check_invariants(self, strict: bool = True) -> None:
        """Run the engine's invariant checker; raise AssertionError if broken.

        ``strict`` also checks what holds only when no update is in flight
        (no tombs, no pending GCAS, everything pruned)."""
        msg = nb.check_invariants(self._h, strict)
        if msg is not None:
            raise AssertionError(f"cstrie invariant broken: {msg}")

    def dump(self) -> str:
        """An indented dump of the engine's nodes (for debugging)."""
        return nb.dump(self._h)

    def matcher(self) -> Matcher:
        """A :class:`~cstrie.matcher.Matcher` for the calling thread: this
        trie's lookup methods, bound once (see docs/free-threading.md)."""
        return Matcher(self)  # type: ignore[arg-type]  # a mixin of Trie and Snapshot

    # snapshot() is served by the C base (Reader.snapshot): the pin, the
    # engine snapshot and the new Snapshot in one call.


class Snapshot(_ReadMethods, Reader):
    """A read-only, consistent view of a :class:`Trie` at one moment.

    Has every read method of :class:`Trie`, ``len`` and iteration.  Taking one is
    O(1); it shares nodes with the trie, which copies paths lazily as it changes.
    """

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("take a Snapshot with Trie.snapshot()")

    @classmethod
    def _make(cls, ptr: Any, dialect: Dialect, reg: Registry, token: int) -> Snapshot:
        """A Snapshot that owns the engine handle ``ptr`` and the pin ``token``
        (its C base releases both when it is deallocated)."""
        try:
            self = Reader.__new__(cls)
            self._bind(ptr, nb.address(ptr), dialect, reg, None, token)
        except BaseException:
            nb.free(ptr)
            reg.unpin(token)
            raise
        return self

    def copy(self) -> Trie:
        """A writable trie starting from this snapshot's contents (O(1) engine)."""
        # The scan can fail (out of memory): do it before the engine copy exists,
        # so that a failure leaves nothing to free.
        counts = self._reg.new_counts(nb.pair_counts(self._h))
        try:
            ptr = nb.snapshot_ptr(self._h, False)
        except BaseException:
            self._reg.discard_handle(counts.serial)
            raise
        return Trie._make(ptr, self._dialect, self._reg, counts)

    def __repr__(self) -> str:
        return f"<cstrie.Snapshot dialect={self._dialect.name} pairs={len(self)}>"


class Trie(_ReadMethods, Writer):
    """A concurrent subscription trie: topic patterns -> subscribers.

    ``dialect`` is ``"amqp"`` (default), ``"mqtt"``, ``"nats"`` or a
    :class:`~cstrie.Dialect`.  Subscribers are any hashable objects, told apart
    by ``==``/``hash``.  Every method is safe to call from many threads at once;
    lookups take no lock.
    """

    __slots__ = ()

    _counts: Counts

    def __init__(self, dialect: str | Dialect = "amqp") -> None:
        d = resolve_dialect(dialect)
        ptr = nb.new_trie_ptr(d)
        try:
            reg = Registry()
            # The C base owns the handle and its counts from here on, and
            # releases both when the trie is deallocated.
            self._bind(ptr, nb.address(ptr), d, reg, reg.new_counts(), 0)
        except BaseException:
            nb.free(ptr)
            raise

    @classmethod
    def from_pairs(
        cls, pairs: Iterable[tuple[str, Hashable]], dialect: str | Dialect = "amqp"
    ) -> Trie:
        """A new trie holding exactly ``pairs`` (duplicates count once).

        Built bottom-up in the engine with no path copying: several times
        faster than subscribing the pairs one by one.  An invalid pattern
        raises ``ValueError``/``TypeError`` and nothing is built.  O(n log n).
        """
        d = resolve_dialect(dialect)
        patterns: list[bytes] = []
        subs: list[Hashable] = []
        shared: list[tuple[str, str, Hashable]] = []
        for pattern, sub in pairs:
            filt, name = _split_any(d, pattern)
            if name is not None:
                nb.encode(filt, "pattern", d)
                hash(sub)
                shared.append((filt, name, sub))
                continue
            patterns.append(nb.encode(filt, "pattern", d))
            subs.append(sub)
        if shared:  # memberships join after the bulk build (it knows no groups)
            plain = cls.from_pairs(
                [(p.decode(), s) for p, s in zip(patterns, subs, strict=True)], d
            )
            for filt, name, sub in shared:
                plain.subscribe(filt, sub, group=name)
            return plain
        index: dict[Hashable, int] = {}
        ids = [index.setdefault(s, len(index) + 1) for s in subs]
        offsets = nb.int64s([0, *accumulate(len(p) for p in patterns)])
        return cls.from_buffers(b"".join(patterns), offsets, nb.uint64s(ids), list(index), d)

    @classmethod
    def from_buffers(
        cls,
        data: Any,
        offsets: Any,
        refs: Any,
        subscribers: list[Any],
        dialect: str | Dialect = "amqp",
    ) -> Trie:
        """Bulk-build from columnar buffers, with no per-pair Python work.

        ``data`` holds the UTF-8 patterns back to back; ``offsets`` is an int64
        buffer of n+1 offsets into it (Arrow's large-string layout); ``refs`` a
        uint64 buffer of n 1-based indexes into ``subscribers`` (distinct
        hashable objects).  Used by :func:`cstrie.load` and the Spark pipeline.

        Nothing in the buffers is trusted: a buffer of the wrong kind raises
        ``TypeError``; ``ValueError`` names the first offset that is negative,
        decreases or points past the end of ``data`` (the engine checks the
        whole table before it reads a pattern), else the first pair whose
        reference is out of range or whose pattern is invalid.  Nothing is
        built then.
        """
        d = resolve_dialect(dialect)
        with nb.Views() as v:
            blob, off, ids = v.table(data, offsets, refs)
            reg = Registry()
            reg.adopt(subscribers)
            ptr, per_id = nb.build(d, blob, off, ids, len(subscribers))
        try:
            counts = reg.new_counts(per_id)
        except BaseException:
            nb.free(ptr)
            raise
        return cls._make(ptr, d, reg, counts)

    @classmethod
    def _make(cls, ptr: Any, dialect: Dialect, reg: Registry, counts: Counts) -> Trie:
        """A Trie that owns the engine handle ``ptr`` and ``counts`` (its C base
        releases both when it is deallocated)."""
        try:
            self = Writer.__new__(cls)
            self._bind(ptr, nb.address(ptr), dialect, reg, counts, 0)
        except BaseException:
            nb.free(ptr)
            reg.discard_handle(counts.serial)
            raise
        return self

    # subscribe() and unsubscribe() are served by the C base (Writer).
    def subscribe_many(self, pairs: Iterable[tuple[str, Hashable]]) -> int:
        """Subscribe many (pattern, subscriber) pairs in one engine call per chunk.

        Returns how many pairs were new.  All patterns are validated and all
        subscribers hashed before anything changes: an invalid one raises
        (``ValueError``/``TypeError``) and leaves the trie as it was.  The
        pairs are then subscribed in order, in one C loop; other threads'
        updates and lookups go on meanwhile.  O(total words).
        """
        items = list(pairs)
        d = self._dialect
        shared: list[tuple[str, str, Hashable]] = []
        if d.share_prefix is not None or any(isinstance(p, Shared) for p, _ in items):
            plain: list[tuple[str, Hashable]] = []
            for p, sub in items:
                filt, name = self._shared_args(p, None)
                if name is None:
                    plain.append((filt, sub))
                else:
                    nb.validate(self._h, nb.encode(filt, "pattern", d), d, "pattern", filt)
                    hash(sub)
                    shared.append((filt, name, sub))
            items = plain
        added = self._subscribe_many_plain(items)
        for filt, name, sub in shared:
            added += self.subscribe(filt, sub, group=name)
        return added

    def _subscribe_many_plain(self, items: list[tuple[str, Hashable]]) -> int:
        added: int = self._subscribe_many([p for p, _ in items], [s for _, s in items])
        return added

    def clear(self) -> None:
        """Remove every subscription (atomically: one snapshot's worth)."""
        # Everything that can fail is done before the engine empties the trie.
        while True:
            cleared = nb.snapshot(self._h, True)
            groups = nb.iterate_shared(cleared)
            if nb.clear_if(self._h, cleared):
                break

        def ids() -> Iterator[int]:
            for _, share, members in groups:
                yield from members
                if share:  # the group's id was counted once per membership
                    yield from [share] * len(members)

        self._reg.removed_ids(self._counts, ids())

    def _distinct_subscribers(self, shares: bool) -> int:
        if shares:  # the counts hold group ids too: count the members' ids
            return super()._distinct_subscribers(shares)
        return len(self._counts)

    def set_cache(self, budget_bytes: int) -> None:
        """Keep the answers of recently looked-up topics, within ``budget_bytes``.

        The cache is exact: a ``subscribe``/``unsubscribe`` first drops the
        cached answers of precisely the cached topics its pattern matches
        (found with a topic index of the cached topics), then changes the
        trie, so no lookup ever returns an answer the trie no longer has, and
        an update elsewhere leaves the cached topics it cannot match alone.
        Empty answers are cached too.  A topic is cached on its second miss
        (so traffic that never repeats a topic pays no fill).  ``clear()``
        drops every answer.  Each
        entry is charged its ids, its topic and its key in the index (64
        bytes plus 128 per level of the topic); a fill that does not fit
        evicts (CLOCK) or is not cached.

        Off by default (``0``).  It pays on skewed traffic (the same topics
        again and again): a hit costs a hash, a bucket and the copy of the
        ids.  Every update of a trie with a cache pays a query of the cached
        topics.  ``lookup`` and ``lookup_many`` read it; ``route``, ``match``,
        ``has_subscribers`` and snapshots walk the trie.  See docs/design.md, "Result cache".

        >>> t = Trie("mqtt"); t.set_cache(1 << 20); t.subscribe("a/+", 1)
        True
        >>> [t.lookup("a/b") for _ in range(3)], t.cache_stats()["hits"]
        ([[1], [1], [1]], 1)
        """
        nb.cache_set(self._h, budget_bytes)

    def cache_stats(self) -> dict[str, int]:
        """The result cache's counters: ``hits``, ``misses``, ``fills``,
        ``skipped`` (answers that did not fit), ``invalidated`` (entries an
        update dropped), ``evicted``, ``clears``, ``entries`` (valid now),
        ``bytes`` (charged now) and ``budget``.  All 0 without a cache."""
        return nb.cache_stats(self._h)

    def compact(self) -> None:
        """Remove structural leftovers (tombs) that a cleanup could not remove
        because memory ran out.  Never needed for correct answers.  O(n)."""
        nb.compact(self._h)

    def copy(self) -> Trie:
        """An independent writable trie with the same subscriptions (O(1) engine)."""
        # C: the counts and the engine copy are made with every stripe lock of
        # the family held (no update in between, no Python code under them).
        address, counts = self._copy()
        ptr = nb.handle_of(address)
        return Trie._make(ptr, self._dialect, self._reg, counts)

    def __copy__(self) -> Trie:
        return self.copy()

    def __repr__(self) -> str:
        return f"<cstrie.Trie dialect={self._dialect.name} pairs={len(self)}>"


nb.configure_fast_path(Snapshot)
