"""Stateful model test: random sequences of operations against a plain Python model.

One hypothesis ``RuleBasedStateMachine`` per built-in dialect drives ``cstrie.Trie``
and compares every answer with a model written straight from the spec:

* a writable handle is modelled by ``dict[pattern, set[subscriber]]``;
* matching is ``oracle.matches`` (the independent slow matcher in ``tests/support/oracle.py``);
* a snapshot is modelled by a frozen copy of its handle's model at the moment it was
  taken, and must keep answering like that copy while the handles change;
* ``copy()`` starts a second independent handle (and model) that then diverges.

Small word alphabets make patterns collide often (the same pattern subscribed twice,
patterns sharing prefixes, wildcards at every legal position).  After every step the
engine's structural invariant checker runs in strict mode on every handle and snapshot.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any

import oracle
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.trie import Snapshot, Trie

Model = dict[str, set[Hashable]]
Pairs = frozenset[tuple[str, Hashable]]

LITERALS = ["a", "a", "b", "b", "c", "$s"]
# 1 and 1.0 are equal: the trie must treat them as one subscriber, like the model's sets.
SUBSCRIBERS: list[Hashable] = [0, 1, 1.0, "x", ("t", 1), frozenset({2})]
MAX_HANDLES = 3
MAX_SNAPSHOTS = 3

SETTINGS = settings(
    deadline=None,
    max_examples=150,
    stateful_step_count=40,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


def _literals(d: Dialect) -> list[str]:
    return LITERALS + ([""] if d.empty_words else [])


@functools.cache
def patterns(d: Dialect) -> st.SearchStrategy[str]:
    """Valid patterns of 0-4 words over a tiny alphabet, wildcards where legal."""
    body_words = [*_literals(d), d.single or "a"]
    if not d.multi_last_only and d.multi is not None:
        body_words.append(d.multi)
    tails: list[list[str]] = [[], []]
    if d.multi_last_only and d.multi is not None:
        tails.append([d.multi])
    body = st.lists(st.sampled_from(body_words), min_size=0, max_size=3)

    def join(bt: tuple[list[str], list[str]]) -> str:
        words = bt[0] + bt[1]
        if not words and not d.empty_topic:
            words = [d.multi or "a"]  # NATS ">" / MQTT "#" alone
        return d.separator.join(words)

    pattern = st.tuples(body, st.sampled_from(tails)).map(join)
    return pattern.filter(lambda p: oracle.valid_pattern(d, p))


@functools.cache
def topics(d: Dialect) -> st.SearchStrategy[str]:
    """Valid topics of 0-4 words over the same alphabet (AMQP: wildcard tokens as words)."""
    words = _literals(d)
    if d.topic_wildcards:
        words += [w for w in (d.single, d.multi) if w is not None]
    return (
        st.lists(st.sampled_from(words), min_size=0 if d.empty_topic else 1, max_size=4)
        .map(d.separator.join)
        .filter(lambda t: oracle.valid_topic(d, t))
    )


@functools.cache
def probes(d: Dialect) -> tuple[str, ...]:
    """Fixed topics checked often: every topic of up to 2 words over a tiny alphabet,
    plus a few longer ones (so isolation bugs show up even when drawn topics miss)."""
    words = ["a", "b", "$s"] + ([""] if d.empty_words else [])
    out = [""]
    for w1 in words:
        out.append(w1)
        out.extend(d.separator.join([w1, w2]) for w2 in words)
    out += [d.separator.join(ws) for ws in (["a", "b", "c"], ["a", "a", "a", "a"], ["b", "c"])]
    if d.topic_wildcards:
        out += [d.separator.join(["a", w]) for w in (d.single, d.multi) if w]
    return tuple(t for t in dict.fromkeys(out) if oracle.valid_topic(d, t))


def check_probes(reader: Trie | Snapshot, d: Dialect, pairs: Pairs) -> None:
    """lookup and has_subscribers of every probe topic, and lookup_many of them all."""
    wants = [oracle.expected_lookup(d, pairs, t) for t in probes(d)]
    for t, want in zip(probes(d), wants, strict=True):
        got = reader.lookup(t)
        assert len(got) == len(want) and set(got) == want, (t, got, want)
        assert reader.has_subscribers(t) is bool(want), t
    many = reader.lookup_many(probes(d))
    assert [set(x) for x in many] == wants


def instantiate(d: Dialect, pattern: str, data: st.DataObject) -> str:
    """A topic built to match ``pattern``: wildcards replaced by literal words."""
    lits = _literals(d)
    out: list[str] = []
    for word in oracle.words_of(d, pattern):
        if word == d.single:
            out.append(data.draw(st.sampled_from(lits), label="one"))
        elif word == d.multi:
            n = data.draw(st.integers(d.multi_min, 2), label="many")
            out.extend(data.draw(st.sampled_from(lits), label="word") for _ in range(n))
        else:
            out.append(word)
    return d.separator.join(out)


def pairs_of(model: Model) -> Pairs:
    return frozenset((p, s) for p, subs in model.items() for s in subs)


def check_reader(reader: Trie | Snapshot, d: Dialect, pairs: Pairs, topic: str) -> None:
    """lookup / match / has_subscribers / lookup_many of one topic against the oracle."""
    want_subs = oracle.expected_lookup(d, pairs, topic)
    want_pairs = oracle.expected_match(d, pairs, topic)
    found = reader.lookup(topic)
    assert isinstance(found, list)
    assert len(found) == len(want_subs), (topic, found, want_subs)
    assert set(found) == want_subs, (topic, found, want_subs)
    matched = reader.match(topic)
    assert len(matched) == len(want_pairs), (topic, matched, want_pairs)
    assert set(matched) == want_pairs, (topic, matched, want_pairs)
    assert reader.has_subscribers(topic) is bool(want_subs)
    many = reader.lookup_many([topic, topic])
    assert [set(x) for x in many] == [want_subs, want_subs]


def check_contents(reader: Trie | Snapshot, pairs: Pairs) -> None:
    """len, iteration and subscriptions() all describe exactly ``pairs``."""
    assert len(reader) == len(pairs)
    listed = list(reader)
    assert len(listed) == len(pairs), (listed, pairs)
    assert set(listed) == pairs
    subs = reader.subscriptions()
    assert isinstance(subs, dict)
    by_pattern: dict[str, set[Hashable]] = {}
    for p, s in pairs:
        by_pattern.setdefault(p, set()).add(s)
    assert set(subs) == set(by_pattern)
    for p, lst in subs.items():
        assert isinstance(lst, list)
        assert len(lst) == len(by_pattern[p]) and set(lst) == by_pattern[p], p
    assert bool(reader) is bool(pairs)


class TrieModel(RuleBasedStateMachine):
    """Base machine; subclasses set ``dialect``."""

    dialect: Dialect = AMQP

    def __init__(self) -> None:
        super().__init__()
        d = self.dialect
        self.handles: list[tuple[Trie, Model]] = [(Trie(d), {})]
        self.snapshots: list[tuple[Snapshot, Pairs]] = []

    # --------------------------------------------------------------- helpers
    def _handle(self, h: int) -> tuple[Trie, Model]:
        return self.handles[h % len(self.handles)]

    # ---------------------------------------------------------------- writes
    @rule(h=st.integers(0, MAX_HANDLES - 1), pattern=st.data(), sub=st.sampled_from(SUBSCRIBERS))
    def subscribe(self, h: int, pattern: st.DataObject, sub: Hashable) -> None:
        trie, model = self._handle(h)
        p = pattern.draw(patterns(self.dialect), label="pattern")
        was_new = sub not in model.get(p, set())
        assert trie.subscribe(p, sub) is was_new, (p, sub)
        model.setdefault(p, set()).add(sub)

    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data())
    def subscribe_batch(self, h: int, data: st.DataObject) -> None:
        trie, model = self._handle(h)
        n = data.draw(st.integers(1, 6), label="n")
        for _ in range(n):
            p = data.draw(patterns(self.dialect), label="pattern")
            sub = data.draw(st.sampled_from(SUBSCRIBERS), label="sub")
            assert trie.subscribe(p, sub) is (sub not in model.get(p, set())), (p, sub)
            model.setdefault(p, set()).add(sub)

    @rule(h=st.integers(0, MAX_HANDLES - 1), pattern=st.data(), sub=st.sampled_from(SUBSCRIBERS))
    def unsubscribe_any(self, h: int, pattern: st.DataObject, sub: Hashable) -> None:
        trie, model = self._handle(h)
        p = pattern.draw(patterns(self.dialect), label="pattern")
        was_there = sub in model.get(p, set())
        assert trie.unsubscribe(p, sub) is was_there, (p, sub)
        if was_there:
            model[p].discard(sub)
            if not model[p]:
                del model[p]

    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data())
    def unsubscribe_existing(self, h: int, data: st.DataObject) -> None:
        trie, model = self._handle(h)
        pairs = sorted(pairs_of(model), key=repr)
        if not pairs:
            return
        p, sub = data.draw(st.sampled_from(pairs), label="pair")
        assert trie.unsubscribe(p, sub) is True
        assert trie.unsubscribe(p, sub) is False
        model[p].discard(sub)
        if not model[p]:
            del model[p]

    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def clear(self, h: int) -> None:
        trie, model = self._handle(h)
        trie.clear()
        model.clear()

    # ----------------------------------------------------------------- reads
    @rule(h=st.integers(0, MAX_HANDLES - 1), topic=st.data())
    def lookup(self, h: int, topic: st.DataObject) -> None:
        trie, model = self._handle(h)
        t = topic.draw(topics(self.dialect), label="topic")
        check_reader(trie, self.dialect, pairs_of(model), t)
        check_probes(trie, self.dialect, pairs_of(model))

    @rule(data=st.data())
    def lookup_matching_topic(self, data: st.DataObject) -> None:
        """A topic made to match some subscribed pattern, asked of every handle and
        snapshot (so that lookups have answers to get wrong)."""
        pats = sorted(
            {p for _, m in self.handles for p in m} | {p for _, f in self.snapshots for p, _ in f}
        )
        if not pats:
            return
        t = instantiate(self.dialect, data.draw(st.sampled_from(pats), label="pattern"), data)
        if not oracle.valid_topic(self.dialect, t):
            return
        for trie, model in self.handles:
            check_reader(trie, self.dialect, pairs_of(model), t)
        for snap, frozen in self.snapshots:
            check_reader(snap, self.dialect, frozen, t)

    @rule(h=st.integers(0, MAX_HANDLES - 1), pattern=st.data())
    def subscribers(self, h: int, pattern: st.DataObject) -> None:
        trie, model = self._handle(h)
        p = pattern.draw(patterns(self.dialect), label="pattern")
        got = trie.subscribers(p)
        want = model.get(p, set())
        assert len(got) == len(want) and set(got) == want, (p, got, want)

    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def contents(self, h: int) -> None:
        trie, model = self._handle(h)
        check_contents(trie, pairs_of(model))

    # ------------------------------------------------------ snapshots, copies
    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def take_snapshot(self, h: int) -> None:
        trie, model = self._handle(h)
        snap = trie.snapshot()
        assert isinstance(snap, Snapshot)
        if len(self.snapshots) >= MAX_SNAPSHOTS:
            self.snapshots.pop(0)
        self.snapshots.append((snap, pairs_of(model)))

    @precondition(lambda self: self.snapshots)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1), topic=st.data())
    def check_snapshot(self, i: int, topic: st.DataObject) -> None:
        snap, frozen = self.snapshots[i % len(self.snapshots)]
        t = topic.draw(topics(self.dialect), label="topic")
        check_reader(snap, self.dialect, frozen, t)
        check_contents(snap, frozen)
        check_probes(snap, self.dialect, frozen)

    @precondition(lambda self: self.snapshots)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1))
    def drop_snapshot(self, i: int) -> None:
        self.snapshots.pop(i % len(self.snapshots))

    @precondition(lambda self: len(self.handles) < MAX_HANDLES)
    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def copy(self, h: int) -> None:
        trie, model = self._handle(h)
        dup = trie.copy()
        assert isinstance(dup, Trie) and dup is not trie
        self.handles.append((dup, {p: set(s) for p, s in model.items()}))

    @precondition(lambda self: self.snapshots and len(self.handles) < MAX_HANDLES)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1))
    def copy_of_snapshot(self, i: int) -> None:
        snap, frozen = self.snapshots[i % len(self.snapshots)]
        dup = snap.copy()
        assert isinstance(dup, Trie)
        model: Model = {}
        for p, s in frozen:
            model.setdefault(p, set()).add(s)
        self.handles.append((dup, model))

    # ------------------------------------------------------------ invariants
    @invariant()
    def structure_is_sound(self) -> None:
        for trie, model in self.handles:
            trie.check_invariants(strict=True)
            assert len(trie) == sum(len(s) for s in model.values())
        for snap, frozen in self.snapshots:
            snap.check_invariants(strict=True)
            assert len(snap) == len(frozen)

    @invariant()
    def registry_maps_every_live_subscriber(self) -> None:
        reg = self.handles[0][0]._reg
        mapped = set(reg.live_objects())
        live = {s for _, model in self.handles for subs in model.values() for s in subs}
        held = {s for _, frozen in self.snapshots for _, s in frozen}
        assert live | held <= mapped, (live | held) - mapped
        if not self.snapshots:
            # Rule 3 of cstrie/registry.py: no open snapshot -> exactly the live ones.
            assert mapped == live, (mapped, live)


class AMQPModel(TrieModel):
    dialect = AMQP


class MQTTModel(TrieModel):
    dialect = MQTT


class NATSModel(TrieModel):
    dialect = NATS


def _case(machine: type[RuleBasedStateMachine]) -> Any:
    case = machine.TestCase
    case.settings = SETTINGS
    return case


TestAMQPModel = _case(AMQPModel)
TestMQTTModel = _case(MQTTModel)
TestNATSModel = _case(NATSModel)
