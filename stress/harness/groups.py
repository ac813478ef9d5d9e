"""The ``groups`` scenario: share groups (MQTT 5 shared subscriptions, NATS
queue groups) routed while their members join and leave.

``python -m stress.harness --scenario groups`` (see :mod:`stress.harness.cli`)
runs, for each thread count n, ``n - k`` *routers* and ``k`` *churners*
(``--churners``, default n // 2) on one trie, then a separate round-robin
phase.  The checks are in :mod:`stress.harness.group_checker`.

The space (:func:`build_space`)
-------------------------------
A fixed, small design written in generic words (``+`` one level, ``#`` many)
and turned into the dialect's syntax; which filter matches which topic is
decided by :class:`cstrie_lab.pytrie.PyTrie` (pure Python, not the engine)::

    F0 g/+/temp   F1 g/a/#   F2 g/+/+/alarm   F3 g/#   F4 g/a/temp

Five groups, each member an int ``BASE + i`` (one object per label):

* ``anchored`` (round-robin): anchors A1, A2 on F0 that never leave, plus
  churned a1..a3 on F0 -- every message matching F0 must reach it;
* ``span`` (round-robin): spread over the overlapping F0 and F1 (``g/a/temp``
  matches both): anchor S0 on F1, churned s1..s4, s2 and s3 on both filters --
  one delivery per message however many of its filters match, chosen in the
  union;
* ``flaky`` (sticky): churned only, on F2 -- often empty;
* ``wide`` (random): churned only, 8 members on F3 (more than an S-node keeps
  inline);
* ``twin`` (round-robin): churned only, on F1 and F3, t1 on both.

``dual`` is a churned member of both ``flaky`` and ``twin`` (a member of two
groups: one delivery per group that picks it).  Ordinary subscribers never
change during the run: O1 on F3, O2 on F0, O3 on F2, O4 on F1, and A1 (an
anchor of ``anchored``) on F4 and s1 (a churned member of ``span``) on F3,
both ordinary and members.

Churn slots (group, filter, member) are dealt round-robin to the churners,
group by group, so every churned group has members on several threads, and
it can become empty and filled again while routes run.

The run (:func:`record_groups`)
-------------------------------
The main thread subscribes the ordinary pairs and joins the anchors, each
stamped.  Every churner joins a seeded half of its slots, then (released by a
barrier with the routers) toggles seeded random slots of its own -- join if
absent, leave if present; one operation in 20 repeats the last state instead
(a join of a member, a leave of a non-member: both must return False) --
until the routers are done.  A join or leave is written three ways in turn:
``subscribe(f, m, group=g)``, ``subscribe(Shared(f, g), m)`` and, in MQTT,
``subscribe("$share/g/f", m)``.  Every operation is stamped before and after
by the shared clock (:mod:`stress.harness.clock`).

Once every churner has made its first 64 joins/leaves (so that routes and
churn overlap even when the scheduler starts the threads late), each router
routes its share of ``--messages`` over seeded topics: three in
four with ``trie.route_by_group`` (the group of each delivery is known), one
in four with ``trie.route`` (the list form: ordinary subscribers first, then
one member per group -- the checker maps members back to groups); one in
eight passes a key (an int) for the sticky group.  The ordinary part is
compared with the expected list in the router (after the second stamp);
group picks are kept as member indices per group, a few bytes per message.
Every ``--snapshot-every``-th message the router also takes a snapshot, reads
its pairs and routes every topic on it; and routes every topic again on the
snapshot it took the time before (its groups must still be its own, however
the live trie changed since).

The round-robin phase (:func:`run_round_robin`)
-----------------------------------------------
A fresh trie with fixed membership: ``rr`` (5 members on F0), ``rr-span``
(the same 4 members on F1 and F3, so ``g/a/temp`` chooses in the union of two
filters and ``g/b/temp`` on one) and, for comparison only, ``rr-random``
(5 members on F0, random policy).  ``--rr-threads`` threads route
``--rr-messages`` messages in all with ``trie.route``; each member's count is
compared with the mean: imbalance = max |count - mean| / mean.
"""

from __future__ import annotations

