"""``cstrie.topics.TopicIndex``, rule by rule, written from the specifications.

A topic index stores literal topics, one value each, and answers a *filter*
with every stored ``(topic, value)`` that the filter matches (the reverse of a
subscription lookup).  Every expected answer below is written out by hand from
the rules and also asked of the independent oracle (``tests/support/oracle.py``), so a
wrong expectation fails as loudly as a wrong answer.  Sources:

* MQTT 5.0 section 4.7 (topic names and filters): 4.7.1.2 ``#`` (last level,
  also matches the parent: "sport/#" matches "sport"), 4.7.1.3 ``+`` (one
  level, possibly empty: "+/+" matches "/finance"), 4.7.2 topics beginning
  with ``$`` (a filter starting with a wildcard does not match them), 4.7.3
  (case, spaces, empty levels);
* the AMQP 0-9-1 topic exchange (RabbitMQ tutorial 5: "*.orange.*",
  "*.*.rabbit", "lazy.#"); ``#`` is zero or more words anywhere, the empty
  routing key is zero words, and ``*``/``#`` in a routing key are literal words;
* NATS subjects: ``*`` one token, ``>`` one or more tokens and only last; no
  empty tokens and no whitespace.

Validity: a topic is valid exactly when ``cstrie.Trie.lookup`` accepts it and a
filter exactly when ``cstrie.Trie.subscribe`` does, with the same exception
type; a rejected write leaves the index unchanged.  Then the dict-like API,
values of any type, snapshots, the isolation of a query from later writes, and
streaming (the first result of ``query("#")`` over 200,000 topics without the
whole answer in memory).
"""

from __future__ import annotations

import gc
import random
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import oracle
import pytest
from topic_index_helpers import check_contents, check_query, collect, same_values

import cstrie
from cstrie._binding import lib
from cstrie.dialect import AMQP, MQTT, NATS, Dialect, resolve_dialect
from cstrie.topics import TopicIndex, TopicSnapshot
from cstrie.trie import Trie

DIALECTS = {"amqp": AMQP, "mqtt": MQTT, "nats": NATS}


def value_for(topic: str) -> dict[str, str]:
    """A distinct, unhashable value per topic (checked by identity)."""
    return {"payload": topic}


def build(d: Dialect, topics: list[str]) -> tuple[TopicIndex, dict[str, Any]]:
    """An index holding ``topics`` (each with its own value) and its model."""
    idx = TopicIndex(d)
    model: dict[str, Any] = {}
    for topic in topics:
        value = value_for(topic)
        assert idx.put(topic, value) is (topic not in model), topic
        model[topic] = value
    check_contents(idx, model)
    return idx, model


def expect(d: Dialect, topics: list[str], cases: dict[str, set[str]]) -> None:
    """For each filter: the hand-written answer agrees with the oracle, and the
    index (and a snapshot of it) answers exactly that, with the values put."""
    idx, model = build(d, topics)
    snap = idx.snapshot()
    for f, want in cases.items():
        assert want <= set(topics), f"bad case: {sorted(want - set(topics))}"
        by_oracle = {t for t in topics if oracle.matches(d, f, t)}
        assert by_oracle == want, f"oracle disagrees on {d.name} filter {f!r}: {by_oracle}"
        check_query(idx, d, model, f)
        check_query(snap, d, model, f, "(snapshot)")


# ===================================================================== MQTT
def test_mqtt_multi_level_wildcard_4_7_1_2() -> None:
    """'sport/tennis/player1/#' matches the parent level and everything below;
    '#' matches every topic not starting with '$'."""
    topics = [
        "sport",
        "sport/tennis",
        "sport/tennis/player1",
        "sport/tennis/player1/ranking",
        "sport/tennis/player1/score/wimbledon",
        "sport/tennis/player2",
        "sports",
        "sport/",
    ]
    expect(
        MQTT,
        topics,
        {
            "sport/tennis/player1/#": {
                "sport/tennis/player1",
                "sport/tennis/player1/ranking",
                "sport/tennis/player1/score/wimbledon",
            },
            "sport/#": set(topics) - {"sports"},
            "#": set(topics),
            "sport/tennis/#": {
                "sport/tennis",
                "sport/tennis/player1",
                "sport/tennis/player1/ranking",
                "sport/tennis/player1/score/wimbledon",
                "sport/tennis/player2",
            },
            "sports/#": {"sports"},
            "sport/+/#": set(topics) - {"sports", "sport"},
        },
    )


def test_mqtt_hash_matches_the_parent_level() -> None:
    """4.7.1.2: 'sport/#' matches 'sport' itself; 'a/b/#' matches 'a/b' but not 'a'."""
    expect(
        MQTT,
        ["sport", "a", "a/b", "a/b/c"],
        {"sport/#": {"sport"}, "a/b/#": {"a/b", "a/b/c"}, "a/#": {"a", "a/b", "a/b/c"}},
    )


