"""MQTT topic-filter rules, one rule per test, written from the rules table:

mqtt | separator "/" | "+" one level (may be empty) | "#" last level only; also
matches the parent ("a/#" matches "a") | a filter starting with a wildcard never
matches a topic whose first level starts with "$"; empty topic/filter invalid; no
U+0000; at most 65,535 UTF-8 bytes; "+"/"#" must fill their level; topics contain
no wildcards.

The later tests cite the MQTT 5.0 specification (OASIS Standard, 2019) by section
and normative statement, e.g. [MQTT-4.7.3-1], and say where cstrie deliberately
differs from mosquitto (lib/util_topic.c, lib/utf8_mosq.c); docs/api.md lists
those differences.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from cstrie.dialect import MQTT

Matcher = Callable[..., bool]  # the ``matcher`` fixture: (dialect, pattern, topic) -> bool


def test_separator_is_slash(matcher: Matcher) -> None:
    """Rule: the separator is "/"; a plain level matches only an identical level."""
    assert matcher("mqtt", "a/b", "a/b")
    assert not matcher("mqtt", "a/b", "a/c")
    assert not matcher("mqtt", "a/b", "a/b/c")
    assert not matcher("mqtt", "a/b", "a")
    assert matcher("mqtt", "a.b", "a.b")  # "." is an ordinary character here
    assert not matcher("mqtt", "a.b", "a/b")
    assert not matcher("mqtt", "Sport", "sport")


def test_plus_matches_exactly_one_level(matcher: Matcher) -> None:
    """Rule: "+" matches one level."""
    assert matcher("mqtt", "+", "a")
    assert matcher("mqtt", "a/+", "a/b")
    assert matcher("mqtt", "+/b", "a/b")
    assert matcher("mqtt", "sport/+/player1", "sport/tennis/player1")
    assert not matcher("mqtt", "a/+", "a")
    assert not matcher("mqtt", "a/+", "a/b/c")
    assert not matcher("mqtt", "+", "a/b")
    assert not matcher("mqtt", "sport/+/player1", "sport/player1")


def test_plus_matches_an_empty_level(matcher: Matcher) -> None:
    """Rule: "+" matches one level, which may be empty."""
    assert matcher("mqtt", "a/+", "a/")
    assert matcher("mqtt", "+/b", "/b")
    assert matcher("mqtt", "a/+/c", "a//c")
    assert matcher("mqtt", "+/+", "/")
    assert not matcher("mqtt", "+", "/")  # "/" is two (empty) levels


def test_empty_levels_are_levels(matcher: Matcher) -> None:
    """Rule: levels may be empty ("a//b" has an empty middle level) and match literally."""
    assert matcher("mqtt", "a//b", "a//b")
    assert not matcher("mqtt", "a//b", "a/b")
    assert matcher("mqtt", "/a", "/a")
    assert not matcher("mqtt", "/a", "a")
    assert matcher("mqtt", "a/", "a/")
    assert not matcher("mqtt", "a/", "a")


def test_hash_matches_zero_or_more_levels(matcher: Matcher) -> None:
    """Rule: "#" (last level only) matches the remaining levels, however many."""
    assert matcher("mqtt", "a/#", "a/b")
    assert matcher("mqtt", "a/#", "a/b/c/d")
    assert matcher("mqtt", "a/#", "a/")
    assert matcher("mqtt", "a/b/#", "a/b/c")
    assert not matcher("mqtt", "a/#", "b/a")
    assert not matcher("mqtt", "a/#", "ab")
    assert not matcher("mqtt", "a/b/#", "a/c/b")


def test_hash_matches_the_parent(matcher: Matcher) -> None:
    """Rule: "#" also matches the parent ("a/#" matches "a")."""
    assert matcher("mqtt", "a/#", "a")
    assert matcher("mqtt", "sport/tennis/#", "sport/tennis")
    assert matcher("mqtt", "+/#", "a")
    assert not matcher("mqtt", "a/b/#", "a")  # only the direct parent level


def test_hash_alone_matches_every_topic(matcher: Matcher) -> None:
    """Rule: "#" matches zero or more levels, so alone it matches every (non-"$") topic."""
    for topic in ("a", "a/b/c", "/", "/a", "a/", "x$", "a/$b"):
        assert matcher("mqtt", "#", topic), topic


def test_plus_and_hash_combined(matcher: Matcher) -> None:
    """Rule: "+" is exactly one level and "#" the rest (zero or more)."""
    assert matcher("mqtt", "+/+/#", "a/b")
    assert matcher("mqtt", "+/+/#", "a/b/c/d")
    assert not matcher("mqtt", "+/+/#", "a")
    assert matcher("mqtt", "a/+/#", "a/b")
    assert matcher("mqtt", "a/+/#", "a/")


def test_dollar_topics_not_matched_by_leading_hash(matcher: Matcher) -> None:
    """Rule: a filter starting with a wildcard never matches a topic whose first level
    starts with "$" -- for "#"."""
    assert not matcher("mqtt", "#", "$SYS")
    assert not matcher("mqtt", "#", "$SYS/broker/load")
    assert not matcher("mqtt", "#", "$")
    assert not matcher("mqtt", "#", "$x/y")


def test_dollar_topics_not_matched_by_leading_plus(matcher: Matcher) -> None:
    """Rule: a filter starting with a wildcard never matches a topic whose first level
    starts with "$" -- for "+"."""
    assert not matcher("mqtt", "+", "$SYS")
    assert not matcher("mqtt", "+/x", "$SYS/x")
    assert not matcher("mqtt", "+/#", "$SYS/x")
    assert not matcher("mqtt", "+/+", "$SYS/x")
    assert not matcher("mqtt", "+/monitor/Clients", "$SYS/monitor/Clients")


def test_dollar_rule_only_concerns_the_first_level(matcher: Matcher) -> None:
    """Rule: the "$" exception is about the topic's FIRST level and the filter's FIRST
    level only; "$" later in the topic, or not at the start of the level, is ordinary."""
    assert matcher("mqtt", "#", "a/$SYS")
    assert matcher("mqtt", "+/+", "a/$SYS")
    assert matcher("mqtt", "a/#", "a/$SYS/x")
    assert matcher("mqtt", "a/+", "a/$x")
    assert matcher("mqtt", "#", "x$/a")
    assert matcher("mqtt", "+", "S$")
    assert matcher("mqtt", "#", "/$SYS")  # first level is empty, not "$..."


def test_dollar_topics_matched_by_literal_first_level(matcher: Matcher) -> None:
    """Rule: only filters whose first level is a wildcard are excluded; a filter with a
    literal first level matches "$" topics normally ("$SYS/#" does)."""
    assert matcher("mqtt", "$SYS/#", "$SYS/broker/load")
    assert matcher("mqtt", "$SYS/#", "$SYS/x")
    assert matcher("mqtt", "$SYS/#", "$SYS")  # parent rule still applies
    assert matcher("mqtt", "$SYS/+", "$SYS/x")
    assert matcher("mqtt", "$SYS/+/load", "$SYS/broker/load")
    assert matcher("mqtt", "$SYS", "$SYS")
    assert matcher("mqtt", "$", "$")
    assert not matcher("mqtt", "$SYS/#", "$OTHER/x")
    assert not matcher("mqtt", "$SYS/#", "SYS/x")
    assert not matcher("mqtt", "a/#", "$SYS/x")


def test_dollar_topics_in_a_mixed_trie(trie_cls: Any) -> None:
    """Rule: wildcard-first filters are skipped for "$" topics even among other filters."""
    trie = trie_cls("mqtt")
    for pattern, sub in (
        ("#", "all"),
        ("+/x", "plus"),
        ("$SYS/#", "sys"),
        ("$SYS/x", "lit"),
        ("+/#", "plushash"),
        ("$SYS/+", "sysplus"),
    ):
        trie.subscribe(pattern, sub)
    assert sorted(trie.lookup("$SYS/x")) == ["lit", "sys", "sysplus"]
    assert sorted(trie.lookup("SYS/x")) == ["all", "plus", "plushash"]
    assert sorted(trie.match("$SYS")) == [("$SYS/#", "sys")]
    assert not trie.has_subscribers("$OTHER/x")
    assert trie.has_subscribers("OTHER/x")


@pytest.mark.parametrize(
    "pattern",
    ["a/#/b", "#/a", "#/#", "a/#/"],
    ids=["middle", "first-of-two", "hash-hash", "before-empty-level"],
)
def test_hash_only_last(trie_cls: Any, pattern: str) -> None:
    """Rule: "#" is valid as the last level only."""
    trie = trie_cls("mqtt")
    with pytest.raises(ValueError, match="last"):
        trie.subscribe(pattern, 1)
    assert len(trie) == 0


@pytest.mark.parametrize(
    "pattern",
    ["a+", "+a", "a/b+", "a/+b/c", "a#", "a/b#", "#a", "a/#b", "a/b+#", "++", "##", "+#"],
)
def test_wildcards_must_fill_their_level(trie_cls: Any, pattern: str) -> None:
    """Rule: "+"/"#" must fill their level ("a+" and "a#b" are invalid filters)."""
    trie = trie_cls("mqtt")
    with pytest.raises(ValueError, match="whole level"):
        trie.subscribe(pattern, 1)
    assert len(trie) == 0


def test_empty_filter_and_topic_invalid(trie_cls: Any) -> None:
    """Rule: empty topic/filter invalid."""
    trie = trie_cls("mqtt")
    with pytest.raises(ValueError, match="empty"):
        trie.subscribe("", 1)
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match="empty"):
            call("")
    # but a single separator is two empty levels, which is valid
    assert trie.subscribe("/", 1)
    assert trie.lookup("/") == [1]


def test_nul_invalid(trie_cls: Any) -> None:
    """Rule: no U+0000 in topics or filters."""
    trie = trie_cls("mqtt")
    with pytest.raises(ValueError, match="U\\+0000"):
        trie.subscribe("a/\x00", 1)
    with pytest.raises(ValueError, match="U\\+0000"):
        trie.lookup("a\x00b")
    with pytest.raises(ValueError, match="U\\+0000"):
        trie.has_subscribers("\x00")


def test_length_limit_in_utf8_bytes(trie_cls: Any) -> None:
    """Rule: at most 65,535 UTF-8 bytes (bytes, not characters)."""
    trie = trie_cls("mqtt")
    ok = "a" * 65535
    assert trie.subscribe(ok, 1)
    assert trie.lookup(ok) == [1]
    assert trie.subscribe("a/" * 32766 + "#", 2)  # 65,533 bytes, 32,767 levels
    assert trie.lookup("a/" * 32767 + "b") == [2]
    assert sorted(trie.lookup(ok)) == [1]
    with pytest.raises(ValueError, match="65535"):
        trie.subscribe("a" * 65536, 1)
    with pytest.raises(ValueError, match="65535"):
        trie.lookup("b" * 65536)
    two_byte = "\u00e9" * 32768  # 32,768 characters, 65,536 bytes
    with pytest.raises(ValueError, match="65535"):
        trie.subscribe(two_byte, 1)
    with pytest.raises(ValueError, match="65535"):
        trie.match(two_byte)
    assert trie.subscribe("\u00e9" * 32767, 3)  # 65,534 bytes
    assert len(trie) == 3


def test_deep_filter_and_topic(trie_cls: Any) -> None:
    """Rule: only the 65,535-byte limit bounds depth: thousands of levels are fine.
    (Checked without the oracle, whose table would be 5,000 x 5,000.)"""
    deep = "/".join(["x"] * 5000)
    trie = trie_cls("mqtt")
    trie.subscribe(deep, "exact")
    trie.subscribe(deep + "/#", "parent")
    trie.subscribe("/".join(["+"] * 5000), "plus")
    assert sorted(trie.lookup(deep)) == ["exact", "parent", "plus"]
    assert trie.lookup(deep + "/x") == ["parent"]
    assert trie.lookup("/".join(["x"] * 4999)) == []


@pytest.mark.parametrize("topic", ["a/+", "+", "a/#", "#", "a+b", "a/b#", "+/a", "#x"])
def test_topics_contain_no_wildcards(trie_cls: Any, topic: str) -> None:
    """Rule: topics contain no wildcards (neither as a level nor inside one)."""
    trie = trie_cls("mqtt")
    trie.subscribe("#", 1)
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match="wildcard"):
            call(topic)


def test_by_name_and_value(trie_cls: Any) -> None:
    """The dialect can be given by name (any case) or as the MQTT value object."""
    from cstrie.dialect import MQTT

    for dialect in ("mqtt", "MQTT", MQTT):
        trie = trie_cls(dialect)
        trie.subscribe("a/#", 1)
        assert trie.lookup("a") == [1]


# ------------------------------------------------- MQTT 5.0, 4.7.3 and 1.5.4
def test_no_level_limit_65535_empty_levels(trie_cls: Any) -> None:
    """4.7.3: "There is no limit to the number of levels in a Topic Name or Topic
    Filter, other than that imposed by the overall length of a UTF-8 Encoded
    String": the longest filters are valid, 65,535 and 65,536 empty levels included.
    (mosquitto's broker refuses more than 200 separators, TOPIC_HIERARCHY_LIMIT: a
    deliberate difference.)  Subscribe and validation only, each on a fresh trie."""
    from cstrie.dialect import MQTT

    assert MQTT.max_levels is None
    filters = ["/" * 65534, "/" * 65535, "+/" * 32767 + "#", "a" + "/" * 65534]
    for pattern in filters:
        trie = trie_cls("mqtt")
        assert trie.subscribe(pattern, 1) is True, len(pattern)
        assert len(trie) == 1
    assert len(MQTT.split_pattern("/" * 65534)) == 65535
    assert len(MQTT.split_topic("/" * 65535)) == 65536  # a valid 65,535-byte topic


def test_longest_topics_pass_the_engine_validation() -> None:
    """The engine's own check (no lookup) accepts 65,535-byte topics of 65,536 levels."""
    from cstrie._binding import lib
    from cstrie.trie import Trie

    trie = Trie("mqtt")
    for raw in (b"/" * 65535, b"a/" * 32767 + b"a"):
        assert lib.cst_validate(trie._h, raw, len(raw), 0) == raw.count(b"/") + 1


