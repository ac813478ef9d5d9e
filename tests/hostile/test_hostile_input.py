"""Hostile input: every entry point of every dialect fed what a network client can send.

A broker puts cstrie between the network and its memory: every filter and topic
comes from a client.  Hypothesis draws texts that no well-behaved client sends:
random bytes decoded leniently (lone surrogates), arbitrary str with U+0000,
whitespace and non-characters, separators only, tens of thousands of levels,
very long words, wildcard tokens inside words and pieces of multi-character
separators.  They go to ``subscribe``, ``unsubscribe``, ``subscribers``,
``subscribe_many``, ``Trie.from_pairs``, ``lookup``, ``match``,
``has_subscribers``, ``lookup_many``, a ``Matcher``, the same reads on a
snapshot, and the pairs that get in go through ``export``/``cstrie.load`` (JSON
Lines, Parquet, binary), ``tree()``, ``stats()``, ``len()`` and iteration.

Every call must give one of two outcomes:

* the right answer: the trie accepts exactly the texts that
  ``Dialect.split_pattern``/``split_topic`` accept (and those agree with the
  independent rules of ``tests/support/oracle.py``), and its answers agree with the
  oracle's matcher;
* ``ValueError`` or ``TypeError`` (exactly these types), with the validator's
  message, after which the trie holds exactly what it held before
  (``sorted(t)``, ``len(t)``) and ``check_invariants()`` passes.

Any other exception, or a crash, fails.  The dialects are AMQP, MQTT, NATS and
two custom ones with two-character separators and tokens (one with every rule
on, one with a many-level wildcard allowed anywhere).

Sizes: ``CSTRIE_HOSTILE_EXAMPLES`` (default 10) examples per test, a few
seconds in all; set it to 1000 or more for a long run.  On a failure hypothesis
prints the falsifying example and a ``@reproduce_failure`` blob; a run replays
with ``--hypothesis-seed=N`` (``python -m pytest tests/hostile/test_hostile_input.py
--hypothesis-seed=N``).
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable, Hashable, Iterable
from functools import partial
from typing import Any

import oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie import AMQP, MQTT, NATS, Dialect
from cstrie.export import FormatError, export, load
from cstrie.trie import Trie

EXAMPLES = int(os.environ.get("CSTRIE_HOSTILE_EXAMPLES", "10"))

HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)

# Every rule on, with tokens and a separator of more than one character.
ARROWS = Dialect(
    name="arrows",
    separator="->",
    single="*",
    multi=">>",
    multi_min=1,
    multi_last_only=True,
    strict_wildcards=True,
    topic_wildcards=False,
    empty_topic=False,
    empty_words=False,
    dollar_rule=True,
    max_bytes=8192,
    forbid_nul=True,
    forbidden=" \t",
)
# A many-level wildcard allowed anywhere, with the level limit such a dialect needs.
COLONS = Dialect(name="colons", separator="::", single="?", multi="**", max_levels=64)

DIALECTS: dict[str, Dialect] = {
    "amqp": AMQP,
    "mqtt": MQTT,
    "nats": NATS,
    "arrows": ARROWS,
    "colons": COLONS,
}
NAMES = list(DIALECTS)

# The population each test starts from: small, valid, with wildcards.
BASE_WORDS = ["a", "b", "$x"]

# Beyond this many words the oracle's dynamic program is too slow; such pairs are
# matched by linear_match (only for last-only dialects, the only ones where such
# sizes are valid: AMQP and COLONS have level limits).
ORACLE_WORDS = 64


# ------------------------------------------------------------------ strategies
def _surrogates() -> st.SearchStrategy[str]:
    return st.integers(0xD800, 0xDFFF).map(chr)


def _words(d: Dialect) -> st.SearchStrategy[str]:
    sep = d.separator
    wild = [t for t in (d.single, d.multi) if t is not None]
    tokens = [
        "",
        "a",
        "b",
        "$",
        "$SYS",
        "\u00e9",
        "\x00",
        " ",
        "\t",
        "\n",
        "\r",
        "\f",
        "\x0b",
        "\u00a0",
        "\ufeff",
        "\ufffe",
        "\ud800",
        "\udfff",
        "\U0001f600",
        sep[0],
        sep[-1],
        "a" + sep[0],
        sep[-1] + "b",
        *wild,
        *(w + "x" for w in wild),
        *("x" + w for w in wild),
        *(w + w for w in wild),
    ]
    chars = st.characters(exclude_categories=()) | _surrogates()
    return st.sampled_from(tokens) | st.text(alphabet=chars, max_size=4)


def hostile_text(d: Dialect, *, deep: bool = True) -> st.SearchStrategy[str]:
    """Texts a hostile client could send as a filter or topic in dialect d."""
    sep = d.separator
    wild = [t for t in (d.single, d.multi) if t is not None]
    structured = st.lists(_words(d), max_size=8).map(sep.join)
    raw = st.binary(max_size=48)
    lenient = st.one_of(
        raw.map(lambda b: b.decode("utf-8", "surrogateescape")),
        raw.map(lambda b: b.decode("utf-8", "replace")),
        raw.map(lambda b: b.decode("latin-1")),
    )
    any_text = st.text(alphabet=st.characters(exclude_categories=()) | _surrogates(), max_size=40)
    separators = st.integers(0, 600).map(lambda k: sep * k)
    strategies = [structured, lenient, any_text, separators]
    if deep:
        level_word = st.sampled_from(["", "a", "$x", *wild])
        deep_text = st.builds(
            lambda k, w, last: sep.join([w] * (k - 1) + [last]),
            st.integers(1, 70_000),
            level_word,
            level_word,
        )
        separators_deep = st.integers(0, 70_000).map(lambda k: sep * k)
        long_word = st.builds(
            lambda k, c: c * k, st.integers(1, 70_000), st.sampled_from("a\u00e9")
        )
        strategies += [deep_text, separators_deep, long_word]
    return st.one_of(*strategies)


def valid_pattern(d: Dialect) -> st.SearchStrategy[str]:
    """Hostile texts that are valid patterns of d (two ways to find them)."""
    wild = [t for t in (d.single, d.multi) if t is not None]
    plain = st.sampled_from(["a", "b", "$x", "", "\u00e9", "\U0001f600", "\x0b", "\ufeff", *wild])
    structured = st.lists(plain, min_size=1, max_size=6).map(d.join)
    return st.one_of(structured, hostile_text(d, deep=False)).filter(
        lambda s: oracle.valid_pattern(d, s)
    )


def hostile_subscriber() -> st.SearchStrategy[Hashable]:
    """Subscribers a store must keep apart and give back exactly (and can export)."""
    text = st.text(alphabet=st.characters(exclude_categories=()) | _surrogates(), max_size=12)
    return st.one_of(
        text,
        st.integers(-(2**200), 2**200),
        st.binary(max_size=12),
        st.sampled_from([0, -1, 2**63, 2**64, "", b"", "1", b"1"]),
    )


# --------------------------------------------------------------------- helpers
Pairs = set[tuple[str, Hashable]]


def short(text: object) -> str:
    """repr(text), cut to a readable length for failure messages (texts may
    have 65,535 levels)."""
    r = repr(text)
    return r if len(r) <= 120 else f"{r[:100]}... ({len(r)} characters)"


def validator_error(split: Callable[[object], list[str]], text: object) -> Exception | None:
    """The exception the dialect's validator raises for text, or None."""
    try:
        split(text)
    except (ValueError, TypeError) as exc:
        return exc
    return None


