"""The classic matchers (:mod:`cstrie_lab.classic`), checked from the rules.

Every matcher, in every dialect it supports, must answer exactly what the
independent oracle (``tests/support/oracle.py``) and :class:`cstrie.Trie` answer, as sets,
with each subscriber once; validate like cstrie; and keep the contract the benchmark
scenarios rely on.

The random workloads draw from ``random.Random`` seeded by ``CSTRIE_SEED`` (a fresh
seed each run unless set); every failure message carries the seed: replay with

    CSTRIE_SEED=<seed> python -m pytest tests/lab/test_classic_matchers.py
"""

from __future__ import annotations

import functools
import os
import random
import sys
import threading
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import oracle
import pytest

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.trie import Trie
from cstrie_lab.bench.base import MissingDependency
from cstrie_lab.classic import CLASSIC, ClassicMatcher, make_classic

SEED = int(os.environ.get("CSTRIE_SEED", "").strip() or random.SystemRandom().randrange(2**32))
REPLAY = f"replay with CSTRIE_SEED={SEED}"

DIALECTS: dict[str, Dialect] = {
    "amqp": AMQP,
    "mqtt": MQTT,
    "nats": NATS,
    # custom dialects exercise the general Dialect fields
    "glob": Dialect(name="glob", separator="/", single="?", multi="**"),
    "plus1": Dialect(name="plus1", separator=":", single="?", multi="*", multi_min=1),
    "double": Dialect(name="double", separator="::", single="<one>", multi="<many>"),
    "dollar": Dialect(name="dollar", separator="/", single="+", multi="#", dollar_rule=True),
    "plain": Dialect(name="plain", single=None, multi=None),
}
# ":" with the "::" separator makes words that overlap the separator (":::a")
WORDS = ["a", "b", "c", "$x", ":"]
SUBSCRIBERS: list[Hashable] = [*range(6), "s0", "s1", ("t", 1), frozenset({3})]

# Hand-picked patterns and topics per dialect: several '#', '$' topics, '>' ,
# empty words, the empty topic, literal wildcard words in topics.
EDGE_PATTERNS: dict[str, list[str]] = {
    "amqp": [
        "",
        "#",
        "*",
        "#.#",
        "#.#.a",
        "a.#.b.#",
        "#.a.#",
        "a.#",
        "#.a",
        "*.#",
        "#.*",
        "a.*.#.b",
        "a..b",
        "*.*",
        ".",
        "a.#.#.b",
        "#.*.#",
        "a",
        "a.b",
        "$x.#",
        "a.#.*",
    ],
    "mqtt": [
        "#",
        "+",
        "+/#",
        "$x/#",
        "$x",
        "$x/+",
        "a/#",
        "a/+",
        "/+",
        "+/+",
        "/",
        "a//b",
        "+//+",
        "a",
        "a/b/#",
        "+/b/#",
        "$SYS/#",
        "+/$x",
    ],
    "nats": ["*", ">", "*.>", "a.>", "a.*", "*.*.>", "a", "a.b", "$x.>", "*.b"],
    "glob": ["**", "**/a", "a/**/b/**", "?", "**/?", "", "a//b"],
    "plus1": ["*", "*:a", "a:*:b", "*:*", "?:*", "a:*:*", "*:?:*"],
    "double": ["<many>", "a::<many>::b", "<one>", ":", "::", "<one>::<many>", "a"],
    "dollar": ["#", "#/a", "+/#", "$x/#", "a/#/b", "+"],
    "plain": ["", "a", "a.b", "a..b", "*", "#"],
}
EDGE_TOPICS: dict[str, list[str]] = {
    "amqp": [
        "",
        ".",
        "a",
        "b",
        "a.b",
        "a..b",
        "b.a",
        "a.a",
        "a.b.a.b",
        "a.x.b.y",
        "*",
        "#",
        "a.*",
        "a.#",
        "$x",
        "$x.a",
        "a.b.c.d.e.f.b",
        "..",
    ],
    "mqtt": [
        "a",
        "/",
        "//",
        "a/b",
        "a//b",
        "$x",
        "$x/a",
        "$SYS",
        "$SYS/a/b",
        "a/$x",
        "/a",
        "$",
        "$/b",
        "b/b",
    ],
    "nats": ["a", "a.b", "a.b.c", "$x", "$x.a", "b.b", "x.y.z"],
    "glob": ["", "a", "a/b", "a/x/b/y", "/", "b/a", "a//b"],
    "plus1": ["a", "a:b", "a:x:b", "b:a", "a:a:a", "x"],
    "double": ["a", "a::b", ":", "::", ":::a", "a::x::y::b", "", "a::::b"],
    "dollar": ["$x", "$x/a", "a", "a/x/a", "$", "/"],
    "plain": ["", "a", "a.b", "a..b", "*", "#"],
}


