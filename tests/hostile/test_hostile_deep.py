"""Hostile input, part 1: the deepest valid input goes through every public entry
point, end to end.

Rules under test:

* MQTT 5.0, 4.7.3: "There is no limit to the number of levels in a Topic Name or
  Topic Filter, other than that imposed by the overall length of a UTF-8 Encoded
  String" (65,535 bytes).  So ``"/" * 65534`` (65,535 empty levels), ``"+/" *
  32767 + "+"`` (32,768 "+" levels) and ``"a/" * 32766 + "#"`` are valid filters,
  and every operation works on them: subscribe (also a second time, and a
  prefix of an existing deep path), lookup / match / has_subscribers /
  lookup_many / subscribers / a Matcher, len, iteration, subscriptions(),
  stats() (``max_depth`` counts topic levels), tree() (nested dicts, one node
  per level; ``max_depth`` cuts it and ``cut`` counts what is hidden),
  unsubscribe (also while a snapshot holds the path, and from a copy), and
  export / load in every format with the same contents (docs/export.md).
* A second subscribe on top of an existing deep path (the same pair, another
  subscriber, a prefix or an extension) runs in a child interpreter, so that a
  crash (SIGSEGV) fails the test with the exit signal in its message instead
  of killing the pytest worker.
  The engine's walks keep their pending nodes on the heap, so a thread with a
  small stack handles the deepest input too.
* AMQP ``max_levels`` is 256: a 257-word pattern is a ValueError that names the
  limit and changes nothing.  A custom dialect without a limit takes a
  40,000-word pattern through subscribe / lookup / unsubscribe.
"""

from __future__ import annotations

import gc
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import run_isolated

from cstrie._binding import lib
from cstrie.dialect import Dialect
from cstrie.export import export, load
from cstrie.tree import render_text
from cstrie.trie import Trie


def levels(text: str, sep: str = "/") -> int:
    return text.count(sep) + 1


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


SUFFIXES = [
    pytest.param(".jsonl", id="jsonl"),
    pytest.param(".cstrie", id="binary"),
    pytest.param(
        ".parquet",
        id="parquet",
        marks=pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow"),
    ),
]

# (filter, a topic it matches, a topic one level away that it does not match)
DEEP = [
    pytest.param("/" * 65534, "/" * 65534, "/" * 65533, id="65535-empty-levels"),
    pytest.param("+/" * 32767 + "+", "x/" * 32767 + "x", "x/" * 32766 + "x", id="32768-plus"),
    pytest.param("a/" * 32766 + "#", "a/" * 32766 + "z", "a/" * 32765, id="32766-levels-then-hash"),
]


def key(pair: tuple[str, Any]) -> tuple[str, str]:
    return pair[0], repr(pair[1])


DEEP_FILTERS = ["/" * 65534, "+/" * 32767 + "+", "a/" * 32766 + "#"]
BOTH_SUBS = sorted([7, "deep"], key=repr)


def _path_in_tree(root: dict[str, Any], words: list[str]) -> list[dict[str, Any]]:
    """The tree nodes along ``words`` (iteratively: the tree is 65,535 levels deep)."""
    nodes = [root]
    for word in words:
        nodes.append(nodes[-1]["children"][word])
    return nodes


