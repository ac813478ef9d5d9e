"""Custom dialects: a Dialect is a plain value object whose fields generalise the rules.

    "A custom dialect (other separator/wildcard tokens) is a plain value object."

Each field's rule (from the ``Dialect`` documentation) gets a test with a dialect built
for it, plus the construction errors and ``resolve_dialect``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

from cstrie.dialect import AMQP, MQTT, NATS, Dialect, resolve_dialect

Matcher = Callable[..., bool]  # the ``matcher`` fixture: (dialect, pattern, topic) -> bool

# separator "/", single "?", multi "**" (zero or more words, anywhere: the defaults)
GLOB = Dialect(name="glob", separator="/", single="?", multi="**")
# multi_min=1 anywhere in the pattern
PLUS1 = Dialect(name="plus1", separator=":", single="?", multi="*", multi_min=1)
# a separator of two characters
DOUBLE = Dialect(name="double", separator="::", single="<one>", multi="<many>")
# no wildcards at all
PLAIN = Dialect(name="plain", single=None, multi=None)
# many-word wildcard last only, zero or more (like MQTT, without MQTT's other rules)
TAIL = Dialect(name="tail", separator=".", single="*", multi=">", multi_last_only=True)
# the "$" rule with "#" allowed anywhere
DOLLAR = Dialect(name="dollar", separator="/", single="+", multi="#", dollar_rule=True)
# every validation switch on
STRICT = Dialect(
    name="strict",
    separator=".",
    single="*",
    multi="#",
    strict_wildcards=True,
    topic_wildcards=False,
    empty_topic=False,
    empty_words=False,
    max_bytes=10,
    forbid_nul=True,
)
# "**" anywhere with a word limit and forbidden characters (a custom dialect that
# takes untrusted input: see the max_levels documentation)
LIMITED = Dialect(
    name="limited", separator="/", single="?", multi="**", max_levels=3, forbidden="\t "
)


def test_custom_tokens(matcher: Matcher) -> None:
    """Rule: separator "/", "?" exactly one word, "**" zero or more words anywhere."""
    assert matcher(GLOB, "a/?", "a/b")
    assert not matcher(GLOB, "a/?", "a")
    assert not matcher(GLOB, "a/?", "a/b/c")
    assert matcher(GLOB, "a/**", "a")
    assert matcher(GLOB, "a/**", "a/b/c")
    assert matcher(GLOB, "**/c", "c")
    assert matcher(GLOB, "**/c", "a/b/c")
    assert matcher(GLOB, "a/**/b", "a/b")
    assert matcher(GLOB, "a/**/b", "a/x/y/b")
    assert matcher(GLOB, "**", "")
    assert matcher(GLOB, "**/**/?", "x")
    assert not matcher(GLOB, "**/?", "")


def test_custom_dialect_old_tokens_are_literals(matcher: Matcher) -> None:
    """Rule: only the dialect's own tokens are wildcards; "*", "#", "+" and "." are
    ordinary characters in the GLOB dialect, and "**" inside a word is literal."""
    assert matcher(GLOB, "a/*", "a/*")
    assert not matcher(GLOB, "a/*", "a/b")
    assert not matcher(GLOB, "#", "a")
    assert matcher(GLOB, "#", "#")
    assert not matcher(GLOB, "+", "x")
    assert matcher(GLOB, "a.b", "a.b")
    assert not matcher(GLOB, "a.b", "a/b")
    assert matcher(GLOB, "x**", "x**")
    assert not matcher(GLOB, "x**", "xy")


def test_custom_topic_may_hold_wildcard_words(matcher: Matcher) -> None:
    """Rule (topic_wildcards, default True): topics may contain wildcard words as literals."""
    assert matcher(GLOB, "a/?", "a/?")
    assert matcher(GLOB, "a/?", "a/**")
    assert not matcher(GLOB, "a/b", "a/?")


def test_multi_min_one_anywhere(matcher: Matcher) -> None:
    """Rule (multi_min=1): the many-word wildcard consumes at least one word, anywhere."""
    assert matcher(PLUS1, "a:*:b", "a:x:b")
    assert matcher(PLUS1, "a:*:b", "a:x:y:b")
    assert not matcher(PLUS1, "a:*:b", "a:b")
    assert matcher(PLUS1, "*", "a")
    assert not matcher(PLUS1, "*", "")
    assert not matcher(PLUS1, "*:*", "a")
    assert matcher(PLUS1, "*:*", "a:b")
    assert matcher(PLUS1, "*:a", "a:a")
    assert not matcher(PLUS1, "*:a", "a")


def test_multi_character_separator(matcher: Matcher) -> None:
    """Rule: the separator is any non-empty string; "a::b" has two words with "::"."""
    assert matcher(DOUBLE, "a::b", "a::b")
    assert matcher(DOUBLE, "a::<one>", "a::b")
    assert matcher(DOUBLE, "a:b", "a:b")
    assert not matcher(DOUBLE, "a::<one>", "a:b")
    assert matcher(DOUBLE, "<many>::z", "a::b::z")
    assert matcher(DOUBLE, "<many>", "a:b")
    assert not matcher(DOUBLE, "<one>::<one>", "a:b")


def test_no_wildcards(matcher: Matcher) -> None:
    """Rule: single/multi None means no wildcards: every word is a literal."""
    assert matcher(PLAIN, "a.*", "a.*")
    assert not matcher(PLAIN, "a.*", "a.b")
    assert not matcher(PLAIN, "#", "a")
    assert matcher(PLAIN, "#", "#")
    assert matcher(PLAIN, "", "")
    assert not matcher(PLAIN, "", "a")


def test_multi_last_only_with_zero_words(matcher: Matcher) -> None:
    """Rule (multi_last_only, multi_min=0): the tail wildcard also matches the parent."""
    assert matcher(TAIL, "a.>", "a")
    assert matcher(TAIL, "a.>", "a.b.c")
    assert matcher(TAIL, ">", "")
    assert not matcher(TAIL, "a.>", "b")


def test_multi_last_only_rejects_middle(trie_cls: Any) -> None:
    """Rule (multi_last_only): the many-word wildcard may only be the last word."""
    trie = trie_cls(TAIL)
    with pytest.raises(ValueError, match="last"):
        trie.subscribe("a.>.b", 1)
    assert trie.subscribe("a.>", 1)


def test_dollar_rule_with_multi_anywhere(matcher: Matcher) -> None:
    """Rule (dollar_rule): a pattern whose first word is a wildcard never matches a topic
    whose first word starts with "$" -- even when "#" may be followed by more words."""
    assert not matcher(DOLLAR, "#", "$a")
    assert not matcher(DOLLAR, "#/x", "$a/x")
    assert not matcher(DOLLAR, "#/$a/x", "$a/x")  # "#" would take zero words; still no
    assert not matcher(DOLLAR, "+/x", "$a/x")
    assert matcher(DOLLAR, "$a/#", "$a/x")
    assert matcher(DOLLAR, "$a/#/x", "$a/x")
    assert matcher(DOLLAR, "#/x", "b/$a/x")
    assert matcher(DOLLAR, "#", "")  # no first word at all


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a*", "whole level"),  # strict_wildcards
        ("a.b#", "whole level"),
        ("a..b", "empty word"),  # empty_words=False
        (".a", "empty word"),
        ("", "must not be empty"),  # empty_topic=False
        ("abcdefghijk", "at most 10"),  # max_bytes=10
        ("\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9", "at most 10"),  # 6 chars, 12 bytes
        ("a\x00", "U+0000"),  # forbid_nul
    ],
)
def test_strict_dialect_patterns(trie_cls: Any, text: str, problem: str) -> None:
    """Rule: each validation field rejects the patterns it describes, naming the problem."""
    trie = trie_cls(STRICT)
    with pytest.raises(ValueError, match=re.escape(problem)):
        trie.subscribe(text, 1)
    assert len(trie) == 0


@pytest.mark.parametrize(
    ("topic", "problem"),
    [
        ("a.*", "wildcard"),  # topic_wildcards=False
        ("#", "wildcard"),
        ("a*b", "wildcard"),  # ... and with strict_wildcards, inside words too
        ("a..b", "empty word"),
        ("", "must not be empty"),
        ("abcdefghijk", "at most 10"),
        ("\x00", "U+0000"),
    ],
)
def test_strict_dialect_topics(trie_cls: Any, topic: str, problem: str) -> None:
    """Rule: each validation field rejects the topics it describes, naming the problem."""
    trie = trie_cls(STRICT)
    trie.subscribe("#", 1)
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match=re.escape(problem)):
            call(topic)


def test_strict_dialect_valid_edges(matcher: Matcher) -> None:
    """Rule: exactly max_bytes bytes is allowed; whole-word wildcards still work."""
    assert matcher(STRICT, "abcdefghij", "abcdefghij")
    assert matcher(STRICT, "a.*.#", "a.b")
    assert matcher(STRICT, "#", "x")


# ------------------------------------------------------------- construction
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"separator": ""}, ValueError, "separator must not be empty"),
        ({"separator": 1}, TypeError, "separator must be a str"),
        ({"name": None}, TypeError, "name must be a str"),
        ({"single": ""}, ValueError, "single must not be empty"),
        ({"multi": ""}, ValueError, "multi must not be empty"),
        ({"single": 3}, TypeError, "single must be a str or None"),
        ({"multi": b"#"}, TypeError, "multi must be a str or None"),
        ({"single": "a.b"}, ValueError, "contains the separator"),
        ({"separator": "/", "multi": "/"}, ValueError, "contains the separator"),
        ({"single": "#", "multi": "#"}, ValueError, "must differ"),
        ({"multi_min": 2}, ValueError, "multi_min must be 0 or 1"),
        ({"multi_min": -1}, ValueError, "multi_min must be 0 or 1"),
        ({"max_bytes": 0}, ValueError, "max_bytes must be a positive int"),
        ({"max_bytes": "10"}, ValueError, "max_bytes must be a positive int"),
        ({"max_levels": 0}, ValueError, "max_levels must be a positive int or None"),
        ({"max_levels": -3}, ValueError, "max_levels must be a positive int or None"),
        ({"max_levels": "3"}, ValueError, "max_levels must be a positive int or None"),
        ({"max_levels": True}, ValueError, "max_levels must be a positive int or None"),
        ({"max_levels": 2.5}, ValueError, "max_levels must be a positive int or None"),
        ({"forbidden": None}, TypeError, "forbidden must be a str"),
        ({"forbidden": ["\t"]}, TypeError, "forbidden must be a str"),
        ({"forbidden": "\u00a0"}, ValueError, "only hold ASCII characters, not '\\xa0' (U+00A0)"),
        ({"forbidden": " ."}, ValueError, "holds a character of Dialect.separator '.'"),
        ({"forbidden": "*"}, ValueError, "holds a character of Dialect.single '*'"),
        ({"multi": "<many>", "forbidden": ">"}, ValueError, "of Dialect.multi '<many>'"),
    ],
)
def test_dialect_construction_errors(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A Dialect checks its own fields: a bad field raises naming the field."""
    with pytest.raises(error, match=re.escape(message)):
        Dialect(**kwargs)