def outcome(call: Callable[[], Any], want: Exception | None, what: str) -> Any:
    """Run call; it must fail exactly as the validator did (same type and
    message) or succeed exactly when the validator accepts.  Returns the result."""
    try:
        result = call()
    except Exception as exc:  # the point is to see any exception
        assert type(exc) in (ValueError, TypeError), (
            f"{what} raised {type(exc).__name__}: {short(exc)} (only ValueError/TypeError allowed)"
        )
        assert want is not None, f"{what} raised {short(exc)} for a text the validator accepts"
        assert type(exc) is type(want), f"{what}: {short(exc)}, the validator: {short(want)}"
        assert str(exc) == str(want), f"{what}: {short(exc)}, the validator: {short(want)}"
        return None
    assert want is None, f"{what} accepted a text the validator rejects ({short(want)})"
    return result


def state(t: Any) -> tuple[list[tuple[str, Hashable]], int]:
    return sorted(t, key=repr), len(t)


def pairs_of(t: Any) -> Pairs:
    listed = list(t)
    assert len(listed) == len(set(listed)) == len(t)
    return set(listed)


def linear_match(d: Dialect, pattern: str, topic: str) -> bool:
    """pattern matches topic, for a dialect whose many-level wildcard is last-only."""
    assert d.multi_last_only
    p, t = oracle.words_of(d, pattern), oracle.words_of(d, topic)
    if d.dollar_rule and p and t and p[0] in (d.single, d.multi) and t[0].startswith("$"):
        return False
    fixed = p[:-1] if p and p[-1] == d.multi else p
    if len(fixed) < len(p):
        if len(t) < len(fixed) + d.multi_min:
            return False
    elif len(t) != len(fixed):
        return False
    return all(w == d.single or w == v for w, v in zip(fixed, t, strict=False))


