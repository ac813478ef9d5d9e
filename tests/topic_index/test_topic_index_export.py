"""Export and load of a ``TopicIndex``, written from the rules (docs/export.md,
"Topic index files"; docs/topic-index.md, "Export, load and tree views"):

* ``export(index or snapshot, dest, format)`` writes the (topic, value) records
  of one O(1) snapshot, and ``load`` gives back a ``TopicIndex`` with the same
  dialect (every field), the same topics and the same values with their types;
* values ``str``, ``int`` and ``bytes`` are stored as they are (``bool`` and
  subclasses are not); anything else needs ``encode=`` (checked before a byte
  is written) and ``decode=`` (``keep_encoded`` keeps the stored values);
  values need not be distinct, and ``encode`` need not be one-to-one;
* a topic index file is its own kind (``"format": "cstrie-topics-<fmt>"``):
  ``load`` gives a ``TopicIndex`` for it and a ``Trie`` for a subscription
  file, and a reader from before topic files refuses it with a
  ``FormatError``;
* a truncated or corrupt file, or one whose topics are invalid or repeated,
  raises ``FormatError``;
* writers may carry on during an export: the file holds exactly the snapshot.

Every expected answer comes from a model (a dict) and the independent oracle
(``tests/support/oracle.py``), never from the exporter.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import json
import random
import re
import struct
import sys
import tempfile
import threading
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import oracle
import pytest
from helpers import old_export_package
from topic_index_helpers import expected_query

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.export import (
    FormatError,
    content_of,
    detect_format,
    export,
    keep_encoded,
    load,
    read_header,
)
from cstrie.topics import TopicIndex
from cstrie.trie import Trie


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
SUFFIX = {"jsonl": ".jsonl", "parquet": ".parquet", "binary": ".cstrie"}
WORDS = ["a", "b", "sensor", "x y", "ü", "日本", "$x", 'q"t', "b\\s"]
#: the commit before topic index files: its readers know only subscription files
BEFORE_TOPIC_FILES = "447e036"


def typed(reader: Any) -> dict[str, tuple[type, Any]]:
    """topic -> (type of the value, value): equal only when types match too."""
    return {t: (type(v), v) for t, v in reader.items()}


def to_bytes(reader: Any, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    export(reader, buf, format=fmt, **kw)
    return buf.getvalue()


def round_trip(reader: Any, fmt: str, **kw: Any) -> TopicIndex:
    decode = kw.pop("decode", None)
    loaded = load(io.BytesIO(to_bytes(reader, fmt, **kw)), format=fmt, decode=decode)
    assert type(loaded) is TopicIndex
    return loaded


def build(d: Dialect, model: dict[str, Any]) -> TopicIndex:
    idx = TopicIndex(d)
    for topic, value in model.items():
        idx.put(topic, value)
    return idx


def mixed_value(rng: random.Random, k: int) -> Any:
    return rng.choice(
        [
            f"v{k}",
            "ü日本",
            "",
            k,
            -k,
            0,
            2**200 + k,
            -(2**70),
            b"",
            bytes([k % 256, 0, 255]),
            "1",
            b"1",
            1,
        ]
    )


def same_dialect(a: Dialect, b: Dialect) -> None:
    assert dataclasses.asdict(a) == dataclasses.asdict(b)


# ------------------------------------------------------------ round trips
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dname", sorted(oracle.FUZZ_DIALECTS))
def test_round_trip_per_format_and_dialect(fmt: str, dname: str) -> None:
    d = oracle.FUZZ_DIALECTS[dname]
    rng = random.Random(f"{dname}-{fmt}")
    model: dict[str, Any] = {}
    for k in range(400):
        model[oracle.random_topic(rng, d, WORDS, 5)] = mixed_value(rng, k)
    idx = build(d, model)
    loaded = round_trip(idx, fmt)
    same_dialect(loaded.dialect, d)
    assert typed(loaded) == {t: (type(v), v) for t, v in model.items()}
    assert len(loaded) == len(model)
    loaded.check_invariants()
    # the loaded index answers queries as the model says
    for _ in range(20):
        f = oracle.random_pattern(rng, d, WORDS, 4)
        want = expected_query(d, model, f)
        assert dict(loaded.query(f)) == want, f
        assert loaded.count(f) == len(want), f
    # and it is a working index: writes go on (new ids do not clash)
    extra = oracle.random_topic(rng, d, ["fresh"], 2)
    loaded.put(extra, "new")
    assert loaded[extra] == "new"
    for topic, value in model.items():
        if topic != extra:
            assert loaded[topic] == value


@pytest.mark.parametrize("fmt", FORMATS)
def test_special_topics(fmt: str) -> None:
    """$ topics, empty levels, unicode, JSON-special and control characters,
    AMQP's empty topic and literal wildcard words."""
    mqtt = {
        "$SYS/broker/uptime": 1,
        "$share/g/x": "not a membership in a topic index",
        "a//b": "empty middle",
        "/": "two empty levels",
        "/lead": "leading empty",
        "trail/": "trailing empty",
        "ü/日本/🙂": "unicode",
        'q"uote/back\\slash': "json specials",
        "tab\there/new\nline/ctl\x01": "controls",
        " spaced /x": "spaces",
    }
    amqp = {"": "empty topic", "a.#": "#", "*.b": "*", "a..b": "..", ".": "."}
    nats = {"a.b.c": 1, "x": 2, "ü.日本": 3, "$JS.API": 4}
    for d, model in ((MQTT, mqtt), (AMQP, amqp), (NATS, nats)):
        loaded = round_trip(build(d, model), fmt)
        assert typed(loaded) == {t: (type(v), v) for t, v in model.items()}
    # the $ rule still holds on the loaded index, and AMQP '#' in a topic is
    # still a literal word
    loaded = round_trip(build(MQTT, mqtt), fmt)
    assert loaded.count("#") == len(mqtt) - 2
    assert sorted(t for t, _ in loaded.query("$SYS/#")) == ["$SYS/broker/uptime"]
    loaded = round_trip(build(AMQP, amqp), fmt)
    assert dict(loaded.query("a.*")) == {"a.#": "#"}
    assert loaded.count("#") == len(amqp)