def supported(name: str) -> list[str]:
    """The dialects (keys of DIALECTS) matcher ``name`` claims."""
    return ["mqtt"] if name == "paho" else list(DIALECTS)


CASES = [
    pytest.param(name, dialect, id=f"{name}-{dialect}")
    for name in CLASSIC
    for dialect in supported(name)
]


def build(name: str, d: Dialect, topics: Iterable[str] = ()) -> ClassicMatcher:
    """A matcher; inverted-bitmap gets ``topics`` as its topic space."""
    if name == "inverted-bitmap":
        return make_classic(name, d, topics=list(topics))
    return make_classic(name, d)


def answer(m: Any, topic: str) -> set[Hashable]:
    """``m.lookup(topic)`` as a set, checking that nobody appears twice."""
    found = m.lookup(topic)
    assert isinstance(found, list), f"lookup({topic!r}) returned {type(found).__name__}"
    assert len(found) == len(set(found)), f"lookup({topic!r}) repeats a subscriber: {found!r}"
    return set(found)


# --------------------------------------------------------------- workloads
@dataclass
class Workload:
    """Batches of updates, each followed by the expected answers for ``topics``."""

    topics: list[str]
    # each batch: ops (subscribe?, pattern, subscriber, expected return), then answers
    batches: list[tuple[list[tuple[bool, str, Hashable, bool]], dict[str, set[Hashable]]]] = field(
        default_factory=list
    )


@functools.cache
def workload(dialect: str) -> Workload:
    """A random workload for ``dialect``, answered by the oracle and cstrie.Trie.

    Built once per dialect (the oracle is slow) and replayed on every matcher.
    """
    d = DIALECTS[dialect]
    rng = random.Random(f"{SEED}/classic/{dialect}")
    topics = list(dict.fromkeys(EDGE_TOPICS[dialect]))
    topics += [oracle.random_topic(rng, d, WORDS, 6) for _ in range(45)]
    topics = list(dict.fromkeys(topics))
    patterns = EDGE_PATTERNS[dialect] + [oracle.random_pattern(rng, d, WORDS, 6) for _ in range(60)]
    trie = Trie(d)
    pairs: set[tuple[str, Hashable]] = set()
    cache: dict[tuple[str, str], bool] = {}

    def matches(p: str, t: str) -> bool:
        key = (p, t)
        if key not in cache:
            cache[key] = oracle.matches(d, p, t)
        return cache[key]

    w = Workload(topics)
    for batch_no in range(6):
        ops: list[tuple[bool, str, Hashable, bool]] = []
        for _ in range(40 if batch_no < 4 else 25):
            if (batch_no < 4 and rng.random() < 0.7) or not pairs:
                pair = (rng.choice(patterns), rng.choice(SUBSCRIBERS))
                ops.append((True, *pair, pair not in pairs))
                pairs.add(pair)
                assert trie.subscribe(*pair) is ops[-1][3]
            else:
                if rng.random() < 0.8:
                    pair = rng.choice(sorted(pairs, key=repr))
                else:  # most likely absent
                    pair = (rng.choice(patterns), rng.choice(SUBSCRIBERS))
                ops.append((False, *pair, pair in pairs))
                pairs.discard(pair)
                assert trie.unsubscribe(*pair) is ops[-1][3]
        expected: dict[str, set[Hashable]] = {}
        for t in topics:
            expected[t] = {s for p, s in pairs if matches(p, t)}
            assert set(trie.lookup(t)) == expected[t], (
                f"{REPLAY}: oracle and cstrie.Trie disagree on {t!r} in {dialect}"
            )
        w.batches.append((ops, expected))
    return w


# ---------------------------------------------------------------- contract
def test_registry_keys_and_attributes() -> None:
    assert list(CLASSIC) == [
        "naive",
        "inverted-bitmap",
        "level-bitmap",
        "locked-trie",
        "regex",
        "lazy-dfa",
        "paho",
    ]
    for key, cls in CLASSIC.items():
        assert issubclass(cls, ClassicMatcher)
        assert cls.name == key
        assert isinstance(cls.description, str) and cls.description
        assert "\n" not in cls.description
        assert cls.thread_safe is (key == "locked-trie")


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_make_classic_and_dialect_forms(name: str, dialect: str) -> None:
    d = DIALECTS[dialect]
    forms: list[str | Dialect] = [d]
    if dialect in ("amqp", "mqtt", "nats"):
        forms.append(dialect)
    for form in forms:
        m = build(name, d, ["a"]) if form is d else make_classic(name, form, **_space(name))
        assert isinstance(m, ClassicMatcher)
        assert isinstance(m, CLASSIC[name])
        assert m.name == name
        assert m.dialect == d
        assert len(m) == 0


