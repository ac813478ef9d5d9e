"""``cstrie content``: content subscription files (criteria on message fields).

A content subscription file is what :meth:`cstrie.content.ContentIndex.export`
writes (JSON Lines: a header with the dialect and limits, one binding per
line, a footer; see :mod:`cstrie.content.export`).  ``-`` reads standard
input.  Subscribers written with ``encode=`` are shown as their stored values.

``cstrie content match FILE --fields JSON [--topic T]``
    The subscribers of the bindings a message satisfies, one per line (each
    once; ``--bindings``: every matching binding, as JSON Lines of its
    criteria, subscriber and topic filter).  ``--fields`` is a JSON object
    of the message's fields; ``--topic`` its topic in the file's dialect.

``cstrie content stats FILE``
    Bindings, subscribers, bindings with a topic filter, bindings every
    message is tested against (``always``), index patterns, engine nodes
    and bytes, the limits, and the fields the most bindings test.

Examples::

    cstrie content match subs.jsonl --fields '{"ccy": "USD", "urgent": true}'
    cstrie content match subs.jsonl --fields '{"price": 50}' --topic stock.ibm --json
    cstrie content stats subs.jsonl --json

Exit codes: 0 done; 2 bad usage or an unreadable, corrupt or invalid file
(:class:`~cstrie.export.FormatError` naming the line) or message.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from cstrie.commands._common import read_content
from cstrie.commands.stats_cmd import _shown

__all__ = ["add_parser"]


def _fields(text: str) -> dict[str, Any]:
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--fields is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise ValueError(f"--fields must be a JSON object, not {type(fields).__name__}")
    return fields


def _binding_json(b: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"criteria": b.criteria.to_json(), "subscriber": _shown(b.subscriber)}
    if b.topic is not None:
        row["topic"] = b.topic
    return row


def run_match(args: argparse.Namespace) -> int:
    fields = _fields(args.fields)
    idx = read_content(args.source)
    out = sys.stdout
    if args.bindings:
        for b in idx.match_bindings(fields, args.topic):
            print(json.dumps(_binding_json(b), ensure_ascii=False), file=out)
        return 0
    subs = [_shown(s) for s in idx.match(fields, args.topic)]
    if args.json:
        print(json.dumps(subs, ensure_ascii=False), file=out)
    else:
        for s in subs:
            print(s, file=out)
    return 0


def _leaf_fields(c: Any) -> set[str]:
    """The field names a criterion tests (iterative: criteria nest at most
    64 deep, but no recursion is needed)."""
    from cstrie.content import AllOf, AnyOf, Not

    out: set[str] = set()
    stack = [c]
    while stack:
        x = stack.pop()
        if isinstance(x, (AllOf, AnyOf)):
            stack.extend(x.criteria)
        elif isinstance(x, Not):
            stack.append(x.criterion)
        else:
            out.add(x.field)
    return out


def collect(idx: Any, top: int) -> dict[str, Any]:
    """The statistics of a content index as a JSON-ready dict."""
    snap = idx.snapshot()
    per_field: Counter[str] = Counter()
    for b in snap.bindings():
        per_field.update(_leaf_fields(b.criteria))
    return {
        "content": "content subscriptions",
        "dialect": idx.dialect.name,
        **snap.stats(),
        "fields": len(per_field),
        "limits": idx.limits(),
        "top_fields": [{"field": f, "bindings": n} for f, n in per_field.most_common(top)],
    }


def run_stats(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise ValueError(f"--top must be >= 0, not {args.top}")
    stats = collect(read_content(args.source), args.top)
    if args.json:
        print(json.dumps(stats, ensure_ascii=False))
        return 0
    out = sys.stdout
    for key, value in stats.items():
        if isinstance(value, (list, dict)):
            continue
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        print(f"{key:23} {text}", file=out)
    print("limits                  " + ", ".join(f"{k}={v:,}" for k, v in stats["limits"].items()))
    if stats["top_fields"]:
        print(f"\ntop {len(stats['top_fields'])} fields by bindings:", file=out)
        for row in stats["top_fields"]:
            print(f"  {row['bindings']:>10,}  {row['field']}", file=out)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "content",
        help="content subscription files: match a message, statistics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = p.add_subparsers(dest="content_command", metavar="{match,stats}", required=True)
    m = csub.add_parser("match", help="the subscribers a message's fields (and topic) reach")
    m.add_argument("source", help="content subscription file (- = stdin)")
    m.add_argument("--fields", required=True, help="the message's fields as a JSON object")
    m.add_argument("--topic", default=None, help="the message's topic (default: none)")
    how = m.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="one JSON array instead of lines")
    how.add_argument(
        "--bindings", action="store_true", help="every matching binding, as JSON Lines"
    )
    m.set_defaults(func=run_match)
    s = csub.add_parser("stats", help="statistics of a content subscription file")
    s.add_argument("source", help="content subscription file (- = stdin)")
    s.add_argument("--json", action="store_true", help="one JSON object instead of text")
    s.add_argument("--top", type=int, default=10, help="rows in the top list (default 10)")
    s.set_defaults(func=run_stats)
