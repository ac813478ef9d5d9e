"""Snapshot export and load: every format, dialect and subscriber type, and every
error path.

Rules under test (cstrie/export/, docs/export.md):

* a round trip through any format gives a trie with the same dialect (all
  fields) and exactly the same (pattern, subscriber) pairs, subscribers of the
  same type (str vs int vs bytes, mixed allowed);
* other subscriber types need ``encode``/``decode``; without them (or when
  ``encode`` misbehaves) the export fails with a clear error before any file
  exists;
* a truncated or corrupt file raises FormatError and builds nothing;
* an export of a snapshot is exactly the snapshot's state, while writer threads
  keep changing the trie;
* exporting streams: peak Python memory does not grow with the number of pairs.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import random
import re
import struct
import threading
import tracemalloc
import zlib
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import oracle
import pytest
from helpers import old_export_package

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.export import FormatError, detect_format, export, keep_encoded, load, read_header
from cstrie.export import binary as binary_format
from cstrie.export.meta import VERSION
from cstrie.groups import Shared
from cstrie.trie import Trie

CUSTOM = Dialect(
    name="custom",
    separator="::",
    single="?",
    multi="**",
    multi_min=1,
    multi_last_only=False,
    strict_wildcards=True,
    topic_wildcards=False,
    empty_topic=False,
    empty_words=False,
    dollar_rule=True,
    max_bytes=300,
    forbid_nul=True,
    forbidden="\t\n",
    max_levels=6,
)
DIALECTS = {"amqp": AMQP, "mqtt": MQTT, "nats": NATS, "custom": CUSTOM}
WORDS = ["a", "b", "sport", "tennis", "$SYS", "ü", "日本", "x y", "a-b"]
SUFFIX = {"jsonl": ".jsonl", "parquet": ".parquet", "binary": ".cstrie"}


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


FORMATS = [
    "jsonl",
    "binary",
    pytest.param("parquet", marks=pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")),
]


def key(pair: tuple[str, Any]) -> tuple[str, str, str]:
    """Sort/compare key that tells 1, "1", b"1" and True apart."""
    p, s = pair
    return (p, type(s).__name__, repr(s))


def pairs_of(trie: Iterable[tuple[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted(map(key, trie))


def random_pairs(d: Dialect, rng: random.Random, n: int) -> list[tuple[str, Hashable]]:
    subs: list[Hashable] = [
        "alice",
        "",
        "1",
        1,
        0,
        -7,
        2**70,
        -(2**80),
        b"",
        b"1",
        b"\x00\xff",
        "ü\x00x",
        "日本",
    ]
    subs += [f"client{i}" for i in range(20)] + list(range(100, 120))
    return [(oracle.random_pattern(rng, d, WORDS, 5), rng.choice(subs)) for _ in range(n)]


def round_trip(trie: Any, fmt: str, tmp_path: Path, **kw: Any) -> Trie:
    path = tmp_path / f"snap{SUFFIX[fmt]}"
    export(trie.snapshot(), path, **{k: v for k, v in kw.items() if k == "encode"})
    return load(path, **{k: v for k, v in kw.items() if k == "decode"})


# ------------------------------------------------------------ round trips
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dname", sorted(DIALECTS))
def test_round_trip_every_format_and_dialect(fmt: str, dname: str, tmp_path: Path) -> None:
    d = DIALECTS[dname]
    rng = random.Random(f"{fmt}-{dname}")
    pairs = random_pairs(d, rng, 600)
    trie = Trie.from_pairs(pairs, d)
    loaded = round_trip(trie, fmt, tmp_path)
    assert type(loaded) is Trie
    assert loaded.dialect == d
    assert dataclasses.asdict(loaded.dialect) == dataclasses.asdict(d)
    assert pairs_of(loaded) == pairs_of(trie)
    assert len(loaded) == len(trie)
    for _ in range(50):
        topic = oracle.random_topic(rng, d, WORDS, 5)
        assert sorted(map(repr, loaded.lookup(topic))) == sorted(map(repr, trie.lookup(topic)))
    loaded.check_invariants()
    # the loaded trie is an ordinary writable trie
    some = pairs[0]
    assert loaded.unsubscribe(*some) is True
    assert loaded.subscribe(*some) is True


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_through_file_objects_and_sniffing(fmt: str) -> None:
    trie = Trie.from_pairs([("a.*", "x"), ("a.#", 2), ("", b"\x01")])
    buf = io.BytesIO()
    export(trie, buf, format=fmt)
    raw = buf.getvalue()
    assert detect_format(raw[:16]) == fmt
    assert pairs_of(load(io.BytesIO(raw))) == pairs_of(trie)  # format from the bytes
    assert pairs_of(load(io.BytesIO(raw), format=fmt)) == pairs_of(trie)


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_from_suffix_and_sniffing_paths(fmt: str, tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a.b", "x")])
    path = tmp_path / f"s{SUFFIX[fmt]}"
    export(trie, path)
    assert read_header(path)["format"] == f"cstrie-{fmt}"
    odd = tmp_path / "snapshot.data"
    path.rename(odd)
    assert pairs_of(load(odd)) == pairs_of(trie)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_trie_round_trips(fmt: str, tmp_path: Path) -> None:
    for d in (AMQP, MQTT, CUSTOM):
        loaded = round_trip(Trie(d), fmt, tmp_path)
        assert len(loaded) == 0 and loaded.dialect == d


@pytest.mark.parametrize("fmt", FORMATS)
def test_subscriber_types_are_exact(fmt: str, tmp_path: Path) -> None:
    subs: list[Hashable] = ["1", 1, b"1", "", b"", 0, -1, 2**63 - 1, -(2**63), 2**64, "é\x00"]
    trie = Trie.from_pairs([("t.#", s) for s in subs] + [("u", 5), ("u", "5")])
    loaded = round_trip(trie, fmt, tmp_path)
    assert pairs_of(loaded) == pairs_of(trie)
    got = {repr(s): type(s) for s in loaded.lookup("t.x")}
    assert got == {repr(s): type(s) for s in subs}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["str", "int", "bytes"])
def test_homogeneous_subscribers(fmt: str, kind: str, tmp_path: Path) -> None:
    make = {"str": str, "int": int, "bytes": lambda i: str(i).encode()}[kind]
    trie = Trie.from_pairs([(f"p.{i % 7}", make(i)) for i in range(300)])
    assert pairs_of(round_trip(trie, fmt, tmp_path)) == pairs_of(trie)


def test_lone_surrogates_round_trip_where_the_format_can_hold_them(tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a", "\udc80x"), ("b", "ok")])
    for fmt in ("jsonl", "binary"):
        assert pairs_of(round_trip(trie, fmt, tmp_path)) == pairs_of(trie)
    if _have_pyarrow():
        path = tmp_path / "s.parquet"
        with pytest.raises(TypeError, match="surrogate"):
            export(trie, path)
        assert not path.exists()


# ----------------------------------------------------- subscriber codecs
@dataclasses.dataclass(frozen=True)
class Client:
    host: str
    port: int


def enc(c: Client) -> str:
    return f"{c.host}:{c.port}"


def dec(v: str | int | bytes) -> Client:
    assert isinstance(v, str)
    host, port = v.rsplit(":", 1)
    return Client(host, int(port))


@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_decode_round_trip(fmt: str, tmp_path: Path) -> None:
    clients = [Client(f"h{i}", 1000 + i) for i in range(30)]
    trie = Trie.from_pairs([(f"a.{i % 5}.#", c) for i, c in enumerate(clients * 3)])
    path = tmp_path / f"s{SUFFIX[fmt]}"
    export(trie, path, encode=enc)
    assert read_header(path)["subscriber_codec"] == "user"
    loaded = load(path, decode=dec)
    assert pairs_of(loaded) == pairs_of(trie)
    assert all(type(s) is Client for _, s in loaded)
    with pytest.raises(ValueError, match="decode="):
        load(path)
    raw = load(path, decode=keep_encoded)
    assert sorted(s for _, s in raw) == sorted(enc(s) for _, s in trie)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "bad",
    [True, 1.5, ("t", 1), frozenset({1}), None, Client("h", 1), bytearray(b"x").__class__],
)
def test_unsupported_subscriber_errors_before_any_file(fmt: str, bad: Any, tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a.b", "fine"), ("a.c", 3), ("z", bad)])
    path = tmp_path / f"s{SUFFIX[fmt]}"
    with pytest.raises(TypeError, match="encode="):
        export(trie, path)
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file
    buf = io.BytesIO()
    with pytest.raises(TypeError):
        export(trie, buf, format=fmt)
    assert buf.getvalue() == b""


def test_only_the_snapshots_own_subscribers_are_checked(tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a", "x")])
    trie.subscribe("b", ("tuple",))
    snap = trie.snapshot()  # holds the tuple
    trie.unsubscribe("b", ("tuple",))  # the registry still knows it (snap is open)
    export(trie, tmp_path / "ok.jsonl")  # a new snapshot without the tuple: fine
    assert pairs_of(load(tmp_path / "ok.jsonl")) == [("a", "str", "'x'")]
    with pytest.raises(TypeError):
        export(snap, tmp_path / "bad.jsonl")


@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_encode_results_error_before_any_file(fmt: str, tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a", Client("h", 1)), ("b", Client("h", 2))])
    path = tmp_path / f"s{SUFFIX[fmt]}"
    with pytest.raises(TypeError, match="must return"):
        export(trie, path, encode=lambda c: (c.host, c.port))
    with pytest.raises(TypeError, match="must return"):
        export(trie, path, encode=lambda c: True)
    with pytest.raises(ValueError, match="one-to-one"):
        export(trie, path, encode=lambda c: c.host)
    assert list(tmp_path.iterdir()) == []


def test_decode_that_merges_subscribers_is_an_error(tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a", "x1"), ("b", "x2")])
    export(trie, tmp_path / "s.cstrie")
    with pytest.raises(ValueError, match="decode made two subscribers equal"):
        load(tmp_path / "s.cstrie", decode=lambda v: "same")


def test_huge_ints_need_encode(tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a", 10**5000)])
    with pytest.raises(TypeError):
        export(trie, tmp_path / "s.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_unknown_format_and_missing_suffix(tmp_path: Path) -> None:
    trie = Trie.from_pairs([("a", "x")])
    with pytest.raises(ValueError, match="format"):
        export(trie, tmp_path / "s.data")
    with pytest.raises(ValueError, match="unknown format"):
        export(trie, tmp_path / "s.jsonl", format="xml")
    with pytest.raises(ValueError, match="format"):
        export(trie, io.BytesIO())
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "junk.data").write_bytes(b"hello world, not an export")
    with pytest.raises(FormatError, match="not a cstrie export"):
        load(tmp_path / "junk.data")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.cstrie")


def test_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cstrie.export.binary as b

    trie = Trie.from_pairs([(f"a.{i}", i) for i in range(10)])
    target = tmp_path / "s.cstrie"
    target.write_bytes(b"previous")

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(b, "chunks", boom)
    with pytest.raises(OSError, match="disk full"):
        export(trie, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.cstrie"]
    assert target.read_bytes() == b"previous"  # the old file is untouched


@pytest.mark.parametrize("fmt", FORMATS)
def test_progress_reports_every_pair(fmt: str, tmp_path: Path) -> None:
    trie = Trie.from_pairs([(f"a.{i}", i % 13) for i in range(150_000)])
    seen: list[tuple[int, int]] = []
    n = export(trie, tmp_path / f"s{SUFFIX[fmt]}", progress=lambda d, t: seen.append((d, t)))
    assert n == 150_000
    assert len(seen) >= 2 and seen[-1] == (150_000, 150_000)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


# --------------------------------------------------- truncated / corrupt
def small_trie() -> Trie:
    return Trie.from_pairs(
        [("a.*.c", "alice"), ("a.#", 7), ("b", b"\x00"), ("ü.x", "日本"), ("", -3)], AMQP
    )


def exported(fmt: str) -> bytes:
    buf = io.BytesIO()
    export(small_trie(), buf, format=fmt)
    return buf.getvalue()


def must_fail(raw: bytes, fmt: str | None) -> None:
    with pytest.raises(FormatError):
        load(io.BytesIO(raw), format=fmt)


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_every_truncation_is_detected(fmt: str) -> None:
    raw = exported(fmt)
    for cut in range(len(raw)):
        must_fail(raw[:cut], fmt)


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_every_flipped_byte_is_detected(fmt: str) -> None:
    raw = exported(fmt)
    for pos in range(len(raw)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(raw)
            bad[pos] ^= mask
            must_fail(bytes(bad), fmt)


@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
def test_parquet_truncation_and_corruption() -> None:
    raw = exported("parquet")
    for cut in [*range(0, len(raw), 7), len(raw) - 1, len(raw) - 8]:
        must_fail(raw[:cut], "parquet")
    expected = pairs_of(small_trie())
    detected = 0
    for pos in range(0, len(raw), 3):
        bad = bytearray(raw)
        bad[pos] ^= 0xFF
        try:
            loaded = load(io.BytesIO(bytes(bad)), format="parquet")
        except FormatError:
            detected += 1
            continue
        # a flip in bytes the content does not depend on (e.g. the writer's name
        # or unused statistics) may load: then the content must be intact
        assert pairs_of(loaded) == expected and loaded.dialect == AMQP, pos
    assert detected > 0.8 * len(range(0, len(raw), 3))


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def test_binary_checks_that_survive_a_valid_checksum() -> None:
    """Files whose CRC is right but whose content is not (crafted or buggy)."""
    raw = exported("binary")
    body = bytearray(raw[:-4])
    newer = bytearray(body)
    newer[8:10] = struct.pack("<H", VERSION + 1)
    with pytest.raises(FormatError, match="newer"):
        load(io.BytesIO(_with_crc(bytes(newer))))
    flags = bytearray(body)
    flags[10:12] = struct.pack("<H", 1)
    with pytest.raises(FormatError, match="flags"):
        load(io.BytesIO(_with_crc(bytes(flags))))
    # decreasing pattern offsets: rebuild a file by hand

    def build(
        ends: list[int],
        refs: list[int],
        data: bytes,
        subs: tuple[bytes, ...] = (b"x",),
        d: Dialect = AMQP,
    ) -> bytes:
        meta = json.dumps(
            {
                "format": "cstrie-binary",
                "version": 1,
                "dialect": dataclasses.asdict(d),
                "subscriber_codec": "native",
            }
        ).encode()
        out = binary_format.MAGIC + struct.pack("<HHI", 1, 0, len(meta)) + meta
        out += struct.pack("<4sQQ", b"PAIR", len(ends), len(data))
        out += struct.pack(f"<{len(ends)}q", *ends) + struct.pack(f"<{len(refs)}Q", *refs) + data
        blob = b"".join(subs)
        out += struct.pack("<4sQQ", b"SUBS", len(subs), len(blob)) + b"\x00" * len(subs)
        out += struct.pack(f"<{len(subs)}q", *itertools.accumulate(map(len, subs)))
        out += blob + struct.pack("<4sQQI", b"END\0", len(ends), len(data), 1)
        return _with_crc(out)

    good = build([3, 5], [1, 1], b"a.bcd")
    assert pairs_of(load(io.BytesIO(good))) == [("a.b", "str", "'x'"), ("cd", "str", "'x'")]
    with pytest.raises(FormatError, match="decrease"):
        load(io.BytesIO(build([3, 1, 5], [1, 1, 1], b"a.bcd")))
    with pytest.raises(FormatError, match="outside"):
        load(io.BytesIO(build([3, 5], [1, 2], b"a.bcd")))
    with pytest.raises(FormatError, match="UTF-8"):
        load(io.BytesIO(build([3, 5], [1, 1], b"a.\xffcd")))
    with pytest.raises(FormatError, match="inside a UTF-8"):
        load(io.BytesIO(build([1, 3], [1, 1], "ü.".encode())))
    with pytest.raises(FormatError, match="invalid"):  # a pattern the dialect refuses
        load(io.BytesIO(build([4, 5], [1, 1], b"a..bc", d=NATS)))
    with pytest.raises(FormatError, match="lists a subscriber twice"):
        load(io.BytesIO(build([3, 5], [1, 2], b"a.bcd", subs=(b"x", b"x"))))
    two = build([3, 5], [1, 2], b"a.bcd", subs=(b"x", b"yz"))
    assert pairs_of(load(io.BytesIO(two))) == [("a.b", "str", "'x'"), ("cd", "str", "'yz'")]


def _jsonl_with(header: dict[str, Any], lines: list[str], crc: bool = True) -> bytes:
    body = (json.dumps(header) + "\n" + "".join(x + "\n" for x in lines)).encode()
    end: dict[str, Any] = {"pairs": len(lines)}
    if crc:
        end["crc32"] = zlib.crc32(body)
    return body + (json.dumps({"end": end}) + "\n").encode()


def jsonl_header(**changes: Any) -> dict[str, Any]:
    h = {
        "format": "cstrie-jsonl",
        "version": 1,
        "dialect": dataclasses.asdict(MQTT),
        "subscriber_codec": "native",
    }
    h.update(changes)
    return h


def test_jsonl_hand_edited_files() -> None:
    ok = ['{"pattern": "a/+", "subscriber": "x"}', '{"subscriber": 2, "pattern": "a/#"}']
    t = load(io.BytesIO(_jsonl_with(jsonl_header(), ok, crc=False)))
    assert pairs_of(t) == [("a/#", "int", "2"), ("a/+", "str", "'x'")]
    assert t.dialect == MQTT
    cases = {
        "newer": _jsonl_with(jsonl_header(version=9), ok),
        "line 3": _jsonl_with(jsonl_header(), [ok[0], '{"pattern": "a"}']),
        "not valid JSON": _jsonl_with(jsonl_header(), [ok[0], "{nope"]),
        "pattern is not a string": _jsonl_with(jsonl_header(), ['{"pattern": 1, "subscriber": 2}']),
        "invalid subscriber": _jsonl_with(jsonl_header(), ['{"pattern": "a", "subscriber": 1.5}']),
        "subscriber_codec": _jsonl_with(jsonl_header(subscriber_codec="pickle"), ok),
        "dialect": _jsonl_with(jsonl_header(dialect={"name": "mqtt"}), ok),
        "invalid": _jsonl_with(jsonl_header(), ['{"pattern": "a/#/b", "subscriber": 1}']),
        "footer says": _jsonl_with(jsonl_header(), ok, crc=False).replace(
            b'"pairs": 2', b'"pairs": 3'
        ),
        "checksum": _jsonl_with(jsonl_header(), ok).replace(b'"a/+"', b'"a/b"'),
    }
    for message, raw in cases.items():
        with pytest.raises(FormatError, match=message):
            load(io.BytesIO(raw), format="jsonl")
    bools = _jsonl_with(jsonl_header(), ['{"pattern": "a", "subscriber": true}'])
    with pytest.raises(FormatError):
        load(io.BytesIO(bools))


# ------------------------------------- dialect fields added after version 1
NEW_FIELDS = ("forbidden", "max_levels")


def _as_old_file(raw: bytes, fmt: str) -> bytes:
    """``raw`` as a cstrie that predates the new dialect fields wrote it: the same
    file without those keys in the header's dialect record (checksums redone)."""
    if fmt == "jsonl":
        lines = raw.decode().splitlines()
        header = json.loads(lines[0])
        for name in NEW_FIELDS:
            del header["dialect"][name]
        return _jsonl_with(header, lines[1:-1])
    (meta_len,) = struct.unpack_from("<I", raw, 12)
    meta = json.loads(raw[16 : 16 + meta_len])
    for name in NEW_FIELDS:
        del meta["dialect"][name]
    new_meta = json.dumps(meta).encode()
    body = raw[:12] + struct.pack("<I", len(new_meta)) + new_meta + raw[16 + meta_len : -4]
    return _with_crc(body)


