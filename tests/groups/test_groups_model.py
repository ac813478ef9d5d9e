"""Stateful model test of share groups: random sequences of operations against a
plain Python model, one hypothesis ``RuleBasedStateMachine`` per built-in dialect.

The model of a writable handle is two dicts:

* ``ordinary``: ``pattern -> set[subscriber]`` (what ``lookup`` answers from);
* ``shared``: ``(filter, group) -> set[member]``.

Matching is ``oracle.matches`` (``tests/support/oracle.py``, the independent matcher).
From them, for a topic, the model expects (rules of ``cstrie/groups.py``):

* ``lookup``/``match``/``has_subscribers``: the ordinary subscriptions only;
* ``route``: each ordinary subscriber of a matching pattern once, then one
  member per group with a member on a matching filter, chosen among the union
  of that group's members on the matching filters;
* the policies (one per group name for the whole family, which here is every
  handle and snapshot: they all descend from the first trie): round-robin
  gives each candidate in turn, sticky the same member for the same key,
  random one of the candidates.

A snapshot is modelled by the frozen model of its handle when it was taken, a
``copy()`` by a copy of the model that then diverges.  Memberships are made and
removed through every way of naming a group (``group=``, ``Shared``, and in
MQTT ``$share/{group}/{filter}``).  After every step the engine's invariant
checker runs (strict) on every handle and snapshot, and the registry must map
exactly the live subscribers and groups.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import oracle
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.groups import Group, Shared
from cstrie.trie import Snapshot, Trie

# the trie's stateful model test (tests/trie/) lends its reader checks
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trie"))
from test_model_stateful import check_reader, instantiate

Ordinary = dict[str, set[Hashable]]
SharedModel = dict[tuple[str, str], set[Hashable]]

# 1 and 1.0 are equal: one subscriber, one member.
SUBSCRIBERS: list[Hashable] = [0, 1, 1.0, "x", ("t", 1), frozenset({2})]
GROUPS = ["g", "h", "ü"]
POLICIES = ["round-robin", "random", "sticky"]
KEYS: list[object] = [None, "k", b"k", 7, "other"]
MAX_HANDLES = 3
MAX_SNAPSHOTS = 3

SETTINGS = settings(
    deadline=None,
    max_examples=100,
    stateful_step_count=40,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


@functools.cache
def patterns(d: Dialect) -> st.SearchStrategy[str]:
    """Valid patterns of 0-3 words over a tiny alphabet with wildcards where legal
    (tiny so that a group often has members on several matching filters)."""
    words = ["a", "b", "$s", d.single or "a"]
    if d.multi is not None and not d.multi_last_only:
        words.append(d.multi)
    tail = [[], [], [d.multi]] if d.multi is not None and d.multi_last_only else [[]]
    return (
        st.tuples(st.lists(st.sampled_from(words), max_size=3), st.sampled_from(tail))
        .map(lambda bt: d.separator.join(bt[0] + bt[1]))
        .filter(lambda p: oracle.valid_pattern(d, p))
    )


@functools.cache
def topics(d: Dialect) -> st.SearchStrategy[str]:
    """Valid topics of 0-3 words over the same alphabet."""
    return (
        st.lists(st.sampled_from(["a", "b", "$s"]), max_size=3)
        .map(d.separator.join)
        .filter(lambda t: oracle.valid_topic(d, t))
    )


class Model:
    """One writable handle's subscriptions."""

    def __init__(self, ordinary: Ordinary | None = None, shared: SharedModel | None = None):
        self.ordinary: Ordinary = {p: set(s) for p, s in (ordinary or {}).items()}
        self.shared: SharedModel = {k: set(s) for k, s in (shared or {}).items()}

    def copy(self) -> Model:
        return Model(self.ordinary, self.shared)

    def ordinary_pairs(self) -> frozenset[tuple[str, Hashable]]:
        return frozenset((p, s) for p, subs in self.ordinary.items() for s in subs)

    def all_pairs(self) -> set[tuple[Any, Hashable]]:
        """The (key, subscriber) pairs iteration must yield."""
        out: set[tuple[Any, Hashable]] = set(self.ordinary_pairs())
        out |= {(Shared(f, g), m) for (f, g), ms in self.shared.items() for m in ms}
        return out

    def memberships(self) -> int:
        return sum(len(ms) for ms in self.shared.values())

    def subscribers(self) -> set[Hashable]:
        out: set[Hashable] = set()
        for subs in self.ordinary.values():
            out |= subs
        for ms in self.shared.values():
            out |= ms
        return out

    def groups(self) -> set[str]:
        return {g for (_, g), ms in self.shared.items() if ms}

    def expected_route(self, d: Dialect, topic: str) -> tuple[set[Hashable], dict[str, set[Any]]]:
        """(ordinary subscribers, {group: candidate members}) of a message."""
        ordinary = oracle.expected_lookup(d, self.ordinary_pairs(), topic)
        cands: dict[str, set[Any]] = {}
        for (f, g), ms in self.shared.items():
            if ms and oracle.matches(d, f, topic):
                cands.setdefault(g, set()).update(ms)
        return ordinary, cands