@pytest.mark.parametrize("fmt", FORMATS)
def test_deepest_mqtt_topics(fmt: str) -> None:
    """65,535 levels (65,534 separators) and a 65,535-byte topic."""
    deep = "/" * 65534
    wide = "a/" * 32766 + "z"
    model = {deep: "deep", wide: b"wide", "x": 0}
    loaded = round_trip(build(MQTT, model), fmt)
    assert typed(loaded) == {t: (type(v), v) for t, v in model.items()}
    assert loaded.get(deep) == "deep"
    assert loaded.count("#") == 3


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_lone_surrogate_values(fmt: str) -> None:
    model = {"a": "\ud800", "b": "x\udfffy", "c": "\ud83d\ude00", "d": "\ud800\udc00"}
    loaded = round_trip(build(MQTT, model), fmt)
    assert typed(loaded) == {t: (type(v), v) for t, v in model.items()}


@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
def test_parquet_refuses_lone_surrogates_before_writing(tmp_path: Path) -> None:
    idx = build(MQTT, {"a": "ok", "b": "\ud800"})
    path = tmp_path / "t.parquet"
    with pytest.raises(TypeError, match="surrogate"):
        export(idx, path)
    assert not path.exists() and list(tmp_path.iterdir()) == []
    buf = io.BytesIO()
    with pytest.raises(TypeError):
        export(idx, buf, format="parquet")
    assert buf.getvalue() == b""


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_index(fmt: str) -> None:
    for d in (AMQP, MQTT, NATS, oracle.FUZZ_DIALECTS["limited"]):
        loaded = round_trip(TopicIndex(d), fmt)
        same_dialect(loaded.dialect, d)
        assert len(loaded) == 0 and list(loaded.items()) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_shared_values(fmt: str) -> None:
    """Many topics may share one value (unlike subscribers, values are not a
    set): all come back, and the file does not grow with copies of it."""
    big = "payload-" * 500
    model = {f"s/{k}": big if k % 2 else k % 3 for k in range(2000)}
    idx = build(MQTT, model)
    loaded = round_trip(idx, fmt)
    assert typed(loaded) == {t: (type(v), v) for t, v in model.items()}
    if fmt != "jsonl":  # a table of distinct values: the big one is stored once
        assert len(to_bytes(idx, fmt)) < 2000 * 40 + 10 * len(big)


