"""Crafted export files for the loaders: a seeded mutator and a checker.

Every file a loader reads comes from an attacker, who can recompute any
checksum the format has.  The rule (docs/export.md, "Checked on load"): a
malformed file raises :class:`cstrie.export.FormatError` and builds nothing;
no file crashes the process, reads out of bounds, or raises anything else.

:func:`cases` yields ``(name, format, bytes)``: valid exports of a few tries
and topic indexes (str, int, bytes and mixed subscribers, non-ASCII
patterns, share groups with policies, empty ones) in the three formats,
taken apart and put back together with one or more faults, the checksums
recomputed so that the fault reaches the parser behind them: offset tables
that decrease, rise past the data and come back down, are negative or huge;
counts and lengths larger than the file; references out of range; invalid
UTF-8; wrong JSON types, nested JSON, integers of thousands of digits; Parquet
columns of the wrong type, with nulls, missing or extra; headers and dialect
records with hostile fields; and raw byte flips, cuts and splices.  The same
seed gives the same cases.

:func:`check` loads one case and says what happened: ``"loaded"`` (the
result must then be a sound trie or index), ``"FormatError"``, or an
AssertionError naming any other outcome.

Run it by hand for long runs (and under valgrind or an ASan build)::

    python tests/support/loader_fuzz.py --cases 20000 --seed 1 [--save DIR]

``--save`` writes each case whose outcome is not loaded/FormatError to DIR
(``tests/export/loader_corpus/`` keeps such files: ``tests/export/test_loader_fuzz.py``
replays them).
"""

from __future__ import annotations

import io
import json
import random
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cstrie
from cstrie.export import FormatError, export, load
from cstrie.groups import Shared

FORMATS = ("binary", "jsonl", "parquet")
SUFFIX = {"binary": ".cstrie", "jsonl": ".jsonl", "parquet": ".parquet"}

BIG = (1 << 31, 1 << 32, 1 << 40, (1 << 62), (1 << 63) - 1)
WEIRD_INTS = (-1, -2, -(1 << 63), 0, 1, 255, 256, 65535, *BIG)


def has_pyarrow() -> bool:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------ bases
def _tries() -> list[tuple[str, Any]]:
    """(name, trie or topic index) of the shapes a file can hold."""
    out: list[tuple[str, Any]] = []
    t = cstrie.Trie("mqtt")
    for p, s in [("a/+", "alice"), ("a/#", "bob"), ("b/c", "alice"), ("sensors/+/temp", "carol")]:
        t.subscribe(p, s)
    out.append(("str", t))
    t = cstrie.Trie("amqp")
    for p, s in [("stock.*.nyse", 1), ("stock.#", 2), ("x", -7), ("y.z", 1 << 70)]:
        t.subscribe(p, s)
    out.append(("int", t))
    t = cstrie.Trie("mqtt")
    for p, s in [("caf\u00e9/+", b"\x00\xff"), ("\u00fc/\u4e2d/#", "z\u00e9"), ("e/\U0001f600", 3)]:
        t.subscribe(p, s)
    out.append(("mixed", t))
    t = cstrie.Trie("mqtt")
    t.subscribe("a/b", "x")
    t.subscribe(Shared("jobs/+", "workers"), "w1")
    t.subscribe(Shared("jobs/+", "workers"), "w2")
    t.subscribe(Shared("jobs/#", "audit"), "x")
    t.set_group_policy("audit", "sticky")
    out.append(("groups", t))
    out.append(("empty", cstrie.Trie("nats")))
    idx = cstrie.TopicIndex("mqtt")
    idx["sensors/kitchen/temp"] = b"21.5"
    idx["sensors/attic/temp"] = b"21.5"
    idx["$SYS/uptime"] = 42
    idx["caf\u00e9/x"] = "v"
    out.append(("topics", idx))
    return out


def bases() -> list[tuple[str, str, bytes]]:
    """Valid exports: (name, format, bytes)."""
    out = []
    fmts = FORMATS if has_pyarrow() else ("binary", "jsonl")
    for name, obj in _tries():
        for fmt in fmts:
            buf = io.BytesIO()
            export(obj, buf, format=fmt)
            out.append((name, fmt, buf.getvalue()))
    return out


# ------------------------------------------------------------------ checking
def _outcome(call: Callable[[], Any], what: str) -> Any:
    """``call()``, or FormatError; any other exception is an AssertionError."""
    try:
        return call()
    except FormatError as exc:
        return exc
    except Exception as exc:
        raise AssertionError(f"{what} raised {type(exc).__name__}: {str(exc)[:300]}") from exc


def check(raw: bytes, fmt: str) -> str:
    """Load ``raw`` as ``fmt``: ``"loaded"`` (and the result is sound) or
    ``"FormatError"``; anything else raises AssertionError.  A file whose
    header says its subscribers were written with ``encode=`` is loaded again
    with ``decode=keep_encoded`` when the first load asks for ``decode``
    (a ValueError that is the caller's to fix, not a file's fault).  The
    header alone (:func:`cstrie.export.read_header`) must also give a dict
    or FormatError."""
    from cstrie.export import keep_encoded, read_header

    if fmt != "parquet":
        head = _outcome(lambda: read_header(io.BytesIO(raw), format=fmt), f"{fmt} read_header")
        assert isinstance(head, (dict, FormatError)), head
    try:
        obj = _outcome(lambda: load(io.BytesIO(raw), format=fmt), f"{fmt} load")
    except AssertionError as exc:
        cause = exc.__cause__
        if type(cause) is not ValueError or "pass decode=" not in str(cause):
            raise
        obj = _outcome(
            lambda: load(io.BytesIO(raw), format=fmt, decode=keep_encoded),
            f"{fmt} load with decode=keep_encoded",
        )
    if isinstance(obj, FormatError):
        return "FormatError"
    obj.check_invariants()
    if isinstance(obj, cstrie.Trie):
        for pattern, _ in obj:
            p = pattern.pattern if isinstance(pattern, Shared) else pattern
            obj.dialect.split_pattern(p)
    else:
        for topic in obj:
            obj.dialect.split_topic(topic)
    return "loaded"


