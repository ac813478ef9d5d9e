"""The content index against the slow evaluator (tests/support/content_oracle.py:
every binding tested against every message, from the rules), on random
workloads, hypothesis-shrunk ones and under concurrent updates.

Random workloads draw from ``CSTRIE_SEED`` (printed on failure): replay with

    CSTRIE_SEED=<seed> python -m pytest tests/content/test_content_fuzz.py
"""

from __future__ import annotations

import random
import threading
from typing import Any

import oracle
import pytest
from content_oracle import expected
from helpers import run_threads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie.content import (
    AllOf,
    AnyOf,
    ContentIndex,
    Criterion,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
    Suffix,
)

SEED = oracle.choose_seed()
FIELDS = ["a", "b", "c", "d.e", "", "#"]
TEXTS = ["", "x", "xy", "yx", "x.y", "x/#", "é", "xyz" * 3]
VALUES: list[Any] = [
    *TEXTS,
    0,
    1,
    -1,
    2,
    1.0,
    0.5,
    -0.0,
    2**53 + 1,
    2**70,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    False,
    None,
    b"x",
    b"",
    [1],
]
BOUNDS: list[Any] = [None, -1, 0, 0.5, 1, 2, 2**53, 2**53 + 1, 2**70, float("inf")]
TOPIC_FILTERS = {
    "amqp": [None, None, "a.*", "#", "a.#", "*", ""],
    "mqtt": [None, None, "a/+", "#", "+/#", "$s/#", "a"],
    "nats": [None, None, "a.*", ">", "a.>", "*"],
}
TOPICS = {
    "amqp": [None, "a.b", "a", "b", ""],
    "mqtt": [None, "a/b", "a", "$s/a", "/"],
    "nats": [None, "a.b", "a", "b.c.d"],
}


def leaf(r: random.Random) -> Criterion:
    f = r.choice(FIELDS)
    k = r.randrange(6)
    if k == 0:
        return Has(f)
    if k == 1:
        return Eq(f, r.choice([v for v in VALUES if v == v and not isinstance(v, list)]))
    if k == 2:
        vs = [v for v in r.sample(VALUES, 3) if v == v and not isinstance(v, list)]
        return OneOf(f, vs or [0])
    if k == 3:
        return Prefix(f, r.choice(TEXTS))
    if k == 4:
        return Suffix(f, r.choice(TEXTS))
    lo, hi = sorted([r.choice(BOUNDS[1:]), r.choice(BOUNDS[1:])])
    lo = None if r.random() < 0.2 else lo
    hi = None if r.random() < 0.2 else hi
    if lo is not None and lo == hi:
        return Range(f, lo, hi)
    return Range(f, lo, hi, low_inclusive=r.random() < 0.5, high_inclusive=r.random() < 0.5)


def criterion(r: random.Random, depth: int = 1) -> Criterion:
    k = r.randrange(6) if depth < 4 else 5
    if k == 0:
        return AllOf(*(criterion(r, depth + 1) for _ in range(r.randrange(4))))
    if k == 1:
        return AnyOf(*(criterion(r, depth + 1) for _ in range(r.randrange(4))))
    if k == 2:
        return Not(criterion(r, depth + 1))
    return leaf(r)


def message(r: random.Random) -> dict[str, Any]:
    return {f: r.choice(VALUES) for f in r.sample(FIELDS, r.randrange(len(FIELDS) + 1))}


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_random_workloads_match_the_slow_evaluator(dialect: str) -> None:
    r = oracle.seeded_rng(SEED, "content", dialect)
    for _ in range(60):
        idx = ContentIndex(dialect, max_value_length=r.choice([4, 256]), range_patterns=16)
        model: dict[tuple[str, Any, str | None], Criterion] = {}
        for _ in range(r.randrange(1, 40)):
            c, s, t = criterion(r), r.randrange(6), r.choice(TOPIC_FILTERS[dialect])
            try:
                new = idx.bind(c, s, t)
            except ValueError:  # a value past max_value_length
                continue
            assert new == ((c.key, s, t) not in model)
            model[(c.key, s, t)] = c
            if model and r.random() < 0.25:
                key = r.choice(list(model))
                assert idx.unbind(model.pop(key), key[1], key[2])
        bindings = [(c, s, t) for (_, s, t), c in model.items()]
        assert len(idx) == len(bindings)
        for _ in range(30):
            fields, topic = message(r), r.choice(TOPICS[dialect])
            got = idx.match(fields, topic)
            ctx = f"{dialect} {fields!r} topic {topic!r} (CSTRIE_SEED={SEED})"
            assert len(got) == len(set(got)), ctx
            assert set(got) == expected(bindings, fields, topic, dialect), ctx