import random
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cstrie.dialect import Dialect, resolve_dialect
from cstrie.groups import Shared
from cstrie_lab.pytrie import PyTrie
from stress.harness.clock import Clock
from stress.harness.progress import Counter, Progress

__all__ = [
    "BASE",
    "GroupHistory",
    "GroupSpace",
    "RoundRobinResult",
    "RouterLog",
    "SnapshotRecord",
    "build_space",
    "record_groups",
    "run_round_robin",
]

BASE = 2_000_000

#: generic filters: "+" one level, "#" many levels
FILTERS: dict[str, tuple[str, ...]] = {
    "F0": ("g", "+", "temp"),
    "F1": ("g", "a", "#"),
    "F2": ("g", "+", "+", "alarm"),
    "F3": ("g", "#"),
    "F4": ("g", "a", "temp"),
}
TOPICS: tuple[tuple[str, ...], ...] = (
    ("g", "a", "temp"),  # F0 F1 F3 F4: anchored, span (both filters), wide, twin
    ("g", "b", "temp"),  # F0 F3
    ("g", "a", "x", "alarm"),  # F1 F2 F3: dual may come from flaky and twin
    ("g", "b", "x", "alarm"),  # F2 F3
    ("g", "c"),  # F3
    ("g", "a"),  # F3, and F1 where "#" matches the parent level (MQTT, AMQP)
    ("g", "a", "x"),  # F1 F3
    ("g", "b", "y", "z", "alarm"),  # F3
    ("other", "x"),  # nothing
)
#: (name, policy, [(filter, member label, anchor)])
GROUPS: tuple[tuple[str, str, tuple[tuple[str, str, bool], ...]], ...] = (
    (
        "anchored",
        "round-robin",
        (
            ("F0", "A1", True),
            ("F0", "A2", True),
            ("F0", "a1", False),
            ("F0", "a2", False),
            ("F0", "a3", False),
        ),
    ),
    (
        "span",
        "round-robin",
        (
            ("F1", "S0", True),
            ("F0", "s1", False),
            ("F0", "s2", False),
            ("F1", "s2", False),
            ("F0", "s3", False),
            ("F1", "s3", False),
            ("F1", "s4", False),
        ),
    ),
    ("flaky", "sticky", (("F2", "f1", False), ("F2", "f2", False), ("F2", "dual", False))),
    ("wide", "random", tuple(("F3", f"w{i}", False) for i in range(8))),
    (
        "twin",
        "round-robin",
        (("F1", "t1", False), ("F3", "t1", False), ("F3", "t2", False), ("F1", "dual", False)),
    ),
)
#: stable ordinary (filter, subscriber label) pairs
ORDINARY: tuple[tuple[str, str], ...] = (
    ("F3", "O1"),
    ("F0", "O2"),
    ("F2", "O3"),
    ("F1", "O4"),
    ("F4", "A1"),
    ("F3", "s1"),
)

#: one router message in this many goes through ``trie.route`` (the rest route_by_group)
PLAIN_EVERY = 4
#: one message in this many passes a key
KEY_EVERY = 8
#: one churn operation in this many repeats the current state (must return False)
NOOP_EVERY = 20
#: the round-robin phase: (group, policy, [(filter, member label)]); rr-random: no floor
RR_GROUPS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("rr", "round-robin", tuple(("F0", f"r{i}") for i in range(5))),
    (
        "rr-span",
        "round-robin",
        tuple((f, f"q{i}") for i in range(4) for f in ("F1", "F3")),
    ),
    ("rr-random", "random", tuple(("F0", f"x{i}") for i in range(5))),
)
RR_TOPICS = (("g", "a", "temp"), ("g", "b", "temp"))

# Router message flags.
PLAIN = 1  # routed with trie.route (else route_by_group)
ORD_BAD = 2  # the ordinary part differed from the expected list
RAW = 4  # the result is kept in RouterLog.raw (unexpected shape or ordinary part)

# Churn op kinds.
JOIN, LEAVE = 0, 1


def _to_dialect(d: Dialect, words: tuple[str, ...]) -> str:
    out = []
    for w in words:
        if w == "+":
            assert d.single is not None
            out.append(d.single)
        elif w == "#":
            assert d.multi is not None
            out.append(d.multi)
        else:
            out.append(w)
    return d.separator.join(out)