def test_space_is_an_ordinary_character(matcher: Matcher) -> None:
    """4.7.3: "Topic Names and Topic Filters can include the space character"."""
    assert matcher("mqtt", "Accounts payable", "Accounts payable")
    assert matcher("mqtt", "a/+/c", "a/ /c")
    assert matcher("mqtt", " /#", " /x")
    assert not matcher("mqtt", "a b", "ab")


def test_no_normalisation(matcher: Matcher) -> None:
    """[MQTT-4.7.3-4]: the Server "MUST NOT perform any normalization of Topic Names or
    Topic Filters": composed and decomposed forms are different topics, and case
    matters (4.7.3: "case sensitive")."""
    assert not matcher("mqtt", "caf\u00e9", "cafe\u0301")
    assert matcher("mqtt", "cafe\u0301", "cafe\u0301")
    assert not matcher("mqtt", "ACCOUNTS", "Accounts")


def test_bom_is_kept(matcher: Matcher) -> None:
    """[MQTT-1.5.4-3]: U+FEFF "MUST NOT be skipped over or stripped off": a leading
    zero-width no-break space is part of the level."""
    assert not matcher("mqtt", "\ufeffa", "a")
    assert not matcher("mqtt", "a", "\ufeffa")
    assert matcher("mqtt", "\ufeffa/+", "\ufeffa/b")