def check_route(reader: Trie | Snapshot, d: Dialect, model: Model, topic: str) -> None:
    """route / route_by_group / route_many of one topic against the model."""
    want_ordinary, cands = model.expected_route(d, topic)
    ordinary, chosen = reader.route_by_group(topic)
    assert len(ordinary) == len(want_ordinary), (topic, ordinary, want_ordinary)
    assert set(ordinary) == want_ordinary, (topic, ordinary, want_ordinary)
    assert set(chosen) == set(cands), (topic, chosen, cands)
    for g, m in chosen.items():
        assert m in cands[g], (topic, g, m, cands[g])
    got = reader.route(topic)
    n = len(want_ordinary)
    assert len(got) == n + len(cands), (topic, got)
    assert set(got[:n]) == want_ordinary
    union: set[Any] = set().union(*cands.values()) if cands else set()
    assert all(m in union for m in got[n:]), (topic, got, cands)
    (row,) = reader.route_many([topic])
    assert len(row) == len(got) and set(row[:n]) == want_ordinary


def check_policies(
    reader: Trie | Snapshot, d: Dialect, model: Model, topic: str, policies: dict[str, str]
) -> None:
    """With nothing changing meanwhile: round-robin gives every candidate in
    len(candidates) routes, sticky the same member for the same key."""
    _, cands = model.expected_route(d, topic)
    for g, members in cands.items():
        policy = policies.get(g, "round-robin")
        assert reader.group_policy(g) == policy
        if policy == "round-robin":
            got = [reader.route_by_group(topic)[1][g] for _ in range(len(members))]
            assert len(got) == len(members) and set(got) == members, (g, got, members)
        elif policy == "sticky":
            for key in KEYS:
                first = reader.route_by_group(topic, key)[1][g]
                assert reader.route_by_group(topic, key)[1][g] == first
                assert reader.route(topic, key)[-len(cands) :].count(first) >= 1
        else:
            assert all(reader.route_by_group(topic)[1][g] in members for _ in range(4))


def check_contents(reader: Trie | Snapshot, model: Model) -> None:
    """len, iteration, subscriptions(), stats() and subscribers() describe the model."""
    pairs = model.all_pairs()
    assert len(reader) == len(pairs)
    listed = list(reader)
    assert len(listed) == len(pairs) and set(listed) == pairs, (listed, pairs)
    for key, _ in listed:
        assert type(key) is str or type(key) is Shared, key
    subs = reader.subscriptions()
    want: dict[Any, set[Hashable]] = {p: set(s) for p, s in model.ordinary.items() if s}
    want.update({Shared(f, g): set(ms) for (f, g), ms in model.shared.items() if ms})
    assert set(subs) == set(want)
    for k, lst in subs.items():
        assert len(lst) == len(want[k]) and set(lst) == want[k], k
    stats = reader.stats()
    assert stats["subscriptions"] == len(pairs)
    assert stats["shared_subscriptions"] == model.memberships()
    assert stats["shared_filters"] == sum(1 for ms in model.shared.values() if ms)
    assert stats["subscribers"] == len(model.subscribers())
    for (f, g), ms in model.shared.items():
        got = reader.subscribers(Shared(f, g))
        assert len(got) == len(ms) and set(got) == ms, (f, g, got, ms)
        assert sorted(map(repr, reader.subscribers(f, group=g))) == sorted(map(repr, got))
    assert bool(reader) is bool(pairs)


