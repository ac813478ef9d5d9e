"""``cstrie stats``: counts for a dashboard, from a subscription file.

Prints the trie's statistics (subscriptions, patterns, subscribers, nodes by
kind, depth, engine memory) plus the patterns with the most subscribers, the
subscribers with the most patterns, the share of wildcard patterns and the
distribution of pattern lengths.  For a topic index export: topics, distinct
values, nodes, depth, topics per number of words, the first-level words with
the most topics and the values shared by the most topics.

Exit codes: 0 done; 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import Counter
from typing import Any

from cstrie.commands._common import TOPICS, add_common, read_source
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
    for key, subs in trie.snapshot()._entries():
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
        {"subscriber": _shown(s), "patterns": n} for s, n in per_sub.most_common(top)
    ]
    return stats


def _shown(v: Any) -> Any:
    """A value for the JSON and text output (str and int as they are)."""
    return v if type(v) in (str, int) else repr(v)


def collect_topics(index: Any, top: int) -> dict[str, Any]:
    """The statistics of a topic index as a JSON-ready dict: topics, engine
    nodes, depth, distinct values, topics per number of words, the first-level
    words with the most topics and the values shared by the most topics."""
    from cstrie import _binding as nb

    d = index.dialect
    s = index.stats()
    lengths: Counter[int] = Counter()
    firsts: Counter[str] = Counter()
    values: Counter[Any] = Counter()
    sep = d.separator
    for topic, value in index.items():
        words = topic.split(sep) if topic else []
        lengths[len(words)] += 1
        firsts[words[0] if words else ""] += 1
        values[(type(value), value)] += 1
    return {
        "content": "topic index",
        "dialect": d.name,
        "topics": s["pairs"],
        "values": len(values),
        "nodes": s["inodes"] + s["cnodes"] + s["snodes"] + s["tnodes"] + s["lnodes"],
        "max_depth": s["max_depth"],
        "engine_bytes": nb.live_bytes(),
        "words_per_topic": {str(k): v for k, v in sorted(lengths.items())},
        "top_first_words": [{"word": w, "topics": n} for w, n in firsts.most_common(top)],
        "top_values": [{"value": _shown(v), "topics": n} for (_, v), n in values.most_common(top)],
    }


def run(args: argparse.Namespace) -> int:
    trie, info = read_source(args.source, args.dialect, args.input_format)
    topics = info["content"] == TOPICS
    stats = collect_topics(trie, args.top) if topics else collect(trie, args.top)
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
    if topics:
        _print_topics(stats)
        return 0
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


def _print_topics(stats: dict[str, Any]) -> None:
    out = sys.stdout
    print(
        "words per topic         "
        + ", ".join(f"{k}: {v:,}" for k, v in stats["words_per_topic"].items()),
        file=out,
    )
    if stats["top_first_words"]:
        print(f"\ntop {len(stats['top_first_words'])} first words by topics:", file=out)
        for row in stats["top_first_words"]:
            print(f"  {row['topics']:>10,}  {row['word']}", file=out)
    if stats["top_values"]:
        print(f"\ntop {len(stats['top_values'])} values by topics:", file=out)
        for row in stats["top_values"]:
            print(f"  {row['topics']:>10,}  {row['value']}", file=out)


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