# ------------------------------------------------- max_levels and forbidden
def test_level_limit_at_and_past_the_limit(trie_cls: Any) -> None:
    """Rule (max_levels=3): three words are fine for patterns and topics, four are a
    ValueError naming the limit, and the trie is unchanged."""
    trie = trie_cls(LIMITED)
    assert trie.subscribe("a/**/c", 1) and trie.subscribe("**", 2)
    assert sorted(trie.lookup("a/b/c")) == [1, 2]
    assert sorted(trie.lookup("a/c")) == [1, 2]
    before = sorted(iter(trie))
    message = "has 4 words; limited allows at most 3 (max_levels)"
    for call in (
        lambda: trie.subscribe("a/**/c/d", 3),
        lambda: trie.unsubscribe("a/?/?/?", 1),
        lambda: trie.subscribers("///"),
        lambda: trie.lookup("a/b/c/d"),
        lambda: trie.match("///"),
        lambda: trie.has_subscribers("a/b/c/"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
    assert sorted(iter(trie)) == before


def test_level_limit_counts_words_not_characters(matcher: Matcher) -> None:
    """Rule (max_levels): words are counted with the separator, however long they
    are, and the empty string has zero words."""
    long = "x" * 5000
    assert matcher(LIMITED, f"{long}/?/{long}", f"{long}/y/{long}")
    assert matcher(LIMITED, "**", "")


def test_forbidden_characters(trie_cls: Any) -> None:
    """Rule (forbidden): no forbidden character anywhere, in patterns or topics; the
    message names the character and where it is."""
    trie = trie_cls(LIMITED)
    for text, ch, at in (("a b", " ", 1), ("a/\tb", "\t", 2), ("?/ ", " ", 2)):
        want = f"contains {ch!r} (U+{ord(ch):04X}) at index {at}; the limited dialect forbids"
        with pytest.raises(ValueError, match=re.escape(want)):
            trie.subscribe(text, 1)
        with pytest.raises(ValueError, match=re.escape(want)):
            trie.lookup(text.replace("?", "q"))
    assert len(trie) == 0


def test_forbidden_and_forbid_nul_together(trie_cls: Any) -> None:
    """Rule: forbid_nul keeps its own message; "\x00" may also be listed in forbidden."""
    both = Dialect(name="both", forbid_nul=True, forbidden="\x00\x01")
    trie = trie_cls(both)
    with pytest.raises(ValueError, match=re.escape("contains U+0000, which both forbids")):
        trie.subscribe("a.\x00", 1)
    with pytest.raises(ValueError, match=re.escape("contains '\\x01' (U+0001) at index 1")):
        trie.lookup("a\x01")
    only_set = Dialect(name="set", forbidden="\x00")
    with pytest.raises(ValueError, match=re.escape("contains '\\x00' (U+0000) at index 1")):
        trie_cls(only_set).subscribe("a\x00", 1)


def test_custom_dialect_defaults_have_no_limits() -> None:
    """A custom dialect has no level limit and no forbidden characters unless asked;
    forbidden is kept sorted and without repeats, so equal sets make equal dialects."""
    assert Dialect().max_levels is None and Dialect().forbidden == ""
    assert Dialect(forbidden="\t \t").forbidden == "\t "
    assert Dialect(forbidden=" \t") == Dialect(forbidden="\t  ")
    assert hash(Dialect(forbidden=" \t")) == hash(Dialect(forbidden="\t "))
    assert Dialect(max_levels=5) != Dialect()


def test_dialect_is_a_frozen_value_object() -> None:
    """A Dialect is an immutable value: equal fields make equal (and equally hashed)
    dialects, and fields cannot be reassigned."""
    a = Dialect(name="x", separator="/", single="?", multi="**")
    b = Dialect(name="x", separator="/", single="?", multi="**")
    assert a == b and hash(a) == hash(b)
    assert a != Dialect(name="x", separator="/", single="?", multi="***")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.separator = "."  # type: ignore[misc]
    assert Dialect() == Dialect(name="custom")  # AMQP-like defaults
    assert dataclasses.replace(AMQP, name="amqp") == AMQP


def test_resolve_dialect() -> None:
    """Dialects are found by name, case-insensitively; a Dialect passes through."""
    assert resolve_dialect("amqp") is AMQP
    assert resolve_dialect("MQTT") is MQTT
    assert resolve_dialect("Nats") is NATS
    assert resolve_dialect(GLOB) is GLOB
    with pytest.raises(ValueError, match="unknown dialect 'stomp'"):
        resolve_dialect("stomp")
    with pytest.raises(TypeError, match=r"dialect must be a str or cstrie\.Dialect"):
        resolve_dialect(3)  # type: ignore[arg-type]


def test_trie_dialect_argument(trie_cls: Any) -> None:
    """The trie takes a dialect name or a Dialect; an unknown one is an error."""
    with pytest.raises(ValueError, match="unknown dialect"):
        trie_cls("stomp")
    with pytest.raises(TypeError):
        trie_cls(3)
    trie = trie_cls(GLOB)
    trie.subscribe("a/**", "s")
    assert trie.lookup("a/b/c") == ["s"]
    assert trie.match("a") == [("a/**", "s")]
