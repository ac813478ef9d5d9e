"""The matcher payload: a subscription set as compact bytes, to broadcast to Spark workers.

A compiled matcher (cffi handles) cannot be pickled, and pickling a million Python
pairs would be slow, so the driver serialises the subscriptions once into this
columnar payload and every Python worker rebuilds the engine from it in one C
call (see :mod:`cstrie.spark.engine`).  Nothing here imports pyspark.

Layout (all integers little-endian)::

    8     magic b"CSTSPRK\\n"
    4     u32 version (2; version 1 has no memberships stream)
    4     u32 meta_len
    m     meta: UTF-8 JSON {"dialect": {every Dialect field}, "patterns": P,
          "subscribers": S, "pairs": N, "memberships": M,
          "policies": {group name: policy name}}
    then four Arrow IPC streams, each preceded by its u64 length:
          patterns     P rows  {pattern: string}            distinct, sorted
          subscribers  S rows  {subscriber: T}              distinct, any Arrow type
          pairs        N rows  {pattern: int32, subscriber: int32}
                                0-based indexes into the two tables above,
                                sorted by (pattern, subscriber), no duplicates
          memberships  M rows  {filter: string, subscriber: int32, group: string}
                                share-group memberships (subscriber: an index
                                into the subscribers), sorted, no duplicates

Pair ``k`` (0-based) is what the engine stores as subscriber id ``k + 1``: a match
is then exactly one (pattern, subscriber) pair, so the Spark output can carry both.
Memberships play no part in matching (as in ``Trie.lookup``); the delivery
job's router (:class:`cstrie.spark.engine.Router`) joins them.
The payload's SHA-256 names it in the worker cache.

Content subscriptions travel as a :class:`ContentPayload` in the same frame
(:func:`frame`: magic, version, JSON meta, length-prefixed blobs), with its
own magic bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import struct
import warnings
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, cast

import numpy as np

from cstrie.dialect import Dialect, resolve_dialect

__all__ = [
    "CONTENT_MAGIC",
    "MAGIC",
    "ContentPayload",
    "Payload",
    "dialect_from_json",
    "dialect_to_json",
    "frame",
    "ipc_bytes",
    "ipc_table",
    "unframe",
]

MAGIC = b"CSTSPRK\n"
CONTENT_MAGIC = b"CSTCONT\n"
VERSION = 2
_HEAD = struct.Struct("<II")
_LEN = struct.Struct("<Q")


def _pa() -> Any:
    try:
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - the spark extra installs it
        raise ImportError("cstrie.spark needs pyarrow: pip install 'cstrie[spark]'") from exc
    return pa


def dialect_to_json(d: Dialect) -> dict[str, Any]:
    return dataclasses.asdict(d)


def dialect_from_json(obj: Any) -> Dialect:
    if not isinstance(obj, dict):
        raise ValueError("the payload's dialect is not a JSON object")
    names = {f.name for f in dataclasses.fields(Dialect)}
    if set(obj) != names:
        raise ValueError(
            f"the payload's dialect has fields {sorted(obj)}; expected {sorted(names)}"
        )
    return Dialect(**obj)


def _subscriber_array(values: list[Any]) -> Any:
    """An Arrow array for Python subscriber objects: str -> string, int -> int64,
    bytes -> binary; a mix (or anything else) becomes their ``str()`` with a warning."""
    pa = _pa()
    kinds = set(map(type, values))
    if kinds <= {str}:
        return pa.array(values, pa.string())
    if kinds <= {int}:
        try:
            return pa.array(values, pa.int64())
        except (OverflowError, pa.ArrowInvalid):
            pass
    if kinds <= {bytes}:
        return pa.array(values, pa.binary())
    warnings.warn(
        "subscribers of types "
        + ", ".join(sorted(k.__name__ for k in kinds))
        + " do not fit one Spark column type; they are written as their str()",
        stacklevel=3,
    )
    return pa.array([str(v) for v in values], pa.string())


@dataclasses.dataclass
class Payload:
    """A subscription set in columnar form (see the module docstring).

    ``patterns`` (Arrow string) and ``subscribers`` (any Arrow type) are distinct
    values; ``pair_pattern`` / ``pair_subscriber`` (Arrow int32) index them, one
    entry per (pattern, subscriber) pair.
    """

    dialect: Dialect
    patterns: Any
    subscribers: Any
    pair_pattern: Any
    pair_subscriber: Any
    #: share-group memberships: an Arrow table {filter: string, subscriber:
    #: int32 index into ``subscribers``, group: string}
    members: Any = None
    #: {group name: policy name} ("round-robin", "random", "sticky")
    policies: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.members is None:
            self.members = _members_table([], [], [])

    @property
    def npairs(self) -> int:
        return len(self.pair_pattern)

    @property
    def nmembers(self) -> int:
        return int(self.members.num_rows)

    # ------------------------------------------------------------- building
    @classmethod
    def from_reader(cls, reader: Any) -> Payload:
        """From a :class:`cstrie.Trie` or :class:`cstrie.Snapshot`: one consistent
        snapshot, read in engine chunks (no per-pair Python objects besides ids),
        share-group memberships and their groups' policies included."""
        from cstrie import _binding as nb

        pa = _pa()
        snap = reader.snapshot()
        objects = snap._reg.objects
        patterns: list[bytes] = []
        groups: list[str | None] = []
        sizes: list[int] = []
        ids: list[int] = []
        for pat, share, group_ids in nb.iterate_shared(snap._h):
            name = objects[share].name if share else None
            if patterns and patterns[-1] == pat and groups[-1] == name:
                sizes[-1] += len(group_ids)  # a group continued in the next chunk
            else:
                patterns.append(pat)
                groups.append(name)
                sizes.append(len(group_ids))
            ids.extend(group_ids)
        distinct = sorted(set(ids))
        index = {i: k for k, i in enumerate(distinct)}
        values = [objects[i] for i in distinct]
        pair_pattern = [k for k, size in enumerate(sizes) for _ in range(size)]
        rows = pa.array(pair_pattern, pa.int32())
        table = pa.table(
            {
                "pattern": pa.array([p.decode() for p in patterns], pa.string()).take(rows),
                "subscriber": _subscriber_array(values).take(
                    pa.array([index[i] for i in ids], pa.int32())
                ),
                "group": pa.array(groups, pa.string()).take(rows),
            }
        )
        names = {g for g in groups if g is not None}
        policies = {g: snap.group_policy(g) for g in sorted(names)}
        return cls.from_arrow(table, snap.dialect, policies=policies)

    @classmethod
    def from_pairs(
        cls, pairs: Iterable[tuple[Any, Hashable]], dialect: str | Dialect = "amqp"
    ) -> Payload:
        """From (pattern, subscriber) pairs (subscribers str, int or bytes); a
        :class:`~cstrie.groups.Shared` pattern (or the dialect's share syntax,
        MQTT's ``$share/g/filter``) is a share-group membership."""
        from cstrie.groups import Shared

        pa = _pa()
        items = list(pairs)
        patterns = [p.pattern if isinstance(p, Shared) else p for p, _ in items]
        groups = [p.group if isinstance(p, Shared) else None for p, _ in items]
        subs = _subscriber_array([s for _, s in items])
        table = pa.table(
            {
                "pattern": pa.array(patterns, pa.string()),
                "subscriber": subs,
                "group": pa.array(groups, pa.string()),
            }
        )
        return cls.from_arrow(table, dialect)

    @classmethod
    def from_arrow(
        cls,
        table: Any,
        dialect: str | Dialect = "amqp",
        pattern_col: str = "pattern",
        subscriber_col: str = "subscriber",
        group_col: str = "group",
        policies: Mapping[str, str] | None = None,
    ) -> Payload:
        """From an Arrow table with a string pattern column and a subscriber column
        of any type.  Duplicate pairs count once; a null raises ``ValueError``.
        A row whose ``group_col`` (optional, string) is not null is a share-group
        membership: its pattern is the group's filter, its subscriber the
        member; so is a pattern in the dialect's share syntax (MQTT's
        ``$share/g/filter``).  ``policies``: {group name: policy} for the
        delivery job.  Patterns and groups are validated when the matcher or
        router is built, not here."""
        import numpy as np

        pa = _pa()
        import pyarrow.compute as pc

        d = resolve_dialect(dialect)
        for name in (pattern_col, subscriber_col):
            if name not in table.column_names:
                raise ValueError(
                    f"the subscriptions have no column {name!r} (columns: {table.column_names})"
                )
        pat = table.column(pattern_col).combine_chunks()
        sub = table.column(subscriber_col).combine_chunks()
        if pa.types.is_dictionary(pat.type):
            pat = pat.cast(pat.type.value_type)
        if pa.types.is_dictionary(sub.type):
            sub = sub.cast(sub.type.value_type)
        if not (pa.types.is_string(pat.type) or pa.types.is_large_string(pat.type)):
            raise TypeError(f"the pattern column must hold strings, not {pat.type}")
        for name, col in ((pattern_col, pat), (subscriber_col, sub)):
            if col.null_count:
                raise ValueError(f"the subscriptions' {name!r} column has {col.null_count} nulls")
        pat = pat.cast(pa.string())
        grp = _group_column(table, group_col)
        pat, grp = _split_share_syntax(d, pat, grp)
        if grp is not None:
            member = pc.is_valid(grp)
            members = (pat.filter(member), sub.filter(member), grp.filter(member))
            plain = pc.invert(member)
            pat, sub = pat.filter(plain), sub.filter(plain)
        else:
            members = (pa.array([], pa.string()), sub.slice(0, 0), pa.array([], pa.string()))
        pdict = pc.unique(pat)
        porder = pc.sort_indices(pdict)
        pdict = pdict.take(porder)
        sdict = pc.unique(pa.concat_arrays([sub, members[1]]))
        try:
            sdict = sdict.take(pc.sort_indices(sdict))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            pass  # an unsortable type: keep first-seen order
        pidx = pc.index_in(pat, value_set=pdict).to_numpy(zero_copy_only=False).astype(np.int64)
        sidx = pc.index_in(sub, value_set=sdict).to_numpy(zero_copy_only=False).astype(np.int64)
        keys = np.unique(pidx * max(len(sdict), 1) + sidx)
        if len(sdict):
            pp, ss = np.divmod(keys, len(sdict))
        else:
            pp = ss = keys
        midx = pc.index_in(members[1], value_set=sdict).cast(pa.int32())
        return cls(
            d,
            pdict,
            sdict,
            pa.array(pp.astype(np.int32), pa.int32()),
            pa.array(ss.astype(np.int32), pa.int32()),
            _members_table(members[0], midx, members[2]),
            dict(policies or {}),
        )

    # -------------------------------------------------------- serialisation
    def to_bytes(self) -> bytes:
        pa = _pa()
        meta = {
            "dialect": dialect_to_json(self.dialect),
            "patterns": len(self.patterns),
            "subscribers": len(self.subscribers),
            "pairs": self.npairs,
            "memberships": self.nmembers,
            "policies": self.policies,
        }
        tables = (
            pa.table({"pattern": self.patterns}),
            pa.table({"subscriber": self.subscribers}),
            pa.table({"pattern": self.pair_pattern, "subscriber": self.pair_subscriber}),
            self.members,
        )
        return frame(MAGIC, VERSION, meta, [ipc_bytes(t) for t in tables])

    @classmethod
    def from_bytes(cls, raw: bytes | bytearray | memoryview) -> Payload:
        version, meta, blobs = unframe(raw, MAGIC, VERSION, "cstrie Spark payload")
        if len(blobs) != (3 if version == 1 else 4):
            raise ValueError("truncated cstrie Spark payload")
        tables = [ipc_table(b) for b in blobs]
        pats, subs, pairs = tables[:3]
        self = cls(
            dialect_from_json(meta["dialect"]),
            pats.column(0).combine_chunks(),
            subs.column(0).combine_chunks(),
            pairs.column(0).combine_chunks(),
            pairs.column(1).combine_chunks(),
            tables[3] if version > 1 else None,
            dict(meta.get("policies") or {}),
        )
        if (len(self.patterns), len(self.subscribers), self.npairs, self.nmembers) != (
            meta["patterns"],
            meta["subscribers"],
            meta["pairs"],
            meta.get("memberships", 0),
        ):
            raise ValueError("corrupt cstrie Spark payload: counts do not match its header")
        return self


