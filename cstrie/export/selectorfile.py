"""Selector files: a :class:`~cstrie.selectors.SelectorIndex` as JSON Lines.

Layout (UTF-8, ``\\n`` line ends; docs/export.md, "Selector files")::

    {"format": "cstrie-selectors-jsonl", "version": 1, "subscriber_codec": "native", ...}
    {"subscriber": "alice", "kind": "template", "selector": "https://example.com/books/{id}"}
    {"subscriber": 42, "kind": "glob", "selector": "news.*"}
    {"end": {"pairs": 2, "crc32": 123}}

One line per (subscriber, selector) pair, subscribers in the order they first
subscribed (the order lookups return them in) and each one's selectors in the
order it took them, so a loaded index answers every lookup as the exported
one did.  Subscribers are stored as in subscription files
(:mod:`cstrie.export.codec`: str, int, ``{"bytes": base64}``, ``{"text":
base64}``; anything else through ``encode``/``decode``).  The footer holds the
number of pairs and the CRC-32 of every byte before it (delete ``"crc32"`` to
edit a file by hand).

Loading reads one line at a time, each at most ``max_line_bytes``, at most
``max_pairs`` pairs, and builds a new index with the caller's limits (the
file cannot raise them): an oversize or too complex selector, a subscriber
past ``max_selectors_per_subscriber``, a repeated line, a bad kind, a
truncated or corrupt file are a :class:`~cstrie.export.FormatError` naming the
line; no index is returned then.

>>> import io
>>> from cstrie.selectors import SelectorIndex
>>> idx = SelectorIndex(); idx.add("alice", "news.*", "glob")
True
>>> buf = io.BytesIO(); write(idx.snapshot(), buf)
1
>>> read(io.BytesIO(buf.getvalue()), SelectorIndex()).lookup("news.eu")
['alice']
"""

from __future__ import annotations

import json
import os
import zlib
from typing import IO, Any, BinaryIO

from cstrie._version import __version__
from cstrie.export.codec import (
    Decode,
    Encode,
    encoded_kind,
    json_value,
    native_kind,
    value_from_json,
)
from cstrie.export.errors import FormatError
from cstrie.export.meta import JSON_ERRORS, decode_values
from cstrie.export.writer import Dest, _is_path, _write_to

__all__ = ["FORMAT", "MAX_LINE_BYTES", "MAX_PAIRS", "VERSION", "read", "write"]

FORMAT = "cstrie-selectors-jsonl"
#: 1. (subscriber, kind, selector) lines.
VERSION = 1
#: default bound on the pairs a loaded file may hold
MAX_PAIRS = 10_000_000
#: default bound on one line's bytes (a 4096-character selector of 4-byte
#: characters, JSON-escaped at worst, fits with room for its subscriber)
MAX_LINE_BYTES = 1 << 20

_LINE_KEYS = {"subscriber", "kind", "selector"}


def write(snap: Any, dest: Dest, encode: Encode | None = None) -> int:
    """Write the selectors of ``snap`` (a SelectorSnapshot: one version, so
    writers may go on; ``SelectorIndex.export`` takes it) to ``dest``, a path
    or a writable binary file; the number of pairs.  Every subscriber is
    checked (and with ``encode``, encoded once) before a byte is written:
    ``TypeError`` for one that cannot be stored, ``ValueError`` when
    ``encode`` gives two the same value; a path is written through a
    temporary file that replaces it only when complete.  O(pairs) time,
    memory O(pairs)."""
    # the selector classes import this module (export, load), not the reverse
    if not callable(getattr(snap, "_live_items", None)) or hasattr(snap, "add"):
        raise TypeError(f"expected a SelectorSnapshot, not {type(snap).__name__}")
    items = list(snap._live_items())
    stored: list[str | int | bytes] = []
    seen: dict[Any, Any] = {}
    for obj, _ in items:
        if encode is None:
            native_kind(obj)
            v = obj
        else:
            v = encode(obj)
            encoded_kind(obj, v)
        key = (type(v), v)
        if key in seen:
            raise ValueError(
                f"encode gave subscribers {seen[key]!r} and {obj!r} the same value {v!r}; "
                "it must be one-to-one"
            )
        seen[key] = obj
        stored.append(v)
    del seen
    header = {
        "format": FORMAT,
        "version": VERSION,
        "subscriber_codec": "native" if encode is None else "user",
        "writer": f"cstrie {__version__}",
    }

    def put_all(f: BinaryIO) -> int:
        crc = 0
        pairs = 0

        def put(b: bytes) -> None:
            nonlocal crc
            f.write(b)
            crc = zlib.crc32(b, crc)

        put((json.dumps(header) + "\n").encode())
        for v, (_, selectors) in zip(stored, items, strict=True):
            sub = json.dumps(json_value(v), ensure_ascii=False)
            lines = [
                f'{{"subscriber":{sub},"kind":{json.dumps(s.kind)},'
                f'"selector":{json.dumps(s.text, ensure_ascii=False)}}}\n'
                for s in selectors
            ]
            put("".join(lines).encode("utf-8"))
            pairs += len(lines)
        f.write((json.dumps({"end": {"pairs": pairs, "crc32": crc}}) + "\n").encode())
        return pairs

    return _write_to(dest, put_all)


def _line(f: IO[bytes], number: int, max_line_bytes: int) -> bytes:
    line = f.readline(max_line_bytes + 1)
    if len(line) > max_line_bytes:
        raise FormatError(f"line {number}: longer than {max_line_bytes} bytes (max_line_bytes)")
    return line


