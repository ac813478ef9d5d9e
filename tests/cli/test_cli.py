"""The ``cstrie`` command: export, load, tree, stats, match (in-process through
``cstrie.cli.main``, and once through the installed console script).

Exit codes under test: 0 success; 1 the command ran but something failed
(invalid topics in ``match``, Graphviz missing for ``tree``); 2 bad usage or bad
input (unreadable, corrupt, unknown format), with nothing written.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cstrie.cli import build_parser, main, plain
from cstrie.export import export, load
from cstrie.trie import Trie

SUBCOMMANDS = ["demo", "export", "load", "tree", "stats", "match"]
TSV = "a.b\talice\na.*\tbob\n#\tcarol\nx.#.y\tdave\na.b\tbob\n"


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


EXPORTS = [
    ".jsonl",
    ".cstrie",
    pytest.param(".parquet", marks=pytest.mark.skipif(not _have_pyarrow(), reason="pyarrow")),
]


def pairs(trie: Any) -> list[tuple[str, str]]:
    return sorted((p, repr(s)) for p, s in trie)


@pytest.fixture
def tsv(tmp_path: Path) -> Path:
    path = tmp_path / "subs.tsv"
    path.write_text(TSV)
    return path


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def registered_subcommands(with_help: bool = False) -> list[str]:
    """Every subcommand the ``cstrie`` parser has (``spark-match`` and
    ``bench`` too where they import), read from the parser itself; with
    ``with_help``, those that have a ``--help`` option."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [name for name, p in sub.choices.items() if p.add_help or not with_help]


# RST that a terminal would print as is: inline literals, roles such as
# :mod:`x`, :class:`~x.Y` or :py:func:`f`, default-role text, and the "::"
# that introduces a literal block
RST_MARKUP = re.compile(r"``|:(?:[a-z]+:)?[a-z]+:`|`[^`\s][^`]*`|::$", re.MULTILINE)


def test_the_parser_registers_the_file_commands() -> None:
    assert set(SUBCOMMANDS) <= set(registered_subcommands())


@pytest.mark.parametrize(
    "cmd",
    [[], *([c] for c in registered_subcommands(with_help=True))],
    ids=lambda cmd: " ".join(["cstrie", *cmd]),
)
def test_help_on_every_subcommand_is_plain_text(
    cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*cmd, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(" ".join(["usage: cstrie", *cmd]))
    assert not RST_MARKUP.findall(out), out


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "``cstrie export``: see :func:`cstrie.export.export`",
            "cstrie export: see cstrie.export.export",
        ),
        (
            ":class:`~cstrie.topics.TopicIndex` and :py:meth:`Trie.lookup`",
            "TopicIndex and Trie.lookup",
        ),
        (":meth:`Dialect.intersects <cstrie.dialect.Dialect.intersects>`", "Dialect.intersects"),
        ("in input order::\n\n    {}\n", "in input order:\n\n    {}\n"),
        ("the pairs ::\n\n    x\n::\n\n    y", "the pairs\n\n    x\n\n\n    y"),
        ("`default role`, a.*.# and *emphasis*", "default role, a.*.# and *emphasis*"),
        ("``-`` (stdin), ``\\r``, ``a  b``", "- (stdin), \\r, a  b"),
    ],
)
def test_plain(text: str, shown: str) -> None:
    assert plain(text) == shown


def test_top_level_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for cmd in registered_subcommands():
        assert cmd in out


