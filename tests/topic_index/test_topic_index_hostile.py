"""The deepest, longest and strangest topics and filters a client can send,
against the topic index and ``Trie.intersecting`` (the reverse walks).

Rule: every valid input is answered (as the oracle says, on inputs small
enough for it), invalid ones raise ``ValueError``, and nothing crashes,
hangs or grows without bound: a walk keeps one alive-position set per level
on its path, and a stored many-level wildcard steps a set in O(filter words).
"""

from __future__ import annotations

import pytest

from cstrie.topics import TopicIndex
from cstrie.trie import Trie

DEEPEST_MQTT = "/" * 65534  # 65,535 empty levels: the longest valid MQTT topic
WIDEST_PLUS = "+/" * 32767 + "+"  # 32,768 one-level wildcards in 65,535 bytes


def test_the_deepest_mqtt_topic_is_stored_queried_and_removed() -> None:
    idx = TopicIndex("mqtt")
    idx[DEEPEST_MQTT] = "deep"
    idx["a"] = "a"
    assert idx[DEEPEST_MQTT] == "deep"
    assert sorted(v for _, v in idx.query("#")) == ["a", "deep"]
    assert idx.count(DEEPEST_MQTT) == 1
    assert list(idx.query(DEEPEST_MQTT)) == [(DEEPEST_MQTT, "deep")]
    assert idx.count("/#") == 1 and idx.count("+/#") == 2  # "+/#" matches its parent "a"
    assert idx.count(WIDEST_PLUS) == 0
    assert dict(idx.items()) == {DEEPEST_MQTT: "deep", "a": "a"}
    assert idx.remove(DEEPEST_MQTT) and len(idx) == 1
    idx.check_invariants()


def test_the_widest_mqtt_filter_against_deep_topics() -> None:
    idx = TopicIndex("mqtt")
    levels = WIDEST_PLUS.count("+")  # 32,768
    idx["/".join(["x"] * levels)] = 1  # 65,535 bytes
    idx["/" * (levels - 1)] = 2  # 32,768 empty levels
    idx["/" * levels] = 3  # one level more
    idx["/" * (levels - 2)] = 4  # one level less
    assert sorted(v for _, v in idx.query(WIDEST_PLUS)) == [1, 2]
    # 32,767 '+' then '#': at least 32,767 levels ('#' matches the parent level)
    assert idx.count(WIDEST_PLUS[:-1] + "#") == 4


def test_the_longest_word() -> None:
    idx = TopicIndex("mqtt")
    word = "w" * 65535
    idx[word] = 1
    assert list(idx.query("+")) == [(word, 1)] and idx.count("#") == 1
    with pytest.raises(ValueError):
        idx["w" * 65536] = 2  # over MQTT's 65,535 bytes
    assert len(idx) == 1


def test_amqp_hash_heavy_filters_cost_states_not_paths() -> None:
    # 255 '#' and 'a' words alternating (the most AMQP allows, 256 words)
    # against the deepest AMQP topics: a path-per-way walk would be exponential
    idx = TopicIndex("amqp")
    filt = ".".join(["#", "a"] * 128)[: -len(".a")]  # 255 words, starts and ends with '#'
    idx[".".join(["a"] * 256)] = 1
    idx[".".join(["b"] * 256)] = 2
    for i in range(300):
        idx[f"a.{i}.a"] = i
    assert [v for _, v in idx.query(filt)] == [1]
    t = Trie("amqp")
    for i in range(2000):  # many stored '#' steps of a 255-word filter
        t.subscribe(f"x{i}.#", i)
    t.subscribe(".".join(["a"] * 256), "deep")
    got = t.intersecting(filt)
    assert len(got) == 2001


def test_intersecting_the_deepest_mqtt_filters() -> None:
    t = Trie("mqtt")
    for f, s in [("#", 1), ("+/#", 2), (DEEPEST_MQTT, 3), (WIDEST_PLUS, 4), ("$SYS/#", 5)]:
        t.subscribe(f, s)
    assert sorted(s for _, s in t.intersecting(DEEPEST_MQTT)) == [1, 2, 3]
    assert sorted(s for _, s in t.intersecting(WIDEST_PLUS)) == [1, 2, 4]
    with pytest.raises(ValueError):
        t.intersecting("a/#/b")
