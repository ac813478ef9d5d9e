"""The compact binary format: a matcher to ship to other processes.

Loading does no per-pair Python work: the pair sections hold exactly the
buffers :meth:`cstrie.Trie.from_buffers` takes.  All integers little-endian::

    offset  size  field
    0       8     magic  b"\\x89CSTRIE\\n" (a text-mode transfer breaks it)
    8       2     u16 format version (2; version 1 files have no SHAR and GRPS
                  sections)
    10      2     u16 flags (0; any other value is refused)
    12      4     u32 meta_len
    16      m     meta: UTF-8 JSON {"format": "cstrie-binary", "version": 2,
                  "dialect": {every Dialect field}, "subscriber_codec": "native"
                  or "user", "writer": "cstrie X.Y.Z"}
    pair sections, each (one per engine chunk, at most 65,536 pairs)
            4     b"PAIR"
            8     u64 n pairs
            8     u64 d data bytes
            8*n   i64 end offset of each pair's pattern, counted from the start
                  of the pattern data of the whole file (so the sections'
                  offset arrays concatenate into the Arrow-style n+1 offsets
                  with a leading 0)
            8*n   u64 subscriber of each pair: a 1-based index into the table
            d     the patterns, UTF-8, back to back
    membership sections (version 2; none when there is no share group), each
            4     b"SHAR"
            8     u64 n memberships
            8     u64 d data bytes
            8*n   i64 end offset of each membership's filter, counted from the
                  start of the filter data of all SHAR sections
            8*n   u64 the member: a 1-based index into the subscriber table
            8*n   u64 the group: a 1-based index into the group table
            d     the filters, UTF-8, back to back
    subscriber table (after the pairs and memberships: the writer numbers
    subscribers as it meets them, in one pass)
            4     b"SUBS"
            8     u64 count S
            8     u64 blob_len B
            S     u8 kind per subscriber: 0 str (UTF-8, surrogates passed
                  through), 1 int (two's complement, little-endian, minimal
                  length), 2 bytes (as is)
            8*S   i64 end offset of each subscriber's bytes in the blob
            B     blob
    group table (version 2, always there, G may be 0)
            4     b"GRPS"
            8     u64 count G
            8     u64 blob_len B
            G     u8 policy per group: 0 round-robin, 1 random, 2 sticky
            8*G   i64 end offset of each group's name in the blob
            B     the names, UTF-8, back to back
    trailer
            4     b"END\\0"
            8     u64 total pairs (ordinary pairs: PAIR sections)
            8     u64 total pattern bytes (PAIR sections)
            4     u32 number of pair sections
            4     u32 CRC-32 (zlib) of every byte before it

The writer streams (memory bounded by one section) and computes the CRC as it
goes; the loader checks the CRC before it parses anything else, so a truncated
or corrupt file raises :class:`~cstrie.export.FormatError` and builds nothing.

Topic index files (:mod:`cstrie.export.topicfile`) share the frame (magic,
u16 version 1, flags 0, meta of format ``cstrie-topics-binary``, trailer)
with other sections; :func:`loads` returns a :class:`~cstrie.TopicIndex` for
them::

    topic sections, each (one per engine chunk)
            4     b"TOPS"
            8     u64 n topics
            8     u64 d data bytes
            8*n   i64 end offset of each topic (from the start of all topic data)
            8*n   u64 the topic's value: a 1-based index into the value table
            d     the topics, UTF-8, back to back
    value table (distinct values, numbered as the writer meets them)
            4     b"VALS", then as SUBS: u64 count, u64 blob_len, u8 kinds,
                  i64 end offsets, blob
    trailer as above (total topics, total topic bytes, topic sections, CRC)
"""

from __future__ import annotations

import json
import operator
import struct
import zlib
from array import array
from collections.abc import Callable, Iterable
from itertools import accumulate, chain, islice
from typing import Any, BinaryIO

from cstrie.export import meta as m
from cstrie.export.codec import BYTES, INT, STR, Decode, Plan
from cstrie.export.errors import FormatError
from cstrie.export.source import GroupNames, Numbering, chunks, membership_chunks
from cstrie.export.topicfile import Stored, TopicPlan, ValueTable, build_index, load_values

__all__ = ["MAGIC", "loads", "read", "write", "write_topics"]

