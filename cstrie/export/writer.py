"""Writing an export: :func:`export` (re-exported by :mod:`cstrie.export`),
the format names and suffixes.

``Trie.export`` and ``TopicIndex.export`` import this module; it reads a trie
or a topic index through their methods and imports neither class, so the
classes and the formats import each other in one direction only.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO

from cstrie.export import codec as _codec
from cstrie.export.codec import Encode

#: canonical format name -> file suffixes
FORMATS: dict[str, tuple[str, ...]] = {
    "jsonl": (".jsonl", ".ndjson"),
    "parquet": (".parquet", ".pq"),
    "binary": (".cstrie", ".cst", ".bin"),
}
_ALIASES = {"ndjson": "jsonl", "json-lines": "jsonl", "pq": "parquet", "cstrie": "binary"}

Progress = Callable[[int, int], None]
Dest = str | os.PathLike[str] | IO[bytes]


def _canonical(fmt: str) -> str:
    name = _ALIASES.get(fmt.lower(), fmt.lower())
    if name not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}")
    return name


def _from_suffix(name: str | os.PathLike[str] | None) -> str | None:
    if name is None:
        return None
    suffix = Path(os.fspath(name)).suffix.lower()
    for fmt, suffixes in FORMATS.items():
        if suffix in suffixes:
            return fmt
    return None


def _is_path(x: object) -> bool:
    return isinstance(x, (str, os.PathLike))


def export(
    reader: Any,
    dest: Dest,
    format: str | None = None,
    encode: Encode | None = None,
    *,
    progress: Progress | None = None,
) -> int:
    """Write the subscriptions of ``reader`` (a Trie or Snapshot), or the
    topics of a :class:`~cstrie.TopicIndex` or
    :class:`~cstrie.TopicSnapshot`, to ``dest``.

    ``dest`` is a path or a writable binary file.  ``format`` is ``"jsonl"``,
    ``"parquet"`` or ``"binary"``; by default it comes from the path's suffix.
    Subscribers (values) must be str, int or bytes unless ``encode`` (object ->
    str|int|bytes, applied to every subscriber or value) is given; one that
    cannot be stored raises ``TypeError`` before anything is written (and no
    file is created).  ``progress(done, total)`` is called after each chunk.
    Returns the number of pairs written, share-group memberships included (as
    ``len(reader)``), or of topics.  O(n) time, memory O(subscribers + one
    chunk) (a topic index: O(distinct values + one chunk)).

    A topic index is written as a topic index file (``"format":
    "cstrie-topics-<fmt>"``, see ``docs/export.md``): the records of one O(1)
    snapshot, so writers may carry on meanwhile.

    >>> import io
    >>> from cstrie import TopicIndex
    >>> from cstrie.export import load
    >>> idx = TopicIndex("mqtt"); idx["a/b"] = b"1"; idx["a/c"] = b"1"
    >>> buf = io.BytesIO(); export(idx, buf, format="jsonl")
    2
    >>> sorted(load(io.BytesIO(buf.getvalue())).items())
    [('a/b', b'1'), ('a/c', b'1')]
    """
    if format is None:
        name = dest if _is_path(dest) else getattr(dest, "name", None)
        format = _from_suffix(name) if isinstance(name, (str, os.PathLike)) else None
        if format is None:
            raise ValueError(
                f"cannot tell the export format from {dest!r}; pass format= "
                f"(one of {sorted(FORMATS)}) or use a suffix such as .jsonl, .parquet, .cstrie"
            )
    fmt = _canonical(format)
    snap = reader.snapshot()
    if _is_topic_reader(snap):
        return _write_to(dest, _topic_writer(snap, fmt, encode, progress))
    plan = _codec.plan(snap, encode)
    if fmt == "jsonl":
        from cstrie.export import jsonl

        def write(f: BinaryIO) -> None:
            jsonl.write(snap, f, plan, progress)

    elif fmt == "parquet":
        from cstrie.export import parquet

        prep = parquet.prepare(plan)

        def write(f: BinaryIO) -> None:
            parquet.write(snap, f, plan, prep, progress)

    else:
        from cstrie.export import binary

        def write(f: BinaryIO) -> None:
            binary.write(snap, f, plan, progress)

    def write_all(f: BinaryIO) -> int:
        write(f)
        return len(snap)

    return _write_to(dest, write_all)


def _is_topic_reader(reader: object) -> bool:
    # cstrie.topics imports this module (TopicIndex.export), so its class is
    # looked up, not imported: while it is not loaded no object is a TopicIndex.
    topics = sys.modules.get("cstrie.topics")
    return topics is not None and isinstance(reader, topics._Reader)


def _topic_writer(
    snap: Any, fmt: str, encode: Encode | None, progress: Progress | None
) -> Callable[[BinaryIO], int]:
    """The writer of a topic index file of format ``fmt``; its values are
    checked (and encoded) now, before anything is written."""
    from cstrie.export import topicfile

    tplan = topicfile.plan(snap, encode, members=fmt == "parquet")
    if fmt == "jsonl":
        from cstrie.export import jsonl

        return lambda f: jsonl.write_topics(snap, f, tplan, progress)
    if fmt == "parquet":
        from cstrie.export import parquet

        prep = parquet.prepare_topics(tplan)
        return lambda f: parquet.write_topics(snap, f, tplan, prep, progress)
    from cstrie.export import binary

    return lambda f: binary.write_topics(snap, f, tplan, progress)


def _write_to(dest: Dest, write: Callable[[BinaryIO], int]) -> int:
    """Run ``write`` on ``dest``: a file as it is, a path through a temporary
    file in the same directory that replaces it only when ``write`` is done."""
    if not _is_path(dest):
        return write(dest)  # type: ignore[arg-type]
    path = Path(os.fspath(dest))  # type: ignore[arg-type]
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            n = write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return n