values = st.one_of(
    st.text(alphabet="xy.#/é", max_size=4),
    st.integers(-3, 3),
    st.sampled_from([2**53 + 1, 0.5, -0.0, float("inf"), True, False, None, b"x"]),
    st.floats(allow_nan=False, width=16),
)
leaves = st.one_of(
    st.builds(Has, st.sampled_from("ab")),
    st.builds(Eq, st.sampled_from("ab"), values),
    st.builds(OneOf, st.sampled_from("ab"), st.lists(values, min_size=1, max_size=3)),
    st.builds(Prefix, st.sampled_from("ab"), st.text(alphabet="xy.#", max_size=3)),
    st.builds(Suffix, st.sampled_from("ab"), st.text(alphabet="xy.#", max_size=3)),
    st.builds(
        lambda f, lo, hi, a, b: Range(f, min(lo, hi), max(lo, hi))
        if lo == hi
        else Range(f, min(lo, hi), max(lo, hi), low_inclusive=a, high_inclusive=b),
        st.sampled_from("ab"),
        st.one_of(st.integers(-3, 3), st.floats(-3, 3, width=16)),
        st.one_of(st.integers(-3, 3), st.floats(-3, 3, width=16)),
        st.booleans(),
        st.booleans(),
    ),
)
criteria = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.lists(inner, max_size=3).map(lambda cs: AllOf(*cs)),
        st.lists(inner, max_size=3).map(lambda cs: AnyOf(*cs)),
    ),
    max_leaves=6,
)
messages = st.dictionaries(st.sampled_from("abc"), st.one_of(values, st.just(float("nan"))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(criteria, st.integers(0, 3)), max_size=8), st.lists(messages, max_size=6))
def test_hypothesis_matches_the_slow_evaluator(
    bound: list[tuple[Criterion, int]], msgs: list[dict[str, Any]]
) -> None:
    idx = ContentIndex(max_depth=16)
    model = {}
    for c, s in bound:
        idx.bind(c, s)
        model[(c.key, s)] = (c, s, None)
    for fields in msgs:
        assert set(idx.match(fields)) == expected(model.values(), fields, None)


def test_concurrent_updates_every_snapshot_answers_for_its_bindings() -> None:
    """Writers bind and unbind bindings of many clauses (so a half-built one
    would show) while readers take snapshots and check every answer against
    the slow evaluator on exactly that snapshot's bindings; the live index's
    answers must also contain every binding that no writer touches."""
    r0 = oracle.seeded_rng(SEED, "content-threads")
    idx = ContentIndex()
    stable = AllOf(Eq("a", "x"), Prefix("b", "x"), Range("c", 0, 2))
    idx.bind(stable, "always-there")
    pool = [
        AllOf(*(leaf(r0) for _ in range(r0.randrange(1, 6))))
        if r0.random() < 0.7
        else criterion(r0)
        for _ in range(40)
    ]
    probe = [message(r0) | {"a": "x", "b": "xy", "c": 1} for _ in range(30)]
    stop = threading.Event()
    errors: list[str] = []

    def writer(k: int) -> None:
        r = random.Random(f"{SEED}/w{k}")
        mine: list[tuple[Criterion, int]] = []
        for _ in range(400):
            if mine and r.random() < 0.45:
                c, s = mine.pop(r.randrange(len(mine)))
                assert idx.unbind(c, s)
            else:
                c, s = r.choice(pool), 100 * k + r.randrange(5)
                if idx.bind(c, s):
                    mine.append((c, s))
        stop.set()

    def reader(k: int) -> None:
        r = random.Random(f"{SEED}/r{k}")
        while not stop.is_set() and not errors:
            snap = idx.snapshot()
            bindings = [(b.criteria, b.subscriber, b.topic) for b in snap.bindings()]
            for fields in r.sample(probe, 5):
                got = snap.match(fields)
                if set(got) != expected(bindings, fields, None):
                    errors.append(f"snapshot answer for {fields!r} (CSTRIE_SEED={SEED})")
                if "always-there" not in idx.match(fields):
                    errors.append(f"live answer lost a stable binding (CSTRIE_SEED={SEED})")

    run_threads([lambda: writer(0), lambda: writer(1), lambda: reader(0), lambda: reader(1)])
    assert not errors, errors[:3]
    assert set(idx.match(probe[0])) >= {"always-there"}