# ----------------------------------------------------------------- framing
def ipc_bytes(table: Any) -> bytes:
    """``table`` as one Arrow IPC stream (zstd-compressed when available)."""
    pa = _pa()
    codec = "zstd" if pa.Codec.is_available("zstd") else None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(
        sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=codec)
    ) as w:
        w.write_table(table)
    return cast(bytes, sink.getvalue().to_pybytes())


def ipc_table(raw: bytes | bytearray | memoryview) -> Any:
    """The table of one Arrow IPC stream, each column one chunk."""
    pa = _pa()
    return pa.ipc.open_stream(pa.py_buffer(raw)).read_all().combine_chunks()


def frame(magic: bytes, version: int, meta: Mapping[str, Any], blobs: Iterable[bytes]) -> bytes:
    """The payloads' common frame: 8 magic bytes, u32 version, u32 meta
    length, the meta as UTF-8 JSON, then each blob preceded by its u64
    length (all little-endian)."""
    head = json.dumps(meta).encode()
    out = io.BytesIO()
    out.write(magic + _HEAD.pack(version, len(head)) + head)
    for blob in blobs:
        out.write(_LEN.pack(len(blob)))
        out.write(blob)
    return out.getvalue()


def unframe(
    raw: bytes | bytearray | memoryview, magic: bytes, version: int, what: str
) -> tuple[int, dict[str, Any], list[memoryview]]:
    """(version, meta, blobs) of a :func:`frame`; ``ValueError`` for bad magic
    bytes, a version above ``version``, bad meta or a truncated blob."""
    view = memoryview(raw)
    if len(view) < 16 or bytes(view[:8]) != magic:
        raise ValueError(f"not a {what} (bad magic bytes)")
    got, meta_len = _HEAD.unpack_from(view, 8)
    if not 1 <= got <= version:
        raise ValueError(f"{what} version {got}; this cstrie reads 1 to {version}")
    pos = 16 + meta_len
    try:
        meta = json.loads(bytes(view[16:pos]))
    except ValueError:
        meta = None
    if pos > len(view) or not isinstance(meta, dict):
        raise ValueError(f"corrupt {what}: its header is not a JSON object")
    blobs = []
    while pos < len(view):
        if pos + 8 > len(view):
            raise ValueError(f"truncated {what}")
        (size,) = _LEN.unpack_from(view, pos)
        pos += 8
        if pos + size > len(view):
            raise ValueError(f"truncated {what}")
        blobs.append(view[pos : pos + size])
        pos += size
    return got, meta, blobs