def _export_bytes(trie: Trie, fmt: str) -> bytes:
    buf = io.BytesIO()
    export(trie.snapshot(), buf, format=fmt)
    return buf.getvalue()


def test_new_dialect_fields_are_written() -> None:
    """Every Dialect field is in the header, the new ones included."""
    raw = _export_bytes(Trie("nats"), "jsonl")
    written = json.loads(raw.splitlines()[0])["dialect"]
    assert written == dataclasses.asdict(NATS)
    assert written["forbidden"] == "\t\n\x0c\r " and written["max_levels"] is None
    amqp = json.loads(_export_bytes(Trie("amqp"), "jsonl").splitlines()[0])["dialect"]
    assert amqp["max_levels"] == 256 and amqp["forbidden"] == ""


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_old_amqp_file_keeps_its_rules(fmt: str) -> None:
    """An "amqp" file written before max_levels existed had no word limit: it loads
    with max_levels None (not AMQP's 256), so its 300-word binding still loads and a
    300-word routing key still matches as before."""
    unlimited = dataclasses.replace(AMQP, max_levels=None)  # the old AMQP rules
    deep = ".".join(["w"] * 299 + ["#"])
    old = Trie.from_pairs([(deep, "deep"), ("a.#", "a")], unlimited)
    raw = _as_old_file(_export_bytes(old, fmt), fmt)
    assert b"max_levels" not in raw
    loaded = load(io.BytesIO(raw))
    assert loaded.dialect == unlimited and loaded.dialect != AMQP
    assert loaded.dialect.name == "amqp" and loaded.dialect.max_levels is None
    assert sorted(loaded) == [("a.#", "a"), (deep, "deep")]
    assert loaded.lookup(".".join(["w"] * 299 + ["x"])) == ["deep"]
    # the same file as the new cstrie writes it keeps its (unlimited) dialect too
    assert load(io.BytesIO(_export_bytes(loaded, fmt))).dialect == unlimited


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_old_nats_file_keeps_its_rules(fmt: str) -> None:
    """A "nats" file written before the whitespace rule may hold subjects with spaces:
    it loads with forbidden "" (the old rules), so nothing in it is refused."""
    old_rules = dataclasses.replace(NATS, forbidden="")
    old = Trie.from_pairs([("a b.>", 1), ("x.*", 2)], old_rules)
    loaded = load(io.BytesIO(_as_old_file(_export_bytes(old, fmt), fmt)))
    assert loaded.dialect == old_rules and loaded.dialect.forbidden == ""
    assert loaded.lookup("a b.c") == [1]


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_old_mqtt_and_custom_files_load_unchanged(fmt: str) -> None:
    """Where the new fields' defaults are the dialect's values (MQTT: no forbidden
    characters, no level limit) an old file loads as the very same dialect."""
    for d in (MQTT, Dialect(name="glob", separator="/", single="?", multi="**")):
        trie = Trie.from_pairs([("a/+", 1)], d) if d is MQTT else Trie.from_pairs([("a/?", 1)], d)
        loaded = load(io.BytesIO(_as_old_file(_export_bytes(trie, fmt), fmt)))
        assert loaded.dialect == d
        assert sorted(loaded) == sorted(trie)


