"""``cstrie.topics.TopicIndex`` used from several threads at once (a few
seconds; no timing assertions).  On ordinary CPython the engine runs with the
GIL released inside cffi calls; under free-threaded 3.13t everything runs in
parallel.  What is checked, from the spec (puts/removes linearizable, each
query/count linearizable at its call, every method callable from any thread):

* each writer thread owns the topics under its own prefix and writes only
  those: every query it makes, restricted to its own prefix, equals its own
  model exactly (values by identity), as do count, get and its snapshots;
* a reader querying the whole index meanwhile never sees a topic twice, and
  every value it sees is one that was put under that topic; topics that were
  put before the threads started and never touched are in every answer;
* with one writer putting ``seq/0``, ``seq/1``, ... in order and then removing
  them in order (or with another thread clearing now and then), every query,
  count and snapshot sees a contiguous range of ``k`` (a state that existed),
  and a snapshot answers the same when asked again later;
* at the end ``len`` and ``items()`` are the union of the models.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable
from typing import Any

import oracle
from helpers import JOIN_TIMEOUT, run_threads
from topic_index_helpers import check_contents, collect, same_values

from cstrie.dialect import MQTT
from cstrie.topics import TopicIndex

WRITERS = 3


def _value(owner: int, topic: str, k: int) -> tuple[int, str, int]:
    """A fresh value that names the topic it was put under."""
    return (owner, topic, k)


def together(targets: list[Callable[[], None]]) -> None:
    """run_threads, with every thread starting its work at the same moment (a
    barrier), so that readers and writers overlap."""
    barrier = threading.Barrier(len(targets))

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            barrier.wait(JOIN_TIMEOUT)
            fn()

        return run

    run_threads([wrap(fn) for fn in targets])


def _own(model: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {t: v for t, v in model.items() if t == prefix or t.startswith(prefix + "/")}


def test_writers_see_exactly_their_own_topics() -> None:
    idx = TopicIndex("mqtt")
    stable = {f"stable/{j}": _value(-1, f"stable/{j}", j) for j in range(50)}
    for topic, value in stable.items():
        idx.put(topic, value)
    models: list[dict[str, Any]] = [{} for _ in range(WRITERS)]
    done = threading.Event()
    reader_rounds = [0]

    def writer(i: int) -> None:
        rng = random.Random(f"writer-{i}")
        prefix = f"t{i}"
        model = models[i]
        own_topics = [prefix] + [f"{prefix}/{a}/{b}" for a in range(4) for b in range(6)]
        own_topics += [f"{prefix}/{a}" for a in range(4)] + [f"{prefix}//x"]
        filters = [f"{prefix}/#", f"{prefix}/+/3", f"{prefix}/2/+", f"{prefix}/+", "#", "+/+/+"]
        for k in range(3000):
            here = f"writer {i} step {k}"
            op = rng.random()
            topic = rng.choice(own_topics)
            if op < 0.35:
                value = _value(i, topic, k)
                assert idx.put(topic, value) is (topic not in model), here
                model[topic] = value
            elif op < 0.55:
                assert idx.remove(topic) is (topic in model), here
                model.pop(topic, None)
            elif op < 0.6:
                sentinel = object()
                assert idx.pop(topic, sentinel) is model.pop(topic, sentinel), here
            elif op < 0.85:
                f = rng.choice(filters)
                got = _own(collect(idx.query(f), here), prefix)
                want = {t: v for t, v in model.items() if _matches_mqtt(f, t)}
                same_values(got, want, f"{here} filter {f!r}")
                if f.startswith(prefix):
                    assert idx.count(f) == len(want), f"{here} count {f!r}"
            elif op < 0.95:
                sentinel = object()
                assert idx.get(topic, sentinel) is model.get(topic, sentinel), here
                assert (topic in idx) is (topic in model), here
            else:
                snap = idx.snapshot()
                frozen = dict(model)
                same_values(_own(collect(snap.items(), here), prefix), frozen, here)
                assert snap.count(f"{prefix}/#") == len(frozen), here
                # more of my own writes; the snapshot does not move
                for topic in own_topics[:5]:
                    value = _value(i, topic, k)
                    idx.put(topic, value)
                    model[topic] = value
                same_values(_own(collect(snap.query(f"{prefix}/#"), here), prefix), frozen, here)

    def reader() -> None:
        try:
            while not done.is_set() or reader_rounds[0] < 3:
                for f in ("#", "+/+/+", "stable/#"):
                    got = collect(idx.query(f), f"reader {f!r}")
                    for topic, value in got.items():
                        assert isinstance(value, tuple) and value[1] == topic, (topic, value)
                    want = {t: v for t, v in stable.items() if _matches_mqtt(f, t)}
                    same_values({t: got[t] for t in stable if t in got}, want, f)
                    assert idx.count("stable/#") == len(stable)
                reader_rounds[0] += 1
        finally:
            done.set()

    running = [WRITERS]
    lock = threading.Lock()

    def writer_then_done(i: int) -> None:
        try:
            writer(i)
        finally:
            with lock:
                running[0] -= 1
                if running[0] == 0:
                    done.set()

    together([*(functools.partial(writer_then_done, i) for i in range(WRITERS)), reader])
    assert reader_rounds[0] >= 3
    union: dict[str, Any] = dict(stable)
    for model in models:
        union.update(model)
    check_contents(idx, union, "at the end")


def _matches_mqtt(f: str, topic: str) -> bool:
    return oracle.matches(MQTT, f, topic)


def _contiguous(ks: set[int], what: str) -> None:
    """``ks`` is empty or a range lo..hi with nothing missing."""
    if ks:
        lo, hi = min(ks), max(ks)
        assert len(ks) == hi - lo + 1, f"{what}: not a state that existed: {sorted(ks)}"


SEQ = 20_000


def _seq_index() -> TopicIndex:
    return TopicIndex("nats")


def _check_seq_answer(pairs: dict[str, Any], what: str) -> set[int]:
    ks = set()
    for topic, value in pairs.items():
        k = int(topic.split(".")[1])
        assert value == ("seq", k), f"{what}: {topic!r} -> {value!r}"
        ks.add(k)
    _contiguous(ks, what)
    return ks


def _seq_readers(idx: TopicIndex, done: threading.Event, n: int) -> list[Any]:
    def reader(r: int) -> None:
        kept: list[tuple[Any, set[int]]] = []
        rounds = 0
        while not done.is_set() or rounds < 2:
            ks = _check_seq_answer(collect(idx.query("seq.*"), f"reader {r}"), f"reader {r}")
            n_counted = idx.count("seq.>")
            assert 0 <= n_counted <= SEQ
            snap = idx.snapshot()
            snap_ks = _check_seq_answer(collect(snap.items()), f"reader {r} snapshot")
            assert snap.count("seq.*") == len(snap_ks)
            kept.append((snap, snap_ks))
            if len(kept) > 4:
                old, old_ks = kept.pop(0)
                again = _check_seq_answer(collect(old.query("seq.>")), f"reader {r} old snap")
                assert again == old_ks, f"reader {r}: a snapshot changed under later writes"
            assert ks <= set(range(SEQ))
            rounds += 1

    return [functools.partial(reader, r) for r in range(n)]


def test_ordered_puts_then_removes_are_seen_as_ranges() -> None:
    """One writer puts seq.0 .. seq.N-1 in order, then removes them in order: any
    linearizable answer holds a contiguous range of k."""
    idx = _seq_index()
    done = threading.Event()

    def writer() -> None:
        try:
            for k in range(SEQ):
                assert idx.put(f"seq.{k}", ("seq", k)) is True
            for k in range(SEQ):
                assert idx.remove(f"seq.{k}") is True
        finally:
            done.set()

    together([writer, *_seq_readers(idx, done, 2)])
    assert len(idx) == 0 and list(idx.items()) == []


def test_ordered_puts_with_concurrent_clears_are_seen_as_ranges() -> None:
    """Puts in order while another thread clears now and then: every state is
    the puts since the last clear, again a contiguous range."""
    idx = _seq_index()
    done = threading.Event()
    writer_done = threading.Event()

    def writer() -> None:
        try:
            for k in range(SEQ):
                idx.put(f"seq.{k}", ("seq", k))
        finally:
            writer_done.set()

    def clearer() -> None:
        try:
            rng = random.Random("clearer")
            while not writer_done.is_set():
                for _ in range(rng.randrange(50, 500)):
                    if writer_done.is_set():
                        break
                    idx.count("seq.*")  # something to do between clears
                idx.clear()
        finally:
            done.set()

    together([writer, clearer, *_seq_readers(idx, done, 1)])
    _check_seq_answer(collect(idx.items()), "at the end")


def test_replacing_one_topic_while_querying_it() -> None:
    """Threads replace the values of a few topics as fast as they can while others
    query them: a query sees each topic once with one of the values put under it,
    and count is always the number of topics (replaces never remove)."""
    idx = TopicIndex("amqp")
    topics = [f"hot.{j}" for j in range(5)]
    for topic in topics:
        idx.put(topic, _value(0, topic, 0))
    stop = threading.Event()

    def replacer(i: int) -> None:
        try:
            for k in range(20_000):
                topic = topics[k % len(topics)]
                assert idx.put(topic, _value(i, topic, k)) is False
        finally:
            stop.set()

    def querier() -> None:
        rounds = 0
        while not stop.is_set() or rounds < 2:
            got = collect(idx.query("hot.*"), "querier")
            assert set(got) == set(topics), sorted(got)
            for topic, value in got.items():
                assert isinstance(value, tuple) and value[1] == topic, (topic, value)
            assert idx.count("#") == len(topics)
            assert idx.get("hot.0")[1] == "hot.0"
            rounds += 1

    together([lambda: replacer(1), lambda: replacer(2), querier, querier])
    assert len(idx) == len(topics)
