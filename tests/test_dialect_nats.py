"""NATS subject rules, one rule per test, written from the rules table:

    nats | separator "." | "*" one token | ">" one or more tokens, last only | empty
    tokens invalid.

Subjects (topics) contain no wildcard tokens.  A token that merely contains "*" or
">" (such as "a*") is an ordinary literal: NATS wildcards are whole tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

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
