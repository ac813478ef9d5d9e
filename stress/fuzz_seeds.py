"""Write the seed corpus of the C fuzz target (``stress/fuzz_engine.c``).

    python stress/fuzz_seeds.py [SEED_DIR [KNOWN_DIR]]
                        # default: stress/fuzz_corpus and stress/fuzz_known

Each seed is a script in the harness's input format (see the comments in
``fuzz_engine.c``): a config byte (dialect, hash collisions, block builds),
then operations.  The seeds start the fuzzer from the hostile shapes that
matter: 65,535-level MQTT filters (``"/" * 65534``, ``"+/+/.../+"``,
``"a/.../#"``), one byte over the limit, ``#.#.#.a`` and 256-word AMQP keys,
NATS whitespace and empty tokens, invalid UTF-8 and U+0000, multi-character
separators, snapshots/copies/clears, bulk builds, batch lookups and
allocation failures.  The output is deterministic: rerunning rewrites the
same files.  ``known_bugs()`` are inputs that show engine bugs not fixed
yet; they go to their own directory (see ``make fuzz-known``).
"""

from __future__ import annotations

import sys
from pathlib import Path

# config byte
AMQP, MQTT, NATS, COLONS, ARROWS = range(5)
DEEP = 0x20  # texts of over 1,024 levels allowed
COLLIDE = 0x40
BLOCKS = 0x80

# word tokens (word_token in fuzz_engine.c)
EMPTY, A, B, AB, DOLLAR_X, DOLLAR, C, E_ACUTE, NUL, SPACE, TAB, BAD_FF, SURROGATE = range(13)
AA, B_SPACE_C, EMOJI, SINGLE, MULTI, A_SINGLE, MULTI_B, SEP_PART, X_SEP_END = (
    13,
    14,
    15,
    16,
    18,
    20,
    21,
    22,
    23,
)

# operations
SUB, UNSUB, BATCH, LOOKUP, HAS, MATCH, SUBSCRIBERS, LOOKUP_BATCH = 0, 3, 5, 6, 8, 9, 10, 11
VALIDATE, SNAPSHOT, FREE, CLEAR, ITERATE, CHECK, COMPACT, DUMP, BUILD = range(12, 21)
JSONL, TABLES, CROWD = 21, 22, 23
OOM = 0xF0

# ids (IDS[] in fuzz_engine.c): index 8 is id 0, 9 is UINT64_MAX
ID1, ID2, ID3, ID0, IDMAX = 0, 1, 2, 8, 9


def raw(data: bytes) -> bytes:
    assert len(data) < 256
    return bytes([0, len(data)]) + data


def words(*tokens: int) -> bytes:
    assert 1 <= len(tokens) <= 8
    return bytes([1, len(tokens) - 1, *tokens])


def deep(levels: int, word: int, last: int) -> bytes:
    """levels copies of word joined by the separator, the last one replaced."""
    assert 1 <= levels <= 65535
    if levels <= 256:
        return bytes([5, levels - 1, word, last])
    return bytes([2, levels & 0xFF, levels >> 8, word, last])


def ring(i: int) -> bytes:
    return bytes([3, i])


def pattern_of(i: int) -> bytes:
    return bytes([4, i])


def sub(text: bytes, ident: int = ID1, h: int = 0) -> bytes:
    return bytes([SUB, h]) + text + bytes([ident])


def unsub(text: bytes, ident: int = ID1, h: int = 0, existing: int | None = None) -> bytes:
    sel, which = (0, 0) if existing is None else (1, existing)
    return bytes([UNSUB, h]) + text + bytes([ident, sel, which])


def batch(*pairs: tuple[bytes, int], h: int = 0) -> bytes:
    out = bytes([BATCH, h, len(pairs) - 1])
    for text, ident in pairs:
        out += text + bytes([ident])
    return out


def lookup(text: bytes, h: int = 0, how: int = 0) -> bytes:
    return bytes([LOOKUP, h]) + text + bytes([how])


