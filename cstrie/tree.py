"""Tree views of the subscriptions: nested data, an indented text tree and Graphviz.

:func:`tree` turns one consistent snapshot into nested dicts, one node per
pattern prefix (word by word)::

    {
        "count": 5,           # subscriptions in this subtree (this node and below),
                              # share-group memberships included
        "here": 1,            # ordinary subscriptions whose pattern ends exactly here
        "subscribers": [...], # their subscribers (only with subscribers=True)
        "groups": {name: n},  # share groups with n members on this node's filter
        "members": {name: [...]},  # their members (only with subscribers=True)
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

A :class:`~cstrie.TopicIndex` (or its snapshot) gives the same shape, one
node per topic prefix, ``here`` 1 where a topic ends and its value in
``"values"`` when asked (``tree(index, values=True)``); the root says
``"content": "topics"`` and has no wildcards (see :func:`tree`).

Share-group memberships (:mod:`cstrie.groups`) show under their filter: a
``[group name]`` line in the text, a green hexagon in DOT:

>>> _ = t.subscribe("$share/workers/a/+", "w1"), t.subscribe("$share/workers/a/+", "w2")
>>> print(render_text(tree(t), show_subscribers=3))
(root)  6
├── a  5
│   ├── +  3  (1 here, 2 grouped)
│   │       = 2
│   │       [group workers]  2 members: 'w1', 'w2'
│   └── b  2  (2 here)
│           = 1, 3
└── c  1  (1 here)
        = 4
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cstrie.groups import Shared

__all__ = ["dot_available", "grouped", "render_dot", "render_image", "render_text", "tree"]

Node = dict[str, Any]


def _node(subscribers: bool) -> Node:
    """A new, empty node."""
    node: Node = {"count": 0, "here": 0, "groups": {}, "children": {}, "cut": 0}
    if subscribers:
        node["subscribers"] = []
        node["members"] = {}
    return node


def grouped(node: Node) -> int:
    """The share-group memberships whose filter ends at ``node``."""
    return sum(node["groups"].values())


def tree(
    reader: Any,
    max_depth: int | None = None,
    *,
    subscribers: bool | None = None,
    values: bool | None = None,
) -> Node:
    """The subscriptions of ``reader`` (a Trie or Snapshot), or the topics of
    a :class:`~cstrie.TopicIndex` or :class:`~cstrie.TopicSnapshot`, as
    nested dicts.

    Taken from one O(1) snapshot, so it is consistent while other threads
    write.  ``max_depth`` keeps only the first levels (the counts still include
    everything below; ``"cut"`` tells how much of a node's count is hidden).
    ``subscribers=False`` keeps counts only (cheaper for large tries; the
    default lists them).  A topic index's tree counts topics (``here`` is 1
    where a topic ends) and lists their ``"values"`` only with
    ``values=True``; its root has ``"content": "topics"`` and no wildcards
    (a topic's words are literal).  ``subscribers=`` is for tries and
    ``values=`` for topic indexes: the other raises ``TypeError``.
    O(n * levels), iterative (topics and filters of 65,535 levels are fine).

    >>> from cstrie import TopicIndex
    >>> idx = TopicIndex("mqtt")
    >>> for t in ("a/b", "a/c", "a"): idx[t] = t.upper()
    >>> root = tree(idx, values=True)
    >>> root["count"], root["children"]["a"]["here"], root["children"]["a"]["values"]
    (3, 1, ['A'])
    """
    if max_depth is not None and max_depth < 0:
        raise ValueError("max_depth must be >= 0")
    if _is_topic_reader(reader):
        if subscribers is not None:
            raise TypeError("a topic index's tree lists values (values=), not subscribers")
        return _topic_tree(reader.snapshot(), max_depth, bool(values))
    if values is not None:
        raise TypeError("a subscription tree lists subscribers (subscribers=), not values")
    listed = subscribers is None or subscribers
    snap = reader.snapshot()
    sep = snap.dialect.separator
    root = _node(listed)
    root["dialect"] = snap.dialect.name
    root["wildcards"] = [snap.dialect.single, snap.dialect.multi]
    for key, subs in snap._entries():
        if isinstance(key, Shared):
            pattern, group = key.pattern, key.group
        else:
            pattern, group = key, None
        words = pattern.split(sep) if pattern else []
        node = _descend(root, words, len(subs), max_depth, lambda: _node(listed))
        if node is None:
            continue
        if group is not None:
            groups = node["groups"]
            groups[group] = groups.get(group, 0) + len(subs)
            if listed:
                node["members"].setdefault(group, []).extend(subs)
            continue
        node["here"] += len(subs)
        if listed:
            node["subscribers"].extend(subs)
    return root


def _is_topic_reader(reader: object) -> bool:
    """Is ``reader`` a :class:`~cstrie.TopicIndex` or a snapshot of one?

    ``cstrie.topics`` imports this module (``TopicIndex.tree``), so its class is
    looked up, not imported: while ``cstrie.topics`` is not loaded, no object
    can be one of its classes."""
    topics = sys.modules.get("cstrie.topics")
    return topics is not None and isinstance(reader, topics._Reader)


def _descend(
    root: Node, words: list[str], n: int, max_depth: int | None, make: Callable[[], Node]
) -> Node | None:
    """Count ``n`` records under ``root`` along ``words`` (making the nodes),
    and return the node where they end; None when they end below
    ``max_depth`` (then the deepest shown node's ``cut`` counts them)."""
    node = root
    node["count"] += n
    for depth, word in enumerate(words):
        if max_depth is not None and depth >= max_depth:
            node["cut"] += n
            return None
        children = node["children"]
        child = children.get(word)
        if child is None:
            child = children[word] = make()
        child["count"] += n
        node = child
    return node


def _topic_tree(snap: Any, max_depth: int | None, listed: bool) -> Node:
    """:func:`tree` of a topic snapshot: one record per topic, its value in
    ``"values"`` when ``listed``."""
    from cstrie import _binding as nb

    d = snap.dialect
    sep = d.separator
    by_id = snap._values.by_id  # the snapshot's pin keeps its values there

    def make() -> Node:
        node: Node = {"count": 0, "here": 0, "groups": {}, "children": {}, "cut": 0}
        if listed:
            node["values"] = []
        return node

    root = make()
    root["dialect"] = d.name
    root["wildcards"] = [None, None]  # a topic's words are all literal
    root["content"] = "topics"
    for raw, ids in nb.iterate(snap._handle):
        topic = raw.decode()
        node = _descend(root, topic.split(sep) if topic else [], len(ids), max_depth, make)
        if node is None:
            continue
        node["here"] += len(ids)
        if listed:
            node["values"].extend(map(by_id.__getitem__, ids))
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
    many subscribers of the patterns ending at each node.  Share groups with
    members on a node's filter get a ``[group name]  N members`` line each
    under it (largest first, at most ``max_children``), listing up to
    ``show_subscribers`` members.
    """
    lines = [f"(root)  {root['count']:,}{_suffix(root, 0, max_depth)}"]
    lines.extend(_subscriber_lines(root, "", show_subscribers))
    lines.extend(_group_lines(root, "", show_subscribers, max_children))
    lines.extend(_text_children(root, "", 1, max_depth, max_children, show_subscribers))
    return "\n".join(lines)


def _suffix(node: Node, depth: int, max_depth: int | None) -> str:
    parts = []
    if node["here"]:
        parts.append(f"{node['here']:,} here")
    members = grouped(node)
    if members:
        parts.append(f"{members:,} grouped")
    hidden = node["cut"]
    if max_depth is not None and depth >= max_depth:
        hidden = node["count"] - node["here"] - members
    if hidden:
        parts.append(f"+{hidden:,} below")
    return f"  ({', '.join(parts)})" if parts else ""


def _subscriber_lines(node: Node, prefix: str, limit: int) -> Iterator[str]:
    """A ``= ...`` line with the subscribers (a topic tree: the value) that
    end at ``node``."""
    subs = node.get("subscribers") or node.get("values") or []
    if not limit or not subs:
        return
    shown = ", ".join(repr(s) for s in subs[:limit])
    more = f", … {len(subs) - limit:,} more" if len(subs) > limit else ""
    yield f"{prefix}    = {shown}{more}"


def _ranked_groups(node: Node) -> list[tuple[str, int]]:
    return sorted(node["groups"].items(), key=lambda kv: (-kv[1], kv[0]))


def _group_lines(node: Node, prefix: str, limit: int, max_groups: int | None) -> Iterator[str]:
    """A ``[group name]  N members`` line per share group on the node's filter."""
    ranked = _ranked_groups(node)
    if not ranked:
        return
    members = node.get("members") or {}
    shown = ranked if max_groups is None else ranked[:max_groups]
    for name, n in shown:
        line = f"{prefix}    [group {_label(name)}]  {n:,} member{'' if n == 1 else 's'}"
        subs = members.get(name) or []
        if limit and subs:
            more = f", … {len(subs) - limit:,} more" if len(subs) > limit else ""
            line += ": " + ", ".join(repr(s) for s in subs[:limit]) + more
        yield line
    rest = ranked[len(shown) :]
    if rest:
        total = sum(n for _, n in rest)
        yield f"{prefix}    … {len(rest):,} more groups  ({total:,} members)"


#: levels drawn with full indentation; deeper lines keep the prefix of this
#: depth and say their depth, so that a line never grows past a fixed width
#: (a 65,535-level MQTT filter would otherwise need gigabytes of spaces)
INDENT_LEVELS = 48


def _text_children(
    node: Node,
    prefix: str,
    depth: int,
    max_depth: int | None,
    max_children: int | None,
    show: int,
) -> Iterator[str]:
    """The lines below ``node``, depth first (an explicit stack: trees may be far
    deeper than Python's recursion limit)."""

    @dataclass
    class Frame:
        children: list[tuple[str, Node]]
        more: str | None  # the "… N more" line after them
        prefix: str
        depth: int
        next: int = 0

    def frame(n: Node, pre: str, d: int) -> Frame | None:
        if max_depth is not None and d > max_depth:
            return None
        ranked = _ranked(n)
        more = None
        if max_children is not None and len(ranked) > max_children:
            rest = ranked[max_children:]
            ranked = ranked[:max_children]
            total = sum(c["count"] for _, c in rest)
            more = f"{pre}└── … {len(rest):,} more  ({total:,})"
        return Frame(ranked, more, pre, d)

    first = frame(node, prefix, depth)
    stack = [first] if first is not None else []
    while stack:
        f = stack[-1]
        if f.next == len(f.children):
            stack.pop()
            if f.more is not None:
                yield f.more
            continue
        word, child = f.children[f.next]
        f.next += 1
        last = f.next == len(f.children) and f.more is None
        branch, cont = ("└── ", "    ") if last else ("├── ", "│   ")
        info = _suffix(child, f.depth, max_depth)
        yield f"{f.prefix}{branch}{_label(word)}  {child['count']:,}{info}"
        inner = f.prefix + cont if f.depth < INDENT_LEVELS else _deep_prefix(f.prefix, f.depth + 1)
        yield from _subscriber_lines(child, inner, show)
        yield from _group_lines(child, inner, show, max_children)
        below = frame(child, inner, f.depth + 1)
        if below is not None:
            stack.append(below)


def _deep_prefix(prefix: str, depth: int) -> str:
    """The prefix of a line below INDENT_LEVELS: the prefix at that depth, then
    the line's own depth."""
    base = prefix.split("┆", 1)[0]
    return f"{base}┆{depth}: "


# -------------------------------------------------------------------- DOT
_WILDCARD_COLOURS = ("#f4a261", "#e76f51")  # one-level, many-level
_GROUP_COLOUR = "#b7e4c7"  # share groups


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
    or ``wildcards`` = (one-level, many-level)) are drawn in orange/red.  Each
    share group with members on a drawn node's filter is a green hexagon
    ``[group name]`` with its member count, on a dotted edge from the node (at
    most ``max_children`` per node, the rest summed in one more hexagon).
    Sizes are relative to the largest node below the root.
    """
    if wildcards is None:
        single, multi = root.get("wildcards") or (None, None)
        wildcards = (single, multi)
    top = max((c["count"] for c in root["children"].values()), default=0)
    top = max(top, root["here"], 1)
    what = "topics" if root.get("content") == "topics" else "subscriptions"
    heading = title if title is not None else f"cstrie {what}: {root['count']:,}"
    out = [
        "digraph cstrie {",
        "  graph [rankdir=LR, nodesep=0.15, ranksep=0.6, fontname=Helvetica, "
        f"labelloc=t, label={_dot_str(heading)}];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica, color="#4a4a4a"];',
        '  edge [color="#7a7a7a", arrowhead=none];',
    ]
    counter = 0

    def node_line(word: str | None, node: Node) -> str:
        nonlocal counter
        ident = _dot_id(counter)
        counter += 1
        frac = math.sqrt(min(node["count"] / top, 1.0))
        label = f"{'(root)' if word is None else _label(word)}\n{node['count']:,}"
        parts = [f"{node['here']:,} here"] if node["here"] else []
        if node["groups"]:
            parts.append(f"{grouped(node):,} grouped")
        if parts:
            label += f" ({', '.join(parts)})"
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
        group_nodes(ident, node)
        return ident

    def group_nodes(ident: str, node: Node) -> None:
        """A green hexagon per share group on the node's filter, on a dotted edge."""
        nonlocal counter
        ranked = _ranked_groups(node)
        shown = ranked[: max(max_children, 0)]
        rest = ranked[len(shown) :]
        items = [(f"[group {_label(name)}]", n) for name, n in shown]
        if rest:
            items.append((f"… {len(rest):,} more groups", sum(n for _, n in rest)))
        for text, n in items:
            gid = _dot_id(counter)
            counter += 1
            label = f"{text}\n{n:,} member{'' if n == 1 else 's'}"
            out.append(
                f"  {gid} [label={_dot_str(label)}, shape=hexagon, "
                f'style="filled", fillcolor={_dot_str(_GROUP_COLOUR)}, fontsize=10];'
            )
            width = 1 + 7 * min(n / top, 1.0)
            out.append(f"  {ident} -> {gid} [penwidth={width:.2f}, style=dotted];")

    @dataclass
    class Frame:
        ident: str
        children: list[tuple[str, Node]]
        rest: list[tuple[str, Node]]
        depth: int
        next: int = 0
        drawn: tuple[str, Node] | None = None  # the child whose edge is still due

    def frame(ident: str, node: Node, depth: int) -> Frame | None:
        if max_depth is not None and depth >= max_depth:
            return None
        ranked = _ranked(node)
        rest = ranked[max_children:] if max_children >= 0 else []
        return Frame(ident, ranked[: max(max_children, 0)], rest, depth)

    # Depth first with an explicit stack (trees may be far deeper than Python's
    # recursion limit), in the order of the recursive walk: a node, then each
    # child's subtree followed by the edge to it, then the "more" node.
    first = frame(node_line(None, root), root, 0)
    stack = [first] if first is not None else []
    while stack:
        f = stack[-1]
        if f.drawn is not None:
            cid, child = f.drawn
            f.drawn = None
            width = 1 + 7 * min(child["count"] / top, 1.0)
            out.append(f"  {f.ident} -> {cid} [penwidth={width:.2f}];")
        if f.next < len(f.children):
            word, child = f.children[f.next]
            f.next += 1
            cid = node_line(word, child)
            f.drawn = (cid, child)
            below = frame(cid, child, f.depth + 1)
            if below is not None:
                stack.append(below)
            continue
        stack.pop()
        if f.rest:
            total = sum(c["count"] for _, c in f.rest)
            rid = _dot_id(counter)
            counter += 1
            out.append(
                f"  {rid} [label={_dot_str(f'… {len(f.rest):,} more' + chr(10) + f'{total:,}')}, "
                'style="rounded,dashed", fillcolor=white, fontsize=10];'
            )
            width = 1 + 7 * min(total / top, 1.0)
            out.append(f"  {f.ident} -> {rid} [penwidth={width:.2f}, style=dashed];")
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
