"""``cstrie selectors``: selector files (a :class:`~cstrie.selectors.SelectorIndex`
exported with ``index.export(path)``; docs/export.md, "Selector files").

    cstrie selectors match subs.jsonl https://example.com/books/1 news.eu
    printf 'news.eu\\n' | cstrie selectors match subs.jsonl
    cstrie selectors stats subs.jsonl [--json]

``match`` answers each TOPIC (or, with none, each line of standard input: a
trailing ``\\r`` is dropped, an empty line is the empty topic) with one JSON
line, in input order::

    {"topic": "news.eu", "subscribers": ["alice", 42]}
    {"topic": "...", "error": "topic of 70000 characters is longer than ..."}

subscribers in the order the index returns them (JSON strings or numbers,
bytes as ``{"bytes": base64}``).  ``stats`` prints the file's header and the
index's counts (:meth:`~cstrie.selectors.SelectorIndex.stats`).  A file
written with ``encode=`` is read with its stored subscribers.  FILE ``-``
reads standard input (then ``match`` needs its topics as arguments).  The
loader's limits are options (``--max-pairs``, ``--max-selector-length``,
``--max-line-bytes``).

Exit codes: 0 done; 1 some topics were invalid (each has an "error" line, the
others are answered); 2 bad usage or an unreadable, corrupt or invalid file.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Iterator
from typing import IO, Any

from cstrie.export import selectorfile

__all__ = ["add_parser"]


def _load(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """(index, header) of the selector file ``args.file``."""
    from cstrie.export import keep_encoded
    from cstrie.selectors import SelectorIndex

    if args.file == "-":
        data: IO[bytes] = io.BytesIO(sys.stdin.buffer.read())
    else:
        data = open(args.file, "rb")
    with data:
        head = selectorfile._json(data.readline(args.max_line_bytes + 1), 1)
        data.seek(0)
        index = SelectorIndex.load(
            data,
            keep_encoded,
            max_pairs=args.max_pairs,
            max_line_bytes=args.max_line_bytes,
            max_selector_length=args.max_selector_length,
            cache_bytes=0 if args.subcommand == "stats" else 64 << 20,
        )
    return index, head


def _stdin_topics() -> Iterator[str]:
    stream = io.TextIOWrapper(
        sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="\n"
    )
    try:
        for line in stream:
            yield line.removesuffix("\n").removesuffix("\r")
    finally:
        stream.detach()  # leave sys.stdin open


def _json(s: Any) -> Any:
    from cstrie.export.codec import json_value

    return json_value(s)


def run_match(args: argparse.Namespace) -> int:
    if args.file == "-" and not args.topics:
        print(
            "cstrie selectors match: error: with the file on stdin, give the topics as arguments",
            file=sys.stderr,
        )
        return 2
    index, _ = _load(args)
    topics = args.topics or _stdin_topics()
    bad = done = 0
    out = sys.stdout
    for t in topics:
        done += 1
        try:
            subs = index.lookup(t)
        except ValueError as exc:
            bad += 1
            line = json.dumps({"topic": t, "error": str(exc)})
        else:
            line = json.dumps({"topic": t, "subscribers": [_json(s) for s in subs]})
        out.write(line + "\n")
    out.flush()
    if bad:
        print(f"cstrie selectors match: {bad:,} of {done:,} topics were invalid", file=sys.stderr)
        return 1
    return 0


def run_stats(args: argparse.Namespace) -> int:
    index, head = _load(args)
    stats = index.stats()
    info = {
        "file": args.file,
        "format": head["format"],
        "format_version": head["version"],
        "subscriber_codec": head["subscriber_codec"],
        "writer": head.get("writer"),
        **stats,
    }
    if args.json:
        print(json.dumps(info))
    else:
        width = max(map(len, info))
        for k, v in info.items():
            print(f"{k:<{width}}  {v:,}" if type(v) is int else f"{k:<{width}}  {v}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "selectors",
        help="match topics against a selector file (globs, URI templates, regexes), or its stats",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = p.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=type(p))
    cmds.required = True

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("file", metavar="FILE", help="a selector file (- for stdin)")
        q.add_argument(
            "--max-pairs",
            type=int,
            default=selectorfile.MAX_PAIRS,
            help=f"refuse a file of more pairs (default {selectorfile.MAX_PAIRS:,})",
        )
        q.add_argument(
            "--max-line-bytes",
            type=int,
            default=selectorfile.MAX_LINE_BYTES,
            help=f"refuse a longer line (default {selectorfile.MAX_LINE_BYTES:,})",
        )
        q.add_argument(
            "--max-selector-length",
            type=int,
            default=4096,
            help="refuse a longer selector, in characters (default 4096)",
        )

    m = cmds.add_parser("match", help="the subscribers of each topic, JSON Lines out")
    common(m)
    m.add_argument("topics", nargs="*", metavar="TOPIC", help="topics (default: stdin lines)")
    m.set_defaults(func=run_match)
    s = cmds.add_parser("stats", help="the file's header and the index's counts")
    common(s)
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(func=run_stats)