def has(text: bytes, h: int = 0) -> bytes:
    return bytes([HAS, h]) + text


def match(text: bytes, h: int = 0, how: int = 0) -> bytes:
    return bytes([MATCH, h]) + text + bytes([how])


def subscribers(text: bytes, h: int = 0, how: int = 0) -> bytes:
    return bytes([SUBSCRIBERS, h]) + text + bytes([how])


def lookup_batch(*texts: bytes, h: int = 0, how: int = 0, validity: int = 0xFF) -> bytes:
    return bytes([LOOKUP_BATCH, h, len(texts) - 1, how, validity]) + b"".join(texts)


def validate(text: bytes, pattern: bool = True, h: int = 0) -> bytes:
    return bytes([VALIDATE, h]) + text + bytes([int(pattern)])


def snapshot(readonly: bool = True, h: int = 0) -> bytes:
    return bytes([SNAPSHOT, h, int(readonly)])


def free(slot: int) -> bytes:
    return bytes([FREE, 0, slot - 1])


def clear(how: int, h: int = 0) -> bytes:
    return bytes([CLEAR, h, how])


def iterate(how: int = 0, h: int = 0) -> bytes:
    return bytes([ITERATE, h, how])


def check(h: int = 0) -> bytes:
    return bytes([CHECK, h])


def compact(h: int = 0) -> bytes:
    return bytes([COMPACT, h])


def dump(cap: int = 17, h: int = 0) -> bytes:
    return bytes([DUMP, h, cap])


def build(text: bytes, ident: int = ID1, h: int = 0) -> bytes:
    return bytes([BUILD, h]) + text + bytes([ident])


def jsonl_line(text: bytes, subscriber: str | int | None = None) -> bytes:
    """A line for jsonl(): the exporter's form with text as the pattern and a
    string subscriber (the last n bytes of text) or an integer (the digits
    given); None makes text a raw line."""
    if subscriber is None:
        return bytes([3]) + text
    if isinstance(subscriber, int):
        digits = str(abs(subscriber))
        first = int(digits[0]) | (0x80 if subscriber < 0 else 0)
        return bytes([1]) + text + bytes([len(digits) - 1, first, *map(int, digits[1:])])
    return bytes([0]) + text + bytes([len(subscriber)])


def jsonl(*lines: bytes, how: int = 0, h: int = 0) -> bytes:
    return bytes([JSONL, h, len(lines) - 1, how]) + b"".join(lines)


def tables(
    items: list[bytes], a_lens: list[int], refs: list[int], bulk: int = 0, seed: int = 0, h: int = 0
) -> bytes:
    """Gather/interleave/count/numbering over items and refs, then a numbering
    of bulk * 16 generated ids."""
    assert len(a_lens) == len(refs)
    head = bytes([TABLES, h, len(items), len(refs)])
    return head + b"".join(items) + bytes(a_lens + refs) + bytes([bulk, seed])


def crowd(text: bytes, count: int, stride: int = 2, seed: int = 0, h: int = 0) -> bytes:
    """count * 4 + 1 subscribers on one pattern, then every stride-th removed."""
    return bytes([CROWD, h]) + text + bytes([count, stride - 1, seed])


def oom(budget: int, op: bytes) -> bytes:
    return bytes([OOM, budget]) + op


def everything(text: bytes, topic: bytes, base: int = 0) -> bytes:
    """Every entry point over one pattern and one topic.  Both are read once
    (taking ring slots base and base + 1); later uses refer to the slots."""
    p, t = ring(base), ring(base + 1)
    return b"".join(
        [
            sub(text, ID1),
            sub(p, ID2),
            lookup(topic),
            lookup(t, how=1),
            lookup(t, how=2),
            has(t),
            match(t),
            match(t, how=7),
            subscribers(p),
            validate(p, True),
            validate(t, False),
            lookup_batch(t, p, t, how=5),
            snapshot(True),
            snapshot(False),
            unsub(p, ID1),
            iterate(0),
            iterate(15),
            check(0),
            check(1),
            check(2),
            dump(),
            build(p, ID3),
            clear(2),
            clear(1),
            check(0),
        ]
    )