MAGIC = b"\x89CSTRIE\n"
_HEAD = struct.Struct("<HHI")
_SECTION = struct.Struct("<4sQQ")
_KIND_OF = {str: STR, int: INT, bytes: BYTES}
_TABLE_SLICE = 1 << 16
_TRAILER = struct.Struct("<4sQQII")
#: group policy names <-> their u8 code in the group table
_POLICY_CODES = ("round-robin", "random", "sticky")


def _value_bytes(v: str | int | bytes) -> bytes:
    t = type(v)
    if t is str:
        return v.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
    if t is int:
        return v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)  # type: ignore[union-attr]
    return v  # type: ignore[return-value]


def write(snap: Any, f: BinaryIO, plan: Plan, progress: m.Progress | None = None) -> None:
    """Write ``snap`` to the binary file ``f`` in one streaming pass."""
    crc = 0

    def put(b: bytes) -> None:
        nonlocal crc
        f.write(b)
        crc = zlib.crc32(b, crc)

    meta = json.dumps(m.make_meta("binary", snap.dialect, plan.codec)).encode()
    put(MAGIC + _HEAD.pack(m.VERSION, 0, len(meta)) + meta)
    index = Numbering()  # engine id -> 1-based table position, in order of appearance
    base = pairs = sections = 0
    total = plan.total if plan.total is not None else (len(snap) if progress else 0)
    for c in chunks(snap, per_pair=True):
        data, ends = c.pair_patterns(base)
        refs = index.number(c.ids)
        put(_SECTION.pack(b"PAIR", len(refs), len(data)))
        put(array("q", ends).tobytes())
        put(refs.tobytes())
        put(data)
        base += len(data)
        pairs += len(refs)
        sections += 1
        if progress is not None:
            progress(pairs, total)
    ordinary, pattern_bytes = pairs, base
    groups = GroupNames(snap._reg.objects)
    if plan.shared:
        base = 0
        for c in membership_chunks(snap):
            assert c.share is not None
            data, ends = c.pair_patterns(base)
            refs = index.number(c.ids)
            put(_SECTION.pack(b"SHAR", len(refs), len(data)))
            put(array("q", ends).tobytes())
            put(refs.tobytes())
            put(array("Q", groups.numbers(c.share)).tobytes())
            put(data)
            base += len(data)
            pairs += len(refs)
            if progress is not None:
                progress(pairs, total)
    order = index.order
    values = plan.values
    _put_table(
        put,
        b"SUBS",
        len(order),
        (
            list(map(values.__getitem__, order[k : k + _TABLE_SLICE]))
            for k in range(0, len(order), _TABLE_SLICE)
        ),
    )
    names = [n.encode() for n in groups.names]
    put(_SECTION.pack(b"GRPS", len(names), sum(map(len, names))))
    put(bytes(map(_POLICY_CODES.index, groups.policies)))
    put(array("q", accumulate(map(len, names))).tobytes())
    put(b"".join(names))
    put(_TRAILER.pack(b"END\0", ordinary, pattern_bytes, sections, 0)[:-4])
    f.write(struct.pack("<I", crc))


def _put_table(
    put: Callable[[bytes], None], tag: bytes, count: int, parts: Iterable[list[Stored]]
) -> None:
    """Write a value table section (``SUBS``, ``VALS``) of ``count`` values,
    given a slice at a time: each value is encoded once, and a slice's bytes
    are kept joined (O(values) bytes, no object per value) until the section
    header with their total is out."""
    kinds = bytearray()
    lengths = array("q")
    blobs: list[bytes] = []
    for part in parts:
        kinds += bytes(map(_KIND_OF.__getitem__, map(type, part)))
        encoded = _encoded(part)
        lengths.extend(map(len, encoded))
        blobs.append(b"".join(encoded))
        del part, encoded
    assert len(kinds) == count
    put(_SECTION.pack(tag, count, sum(lengths)))
    put(bytes(kinds))
    put(array("q", accumulate(lengths)).tobytes())
    for blob in blobs:
        put(blob)