def test_mqtt_single_level_wildcard_4_7_1_3() -> None:
    """'+' matches exactly one level, which may be empty; 'sport/+' does not match
    'sport' but matches 'sport/'."""
    topics = [
        "sport",
        "sport/",
        "sport/tennis/player1",
        "sport/tennis/player2",
        "sport/tennis/player1/ranking",
        "/finance",
        "finance",
    ]
    expect(
        MQTT,
        topics,
        {
            "sport/tennis/+": {"sport/tennis/player1", "sport/tennis/player2"},
            "sport/+": {"sport/"},
            "+": {"sport", "finance"},
            "+/+": {"sport/", "/finance"},
            "/+": {"/finance"},
            "+/tennis/#": {
                "sport/tennis/player1",
                "sport/tennis/player2",
                "sport/tennis/player1/ranking",
            },
            "sport/+/player1": {"sport/tennis/player1"},
            "+/+/+/+": {"sport/tennis/player1/ranking"},
        },
    )


def test_mqtt_dollar_topics_4_7_2() -> None:
    """A filter whose first level is a wildcard does not match a topic whose first
    level starts with '$'; a filter starting with that literal level does.  The
    rule looks at the first level only."""
    topics = [
        "$SYS/monitor/Clients",
        "$SYS",
        "$",
        "$share/g/x",
        "a/$SYS",
        "monitor/Clients",
        "x/monitor/Clients",
        "SYS/monitor/Clients",
    ]
    expect(
        MQTT,
        topics,
        {
            "#": {"a/$SYS", "monitor/Clients", "x/monitor/Clients", "SYS/monitor/Clients"},
            "+/monitor/Clients": {"x/monitor/Clients", "SYS/monitor/Clients"},
            "+": set(),
            "+/#": {"a/$SYS", "monitor/Clients", "x/monitor/Clients", "SYS/monitor/Clients"},
            "$SYS/#": {"$SYS/monitor/Clients", "$SYS"},
            "$SYS/monitor/+": {"$SYS/monitor/Clients"},
            "$SYS/+/Clients": {"$SYS/monitor/Clients"},
            "$": {"$"},
            "a/+": {"a/$SYS"},
            "a/#": {"a/$SYS"},
        },
    )


def test_mqtt_share_filters_are_literal_in_a_topic_index() -> None:
    """MQTT 5 section 4.8.2: a session gets no retained messages when it
    establishes a shared subscription, so a topic index has no share syntax:
    ``$share/{name}/{filter}`` is an ordinary filter whose first level is the
    literal word ``$share``.  It sees stored ``$share/...`` topics only, and
    splitting it (``split_shared``) gives the filter a broker could query."""
    from cstrie.groups import split_shared

    topics = ["a/b", "a/c", "$share/g/a/b", "$share/h/a/b", "$share/g"]
    expect(
        MQTT,
        topics,
        {
            "$share/g/a/+": {"$share/g/a/b"},
            "$share/g/#": {"$share/g/a/b", "$share/g"},
            "$share/+/a/b": {"$share/g/a/b", "$share/h/a/b"},
            "#": {"a/b", "a/c"},
        },
    )
    assert split_shared(MQTT, "$share/g/a/+") == ("a/+", "g")
    expect(MQTT, topics, {split_shared(MQTT, "$share/g/a/+")[0]: {"a/b", "a/c"}})


def test_mqtt_case_spaces_and_empty_levels_4_7_3() -> None:
    """Topics are case-sensitive, may contain spaces, and may have empty levels at
    the start, in the middle and at the end ('/' is two empty levels)."""
    topics = ["ACCOUNTS", "Accounts", "Accounts payable", "a//b", "a/b", "/a", "a/", "a", "/"]
    expect(
        MQTT,
        topics,
        {
            "Accounts": {"Accounts"},
            "ACCOUNTS": {"ACCOUNTS"},
            "Accounts payable": {"Accounts payable"},
            "a//b": {"a//b"},
            "a/+/b": {"a//b"},
            "a/b": {"a/b"},
            "a/+": {"a/b", "a/"},
            "a/#": {"a//b", "a/b", "a/", "a"},
            "+/a": {"/a"},
            "/#": {"/a", "/"},
            "+/+": {"a/b", "/a", "a/", "/"},
            "//": set(),
            "+//+": {"a//b"},
            "+/+/+": {"a//b"},
            "/": {"/"},
        },
    )


def test_mqtt_unicode_and_wildcard_lookalikes() -> None:
    """Non-ASCII levels are ordinary words; '$' inside a level is not special."""
    topics = ["caf\u00e9/\u00fc", "caf\u00e9/u", "a$/b", "\U0001f600"]
    expect(
        MQTT,
        topics,
        {
            "caf\u00e9/+": {"caf\u00e9/\u00fc", "caf\u00e9/u"},
            "caf\u00e9/\u00fc": {"caf\u00e9/\u00fc"},
            "+/b": {"a$/b"},
            "#": set(topics),
            "\U0001f600/#": {"\U0001f600"},
        },
    )