def _space(name: str) -> dict[str, Any]:
    return {"topics": ["a"]} if name == "inverted-bitmap" else {}


def test_make_classic_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown classic matcher 'nope'"):
        make_classic("nope")
    for name in ("naive", "locked-trie", "lazy-dfa"):
        with pytest.raises(TypeError):
            make_classic(name, "amqp", topics=["a"])  # only inverted-bitmap takes a space


def test_constructor_keyword_form() -> None:
    m = CLASSIC["naive"](dialect="amqp")
    assert m.dialect == AMQP
    b = CLASSIC["inverted-bitmap"](dialect="amqp", topics=iter(["a.b", "c"]))
    assert b.subscribe("a.*", 1)
    assert b.lookup("a.b") == [1]


# --------------------------------------------------------------- semantics
@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_random_workload_matches_oracle_and_trie(name: str, dialect: str) -> None:
    """Random subscribes/unsubscribes; after each batch every answer is the oracle's
    (which the workload builder already checked against cstrie.Trie)."""
    w = workload(dialect)
    m = build(name, DIALECTS[dialect], w.topics)
    size = 0
    for batch_no, (ops, expected) in enumerate(w.batches):
        for sub, pattern, subscriber, result in ops:
            call = m.subscribe if sub else m.unsubscribe
            got = call(pattern, subscriber)
            assert got is result, (
                f"{REPLAY}: {name}/{dialect} batch {batch_no}: "
                f"{call.__name__}({pattern!r}, {subscriber!r}) returned {got!r}"
            )
            size += (1 if sub else -1) if result else 0
        assert len(m) == size, f"{REPLAY}: {name}/{dialect} batch {batch_no}: len"
        for topic, want in expected.items():
            got_set = answer(m, topic)
            assert got_set == want, (
                f"{REPLAY}: {name}/{dialect} batch {batch_no}: lookup({topic!r}) = "
                f"{sorted(got_set, key=repr)}, expected {sorted(want, key=repr)}"
            )


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_edge_patterns_one_subscriber_each(name: str, dialect: str) -> None:
    """Each hand-picked pattern alone: the matcher agrees with the oracle and Trie."""
    d = DIALECTS[dialect]
    topics = EDGE_TOPICS[dialect]
    m = build(name, d, topics)
    trie = Trie(d)
    for i, pattern in enumerate(EDGE_PATTERNS[dialect]):
        assert m.subscribe(pattern, i) is True
        trie.subscribe(pattern, i)
    pairs = [(p, i) for i, p in enumerate(EDGE_PATTERNS[dialect])]
    for topic in topics:
        want = oracle.expected_lookup(d, pairs, topic)
        assert set(trie.lookup(topic)) == want, f"oracle vs Trie on {topic!r}"
        assert answer(m, topic) == want, (
            f"{name}/{dialect}: lookup({topic!r}) wrong; patterns matching: "
            f"{[p for p, i in pairs if i in want]}"
        )


@pytest.mark.parametrize("name", [n for n in CLASSIC if n != "paho"])
@pytest.mark.parametrize(
    ("pattern", "topic", "hit"),
    [
        ("#.#.a", "a", True),
        ("#.#.a", "x.y.a", True),
        ("#.#.a", "a.x", False),
        ("a.#.b.#", "a.b", True),
        ("a.#.b.#", "a.x.y.b.z", True),
        ("a.#.b.#", "a.x.y", False),
        ("a.#.b.#", "b.a.b", False),
        ("a.#", "a", True),
        ("*", "", False),  # '*' needs a word; "" has none
        ("*", ".", False),  # "." is two (empty) words
        ("*.*", ".", True),
        ("#", "", True),
        ("", "", True),
        ("", ".", False),
        ("a.*.#.b", "a.x.b", True),
        ("a.*.#.b", "a.b", False),
        ("a.b", "a.*", False),  # a literal '*' in a topic is just a word
        ("a.*", "a.#", True),
    ],
)
def test_amqp_rules(name: str, pattern: str, topic: str, hit: bool) -> None:
    assert oracle.matches(AMQP, pattern, topic) is hit  # the rule, per the oracle
    m = build(name, AMQP, [topic])
    m.subscribe(pattern, "s")
    assert m.lookup(topic) == (["s"] if hit else [])


@pytest.mark.parametrize("name", list(CLASSIC))
@pytest.mark.parametrize(
    ("pattern", "topic", "hit"),
    [
        ("a/#", "a", True),
        ("#", "$SYS/x", False),
        ("+/x", "$SYS/x", False),
        ("+/#", "$SYS", False),
        ("$SYS/#", "$SYS", True),
        ("$SYS/+", "$SYS/x", True),
        ("a/+", "a/$x", True),  # only the first level's '$' counts
        ("+", "", None),  # "" is not an MQTT topic
        ("+/+", "/", True),
        ("a/+/b", "a//b", True),
    ],
)
def test_mqtt_rules(name: str, pattern: str, topic: str, hit: bool | None) -> None:
    m = build(name, MQTT, [] if hit is None else [topic])
    m.subscribe(pattern, "s")
    if hit is None:
        with pytest.raises(ValueError):
            m.lookup(topic)
    else:
        assert oracle.matches(MQTT, pattern, topic) is hit
        assert m.lookup(topic) == (["s"] if hit else [])


