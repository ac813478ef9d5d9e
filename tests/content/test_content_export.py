"""Content subscription files: a round trip keeps every binding, limits and
the dialect; anything wrong is a FormatError naming it, and nothing is built."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from cstrie.content import AllOf, AnyOf, ContentIndex, Eq, Has, Not, OneOf, Prefix, Range, load
from cstrie.export import FormatError


def sample() -> ContentIndex:
    idx = ContentIndex("mqtt", max_criteria=10)
    idx.bind(AllOf(Eq("ccy", "USD"), Has("urgent")), "alice")
    idx.bind(Range("price", 10, float("inf"), low_inclusive=False), 7, topic="stock/+")
    idx.bind(OneOf("k", [b"\x00", 1.5, None, True]), b"bytes-sub")
    idx.bind(Not(AnyOf(Prefix("s", "\ud800x"), Eq("n", 2**80))), "\udcff")
    return idx


def dump(idx: Any, **kw: Any) -> bytes:
    buf = io.BytesIO()
    idx.export(buf, **kw)
    return buf.getvalue()


def keyset(idx: Any) -> set[tuple[str, Any, Any]]:
    return {(b.criteria.key, b.subscriber, b.topic) for b in idx.bindings()}


def test_round_trip(tmp_path: Path) -> None:
    idx = sample()
    path = tmp_path / "subs.jsonl"
    assert idx.export(path) == 4
    back = load(path)
    assert keyset(back) == keyset(idx)
    assert back.dialect == idx.dialect and back.limits() == idx.limits()
    assert back.match({"price": 11, "s": "\ud800xy"}, "stock/x") == [7]
    with pytest.raises(FormatError, match=r"line \d: 2 field tests"):
        load(path, max_criteria=1)  # a limit given to load overrides the file's


def test_snapshot_exports_its_moment() -> None:
    idx = sample()
    snap = idx.snapshot()
    idx.unbind(AllOf(Eq("ccy", "USD"), Has("urgent")), "alice")
    assert len(keyset(load(io.BytesIO(dump(snap))))) == 4


def test_subscribers_need_encode() -> None:
    idx = ContentIndex()
    idx.bind(Has("a"), ("tuple", 1))
    with pytest.raises(TypeError, match="encode="):
        dump(idx)
    data = dump(idx, encode=repr)
    with pytest.raises(FormatError, match="decode="):
        load(io.BytesIO(data))
    back = load(io.BytesIO(data), decode=eval)
    assert back.match({"a": 1}) == [("tuple", 1)]


def lines(data: bytes) -> list[Any]:
    return [json.loads(x) for x in data.decode().splitlines()]


def pack(objs: list[Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda ls: ls[:-1], "footer"),
        (lambda ls: ls[:1], "footer|no header"),
        (lambda ls: [{**ls[0], "format": "cstrie-jsonl"}, *ls[1:]], "format"),
        (lambda ls: [{**ls[0], "version": 2}, *ls[1:]], "newer"),
        (lambda ls: [{**ls[0], "limits": {}}, *ls[1:]], "limits"),
        (lambda ls: [ls[0], {"criteria": {"xx": 1}, "subscriber": "s"}, ls[-1]], "line 2"),
        (lambda ls: [ls[0], {"criteria": {"has": "a"}}, ls[-1]], "line 2"),
        (lambda ls: [ls[0], {"criteria": {"has": "a"}, "subscriber": [1]}, ls[-1]], "line 2"),
        (lambda ls: [ls[0], {"criteria": {"has": "a"}, "subscriber": "s", "topic": 1}, ls[-1]],
         "topic"),
        (lambda ls: [ls[0], {"criteria": {"has": "a"}, "subscriber": "s", "topic": "a/#/b"},
                     ls[-1]], "line 2"),
        (lambda ls: [ls[0], {"criteria": {"all": [{"has": c} for c in "abcdefghijklm"]},
                             "subscriber": "s"}, ls[-1]], r"line 2: 13 field tests"),
    ],
)
def test_bad_files(edit: Any, error: str) -> None:
    ls = lines(dump(sample()))
    edited = edit(ls)
    if edited and isinstance(edited[-1], dict) and "end" in edited[-1]:
        edited[-1] = {"end": {"bindings": len(edited) - 2}}  # no CRC: a hand-edited file
    with pytest.raises(FormatError, match=error):
        load(io.BytesIO(pack(edited)))


def test_crc_and_count_and_truncation() -> None:
    data = dump(sample())
    with pytest.raises(FormatError, match="CRC"):
        load(io.BytesIO(data.replace(b"alice", b"alicf")))
    with pytest.raises(FormatError):
        load(io.BytesIO(data[:-1]))
    with pytest.raises(FormatError):
        load(io.BytesIO(data[: len(data) // 2]))
    with pytest.raises(FormatError, match="not JSON"):
        load(io.BytesIO(b"\xff\n" + data))
    ls = lines(data)
    ls[-1] = {"end": {"bindings": 9}}
    with pytest.raises(FormatError, match="counts 9"):
        load(io.BytesIO(pack(ls)))