# ===================================================================== AMQP
def test_amqp_rabbitmq_tutorial_bindings() -> None:
    """RabbitMQ tutorial 5: '*' is exactly one word, '#' zero or more."""
    topics = [
        "quick.orange.rabbit",
        "lazy.orange.elephant",
        "quick.orange.fox",
        "lazy.brown.fox",
        "lazy.pink.rabbit",
        "quick.brown.fox",
        "orange",
        "quick.orange.new.rabbit",
        "lazy.orange.new.rabbit",
        "lazy",
    ]
    expect(
        AMQP,
        topics,
        {
            "*.orange.*": {"quick.orange.rabbit", "lazy.orange.elephant", "quick.orange.fox"},
            "*.*.rabbit": {"quick.orange.rabbit", "lazy.pink.rabbit"},
            "lazy.#": {
                "lazy.orange.elephant",
                "lazy.brown.fox",
                "lazy.pink.rabbit",
                "lazy.orange.new.rabbit",
                "lazy",
            },
            "#": set(topics),
            "#.rabbit": {
                "quick.orange.rabbit",
                "lazy.pink.rabbit",
                "quick.orange.new.rabbit",
                "lazy.orange.new.rabbit",
            },
            "quick.#.rabbit": {"quick.orange.rabbit", "quick.orange.new.rabbit"},
            "*": {"orange", "lazy"},
            "quick.brown.fox": {"quick.brown.fox"},
        },
    )


def test_amqp_hash_anywhere_and_repeated() -> None:
    """'#' may appear anywhere and several times: '#.#.a' matches what '#.a' does;
    'a.#.b' includes 'a.b'; '#.*' is one or more words; '*.#.*' two or more."""
    topics = ["a", "x.a", "x.y.a", "a.b", "a.x.b", "a.x.y.b", "b.a.c", "", "a.a", "b"]
    expect(
        AMQP,
        topics,
        {
            "#.a": {"a", "x.a", "x.y.a", "a.a"},
            "#.#.a": {"a", "x.a", "x.y.a", "a.a"},
            "a.#.b": {"a.b", "a.x.b", "a.x.y.b"},
            "#.a.#": {"a", "x.a", "x.y.a", "a.b", "a.x.b", "a.x.y.b", "b.a.c", "a.a"},
            "#.*": set(topics) - {""},
            "*.#.*": {"x.a", "x.y.a", "a.b", "a.x.b", "a.x.y.b", "b.a.c", "a.a"},
            "#.#": set(topics),
            "a.#": {"a", "a.b", "a.x.b", "a.x.y.b", "a.a"},
            "#.b.#": {"a.b", "a.x.b", "a.x.y.b", "b.a.c", "b"},
        },
    )


def test_amqp_empty_routing_key_is_zero_words() -> None:
    """'' is a valid key of zero words: matched by '#' and by '' only; '*' needs a
    word.  '.' is two empty words."""
    topics = ["", ".", "a", "a..b", "..", "a."]
    expect(
        AMQP,
        topics,
        {
            "": {""},
            "#": set(topics),
            "*": {"a"},
            "*.*": {".", "a."},
            "a.*.b": {"a..b"},
            "a.*": {"a."},
            "a.#": {"a", "a..b", "a."},
            "*.*.*": {"a..b", ".."},
            ".": {"."},
            "#.": {".", "a.", ".."},
        },
    )
    idx = TopicIndex("amqp")
    assert idx.put("", 0) is True
    assert len(idx) == 1 and "" in idx and idx[""] == 0
    assert list(idx) == [""] and list(idx.items()) == [("", 0)]


def test_amqp_wildcard_words_in_a_topic_are_literal() -> None:
    """A routing key 'a.*' holds the literal word '*': the filter 'a.*' matches it
    (as '*' matches any word), the filter 'a.b' matches only 'a.b', and a word
    merely containing '*' ('a*') is just a word."""
    topics = ["a.*", "a.#", "a.b", "a*", "ab", "#", "*"]
    expect(
        AMQP,
        topics,
        {
            "a.*": {"a.*", "a.#", "a.b"},
            "a.b": {"a.b"},
            "a.#": {"a.*", "a.#", "a.b"},
            "a*": {"a*"},
            "*": {"a*", "ab", "#", "*"},
            "#": set(topics),
        },
    )
    idx, _ = build(AMQP, topics)
    assert idx["a.*"] == value_for("a.*") and "a.c" not in idx


def test_amqp_level_limit() -> None:
    """AMQP allows 256 words (max_levels): a 256-word key is stored, 257 is not."""
    longest = ".".join(["w"] * 256)
    expect(AMQP, [longest, "w"], {"#": {longest, "w"}, "w.#": {longest, "w"}, "*": {"w"}})


# ===================================================================== NATS
def test_nats_tokens() -> None:
    """'*' is one token, '>' one or more tokens (never zero), only last."""
    topics = [
        "time.us",
        "time.us.east",
        "time.us.east.atlanta",
        "time.eu.east",
        "time",
        "$SYS.x",
        "a*",
        "a>",
    ]
    expect(
        NATS,
        topics,
        {
            "time.us.*": {"time.us.east"},
            "time.us.>": {"time.us.east", "time.us.east.atlanta"},
            "time.*.east": {"time.us.east", "time.eu.east"},
            "time.>": {"time.us", "time.us.east", "time.us.east.atlanta", "time.eu.east"},
            ">": set(topics),
            "*": {"time", "a*", "a>"},
            "*.>": set(topics) - {"time", "a*", "a>"},
            "*.*": {"time.us", "$SYS.x"},
            "$SYS.*": {"$SYS.x"},
            "time": {"time"},
            "a*": {"a*"},
            "a>": {"a>"},
        },
    )