@pytest.mark.parametrize("name", [n for n in CLASSIC if n != "paho"])
@pytest.mark.parametrize(
    ("pattern", "topic", "hit"),
    [
        ("a.>", "a", False),  # '>' needs at least one token
        ("a.>", "a.b", True),
        ("a.>", "a.b.c", True),
        (">", "a", True),
        ("*.>", "a", False),
        ("*.>", "a.b", True),
        ("*", "a.b", False),
    ],
)
def test_nats_rules(name: str, pattern: str, topic: str, hit: bool) -> None:
    assert oracle.matches(NATS, pattern, topic) is hit
    m = build(name, NATS, [topic])
    m.subscribe(pattern, "s")
    assert m.lookup(topic) == (["s"] if hit else [])


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_return_values_and_len(name: str, dialect: str) -> None:
    d = DIALECTS[dialect]
    p, q = EDGE_PATTERNS[dialect][:2]
    m = build(name, d, EDGE_TOPICS[dialect])
    assert m.unsubscribe(p, 1) is False  # absent pair
    assert m.subscribe(p, 1) is True
    assert m.subscribe(p, 1) is False  # duplicate pair
    assert m.subscribe(p, 2) is True
    assert m.subscribe(q, 1) is True
    assert len(m) == 3
    assert m.unsubscribe(p, 3) is False  # known pattern, other subscriber
    assert m.unsubscribe(q, 2) is False
    assert m.unsubscribe(p, 1) is True
    assert m.unsubscribe(p, 1) is False
    assert len(m) == 2
    assert m.unsubscribe(p, 2) is True
    assert m.unsubscribe(q, 1) is True
    assert len(m) == 0
    for topic in EDGE_TOPICS[dialect]:
        assert m.lookup(topic) == []
    # the matcher is fully usable again after emptying
    assert m.subscribe(q, "again") is True
    pairs = [(q, "again")]
    for topic in EDGE_TOPICS[dialect]:
        assert answer(m, topic) == oracle.expected_lookup(d, pairs, topic)


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_subscriber_in_several_patterns_is_returned_once(name: str, dialect: str) -> None:
    d = DIALECTS[dialect]
    topics = EDGE_TOPICS[dialect]
    m = build(name, d, topics)
    for pattern in EDGE_PATTERNS[dialect]:
        m.subscribe(pattern, "same")
    pairs = [(p, "same") for p in EDGE_PATTERNS[dialect]]
    for topic in topics:
        found = m.lookup(topic)
        assert found == (["same"] if oracle.expected_lookup(d, pairs, topic) else [])


# ----------------------------------------------------------------- errors
BAD_PATTERNS: dict[str, list[object]] = {
    "amqp": [5, None, b"a.b", "a.\ud800"],
    "mqtt": [5, "", "a/#/b", "a+", "a/b#", "a\x00", "x" * 65536],
    "nats": [5.0, "", "a.>.b", "a..b", ".a"],
}
BAD_TOPICS: dict[str, list[object]] = {
    "amqp": [5, None, ["a"], "\ud800"],
    "mqtt": [5, "", "a/+", "#", "a/b#", "a\x00", ["a"]],
    "nats": [b"a", "", "a.*", "a.>", "a..b"],
}


def _expected_error(call: Any, value: object) -> type[Exception]:
    try:
        call(value)
    except (TypeError, ValueError) as exc:
        return type(exc)
    raise AssertionError(f"{value!r} should be invalid")