def seeds() -> dict[str, bytes]:
    s: dict[str, bytes] = {}
    # ---- MQTT: 65,535 levels, the limits around them
    empty_levels = deep(65535, EMPTY, EMPTY)  # "/" * 65534
    s["mqtt-deep-empty-levels"] = bytes([MQTT | DEEP]) + everything(empty_levels, ring(0))
    s["mqtt-deep-plus"] = bytes([MQTT | DEEP]) + everything(
        deep(32768, SINGLE, SINGLE), deep(32768, A, A)
    )
    s["mqtt-deep-hash-last"] = bytes([MQTT | DEEP]) + everything(
        deep(32767, A, MULTI), deep(32768, A, A)
    )
    s["mqtt-over-limit"] = bytes([MQTT | DEEP]) + b"".join(
        [
            sub(deep(32768, A, A)),  # 65,535 bytes: valid
            sub(deep(32769, A, A)),  # 65,537 bytes: too long
            lookup(ring(1)),
            check(),
        ]
    )
    s["mqtt-one-byte-over"] = bytes([MQTT | DEEP]) + b"".join(
        [
            sub(deep(65535, EMPTY, AB)),  # 65,536 bytes
            lookup(ring(0)),
            subscribers(ring(0)),
            sub(deep(65535, EMPTY, A)),  # 65,535 bytes
            lookup(ring(1)),
            check(),
        ]
    )
    s["mqtt-dollar"] = bytes([MQTT]) + b"".join(
        [
            sub(words(MULTI)),
            sub(words(SINGLE, A)),
            sub(words(DOLLAR_X, MULTI), ID2),
            lookup(words(DOLLAR_X, A)),
            lookup(words(DOLLAR, A)),
            match(words(DOLLAR_X)),
            lookup(words(A, A)),
        ]
    )
    s["mqtt-wildcards-in-words"] = bytes([MQTT]) + b"".join(
        [
            sub(words(A_SINGLE)),
            sub(words(MULTI_B)),
            sub(words(MULTI, A)),
            lookup(words(A_SINGLE)),
            lookup(words(SINGLE)),
            has(words(MULTI)),
            subscribers(words(MULTI, A)),
            validate(words(A, MULTI, B)),
            check(),
        ]
    )
    s["mqtt-nul-utf8"] = bytes([MQTT]) + b"".join(
        [
            sub(raw(b"a/\x00")),
            sub(raw(b"a/\xff\xfe")),
            sub(raw(b"\xed\xa0\x80/+")),
            lookup(raw(b"a/\xff\xfe")),
            lookup(raw(b"\x00")),
            sub(raw(b"")),
            lookup(raw(b"")),
            build(raw(b"a/\xc3")),
            check(),
        ]
    )
    # ---- AMQP: "#" anywhere, 256 words
    s["amqp-hash-chain"] = bytes([AMQP]) + everything(
        words(MULTI, MULTI, MULTI, A), words(A, B, A, B, A)
    )
    s["amqp-hash-256"] = bytes([AMQP]) + b"".join(  # the worst case AMQP allows
        [sub(deep(256, MULTI, A)), lookup(deep(256, B, A)), match(deep(256, A, B)), check()]
    )
    s["amqp-257-words"] = bytes([AMQP]) + b"".join(
        [
            sub(deep(256, EMPTY, EMPTY)),
            sub(deep(257, EMPTY, EMPTY)),
            lookup(deep(257, A, A)),
            lookup(deep(256, EMPTY, EMPTY)),
            match(deep(256, MULTI, MULTI)),
            check(),
        ]
    )
    s["amqp-empty-and-dots"] = bytes([AMQP]) + b"".join(
        [
            sub(raw(b"")),
            sub(raw(b".")),
            sub(raw(b"a..b")),
            sub(raw(b"#")),
            sub(raw(b"*")),
            lookup(raw(b"")),
            lookup(raw(b"..")),
            lookup(raw(b"a..b")),
            lookup(raw(b"*.#")),
            match(raw(b".")),
            iterate(1),
            check(),
        ]
    )
    s["amqp-wild-literals"] = bytes([AMQP]) + b"".join(
        [
            sub(words(A_SINGLE, MULTI_B)),
            sub(words(SINGLE, MULTI, SINGLE)),
            lookup(words(SINGLE, MULTI)),
            lookup(words(A_SINGLE, MULTI_B)),
            lookup(words(A)),
            check(),
        ]
    )
    s["amqp-nul-invalid-utf8"] = bytes([AMQP]) + everything(raw(b"\x00.\xff"), raw(b"\x00.\xff"))
    # ---- NATS: whitespace, empty tokens, ">" last only
    s["nats-rules"] = bytes([NATS]) + b"".join(
        [
            sub(words(A, MULTI)),
            sub(words(SINGLE, B)),
            sub(words(MULTI)),
            sub(words(A, EMPTY, B)),
            sub(words(MULTI, A)),
            sub(words(B_SPACE_C)),
            sub(words(TAB)),
            sub(raw(b"a\x0bb")),  # vertical tab: allowed
            lookup(words(A, B)),
            lookup(words(A)),
            lookup(words(A, MULTI)),
            lookup(words(A, SINGLE)),
            lookup(raw(b"")),
            lookup(raw(b"a.")),
            lookup(raw(b"a b")),
            match(words(A, B, C)),
            check(),
        ]
    )
    s["nats-deep"] = bytes([NATS | DEEP]) + everything(deep(40000, A, MULTI), deep(40001, A, B))
    # ---- custom dialects with two-byte separators
    s["colons-separator-pieces"] = bytes([COLONS]) + b"".join(
        [
            sub(raw(b":::")),
            sub(raw(b"a::**::b")),
            sub(raw(b"**::?::**")),
            sub(raw(b"a:::b")),
            sub(raw(b"::")),
            lookup(raw(b":::")),
            lookup(raw(b"a::x::b")),
            lookup(raw(b"a:::b")),
            lookup(raw(b"")),
            match(raw(b"a::b")),
            iterate(0),
            check(),
        ]
    )
    s["colons-deep-128"] = bytes([COLONS]) + everything(deep(128, MULTI, A), deep(128, A, A))
    s["colons-129"] = bytes([COLONS]) + sub(deep(129, A, A)) + lookup(deep(129, A, A)) + check()
    s["arrows-rules"] = bytes([ARROWS]) + b"".join(
        [
            sub(raw(b"a->>>")),
            sub(raw(b"a->>>->b")),
            sub(raw(b"*->x")),
            sub(raw(b">>")),
            sub(raw(b"a*->b")),
            sub(raw(b"a->")),
            sub(raw(b"a b")),
            sub(raw(b"$x->*")),
            lookup(raw(b"$x->y")),
            lookup(raw(b"a->b")),
            lookup(raw(b"a->b->c")),
            lookup(raw(b"a->>b")),
            lookup(raw(b"x->y")),
            lookup(raw(b"a->\x00")),
            match(raw(b"a->b->c")),
            check(),
        ]
    )
    s["arrows-too-long"] = bytes([ARROWS | DEEP]) + sub(deep(2800, AB, A)) + sub(deep(2700, AB, A))
    # ---- hash collisions (2 hash bits): L-nodes
    s["collide-wide"] = bytes([AMQP | COLLIDE]) + b"".join(
        [
            *(sub(words(t, u), ID1 + (t % 3)) for t in (A, B, AB, C, AA, E_ACUTE) for u in (A, C)),
            lookup(words(A, A)),
            lookup(words(C, C)),
            unsub(words(AB, A), existing=3),
            unsub(words(A, A), existing=0),
            snapshot(True),
            unsub(words(B, C), existing=5),
            iterate(3),
            check(0),
            check(1),
        ]
    )
    s["collide-mqtt-deep"] = bytes([MQTT | COLLIDE | DEEP]) + everything(
        deep(5000, A, SINGLE), deep(5000, A, B)
    )
    # ---- snapshots, copies, clears
    s["snapshots-and-copies"] = bytes([AMQP]) + b"".join(
        [
            sub(words(A, B)),
            sub(words(A, MULTI), ID2),
            snapshot(True),
            snapshot(False),
            sub(words(C), ID3, h=2),
            unsub(words(A, B), h=0),
            lookup(words(A, B), h=1),
            lookup(words(A, B), h=2),
            sub(words(A), h=1),  # read-only
            clear(0, h=1),
            clear(2, h=0),
            free(1),
            snapshot(True),
            clear(2, h=0),
            clear(1, h=2),
            check(0),
            check(1),
            check(2),
            check(3),
        ]
    )
    s["clear-if-untouched"] = bytes([MQTT]) + b"".join(
        [sub(words(A, B)), snapshot(True), clear(2), check(0), iterate(0, h=1)]
    )
    # ---- bulk builds and batches
    s["build-blocks"] = bytes([AMQP | BLOCKS]) + b"".join(
        [
            batch((words(A), ID1), (words(A), ID1), (words(B, MULTI), ID2), (raw(b""), IDMAX)),
            batch((words(C), ID0), (words(A), ID3), (deep(300, A, A), ID1), (words(B), ID2)),
            build(words(SINGLE, SINGLE)),
            build(raw(b"\xff")),
            lookup(words(A), h=1),
            check(1),
        ]
    )
    s["lookup-batch-rows"] = bytes([AMQP]) + b"".join(
        [
            *(sub(words(MULTI), i) for i in range(8)),
            sub(words(A), ID1),
            lookup_batch(words(A), words(B), raw(b""), h=0, how=0x16, validity=0xAB),
            snapshot(True),
            lookup_batch(words(A), words(B), words(A), h=1, how=0x05, validity=0xFF),
            lookup_batch(words(A), deep(300, A, A), h=1, how=0x0E),
        ]
    )
    s["mqtt-lookup-batch-invalid"] = bytes([MQTT]) + b"".join(
        [
            sub(words(MULTI)),
            lookup_batch(raw(b""), words(SINGLE), raw(b"a\x00"), words(A), how=1),
        ]
    )
    # ---- out of memory at every step of a few operations
    mem = []
    for budget in (0, 1, 2, 3, 5, 8, 13, 21, 34):
        mem += [
            oom(budget, sub(words(A, B, C), ID1 + budget % 3)),
            oom(budget, snapshot(True)),
            oom(budget, unsub(words(A, B, C), ID1 + budget % 3)),
            free(1),
        ]
    s["oom-steps"] = bytes([AMQP]) + b"".join(mem) + check()
    mem = []
    for budget in (0, 2, 4, 6, 9, 12, 20, 30, 47):
        mem += [
            sub(words(A, B), ID1),
            sub(words(A, C), ID2),
            snapshot(True),
            oom(budget, unsub(words(A, B), ID1)),
            oom(budget, clear(budget % 3)),
            oom(budget, iterate(budget)),
            oom(budget, match(words(A, B), how=budget)),
            oom(budget, build(words(B))),
            oom(budget, batch((words(C), ID1), (words(A, B), ID2))),
            oom(budget, compact()),
            free(1),
            free(2),
            free(3),
        ]
    s["oom-mixed"] = bytes([MQTT | COLLIDE]) + b"".join(mem) + check()
    s["oom-deep"] = bytes([MQTT | DEEP]) + b"".join(
        [
            sub(deep(2000, A, A)),
            snapshot(True),
            *(oom(b, unsub(ring(0))) for b in (0, 1, 7, 30)),
            oom(0, sub(deep(2000, A, B))),
            *(oom(b, sub(ring(1))) for b in (3, 40)),
            check(),
        ]
    )
    # ---- odd ids and the empty input edge
    s["ids-extremes"] = bytes([NATS]) + b"".join(
        [sub(words(A), ID0), sub(words(A), IDMAX), lookup(words(A)), iterate(1), check()]
    )
    s["config-only"] = bytes([ARROWS])
    # ---- the JSON Lines scanner and the byte tables (file input)
    s["jsonl-lines"] = bytes([AMQP]) + b"".join(
        [
            jsonl(
                jsonl_line(words(A, SINGLE, MULTI), "ab"),
                jsonl_line(raw(b'q"uo\\te\x01\n\t'), 120),
                jsonl_line(raw("été".encode()), -7),
                jsonl_line(words(A), "ab"),
                jsonl_line(raw(b"\x00"), 0),
                how=0x3F,
            ),
            jsonl(
                jsonl_line(raw(b'{"pattern":"a","subscriber":-0}')),
                jsonl_line(raw(b'{"pattern":"\\ud800","subscriber":1}')),
                jsonl_line(raw(b'{"pattern":"\\ud83d\\ude00","subscriber":"x"}')),
                jsonl_line(raw(b'{"pattern":"a","subscriber":01}')),
                jsonl_line(raw(b'{"pattern":"a\\u00","subscriber":1}')),
            ),
            jsonl(jsonl_line(words(B), 5), how=0x80),  # no final newline
        ]
    )
    s["tables-refs"] = bytes([AMQP]) + b"".join(
        [
            tables([raw(b"abc"), raw(b""), words(A, B)], [1, 0, 3], [2, 0, 1]),
            tables([raw(b"x")], [2, 2], [0, 0xFF]),  # UINT64_MAX
            tables([], [1], [0], bulk=200, seed=3),
            tables([raw(b"y")], [], [], bulk=255, seed=4),
        ]
    )
    s["crowd-sets"] = bytes([MQTT]) + b"".join(
        [
            crowd(words(A, SINGLE), 255, stride=3, seed=1),  # 1,021 spread ids
            crowd(words(MULTI), 100, stride=1, seed=2),  # dense ids, all removed again
            snapshot(True),
            crowd(words(A, SINGLE), 60, stride=2, seed=7),
            lookup(words(A, B)),
            lookup(words(A, B), h=1),
            iterate(6),
            check(0),
            check(1),
        ]
    )
    # ---- inputs the fuzzer found (minimized), kept as regression seeds
    # a successful unsubscribe under an allocation budget may leave a tomb
    # (cstrie.h: cst_compact); the harness once checked it strictly
    s["found-oom-tomb-after-success"] = bytes.fromhex("0000000200010200e8fffeff0100000111")
    return s