def test_nats_gt_needs_a_token() -> None:
    """'foo.>' does not match 'foo' (unlike MQTT's 'foo/#')."""
    expect(NATS, ["foo", "foo.bar"], {"foo.>": {"foo.bar"}, ">": {"foo", "foo.bar"}})


# ============================================================= validity
TOPICS_TO_CHECK: dict[str, list[Any]] = {  # Any: non-str on purpose
    "mqtt": [
        "a/+",
        "+",
        "#",
        "a/#",
        "a+",
        "a#b",
        "sport/tennis#",
        "",
        "a\x00b",
        "\ud800",
        "x" * 65536,
        "\u00e9" * 32768,
        "x" * 65535,
        "/",
        "$SYS",
        "a b",
        b"a/b",
        5,
        None,
        ["a"],
    ],
    "amqp": [
        "",
        "a.*",
        "#",
        "a\x00b",
        ".".join(["a"] * 257),
        ".".join(["a"] * 256),
        "\udfff",
        "a b",
        b"a",
        3.5,
        None,
    ],
    "nats": [
        "",
        "a b",
        "a\tb",
        "a\nb",
        "a\rb",
        "a\x0cb",
        "a..b",
        ".a",
        "a.",
        ".",
        "a.*",
        "*",
        ">",
        "a.>",
        "a*",
        "a>",
        "a\x00b",
        "\ud800",
        b"a",
        1,
    ],
}

FILTERS_TO_CHECK: dict[str, list[Any]] = {  # Any: non-str on purpose
    "mqtt": [
        "a/#/b",
        "#/a",
        "a+/b",
        "sport/tennis#",
        "sport+",
        "a/b#",
        "",
        "a\x00",
        "\ud800",
        "x" * 65536,
        "#",
        "+",
        "+/+",
        "/",
        "a//b",
        b"#",
        None,
        7,
    ],
    "amqp": ["", "#.#.a", "a.*.#", ".".join(["#"] * 257), ".".join(["#"] * 256), "\ud800", b"#"],
    "nats": [
        "a.>.b",
        ">.a",
        ">",
        "a..b",
        "",
        "a b",
        "a.*.>",
        "*",
        ".a",
        "a.",
        "\ud800",
        b">",
        0,
    ],
}


def outcome(fn: Callable[[], object]) -> type[BaseException] | None:
    """The exception type ``fn()`` raises, or None."""
    try:
        fn()
    except Exception as exc:
        return type(exc)
    return None


@pytest.mark.parametrize("name", list(DIALECTS))
def test_topic_validity_is_trie_lookups(name: str) -> None:
    """put accepts exactly the topics Trie.lookup accepts; a rejected topic raises
    the same exception type (ValueError for an invalid str, TypeError for a
    non-str) from every way of writing it, and the index is unchanged."""
    d = DIALECTS[name]
    trie = Trie(d)
    base = {"keep": "k", "x": 1} if name != "nats" else {"keep": "k", "x.y": 1}
    idx = TopicIndex(name)
    model = dict(base)
    for t, v in base.items():
        idx.put(t, v)
    for topic in TOPICS_TO_CHECK[name]:
        ctx = f"{name} topic {topic!r:.80}"
        want = outcome(lambda: trie.lookup(topic))  # noqa: B023
        assert want in (None, ValueError, TypeError), ctx
        got = outcome(lambda: idx.put(topic, "new"))  # noqa: B023
        assert got is want, f"{ctx}: put raised {got}, Trie.lookup raised {want}"
        if want is None:
            assert isinstance(topic, str), ctx
            assert idx[topic] == "new", ctx
            assert idx.remove(topic) is True, ctx
            continue
        if isinstance(topic, str):
            with pytest.raises(ValueError) as info:
                idx.put(topic, "new")
            assert str(info.value), f"{ctx}: the ValueError names no problem"
        for write in (
            lambda: idx.__setitem__(topic, "new"),  # noqa: B023
            lambda: idx.remove(topic),  # noqa: B023
            lambda: idx.pop(topic),  # noqa: B023
            lambda: idx.pop(topic, None),  # noqa: B023
            lambda: idx.__delitem__(topic),  # noqa: B023
        ):
            assert outcome(write) is want, ctx
        check_contents(idx, model, ctx)


@pytest.mark.parametrize("name", list(DIALECTS))
def test_invalid_topic_in_reads_raises(name: str) -> None:
    """The topic rules hold for reads too: get, [] and 'in' of an invalid topic
    raise what Trie.lookup raises (they do not quietly answer 'absent')."""
    d = DIALECTS[name]
    trie = Trie(d)
    idx = TopicIndex(name)
    snap = idx.snapshot()
    for topic in TOPICS_TO_CHECK[name]:
        want = outcome(lambda: trie.lookup(topic))  # noqa: B023
        if want is None:
            continue
        for reader in (idx, snap):
            for read in (
                lambda: reader.get(topic),  # noqa: B023
                lambda: reader.get(topic, 1),  # noqa: B023
                lambda: reader[topic],  # noqa: B023
                lambda: topic in reader,  # noqa: B023
            ):
                assert outcome(read) is want, f"{name} topic {topic!r:.80} on {reader!r:.40}"


