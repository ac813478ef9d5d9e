"""``cstrie relate``: how two subscription patterns relate, for ACL checks.

    cstrie relate --dialect mqtt subset sensors/+/temp 'sensors/#'
    cstrie relate --dialect amqp intersects 'a.*.#' '#.b'

``subset A B``: every topic that A matches, B matches too (may a client allowed
B subscribe to A?).  ``intersects A B``: some valid topic matches both.  Both
are exact for the dialect's rules (``$`` topics, empty words, ...); see
"Filter relations" in docs/api.md.  Put ``--`` before patterns that start
with ``-``.

Exit codes: 0 the relation holds; 1 it does not; 2 bad usage or an invalid
pattern (the message names the argument).
"""

from __future__ import annotations

import argparse
from typing import Any

from cstrie.dialect import resolve_dialect
from cstrie.relations import intersects, is_subset

PHRASES = {
    "subset": ("is a subset of", "is not a subset of"),
    "intersects": ("intersects", "does not intersect"),
}


def run(args: argparse.Namespace) -> int:
    dialect = resolve_dialect(args.dialect)
    test = is_subset if args.relation == "subset" else intersects
    holds = test(dialect, args.a, args.b)
    if not args.quiet:
        yes, no = PHRASES[args.relation]
        print(
            f"{'yes' if holds else 'no'}: {args.a!r} {yes if holds else no} {args.b!r} "
            f"({dialect.name})"
        )
    return 0 if holds else 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "relate",
        help="is one pattern a subset of another, do two patterns intersect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("relation", choices=sorted(PHRASES), help="the relation to test")
    p.add_argument("a", help="first pattern")
    p.add_argument("b", help="second pattern")
    p.add_argument("--dialect", default="amqp", help="amqp (default), mqtt or nats")
    p.add_argument("-q", "--quiet", action="store_true", help="no output, only the exit code")
    p.set_defaults(func=run)