def matches(d: Dialect, pattern: str, topic: str) -> bool:
    """The oracle's answer; for long texts of a last-only dialect, linear_match's
    (the oracle's dynamic program costs O(len(pattern) * len(topic)**2))."""
    longest = max(pattern.count(d.separator), topic.count(d.separator)) + 1
    if longest > ORACLE_WORDS and d.multi_last_only:
        return linear_match(d, pattern, topic)
    return oracle.matches(d, pattern, topic)


def expected_pairs(d: Dialect, pairs: Iterable[tuple[str, Hashable]], topic: str) -> Pairs:
    return {(p, s) for p, s in pairs if matches(d, p, topic)}


def populated(d: Dialect, seed: int = 0) -> Trie:
    """A trie with a few valid patterns of d (wildcards where legal)."""
    rng = random.Random(seed)
    t = Trie(d)
    for i in range(12):
        t.subscribe(oracle.random_pattern(rng, d, BASE_WORDS, 4), f"base{i % 5}")
    return t


def check_unchanged(t: Any, before: tuple[Any, ...], what: str) -> None:
    assert state(t) == before, f"{what} failed but changed the trie"
    t.check_invariants()


def check_topic_reads(reader: Any, d: Dialect, pairs: Pairs, topic: object) -> None:
    """Every topic-taking read of reader (a Trie or Snapshot) on topic."""
    want = validator_error(d.split_topic, topic)
    if isinstance(topic, str):
        assert (want is None) == oracle.valid_topic(d, topic), (
            f"validator and oracle disagree on topic {short(topic)}: {short(want)}"
        )
    exp = expected_pairs(d, pairs, topic) if want is None and isinstance(topic, str) else set()
    subs = {s for _, s in exp}
    found = outcome(lambda: reader.lookup(topic), want, "lookup")
    if want is None:
        assert len(found) == len(set(found)) and set(found) == subs, f"lookup({short(topic)})"
    got = outcome(lambda: reader.match(topic), want, "match")
    if want is None:
        assert len(got) == len(set(got)) and set(got) == exp, f"match({short(topic)})"
    has = outcome(lambda: reader.has_subscribers(topic), want, "has_subscribers")
    if want is None:
        assert has is bool(subs), f"has_subscribers({short(topic)})"
    good = d.join(["a"])
    rows = outcome(lambda: reader.lookup_many([good, topic, good]), want, "lookup_many")
    if want is None:
        assert set(rows[1]) == subs and len(rows[1]) == len(subs), f"lookup_many row {short(topic)}"
        assert set(rows[0]) == {s for _, s in expected_pairs(d, pairs, good)}
    matcher = reader.matcher()
    found = outcome(lambda: matcher.lookup(topic), want, "Matcher.lookup")
    if want is None:
        assert set(found) == subs, f"Matcher.lookup({short(topic)})"


def check_pattern_reads(reader: Any, d: Dialect, pairs: Pairs, pattern: object) -> None:
    want = validator_error(d.split_pattern, pattern)
    got = outcome(lambda: reader.subscribers(pattern), want, "subscribers")
    if want is None:
        exp = {s for p, s in pairs if p == pattern}
        assert len(got) == len(set(got)) and set(got) == exp, f"subscribers({short(pattern)})"