@pytest.mark.parametrize("fmt", FORMATS)
def test_values_of_one_look_stay_apart(fmt: str) -> None:
    model = {"a": 1, "b": "1", "c": b"1", "d": 0, "e": "", "f": b"", "g": -1, "h": 2**14000 - 1}
    loaded = round_trip(build(AMQP, model), fmt)
    assert typed(loaded) == {t: (type(v), v) for t, v in model.items()}


class Flag(int):
    pass


class Text(str):
    pass


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "bad", [True, None, 1.5, Flag(3), Text("x"), bytearray(b"x"), {"k": 1}, 2**14001]
)
def test_unstorable_values_are_refused_before_writing(fmt: str, bad: Any, tmp_path: Path) -> None:
    idx = build(MQTT, {"a": "fine", "b/c": bad, "d": 3})
    buf = io.BytesIO()
    with pytest.raises(TypeError, match="value"):
        export(idx, buf, format=fmt)
    assert buf.getvalue() == b""
    path = tmp_path / f"t{SUFFIX[fmt]}"
    with pytest.raises(TypeError):
        export(idx, path)
    assert list(tmp_path.iterdir()) == []


def test_a_value_outside_the_snapshot_does_not_block_its_export() -> None:
    """The check is of the snapshot's values: a bad value put after the
    snapshot (still in the family's table) does not make the export fail."""
    idx = build(MQTT, {"a": "x", "b": 2})
    snap = idx.snapshot()
    idx["c"] = object()
    loaded = round_trip(snap, "binary")
    assert typed(loaded) == {"a": (str, "x"), "b": (int, 2)}
    with pytest.raises(TypeError):
        to_bytes(idx, "binary")