def _members_table(filters: Any, subscribers: Any, groups: Any) -> Any:
    """The memberships as a sorted table without duplicate rows."""
    pa = _pa()
    table = pa.table(
        {
            "filter": pa.array(filters, pa.string()),
            "subscriber": pa.array(subscribers, pa.int32()),
            "group": pa.array(groups, pa.string()),
        }
    )
    if table.num_rows == 0:
        return table
    distinct = table.group_by(["filter", "subscriber", "group"], use_threads=False).aggregate([])
    order = [("filter", "ascending"), ("group", "ascending"), ("subscriber", "ascending")]
    return distinct.select(["filter", "subscriber", "group"]).sort_by(order).combine_chunks()


def _group_column(table: Any, group_col: str) -> Any:
    """The group column (string, nulls for ordinary pairs), or None when there
    is none or it is all null."""
    pa = _pa()
    if group_col not in table.column_names:
        return None
    grp = table.column(group_col).combine_chunks()
    if pa.types.is_dictionary(grp.type):
        grp = grp.cast(grp.type.value_type)
    if pa.types.is_null(grp.type) or grp.null_count == len(grp):
        return None
    if not (pa.types.is_string(grp.type) or pa.types.is_large_string(grp.type)):
        raise TypeError(f"the group column {group_col!r} must hold strings, not {grp.type}")
    return grp.cast(pa.string())