def test_dialect_record_is_still_strict() -> None:
    """Only the fields added later may be missing; an unknown field, a missing old
    field, a new field of the wrong type or an invalid value still fail."""
    from cstrie.export.codec import dialect_from_json, dialect_to_json

    full = dialect_to_json(AMQP)
    assert dialect_from_json(full) == AMQP
    old = {k: v for k, v in full.items() if k not in NEW_FIELDS}
    assert dialect_from_json(old) == dataclasses.replace(AMQP, max_levels=None)
    only_one = {k: v for k, v in full.items() if k != "forbidden"}
    assert dialect_from_json(only_one) == AMQP
    bad: dict[str, dict[str, Any]] = {
        "unknown fields ['levels']": {**full, "levels": 3},
        "missing fields ['forbid_nul']": {k: v for k, v in full.items() if k != "forbid_nul"},
        "'forbidden' has the wrong type": {**full, "forbidden": 1},
        "'max_levels' has the wrong type: '3'": {**full, "max_levels": "3"},
        "'max_levels' has the wrong type: True": {**full, "max_levels": True},
        "max_levels must be a positive int": {**full, "max_levels": 0},
        "only hold ASCII": {**full, "forbidden": "\u00a0"},
    }
    for message, record in bad.items():
        with pytest.raises(FormatError, match=re.escape(message)):
            dialect_from_json(record)
    raw = _jsonl_with(jsonl_header(dialect={**dataclasses.asdict(MQTT), "extra": 1}), [])
    with pytest.raises(FormatError, match="unknown fields"):
        load(io.BytesIO(raw))


