"""Parquet (through pyarrow): for analytics tools and data pipelines.

Columns:

* ``pattern`` (large_string, not null): one row per (pattern, subscriber) pair;
* ``subscriber``: large_string when every stored subscriber is a str, int64 when
  every one is an int that fits in 64 bits, large_binary when every one is
  bytes; otherwise ("mixed") large_string holding the value as text (str as is,
  int in decimal, bytes in base64) plus
* ``subscriber_type`` (large_string: ``str``, ``int`` or ``bytes``), only in the
  mixed case;
* ``group`` (large_string, nullable; version 2): the share group of a
  membership row (its ``pattern`` is the group's filter, its ``subscriber`` the
  member), null for an ordinary pair.  Written when the trie family has share
  groups at all; membership rows come in row groups after the ordinary pairs.

The file's key-value metadata holds ``cstrie`` (the header: format
``cstrie-parquet``, version, dialect, subscriber codec and
``"subscriber_kind"``: ``str``/``int``/``bytes``/``mixed``) and, written when
the export completes, ``cstrie.end``: the number of rows, CRC-32s of the
columns' contents (each variable-width column as its int64 row lengths and its
bytes, int64 columns as their values; the ``group`` column with its nulls as
empty strings) and, with a ``group`` column, the number of memberships and
each group's policy.  Row groups are written one engine chunk
at a time; data pages carry Parquet page checksums.  Loading verifies all of it
and feeds :meth:`cstrie.Trie.from_buffers` straight from the Arrow buffers:
the subscriber column is dictionary-encoded in Arrow to get the distinct
subscribers and each row's index, so no Python object is made per pair.

Topic index files (:mod:`cstrie.export.topicfile`): columns ``topic``
(large_string) and ``value`` (typed as ``subscriber`` is, plus
``value_type`` when mixed); metadata ``cstrie`` with format
``cstrie-topics-parquet``, version 1, ``value_codec`` and ``value_kind``, and
``cstrie.end`` with ``{"topics": n, "crc32": ...}``.  :func:`read` returns a
:class:`~cstrie.TopicIndex` for them.
"""

from __future__ import annotations

import base64
import json
import zlib
from array import array
from itertools import chain, repeat
from typing import Any, BinaryIO

from cstrie import _binding as nb
from cstrie.export import meta as m
from cstrie.export.codec import INT, STR, Decode, Plan, kind_name
from cstrie.export.errors import FormatError
from cstrie.export.source import (
    ByteTable,
    Chunk,
    GroupNames,
    Numbering,
    chunks,
    membership_chunks,
)
from cstrie.export.topicfile import TopicPlan, build_index, load_values

__all__ = ["prepare", "prepare_topics", "read", "require_pyarrow", "write", "write_topics"]

_INT64 = (-(1 << 63), (1 << 63) - 1)
_KIND_NAMES = {str: "str", int: "int", bytes: "bytes"}
_PLACEHOLDER: dict[str, Any] = {"str": "", "int": 0, "bytes": b""}


def require_pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.parquet
    except ImportError:
        raise ImportError(
            "the Parquet format needs pyarrow: pip install 'cstrie[export]'"
        ) from None
    return pyarrow


class _Digest:
    """Running CRC-32s of the contents of each column."""

    def __init__(self, names: list[str]) -> None:
        self.crcs = {name: [0, 0] for name in names}

    def update(self, name: str, arr: Any) -> None:
        pa = require_pyarrow()
        crc = self.crcs[name]
        n = len(arr)
        if arr.null_count:  # the group column: nulls count as ""
            import pyarrow.compute as pc

            arr = pc.fill_null(arr, pa.scalar("", arr.type))
        if pa.types.is_integer(arr.type):
            buf = arr.buffers()[1]
            crc[0] = zlib.crc32(memoryview(buf)[arr.offset * 8 : (arr.offset + n) * 8], crc[0])
            return
        import pyarrow.compute as pc

        bufs = arr.buffers()
        offs = memoryview(bufs[1])[: (arr.offset + n + 1) * 8].cast("q")[arr.offset :]
        lens = pc.binary_length(arr)
        crc[0] = zlib.crc32(
            memoryview(lens.buffers()[1])[lens.offset * 8 : (lens.offset + n) * 8], crc[0]
        )
        if n and bufs[2] is not None:
            crc[1] = zlib.crc32(memoryview(bufs[2])[offs[0] : offs[n]], crc[1])

    def result(self) -> dict[str, list[int]]:
        return self.crcs