@pytest.mark.parametrize(
    ("name", "dialect"),
    [c for c in CASES if c.values[1] in BAD_PATTERNS],
)
def test_invalid_input_raises_and_changes_nothing(name: str, dialect: str) -> None:
    d = DIALECTS[dialect]
    topics = EDGE_TOPICS[dialect]
    m = build(name, d, topics)
    trie = Trie(d)
    for i, pattern in enumerate(EDGE_PATTERNS[dialect][:6]):
        m.subscribe(pattern, i)
        trie.subscribe(pattern, i)
    before = {t: answer(m, t) for t in topics}
    size = len(m)
    for bad in BAD_PATTERNS[dialect]:
        kind = _expected_error(d.split_pattern, bad)
        for call in (m.subscribe, m.unsubscribe):
            with pytest.raises(kind) as err:
                call(bad, "x")  # type: ignore[arg-type]
            with pytest.raises(kind):  # cstrie raises the same kind
                getattr(trie, call.__name__)(bad, "x")
            if kind is ValueError:
                assert str(err.value) == _message(d.split_pattern, bad)
    for bad in BAD_TOPICS[dialect]:
        kind = _expected_error(d.split_topic, bad)
        with pytest.raises(kind) as err:
            m.lookup(bad)  # type: ignore[arg-type]
        with pytest.raises(kind):
            trie.lookup(bad)  # type: ignore[arg-type]
        if kind is ValueError:
            assert str(err.value) == _message(d.split_topic, bad)
    pattern = EDGE_PATTERNS[dialect][0]
    unhashables: list[Any] = [[], {}, {1}]
    for unhashable in unhashables:
        for call in (m.subscribe, m.unsubscribe):
            with pytest.raises(TypeError, match="hashable"):
                call(pattern, unhashable)
            with pytest.raises(TypeError):
                getattr(trie, call.__name__)(pattern, unhashable)
    assert len(m) == size
    assert {t: answer(m, t) for t in topics} == before


def _message(call: Any, value: object) -> str:
    try:
        call(value)
    except ValueError as exc:
        return str(exc)
    raise AssertionError("no error")


