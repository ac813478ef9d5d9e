"""Tree views: nested data checked against a brute-force count, and renderings.

Rules under test (cstrie/tree.py):

* every node's ``count`` is the number of (pattern, subscriber) pairs whose
  pattern starts with that node's words, ``here`` those that end exactly there
  (with their ``subscribers``); ``count = here + cut + sum(children counts)``;
* ``max_depth`` keeps the counts but drops deeper nodes (``cut`` says how many);
* the text tree shows counts, sorts children by count, honours the depth limit
  and the cap on children; DOT is a valid graph (checked by Graphviz when it is
  installed) whose node sizes grow with the count; PNG/SVG come from ``dot``.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import oracle
import pytest

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.tree import dot_available, render_dot, render_image, render_text, tree
from cstrie.trie import Trie

WORDS = ["a", "b", "c", "sport", "x y", "ü"]
needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz 'dot' is not installed")


def random_trie(d: Dialect, seed: int, n: int = 400) -> tuple[Trie, list[tuple[str, int]]]:
    rng = random.Random(seed)
    pairs = [(oracle.random_pattern(rng, d, WORDS, 4), rng.randrange(40)) for _ in range(n)]
    trie = Trie.from_pairs(pairs, d)
    return trie, sorted(set(pairs))


def walk(node: dict[str, Any], prefix: tuple[str, ...] = ()) -> Any:
    yield prefix, node
    for word, child in node["children"].items():
        yield from walk(child, (*prefix, word))


@pytest.mark.parametrize("d", [AMQP, MQTT, NATS], ids=lambda d: d.name)
def test_counts_match_brute_force(d: Dialect) -> None:
    trie, pairs = random_trie(d, 1)
    words = [(tuple(oracle.words_of(d, p)), s) for p, s in pairs]
    root = tree(trie)
    assert root["dialect"] == d.name and root["wildcards"] == [d.single, d.multi]
    nodes = dict(walk(root))
    for prefix, node in nodes.items():
        k = len(prefix)
        below = [s for w, s in words if w[:k] == prefix]
        here = [s for w, s in words if w == prefix]
        assert node["count"] == len(below), prefix
        assert node["here"] == len(here), prefix
        assert sorted(node["subscribers"]) == sorted(here), prefix
        assert node["cut"] == 0
        assert node["count"] == node["here"] + sum(c["count"] for c in node["children"].values())
    # every prefix of every pattern is a node
    assert {w[:k] for w, _ in words for k in range(len(w) + 1)} == set(nodes)


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_max_depth_keeps_counts(depth: int) -> None:
    trie, _ = random_trie(AMQP, 2)
    full = dict(walk(tree(trie)))
    cut = dict(walk(tree(trie, depth, subscribers=False)))
    assert all(len(p) <= depth for p in cut)
    for prefix, node in cut.items():
        assert node["count"] == full[prefix]["count"]
        assert "subscribers" not in node
        kids = sum(c["count"] for c in node["children"].values())
        assert node["count"] == node["here"] + node["cut"] + kids
        if len(prefix) < depth:
            assert node["cut"] == 0
    with pytest.raises(ValueError):
        tree(trie, -1)


def test_tree_of_a_snapshot_is_consistent() -> None:
    trie = Trie("mqtt")
    for i in range(50):
        trie.subscribe(f"a/{i}", i)
    snap = trie.snapshot()
    trie.subscribe("b/c", 99)
    assert tree(snap)["count"] == 50
    assert tree(trie)["count"] == 51


def test_empty_trie_and_root_pattern() -> None:
    assert render_text(tree(Trie())) == "(root)  0"
    t = Trie()
    t.subscribe("", "everything-empty")
    root = tree(t)
    assert root["here"] == 1 and root["subscribers"] == ["everything-empty"]
    assert render_text(root) == "(root)  1  (1 here)"


def test_render_text_exact() -> None:
    t = Trie("mqtt")
    for f, s in [("a/b", 1), ("a/+", 2), ("a/b", 3), ("c", 4), ("a/b/c/d", 5), ("/x", 6)]:
        t.subscribe(f, s)
    root = tree(t)
    assert render_text(root).splitlines() == [
        "(root)  6",
        "├── a  4",
        "│   ├── b  3  (2 here)",
        "│   │   └── c  1",
        "│   │       └── d  1  (1 here)",
        "│   └── +  1  (1 here)",
        "├── ''  1",
        "│   └── x  1  (1 here)",
        "└── c  1  (1 here)",
    ]
    assert render_text(root, 1, max_children=1).splitlines() == [
        "(root)  6",
        "├── a  4  (+4 below)",
        "└── … 2 more  (2)",
    ]
    shown = render_text(root, 2, show_subscribers=1)
    assert "= 1, … 1 more" in shown or "= 3, … 1 more" in shown
    assert "+1 below" in shown


def test_render_dot_structure_and_sizes() -> None:
    trie, _ = random_trie(MQTT, 3, 2000)
    root = tree(trie, 3, subscribers=False)
    dot = render_dot(root, 2, max_children=4)
    assert dot.startswith("digraph cstrie {") and dot.rstrip().endswith("}")
    nodes = [line for line in dot.splitlines() if "[label=" in line]
    # root + at most 4 children (+1 "more") per node, 2 levels
    assert 1 < len(nodes) <= 1 + 5 + 5 * 5
    sizes = {}
    for line in nodes:
        label = line.split('label="', 1)[1].split('"', 1)[0]
        if label.startswith("…"):
            continue
        count = int(label.split("\\n")[1].split()[0].replace(",", ""))
        width = float(line.split("width=")[1].split(",")[0])
        sizes[count] = width
    ordered = [sizes[c] for c in sorted(sizes)]
    assert ordered == sorted(ordered)  # bigger count, bigger node
    assert 'fillcolor="#f4a261"' in dot or 'fillcolor="#e76f51"' in dot  # wildcards stand out
    assert render_dot(root, 0).count("[label=") == 1


def test_dot_escapes_words() -> None:
    t = Trie()
    t.subscribe('we"ird\\word.x', 1)
    dot = render_dot(tree(t))
    assert '\\"' in dot and "\\\\" in dot


@needs_dot
def test_dot_output_is_accepted_by_graphviz() -> None:
    trie, _ = random_trie(AMQP, 4, 500)
    dot = render_dot(tree(trie), 3)
    proc = subprocess.run(
        [shutil.which("dot") or "dot", "-Tsvg"], input=dot.encode(), capture_output=True
    )
    assert proc.returncode == 0, proc.stderr
    assert b"<svg" in proc.stdout


@needs_dot
@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_render_image(fmt: str, tmp_path: Path) -> None:
    trie, _ = random_trie(MQTT, 5, 300)
    out = render_image(tree(trie), tmp_path / f"t.{fmt}", max_depth=2)
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in data


def test_render_image_without_graphviz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert not dot_available()
    with pytest.raises(RuntimeError, match="Graphviz"):
        render_image(tree(Trie()), tmp_path / "t.png")
    with pytest.raises(ValueError, match="png or svg"):
        render_image(tree(Trie()), tmp_path / "t.gif")


def test_big_tree_counts() -> None:
    pairs = [(f"s{i % 10}.d{i % 1000}.m{i % 3}", f"c{i % 77}") for i in range(30_000)]
    root = tree(Trie.from_pairs(pairs), 1, subscribers=False)
    expected = Counter(p.split(".")[0] for p, _ in set(pairs))
    assert {w: c["count"] for w, c in root["children"].items()} == dict(expected)


def test_deepest_filters_render_in_bounded_lines() -> None:
    """Rule (hostile input): the renderers draw trees of any depth (the deepest
    MQTT filters have 65,535 levels), line by line in the order of a
    depth-first walk; below INDENT_LEVELS a line keeps that depth's indentation
    and states its own depth, so no line grows with the depth."""
    from cstrie.tree import INDENT_LEVELS

    trie = Trie("mqtt")
    trie.subscribe("a/" * 32766 + "#", "x")
    trie.subscribe("/" * 65534, "y")
    root = tree(trie)
    lines = render_text(root).splitlines()
    assert len(lines) == 1 + 32767 + 65535  # the root and one line per level
    widest = max(len(line) for line in lines)
    assert widest <= 4 * INDENT_LEVELS + 40, widest
    assert sum(ln.endswith("┆65535: └── ''  1  (1 here)") for ln in lines) == 1
    assert lines[-1].endswith("┆32767: └── #  1  (1 here)")
    dot = render_dot(root, None)
    nodes = [ln for ln in dot.splitlines() if "[label=" in ln]
    edges = [ln for ln in dot.splitlines() if " -> " in ln]
    assert len(nodes) == 1 + 32767 + 65535 and len(edges) == len(nodes) - 1


# ------------------------------------------------ share-group memberships
# Rules (cstrie/tree.py): a membership counts in ``count`` of every node on its
# filter's path like an ordinary subscription, and at the filter's node it is in
# ``groups`` ({name: members there}) and ``members`` ({name: [member, ...]}),
# not in ``here``/``subscribers``; so count = here + grouped + cut + children.
GROUPS = ["g", "grüppe", "日本"]


def grouped_trie(
    d: Dialect, seed: int
) -> tuple[Trie, list[tuple[str, int]], list[tuple[str, str, str]]]:
    trie, pairs = random_trie(d, seed, 200)
    rng = random.Random(seed)
    members = set()
    for _ in range(60):
        f = oracle.random_pattern(rng, d, WORDS, 4)
        members.add((f, rng.choice(GROUPS), rng.choice(["w1", "w2", "w3", "7"])))
    if d.multi is not None:
        members.add((d.multi, "g", "w1"))
    if d is AMQP:
        members.add(("", "日本", "w2"))
    for f, g, m in members:
        trie.subscribe(f, m, group=g)
    return trie, pairs, sorted(members)


@pytest.mark.parametrize("d", [AMQP, MQTT, NATS], ids=lambda d: d.name)
def test_groups_match_brute_force(d: Dialect) -> None:
    trie, pairs, members = grouped_trie(d, 11)
    words = [(tuple(oracle.words_of(d, p)), s) for p, s in pairs]
    mwords = [(tuple(oracle.words_of(d, f)), g, m) for f, g, m in members]
    nodes = dict(walk(tree(trie)))
    assert nodes[()]["count"] == len(trie) == len(pairs) + len(members)
    for prefix, node in nodes.items():
        k = len(prefix)
        below = [1 for w, _ in words if w[:k] == prefix] + [
            1 for w, _, _ in mwords if w[:k] == prefix
        ]
        here = {}
        for w, g, m in mwords:
            if w == prefix:
                here.setdefault(g, []).append(m)
        assert node["count"] == len(below), prefix
        assert node["groups"] == {g: len(ms) for g, ms in here.items()}, prefix
        assert {g: sorted(ms) for g, ms in node["members"].items()} == {
            g: sorted(ms) for g, ms in here.items()
        }, prefix
        assert node["here"] == sum(1 for w, _ in words if w == prefix), prefix
        assert node["count"] == node["here"] + sum(node["groups"].values()) + sum(
            c["count"] for c in node["children"].values()
        )
    # every filter's node exists (memberships make nodes like patterns do)
    assert {w[:k] for w, _, _ in mwords for k in range(len(w) + 1)} <= set(nodes)


def test_groups_below_max_depth_are_cut() -> None:
    trie, _, _ = grouped_trie(MQTT, 12)
    full = dict(walk(tree(trie)))
    cut = dict(walk(tree(trie, 1, subscribers=False)))
    for prefix, node in cut.items():
        assert node["count"] == full[prefix]["count"]
        assert node["groups"] == full[prefix]["groups"] and "members" not in node
        kids = sum(c["count"] for c in node["children"].values())
        assert node["count"] == node["here"] + sum(node["groups"].values()) + node["cut"] + kids


def test_render_text_shows_groups_under_their_filter() -> None:
    t = Trie("amqp")
    t.subscribe("a.b", "x")
    t.subscribe("a.*", "x")
    for m in ("w1", "w2", "w3"):
        t.subscribe("a.*", m, group="workers")
    t.subscribe("a.*", "x", group="日本")
    t.subscribe("", "root-member", group="g")
    t.subscribe("#", "audit", group="g")
    root = tree(t)
    assert render_text(root).splitlines() == [
        "(root)  8  (1 grouped)",
        "    [group g]  1 member",
        "├── a  6",
        "│   ├── *  5  (1 here, 4 grouped)",
        "│   │       [group workers]  3 members",
        "│   │       [group 日本]  1 member",
        "│   └── b  1  (1 here)",
        "└── #  1  (1 grouped)",
        "        [group g]  1 member",
    ]
    shown = render_text(root, 1, max_children=1, show_subscribers=2).splitlines()
    assert shown == [
        "(root)  8  (1 grouped)",
        "    [group g]  1 member: 'root-member'",
        "├── a  6  (+6 below)",
        "└── … 1 more  (1)",
    ]
    deep = render_text(root, max_children=1, show_subscribers=2).splitlines()
    assert "│   │       [group workers]  3 members: 'w1', 'w2', … 1 more" in deep
    assert "│   │       … 1 more groups  (1 members)" in deep
    assert not any("日本" in line for line in deep)
    # without groups nothing changes
    assert "group" not in render_text(tree(random_trie(NATS, 3)[0]), show_subscribers=3)


def test_render_dot_draws_groups_as_hexagons() -> None:
    trie, _, members = grouped_trie(AMQP, 13)
    root = tree(trie, subscribers=False)
    dot = render_dot(root, None, max_children=100)
    hexagons = [ln for ln in dot.splitlines() if "shape=hexagon" in ln]
    assert len(hexagons) == len({(f, g) for f, g, _ in members})
    assert all("[group " in ln and "#b7e4c7" in ln for ln in hexagons)
    dotted = [ln for ln in dot.splitlines() if "style=dotted" in ln]
    assert len(dotted) == len(hexagons)
    ident = {ln.split()[0] for ln in hexagons}
    assert {ln.split()[2] for ln in dotted} == ident  # each hexagon hangs on one edge
    few = render_dot(root, None, max_children=1)
    assert "more groups" in few
    plain = render_dot(tree(random_trie(AMQP, 4)[0]), 3)
    assert "hexagon" not in plain


@needs_dot
def test_dot_with_groups_is_accepted_by_graphviz() -> None:
    trie, _, _ = grouped_trie(MQTT, 14)
    dot = render_dot(tree(trie), 3)
    proc = subprocess.run(
        [shutil.which("dot") or "dot", "-Tsvg"], input=dot.encode(), capture_output=True
    )
    assert proc.returncode == 0, proc.stderr
