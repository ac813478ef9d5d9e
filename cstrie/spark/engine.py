"""Worker side of the Spark pipeline: compiled matchers, their cache, batch matching.

Nothing here imports pyspark: these functions run inside Spark's Python workers
(and in tests without Spark).

The cache
    :func:`get_matcher` keeps rebuilt matchers in a module-level LRU dict keyed by
    the payload's SHA-256 (computed once on the driver and shipped with the
    function).  Spark reuses Python workers between tasks
    (``spark.python.worker.reuse``, on by default), so each worker process builds
    a given matcher once: the first task that needs it reads the broadcast bytes,
    checks their hash and builds the engine in one C call; later tasks find it by
    key without touching the broadcast.  At most :data:`CACHE_SIZE` matchers are
    kept per process (env ``CSTRIE_SPARK_CACHE``).

The hot path
    :meth:`NativeMatcher.scan` hands the Arrow string column's buffers (offsets,
    data, validity bitmap and the array's offset) straight to ``cst_lookup_batch``
    and gets back (row index, pair index) arrays in chunks of at most ``cap``
    pairs, resuming inside a row when one row has more matches than that.  The
    output batches are then assembled with Arrow ``take`` kernels: no Python
    object is made per row or per match.

Filters against stored topics
    :func:`run_join` is the ``mapInArrow`` function of :func:`cstrie.spark.filter_join`:
    the broadcast is a small filter table (:class:`FilterSet`, cached like the
    matchers), and for each Arrow batch of topics (or group of batches, up to
    ``index_rows``) it builds a :class:`cstrie.topics.TopicIndex` of the
    batch's distinct topics and runs one ``query`` per distinct filter, so the
    work is the topics indexed plus what each filter's literal words leave
    open, never filters x topics.

Deliveries
    :class:`Router` is a :class:`cstrie.Trie` built from the same payload with
    its share-group memberships (subscribers are indexes into the payload's
    subscriber table), cached like the matchers.  The "deliver" mode calls
    ``route_by_group`` once per row: every ordinary subscriber once, then one
    member per matching group.  Round-robin counters live in the cached trie,
    so the rotation is per Python worker process (see ``docs/spark.md``).
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from cstrie.spark.payload import ContentPayload, Payload, digest, ipc_bytes, ipc_table

__all__ = [
    "CACHE_SIZE",
    "FilterSet",
    "JoinPlan",
    "MatcherBase",
    "NativeMatcher",
    "Plan",
    "Router",
    "build_count",
    "cache_info",
    "get_filters",
    "get_matcher",
    "run",
    "run_join",
]

CACHE_SIZE = int(os.environ.get("CSTRIE_SPARK_CACHE", "2"))
DEFAULT_CAP = 65536

# Statuses written by cst_lookup_batch: 0 valid, 1 null, < 0 a CST_E* code.
NULL = 1
INVALID = -1  # a content row's invalid topic

# Counter rows in the "counts" output (the pair column holds these negative keys).
COUNTERS = {
    "messages": -1,
    "matched": -2,
    "unmatched": -3,
    "null": -4,
    "invalid": -5,
    "matches": -6,
}


# ------------------------------------------------------------------ matchers
class MatcherBase:
    """What the pipeline needs of a matcher: built from a payload
    (``cls(payload)``, once per worker process and payload, :func:`get_matcher`),
    the payload's tables (:meth:`_tables`, which this constructor calls) and
    :meth:`scan`.  :class:`NativeMatcher` is the engine's;
    ``SparkMatcher(..., engine=cls)`` runs the same pipeline with another
    subclass (the benchmark's pure-Python baseline)."""

    payload: Payload
    patterns: Any
    subscribers: Any
    pair_pattern: np.ndarray
    pair_subscriber: np.ndarray

    def __init__(self, payload: Payload) -> None:
        self._tables(payload)

    def _tables(self, payload: Payload) -> None:
        self.payload = payload
        self.dialect = payload.dialect
        self.patterns = payload.patterns
        self.subscribers = payload.subscribers
        self.npairs = payload.npairs
        self.pair_pattern = payload.pair_pattern.to_numpy(zero_copy_only=False)
        self.pair_subscriber = payload.pair_subscriber.to_numpy(zero_copy_only=False)

    def pattern_column(self, pairs: np.ndarray) -> Any:
        """The pattern of each 0-based pair index."""
        return self.patterns.take(pa.array(self.pair_pattern[pairs]))

    def subscriber_column(self, pairs: np.ndarray) -> Any:
        return self.subscribers.take(pa.array(self.pair_subscriber[pairs]))

    def reason(self, topic: Any, status: int) -> str:
        """Why a row was rejected (only called for null and invalid rows)."""
        if status == NULL or topic is None:
            return "null topic"
        if isinstance(topic, bytes):
            try:
                topic = topic.decode("utf-8")
            except UnicodeDecodeError:
                return "topic is not valid UTF-8"
        try:
            self.dialect.split_topic(topic)
        except (ValueError, TypeError) as exc:
            return str(exc)
        return f"topic rejected by the engine (code {status})"

    def scan(
        self, column: Any, status: np.ndarray, cap: int = DEFAULT_CAP
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # pragma: no cover - abstract
        raise NotImplementedError

    # What the batch pipeline (:func:`run`) calls; a matcher of other
    # columns than one topic (:class:`ContentMatcher`) overrides these.
    def scan_batch(
        self, batch: Any, plan: Plan, status: np.ndarray
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(row indexes, pair indexes) of one Arrow batch, at most ``plan.cap``
        each; fills ``status`` (0 valid, :data:`NULL`, < 0 invalid)."""
        return self.scan(batch.column(plan.topic_col), status, plan.cap)

    def match_columns(self, pairs: np.ndarray, plan: Plan, types: list[Any]) -> list[Any]:
        """The new columns of the match rows of ``pairs`` (Arrow ``types``)."""
        return [
            _fit(self.pattern_column(pairs), types[0]),
            _fit(self.subscriber_column(pairs), types[1]),
        ]

    def reasons(self, batch: Any, plan: Plan, rows: np.ndarray, codes: list[int]) -> list[str]:
        """Why each of the rejected ``rows`` (statuses ``codes``) was rejected."""
        topics = batch.column(plan.topic_col).take(pa.array(rows)).to_pylist()
        return [self.reason(t, code) for t, code in zip(topics, codes, strict=True)]


class NativeMatcher(MatcherBase):
    """The engine built from a payload: engine id ``k + 1`` is pair ``k``."""

    def __init__(self, payload: Payload) -> None:
        import pyarrow.compute as pc

        from cstrie import _binding as nb

        self._tables(payload)
        n = self.npairs
        per_pair = pc.take(self.patterns, payload.pair_pattern).cast(pa.large_string())
        if per_pair.offset or per_pair.null_count:  # pragma: no cover - take() gives neither
            per_pair = pa.concat_arrays([per_pair])
        bufs = per_pair.buffers()
        ids = np.arange(1, n + 1, dtype=np.uint64)
        with nb.Views() as v:
            data = bufs[2] if bufs[2] is not None and bufs[2].size else b""
            offsets = bufs[1][: 8 * (n + 1)] if n else nb.int64s([0])
            blob, offsets, refs = v.table(data, offsets, ids)
            ptr, _ = nb.build(self.dialect, blob, offsets, refs, n, count=False)
        try:
            # Scans go through a read-only snapshot: frozen, so a row that
            # matches more subscribers than one output chunk holds is split
            # between chunks in a stable order (cst_lookup_batch), and chunks
            # stay bounded.
            self._h = nb.snapshot(ptr, True)
        finally:
            nb.free(ptr)
        self._batch = nb.BatchLookup(self._h)
        self._cap = 0

    def _buffers(self, cap: int) -> None:
        if cap != self._cap:
            self._rows = np.empty(cap, np.int64)
            self._ids = np.empty(cap, np.uint64)
            self._cap = cap

    def scan(
        self, column: Any, status: np.ndarray, cap: int = DEFAULT_CAP
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Match an Arrow string/binary column (Array or ChunkedArray).

        Yields (row indexes int64, 0-based pair indexes int64) with at most ``cap``
        entries each; fills ``status`` (int8, one per row: 0 valid, 1 null, < 0
        invalid) as it goes, complete when the generator is exhausted.
        """
        if isinstance(column, pa.ChunkedArray):
            base = 0
            for chunk in column.chunks:
                for rows, pairs in self.scan(chunk, status[base : base + len(chunk)], cap):
                    yield rows + base, pairs
                base += len(chunk)
            return
        nrows = len(column)
        if nrows == 0:
            return
        t = column.type
        if pa.types.is_string(t) or pa.types.is_binary(t):
            wide = False
        elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            wide = True
        else:
            raise TypeError(f"the topic column must hold strings, not {t}")
        if not status.flags.c_contiguous or status.dtype != np.int8:
            raise ValueError("status must be a contiguous int8 array")
        self._buffers(cap)
        rows, ids = self._rows, self._ids
        for got in self._batch.scan(
            column.buffers(), column.offset, nrows, wide, status, rows, ids
        ):
            yield rows[:got].copy(), ids[:got].astype(np.int64) - 1


class Router:
    """A :class:`cstrie.Trie` of the payload's ordinary pairs and share-group
    memberships, for deliveries: its subscribers are the indexes of the
    payload's subscriber table (0-based ints), its groups have the payload's
    policies.  Raises ``ValueError`` naming an invalid pattern, filter or
    group name."""

    def __init__(self, payload: Payload) -> None:
        import pyarrow.compute as pc

        from cstrie.groups import Shared
        from cstrie.trie import Trie

        self.payload = payload
        self.dialect = payload.dialect
        self.subscribers = payload.subscribers
        per_pair = pc.take(payload.patterns, payload.pair_pattern).cast(pa.large_string())
        if per_pair.offset:  # pragma: no cover - take() gives none
            per_pair = pa.concat_arrays([per_pair])
        n = len(per_pair)
        bufs = per_pair.buffers()
        offsets = memoryview(bufs[1])[: (n + 1) * 8] if n else np.zeros(1, np.int64)
        data = bufs[2] if n and bufs[2] is not None else b""
        refs = payload.pair_subscriber.to_numpy(zero_copy_only=False).astype(np.uint64) + 1
        subs = list(range(len(payload.subscribers)))
        try:
            trie = Trie.from_buffers(data, offsets, refs, subs, self.dialect)
            members = payload.members
            for f, k, g in zip(
                members.column("filter").to_pylist(),
                members.column("subscriber").to_pylist(),
                members.column("group").to_pylist(),
                strict=True,
            ):
                trie.subscribe(Shared(f, g), k)
            for name, policy in payload.policies.items():
                trie.set_group_policy(name, policy)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"the subscriptions cannot be routed: {exc}") from None
        self.trie = trie

    def route(self, topic: Any, key: Any = None) -> tuple[list[int], dict[str, int]]:
        """(ordinary subscriber indexes, {group: member index}) of one message."""
        routed: tuple[list[int], dict[str, int]] = self.trie.route_by_group(topic, key)
        return routed


class ContentMatcher(MatcherBase):
    """Content subscriptions rebuilt from a :class:`ContentPayload`: the
    content index loaded from the payload's export file (one snapshot), a
    "pair" being a binding number.  Each row of a batch is matched as
    ``ContentIndex.match_every(fields, topic)`` matches the dict of its
    non-null fields (:func:`field_rows`) and its topic (None when the row
    has none); statuses: :data:`NULL` for a null fields value (for a
    headers exchange's payload: no headers, routed as ``{}``),
    :data:`INVALID` for a topic the dialect rejects (or binary topic bytes
    that are not UTF-8).  Per row: O(fields + the index's match), in Python."""

    payload_type = ContentPayload

    def __init__(self, payload: ContentPayload) -> None:
        from cstrie.content.index import ContentIndex
        from cstrie.export.errors import FormatError

        self.payload = payload  # type: ignore[assignment]
        self.dialect = payload.dialect
        self.npairs = payload.nbindings
        self.subscribers = payload.subscribers
        self.patterns = payload.bindings.column("pattern").combine_chunks()
        self.criteria = payload.bindings.column("criteria").combine_chunks()
        sub = payload.bindings.column("subscriber").to_numpy(zero_copy_only=False)
        self.pair_subscriber = sub.astype(np.int64)
        self.headers = payload.headers
        try:
            self.index = ContentIndex.load(io.BytesIO(payload.index)).snapshot()
        except FormatError as exc:
            raise ValueError(f"the content subscriptions cannot be loaded: {exc}") from None

    def scan_batch(
        self, batch: Any, plan: Plan, status: np.ndarray
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        from cstrie.content.rabbitmq import headers_fields

        messages = field_rows(batch.column(plan.fields_col))
        topics = batch.column(plan.topic_col).to_pylist() if plan.topic_col else None
        match = self.index.match_every
        headers = self.headers
        sub_of = self.pair_subscriber.tolist() if not plan.bindings else []
        cap = plan.cap
        rows: list[int] = []
        pairs: list[int] = []
        for r, fields in enumerate(messages):
            if fields is None:
                if not headers:
                    status[r] = NULL
                    continue
                fields = {}  # no headers, as RabbitMQ routes a message without any
            topic = topics[r] if topics is not None else None
            try:
                if isinstance(topic, bytes):
                    topic = topic.decode("utf-8")
                found = match(headers_fields(fields) if headers else fields, topic)
            except (ValueError, TypeError):  # UnicodeDecodeError is a ValueError
                status[r] = INVALID
                continue
            if not found:
                continue
            if not plan.bindings and len(found) > 1:  # one row per subscriber
                first: dict[int, int] = {}
                for k in found:
                    first.setdefault(sub_of[k], k)
                found = list(first.values())
            rows.extend([r] * len(found))
            pairs.extend(found)
            while len(rows) >= cap:
                yield np.array(rows[:cap], np.int64), np.array(pairs[:cap], np.int64)
                rows, pairs = rows[cap:], pairs[cap:]
        if rows:
            yield np.array(rows, np.int64), np.array(pairs, np.int64)

    def match_columns(self, pairs: np.ndarray, plan: Plan, types: list[Any]) -> list[Any]:
        """(criteria, pattern, subscriber) of each binding, or only the
        subscriber without ``plan.bindings``."""
        subs = _fit(self.subscribers.take(pa.array(self.pair_subscriber[pairs])), types[-1])
        if not plan.bindings:
            return [subs]
        idx = pa.array(pairs, pa.int64())
        return [
            _fit(self.criteria.take(idx), types[0]),
            _fit(self.patterns.take(idx), types[1]),
            subs,
        ]

    def reasons(self, batch: Any, plan: Plan, rows: np.ndarray, codes: list[int]) -> list[str]:
        if plan.topic_col:
            topics = batch.column(plan.topic_col).take(pa.array(rows)).to_pylist()
        else:
            topics = [None] * len(rows)
        return [
            "null fields" if code == NULL else self.reason(t, code)
            for t, code in zip(topics, codes, strict=True)
        ]


def field_rows(column: Any) -> list[dict[str, Any] | None]:
    """The messages of an Arrow map (string keys) or struct column as dicts
    of their non-null fields (a null value is an absent field), None for a
    null row.  A map with a key twice keeps the last.  O(cells), columnar
    for structs."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_map(t):
        return [
            None if m is None else {k: v for k, v in m if v is not None} for m in column.to_pylist()
        ]
    if not pa.types.is_struct(t):
        raise TypeError(f"the fields column must be a map or a struct, not {t}")
    valid = column.is_valid().to_pylist()
    names = [t.field(i).name for i in range(t.num_fields)]
    if not names:
        return [{} if v else None for v in valid]
    values = zip(*(c.to_pylist() for c in column.flatten()), strict=True)
    return [
        {n: v for n, v in zip(names, vals, strict=True) if v is not None} if ok else None
        for ok, vals in zip(valid, values, strict=True)
    ]


ENGINES: dict[str, Any] = {"native": NativeMatcher, "router": Router, "content": ContentMatcher}


# --------------------------------------------------------------------- cache
class _Lru:
    """Objects built from broadcast bytes, by (SHA-256, kind), at most
    :data:`CACHE_SIZE` per cache, least recently used dropped first.  The
    bytes are read (and their hash checked) only on a miss."""

    def __init__(self, what: str, counted: bool) -> None:
        self.what = what
        self.counted = counted
        self.items: OrderedDict[tuple[str, Any], Any] = OrderedDict()

    def get(self, key: str, kind: Any, source: Any, build: Any) -> Any:
        ck = (key, kind)
        with _LOCK:
            got = self.items.get(ck)
            if got is not None:
                self.items.move_to_end(ck)
                return got
            raw = source if isinstance(source, (bytes, bytearray, memoryview)) else source.value
            if digest(raw) != key:
                raise ValueError(f"the {self.what} does not match its SHA-256 (corrupt broadcast)")
            got = self.items[ck] = build(raw)
            if self.counted:
                _BUILDS[0] += 1
            while len(self.items) > max(CACHE_SIZE, 1):
                self.items.popitem(last=False)
            return got


_LOCK = threading.Lock()
_BUILDS = [0]
_CACHE = _Lru("matcher payload", counted=True)
_FILTERS = _Lru("filter table", counted=False)


def get_matcher(key: str, source: Any, engine: str | type[Any] = "native") -> Any:
    """The matcher for payload ``key``, built at most once per process
    (``engine``: "native", "router", "content", a :class:`Router`, or a
    :class:`MatcherBase` subclass; it is built from the payload class its
    ``payload_type`` names, :class:`Payload` by default).

    ``source`` is the payload's bytes or anything with a ``.value`` holding them
    (a Spark Broadcast); it is read only when the matcher is not cached.
    """
    make = ENGINES[engine] if isinstance(engine, str) else engine
    kind = getattr(make, "payload_type", Payload)
    return _CACHE.get(key, engine, source, lambda raw: make(kind.from_bytes(raw)))


def build_count() -> int:
    """How many matchers this process has built (for tests and logs)."""
    return _BUILDS[0]


def cache_info() -> dict[str, Any]:
    with _LOCK:
        return {"builds": _BUILDS[0], "cached": [k for k, _ in _CACHE.items], "size": CACHE_SIZE}


def clear_cache() -> None:
    with _LOCK:
        _CACHE.items.clear()


# ------------------------------------------------------------ batch pipeline
@dataclass
class Plan:
    """What :func:`run` emits; made on the driver, pickled with the function.

    ``mode``: "match" (message columns + pattern + subscriber; with
    ``keep_unmatched`` also every row without a match, with nulls), "route"
    (every row: + route + reason), "rejected" (null/invalid rows + reason),
    "unmatched" (valid rows without a match), "counts" ((pair, n) partial
    counts), "deliver" (message columns + subscriber + group: the deliveries
    of ``Trie.route``, ``key_col`` the sticky key).
    """

    key: str
    mode: str = "match"
    topic_col: str | None = "topic"
    pattern_col: str = "pattern"
    subscriber_col: str = "subscriber"
    route_col: str = "route"
    reason_col: str = "reason"
    keep_unmatched: bool = False
    cap: int = DEFAULT_CAP
    engine: str | type[MatcherBase] = "native"
    key_col: str | None = None
    extra: list[tuple[str, Any]] = field(default_factory=list)  # appended (name, Arrow type)
    stats: Any = None  # an accumulator (added to once per partition) or None
    builds: Any = None  # an accumulator counting matcher builds, or None
    fields_col: str | None = None  # content: the map/struct column of fields
    bindings: bool = True  # content: one row per binding (False: per subscriber)


class _Counts:
    __slots__ = ("c", "pairs")

    def __init__(self, npairs: int | None) -> None:
        self.c = dict.fromkeys(COUNTERS, 0)
        self.pairs = np.zeros(npairs, np.int64) if npairs is not None else None


def _take(batch: Any, rows: np.ndarray) -> list[Any]:
    idx = pa.array(rows, pa.int64())
    return [col.take(idx) for col in batch.columns]


def _fit(arr: Any, typ: Any) -> Any:
    return arr if arr.type == typ else arr.cast(typ)


def _repeat(value: str, n: int, typ: Any) -> Any:
    return pa.array([value], typ).take(pa.array(np.zeros(n, np.int64)))


def run(bc: Any, plan: Plan, batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function: match every batch of one partition."""
    before = _BUILDS[0]
    m = get_matcher(plan.key, bc, "router" if plan.mode == "deliver" else plan.engine)
    if plan.builds is not None and _BUILDS[0] != before:
        plan.builds.add(1)
    if plan.mode == "deliver":
        yield from _deliver(m, plan, batches)
        return
    want_pairs = plan.mode == "counts" or plan.stats is not None
    counts = _Counts(m.npairs if want_pairs else None)
    extra = [pa.field(name, typ) for name, typ in plan.extra]
    schemas: dict[Any, Any] = {}
    for batch in batches:
        schema = schemas.get(batch.schema)
        if schema is None:
            fields = [] if plan.mode == "counts" else list(batch.schema)
            schema = schemas[batch.schema] = pa.schema(fields + extra)
        yield from _batch(m, plan, batch, counts, schema)
    schema = pa.schema(extra)
    if plan.mode == "counts":
        keys = [COUNTERS[k] for k in COUNTERS]
        vals = [counts.c[k] for k in COUNTERS]
        assert counts.pairs is not None
        nz = np.flatnonzero(counts.pairs)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(np.concatenate([np.array(keys, np.int64), nz.astype(np.int64)])),
                pa.array(np.concatenate([np.array(vals, np.int64), counts.pairs[nz]])),
            ],
            schema=schema,
        )
    if plan.stats is not None:
        assert counts.pairs is not None
        nz = np.flatnonzero(counts.pairs)
        plan.stats.add(
            {**counts.c, "pairs": dict(zip(nz.tolist(), counts.pairs[nz].tolist(), strict=True))}
        )


def _batch(m: MatcherBase, plan: Plan, batch: Any, counts: _Counts, schema: Any) -> Iterator[Any]:
    n = batch.num_rows
    if n == 0:
        return
    mode = plan.mode
    status = np.zeros(n, np.int8)
    matched = np.zeros(n, np.bool_)
    c = counts.c
    nmsg = len(batch.schema) if mode != "counts" else 0
    # The matcher's own columns (pattern, subscriber; a content binding's
    # criteria, pattern, subscriber), then route and reason in "route" mode.
    nnew = len(schema) - nmsg - (2 if mode == "route" else 0)
    types = [schema.field(nmsg + i).type for i in range(max(nnew, 0))]
    for rows, pairs in m.scan_batch(batch, plan, status):
        matched[rows] = True
        c["matches"] += len(rows)
        if counts.pairs is not None:
            np.add.at(counts.pairs, pairs, 1)
        if mode in ("match", "route"):
            cols = _take(batch, rows) + m.match_columns(pairs, plan, types)
            if mode == "route":
                cols.append(_repeat("match", len(rows), schema.field(nmsg + nnew).type))
                cols.append(pa.nulls(len(rows), schema.field(nmsg + nnew + 1).type))
            yield pa.RecordBatch.from_arrays(cols, schema=schema)
    nulls = status == NULL
    invalid = status < 0
    unmatched = ~matched & (status == 0)
    c["messages"] += n
    c["matched"] += int(matched.sum())
    c["unmatched"] += int(unmatched.sum())
    c["null"] += int(nulls.sum())
    c["invalid"] += int(invalid.sum())
    if mode == "counts":
        return
    if mode == "unmatched":
        sel = np.flatnonzero(unmatched)
        for start in range(0, len(sel), plan.cap):
            rows = sel[start : start + plan.cap]
            yield pa.RecordBatch.from_arrays(_take(batch, rows), schema=schema)
        return
    if mode == "match" and not plan.keep_unmatched:
        return
    if mode == "match":
        sel = np.flatnonzero(~matched)
        for start in range(0, len(sel), plan.cap):
            rows = sel[start : start + plan.cap]
            k = len(rows)
            cols = _take(batch, rows) + [pa.nulls(k, t) for t in types]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)
        return
    # route / rejected: rows without a match, each with its route and reason.
    sel = np.flatnonzero(~matched if mode == "route" else (nulls | invalid))
    for start in range(0, len(sel), plan.cap):
        rows = sel[start : start + plan.cap]
        k = len(rows)
        cols = _take(batch, rows)
        st = status[rows]
        # Only rejected rows get a Python string (their reason); the rest are null.
        bad = np.flatnonzero(st != 0)
        texts = m.reasons(batch, plan, rows[bad], st[bad].tolist()) if len(bad) else []
        where = np.full(k, len(bad), np.int64)
        where[bad] = np.arange(len(bad))
        reasons = pa.array([*texts, None], pa.string()).take(pa.array(where))
        if mode == "route":
            codes = np.where(st == NULL, 1, np.where(st < 0, 2, 0))
            names = pa.array(["unmatched", "null", "invalid"], schema.field(nmsg + nnew).type)
            cols += [pa.nulls(k, t) for t in types]
            cols += [
                names.take(pa.array(codes)),
                _fit(reasons, schema.field(nmsg + nnew + 1).type),
            ]
        else:
            cols.append(_fit(reasons, schema.field(nmsg).type))
        yield pa.RecordBatch.from_arrays(cols, schema=schema)