def write_topics(
    snap: Any, f: BinaryIO, tplan: TopicPlan, progress: m.Progress | None = None
) -> int:
    """Write the topic snapshot ``snap`` to the binary file ``f`` in one
    streaming pass: a ``TOPS`` section per engine chunk, then the ``VALS``
    table of distinct values."""
    crc = 0

    def put(b: bytes) -> None:
        nonlocal crc
        f.write(b)
        crc = zlib.crc32(b, crc)

    meta = json.dumps(m.make_topic_meta("binary", snap.dialect, tplan.codec)).encode()
    put(MAGIC + _HEAD.pack(m.TOPICS_VERSION, 0, len(meta)) + meta)
    table = ValueTable()
    base = done = sections = 0
    total = tplan.total if tplan.total is not None else (len(snap) if progress else 0)
    for c in chunks(snap, per_pair=True):
        data, ends = c.pair_patterns(base)
        refs = table.refs(tplan.stored(c.ids))
        put(_SECTION.pack(b"TOPS", len(refs), len(data)))
        put(array("q", ends).tobytes())
        put(refs.tobytes())
        put(data)
        base += len(data)
        done += len(refs)
        sections += 1
        if progress is not None:
            progress(done, total)
    vals = table.values
    _put_table(
        put,
        b"VALS",
        len(vals),
        (vals[k : k + _TABLE_SLICE] for k in range(0, len(vals), _TABLE_SLICE)),
    )
    put(_TRAILER.pack(b"END\0", done, base, sections, 0)[:-4])
    f.write(struct.pack("<I", crc))
    return done


def _encoded(values: list[str | int | bytes]) -> list[bytes]:
    """The stored bytes of each value (str at C speed when it can be)."""
    if set(map(type, values)) == {str}:
        try:
            return list(map(str.encode, values))  # type: ignore[arg-type]
        except UnicodeEncodeError:
            pass
    return list(map(_value_bytes, values))


def _values(kinds: bytes, ends: array[int], blob: bytes) -> list[str | int | bytes]:
    """The values of a table section (``SUBS``, ``VALS``) whose offsets
    passed its checks; a str that is not UTF-8 is a FormatError."""
    try:
        return _decode_values(kinds, ends, blob)
    except UnicodeDecodeError as exc:
        raise FormatError(f"a str value in a value table is not valid UTF-8: {exc}") from None


def _decode_values(kinds: bytes, ends: array[int], blob: bytes) -> list[str | int | bytes]:
    n = len(kinds)
    # (start, end) pairs straight from the offsets: a list of slice objects
    # first cost 4x more (300k tracked objects wake the garbage collector).
    bounds = zip(chain((0,), ends), ends, strict=False)  # one longer than the other
    if kinds.count(STR) == n:  # the common case: every subscriber a str
        if blob.isascii():
            text = blob.decode("ascii")
            return [text[a:b] for a, b in bounds]
        return [blob[a:b].decode("utf-8", "surrogatepass") for a, b in bounds]
    out: list[str | int | bytes] = []
    for k, (a, b) in zip(kinds, bounds, strict=True):
        piece = blob[a:b]
        if k == STR:
            out.append(piece.decode("utf-8", "surrogatepass"))
        elif k == INT:
            out.append(int.from_bytes(piece, "little", signed=True))
        elif k == BYTES:
            out.append(piece)
        else:
            raise FormatError(f"unknown value kind {k} in a value table")
    return out


def read(f: BinaryIO, classes: m.Classes, decode: Decode | None = None) -> Any:
    """Load a binary export from the file ``f``; returns a :class:`cstrie.Trie`."""
    raw = f.read()
    return loads(raw, classes, decode)