# ------------------------------------------------------------- codecs
@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_and_decode(fmt: str) -> None:
    shared = {"state": "on", "n": [1, 2]}
    model = {f"dev/{k}": {"k": k % 4, "tags": [k % 2]} for k in range(50)}
    model["shared/1"] = shared
    model["shared/2"] = shared
    idx = build(MQTT, model)
    raw = to_bytes(idx, fmt, encode=lambda v: json.dumps(v, sort_keys=True))
    if fmt != "parquet":  # (read_header needs a path for Parquet)
        assert read_header(io.BytesIO(raw), fmt)["value_codec"] == "user"
    with pytest.raises(ValueError, match="decode="):
        load(io.BytesIO(raw), format=fmt)
    loaded = load(io.BytesIO(raw), format=fmt, decode=json.loads)
    assert dict(loaded.items()) == model
    kept = load(io.BytesIO(raw), format=fmt, decode=keep_encoded)
    assert dict(kept.items()) == {t: json.dumps(v, sort_keys=True) for t, v in model.items()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_need_not_be_one_to_one(fmt: str) -> None:
    model = {f"t/{k}": {"k": k} for k in range(30)}
    loaded = round_trip(build(MQTT, model), fmt, encode=lambda v: v["k"] % 3, decode=keep_encoded)
    assert dict(loaded.items()) == {t: v["k"] % 3 for t, v in model.items()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_must_return_a_storable_value(fmt: str) -> None:
    idx = build(MQTT, {"a": 1, "b": 2})
    buf = io.BytesIO()
    with pytest.raises(TypeError, match="encode"):
        export(idx, buf, format=fmt, encode=lambda v: float(v))
    assert buf.getvalue() == b""


# ------------------------------------------------------------ snapshots
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_snapshot_exports_its_moment(fmt: str, tmp_path: Path) -> None:
    idx = build(NATS, {"a.b": 1, "a.c": "two"})
    snap = idx.snapshot()
    idx["a.b"] = "replaced"
    idx.remove("a.c")
    idx["a.d"] = b"added"
    path = tmp_path / f"s{SUFFIX[fmt]}"
    assert snap.export(path) == 2
    assert typed(load(path)) == {"a.b": (int, 1), "a.c": (str, "two")}
    assert idx.export(tmp_path / f"i{SUFFIX[fmt]}") == 2
    assert typed(load(tmp_path / f"i{SUFFIX[fmt]}")) == {
        "a.b": (str, "replaced"),
        "a.d": (bytes, b"added"),
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_while_writers_run(fmt: str, tmp_path: Path) -> None:
    """Writer threads put, replace and remove during exports (the export's
    progress callback, called between chunks, waits for their writes to land,
    and 40,000 fixed topics make several chunks).  Each writer keeps a sliding
    window of topics w{k}/{i} (put i, then remove i - 40) and one pair of
    topics it replaces together (r{k}/1 then r{k}/2 get the same counter): a
    state of the index has, per writer, a run of consecutive i without gaps
    and r{k}/2 equal to r{k}/1 or one behind.  A file mixing two moments
    breaks one of those.  An exported snapshot equals the snapshot exactly."""
    idx = TopicIndex(MQTT)
    for i in range(40_000):
        idx[f"base/{i % 100}/{i}"] = i % 7
    stop = threading.Event()
    started = [threading.Event() for _ in range(3)]
    ops = [0]

    def writer(k: int) -> None:
        i = 0
        while not stop.is_set():
            idx.put(f"w{k}/{i}", i)
            if i >= 40:
                assert idx.remove(f"w{k}/{i - 40}")
            idx.put(f"r{k}/1", i)
            idx.put(f"r{k}/2", i)
            ops[0] += 1
            i += 1
            if i == 100:
                started[k].set()

    def let_writers_run(done: int, total: int) -> None:
        target = ops[0] + 30
        for _ in range(500):
            if ops[0] >= target:
                return
            stop.wait(0.002)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    try:
        for e in started:
            assert e.wait(30)
        for round_ in range(3):
            path = tmp_path / f"r{round_}{SUFFIX[fmt]}"
            before = ops[0]
            export(idx, path, progress=let_writers_run)
            assert ops[0] > before + 30  # writes landed during the export
            loaded = load(path)
            assert sum(1 for t in loaded if t.startswith("base/")) == 40_000
            for k in range(3):
                window = sorted(int(t.split("/")[1]) for t in loaded if t.startswith(f"w{k}/"))
                assert window == list(range(window[0], window[0] + len(window))), window
                assert 40 <= len(window) <= 41
                for i in window:
                    assert loaded[f"w{k}/{i}"] == i
                assert loaded[f"r{k}/1"] - loaded[f"r{k}/2"] in (0, 1)
            snap = idx.snapshot()
            want = typed(snap)
            snap_path = tmp_path / f"s{round_}{SUFFIX[fmt]}"
            export(snap, snap_path, progress=let_writers_run)
            assert typed(load(snap_path)) == want
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_export_memory_is_flat_in_the_number_of_topics() -> None:
    """Streaming: the export holds one chunk and the distinct values, never a
    list of every (topic, value) (that alone would be well over 100 bytes a
    topic)."""
    peaks = {}
    for n in (30_000, 120_000):
        idx = TopicIndex(MQTT)
        for i in range(n):
            idx[f"s{i % 97}/d{i}"] = ("on", "off", 3)[i % 3]
        for fmt in ("binary", "jsonl"):
            gc.collect()
            tracemalloc.start()
            with open(Path(tempfile.gettempdir()) / "cstrie-topic-mem.out", "wb") as f:
                export(idx, f, format=fmt)
            peaks[(n, fmt)] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    (Path(tempfile.gettempdir()) / "cstrie-topic-mem.out").unlink()
    for fmt in ("binary", "jsonl"):
        small, large = peaks[(30_000, fmt)], peaks[(120_000, fmt)]
        assert large < small * 1.5 + 1_000_000, (fmt, small, large)
        assert large < 120_000 * 40, (fmt, large)


# ----------------------------------------------- kinds of file, old readers
@pytest.mark.parametrize("fmt", FORMATS)
def test_load_dispatches_on_the_kind_of_file(fmt: str, tmp_path: Path) -> None:
    idx = build(MQTT, {"a/b": "v"})
    trie = Trie(MQTT)
    trie.subscribe("a/+", "v")
    tpath, spath = tmp_path / f"t{SUFFIX[fmt]}", tmp_path / f"s{SUFFIX[fmt]}"
    export(idx, tpath)
    export(trie, spath)
    assert type(load(tpath)) is TopicIndex and type(load(spath)) is Trie
    assert read_header(tpath)["format"] == f"cstrie-topics-{fmt}"
    assert content_of(read_header(tpath)) == "topics"
    assert content_of(read_header(spath)) == "subscriptions"
    with open(tpath, "rb") as f:
        assert detect_format(f.read(16)) == fmt
    # by the file's first bytes too, from a stream without a name
    assert type(load(io.BytesIO(tpath.read_bytes()))) is TopicIndex


def test_a_topic_file_read_as_another_format_is_a_format_error() -> None:
    idx = build(MQTT, {"a/b": "v"})
    with pytest.raises(FormatError):
        load(io.BytesIO(to_bytes(idx, "binary")), format="jsonl")
    with pytest.raises(FormatError):
        load(io.BytesIO(to_bytes(idx, "jsonl")), format="binary")


@pytest.fixture(scope="module")
def old_reader() -> Any:
    """``cstrie.export`` as it was before topic index files, from git history
    (imported as ``cstrie_old_export``, over this checkout's engine and Trie)."""
    with old_export_package(BEFORE_TOPIC_FILES, "cstrie_old_export") as mod:
        files = Path(mod.__file__).parent
        assert (files / "meta.py").exists() and not (files / "topicfile.py").exists()
        yield mod


@pytest.mark.parametrize("fmt", FORMATS)
def test_readers_before_topic_files_refuse_them(old_reader: Any, fmt: str, tmp_path: Path) -> None:
    """The old loader (and read_header) raises its FormatError naming the
    format, for every format; it never loads topics as subscriptions.  And
    subscription files still go both ways between old and new."""
    import importlib

    old_error = importlib.import_module("cstrie_old_export.errors").FormatError
    idx = build(MQTT, {"a/b": "v", "c": 1})
    path = tmp_path / f"t{SUFFIX[fmt]}"
    export(idx, path)
    with pytest.raises(old_error, match=f"cstrie-topics-{fmt}"):
        old_reader.load(path)
    with pytest.raises(old_error, match=f"cstrie-topics-{fmt}"):
        old_reader.read_header(path)
    trie = Trie(MQTT)
    trie.subscribe("a/+", "v")
    old_path = tmp_path / f"old{SUFFIX[fmt]}"
    old_reader.export(trie, old_path)
    assert sorted(load(old_path)) == [("a/+", "v")]
    new_path = tmp_path / f"new{SUFFIX[fmt]}"
    export(trie, new_path)
    assert sorted(old_reader.load(new_path)) == [("a/+", "v")]


# ------------------------------------------------- truncated and corrupt
def small_index() -> TopicIndex:
    return build(AMQP, {"a.b.c": "alice", "a.#": 7, "b": b"\x00", "ü.x": "日本", "": -3, "z": 7})


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_every_truncation_is_detected(fmt: str) -> None:
    raw = to_bytes(small_index(), fmt)
    for cut in range(len(raw)):
        with pytest.raises(FormatError):
            load(io.BytesIO(raw[:cut]), format=fmt)


@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_every_flipped_byte_is_detected(fmt: str) -> None:
    raw = to_bytes(small_index(), fmt)
    for pos in range(len(raw)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(raw)
            bad[pos] ^= mask
            with pytest.raises(FormatError):
                load(io.BytesIO(bytes(bad)), format=fmt)


@pytest.mark.skipif(not _have_pyarrow(), reason="needs pyarrow")
def test_parquet_truncation_and_corruption() -> None:
    idx = small_index()
    raw = to_bytes(idx, "parquet")
    for cut in [*range(0, len(raw), 7), len(raw) - 1, len(raw) - 8]:
        with pytest.raises(FormatError):
            load(io.BytesIO(raw[:cut]), format="parquet")
    want = typed(idx)
    detected = 0
    positions = range(0, len(raw), 3)
    for pos in positions:
        bad = bytearray(raw)
        bad[pos] ^= 0xFF
        try:
            loaded = load(io.BytesIO(bytes(bad)), format="parquet")
        except FormatError:
            detected += 1
            continue
        # a byte nothing depends on (the writer's name, statistics) may flip
        # unnoticed: then the content is intact
        assert typed(loaded) == want and loaded.dialect == AMQP, pos
    assert detected > 0.8 * len(positions)


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def _binary_file(
    topics: list[bytes],
    refs: list[int],
    values: list[bytes],
    *,
    ends: list[int] | None = None,
    trailer: tuple[int, int, int] | None = None,
    dialect: Dialect = MQTT,
) -> bytes:
    """A binary topic index file with a valid CRC, laid out by hand from
    docs/export.md (so the layout is checked too)."""
    meta = json.dumps(
        {
            "format": "cstrie-topics-binary",
            "version": 1,
            "dialect": dataclasses.asdict(dialect),
            "value_codec": "native",
            "writer": "hand",
        }
    ).encode()
    data = b"".join(topics)
    if ends is None:
        ends, at = [], 0
        for t in topics:
            at += len(t)
            ends.append(at)
    out = b"\x89CSTRIE\n" + struct.pack("<HHI", 1, 0, len(meta)) + meta
    out += b"TOPS" + struct.pack("<QQ", len(refs), len(data))
    out += struct.pack(f"<{len(ends)}q", *ends) + struct.pack(f"<{len(refs)}Q", *refs) + data
    blob = b"".join(values)
    vends, at = [], 0
    for v in values:
        at += len(v)
        vends.append(at)
    out += b"VALS" + struct.pack("<QQ", len(values), len(blob))
    out += bytes(len(values)) + struct.pack(f"<{len(vends)}q", *vends) + blob  # kind 0: str
    total, size, sections = trailer if trailer is not None else (len(refs), len(data), 1)
    out += b"END\0" + struct.pack("<QQI", total, size, sections)
    return _with_crc(out)


def test_hand_made_binary_file_loads() -> None:
    raw = _binary_file([b"a/b", b"c"], [1, 1], [b"shared"])
    assert typed(load(io.BytesIO(raw))) == {"a/b": (str, "shared"), "c": (str, "shared")}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("invalid topic", "invalid"),
        ("repeated topic", "twice"),
        ("ref past the table", "outside"),
        ("ref zero", "outside"),
        ("offsets decrease", "decrease|cover"),
        ("offsets past the data", "cover|past"),
        ("not UTF-8", "UTF-8"),
        ("split character", "UTF-8"),
        ("trailer count", "trailer"),
        ("trailer bytes", "trailer"),
    ],
)
def test_binary_faults_behind_a_valid_checksum(case: str, message: str) -> None:
    """Files whose CRC is right but whose content is not (crafted or buggy):
    every fault is a FormatError naming it, and no index comes back."""
    raw = {
        "invalid topic": lambda: _binary_file([b"a/+", b"c"], [1, 1], [b"v"]),
        "repeated topic": lambda: _binary_file([b"a/b", b"a/b"], [1, 1], [b"v"]),
        "ref past the table": lambda: _binary_file([b"a", b"b"], [1, 2], [b"v"]),
        "ref zero": lambda: _binary_file([b"a", b"b"], [0, 1], [b"v"]),
        "offsets decrease": lambda: _binary_file([b"ab", b"c"], [1, 1], [b"v"], ends=[3, 2]),
        "offsets past the data": lambda: _binary_file([b"ab", b"c"], [1, 1], [b"v"], ends=[2, 9]),
        "not UTF-8": lambda: _binary_file([b"a\xff", b"c"], [1, 1], [b"v"]),
        "split character": lambda: _binary_file(
            ["ü".encode()[:1], "ü".encode()[1:] + b"x"], [1, 1], [b"v"]
        ),
        "trailer count": lambda: _binary_file([b"a", b"b"], [1, 1], [b"v"], trailer=(3, 2, 1)),
        "trailer bytes": lambda: _binary_file([b"a", b"b"], [1, 1], [b"v"], trailer=(2, 5, 1)),
    }[case]()
    with pytest.raises(FormatError, match=message):
        load(io.BytesIO(raw))


def _jsonl(lines: list[str], count: int | None = None, dialect: Dialect = MQTT) -> bytes:
    """A hand-edited JSON Lines topic file (no CRC in the footer)."""
    header = {
        "format": "cstrie-topics-jsonl",
        "version": 1,
        "dialect": dataclasses.asdict(dialect),
        "value_codec": "native",
    }
    n = len(lines) if count is None else count
    return "\n".join([json.dumps(header), *lines, json.dumps({"end": {"topics": n}})]).encode() + (
        b"\n"
    )


def test_hand_edited_jsonl_loads_with_any_spacing_and_key_order() -> None:
    raw = _jsonl(
        ['{ "value" : 1 , "topic" : "a/b" }', '{"topic": "c", "value": {"bytes": "AA=="}}']
    )
    assert typed(load(io.BytesIO(raw))) == {"a/b": (int, 1), "c": (bytes, b"\x00")}


@pytest.mark.parametrize(
    ("lines", "count", "message"),
    [
        (['{"topic": "a/+", "value": 1}'], None, "invalid"),
        (['{"topic": "a", "value": 1}', '{"topic": "a", "value": 2}'], None, "twice"),
        (['{"topic": "a", "value": 1.5}'], None, "line 2"),
        (['{"topic": "a", "value": true}'], None, "line 2"),
        (['{"topic": "a", "value": null}'], None, "line 2"),
        (['{"topic": "a", "value": {"bytes": "!!"}}'], None, "line 2"),
        (['{"topic": "a", "value": 1, "group": "g"}'], None, "line 2"),
        (['{"pattern": "a", "subscriber": 1}'], None, "line 2"),
        (['{"topic": 5, "value": 1}'], None, "line 2"),
        (['{"topic": "a", "value": 1}', "not json"], None, "line 3"),
        (['{"topic": "a", "value": 1}'], 2, "footer says 2"),
        (['{"topic": "\\ud800", "value": 1}'], None, "Unicode"),
    ],
)
def test_jsonl_faults(lines: list[str], count: int | None, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        load(io.BytesIO(_jsonl(lines, count)))


def test_a_newer_topic_format_version_is_refused() -> None:
    raw = bytearray(to_bytes(small_index(), "binary"))
    raw[8:10] = struct.pack("<H", 7)
    with pytest.raises(FormatError, match="newer"):
        load(io.BytesIO(_with_crc(bytes(raw[:-4]))))
    lines = to_bytes(small_index(), "jsonl").decode().splitlines()
    header = json.loads(lines[0])
    header["version"] = 2
    raw2 = "\n".join([json.dumps(header), *lines[1:-1], '{"end": {"topics": 6}}']) + "\n"
    with pytest.raises(FormatError, match="newer than this cstrie reads"):
        load(io.BytesIO(raw2.encode()))


def test_export_leaves_the_index_as_it_was() -> None:
    idx = small_index()
    before = typed(idx)
    to_bytes(idx, "binary")
    to_bytes(idx, "jsonl", encode=repr)
    assert typed(idx) == before
    idx.check_invariants()


# ----------------------------------------------------------------- the CLI
CLI_MODEL: dict[str, Any] = {
    "sensors/kitchen/temp": "21.5",
    "sensors/attic/temp": b"17",
    "$SYS/uptime": 42,
    "a//b": "21.5",
}


@pytest.fixture
def topic_file(tmp_path: Path) -> Path:
    path = tmp_path / "retained.cstrie"
    build(MQTT, CLI_MODEL).export(path)
    return path


@pytest.fixture
def subscription_file(tmp_path: Path) -> Path:
    trie = Trie(MQTT)
    trie.subscribe("sensors/+/temp", "dash")
    path = tmp_path / "subs.cstrie"
    trie.export(path)
    return path


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from cstrie.cli import main

    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_load_summarises_a_topic_index(
    topic_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(["load", str(topic_file), "--json"], capsys)
    assert code == 0
    summary = json.loads(out)
    assert summary["content"] == "topic index" and summary["format"] == "binary"
    assert summary["topics"] == 4 and summary["values"] == 3 and summary["dialect"] == "mqtt"
    code, out, _ = cli(["load", str(topic_file)], capsys)
    assert code == 0 and re.search(r"^content +topic index$", out, re.M)


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_export_converts_a_topic_index(
    fmt: str, topic_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path = tmp_path / f"converted{SUFFIX[fmt]}"
    code, _, err = cli(["export", str(topic_file), str(out_path)], capsys)
    assert code == 0 and "4 topics" in err
    loaded = load(out_path)
    assert typed(loaded) == {t: (type(v), v) for t, v in CLI_MODEL.items()}
    assert loaded.dialect == MQTT


def test_cli_export_keeps_encoded_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "enc.jsonl"
    build(MQTT, {"a": {"x": 1}, "b": {"x": 1}}).export(src, encode=json.dumps)
    dst = tmp_path / "enc.cstrie"
    assert cli(["export", str(src), str(dst)], capsys)[0] == 0
    assert read_header(dst)["value_codec"] == "user"
    assert dict(load(dst, decode=json.loads).items()) == {"a": {"x": 1}, "b": {"x": 1}}


def test_cli_load_writes_topic_text_that_retained_reads(
    topic_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "topics.tsv"
    assert cli(["load", str(topic_file), "-o", str(text), "-q"], capsys)[0] == 0
    lines = sorted(text.read_text().splitlines())
    assert lines == sorted(
        ["sensors/kitchen/temp\t21.5", "sensors/attic/temp\tb'17'", "$SYS/uptime\t42", "a//b\t21.5"]
    )
    code, out, _ = cli(
        ["retained", "--dialect", "mqtt", "-f", "sensors/#", "--sort", str(text)], capsys
    )
    assert code == 0 and out.splitlines()[0] == "sensors/attic/temp\tb'17'"


def test_cli_stats_of_a_topic_index(topic_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["stats", str(topic_file), "--json"], capsys)
    assert code == 0
    stats = json.loads(out)
    assert stats["content"] == "topic index" and stats["topics"] == 4
    assert stats["words_per_topic"] == {"2": 1, "3": 3}
    assert stats["top_values"][0] == {"value": "21.5", "topics": 2}
    assert {"word": "sensors", "topics": 2} in stats["top_first_words"]
    code, out, _ = cli(["stats", str(topic_file)], capsys)
    assert code == 0 and "words per topic" in out


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_retained_reads_a_topic_index_export(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"r{SUFFIX[fmt]}"
    build(MQTT, CLI_MODEL).export(path)
    code, out, _ = cli(["retained", "-f", "sensors/+/temp", "--sort", str(path)], capsys)
    assert code == 0
    assert out == "sensors/attic/temp\tb'17'\nsensors/kitchen/temp\t21.5\n"
    code, out, _ = cli(["retained", "-f", "#", "-f", "$SYS/#", "--count", str(path)], capsys)
    assert code == 0 and out == "#\t3\n$SYS/#\t1\n"
    code, out, _ = cli(["retained", "-f", "sensors/attic/+", "--json", str(path)], capsys)
    assert json.loads(out) == {
        "filter": "sensors/attic/+",
        "topic": "sensors/attic/temp",
        "value": {"bytes": "MTc="},
    }
    # no suffix: told by the first bytes
    bare = tmp_path / "bare"
    bare.write_bytes(path.read_bytes())
    assert cli(["retained", "-f", "#", "--count", str(bare)], capsys)[:2] == (0, "3\n")
    # the file's dialect rules; a different --dialect is an error
    code, out, err = cli(["retained", "--dialect", "amqp", "-f", "#", str(path)], capsys)
    assert code == 2 and out == "" and "does not match" in err
    assert cli(["retained", "--dialect", "mqtt", "-f", "#", "-c", str(path)], capsys)[0] == 0
    # an invalid filter is named, nothing written
    code, out, err = cli(["retained", "-f", "a/#/b", str(path)], capsys)
    assert code == 2 and out == "" and "--filter" in err


def test_cli_retained_reads_a_jsonl_export_from_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.jsonl"
    build(MQTT, CLI_MODEL).export(path)
    with open(path, "rb") as f:  # a real buffered stream, as a shell gives
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(f))
        code, out, _ = cli(["retained", "-f", "#", "--count"], capsys)
    assert (code, out) == (0, "3\n")


def test_cli_kinds_are_refused_where_they_do_not_fit(
    topic_file: Path, subscription_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topics_txt = tmp_path / "t.txt"
    topics_txt.write_text("a/b\n")
    code, out, err = cli(["match", str(topic_file), str(topics_txt)], capsys)
    assert code == 2 and out == "" and "topic index export" in err
    code, out, err = cli(["retained", "-f", "#", str(subscription_file)], capsys)
    assert code == 2 and out == "" and "subscription export" in err


def test_cli_corrupt_topic_exports_exit_2(
    topic_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = topic_file.read_bytes()
    bad = tmp_path / "bad.cstrie"
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0xFF
    for content in (raw[: len(raw) - 3], bytes(flipped)):
        bad.write_bytes(content)
        for args in (["load", str(bad)], ["retained", "-f", "#", str(bad)], ["stats", str(bad)]):
            code, out, err = cli(args, capsys)
            assert code == 2 and out == "" and "error" in err, args
        out_path = tmp_path / "never.jsonl"
        assert cli(["export", str(bad), str(out_path)], capsys)[0] == 2
        assert not out_path.exists()