def _deliver(router: Router, plan: Plan, batches: Iterator[Any]) -> Iterator[Any]:
    """The deliveries of every row: its ordinary subscribers (group null), then
    one member per matching share group.  Null and invalid topics deliver
    nothing (``rejected`` finds them)."""
    extra = [pa.field(name, typ) for name, typ in plan.extra]
    schemas: dict[Any, Any] = {}
    route = router.route
    for batch in batches:
        schema = schemas.get(batch.schema)
        if schema is None:
            schema = schemas[batch.schema] = pa.schema(list(batch.schema) + extra)
        n = batch.num_rows
        if n == 0:
            continue
        column = batch.column(plan.topic_col)
        binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
        topics = column.to_pylist()
        keys = batch.column(plan.key_col).to_pylist() if plan.key_col else [None] * n
        rows: list[int] = []
        subs: list[int] = []
        groups: list[str | None] = []
        for r, (topic, key) in enumerate(zip(topics, keys, strict=True)):
            if topic is None:
                continue
            try:
                plain, picks = route(topic.decode() if binary else topic, key)
            except (ValueError, UnicodeDecodeError):
                continue  # an invalid topic
            if plain:
                rows.extend([r] * len(plain))
                subs.extend(plain)
                groups.extend([None] * len(plain))
            if picks:
                rows.extend([r] * len(picks))
                subs.extend(picks.values())
                groups.extend(picks)
            while len(rows) >= plan.cap:  # output batches of at most cap rows
                cap = plan.cap
                yield _deliveries(router, batch, schema, rows[:cap], subs[:cap], groups[:cap])
                rows, subs, groups = rows[cap:], subs[cap:], groups[cap:]
        if rows:
            yield _deliveries(router, batch, schema, rows, subs, groups)


