"""Tree views of the subscriptions: nested data, an indented text tree and Graphviz.

:func:`tree` turns one consistent snapshot into nested dicts, one node per
pattern prefix (word by word)::

    {
        "count": 5,           # subscriptions in this subtree (this node and below)
        "here": 1,            # subscriptions whose pattern ends exactly here
        "subscribers": [...], # their subscribers (only with subscribers=True)
        "children": {word: node, ...},
        "cut": 0,             # subscriptions below max_depth, not shown as children
    }

plus, on the root only, ``"dialect"`` (its name) and ``"wildcards"`` (the
one-level and many-level tokens, for the renderers).

The root is the pattern of zero words (AMQP's empty pattern ends there).  Then
render it: :func:`render_text` (an indented tree with counts, children sorted
by count, a depth limit and a cap on children per node) or :func:`render_dot`
(Graphviz DOT of the top levels: node size, colour and edge width grow with the
subscription count; wildcard words stand out) and :func:`render_image` (PNG or
SVG through the ``dot`` program of Graphviz, when installed).

>>> import cstrie
>>> t = cstrie.Trie("mqtt")
>>> for f, s in [("a/b", 1), ("a/+", 2), ("a/b", 3), ("c", 4)]:
...     _ = t.subscribe(f, s)
>>> print(render_text(tree(t)))
(root)  4
├── a  3
│   ├── b  2  (2 here)
│   └── +  1  (1 here)
└── c  1  (1 here)
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["dot_available", "render_dot", "render_image", "render_text", "tree"]

Node = dict[str, Any]


def _node(subscribers: bool) -> Node:
    """A new, empty node."""
    node: Node = {"count": 0, "here": 0, "children": {}, "cut": 0}
    if subscribers:
        node["subscribers"] = []
    return node


def tree(reader: Any, max_depth: int | None = None, *, subscribers: bool = True) -> Node:
    """The subscriptions of ``reader`` (a Trie or Snapshot) as nested dicts.

    Taken from one O(1) snapshot, so it is consistent while other threads
    write.  ``max_depth`` keeps only the first levels (the counts still include
    everything below; ``"cut"`` tells how much of a node's count is hidden).
    ``subscribers=False`` keeps counts only (cheaper for large tries).  O(n).
    """
    if max_depth is not None and max_depth < 0:
        raise ValueError("max_depth must be >= 0")
    snap = reader.snapshot()
    sep = snap.dialect.separator
    root = _node(subscribers)
    root["dialect"] = snap.dialect.name
    root["wildcards"] = [snap.dialect.single, snap.dialect.multi]
    for pattern, subs in snap._groups():
        n = len(subs)
        words = pattern.split(sep) if pattern else []
        node = root
        node["count"] += n
        depth = 0
        for word in words:
            if max_depth is not None and depth >= max_depth:
                node["cut"] += n
                break
            children = node["children"]
            child = children.get(word)
            if child is None:
                child = children[word] = _node(subscribers)
            child["count"] += n
            node = child
            depth += 1
        else:
            node["here"] += n
            if subscribers:
                node["subscribers"].extend(subs)
    return root


# ------------------------------------------------------------------- text
def _label(word: str) -> str:
    if word == "" or word != word.strip() or not word.isprintable():
        return repr(word)
    return word


def _ranked(node: Node) -> list[tuple[str, Node]]:
    return sorted(node["children"].items(), key=lambda kv: (-kv[1]["count"], kv[0]))


def render_text(
    root: Node,
    max_depth: int | None = None,
    *,
    max_children: int | None = None,
    show_subscribers: int = 0,
) -> str:
    """An indented text tree with the subscription count of every node.

    Children are sorted by count (largest first).  ``max_depth`` stops after
    that many levels (a node with hidden levels says ``+N below``);
    ``max_children`` shows only the largest children of each node and sums up
    the rest in a ``… N more`` line; ``show_subscribers`` lists up to that
    many subscribers of the patterns ending at each node.
    """
    lines = [f"(root)  {root['count']:,}{_suffix(root, 0, max_depth)}"]
    lines.extend(_subscriber_lines(root, "", show_subscribers))
    lines.extend(_text_children(root, "", 1, max_depth, max_children, show_subscribers))
    return "\n".join(lines)


def _suffix(node: Node, depth: int, max_depth: int | None) -> str:
    parts = []
    if node["here"]:
        parts.append(f"{node['here']:,} here")
    hidden = node["cut"]
    if max_depth is not None and depth >= max_depth:
        hidden = node["count"] - node["here"]
    if hidden:
        parts.append(f"+{hidden:,} below")
    return f"  ({', '.join(parts)})" if parts else ""


def _subscriber_lines(node: Node, prefix: str, limit: int) -> Iterator[str]:
    subs = node.get("subscribers") or []
    if not limit or not subs:
        return
    shown = ", ".join(repr(s) for s in subs[:limit])
    more = f", … {len(subs) - limit:,} more" if len(subs) > limit else ""
    yield f"{prefix}    = {shown}{more}"


def _text_children(
    node: Node,
    prefix: str,
    depth: int,
    max_depth: int | None,
    max_children: int | None,
    show: int,
) -> Iterator[str]:
    if max_depth is not None and depth > max_depth:
        return
    ranked = _ranked(node)
    rest: list[tuple[str, Node]] = []
    if max_children is not None and len(ranked) > max_children:
        ranked, rest = ranked[:max_children], ranked[max_children:]
    for k, (word, child) in enumerate(ranked):
        last = k == len(ranked) - 1 and not rest
        branch, cont = ("└── ", "    ") if last else ("├── ", "│   ")
        info = _suffix(child, depth, max_depth)
        yield f"{prefix}{branch}{_label(word)}  {child['count']:,}{info}"
        yield from _subscriber_lines(child, prefix + cont, show)
        yield from _text_children(child, prefix + cont, depth + 1, max_depth, max_children, show)
    if rest:
        total = sum(c["count"] for _, c in rest)
        yield f"{prefix}└── … {len(rest):,} more  ({total:,})"


# -------------------------------------------------------------------- DOT
_WILDCARD_COLOURS = ("#f4a261", "#e76f51")  # one-level, many-level


def _dot_id(k: int) -> str:
    return f"n{k}"


def _dot_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _blue(frac: float) -> str:
    """Light (few subscriptions) to dark blue (many)."""
    lo, hi = (0xDE, 0xEB, 0xF7), (0x21, 0x66, 0xAC)
    rgb = (round(a + (b - a) * frac) for a, b in zip(lo, hi, strict=True))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def render_dot(
    root: Node,
    max_depth: int | None = 3,
    *,
    max_children: int = 12,
    title: str | None = None,
    wildcards: tuple[str | None, str | None] | None = None,
) -> str:
    """Graphviz DOT of the top ``max_depth`` levels.

    Each node shows its word and subscription count; its size and colour grow
    with the count (area roughly proportional), edges get thicker with it.  At
    most ``max_children`` children per node are drawn, the rest summed up in
    a dashed ``… N more`` node.  Wildcard words (the root's ``"wildcards"``,
    or ``wildcards`` = (one-level, many-level)) are drawn in orange/red.
    Sizes are relative to the largest node below the root.
    """
    if wildcards is None:
        single, multi = root.get("wildcards") or (None, None)
        wildcards = (single, multi)
    top = max((c["count"] for c in root["children"].values()), default=0)
    top = max(top, root["here"], 1)
    heading = title if title is not None else f"cstrie subscriptions: {root['count']:,}"
    out = [
        "digraph cstrie {",
        "  graph [rankdir=LR, nodesep=0.15, ranksep=0.6, fontname=Helvetica, "
        f"labelloc=t, label={_dot_str(heading)}];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica, color="#4a4a4a"];',
        '  edge [color="#7a7a7a", arrowhead=none];',
    ]
    counter = [0]

    def emit(word: str | None, node: Node, depth: int) -> str:
        ident = _dot_id(counter[0])
        counter[0] += 1
        frac = math.sqrt(min(node["count"] / top, 1.0))
        label = f"{'(root)' if word is None else _label(word)}\n{node['count']:,}"
        if node["here"]:
            label += f" ({node['here']:,} here)"
        fill = _blue(frac)
        if word is not None and word == wildcards[0]:
            fill = _WILDCARD_COLOURS[0]
        elif word is not None and word == wildcards[1]:
            fill = _WILDCARD_COLOURS[1]
        font = "white" if frac > 0.55 and fill.startswith("#2") else "black"
        out.append(
            f"  {ident} [label={_dot_str(label)}, fillcolor={_dot_str(fill)}, "
            f"fontcolor={font}, fontsize={10 + 18 * frac:.1f}, "
            f"width={0.6 + 2.4 * frac:.2f}, height={0.35 + 1.2 * frac:.2f}];"
        )
        if max_depth is not None and depth >= max_depth:
            return ident
        ranked = _ranked(node)
        rest = ranked[max_children:] if max_children >= 0 else []
        for w, child in ranked[: max(max_children, 0)]:
            cid = emit(w, child, depth + 1)
            width = 1 + 7 * min(child["count"] / top, 1.0)
            out.append(f"  {ident} -> {cid} [penwidth={width:.2f}];")
        if rest:
            total = sum(c["count"] for _, c in rest)
            rid = _dot_id(counter[0])
            counter[0] += 1
            out.append(
                f"  {rid} [label={_dot_str(f'… {len(rest):,} more' + chr(10) + f'{total:,}')}, "
                'style="rounded,dashed", fillcolor=white, fontsize=10];'
            )
            out.append(
                f"  {ident} -> {rid} [penwidth={1 + 7 * min(total / top, 1.0):.2f}, style=dashed];"
            )
        return ident

    emit(None, root, 0)
    out.append("}")
    return "\n".join(out) + "\n"


def dot_available() -> bool:
    """True when the Graphviz ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def render_image(
    root: Node | str,
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    max_depth: int | None = 3,
    max_children: int = 12,
    timeout: float = 120.0,
) -> Path:
    """Draw the tree (or DOT text) to a PNG or SVG file with Graphviz ``dot``.

    ``format`` defaults from the suffix (``.png``/``.svg``).  Raises
    ``RuntimeError`` when ``dot`` is not installed or fails.
    """
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in ("png", "svg"):
        raise ValueError(f"image format must be png or svg, not {fmt!r}")
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(
            "Graphviz is not installed (no 'dot' on PATH): install it (apt-get install "
            "graphviz) or write the DOT text instead"
        )
    text = root if isinstance(root, str) else render_dot(root, max_depth, max_children=max_children)
    proc = subprocess.run(
        [exe, f"-T{fmt}", "-o", str(path)],
        input=text.encode(),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed: {proc.stderr.decode(errors='replace').strip()}")
    return path