# ------------------------------------------------------------------ JSON values
def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def hostile_json(rng: random.Random) -> str:
    """A JSON text (or not quite) that no exporter writes."""
    choices: list[Callable[[], str]] = [
        lambda: _nested(rng.choice((50, 5000, 100000))),
        lambda: '{"a":' * 3000 + "1" + "}" * 3000,
        lambda: "9" * rng.choice((4301, 20000)),
        lambda: "-" + "1" * 5000,
        lambda: "1e999999",
        lambda: "NaN",
        lambda: "-Infinity",
        lambda: "1.5",
        lambda: "true",
        lambda: "false",
        lambda: "null",
        lambda: "[]",
        lambda: "{}",
        lambda: '"\\ud800"',
        lambda: '"\\udc00\\ud800"',
        lambda: '"\\u0000"',
        lambda: '{"bytes": "!!"}',
        lambda: '{"bytes": 5}',
        lambda: '{"text": "/w=="}',
        lambda: '{"bytes": "AA==", "text": "AA=="}',
        lambda: '"' + "x" * 70000 + '"',
        lambda: str(rng.choice(WEIRD_INTS)),
        lambda: str(1 << 64),
        lambda: '"a/+"',
        lambda: "",
        lambda: "{",
        lambda: '"unterminated',
    ]
    return rng.choice(choices)()


def hostile_bytes(rng: random.Random) -> bytes:
    return rng.choice(
        [
            b"\xff",
            b"\xc3",
            b"\xed\xa0\x80",  # an encoded surrogate
            b"\xc0\xaf",  # an overlong "/"
            b"\xf4\x90\x80\x80",  # past U+10FFFF
            b"\x80abc",
            b"\x00",
            b"",
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9))),
        ]
    )


# ------------------------------------------------------------------ binary
@dataclass
class Table:
    tag: bytes
    codes: bytearray
    ends: list[int]
    blob: bytearray
    count: int | None = None  # the section head's count, when it lies
    size: int | None = None  # the head's blob length, when it lies


@dataclass
class Run:
    tag: bytes
    ends: list[int]
    cols: list[list[int]]
    data: bytearray
    n: int | None = None
    d: int | None = None


@dataclass
class Binary:
    """A binary export taken apart (valid files only) to be put back
    together with faults; :meth:`pack` recomputes the CRC."""

    version: int
    flags: int
    meta: bytes
    runs: list[Run]
    tables: list[Table]
    trailer: list[Any]
    meta_len: int | None = None
    extra: bytes = b""
    crc_ok: bool = True
    topics: bool = False
    order: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: bytes) -> Binary:
        version, flags, meta_len = struct.unpack_from("<HHI", raw, 8)
        meta = raw[16 : 16 + meta_len]
        pos = 16 + meta_len
        runs: list[Run] = []
        tables: list[Table] = []
        while raw[pos : pos + 4] in (b"PAIR", b"SHAR", b"TOPS"):
            tag, n, d = struct.unpack_from("<4sQQ", raw, pos)
            pos += 20
            width = 2 if tag == b"SHAR" else 1
            ends = list(array("q", raw[pos : pos + 8 * n]))
            pos += 8 * n
            cols = []
            for _ in range(width):
                cols.append(list(array("Q", raw[pos : pos + 8 * n])))
                pos += 8 * n
            data = bytearray(raw[pos : pos + d])
            pos += d
            runs.append(Run(tag, ends, cols, data))
        while raw[pos : pos + 4] in (b"SUBS", b"GRPS", b"VALS"):
            tag, count, size = struct.unpack_from("<4sQQ", raw, pos)
            pos += 20
            codes = bytearray(raw[pos : pos + count])
            pos += count
            ends = list(array("q", raw[pos : pos + 8 * count]))
            pos += 8 * count
            blob = bytearray(raw[pos : pos + size])
            pos += size
            tables.append(Table(tag, codes, ends, blob))
        trailer = list(struct.unpack_from("<4sQQII", raw, pos))
        return cls(version, flags, meta, runs, tables, trailer[:4], topics=b"topics" in meta)

    def pack(self) -> bytes:
        out = bytearray(b"\x89CSTRIE\n")
        meta_len = len(self.meta) if self.meta_len is None else self.meta_len
        out += struct.pack(
            "<HHI", self.version & 0xFFFF, self.flags & 0xFFFF, meta_len & 0xFFFFFFFF
        )
        out += self.meta
        for r in self.runs:
            n = len(r.ends) if r.n is None else r.n
            d = len(r.data) if r.d is None else r.d
            out += struct.pack("<4sQQ", r.tag, n & (2**64 - 1), d & (2**64 - 1))
            out += array("q", r.ends).tobytes()
            for c in r.cols:
                out += array("Q", c).tobytes()
            out += r.data
        for t in self.tables:
            count = len(t.codes) if t.count is None else t.count
            size = len(t.blob) if t.size is None else t.size
            out += struct.pack("<4sQQ", t.tag, count & (2**64 - 1), size & (2**64 - 1))
            out += t.codes
            out += array("q", t.ends).tobytes()
            out += t.blob
        out += self.extra
        tag, total, total_bytes, sections = self.trailer
        out += struct.pack(
            "<4sQQI", tag, total & (2**64 - 1), total_bytes & (2**64 - 1), sections & 0xFFFFFFFF
        )
        crc = zlib.crc32(out)
        out += struct.pack("<I", crc if self.crc_ok else crc ^ 1)
        return bytes(out)

    def fix_trailer(self) -> None:
        """The trailer's counts as the pair (topic) sections say."""
        first = [r for r in self.runs if r.tag in (b"PAIR", b"TOPS")]
        self.trailer[1] = sum(len(r.ends) for r in first)
        self.trailer[2] = sum(len(r.data) for r in first)
        self.trailer[3] = len(first)