# --------------------------------------------------------- inverted bitmap
def test_inverted_bitmap_topic_space() -> None:
    m = make_classic("inverted-bitmap", "amqp", topics=["a.b", "a.c", "a.b", ""])
    assert m.topics == ["a.b", "a.c", ""]  # type: ignore[attr-defined]
    m.subscribe("a.*", "x")
    m.subscribe("#", "y")
    assert set(m.lookup("a.b")) == {"x", "y"}
    assert m.lookup("") == ["y"]
    with pytest.raises(ValueError, match="not in the topic space given up front"):
        m.lookup("a.d")
    with pytest.raises(TypeError):
        m.lookup(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        m.lookup(["a.b"])  # type: ignore[arg-type]
    # an invalid topic gets the dialect's error, not "outside the space"
    mq = make_classic("inverted-bitmap", "mqtt", topics=["a/b"])
    with pytest.raises(ValueError, match="wildcard"):
        mq.lookup("a/+")
    with pytest.raises(ValueError, match="must not be empty"):
        make_classic("inverted-bitmap", "mqtt", topics=["a", ""])
    with pytest.raises(TypeError):
        make_classic("inverted-bitmap", "amqp")  # the space is required


@pytest.mark.parametrize("cache", [True, False])
def test_inverted_bitmap_reuses_bits_and_keeps_answers_fresh(cache: bool) -> None:
    topics = ["a.b", "a.c", "b.c", "a"]
    m = make_classic("inverted-bitmap", "amqp", topics=topics, cache=cache)
    pairs: set[tuple[str, Hashable]] = set()
    rng = random.Random(f"{SEED}/bits/{cache}")
    patterns = ["a.*", "#", "*.c", "a.#", "a", "b.#", "#.c"]
    for step in range(300):
        pair = (rng.choice(patterns), rng.randrange(4))
        if rng.random() < 0.5:
            assert m.subscribe(*pair) is (pair not in pairs)
            pairs.add(pair)
        else:
            assert m.unsubscribe(*pair) is (pair in pairs)
            pairs.discard(pair)
        t = rng.choice(topics)
        assert answer(m, t) == oracle.expected_lookup(AMQP, pairs, t), f"{REPLAY}: step {step}"
    # freed bit positions are reused: never more positions than distinct patterns
    assert len(m._subs) <= len(patterns)  # type: ignore[attr-defined]


def test_inverted_bitmap_cached_answer_is_a_copy() -> None:
    m = make_classic("inverted-bitmap", "amqp", topics=["a"])
    m.subscribe("a", 1)
    first = m.lookup("a")
    first.append(99)
    assert m.lookup("a") == [1]


# ------------------------------------------------------------ level bitmap
def test_level_bitmap_levels_grow_and_shrink() -> None:
    m = make_classic("level-bitmap", "amqp")
    m.subscribe("a.*", 1)
    m.subscribe("a.b.c.*.e.f", 2)
    m.subscribe("#.a", 3)  # '#' then a literal: a post-filtered superset
    m.subscribe("x.y", 4)  # wildcard-free: the exact map
    assert m.levels == 6  # type: ignore[attr-defined]
    assert set(m.lookup("a.b.c.d.e.f")) == {2}
    assert set(m.lookup("a.a")) == {1, 3}
    assert m.lookup("x.y") == [4]
    m.unsubscribe("a.b.c.*.e.f", 2)
    assert m.levels == 2  # type: ignore[attr-defined]
    assert m.lookup("a.b.c.d.e.f") == []
    assert m.lookup("a.b") == [1]
    m.subscribe("a.b.#", 5)  # a trailing '#': in the bitmaps, any depth
    assert set(m.lookup("a.b.c.d.e.f.g.h")) == {5}
    assert set(m.lookup("a.b")) == {1, 5}
    for p, s in [("a.*", 1), ("#.a", 3), ("x.y", 4), ("a.b.#", 5)]:
        assert m.unsubscribe(p, s)
    assert m.levels == 0  # type: ignore[attr-defined]
    assert len(m) == 0


def test_level_bitmap_trailing_wildcards_rewritten() -> None:
    """``a.#.*`` = ``a.*.#`` and NATS ``a.>`` = ``a.*`` + zero-or-more: same answers."""
    m = make_classic("level-bitmap", "amqp")
    m.subscribe("a.#.*", 1)
    m.subscribe("#.#", 2)
    m.subscribe("*.#.*.#", 3)
    for topic, want in [("a", {2}), ("a.b", {1, 2, 3}), ("a.b.c", {1, 2, 3}), ("", {2})]:
        assert set(m.lookup(topic)) == want
    n = make_classic("level-bitmap", "nats")
    n.subscribe("a.>", 1)
    n.subscribe(">", 2)
    assert set(n.lookup("a")) == {2}
    assert set(n.lookup("a.b")) == {1, 2}


# ---------------------------------------------------------------- lazy DFA
def _dfa(dialect: str | Dialect = "amqp", **options: Any) -> Any:
    return make_classic("lazy-dfa", dialect, **options)


def test_lazy_dfa_memo_is_reused() -> None:
    """Repeated lookups make no new states or transitions: the second pass over
    the same topics only reads the memo."""
    m = _dfa()
    for i, p in enumerate(EDGE_PATTERNS["amqp"]):
        m.subscribe(p, i)
    assert m.dfa_size()["states"] == 0  # nothing is built before a lookup
    topics = EDGE_TOPICS["amqp"]
    first = {t: answer(m, t) for t in topics}
    built = m.dfa_size()
    assert built["states"] > 0 and built["transitions"] > 0
    for _ in range(3):
        assert {t: answer(m, t) for t in topics} == first
    assert m.dfa_size() == built


def test_lazy_dfa_states_are_shared() -> None:
    """Words no pattern names share the "other" transition, and equal sets of
    NFA nodes are one state however a topic reached them."""
    m = _dfa()
    m.subscribe("a.*", 1)
    m.subscribe("*.c", 2)
    assert m.lookup("a.b") == [1]
    before = m.dfa_size()
    assert m.lookup("a.x") == [1]  # "x", like "b", is named by no pattern after "a"
    assert m.dfa_size() == before
    assert set(m.lookup("a.c")) == {1, 2}  # "c" is named: one new transition
    grown = m.dfa_size()
    assert grown["transitions"] == before["transitions"] + 1
    assert m.lookup("b.c") == [2]
    after_b = m.dfa_size()
    assert m.lookup("z.c") == [2]  # "b" and "z" share the start's "other" transition
    assert m.dfa_size() == after_b


def test_lazy_dfa_update_invalidates_memo() -> None:
    m = _dfa()
    m.subscribe("a.*", 1)
    assert m.lookup("a.b") == [1]
    assert m.dfa_size()["states"] > 0
    drops = m.dfa_size()["drops"]
    assert m.subscribe("#.b", 2)
    assert m.dfa_size()["states"] == 0 and m.dfa_size()["drops"] == drops + 1
    assert set(m.lookup("a.b")) == {1, 2}  # the lookup after it sees the new pattern
    assert m.unsubscribe("a.*", 1)
    assert m.dfa_size()["states"] == 0
    assert m.lookup("a.b") == [2]
    # a no-op update keeps the DFA
    built = m.dfa_size()
    assert m.subscribe("#.b", 2) is False
    assert m.unsubscribe("x.y", 3) is False
    assert m.dfa_size() == built


def test_lazy_dfa_unsubscribe_prunes_the_nfa() -> None:
    m = _dfa()
    m.subscribe("a.b.c", 1)
    m.subscribe("a.#.d", 2)
    m.subscribe("a.b.c", 3)
    assert m.dfa_size()["nfa_nodes"] == 6  # root, a, b, c, #, d
    m.unsubscribe("a.b.c", 1)
    assert m.dfa_size()["nfa_nodes"] == 6  # a.b.c still has subscriber 3
    m.unsubscribe("a.b.c", 3)
    assert m.dfa_size()["nfa_nodes"] == 4
    m.unsubscribe("a.#.d", 2)
    assert m.dfa_size()["nfa_nodes"] == 1
    assert m.lookup("a.b.c") == [] and m.lookup("a.x.d") == []


def test_lazy_dfa_state_budget() -> None:
    """With ``max_states`` the DFA never holds more states than that: it is
    dropped and rebuilt, and the answers stay exact."""
    d = AMQP
    pairs = [(p, i) for i, p in enumerate(EDGE_PATTERNS["amqp"])]
    m = _dfa(d, max_states=4)
    for p, s in pairs:
        m.subscribe(p, s)
    for _ in range(2):
        for topic in EDGE_TOPICS["amqp"]:
            assert answer(m, topic) == oracle.expected_lookup(d, pairs, topic), topic
            assert m.dfa_size()["states"] <= 4 + 1  # + the '$' start, kept apart
    assert m.dfa_size()["resets"] > 0
    unlimited = _dfa(d, max_states=None)
    for p, s in pairs:
        unlimited.subscribe(p, s)
    for topic in EDGE_TOPICS["amqp"]:
        unlimited.lookup(topic)
    assert unlimited.dfa_size()["resets"] == 0
    assert unlimited.dfa_size()["states"] > 4
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="max_states"):
            _dfa(d, max_states=bad)