def test_format_mismatch_is_a_format_error() -> None:
    raw = exported("binary")
    with pytest.raises(FormatError):
        load(io.BytesIO(raw), format="jsonl")
    with pytest.raises(FormatError):
        load(io.BytesIO(exported("jsonl")), format="binary")


# ------------------------------------------ consistency under concurrency
@pytest.mark.parametrize("fmt", FORMATS)
def test_export_is_exactly_the_snapshot_while_writers_run(fmt: str, tmp_path: Path) -> None:
    """Writers own disjoint subscribers, so each knows its exact part of the
    state; they pause while the snapshot is taken and resume during the export."""
    d = MQTT
    trie = Trie(d)
    models: list[set[tuple[str, Hashable]]] = [set() for _ in range(3)]
    run = threading.Event()
    run.set()
    paused = [threading.Event() for _ in models]
    stop = threading.Event()
    ops = [0]

    def writer(k: int) -> None:
        rng = random.Random(k)
        model = models[k]
        subs = [f"w{k}-{i}" for i in range(30)] + [k * 1000 + i for i in range(30)]
        while not stop.is_set():
            if not run.is_set():
                paused[k].set()
                run.wait()
                paused[k].clear()
            p = oracle.random_pattern(rng, d, ["a", "b", "c", "dd"], 4)
            s = rng.choice(subs)
            if rng.random() < 0.6:
                trie.subscribe(p, s)
                model.add((p, s))
            else:
                trie.unsubscribe(p, s)
                model.discard((p, s))
            ops[0] += 1

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(len(models))]
    for t in threads:
        t.start()
    try:
        while len(trie) < 2000:
            stop.wait(0.01)
        run.clear()
        for p in paused:
            assert p.wait(10)
        snap = trie.snapshot()
        expected = sorted(map(key, set().union(*models)))
        before = ops[0]
        run.set()
        path = tmp_path / f"s{SUFFIX[fmt]}"

        def let_writers_run(done: int, total: int) -> None:
            # called between chunks: make sure writes land in the middle of the export
            deadline = 200
            while ops[0] < before + 50 and deadline:
                stop.wait(0.01)
                deadline -= 1

        export(snap, path, progress=let_writers_run)
        during = ops[0] - before
    finally:
        stop.set()
        run.set()
        for t in threads:
            t.join()
    loaded = load(path)
    assert pairs_of(loaded) == expected
    assert pairs_of(snap) == expected
    assert during > 0  # the writers really ran during the export
    assert pairs_of(trie) != expected or during == 0


# ------------------------------------------------------------- streaming
def _peak_export(n_pairs: int, fmt: str, path: Path) -> tuple[int, int]:
    pairs = [(f"site{i % 97}/dev{i}/m{i % 5}", f"c{i % 500}") for i in range(n_pairs)]
    raw = sum(len(p) + len(s) for p, s in pairs)
    snap = Trie.from_pairs(pairs).snapshot()
    del pairs
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        export(snap, path, format=fmt)
        return tracemalloc.get_traced_memory()[1] - base, raw
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_memory_is_flat(fmt: str, tmp_path: Path) -> None:
    """Peak Python memory of an export (tracemalloc) stays about one chunk's
    worth: 4x the pairs (same subscribers) do not grow it, and it stays below
    the pairs' own size (a list of the pairs would be many times that)."""
    small, _ = _peak_export(100_000, fmt, tmp_path / "small")
    big, raw = _peak_export(400_000, fmt, tmp_path / "big")
    assert big < 1.3 * small + 500_000, (small, big)
    assert big < raw, (big, raw)


# ------------------------------------------- JSON Lines: both readers agree
@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
@pytest.mark.parametrize(
    "subs",
    [
        ["a", "b", "", "ü日本", 'q"uote\\', "\t"],
        [1, -5, 0, 2**63 - 1],
        ["1", 1],
        [b"x", "x"],
        ["\udc80", "ok"],
        [2**64, 3],
    ],
    ids=["str", "int", "mixed", "bytes", "surrogate", "bigint"],
)
def test_jsonl_engine_arrow_and_python_readers_agree(
    subs: list[Hashable], monkeypatch: pytest.MonkeyPatch
) -> None:
    import cstrie.export.jsonl as jl

    pairs = [(p, s) for p in ("a.b", 'we"ird\\.x', "ü.*", "#", "") for s in subs]
    trie = Trie.from_pairs(pairs)
    buf = io.BytesIO()
    export(trie, buf, format="jsonl")
    raw = buf.getvalue()
    used: dict[str, list[bool]] = {"engine": [], "arrow": []}

    def spy(name: str, real: Any) -> Any:
        def reader(*args: Any) -> Any:
            out = real(*args)
            used[name].append(out is not None)
            return out

        return reader

    monkeypatch.setattr(jl, "_native_columns", spy("engine", jl._native_columns))
    monkeypatch.setattr(jl, "_arrow_columns", spy("arrow", jl._arrow_columns))
    by_engine = load(io.BytesIO(raw))
    monkeypatch.setattr(jl, "_native_columns", lambda *args: None)
    by_arrow = load(io.BytesIO(raw))
    monkeypatch.setattr(jl, "_arrow_columns", lambda *args: None)
    by_python = load(io.BytesIO(raw))
    assert pairs_of(by_engine) == pairs_of(by_arrow) == pairs_of(by_python) == pairs_of(trie)
    # the engine reads every line the exporter writes but bytes subscribers and
    # lone surrogates; pyarrow only all-str or all-int64 files
    engine = not any(isinstance(s, bytes) for s in subs) and "\udc80" not in subs
    arrow = {type(s) for s in subs} in ({str}, {int}) and "\udc80" not in subs
    arrow = arrow and 2**64 not in subs
    assert used["engine"] == [engine]
    assert used["arrow"] == ([] if engine else [arrow]) + [arrow]


