"""Write the seed corpus of the cst_build fuzz target (``stress/fuzz_build.c``).

    python stress/fuzz_build_seeds.py [SEED_DIR]    # default: stress/fuzz_build_corpus

Each seed is one input in the harness's layout (see the top of
``fuzz_build.c``): a config byte, n, the data, n steps that cut it into
patterns, then damage ops.  The seeds are the offset tables a crafted file
can hold: up past the data and back down ([0, BIG, d]: a build that checked
each pair's offsets only as it reached the pair would read pattern 0 past
the data), negative first and middle entries, INT64_MIN and INT64_MAX, one
past the end, a bad offset after a pattern of invalid UTF-8, an empty table,
ids of 0 and past max_id, and valid tables (with duplicates) to build.
Rerunning rewrites the same files.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

AMQP, MQTT, NATS = 0, 1, 2
KEPT_NULL = 0x04
WORDS = 0x08  # data bytes index a word table (mostly valid patterns)

# damage ops (fuzz_build.c, damage())
SET, PAST_END, NEGATIVE, BELOW_PREV, RISE_AND_FALL, INT64_MAX, INT64_MIN, AT_END = range(8)
BAD_ID, DATA_BYTE = 8, 9


def seed(cfg: int, data: bytes, steps: list[int], *ops: bytes) -> bytes:
    """n = len(steps) pairs; pattern k is ``steps[k]`` bytes of ``data`` (or,
    with WORDS, ``data`` holds word indexes)."""
    n = len(steps)
    assert n < 48 and len(data) < 256
    return bytes([cfg, n, len(data)]) + data + bytes(steps) + b"".join(ops)


def op(kind: int, index: int, *rest: int) -> bytes:
    return bytes([kind, index, *rest])


def op64(kind: int, index: int, value: int) -> bytes:
    return bytes([kind, index]) + struct.pack("<q", value)


def seeds() -> dict[str, bytes]:
    ascii3 = b"a.bc.de.f"  # three patterns: "a.b", "c.d", "e.f"
    steps3 = [3, 3, 3]
    words = bytes([0, 3, 1, 3, 8, 3, 9])  # "a/b/é/日" (fuzz_build.c, WORDS)
    return {
        "valid-three": seed(AMQP, ascii3, steps3),
        "valid-duplicates": seed(AMQP, b"a.ba.ba.b", steps3),
        "valid-words": seed(MQTT | WORDS, words, [4, 0]),
        "valid-kept-null": seed(NATS | KEPT_NULL, ascii3, steps3),
        "valid-non-ascii": seed(MQTT, "é/ü/日".encode(), [3, 3, 3]),
        "empty-table": seed(AMQP, b"", []),
        "empty-table-offset-past": seed(AMQP, b"", [], op(PAST_END, 0, 0)),
        "empty-patterns": seed(AMQP, b"", [0, 0]),
        "rise-and-fall": seed(AMQP, ascii3, steps3, op64(SET, 1, 1 << 40), op64(SET, 2, 9)),
        "rise-and-fall-op": seed(AMQP, ascii3, steps3, op(RISE_AND_FALL, 1) + bytes(8)),
        "rise-one-past": seed(AMQP, ascii3, steps3, op64(SET, 1, 10), op64(SET, 2, 9)),
        "rise-int64-max": seed(AMQP, ascii3, steps3, op(INT64_MAX, 2)),
        "negative-first": seed(AMQP, ascii3, steps3, op(NEGATIVE, 0, 0)),
        "int64-min-first": seed(AMQP, ascii3, steps3, op(INT64_MIN, 0)),
        "negative-middle-non-ascii": seed(MQTT, "é/ü/日".encode(), [3, 3, 3], op(NEGATIVE, 1, 3)),
        "int64-min-middle": seed(AMQP, ascii3, steps3, op(INT64_MIN, 2)),
        "decrease": seed(AMQP, ascii3, steps3, op(BELOW_PREV, 2, 0)),
        "past-the-end-last": seed(AMQP, ascii3, steps3, op(PAST_END, 3, 0)),
        "at-the-end-middle": seed(AMQP, ascii3, steps3, op(AT_END, 1)),
        "bad-utf8-then-bad-offset": seed(AMQP, b"\xff.bc.de.f", steps3, op(PAST_END, 3, 2)),
        "bad-utf8-only": seed(AMQP, b"\xff.bc.de.f", steps3),
        "cut-inside-a-character": seed(MQTT, "é/ü".encode(), [1, 4]),
        "id-zero": seed(AMQP, ascii3, steps3, op(BAD_ID, 1, 1)),
        "id-past-max": seed(AMQP, ascii3, steps3, op(BAD_ID, 2, 0)),
        "data-byte-invalid": seed(MQTT, b"a/bc/de/f", steps3, op(DATA_BYTE, 0, 4, 0xC0)),
        "dialect-invalid-pattern": seed(MQTT, b"a/#/bc/d", [5, 3]),
        "many-damages": seed(
            AMQP | WORDS,
            bytes(range(40)),
            [3] * 12,
            op(RISE_AND_FALL, 4) + bytes(8),
            op(NEGATIVE, 7, 1),
            op(INT64_MAX, 11),
        ),
    }


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else Path(__file__).parent / "fuzz_build_corpus")
    out.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (out / name).write_bytes(data)
    print(f"{len(seeds())} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
