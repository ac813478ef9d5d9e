"""The baselines' own check of topics and patterns, in pure Python.

The library checks a dialect's rules in its engine only (``native/words.c``,
reached through :meth:`Dialect.split_topic` / :meth:`Dialect.split_pattern`).
A pure-Python baseline that called that check would borrow C speed for its
validation and no longer measure what a pure-Python matcher costs, so the
baselines split and check text here, in Python, as such a matcher would.

Only the accepting path is the baselines' own: when a rule is broken these
functions hand the text to the library's check, which raises the error it
raises for the library itself, so a baseline refuses exactly what cstrie
refuses with the same message (the lab's tests compare the two on every
rule of each dialect).

>>> from cstrie import MQTT
>>> split_pattern(MQTT, "a/+/#")
['a', '+', '#']
>>> split_topic(MQTT, "a/+")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: topic 'a/+' contains the wildcard '+'; topics may not contain wildcards...
"""

from __future__ import annotations

from cstrie.dialect import Dialect

__all__ = ["split_pattern", "split_topic"]


def _text_ok(d: Dialect, text: object) -> bool:
    """The checks on the whole text: type, UTF-8, NUL, forbidden characters,
    length, emptiness and the number of words.  O(len(text))."""
    if not isinstance(text, str):
        return False
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if d.forbid_nul and "\x00" in text:
        return False
    if d.forbidden and any(ch in text for ch in d.forbidden):
        return False
    if d.max_bytes is not None and len(data) > d.max_bytes:
        return False
    if not text:
        return d.empty_topic
    return d.max_levels is None or text.count(d.separator) < d.max_levels


def split_pattern(d: Dialect, pattern: object) -> list[str]:
    """``pattern``'s words under ``d``'s rules, checked in Python; an invalid
    pattern raises what ``d.split_pattern`` raises.  O(len(pattern))."""
    if not _text_ok(d, pattern):
        return d.split_pattern(pattern)
    assert isinstance(pattern, str)
    words = pattern.split(d.separator) if pattern else []
    last = len(words) - 1
    for i, word in enumerate(words):
        if not word and not d.empty_words:
            return d.split_pattern(pattern)
        if word == d.multi:
            if d.multi_last_only and i != last:
                return d.split_pattern(pattern)
            continue
        if word == d.single:
            continue
        if d.strict_wildcards:
            for token in (d.single, d.multi):
                if token is not None and token in word:
                    return d.split_pattern(pattern)
    return words


def split_topic(d: Dialect, topic: object) -> list[str]:
    """``topic``'s words under ``d``'s rules, checked in Python; an invalid
    topic raises what ``d.split_topic`` raises.  O(len(topic))."""
    if not _text_ok(d, topic):
        return d.split_topic(topic)
    assert isinstance(topic, str)
    words = topic.split(d.separator) if topic else []
    for word in words:
        if not word and not d.empty_words:
            return d.split_topic(topic)
        if not d.topic_wildcards:
            for token in (d.single, d.multi):
                if token is None:
                    continue
                if word == token or (d.strict_wildcards and token in word):
                    return d.split_topic(topic)
    return words