@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
def test_jsonl_odd_lines_fall_back_to_the_python_reader() -> None:
    lines = {
        "extra key": ['{"pattern": "a", "subscriber": "x", "more": 1}'],
        "missing key": ['{"pattern": "a"}'],
        "null": ['{"pattern": "a", "subscriber": null}'],
        "float": ['{"pattern": "a", "subscriber": 1.0}'],
        "bool": ['{"pattern": "a", "subscriber": false}'],
        "list": ['["a", "x"]'],
    }
    for name, body in lines.items():
        with pytest.raises(FormatError, match="line 2"):
            load(io.BytesIO(_jsonl_with(jsonl_header(), body)), format="jsonl")
        assert name


# ------------------------------------------------------------- byte tables
# nb.interleave is what writes JSON Lines: item i of table a, then item refs[i]
# of table b (a table: a blob and each item's end offset).


def _table(items: list[bytes]) -> tuple[bytes, Any]:
    from array import array
    from itertools import accumulate

    return b"".join(items), array("q", accumulate(map(len, items)))


def test_interleave_follows_each_item_with_the_referenced_one() -> None:
    from array import array

    from cstrie import _binding as nb

    a, a_end = _table([b"x", b"", b"yy", b"z\x00z"])
    b, b_end = _table([b"", b"-1-", b"-22-"])
    refs = array("Q", [2, 0, 1, 2])
    got = nb.interleave(a, a_end, b, b_end, refs)
    assert bytes(got) == b"x-22-" + b"" + b"yy-1-" + b"z\x00z-22-"
    assert nb.interleave(b"", array("q"), b, b_end, array("Q")) == b""


def test_interleave_rejects_bad_tables_and_refs() -> None:
    from array import array

    from cstrie import _binding as nb

    a, a_end = _table([b"x", b"y"])
    b, b_end = _table([b"1", b"2"])
    with pytest.raises(ValueError, match="invalid argument"):
        nb.interleave(a, a_end, b, b_end, array("Q", [0, 2]))  # only items 0 and 1
    with pytest.raises(ValueError, match="2 refs for 1 items"):
        nb.interleave(a, array("q", [1]), b, b_end, array("Q", [0, 1]))
    with pytest.raises(ValueError, match="invalid argument"):  # an end before its start
        nb.interleave(a, array("q", [2, 1]), b, b_end, array("Q", [0, 1]))


def test_jsonl_escapes_patterns_that_need_it(tmp_path: Path) -> None:
    """Quotes, backslashes and control characters in a pattern (NATS allows those
    that are not whitespace, e.g. U+0001 and the vertical tab) are escaped in the
    JSON text and come back exact."""
    t = Trie("nats")
    pats = ['a."q".b', "a.back\\slash", "a.ctl\x01here", "a.vt\x0bhere", "a.plain", "a.é"]
    for k, p in enumerate(pats):
        t.subscribe(p, f"s{k % 2}")
    path = tmp_path / "x.jsonl"
    t.snapshot().export(path)
    for line in path.read_text(encoding="utf-8").splitlines()[1:-1]:
        json.loads(line)  # every line is JSON on its own
    assert sorted(load(path)) == sorted(t)


@pytest.mark.parametrize(
    "odd",
    ['say "hi"', "back\\slash", "tab\there", "nul\x00", "é", "\U0001f600", "\ud800"],
)
def test_jsonl_subscriber_text_is_escaped_where_needed(odd: str, tmp_path: Path) -> None:
    """Plain ASCII subscribers are written as they are; one that needs escaping
    (or is not ASCII) among them is escaped, one with a lone surrogate is
    written as {"text": base64}, and every one comes back exact."""
    from cstrie.export.codec import value_from_json

    t = Trie("mqtt")
    for k in range(50):
        t.subscribe(f"a/{k}", f"plain-{k}")
    t.subscribe("a/odd", odd)
    t.subscribe("b/#", odd)
    path = tmp_path / "x.jsonl"
    t.snapshot().export(path)
    lines = path.read_bytes().splitlines()[1:-1]
    got = {value_from_json(json.loads(x)["subscriber"]) for x in lines}
    assert got == {odd} | {f"plain-{k}" for k in range(50)}
    assert sorted(load(path), key=repr) == sorted(t, key=repr)


# ---------------------------------------------- JSON Lines: the engine's reader
# Lines of exactly the exporter's form are parsed by cst_jsonl_scan; any other
# valid JSON (spacing, key order, number spellings) goes to the general reader.


def _scan(lines: list[str]) -> tuple[list[bytes], list[int], list[Any]] | None:
    from cstrie.export import jsonl as jsonl_format

    body = "".join(x + "\n" for x in lines).encode()
    got = jsonl_format._native_columns(memoryview(body), len(lines))
    if got is None:
        return None
    data, offsets, refs, values = got
    pats = [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(len(lines))]
    return pats, list(refs), values


def test_engine_reader_decodes_the_exporters_lines() -> None:
    lines = [
        '{"pattern":"a/b","subscriber":"x"}',
        '{"pattern":"a/\\u00e9\\/\\"q\\"\\\\","subscriber":"y\\ud83d\\ude00\\n"}',
        '{"pattern":"c/#","subscriber":-42}',
        '{"pattern":"d","subscriber":"\\u0078"}',  # "x" spelled another way: the same one
        '{"pattern":"e","subscriber":123456789012345678901234567890}',
        '{"pattern":"f","subscriber":0}',
        '{"pattern":"g","subscriber":"0"}',  # a string, not the integer 0
    ]
    got = _scan(lines)
    assert got is not None
    pats, refs, values = got
    assert pats == [b"a/b", 'a/é/"q"\\'.encode(), b"c/#", b"d", b"e", b"f", b"g"]
    assert values == ["x", "y\U0001f600\n", -42, 123456789012345678901234567890, 0, "0"]
    assert refs == [1, 2, 3, 1, 4, 5, 6]


@pytest.mark.parametrize(
    "line",
    [
        '{"pattern": "a","subscriber":"x"}',  # spacing
        '{"subscriber":"x","pattern":"a"}',  # key order
        '{"pattern":"a","subscriber":"x","more":1}',
        '{"pattern":"a","subscriber":{"bytes":"eA=="}}',  # bytes subscribers
        '{"pattern":"a","subscriber":1.0}',
        '{"pattern":"a","subscriber":-0}',
        '{"pattern":"a","subscriber":007}',
        '{"pattern":"a","subscriber":"\\ud800"}',  # a lone surrogate
        '{"pattern":"a\tb","subscriber":"x"}',  # a raw control character
        '{"pattern":"a","subscriber":"\\x"}',
        '{"pattern":"a","subscriber":"\\u12"}',
        '{"pattern":"a","subscriber":"x"} ',
        '{"pattern":"a","subscriber":"x"',
    ],
)
def test_engine_reader_leaves_other_lines_to_the_general_reader(line: str) -> None:
    assert _scan(['{"pattern":"ok","subscriber":"s"}', line]) is None


def test_hand_written_jsonl_loads_the_same_either_way() -> None:
    """The same pairs, once in the exporter's form and once spelled differently,
    load to the same trie (the second through the general reader)."""
    canonical = ['{"pattern":"a/+","subscriber":"x"}', '{"pattern":"b/#","subscriber":-0}']
    spaced = ['{"subscriber": "x", "pattern": "a/+"}', '{"pattern": "b/#", "subscriber": 0}']
    a = load(io.BytesIO(_jsonl_with(jsonl_header(), canonical[:1] + spaced[1:])))
    b = load(io.BytesIO(_jsonl_with(jsonl_header(), spaced)))
    assert sorted(a, key=repr) == sorted(b, key=repr) == [("a/+", "x"), ("b/#", 0)]


