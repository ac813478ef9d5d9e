"""``cstrie tree``: the subscription tree as text, JSON, Graphviz DOT, PNG or SVG.

Every node is one pattern word with the number of subscriptions below it;
children are sorted by that count, the largest first.  A topic index export
is drawn the same way: one node per topic word, counting topics.  ``--depth``
limits the levels (default 3), ``--max-children`` the children drawn per node
(the rest are summed up as "… N more").  PNG and SVG need Graphviz (the ``dot`` program);
the format comes from ``--format`` or the suffix of ``-o``.

Exit codes: 0 done; 1 Graphviz is missing or failed; 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cstrie.commands._common import TOPICS, add_common, read_source

FORMATS = ("text", "json", "dot", "png", "svg")


def _field(key: str, v: Any) -> Any:
    """A node's field (not ``children``) as JSON data: subscribers, values and
    group members as stored values (``json_value``) or their repr."""
    from cstrie.export.codec import json_value

    def value(s: Any) -> Any:
        return json_value(s) if type(s) in (str, int, bytes) else repr(s)

    if key in ("subscribers", "values"):  # a topic index tree lists values
        return [value(s) for s in v]
    if key == "members":  # share-group members, by group
        return {g: [value(s) for s in subs] for g, subs in v.items()}
    return v


def tree_json(root: Any) -> str:
    """The tree as JSON text (what ``json.dumps`` of the nested dicts would
    give), written with an explicit stack: a tree may be 65,535 levels deep,
    far deeper than recursion (``json.dumps`` itself) goes."""
    dumps = json.dumps
    out = ["{"]
    # frames: (is a node's fields, iterator over its items, first item still due)
    stack: list[list[Any]] = [[True, iter(root.items()), True]]
    while stack:
        frame = stack[-1]
        item = next(frame[1], None)
        if item is None:
            stack.pop()
            out.append("}")
            continue
        key, v = item
        out.append(("" if frame[2] else ", ") + dumps(key, ensure_ascii=False) + ": ")
        frame[2] = False
        if not frame[0]:  # a child node: its fields
            out.append("{")
            stack.append([True, iter(v.items()), True])
        elif key == "children":
            out.append("{")
            stack.append([False, iter(v.items()), True])
        else:
            out.append(dumps(_field(key, v), ensure_ascii=False))
    return "".join(out)


def run(args: argparse.Namespace) -> int:
    from cstrie.tree import dot_available, render_dot, render_image, render_text, tree

    fmt = args.format
    if fmt is None:
        suffix = (args.output or "").rsplit(".", 1)[-1].lower() if args.output else ""
        fmt = suffix if suffix in FORMATS else ("json" if suffix == "json" else "text")
    if fmt in ("png", "svg"):
        if not args.output or args.output == "-":
            print(f"cstrie tree: error: --format {fmt} needs -o FILE", file=sys.stderr)
            return 2
        if not dot_available():
            print(
                "cstrie tree: Graphviz is not installed (no 'dot' program); "
                "use --format dot or install graphviz",
                file=sys.stderr,
            )
            return 1
    depth = None if args.depth < 0 else args.depth
    trie, info = read_source(args.source, args.dialect, args.input_format)
    want_subs = (fmt == "json" and args.subscribers > 0) or (fmt == "text" and args.subscribers > 0)
    if info["content"] == TOPICS:
        root = tree(trie, depth, values=want_subs)
    else:
        root = tree(trie, depth, subscribers=want_subs)
    if fmt in ("png", "svg"):
        try:
            render_image(
                root, args.output, format=fmt, max_depth=depth, max_children=args.max_children
            )
        except RuntimeError as exc:
            print(f"cstrie tree: {exc}", file=sys.stderr)
            return 1
        print(f"cstrie tree: wrote {args.output}", file=sys.stderr)
        return 0
    if fmt == "text":
        text = (
            render_text(
                root, depth, max_children=args.max_children, show_subscribers=args.subscribers
            )
            + "\n"
        )
    elif fmt == "dot":
        text = render_dot(root, depth, max_children=args.max_children)
    else:
        text = tree_json(root) + "\n"
    if args.output and args.output != "-":
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tree",
        help="show the subscription tree (text, json, dot, png, svg)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", help="subscription file (- = stdin)")
    p.add_argument("-o", "--output", help="write here instead of stdout (needed for png/svg)")
    p.add_argument("--format", choices=FORMATS, help="output format (default: from -o, else text)")
    p.add_argument("--depth", type=int, default=3, help="levels to show (default 3; -1 = all)")
    p.add_argument("--max-children", type=int, default=20, help="children per node (default 20)")
    p.add_argument(
        "--subscribers",
        type=int,
        default=0,
        metavar="N",
        help="text/json: list up to N subscribers (a topic index: values) per node (default 0)",
    )
    add_common(p, progress=False)
    p.set_defaults(func=run)
