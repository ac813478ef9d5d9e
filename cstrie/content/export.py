"""Content subscription files: JSON Lines, one binding per line.

Layout (UTF-8, ``\\n`` line ends)::

    {"format": "cstrie-content-jsonl", "version": 1, "dialect": {...},
        "subscriber_codec": "native", "limits": {...}, ...}
    {"criteria": {"all": [{"eq": ["ccy", "USD"]}, {"has": "urgent"}]}, "subscriber": "alice"}
    {"criteria": {"range": {"field": "price", "ge": 10, "lt": 100}}, "subscriber": 7,
        "topic": "stock.#"}
    {"end": {"bindings": 2, "crc32": 123}}

The frame is that of the topic subscription files (:mod:`cstrie.export.jsonl`):
a header naming the format, its version, the topic dialect (every field),
the subscriber codec and here the index's limits; one line per binding
(criteria in the JSON form of :meth:`Criterion.to_json
<cstrie.content.criteria.Criterion.to_json>`, subscribers as in every cstrie
file: str, int, ``{"bytes": base64}``, ``{"text": base64}``, or anything
through ``encode=``/``decode=``); a footer with the number of bindings and
the CRC-32 of every byte before it (delete ``"crc32"`` to edit a file by
hand).  Anything wrong (truncation, a bad CRC or count, bad JSON, an invalid
criterion, a binding the limits refuse) is a
:class:`~cstrie.export.FormatError` naming the line; nothing is built then.

>>> import io
>>> from cstrie.content import ContentIndex, Eq, load
>>> idx = ContentIndex(); _ = idx.bind(Eq("a", 1), "s", topic="x.*")
>>> buf = io.BytesIO(); idx.export(buf)
1
>>> load(io.BytesIO(buf.getvalue())).match({"a": 1}, topic="x.y")
['s']
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from cstrie.content.criteria import from_json
from cstrie.export.codec import (
    dialect_to_json,
    encoded_kind,
    json_value,
    native_kind,
    value_from_json,
)
from cstrie.export.errors import FormatError
from cstrie.export.meta import _check_header
from cstrie.export.writer import _write_to

if TYPE_CHECKING:
    from cstrie.content.criteria import Criterion
    from cstrie.content.index import _Reader
    from cstrie.dialect import Dialect

__all__ = ["FORMAT", "LIMITS", "VERSION", "read", "write"]

FORMAT = "cstrie-content-jsonl"
VERSION = 1
LIMITS = (
    "max_criteria",
    "max_values",
    "max_value_length",
    "max_depth",
    "max_bindings_per_subscriber",
    "max_patterns",
    "range_patterns",
)


def write(reader: _Reader, dest: Any, encode: Callable[[Any], Any] | None = None) -> int:
    """Write the bindings of one snapshot of ``reader`` (an index or a
    snapshot) to ``dest`` (a path, written through a temporary file, or a
    binary file).  Every subscriber is checked before a byte is written
    (``TypeError`` for one that cannot be stored).  Returns the count."""
    bindings = reader.bindings()
    lines = []
    for b in bindings:
        sub = b.subscriber
        if encode is not None:
            stored = encode(sub)
            encoded_kind(sub, stored)
        else:
            native_kind(sub)
            stored = sub
        rec: dict[str, Any] = {"criteria": b.criteria.to_json(), "subscriber": json_value(stored)}
        if b.topic is not None:
            rec["topic"] = b.topic
        lines.append(_dump(rec))
    header = {
        "format": FORMAT,
        "version": VERSION,
        "dialect": dialect_to_json(reader.dialect),
        "subscriber_codec": "native" if encode is None else "user",
        "limits": reader.limits(),
    }

    def run(f: BinaryIO) -> int:
        crc = 0
        for line in [_dump(header), *lines]:
            data = line.encode("utf-8", "surrogatepass")
            crc = zlib.crc32(data, crc)
            f.write(data)
        f.write(_dump({"end": {"bindings": len(lines), "crc32": crc}}).encode())
        return len(lines)

    return _write_to(dest, run)


def _dump(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"


def read(
    src: str | os.PathLike[str] | IO[bytes], decode: Callable[[Any], Any] | None = None
) -> tuple[Dialect, dict[str, int], list[tuple[int, Criterion, Any, str | None]]]:
    """The dialect, the limits and the bindings (line number, criteria,
    subscriber, topic) of a file written by :func:`write`; ``decode`` maps
    each stored subscriber back (required for files written with
    ``encode=``).  :class:`FormatError` for anything wrong, naming the line.
    :meth:`ContentIndex.load <cstrie.content.ContentIndex.load>` builds the
    index."""
    if isinstance(src, (str, os.PathLike)):
        with open(src, "rb") as f:
            raw = f.read()
    else:
        raw = src.read()
    lines = raw.split(b"\n")
    if lines[-1] != b"":
        raise FormatError("truncated file: the last line has no line end")
    lines.pop()
    if len(lines) < 2:
        raise FormatError("truncated file: no header or no footer")
    header = _parse(lines[0], 1)
    dialect, codec = _check_header(header, "jsonl", FORMAT, VERSION, "subscriber_codec")
    if codec == "user" and decode is None:
        raise FormatError("the file's subscribers were written with encode=; pass decode=")
    limits = header.get("limits")
    if not isinstance(limits, dict) or set(limits) != set(LIMITS):
        raise FormatError(f"the header's limits must name exactly {list(LIMITS)}")
    for k, v in limits.items():
        if type(v) is not int:
            raise FormatError(f"limit {k!r} is not an integer: {v!r}")
    footer = _parse(lines[-1], len(lines))
    end = footer.get("end") if isinstance(footer, dict) else None
    if not isinstance(end, dict) or type(end.get("bindings")) is not int:
        raise FormatError("truncated file: the last line is not the footer")
    if end["bindings"] != len(lines) - 2:
        raise FormatError(
            f"the footer counts {end['bindings']} bindings; the file holds {len(lines) - 2}"
        )
    if "crc32" in end:
        crc = 0
        for line in lines[:-1]:
            crc = zlib.crc32(line + b"\n", crc)
        if crc != end["crc32"]:
            raise FormatError("CRC-32 mismatch: the file is corrupt")
    out: list[tuple[int, Criterion, Any, str | None]] = []
    for n, line in enumerate(lines[1:-1], start=2):
        rec = _parse(line, n)
        if not isinstance(rec, dict) or not {"criteria", "subscriber"} <= set(rec) <= {
            "criteria",
            "subscriber",
            "topic",
        }:
            raise FormatError(f"line {n}: expected criteria, subscriber and optionally topic")
        topic = rec.get("topic")
        if topic is not None and type(topic) is not str:
            raise FormatError(f"line {n}: the topic is not a string")
        try:
            criteria = from_json(rec["criteria"])
            sub = value_from_json(rec["subscriber"])
            if decode is not None:
                sub = decode(sub)
        except (TypeError, ValueError) as exc:
            raise FormatError(f"line {n}: {exc}") from None
        out.append((n, criteria, sub, topic))
    return dialect, limits, out


def _parse(line: bytes, n: int) -> Any:
    try:
        return json.loads(line.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"line {n}: not JSON ({exc})"[:300]) from None