@dataclass
class GroupSpace:
    """The design above in one dialect, with who matches what."""

    dialect: Dialect
    filters: dict[str, str]  # key -> filter text
    topics: list[str]
    groups: list[str]  # group names; index = column of a router's picks
    policies: list[str]
    labels: list[str]  # member / subscriber labels; object = BASE + index
    #: (group index, filter key, member index, anchor) per membership slot
    slots: list[tuple[int, str, int, bool]]
    ordinary: list[tuple[str, int]]  # (filter key, subscriber index)
    #: per topic: the filter keys matching it (from PyTrie)
    matching: list[frozenset[str]]
    #: per topic: the expected ordinary subscribers, sorted (objects)
    expected: list[list[int]]
    #: per topic: the groups with a slot on a matching filter
    groups_of_topic: list[list[int]]
    #: churn slot indices per churner
    churn_slots: list[list[int]] = field(default_factory=list)

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    def member(self, label: str) -> int:
        return BASE + self.labels.index(label)

    def name(self, obj: Any) -> str:
        """``'s2' (2000007)`` for a member object."""
        if isinstance(obj, int) and 0 <= obj - BASE < len(self.labels):
            return f"{self.labels[obj - BASE]!r} ({obj})"
        return repr(obj)

    def slot_text(self, s: int) -> str:
        g, f, m, anchor = self.slots[s]
        return (
            f"{'anchor ' if anchor else ''}{self.labels[m]!r} in {self.groups[g]!r} on "
            f"{self.filters[f]!r}"
        )


def build_space(dialect: str | Dialect, churners: int) -> GroupSpace:
    d = resolve_dialect(dialect)
    if d.single is None or d.multi is None:
        raise ValueError(f"the groups scenario needs both wildcards; {d.name} lacks one")
    filters = {k: _to_dialect(d, w) for k, w in FILTERS.items()}
    topics = [_to_dialect(d, w) for w in TOPICS]
    for f in filters.values():
        d.split_pattern(f)
    for t in topics:
        d.split_topic(t)
    labels: list[str] = []

    def idx(label: str) -> int:
        if label not in labels:
            labels.append(label)
        return labels.index(label)

    groups, policies = [], []
    slots: list[tuple[int, str, int, bool]] = []
    for gi, (name, policy, members) in enumerate(GROUPS):
        groups.append(name)
        policies.append(policy)
        for fk, label, anchor in members:
            slots.append((gi, fk, idx(label), anchor))
    ordinary = [(fk, idx(label)) for fk, label in ORDINARY]
    ref = PyTrie(d)
    for k, f in filters.items():
        ref.subscribe(f, k)
    matching = [frozenset(str(k) for k in ref.lookup(t)) for t in topics]
    expected = [
        sorted({BASE + s for fk, s in ordinary if fk in matching[ti]}) for ti in range(len(topics))
    ]
    groups_of_topic = [
        sorted({g for g, fk, _, _ in slots if fk in matching[ti]}) for ti in range(len(topics))
    ]
    churn = [[] for _ in range(max(1, churners))]  # type: list[list[int]]
    k = 0
    for s, (_, _, _, anchor) in enumerate(slots):
        if not anchor:
            churn[k % len(churn)].append(s)
            k += 1
    return GroupSpace(
        d,
        filters,
        topics,
        groups,
        policies,
        labels,
        slots,
        ordinary,
        matching,
        expected,
        groups_of_topic,
        churn,
    )


# ------------------------------------------------------------------ records
@dataclass
class RouterLog:
    """One router's messages (parallel arrays; picks has n_groups columns)."""

    thread: int
    topic: array[int] = field(default_factory=lambda: array("B"))
    flags: array[int] = field(default_factory=lambda: array("B"))
    inv: array[int] = field(default_factory=lambda: array("q"))
    resp: array[int] = field(default_factory=lambda: array("q"))
    #: route_by_group: member index per group column (-1 none); route: the
    #: member indices of the group part in order, then -1
    picks: array[int] = field(default_factory=lambda: array("h"))
    #: message -> the raw result, for the unexpected ones (RAW flag)
    raw: dict[int, Any] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)


