"""NATS subject rules, one rule per test, written from the rules table:

    nats | separator "." | "*" one token | ">" one or more tokens, last only | empty
    tokens invalid; no whitespace (space, tab, CR, LF, FF) in subjects, as nats-server.

Subjects (topics) contain no wildcard tokens.  A token that merely contains "*" or
">" (such as "a*") is an ordinary literal: NATS wildcards are whole tokens.

The reference is nats-server, server/sublist.go: ``isValidSubject`` (the check
behind ``IsValidSubject`` for subscriptions and ``IsValidPublishSubject`` for
published subjects), ``IsValidLiteralSubject`` and ``Sublist.Insert``, and the
cases of server/sublist_test.go (``TestSublistValidSubjects``,
``TestSublistValidLiteralSubjects``, ``testSublistInvalidSubjectsInsert``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cstrie.dialect import NATS
from cstrie.trie import Trie
from cstrie_lab.pytrie import PyTrie

Matcher = Callable[..., bool]  # the ``matcher`` fixture: (dialect, pattern, topic) -> bool


def test_separator_is_dot(matcher: Matcher) -> None:
    """Rule: the separator is "."; a plain token matches only an identical token."""
    assert matcher("nats", "a.b", "a.b")
    assert not matcher("nats", "a.b", "a.c")
    assert not matcher("nats", "a.b", "a")
    assert not matcher("nats", "a.b", "a.b.c")
    assert matcher("nats", "a/b", "a/b")


def test_star_matches_exactly_one_token(matcher: Matcher) -> None:
    """Rule: "*" matches one token."""
    assert matcher("nats", "*", "a")
    assert matcher("nats", "a.*", "a.b")
    assert matcher("nats", "*.b", "a.b")
    assert matcher("nats", "a.*.c", "a.b.c")
    assert not matcher("nats", "a.*", "a")
    assert not matcher("nats", "a.*", "a.b.c")
    assert not matcher("nats", "*", "a.b")
    assert not matcher("nats", "a.*.c", "a.c")


def test_gt_matches_one_or_more_tokens(matcher: Matcher) -> None:
    """Rule: ">" matches one or more tokens."""
    assert matcher("nats", "a.>", "a.b")
    assert matcher("nats", "a.>", "a.b.c")
    assert matcher("nats", "a.>", "a.b.c.d.e")
    assert matcher("nats", ">", "a")
    assert matcher("nats", ">", "a.b.c")
    assert not matcher("nats", "a.>", "b.c")


def test_gt_needs_at_least_one_token(matcher: Matcher) -> None:
    """Rule: ">" matches one or more tokens, so "a.>" does NOT match "a"."""
    assert not matcher("nats", "a.>", "a")
    assert not matcher("nats", "a.b.>", "a.b")
    assert not matcher("nats", "*.>", "a")
    assert matcher("nats", "*.>", "a.b")


@pytest.mark.parametrize("pattern", ["a.>.b", ">.a", ">.>", ">.*"])
def test_gt_only_last(trie_cls: Any, pattern: str) -> None:
    """Rule: ">" is valid as the last token only."""
    trie = trie_cls("nats")
    with pytest.raises(ValueError, match="last"):
        trie.subscribe(pattern, 1)
    assert len(trie) == 0


@pytest.mark.parametrize("text", ["a..b", ".a", "a.", ".", "", "a.*..b", "..", "a..>"])
def test_empty_tokens_invalid(trie_cls: Any, text: str) -> None:
    """Rule: empty tokens invalid (in subscriptions and in subjects; "" too)."""
    trie = trie_cls("nats")
    with pytest.raises(ValueError, match="empty"):
        trie.subscribe(text, 1)
    assert len(trie) == 0
    subject = text.replace("*", "x").replace(">", "y")
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match="empty"):
            call(subject)


@pytest.mark.parametrize("subject", ["a.*", "*", "a.>", ">", "*.b", "a.*.b"])
def test_wildcard_tokens_in_subject_invalid(trie_cls: Any, subject: str) -> None:
    """Rule: subjects contain no wildcards: a "*" or ">" token in a subject is an error."""
    trie = trie_cls("nats")
    trie.subscribe(">", 1)
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match="wildcard"):
            call(subject)


def test_wildcard_characters_inside_tokens_are_literal(matcher: Matcher) -> None:
    """Rule: wildcards are whole tokens; "a*" or "b>" is an ordinary literal token."""
    assert matcher("nats", "a*", "a*")
    assert not matcher("nats", "a*", "ab")
    assert matcher("nats", "x.b>", "x.b>")
    assert not matcher("nats", "x.b>", "x.b.c")
    assert matcher("nats", "x.*", "x.b>")


def test_star_and_gt_combined(matcher: Matcher) -> None:
    """Rule: "*" is exactly one token and ">" one or more at the end."""
    assert matcher("nats", "*.*.>", "a.b.c")
    assert not matcher("nats", "*.*.>", "a.b")
    assert matcher("nats", "*.*", "a.b")
    assert not matcher("nats", "*.*", "a.b.c")


def test_no_dollar_rule(matcher: Matcher) -> None:
    """Rule: the "$" exception is MQTT's; in NATS "$"-subjects match wildcards normally."""
    assert matcher("nats", ">", "$SYS.x")
    assert matcher("nats", "*.x", "$SYS.x")