def _split_share_syntax(d: Dialect, pat: Any, grp: Any) -> tuple[Any, Any]:
    """Patterns in the dialect's share syntax (MQTT's ``$share/g/filter``) as
    (filter, group) rows; ``ValueError`` for a malformed one, or one that also
    has a group in the group column."""
    from cstrie.groups import split_shared

    pa = _pa()
    import pyarrow.compute as pc

    prefix = d.share_prefix
    if prefix is None or len(pat) == 0:
        return pat, grp
    mask = pc.or_(pc.starts_with(pat, prefix + d.separator), pc.equal(pat, prefix))
    if not pc.any(mask).as_py():
        return pat, grp
    rows = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    split = [split_shared(d, p) for p in pat.take(pa.array(rows)).to_pylist()]
    if grp is not None and grp.filter(mask).null_count != len(rows):
        raise ValueError(f"a {prefix}{d.separator} pattern has a group in the group column as well")
    if grp is None:
        grp = pa.nulls(len(pat), pa.string())
    pat = pc.replace_with_mask(pat, mask, pa.array([f for f, _ in split], pa.string()))
    grp = pc.replace_with_mask(grp, mask, pa.array([g for _, g in split], pa.string()))
    return pat, grp


class _Numbered:
    """The bindings of a content reader with binding numbers for subscribers:
    what :func:`cstrie.content.export.write` needs of a reader."""

    def __init__(self, dialect: Dialect, limits: dict[str, int], bindings: list[Any]) -> None:
        self.dialect = dialect
        self._limits = limits
        self._bindings = bindings

    def bindings(self) -> list[Any]:
        return self._bindings

    def limits(self) -> dict[str, int]:
        return self._limits


