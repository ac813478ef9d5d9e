"""``SelectorIndex``: subscriptions a trie cannot index, with the skipfilter's cache.

Subscribers hold *selectors* (exact topics, Redis globs, URI templates as
Mercure matches them, regular expressions: :mod:`cstrie.selectors.kinds`); a
lookup returns every subscriber with at least one selector matching the topic,
each once, in the order they first subscribed.

How (the "skipfilter"; docs/design.md, "Selector index", has the argument):

- Subscribers get ids in one ordered id space: a new subscriber takes the next
  id, ids are never reused (a compaction renumbers them in order, see below).
  Removing one selector of a subscriber that keeps others gives it a new id
  holding the others, so an id's selectors only ever grow until it dies.
- Every change makes a new immutable *version* (its sequence number, the live
  ids as a bitmap, the count of records) and publishes it with one reference
  store.  The tables under it only grow (records, per-selector subscribers,
  prefix buckets; each item carries the sequence number it was added at), so a
  reader that holds a version sees exactly that version's state: O(1)
  ``snapshot()``.
- A topic seen for the first time is evaluated once per distinct selector: the
  exact ones through a dict, the others filed under their literal prefix (at
  most :data:`PREFIX_CAP` characters) and probed once per prefix length in use,
  so selectors whose prefix the topic lacks are never tried.
- The result, a bitmap of ids plus the subscribers in order, goes into a cache
  with a byte budget (:mod:`cstrie.selectors.cache`), stamped with the version
  (its *watermark*).  A lookup of a cached topic at the same version copies the
  answer (no lock, no test).  At a later version it tests only the records
  added since the watermark, drops the ids that died (``& live``), and stamps
  the entry anew.
- Dead ids stay in the growing tables until dead ones outnumber live ones
  (:data:`COMPACT_MIN` at least); then the next write builds fresh tables with
  the live subscribers renumbered densely, in order, and empties the cache.

Writers serialise on one lock; no subscriber code (``__hash__``, ``__eq__``,
``__del__``) runs while it is held.  Readers take no lock but the cache's, and
only to store an answer.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from cstrie.selectors.automaton import DEFAULT_MAX_DFA_STATES, DEFAULT_MAX_STATES
from cstrie.selectors.cache import Entry, ResultCache
from cstrie.selectors.kinds import KINDS, Compiled, Selector, check_text, compile_selector

__all__ = ["COMPACT_MIN", "PREFIX_CAP", "SelectorIndex", "SelectorSnapshot"]

#: characters of a literal prefix used to file a selector
PREFIX_CAP = 32
#: dead ids a compaction waits for, at least
COMPACT_MIN = 1024


class _Sel:
    """One distinct selector, shared by every subscriber that holds it.

    ``records``: (seq, id) of each subscriber that took it, in order (only
    grows).  ``mask``: (seq, bitmap of those ids up to seq), replaced whole."""

    __slots__ = ("compiled", "created", "mask", "records")

    def __init__(self, compiled: Compiled, created: int) -> None:
        self.compiled = compiled
        self.created = created
        self.records: list[tuple[int, int]] = []
        self.mask: tuple[int, int] = (created, 0)


class _Tables:
    """What versions share until a compaction; every part only grows."""

    __slots__ = ("buckets", "dead", "exact", "records", "selectors", "subscriber")

    def __init__(self) -> None:
        self.records: list[tuple[int, int, _Sel]] = []  # (seq, id, selector), by seq
        self.subscriber: dict[int, Any] = {}  # id -> subscriber
        self.dead: dict[int, int] = {}  # id -> seq it died at
        self.exact: dict[str, list[_Sel]] = {}  # text -> the exact selectors (any kind)
        self.buckets: dict[str, list[_Sel]] = {}  # prefix[:PREFIX_CAP] -> selectors, by age
        self.selectors: dict[Selector, _Sel] = {}


class _Version:
    """One state of the index (immutable).  A record, a selector or an id
    belongs to it when its seq is <= ``seq`` (and an id is live when it has not
    died by then)."""

    __slots__ = ("lengths", "live", "n_records", "pairs", "seq", "subscribers", "tables")

    def __init__(
        self,
        tables: _Tables,
        seq: int,
        n_records: int,
        lengths: tuple[int, ...],
        live: int,
        pairs: int,
        subscribers: int,
    ) -> None:
        self.tables = tables
        self.seq = seq
        self.n_records = n_records
        self.lengths = lengths
        self.live = live
        self.pairs = pairs
        self.subscribers = subscribers


def _ids(bits: int) -> list[int]:
    """The set bits of ``bits``, ascending.  O(bit length) in C plus O(set bits)."""
    s = bin(bits)[:1:-1]
    out = []
    i = s.find("1")
    while i >= 0:
        out.append(i)
        i = s.find("1", i + 1)
    return out


def _sel_bits(sel: _Sel, v: _Version) -> int:
    """The ids live at ``v`` that hold ``sel``."""
    seq, mask = sel.mask
    if seq <= v.seq:
        # every record of sel up to v is in mask: nothing was added after v
        # unless seq > v.seq (records only grow, mask is replaced whole)
        return mask & v.live
    bits = 0
    for r, sid in sel.records:
        if r > v.seq:
            break
        bits |= 1 << sid
    return bits & v.live


def _evaluate(v: _Version, text: str, data: bytes) -> int:
    """The ids live at ``v`` with a selector matching the topic (first time)."""
    t = v.tables
    bits = 0
    for sel in t.exact.get(text, ()):
        if sel.created <= v.seq:
            bits |= _sel_bits(sel, v)
    n = len(text)
    buckets = t.buckets
    for length in v.lengths:
        if length > n:
            break
        group = buckets.get(text[:length])
        if group is None:
            continue
        for sel in group:
            if sel.created > v.seq:
                break
            if sel.compiled.match_all or sel.compiled.match(text, data):
                bits |= _sel_bits(sel, v)
    return bits


def _refresh(v: _Version, e: Entry, text: str, data: bytes) -> int:
    """The bitmap of a cached entry brought to ``v``: the records added since
    its watermark tested, the dead ids dropped."""
    bits = e.bits
    t = v.tables
    tested: dict[int, bool] = {}
    dead = t.dead
    for _seq, sid, sel in t.records[e.version.n_records : v.n_records]:
        if bits >> sid & 1:
            continue
        d = dead.get(sid)
        if d is not None and d <= v.seq:
            continue
        hit = tested.get(id(sel))
        if hit is None:
            c = sel.compiled
            hit = tested[id(sel)] = c.match_all or c.match(text, data)
        if hit:
            bits |= 1 << sid
    return bits & v.live


class _Counters:
    __slots__ = ("hits", "lookups")

    def __init__(self) -> None:
        self.hits = 0
        self.lookups = 0


class _Reader:
    """What an index and its snapshots share: lookups at a version."""

    _version: _Version
    max_topic_length: int

    def _topic(self, topic: object) -> tuple[str, bytes]:
        text = check_text(topic, "topic", self.max_topic_length)
        return text, text.encode("utf-8")

    def _answer(self, v: _Version, text: str, data: bytes) -> tuple[int, tuple[Any, ...] | None]:
        bits = _evaluate(v, text, data)
        return bits, None

    def lookup(self, topic: str) -> list[Any]:
        """Every subscriber with a selector matching ``topic``, each once, in
        the order they first subscribed."""
        v = self._version
        text, data = self._topic(topic)
        bits, result = self._answer(v, text, data)
        if result is not None:
            return list(result)
        sub = v.tables.subscriber
        return [sub[i] for i in _ids(bits)]

    def lookup_any(self, topics: Iterable[str]) -> list[Any]:
        """Every subscriber matching at least one of ``topics`` (an update
        published to several topics), each once, in order.  The index caches
        the answer for the tuple of topics too (as Mercure keys its cache by
        an update's topics), so a repeated update is one hit."""
        v = self._version
        pairs = [self._topic(t) for t in topics]
        if len(pairs) == 1:
            bits, result = self._answer(v, *pairs[0])
            if result is not None:
                return list(result)
        else:
            bits, result = self._answer_many(v, pairs)
            if result is not None:
                return list(result)
        sub = v.tables.subscriber
        return [sub[i] for i in _ids(bits)]

    def _answer_many(
        self, v: _Version, pairs: list[tuple[str, bytes]]
    ) -> tuple[int, tuple[Any, ...] | None]:
        bits = 0
        for text, data in pairs:
            bits |= _evaluate(v, text, data)
        return bits, None

    def has_subscribers(self, topic: str) -> bool:
        """Whether any selector matches ``topic``."""
        v = self._version
        text, data = self._topic(topic)
        return self._answer(v, text, data)[0] != 0

    def _live_items(self) -> Iterator[tuple[Any, list[Selector]]]:
        v = self._version
        t = v.tables
        per: dict[int, list[Selector]] = {}
        for seq, sid, sel in t.records[: v.n_records]:
            d = t.dead.get(sid)
            if seq <= v.seq and (d is None or d > v.seq):
                c = sel.compiled
                per.setdefault(sid, []).append(Selector(c.kind, c.text))
        for sid in sorted(per):
            yield t.subscriber[sid], per[sid]

    def subscriptions(self) -> dict[Any, list[Selector]]:
        """Subscriber -> its selectors, in id order (one consistent version)."""
        return dict(self._live_items())

    def __len__(self) -> int:
        """The number of (subscriber, selector) pairs."""
        return self._version.pairs

    def stats(self) -> dict[str, int]:
        """Counts for a dashboard.  O(selectors)."""
        v = self._version
        t = v.tables
        kinds = dict.fromkeys(KINDS, 0)
        live_sels = 0
        for sel in t.selectors.values():
            if sel.created <= v.seq and _sel_bits(sel, v):
                live_sels += 1
                kinds[sel.compiled.kind] += 1
        return {
            "subscriptions": v.pairs,
            "subscribers": v.subscribers,
            "selectors": live_sels,
            **{f"selectors_{k}": n for k, n in kinds.items()},
            "prefix_lengths": len(v.lengths),
            "buckets": len(t.buckets),
            "records": v.n_records,
            "dead_ids": sum(1 for d in t.dead.values() if d <= v.seq),
            "version": v.seq,
        }


class SelectorSnapshot(_Reader):
    """A read-only view of a :class:`SelectorIndex` at one version (O(1) to
    take).  Its lookups evaluate the selectors (they do not use the cache)."""

    def __init__(self, version: _Version, max_topic_length: int) -> None:
        self._version = version
        self.max_topic_length = max_topic_length

    def __repr__(self) -> str:
        return f"<cstrie.selectors.SelectorSnapshot pairs={len(self)}>"


class SelectorIndex(_Reader):
    """Subscribers and their selectors, matched against topics.

    Limits, each a constructor argument a broker sets (``ValueError`` past one,
    the index unchanged): ``max_selector_length`` and ``max_topic_length``
    (characters), ``max_selectors_per_subscriber``, ``max_automaton_states``
    (per template or regex: a bigger one is refused as too complex),
    ``max_dfa_states`` (DFA states a template or regex keeps built), and
    ``cache_bytes``, the budget of the result cache (0: no cache).

    >>> idx = SelectorIndex()
    >>> idx.add("alice", "https://example.com/books/{id}", "template")
    True
    >>> idx.add("bob", "news.*", "glob"); idx.add("bob", "https://example.com/books/1")
    True
    True
    >>> idx.lookup("https://example.com/books/1"), idx.lookup("news.eu")
    (['alice', 'bob'], ['bob'])
    """

    def __init__(
        self,
        *,
        cache_bytes: int = 64 << 20,
        max_selector_length: int = 4096,
        max_topic_length: int = 65536,
        max_selectors_per_subscriber: int = 1024,
        max_automaton_states: int = DEFAULT_MAX_STATES,
        max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    ) -> None:
        for name, value in (
            ("cache_bytes", cache_bytes),
            ("max_selector_length", max_selector_length),
            ("max_topic_length", max_topic_length),
            ("max_selectors_per_subscriber", max_selectors_per_subscriber),
            ("max_automaton_states", max_automaton_states),
            ("max_dfa_states", max_dfa_states),
        ):
            if type(value) is not int:
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 0 or (value == 0 and name != "cache_bytes"):
                raise ValueError(f"{name} must be positive, not {value}")
        self.max_selector_length = max_selector_length
        self.max_topic_length = max_topic_length
        self.max_selectors_per_subscriber = max_selectors_per_subscriber
        self.max_automaton_states = max_automaton_states
        self.max_dfa_states = max_dfa_states
        self._cache = ResultCache(cache_bytes)
        self._lock = threading.Lock()
        self._version = _Version(_Tables(), 0, 0, (), 0, 0, 0)
        self._next_id = 0
        # writer-side only (under the lock): ids by the subscriber's hash (ints:
        # no subscriber code runs on them), and the selectors of each live id
        self._by_hash: dict[int, tuple[tuple[Any, int], ...]] = {}
        self._held: dict[int, dict[Selector, _Sel]] = {}
        self._local = threading.local()
        self._counters: list[_Counters] = []

    # -- reads -----------------------------------------------------------
    def _count(self) -> _Counters:
        c: _Counters | None = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = _Counters()
            with self._lock:
                self._counters.append(c)
        return c

    def _answer(self, v: _Version, text: str, data: bytes) -> tuple[int, tuple[Any, ...] | None]:
        cache = self._cache
        if not cache.budget:
            return _evaluate(v, text, data), None
        counters = self._count()
        counters.lookups += 1
        e = cache.get(text)
        if e is not None:
            if e.version is v:  # the hot path: no lock, no test
                e.ref = True
                counters.hits += 1
                return e.bits, e.result
            if e.version.tables is v.tables and e.version.seq < v.seq:
                bits = _refresh(v, e, text, data)
                result = e.result if bits == e.bits else self._objects(v, bits)
                cache.put(text, Entry(v, bits, result, text))
                return bits, result
        bits = _evaluate(v, text, data)
        result = self._objects(v, bits)
        cache.put(text, Entry(v, bits, result, text))
        return bits, result

    def _answer_many(
        self, v: _Version, pairs: list[tuple[str, bytes]]
    ) -> tuple[int, tuple[Any, ...] | None]:
        cache = self._cache
        if not cache.budget:
            return super()._answer_many(v, pairs)
        key = tuple(text for text, _ in pairs)
        counters = self._count()
        counters.lookups += 1
        e = cache.get(key)
        if e is not None:
            if e.version is v:
                e.ref = True
                counters.hits += 1
                return e.bits, e.result
            if e.version.tables is v.tables and e.version.seq < v.seq:
                bits = 0
                for text, data in pairs:
                    bits |= _refresh(v, e, text, data)
                result = e.result if bits == e.bits else self._objects(v, bits)
                cache.put(key, Entry(v, bits, result, key))
                return bits, result
        bits = 0
        for text, data in pairs:
            bits |= _evaluate(v, text, data)
        result = self._objects(v, bits)
        cache.put(key, Entry(v, bits, result, key))
        return bits, result

    @staticmethod
    def _objects(v: _Version, bits: int) -> tuple[Any, ...]:
        sub = v.tables.subscriber
        return tuple(sub[i] for i in _ids(bits))

    def snapshot(self) -> SelectorSnapshot:
        """A read-only view of the index now.  O(1)."""
        return SelectorSnapshot(self._version, self.max_topic_length)

    def export(self, dest: Any, encode: Any = None) -> int:
        """Write the index (one O(1) snapshot) to ``dest``, a path or a binary
        file, as a selector file; the number of pairs.  ``encode``: object ->
        str|int|bytes for subscribers of other types (one-to-one).  See
        :mod:`cstrie.export.selectorfile`."""
        from cstrie.export import selectorfile

        return selectorfile.write(self.snapshot(), dest, encode)

    @classmethod
    def load(cls, src: Any, decode: Any = None, **limits: int) -> SelectorIndex:
        """A new index with the pairs of the selector file ``src`` (a path or a
        binary file), made with ``limits`` (this constructor's keyword
        arguments, and ``max_pairs``/``max_line_bytes`` for the file): a file
        past one is a :class:`~cstrie.export.FormatError` naming the line.

        >>> import io
        >>> idx = SelectorIndex(); idx.add(7, "h?llo", "glob")
        True
        >>> buf = io.BytesIO(); idx.export(buf)
        1
        >>> SelectorIndex.load(io.BytesIO(buf.getvalue())).lookup("hallo")
        [7]
        """
        from cstrie.export import selectorfile

        file_limits = {k: limits.pop(k) for k in ("max_pairs", "max_line_bytes") if k in limits}
        index = cls(**limits)  # the limits are checked before the file is read
        selectorfile.read(src, index, decode, **file_limits)
        return index

    def cache_stats(self) -> dict[str, int]:
        """The result cache's counters: ``bytes`` charged now (never above
        ``budget``), ``entries``, ``lookups`` and ``hits`` (answered from the
        cache without a test), ``fills`` (first answers kept), ``refreshes``
        (entries brought to a later version), ``skipped`` (answers larger than
        the budget), ``evicted``, ``clears``."""
        c = self._cache
        counters = list(self._counters)
        return {
            "budget": c.budget,
            "bytes": c.bytes,
            "entries": len(c),
            "lookups": sum(x.lookups for x in counters),
            "hits": sum(x.hits for x in counters),
            "fills": c.fills,
            "refreshes": c.refreshes,
            "skipped": c.skipped,
            "evicted": c.evicted,
            "clears": c.clears,
        }

    # -- writes ----------------------------------------------------------
    def _compile(self, selector: str, kind: str) -> tuple[Selector, Compiled]:
        if not isinstance(kind, str):
            raise TypeError(f"selector kind must be a str, not {type(kind).__name__}")
        if kind not in KINDS:
            raise ValueError(f"unknown selector kind {kind!r}; one of {', '.join(KINDS)}")
        text = check_text(selector, f"{kind} selector", self.max_selector_length)
        key = Selector(kind, text)
        known = self._version.tables.selectors.get(key)
        if known is not None:
            return key, known.compiled
        return key, compile_selector(kind, text, self.max_automaton_states, self.max_dfa_states)

    def _resolve(self, subscriber: Hashable) -> tuple[int, tuple[tuple[Any, int], ...], int | None]:
        """(hash, the candidates of that hash, the subscriber's id or None), all
        read without the lock (``__hash__`` and ``__eq__`` run here)."""
        h = hash(subscriber)
        cands = self._by_hash.get(h, ())
        for obj, sid in cands:
            if obj is subscriber or obj == subscriber:
                return h, cands, sid
        return h, cands, None

    def _publish(self, v: _Version, **changes: Any) -> None:
        fields = {s: getattr(v, s) for s in _Version.__slots__}
        fields.update(changes)
        self._version = _Version(**fields)

    def _file(self, t: _Tables, key: Selector, compiled: Compiled, seq: int) -> tuple[_Sel, int]:
        """The shared selector for ``key``, filed when new; and a new prefix
        length (-1: none)."""
        sel = t.selectors.get(key)
        if sel is not None:
            return sel, -1
        sel = _Sel(compiled, seq)
        t.selectors[key] = sel
        if compiled.exact:
            t.exact.setdefault(compiled.text, []).append(sel)
            return sel, -1
        p = compiled.prefix[:PREFIX_CAP]
        group = t.buckets.get(p)
        if group is None:
            t.buckets[p] = [sel]
            return sel, len(p)
        group.append(sel)
        return sel, -1

    @staticmethod
    def _take(sel: _Sel, sid: int, seq: int, t: _Tables) -> None:
        sel.records.append((seq, sid))
        sel.mask = (seq, sel.mask[1] | 1 << sid)
        t.records.append((seq, sid, sel))

    def add(self, subscriber: Hashable, selector: str, kind: str = "exact") -> bool:
        """Give ``subscriber`` the selector; ``True`` if it did not hold it.
        ``kind``: ``exact`` (default), ``glob``, ``template`` or ``regex``.
        Bad input raises ``TypeError``/``ValueError`` and changes nothing."""
        key, compiled = self._compile(selector, kind)
        while True:
            h, cands, sid = self._resolve(subscriber)
            with self._lock:
                dropped = self._maybe_compact()  # released after the lock
                if self._by_hash.get(h, ()) is not cands:
                    continue  # the subscribers of that hash changed meanwhile
                held = self._held.get(sid) if sid is not None else None
                if held is not None and key in held:
                    return False
                if held is not None and len(held) >= self.max_selectors_per_subscriber:
                    raise ValueError(
                        f"subscriber already holds {len(held)} selectors, the limit "
                        f"(max_selectors_per_subscriber={self.max_selectors_per_subscriber})"
                    )
                v = self._version
                t = v.tables
                seq = v.seq + 1
                live, subscribers = v.live, v.subscribers
                if sid is None:
                    sid = self._next_id
                    self._next_id += 1
                    t.subscriber[sid] = subscriber
                    self._by_hash[h] = (*cands, (subscriber, sid))
                    self._held[sid] = held = {}
                    live |= 1 << sid
                    subscribers += 1
                assert held is not None
                sel, new_length = self._file(t, key, compiled, seq)
                self._take(sel, sid, seq, t)
                held[key] = sel
                lengths = v.lengths
                if new_length >= 0 and new_length not in lengths:
                    lengths = tuple(sorted((*lengths, new_length)))
                self._publish(
                    v,
                    seq=seq,
                    n_records=len(t.records),
                    lengths=lengths,
                    live=live,
                    pairs=v.pairs + 1,
                    subscribers=subscribers,
                )
            del dropped
            return True

    def remove(self, subscriber: Hashable, selector: str, kind: str = "exact") -> bool:
        """Take the selector from ``subscriber``; ``True`` if it held it."""
        if kind not in KINDS:
            raise ValueError(f"unknown selector kind {kind!r}; one of {', '.join(KINDS)}")
        text = check_text(selector, f"{kind} selector", self.max_selector_length)
        key = Selector(kind, text)
        return self._drop(subscriber, key) > 0

    def remove_subscriber(self, subscriber: Hashable) -> int:
        """Take every selector from ``subscriber``; how many it held."""
        return self._drop(subscriber, None)

    def _drop(self, subscriber: Hashable, key: Selector | None) -> int:
        while True:
            h, cands, sid = self._resolve(subscriber)
            with self._lock:
                dropped = self._maybe_compact()  # released after the lock
                if self._by_hash.get(h, ()) is not cands:
                    continue
                held = self._held.get(sid) if sid is not None else None
                if held is None or (key is not None and key not in held):
                    return 0
                assert sid is not None
                v = self._version
                t = v.tables
                seq = v.seq + 1
                del self._held[sid]
                t.dead[sid] = seq
                live = v.live & ~(1 << sid)
                rest = [(k, s) for k, s in held.items() if k != key] if key is not None else []
                others = tuple(c for c in cands if c[1] != sid)
                subscribers = v.subscribers - 1
                if rest:  # a new id holds the selectors it keeps
                    nid = self._next_id
                    self._next_id += 1
                    t.subscriber[nid] = subscriber
                    others = (*others, (subscriber, nid))
                    kept: dict[Selector, _Sel] = {}
                    for k, s in rest:
                        self._take(s, nid, seq, t)
                        kept[k] = s
                    self._held[nid] = kept
                    live |= 1 << nid
                    subscribers += 1
                if others:
                    self._by_hash[h] = others
                else:
                    del self._by_hash[h]
                removed = 1 if key is not None else len(held)
                self._publish(
                    v,
                    seq=seq,
                    n_records=len(t.records),
                    live=live,
                    pairs=v.pairs - removed,
                    subscribers=subscribers,
                )
            del dropped
            return removed

    def _maybe_compact(self) -> list[Any]:
        """Under the lock: when dead ids outnumber live ones, fresh tables with
        the live subscribers renumbered in order, and an empty cache.  Returns
        what it dropped (release it after the lock)."""
        v = self._version
        t = v.tables
        if len(t.dead) < max(COMPACT_MIN, v.subscribers):
            return []
        fresh = _Tables()
        seq = v.seq + 1
        renumber: dict[int, int] = {}
        for sid in sorted(self._held):
            renumber[sid] = len(renumber)
            fresh.subscriber[renumber[sid]] = t.subscriber[sid]
        lengths: set[int] = set()
        held_new: dict[int, dict[Selector, _Sel]] = {}
        for sid, held in sorted(self._held.items()):
            nid = renumber[sid]
            mine: dict[Selector, _Sel] = {}
            for key, old_sel in held.items():
                sel, new_length = self._file(fresh, key, old_sel.compiled, seq)
                if new_length >= 0:
                    lengths.add(new_length)
                self._take(sel, nid, seq, fresh)
                mine[key] = sel
            held_new[nid] = mine
        self._held = held_new
        self._by_hash = {
            h: tuple((obj, renumber[sid]) for obj, sid in cands)
            for h, cands in self._by_hash.items()
        }
        self._next_id = len(renumber)
        self._publish(
            v,
            tables=fresh,
            seq=seq,
            n_records=len(fresh.records),
            lengths=tuple(sorted(lengths)),
            live=(1 << len(renumber)) - 1,
        )
        return [v, self._cache.clear()]

    def __repr__(self) -> str:
        return f"<cstrie.selectors.SelectorIndex pairs={len(self)}>"
