"""``cstrie load``: load and verify an export, then summarise or convert it.

Checks the whole file (checksums, counts, structure, every pattern against the
dialect) by building the trie, then prints a summary (format, version,
dialect, pairs, patterns, subscribers).  With ``-o`` it also writes the pairs:
as PATTERN<TAB>SUBSCRIBER text for .tsv/.txt or ``-`` (stdout), otherwise as
the export format of the suffix (or ``--format``).

A topic index export (stored topics with values) is checked the same way by
building the index; its summary gives "topic index" as the content and counts
topics, distinct values and the deepest topic's levels, and ``-o`` writes
TOPIC<TAB>VALUE text (what ``cstrie retained`` reads) or another export.

Exit codes: 0 the file is valid; 2 it is unreadable, truncated, corrupt or of
an unknown format, or bad usage.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

from cstrie.commands._common import (
    TEXT_SUFFIXES,
    TOPICS,
    add_common,
    check_tsv,
    codec_of,
    read_source,
    write_topics_tsv,
    write_tsv,
)
from cstrie.commands._progress import Bar, enabled


def run(args: argparse.Namespace) -> int:
    from cstrie.export import _from_suffix, export
    from cstrie.export.codec import keep_encoded

    trie, info = read_source(args.file, args.dialect, args.input_format)
    topics = info["content"] == TOPICS
    summary = _topic_summary(trie, info) if topics else _summary(trie, info)
    summary = {"file": args.file, **summary}
    if args.output:
        out = args.output
        fmt = args.format or (
            "tsv" if out == "-" or out.lower().endswith(TEXT_SUFFIXES) else _from_suffix(out)
        )
        if fmt is None:
            print(
                f"cstrie load: error: cannot tell the format of {out!r}; pass --format",
                file=sys.stderr,
            )
            return 2
        write = write_topics_tsv if topics else write_tsv
        if fmt == "tsv":
            if out == "-":
                write(trie, sys.stdout)
                sys.stdout.flush()
            else:
                if not topics:
                    check_tsv(trie)  # before the file is made
                with open(out, "w", encoding="utf-8", newline="\n") as f:
                    write(trie, f)
        else:
            encode = keep_encoded if codec_of(info) == "user" else None
            unit = "topics" if topics else "pairs"
            bar = Bar(f"write {fmt}", enabled(args.progress), unit=unit)
            export(trie, out, fmt, encode, progress=bar)
            bar.close()
        summary["output"] = out
    stream = sys.stderr if args.output == "-" else sys.stdout
    if args.json:
        print(json.dumps(summary), file=stream)
    elif not args.quiet:
        buf = io.StringIO()
        for key, value in summary.items():
            if value is not None:
                text = f"{value:,}" if isinstance(value, int) else value
                print(f"{key:17} {text}", file=buf)
        print(buf.getvalue(), end="", file=stream)
    return 0


def _summary(trie: Any, info: dict[str, Any]) -> dict[str, Any]:
    stats = trie.stats()
    return {
        "format": info["format"],
        "version": info.get("version"),
        "dialect": trie.dialect.name,
        "subscriber_codec": info.get("subscriber_codec", "native"),
        "pairs": stats["subscriptions"],
        "patterns": stats["patterns"],
        "subscribers": stats["subscribers"],
    }


def _topic_summary(index: Any, info: dict[str, Any]) -> dict[str, Any]:
    """A topic index file's summary: it says what it is ("content": "topic
    index"), the number of topics and of distinct values (stored values:
    str, int or bytes, so hashable), and the deepest topic's levels."""
    values: set[Any] = set()
    topics = 0
    for _, value in index.items():
        topics += 1
        values.add((type(value), value))
    return {
        "format": info["format"],
        "content": "topic index",
        "version": info.get("version"),
        "dialect": index.dialect.name,
        "value_codec": info.get("value_codec", "native"),
        "topics": topics,
        "values": len(values),
        "max_levels": index.stats()["max_depth"],
    }


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "load",
        help="verify an export file and summarise or convert it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="export file (- = stdin)")
    p.add_argument(
        "-o", "--output", help="also write the pairs here (.tsv/.txt/- text, or an export)"
    )
    p.add_argument(
        "-f", "--format", choices=("tsv", "jsonl", "parquet", "binary"), help="format of -o"
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    add_common(p)
    p.set_defaults(func=run)