def test_racing_bind_and_unbind_of_one_binding_stay_a_set() -> None:
    """Threads bind and unbind the SAME bindings: every True is one state
    change, so per binding the Trues alternate and the end state is their sum."""
    idx = ContentIndex()
    keys = [(AllOf(Eq("a", i), Has("b")), f"s{i % 3}") for i in range(6)]
    tally = [[0, 0] for _ in keys]
    lock = threading.Lock()

    def worker(k: int) -> None:
        r = random.Random(f"{SEED}/race{k}")
        for _ in range(600):
            i = r.randrange(len(keys))
            c, s = keys[i]
            if r.random() < 0.5:
                if idx.bind(c, s):
                    with lock:
                        tally[i][0] += 1
            elif idx.unbind(c, s):
                with lock:
                    tally[i][1] += 1

    run_threads([lambda k=k: worker(k) for k in range(4)])  # type: ignore[misc]
    present = {(b.criteria, b.subscriber) for b in idx.bindings()}
    for i, (c, s) in enumerate(keys):
        binds, unbinds = tally[i]
        assert binds - unbinds == ((c, s) in present), (i, binds, unbinds)
    assert len(idx) == len(present)
    assert not idx._subs or all(st.slots for st in idx._subs.values())
    for i, (c, s) in enumerate(keys):
        assert (idx.match({"a": i, "b": 0}) != []) == ((c, s) in present)


def test_every_step_of_bind_and_unbind_is_all_or_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot taken before each engine update that a bind or an unbind
    makes answers exactly as the slow evaluator on that snapshot's
    bindings: the binding is either whole (marker and every pattern) or
    absent, never half there."""
    from cstrie.trie import Trie

    idx = ContentIndex()
    c = AllOf(Eq("a", 1), Prefix("b", "x"), Range("c", 0, 9), AnyOf(Has("d"), Suffix("e", "z")))
    fields = {"a": 1, "b": "xy", "c": 5, "d": None}
    checks: list[bool] = []

    def check() -> None:
        snap = idx.snapshot()
        bs = [(b.criteria, b.subscriber, b.topic) for b in snap.bindings()]
        for f in (fields, {**fields, "a": 2}, {"a": 1}):
            checks.append(set(snap.match(f)) == expected(bs, f, None))

    for name in ("subscribe", "unsubscribe", "subscribe_many"):
        real = getattr(Trie, name)

        def hooked(self: Any, *args: Any, _real: Any = real, **kw: Any) -> Any:
            if self is idx._trie:
                check()
            return _real(self, *args, **kw)

        monkeypatch.setattr(Trie, name, hooked)
    idx.bind(c, "s")
    idx.bind(Not(Has("zz")), "t")  # an always-candidate
    check()
    idx.unbind(c, "s")
    idx.unbind(Not(Has("zz")), "t")
    check()
    assert len(checks) >= 12 and all(checks), [i for i, ok in enumerate(checks) if not ok]


def test_a_snapshot_of_any_step_answers_for_its_bindings_after_later_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Snapshots taken before each engine update of binds and unbinds, and
    matched only once every write is done (so the index's table of whole
    bindings has moved on: bindings added, bindings removed), still answer
    exactly as the slow evaluator on the bindings each one holds."""
    from cstrie.trie import Trie

    idx = ContentIndex()
    c1 = AllOf(Eq("a", 1), Prefix("b", "x"))
    c2 = AnyOf(Eq("a", 1), Has("d"))
    fields = {"a": 1, "b": "xy", "d": None}
    snaps: list[Any] = []

    for name in ("subscribe", "unsubscribe", "subscribe_many"):
        real = getattr(Trie, name)

        def hooked(self: Any, *args: Any, _real: Any = real, **kw: Any) -> Any:
            if self is idx._trie:
                snaps.append(idx.snapshot())
            return _real(self, *args, **kw)

        monkeypatch.setattr(Trie, name, hooked)
    idx.bind(c1, "s")  # whole while c2 is half bound, then gone while c2 is whole
    idx.bind(c2, "t")
    idx.unbind(c1, "s")
    idx.bind(Not(Has("zz")), "u")  # an always-candidate
    idx.unbind(c2, "t")
    snaps.append(idx.snapshot())
    monkeypatch.undo()
    assert len(snaps) >= 10
    for i, snap in enumerate(snaps):
        bs = [(b.criteria, b.subscriber, b.topic) for b in snap.bindings()]
        for f in (fields, {"a": 1}, {"d": 0}, {}):
            assert set(snap.match(f)) == expected(bs, f, None), (i, f, bs)
