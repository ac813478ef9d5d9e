"""Regressions of three bugs found in the topic index (``cstrie/topics.py``,
``native/topic_index.c``) while writing the ``reverse`` bench and
docs/topic-index.md.  No timing: the second counts the retired entries a
query's release visits."""

from __future__ import annotations

from collections import deque

import pytest

from cstrie.dialect import Dialect
from cstrie.topics import TopicIndex
from cstrie.trie import Trie


def test_a_closed_query_stops() -> None:
    idx = TopicIndex("mqtt")
    for i in range(10):
        idx[f"a/{i}"] = i
    it = idx.query("a/+")
    next(it)
    it.close()
    for i in range(10):
        idx[f"a/{i}"] = -i  # the values the closed query could still reach are released
    assert list(it) == []  # a closed iterator is exhausted, as a closed generator is


class _Counting(deque):  # type: ignore[type-arg]
    """A deque that counts the items read or taken from it."""

    visited = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in deque.__iter__(self):
            _Counting.visited += 1
            yield item

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        _Counting.visited += 1
        return deque.__getitem__(self, i)

    def popleft(self):  # type: ignore[no-untyped-def]
        _Counting.visited += 1
        return deque.popleft(self)


def test_releasing_a_query_does_not_scan_values_an_older_snapshot_keeps() -> None:
    idx = TopicIndex("mqtt")
    for i in range(100):
        idx[f"b/{i}"] = i
    snap = idx.snapshot()  # keeps every value replaced from now on
    for r in range(100):
        for i in range(100):
            idx[f"b/{i}"] = (r, i)
    assert len(idx._values.retired) == 10_000
    idx._values.retired = _Counting(idx._values.retired)
    _Counting.visited = 0
    assert list(idx.query("b/7")) == [("b/7", (99, 7))]  # pins, then releases
    assert snap.get("b/7") == 7
    # the query's pin is newer than every retirement: nothing it releases is
    # due while the older snapshot is open, so nothing needs to be visited
    assert _Counting.visited < 100


# A custom dialect where the many-word wildcard needs one word or more
# (multi_min=1, as NATS ">") but may stand anywhere (as AMQP "#").
PLUS_ANYWHERE = Dialect(
    name="plus-anywhere", separator=".", single="*", multi=">", multi_min=1,
    multi_last_only=False,
)  # fmt: skip
TOPICS = ["a", "a.b", "a.b.c", "a.b.c.d", "q"]


@pytest.mark.parametrize("filt", ["a.>.>", ">.>", ">.*.>"])
def test_adjacent_many_word_wildcards_need_multi_min_words_each(filt: str) -> None:
    idx = TopicIndex(PLUS_ANYWHERE)
    for t in TOPICS:
        idx[t] = t
    trie = Trie(PLUS_ANYWHERE)
    trie.subscribe(filt, "s")
    want = sorted(t for t in TOPICS if trie.lookup(t))  # e.g. a.>.> : a.b.c, a.b.c.d
    assert sorted(t for t, _ in idx.query(filt)) == want
    assert idx.count(filt) == len(want)


@pytest.mark.parametrize("filt", ["a.>", ">", "a.*.>", ">.b.>", "*"])
def test_one_many_word_wildcard_per_run_agrees_with_the_trie(filt: str) -> None:
    idx = TopicIndex(PLUS_ANYWHERE)
    for t in TOPICS:
        idx[t] = t
    trie = Trie(PLUS_ANYWHERE)
    trie.subscribe(filt, "s")
    assert sorted(t for t, _ in idx.query(filt)) == sorted(t for t in TOPICS if trie.lookup(t))