class _Body:
    """The sections of a binary file between its header and its trailer,
    read in order with bounds checks (every fault a FormatError)."""

    def __init__(self, raw: bytes, pos: int) -> None:
        self.raw = raw
        self.view = memoryview(raw)
        self.pos = pos
        self.end = len(raw) - _TRAILER.size

    def at(self, tag: bytes) -> bool:
        """Does the next section have this tag?"""
        return self.raw[self.pos : self.pos + 4] == tag

    def section(self, tag: bytes) -> tuple[int, int]:
        """The two u64 of the next section's head, which must be ``tag``."""
        pos = self.pos
        if pos + _SECTION.size > self.end:
            raise FormatError(f"missing {tag.decode()} section")
        got, a, b = _SECTION.unpack_from(self.raw, pos)
        if got != tag:
            raise FormatError(f"expected a {tag.decode()} section at byte {pos}, found {got!r}")
        self.pos = pos + _SECTION.size
        return a, b

    def take(self, size: int) -> memoryview:
        """The next ``size`` bytes."""
        pos = self.pos
        if size < 0 or pos + size > self.end:
            raise FormatError("a section runs past the end of the file")
        self.pos = pos + size
        return self.view[pos : pos + size]

    def table(self, tag: bytes) -> tuple[bytes, array[int], bytes]:
        """A (u8 per item, end offsets, blob) table section."""
        count, blob_len = self.section(tag)
        kinds = self.take(count).tobytes()
        ends = array("q")
        ends.frombytes(self.take(8 * count))
        blob = self.take(blob_len).tobytes()
        if (count == 0 and blob_len) or (
            count
            and (
                ends[-1] != blob_len
                or ends[0] < 0
                or not all(map(operator.le, ends, islice(ends, 1, None)))
            )
        ):
            raise FormatError(f"corrupt {tag.decode()} table offsets")
        return kinds, ends, blob

    def runs(self, tag: bytes, widths: int) -> tuple[array[int], list[array[int]], bytes, int]:
        """Every consecutive section ``tag`` of ``n`` items and ``d`` data
        bytes, each holding ``n`` i64 end offsets, ``widths`` arrays of ``n``
        u64 and the data: (the n+1 offsets with a leading 0, the u64 arrays,
        the data, the number of sections)."""
        ends = [memoryview(b"")]
        columns: list[list[memoryview]] = [[] for _ in range(widths)]
        data: list[memoryview] = []
        sections = 0
        while self.at(tag):
            sections += 1
            n, d = self.section(tag)
            ends.append(self.take(8 * n))
            for col in columns:
                col.append(self.take(8 * n))
            data.append(self.take(d))
        offsets = array("q", [0])
        offsets.frombytes(b"".join(ends))
        arrays = []
        for col in columns:
            arr = array("Q")
            arr.frombytes(b"".join(col))
            arrays.append(arr)
        return offsets, arrays, b"".join(data), sections

    def finish(self) -> tuple[int, int, int]:
        """(total items, total data bytes, sections) from the trailer, which
        must follow the last section."""
        if self.pos != self.end:
            raise FormatError(f"unexpected bytes at {self.pos} before the trailer")
        tag, total, total_bytes, sections, _crc = _TRAILER.unpack_from(self.raw, self.end)
        if tag != b"END\0":
            raise FormatError("missing trailer: the file is truncated or corrupt")
        return total, total_bytes, sections


def _open(raw: bytes) -> tuple[int, Any, _Body]:
    """Check a binary file's fixed header and CRC: (the header's u16 version,
    its meta record (parsed JSON, not yet checked), the body)."""
    if len(raw) < 16 or raw[:8] != MAGIC:
        if raw[:8] == MAGIC[: len(raw)]:
            raise FormatError("truncated cstrie binary file (shorter than its header)")
        raise FormatError("not a cstrie binary export (bad magic bytes)")
    version, flags, meta_len = _HEAD.unpack_from(raw, 8)
    newest = max(m.VERSION, m.TOPICS_VERSION)  # of either kind; the meta says which
    if version > newest:
        raise FormatError(
            f"binary format version {version} is newer than this cstrie reads "
            f"(up to {newest}); upgrade cstrie"
        )
    if version < 1:
        raise FormatError(f"invalid binary format version {version}")
    if len(raw) < 16 + _SECTION.size + _TRAILER.size:
        raise FormatError("truncated cstrie binary file")
    view = memoryview(raw)
    (stored,) = struct.unpack_from("<I", raw, len(raw) - 4)
    if zlib.crc32(view[:-4]) != stored:
        raise FormatError("checksum mismatch: the file is truncated or corrupt")
    if flags != 0:
        raise FormatError(f"unknown flags 0x{flags:04x} in the binary header")
    body = _Body(raw, 16 + meta_len)
    if body.pos > body.end:
        raise FormatError("the binary header runs past the end of the file")
    try:
        meta = json.loads(view[16 : body.pos].tobytes())
    except m.JSON_ERRORS as exc:
        raise FormatError(f"the binary header is not valid JSON: {exc}") from None
    return version, meta, body