def check_summaries(t: Any, d: Dialect) -> None:
    """len, iteration, stats(), subscriptions() and tree() agree with each other."""
    pairs = pairs_of(t)
    patterns = {p for p, _ in pairs}
    stats = t.stats()
    assert stats["subscriptions"] == len(pairs)
    assert stats["patterns"] == len(patterns)
    levels = [max(1, len(oracle.words_of(d, p))) for p in patterns]
    assert stats["max_depth"] == max(levels, default=0), (stats["max_depth"], levels)
    subs = t.subscriptions()
    assert {(p, s) for p, ss in subs.items() for s in ss} == pairs
    root = t.tree()
    assert root["count"] == len(pairs)
    for pattern in patterns:
        node = root
        for word in oracle.words_of(d, pattern):
            node = node["children"][word]
        assert set(node["subscribers"]) >= {s for p, s in pairs if p == pattern}
        assert node["here"] == len(subs[pattern])


# ----------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", NAMES)
@HOSTILE
@given(data=st.data())
def test_hostile_pattern_every_entry_point(name: str, data: st.DataObject) -> None:
    """A hostile pattern through every pattern-taking entry point: accepted exactly
    when the validator accepts it (and the oracle agrees), otherwise the
    validator's ValueError/TypeError and no change."""
    d = DIALECTS[name]
    text = data.draw(hostile_text(d), label="pattern")
    want = validator_error(d.split_pattern, text)
    assert (want is None) == oracle.valid_pattern(d, text), (
        f"validator and oracle disagree on pattern {short(text)}: {short(want)}"
    )
    t = populated(d, data.draw(st.integers(0, 3), label="population"))
    model = pairs_of(t)
    before = state(t)

    added = outcome(lambda: t.subscribe(text, "hostile"), want, "subscribe")
    if want is not None:
        check_unchanged(t, before, "subscribe")
        for call, what in [
            (lambda: t.unsubscribe(text, "base0"), "unsubscribe"),
            (lambda: t.subscribe_many([(d.join(["a"]), "x"), (text, "y")]), "subscribe_many"),
            (lambda: Trie.from_pairs([(d.join(["a"]), 1), (text, 2)], d), "from_pairs"),
        ]:
            outcome(call, want, what)
            check_unchanged(t, before, what)
        check_pattern_reads(t, d, model, text)
        check_pattern_reads(t.snapshot(), d, model, text)
        return

    assert added is True
    model.add((text, "hostile"))
    assert t.subscribe(text, "hostile") is False
    assert pairs_of(t) == model
    check_pattern_reads(t, d, model, text)
    snap = t.snapshot()
    # the pattern as a topic (valid or not), and a topic made from it
    check_topic_reads(t, d, model, text)
    concrete = d.join(["a" if w in (d.single, d.multi) else w for w in oracle.words_of(d, text)])
    check_topic_reads(snap, d, model, concrete)
    assert t.subscribe_many([(text, "many"), (text, "hostile")]) == 1
    model.add((text, "many"))
    built = Trie.from_pairs(sorted(model, key=repr), d)
    assert pairs_of(built) == model
    built.check_invariants()
    check_summaries(t, d)
    assert t.unsubscribe(text, "hostile") is True
    assert t.unsubscribe(text, "hostile") is False
    assert t.unsubscribe(text, "many") is True
    model -= {(text, "hostile"), (text, "many")}
    assert pairs_of(t) == model
    assert pairs_of(snap) == model | {(text, "hostile")}
    t.check_invariants()
    snap.check_invariants()


@pytest.mark.parametrize("name", NAMES)
@HOSTILE
@given(data=st.data())
def test_hostile_topic_every_entry_point(name: str, data: st.DataObject) -> None:
    """A hostile topic through every topic-taking read of a trie, a snapshot and a
    Matcher: the oracle's answer, or the validator's error and no change."""
    d = DIALECTS[name]
    topic = data.draw(hostile_text(d), label="topic")
    t = populated(d, data.draw(st.integers(0, 3), label="population"))
    model = pairs_of(t)
    before = state(t)
    check_topic_reads(t, d, model, topic)
    check_unchanged(t, before, "a read")
    check_topic_reads(t.snapshot(), d, model, topic)


NOT_STR: list[Any] = [
    None,
    b"a",
    bytearray(b"a"),
    memoryview(b"a"),
    0,
    1.5,
    ["a"],
    ("a",),
    {"a": 1},
    object(),
]


