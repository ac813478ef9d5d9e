"""Three findings in the lead's topic index (``cstrie/topics.py``,
``native/reverse.c``) from writing the ``reverse`` bench and
docs/topic-index.md, as strict xfails: each turns into a failure (XPASS) once
fixed, so the mark can come off.  No timing: the second counts the retired
entries a query's release visits."""

from __future__ import annotations

import pytest

from cstrie.dialect import Dialect
from cstrie.topics import TopicIndex
from cstrie.trie import Trie


@pytest.mark.xfail(
    strict=True,
    reason="_Stream.close() unpins the values but leaves the iterator running: the next "
    "next() goes on yielding from the snapshot, and raises KeyError once a value it "
    "reaches was replaced (released) after the close",
)
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


class _Counting(list):  # type: ignore[type-arg]
    """A list that counts the items its iterations visit."""

    visited = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in list.__iter__(self):
            _Counting.visited += 1
            yield item


@pytest.mark.xfail(
    strict=True,
    reason="_Values.unpin scans the whole retired list on every release: with one "
    "long-lived snapshot open and R values replaced since, every query (pin/unpin) "
    "costs O(R) (measured: 10 us -> 26 ms per small query at R = 200,000)",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="native/reverse.c normalise(): a run of k >= 2 many-word wildcards becomes "
    "singles + multi_min 'any' items (anys = singles + (multis ? multi_min : 0)) instead "
    "of singles + k * multi_min, as its own header comment and cstrie/relations.py say: "
    "in a dialect with multi_min >= 1 and the wildcard anywhere, 'a.>.>' matches 'a.b'. "
    "The built-in dialects are not affected (AMQP has multi_min 0; MQTT '#' and NATS '>' "
    "are last-only, so k <= 1)",
)
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