def test_engine_reader_numbers_many_subscribers_in_order() -> None:
    """Thousands of distinct subscribers (the reader's table grows several
    times), each seen again later: numbered in order of first appearance."""
    lines = [f'{{"pattern":"p/{i}","subscriber":"s{i % 1500}"}}' for i in range(4000)]
    lines += [f'{{"pattern":"q/{i}","subscriber":{i % 700}}}' for i in range(1400)]
    got = _scan(lines)
    assert got is not None
    pats, refs, values = got
    assert values == [f"s{k}" for k in range(1500)] + list(range(700))
    assert refs == [i % 1500 + 1 for i in range(4000)] + [1501 + i % 700 for i in range(1400)]
    assert pats[4321] == b"q/321"


@pytest.mark.parametrize("claimed", [0, 1, 3, 10**12])
def test_footer_count_is_checked_for_the_exporters_own_lines(claimed: int) -> None:
    """Lines in the exporter's form go to the engine's reader, which takes the
    footer's count of lines: a count that is off is still a clear error."""
    ok = ['{"pattern":"a/+","subscriber":"x"}', '{"pattern":"a/#","subscriber":2}']
    raw = _jsonl_with(jsonl_header(), ok, crc=False).replace(
        b'"pairs": 2', f'"pairs": {claimed}'.encode()
    )
    with pytest.raises(FormatError, match=f"footer says {claimed} pairs but the file has 2"):
        load(io.BytesIO(raw), format="jsonl")
    good = load(io.BytesIO(_jsonl_with(jsonl_header(), ok, crc=False)))
    assert sorted(good, key=repr) == [("a/#", 2), ("a/+", "x")]


@pytest.mark.parametrize("claimed", ['"2"', "-1", "2.0", "true"])
def test_footer_count_must_be_a_count(claimed: str) -> None:
    ok = ['{"pattern":"a/+","subscriber":"x"}', '{"pattern":"a/#","subscriber":2}']
    raw = _jsonl_with(jsonl_header(), ok, crc=False)
    raw = raw.replace(b'"pairs": 2', f'"pairs": {claimed}'.encode())
    with pytest.raises(FormatError, match="pair count"):
        load(io.BytesIO(raw), format="jsonl")


def test_gather_takes_items_by_number_with_arrow_offsets() -> None:
    from array import array

    from cstrie import _binding as nb

    b, b_end = _table([b"", b"one", b"\xc3\xbc", b""])
    data, offsets = nb.gather(b, b_end, array("Q", [1, 2, 2, 0, 3, 1]))
    assert bytes(data) == b"one\xc3\xbc\xc3\xbcone"
    assert list(offsets) == [0, 3, 5, 7, 7, 7, 10]
    data, offsets = nb.gather(b, b_end, array("Q", [0, 3]))  # only empty items
    assert bytes(data) == b"" and list(offsets) == [0, 0, 0]
    assert nb.gather(b, b_end, array("Q")) == (bytearray(), array("q", [0]))
    with pytest.raises(ValueError, match="invalid argument"):
        nb.gather(b, b_end, array("Q", [4]))


@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
def test_parquet_str_subscribers_across_chunks_round_trip(tmp_path: Path) -> None:
    """More pairs than one engine chunk, str subscribers (ASCII and not) first
    seen in different chunks: each row keeps its own subscriber."""
    from cstrie.export.source import CHUNK_PAIRS

    t = Trie("mqtt")
    n = CHUNK_PAIRS * 2 + 100
    for i in range(n):
        t.subscribe(f"a/{i}", f"s{i % 300}" if i % 7 else f"ü{i % 50}")
    path = tmp_path / "x.parquet"
    t.snapshot().export(path)
    assert sorted(load(path)) == sorted(t)


def test_engine_reader_repeats_next_to_each_other() -> None:
    """Repeated subscribers right after each other, and of other lengths than
    their neighbours: each keeps its number and the distinct bytes stay whole."""
    subs = ['"aa"', '"aa"', '"b"', '"aa"', '"ccc"', "-7", '"b"', '"ccc"', "-7", '"dddd"', '"dddd"']
    lines = [f'{{"pattern":"p/{i}","subscriber":{s}}}' for i, s in enumerate(subs)]
    got = _scan(lines)
    assert got is not None
    _, refs, values = got
    assert values == ["aa", "b", "ccc", -7, "dddd"]
    assert refs == [1, 1, 2, 1, 3, 4, 2, 3, 4, 5, 5]


# ------------------------------------------------ share-group memberships
# Rules (docs/export.md "Format versions", cstrie/export/meta.py): every format
# (version 2) stores each membership as (filter, member, group name) and each
# group's policy; loading recreates them exactly, beside the ordinary pairs.
GROUP_NAMES = ["g", "grüppe", "日本", "workers-1"]


def record_key(item: tuple[Any, Any]) -> tuple[str, str, str, str]:
    """Sort/compare key of an iteration item: (pattern, group or "", subscriber
    type, repr); group names are never empty, so "" means an ordinary pair."""
    p, s = item
    if isinstance(p, Shared):
        return (p.pattern, p.group, type(s).__name__, repr(s))
    return (p, "", type(s).__name__, repr(s))


def records(trie: Iterable[tuple[Any, Any]]) -> list[tuple[str, str, str, str]]:
    return sorted(map(record_key, trie))


def grouped_trie(d: Dialect, seed: object, n: int = 300) -> Trie:
    """Random ordinary pairs and memberships, with the edge cases every dialect
    has: a member that is also an ordinary subscriber of the same filter,
    memberships on the many-level wildcard alone, non-ASCII group names, one
    member in several groups on one filter; and in AMQP the zero-word pattern."""
    rng = random.Random(f"groups-{seed}")
    trie = Trie.from_pairs(random_pairs(d, rng, n), d)
    members: list[Hashable] = ["w1", "w2", 3, b"\x00m", "ü-member", "alice", 1]
    filters = [oracle.random_pattern(rng, d, WORDS, 4) for _ in range(25)]
    filters += [d.multi] if d.multi is not None else []
    filters += [""] if d is AMQP else []
    for f in filters:
        assert oracle.valid_pattern(d, f), f
        for g in rng.sample(GROUP_NAMES, rng.randint(1, 3)):
            for m in rng.sample(members, rng.randint(1, 3)):
                trie.subscribe(f, m, group=g)
    both = filters[0]
    trie.subscribe(both, "alice")  # ordinary subscriber and member, one filter
    trie.subscribe(both, "alice", group="g")
    trie.subscribe(both, "alice", group="grüppe")
    assert trie.stats()["shared_subscriptions"] > len(filters)
    return trie


def same_routes(a: Trie, b: Trie, d: Dialect, rng: random.Random) -> None:
    """Both tries deliver the same: the same ordinary subscribers, a member
    for the same groups, each chosen among that group's members on a matching
    filter (the candidates are read from ``a``'s memberships)."""
    shared = [(p, s) for p, s in a if isinstance(p, Shared)]
    for _ in range(40):
        topic = oracle.random_topic(rng, d, WORDS, 4)
        plain_a, picks_a = a.route_by_group(topic)
        plain_b, picks_b = b.route_by_group(topic)
        assert sorted(map(repr, plain_a)) == sorted(map(repr, plain_b)), topic
        assert picks_a.keys() == picks_b.keys(), topic
        for g, member in picks_b.items():
            candidates = {
                repr(s) for p, s in shared if p.group == g and oracle.matches(d, p.pattern, topic)
            }
            assert repr(member) in candidates, (topic, g)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dname", sorted(DIALECTS))