def test_each_subscriber_once_and_pairs(trie_cls: Any) -> None:
    """Each subscriber once; match() gives the (pattern, subscriber) pairs."""
    trie = trie_cls("nats")
    for pattern in ("a.b", "a.*", ">", "a.>", "*.b"):
        trie.subscribe(pattern, "s")
    trie.subscribe("a.>", "t")
    assert sorted(trie.lookup("a.b")) == ["s", "t"]
    assert sorted(trie.match("a.b")) == sorted(
        [("a.b", "s"), ("a.*", "s"), (">", "s"), ("a.>", "s"), ("*.b", "s"), ("a.>", "t")]
    )
    assert sorted(trie.match("a")) == [(">", "s")]


# ------------------------------------------------------------------ whitespace
# sublist.go, isValidSubject: a token of several bytes is invalid when
# strings.ContainsAny(t, "\t\n\f\r "); a one-byte token is invalid when it is
# one of ' ', '\t', '\n', '\r', '\f'.  Exactly these five characters.
NATS_WHITESPACE = [" ", "\t", "\n", "\r", "\f"]
# Where the character sits: inside a token, as a whole token, first, last, next
# to a wildcard token, and inside a token that only looks like a wildcard.
SHAPES = ["a{}b", "{}", "a.{}", "{}.a", "a.{}.b", "a.b{}", "{0}{0}", "a.{}*", "*{}", "a.>{}"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ch", NATS_WHITESPACE, ids=repr)
def test_whitespace_invalid_in_patterns(trie_cls: Any, ch: str, shape: str) -> None:
    """Rule: no whitespace (space, tab, CR, LF, FF) in subscriptions; the error names
    the character and the trie is unchanged."""
    pattern = shape.format(ch)
    trie = trie_cls("nats")
    trie.subscribe("a.>", 1)
    trie.subscribe("*.b", 2)
    before = sorted(iter(trie))
    for call in (
        lambda: trie.subscribe(pattern, 3),
        lambda: trie.unsubscribe(pattern, 1),
        lambda: trie.subscribers(pattern),
    ):
        with pytest.raises(ValueError, match="forbids") as info:
            call()
        assert repr(ch) in str(info.value) and repr(pattern) in str(info.value)
    assert sorted(iter(trie)) == before and len(trie) == 2


@pytest.mark.parametrize("shape", [s for s in SHAPES if "*" not in s and ">" not in s])
@pytest.mark.parametrize("ch", NATS_WHITESPACE, ids=repr)
def test_whitespace_invalid_in_subjects(trie_cls: Any, ch: str, shape: str) -> None:
    """Rule: no whitespace in published subjects (IsValidPublishSubject runs the same
    isValidSubject); lookup, match and has_subscribers all refuse."""
    subject = shape.format(ch)
    trie = trie_cls("nats")
    trie.subscribe(">", 1)
    for call in (trie.lookup, trie.match, trie.has_subscribers):
        with pytest.raises(ValueError, match="forbids") as info:
            call(subject)
        assert repr(ch) in str(info.value) and repr(subject) in str(info.value)
    assert sorted(iter(trie)) == [(">", 1)]


@pytest.mark.parametrize("ch", NATS_WHITESPACE, ids=repr)
def test_whitespace_error_is_the_same_from_engine_and_validator(ch: str) -> None:
    """The native engine finds the whitespace itself (its own status code, not a
    Python pre-check) and reports the validator's exact message, as PyTrie does."""
    from cstrie._binding import lib

    text = f"a.b{ch}c.d"
    trie, py = Trie("nats"), PyTrie("nats")
    raw = text.encode()
    assert lib.cst_validate(trie._h, raw, len(raw), 1) == lib.CST_EFORBIDDEN
    assert lib.cst_validate(trie._h, raw, len(raw), 0) == lib.CST_EFORBIDDEN
    with pytest.raises(ValueError) as want_pattern:
        NATS.split_pattern(text)
    with pytest.raises(ValueError) as want_topic:
        NATS.split_topic(text)
    assert str(want_pattern.value).startswith(f"pattern {text!r} contains {ch!r}")
    assert str(want_topic.value).startswith(f"topic {text!r} contains {ch!r}")
    for t in (trie, py):
        with pytest.raises(ValueError) as got:
            t.subscribe(text, 1)
        assert str(got.value) == str(want_pattern.value)
        with pytest.raises(ValueError) as got:
            t.lookup(text)
        assert str(got.value) == str(want_topic.value)
    assert len(trie) == 0 and len(py) == 0


@pytest.mark.parametrize("ch", ["\x0b", "\x00", "\x01", "\u00a0", "\u2003", "\u3000"], ids=repr)
def test_other_characters_are_ordinary(matcher: Matcher, ch: str) -> None:
    """Rule (nats-server's exact set): only space, tab, LF, CR and FF are refused; the
    vertical tab, U+0000 (IsValidSubject does not check runes), other control
    characters and non-ASCII spaces are ordinary token characters."""
    assert matcher("nats", f"a.b{ch}c", f"a.b{ch}c")
    assert matcher("nats", "a.*", f"a.{ch}")
    assert not matcher("nats", f"a.b{ch}c", "a.bc")


# TestSublistValidSubjects: IsValidSubject (subscriptions, wildcards allowed).
VALID_SUBSCRIPTIONS = [
    "foo", "foo.bar.*", "foo.bar.>", "*", ">", "foo*", "foo**", "foo.**", "foo*bar",
    "foo.*bar", "foo*.bar", "*bar", "foo>", "foo.>>", "foo>bar", "foo.>bar", "foo>.bar",
    ">bar",
]  # fmt: skip
INVALID_SUBSCRIPTIONS = [".", ".foo", "foo.", "foo..bar", ">.bar", "foo.>.bar", "foo.bar..baz", ""]
# TestSublistValidLiteralSubjects: IsValidLiteralSubject (published subjects).
VALID_SUBJECTS = [
    "foo", "foo*", "foo**", "foo.**", "foo*bar", "foo.*bar", "foo*.bar", "*bar", "foo>",
    "foo>>", "foo.>>", "foo>bar", "foo.>bar", "foo>.bar", ">bar",
]  # fmt: skip
INVALID_SUBJECTS = [".foo", "foo.", "foo..bar", "foo.bar.*", "foo.bar.>", "*", ">", ""]


def test_nats_server_subject_validity_cases(trie_cls: Any) -> None:
    """Every validity case of nats-server's sublist_test.go gives the same verdict."""
    trie = trie_cls("nats")
    for k, pattern in enumerate(VALID_SUBSCRIPTIONS):
        assert trie.subscribe(pattern, k) is True, pattern
    for pattern in INVALID_SUBSCRIPTIONS:
        with pytest.raises(ValueError):
            trie.subscribe(pattern, "x")
    assert len(trie) == len(VALID_SUBSCRIPTIONS)
    for subject in VALID_SUBJECTS:
        assert isinstance(trie.lookup(subject), list), subject
    for subject in INVALID_SUBJECTS:
        with pytest.raises(ValueError):
            trie.lookup(subject)


def test_no_level_limit(trie_cls: Any) -> None:
    """Rule: NATS has no token limit (nats-server's max_sub_tokens is an opt-in server
    option, off by default): max_levels is None and a 2,000-token subject works."""
    assert NATS.max_levels is None
    deep = ".".join(["t"] * 2000)
    trie = trie_cls("nats")
    trie.subscribe(deep, 1)
    trie.subscribe(deep[:-2] + ".>", 2)
    assert sorted(trie.lookup(deep)) == [1, 2]