@pytest.mark.parametrize(("pattern", "topic", "miss"), DEEP)
def test_deepest_filters_end_to_end(pattern: str, topic: str, miss: str, tmp_path: Path) -> None:
    """MQTT 4.7.3 (no level limit but the 65,535 bytes): every public operation
    works on a filter of the most levels, and answers as for a shallow one."""
    assert len(pattern.encode()) <= 65535 and len(topic.encode()) <= 65535
    depth = levels(pattern)
    t = Trie("mqtt")
    assert t.subscribe(pattern, "deep") is True
    assert t.subscribe(pattern, 7) is True
    assert t.subscribe("other/+", "shallow") is True
    both = sorted([(pattern, "deep"), (pattern, 7)], key=key)
    everything = sorted([*both, ("other/+", "shallow")], key=key)

    # matching
    assert sorted(t.lookup(topic), key=repr) == BOTH_SUBS
    assert sorted(t.match(topic), key=key) == both
    assert t.has_subscribers(topic) is True
    assert t.lookup(miss) == [] and t.match(miss) == [] and t.has_subscribers(miss) is False
    rows = t.lookup_many([topic, miss, "other/1", topic])
    assert [sorted(r, key=repr) for r in rows] == [BOTH_SUBS, [], ["shallow"], BOTH_SUBS]
    assert sorted(t.matcher().lookup(topic), key=repr) == BOTH_SUBS
    assert sorted(t.subscribers(pattern), key=repr) == BOTH_SUBS
    if pattern.endswith("/#"):  # "#" also matches the parent level
        parent = pattern[:-2]
        assert sorted(t.lookup(parent), key=repr) == BOTH_SUBS

    # sizes, iteration, views
    assert len(t) == 3
    assert sorted(t, key=key) == everything
    subs = t.subscriptions()
    assert set(subs) == {pattern, "other/+"}
    assert sorted(subs[pattern], key=repr) == BOTH_SUBS
    stats = t.stats()
    assert stats["max_depth"] == depth
    assert stats["subscriptions"] == 3 and stats["patterns"] == 2

    # tree(): one node per level, all the way down; max_depth cuts and counts
    words = pattern.split("/")
    path = _path_in_tree(t.tree(), words)
    assert len(path) == depth + 1
    assert path[0]["count"] == 3
    assert all(node["count"] == 2 for node in path[1:])
    assert path[-1]["here"] == 2 and path[-1]["children"] == {}
    assert sorted(path[-1]["subscribers"], key=repr) == BOTH_SUBS
    cut = _path_in_tree(t.tree(max_depth=3), words[:3])
    assert cut[-1]["children"] == {} and cut[-1]["cut"] == 2 and cut[-1]["count"] == 2
    text = render_text(t.tree(max_depth=4), max_depth=4)
    assert "+2 below" in text and len(text.splitlines()) == 7

    # export and load back: the same dialect and pairs, and the same answers
    for suffix in (".jsonl", ".cstrie", *([".parquet"] if _have_pyarrow() else [])):
        file = tmp_path / f"deep{suffix}"
        export(t.snapshot(), file)
        back = load(file)
        assert back.dialect == t.dialect, suffix
        assert sorted(back, key=key) == everything, suffix
        assert sorted(back.lookup(topic), key=repr) == BOTH_SUBS, suffix
        assert back.stats()["max_depth"] == depth, suffix
        del back

    # unsubscribe while a snapshot holds the path; from a copy; the last one
    snap = t.snapshot()
    dup = t.copy()
    assert t.unsubscribe(pattern, "deep") is True
    assert t.unsubscribe(pattern, "deep") is False
    assert t.lookup(topic) == [7]
    assert sorted(snap.lookup(topic), key=repr) == BOTH_SUBS
    assert sorted(dup.lookup(topic), key=repr) == BOTH_SUBS
    assert dup.unsubscribe(pattern, 7) is True and dup.unsubscribe(pattern, "deep") is True
    assert dup.lookup(topic) == [] and list(dup) == [("other/+", "shallow")]
    assert dup.stats()["max_depth"] == 2
    assert t.lookup(topic) == [7] and len(snap) == 3
    assert t.unsubscribe(pattern, 7) is True
    assert list(t) == [("other/+", "shallow")] and t.lookup(topic) == []
    assert t.stats()["max_depth"] == 2
    t.check_invariants(strict=True)
    dup.check_invariants(strict=True)
    assert sorted(snap, key=key) == everything


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_deep_export_round_trip_every_reader(suffix: str, tmp_path: Path) -> None:
    """docs/export.md (exact round trips): a snapshot holding the deepest filters,
    several subscribers of each type, loads back with the same pairs.  For JSON
    Lines also a hand-edited file (other spacing, no crc32), which the engine's
    own reader refuses and the general readers take."""
    pairs: list[tuple[str, Any]] = []
    for k, pattern in enumerate(DEEP_FILTERS):
        pairs += [(pattern, f"s{k}"), (pattern, k), (pattern, b"\x00" + bytes([k]))]
    pairs.append(("/" * 65535, "longest"))  # 65,536 levels, 65,535 bytes
    t = Trie("mqtt")
    for pattern, sub in pairs:
        assert t.subscribe(pattern, sub) is True
    file = tmp_path / f"deep{suffix}"
    export(t.snapshot(), file)
    files = [file]
    if suffix == ".jsonl":
        edited = tmp_path / "edited.jsonl"
        lines = file.read_text(encoding="utf-8").splitlines()
        body = [json.dumps(json.loads(line)) for line in lines[1:-1]]
        footer = json.loads(lines[-1])
        del footer["end"]["crc32"]
        edited.write_text("\n".join([lines[0], *body, json.dumps(footer)]) + "\n", "utf-8")
        files.append(edited)
    for f in files:
        back = load(f)
        assert back.dialect == t.dialect
        assert sorted(back, key=key) == sorted(pairs, key=key), f.name
        assert back.stats()["max_depth"] == 65536
        assert sorted(back.lookup("/" * 65534), key=repr) == sorted(
            ["s0", 0, b"\x00\x00"], key=repr
        )