@pytest.mark.parametrize("name", list(DIALECTS))
def test_filter_validity_is_trie_subscribes(name: str) -> None:
    """query/count accept exactly the filters Trie.subscribe accepts; an invalid
    filter raises the same exception at the call of query (before iterating).

    MQTT's '$share/{group}/{filter}' is left out: Trie.subscribe reads it as a
    shared subscription (and rejects '$share/#'), while a filter over stored
    topics is plain pattern syntax ('$share' a literal first level)."""
    d = DIALECTS[name]
    idx = TopicIndex(name)
    idx.put("a" if name != "amqp" else "a.b", 1)
    snap = idx.snapshot()
    for f in FILTERS_TO_CHECK[name]:
        ctx = f"{name} filter {f!r:.80}"
        want = outcome(lambda: Trie(d).subscribe(f, 1))  # noqa: B023
        for reader in (idx, snap):
            if want is None:
                assert isinstance(f, str), ctx
                got = collect(reader.query(f), ctx)
                assert reader.count(f) == len(got), ctx
                assert set(got) == {t for t in idx if oracle.matches(d, f, t)}, ctx
                continue
            if want is ValueError:
                with pytest.raises(ValueError) as info:
                    reader.query(f)  # raises here, not at the first next()
                assert str(info.value), f"{ctx}: the ValueError names no problem"
            else:
                assert outcome(lambda: list(reader.query(f))) is want, ctx  # noqa: B023
            assert outcome(lambda: reader.count(f)) is want, ctx  # noqa: B023


@pytest.mark.parametrize("name", list(DIALECTS))
def test_random_strings_validity_matches_trie(name: str) -> None:
    """Short random strings over the characters that matter: put and query accept
    and reject exactly as Trie.lookup and Trie.subscribe do, and what they accept
    matches as the oracle says."""
    d = DIALECTS[name]
    rng = random.Random(f"topic-index-validity-{name}")
    alphabet = [d.separator] * 3 + ["a"] * 3 + ["b", "$", "\x00", "\u00e9", "\ud800", " ", "\t"]
    alphabet += [t for t in (d.single, d.multi) if t is not None]
    trie = Trie(d)
    for _ in range(600):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        ctx = f"{name} {text!r}"
        idx = TopicIndex(d)
        topic_err = outcome(lambda: trie.lookup(text))  # noqa: B023
        assert (topic_err is None) is oracle.valid_topic(d, text), ctx
        assert outcome(lambda: idx.put(text, 1)) is topic_err, ctx  # noqa: B023
        assert len(idx) == (1 if topic_err is None else 0), ctx
        filter_err = outcome(lambda: Trie(d).subscribe(text, 1))  # noqa: B023
        assert outcome(lambda: idx.query(text)) is filter_err, ctx  # noqa: B023
        if filter_err is None and topic_err is None:
            assert idx.count(text) == int(oracle.matches(d, text, text)), ctx


# =========================================================== dict-like API
def test_dialect_by_name_or_object_and_exports() -> None:
    assert cstrie.TopicIndex is TopicIndex
    for spec in ("mqtt", MQTT):
        idx = TopicIndex(spec)
        idx.put("sport", 1)
        assert collect(idx.query("sport/#")) == {"sport": 1}  # MQTT rules
        with pytest.raises(ValueError):
            idx.put("a/+", 1)
    default = TopicIndex()
    default.put("a.b", 1)
    assert default.count("a.*") == 1 and default.count("#") == 1  # AMQP by default
    custom = Dialect(name="glob", separator="/", single="?", multi="**")
    idx = TopicIndex(custom)
    idx.put("x/y/z", 1)
    idx.put("x", 2)
    assert collect(idx.query("x/**")) == {"x/y/z": 1, "x": 2}
    assert collect(idx.query("?/y/?")) == {"x/y/z": 1}
    assert isinstance(idx.snapshot(), TopicSnapshot)
    assert resolve_dialect("nats") is NATS


def test_put_get_replace_and_setitem() -> None:
    idx = TopicIndex("mqtt")
    first, second = {"v": 1}, {"v": 2}
    assert idx.put("a/b", first) is True
    assert idx.put("a/b", second) is False  # replaced
    assert len(idx) == 1
    assert idx["a/b"] is second and idx.get("a/b") is second
    assert collect(idx.query("a/+"))["a/b"] is second
    idx["a/c"] = first
    assert idx["a/c"] is first and len(idx) == 2
    idx["a/c"] = second  # replace through []
    assert idx["a/c"] is second and len(idx) == 2
    assert idx.put("a/c", first) is False
    assert idx.get("absent") is None
    sentinel = object()
    assert idx.get("absent", sentinel) is sentinel
    assert "a/b" in idx and "absent" not in idx
    with pytest.raises(KeyError):
        idx["absent"]
    check_contents(idx, {"a/b": second, "a/c": first})