def test_lazy_dfa_size_report() -> None:
    m = _dfa()
    m.subscribe("a.#", 1)
    m.subscribe("*.b", 2)
    assert m.dfa_size(measure_bytes=True)["bytes"] > 0
    m.lookup("a.b")
    size = m.dfa_size(measure_bytes=True)
    assert size["states"] >= 3 and size["transitions"] >= 2
    assert size["positions"] >= size["states"] - 1  # the dead state holds none
    assert set(size) >= {"states", "transitions", "nfa_nodes", "drops", "resets", "bytes"}


@pytest.mark.parametrize(
    ("dialect", "pattern", "topic"),
    [
        # the '$' rule: only patterns whose first word is literal match '$' topics
        ("mqtt", "#", "$SYS/a"),
        ("mqtt", "+/a", "$SYS/a"),
        ("mqtt", "+/#", "$SYS"),
        ("mqtt", "$SYS/#", "$SYS"),
        ("mqtt", "a/+", "a/$x"),
        ("dollar", "#/a", "$x/a"),
        ("dollar", "#/$x", "$x"),  # '#' taking zero words is still a wildcard first
        ("dollar", "#/a", "a"),
        ("dollar", "$x/#/a", "$x/a"),
        # multi_min: zero words for AMQP '#' and MQTT '#', at least one for NATS '>'
        ("amqp", "#", ""),
        ("amqp", "a.#", "a"),
        ("amqp", "#.a.#", "a"),
        ("amqp", "a.#.#.b", "a.b"),
        ("mqtt", "a/#", "a"),
        ("mqtt", "#", "/"),
        ("nats", "a.>", "a"),
        ("nats", "a.>", "a.b"),
        ("nats", "*.>", "a"),
        ("plus1", "*:a", "a"),
        ("plus1", "*:a", "x:a"),
        ("plus1", "a:*:*", "a:b"),
        ("plus1", "a:*:*", "a:b:c:d"),
        # empty words are ordinary words where the dialect allows them
        ("amqp", "a..b", "a..b"),
        ("amqp", "*.*", "."),
        ("amqp", "*", ""),
        ("mqtt", "a//b", "a//b"),
        ("mqtt", "+/+", "/"),
        ("mqtt", "a/+/b", "a//b"),
        ("glob", "**", ""),
        ("double", "<one>", ""),
        ("double", "a::<many>::b", "a::::b"),
    ],
)
def test_lazy_dfa_dialect_rules_against_oracle(dialect: str, pattern: str, topic: str) -> None:
    d = DIALECTS[dialect]
    want = oracle.matches(d, pattern, topic)
    m = _dfa(d)
    m.subscribe(pattern, "s")
    # twice: the cold answer (states made now) and the warm one (states reused)
    for _ in range(2):
        assert m.lookup(topic) == (["s"] if want else []), (dialect, pattern, topic)
    # beside other patterns and topics, in both orders of first use
    other = _dfa(d)
    for i, p in enumerate(EDGE_PATTERNS[dialect]):
        other.subscribe(p, i)
    other.subscribe(pattern, "s")
    pairs = [*[(p, i) for i, p in enumerate(EDGE_PATTERNS[dialect])], (pattern, "s")]
    for t in [*EDGE_TOPICS[dialect], topic]:
        assert answer(other, t) == oracle.expected_lookup(d, pairs, t), (dialect, t)