class StrSub(str):
    """A str subclass: must behave exactly like the str it holds."""


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", NOT_STR, ids=lambda v: type(v).__name__)
def test_non_str_everywhere(name: str, value: Any) -> None:
    """A non-str pattern or topic is a TypeError at every entry point, and
    changes nothing."""
    d = DIALECTS[name]
    t = populated(d)
    before = state(t)
    snap = t.snapshot()
    good = d.join(["a"])
    calls: list[tuple[str, Callable[[], object]]] = [
        ("subscribe", lambda: t.subscribe(value, "s")),
        ("unsubscribe", lambda: t.unsubscribe(value, "base0")),
        ("subscribers", lambda: t.subscribers(value)),
        ("subscribe_many", lambda: t.subscribe_many([(good, "s"), (value, "s")])),
        ("from_pairs", lambda: Trie.from_pairs([(good, "s"), (value, "s")], d)),
        ("lookup", lambda: t.lookup(value)),
        ("match", lambda: t.match(value)),
        ("has_subscribers", lambda: t.has_subscribers(value)),
        ("lookup_many", lambda: t.lookup_many([good, value])),
        ("Matcher.lookup", lambda: t.matcher().lookup(value)),
        ("snapshot lookup", lambda: snap.lookup(value)),
        ("snapshot match", lambda: snap.match(value)),
        ("snapshot subscribers", lambda: snap.subscribers(value)),
        ("snapshot lookup_many", lambda: snap.lookup_many([value])),
    ]
    for what, call in calls:
        with pytest.raises(TypeError) as info:
            call()
        assert type(info.value) is TypeError, f"{what}: {short(info.value)}"
        check_unchanged(t, before, what)


@pytest.mark.parametrize("name", NAMES)
@HOSTILE
@given(data=st.data())
def test_str_subclass_is_its_str(name: str, data: st.DataObject) -> None:
    """A str subclass is validated and matched as the str it holds."""
    d = DIALECTS[name]
    text = data.draw(hostile_text(d, deep=False), label="text")
    t = populated(d)
    before = state(t)
    want = validator_error(d.split_pattern, text)
    added = outcome(lambda: t.subscribe(StrSub(text), "sub"), want, "subscribe(StrSub)")
    if want is not None:
        check_unchanged(t, before, "subscribe(StrSub)")
    else:
        assert added is True
        assert t.subscribe(text, "sub") is False  # the same pattern as the plain str
        assert "sub" in t.subscribers(StrSub(text))
        assert all(type(p) is str for p, _ in t)
    model = pairs_of(t)
    check_topic_reads(t, d, model, StrSub(text))


UNHASHABLE: list[Any] = [[], {}, set(), ["a"], bytearray(b"x"), {"k": [1]}]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sub", UNHASHABLE, ids=repr)
def test_unhashable_subscriber_everywhere(name: str, sub: Any) -> None:
    """An unhashable subscriber is a TypeError wherever a subscriber goes in,
    for a new path and an existing one, and changes nothing."""
    d = DIALECTS[name]
    t = populated(d)
    before = state(t)
    existing = before[0][0][0]
    fresh = d.join(["fresh", "path"])
    for p in (fresh, existing):
        calls: list[tuple[str, Callable[[], object]]] = [
            ("subscribe", partial(t.subscribe, p, sub)),
            ("unsubscribe", partial(t.unsubscribe, p, sub)),
            ("subscribe_many", partial(t.subscribe_many, [(p, "ok"), (p, sub)])),
            ("from_pairs", partial(Trie.from_pairs, [(p, "ok"), (p, sub)], d)),
        ]
        for what, call in calls:
            with pytest.raises(TypeError) as info:
                call()
            assert type(info.value) is TypeError, f"{what}: {short(info.value)}"
            check_unchanged(t, before, what)
    assert t.subscribers(fresh) == []


