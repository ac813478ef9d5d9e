"""``cstrie stats``: counts for a dashboard, from a subscription file.

Prints the trie's statistics (subscriptions, patterns, subscribers, nodes by
kind, depth, engine memory) plus the patterns with the most subscribers, the
subscribers with the most patterns, the share of wildcard patterns and the
distribution of pattern lengths.

Exit codes: 0 done; 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import Counter
from typing import Any

from cstrie.commands import add_common, read_subscriptions
from cstrie.groups import Shared


def collect(trie: Any, top: int) -> dict[str, Any]:
    """The statistics of ``trie`` as a JSON-ready dict."""
    d = trie.dialect
    stats = dict(trie.stats())
    per_sub: Counter[Any] = Counter()
    lengths: Counter[int] = Counter()
    wild = 0
    biggest: list[tuple[int, str]] = []
    sep, tokens = d.separator, {d.single, d.multi} - {None}
    for key, subs in trie.snapshot()._groups():
        # a share-group membership counts for its filter (as in trie.stats())
        pattern = key.pattern if isinstance(key, Shared) else key
        per_sub.update(subs)
        words = pattern.split(sep) if pattern else []
        lengths[len(words)] += len(subs)
        if tokens.intersection(words):
            wild += len(subs)
        item = (len(subs), pattern)
        if len(biggest) < top:
            heapq.heappush(biggest, item)
        elif item > biggest[0]:
            heapq.heapreplace(biggest, item)
    total = stats["subscriptions"]
    stats["dialect"] = d.name
    stats["wildcard_subscriptions"] = wild
    stats["wildcard_share"] = round(wild / total, 4) if total else 0.0
    stats["words_per_pattern"] = {str(k): v for k, v in sorted(lengths.items())}
    stats["top_patterns"] = [
        {"pattern": p, "subscribers": n} for n, p in sorted(biggest, reverse=True)
    ]
    stats["top_subscribers"] = [
        {"subscriber": s if type(s) in (str, int) else repr(s), "patterns": n}
        for s, n in per_sub.most_common(top)
    ]
    return stats


def run(args: argparse.Namespace) -> int:
    trie, info = read_subscriptions(args.source, args.dialect, args.input_format)
    stats = collect(trie, args.top)
    stats["format"] = info["format"]
    if args.json:
        print(json.dumps(stats, ensure_ascii=False))
        return 0
    out = sys.stdout
    for key, value in stats.items():
        if isinstance(value, (list, dict)):
            continue
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        print(f"{key:23} {text}", file=out)
    print(
        "words per pattern       "
        + ", ".join(f"{k}: {v:,}" for k, v in stats["words_per_pattern"].items()),
        file=out,
    )
    if stats["top_patterns"]:
        print(f"\ntop {len(stats['top_patterns'])} patterns by subscribers:", file=out)
        for row in stats["top_patterns"]:
            print(f"  {row['subscribers']:>10,}  {row['pattern']}", file=out)
    if stats["top_subscribers"]:
        print(f"\ntop {len(stats['top_subscribers'])} subscribers by patterns:", file=out)
        for row in stats["top_subscribers"]:
            print(f"  {row['patterns']:>10,}  {row['subscriber']}", file=out)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "stats",
        help="statistics of a subscription file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", help="subscription file (- = stdin)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.add_argument("--top", type=int, default=10, help="rows in the top lists (default 10)")
    add_common(p, progress=False)
    p.set_defaults(func=run)