@dataclass
class SnapshotRecord:
    """A router's snapshot: its interval, its pairs, and routes made on it."""

    thread: int
    message: int  # the router's message count when it was taken
    inv: int
    resp: int
    pairs: list[tuple[Any, Any]]
    length: int
    #: per topic index: (route_by_group result, route result)
    routes: list[tuple[Any, Any]]
    error: str | None = None
    #: the same routes made on the snapshot again when the router took its next
    #: one (the live trie churned on meanwhile; groups emptied and came back),
    #: or the error text
    late_routes: list[tuple[Any, Any]] | str | None = None


@dataclass
class ChurnLog:
    """One churner's operations (parallel arrays)."""

    thread: int
    slot: array[int] = field(default_factory=lambda: array("H"))
    kind: array[int] = field(default_factory=lambda: array("B"))
    inv: array[int] = field(default_factory=lambda: array("q"))
    resp: array[int] = field(default_factory=lambda: array("q"))
    #: 1 True, 0 False, -1 raised (text in errors)
    result: array[int] = field(default_factory=lambda: array("b"))
    n_initial: int = 0
    errors: dict[int, str] = field(default_factory=dict)


@dataclass
class GroupHistory:
    space: GroupSpace
    clock: str
    #: (slot, inv, resp) of the anchors' joins, made before the run
    anchors: list[tuple[int, int, int]]
    routers: list[RouterLog]
    churners: list[ChurnLog]
    snapshots: list[SnapshotRecord]
    final_pairs: list[tuple[Any, Any]]
    final_length: int
    final_stats: dict[str, int]
    invariant_error: str | None
    #: ordinary subscribers per topic as trie.lookup gave them before and after the run
    lookup_before: list[list[Any]]
    lookup_after: list[list[Any]]
    seconds: float = 0.0

    @property
    def n_messages(self) -> int:
        return sum(len(r.topic) for r in self.routers)

    @property
    def n_churn_ops(self) -> int:
        return sum(len(c.slot) - c.n_initial for c in self.churners)


# --------------------------------------------------------------------- run
def _join_call(trie: Any, d: Dialect, f: str, g: str, m: int, how: int, join: bool) -> bool:
    fn = trie.subscribe if join else trie.unsubscribe
    if how == 0:
        return bool(fn(f, m, group=g))
    if how == 1 or d.share_prefix is None:
        return bool(fn(Shared(f, g), m))
    sep = d.separator
    return bool(fn(f"{d.share_prefix}{sep}{g}{sep}{f}", m))