def _check_version(version: int, meta: dict[str, Any]) -> None:
    if m.version_of(meta) != version:
        raise FormatError(
            f"the binary header says version {version} and its meta {m.version_of(meta)}"
        )


def loads(raw: bytes, classes: m.Classes, decode: Decode | None = None) -> Any:
    """Load a binary export held in memory: a :class:`cstrie.Trie`, or a
    :class:`cstrie.TopicIndex` for a topic index file."""
    version, meta, body = _open(raw)
    if m.content_of(meta, "binary") == m.TOPICS:
        return _load_topics(version, meta, body, decode, classes)
    dialect, codec = m.check_meta(meta, "binary")
    _check_version(version, meta)
    offsets, (refs,), data, nsections = body.runs(b"PAIR", 1)
    shar = body.runs(b"SHAR", 2) if version >= m.GROUPS_SINCE else None
    kinds, sub_ends, blob = body.table(b"SUBS")
    group_table = body.table(b"GRPS") if version >= m.GROUPS_SINCE else None
    total, total_bytes, sections = body.finish()
    if len(refs) != total or len(data) != total_bytes or sections != nsections:
        raise FormatError("the trailer's counts do not match the file")
    # A ref outside 1..count is reported by the bulk build (build_trie).
    m.check_offsets(offsets, len(data))
    m.check_utf8(data, offsets)
    values = _values(kinds, sub_ends, blob)
    m.check_distinct(values)  # a table in the file: it may repeat one
    memberships, policies = (
        _memberships(shar, group_table)
        if shar is not None and group_table is not None
        else ([], None)
    )
    values = m.decode_values(values, codec, decode)
    return m.build_trie(classes.trie, data, offsets, refs, values, dialect, memberships, policies)


def _load_topics(
    version: int, meta: Any, body: _Body, decode: Decode | None, classes: m.Classes
) -> Any:
    """The rest of a topic index file: TOPS sections, the VALS table, the
    trailer (its counts checked); the index is built by engine puts."""
    dialect, codec = m.check_topic_meta(meta, "binary")
    _check_version(version, meta)
    offsets, (refs,), data, nsections = body.runs(b"TOPS", 1)
    kinds, ends, blob = body.table(b"VALS")
    total, total_bytes, sections = body.finish()
    if len(refs) != total or len(data) != total_bytes or sections != nsections:
        raise FormatError("the trailer's counts do not match the file")
    values = load_values(_values(kinds, ends, blob), codec, decode)
    return build_index(classes.topic_index, data, offsets, refs, values, dialect)


def _memberships(
    shar: tuple[array[int], list[array[int]], bytes, int],
    group_table: tuple[bytes, array[int], bytes],
) -> tuple[list[m.Membership], dict[str, str] | None]:
    """The SHAR sections' memberships and the GRPS table's policies (checked:
    offsets, UTF-8, group references; member references are checked when the
    memberships join)."""
    codes, name_ends, name_blob = group_table
    try:
        names = [
            name_blob[a:b].decode("utf-8")
            for a, b in zip(chain((0,), name_ends), name_ends, strict=False)
        ]
    except UnicodeDecodeError:
        raise FormatError("a group name is not valid UTF-8") from None
    if len(set(names)) != len(names):
        raise FormatError("the group table lists a group twice (corrupt file)")
    if any(c >= len(_POLICY_CODES) for c in codes):
        raise FormatError("unknown group policy code in the group table")
    policies = {name: _POLICY_CODES[c] for name, c in zip(names, codes, strict=True)}
    ends, (refs, groups), data, _ = shar
    if not (len(ends) - 1 == len(refs) == len(groups)):
        raise FormatError("corrupt membership sections")
    m.check_offsets(ends, len(data), "filter")
    m.check_utf8(data, ends, "filter")
    if any(not 1 <= g <= len(names) for g in groups):
        raise FormatError(f"a membership refers to a group outside 1..{len(names)}")
    filters = [data[a:b].decode("utf-8") for a, b in zip(ends, islice(ends, 1, None), strict=False)]
    memberships = [(f, r, names[g - 1]) for f, r, g in zip(filters, refs, groups, strict=True)]
    return memberships, policies