@pytest.mark.parametrize(
    "value",
    [None, 0, "", b"", (), [], {}, {"unhashable": [1]}, [1, [2]], {1, 2}, object(), float("nan")],
    ids=lambda v: type(v).__name__,
)
def test_any_object_is_a_value(value: object) -> None:
    """Unhashable values, None and falsy values are ordinary values, handed back as
    the same object (None is present, not absent)."""
    idx = TopicIndex("amqp")
    assert idx.put("k", value) is True
    assert "k" in idx and len(idx) == 1
    assert idx["k"] is value and idx.get("k", "default") is value
    [(topic, listed)] = list(idx.items())
    assert topic == "k" and listed is value
    assert collect(idx.query("#"))["k"] is value
    snap = idx.snapshot()
    assert snap["k"] is value
    assert idx.put("k", value) is False
    assert idx.pop("k") is value
    assert "k" not in idx and len(idx) == 0
    assert snap["k"] is value  # the snapshot still holds it


def test_remove_pop_del() -> None:
    idx = TopicIndex("nats")
    idx.put("a.b", 1)
    idx.put("a.c", None)
    assert idx.remove("a.b") is True
    assert idx.remove("a.b") is False
    assert "a.b" not in idx and len(idx) == 1
    assert idx.pop("a.c") is None  # a stored None, not a missing topic
    with pytest.raises(KeyError):
        idx.pop("a.c")
    sentinel = object()
    assert idx.pop("a.c", sentinel) is sentinel
    assert idx.pop("a.c", None) is None
    idx["x.y"] = 3
    del idx["x.y"]
    with pytest.raises(KeyError):
        del idx["x.y"]
    assert len(idx) == 0 and list(idx) == [] and list(idx.items()) == []


def test_iter_items_len_clear() -> None:
    topics = [f"t/{i}/{'x' * (i % 5)}" for i in range(300)] + ["/", "$SYS/a"]
    idx, model = build(MQTT, topics)
    check_contents(idx, model)
    for topic in topics[::3]:
        assert idx.remove(topic) is True
        del model[topic]
    check_contents(idx, model)
    snap = idx.snapshot()
    frozen = dict(model)
    idx.clear()
    check_contents(idx, {})
    assert idx.count("#") == 0 and list(idx.query("#")) == []
    assert list(idx.query("$SYS/#")) == []
    check_contents(snap, frozen)  # clear does not touch a snapshot
    idx.clear()  # clearing an empty index is fine
    assert idx.put(topics[0], 1) is True  # and it is usable again
    check_contents(idx, {topics[0]: 1})


def test_iterating_items_is_a_consistent_state() -> None:
    """iter() and items() taken before writes describe the state at the call."""
    idx, model = build(AMQP, [f"k.{i}" for i in range(2000)])
    frozen = dict(model)
    topics_it = iter(idx)
    items_it = idx.items()
    first_topic = next(topics_it)
    first_item = next(items_it)
    for i in range(0, 2000, 2):
        idx.remove(f"k.{i}")
    for i in range(2000, 2500):
        idx.put(f"k.{i}", i)
    idx.put("k.1", "replaced")
    topics = [first_topic, *topics_it]
    assert len(topics) == len(set(topics)) and set(topics) == set(frozen)
    same_values(collect([first_item, *items_it]), frozen)


def test_deep_topics_and_long_filters() -> None:
    """The extremes the dialects allow: 256-word AMQP keys under filters of 256
    words full of '#', and an MQTT topic of 65,535 empty levels (65,534
    separators, the byte limit) under filters of the same depth.  Expected
    answers by hand (the oracle's dynamic program is too slow at this size)."""
    amqp = TopicIndex("amqp")
    a255_b = ".".join(["a"] * 255 + ["b"])
    a256 = ".".join(["a"] * 256)
    for value, topic in enumerate([a255_b, a256, "a"], start=1):
        amqp.put(topic, value)
    cases = {
        ".".join(["#"] * 256): [1, 2, 3],
        "#.b": [1],
        ".".join(["#", "a"] * 128): [2],  # at least 128 words, the last an 'a'
        ".".join(["#"] * 255 + ["b"]): [1],
        ".".join(["*"] * 255 + ["b"]): [1],
        ".".join(["#", "*"] * 128): [1, 2],  # at least 128 words
        ".".join(["*"] * 256): [1, 2],
        "a.#": [1, 2, 3],
    }
    for f, want in cases.items():
        assert sorted(v for _, v in amqp.query(f)) == want, f[:60]
        assert amqp.count(f) == len(want), f[:60]
    with pytest.raises(ValueError):
        amqp.query(".".join(["#"] * 257))

    mqtt = TopicIndex("mqtt")
    deep = "/" * 65534  # 65,535 empty levels, 65,534 bytes
    mqtt.put(deep, 1)
    mqtt.put("/" * 100, 2)
    mqtt.put("$/" + "/" * 100, 3)
    cases = {
        "#": [1, 2],
        "+/#": [1, 2],
        deep: [1],
        "/" * 65533 + "#": [1],
        "/" * 50 + "#": [1, 2],
        "$/#": [3],
        "+" + "/+" * 100: [2],  # 101 levels
        "+" + "/+" * 32766: [],
    }
    for f, want in cases.items():
        assert sorted(v for _, v in mqtt.query(f)) == want, (len(f), f[:60])
        assert mqtt.count(f) == len(want), (len(f), f[:60])
    assert mqtt.get(deep) == 1 and mqtt.remove(deep) is True and len(mqtt) == 2


