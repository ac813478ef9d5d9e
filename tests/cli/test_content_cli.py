"""``cstrie content match`` and ``cstrie content stats`` on content
subscription files (in-process through ``cstrie.cli.main``).

Answers are checked against the slow evaluator (tests/support/content_oracle.py),
not against the index; exit codes: 0 done, 2 bad usage or input.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from content_oracle import expected

from cstrie.cli import main
from cstrie.content import AllOf, AnyOf, ContentIndex, Eq, Has, Not, Prefix, Range, Suffix
from cstrie.trie import Trie

BINDINGS: list[tuple[Any, Any, str | None]] = [
    (AllOf(Eq("ccy", "USD"), Has("urgent")), "alice", None),
    (Range("price", 10, 100), "bob", "stock.#"),
    (Eq("ccy", "USD"), 7, None),
    (AnyOf(Prefix("desk", "fx-"), Suffix("desk", "-ny")), "carol", None),
    (Not(Has("test")), "dave", "stock.*"),
    (Eq("ccy", "EUR"), "alice", None),
    (Prefix("ccy", "U"), "alice", None),  # with her first: two bindings, one answer
]


@pytest.fixture
def subs(tmp_path: Path) -> Path:
    idx = ContentIndex()
    for c, s, t in BINDINGS:
        idx.bind(c, s, t)
    path = tmp_path / "subs.jsonl"
    idx.export(path)
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["content", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


MESSAGES = [
    ({"ccy": "USD", "urgent": True, "price": 50}, "stock.ibm"),
    ({"ccy": "USD"}, None),
    ({"ccy": "EUR", "desk": "fx-ldn"}, "stock.x.y"),
    ({"desk": "eq-ny", "test": 1}, "stock.ibm"),
    ({}, None),
    ({"price": 100.0, "ccy": "usd"}, "stock"),
]


@pytest.mark.parametrize(("fields", "topic"), MESSAGES)
def test_match_prints_each_subscriber_the_rules_give_once(
    subs: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], topic: str | None
) -> None:
    args = ["match", str(subs), "--fields", json.dumps(fields)]
    if topic is not None:
        args += ["--topic", topic]
    code, out, _ = cli(capsys, *args)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(set(lines))
    assert set(lines) == {str(s) for s in expected(BINDINGS, fields, topic)}
    code, out, _ = cli(capsys, *args, "--json")
    assert code == 0 and set(json.loads(out)) == expected(BINDINGS, fields, topic)


def test_match_bindings_lists_every_matching_binding(
    subs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "match", str(subs), "--fields", '{"ccy": "USD"}', "--bindings")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert sorted(rows, key=str) == sorted(
        [
            {"criteria": {"eq": ["ccy", "USD"]}, "subscriber": 7},
            {"criteria": {"prefix": ["ccy", "U"]}, "subscriber": "alice"},
        ],
        key=str,
    )
    code, out, _ = cli(
        capsys, "match", str(subs), "--fields", '{"price": 10}', "--topic", "stock.a", "--bindings"
    )
    got = {(r["subscriber"], r.get("topic")) for r in map(json.loads, out.splitlines())}
    assert got == {("bob", "stock.#"), ("dave", "stock.*")}


def test_match_against_random_files_agrees_with_the_slow_evaluator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = random.Random(27)
    fields_pool = ["a", "b"]
    values: list[Any] = ["x", "xy", 1, 1.5, True, None]
    for k in range(5):
        bindings = []
        idx = ContentIndex()
        for s in range(20):
            f = r.choice(fields_pool)
            c = r.choice(
                [Has(f), Eq(f, r.choice(values)), Prefix(f, "x"), Range(f, 0, 2), Not(Has(f))]
            )
            t = r.choice([None, "a.*"])
            idx.bind(c, s, t)
            bindings.append((c, s, t))
        path = tmp_path / f"r{k}.jsonl"
        idx.export(path)
        for _ in range(10):
            fields = {f: r.choice(values) for f in fields_pool if r.random() < 0.7}
            topic = r.choice([None, "a.b"])
            args = ["match", str(path), "--fields", json.dumps(fields), "--json"]
            code, out, _ = cli(capsys, *args, *(["--topic", topic] if topic else []))
            assert code == 0 and set(json.loads(out)) == expected(bindings, fields, topic)


def test_match_reads_stdin(
    subs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stdin:
        buffer = io.BytesIO(subs.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin())
    code, out, _ = cli(capsys, "match", "-", "--fields", '{"ccy": "EUR"}')
    assert code == 0 and out.splitlines() == ["alice"]


def test_stats_counts_from_the_file(subs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "stats", str(subs), "--json")
    assert code == 0
    st = json.loads(out)
    assert st["dialect"] == "amqp" and st["bindings"] == len(BINDINGS)
    assert st["subscribers"] == 5 and st["with_topic"] == 2
    assert st["always"] == 0  # dave's negation has a topic filter: indexed by it
    assert st["limits"]["max_criteria"] == 64
    assert st["top_fields"][0] == {"field": "ccy", "bindings": 4}
    assert {r["field"] for r in st["top_fields"]} == {"ccy", "urgent", "price", "desk", "test"}
    code, out, _ = cli(capsys, "stats", str(subs), "--top", "1")
    assert code == 0 and "bindings                7" in out and "4  ccy" in out
    assert "urgent" not in out


def test_user_encoded_subscribers_are_shown_as_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = ContentIndex()
    idx.bind(Has("a"), ("queue", 1))
    path = tmp_path / "enc.jsonl"
    idx.export(path, encode=lambda s: f"{s[0]}/{s[1]}")
    code, out, _ = cli(capsys, "match", str(path), "--fields", '{"a": 0}')
    assert code == 0 and out.splitlines() == ["queue/1"]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ("{", "--fields is not JSON"),
        ("[1]", "--fields must be a JSON object, not list"),
        ('"a"', "--fields must be a JSON object, not str"),
    ],
)
def test_bad_fields_exit_2(
    subs: Path, capsys: pytest.CaptureFixture[str], fields: str, error: str
) -> None:
    code, out, err = cli(capsys, "match", str(subs), "--fields", fields)
    assert code == 2 and out == "" and error in err


def test_bad_files_exit_2_naming_the_problem(
    subs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = subs.read_bytes().split(b"\n")
    footer = json.loads(lines[-2])
    del footer["end"]["crc32"]  # a file edited by hand
    lines[2], lines[-2] = (
        b'{"criteria": {"eq": ["a"]}, "subscriber": 1}',
        json.dumps(footer).encode(),
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(lines))
    code, _, err = cli(capsys, "stats", str(bad))
    assert code == 2 and "line 3" in err
    flipped = tmp_path / "crc.jsonl"
    flipped.write_bytes(subs.read_bytes().replace(b'"alice"', b'"alicf"', 1))
    code, _, err = cli(capsys, "match", str(flipped), "--fields", "{}")
    assert code == 2 and "crc" in err.lower()
    topics = tmp_path / "topics.jsonl"
    t = Trie("amqp")
    t.subscribe("a.b", "x")
    from cstrie.export import export

    export(t, topics)
    code, _, err = cli(capsys, "stats", str(topics))
    assert code == 2 and "header format is 'cstrie-jsonl'" in err  # a topic subscription file
    code, _, err = cli(capsys, "stats", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "missing.jsonl" in err


def test_invalid_topic_and_usage_exit_2(subs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "match", str(subs), "--fields", "{}", "--topic", "\ud800")
    assert code == 2 and "not valid UTF-8" in err
    code, _, _ = cli(capsys, "stats", str(subs), "--top", "-1")
    assert code == 2
    with pytest.raises(SystemExit) as exc:
        main(["content", "match", str(subs)])  # --fields is required
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["content"])  # a subcommand is required


def test_topic_commands_name_a_content_file(
    subs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that reads topic subscriptions, given a content subscription
    file (from a file or standard input), says what it is and what reads it."""
    for argv in (["stats", str(subs)], ["tree", str(subs)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "is a content subscription file" in err and "cstrie content" in err, argv