def _ends_fault(ends: list[int], total: int, rng: random.Random) -> str:
    """Damage an end-offset list in place; returns what was done."""
    if not ends:
        ends.append(rng.choice(WEIRD_INTS))
        return "an offset for no item"
    k = rng.randrange(len(ends))
    how = rng.randrange(8)
    if how == 0:
        ends[k] = rng.choice(BIG)
        return f"ends[{k}] huge"
    if how == 1:
        ends[k] = rng.choice((-1, -(1 << 63), -total - 1, -1000))
        return f"ends[{k}] negative"
    if how == 2:
        ends[k] = total + rng.randrange(1, 5)
        return f"ends[{k}] just past the data"
    if how == 3 and k > 0:
        ends[k] = ends[k - 1] - rng.randrange(1, 4)
        return f"ends[{k}] below the one before"
    if how == 4 and len(ends) > 1:
        # up past the data and back down: [.., BIG, d]
        j = rng.randrange(len(ends) - 1)
        ends[j] = rng.choice((total + 1, total + 1000, *BIG))
        return f"ends[{j}] rises past the data and comes back"
    if how == 5:
        ends[k] = 0
        return f"ends[{k}] zero"
    if how == 6:
        rng.shuffle(ends)
        return "ends shuffled"
    ends[k] = -ends[k] if ends[k] else -3
    return f"ends[{k}] negated"


def _mutate_binary(raw: bytes, rng: random.Random) -> tuple[str, bytes]:
    b = Binary.parse(raw)
    what = rng.randrange(16)
    runs = [r for r in b.runs]
    if what == 0 and runs:
        r = rng.choice(runs)
        total = (r.ends[-1] if r.ends else 0) if r.tag != b"SHAR" else len(r.data)
        note = _ends_fault(r.ends, total, rng)
        if rng.random() < 0.5 and r.data:  # non-ASCII bytes, so UTF-8 checks index the data
            r.data[rng.randrange(len(r.data))] = rng.choice((0xC3, 0xE4, 0x80, 0xFF))
        return f"{r.tag.decode()} offsets: {note}", b.pack()
    if what == 1 and runs:
        r = rng.choice(runs)
        if rng.random() < 0.5:
            r.n = rng.choice((*WEIRD_INTS, len(r.ends) + 1, len(r.ends) - 1))
        else:
            r.d = rng.choice((*WEIRD_INTS, len(r.data) + 1, len(r.data) - 1))
        return f"{r.tag.decode()} head lies (n={r.n}, d={r.d})", b.pack()
    if what == 2 and runs:
        r = rng.choice(runs)
        c = rng.choice(r.cols)
        if c:
            c[rng.randrange(len(c))] = rng.choice((0, 2**64 - 1, 1 << 63, 1 << 32, 100, 7))
        return f"{r.tag.decode()} reference out of range", b.pack()
    if what == 3 and b.tables:
        t = rng.choice(b.tables)
        note = _ends_fault(t.ends, len(t.blob), rng)
        return f"{t.tag.decode()} table: {note}", b.pack()
    if what == 4 and b.tables:
        t = rng.choice(b.tables)
        if t.codes:
            t.codes[rng.randrange(len(t.codes))] = rng.randrange(256)
        return f"{t.tag.decode()} table: kind/policy code", b.pack()
    if what == 5 and b.tables:
        t = rng.choice(b.tables)
        if rng.random() < 0.5:
            t.count = rng.choice((*WEIRD_INTS, len(t.codes) + 1))
        else:
            t.size = rng.choice((*WEIRD_INTS, len(t.blob) + 1))
        return f"{t.tag.decode()} table head lies", b.pack()
    if what == 6 and b.tables:
        t = rng.choice(b.tables)
        bad = hostile_bytes(rng)
        at = rng.randrange(len(t.blob) + 1)
        t.blob[at:at] = bad
        t.ends = [e + len(bad) if e >= at and (at < e or at == 0) else e for e in t.ends]
        return f"{t.tag.decode()} blob: bytes {bad!r}", b.pack()
    if what == 7 and runs:
        r = rng.choice(runs)
        bad = hostile_bytes(rng)
        at = rng.randrange(len(r.data) + 1)
        r.data[at:at] = bad
        r.ends = [e + len(bad) if e > at else e for e in r.ends]
        if r.tag != b"SHAR":
            b.fix_trailer()
        return f"{r.tag.decode()} data: bytes {bad!r} at {at}", b.pack()
    if what == 8:
        b.trailer[rng.randrange(1, 4)] = rng.choice(WEIRD_INTS)
        return "trailer counts", b.pack()
    if what == 9:
        b.meta = _hostile_meta(b.meta, rng)
        return f"meta: {b.meta[:60]!r}", b.pack()
    if what == 10:
        if rng.random() < 0.5:
            b.meta_len = rng.choice((*WEIRD_INTS, len(b.meta) + 1, len(b.meta) - 1))
            return f"meta_len lies ({b.meta_len})", b.pack()
        b.version = rng.choice((0, 1, 2, 3, 0xFFFF))
        b.flags = rng.choice((0, 0, 1, 0x8000))
        return f"header version {b.version} flags {b.flags}", b.pack()
    if what == 11 and runs:
        # a pair section dropped, duplicated or moved
        r = rng.choice(runs)
        how = rng.randrange(3)
        if how == 0:
            b.runs.remove(r)
        elif how == 1:
            b.runs.insert(rng.randrange(len(b.runs) + 1), r)
        else:
            b.runs.remove(r)
            b.runs.append(r)
        if rng.random() < 0.7:
            b.fix_trailer()
        return "sections dropped/duplicated/moved", b.pack()
    if what == 12 and b.tables:
        t = rng.choice(b.tables)
        how = rng.randrange(3)
        if how == 0:
            b.tables.remove(t)
        elif how == 1:
            b.tables.append(t)
        else:
            t.tag = rng.choice((b"SUBS", b"GRPS", b"VALS", b"PAIR", b"SHAR", b"XXXX"))
        return "tables dropped/duplicated/renamed", b.pack()
    if what == 13:
        b.extra = hostile_bytes(rng) + rng.choice((b"", b"PAIR", b"SUBS" + bytes(16)))
        return "bytes before the trailer", b.pack()
    # raw damage, then the CRC recomputed
    out = bytearray(b.pack()[:-4])
    how = rng.randrange(4)
    if how == 0:
        for _ in range(rng.randrange(1, 6)):
            out[rng.randrange(16, len(out))] = rng.randrange(256)
        note = "byte flips"
    elif how == 1:
        cut = rng.randrange(len(out))
        out = out[:cut]
        note = f"cut at {cut}"
    elif how == 2:
        at = rng.randrange(16, len(out))
        out[at:at] = struct.pack("<q", rng.choice(WEIRD_INTS))
        note = f"8 bytes spliced in at {at}"
    else:
        at = rng.randrange(16, len(out))
        del out[at : at + rng.randrange(1, 16)]
        note = f"bytes deleted at {at}"
    out += struct.pack("<I", zlib.crc32(out))
    return f"raw {note}, CRC recomputed", bytes(out)


