"""JSON Lines: one subscription per line, for people and line-oriented tools.

Layout (UTF-8, ``\\n`` line ends)::

    {"format": "cstrie-jsonl", "version": 2, "dialect": {...}, "subscriber_codec": "native", ...}
    {"pattern": "stock.*.nyse", "subscriber": "alice"}
    {"pattern": "stock.#", "subscriber": 42}
    {"pattern": "stock.#", "subscriber": {"bytes": "AAE="}}
    {"pattern": "orders.*", "subscriber": "w1", "group": "billing"}
    {"end": {"pairs": 4, "memberships": 1, "policies": {"billing": "sticky"}, "crc32": 123}}

The first line is the header (see :func:`cstrie.export.meta.make_meta`); then
one line per (pattern, subscriber) pair, subscribers as JSON strings,
integers, ``{"bytes": base64}`` or, for a str holding a lone surrogate (not
valid UTF-8 text), ``{"text": base64 of its UTF-8 with surrogates passed
through}``; the last line is the footer with the number of pairs and the
CRC-32 of every byte before the footer line.  A missing footer (a truncated
file), a wrong count or a wrong CRC is a :class:`~cstrie.export.FormatError`.
To edit a file by hand, delete ``"crc32"`` from the footer (the pair count is
still checked).  The writer uses compact separators; the readers accept any
JSON spacing.  With pyarrow installed, plain files (all-string or all-int64
subscribers) are parsed by Arrow's JSON reader straight into buffers; others
by :mod:`json`.

Topic index files (:mod:`cstrie.export.topicfile`) have the same frame with
a header of format ``cstrie-topics-jsonl`` (version 1, ``value_codec``), one
``{"topic": "...", "value": ...}`` line per topic (values written as
subscribers are, each on its line; shared values repeat) and the footer
``{"end": {"topics": N, "crc32": C}}``; :func:`loads` returns a
:class:`~cstrie.TopicIndex` for them (parsed by :mod:`json`, built by engine
puts)::

    {"format": "cstrie-topics-jsonl", "version": 1, "dialect": {...}, "value_codec": "native", ...}
    {"topic":"sensors/kitchen/temp","value":{"bytes":"MjEuNQ=="}}
    {"topic":"$SYS/broker/uptime","value":42}
    {"end": {"topics": 2, "crc32": 123}}
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, chain, repeat
from operator import itemgetter
from typing import Any, BinaryIO

from cstrie import _binding as nb
from cstrie.export import meta as m
from cstrie.export.codec import Decode, Plan, surrogate_text_b64, value_from_json
from cstrie.export.errors import FormatError
from cstrie.export.source import (
    ByteTable,
    Chunk,
    GroupNames,
    Numbering,
    chunks,
    membership_chunks,
)
from cstrie.export.topicfile import TopicPlan, ValueTable, build_index, load_values

__all__ = ["loads", "read", "write", "write_topics"]

_enc_str: Callable[[str], str] = json.encoder.encode_basestring
_OPEN_B = b'{"pattern":"'
_MID = '","subscriber":'
_CLOSE = '}\n{"pattern":"'  # each tail also opens the next line (trimmed at the end)
# the same for topic index files: {"topic":"...","value":...}
_T_OPEN_B = b'{"topic":"'
_T_MID = '","value":'
_T_CLOSE = '}\n{"topic":"'
# bytes a pattern can hold as they are inside a JSON string (not ", \\ or controls)
_PLAIN = bytes(b for b in range(0x20, 0x100) if b not in b'"\\')


def _json_text(v: str | int | bytes) -> str:
    """A stored subscriber as JSON text (non-ASCII kept as UTF-8; a str with a
    lone surrogate as ``{"text": base64}``, see ``codec.json_value``)."""
    if isinstance(v, str):
        text = _enc_str(v)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                text = '{"text":"' + surrogate_text_b64(v) + '"}'
        return text
    if isinstance(v, int):
        return str(v)
    return '{"bytes":"' + base64.b64encode(v).decode("ascii") + '"}'


class _TailTable(ByteTable):
    """Value number -> b'<mid><JSON><close>': the end of a line after its
    first field's text (``","subscriber":`` and the value's JSON, ``}``), and
    the start of the next line (``\\n{"pattern":"``), made once per value (a
    chunk's new ones at once).  The engine interleaves this byte table with a
    chunk's patterns or topics (:func:`cstrie._binding.interleave`)."""

    def __init__(self, mid: str = _MID, close: str = _CLOSE) -> None:
        super().__init__()
        self._mid, self._close = mid, close

    def add(self, values: list[str | int | bytes]) -> None:
        """Append the tails of ``values``, numbered on from ``len(self)``."""
        mid, close = self._mid, self._close
        texts, q = _texts(values)
        body = (mid + q + (q + close + mid + q).join(texts) + q + close).encode("utf-8")
        sizes: Iterable[int]
        if body.isascii():  # a tail is as long in bytes as in characters
            sizes = map((len(mid) + len(close) + 2 * len(q)).__add__, map(len, texts))
        else:
            sizes = [len((mid + q + t + q + close).encode("utf-8")) for t in texts]
        self.extend(body, sizes)


class _Tails(_TailTable):
    """The tails of subscription lines, numbered by engine subscriber id
    (a :class:`~cstrie.export.source.Numbering`)."""

    def __init__(self, values: Sequence[Any] | dict[int, str | int | bytes]) -> None:
        super().__init__()
        self.numbering = Numbering()
        self._source = values

    def refs(self, ids: array[int]) -> array[int]:
        """Number a chunk's engine ids, making the tails of its new subscribers."""
        refs = self.numbering.number(ids)
        order = self.numbering.order
        if len(order) >= len(self):
            self.add(list(map(self._source.__getitem__, order[len(self) - 1 :])))
        return refs


def _texts(vals: list[str | int | bytes]) -> tuple[list[str], str]:
    """The JSON texts of subscribers, and a quote to put around each: plain
    ASCII strings (no quote, backslash or control character) are their own
    text between quotes, so the common case encodes nothing one by one."""
    if set(map(type, vals)) == {str}:
        strs: list[str] = vals  # type: ignore[assignment]
        joined = "".join(strs)
        if joined.isascii() and joined.isprintable() and '"' not in joined and "\\" not in joined:
            return strs, '"'
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate somewhere
            pass
        else:
            return list(map(_enc_str, strs)), ""
    return list(map(_json_text, vals)), ""


def write(snap: Any, f: BinaryIO, plan: Plan, progress: m.Progress | None = None) -> None:
    """Write ``snap`` to ``f`` as JSON Lines, one chunk at a time: the ordinary
    pairs, then the share-group memberships."""
    crc = 0

    def put(b: bytes | memoryview) -> None:
        nonlocal crc
        f.write(b)
        crc = zlib.crc32(b, crc)

    put((json.dumps(m.make_meta("jsonl", snap.dialect, plan.codec)) + "\n").encode())
    tails = _Tails(plan.values)
    total = plan.total if plan.total is not None else (len(snap) if progress else 0)
    pairs = 0
    for c in chunks(snap, per_pair=True):  # one group per pair
        refs = tails.refs(c.ids)
        n = len(refs)
        _put_lines(put, c, tails, refs, _OPEN_B)
        pairs += n
        if progress is not None:
            progress(pairs, total)
    end: dict[str, Any] = {"pairs": pairs}
    if plan.shared:
        groups = GroupNames(snap._reg.objects)
        members = _write_memberships(snap, plan, groups, put, pairs, total, progress)
        if members:
            end = {"pairs": pairs + members, "memberships": members}
            end["policies"] = groups.policy_map()
    end["crc32"] = crc
    f.write((json.dumps({"end": end}) + "\n").encode())


def _put_lines(
    put: Callable[[bytes | memoryview], None],
    c: Chunk,
    tails: _TailTable,
    refs: array[int],
    open_b: bytes,
) -> None:
    """Write a chunk's lines: each pattern's (topic's) JSON string text, then
    the tail of its value number in ``refs``."""
    pat, pat_end = c.pat, c.pat_end
    if pat.translate(None, _PLAIN):
        # a quote, backslash or control character somewhere: escape them
        # (otherwise a pattern's JSON text is its own UTF-8 bytes, non-ASCII
        # as it is)
        heads = [_enc_str(p.decode())[1:-1].encode() for p in c.entry_patterns()]
        pat, pat_end = b"".join(heads), array("q", accumulate(map(len, heads)))
    # Both byte tables are made in this process (the engine's chunk of a
    # snapshot, the tails of its values) and refs numbers them: the engine
    # checks each ref and item length, and trusts each end to lie in its blob.
    text = nb.interleave(pat, pat_end, tails.blob, tails.ends, refs)
    put(open_b)
    put(memoryview(text)[: -len(open_b)])


def write_topics(
    snap: Any, f: BinaryIO, tplan: TopicPlan, progress: m.Progress | None = None
) -> int:
    """Write the topic snapshot ``snap`` to ``f``, one chunk at a time: a
    header, one ``{"topic": ..., "value": ...}`` line per topic, a footer."""
    crc = 0

    def put(b: bytes | memoryview) -> None:
        nonlocal crc
        f.write(b)
        crc = zlib.crc32(b, crc)

    meta = m.make_topic_meta("jsonl", snap.dialect, tplan.codec)
    put((json.dumps(meta) + "\n").encode())
    tails = _TailTable(_T_MID, _T_CLOSE)
    table = ValueTable()
    total = tplan.total if tplan.total is not None else (len(snap) if progress else 0)
    done = 0
    for c in chunks(snap, per_pair=True):  # one group per topic
        known = len(table)
        refs = table.refs(tplan.stored(c.ids))
        if len(table) > known:
            tails.add(table.values[known:])
        _put_lines(put, c, tails, refs, _T_OPEN_B)
        done += len(refs)
        if progress is not None:
            progress(done, total)
    f.write((json.dumps({"end": {"topics": done, "crc32": crc}}) + "\n").encode())
    return done


def _write_memberships(
    snap: Any,
    plan: Plan,
    groups: GroupNames,
    put: Callable[[bytes], None],
    done: int,
    total: int,
    progress: m.Progress | None,
) -> int:
    """Write one line per share-group membership (a Python step per line: a
    membership is joined by a Python call, so there are not millions); returns
    how many."""
    texts: dict[int, str] = {}  # engine id -> the member's JSON text
    names: dict[int, str] = {}  # group number -> the name's JSON text
    values = plan.values
    count = 0
    for c in membership_chunks(snap):
        assert c.share is not None
        lines = []
        for p, i, share in zip(c.entry_patterns(), c.ids, c.share, strict=True):
            sub = texts.get(i)
            if sub is None:
                sub = texts[i] = _json_text(values[i])
            g = groups.number(share)
            name = names.get(g)
            if name is None:
                name = names[g] = _enc_str(groups.names[g - 1])
            lines.append(
                f'{{"pattern":{_enc_str(p.decode())},"subscriber":{sub},"group":{name}}}\n'
            )
        put("".join(lines).encode("utf-8"))
        count += len(lines)
        if progress is not None:
            progress(done + count, total)
    return count


def _line_error(body_lines: list[bytes], first_line: int, groups: bool = True) -> FormatError:
    """Find the first bad pair line (slow path, for the message)."""
    keys = ({"pattern", "subscriber"}, {"pattern", "subscriber", "group"})
    for k, line in enumerate(body_lines):
        where = f"line {first_line + k}"
        try:
            obj = json.loads(line)
        except m.JSON_ERRORS as exc:
            return FormatError(f"{where}: not valid JSON ({exc})")
        if not isinstance(obj, dict) or set(obj) not in keys:
            return FormatError(f'{where}: expected {{"pattern": ..., "subscriber": ...}}')
        if "group" in obj and not groups:
            return FormatError(
                f"{where}: a share-group membership in a version 1 file (groups need "
                f"version {m.GROUPS_SINCE})"
            )
        if type(obj["pattern"]) is not str:
            return FormatError(f"{where}: the pattern is not a string")
        if type(obj.get("group")) not in (str, type(None)):
            return FormatError(f"{where}: the group is not a string (nor null)")
        try:
            value_from_json(obj["subscriber"])
        except FormatError as exc:
            return FormatError(f"{where}: {exc}")
    return FormatError("invalid pair lines")


def read(f: BinaryIO, classes: m.Classes, decode: Decode | None = None) -> Any:
    """Load a JSON Lines export from the binary file ``f``."""
    return loads(f.read(), classes, decode)


_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")


def _native_columns(body: memoryview, nlines: int) -> tuple[Any, Any, Any, list[Any]] | None:
    """Parse the pair lines (``body``: each one ending in a newline) in the
    engine (``cst_jsonl_scan``) when every line has exactly the exporter's
    form; the patterns come back as one byte table
    and the subscribers as numbers into their distinct values, with no Python
    object per pair.  None when a line differs (the general readers decide)."""
    if nlines == 0:
        return None
    size = len(body)
    if nlines > size:  # every line takes more than a byte
        return None
    # The sizes cst_jsonl_scan writes at most (cstrie.h): it reads body[:size]
    # only, and decoding never makes text longer than its JSON, so the
    # patterns and the subscribers each fit in size bytes.  nlines (the
    # footer's count) is at most size, so no count in the file sizes these.
    pat = bytearray(size)
    pat_off = array("q", (0,)) * (nlines + 1)
    refs = array("Q", (0,)) * nlines
    sub = bytearray(size)
    sub_end = array("q", (0,)) * nlines
    kinds = bytearray(nlines)
    r = nb.jsonl_scan(body, nlines, pat, pat_off, refs, sub, sub_end, kinds)
    if r == -1:
        return None
    del sub_end[r:]
    bounds = zip(chain((0,), sub_end), sub_end, strict=False)  # one longer than the other
    blob = bytes(memoryview(sub)[: sub_end[-1] if r else 0])
    del sub
    try:
        if not any(kinds[:r]):  # every subscriber a string
            if blob.isascii():
                text = blob.decode("ascii")
                values: list[Any] = [text[a:b] for a, b in bounds]
            else:
                values = [blob[a:b].decode("utf-8") for a, b in bounds]
        else:
            values = [
                int(blob[a:b]) if k else blob[a:b].decode("utf-8")
                for k, (a, b) in zip(kinds, bounds, strict=False)
            ]
    except ValueError:  # UnicodeDecodeError included
        # not UTF-8, or an integer of more digits than int() reads (the
        # writer's are shorter): the general reader says where
        return None
    return memoryview(pat)[: pat_off[-1]], pat_off, refs, values


#: a "[", a second "{" on a line, or a line that does not start with "{"
_NESTED_OR_NOT_AN_OBJECT = re.compile(rb"\[|\{[^\n]*\{|\n(?!\{)")


def _flat_objects(body: memoryview) -> bool:
    """Does every line start with ``{``, with no other ``{`` and no ``[``, so
    that nothing nests?  Only such bodies go to pyarrow's JSON reader: it
    crashes the process on values nested deeper than its stack (``[[[...``
    or ``{"a":{"a":...`` of 100,000 levels) and on a first line that is
    ``null`` (pyarrow 26).  One regular expression search, at C speed."""
    return bytes(body[:1]) == b"{" and _NESTED_OR_NOT_AN_OBJECT.search(body) is None


def _arrow_columns(body: memoryview, nlines: int) -> tuple[Any, Any, Any, list[Any]] | None:
    """Parse the pair lines with pyarrow's JSON reader when pyarrow is there and
    the file is of the plain kind (every subscriber a string, or every one an
    integer that fits in 64 bits; no surrogate escapes): then the columns go to
    the bulk build as Arrow buffers, with no Python object per pair.  Anything
    else returns None and the pure-Python reader decides (and explains errors)."""
    if nlines == 0 or _SURROGATE_ESCAPE.search(body) is not None or not _flat_objects(body):
        return None
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj
    except ImportError:
        return None
    try:
        tbl = pj.read_json(
            pa.BufferReader(pa.py_buffer(body)),
            read_options=pj.ReadOptions(block_size=1 << 24),
        )
        if tbl.num_rows != nlines or sorted(tbl.column_names) != ["pattern", "subscriber"]:
            return None
        pat = tbl.column("pattern")
        sub = tbl.column("subscriber")
        if not pa.types.is_string(pat.type) and not pa.types.is_large_string(pat.type):
            return None
        if sub.type not in (pa.string(), pa.large_string(), pa.int64()):
            return None
        if pat.null_count or sub.null_count:
            return None
        pat_arr = pat.cast(pa.large_string()).combine_chunks()
        pat_arr.validate(full=True)
        sub_arr = sub.combine_chunks()
        sub_arr.validate(full=True)  # the JSON reader leaves strings' UTF-8 unchecked
        enc = pc.dictionary_encode(sub_arr)
    except (pa.ArrowException, ValueError):
        return None
    refs = pc.cast(pc.add(pc.cast(enc.indices, pa.int64()), 1), pa.uint64())
    values = enc.dictionary.to_pylist()
    n = len(pat_arr)
    bufs = pat_arr.buffers()
    offsets = memoryview(bufs[1])[pat_arr.offset * 8 : (pat_arr.offset + n + 1) * 8]
    data = bufs[2] if bufs[2] is not None else b""
    rbuf = memoryview(refs.buffers()[1])[refs.offset * 8 : (refs.offset + n) * 8]
    return data, offsets, rbuf, values


def _tail_memberships(
    raw: bytes, head_end: int, foot_start: int, count: int
) -> tuple[int, list[tuple[str, Any, str]]] | None:
    """Where the writer puts them: the last ``count`` lines before the footer
    as (pattern, stored subscriber, group) and the offset of the first, if they
    all are memberships; else None (the general reader decides)."""
    pos = foot_start
    for _ in range(count):
        if pos <= head_end + 1:
            return None
        pos = raw.rfind(b"\n", head_end, pos - 1) + 1
    try:
        objs = json.loads(b"[" + raw[pos : foot_start - 1].replace(b"\n", b",") + b"]")
        if len(objs) != count:
            return None
        out = []
        for o in objs:
            if type(o) is not dict or len(o) != 3:
                return None
            p, g, v = o["pattern"], o["group"], o["subscriber"]
            if type(p) is not str or type(g) is not str or type(v) not in (str, int, dict):
                return None
            out.append((p, v if type(v) is not dict else value_from_json(v), g))
    except (*m.JSON_ERRORS, KeyError, TypeError, FormatError):
        return None
    return pos, out


def _with_members(
    values: list[Any], members: list[tuple[str, Any, str]]
) -> tuple[list[Any], list[m.Membership]]:
    """The subscriber values extended by the members not among them, and the
    memberships with 1-based references into that list."""
    if not members:
        return values, []
    index = dict(zip(values, range(1, len(values) + 1), strict=True))
    values = list(values)
    out: list[m.Membership] = []
    for pattern, v, group in members:
        ref = index.get(v)
        if ref is None:
            values.append(v)
            ref = index[v] = len(values)
        out.append((pattern, ref, group))
    return values, out


def _footer(raw: bytes, head_end: int, keys: set[str], count: str) -> tuple[int, dict[str, Any]]:
    """(where the footer line starts, its ``"end"`` record): the last line must
    be ``{"end": {...}}`` with keys among ``keys`` and the line count ``count``
    (a non-negative int), and its CRC-32, when given, must match every byte
    before it."""
    if not raw.endswith(b"\n"):
        raise FormatError("truncated JSON Lines export (the last line is incomplete)")
    foot_start = raw.rfind(b"\n", 0, len(raw) - 1) + 1
    if foot_start <= head_end:
        raise FormatError("truncated JSON Lines export (no footer line)")
    try:
        footer = json.loads(raw[foot_start:])
    except m.JSON_ERRORS:
        footer = None
    end = footer.get("end") if isinstance(footer, dict) and len(footer) == 1 else None
    if not isinstance(end, dict) or not set(end) <= keys or count not in end:
        raise FormatError("truncated JSON Lines export (the last line is not the footer)")
    if "crc32" in end and end["crc32"] != zlib.crc32(memoryview(raw)[:foot_start]):
        raise FormatError("checksum mismatch: the file is truncated or corrupt")
    n = end[count]
    if type(n) is not int or n < 0:
        raise FormatError(f"invalid {count[:-1]} count {n!r} in the footer")
    return foot_start, end


def loads(raw: bytes, classes: m.Classes, decode: Decode | None = None) -> Any:
    """Load a JSON Lines export held in memory: a :class:`cstrie.Trie`, or a
    :class:`cstrie.TopicIndex` for a topic index file."""
    if not raw:
        raise FormatError("empty file: not a cstrie JSON Lines export")
    head_end = raw.find(b"\n")
    if head_end < 0:
        raise FormatError("truncated JSON Lines export (no complete header line)")
    try:
        header = json.loads(raw[:head_end])
    except m.JSON_ERRORS:
        raise FormatError("not a cstrie JSON Lines export (the first line is not JSON)") from None
    if m.content_of(header, "jsonl") == m.TOPICS:
        return _load_topics(raw, head_end, header, decode, classes)
    dialect, codec = m.check_meta(header, "jsonl")
    groups = m.version_of(header) >= m.GROUPS_SINCE
    keys = {"pairs", "crc32"} | ({"memberships", "policies"} if groups else set())
    foot_start, end = _footer(raw, head_end, keys, "pairs")
    pairs = end["pairs"]
    # Both optional, for hand-edited files: without "memberships" the lines
    # are not counted by kind, without "policies" every group is round-robin.
    nmem = end.get("memberships")
    if nmem is not None and (type(nmem) is not int or not 0 <= nmem <= pairs):
        raise FormatError(f"invalid membership count {nmem!r} in the footer")
    policies = m.check_policies(end.get("policies"))
    # The writer's layout: the ordinary pairs, then the memberships (the last
    # nmem lines).  Anything else goes to the general reader below.
    split = foot_start
    members: list[tuple[str, Any, str]] = []
    tail = _tail_memberships(raw, head_end, foot_start, nmem) if nmem else None
    if tail is not None:
        split, members = tail
    if not nmem or tail is not None:
        plain = pairs - (nmem or 0)
        # The engine's reader takes exactly `plain` lines and every byte up to
        # the memberships, so when it succeeds the count is checked too.
        fast = _native_columns(memoryview(raw)[head_end + 1 : split], plain)
        if fast is None:
            nlines = raw.count(b"\n", head_end + 1, split)
            if plain != nlines:
                raise FormatError(
                    f"the footer says {pairs!r} pairs but the file has "
                    f"{nlines + (nmem or 0)} pair lines"
                )
            if nlines == 0:
                fast = (b"", array("q", (0,)), array("Q"), [])
            else:
                fast = _arrow_columns(memoryview(raw)[head_end + 1 : split - 1], nlines)
        if fast is not None:
            data_buf, offsets_buf, refs_buf, values = fast
            values, memberships = _with_members(values, members)
            values = m.decode_values(values, codec, decode)
            return m.build_trie(
                classes.trie,
                data_buf,
                offsets_buf,
                refs_buf,
                values,
                dialect,
                memberships,
                policies,
            )
    return _general(
        raw, head_end, foot_start, pairs, nmem, groups, codec, decode, dialect, policies, classes
    )


def _general(
    raw: bytes,
    head_end: int,
    foot_start: int,
    pairs: int,
    nmem: int | None,
    groups: bool,
    codec: str,
    decode: Decode | None,
    dialect: Any,
    policies: dict[str, str] | None,
    classes: m.Classes,
) -> Any:
    """The pure-Python reader: any JSON spacing, key order and line order."""
    nlines = raw.count(b"\n", head_end + 1, foot_start)
    if pairs != nlines:
        raise FormatError(f"the footer says {pairs!r} pairs but the file has {nlines} pair lines")
    body = memoryview(raw)[head_end + 1 : foot_start - 1]  # without the last newline

    def error() -> FormatError:
        return _line_error(raw[head_end + 1 : foot_start].split(b"\n")[:-1], 2, groups)

    try:
        objs = json.loads(b"".join((b"[", body, b"]")).replace(b"\n", b",")) if nlines else []
        pats = list(map(itemgetter("pattern"), objs))
        subs = list(map(itemgetter("subscriber"), objs))
        sizes = set(map(len, objs))
        ok = (
            len(objs) == nlines
            and sizes <= ({2, 3} if groups else {2})
            and set(map(type, pats)) <= {str}
            and set(map(type, subs)) <= {str, int, dict}
        )
        names: list[Any] = list(map(dict.get, objs, repeat("group"))) if 3 in sizes else []
        if names and ok:
            ok = sum(1 for o in objs if len(o) == 3 and "group" in o) == sum(
                1 for o in objs if len(o) == 3
            ) and set(map(type, names)) <= {str, type(None)}
    except (*m.JSON_ERRORS, KeyError, TypeError):
        ok = False
    if not ok:
        raise error()
    del objs, body
    if dict in set(map(type, subs)):
        try:
            subs = [value_from_json(s) if type(s) is dict else s for s in subs]
        except FormatError:
            raise error() from None
    values = list(dict.fromkeys(subs))
    index = dict(zip(values, range(1, len(values) + 1), strict=True))
    memberships: list[m.Membership] = []
    if any(g is not None for g in names):
        memberships = [
            (p, index[s], g) for p, s, g in zip(pats, subs, names, strict=True) if g is not None
        ]
        plain = [k for k, g in enumerate(names) if g is None]
        pats = [pats[k] for k in plain]
        subs = [subs[k] for k in plain]
    if nmem is not None and len(memberships) != nmem:
        raise FormatError(f"the footer says {nmem} memberships but the file has {len(memberships)}")
    refs = array("Q", map(index.__getitem__, subs))
    del subs, index
    try:
        pb = list(map(str.encode, pats))
    except UnicodeEncodeError as exc:
        raise FormatError(f"a pattern is not valid Unicode text: {exc}") from None
    del pats
    offsets = array("q", accumulate(map(len, pb), initial=0))
    data = b"".join(pb)
    del pb
    values = m.decode_values(values, codec, decode)
    return m.build_trie(classes.trie, data, offsets, refs, values, dialect, memberships, policies)


def _load_topics(
    raw: bytes, head_end: int, header: Any, decode: Decode | None, classes: m.Classes
) -> Any:
    """A topic index file: ``{"topic": ..., "value": ...}`` lines (any JSON
    spacing and key order), checked against the footer's count and CRC."""
    dialect, codec = m.check_topic_meta(header, "jsonl")
    foot_start, end = _footer(raw, head_end, {"topics", "crc32"}, "topics")
    count = end["topics"]
    nlines = raw.count(b"\n", head_end + 1, foot_start)
    if count != nlines:
        raise FormatError(f"the footer says {count} topics but the file has {nlines} topic lines")
    body = memoryview(raw)[head_end + 1 : foot_start - 1]  # without the last newline
    try:
        objs = json.loads(b"".join((b"[", body, b"]")).replace(b"\n", b",")) if nlines else []
        ok = len(objs) == nlines and set(map(type, objs)) <= {dict} and set(map(len, objs)) <= {2}
        topics = list(map(itemgetter("topic"), objs)) if ok else []
        stored = list(map(itemgetter("value"), objs)) if ok else []
        ok = ok and set(map(type, topics)) <= {str} and set(map(type, stored)) <= {str, int, dict}
    except (*m.JSON_ERRORS, KeyError, TypeError):
        ok = False
    if ok and dict in set(map(type, stored)):
        try:
            stored = [value_from_json(v, "value") if type(v) is dict else v for v in stored]
        except FormatError:
            ok = False
    if not ok:
        raise _topic_line_error(raw[head_end + 1 : foot_start].split(b"\n")[:-1])
    del objs, body
    try:
        encoded = [t.encode() for t in topics]
    except UnicodeEncodeError as exc:
        raise FormatError(f"a topic is not valid Unicode text: {exc}") from None
    del topics
    values = list(dict.fromkeys(stored))  # distinct, in order of appearance
    index = dict(zip(values, range(1, len(values) + 1), strict=True))
    refs = array("Q", map(index.__getitem__, stored))
    del stored, index
    offsets = array("q", accumulate(map(len, encoded), initial=0))
    values = load_values(values, codec, decode)
    return build_index(classes.topic_index, b"".join(encoded), offsets, refs, values, dialect)


def _topic_line_error(lines: list[bytes]) -> FormatError:
    """The first bad topic line (slow path, for the message; lines count from
    2, after the header)."""
    for k, line in enumerate(lines, 2):
        try:
            obj = json.loads(line)
        except m.JSON_ERRORS as exc:
            return FormatError(f"line {k}: not valid JSON ({exc})")
        if not isinstance(obj, dict) or set(obj) != {"topic", "value"}:
            return FormatError(f'line {k}: expected {{"topic": ..., "value": ...}}')
        if type(obj["topic"]) is not str:
            return FormatError(f"line {k}: the topic is not a string")
        try:
            value_from_json(obj["value"], "value")
        except FormatError as exc:
            return FormatError(f"line {k}: {exc}")
    return FormatError("invalid topic lines")