def _json(line: bytes, number: int) -> Any:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"line {number}: not valid UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text)
    except JSON_ERRORS as exc:
        raise FormatError(f"line {number}: not valid JSON ({exc})") from None


def check_header(meta: object) -> str:
    """Validate a selector file's header; its subscriber codec."""
    if not isinstance(meta, dict):
        raise FormatError("line 1: the header is not a JSON object")
    if meta.get("format") != FORMAT:
        raise FormatError(
            f"line 1: not a cstrie selector file (header format is {meta.get('format')!r}, "
            f"expected {FORMAT!r})"
        )
    version = meta.get("version")
    if type(version) is not int or version < 1:
        raise FormatError(f"line 1: invalid format version {version!r}")
    if version > VERSION:
        raise FormatError(
            f"line 1: format version {version} is newer than this cstrie reads (up to "
            f"{VERSION}); upgrade cstrie"
        )
    codec = meta.get("subscriber_codec")
    if codec not in ("native", "user"):
        raise FormatError(f"line 1: invalid subscriber_codec {codec!r}")
    return str(codec)


def read(
    src: str | os.PathLike[str] | IO[bytes],
    index: Any,
    decode: Decode | None = None,
    *,
    max_pairs: int = MAX_PAIRS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Any:
    """Fill ``index``, a new empty :class:`~cstrie.selectors.SelectorIndex`
    (its limits apply to the file: ``SelectorIndex.load`` makes it), with the
    pairs of the selector file ``src`` (a path or a readable binary file), and
    return it.  ``decode`` is applied once to every distinct stored
    subscriber; it is required for a file written with ``encode``
    (:func:`~cstrie.export.keep_encoded` keeps the stored values).  A bad file
    is a :class:`FormatError` naming the line and the problem, raised before
    the first pair is added (or at the pair the index refuses: then the index
    is not returned); ``ValueError`` when ``decode`` makes two subscribers
    equal.  O(bytes) to check, then one ``add`` per pair."""
    for name, value in (("max_pairs", max_pairs), ("max_line_bytes", max_line_bytes)):
        if type(value) is not int:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be positive, not {value}")
    if _is_path(src):
        with open(src, "rb") as f:  # type: ignore[arg-type]
            return _read(f, index, decode, max_pairs, max_line_bytes)
    stream: IO[bytes] = src  # type: ignore[assignment]
    return _read(stream, index, decode, max_pairs, max_line_bytes)


def _read(
    f: IO[bytes], index: Any, decode: Decode | None, max_pairs: int, max_line_bytes: int
) -> Any:
    head = _line(f, 1, max_line_bytes)
    if not head:
        raise FormatError("line 1: empty file (no header)")
    codec = check_header(_json(head, 1))
    crc = zlib.crc32(head)
    values: dict[tuple[type, Any], int] = {}  # stored subscriber -> its number
    pairs: list[tuple[int, str, str, int]] = []  # (subscriber number, kind, text, line)
    seen: dict[tuple[int, str, str], int] = {}
    number = 1
    while True:
        number += 1
        line = _line(f, number, max_line_bytes)
        if not line:
            raise FormatError(f"line {number}: the file ends without its footer (truncated)")
        if not line.endswith(b"\n"):
            raise FormatError(f"line {number}: the last line has no newline (truncated)")
        obj = _json(line, number)
        if isinstance(obj, dict) and set(obj) == {"end"}:
            break
        crc = zlib.crc32(line, crc)
        if len(pairs) >= max_pairs:
            raise FormatError(f"line {number}: more than {max_pairs} pairs (max_pairs)")
        if not isinstance(obj, dict) or set(obj) != _LINE_KEYS:
            raise FormatError(
                f'line {number}: expected {{"subscriber": ..., "kind": ..., "selector": ...}}'
            )
        kind, text = obj["kind"], obj["selector"]
        if type(kind) is not str or type(text) is not str:
            raise FormatError(f"line {number}: the kind and the selector must be strings")
        try:
            v = value_from_json(obj["subscriber"])
        except FormatError as exc:
            raise FormatError(f"line {number}: {exc}") from None
        ref = values.setdefault((type(v), v), len(values))
        first = seen.setdefault((ref, kind, text), number)
        if first != number:
            raise FormatError(f"line {number}: repeats line {first} (corrupt file)")
        pairs.append((ref, kind, text, number))
    _check_footer(obj["end"], len(pairs), crc, number)
    if f.read(1):
        raise FormatError(f"line {number + 1}: data after the footer")
    stored = [v for _, v in values]
    objects = decode_values(stored, codec, decode)
    # user code (__hash__, __eq__) runs here, under no lock
    if decode is not None and len(set(objects)) != len(objects):
        raise ValueError("decode made two subscribers of the file equal")
    for ref, kind, text, line_no in pairs:
        try:
            index.add(objects[ref], text, kind)
        except (TypeError, ValueError) as exc:
            raise FormatError(f"line {line_no}: {exc}") from None
    return index


def _check_footer(end: object, pairs: int, crc: int, number: int) -> None:
    if not isinstance(end, dict) or not set(end) <= {"pairs", "crc32"} or "pairs" not in end:
        raise FormatError(f'line {number}: expected the footer {{"end": {{"pairs": N, ...}}}}')
    if end["pairs"] != pairs or type(end["pairs"]) is not int:
        raise FormatError(
            f"line {number}: the footer counts {end['pairs']!r} pairs, the file has {pairs}"
        )
    if "crc32" in end and end["crc32"] != crc:
        raise FormatError(f"line {number}: CRC-32 mismatch (the file was changed or damaged)")
