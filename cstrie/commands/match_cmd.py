"""``cstrie match``: match topics against subscriptions, as JSON Lines.

SUBSCRIPTIONS is a subscription file (export or PATTERN<TAB>SUBSCRIBER text).
Topics are read one per line from TOPICS, or standard input when TOPICS is
``-`` or missing (a trailing ``\\r`` is dropped; an empty line is the empty
topic).  For each topic one JSON object is written, in input order::

    {"topic": "a.b", "subscribers": ["alice", 7]}
    {"topic": "a.b", "matches": [{"pattern": "a.*", "subscriber": "alice"}]}  (--pairs)
    {"topic": "bad/+", "error": "topic 'bad/+' contains the wildcard ..."}

Subscribers are written as JSON strings or numbers, bytes as {"bytes": base64}.

Exit codes: 0 every topic matched; 1 some topics were invalid (each has an
"error" line; the others are answered); 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from cstrie.commands._common import add_common, read_subscriptions
from cstrie.commands._progress import Bar, enabled

BATCH = 8192


def _json(s: Any) -> Any:
    from cstrie.export.codec import json_value

    return json_value(s) if type(s) in (str, int, bytes) else repr(s)


def _topics(stream: IO[str]) -> Iterator[str]:
    for line in stream:
        yield line[:-1].removesuffix("\r") if line.endswith("\n") else line.removesuffix("\r")


def _batches(it: Iterator[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in it:
        batch.append(t)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def run(args: argparse.Namespace) -> int:
    if args.topics in (None, "-") and args.subscriptions == "-":
        print("cstrie match: error: subscriptions and topics cannot both be stdin", file=sys.stderr)
        return 2
    trie, _ = read_subscriptions(args.subscriptions, args.dialect, args.input_format)
    if args.topics in (None, "-"):
        source = io.TextIOWrapper(
            sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="\n"
        )
        total = 0
    else:
        source = open(args.topics, encoding="utf-8", errors="surrogateescape", newline="\n")
        total = os.path.getsize(args.topics)
    out = (
        open(args.output, "w", encoding="utf-8")
        if args.output and args.output != "-"
        else sys.stdout
    )
    bar = Bar("match", enabled(args.progress), unit="bytes" if total else "topics")
    dumps = json.dumps
    bad = done = 0
    try:
        for batch in _batches(_topics(source), BATCH):
            lines = []
            if args.pairs:
                for t in batch:
                    try:
                        m = trie.match(t)
                    except ValueError as exc:
                        bad += 1
                        lines.append(dumps({"topic": t, "error": str(exc)}))
                        continue
                    lines.append(
                        dumps(
                            {
                                "topic": t,
                                "matches": [{"pattern": p, "subscriber": _json(s)} for p, s in m],
                            }
                        )
                    )
            else:
                try:
                    results: list[Any] = trie.lookup_many(batch)
                except ValueError:
                    results = []
                    for t in batch:
                        try:
                            results.append(trie.lookup(t))
                        except ValueError as exc:
                            results.append(exc)
                for t, r in zip(batch, results, strict=True):
                    if isinstance(r, ValueError):
                        bad += 1
                        lines.append(dumps({"topic": t, "error": str(r)}))
                    else:
                        lines.append(dumps({"topic": t, "subscribers": [_json(s) for s in r]}))
            out.write("\n".join(lines) + "\n")
            done += len(batch)
            if total:
                bar(min(source.buffer.tell(), total), total)
            else:
                bar(done)
    finally:
        bar.total, bar.done, bar.unit = 0, done, "topics"
        bar.close()
        if out is sys.stdout:
            out.flush()
        else:
            out.close()
        if total or args.topics not in (None, "-"):
            source.close()
        else:
            source.detach()  # leave sys.stdin open
    if bad:
        print(f"cstrie match: {bad:,} of {done:,} topics were invalid", file=sys.stderr)
        return 1
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "match",
        help="match topics (file or stdin) against subscriptions, JSON Lines out",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("subscriptions", help="subscription file (- = stdin)")
    p.add_argument("topics", nargs="?", help="file of topics, one per line (default/- = stdin)")
    p.add_argument("-o", "--output", help="write the JSON Lines here (default stdout)")
    p.add_argument("--pairs", action="store_true", help="report (pattern, subscriber) pairs")
    add_common(p)
    p.set_defaults(func=run)
