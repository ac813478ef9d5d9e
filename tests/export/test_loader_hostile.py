"""Hostile files and buffers, one rule at a time.

The rules (docs/export.md, "Checked on load", and ``Trie.from_buffers``):

* a malformed file, whatever its checksum says, raises
  :class:`~cstrie.export.FormatError` naming the problem, and nothing is
  built: no IndexError, KeyError, TypeError, UnicodeDecodeError,
  OverflowError, RecursionError, no crash;
* ``Trie.from_buffers`` checks the whole offset table before any pattern is
  read: ``ValueError`` names the first entry that is negative, decreases or
  points past the end of the data; a buffer of the wrong kind is a
  ``TypeError`` naming the argument.

Files are made with the documented layouts (``loader_fuzz.Binary`` packs the
binary format and recomputes its CRC; JSON Lines footers and Parquet end
records are recomputed the same way), so each fault reaches the parser.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from array import array
from typing import Any

import loader_fuzz as lf
import pytest

from cstrie import Trie
from cstrie import _binding as nb
from cstrie.export import FormatError, load, read_header

needs_pyarrow = pytest.mark.skipif(not lf.has_pyarrow(), reason="needs pyarrow")


def refused(raw: bytes, fmt: str, match: str) -> FormatError:
    with pytest.raises(FormatError, match=match) as info:
        load(io.BytesIO(raw), format=fmt)
    return info.value


# ------------------------------------------------------------ from_buffers
def exact(data: bytes) -> Any:
    """``data`` in a cffi block of exactly its size (no slack to read into)."""
    return nb.ffi.from_buffer(bytearray(data))


def test_from_buffers_refuses_offsets_that_rise_past_the_data_and_come_back() -> None:
    data = b"a.b" * 10
    for big in (31, 1 << 20, 1 << 40, (1 << 63) - 1):
        off = array("q", [0, big, len(data)])
        with pytest.raises(
            ValueError, match=rf"offsets\[1\] = {big} is past the end of the pattern data \(30 "
        ):
            Trie.from_buffers(exact(data), off, array("Q", [1, 1]), ["x"])


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([-1, 3, 6], r"offsets\[0\] = -1 is negative"),
        ([0, -3, 6], r"offsets decrease at pair 0: offsets\[0\] = 0 > offsets\[1\] = -3"),
        ([0, 4, 3], r"offsets decrease at pair 1: offsets\[1\] = 4 > offsets\[2\] = 3"),
        ([0, 3, 7], r"offsets\[2\] = 7 is past the end of the pattern data \(6 bytes\)"),
        ([0, -(1 << 63), 6], r"offsets decrease at pair 0"),
        ([7, 7, 7], r"offsets\[0\] = 7 is past the end"),
    ],
)
def test_from_buffers_names_the_first_bad_offset(offsets: list[int], message: str) -> None:
    # pattern 0 is not UTF-8 either: the offsets are checked first, all of them
    with pytest.raises(ValueError, match=message):
        Trie.from_buffers(exact(b"\xffa.b.c"), array("q", offsets), array("Q", [1, 1]), ["x"])


def test_from_buffers_with_an_empty_table() -> None:
    assert len(Trie.from_buffers(b"", array("q", [0]), array("Q"), [])) == 0
    with pytest.raises(ValueError, match=r"offsets\[0\] = 1 is past the end"):
        Trie.from_buffers(b"", array("q", [1]), array("Q"), [])


@pytest.mark.parametrize(
    ("data", "offsets", "refs", "error", "message"),
    [
        (b"a.b", [0, 3], [1], None, None),
        ("a.b", array("q", [0, 3]), array("Q", [1]), TypeError, "data must be a buffer"),
        (b"a.b", [0, 3], array("Q", [1]), TypeError, "offsets must be a buffer of int64_t"),
        (b"a.b", array("i", [0, 3]), array("Q", [1]), TypeError, "8-byte integers"),
        (b"a.b", array("d", [0, 3]), array("Q", [1]), TypeError, "format 'd'"),
        (b"a.b", bytes(17), array("Q", [1]), ValueError, "17 bytes"),
        (b"a.b", array("q", [0, 3]), b"\x01" * 7, ValueError, "refs has 7 bytes"),
        (b"a.b", array("q", [0, 3, 3]), array("Q", [1]), ValueError, "expected 2"),
        (b"a.b", array("q", [0, 3]), array("Q", [1, 1]), ValueError, "expected 3"),
        (b"a.b", array("q", [0, 3]), array("Q", [2]), ValueError, r"subscriber #2, outside"),
        (b"a.b", array("q", [0, 3]), array("Q", [0]), ValueError, r"subscriber #0, outside"),
    ],
)
def test_from_buffers_checks_its_buffers(
    data: Any, offsets: Any, refs: Any, error: type[Exception] | None, message: str | None
) -> None:
    if error is None:
        return
    with pytest.raises(error, match=message):
        Trie.from_buffers(data, offsets, refs, ["x"])


def test_from_buffers_checks_cffi_arrays() -> None:
    ffi = nb.ffi
    refs = ffi.new("uint64_t[]", [1])
    with pytest.raises(TypeError, match=r"offsets must be an int64_t\[\] array, not cdata"):
        Trie.from_buffers(b"a.b", ffi.new("int64_t *"), refs, ["x"])
    with pytest.raises(TypeError, match=r"not cdata 'uint64_t\[\]'"):
        Trie.from_buffers(b"a.b", ffi.new("uint64_t[]", [0, 3]), refs, ["x"])
    with pytest.raises(TypeError, match=r"data must be a char\[\] or uint8_t\[\] array"):
        Trie.from_buffers(ffi.new("int32_t[]", 3), ffi.new("int64_t[]", [0, 3]), refs, ["x"])
    # a char[] array holds its terminating NUL: that byte is inside the data
    with pytest.raises(ValueError, match=r"offsets\[1\] = 5 is past the end .*\(4 bytes\)"):
        Trie.from_buffers(ffi.new("char[]", b"a.b"), ffi.new("int64_t[]", [0, 5]), refs, ["x"])
    t = Trie.from_buffers(ffi.new("char[]", b"a.b"), ffi.new("int64_t[]", [0, 3]), refs, ["x"])
    assert list(t) == [("a.b", "x")]


def test_from_buffers_refuses_a_strided_buffer() -> None:
    np = pytest.importorskip("numpy")
    offsets = np.array([6, 99, 3, 99, 0], dtype=np.int64)[::-2]
    with pytest.raises(TypeError, match="offsets must be a contiguous buffer"):
        Trie.from_buffers(b"a.bc.d", offsets, np.array([1, 1], dtype=np.uint64), ["x"])


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_stored_error_of_from_buffers_survives_garbage_collection() -> None:
    """The ValueError's traceback holds from_buffers' frame; when the caller
    keeps the exception in a reference cycle, the collector must not find a
    live view of the caller's memoryview there (CPython 3.11 crashes when it
    clears a memoryview that a view still holds)."""
    run = run_child(
        """
        import gc
        from array import array
        from cstrie import Trie

        def attempt():
            data = memoryview(bytearray(b"a.bc.d"))
            offsets = memoryview(array("q", [0, 9, 6]))
            try:
                Trie.from_buffers(data, offsets, memoryview(array("Q", [1, 1])), ["x"])
            except ValueError as exc:
                kept = exc  # its traceback holds this frame: a cycle
                return str(kept)

        for _ in range(3):
            attempt()
            gc.collect()
        print("survived")
        """
    )
    assert run.returncode == 0 and run.stdout.strip() == "survived", run.stderr[-2000:]


# ------------------------------------------------------------ binary files
def test_binary_offsets_that_rise_past_the_data_and_come_back() -> None:
    """PAIR offsets [0, BIG, d] (up past the data, then back within it) with
    the CRC recomputed."""
    b = lf.Binary.parse(lf._base("str", "binary"))
    pair = next(r for r in b.runs if r.tag == b"PAIR")
    assert len(pair.ends) >= 2
    pair.ends[0] = 1 << 40
    refused(b.pack(), "binary", r"pattern offsets decrease at pattern 1 \(1099511627776 > ")


@pytest.mark.parametrize("middle", [-1, -1000, -(1 << 63)])
def test_binary_negative_offset_with_non_ascii_patterns(middle: int) -> None:
    b = lf.Binary.parse(lf._base("mixed", "binary"))
    next(r for r in b.runs if r.tag == b"PAIR").ends[0] = middle
    refused(b.pack(), "binary", "pattern offsets decrease at pattern 0")


def test_binary_membership_and_topic_offsets() -> None:
    b = lf.Binary.parse(lf._base("groups", "binary"))
    next(r for r in b.runs if r.tag == b"SHAR").ends[0] = 1 << 40
    refused(b.pack(), "binary", "filter offsets decrease at filter 1")
    b = lf.Binary.parse(lf._base("topics", "binary"))
    next(r for r in b.runs if r.tag == b"TOPS").ends[1] = -1000
    refused(b.pack(), "binary", "topic offsets decrease")


def test_binary_str_value_that_is_not_utf8() -> None:
    b = lf.Binary.parse(lf._base("str", "binary"))
    next(t for t in b.tables if t.tag == b"SUBS").blob[0] = 0xFF
    refused(b.pack(), "binary", "a str value in a value table is not valid UTF-8")
    b = lf.Binary.parse(lf._base("topics", "binary"))
    vals = next(t for t in b.tables if t.tag == b"VALS")
    k = vals.codes.index(0)
    vals.blob[vals.ends[k - 1] if k else 0] = 0xC0
    refused(b.pack(), "binary", "not valid UTF-8")


def test_binary_empty_table_with_bytes() -> None:
    b = lf.Binary.parse(lf._base("str", "binary"))
    grps = next(t for t in b.tables if t.tag == b"GRPS")
    assert not grps.codes
    grps.blob.extend(b"abc")
    refused(b.pack(), "binary", "corrupt GRPS table offsets")


def test_binary_header_nested_deeper_than_the_recursion_limit() -> None:
    b = lf.Binary.parse(lf._base("str", "binary"))
    b.meta = lf._nested(100_000).encode()
    raw = b.pack()
    refused(raw, "binary", "the binary header is not valid JSON")
    with pytest.raises(FormatError, match="unreadable header"):
        read_header(io.BytesIO(raw), format="binary")


@pytest.mark.parametrize("field", ["max_bytes", "max_levels"])
@pytest.mark.parametrize("name", ["str", "topics"])
def test_binary_dialect_limits_past_the_engine(field: str, name: str) -> None:
    for value in (1 << 64, 1 << 200):
        b = lf.Binary.parse(lf._base(name, "binary"))
        meta = json.loads(b.meta)
        meta["dialect"][field] = value
        b.meta = json.dumps(meta).encode()
        refused(b.pack(), "binary", rf"dialect field '{field}' = {value} is past the engine")


# ------------------------------------------------------------ JSON Lines
def jsonl(name: str, **change: Any) -> bytes:
    return lf._jsonl(name, **change)


def test_jsonl_json_nested_deeper_than_the_recursion_limit() -> None:
    deep = lf._nested(100_000)
    refused(jsonl("str", raw_header=deep.encode()), "jsonl", "the first line is not JSON")
    with pytest.raises(FormatError, match="unreadable header"):
        read_header(io.BytesIO(jsonl("str", raw_header=deep.encode())), format="jsonl")
    footer = jsonl("str").replace(b'{"end": {', b'{"end": {"x": ' + deep.encode() + b", ")
    refused(footer, "jsonl", "the last line is not the footer")

    def line(text: str) -> Any:
        return lambda body: body.__setitem__(0, text.encode())

    for text in (
        '{"pattern":"a/b","subscriber":' + deep + "}",
        '{"pattern": ' + deep + ', "subscriber": "x"}',
    ):
        refused(jsonl("str", lines=line(text)), "jsonl", "line 2: not valid JSON")
    member = '{"pattern": "jobs/+", "subscriber": ' + deep + ', "group": "workers"}'
    refused(
        jsonl("groups", lines=lambda body: body.__setitem__(-1, member.encode())),
        "jsonl",
        "not valid JSON",
    )
    topic = '{"topic": "a/b", "value": ' + deep + "}"
    refused(jsonl("topics", lines=line(topic)), "jsonl", "line 2: not valid JSON")


def test_jsonl_integer_of_more_digits_than_int_reads() -> None:
    """The engine's line scanner takes the digits; int() refuses more than
    4,300 (the writer stores at most 14,000 bits, 4,215 digits)."""
    for digits in (4301, 20000):
        line = '{"pattern":"x","subscriber":' + "9" * digits + "}"
        raw = jsonl("int", lines=lambda body, line=line: body.__setitem__(0, line.encode()))
        refused(raw, "jsonl", "line 2: not valid JSON .*4300 digits")


def test_jsonl_subscriber_that_is_not_utf8_in_another_spacing() -> None:
    def lines(body: list[bytes]) -> None:
        body[:] = [json.dumps(json.loads(x)).encode() for x in body]
        body[0] = b'{"pattern": "a/b", "subscriber": "\xff\xfe"}'

    refused(jsonl("str", lines=lines), "jsonl", "line 2: not valid JSON")


@pytest.mark.parametrize("value", ["[1]", '{"a": 1}', "1.5", "true", "null", "1e999"])
def test_jsonl_membership_subscriber_of_a_type_the_format_has_not(value: str) -> None:
    member = '{"pattern": "jobs/+", "subscriber": ' + value + ', "group": "workers"}'
    raw = jsonl("groups", lines=lambda body: body.__setitem__(-1, member.encode()))
    refused(raw, "jsonl", "expected a string, an integer|invalid pair lines|line")


@pytest.mark.parametrize("policy", [["sticky"], {"a": 1}, 5, None])
def test_jsonl_policy_of_the_wrong_type(policy: Any) -> None:
    def footer(end: dict[str, Any]) -> None:
        end["policies"] = {"workers": policy, "audit": "sticky"}

    refused(jsonl("groups", footer=footer), "jsonl", "invalid group policies")


@needs_pyarrow
@pytest.mark.parametrize(
    "lines",
    [
        ["null", '{"pattern": "a/b", "subscriber": "x"}'],
        ["  null", '{"pattern": "a/b", "subscriber": "x"}'],
        ['{"pattern": "a/b", "subscriber": ' + "[" * 30000 + "]" * 30000 + "}"],
        ['{"pattern": "a/b", "subscriber": ' + '{"a":' * 30000 + "1" + "}" * 30000 + "}"],
        ['{"pattern": "a/b", "subscriber": "x"}', '{"pattern": ' + "[" * 30000 + "]" * 30000],
    ],
    ids=["null-first", "spaces-null-first", "deep-list", "deep-object", "deep-second-line"],
)
def test_jsonl_lines_that_crash_pyarrows_json_reader(lines: list[str], tmp_path: Any) -> None:
    """pyarrow's JSON reader (26) crashes the process on a first line of null
    and on values nested deeper than its stack: such lines never reach it."""
    raw = jsonl(
        "str", lines=lambda body: body.__setitem__(slice(None), [x.encode() for x in lines])
    )
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(raw)
    run = run_child(
        f"""
        from cstrie.export import FormatError, load
        try:
            load({str(path)!r})
        except FormatError as exc:
            print("FormatError", exc)
        """
    )
    assert run.returncode == 0, f"exit status {run.returncode}: {run.stderr[-2000:]}"
    assert run.stdout.startswith("FormatError"), run.stdout


# ------------------------------------------------------------ Parquet
@needs_pyarrow
def test_parquet_metadata_nested_deeper_than_the_recursion_limit() -> None:
    deep = lf._nested(100_000).encode()
    refused(lf._parquet("str", raw_header=deep), "parquet", "corrupt cstrie metadata")
    refused(lf._parquet("str", raw_end=deep), "parquet", "corrupt cstrie metadata")


@needs_pyarrow
@pytest.mark.parametrize(("name", "field"), [("str", "max_bytes"), ("topics", "max_levels")])
def test_parquet_dialect_limits_past_the_engine(name: str, field: str) -> None:
    def header(h: dict[str, Any]) -> None:
        h["dialect"][field] = 1 << 64

    refused(lf._parquet(name, header=header), "parquet", f"dialect field '{field}'")


@needs_pyarrow
def test_parquet_policy_of_the_wrong_type() -> None:
    def end(e: dict[str, Any]) -> None:
        e["policies"] = {"workers": {}, "audit": "sticky"}

    refused(lf._parquet("groups", end=end), "parquet", "invalid group policies")