def _hostile_meta(meta: bytes, rng: random.Random) -> bytes:
    """The JSON header with one hostile field (or not JSON at all)."""
    how = rng.randrange(5)
    if how == 0:
        return hostile_json(rng).encode()
    if how == 1:
        return hostile_bytes(rng) + meta
    obj = json.loads(meta)
    if how == 2:
        key = rng.choice(sorted(obj))
        obj[key] = json.loads(_safe_json(rng))
    elif how == 3:
        d = obj["dialect"]
        key = rng.choice(sorted(d))
        d[key] = json.loads(_safe_json(rng))
    elif rng.random() < 0.5:
        obj[rng.choice(("extra", "subscriber_kind", "value_kind"))] = json.loads(_safe_json(rng))
    else:
        obj["value_codec" if "value_codec" in obj else "subscriber_codec"] = "user"
    text = json.dumps(obj)
    if rng.random() < 0.3:
        text = text.replace('"version": 2', '"version": ' + rng.choice(("1", "3", "2.0", "true")))
    return text.encode()


def _safe_json(rng: random.Random) -> str:
    """A hostile JSON value that :mod:`json` parses (for building headers)."""
    while True:
        text = hostile_json(rng)
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            continue
        if text.startswith("[[[[") or text.startswith('{"a":{"a":'):
            continue
        return text


# ------------------------------------------------------------------ JSON Lines
def _jsonl_parts(raw: bytes) -> tuple[bytes, list[bytes], dict[str, Any]]:
    lines = raw.split(b"\n")
    return lines[0], lines[1:-2], json.loads(lines[-2])


def _jsonl_pack(header: bytes, body: list[bytes], foot: dict[str, Any], crc: str) -> bytes:
    text = b"\n".join([header, *body]) + b"\n"
    end = foot["end"]
    if crc == "fix":
        end["crc32"] = zlib.crc32(text)
    elif crc == "drop":
        end.pop("crc32", None)
    return text + json.dumps(foot).encode() + b"\n"


def _line(pattern: str, value: str, group: str | None = None, exporter: bool = True) -> bytes:
    """A pair line; ``exporter``: exactly the writer's form (the engine's scanner
    reads those)."""
    if exporter and group is None:
        return ('{"pattern":' + pattern + ',"subscriber":' + value + "}").encode(
            "utf-8", "surrogatepass"
        )
    g = "" if group is None else ', "group": ' + group
    return ('{"pattern": ' + pattern + ', "subscriber": ' + value + g + "}").encode(
        "utf-8", "surrogatepass"
    )


def _mutate_jsonl(raw: bytes, rng: random.Random) -> tuple[str, bytes]:
    header, body, foot = _jsonl_parts(raw)
    topics = b"cstrie-topics" in header
    count_key = "topics" if topics else "pairs"
    crc = rng.choice(("fix", "fix", "fix", "drop", "keep"))
    respaced = ""
    if rng.random() < 0.3:
        # another writer's spacing: the engine's scanner leaves such lines to
        # the other readers (pyarrow's for plain files)
        body = [json.dumps(json.loads(line)).encode() for line in body]
        respaced = "respaced; "
    what = rng.randrange(11)
    if what == 0:
        header = _hostile_meta(header, rng)
        note = f"header {header[:60]!r}"
    elif what in (1, 2, 3) and body:
        k = rng.randrange(len(body))
        key1, key2 = ("topic", "value") if topics else ("pattern", "subscriber")
        pat = json.dumps("a/b")
        val = '"x"'
        which = rng.randrange(3)
        if which == 0:
            pat = hostile_json(rng)
        elif which == 1:
            val = hostile_json(rng)
        else:
            pat, val = hostile_json(rng), hostile_json(rng)
        exporter = what != 3
        if topics:
            line = ("{" + f'"{key1}": {pat}, "{key2}": {val}' + "}").encode()
        else:
            group = rng.choice((None, None, '"g"', hostile_json(rng)))
            line = _line(pat, val, group, exporter)
        body[k] = line
        note = f"line {k + 2}: {line[:80]!r}"
    elif what == 4 and body:
        k = rng.randrange(len(body))
        bad = hostile_bytes(rng)
        at = rng.randrange(len(body[k]) + 1)
        body[k] = body[k][:at] + bad + body[k][at:]
        note = f"line {k + 2}: bytes {bad!r} at {at}"
    elif what == 5:
        key = rng.choice((count_key, "memberships", "policies", "crc32", "extra"))
        foot["end"][key] = json.loads(_safe_json(rng))
        how = rng.randrange(3)
        if how == 0:
            foot["end"][key] = rng.choice(WEIRD_INTS)
        elif how == 1 and key == "policies":
            foot["end"][key] = {rng.choice(("g", "workers", "audit")): foot["end"][key]}
        note = f"footer {key} = {str(foot['end'][key])[:40]}"
    elif what == 6 and body:
        how = rng.randrange(4)
        k = rng.randrange(len(body))
        if how == 0:
            del body[k]
        elif how == 1:
            body.insert(k, body[k])
        elif how == 2:
            body.insert(k, b"")
        else:
            body.insert(k, hostile_json(rng).encode())
        if rng.random() < 0.5:
            foot["end"][count_key] = len(body)
        note = "lines dropped/duplicated/inserted"
    elif what == 7 and body and not topics:
        k = rng.randrange(len(body))
        obj = json.loads(body[k])
        obj["group"] = json.loads(_safe_json(rng)) if rng.random() < 0.7 else "g"
        body[k] = json.dumps(obj).encode()
        if rng.random() < 0.5:
            foot["end"]["memberships"] = foot["end"].get("memberships", 0) + 1
        note = f"line {k + 2} made a membership: {body[k][:80]!r}"
    elif what == 9 and body:
        # one flat line with a scalar no exporter writes (pyarrow's reader
        # takes bodies of flat objects)
        k = rng.randrange(len(body))
        obj = json.loads(body[k])
        key = rng.choice(sorted(obj))
        scalar = rng.choice(("null", "true", "1.5", "1e999999", "NaN", '"\\u0000"', "-0", "01"))
        body[k] = (json.dumps(obj).replace(json.dumps(obj[key]), scalar, 1)).encode()
        if rng.random() < 0.3:
            body.insert(0, b"null")
        note = f"flat line {k + 2}: {body[k][:80]!r}"
    elif what == 8:
        text = bytearray(_jsonl_pack(header, body, foot, crc))
        for _ in range(rng.randrange(1, 6)):
            text[rng.randrange(len(text))] = rng.randrange(256)
        return "raw byte flips", bytes(text)
    else:
        text = _jsonl_pack(header, body, foot, crc)
        cut = rng.randrange(len(text))
        return f"cut at {cut}", text[:cut]
    return f"{respaced}{note} (crc {crc})", _jsonl_pack(header, body, foot, crc)


