"""What the ``cstrie`` subcommands share: reading a subscription file or a
topic index export (:func:`read_source`) or a content subscription file
(:func:`read_content`), writing text, the common options.

The files and exit codes are described in :mod:`cstrie.commands`.  Nothing
here imports a command module: they import this one.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import sys
from typing import IO, Any

from cstrie.dialect import Dialect, resolve_dialect

__all__ = ["add_common", "read_content", "read_source", "read_subscriptions"]

TEXT_SUFFIXES = (".tsv", ".txt", ".tab")


def add_common(p: argparse.ArgumentParser, progress: bool = True) -> None:
    """--dialect, --input-format and (optionally) --progress/--no-progress."""
    p.add_argument(
        "--dialect",
        help="dialect of a text (TSV) subscription file: amqp (default), mqtt or nats; "
        "export files carry their own",
    )
    p.add_argument(
        "--input-format",
        choices=("auto", "jsonl", "parquet", "binary", "tsv"),
        default="auto",
        help="format of the subscription file (default: from the suffix or first bytes)",
    )
    if progress:
        p.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="progress bar on stderr (default: when stderr is a terminal)",
        )


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        return io.BytesIO(sys.stdin.buffer.read())
    return open(path, "rb")


def input_format(path: str, choice: str = "auto") -> str:
    """The format of a subscription file: jsonl, parquet, binary or tsv."""
    from cstrie.export import _from_suffix, detect_format

    if choice != "auto":
        return choice
    if path != "-":
        if path.lower().endswith(TEXT_SUFFIXES):
            return "tsv"
        fmt = _from_suffix(path)
        if fmt is not None:
            return fmt
        with open(path, "rb") as f:
            return detect_format(f.read(16)) or "tsv"
    return "auto"


SUBSCRIPTIONS, TOPICS = "subscriptions", "topics"


def read_subscriptions(
    path: str, dialect: str | None = None, choice: str = "auto"
) -> tuple[Any, dict[str, Any]]:
    """(Trie, info) from a subscription file.  ``info`` has "format" and, for
    exports, the header ("subscriber_codec" is kept: user-encoded subscribers
    are loaded as their stored values).  A topic index export is refused
    (``ValueError``, before its records are read)."""
    return read_source(path, dialect, choice, (SUBSCRIPTIONS,))


def read_source(
    path: str,
    dialect: str | None = None,
    choice: str = "auto",
    kinds: tuple[str, ...] = (SUBSCRIPTIONS, TOPICS),
) -> tuple[Any, dict[str, Any]]:
    """(Trie or TopicIndex, info) from a subscription file or a topic index
    export, as its header says (``info["content"]`` is ``"subscriptions"`` or
    ``"topics"``; a text file is subscriptions).  A file of a kind not in
    ``kinds`` raises ``ValueError`` naming what it is, before its records are
    read.  User-encoded subscribers or values are loaded as their stored
    values (``keep_encoded``)."""
    from cstrie.export import content_of, detect_format, load, read_header
    from cstrie.export.codec import keep_encoded

    fmt = input_format(path, choice)
    if path == "-":
        data = sys.stdin.buffer.read()
        if fmt == "auto":
            fmt = detect_format(data[:16]) or "tsv"
        stream: IO[bytes] = io.BytesIO(data)
    else:
        stream = open(path, "rb")
    try:
        if fmt == "tsv":
            if SUBSCRIPTIONS not in kinds:
                raise ValueError(f"{path}: expected a topic index export, found text")
            trie = _read_tsv(stream, resolve_dialect(dialect or "amqp"), path)
            return trie, {"format": "tsv", "dialect": trie.dialect.name, "content": SUBSCRIPTIONS}
        if fmt == "jsonl":
            _refuse_content(stream, path)
        if fmt == "parquet" and path != "-":
            header = read_header(path, "parquet")
        else:
            header = read_header(stream, fmt)
        content = content_of(header)
        if content not in kinds:
            raise ValueError(_wrong_kind(path, content))
        codec = header.get("value_codec" if content == TOPICS else "subscriber_codec")
        decode = keep_encoded if codec == "user" else None
        trie = load(path if (fmt == "parquet" and path != "-") else stream, fmt, decode)
    finally:
        stream.close()
    if dialect is not None and resolve_dialect(dialect) != trie.dialect:
        want = dataclasses.asdict(resolve_dialect(dialect))
        have = dataclasses.asdict(trie.dialect)
        # Name the fields: a file keeps the rules it was written with, so a file of a
        # built-in dialect that lacks a field of a later format loads with that field's
        # default and differs from the built-in only there (docs/export.md).
        diff = "; ".join(
            f"{k} {want[k]!r} vs {have[k]!r} in the file" for k in want if want[k] != have[k]
        )
        raise ValueError(
            f"--dialect {dialect} does not match the file's dialect {trie.dialect.name!r} ({diff})"
        )
    return trie, {**header, "format": fmt, "content": content}


def _refuse_content(stream: IO[bytes], path: str) -> None:
    """``ValueError`` when the JSON Lines ``stream`` is a content
    subscription file (its header's format), rewound either way."""
    import json

    from cstrie.content.export import FORMAT

    start = stream.tell()
    line = stream.readline(1 << 20)
    stream.seek(start)
    try:
        head = json.loads(line)
    except (ValueError, RecursionError):
        return  # read_header names what is wrong
    if isinstance(head, dict) and head.get("format") == FORMAT:
        raise ValueError(
            f"{path} is a content subscription file (criteria on message fields), not "
            "topic subscriptions: read it with 'cstrie content', or match a log with "
            "'cstrie spark-match --content'"
        )


def read_content(path: str) -> Any:
    """A :class:`~cstrie.content.ContentIndex` from a content subscription
    file (``-``: standard input).  User-encoded subscribers are loaded as
    their stored values (``keep_encoded``); anything wrong is a
    :class:`~cstrie.export.FormatError` naming the file and the line."""
    from cstrie.content import ContentIndex
    from cstrie.export import FormatError
    from cstrie.export.codec import keep_encoded

    try:
        with _open_input(path) as f:
            return ContentIndex.load(f, decode=keep_encoded)
    except FormatError as exc:
        raise FormatError(f"{'standard input' if path == '-' else path}: {exc}") from None


def _wrong_kind(path: str, content: str) -> str:
    if content == TOPICS:
        return (
            f"{path} is a topic index export (stored topics with values), not "
            "subscriptions: query it with 'cstrie retained', or read it with "
            "'cstrie load', 'tree', 'stats' or 'export'"
        )
    return (
        f"{path} is a subscription export, not a topic index export (stored topics): "
        "'cstrie retained' reads topic index exports or TOPIC[<TAB>VALUE] text"
    )


def codec_of(info: dict[str, Any]) -> str:
    """The codec of what :func:`read_source` read (``"user"`` when its
    subscribers or values were written with ``encode=``)."""
    key = "value_codec" if info.get("content") == TOPICS else "subscriber_codec"
    return str(info.get(key, "native"))


def write_topics_tsv(index: Any, out: IO[str]) -> int:
    """Write ``TOPIC<TAB>VALUE`` lines of a topic index (what ``cstrie
    retained`` reads); returns the number of topics."""
    n = 0
    for topic, value in index.snapshot().items():
        out.write(f"{topic}\t{value}\n")
        n += 1
    return n


def _read_tsv(stream: IO[bytes], dialect: Dialect, name: str) -> Any:
    from cstrie.trie import Trie

    pairs: list[tuple[str, str]] = []
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
    try:
        for lineno, line in enumerate(text, 1):
            line = line.rstrip("\n").removesuffix("\r")
            if not line:
                continue
            pattern, tab, subscriber = line.rpartition("\t")
            if not tab:
                raise ValueError(
                    f"{name}:{lineno}: expected PATTERN<TAB>SUBSCRIBER, found {line[:60]!r}"
                )
            pairs.append((pattern, subscriber))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text ({exc})") from None
    finally:
        text.detach()
    return Trie.from_pairs(pairs, dialect)


def check_tsv(trie: Any) -> None:
    """``ValueError`` when ``trie`` has share-group memberships and its dialect
    no share syntax to write them as text (see :func:`write_tsv`)."""
    d = trie.dialect
    if d.share_prefix is None and trie.stats()["shared_subscriptions"]:
        raise ValueError(
            f"share-group memberships have no PATTERN<TAB>SUBSCRIBER text form in the "
            f"{d.name} dialect; write an export (.jsonl, .parquet, .cstrie) instead"
        )


def write_tsv(trie: Any, out: IO[str]) -> int:
    """Write ``PATTERN<TAB>SUBSCRIBER`` lines; returns the number of pairs.

    A share-group membership is written in the dialect's share syntax (MQTT's
    ``$share/{group}/{filter}``, which reading the text turns back into the
    membership); a dialect without one has no text form for memberships:
    ``ValueError`` before anything is written."""
    from cstrie.groups import Shared

    d = trie.dialect
    snap = trie.snapshot()
    check_tsv(snap)
    n = 0
    for key, subs in snap._entries():
        if isinstance(key, Shared):
            key = f"{d.share_prefix}{d.separator}{key.group}{d.separator}{key.pattern}"
        for s in subs:
            out.write(f"{key}\t{s}\n")
            n += 1
    return n


def output_stream(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdout.buffer
    return open(os.fspath(path), "wb")