def test_lazy_dfa_wildcard_heavy_workload_matches_oracle() -> None:
    """Many '#' anywhere (the state blow-up case) over a small vocabulary,
    every topic looked up twice (cold, then warm), with updates in between."""
    d = AMQP
    rng = random.Random(f"{SEED}/lazy-dfa/hashes")
    m = _dfa(d, max_states=64)
    pairs: set[tuple[str, Hashable]] = set()
    vocab = ["a", "b", "#", "*", ""]
    topics = [oracle.random_topic(rng, d, ["a", "b", "c", ""], 7) for _ in range(40)]
    for step in range(8):
        for _ in range(10):
            p = ".".join(rng.choice(vocab) for _ in range(rng.randint(1, 5)))
            pair = (p, rng.randrange(5))
            if rng.random() < 0.8:
                m.subscribe(*pair)
                pairs.add(pair)
            else:
                m.unsubscribe(*pair)
                pairs.discard(pair)
        for _ in range(2):
            for t in topics:
                assert answer(m, t) == oracle.expected_lookup(d, pairs, t), (
                    f"{REPLAY}: step {step}, topic {t!r}"
                )


# -------------------------------------------------------------------- paho
def test_paho_speaks_mqtt_only() -> None:
    for dialect in ("amqp", "nats", DIALECTS["dollar"]):
        with pytest.raises(ValueError, match="MQTT only"):
            make_classic("paho", dialect)
    # an MQTT dialect under another name is still MQTT
    import dataclasses

    assert make_classic("paho", dataclasses.replace(MQTT, name="mine")).lookup("a") == []


def test_paho_missing_is_a_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "paho.mqtt.matcher", None)  # import now fails
    with pytest.raises(MissingDependency, match="paho-mqtt") as err:
        make_classic("paho", "mqtt")
    assert isinstance(err.value, RuntimeError)


def test_paho_dollar_rule_is_native() -> None:
    """paho itself applies the '$' rule (no filtering in the adapter): its bare
    ``iter_match`` already leaves out wildcard-first filters for '$' topics."""
    m = make_classic("paho", "mqtt")
    for p in ("#", "+/a", "+/#", "$x/#", "$x/+"):
        m.subscribe(p, p)
    assert set(m.lookup("$x/a")) == {"$x/#", "$x/+"}
    assert set(m.lookup("b/a")) == {"#", "+/a", "+/#"}
    raw = m._m  # type: ignore[attr-defined]  # paho's own MQTTMatcher
    assert {s for subs in raw.iter_match("$x/a") for s in subs} == {"$x/#", "$x/+"}


def test_deep_topics_and_paho_recursion_limit() -> None:
    """Topics and filters deeper than Python's recursion limit (valid MQTT): every
    matcher answers, except paho, whose recursive ``iter_match`` raises
    ``RecursionError`` once it walks a filter that deep -- paho's own behaviour,
    documented in cstrie_lab.classic.paho_matcher and kept.  Shallow filters are fine."""
    depth = sys.getrecursionlimit() + 200
    deep = "/".join(["a"] * depth)
    shallow = ["#", "a/#", "+/+/#"]
    deep_filter = "/".join(["a"] * (depth - 1) + ["+"])
    for name in CLASSIC:
        m = build(name, MQTT, [deep])
        for i, p in enumerate(shallow):
            m.subscribe(p, i)
        assert answer(m, deep) == {0, 1, 2}, name
        m.subscribe(deep_filter, 3)
        assert oracle.matches(MQTT, deep_filter, deep)
        if name == "paho":
            with pytest.raises(RecursionError):
                m.lookup(deep)
        else:
            assert answer(m, deep) == {0, 1, 2, 3}, name


# ------------------------------------------------------------- locked trie
def test_locked_trie_from_four_threads() -> None:
    d = AMQP
    m = make_classic("locked-trie", d)
    assert m.thread_safe
    patterns = EDGE_PATTERNS["amqp"]
    topics = EDGE_TOPICS["amqp"]
    errors: list[BaseException] = []
    finals: list[set[tuple[str, Hashable]]] = [set() for _ in range(4)]
    start = threading.Barrier(4)

    def worker(k: int) -> None:
        try:
            rng = random.Random(f"{SEED}/threads/{k}")
            mine = finals[k]
            start.wait()
            for _ in range(1500):
                pair = (rng.choice(patterns), (k, rng.randrange(3)))
                roll = rng.random()
                if roll < 0.4:
                    assert m.subscribe(*pair) is (pair not in mine)
                    mine.add(pair)
                elif roll < 0.7:
                    assert m.unsubscribe(*pair) is (pair in mine)
                    mine.discard(pair)
                else:
                    found = m.lookup(rng.choice(topics))
                    assert len(found) == len(set(found))
                    # this thread's own pairs are stable while it looks
                    t_found = {s for s in found if s[0] == k}  # type: ignore[index]
                    assert t_found <= {s for _, s in mine}
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, f"{REPLAY}: {errors[0]!r}"
    pairs = set().union(*finals)
    assert len(m) == len(pairs)
    for topic in topics:
        assert answer(m, topic) == oracle.expected_lookup(d, pairs, topic), REPLAY
