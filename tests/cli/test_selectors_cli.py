"""``cstrie selectors match|stats``: selector files (docs/export.md, "Selector
files") answered topic by topic as the index answers them (every kind, in
the index's order), topics from arguments or stdin, invalid topics as error
lines with exit 1, a corrupt or over-limit file refused with exit 2 naming
the line.  In-process through ``cstrie.cli.main``, and once through the
installed console script."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cstrie.cli import build_parser, main
from cstrie.selectors import SelectorIndex

TOPICS = ["https://example.com/books/1", "news.eu", "hallo", "a/7", "nothing", ""]


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.fixture
def index() -> SelectorIndex:
    idx = SelectorIndex()
    idx.add("alice", "https://example.com/books/{id}", "template")
    idx.add("alice", "news.*", "glob")
    idx.add(42, "h[ae]llo", "glob")
    idx.add(b"\x01", r"a/\d", "regex")
    idx.add("bob", "news.eu", "exact")
    idx.add("carol", "*", "template")
    return idx


@pytest.fixture
def sel_file(tmp_path: Path, index: SelectorIndex) -> Path:
    path = tmp_path / "subs.jsonl"
    index.export(path)
    return path


def run(
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdin: bytes = b"",
) -> tuple[int, str, str]:
    set_stdin(monkeypatch, stdin)
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def expected(index: SelectorIndex, topic: str) -> list[object]:
    return [{"bytes": "AQ=="} if s == b"\x01" else s for s in index.lookup(topic)]


def test_registered() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert "selectors" in sub.choices  # type: ignore[operator]


def test_match_arguments_answer_as_the_index(
    sel_file: Path,
    index: SelectorIndex,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = run(["selectors", "match", str(sel_file), *TOPICS], monkeypatch, capsys)
    assert rc == 0
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["topic"] for r in rows] == TOPICS
    for r in rows:
        assert r["subscribers"] == expected(index, r["topic"]), r
    assert rows[1]["subscribers"] == ["alice", "bob", "carol"]


def test_match_stdin(
    sel_file: Path,
    index: SelectorIndex,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = "\n".join(TOPICS[:-1]).encode() + b"\r\n\n"
    rc, out, _ = run(["selectors", "match", str(sel_file)], monkeypatch, capsys, data)
    assert rc == 0
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["topic"] for r in rows] == TOPICS
    assert all(r["subscribers"] == expected(index, r["topic"]) for r in rows)


def test_match_invalid_topic_is_an_error_line(
    sel_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run(
        ["selectors", "match", str(sel_file), "news.x", "\udcff"], monkeypatch, capsys
    )
    assert rc == 1
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[0]["subscribers"] == ["alice", "carol"]
    assert "not valid text" in rows[1]["error"]
    assert "1 of 2 topics were invalid" in err


def test_file_on_stdin_needs_topic_arguments(
    sel_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sel_file.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["selectors", "match", "-", "hallo"]) == 0
    assert json.loads(capsys.readouterr().out)["subscribers"] == [42, "carol"]
    rc, _, err = run(["selectors", "match", "-"], monkeypatch, capsys, data)
    assert rc == 2 and "topics as arguments" in err


def test_stats(
    sel_file: Path,
    index: SelectorIndex,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = run(["selectors", "stats", str(sel_file), "--json"], monkeypatch, capsys)
    assert rc == 0
    info = json.loads(out)
    assert info["format"] == "cstrie-selectors-jsonl" and info["format_version"] == 1
    assert info["subscriptions"] == len(index) == 6
    assert info["subscribers"] == 5
    assert (info["selectors_glob"], info["selectors_template"]) == (2, 2)
    assert (info["selectors_regex"], info["selectors_exact"]) == (1, 1)
    rc, out, _ = run(["selectors", "stats", str(sel_file)], monkeypatch, capsys)
    assert rc == 0 and "selectors_template  2" in out


@pytest.mark.parametrize("sub", ["match", "stats"])
def test_bad_files_exit_2_naming_the_line(
    sub: str,
    sel_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra = ["x"] if sub == "match" else []
    truncated = tmp_path / "t.jsonl"
    truncated.write_bytes(sel_file.read_bytes()[:-30])
    rc, out, err = run(["selectors", sub, str(truncated), *extra], monkeypatch, capsys)
    assert rc == 2 and out == "" and "line" in err
    rc, _, err = run(
        ["selectors", sub, str(sel_file), *extra, "--max-pairs", "3"], monkeypatch, capsys
    )
    assert rc == 2 and "line 5: more than 3 pairs" in err
    rc, _, err = run(
        ["selectors", sub, str(sel_file), *extra, "--max-selector-length", "5"], monkeypatch, capsys
    )
    assert rc == 2 and "line 2:" in err and "longer than the limit 5" in err
    trie_file = tmp_path / "trie.jsonl"
    from cstrie import Trie

    t = Trie("mqtt")
    t.subscribe("a/+", "x")
    t.export(trie_file)
    rc, _, err = run(["selectors", sub, str(trie_file), *extra], monkeypatch, capsys)
    assert rc == 2 and "not a cstrie selector file" in err
    rc, _, err = run(["selectors", sub, str(tmp_path / "missing"), *extra], monkeypatch, capsys)
    assert rc == 2


def test_console_script(sel_file: Path) -> None:
    exe = shutil.which("cstrie", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the cstrie console script is not installed")
    proc = subprocess.run(
        [exe, "selectors", "match", str(sel_file), "hello"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"topic": "hello", "subscribers": [42, "carol"]}
