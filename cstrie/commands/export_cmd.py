"""``cstrie export``: write a subscription file in an export format.

Reads SOURCE (an export in any format, or PATTERN<TAB>SUBSCRIBER text) and
writes OUTPUT as JSON Lines, Parquet or the compact binary form, chosen by
``--format`` or by OUTPUT's suffix (.jsonl, .parquet, .cstrie).  An OUTPUT
of ``-`` writes to standard output (then ``--format`` is required).  A topic
index export as SOURCE is written as a topic index export (converted between
formats).

Exit codes: 0 written; 2 bad usage or bad input (nothing is written).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cstrie.commands._common import TOPICS, add_common, codec_of, output_stream, read_source
from cstrie.commands._progress import Bar, enabled


def run(args: argparse.Namespace) -> int:
    from cstrie.export import _from_suffix, export
    from cstrie.export.codec import keep_encoded

    fmt = args.format or (None if args.output == "-" else _from_suffix(args.output))
    if fmt is None:
        print(
            "cstrie export: error: cannot tell the output format from "
            f"{args.output!r}; pass --format jsonl|parquet|binary",
            file=sys.stderr,
        )
        return 2
    trie, info = read_source(args.source, args.dialect, args.input_format)
    encode = keep_encoded if codec_of(info) == "user" else None
    unit = "topics" if info["content"] == TOPICS else "pairs"
    bar = Bar(f"export {fmt}", enabled(args.progress), unit=unit)
    if args.output == "-":
        n = export(trie, output_stream("-"), fmt, encode, progress=bar)
        sys.stdout.buffer.flush()
    else:
        n = export(trie, args.output, fmt, encode, progress=bar)
    bar.close()
    if not args.quiet:
        print(
            f"cstrie export: {n:,} {unit} ({trie.dialect.name}) from {args.source} "
            f"({info['format']}) to {args.output} ({fmt})",
            file=sys.stderr,
        )
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="convert a subscription file to JSON Lines, Parquet or binary",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "source", help="subscription file (export or PATTERN<TAB>SUBSCRIBER text; - = stdin)"
    )
    p.add_argument("output", help="file to write (- = stdout)")
    p.add_argument("-f", "--format", choices=("jsonl", "parquet", "binary"), help="output format")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    add_common(p)
    p.set_defaults(func=run)
