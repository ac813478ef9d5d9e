"""Bad input: a clear error naming the problem, and the trie left exactly as it was.

    "Bad input gets a clear ValueError/TypeError naming the problem and leaves the trie
    as it was."

Every pattern-taking method (subscribe, unsubscribe, subscribers) and every
topic-taking method (lookup, match, has_subscribers) is tried with each bad input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

# (dialect, bad pattern, words the message must contain)
BAD_PATTERNS = [
    ("mqtt", "", "must not be empty"),
    ("mqtt", "a/#/b", "may only be the last"),
    ("mqtt", "#/a", "may only be the last"),
    ("mqtt", "a+", "must fill a whole level"),
    ("mqtt", "a/b#", "must fill a whole level"),
    ("mqtt", "a/#b", "must fill a whole level"),
    ("mqtt", "a/\x00", "U+0000"),
    ("mqtt", "a" * 65536, "at most 65535"),
    ("mqtt", "\u20ac" * 21846, "at most 65535"),  # 21,846 chars, 65,538 bytes
    ("mqtt", "a/\ud800", "UTF-8"),
    ("nats", "", "must not be empty"),
    ("nats", "a..b", "empty word"),
    ("nats", ".a", "empty word"),
    ("nats", "a.", "empty word"),
    ("nats", "a.>.b", "may only be the last"),
    ("nats", ">.a", "may only be the last"),
    # nats-server isValidSubject: no " ", "\t", "\n", "\r", "\f" in a subscription
    ("nats", "a b", "contains ' ' (U+0020) at index 1"),
    ("nats", "a.\tb", "contains '\\t' (U+0009) at index 2"),
    ("nats", "a.b\n", "contains '\\n' (U+000A) at index 3"),
    ("nats", "\r.>", "contains '\\r' (U+000D) at index 0"),
    ("nats", "*.\f", "contains '\\x0c' (U+000C) at index 2"),
    ("amqp", "a.\udfff", "UTF-8"),
    # AMQP max_levels: 256 words, the most a 255-byte short string holds
    ("amqp", "." * 256, "257 words; amqp allows at most 256 (max_levels)"),
    ("amqp", ".".join(["#"] * 300), "300 words; amqp allows at most 256"),
]

# (dialect, bad topic, words the message must contain)
BAD_TOPICS = [
    ("mqtt", "", "must not be empty"),
    ("mqtt", "a/+", "wildcard '+'"),
    ("mqtt", "a/#", "wildcard '#'"),
    ("mqtt", "a+b", "wildcard '+'"),
    ("mqtt", "#", "wildcard '#'"),
    ("mqtt", "a\x00", "U+0000"),
    ("mqtt", "b" * 65536, "at most 65535"),
    ("mqtt", "\ud83d", "UTF-8"),
    ("nats", "", "must not be empty"),
    ("nats", "a..b", "empty word"),
    ("nats", "a.", "empty word"),
    ("nats", "a.*", "wildcard '*'"),
    ("nats", ">", "wildcard '>'"),
    ("nats", "a.>", "wildcard '>'"),
    ("nats", " ", "contains ' ' (U+0020) at index 0"),
    ("nats", "a.b\tc", "contains '\\t' (U+0009)"),
    ("nats", "\n", "contains '\\n' (U+000A)"),
    ("nats", "a.\r", "contains '\\r' (U+000D)"),
    ("nats", "a\f.b", "contains '\\x0c' (U+000C)"),
    ("amqp", "\ud800.a", "UTF-8"),
    ("amqp", "a." * 256 + "a", "257 words; amqp allows at most 256"),
]

NOT_STR: list[Any] = [None, b"a.b", 1, 1.5, ["a"], ("a",), bytearray(b"a"), object()]
UNHASHABLE: list[Any] = [[], {}, set(), ["a", 1], {"k": 1}]

# A starting population per dialect (string subscribers so the pairs sort).
SEED_PAIRS = {
    "amqp": [("a.b", "s1"), ("a.#", "s2"), ("#", "s3"), ("", "s4"), ("*.b", "s1")],
    "mqtt": [("a/b", "s1"), ("a/#", "s2"), ("#", "s3"), ("$SYS/#", "s4"), ("+/b", "s1")],
    "nats": [("a.b", "s1"), ("a.>", "s2"), (">", "s3"), ("*.b", "s1")],
}
PROBES = {"amqp": ["a.b", "", "x"], "mqtt": ["a/b", "a", "$SYS/x"], "nats": ["a.b", "a.b.c"]}


def _populated(trie_cls: Any, dialect: str) -> Any:
    trie = trie_cls(dialect)
    for pattern, sub in SEED_PAIRS[dialect]:
        trie.subscribe(pattern, sub)
    return trie


def _state(trie: Any, dialect: str) -> tuple[Any, ...]:
    """Everything observable: the sorted pairs, the size and some lookups."""
    lookups = tuple(tuple(sorted(trie.lookup(t))) for t in PROBES[dialect])
    return sorted(iter(trie)), len(trie), lookups


def _check_message(exc: BaseException, text: str, problem: str) -> None:
    message = str(exc)
    assert problem in message, f"{message!r} does not name the problem ({problem!r})"
    if text and len(text) < 100:
        assert repr(text) in message, f"{message!r} does not quote the input {text!r}"


@pytest.mark.parametrize(
    ("dialect", "pattern", "problem"),
    BAD_PATTERNS,
    ids=[f"{d}-{p[:12]!r}" for d, p, _ in BAD_PATTERNS],
)
def test_bad_pattern(trie_cls: Any, dialect: str, pattern: str, problem: str) -> None:
    """A pattern invalid in its dialect raises ValueError naming the problem; the trie
    is unchanged afterwards."""
    trie = _populated(trie_cls, dialect)
    before = _state(trie, dialect)
    calls: list[Callable[[], object]] = [
        lambda: trie.subscribe(pattern, "new"),
        lambda: trie.subscribe(pattern, "s1"),
        lambda: trie.unsubscribe(pattern, "s1"),
        lambda: trie.subscribers(pattern),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=re.escape(problem)) as info:
            call()
        _check_message(info.value, pattern, problem)
        assert _state(trie, dialect) == before


@pytest.mark.parametrize(
    ("dialect", "topic", "problem"),
    BAD_TOPICS,
    ids=[f"{d}-{t[:12]!r}" for d, t, _ in BAD_TOPICS],
)
def test_bad_topic(trie_cls: Any, dialect: str, topic: str, problem: str) -> None:
    """A topic invalid in its dialect raises ValueError naming the problem; the trie is
    unchanged afterwards."""
    trie = _populated(trie_cls, dialect)
    before = _state(trie, dialect)
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match=re.escape(problem)) as info:
            call(topic)
        _check_message(info.value, topic, problem)
        assert _state(trie, dialect) == before


@pytest.mark.parametrize(
    ("dialect", "text", "what"),
    [(d, p, "pattern") for d, p, _ in BAD_PATTERNS] + [(d, t, "topic") for d, t, _ in BAD_TOPICS],
    ids=[f"{d}-{p[:12]!r}" for d, p, _ in BAD_PATTERNS + BAD_TOPICS],
)
def test_engine_and_validator_give_the_same_error(dialect: str, text: str, what: str) -> None:
    """The native Trie, PyTrie and Dialect.split_pattern/split_topic raise the same
    ValueError, word for word (the engine's code is turned into the validator's
    message; an engine that refused what the validator accepts would show here)."""
    from cstrie.dialect import resolve_dialect
    from cstrie.trie import Trie
    from cstrie_lab.pytrie import PyTrie

    d = resolve_dialect(dialect)
    split = d.split_pattern if what == "pattern" else d.split_topic
    with pytest.raises(ValueError) as want:
        split(text)
    for cls in (Trie, PyTrie):
        trie = cls(d)
        with pytest.raises(ValueError) as got:
            trie.subscribe(text, 1) if what == "pattern" else trie.lookup(text)
        assert str(got.value) == str(want.value), cls.__name__
        assert len(trie) == 0


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
@pytest.mark.parametrize("value", NOT_STR, ids=lambda v: type(v).__name__)
def test_non_str_is_type_error(trie_cls: Any, dialect: str, value: Any) -> None:
    """A pattern or topic that is not a str raises TypeError (naming the argument and
    the type it got); the trie is unchanged afterwards."""
    trie = _populated(trie_cls, dialect)
    before = _state(trie, dialect)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("pattern", lambda: trie.subscribe(value, "new")),
        ("pattern", lambda: trie.unsubscribe(value, "s1")),
        ("pattern", lambda: trie.subscribers(value)),
        ("topic", lambda: trie.lookup(value)),
        ("topic", lambda: trie.match(value)),
        ("topic", lambda: trie.has_subscribers(value)),
    ]
    for what, call in calls:
        with pytest.raises(TypeError, match=rf"{what} must be a str, not {type(value).__name__}"):
            call()
        assert _state(trie, dialect) == before


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
@pytest.mark.parametrize("sub", UNHASHABLE, ids=repr)
def test_unhashable_subscriber_is_type_error(trie_cls: Any, dialect: str, sub: Any) -> None:
    """Subscribers must be hashable: an unhashable one raises TypeError, both for an
    existing pattern and for a new one (no half-built path left behind)."""
    trie = _populated(trie_cls, dialect)
    before = _state(trie, dialect)
    sep = "/" if dialect == "mqtt" else "."
    fresh = sep.join(["new", "path", "here"])
    existing = SEED_PAIRS[dialect][0][0]
    for pattern in (fresh, existing):
        with pytest.raises(TypeError):
            trie.subscribe(pattern, sub)
        assert _state(trie, dialect) == before
        with pytest.raises(TypeError):
            trie.unsubscribe(pattern, sub)
        assert _state(trie, dialect) == before
    assert trie.subscribers(fresh) == []


def test_mixed_good_and_bad_calls(trie_cls: Any) -> None:
    """A failed call between good ones changes nothing: the good ones all take effect."""
    trie = trie_cls("mqtt")
    assert trie.subscribe("a/+", 1)
    with pytest.raises(ValueError, match="last"):
        trie.subscribe("a/#/b", 1)
    assert trie.subscribe("a/#", 2)
    with pytest.raises(ValueError, match="wildcard"):
        trie.lookup("a/+")
    with pytest.raises(TypeError, match="unhashable"):
        trie.subscribe("a/b", [3])
    assert sorted(trie.lookup("a/b")) == [1, 2]
    assert sorted(iter(trie)) == [("a/#", 2), ("a/+", 1)]


@pytest.mark.parametrize(
    ("dialect", "text"),
    [
        ("amqp", ""),
        ("amqp", "."),
        ("amqp", "a..b"),
        ("amqp", "*.#.*"),
        ("amqp", "a*b.c#"),
        ("amqp", "\x00"),
        ("amqp", "a" * 70000),
        ("mqtt", "/"),
        ("mqtt", "$"),
        ("mqtt", "a" * 65535),
        ("mqtt", "\u00e9t\u00e9/\U0001f600"),
        ("nats", "a-b_c.d"),
        ("nats", "a*"),
        ("nats", "a\x0bb"),  # the vertical tab is not in nats-server's whitespace set
        ("nats", "a.\u00a0"),
        ("amqp", "." * 255),  # 256 empty words: exactly max_levels
        ("amqp", "a b\t.\n"),
        ("mqtt", "a b/\t"),
    ],
    ids=lambda v: repr(v)[:14],
)
def test_valid_edge_inputs_accepted(trie_cls: Any, dialect: str, text: str) -> None:
    """Inputs that look odd but the rules allow are accepted, not rejected."""
    trie = trie_cls(dialect)
    assert trie.subscribe(text, 1)
    assert trie.subscribers(text) == [1]
    topic_ok = not re.search(r"(^|[./])[*#+>]($|[./])", text) or dialect == "amqp"
    if topic_ok:
        assert trie.lookup(text) == [1]
    assert trie.unsubscribe(text, 1)
    assert len(trie) == 0


@pytest.mark.parametrize(
    ("dialect", "text", "what"),
    [
        ("mqtt", "a/" * 30000 + "#/x", "pattern"),
        ("mqtt", "x" * 50000 + "\x00", "pattern"),
        ("mqtt", "a/" * 30000 + "+", "topic"),
        ("mqtt", "a+" * 20000, "pattern"),
        ("amqp", "a." * 300, "pattern"),
        ("nats", "a." * 30000 + "b c", "topic"),
        ("nats", "a." * 30000 + ">.x", "pattern"),
        ("nats", "a." * 30000 + "\ud800", "topic"),
    ],
)
def test_messages_about_huge_texts_stay_short(dialect: str, text: str, what: str) -> None:
    """Rule (hostile input): a ValueError names the problem without repeating a
    huge text: long texts are shown shortened (their start, or the part around
    the offending index, and their length)."""
    from cstrie.trie import Trie

    trie = Trie(dialect)
    call = trie.subscribe if what == "pattern" else trie.lookup
    args = (text, "s") if what == "pattern" else (text,)
    with pytest.raises(ValueError) as info:
        call(*args)
    message = str(info.value)
    assert len(message) < 300, message[:400]
    assert f"({len(text)} characters)" in message or "UTF-8 bytes long" in message
    assert len(trie) == 0


# (dialect, text, what, the exact message): one fault each, its position named
# as the rule states it (character index, word position), not as bytes
EXACT = [
    ("nats", "é é", "pattern",
     "pattern 'é é' contains ' ' (U+0020) at index 1; the nats dialect forbids the "
     "characters '\\t\\n\\x0c\\r '"),
    ("mqtt", "€/\x00", "topic", "topic '€/\\x00' contains U+0000, which mqtt forbids"),
    ("nats", "a.é..b", "topic",
     "topic 'a.é..b' has an empty word at position 2; nats does not allow empty words"),
    ("mqtt", "x/é+/y", "pattern",
     "pattern 'x/é+/y': wildcard '+' must fill a whole level, found in 'é+'"),
    ("mqtt", "a/#/b", "pattern",
     "pattern 'a/#/b': '#' may only be the last word in the mqtt dialect"),
    ("mqtt", "é/b#", "topic",
     "topic 'é/b#' contains the wildcard '#'; topics may not contain wildcards in the "
     "mqtt dialect"),
    ("amqp", ".".join("a" * 257), "pattern",
     f"pattern {'.'.join('a' * 257)[:40]!r}... (513 characters) has 257 words; amqp allows at "
     "most 256 (max_levels)"),
]  # fmt: skip


@pytest.mark.parametrize(("dialect", "text", "what", "message"), EXACT, ids=ascii)
def test_messages_name_the_fault_where_it_is(
    dialect: str, text: str, what: str, message: str
) -> None:
    """The engine checks the rule and says where the fault is; the message
    names it there: a character index in a non-ASCII text (not a byte
    offset), the position of the empty word, the word holding a wildcard."""
    from cstrie import resolve_dialect
    from cstrie.trie import Trie

    d = resolve_dialect(dialect)
    split = d.split_pattern if what == "pattern" else d.split_topic
    with pytest.raises(ValueError) as exc:
        split(text)
    assert str(exc.value) == message
    trie = Trie(d)
    call = trie.subscribe if what == "pattern" else trie.lookup
    args = (text, "s") if what == "pattern" else (text,)
    with pytest.raises(ValueError) as exc:
        call(*args)  # type: ignore[operator]
    assert str(exc.value) == message


@pytest.mark.parametrize(
    ("dialect", "text"),
    [("nats", "a..b c\x00"), ("mqtt", "a/\x00/+x"), ("nats", " \x00"), ("mqtt", "+x/\x00")],
    ids=ascii,
)
def test_a_text_with_several_faults_gets_one_message_everywhere(dialect: str, text: str) -> None:
    """Rules are checked in one place: every call that takes the text (the
    dialect's split, the trie's updates and reads, the topic index) reports
    the same fault of a text that breaks several rules."""
    from cstrie import TopicIndex, resolve_dialect
    from cstrie.trie import Trie

    d = resolve_dialect(dialect)
    trie = Trie(d)
    index = TopicIndex(d)

    def message(fn: Callable[[], object]) -> str:
        with pytest.raises(ValueError) as exc:
            fn()
        return str(exc.value)

    pattern = message(lambda: d.split_pattern(text))
    assert message(lambda: trie.subscribe(text, 1)) == pattern
    assert message(lambda: trie.unsubscribe(text, 1)) == pattern
    assert message(lambda: trie.subscribers(text)) == pattern
    assert message(lambda: Trie.from_pairs([(text, 1)], d)) == pattern
    topic = message(lambda: d.split_topic(text))
    assert message(lambda: trie.lookup(text)) == topic
    assert message(lambda: trie.snapshot().match(text)) == topic
    assert message(lambda: index.__setitem__(text, 1)) == topic


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_a_dialect_that_has_checked_text_pickles_and_copies(dialect: str) -> None:
    """A Dialect crosses processes (Spark ships it to its workers): after it has
    checked a topic and refused a pattern, pickle and copy give an equal
    dialect that checks text the same way."""
    import copy
    import pickle

    from cstrie.dialect import resolve_dialect

    d = resolve_dialect(dialect)
    d.split_topic("a")
    with pytest.raises(ValueError):
        d.split_pattern("a\ud800")
    for twin in (pickle.loads(pickle.dumps(d)), copy.copy(d), copy.deepcopy(d)):
        assert twin == d and hash(twin) == hash(d)
        assert twin.split_topic("a" + d.separator + "b") == ["a", "b"]
        with pytest.raises(ValueError):
            twin.split_pattern("a\ud800")