def test_released_values_are_freed() -> None:
    """(From docs/topic-index.md, 'value lifetime'.)  A replaced, removed or
    cleared value is not kept alive by the index; a snapshot or an open query
    that can still see it keeps it until dropped."""

    class Value:
        pass

    def put_fresh(idx: TopicIndex, topic: str) -> weakref.ref[Value]:
        value = Value()
        idx.put(topic, value)
        return weakref.ref(value)

    idx = TopicIndex("mqtt")
    replaced = put_fresh(idx, "r")
    put_fresh(idx, "r")
    removed = put_fresh(idx, "x")
    idx.remove("x")
    gc.collect()
    assert replaced() is None and removed() is None
    seen = put_fresh(idx, "s")
    snap = idx.snapshot()
    idx.remove("s")
    gc.collect()
    assert seen() is not None and snap["s"] is seen()
    del snap
    gc.collect()
    assert seen() is None
    in_query = put_fresh(idx, "q")
    it = idx.query("#")
    next(it)
    idx.clear()
    gc.collect()
    assert in_query() is not None
    del it
    gc.collect()
    assert in_query() is None
    kept = put_fresh(idx, "k")
    del idx
    gc.collect()
    assert kept() is None


# ================================================================ errors
@pytest.mark.parametrize(
    ("name", "bad", "why"),
    [
        ("mqtt", "a/+", ("wildcard", "'+'")),
        ("mqtt", "a/b/#", ("wildcard", "'#'")),
        ("mqtt", "a\x00", ("U+0000", "NUL", "\\x00")),
        ("mqtt", "", ("empty",)),
        ("nats", "a b", ("' '", "space", "whitespace", "U+0020")),
        ("nats", "a..b", ("empty",)),
        ("nats", "a.*", ("wildcard", "'*'")),
        ("amqp", ".".join("a" * 257), ("257", "256", "levels", "words")),
    ],
)
def test_invalid_topic_names_the_problem_and_changes_nothing(
    name: str, bad: str, why: tuple[str, ...]
) -> None:
    """The ValueError names the problem, and len, contents, queries and counts are
    as before."""
    d = DIALECTS[name]
    topics = ["a", "a/b"] if name == "mqtt" else ["a", "a.b"]
    idx, model = build(d, topics)
    with pytest.raises(ValueError) as mine:
        idx.put(bad, 1)
    message = str(mine.value)
    assert any(w in message for w in why), f"{message!r} does not name the problem {why}"
    with pytest.raises(ValueError):
        idx[bad] = 2
    with pytest.raises(TypeError):
        idx.put(b"a", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        idx.put(None, 1)  # type: ignore[arg-type]
    check_contents(idx, model)
    multi = d.multi or "#"
    check_query(idx, d, model, multi)


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("mqtt", "a/#/b"),
        ("mqtt", "a+/b"),
        ("mqtt", "sport/tennis#"),
        ("mqtt", ""),
        ("nats", "a.>.b"),
        ("nats", "a..b"),
        ("nats", "a b"),
    ],
)
def test_invalid_filter_raises_at_the_call(name: str, bad: str) -> None:
    idx = TopicIndex(name)
    idx.put("a", 1)
    with pytest.raises(ValueError) as mine:
        idx.query(bad)  # no next(): the call itself raises
    assert str(mine.value), "the ValueError names no problem"
    with pytest.raises(ValueError):
        idx.count(bad)
    with pytest.raises(ValueError):
        idx.snapshot().query(bad)
    assert len(idx) == 1 and idx["a"] == 1


# ============================================================= snapshots
def test_snapshot_is_read_only() -> None:
    idx = TopicIndex("amqp")
    idx.put("a", 1)
    snap = idx.snapshot()
    assert isinstance(snap, TopicSnapshot)
    for method in ("put", "remove", "pop", "clear"):
        assert not hasattr(snap, method), method
    with pytest.raises((TypeError, AttributeError)):
        snap["b"] = 2  # type: ignore[index]
    with pytest.raises((TypeError, AttributeError)):
        del snap["a"]  # type: ignore[attr-defined]
    check_contents(snap, {"a": 1})


def test_snapshot_is_unaffected_by_later_writes() -> None:
    topics = [f"s/{i % 7}/{i}" for i in range(500)] + ["s", "$x/s"]
    idx, model = build(MQTT, topics)
    snap = idx.snapshot()
    frozen = dict(model)
    for i in range(0, 500, 2):
        assert idx.remove(f"s/{i % 7}/{i}") is True
        del model[f"s/{i % 7}/{i}"]
    for i in range(500, 700):
        model[f"s/new/{i}"] = i
        idx.put(f"s/new/{i}", i)
    replaced = {"r": 1}
    idx["s"] = replaced
    model["s"] = replaced
    later = idx.snapshot()
    idx.clear()
    for f in ["#", "s/#", "s/+/+", "s/3/+", "s/new/+", "+", "$x/#", "s"]:
        check_query(snap, MQTT, frozen, f, "(snapshot before the writes)")
        check_query(later, MQTT, model, f, "(snapshot after the writes)")
        check_query(idx, MQTT, {}, f, "(cleared index)")
    check_contents(snap, frozen)
    check_contents(later, model)
    assert snap.get("s") is frozen["s"] and later.get("s") is replaced
    assert "s/new/500" not in snap and snap.get("s/new/500", 5) == 5
    with pytest.raises(KeyError):
        snap["s/new/500"]


