"""Batches over a trie larger than the caches: ``lookup_many`` warms its
walks together (native/match.c, "Warming a batch"), which must change no
answer.  Rules: ``lookup_many(topics) == [lookup(t) for t in topics]``, the
first invalid topic raises what ``lookup`` raises, and every row is one
state of the trie while another thread updates it (docs/api.md)."""

from __future__ import annotations

import random
import threading

import pytest

from cstrie import Trie

WARM_MIN_PAIRS = 50_000  # native/match.c


@pytest.fixture(scope="module")
def big() -> tuple[Trie, list[str]]:
    """A trie of 150,000 MQTT filters (over 50,000 pairs, so batches are
    warmed), and topics that hit it, miss it, and go deep."""
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    filters = []
    for _ in range(150_000):
        n = rng.randint(1, 6)
        ws = [rng.choice(words) if rng.random() > 0.08 else "+" for _ in range(n)]
        if rng.random() < 0.02:
            ws[-1] = "#"
        filters.append("/".join(ws))
    t = Trie("mqtt")
    t.subscribe_many((f, i % 3000) for i, f in enumerate(filters))
    assert len(t) > WARM_MIN_PAIRS
    topics = ["/".join(rng.choice(words) for _ in range(rng.randint(1, 7))) for _ in range(1000)]
    topics += ["/".join(["w1"] * 30), "$SYS/w1", "w1//w2", "zz/w1"]
    return t, topics


def test_warmed_lookup_many_equals_lookups(big: tuple[Trie, list[str]]) -> None:
    t, topics = big
    for size in (1, 2, 15, 16, 17, 64, len(topics)):
        for start in range(0, len(topics), size * 7 + 1):
            batch = topics[start : start + size]
            assert t.lookup_many(batch) == [t.lookup(x) for x in batch]


def test_warmed_batch_raises_for_its_first_invalid_topic(big: tuple[Trie, list[str]]) -> None:
    t, topics = big
    for bad in ("w1/+", "w1/#", "w\ud800"):
        batch = [*topics[:20], bad, *topics[20:40], "w2/+"]
        with pytest.raises(ValueError) as many_err:
            t.lookup_many(batch)
        with pytest.raises(ValueError) as one_err:
            t.lookup(bad)
        assert str(many_err.value) == str(one_err.value)


def test_warmed_rows_are_states_of_the_trie_under_updates(big: tuple[Trie, list[str]]) -> None:
    """A writer subscribes and unsubscribes ``w1/w2/w3`` for subscriber
    "x" over and over; each row of a batch sees it or not, never a mix
    with the other pairs changed (only "x" changes)."""
    t, _topics = big
    base = t.lookup("w1/w2/w3")
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            t.subscribe("w1/w2/w3", "x")
            t.unsubscribe("w1/w2/w3", "x")

    th = threading.Thread(target=writer)
    th.start()
    try:
        for _ in range(100):
            rows = t.lookup_many(["w1/w2/w3"] * 40)
            for r in rows:
                assert sorted(map(str, r)) in (
                    sorted(map(str, base)),
                    sorted(map(str, [*base, "x"])),
                )
    finally:
        stop.set()
        th.join()
    assert t.lookup("w1/w2/w3") == base


def test_warmed_batches_too_big_for_one_pass_or_not_ascii_answer_the_same() -> None:
    """A warmed batch of 16 topics is walked and mapped in one pass, unless
    its rows hold more ids than that pass's buffer (4,096) or a topic is not
    plain ASCII; either way the rows are ``lookup``'s."""
    t = Trie("mqtt")
    t.subscribe_many((f"f/{i % 700}/{i}", i) for i in range(WARM_MIN_PAIRS + 10_000))
    t.subscribe_many(("#", f"all{i}") for i in range(300))  # 16 topics x 300 > 4,096
    topics = [f"f/{i}/{i * 3}" for i in range(40)] + ["f/é/1", "f/1/ü", "g"]
    rows = t.lookup_many(topics)
    assert rows == [t.lookup(x) for x in topics]
    assert all(len(r) >= 300 for r in rows)
    few = [f"f/{i}/{i}" for i in range(40)]  # fits the buffer: one pass per 16
    small = Trie("mqtt")
    small.subscribe_many((f"f/{i % 700}/{i}", i) for i in range(WARM_MIN_PAIRS + 10_000))
    assert small.lookup_many(few) == [small.lookup(x) for x in few]
    more = [*few, "f/é/1"]
    assert small.lookup_many(more) == [small.lookup(x) for x in more]