# ------------------------------------------------ crash-prone: a child process
_SECOND_SUBSCRIBE = {
    "same-pair-twice": """
        p = "/" * 65534
        assert t.subscribe(p, 1) is True
        assert t.subscribe(p, 1) is False
        assert t.lookup(p) == [1] and len(t) == 1
    """,
    "second-subscriber": """
        p = "/" * 65534
        assert t.subscribe(p, 1) is True
        assert t.subscribe(p, 2) is True
        assert sorted(t.lookup(p)) == [1, 2] and len(t) == 2
    """,
    "then-one-level-shorter": """
        p, q = "/" * 65534, "/" * 65533
        assert t.subscribe(p, 1) is True
        assert t.subscribe(q, 2) is True
        assert t.lookup(p) == [1] and t.lookup(q) == [2] and len(t) == 2
    """,
    "then-one-level-longer": """
        p, q = "/" * 65534, "/" * 65535
        assert t.subscribe(p, 1) is True
        assert t.subscribe(q, 2) is True
        assert t.lookup(p) == [1] and t.lookup(q) == [2] and len(t) == 2
    """,
    "plus-twice": """
        p = "+/" * 32767 + "+"
        assert t.subscribe(p, 1) is True
        assert t.subscribe(p, 1) is False
        assert t.subscribe(p, 2) is True
        assert sorted(t.lookup("x/" * 32767 + "x")) == [1, 2]
    """,
    "hash-twice": """
        p = "a/" * 32766 + "#"
        assert t.subscribe(p, 1) is True
        assert t.subscribe(p, 1) is False
        assert t.subscribe(p, 2) is True
        assert t.subscribe("a/" * 32766 + "+", 3) is True
        assert sorted(t.lookup("a/" * 32766 + "z")) == [1, 2, 3]
    """,
}

_EPILOGUE = """
    snap = t.snapshot()
    dup = t.copy()
    for pattern, sub in list(t):
        assert t.unsubscribe(pattern, sub) is True
    assert len(t) == 0 and len(snap) == len(dup) > 0
    t.check_invariants(strict=True)
    del snap, dup, t
    import gc
    gc.collect()
    print("ok")
"""


@pytest.mark.parametrize("case", sorted(_SECOND_SUBSCRIBE))
def test_second_subscribe_of_a_deep_path(case: str) -> None:
    """MQTT 4.7.3 again: subscribing on top of an existing 65,535-level path (the
    same pair, a second subscriber, a prefix or an extension of it) works.  It
    runs in a child interpreter: a crash (SIGSEGV) fails this test only."""
    body = textwrap.dedent(_SECOND_SUBSCRIBE[case]) + textwrap.dedent(_EPILOGUE)
    code = "from cstrie import Trie\nt = Trie('mqtt')\n" + body
    assert run_isolated(code).strip() == "ok"


def test_deepest_filters_on_a_small_stack_thread() -> None:
    """The engine's walks keep their pending nodes on the heap (not the C stack):
    a thread with a 256 KiB stack subscribes (twice), matches, iterates, counts,
    snapshots, copies and unsubscribes the deepest filters, and drops them."""
    code = textwrap.dedent(
        """
        import gc, threading
        from cstrie import Trie
        threading.stack_size(256 * 1024)
        result = []

        def work():
            t = Trie("mqtt")
            cases = [("/" * 65534, "/" * 65534), ("+/" * 32767 + "+", "x/" * 32767 + "x"),
                     ("a/" * 32766 + "#", "a/" * 32766 + "z")]
            for p, topic in cases:
                assert t.subscribe(p, 1) is True
                assert t.subscribe(p, 1) is False
                assert t.subscribe(p, 2) is True
            assert t.subscribe("/" * 65533, 3) is True
            for p, topic in cases:
                assert sorted(t.lookup(topic)) == [1, 2], p[:4]
                assert len(t.match(topic)) == 2 and t.has_subscribers(topic)
            assert len(t) == 7 and len(list(t)) == 7 and t.stats()["max_depth"] == 65535
            snap, dup = t.snapshot(), t.copy()
            for p, sub in list(t):
                assert t.unsubscribe(p, sub) is True
                assert dup.unsubscribe(p, sub) is True
            assert len(t) == 0 and len(dup) == 0 and len(snap) == 7
            t.check_invariants(strict=True)
            del snap, dup, t
            gc.collect()
            result.append("ok")

        th = threading.Thread(target=work)
        th.start()
        th.join()
        print(result[0] if result else "the thread failed")
        """
    )
    assert run_isolated(code).strip() == "ok"


