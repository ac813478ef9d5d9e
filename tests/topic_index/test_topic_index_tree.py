"""Tree views of a ``TopicIndex``, written from the rules (cstrie/tree.py,
docs/export.md "Tree views", docs/topic-index.md):

* ``tree(index or snapshot)`` has one node per topic prefix (word by word);
  a node's ``count`` is the number of stored topics starting with its words,
  ``here`` is 1 where a stored topic ends exactly, and its ``values`` (only
  with ``values=True``) are the value stored there;
* ``count = here + cut + sum(children's count)`` at every node, ``max_depth``
  keeps the counts and moves what is below into ``cut``;
* the root carries the dialect's name, ``"content": "topics"`` and no
  wildcard tokens (a topic's words are literal); it is the zero-word topic;
* one snapshot: later writes do not show; the renderers draw it as they draw
  a subscription tree, at any depth (65,535 MQTT levels);
* ``cstrie tree`` draws a topic index export (exit codes as in docs/export.md).

Expected counts come from a brute-force pass over a model dict, with words
split by the independent oracle.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import oracle
import pytest

from cstrie.cli import main
from cstrie.dialect import AMQP, MQTT, Dialect
from cstrie.topics import TopicIndex
from cstrie.tree import dot_available, render_dot, render_text, tree
from cstrie.trie import Trie

WORDS = ["a", "b", "c", "#", "*", "x y", "ü", ""]


def random_index(d: Dialect, seed: str, n: int = 300) -> tuple[TopicIndex, dict[str, Any]]:
    rng = random.Random(seed)
    model: dict[str, Any] = {}
    idx = TopicIndex(d)
    for k in range(n):
        topic = oracle.random_topic(rng, d, WORDS, 5)
        value = {"k": k}  # unhashable: values are listed as the objects put
        idx[topic] = value
        model[topic] = value
    return idx, model


def walk(node: dict[str, Any]) -> Any:
    """(words, node) of every node, iteratively."""
    stack: list[tuple[tuple[str, ...], dict[str, Any]]] = [((), node)]
    while stack:
        prefix, n = stack.pop()
        yield prefix, n
        for word, child in n["children"].items():
            stack.append(((*prefix, word), child))


def check_invariant(root: dict[str, Any]) -> int:
    nodes = 0
    for prefix, node in walk(root):
        kids = sum(c["count"] for c in node["children"].values())
        assert node["count"] == node["here"] + node["cut"] + kids, prefix
        assert node["groups"] == {}, prefix
        nodes += 1
    return nodes


@pytest.mark.parametrize("dname", sorted(oracle.FUZZ_DIALECTS))
def test_counts_match_brute_force(dname: str) -> None:
    d = oracle.FUZZ_DIALECTS[dname]
    idx, model = random_index(d, dname)
    words = {t: tuple(oracle.words_of(d, t)) for t in model}
    root = tree(idx, values=True)
    assert root["dialect"] == d.name and root["content"] == "topics"
    assert root["wildcards"] == [None, None]
    nodes = dict(walk(root))
    for prefix, node in nodes.items():
        k = len(prefix)
        below = [t for t, w in words.items() if w[:k] == prefix]
        here = [t for t, w in words.items() if w == prefix]
        assert node["count"] == len(below), prefix
        assert node["here"] == len(here) <= 1, prefix
        assert len(node["values"]) == len(here), prefix
        for got, t in zip(node["values"], here, strict=True):
            assert got is model[t], prefix
    # every prefix of every topic is a node, and no other node exists
    prefixes = {w[:k] for w in words.values() for k in range(len(w) + 1)}
    assert set(nodes) == prefixes
    check_invariant(root)


def test_values_only_when_asked() -> None:
    idx, _ = random_index(MQTT, "plain", 50)
    for root in (tree(idx), idx.tree(), idx.snapshot().tree()):
        assert all("values" not in node for _, node in walk(root))
        assert all("subscribers" not in node for _, node in walk(root))


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_max_depth_keeps_counts(depth: int) -> None:
    idx, model = random_index(AMQP, f"depth{depth}")
    full = tree(idx)
    cut = tree(idx, depth)
    assert cut["count"] == full["count"] == len(model)
    for prefix, node in walk(cut):
        assert len(prefix) <= depth
        if len(prefix) == depth:
            assert node["children"] == {}
            assert node["count"] == node["here"] + node["cut"]
    check_invariant(cut)
    with pytest.raises(ValueError):
        tree(idx, -1)


def test_tree_is_one_snapshot() -> None:
    idx = TopicIndex(MQTT)
    idx["a/b"] = 1
    snap = idx.snapshot()
    idx["a/c"] = 2
    idx.remove("a/b")
    assert tree(snap)["children"]["a"]["children"].keys() == {"b"}
    assert tree(idx)["children"]["a"]["children"].keys() == {"c"}
    assert tree(snap, values=True)["children"]["a"]["children"]["b"]["values"] == [1]


def test_zero_word_topic_and_empty_index() -> None:
    empty = tree(TopicIndex(AMQP))
    assert empty["count"] == 0 and empty["children"] == {} and empty["here"] == 0
    idx = TopicIndex(AMQP)
    idx[""] = "root"
    idx["."] = "two empty words"
    root = tree(idx, values=True)
    assert root["here"] == 1 and root["values"] == ["root"] and root["count"] == 2
    assert root["children"][""]["children"][""]["values"] == ["two empty words"]


def test_render_text_exact() -> None:
    idx = TopicIndex(MQTT)
    for topic, value in [("a/b", 1), ("a/c", "x"), ("a", b"v"), ("d//e", 2)]:
        idx[topic] = value
    text = render_text(tree(idx, values=True), show_subscribers=1)
    assert text == "\n".join(
        [
            "(root)  4",
            "├── a  3  (1 here)",
            "│       = b'v'",
            "│   ├── b  1  (1 here)",
            "│   │       = 1",
            "│   └── c  1  (1 here)",
            "│           = 'x'",
            "└── d  1",
            "    └── ''  1",
            "        └── e  1  (1 here)",
            "                = 2",
        ]
    )
    assert render_text(idx.tree(), 1) == "\n".join(
        ["(root)  4", "├── a  3  (1 here, +2 below)", "└── d  1  (+1 below)"]
    )


def test_render_dot_counts_topics_and_colours_no_wildcards() -> None:
    idx = TopicIndex(AMQP)
    for topic in ("a.#", "a.*", "a.b", "c"):
        idx[topic] = topic
    dot = render_dot(tree(idx))
    assert 'label="cstrie topics: 4"' in dot
    # AMQP '#' and '*' in a topic are literal words, not wildcards: no orange/red
    assert "#f4a261" not in dot and "#e76f51" not in dot
    assert dot.count(" -> ") == 5  # root-a, a-#, a-*, a-b, root-c
    # a subscription tree of the same words does colour them
    trie = Trie(AMQP)
    trie.subscribe("a.#", "s")
    assert "#e76f51" in render_dot(tree(trie))


def test_tree_arguments_of_the_other_kind_are_refused() -> None:
    idx = TopicIndex(MQTT)
    with pytest.raises(TypeError, match="values="):
        tree(idx, subscribers=True)
    with pytest.raises(TypeError, match="subscribers="):
        tree(Trie(MQTT), values=True)


def test_deepest_topics_render_in_bounded_lines() -> None:
    """65,535 empty levels and a 32,767-level topic: the walk and both
    renderers are iterative, and no text line grows with the depth."""
    idx = TopicIndex(MQTT)
    idx["/" * 65534] = "deep"
    idx["a/" * 32766 + "z"] = "wide"
    root = tree(idx, values=True)
    assert root["count"] == 2
    assert check_invariant(root) == 1 + 65535 + 32767
    text = render_text(root)
    lines = text.splitlines()
    assert len(lines) == 1 + 65535 + 32767
    assert max(map(len, lines)) < 400
    assert sum(line.endswith("┆65535: └── ''  1  (1 here)") for line in lines) == 1
    dot = render_dot(root, None)
    assert len(re.findall(r"^\s+n\d+ \[label", dot, re.M)) == 1 + 65535 + 32767
    assert dot.count(" -> ") == 65535 + 32767


@pytest.mark.skipif(not dot_available(), reason="Graphviz 'dot' is not installed")
def test_graphviz_accepts_a_topic_tree(tmp_path: Path) -> None:
    from cstrie.tree import render_image

    idx, _ = random_index(MQTT, "img", 40)
    out = render_image(tree(idx), tmp_path / "t.svg")
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


# -------------------------------------------------------------- the CLI
@pytest.fixture
def exported(tmp_path: Path) -> Path:
    idx = TopicIndex(MQTT)
    for topic, value in [("a/b", "one"), ("a/c", 2), ("a", b"\x00"), ("$SYS/x", "sys")]:
        idx[topic] = value
    path = tmp_path / "topics.cstrie"
    idx.export(path)
    return path


def test_cli_tree_text(exported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tree", str(exported), "--subscribers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "(root)  4"
    assert "├── a  3  (1 here)" in out and "= b'\\x00'" in out and "= 'one'" in out


def test_cli_tree_json(exported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["tree", str(exported), "--format", "json", "--depth", "-1", "--subscribers", "1"])
        == 0
    )
    root = json.loads(capsys.readouterr().out)
    assert root["content"] == "topics" and root["count"] == 4
    a = root["children"]["a"]
    assert a["values"] == [{"bytes": "AA=="}]
    assert a["children"]["c"]["values"] == [2]
    check_invariant(root)


def test_cli_tree_dot_and_depth(exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.dot"
    assert main(["tree", str(exported), "-o", str(out), "--depth", "1"]) == 0
    dot = out.read_text()
    assert dot.startswith("digraph") and "cstrie topics: 4" in dot


def test_cli_tree_of_a_corrupt_export_exits_2(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = exported.read_bytes()
    bad = tmp_path / "bad.cstrie"
    bad.write_bytes(raw[: len(raw) // 2])
    assert main(["tree", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "error" in captured.err


def test_cli_tree_json_of_the_deepest_topic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON of a 65,535-level tree (json.dumps of the nested dicts would hit
    the recursion limit): every level is there, the value at the bottom.  A
    subscription tree as deep too."""
    idx = TopicIndex(MQTT)
    idx["/" * 65534] = "deep"
    path = tmp_path / "deep.jsonl"
    idx.export(path)
    assert main(["tree", str(path), "--format", "json", "--depth", "-1", "--subscribers", "1"]) == 0
    text = capsys.readouterr().out
    assert text.count('"children": {') == 1 + 65535
    assert text.count('"values": ["deep"]') == 1 and text.count('"here": 1') == 1
    assert text.count("{") == text.count("}") and text.startswith('{"count": 1,')
    trie = Trie(MQTT)
    trie.subscribe("/" * 65534, "s")
    spath = tmp_path / "deep.cstrie"
    trie.export(spath)
    assert main(["tree", str(spath), "--format", "json", "--depth", "-1"]) == 0
    assert capsys.readouterr().out.count('"children": {') == 1 + 65535