def record_groups(
    space: GroupSpace,
    routers: int,
    messages: int,
    seed: int,
    clock: Clock,
    progress: Progress,
    label: str,
    snapshot_every: int = 0,
    timeout: float = 600.0,
    make_trie: Callable[[Dialect], Any] | None = None,
) -> GroupHistory:
    """One recorded run: ``routers`` routers sharing ``messages`` messages,
    ``len(space.churn_slots)`` churners until the routers are done.
    ``make_trie(dialect)`` (default :class:`cstrie.Trie`) lets the tests run
    deliberately broken tries through the same checks."""
    from cstrie import Trie
    from stress.harness.runner import HangError

    d = space.dialect
    trie = (make_trie or Trie)(d)
    for gi, policy in enumerate(space.policies):
        trie.set_group_policy(space.groups[gi], policy)
    stamp = clock.stamper()
    for fk, s in space.ordinary:
        trie.subscribe(space.filters[fk], BASE + s)
    anchors = []
    for si, (gi, fk, m, anchor) in enumerate(space.slots):
        if anchor:
            i0 = stamp()
            ok = trie.subscribe(space.filters[fk], BASE + m, group=space.groups[gi])
            i1 = stamp()
            if not ok:
                raise RuntimeError(f"joining anchor {space.slot_text(si)} returned False")
            anchors.append((si, i0, i1))
    n_topics = len(space.topics)
    lookup_before = [trie.lookup(t) for t in space.topics]

    n_churn = len(space.churn_slots)
    n = routers + n_churn
    barrier = threading.Barrier(n + 1)
    stop = threading.Event()
    churning = [threading.Event() for _ in range(n_churn)]
    errors: list[BaseException] = []
    counters = [Counter() for _ in range(routers)]
    rlogs = [RouterLog(t) for t in range(routers)]
    clogs = [ChurnLog(routers + c) for c in range(n_churn)]
    snaps: list[list[SnapshotRecord]] = [[] for _ in range(routers)]
    per_router = [
        messages // routers + (1 if t < messages % routers else 0) for t in range(routers)
    ]
    width = space.n_groups
    gcol = {g: i for i, g in enumerate(space.groups)}

    def router(t: int) -> None:
        rng = random.Random(f"cstrie-stress/groups/router/{seed}/{t}")
        topics = [space.topics[i].encode().decode() for i in range(n_topics)]
        expected = [list(e) for e in space.expected]
        n_ord = [len(e) for e in expected]
        count = per_router[t]
        seq = array("B", (rng.randrange(n_topics) for _ in range(count)))
        log = rlogs[t]
        log.topic = seq
        log.flags = array("B", bytes(count))
        log.inv = array("q", bytes(8 * count))
        log.resp = array("q", bytes(8 * count))
        picks = array("h", [-1]) * (count * width)
        log.picks = picks
        flags, inv, resp, raw = log.flags, log.inv, log.resp, log.raw
        my_stamp = clock.stamper()
        route, by_group = trie.route, trie.route_by_group
        counter = counters[t]
        snap_every = snapshot_every
        held: Any = None
        barrier.wait()
        for ev in churning:  # routes start once every churner is churning
            while not ev.wait(0.01):
                if stop.is_set():
                    return
        for i in range(count):
            ti = seq[i]
            topic = topics[ti]
            plain = i % PLAIN_EVERY == PLAIN_EVERY - 1
            keyed = i % KEY_EVERY == 5
            try:
                if plain:
                    i0 = my_stamp()
                    r = route(topic, i) if keyed else route(topic)
                    i1 = my_stamp()
                else:
                    i0 = my_stamp()
                    r = by_group(topic, i) if keyed else by_group(topic)
                    i1 = my_stamp()
            except Exception as exc:
                i1 = my_stamp()
                inv[i], resp[i] = i0, i1
                log.errors[i] = repr(exc)
                continue
            inv[i], resp[i] = i0, i1
            base = i * width
            try:
                if plain:
                    k = n_ord[ti]
                    ordinary = r[:k]
                    rest = r[k:]
                    f = PLAIN
                    if len(rest) > width:
                        raise ValueError("more deliveries than groups")
                    for j, m in enumerate(rest):
                        mi = m - BASE
                        if not 0 <= mi < 32767:
                            raise ValueError("not a member")
                        picks[base + j] = mi
                else:
                    ordinary, chosen = r
                    f = 0
                    for g, m in chosen.items():
                        mi = m - BASE
                        if not 0 <= mi < 32767:
                            raise ValueError("not a member")
                        picks[base + gcol[g]] = mi
                ordinary.sort()
                if ordinary != expected[ti]:
                    f |= ORD_BAD | RAW
                    raw[i] = r
                flags[i] = f
            except Exception:
                flags[i] = (PLAIN if plain else 0) | RAW
                raw[i] = r
            if snap_every and i % snap_every == snap_every - 1:
                if held is not None:  # the previous snapshot again, after much churn
                    snaps[t][-1].late_routes = _routes(held, topics)
                held, rec = _snapshot(trie, t, i, my_stamp, topics)
                snaps[t].append(rec)
            if i & 511 == 511:
                counter.done = i + 1
        counter.done = count

    def churner(c: int) -> None:
        rng = random.Random(f"cstrie-stress/groups/churner/{seed}/{c}")
        mine = space.churn_slots[c]
        parts = [
            (
                space.filters[space.slots[s][1]].encode().decode(),
                space.groups[space.slots[s][0]].encode().decode(),
                BASE + space.slots[s][2],
            )
            for s in mine
        ]
        log = clogs[c]
        my_stamp = clock.stamper()
        state = [False] * len(mine)
        slot_a, kind_a, inv_a, resp_a, res_a = log.slot, log.kind, log.inv, log.resp, log.result

        def op(j: int, join: bool, how: int) -> None:
            f, g, m = parts[j]
            i0 = my_stamp()
            try:
                r = 1 if _join_call(trie, d, f, g, m, how, join) else 0
            except Exception as exc:
                r = -1
                log.errors[len(slot_a)] = repr(exc)
            i1 = my_stamp()
            slot_a.append(mine[j])
            kind_a.append(JOIN if join else LEAVE)
            inv_a.append(i0)
            resp_a.append(i1)
            res_a.append(r)
            state[j] = join

        for j in range(len(mine)):
            if rng.random() < 0.5:
                op(j, True, j % 3)
        log.n_initial = len(slot_a)
        k = 0
        barrier.wait()
        while not stop.is_set():
            for _ in range(64):
                j = rng.randrange(len(mine))
                join = not state[j]
                if k % NOOP_EVERY == NOOP_EVERY - 1:
                    join = state[j]  # a repeat: must return False
                op(j, join, k % 3)
                k += 1
            churning[c].set()

    def wrap(fn: Callable[[int], None], i: int) -> None:
        try:
            fn(i)
        except BaseException as exc:
            errors.append(exc)
            stop.set()
            barrier.abort()

    threads = [
        threading.Thread(target=wrap, args=(router, t), name=f"groups-router-{t}")
        for t in range(routers)
    ] + [
        threading.Thread(target=wrap, args=(churner, c), name=f"groups-churner-{c}")
        for c in range(n_churn)
    ]
    for th in threads:
        th.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    progress.watch(label, counters, messages, None)
    deadline = time.monotonic() + timeout
    try:
        for th in threads[:routers]:
            th.join(max(0.0, deadline - time.monotonic()))
        stop.set()
        for th in threads[routers:]:
            th.join(max(0.0, deadline - time.monotonic()))
    finally:
        progress.done()
    seconds = time.perf_counter() - t0
    stuck = [th.name for th in threads if th.is_alive()]
    if stuck:
        raise HangError(f"{', '.join(stuck)} still running {timeout:g} s after the start")
    if errors:
        raise RuntimeError(f"a worker thread failed: {errors[0]!r}") from errors[0]
    invariant_error = None
    try:
        trie.check_invariants(strict=True)
    except AssertionError as exc:
        invariant_error = str(exc)
    return GroupHistory(
        space=space,
        clock=clock.kind,
        anchors=anchors,
        routers=rlogs,
        churners=clogs,
        snapshots=[s for per in snaps for s in per],
        final_pairs=list(trie),
        final_length=len(trie),
        final_stats=trie.stats(),
        invariant_error=invariant_error,
        lookup_before=lookup_before,
        lookup_after=[trie.lookup(t) for t in space.topics],
        seconds=seconds,
    )


