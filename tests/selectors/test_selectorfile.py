"""Selector files (cstrie/export/selectorfile.py), from the rules the export
formats follow (docs/export.md): a round trip keeps every pair, every kind
and every lookup's answer and order; subscribers that are not JSON values go
through encode/decode; an export that fails leaves no file (and an old file
as it was); a hostile file -- truncated, of another format or version, with a
bad kind, an oversize or too complex selector, a repeated line, bytes that
are not UTF-8, more lines or longer lines than the loader's limits, a wrong
count or CRC -- is a FormatError naming the line, and no index comes back."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from cstrie.export import FormatError, keep_encoded, load
from cstrie.export import selectorfile as sf
from cstrie.selectors import SelectorIndex

PAIRS: list[tuple[Any, str, str]] = [
    ("alice", "https://example.com/books/{id}", "template"),
    ("alice", "news.*", "glob"),
    (42, "h[ae]llo", "glob"),
    (42, "https://example.com/books/1", "exact"),
    (b"\x00\xff", r"a/\d+", "regex"),
    ("\ud800x", "*", "template"),  # a str that is not valid UTF-8 text
    ("é", "ünï/*", "glob"),
    ("bob", 'quote"back\\slash\nnewline', "exact"),
    ("carol", "b/2", "template"),  # a template that is no template (exact for Mercure)
]
TOPICS = [
    "https://example.com/books/1",
    "https://example.com/books/2",
    "news.eu",
    "hello",
    "hallo",
    "a/12",
    "ünï/x",
    'quote"back\\slash\nnewline',
    "b/2",
    "other",
]


def build(pairs: list[tuple[Any, str, str]] = PAIRS, **limits: Any) -> SelectorIndex:
    idx = SelectorIndex(**limits)
    for sub, text, kind in pairs:
        assert idx.add(sub, text, kind)
    return idx


def dump(idx: SelectorIndex, **kw: Any) -> bytes:
    buf = io.BytesIO()
    idx.export(buf, **kw)
    return buf.getvalue()


def parse(data: bytes, **kw: Any) -> SelectorIndex:
    return SelectorIndex.load(io.BytesIO(data), **kw)


def same(a: SelectorIndex, b: SelectorIndex) -> None:
    assert a.subscriptions() == b.subscriptions()
    assert list(a.subscriptions()) == list(b.subscriptions())  # subscriber order
    for topic in TOPICS:
        assert a.lookup(topic) == b.lookup(topic), topic


# ------------------------------------------------------------- round trips
def test_round_trip_every_kind_and_subscriber_type(tmp_path: Path) -> None:
    idx = build()
    path = tmp_path / "subs.jsonl"
    assert idx.export(path) == len(PAIRS)
    back = SelectorIndex.load(path)
    same(idx, back)
    assert len(back) == len(PAIRS)
    kinds = {k for _, _, k in PAIRS}
    assert {s.kind for sels in back.subscriptions().values() for s in sels} == kinds
    assert back.lookup("hello") == [42, "\ud800x"]
    assert back.lookup("a/12") == [b"\x00\xff", "\ud800x"]
    assert "\ud800x" in back.lookup("anything")  # the template "*"


def test_round_trip_keeps_order_after_removals() -> None:
    """A removal renumbers the subscriber (it moves to the end of the order);
    the file keeps the order the index has now."""
    idx = build()
    idx.remove("alice", "news.*", "glob")
    idx.add("zed", "https://example.com/books/{id}", "template")
    before = idx.lookup("https://example.com/books/1")
    assert before.index(42) < before.index("alice")
    back = parse(dump(idx))
    same(idx, back)
    assert back.lookup("https://example.com/books/1") == before


def test_round_trip_empty_and_snapshot() -> None:
    assert len(parse(dump(SelectorIndex()))) == 0
    idx = build()
    snap = idx.snapshot()
    idx.add("late", "x", "exact")
    buf = io.BytesIO()
    assert sf.write(snap, buf) == len(PAIRS)  # the snapshot's pairs, not the index's
    assert "late" not in parse(buf.getvalue()).subscriptions()


def test_file_layout() -> None:
    lines = dump(build([("a", "x.*", "glob")])).decode().splitlines()
    head = json.loads(lines[0])
    assert head["format"] == "cstrie-selectors-jsonl" and head["version"] == 1
    assert head["subscriber_codec"] == "native"
    assert json.loads(lines[1]) == {"subscriber": "a", "kind": "glob", "selector": "x.*"}
    assert json.loads(lines[2])["end"]["pairs"] == 1
    assert len(lines) == 3


class Client:
    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Client) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def test_encode_decode() -> None:
    idx = build([(Client("a"), "n.*", "glob"), (Client("b"), "n.x", "exact")])
    with pytest.raises(TypeError, match="encode="):
        dump(idx)
    data = dump(idx, encode=lambda c: c.name)
    assert json.loads(data.splitlines()[0])["subscriber_codec"] == "user"
    with pytest.raises(ValueError, match="decode="):
        parse(data)
    back = parse(data, decode=Client)
    assert back.lookup("n.x") == [Client("a"), Client("b")]
    assert parse(data, decode=keep_encoded).lookup("n.x") == ["a", "b"]
    with pytest.raises(ValueError, match="one-to-one"):
        dump(idx, encode=lambda c: "same")
    with pytest.raises(TypeError, match="must return"):
        dump(idx, encode=lambda c: 1.5)
    with pytest.raises(ValueError, match="equal"):
        parse(data, decode=lambda v: "same")


def test_failed_export_leaves_no_file_and_keeps_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "subs.jsonl"
    build().export(path)
    old = path.read_bytes()
    bad = build([(Client("a"), "x", "exact"), (Client("b"), "y", "exact")])
    with pytest.raises(TypeError):
        bad.export(path)  # not storable without encode
    with pytest.raises(ValueError, match="one-to-one"):
        bad.export(path, encode=lambda c: "x")

    def explode(c: Client) -> str:
        raise RuntimeError("encode failed")

    with pytest.raises(RuntimeError):
        bad.export(tmp_path / "new.jsonl", encode=explode)
    with pytest.raises(TypeError, match="SelectorSnapshot"):
        sf.write(object(), tmp_path / "other.jsonl")
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["subs.jsonl"]


def test_generic_loader_refuses_a_selector_file(tmp_path: Path) -> None:
    path = tmp_path / "subs.jsonl"
    build().export(path)
    with pytest.raises(FormatError, match="cstrie-selectors-jsonl"):
        load(path)


# ------------------------------------------------------------ hostile files
GOOD = dump(build())


def refuse(data: bytes, match: str, **kw: Any) -> None:
    with pytest.raises(FormatError, match=match):
        parse(data, **kw)


def test_every_truncation_is_refused() -> None:
    for n in range(len(GOOD)):
        with pytest.raises(FormatError):
            parse(GOOD[:n])


def test_wrong_header() -> None:
    lines = GOOD.split(b"\n")
    head = json.loads(lines[0])
    for change, match in (
        ({"format": "cstrie-jsonl"}, "not a cstrie selector file"),
        ({"format": "cstrie-topics-jsonl"}, "not a cstrie selector file"),
        ({"version": 2}, "newer"),
        ({"version": 0}, "invalid format version"),
        ({"version": "1"}, "invalid format version"),
        ({"subscriber_codec": "pickle"}, "subscriber_codec"),
    ):
        bad = json.dumps({**head, **change}).encode()
        refuse(b"\n".join([bad, *lines[1:]]), "line 1: .*" + match)
    refuse(b"[1]\n" + b"\n".join(lines[1:]), "line 1: the header is not")
    refuse(b"", "line 1: empty")
    refuse(b"garbage\n", "line 1: not valid JSON")


def lines_file(*pairs: object, count: int | None = None, codec: str = "native") -> bytes:
    """A file of the given line objects (or raw bytes), its footer without a CRC."""
    head = {"format": sf.FORMAT, "version": 1, "subscriber_codec": codec}
    body = [
        p if isinstance(p, bytes) else json.dumps(p, ensure_ascii=False).encode() for p in pairs
    ]
    end = {"end": {"pairs": len(pairs) if count is None else count}}
    return b"\n".join([json.dumps(head).encode(), *body, json.dumps(end).encode()]) + b"\n"


def line(sub: object, kind: object, text: object) -> dict[str, object]:
    return {"subscriber": sub, "kind": kind, "selector": text}


def test_hand_made_file_loads() -> None:
    back = parse(lines_file(line("a", "glob", "x*"), line("a", "exact", "y")))
    assert back.lookup("xz") == ["a"] and back.lookup("y") == ["a"]


@pytest.mark.parametrize(
    ("pairs", "match"),
    [
        ([line("a", "wildcard", "x")], "line 2: unknown selector kind 'wildcard'"),
        ([line("a", "exact", "x"), line("a", 3, "x")], "line 3: the kind and the selector"),
        ([line("a", "glob", ["x"])], "line 2: the kind and the selector"),
        ([line("a", "regex", "(a")], "line 2: invalid regular expression"),
        ([line("a", "regex", r"(a)\1")], "line 2: regex selectors cannot use backreferences"),
        ([line(1.5, "exact", "x")], "line 2: invalid subscriber value"),
        ([line(True, "exact", "x")], "line 2: invalid subscriber value"),
        ([line({"bytes": "!!"}, "exact", "x")], "line 2: invalid subscriber value"),
        ([{"subscriber": "a", "selector": "x"}], 'line 2: expected {"subscriber"'),
        ([{**line("a", "exact", "x"), "extra": 1}], 'line 2: expected {"subscriber"'),
        ([[1, 2]], 'line 2: expected {"subscriber"'),
        (
            [line("a", "exact", "x"), line("b", "exact", "x"), line("a", "exact", "x")],
            "line 4: repeats line 2",
        ),
        ([b'{"subscriber":"a","kind":"exact","selector":"\xff"}'], "line 2: not valid UTF-8"),
        ([b'{"subscriber":"a","kind":"exact","selector":"\\ud800"}'], "line 2: .*not valid text"),
        ([b"[" * 100_000], "line 2: not valid JSON"),
        ([b""], "line 2: not valid JSON"),
    ],
)
def test_bad_lines(pairs: list[Any], match: str) -> None:
    refuse(lines_file(*pairs), match)


def test_limits_of_the_index_apply_to_the_file() -> None:
    long = lines_file(line("a", "glob", "x" * 100))
    refuse(long, "line 2: .*longer than the limit 99", max_selector_length=99)
    assert len(parse(long, max_selector_length=100)) == 1
    many = lines_file(*(line("a", "exact", f"t{i}") for i in range(5)))
    refuse(many, "line 5: .*max_selectors_per_subscriber=3", max_selectors_per_subscriber=3)
    hard = lines_file(line("a", "regex", "(ab|cd|ef){50}"))
    refuse(hard, "line 2: .*", max_automaton_states=20)


def test_line_count_and_line_length_are_bounded() -> None:
    huge = lines_file(*(line("a", "exact", f"t{i}") for i in range(50_000)))
    refuse(huge, r"line 12: more than 10 pairs \(max_pairs\)", max_pairs=10)
    refuse(huge, "line 1: longer than 20 bytes", max_line_bytes=20)
    wide = lines_file(line("a", "exact", "t"), line("a", "exact", "x" * 200))
    refuse(wide, "line 3: longer than 100 bytes", max_line_bytes=100)
    # a single line with no newline that never ends is read in bounded pieces
    endless = lines_file().split(b"\n")[0] + b"\n" + b'{"subscriber":"' + b"a" * 5_000_000
    refuse(endless, "line 2: longer than 1048576 bytes")
    with pytest.raises(ValueError, match="max_pairs must be positive"):
        parse(GOOD, max_pairs=0)
    with pytest.raises(TypeError):
        parse(GOOD, max_line_bytes="big")
    with pytest.raises(TypeError):
        parse(GOOD, not_a_limit=1)


def test_footer_checks() -> None:
    refuse(lines_file(line("a", "exact", "x"), count=2), "line 3: the footer counts 2 pairs")
    refuse(lines_file(line("a", "exact", "x"), count=True), "line 3: the footer counts")
    lines = GOOD.split(b"\n")
    end = json.loads(lines[-2])
    end["end"]["crc32"] ^= 1
    refuse(b"\n".join([*lines[:-2], json.dumps(end).encode(), b""]), "CRC-32 mismatch")
    tampered = GOOD.replace(b"news.*", b"newz.*")
    refuse(tampered, "CRC-32 mismatch")
    refuse(GOOD + b"\n", "data after the footer")
    refuse(GOOD[:-1], "no newline")
    bad_end = lines_file().replace(b'{"end": {"pairs": 0}}', b'{"end": {"pairs": 0, "x": 1}}')
    refuse(bad_end, "expected the footer")


def test_random_corruption_never_escapes_as_another_error() -> None:
    rng = random.Random(2028)
    for _ in range(300):
        data = bytearray(GOOD)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            parse(bytes(data))
        except FormatError:
            pass