def test_groups_round_trip_every_format_and_dialect(fmt: str, dname: str, tmp_path: Path) -> None:
    d = DIALECTS[dname]
    trie = grouped_trie(d, f"{fmt}-{dname}")
    trie.set_group_policy("grüppe", "sticky")
    trie.set_group_policy("日本", "random")
    path = tmp_path / f"g{SUFFIX[fmt]}"
    assert export(trie.snapshot(), path) == len(trie)
    assert read_header(path)["version"] == VERSION == 2
    loaded = load(path)
    assert loaded.dialect == d
    assert records(loaded) == records(trie)
    assert len(loaded) == len(trie)
    assert loaded.stats()["shared_subscriptions"] == trie.stats()["shared_subscriptions"]
    assert {g: loaded.group_policy(g) for g in GROUP_NAMES} == {
        "g": "round-robin",
        "grüppe": "sticky",
        "日本": "random",
        "workers-1": "round-robin",
    }
    same_routes(trie, loaded, d, random.Random(dname))
    loaded.check_invariants()
    # memberships are ordinary, writable memberships of the new trie
    p, s = next((p, s) for p, s in trie if isinstance(p, Shared))
    assert loaded.unsubscribe(p, s) is True
    assert loaded.unsubscribe(p, s) is False


@pytest.mark.parametrize("fmt", FORMATS)
def test_group_edge_cases_round_trip(fmt: str) -> None:
    """The zero-word AMQP pattern, '#', non-ASCII names, a member that is also
    an ordinary subscriber, a trie of memberships only, and one of ordinary
    pairs only next to an emptied group."""
    t = Trie("amqp")
    t.subscribe("", "m", group="日本")
    t.subscribe("", "m")
    t.subscribe("#", "m", group="grüppe")
    t.subscribe("#", b"\xff", group="grüppe")
    t.subscribe("a.*", 10**30, group="g")
    loaded = load(io.BytesIO(_export_bytes(t, fmt)), format=fmt)
    assert (
        records(loaded)
        == records(t)
        == [
            ("", "", "str", "'m'"),
            ("", "日本", "str", "'m'"),
            ("#", "grüppe", "bytes", "b'\\xff'"),
            ("#", "grüppe", "str", "'m'"),
            ("a.*", "g", "int", repr(10**30)),
        ]
    )
    # "" matches "" and "#": the ordinary delivery, and one per group
    plain, picks = loaded.route_by_group("")
    assert plain == ["m"] and picks.keys() == {"日本", "grüppe"} and picks["日本"] == "m"
    assert picks["grüppe"] in ("m", b"\xff")
    assert loaded.lookup("") == ["m"]
    only = Trie("mqtt")
    only.subscribe("$share/g/sensors/#", "w")
    back = load(io.BytesIO(_export_bytes(only, fmt)), format=fmt)
    assert list(back) == [(Shared("sensors/#", "g"), "w")] and back.lookup("sensors/x") == []
    assert back.route("sensors/x") == ["w"]
    emptied = Trie("nats")
    emptied.subscribe("a.>", "w", group="q")
    emptied.subscribe("a.b", "plain")
    emptied.unsubscribe("a.>", "w", group="q")
    assert list(load(io.BytesIO(_export_bytes(emptied, fmt)), format=fmt)) == [("a.b", "plain")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_groups_with_encode_and_progress(fmt: str, tmp_path: Path) -> None:
    """A member that is no ordinary subscriber goes through ``encode`` too (the
    export's subscriber check covers members), and progress counts memberships."""
    t = Trie("mqtt")
    t.subscribe("a/+", Client("plain", 1))
    t.subscribe("a/+", Client("only-member", 2), group="g")
    t.subscribe("b/#", Client("plain", 1), group="g")
    seen: list[tuple[int, int]] = []
    path = tmp_path / f"e{SUFFIX[fmt]}"
    n = export(t, path, encode=enc, progress=lambda d, total: seen.append((d, total)))
    assert n == 3 and seen[-1] == (3, 3)
    loaded = load(path, decode=dec)
    assert sorted(map(repr, loaded)) == sorted(map(repr, t))
    bad = Trie("mqtt")
    bad.subscribe("x", object(), group="g")
    with pytest.raises(TypeError, match="object"):
        export(bad, tmp_path / f"bad{SUFFIX[fmt]}")
    assert not (tmp_path / f"bad{SUFFIX[fmt]}").exists()


@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
def test_parquet_group_column() -> None:
    """Membership rows carry their group, ordinary rows null; a trie family
    without share groups writes no group column at all."""
    import pyarrow.parquet as pq

    plain = Trie.from_pairs([("a/b", "x")], MQTT)
    assert pq.read_table(io.BytesIO(_export_bytes(plain, "parquet"))).column_names == [
        "pattern",
        "subscriber",
    ]
    t = Trie.from_pairs([("a/b", "x")], MQTT)
    t.subscribe("a/+", "x", group="日本")
    rows = pq.read_table(io.BytesIO(_export_bytes(t, "parquet"))).to_pylist()
    assert sorted(rows, key=lambda r: r["pattern"]) == [
        {"pattern": "a/+", "subscriber": "x", "group": "日本"},
        {"pattern": "a/b", "subscriber": "x", "group": None},
    ]


def test_jsonl_membership_lines() -> None:
    """Memberships are lines with a "group", after the ordinary pairs; the
    footer counts them and names each group's policy."""
    t = Trie.from_pairs([("a.b", "x")], NATS)
    t.subscribe("a.*", "w1", group="billing")
    t.set_group_policy("billing", "sticky")
    lines = _export_bytes(t, "jsonl").decode().splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert [json.loads(x) for x in lines[1:-1]] == [
        {"pattern": "a.b", "subscriber": "x"},
        {"pattern": "a.*", "subscriber": "w1", "group": "billing"},
    ]
    end = json.loads(lines[-1])["end"]
    assert {k: v for k, v in end.items() if k != "crc32"} == {
        "pairs": 2,
        "memberships": 1,
        "policies": {"billing": "sticky"},
    }


def test_jsonl_hand_edited_memberships() -> None:
    """Any line order, "group": null for an ordinary pair, and a footer without
    the membership count or the policies (then every group is round-robin)."""
    h = jsonl_header(version=2, dialect=dataclasses.asdict(NATS))
    lines = [
        '{"group": "q", "subscriber": "w1", "pattern": "a.*"}',
        '{"pattern": "a.b", "subscriber": "x", "group": null}',
        '{"pattern": ">", "subscriber": 2, "group": "日本"}',
        '{"pattern": "a.b", "subscriber": 2}',
    ]
    t = load(io.BytesIO(_jsonl_with(h, lines, crc=False)))
    assert records(t) == [
        (">", "日本", "int", "2"),
        ("a.*", "q", "str", "'w1'"),
        ("a.b", "", "int", "2"),
        ("a.b", "", "str", "'x'"),
    ]
    assert t.group_policy("q") == "round-robin"
    cases = {
        "version 1": _jsonl_with(
            jsonl_header(), ['{"pattern": "a", "subscriber": 1, "group": "g"}']
        ),
        "group is not a string": _jsonl_with(h, ['{"pattern": "a", "subscriber": 1, "group": 7}']),
        "says 3 memberships but the file has 2": _jsonl_with(h, lines).replace(
            b'"pairs": 4', b'"pairs": 4, "memberships": 3'
        ),
        "invalid membership count": _jsonl_with(h, lines).replace(
            b'"pairs": 4', b'"pairs": 4, "memberships": 5'
        ),
        "group membership 0": _jsonl_with(  # NATS queue names have no whitespace
            h, ['{"pattern": "a", "subscriber": 1, "group": "two words"}']
        ),
        "invalid group policies": _jsonl_with(h, lines[:1]).replace(
            b'"pairs": 1', b'"pairs": 1, "policies": {"q": "fastest"}'
        ),
        "policies name the groups": _jsonl_with(h, lines[:1]).replace(
            b'"pairs": 1', b'"pairs": 1, "policies": {"other": "sticky"}'
        ),
    }
    for message, raw in cases.items():
        raw = re.sub(rb', "crc32": \d+', b"", raw)  # hand-edited: no checksum
        with pytest.raises(FormatError, match=message):
            load(io.BytesIO(raw), format="jsonl")


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_every_truncation_and_flip_of_a_file_with_groups_is_detected(fmt: str) -> None:
    t = Trie("amqp")
    t.subscribe("a.*", "x")
    t.subscribe("", "m", group="日本")
    t.subscribe("#", 5, group="g")
    t.set_group_policy("g", "sticky")
    raw = _export_bytes(t, fmt)
    assert records(load(io.BytesIO(raw))) == records(t)
    for cut in range(len(raw)):
        must_fail(raw[:cut], fmt)
    for pos in range(len(raw)):
        for mask in (0x01, 0x80):
            bad = bytearray(raw)
            bad[pos] ^= mask
            must_fail(bytes(bad), fmt)


def test_binary_membership_checks_behind_a_valid_checksum() -> None:
    """Crafted version 2 files: references outside the tables, bad names."""
    t = Trie("nats")
    t.subscribe("a.*", "w", group="q")
    raw = _export_bytes(t, "binary")
    body = raw[:-4]
    shar = body.index(b"SHAR")
    n, d = struct.unpack_from("<QQ", body, shar + 4)
    assert (n, d) == (1, 3)
    refs_at = shar + 20 + 8  # after the section header and one end offset
    name_at = len(body) - 24 - 1  # the group table's blob ends before the trailer
    assert body[name_at : name_at + 1] == b"q"
    grps = body.rindex(b"GRPS")
    cases = {
        "outside 1..1": body[:refs_at] + struct.pack("<Q", 9) + body[refs_at + 8 :],
        "group outside": body[: refs_at + 8] + struct.pack("<Q", 2) + body[refs_at + 16 :],
        # a NATS queue name has no whitespace
        "group membership 0": body[:name_at] + b" " + body[name_at + 1 :],
        "policy code": body[: grps + 20] + b"\x07" + body[grps + 21 :],
    }
    for message, crafted in cases.items():
        assert crafted != body, message
        with pytest.raises(FormatError, match=message):
            load(io.BytesIO(_with_crc(crafted)), format="binary")


# ------------------------------------------------------- format versions
#: The last commit whose exporters wrote format version 1 (the reader and the
#: writer before share groups were stored).
V1_COMMIT = "9d64d1c"


@pytest.fixture(scope="module")
def v1() -> Any:
    """The version 1 ``cstrie.export`` package, taken from git history and
    imported as ``cstrie_v1_export`` (its own imports redirected to it), over
    today's engine and ``Trie``."""
    import importlib

    with old_export_package(V1_COMMIT, "cstrie_v1_export") as mod:
        assert (Path(mod.__file__).parent / "meta.py").exists()
        assert importlib.import_module("cstrie_v1_export.meta").VERSION == 1
        yield mod


@pytest.mark.parametrize("fmt", FORMATS)
def test_old_reader_refuses_new_files(v1: Any, fmt: str, tmp_path: Path) -> None:
    """A cstrie that reads version 1 meets a version 2 file (with groups or
    without): its loader and read_header raise its FormatError saying to upgrade,
    for every format; so it never loads a file and silently drops memberships."""
    old_error = importlib_attr("cstrie_v1_export.errors", "FormatError")
    plain = Trie.from_pairs([("a/+", "x")], MQTT)
    grouped = Trie.from_pairs([("a/+", "x")], MQTT)
    grouped.subscribe("$share/g/a/#", "w")
    for trie in (plain, grouped):
        path = tmp_path / f"new{SUFFIX[fmt]}"
        export(trie, path)
        with pytest.raises(old_error, match="version 2 is newer than this cstrie reads"):
            v1.load(path)
        with pytest.raises(old_error, match="upgrade cstrie"):
            v1.read_header(path)
        # the old reader works: the same trie, written by the old writer, loads
        old_path = tmp_path / f"old{SUFFIX[fmt]}"
        v1.export(trie, old_path)
        assert records(v1.load(old_path)) == records(plain)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dname", sorted(DIALECTS))
def test_version_1_files_still_load(v1: Any, fmt: str, dname: str, tmp_path: Path) -> None:
    """Files the version 1 writer wrote load as they did: same dialect and pairs,
    no memberships."""
    d = DIALECTS[dname]
    trie = Trie.from_pairs(random_pairs(d, random.Random(dname), 300), d)
    path = tmp_path / f"v1{SUFFIX[fmt]}"
    v1.export(trie, path)
    assert read_header(path)["version"] == 1
    loaded = load(path)
    assert loaded.dialect == d and records(loaded) == records(trie)
    assert loaded.stats()["shared_subscriptions"] == 0


def importlib_attr(module: str, name: str) -> Any:
    import importlib

    return getattr(importlib.import_module(module), name)


def test_version_1_check_refuses_version_2() -> None:
    """Without git history: the version 1 readers' check (a copy of meta.py's
    check_meta and the binary header's u16 test at V1_COMMIT) refuses what
    this cstrie writes in every format."""

    def v1_check(meta: dict[str, Any], u16: int | None) -> None:
        if u16 is not None and u16 > 1:
            raise FormatError(f"binary format version {u16} is newer than this cstrie reads")
        version = meta.get("version")
        if type(version) is not int or version < 1:
            raise FormatError(f"invalid format version {version!r}")
        if version > 1:
            raise FormatError(f"format version {version} is newer than this cstrie reads")

    raw = _export_bytes(Trie(), "binary")
    (u16,) = struct.unpack_from("<H", raw, 8)
    (meta_len,) = struct.unpack_from("<I", raw, 12)
    with pytest.raises(FormatError, match="version 2 is newer"):
        v1_check(json.loads(raw[16 : 16 + meta_len]), u16)
    with pytest.raises(FormatError, match="version 2 is newer"):
        v1_check(json.loads(raw[16 : 16 + meta_len]), None)
    with pytest.raises(FormatError, match="version 2 is newer"):
        v1_check(json.loads(_export_bytes(Trie(), "jsonl").splitlines()[0]), None)


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_file_from_before_share_prefix_loads_without_it(fmt: str) -> None:
    """A file written before Dialect.share_prefix existed has no such field: it
    loads with share_prefix None, so its "$share/g/x" filters stay the ordinary
    filters they were (not memberships)."""
    old_rules = dataclasses.replace(MQTT, share_prefix=None)
    old = Trie.from_pairs([("$share/g/x", "a"), ("x", "b")], old_rules)
    raw = _export_bytes(old, fmt)
    if fmt == "jsonl":
        lines = raw.decode().splitlines()
        header = json.loads(lines[0])
        header["version"] = 1
        del header["dialect"]["share_prefix"]
        raw = _jsonl_with(header, lines[1:-1])
    else:
        (meta_len,) = struct.unpack_from("<I", raw, 12)
        meta = json.loads(raw[16 : 16 + meta_len])
        meta["version"] = 1
        del meta["dialect"]["share_prefix"]
        new_meta = json.dumps(meta).encode()
        grps = raw.rindex(b"GRPS")
        body = raw[:8] + struct.pack("<HHI", 1, 0, len(new_meta)) + new_meta
        body += raw[16 + meta_len : grps] + raw[grps + 20 : -4]  # no (empty) GRPS table
        raw = _with_crc(body)
    assert b"share_prefix" not in raw
    loaded = load(io.BytesIO(raw))
    assert loaded.dialect == old_rules and loaded.dialect.share_prefix is None
    assert sorted(loaded) == [("$share/g/x", "a"), ("x", "b")]
    assert loaded.lookup("$share/g/x") == ["a"]