@pytest.mark.parametrize(
    "ch",
    ["\x01", "\x1f", "\x7f", "\x80", "\x9f", "\ufdd0", "\ufffe", "\uffff", "\U0010ffff"],
    ids=lambda c: f"U+{ord(c):04X}",
)
def test_disallowed_code_points_are_accepted(matcher: Matcher, ch: str) -> None:
    """1.5.4: control characters U+0001..U+001F, U+007F..U+009F and non-characters
    "SHOULD NOT" be sent, and a receiver "MAY" treat them as malformed: not a MUST.
    cstrie accepts and matches them literally (mosquitto_validate_utf8 refuses them:
    a deliberate difference, docs/api.md)."""
    assert matcher("mqtt", f"a/{ch}", f"a/{ch}")
    assert matcher("mqtt", "a/+", f"a/x{ch}")
    assert not matcher("mqtt", f"a/{ch}", "a/")


def test_shared_subscription_prefix_without_share_syntax(matcher: Matcher) -> None:
    """4.8.2 shared subscriptions ("$share/{ShareName}/{filter}") are parsed by the
    MQTT dialect (tests/groups/test_groups_rules.py).  A dialect without that syntax
    (share_prefix None: an MQTT 3.1.1 server) keeps "$share/g/a/+" a filter whose
    first level is "$share"."""
    mqtt311 = dataclasses.replace(MQTT, name="mqtt311", share_prefix=None)
    assert not matcher(mqtt311, "$share/g/a/+", "a/b")
    assert matcher(mqtt311, "a/+", "a/b")
    assert matcher(mqtt311, "$share/g/a/+", "$share/g/a/b")