def _text(v: str | int | bytes) -> str:
    if type(v) is bytes:
        return base64.b64encode(v).decode("ascii")
    return str(v)


class Prepared:
    """The column types, chosen (and checked) before anything is written:
    ``key`` (``pattern``/``topic``) and ``value`` (``subscriber``/``value``)
    name the columns, ``groups`` adds the ``group`` column."""

    def __init__(
        self,
        kinds: set[int],
        values: list[Any],
        groups: bool,
        key: str = "pattern",
        value: str = "subscriber",
    ) -> None:
        pa = require_pyarrow()
        self.groups = groups
        self.key, self.value = key, value
        if not kinds:
            self.kind = "str"
        elif kinds == {INT}:
            lo, hi = _INT64
            self.kind = "int" if all(lo <= v <= hi for v in values) else "mixed"
        elif len(kinds) == 1:
            self.kind = kind_name(next(iter(kinds)))
        else:
            self.kind = "mixed"
        if STR in kinds:
            strs: list[str] = (
                list(values) if kinds == {STR} else [v for v in values if isinstance(v, str)]
            )
            if not _utf8_ok("".join(strs)):
                bad = next(v for v in strs if not _utf8_ok(v))
                raise TypeError(
                    f"{value} {bad!r} is not valid UTF-8 text (a lone surrogate); Parquet "
                    "cannot store it: use the binary or jsonl format, or encode="
                )
        self.type = {
            "str": pa.large_string(),
            "int": pa.int64(),
            "bytes": pa.large_binary(),
            "mixed": pa.large_string(),
        }[self.kind]
        fields = [
            pa.field(key, pa.large_string(), nullable=False),
            pa.field(value, self.type, nullable=False),
        ]
        if self.kind == "mixed":
            fields.append(pa.field(f"{value}_type", pa.large_string(), nullable=False))
        if self.groups:
            fields.append(pa.field("group", pa.large_string(), nullable=True))
        self.schema = pa.schema(fields)


def _utf8_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def prepare(plan: Plan) -> Prepared:
    return Prepared(plan.kinds, plan.members, plan.shared)


def prepare_topics(tplan: TopicPlan) -> Prepared:
    """The columns of a topic index file: ``topic`` and ``value`` (plus
    ``value_type`` for mixed values)."""
    return Prepared(tplan.kinds, tplan.members, False, "topic", "value")


def _value_arrays(prep: Prepared, stored: list[Any]) -> list[Any]:
    """The value column(s) of rows holding these stored values."""
    pa = require_pyarrow()
    if prep.kind != "mixed":
        return [pa.array(stored, prep.type)]
    return [
        pa.array(list(map(_text, stored)), pa.large_string()),
        pa.array([_KIND_NAMES[type(v)] for v in stored], pa.large_string()),
    ]


def _writer(f: BinaryIO, schema: Any, key: str) -> Any:
    """A ParquetWriter with page checksums, zstd, and dictionary pages for
    every column but ``key``: patterns and topics are nearly all distinct,
    so hashing them for a dictionary Parquet then drops costs 15%."""
    import pyarrow.parquet as pq

    return pq.ParquetWriter(
        f,
        schema,
        write_page_checksum=True,
        compression="zstd",
        use_dictionary=[n for n in schema.names if n != key],
    )


def _write_rows(w: Any, schema: Any, digest: _Digest, cols: list[Any], n: int) -> None:
    """One row group of ``n`` rows, its columns added to the digest."""
    pa = require_pyarrow()
    for name, col in zip(schema.names, cols, strict=True):
        digest.update(name, col)
    w.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=max(n, 1))


def _large_strings(c: Chunk) -> Any:
    """A chunk's patterns (topics), one per group, as an Arrow large_string
    array over the chunk's own buffers."""
    pa = require_pyarrow()
    pat_off = array("q", (0,))
    pat_off += c.pat_end  # a copy at C speed
    return pa.LargeStringArray.from_buffers(c.nentries, pa.py_buffer(pat_off), pa.py_buffer(c.pat))


