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
from cstrie.export.source import ByteTable, GroupNames, Numbering, chunks, membership_chunks

__all__ = ["prepare", "read", "require_pyarrow", "write"]

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
    """The column types, chosen (and checked) before anything is written."""

    def __init__(self, plan: Plan) -> None:
        pa = require_pyarrow()
        self.groups = plan.shared
        kinds = plan.kinds
        values = plan.members
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
                    f"subscriber {bad!r} is not valid UTF-8 text (a lone surrogate); Parquet "
                    "cannot store it: use the binary or jsonl format, or encode="
                )
        self.type = {
            "str": pa.large_string(),
            "int": pa.int64(),
            "bytes": pa.large_binary(),
            "mixed": pa.large_string(),
        }[self.kind]
        fields = [
            pa.field("pattern", pa.large_string(), nullable=False),
            pa.field("subscriber", self.type, nullable=False),
        ]
        if self.kind == "mixed":
            fields.append(pa.field("subscriber_type", pa.large_string(), nullable=False))
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
    return Prepared(plan)


def write(
    snap: Any, f: BinaryIO, plan: Plan, prep: Prepared, progress: m.Progress | None = None
) -> None:
    """Write ``snap`` to ``f`` as Parquet, one row group per engine chunk."""
    pa = require_pyarrow()
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

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
            data, offsets = nb.gather(texts.blob, texts.ends, refs)
            return [pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))]
        index = pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(refs)])
        cols = []
        for d in dicts:
            col = pc.take(pa.chunked_array(d), index)
            cols.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        return cols

    def put(w: Any, cols: list[Any], n: int) -> None:
        for name, col in zip(names, cols, strict=True):
            digest.update(name, col)
        w.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=max(n, 1))

    # Dictionary pages for the subscriber column only: patterns are nearly all
    # distinct, so hashing them for a dictionary Parquet then drops cost 15%.
    with pq.ParquetWriter(
        f,
        schema,
        write_page_checksum=True,
        compression="zstd",
        use_dictionary=[n for n in names if n != "pattern"],
    ) as w:
        for c in chunks(snap, per_pair=True):
            n = c.npairs
            pat_off = array("q", (0,))
            pat_off += c.pat_end  # a copy at C speed
            patterns = pa.LargeStringArray.from_buffers(
                c.ngroups, pa.py_buffer(pat_off), pa.py_buffer(c.pat)
            )
            if not c.simple:
                parents = array("q", chain.from_iterable(map(repeat, range(c.ngroups), c.counts())))
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
                pat_off = array("q", (0,))
                pat_off += c.pat_end
                patterns = pa.LargeStringArray.from_buffers(
                    n, pa.py_buffer(pat_off), pa.py_buffer(c.pat)
                )
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


def read(f: Any, decode: Decode | None = None) -> Any:
    """Load a Parquet export (``f``: a path or a seekable binary file)."""
    pa = require_pyarrow()
    import pyarrow.compute as pc
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
    except ValueError as exc:
        raise FormatError(f"corrupt cstrie metadata in the Parquet file: {exc}") from None
    dialect, codec = m.check_meta(header, "parquet")
    kind = header.get("subscriber_kind")
    expected_types = {
        "str": pa.large_string(),
        "int": pa.int64(),
        "bytes": pa.large_binary(),
        "mixed": pa.large_string(),
    }
    if kind not in expected_types:
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
    try:
        tbl = pf.read(columns=names)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _corrupt(exc) from None
    if tbl.schema.names != names:
        raise FormatError(f"expected the columns {names}, found {tbl.schema.names}")
    cols = []
    for name in names:
        want = pa.large_string() if name != "subscriber" else expected_types[kind]
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
    del tbl
    end_keys = {"pairs", "crc32"} | ({"memberships", "policies"} if groups else set())
    if not isinstance(end, dict) or not set(end) <= end_keys:
        raise FormatError("invalid cstrie.end metadata in the Parquet file")
    if end.get("pairs") != len(cols[0]):
        raise FormatError("the pair count in the metadata does not match the rows")
    digest = _Digest(names)
    for name, arr in zip(names, cols, strict=True):
        digest.update(name, arr)
    if end.get("crc32") != digest.result():
        raise FormatError("checksum mismatch: the Parquet file is corrupt")
    policies = m.check_policies(end.get("policies"))
    patterns = cols[0]
    if kind == "mixed":
        key = pc.binary_join_element_wise(cols[2], cols[1], pa.scalar("\x00", pa.large_string()))
    else:
        key = cols[1]
    enc = pc.dictionary_encode(key)
    refs = pc.cast(pc.add(pc.cast(enc.indices, pa.int64()), 1), pa.uint64())
    values = enc.dictionary.to_pylist()
    if kind == "mixed":  # distinct texts, but two may spell one value ("int\x0001", "int\x001")
        values = [_from_text(v) for v in values]
        m.check_distinct(values)
    memberships: list[m.Membership] = []
    group_col = cols[-1] if groups else None
    del enc, key, cols
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
    n = len(patterns)
    bufs = patterns.buffers()
    offsets = memoryview(bufs[1])[patterns.offset * 8 : (patterns.offset + n + 1) * 8]
    data = bufs[2] if bufs[2] is not None else b""
    rbuf = memoryview(refs.buffers()[1])[refs.offset * 8 : (refs.offset + n) * 8]
    return m.build_trie(data, offsets, rbuf, values, dialect, memberships, policies)


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