# ------------------------------------------------------------- word limits
def _settled_bytes() -> int:
    gc.collect()
    lib.cst_reclaim()
    return int(lib.cst_live_bytes())


def test_amqp_257_words_refused_and_nothing_changes() -> None:
    """AMQP max_levels = 256: a 257-word pattern (or topic) is a ValueError that
    names the limit, and neither the trie nor the engine's memory changes."""
    t = Trie("amqp")
    t.subscribe("a.#", "s")
    t.subscribe(".".join(["w"] * 256), "longest")  # exactly the limit: fine
    before = sorted(t, key=key)
    bytes_before = _settled_bytes()
    message = re.escape("257 words; amqp allows at most 256 (max_levels)")
    for text in (".".join(["w"] * 257), "." * 256, ".".join(["#"] * 257), "a." + "*." * 255):
        assert levels(text, ".") == 257
        with pytest.raises(ValueError, match=message):
            t.subscribe(text, "new")
        with pytest.raises(ValueError, match=message):
            t.unsubscribe(text, "s")
        topic = text.replace("#", "x").replace("*", "x")
        for call in (t.lookup, t.match, t.has_subscribers):
            with pytest.raises(ValueError, match=message):
                call(topic)
    assert sorted(t, key=key) == before and len(t) == 2
    assert "new" not in {s for _p, s in t}
    assert _settled_bytes() == bytes_before
    t.check_invariants(strict=True)


def test_custom_dialect_without_limit_takes_40000_words() -> None:
    """Dialect(max_levels=None): no word limit, so a 40,000-word pattern (literal
    words, "*" every tenth word, "#" last) subscribes, matches and unsubscribes."""
    d = Dialect(name="unbounded")
    assert d.max_levels is None
    words = ["*" if i % 10 == 0 else f"w{i % 97}" for i in range(39999)]
    pattern = ".".join([*words, "#"])
    topic_words = ["x" if w == "*" else w for w in words]
    topic = ".".join([*topic_words, "tail", "end"])
    miss = ".".join(["w1" if i == 20001 else w for i, w in enumerate(topic_words)])
    assert levels(pattern, ".") == 40000
    t = Trie(d)
    assert t.subscribe(pattern, "long") is True
    assert t.subscribe(pattern, "long") is False
    assert t.subscribe("w1.#", "short") is True
    assert t.lookup(topic) == ["long"]
    assert t.lookup(".".join(topic_words)) == ["long"]  # "#" matches zero words
    assert t.match(topic) == [(pattern, "long")]
    assert t.lookup(miss) == [] and not t.has_subscribers(miss)
    assert t.subscribers(pattern) == ["long"]
    assert len(t) == 2 and t.stats()["max_depth"] == 40000
    assert t.unsubscribe(pattern, "long") is True
    assert t.lookup(topic) == [] and list(t) == [("w1.#", "short")]
    t.check_invariants(strict=True)


def test_share_groups_on_the_deepest_filters() -> None:
    """A client's shared subscription may be as deep as any filter: the MQTT
    filter of 65,535 empty levels (its '$share/g/' prefix is not part of the
    filter) and AMQP's 255 '#' words join, route, leave and prune."""
    t = Trie("mqtt")
    deepest = "/" * 65534
    assert t.subscribe("$share/g/" + deepest, "w") and t.subscribe("$share/g/" + deepest, "v")
    assert t.subscribe(deepest, "o") and t.subscribe("$share/h/#", "z")
    plain, groups = t.route_by_group(deepest)
    assert plain == ["o"] and groups["g"] in ("v", "w") and groups["h"] == "z"
    assert t.lookup(deepest) == ["o"]
    t.check_invariants()
    for pattern, member in (("$share/g/" + deepest, "w"), ("$share/g/" + deepest, "v")):
        assert t.unsubscribe(pattern, member)
    assert t.unsubscribe(deepest, "o") and t.unsubscribe("$share/h/#", "z")
    assert len(t) == 0 and len(t._reg) == 0
    t.check_invariants(strict=True)

    a = Trie("amqp")
    hashes = ".".join(["#"] * 255)
    assert a.subscribe(hashes, "m", group="q")
    assert a.route(".".join(["x"] * 256)) == ["m"]
    assert a.unsubscribe(hashes, "m", group="q")
    assert len(a) == 0 and len(a._reg) == 0
    a.check_invariants(strict=True)