def _routes(snap: Any, topics: list[str]) -> list[tuple[Any, Any]] | str:
    try:
        return [(snap.route_by_group(topic), snap.route(topic)) for topic in topics]
    except Exception as exc:
        return f"routing on the snapshot: {exc!r}"


def _snapshot(
    trie: Any, t: int, i: int, stamp: Callable[[], int], topics: list[str]
) -> tuple[Any, SnapshotRecord]:
    """(the snapshot, its record)."""
    i0 = stamp()
    try:
        snap = trie.snapshot()
    except Exception as exc:
        i1 = stamp()
        return None, SnapshotRecord(t, i, i0, i1, [], 0, [], error=repr(exc))
    i1 = stamp()
    try:
        pairs = list(snap)
        length = len(snap)
    except Exception as exc:
        err = f"reading the snapshot: {exc!r}"
        return None, SnapshotRecord(t, i, i0, i1, [], 0, [], error=err)
    routes = _routes(snap, topics)
    if isinstance(routes, str):
        return None, SnapshotRecord(t, i, i0, i1, pairs, length, [], error=routes)
    return snap, SnapshotRecord(t, i, i0, i1, pairs, length, routes)


# ------------------------------------------------------------- round-robin
@dataclass
class RoundRobinResult:
    messages: int
    threads: int
    seconds: float
    #: group -> policy, member label -> deliveries
    policies: dict[str, str]
    counts: dict[str, dict[str, int]]
    #: group -> max |count - mean| / mean
    imbalance: dict[str, float]
    #: group -> picks the group's round-robin counter says it made (None: not readable)
    counters: dict[str, int | None]
    #: messages that did not reach every group exactly once / ordinary deliveries seen
    bad_messages: int
    examples: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "threads": self.threads,
            "seconds": round(self.seconds, 3),
            "policies": self.policies,
            "counts": self.counts,
            "imbalance": {g: round(v, 6) for g, v in self.imbalance.items()},
            "counters": self.counters,
            "bad_messages": self.bad_messages,
            "examples": self.examples,
        }