def known_bugs() -> dict[str, bytes]:
    """Inputs that show an engine bug not fixed yet (``make fuzz-known``).

    They live apart from the seed corpus so that ``make fuzz-replay`` stays
    green; tests/native/test_native.py replays them as a strict xfail."""
    return {
        # An update meets the tomb that a cleanup left when it ran out of
        # memory, helps clean it, cannot allocate either, and restarts
        # forever (native/trie.c, update_level case K_TNODE -> RESTART)
        # instead of returning CST_ENOMEM: subscribe a/a/a, unsubscribe it
        # with 2 allocations left (succeeds, leaves a tomb), unsubscribe it
        # again with 2 allocations left (never returns).
        "update-over-tomb-out-of-memory": bytes([MQTT])
        + sub(words(A, A, A), ID1)
        + oom(2, unsub(ring(0), ID1))
        + oom(2, unsub(ring(0), ID1)),
    }


def main() -> None:
    here = Path(__file__).parent
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else here / "fuzz_corpus"
    known = Path(sys.argv[2]) if len(sys.argv) > 2 else here / "fuzz_known"
    for directory, items in ((out, seeds()), (known, known_bugs())):
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(items.items()):
            (directory / name).write_bytes(data)
        print(f"{len(items)} inputs in {directory}")


if __name__ == "__main__":
    main()