@pytest.mark.parametrize("name", NAMES)
@HOSTILE
@given(data=st.data())
def test_random_sequence_with_hostile_input(name: str, data: st.DataObject) -> None:
    """A sequence of subscribes, unsubscribes, bulk calls and reads where about
    half the inputs are hostile: the trie follows the model through every
    accepted call and is unchanged by every refused one."""
    d = DIALECTS[name]
    t = Trie(d)
    model: Pairs = set()
    snaps: list[tuple[Any, Pairs]] = []
    text = hostile_text(d, deep=False)
    valid = valid_pattern(d)
    subs = st.sampled_from(["s0", "s1", 2, b"s3"])
    for _ in range(data.draw(st.integers(1, 20), label="steps")):
        op = data.draw(st.sampled_from(["sub", "unsub", "many", "read", "snap", "clear"]))
        pattern = data.draw(st.one_of(text, valid), label="text")
        sub = data.draw(subs, label="subscriber")
        want = validator_error(d.split_pattern, pattern)
        before = state(t)
        if op == "sub":
            r = outcome(partial(t.subscribe, pattern, sub), want, "subscribe")
            if want is None:
                assert r is ((pattern, sub) not in model)
                model.add((pattern, sub))
        elif op == "unsub":
            r = outcome(partial(t.unsubscribe, pattern, sub), want, "unsubscribe")
            if want is None:
                assert r is ((pattern, sub) in model)
                model.discard((pattern, sub))
        elif op == "many":
            batch = [(pattern, sub), (d.join(["a"]), sub)]
            r = outcome(partial(t.subscribe_many, batch), want, "subscribe_many")
            if want is None:
                assert r == len(set(batch) - model)
                model |= set(batch)
        elif op == "read":
            check_topic_reads(t, d, model, pattern)
        elif op == "snap":
            snaps.append((t.snapshot(), set(model)))
        else:
            t.clear()
            model.clear()
        if want is not None:
            assert op == "clear" or state(t) == before
        assert pairs_of(t) == model
        t.check_invariants()
    for snap, frozen in snaps:
        assert pairs_of(snap) == frozen
        snap.check_invariants()
    check_summaries(t, d)


FORMATS = ["jsonl", "parquet", "binary"]


@pytest.mark.parametrize("name", NAMES)
@HOSTILE
@given(data=st.data())
def test_export_load_round_trip(name: str, data: st.DataObject) -> None:
    """The pairs that get in (hostile valid patterns, hostile subscribers) come
    back exactly from each export format, with the same dialect; tree(), stats(),
    len() and iteration agree on the loaded trie."""
    pytest.importorskip("pyarrow")
    d = DIALECTS[name]
    valid = valid_pattern(d)
    subscriber = hostile_subscriber()
    pairs = data.draw(st.lists(st.tuples(valid, subscriber), max_size=8), label="pairs")
    t = Trie(d)
    for pattern, sub in pairs:
        t.subscribe(pattern, sub)
    model = pairs_of(t)
    snap = t.snapshot()
    for fmt in FORMATS:
        buf = io.BytesIO()
        if fmt == "parquet" and any(_not_utf8(s) for _, s in model):
            # documented: Parquet strings are UTF-8, so the export refuses
            # before writing anything
            with pytest.raises(TypeError, match="Parquet cannot store it"):
                export(snap, buf, format=fmt)
            assert buf.getvalue() == b""
            continue
        assert export(snap, buf, format=fmt) == len(model)
        loaded = load(io.BytesIO(buf.getvalue()), format=fmt)
        assert loaded.dialect == d, fmt
        back = list(loaded)
        assert len(back) == len(model)
        # types come back too: 1, "1" and b"1" stay apart
        assert {(p, type(s), s) for p, s in back} == {(p, type(s), s) for p, s in model}, fmt
        loaded.check_invariants()
        check_summaries(loaded, d)