def run_round_robin(
    dialect: str | Dialect,
    messages: int,
    threads: int,
    seed: int,
    progress: Progress,
    timeout: float = 600.0,
) -> RoundRobinResult:
    """The fixed-membership phase (see the module docstring)."""
    from cstrie import Trie
    from stress.harness.runner import HangError

    d = resolve_dialect(dialect)
    filters = {k: _to_dialect(d, w) for k, w in FILTERS.items()}
    topics = [_to_dialect(d, w) for w in RR_TOPICS]
    trie = Trie(d)
    labels: list[str] = []
    owner: list[str] = []  # member index -> group
    for g, policy, members in RR_GROUPS:
        trie.set_group_policy(g, policy)
        for fk, label in members:
            if label not in labels:
                labels.append(label)
                owner.append(g)
            trie.subscribe(filters[fk], BASE + labels.index(label), group=g)
    n_groups = len(RR_GROUPS)
    per = [messages // threads + (1 if t < messages % threads else 0) for t in range(threads)]
    counts = [[0] * len(labels) for _ in range(threads)]
    bad = [0] * threads
    examples: list[list[str]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []
    counters = [Counter() for _ in range(threads)]

    def worker(t: int) -> None:
        rng = random.Random(f"cstrie-stress/groups/rr/{seed}/{t}")
        mine = [x.encode().decode() for x in topics]
        seq = [mine[rng.randrange(len(mine))] for _ in range(per[t])]
        route = trie.route
        c = counts[t]
        counter = counters[t]
        barrier.wait()
        for i, topic in enumerate(seq):
            r = route(topic)
            if len(r) != n_groups:
                bad[t] += 1
                if len(examples[t]) < 5:
                    examples[t].append(f"route({topic!r}) -> {r!r}")
                continue
            seen = set()
            for m in r:
                mi = m - BASE
                c[mi] += 1
                seen.add(owner[mi])
            if len(seen) != n_groups:
                bad[t] += 1
                if len(examples[t]) < 5:
                    examples[t].append(f"route({topic!r}) -> {r!r}: a group twice")
            if i & 4095 == 4095:
                counter.done = i + 1
        counter.done = per[t]

    def wrap(t: int) -> None:
        try:
            worker(t)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    ths = [threading.Thread(target=wrap, args=(t,), name=f"rr-router-{t}") for t in range(threads)]
    for th in ths:
        th.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    progress.watch("round-robin phase", counters, messages, None)
    try:
        deadline = time.monotonic() + timeout
        for th in ths:
            th.join(max(0.0, deadline - time.monotonic()))
    finally:
        progress.done()
    seconds = time.perf_counter() - t0
    if any(th.is_alive() for th in ths):
        raise HangError(f"round-robin routers still running {timeout:g} s after the start")
    if errors:
        raise RuntimeError(f"a round-robin router failed: {errors[0]!r}") from errors[0]
    total = [sum(c[i] for c in counts) for i in range(len(labels))]
    out_counts: dict[str, dict[str, int]] = {}
    imbalance: dict[str, float] = {}
    group_counters: dict[str, int | None] = {}
    for g, _, _ in RR_GROUPS:
        members = {labels[i]: total[i] for i in range(len(labels)) if owner[i] == g}
        out_counts[g] = members
        mean = sum(members.values()) / len(members)
        imbalance[g] = max(abs(v - mean) for v in members.values()) / mean if mean else 1.0
        found = trie._reg.groups.find(g)  # the group's own counter (private, read-only)
        group_counters[g] = int(found.counter) if found is not None else None
    return RoundRobinResult(
        messages=sum(per),
        threads=threads,
        seconds=seconds,
        policies={g: p for g, p, _ in RR_GROUPS},
        counts=out_counts,
        imbalance=imbalance,
        counters=group_counters,
        bad_messages=sum(bad),
        examples=[e for ex in examples for e in ex][:5],
    )