class GroupsModel(RuleBasedStateMachine):
    """Base machine; subclasses set ``dialect``."""

    dialect: Dialect = AMQP

    def __init__(self) -> None:
        super().__init__()
        self.handles: list[tuple[Trie, Model]] = [(Trie(self.dialect), Model())]
        self.snapshots: list[tuple[Snapshot, Model]] = []
        self.policies: dict[str, str] = {}  # the family's, by group name

    def _handle(self, h: int) -> tuple[Trie, Model]:
        return self.handles[h % len(self.handles)]

    def _forms(self) -> list[str]:
        return ["group", "shared"] + (["syntax"] if self.dialect.share_prefix else [])

    def _call(self, method: Any, form: str, f: str, g: str, sub: Hashable) -> bool:
        d = self.dialect
        if form == "group":
            return bool(method(f, sub, group=g))
        if form == "shared":
            return bool(method(Shared(f, g), sub))
        return bool(method(d.separator.join([d.share_prefix or "", g, f]), sub))

    # ---------------------------------------------------------------- writes
    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data(), sub=st.sampled_from(SUBSCRIBERS))
    def subscribe(self, h: int, data: st.DataObject, sub: Hashable) -> None:
        trie, model = self._handle(h)
        p = data.draw(patterns(self.dialect), label="pattern")
        assert trie.subscribe(p, sub) is (sub not in model.ordinary.get(p, set()))
        model.ordinary.setdefault(p, set()).add(sub)

    @rule(
        h=st.integers(0, MAX_HANDLES - 1),
        data=st.data(),
        group=st.sampled_from(GROUPS),
        sub=st.sampled_from(SUBSCRIBERS),
    )
    def join(self, h: int, data: st.DataObject, group: str, sub: Hashable) -> None:
        trie, model = self._handle(h)
        f = data.draw(patterns(self.dialect), label="filter")
        form = data.draw(st.sampled_from(self._forms()), label="form")
        new = sub not in model.shared.get((f, group), set())
        assert self._call(trie.subscribe, form, f, group, sub) is new, (form, f, group, sub)
        model.shared.setdefault((f, group), set()).add(sub)

    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data(), group=st.sampled_from(GROUPS))
    def join_several(self, h: int, data: st.DataObject, group: str) -> None:
        """Several members of one group on several filters, then a message that
        matches one of them."""
        trie, model = self._handle(h)
        filters = data.draw(st.lists(patterns(self.dialect), min_size=1, max_size=3), label="fs")
        for f in filters:
            for sub in data.draw(st.lists(st.sampled_from(SUBSCRIBERS), max_size=3), label="ms"):
                form = data.draw(st.sampled_from(self._forms()), label="form")
                new = sub not in model.shared.get((f, group), set())
                assert self._call(trie.subscribe, form, f, group, sub) is new
                model.shared.setdefault((f, group), set()).add(sub)
        t = instantiate(self.dialect, filters[0], data)
        if oracle.valid_topic(self.dialect, t):
            check_route(trie, self.dialect, model, t)
            check_policies(trie, self.dialect, model, t, self.policies)

    @rule(
        h=st.integers(0, MAX_HANDLES - 1),
        data=st.data(),
        group=st.sampled_from(GROUPS),
        sub=st.sampled_from(SUBSCRIBERS),
    )
    def leave_any(self, h: int, data: st.DataObject, group: str, sub: Hashable) -> None:
        trie, model = self._handle(h)
        f = data.draw(patterns(self.dialect), label="filter")
        form = data.draw(st.sampled_from(self._forms()), label="form")
        was = sub in model.shared.get((f, group), set())
        assert self._call(trie.unsubscribe, form, f, group, sub) is was, (form, f, group, sub)
        if was:
            self._forget(model, f, group, sub)

    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data())
    def leave_existing(self, h: int, data: st.DataObject) -> None:
        trie, model = self._handle(h)
        triples = sorted(((f, g, m) for (f, g), ms in model.shared.items() for m in ms), key=repr)
        if not triples:
            return
        f, g, m = data.draw(st.sampled_from(triples), label="membership")
        form = data.draw(st.sampled_from(self._forms()), label="form")
        assert self._call(trie.unsubscribe, form, f, g, m) is True
        assert self._call(trie.unsubscribe, form, f, g, m) is False
        self._forget(model, f, g, m)

    @staticmethod
    def _forget(model: Model, f: str, g: str, m: Hashable) -> None:
        model.shared[(f, g)].discard(m)
        if not model.shared[(f, g)]:
            del model.shared[(f, g)]

    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data())
    def unsubscribe_existing(self, h: int, data: st.DataObject) -> None:
        trie, model = self._handle(h)
        pairs = sorted(model.ordinary_pairs(), key=repr)
        if not pairs:
            return
        p, sub = data.draw(st.sampled_from(pairs), label="pair")
        assert trie.unsubscribe(p, sub) is True
        assert trie.unsubscribe(p, sub) is False
        model.ordinary[p].discard(sub)
        if not model.ordinary[p]:
            del model.ordinary[p]

    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def clear(self, h: int) -> None:
        trie, model = self._handle(h)
        trie.clear()
        model.ordinary.clear()
        model.shared.clear()

    @rule(h=st.integers(0, MAX_HANDLES - 1), group=st.sampled_from(GROUPS), data=st.data())
    def set_policy(self, h: int, group: str, data: st.DataObject) -> None:
        trie, _ = self._handle(h)
        policy = data.draw(st.sampled_from(POLICIES), label="policy")
        trie.set_group_policy(group, policy)
        self.policies[group] = policy
        for reader in [t for t, _ in self.handles] + [s for s, _ in self.snapshots]:
            assert reader.group_policy(group) == policy

    # ----------------------------------------------------------------- reads
    @rule(h=st.integers(0, MAX_HANDLES - 1), data=st.data())
    def route(self, h: int, data: st.DataObject) -> None:
        trie, model = self._handle(h)
        t = data.draw(topics(self.dialect), label="topic")
        check_route(trie, self.dialect, model, t)
        check_reader(trie, self.dialect, model.ordinary_pairs(), t)

    @rule(data=st.data())
    def route_matching_topic(self, data: st.DataObject) -> None:
        """A topic made to match some filter or pattern, routed on every handle and
        snapshot (so that routes have members to get wrong)."""
        models = [m for _, m in self.handles] + [m for _, m in self.snapshots]
        pats = sorted(
            {f for m in models for f, _ in m.shared} | {p for m in models for p in m.ordinary}
        )
        if not pats:
            return
        t = instantiate(self.dialect, data.draw(st.sampled_from(pats), label="pattern"), data)
        if not oracle.valid_topic(self.dialect, t):
            return
        for trie, model in self.handles:
            check_route(trie, self.dialect, model, t)
            check_reader(trie, self.dialect, model.ordinary_pairs(), t)
            check_policies(trie, self.dialect, model, t, self.policies)
        for snap, frozen in self.snapshots:
            check_route(snap, self.dialect, frozen, t)
            check_reader(snap, self.dialect, frozen.ordinary_pairs(), t)
            check_policies(snap, self.dialect, frozen, t, self.policies)

    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def contents(self, h: int) -> None:
        trie, model = self._handle(h)
        check_contents(trie, model)

    # ------------------------------------------------------ snapshots, copies
    @rule(h=st.integers(0, MAX_HANDLES - 1))
    def take_snapshot(self, h: int) -> None:
        trie, model = self._handle(h)
        if len(self.snapshots) >= MAX_SNAPSHOTS:
            self.snapshots.pop(0)
        self.snapshots.append((trie.snapshot(), model.copy()))

    @precondition(lambda self: self.snapshots)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1), data=st.data())
    def check_snapshot(self, i: int, data: st.DataObject) -> None:
        snap, frozen = self.snapshots[i % len(self.snapshots)]
        t = data.draw(topics(self.dialect), label="topic")
        check_route(snap, self.dialect, frozen, t)
        check_contents(snap, frozen)

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
        self.handles.append((dup, model.copy()))

    @precondition(lambda self: self.snapshots and len(self.handles) < MAX_HANDLES)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1))
    def copy_of_snapshot(self, i: int) -> None:
        snap, frozen = self.snapshots[i % len(self.snapshots)]
        self.handles.append((snap.copy(), frozen.copy()))

    # ------------------------------------------------------------ invariants
    @invariant()
    def structure_is_sound(self) -> None:
        for trie, model in self.handles:
            trie.check_invariants(strict=True)
            assert len(trie) == len(model.all_pairs())
        for snap, frozen in self.snapshots:
            snap.check_invariants(strict=True)
            assert len(snap) == len(frozen.all_pairs())

    @invariant()
    def registry_maps_the_live_subscribers_and_groups(self) -> None:
        reg = self.handles[0][0]._reg
        mapped = reg.live_objects()
        objs = {o for o in mapped if not isinstance(o, Group)}
        groups = [o.name for o in mapped if isinstance(o, Group)]
        assert len(groups) == len(set(groups)), groups  # one group object per name
        live = set().union(*(m.subscribers() for _, m in self.handles))
        live_groups = set().union(*(m.groups() for _, m in self.handles))
        held = set().union(*(m.subscribers() for _, m in self.snapshots))
        held_groups = set().union(*(m.groups() for _, m in self.snapshots))
        assert live | held <= objs, (live | held) - objs
        assert live_groups | held_groups <= set(groups)
        if not self.snapshots:
            assert objs == live, (objs, live)
            assert set(groups) == live_groups, (groups, live_groups)


class AMQPGroups(GroupsModel):
    dialect = AMQP


class MQTTGroups(GroupsModel):
    dialect = MQTT


class NATSGroups(GroupsModel):
    dialect = NATS


def _case(machine: type[RuleBasedStateMachine]) -> Any:
    case = machine.TestCase
    case.settings = SETTINGS
    return case


TestAMQPGroups = _case(AMQPGroups)
TestMQTTGroups = _case(MQTTGroups)
TestNATSGroups = _case(NATSGroups)
