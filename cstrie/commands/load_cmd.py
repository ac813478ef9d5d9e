"""``cstrie load``: load and verify an export, then summarise or convert it.

Checks the whole file (checksums, counts, structure, every pattern against the
dialect) by building the trie, then prints a summary (format, version,
dialect, pairs, patterns, subscribers).  With ``-o`` it also writes the pairs:
as PATTERN<TAB>SUBSCRIBER text for .tsv/.txt or ``-`` (stdout), otherwise as
the export format of the suffix (or ``--format``).

Exit codes: 0 the file is valid; 2 it is unreadable, truncated, corrupt or of
an unknown format, or bad usage.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

from cstrie.commands import (
    TEXT_SUFFIXES,
    add_common,
    check_tsv,
    read_subscriptions,
    write_tsv,
)
from cstrie.commands._progress import Bar, enabled


def run(args: argparse.Namespace) -> int:
    from cstrie.export import _from_suffix, export
    from cstrie.export.codec import keep_encoded

    trie, info = read_subscriptions(args.file, args.dialect, args.input_format)
    stats = trie.stats()
    summary = {
        "file": args.file,
        "format": info["format"],
        "version": info.get("version"),
        "dialect": trie.dialect.name,
        "subscriber_codec": info.get("subscriber_codec", "native"),
        "pairs": stats["subscriptions"],
        "patterns": stats["patterns"],
        "subscribers": stats["subscribers"],
    }
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
        if fmt == "tsv":
            if out == "-":
                write_tsv(trie, sys.stdout)
                sys.stdout.flush()
            else:
                check_tsv(trie)  # before the file is made
                with open(out, "w", encoding="utf-8", newline="\n") as f:
                    write_tsv(trie, f)
        else:
            encode = keep_encoded if summary["subscriber_codec"] == "user" else None
            bar = Bar(f"write {fmt}", enabled(args.progress), unit="pairs")
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