def write_topics(
    snap: Any, f: BinaryIO, tplan: TopicPlan, prep: Prepared, progress: m.Progress | None = None
) -> int:
    """Write the topic snapshot ``snap`` to ``f`` as Parquet, one row group
    per engine chunk; returns the number of topics."""
    header = m.make_topic_meta("parquet", snap.dialect, tplan.codec, value_kind=prep.kind)
    schema = prep.schema.with_metadata({"cstrie": json.dumps(header)})
    digest = _Digest(schema.names)
    total = tplan.total if tplan.total is not None else (len(snap) if progress else 0)
    done = 0
    with _writer(f, schema, "topic") as w:
        for c in chunks(snap, per_pair=True):  # one group per topic
            n = c.npairs
            cols = [_large_strings(c), *_value_arrays(prep, tplan.stored(c.ids))]
            _write_rows(w, schema, digest, cols, n)
            done += n
            if progress is not None:
                progress(done, total)
        end = {"topics": done, "crc32": digest.result()}
        w.add_key_value_metadata({"cstrie.end": json.dumps(end)})
    return done


def write(
    snap: Any, f: BinaryIO, plan: Plan, prep: Prepared, progress: m.Progress | None = None
) -> None:
    """Write ``snap`` to ``f`` as Parquet, one row group per engine chunk."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    header = m.make_meta("parquet", snap.dialect, plan.codec, subscriber_kind=prep.kind)
    schema = prep.schema.with_metadata({"cstrie": json.dumps(header)})
    names = schema.names
    digest = _Digest(names)
    values = plan.values
    # Subscriber columns are taken (pc.take, C speed) from per-subscriber
    # dictionaries indexed by the numbers a Numbering gives a chunk's ids; entry
    # 0 is a placeholder, since numbers start at 1.
    numbering = Numbering()
    if prep.kind != "mixed":
        dicts = [[pa.array([_PLACEHOLDER[prep.kind]], prep.type)]]
    else:
        dicts = [[pa.array([""], pa.large_string())], [pa.array([""], pa.large_string())]]
    # str subscribers (the common kind): their UTF-8 as one byte table that the
    # engine gathers a chunk's column from (cst_gather); item 0 is the placeholder
    texts = _Texts() if prep.kind == "str" else None
    total = plan.total if plan.total is not None else (len(snap) if progress else 0)
    pairs = 0

    def subscriber_cols(ids: Any) -> list[Any]:
        """The subscriber column(s) of rows with these engine ids."""
        n = len(ids)
        known = len(numbering)
        refs = numbering.number(ids)
        if len(numbering) > known:
            new = list(map(values.__getitem__, numbering.order[known:]))
            if texts is not None:
                texts.add(new)
            elif prep.kind != "mixed":
                dicts[0].append(pa.array(new, prep.type))
            else:
                dicts[0].append(pa.array(list(map(_text, new)), pa.large_string()))
                kinds = [_KIND_NAMES[type(v)] for v in new]
                dicts[1].append(pa.array(kinds, pa.large_string()))
        if texts is not None:
            # texts is made here from the snapshot's values and refs numbers
            # them: the engine checks each ref, and trusts each end to lie in
            # the blob
            data, offsets = nb.gather(texts.blob, texts.ends, refs)
            return [pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))]
        index = pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(refs)])
        cols = []
        for d in dicts:
            col = pc.take(pa.chunked_array(d), index)
            cols.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        return cols

    def put(w: Any, cols: list[Any], n: int) -> None:
        _write_rows(w, schema, digest, cols, n)

    with _writer(f, schema, "pattern") as w:
        for c in chunks(snap, per_pair=True):
            n = c.npairs
            patterns = _large_strings(c)
            if not c.simple:
                runs = map(repeat, range(c.nentries), c.counts())
                parents = array("q", chain.from_iterable(runs))
                patterns = pc.take(patterns, _int64(parents))
            cols = [patterns, *subscriber_cols(c.ids)]
            if prep.groups:
                cols.append(pa.nulls(n, pa.large_string()))
            put(w, cols, n)
            pairs += n
            if progress is not None:
                progress(pairs, total)
        end: dict[str, Any] = {"pairs": pairs}
        if prep.groups:
            groups = GroupNames(snap._reg.objects)
            members = 0
            for c in membership_chunks(snap):
                assert c.share is not None
                n = c.npairs
                patterns = _large_strings(c)
                group_names = groups.names
                group_col = pa.array(
                    [group_names[k - 1] for k in groups.numbers(c.share)], pa.large_string()
                )
                put(w, [patterns, *subscriber_cols(c.ids), group_col], n)
                members += n
                if progress is not None:
                    progress(pairs + members, total)
            end = {"pairs": pairs + members, "memberships": members}
            end["policies"] = groups.policy_map()
        end["crc32"] = digest.result()
        w.add_key_value_metadata({"cstrie.end": json.dumps(end)})


class _Texts(ByteTable):
    """str subscribers by number, as their UTF-8."""

    def add(self, new: list[str]) -> None:
        body = "".join(new).encode("utf-8")  # checked encodable by Prepared
        self.extend(body, map(len, new) if body.isascii() else (len(v.encode()) for v in new))


def _int64(values: array[int]) -> Any:
    pa = require_pyarrow()
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _corrupt(exc: BaseException) -> FormatError:
    return FormatError(f"corrupt or truncated Parquet file: {exc}")


_KIND_TYPES = ("str", "int", "bytes", "mixed")


def _kind_type(kind: str) -> Any:
    """The Arrow type of a value column of this kind."""
    pa = require_pyarrow()
    return {
        "str": pa.large_string(),
        "int": pa.int64(),
        "bytes": pa.large_binary(),
        "mixed": pa.large_string(),
    }[kind]


def _open(f: Any) -> tuple[Any, Any, Any]:
    """(ParquetFile, header, end record) of a cstrie Parquet file (parsed,
    not yet checked)."""
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(f, page_checksum_verification=True)
        kv = pf.metadata.metadata or {}
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _corrupt(exc) from None
    if b"cstrie" not in kv:
        raise FormatError("not a cstrie Parquet export (no cstrie metadata)")
    if b"cstrie.end" not in kv:
        raise FormatError("incomplete cstrie Parquet export (the export did not finish)")
    try:
        header = json.loads(kv[b"cstrie"])
        end = json.loads(kv[b"cstrie.end"])
    except m.JSON_ERRORS as exc:
        raise FormatError(f"corrupt cstrie metadata in the Parquet file: {exc}") from None
    return pf, header, end


def _columns(pf: Any, names: list[str], value: str, kind: str) -> list[Any]:
    """The columns ``names`` read whole and checked: exactly those, of their
    types (``value`` of ``kind``'s, the rest large_string), no nulls but in
    ``group``, valid Arrow data."""
    pa = require_pyarrow()
    try:
        tbl = pf.read(columns=names)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _corrupt(exc) from None
    if tbl.schema.names != names:
        raise FormatError(f"expected the columns {names}, found {tbl.schema.names}")
    cols = []
    for name in names:
        want = _kind_type(kind) if name == value else pa.large_string()
        col = tbl.column(name)
        if col.type != want:
            raise FormatError(f"column {name!r} has type {col.type}, expected {want}")
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if arr.null_count and name != "group":
            raise FormatError(f"column {name!r} has null values")
        try:
            arr.validate(full=True)
        except pa.ArrowException as exc:
            raise _corrupt(exc) from None
        cols.append(arr)
    return cols


def _check_end(end: Any, keys: set[str], count: str, names: list[str], cols: list[Any]) -> None:
    """The end record: keys among ``keys``, the row count under ``count``, the
    columns' CRC-32s."""
    if not isinstance(end, dict) or not set(end) <= keys:
        raise FormatError("invalid cstrie.end metadata in the Parquet file")
    if end.get(count) != len(cols[0]):
        raise FormatError(f"the {count[:-1]} count in the metadata does not match the rows")
    digest = _Digest(names)
    for name, arr in zip(names, cols, strict=True):
        digest.update(name, arr)
    if end.get("crc32") != digest.result():
        raise FormatError("checksum mismatch: the Parquet file is corrupt")


def _distinct(value: Any, types: Any, kind: str) -> tuple[Any, list[Any]]:
    """(each row's 1-based reference as a uint64 array, the distinct values):
    the value column dictionary-encoded in Arrow (a mixed column keyed by type
    and text)."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    if kind == "mixed":
        key = pc.binary_join_element_wise(types, value, pa.scalar("\x00", pa.large_string()))
    else:
        key = value
    enc = pc.dictionary_encode(key)
    refs = pc.cast(pc.add(pc.cast(enc.indices, pa.int64()), 1), pa.uint64())
    values = enc.dictionary.to_pylist()
    if kind == "mixed":
        values = [_from_text(v) for v in values]
    return refs, values


def _string_buffers(arr: Any) -> tuple[Any, Any]:
    """(data, the n+1 int64 offsets) of a large_string array, as buffers."""
    n = len(arr)
    bufs = arr.buffers()
    offsets = memoryview(bufs[1])[arr.offset * 8 : (arr.offset + n + 1) * 8]
    return (bufs[2] if bufs[2] is not None else b""), offsets


def _u64_buffer(arr: Any) -> memoryview:
    return memoryview(arr.buffers()[1])[arr.offset * 8 : (arr.offset + len(arr)) * 8]


def read(f: Any, classes: m.Classes, decode: Decode | None = None) -> Any:
    """Load a Parquet export (``f``: a path or a seekable binary file): a
    :class:`cstrie.Trie`, or a :class:`cstrie.TopicIndex` for a topic index
    file."""
    pa = require_pyarrow()
    import pyarrow.compute as pc

    pf, header, end = _open(f)
    if m.content_of(header, "parquet") == m.TOPICS:
        return _read_topics(pf, header, end, decode, classes)
    dialect, codec = m.check_meta(header, "parquet")
    kind = header.get("subscriber_kind")
    if kind not in _KIND_TYPES:
        raise FormatError(f"invalid subscriber_kind {kind!r}")
    names = ["pattern", "subscriber"] + (["subscriber_type"] if kind == "mixed" else [])
    # A version 2 file has a group column when the writer's trie had groups.
    groups = "group" in pf.schema_arrow.names
    if groups and m.version_of(header) < m.GROUPS_SINCE:
        raise FormatError(
            f"a group column in a version {m.version_of(header)} file (share groups need "
            f"version {m.GROUPS_SINCE})"
        )
    if groups:
        names.append("group")
    cols = _columns(pf, names, "subscriber", kind)
    end_keys = {"pairs", "crc32"} | ({"memberships", "policies"} if groups else set())
    _check_end(end, end_keys, "pairs", names, cols)
    policies = m.check_policies(end.get("policies"))
    patterns = cols[0]
    refs, values = _distinct(cols[1], cols[2] if kind == "mixed" else None, kind)
    if kind == "mixed":  # distinct texts, but two may spell one value ("int\x0001", "int\x001")
        m.check_distinct(values)
    memberships: list[m.Membership] = []
    group_col = cols[-1] if groups else None
    del cols
    nmem = len(group_col) - group_col.null_count if group_col is not None else 0
    if end.get("memberships", 0) != nmem:
        raise FormatError("the membership count in the metadata does not match the rows")
    if group_col is not None and nmem:
        member = pc.is_valid(group_col)
        memberships = list(
            zip(
                patterns.filter(member).to_pylist(),
                refs.filter(member).to_pylist(),
                group_col.filter(member).to_pylist(),
                strict=True,
            )
        )
        plain = pc.invert(member)
        patterns = patterns.filter(plain)
        refs = refs.filter(plain)
        if patterns.offset or refs.offset:  # pragma: no cover - filter() gives neither
            patterns, refs = pa.concat_arrays([patterns]), pa.concat_arrays([refs])
    values = m.decode_values(values, codec, decode)
    data, offsets = _string_buffers(patterns)
    return m.build_trie(
        classes.trie, data, offsets, _u64_buffer(refs), values, dialect, memberships, policies
    )


def _read_topics(pf: Any, header: Any, end: Any, decode: Decode | None, classes: m.Classes) -> Any:
    """A topic index file: ``topic`` and ``value`` (+ ``value_type``) columns,
    checked against the end record; the index is built by engine puts."""
    dialect, codec = m.check_topic_meta(header, "parquet")
    kind = header.get("value_kind")
    if kind not in _KIND_TYPES:
        raise FormatError(f"invalid value_kind {kind!r}")
    names = ["topic", "value"] + (["value_type"] if kind == "mixed" else [])
    cols = _columns(pf, names, "value", kind)
    _check_end(end, {"topics", "crc32"}, "topics", names, cols)
    refs, values = _distinct(cols[1], cols[2] if kind == "mixed" else None, kind)
    values = load_values(values, codec, decode)
    data, offsets = _string_buffers(cols[0])
    return build_index(
        classes.topic_index, data, offsets.cast("q"), _u64_buffer(refs).cast("Q"), values, dialect
    )


def _from_text(v: str) -> str | int | bytes:
    kind, _, text = v.partition("\x00")
    try:
        if kind == "str":
            return text
        if kind == "int":
            return int(text)
        if kind == "bytes":
            return base64.b64decode(text, validate=True)
    except ValueError:
        pass
    raise FormatError(f"invalid mixed subscriber {text!r} of type {kind!r}")
