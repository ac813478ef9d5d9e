"""Export a snapshot of the subscriptions to a file, and load it back.

>>> import cstrie, io
>>> from cstrie.export import export, load
>>> t = cstrie.Trie("mqtt"); t.subscribe("a/+", "alice"); t.subscribe("a/#", 7)
True
True
>>> buf = io.BytesIO(); export(t.snapshot(), buf, format="binary")
2
>>> sorted(load(io.BytesIO(buf.getvalue())), key=str)
[('a/#', 7), ('a/+', 'alice')]

Formats (one module each; layouts in ``docs/export.md``):

========  ================================  =====================================
format    suffixes                          for
========  ================================  =====================================
jsonl     ``.jsonl`` ``.ndjson``            people, grep/jq, line-oriented tools
parquet   ``.parquet`` ``.pq``              analytics (pandas, Spark, DuckDB); needs pyarrow
binary    ``.cstrie`` ``.cst`` ``.bin``     shipping a matcher to other processes
========  ================================  =====================================

Share-group memberships (:mod:`cstrie.groups`) are records of their own in
every format (format version 2: the group's name beside the filter and the
member), with each group's policy; a version 1 file has none.  A group's
round-robin counter and a policy set for a group without members are not
stored.

Topic index files: :func:`export` of a :class:`~cstrie.TopicIndex` or
:class:`~cstrie.TopicSnapshot` writes its (topic, value) records (values with
the subscriber codec's rules, but shared values are fine) as a file of its own
kind, ``"format": "cstrie-topics-<fmt>"`` (topic format version 1), which
:func:`load` gives back as a :class:`~cstrie.TopicIndex`; readers from before
topic files refuse it with their :class:`FormatError` (see
:mod:`cstrie.export.topicfile` and the layouts in ``docs/export.md``).

Every format records the dialect (all fields) and a format version, and is
checked on load (CRC-32s, counts, structure): a truncated or corrupt file
raises :class:`FormatError` and builds nothing.  The export reads one O(1)
snapshot, so it is consistent while other threads keep subscribing; the pairs
are streamed in chunks, so its memory grows with the number of distinct
subscribers, not of pairs.  Subscribers are checked before anything is
written: when every object the trie's registry knows is a str, int or bytes
that check is one C-speed pass over the registry; otherwise (or with
``encode``) a first pass over the snapshot collects and checks its distinct
subscribers.  Writing to a path goes through a temporary file in the same
directory that replaces the target only when the export is complete.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cstrie.export.codec import Decode, keep_encoded
from cstrie.export.errors import FormatError
from cstrie.export.writer import FORMATS, _canonical, _is_path, export
from cstrie.export.writer import _from_suffix as _from_suffix  # the commands use it

if TYPE_CHECKING:
    from cstrie.export.meta import Classes

__all__ = [
    "FORMATS",
    "FormatError",
    "content_of",
    "detect_format",
    "export",
    "keep_encoded",
    "load",
    "read_header",
]


def detect_format(head: bytes) -> str | None:
    """The format of a file starting with ``head`` (its first bytes), if known."""
    from cstrie.export.binary import MAGIC

    if head.startswith(MAGIC):
        return "binary"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.lstrip().startswith(b"{"):
        return "jsonl"
    return None


def load(
    src: str | os.PathLike[str] | IO[bytes],
    format: str | None = None,
    decode: Decode | None = None,
) -> Any:
    """Load an export into a new :class:`cstrie.Trie` (same dialect, pairs,
    share-group memberships and group policies), or a topic index file into
    a new :class:`cstrie.TopicIndex` (same dialect, topics and values).

    ``src`` is a path or a readable binary file.  ``format`` defaults from the
    suffix, then from the file's first bytes; the header says which kind of
    file it is.  ``decode`` is applied to every distinct stored subscriber
    (value); it is required for files written with ``encode=``
    (:func:`keep_encoded` keeps the stored values).  Raises
    :class:`FormatError` (a ``ValueError``) for a truncated, corrupt or
    unknown file; nothing is built then.
    """
    fmt = _canonical(format) if format is not None else None
    if _is_path(src):
        path = Path(os.fspath(src))  # type: ignore[arg-type]
        if fmt is None:
            fmt = _from_suffix(path)
        if fmt is None:
            with open(path, "rb") as f:
                fmt = detect_format(f.read(16))
        if fmt == "parquet":
            from cstrie.export import parquet

            return parquet.read(str(path), _classes(), decode)
        with open(path, "rb") as f:
            return _load_stream(f, fmt, decode)
    stream: IO[bytes] = src  # type: ignore[assignment]
    if fmt is None:
        fmt = (
            _from_suffix(getattr(stream, "name", None))
            if isinstance(getattr(stream, "name", None), str)
            else None
        )
    if fmt is None:
        if not stream.seekable():
            stream = io.BytesIO(stream.read())
        start = stream.tell()
        fmt = detect_format(stream.read(16))
        stream.seek(start)
    if fmt == "parquet":
        from cstrie.export import parquet

        if not stream.seekable():
            stream = io.BytesIO(stream.read())
        return parquet.read(stream, _classes(), decode)
    return _load_stream(stream, fmt, decode)


def _classes() -> Classes:
    """What the readers build: the formats import neither class (the classes
    import the formats' writer), so the loader hands them down."""
    from cstrie.export.meta import Classes
    from cstrie.topics import TopicIndex
    from cstrie.trie import Trie

    return Classes(Trie, TopicIndex)


def _load_stream(f: IO[bytes], fmt: str | None, decode: Decode | None) -> Any:
    if fmt == "jsonl":
        from cstrie.export import jsonl

        return jsonl.read(f, _classes(), decode)  # type: ignore[arg-type]
    if fmt == "binary":
        from cstrie.export import binary

        return binary.read(f, _classes(), decode)  # type: ignore[arg-type]
    raise FormatError(
        f"not a cstrie export: unknown file format (expected one of {sorted(FORMATS)})"
    )


def read_header(
    src: str | os.PathLike[str] | IO[bytes], format: str | None = None
) -> dict[str, Any]:
    """The header record of an export (format, version, dialect, subscriber
    codec, ...) without loading the pairs or checking the whole file.  A
    topic index file's ``"format"`` is ``"cstrie-topics-<fmt>"`` (and it has
    ``"value_codec"``); :func:`content_of` tells the kinds apart."""
    import json

    if _is_path(src):
        path = Path(os.fspath(src))  # type: ignore[arg-type]
        with open(path, "rb") as f:
            head = f.read(16)
        fmt = _canonical(format) if format else (_from_suffix(path) or detect_format(head))
        if fmt == "parquet":
            from cstrie.export.parquet import require_pyarrow

            require_pyarrow()
            import pyarrow.parquet as pq

            try:
                kv = pq.ParquetFile(str(path)).metadata.metadata or {}
                meta = json.loads(kv[b"cstrie"])
            except Exception as exc:
                raise FormatError(f"not a readable cstrie Parquet export: {exc}") from None
        else:
            with open(path, "rb") as f:
                meta = _stream_header(f, fmt)
    else:
        stream: IO[bytes] = src  # type: ignore[assignment]
        start = stream.tell()
        head = stream.read(16)
        stream.seek(start)
        fmt = _canonical(format) if format else detect_format(head)
        if fmt == "parquet":
            raise ValueError("read_header needs a path for Parquet files")
        meta = _stream_header(stream, fmt)
        stream.seek(start)
    from cstrie.export.meta import check_any_meta

    check_any_meta(meta, fmt or "")
    return dict(meta)


def content_of(header: dict[str, Any]) -> str:
    """``"topics"`` for the header (:func:`read_header`) of a topic index file,
    ``"subscriptions"`` for a subscription file."""
    fmt = str(header.get("format", ""))
    return "topics" if fmt.startswith("cstrie-topics-") else "subscriptions"


def _stream_header(f: IO[bytes], fmt: str | None) -> Any:
    import json
    import struct

    try:
        if fmt == "jsonl":
            return json.loads(f.readline(1 << 20))
        if fmt == "binary":
            head = f.read(16)
            (meta_len,) = struct.unpack_from("<I", head, 12)
            return json.loads(f.read(meta_len))
    except (ValueError, RecursionError, struct.error) as exc:
        raise FormatError(f"unreadable header: {exc}") from None
    raise FormatError(
        f"not a cstrie export: unknown file format (expected one of {sorted(FORMATS)})"
    )