def _deliveries(
    router: Router,
    batch: Any,
    schema: Any,
    rows: list[int],
    subs: list[int],
    groups: list[str | None],
) -> Any:
    nmsg = batch.num_columns
    cols = _take(batch, np.array(rows, np.int64))
    cols.append(_fit(router.subscribers.take(pa.array(subs, pa.int64())), schema.field(nmsg).type))
    cols.append(_fit(pa.array(groups, pa.string()), schema.field(nmsg + 1).type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


# ------------------------------------------- filters against stored topics
class FilterSet:
    """The filter table of :func:`cstrie.spark.filter_join`, as a worker uses it.

    ``columns``: the table's columns (the filter column first, then the
    carried filter-side columns), one Arrow array each, no null filter.
    ``texts[j]`` is the j-th distinct filter and ``rows[j]`` the table rows
    holding it (a filter that appears on several rows is queried once and
    pairs every one of its rows).  The driver has validated every filter.
    """

    __slots__ = ("columns", "rows", "texts")

    def __init__(self, table: Any) -> None:
        import pyarrow.compute as pc

        self.columns = [col.combine_chunks() for col in table.columns]
        texts: list[str] = []
        rows: list[np.ndarray] = []
        if table.num_rows:
            enc = pc.dictionary_encode(self.columns[0])
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            for word in enc.dictionary.to_pylist():
                texts.append(word.decode("utf-8") if isinstance(word, bytes) else word)
            order = np.argsort(codes, kind="stable")
            counts = np.bincount(codes, minlength=len(texts))
            rows = np.split(order, np.cumsum(counts)[:-1])
        self.texts = texts
        self.rows = rows

    @staticmethod
    def to_bytes(table: Any) -> bytes:
        """The table as one Arrow IPC stream (zstd when available)."""
        return ipc_bytes(table)

    @classmethod
    def from_bytes(cls, raw: Any) -> FilterSet:
        return cls(ipc_table(raw))


def get_filters(key: str, source: Any) -> FilterSet:
    """The :class:`FilterSet` of the serialised table ``key`` (its SHA-256),
    read from ``source`` (bytes or a Broadcast) at most once per process; at
    most :data:`CACHE_SIZE` are kept, apart from the matchers."""
    fs: FilterSet = _FILTERS.get(key, "filters", source, FilterSet.from_bytes)
    return fs


@dataclass
class JoinPlan:
    """What :func:`run_join` needs; made on the driver, pickled with the function.

    The input batches hold the topic column first, then the carried
    topic-side columns; ``schema`` is the output's Arrow schema: the filter
    table's columns, then the input's columns.  ``index_rows``: index
    consecutive batches together until they hold at least this many rows
    (0: one index per batch).
    """

    key: str
    dialect: Any  # a cstrie.dialect.Dialect
    schema: Any
    cap: int = DEFAULT_CAP
    index_rows: int = 0


def run_join(bc: Any, plan: JoinPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function of ``filter_join``: index the topics of one
    batch (or group of batches) at a time and query every distinct filter."""
    fs = get_filters(plan.key, bc)
    if not fs.texts:
        for _ in batches:  # drain the input; nothing can pair
            pass
        return
    pending: list[Any] = []
    nrows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        nrows += batch.num_rows
        if nrows >= plan.index_rows:
            yield from _join(fs, plan, _columns(pending))
            pending, nrows = [], 0
    if pending:
        yield from _join(fs, plan, _columns(pending))


def _columns(batches: list[Any]) -> list[Any]:
    """The columns of consecutive batches, each as one array."""
    if len(batches) == 1:
        return list(batches[0].columns)
    return [pa.concat_arrays([b.column(i) for b in batches]) for i in range(batches[0].num_columns)]


def _join(fs: FilterSet, plan: JoinPlan, columns: list[Any]) -> Iterator[Any]:
    """Every (filter row, topic row) pair of one index, in output batches of
    at most ``plan.cap`` rows.

    The topic column is dictionary-encoded (Arrow, in C): each distinct valid
    topic is put into the index once with its dictionary code as value, and
    the rows holding a code are found through one stable sort of the codes.
    Null topics have no code; topics the dialect rejects are not stored."""
    import pyarrow.compute as pc

    from cstrie.topics import TopicIndex

    topic = columns[0]
    n = len(topic)
    enc = pc.dictionary_encode(topic)
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    words = enc.dictionary.to_pylist()
    index = TopicIndex(plan.dialect)
    put = index.put
    stored = 0
    for code, word in enumerate(words):
        if isinstance(word, bytes):
            try:
                word = word.decode("utf-8")
            except UnicodeDecodeError:
                continue  # not text: an invalid topic
        try:
            put(word, code)
        except (ValueError, TypeError):
            continue  # invalid in the dialect: pairs with nothing
        stored += 1
    if not stored:
        return
    # Rows of code k: order[starts[k] : starts[k] + counts[k]] (null rows, code -1, sort first).
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes[codes >= 0], minlength=len(words))
    starts = (n - int(counts.sum())) + np.concatenate(([0], np.cumsum(counts)[:-1]))
    cap = plan.cap
    out_f: list[np.ndarray] = []
    out_t: list[np.ndarray] = []
    held = 0
    query = index.query
    for text, frows in zip(fs.texts, fs.rows, strict=True):
        ks = np.fromiter((code for _, code in query(text)), np.int64)
        if not len(ks):
            continue
        lens = counts[ks]
        total = int(lens.sum())
        before = np.cumsum(lens) - lens
        trows = order[np.repeat(starts[ks] - before, lens) + np.arange(total)]
        # Every row of this filter pairs every topic row; at most ~cap at a time.
        step = max(1, cap // total)
        for s in range(0, len(frows), step):
            block = frows[s : s + step]
            out_f.append(np.repeat(block, total))
            out_t.append(np.tile(trows, len(block)))
            held += total * len(block)
            if held >= cap:
                f_all, t_all = np.concatenate(out_f), np.concatenate(out_t)
                while len(f_all) >= cap:
                    yield _pairs(fs, plan, columns, f_all[:cap], t_all[:cap])
                    f_all, t_all = f_all[cap:], t_all[cap:]
                out_f, out_t, held = [f_all], [t_all], len(f_all)
    if held:
        yield _pairs(fs, plan, columns, np.concatenate(out_f), np.concatenate(out_t))


def _pairs(
    fs: FilterSet, plan: JoinPlan, columns: list[Any], frows: np.ndarray, trows: np.ndarray
) -> Any:
    schema = plan.schema
    fi, ti = pa.array(frows, pa.int64()), pa.array(trows, pa.int64())
    cols = [_fit(c.take(fi), schema.field(i).type) for i, c in enumerate(fs.columns)]
    base = len(cols)
    cols += [_fit(c.take(ti), schema.field(base + i).type) for i, c in enumerate(columns)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)