# ------------------------------------------------------------------ Parquet
def _parquet_parts(raw: bytes) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(io.BytesIO(raw))
    kv = pf.metadata.metadata
    table = pf.read()
    return table, json.loads(kv[b"cstrie"]), json.loads(kv[b"cstrie.end"])


def parquet_file(
    table: Any,
    header: bytes | dict[str, Any],
    end: bytes | dict[str, Any] | None,
    digest: bool = True,
    count_key: str = "pairs",
) -> bytes:
    """A Parquet file of ``table`` with cstrie metadata; ``digest``: the end
    record's CRC-32s and count recomputed for the table as it is."""
    import pyarrow.parquet as pq

    from cstrie.export.parquet import _Digest

    if isinstance(end, dict) and digest:
        d = _Digest(table.schema.names)
        for i, name in enumerate(table.schema.names):
            try:
                d.update(name, table.column(i).combine_chunks())
            except Exception:
                break
        end["crc32"] = d.result()
        end.setdefault(count_key, table.num_rows)
    kv = {}
    kv[b"cstrie"] = header if isinstance(header, bytes) else json.dumps(header).encode()
    if end is not None:
        kv[b"cstrie.end"] = end if isinstance(end, bytes) else json.dumps(end).encode()
    table = table.replace_schema_metadata(kv)
    buf = io.BytesIO()
    pq.write_table(table, buf, write_page_checksum=True)
    return buf.getvalue()