def _not_utf8(s: object) -> bool:
    return isinstance(s, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def test_jsonl_round_trip_of_adjacent_lone_surrogates() -> None:
    """Rule (docs/export.md): subscriber strings come back exactly, also a lone
    high surrogate right before a lone low one (two code points, not one)."""
    t = Trie("mqtt")
    t.subscribe("a", "\ud800\udc00")
    buf = io.BytesIO()
    export(t, buf, format="jsonl")
    back = load(io.BytesIO(buf.getvalue()), format="jsonl")
    assert list(back) == [("a", "\ud800\udc00")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_refuses_unexportable_subscriber(fmt: str) -> None:
    """A subscriber no format can store is a TypeError before a byte is written."""
    pytest.importorskip("pyarrow")
    t = Trie("mqtt")
    t.subscribe("a/#", ("tuple", 1))
    t.subscribe("a/+", "fine")
    buf = io.BytesIO()
    with pytest.raises(TypeError):
        export(t, buf, format=fmt)
    assert buf.getvalue() == b""


@HOSTILE
@given(data=st.data())
def test_load_of_a_damaged_export(data: st.DataObject) -> None:
    """A damaged export (bytes changed, cut short, pair lines rewritten in JSON
    Lines with the checksum removed, so the engine's line scanner reads them)
    loads as a sound trie of valid pairs or raises FormatError; nothing else."""
    d = DIALECTS[data.draw(st.sampled_from(NAMES), label="dialect")]
    fmt = data.draw(st.sampled_from(["jsonl", "binary"]), label="format")
    t = populated(d, data.draw(st.integers(0, 3)))
    t.subscribe(d.join(["a"]), 12345)
    t.subscribe(d.join(["b"]), b"\x00bytes")
    buf = io.BytesIO()
    export(t, buf, format=fmt)
    blob = bytearray(buf.getvalue())
    how = data.draw(st.sampled_from(["flip", "cut", "lines"]), label="damage")
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i] = data.draw(st.integers(0, 255))
    elif how == "cut":
        del blob[data.draw(st.integers(0, len(blob) - 1)) :]
    elif fmt == "jsonl":
        lines = bytes(blob).split(b"\n")
        header, body, footer = lines[0], lines[1:-2], lines[-2]
        k = data.draw(st.integers(0, len(body) - 1))
        body[k] = data.draw(
            st.binary(max_size=60)
            | st.builds(
                lambda p, s: b'{"pattern":"' + p + b'","subscriber":' + s + b"}",
                st.binary(max_size=20),
                st.binary(max_size=12),
            ),
            label="line",
        ).replace(b"\n", b" ")
        end = json.loads(footer)
        end["end"].pop("crc32")  # a hand-edited file: the pair count is still checked
        blob = bytearray(b"\n".join([header, *body, json.dumps(end).encode(), b""]))
    try:
        loaded = load(io.BytesIO(bytes(blob)), format=fmt)
    except FormatError:
        return
    except Exception as exc:
        pytest.fail(f"load of a damaged {fmt} export raised {type(exc).__name__}: {short(exc)}")
    loaded.check_invariants()
    for pattern, _ in loaded:
        loaded.dialect.split_pattern(pattern)


# ------------------------------------------------------------- deep patterns
def _every_entry_point_deep(d: Dialect, pattern: str, topic: str) -> None:
    """Every entry point over one deep pattern and a topic it matches.

    Comparisons are on sets and bools: a failing assert on 65,535-level texts
    must not make pytest print (or diff) them."""
    pytest.importorskip("pyarrow")
    both = {7, "deep"}
    pairs = {(pattern, 7), (pattern, "deep")}
    t = Trie(d)
    assert t.subscribe(pattern, "deep") is True
    assert t.subscribe(pattern, 7) is True
    assert set(t.lookup(topic)) == both
    assert t.has_subscribers(topic) is True
    assert set(t.match(topic)) == pairs
    assert [set(r) for r in t.lookup_many([topic, topic])] == [both, both]
    assert set(t.subscribers(pattern)) == both
    assert set(t.matcher().lookup(topic)) == both
    snap = t.snapshot()
    assert set(snap.lookup(topic)) == both
    assert len(snap) == 2 and set(snap) == pairs
    check_summaries(t, d)
    for fmt in FORMATS:
        buf = io.BytesIO()
        export(snap, buf, format=fmt)
        back = load(io.BytesIO(buf.getvalue()), format=fmt)
        assert set(back) == pairs, fmt
    built = Trie.from_pairs([(pattern, "deep")], d)
    assert built.lookup(topic) == ["deep"]
    many = Trie(d)
    assert many.subscribe_many([(pattern, 1), (pattern, 2)]) == 2
    assert t.unsubscribe(pattern, "deep") is True
    assert t.unsubscribe(pattern, 7) is True
    assert len(t) == 0 and len(snap) == 2
    t.check_invariants()
    snap.check_invariants()
    built.check_invariants()


def test_mqtt_65535_empty_levels() -> None:
    """The longest valid MQTT filter of separators only: 65,535 empty levels."""
    pattern = "/" * 65534
    _every_entry_point_deep(MQTT, pattern, pattern)


def test_mqtt_limits_exactly() -> None:
    """65,535 UTF-8 bytes is valid at any depth, one byte more is a ValueError."""
    t = Trie(MQTT)
    ok = "/" * 65534 + "a"
    too_long = "/" * 65535 + "a"
    assert t.subscribe(ok, 1) is True
    assert t.lookup(ok) == [1]
    before = state(t)
    for call in (t.subscribe, t.unsubscribe):
        with pytest.raises(ValueError, match="at most 65535"):
            call(too_long, 1)
    with pytest.raises(ValueError, match="at most 65535"):
        t.lookup(too_long)
    check_unchanged(t, before, "too long")
    wide = "\u20ac" * 21845  # 65,535 bytes in one word
    assert t.subscribe(wide, 2) is True
    with pytest.raises(ValueError, match="at most 65535"):
        t.subscribe(wide + "a", 2)


def test_mqtt_deep_wildcards() -> None:
    """'+' on each of 32,768 levels, and '#' after 32,766 literal levels."""
    topic = "/".join(["a"] * 32768)
    _every_entry_point_deep(MQTT, "/".join(["+"] * 32768), topic)
    _every_entry_point_deep(MQTT, "/".join(["a"] * 32766 + ["#"]), topic)


def test_nats_and_custom_deep() -> None:
    """No level limit in NATS or ARROWS: 40,000 tokens through every entry point."""
    _every_entry_point_deep(NATS, ".".join(["a"] * 39999 + [">"]), ".".join(["a"] * 40001))
    _every_entry_point_deep(ARROWS, "->".join(["a"] * 2000 + ["*", ">>"]), "->".join(["a"] * 2003))


@pytest.mark.parametrize(("d", "limit"), [(AMQP, 256), (COLONS, 64)], ids=["amqp", "colons"])
def test_level_limit_exactly(d: Dialect, limit: int) -> None:
    """max_levels words are valid, one more is a ValueError everywhere."""
    t = Trie(d)
    ok = d.join([d.multi or "a"] * (limit - 1) + ["a"])
    over = d.join(["a"] * (limit + 1))
    assert t.subscribe(ok, 1) is True
    assert t.lookup(d.join(["a"] * limit)) == [1]
    before = state(t)
    for call in (
        lambda: t.subscribe(over, 1),
        lambda: t.lookup(over),
        lambda: t.subscribers(over),
        lambda: t.lookup_many([over]),
    ):
        with pytest.raises(ValueError, match="max_levels"):
            call()
    check_unchanged(t, before, "over the level limit")


@HOSTILE
@given(k=st.integers(1, 65535))
def test_mqtt_separators_only(k: int) -> None:
    """'/' * (k - 1): k empty levels, always a valid filter and topic."""
    text = "/" * (k - 1)
    t = Trie(MQTT)
    if text == "":
        with pytest.raises(ValueError, match="must not be empty"):
            t.subscribe(text, 1)
        return
    assert t.subscribe(text, 1) is True
    t.subscribe("#", 2)
    t.subscribe("+/#", 3)  # '+' takes the first (empty) level, '#' the rest
    t.subscribe("+", 4)  # one level only
    assert set(t.lookup(text)) == ({1, 2, 3, 4} if k == 1 else {1, 2, 3})
    assert t.unsubscribe(text, 1) is True
    t.check_invariants()


# ------------------------------------------------------- bugs found, fixed
def test_update_over_a_tomb_out_of_memory() -> None:
    """Found by the C fuzz target (stress/fuzz_known/): an update that meets the
    tomb left by a cleanup that ran out of memory, and cannot clean it for want
    of memory either, raises MemoryError (it restarted forever).  Runs in a
    child process, so that a livelock fails the test on the timeout."""
    script = textwrap.dedent(
        """
        from cstrie import Trie
        from cstrie._binding import lib
        t = Trie("mqtt")
        t.subscribe("a/a/a", "s")
        lib.cst_fail_allocations_after(2)
        try:
            assert t.unsubscribe("a/a/a", "s") is True  # its cleanup leaves a tomb
        finally:
            lib.cst_fail_allocations_after(-1)
        lib.cst_fail_allocations_after(2)
        try:
            t.subscribe("a/a/a", "s")  # must raise MemoryError or succeed
        except MemoryError:
            pass
        finally:
            lib.cst_fail_allocations_after(-1)
        t.check_invariants(strict=False)
        print("returned")
        """
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=5
        )
    except subprocess.TimeoutExpired:
        pytest.fail("subscribe over a tomb with 2 allocations left did not return in 5 s")
    assert proc.returncode == 0 and "returned" in proc.stdout, proc.stderr[-2000:]


def test_render_text_of_a_deep_tree() -> None:
    from cstrie.tree import render_text

    t = Trie(MQTT)
    t.subscribe("/" * 65534, 1)
    text = render_text(t.tree())
    assert text.count("\n") == 65535