@dataclasses.dataclass
class ContentPayload:
    """Content subscriptions (a :class:`cstrie.content.ContentIndex`'s
    bindings) in the form the Spark workers rebuild them from.

    ``index``: the bindings as a content export file
    (:mod:`cstrie.content.export`) whose subscriber of binding ``k`` is the int
    ``k``, so a worker's ``match_every`` answers binding numbers;
    ``bindings``: an Arrow table, row ``k`` = binding ``k``: {subscriber:
    int32 index into ``subscribers``, criteria: its JSON text
    (:meth:`Criterion.to_json <cstrie.content.criteria.Criterion.to_json>`),
    pattern: its topic filter or null}; ``subscribers``: the distinct
    subscribers, as :class:`Payload` stores them (str, int64, binary, or
    ``str()`` of a mix); ``headers``: the bindings are a RabbitMQ headers
    exchange's (:class:`cstrie.content.rabbitmq.HeadersExchange`: the
    subscriber is the queue, and a message's fields are converted by
    ``headers_fields``).

    Layout: the frame of :func:`frame` with magic ``CSTCONT\\n``, meta
    {"dialect", "bindings", "subscribers", "headers"}, then three blobs: the
    export file, the bindings table and the subscribers (Arrow IPC streams).
    """

    dialect: Dialect
    index: bytes
    bindings: Any
    subscribers: Any
    headers: bool = False

    @property
    def nbindings(self) -> int:
        return int(self.bindings.num_rows)

    @classmethod
    def from_index(cls, source: Any) -> ContentPayload:
        """From a :class:`~cstrie.content.ContentIndex` or
        :class:`~cstrie.content.ContentSnapshot` (one snapshot of its
        bindings) or a :class:`~cstrie.content.rabbitmq.HeadersExchange`.
        O(bindings)."""
        from cstrie.content.export import write
        from cstrie.content.index import Binding, _Reader
        from cstrie.content.rabbitmq import HeadersExchange

        pa = _pa()
        headers = isinstance(source, HeadersExchange)
        reader = source.index.snapshot() if headers else source
        if not isinstance(reader, _Reader):
            raise TypeError(
                "content subscriptions must be a ContentIndex, a ContentSnapshot or a "
                f"HeadersExchange, not {type(source).__name__}"
            )
        if not headers and hasattr(reader, "snapshot"):
            reader = reader.snapshot()
        found = reader.bindings()
        ids: dict[Any, int] = {}
        numbered = []
        for k, b in enumerate(found):
            numbered.append(Binding(b.criteria, k, b.topic))
            ids.setdefault(b.subscriber[0] if headers else b.subscriber, len(ids))
        sub_of = [ids[b.subscriber[0] if headers else b.subscriber] for b in found]
        out = io.BytesIO()
        write(cast(Any, _Numbered(reader.dialect, reader.limits(), numbered)), out)
        table = pa.table(
            {
                "subscriber": pa.array(sub_of, pa.int32()),
                "criteria": pa.array(
                    [json.dumps(b.criteria.to_json(), separators=(",", ":")) for b in found],
                    pa.string(),
                ),
                "pattern": pa.array([b.topic for b in found], pa.string()),
            }
        )
        return cls(reader.dialect, out.getvalue(), table, _subscriber_array(list(ids)), headers)

    def to_bytes(self) -> bytes:
        pa = _pa()
        meta = {
            "dialect": dialect_to_json(self.dialect),
            "bindings": self.nbindings,
            "subscribers": len(self.subscribers),
            "headers": self.headers,
        }
        subs = ipc_bytes(pa.table({"subscriber": self.subscribers}))
        return frame(CONTENT_MAGIC, 1, meta, [self.index, ipc_bytes(self.bindings), subs])

    @classmethod
    def from_bytes(cls, raw: bytes | bytearray | memoryview) -> ContentPayload:
        what = "cstrie Spark content payload"
        _, meta, blobs = unframe(raw, CONTENT_MAGIC, 1, what)
        if len(blobs) != 3:
            raise ValueError(f"truncated {what}")
        bindings = ipc_table(blobs[1])
        subs = ipc_table(blobs[2]).column(0).combine_chunks()
        self = cls(
            dialect_from_json(meta.get("dialect")),
            bytes(blobs[0]),
            bindings,
            subs,
            bool(meta.get("headers")),
        )
        if bindings.column_names != ["subscriber", "criteria", "pattern"] or (
            self.nbindings,
            len(subs),
        ) != (meta.get("bindings"), meta.get("subscribers")):
            raise ValueError(f"corrupt {what}: its tables do not match its header")
        return self


def digest(raw: bytes | bytearray | memoryview) -> str:
    """The cache key of a serialised payload."""
    return hashlib.sha256(raw).hexdigest()