def _mutate_parquet(raw: bytes, rng: random.Random) -> tuple[str, bytes]:
    import pyarrow as pa

    table, header, end = _parquet_parts(raw)
    topics = header["format"].startswith("cstrie-topics")
    count_key = "topics" if topics else "pairs"
    what = rng.randrange(9)
    names = table.schema.names
    if what == 0:
        meta = _hostile_meta(json.dumps(header).encode(), rng)
        return f"header {meta[:60]!r}", parquet_file(table, meta, end, True, count_key)
    if what == 1:
        key = rng.choice((count_key, "memberships", "policies", "crc32", "extra"))
        end[key] = json.loads(_safe_json(rng))
        if key == "policies" and rng.random() < 0.5:
            end[key] = {rng.choice(("workers", "audit")): end[key]}
        if key == "crc32":
            return "end crc32", parquet_file(table, header, end, False, count_key)
        return f"end {key}", parquet_file(table, header, end, True, count_key)
    if what == 2:
        # a column replaced by one of another type
        name = rng.choice(names)
        n = table.num_rows
        col = rng.choice(
            [
                pa.array(range(n), pa.int64()),
                pa.array(["x"] * n, pa.string()),
                pa.array(["x"] * n, pa.large_string()),
                pa.array([b"\xff"] * n, pa.large_binary()),
                pa.array([1.5] * n, pa.float64()),
                pa.array(["a"] * n, pa.large_string()).dictionary_encode(),
                pa.array([None] * n, pa.large_string()),
                pa.array([[1]] * n, pa.list_(pa.int64())),
            ]
        )
        table = table.set_column(names.index(name), name, col)
        return f"column {name} as {col.type}", parquet_file(table, header, end, True, count_key)
    if what == 3:
        # nulls in a column
        name = rng.choice(names)
        col = table.column(name).combine_chunks()
        mask = pa.array([rng.random() < 0.5 for _ in range(len(col))])
        import pyarrow.compute as pc

        col = pc.if_else(mask, pa.nulls(len(col), col.type), col)
        table = table.set_column(names.index(name), name, col)
        return f"nulls in {name}", parquet_file(table, header, end, True, count_key)
    if what == 4:
        how = rng.randrange(3)
        if how == 0 and len(names) > 1:
            table = table.drop_columns([rng.choice(names)])
        elif how == 1:
            table = table.append_column(
                rng.choice(("group", "extra", names[0])),
                pa.array([rng.choice(("g", None))] * table.num_rows, pa.large_string()),
            )
        else:
            table = table.select(list(reversed(names)))
        return "columns dropped/added/reordered", parquet_file(table, header, end, True, count_key)
    if what == 5:
        # values a column of the right type may hold but the format does not allow
        name = rng.choice(names)
        col = table.column(name).combine_chunks()
        t = col.type
        if pa.types.is_large_string(t):
            vals = [
                rng.choice(
                    (
                        "",
                        "a/#/b",
                        "#.x",
                        "\x00",
                        "x" * 70000,
                        "int\x00abc",
                        "bytes\x00!!",
                        "str",
                        "int",
                        "bytes",
                        "nope",
                        "1" * 5000,
                        "a/" * 70000,
                    )
                )
                for _ in range(len(col))
            ]
            col = pa.array(vals, t)
        elif pa.types.is_int64(t):
            col = pa.array([rng.choice(WEIRD_INTS) for _ in range(len(col))], t)
        elif pa.types.is_large_binary(t):
            col = pa.array([hostile_bytes(rng) for _ in range(len(col))], t)
        table = table.set_column(names.index(name), name, col)
        return f"hostile values in {name}", parquet_file(table, header, end, True, count_key)
    if what == 6:
        kind_key = "value_kind" if topics else "subscriber_kind"
        header[kind_key] = rng.choice(("str", "int", "bytes", "mixed", "nope", None, 5))
        return f"{kind_key} {header[kind_key]!r}", parquet_file(table, header, end, True, count_key)
    if what == 7:
        out = bytearray(raw)
        for _ in range(rng.randrange(1, 6)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return "raw byte flips", bytes(out)
    cut = rng.randrange(len(raw))
    return f"cut at {cut}", raw[:cut]


# ------------------------------------------------------------------ corpus
def _base(name: str, fmt: str) -> bytes:
    return next(raw for n, f, raw in bases() if n == name and f == fmt)


def _binary(name: str, change: Callable[[Binary], Any]) -> bytes:
    b = Binary.parse(_base(name, "binary"))
    change(b)
    return b.pack()


def _set_meta(b: Binary, change: Callable[[dict[str, Any]], Any]) -> None:
    obj = json.loads(b.meta)
    change(obj)
    b.meta = json.dumps(obj).encode()


def _table(b: Binary, tag: bytes) -> Table:
    return next(t for t in b.tables if t.tag == tag)


def _run(b: Binary, tag: bytes) -> Run:
    return next(r for r in b.runs if r.tag == tag)


def _jsonl(
    name: str,
    header: Callable[[dict[str, Any]], Any] | None = None,
    lines: Callable[[list[bytes]], Any] | None = None,
    footer: Callable[[dict[str, Any]], Any] | None = None,
    raw_header: bytes | None = None,
) -> bytes:
    """A JSON Lines export of base ``name`` changed, its footer's count and
    CRC-32 recomputed."""
    head, body, foot = _jsonl_parts(_base(name, "jsonl"))
    if header is not None:
        obj = json.loads(head)
        header(obj)
        head = json.dumps(obj).encode()
    if raw_header is not None:
        head = raw_header
    if lines is not None:
        lines(body)
        key = "topics" if b"cstrie-topics" in head else "pairs"
        foot["end"][key] = len(body)
    if footer is not None:
        footer(foot["end"])
    return _jsonl_pack(head, body, foot, "fix")


def _parquet(
    name: str,
    header: Callable[[dict[str, Any]], Any] | None = None,
    end: Callable[[dict[str, Any]], Any] | None = None,
    table: Callable[[Any], Any] | None = None,
    raw_header: bytes | None = None,
    raw_end: bytes | None = None,
) -> bytes:
    """A Parquet export of base ``name`` changed, its end record's CRC-32s
    and count recomputed (unless ``end`` sets them)."""
    tbl, head, foot = _parquet_parts(_base(name, "parquet"))
    count_key = "topics" if head["format"].startswith("cstrie-topics") else "pairs"
    if header is not None:
        header(head)
    if table is not None:
        tbl = table(tbl)
    foot.pop("crc32", None)
    foot.pop(count_key, None)
    if end is not None:
        end(foot)
    h: bytes | dict[str, Any] = head if raw_header is None else raw_header
    e: bytes | dict[str, Any] = foot if raw_end is None else raw_end
    return parquet_file(tbl, h, e, "crc32" not in foot, count_key)


def _set(obj: dict[str, Any], key: str, value: Any) -> None:
    obj[key] = value


def corpus() -> dict[str, bytes]:
    """Crafted files, each malformed in one way that the loaders must refuse
    with FormatError: ``{file name: bytes}``.  Checksums are recomputed, so
    each fault reaches the parser behind them."""
    import pyarrow as pa

    deep = 2500  # past the interpreter's recursion limit (json raises RecursionError)
    deeper = 30000  # past pyarrow's JSON reader's stack
    out: dict[str, bytes] = {}

    def put(name: str, fmt: str, raw: bytes) -> None:
        out[name + SUFFIX[fmt]] = raw

    # ---- binary: offset tables ------------------------------------------
    def rise_and_fall(r: Run) -> None:  # [0, BIG, d]: up past the data and back
        r.ends[0] = 1 << 40

    put(
        "binary-pair-offsets-rise-and-fall",
        "binary",
        _binary("str", lambda b: rise_and_fall(_run(b, b"PAIR"))),
    )
    put(
        "binary-pair-offset-negative-middle-non-ascii",
        "binary",
        _binary("mixed", lambda b: _run(b, b"PAIR").ends.__setitem__(0, -1000)),
    )
    put(
        "binary-pair-offset-negative-first",
        "binary",
        _binary("mixed", lambda b: _run(b, b"PAIR").ends.__setitem__(0, -(1 << 63))),
    )
    put(
        "binary-pair-offsets-decrease",
        "binary",
        _binary("str", lambda b: _run(b, b"PAIR").ends.__setitem__(1, 1)),
    )
    put(
        "binary-pair-offset-past-the-end",
        "binary",
        _binary("str", lambda b: _run(b, b"PAIR").ends.__setitem__(-1, 10**6)),
    )
    put(
        "binary-pair-offset-splits-a-character",
        "binary",
        _binary("mixed", lambda b: _run(b, b"PAIR").ends.__setitem__(0, 4)),
    )
    put(
        "binary-pair-count-past-the-file",
        "binary",
        _binary("str", lambda b: _set(_run(b, b"PAIR").__dict__, "n", 1 << 61)),
    )
    put(
        "binary-pair-bytes-past-the-file",
        "binary",
        _binary("str", lambda b: _set(_run(b, b"PAIR").__dict__, "d", (1 << 64) - 1)),
    )
    put(
        "binary-pair-ref-zero",
        "binary",
        _binary("str", lambda b: _run(b, b"PAIR").cols[0].__setitem__(0, 0)),
    )
    put(
        "binary-pair-ref-huge",
        "binary",
        _binary("str", lambda b: _run(b, b"PAIR").cols[0].__setitem__(0, (1 << 64) - 1)),
    )

    def bad_pattern(b: Binary) -> None:
        r = _run(b, b"PAIR")
        r.data[0] = 0xFF

    put("binary-pair-pattern-not-utf8", "binary", _binary("str", bad_pattern))
    put(
        "binary-shar-offsets-rise-and-fall",
        "binary",
        _binary("groups", lambda b: _run(b, b"SHAR").ends.__setitem__(0, 1 << 40)),
    )
    put(
        "binary-shar-offset-negative",
        "binary",
        _binary("groups", lambda b: _run(b, b"SHAR").ends.__setitem__(1, -7)),
    )
    put(
        "binary-shar-group-ref-out-of-range",
        "binary",
        _binary("groups", lambda b: _run(b, b"SHAR").cols[1].__setitem__(0, 99)),
    )
    put(
        "binary-tops-offsets-rise-and-fall",
        "binary",
        _binary("topics", lambda b: _run(b, b"TOPS").ends.__setitem__(0, 1 << 40)),
    )
    put(
        "binary-tops-offset-negative-non-ascii",
        "binary",
        _binary("topics", lambda b: _run(b, b"TOPS").ends.__setitem__(1, -1000)),
    )

    # ---- binary: tables ---------------------------------------------------
    def subs_not_utf8(b: Binary) -> None:
        t = _table(b, b"SUBS")
        t.blob[0] = 0xFF  # the first subscriber is a str

    put("binary-subs-str-not-utf8", "binary", _binary("str", subs_not_utf8))

    def vals_not_utf8(b: Binary) -> None:
        t = _table(b, b"VALS")
        k = t.codes.index(0)  # a str value
        t.blob[t.ends[k - 1] if k else 0] = 0xC0

    put("binary-vals-str-not-utf8", "binary", _binary("topics", vals_not_utf8))
    put(
        "binary-subs-kind-unknown",
        "binary",
        _binary("mixed", lambda b: _table(b, b"SUBS").codes.__setitem__(0, 9)),
    )
    put(
        "binary-subs-offsets-decrease",
        "binary",
        _binary("str", lambda b: _table(b, b"SUBS").ends.__setitem__(0, 99)),
    )
    put(
        "binary-subs-count-past-the-file",
        "binary",
        _binary("str", lambda b: _set(_table(b, b"SUBS").__dict__, "count", 1 << 62)),
    )
    put(
        "binary-empty-group-table-with-bytes",
        "binary",
        _binary("str", lambda b: _table(b, b"GRPS").blob.extend(b"abc")),
    )
    put(
        "binary-grps-policy-unknown",
        "binary",
        _binary("groups", lambda b: _table(b, b"GRPS").codes.__setitem__(0, 3)),
    )

    def grps_name_not_utf8(b: Binary) -> None:
        _table(b, b"GRPS").blob[0] = 0x80

    put("binary-grps-name-not-utf8", "binary", _binary("groups", grps_name_not_utf8))

    # ---- binary: header and trailer --------------------------------------
    def nested_meta(b: Binary) -> None:
        b.meta = _nested(deep).encode()

    put("binary-meta-nested", "binary", _binary("str", nested_meta))

    def dialect_field(field: str, value: Any) -> Callable[[Binary], Any]:
        return lambda b: _set_meta(b, lambda m: _set(m["dialect"], field, value))

    put(
        "binary-dialect-max-bytes-2-64",
        "binary",
        _binary("str", dialect_field("max_bytes", 1 << 64)),
    )
    put(
        "binary-dialect-max-levels-2-64",
        "binary",
        _binary("topics", dialect_field("max_levels", 1 << 64)),
    )
    put(
        "binary-dialect-max-bytes-2-70",
        "binary",
        _binary("str", dialect_field("max_bytes", 1 << 70)),
    )
    put(
        "binary-meta-len-past-the-file",
        "binary",
        _binary("str", lambda b: _set(b.__dict__, "meta_len", 0xFFFFFFFF)),
    )
    put(
        "binary-trailer-counts-lie",
        "binary",
        _binary("str", lambda b: b.trailer.__setitem__(1, 1 << 63)),
    )

    # ---- JSON Lines -------------------------------------------------------
    put("jsonl-header-nested", "jsonl", _jsonl("str", raw_header=_nested(deep).encode()))
    put(
        "jsonl-footer-nested",
        "jsonl",
        _jsonl("str", footer=lambda e: _set(e, "policies", json.loads(_nested(900)))).replace(
            b'"policies": ' + _nested(900).encode(), b'"policies": ' + _nested(deep).encode()
        ),
    )
    put(
        "jsonl-dialect-max-bytes-2-64",
        "jsonl",
        _jsonl("str", header=lambda h: _set(h["dialect"], "max_bytes", 1 << 64)),
    )
    put(
        "jsonl-topics-dialect-max-levels-2-64",
        "jsonl",
        _jsonl("topics", header=lambda h: _set(h["dialect"], "max_levels", 1 << 64)),
    )

    def line0(text: str) -> Callable[[list[bytes]], Any]:
        return lambda body: body.__setitem__(0, text.encode("utf-8", "surrogatepass"))

    put(
        "jsonl-subscriber-nested",
        "jsonl",
        _jsonl("str", lines=line0('{"pattern":"a/b","subscriber":' + _nested(deep) + "}")),
    )
    put(
        "jsonl-subscriber-nested-past-pyarrow",
        "jsonl",
        _jsonl("str", lines=line0('{"pattern":"a/b","subscriber":' + _nested(deeper) + "}")),
    )
    put("jsonl-first-line-null", "jsonl", _jsonl("str", lines=lambda body: body.insert(0, b"null")))
    put(
        "jsonl-subscriber-4301-digits",
        "jsonl",
        _jsonl("int", lines=line0('{"pattern":"x","subscriber":' + "9" * 4301 + "}")),
    )

    def spaced_bad_utf8(body: list[bytes]) -> None:
        body[:] = [json.dumps(json.loads(x)).encode() for x in body]
        body[0] = b'{"pattern": "a/b", "subscriber": "\xff\xfe"}'

    put("jsonl-subscriber-not-utf8-other-spacing", "jsonl", _jsonl("str", lines=spaced_bad_utf8))
    put(
        "jsonl-pattern-not-utf8",
        "jsonl",
        _jsonl(
            "str",
            lines=lambda body: body.__setitem__(0, b'{"pattern":"\xc0\xaf","subscriber":"x"}'),
        ),
    )
    put(
        "jsonl-pattern-lone-surrogate",
        "jsonl",
        _jsonl("str", lines=line0('{"pattern":"\\ud800","subscriber":"x"}')),
    )

    def member(value: str) -> Callable[[list[bytes]], Any]:
        line = '{"pattern": "jobs/+", "subscriber": ' + value + ', "group": "workers"}'
        return lambda body: body.__setitem__(-1, line.encode())

    for label, value in [
        ("list", "[1]"),
        ("object", '{"a": 1}'),
        ("float", "1.5"),
        ("bool", "true"),
        ("null", "null"),
        ("nested", _nested(deep)),
    ]:
        put(f"jsonl-member-subscriber-{label}", "jsonl", _jsonl("groups", lines=member(value)))
    put(
        "jsonl-policy-list",
        "jsonl",
        _jsonl(
            "groups",
            footer=lambda e: _set(e, "policies", {"workers": ["sticky"], "audit": "sticky"}),
        ),
    )
    put(
        "jsonl-pairs-count-huge", "jsonl", _jsonl("str", footer=lambda e: _set(e, "pairs", 1 << 62))
    )
    put(
        "jsonl-topic-line-nested",
        "jsonl",
        _jsonl("topics", lines=line0('{"topic": "a/b", "value": ' + _nested(deep) + "}")),
    )

    # ---- Parquet ----------------------------------------------------------
    put("parquet-header-nested", "parquet", _parquet("str", raw_header=_nested(deep).encode()))
    put("parquet-end-nested", "parquet", _parquet("str", raw_end=_nested(deep).encode()))
    put(
        "parquet-dialect-max-bytes-2-64",
        "parquet",
        _parquet("str", header=lambda h: _set(h["dialect"], "max_bytes", 1 << 64)),
    )
    put(
        "parquet-topics-dialect-max-levels-2-64",
        "parquet",
        _parquet("topics", header=lambda h: _set(h["dialect"], "max_levels", 1 << 64)),
    )
    put(
        "parquet-policy-object",
        "parquet",
        _parquet("groups", end=lambda e: _set(e, "policies", {"workers": {}, "audit": "sticky"})),
    )

    def column(name: str, values: Any) -> Callable[[Any], Any]:
        return lambda t: t.set_column(t.schema.names.index(name), name, values)

    put(
        "parquet-subscriber-nulls",
        "parquet",
        _parquet("str", table=column("subscriber", pa.array([None] * 4, pa.large_string()))),
    )
    put(
        "parquet-pattern-int64",
        "parquet",
        _parquet("str", table=column("pattern", pa.array([1, 2, 3, 4], pa.int64()))),
    )
    put(
        "parquet-mixed-type-unknown",
        "parquet",
        _parquet(
            "mixed", table=column("subscriber_type", pa.array(["float"] * 3, pa.large_string()))
        ),
    )
    put(
        "parquet-mixed-int-not-a-number",
        "parquet",
        _parquet(
            "mixed",
            table=lambda t: t.set_column(
                1, "subscriber", pa.array(["x", "y", "z"], pa.large_string())
            ).set_column(2, "subscriber_type", pa.array(["int", "int", "int"], pa.large_string())),
        ),
    )
    put(
        "parquet-group-column-in-version-1",
        "parquet",
        _parquet("groups", header=lambda h: _set(h, "version", 1)),
    )
    put(
        "parquet-pattern-invalid",
        "parquet",
        _parquet("str", table=column("pattern", pa.array(["a/#/b"] * 4, pa.large_string()))),
    )
    return out


def write_corpus(folder: str) -> list[str]:
    """Write :func:`corpus` to ``folder``; returns the names written."""
    from pathlib import Path

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    files = corpus()
    for name, raw in files.items():
        (d / name).write_bytes(raw)
    return sorted(files)


# ------------------------------------------------------------------ cases
MUTATORS: dict[str, Callable[[bytes, random.Random], tuple[str, bytes]]] = {
    "binary": _mutate_binary,
    "jsonl": _mutate_jsonl,
    "parquet": _mutate_parquet,
}


def cases(seed: int, count: int, start: int = 0) -> Iterator[tuple[str, str, bytes]]:
    """``count`` crafted files from case ``start`` on: (what was done, format,
    bytes).  Case i of a seed is always the same file (each case draws from
    its own generator)."""
    base = bases()
    for i in range(start, start + count):
        rng = random.Random(f"{seed}:{i}")
        name, fmt, raw = base[rng.randrange(len(base))]
        note, out = MUTATORS[fmt](raw, rng)
        for _ in range(rng.choice((0, 0, 0, 1))):  # sometimes a second fault
            try:
                note2, out2 = MUTATORS[fmt](out, rng)
            except Exception:
                break
            note, out = f"{note}; {note2}", out2
        yield f"case {seed}:{i} {name}.{fmt}: {note}", fmt, out


def replay(folder: str) -> int:
    """Load every file of ``folder`` (each is malformed): print ``name outcome``
    for each, the name before the load (what a crash leaves as the last line);
    1 unless every outcome is FormatError."""
    from pathlib import Path

    formats = {suffix: fmt for fmt, suffix in SUFFIX.items()}
    bad = 0
    for path in sorted(Path(folder).iterdir()):
        fmt = formats.get(path.suffix)
        if fmt is None:
            continue
        print(path.name, end=" ", flush=True)
        try:
            outcome = check(path.read_bytes(), fmt)
        except AssertionError as exc:
            outcome = f"FAILED: {exc}"
        print(outcome, flush=True)
        bad += outcome != "FormatError"
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="the first case's number")
    ap.add_argument("--write-corpus", default=None, help="write the crafted corpus here and stop")
    ap.add_argument(
        "--replay",
        default=None,
        help="load every file of this folder (format from its suffix), print each "
        "outcome, and stop; exit status 1 unless each is FormatError",
    )
    ap.add_argument(
        "--save",
        default=None,
        help="write each failing case to this folder (and each case, before it runs, "
        "to last-case.<suffix> there: what a crash leaves behind)",
    )
    args = ap.parse_args(argv)
    if args.write_corpus:
        for name in write_corpus(args.write_corpus):
            print(name)
        return 0
    if args.replay:
        return replay(args.replay)
    save = Path(args.save) if args.save else None
    if save:
        save.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, int] = {}
    failures = 0
    for note, fmt, raw in cases(args.seed, args.cases, args.start):
        if save:
            for old in save.glob("last-case.*"):
                old.unlink()
            (save / f"last-case{SUFFIX[fmt]}").write_bytes(raw)
        try:
            outcome = check(raw, fmt)
        except AssertionError as exc:
            failures += 1
            outcome = "FAILED"
            print(f"FAILED {note!a}\n    {exc}", flush=True)
            if save:
                (save / f"found-{zlib.crc32(raw):08x}{SUFFIX[fmt]}").write_bytes(raw)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    if save:
        for old in save.glob("last-case.*"):
            old.unlink()
    print(f"{args.cases} cases from {args.start}, seed {args.seed}: {outcomes}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