def test_snapshot_outlives_its_index() -> None:
    idx, model = build(AMQP, [f"a.{i}" for i in range(100)])
    snap = idx.snapshot()
    it = idx.query("a.*")
    del idx
    gc.collect()
    check_contents(snap, model)
    check_query(snap, AMQP, model, "#")
    same_values(collect(it), model)


# ========================================================= query isolation
@pytest.mark.parametrize("n", [3, 3000])
def test_query_answers_the_state_at_the_call(n: int) -> None:
    """Take the iterator, advance it once, then write (remove, add matching topics,
    replace values): the whole answer is still the state at the call."""
    idx, model = build(AMQP, [f"q.{i}" for i in range(n)] + ["other"])
    want = {t: v for t, v in model.items() if t.startswith("q.")}
    it = idx.query("q.*")
    count_it = idx.query("q.#")
    first = next(it)
    for i in range(0, n, 2):
        idx.remove(f"q.{i}")
    for i in range(n, 2 * n):
        idx.put(f"q.{i}", i)
    for i in range(1, n, 4):
        idx.put(f"q.{i}", "replaced")
    idx.put("q", "parent")
    got = collect([first, *it])
    same_values(got, want)
    same_values(collect(count_it), want)  # created before the writes, not advanced


def test_query_isolated_from_clear() -> None:
    idx, model = build(NATS, [f"c.{i}.x" for i in range(1000)])
    it = idx.query("c.>")
    first = next(it)
    idx.clear()
    assert len(idx) == 0
    same_values(collect([first, *it]), model)


def test_query_outlives_its_index() -> None:
    idx, model = build(MQTT, [f"o/{i}" for i in range(1000)])
    it = idx.query("o/+")
    first = next(it)
    del idx
    gc.collect()
    same_values(collect([first, *it]), model)


# ============================================================ count == query
@pytest.mark.parametrize("name", list(DIALECTS))
def test_count_is_the_number_of_query_results(name: str) -> None:
    d = DIALECTS[name]
    rng = random.Random(f"count-{name}")
    words = ["a", "b", "c", "$d"]
    topics = [oracle.random_topic(rng, d, words, 4) for _ in range(400)]
    idx, model = build(d, list(dict.fromkeys(topics)))
    for _ in range(150):
        f = oracle.random_pattern(rng, d, words, 4)
        got = list(idx.query(f))
        assert idx.count(f) == len(got), f
        check_query(idx, d, model, f)


# ============================================================== streaming
STREAM_N = 200_000


@pytest.fixture(scope="module")
def big_index() -> tuple[TopicIndex, dict[str, Any]]:
    idx = TopicIndex("mqtt")
    model: dict[str, Any] = {}
    value = ("shared value",)
    for i in range(STREAM_N):
        topic = f"stream/{i % 1000:03d}/{i:06d}/payload"
        idx.put(topic, value)
        model[topic] = value
    return idx, model


def _settled_live_bytes() -> int:
    gc.collect()
    lib.cst_reclaim()
    return int(lib.cst_live_bytes())


def test_query_streams_its_answer(big_index: tuple[TopicIndex, dict[str, Any]]) -> None:
    """The first next() of query('#') over 200,000 topics does not materialise the
    answer: neither the engine (cst_live_bytes) nor Python (tracemalloc) holds
    more than half of what the whole answer takes, and the rest then comes,
    each topic once."""
    idx, model = big_index
    assert len(idx) == STREAM_N
    # The whole answer: at least every topic's bytes plus an 8-byte reference, in
    # the engine; in Python, a str and a 2-tuple per result.
    engine_full = sum(len(t) + 8 for t in model)
    python_full = sum(len(t) + 49 + 56 for t in model)
    before = _settled_live_bytes()
    tracemalloc.start()
    try:
        it = idx.query("#")
        first = next(it)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    engine_used = int(lib.cst_live_bytes()) - before
    assert engine_used < engine_full // 2, (engine_used, engine_full)
    assert peak < python_full // 2, (peak, python_full)
    rest = list(it)
    assert len(rest) + 1 == STREAM_N
    got = collect([first, *rest])
    assert set(got) == set(model)
    assert idx.count("#") == STREAM_N
    assert idx.count("stream/007/+/payload") == STREAM_N // 1000


def test_query_of_a_big_index_answers_the_state_at_the_call(
    big_index: tuple[TopicIndex, dict[str, Any]],
) -> None:
    """Isolation when the answer spans many chunks: half the topics removed and
    others added after the first result change nothing in the answer."""
    idx, model = big_index
    it = idx.query("stream/#")
    first = next(it)
    removed = [t for i, t in enumerate(model) if i % 2 == 0]
    try:
        for topic in removed:
            idx.remove(topic)
        for i in range(20_000):
            idx.put(f"stream/new/{i}", i)
        got = collect([first, *it])
        assert len(got) == STREAM_N and set(got) == set(model)
    finally:  # leave the module fixture as it was
        for i in range(20_000):
            idx.remove(f"stream/new/{i}")
        for topic in removed:
            idx.put(topic, model[topic])
    assert len(idx) == STREAM_N