@pytest.mark.parametrize("suffix", EXPORTS)
def test_export_then_load_between_formats(
    suffix: str, tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / f"s{suffix}"
    assert main(["export", str(tsv), str(out)]) == 0
    loaded = load(out)
    assert pairs(loaded) == pairs(
        Trie.from_pairs(
            [tuple(line.split("\t")) for line in TSV.splitlines()]  # type: ignore[misc]
        )
    )
    capsys.readouterr()
    assert main(["load", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 5 and summary["patterns"] == 4 and summary["subscribers"] == 4
    assert summary["dialect"] == "amqp" and summary["version"] == 2
    # convert to every other format and back to text
    for other in (".jsonl", ".cstrie") + ((".parquet",) if _have_pyarrow() else ()):
        conv = tmp_path / f"c{other}"
        assert main(["export", str(out), str(conv), "-q"]) == 0
        assert pairs(load(conv)) == pairs(loaded)
    back = tmp_path / "back.tsv"
    assert main(["load", str(out), "-o", str(back), "-q"]) == 0
    assert sorted(back.read_text().splitlines()) == sorted(TSV.splitlines())


def test_export_to_stdout_and_from_stdin(
    tsv: Path, monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main(["export", str(tsv), "-", "--format", "binary", "-q"]) == 0
    raw = capfdbinary.readouterr().out
    assert len(load(io.BytesIO(raw))) == 5
    set_stdin(monkeypatch, raw)
    assert main(["load", "-", "-o", "-"]) == 0
    captured = capfdbinary.readouterr()
    assert sorted(captured.out.decode().splitlines()) == sorted(TSV.splitlines())
    assert b"pairs" in captured.err  # the summary goes to stderr when pairs go to stdout


def test_export_dialects_and_user_codecs(tmp_path: Path) -> None:
    mqtt = tmp_path / "m.tsv"
    mqtt.write_text("a/+\tx\n$SYS/#\ty\n")
    out = tmp_path / "m.jsonl"
    assert main(["export", str(mqtt), str(out), "--dialect", "mqtt", "-q"]) == 0
    assert load(out).dialect.name == "mqtt"
    # --dialect that contradicts the file's own
    assert main(["load", str(out), "--dialect", "nats"]) == 2
    # an export written with encode= converts without knowing the application types
    t = Trie.from_pairs([("a.b", ("tuple", 1))])
    user = tmp_path / "u.cstrie"
    export(t, user, encode=repr)
    conv = tmp_path / "u.jsonl"
    assert main(["export", str(user), str(conv), "-q"]) == 0
    header = json.loads(conv.read_text().splitlines()[0])
    assert header["subscriber_codec"] == "user"
    assert [s for _, s in load(conv, decode=eval)] == [("tuple", 1)]


def test_dialect_mismatch_names_the_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dialect amqp against an "amqp" file written before max_levels existed (it
    keeps its unlimited rules): the error names the field that differs."""
    import dataclasses

    from cstrie.dialect import AMQP

    old = tmp_path / "old.jsonl"
    export(Trie.from_pairs([("a.#", "x")], dataclasses.replace(AMQP, max_levels=None)), old)
    lines = old.read_text().splitlines()
    header = json.loads(lines[0])
    del header["dialect"]["max_levels"], header["dialect"]["forbidden"]
    old.write_text("\n".join([json.dumps(header), lines[1], json.dumps({"end": {"pairs": 1}}), ""]))
    assert main(["load", str(old)]) == 0
    capsys.readouterr()
    assert main(["load", str(old), "--dialect", "amqp"]) == 2
    err = capsys.readouterr().err
    assert "max_levels 256 vs None in the file" in err and "forbidden" not in err


def test_usage_and_input_errors_exit_2(
    tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(tsv), str(tmp_path / "x.unknown")]) == 2
    assert main(["export", str(tmp_path / "missing.tsv"), str(tmp_path / "x.jsonl")]) == 2
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n")
    assert main(["export", str(bad), str(tmp_path / "x.jsonl")]) == 2
    invalid = tmp_path / "invalid.tsv"
    invalid.write_text("a/#/b\tx\n")
    assert main(["export", str(invalid), str(tmp_path / "x.jsonl"), "--dialect", "mqtt"]) == 2
    assert not (tmp_path / "x.jsonl").exists()
    err = capsys.readouterr().err
    assert "line 1" in err or "PATTERN<TAB>SUBSCRIBER" in err
    assert "may only be the last word" in err
    with pytest.raises(SystemExit) as exc:
        main(["export"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["tree", str(tsv), "--format", "gif"])
    assert exc.value.code == 2


@pytest.mark.parametrize("suffix", EXPORTS)
def test_load_of_corrupt_or_truncated_files_exits_2(
    suffix: str, tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / f"g{suffix}"
    assert main(["export", str(tsv), str(good), "-q"]) == 0
    raw = good.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    flip = bytearray(raw)
    flip[len(raw) // 2] ^= 0xFF
    flipped = tmp_path / f"flip{suffix}"
    flipped.write_bytes(bytes(flip))
    capsys.readouterr()
    assert main(["load", str(cut)]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["load", str(flipped)]) == 2
    out = tmp_path / "never.jsonl"
    assert main(["export", str(cut), str(out)]) == 2
    assert not out.exists()


def test_tree_formats(tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tree", str(tsv)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "(root)  5"
    assert "├── a  3" in text
    assert main(["tree", str(tsv), "--depth", "1", "--subscribers", "2"]) == 0
    assert "+" in capsys.readouterr().out
    assert main(["tree", str(tsv), "--format", "json", "--subscribers", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["count"] == 5 and data["children"]["a"]["children"]["b"]["here"] == 2
    dot = tmp_path / "t.dot"
    assert main(["tree", str(tsv), "-o", str(dot)]) == 0
    assert dot.read_text().startswith("digraph")
    assert main(["tree", str(tsv), "--format", "png"]) == 2  # needs -o


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_tree_images(fmt: str, tsv: Path, tmp_path: Path) -> None:
    out = tmp_path / f"t.{fmt}"
    assert main(["tree", str(tsv), "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in data


def test_tree_image_without_graphviz_exits_1(
    tsv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["tree", str(tsv), "-o", str(tmp_path / "t.png")]) == 1
    assert not (tmp_path / "t.png").exists()


def test_stats(tsv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(tsv), "--json", "--top", "2"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["subscriptions"] == 5 and s["patterns"] == 4 and s["subscribers"] == 4
    assert s["wildcard_subscriptions"] == 3
    assert s["top_patterns"][0] == {"pattern": "a.b", "subscribers": 2}
    assert s["top_subscribers"][0] == {"subscriber": "bob", "patterns": 2}
    assert s["words_per_pattern"] == {"1": 1, "2": 3, "3": 1}
    assert main(["stats", str(tsv)]) == 0
    assert "subscriptions" in capsys.readouterr().out


def test_match_topics_file_and_stdin(
    tsv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topics = tmp_path / "topics.txt"
    topics.write_text("a.b\nx.q.r.y\nzzz\n\n")
    assert main(["match", str(tsv), str(topics)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["topic"] for r in rows] == ["a.b", "x.q.r.y", "zzz", ""]
    assert sorted(rows[0]["subscribers"]) == ["alice", "bob", "carol"]
    assert sorted(rows[1]["subscribers"]) == ["carol", "dave"]
    assert rows[2]["subscribers"] == ["carol"]
    set_stdin(monkeypatch, b"a.b\r\n")
    assert main(["match", str(tsv), "--pairs"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["topic"] == "a.b"
    assert sorted((m["pattern"], m["subscriber"]) for m in row["matches"]) == [
        ("#", "carol"),
        ("a.*", "bob"),
        ("a.b", "alice"),
        ("a.b", "bob"),
    ]


def test_match_invalid_topics_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subs = tmp_path / "m.tsv"
    subs.write_text("a/+\tx\n#\t7\n")
    exp = tmp_path / "m.cstrie"
    assert main(["export", str(subs), str(exp), "--dialect", "mqtt", "-q"]) == 0
    topics = tmp_path / "t.txt"
    topics.write_text("a/b\nbad/+\n\na/c\n")
    out = tmp_path / "out.jsonl"
    assert main(["match", str(exp), str(topics), "-o", str(out)]) == 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["topic"] for r in rows] == ["a/b", "bad/+", "", "a/c"]
    assert "error" in rows[1] and "wildcard" in rows[1]["error"]
    assert "error" in rows[2]
    assert sorted(rows[3]["subscribers"]) == ["7", "x"]  # text files hold str subscribers
    assert "2 of 4 topics were invalid" in capsys.readouterr().err
    assert main(["match", str(exp), str(topics), "--pairs", "-o", str(out)]) == 1


def test_match_many_topics_with_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = tmp_path / "s.tsv"
    subs.write_text("".join(f"d.{i}.*\ts{i % 10}\n" for i in range(500)))
    topics = tmp_path / "t.txt"
    topics.write_text("".join(f"d.{i % 600}.x\n" for i in range(20_000)))
    assert main(["match", str(subs), str(topics), "--progress"]) == 0
    captured = capsys.readouterr()
    rows = captured.out.splitlines()
    assert len(rows) == 20_000
    assert json.loads(rows[7]) == {"topic": "d.7.x", "subscribers": ["s7"]}
    assert json.loads(rows[599]) == {"topic": "d.599.x", "subscribers": []}
    assert "match" in captured.err and "20,000" in captured.err


def test_console_script_in_a_subprocess(tsv: Path, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "cstrie"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "cstrie"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = tmp_path / "s.cstrie"
    run = subprocess.run(
        [*cmd, "export", str(tsv), str(out)], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    run = subprocess.run(
        [*cmd, "match", str(out), "-"], input="a.b\n", capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    assert sorted(json.loads(run.stdout)["subscribers"]) == ["alice", "bob", "carol"]
    out.write_bytes(out.read_bytes()[:-5])
    run = subprocess.run([*cmd, "load", str(out)], capture_output=True, text=True, env=env)
    assert run.returncode == 2
    assert "truncated or corrupt" in run.stderr
    run = subprocess.run([*cmd, "tree", "--help"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and "usage: cstrie tree" in run.stdout


def test_match_needs_one_of_its_inputs_from_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["match", "-"]) == 2
    assert "both be stdin" in capsys.readouterr().err


def test_files_with_share_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Memberships pass through every command: MQTT's text form is $share/g/f
    (so text round-trips), a dialect without a share syntax refuses text output
    before making a file, stats and the JSON tree count them."""
    t = Trie("mqtt")
    t.subscribe("a/+", "x")
    t.subscribe("$share/g/a/#", "w")
    src = tmp_path / "g.jsonl"
    export(t, src)
    text = tmp_path / "g.tsv"
    assert main(["load", str(src), "-o", str(text), "-q"]) == 0
    assert sorted(text.read_text().splitlines()) == ["$share/g/a/#\tw", "a/+\tx"]
    back = tmp_path / "back.cstrie"
    assert main(["export", str(text), str(back), "--dialect", "mqtt", "-q"]) == 0
    assert sorted(map(repr, load(back))) == sorted(map(repr, t))
    capsys.readouterr()
    assert main(["stats", str(back), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["subscriptions"] == 2 and stats["shared_subscriptions"] == 1
    assert main(["tree", str(back), "--format", "json", "--subscribers", "3"]) == 0
    node = json.loads(capsys.readouterr().out)["children"]["a"]["children"]["#"]
    assert node["groups"] == {"g": 1} and node["members"] == {"g": ["w"]}
    nats = Trie("nats")
    nats.subscribe("a.*", "w", group="q")
    src2 = tmp_path / "n.cstrie"
    export(nats, src2)
    assert main(["load", str(src2), "-o", str(tmp_path / "n.tsv"), "-q"]) == 2
    assert "no PATTERN<TAB>SUBSCRIBER text form" in capsys.readouterr().err
    assert not (tmp_path / "n.tsv").exists()
