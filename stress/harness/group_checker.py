"""Checks of a recorded ``groups`` run (:mod:`stress.harness.groups`).

Time is the shared clock's stamps.  Every operation took effect at some moment
strictly between its two stamps; a *cell* ``k`` is the stretch of real time
between stamp events ``k`` and ``k + 1`` (all stamps are distinct with the
atomics clock), and every question below is a question about cells.

From the churners' logs (each slot -- a (group, filter, member) membership --
is written by one thread only, so its history is exact) every slot gets:

* its *possible* cells: a join at ``(ji, jr)`` followed by a leave at
  ``(li, lr)`` makes the member possibly present in cells ``ji .. lr - 1``;
* its *definite* cells: ``jr .. li - 1`` (after the join surely took effect,
  before the leave surely did).

Anchors joined before the run and never leave: definite from their join on.
A route called at ``(a, b)`` read the trie in one of the cells ``a .. b - 1``.

own-writes
    Each join/leave returned what its thread's replay says: True when it
    changed the membership, False for the repeats (a join of a member, a
    leave of a non-member); none raised.
deliveries
    A delivery through member m of group g is valid only if m was possibly a
    member of g, on a filter matching the topic, in some cell of the call.
    So no delivery through a non-member, and no group that does not match.
missing
    A group with a member slot on a matching filter that was *not* delivered
    is valid only if the group was possibly empty (on the matching filters)
    in some cell of the call: the union of its matching slots' definite
    cells does not cover the call.  An anchored group never is: it must
    always be delivered.
once
    Each message reaches each group at most once: ``route`` returns the
    ordinary subscribers, then at most one member per group (members map
    back to distinct matching groups); ``route_by_group`` names each group
    once by construction.
ordinary
    The ordinary part equals what ``trie.lookup`` answers (the ordinary
    subscribers never change during the run, and lookup before and after the
    run must agree with the design's expectation from PyTrie).
instant
    The whole route is one state: one cell of the call fits every group's
    observation at once (the chosen members possibly present, the missing
    groups possibly empty).  Stronger than ``deliveries`` + ``missing``, which
    judge each group on its own.
snapshots
    Every snapshot is one state the trie passed through (one cell of the
    ``snapshot()`` call fits every slot: present ones possibly present, absent
    ones possibly absent), its ordinary pairs are exactly the stable ones, its
    ``len`` agrees with its pairs, and a route on it delivers exactly its own
    groups: every group with a member (in the snapshot) on a matching filter,
    through such a member, once, and the ordinary subscribers as expected --
    right after it was taken, and again when its router takes the next one.
final
    After the run the trie holds exactly the replayed memberships plus the
    anchors and ordinary pairs; ``len``, ``stats()['shared_subscriptions']``
    agree; ``check_invariants(strict=True)`` passes.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable
from itertools import product
from typing import Any

from cstrie.groups import Shared
from stress.harness.checker import CheckReport
from stress.harness.groups import (
    BASE,
    JOIN,
    ORD_BAD,
    PLAIN,
    RAW,
    GroupHistory,
    GroupSpace,
    RoundRobinResult,
)

__all__ = ["GROUP_CHECKS", "check_groups", "check_round_robin"]

GROUP_CHECKS = {
    "own-writes": "every join/leave returned what its thread's replay says",
    "deliveries": "every delivery is through a possible member of its group on a matching filter",
    "missing": "a matching group is missed only when it was possibly empty (anchored: never)",
    "once": "each message reaches each group at most once",
    "ordinary": "the ordinary deliveries are exactly what lookup says",
    "instant": "one instant in the call explains every group of a route at once",
    "snapshots": "snapshots are states the trie passed through; their routes match them",
    "final": "final memberships match the replay; len, stats and invariants agree",
}

INF = 1 << 62

Intervals = tuple[list[int], list[int]]  # sorted disjoint (starts, ends), inclusive cells


def _merge(spans: list[tuple[int, int]]) -> Intervals:
    """Sorted, merged (adjacent cells join: they are continuous time)."""
    starts: list[int] = []
    ends: list[int] = []
    for s, e in sorted(spans):
        if s > e:
            continue
        if starts and s <= ends[-1] + 1:
            if e > ends[-1]:
                ends[-1] = e
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


def _overlaps(iv: Intervals, lo: int, hi: int) -> bool:
    starts, ends = iv
    i = bisect_right(starts, hi) - 1
    return i >= 0 and ends[i] >= lo


def _covers(iv: Intervals, lo: int, hi: int) -> bool:
    starts, ends = iv
    i = bisect_right(starts, lo) - 1
    return i >= 0 and ends[i] >= hi


def _clip(iv: Intervals, lo: int, hi: int) -> list[tuple[int, int]]:
    starts, ends = iv
    i = max(0, bisect_right(starts, lo) - 1)
    out = []
    while i < len(starts) and starts[i] <= hi:
        s, e = max(starts[i], lo), min(ends[i], hi)
        if s <= e:
            out.append((s, e))
        i += 1
    return out


def _gaps(iv: Intervals, lo: int, hi: int) -> list[tuple[int, int]]:
    """The cells of lo..hi not in iv."""
    out = []
    cur = lo
    for s, e in _clip(iv, lo, hi):
        if s > cur:
            out.append((cur, s - 1))
        cur = e + 1
    if cur <= hi:
        out.append((cur, hi))
    return out


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s <= e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def check_groups(
    h: GroupHistory, progress: Callable[[str, int, int], None] | None = None
) -> CheckReport:
    return _GroupChecker(h, progress or (lambda stage, done, total: None)).run()


class _GroupChecker:
    def __init__(self, h: GroupHistory, progress: Callable[[str, int, int], None]) -> None:
        self.h = h
        self.sp: GroupSpace = h.space
        self.progress = progress
        self.report = CheckReport(counts=dict.fromkeys(GROUP_CHECKS, 0))
        # perf_counter_ns stamps may tie: widen what is possible, narrow what is sure
        self.slack = 0 if h.clock == "atomics" else 1
        sp = self.sp
        self.possible: list[list[tuple[int, int]]] = [[] for _ in sp.slots]
        self.definite: list[list[tuple[int, int]]] = [[] for _ in sp.slots]
        self.final_state = [False] * len(sp.slots)
        self.slot_ops: list[list[tuple[int, int, int, int, int]]] = [[] for _ in sp.slots]
        #: per slot: the cells of its joins and leaves (inv .. resp - 1)
        self.windows: list[list[tuple[int, int]]] = [[] for _ in sp.slots]
        self.stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ run
    def run(self) -> CheckReport:
        t0 = time.perf_counter()
        self._replay()
        t1 = time.perf_counter()
        self._index()
        self._check_routes()
        t2 = time.perf_counter()
        self._check_snapshots()
        self._check_final()
        t3 = time.perf_counter()
        h = self.h
        self.stats.update(
            {
                "messages": h.n_messages,
                "routed_by_group": sum(sum(1 for f in r.flags if not f & PLAIN) for r in h.routers),
                "churn_ops": h.n_churn_ops,
                "snapshots": len(h.snapshots),
                "routers": len(h.routers),
                "churners": len(h.churners),
                "record_seconds": round(h.seconds, 3),
                "seconds": {
                    "replay": round(t1 - t0, 3),
                    "routes": round(t2 - t1, 3),
                    "snapshots_final": round(t3 - t2, 3),
                    "total": round(t3 - t0, 3),
                },
            }
        )
        self.report.stats = self.stats
        return self.report

    def add(self, check: str, message: str) -> None:
        self.report.add(check, message)

    # --------------------------------------------------------------- replay
    def _replay(self) -> None:
        sp, slack = self.sp, self.slack
        for si, i0, i1 in self.h.anchors:
            self.possible[si].append((i0 - slack, INF))
            self.definite[si].append((i1 + slack, INF))
            self.final_state[si] = True
        for log in self.h.churners:
            since: dict[int, tuple[int, int]] = {}
            for pos in range(len(log.slot)):
                s, kind, i0, i1, r = (
                    log.slot[pos],
                    log.kind[pos],
                    log.inv[pos],
                    log.resp[pos],
                    log.result[pos],
                )
                self.slot_ops[s].append((kind, i0, i1, r, log.thread))
                self.windows[s].append((i0, i1 - 1))
                was = s in since
                join = kind == JOIN
                want = 1 if join != was else 0
                where = "initial " if pos < log.n_initial else ""
                what = "join" if join else "leave"
                if r != want:
                    got = {1: "True", 0: "False"}.get(r, f"raised {log.errors.get(pos)}")
                    self.add(
                        "own-writes",
                        f"churner thread {log.thread} {where}op #{pos} {what} "
                        f"{sp.slot_text(s)} [t={i0}..{i1}] -> {got}, but its own replay says "
                        f"the member was {'in' if was else 'out'}: must return "
                        f"{'True' if want else 'False'}",
                    )
                if join and not was:
                    since[s] = (i0, i1)
                elif not join and was:
                    ji, jr = since.pop(s)
                    self.possible[s].append((ji - slack, i1 - 1 + slack))
                    self.definite[s].append((jr + slack, i0 - 1 - slack))
            for s, (ji, jr) in since.items():
                self.possible[s].append((ji - slack, INF))
                self.definite[s].append((jr + slack, INF))
                self.final_state[s] = True

    def _index(self) -> None:
        """Per (group, topic): the union of the definite cells of its matching
        slots; per (group, member, topic): the union of their possible cells."""
        sp = self.sp
        self.cover: dict[tuple[int, int], Intervals] = {}
        self.busy: dict[tuple[int, int], Intervals] = {}
        self.maybe: dict[tuple[int, int, int], Intervals] = {}
        self.anchored: set[tuple[int, int]] = set()
        self.member_groups: dict[tuple[int, int], list[int]] = {}  # (member, topic) -> groups
        self.pos_iv = [_merge(p) for p in self.possible]
        self.def_iv = [_merge(d) for d in self.definite]
        for ti in range(len(sp.topics)):
            match = sp.matching[ti]
            for g in sp.groups_of_topic[ti]:
                slots = [s for s, (gg, f, _, _) in enumerate(sp.slots) if gg == g and f in match]
                self.cover[(g, ti)] = _merge([x for s in slots for x in self.definite[s]])
                self.busy[(g, ti)] = _merge([x for s in slots for x in self.windows[s]])
                if any(sp.slots[s][3] for s in slots):
                    self.anchored.add((g, ti))
                for m in {sp.slots[s][2] for s in slots}:
                    self.maybe[(g, m, ti)] = _merge(
                        [x for s in slots if sp.slots[s][2] == m for x in self.possible[s]]
                    )
                    self.member_groups.setdefault((m, ti), []).append(g)

    # --------------------------------------------------------------- routes
    def _describe(self, t: int, i: int, ti: int, a: int, b: int, how: str) -> str:
        return f"router thread {t} message #{i} {how}({self.sp.topics[ti]!r}) [t={a}..{b}]"

    def _check_routes(self) -> None:
        sp = self.sp
        width = sp.n_groups
        busy = total_obs = anchored_deliveries = plain = 0
        n_done = 0
        n_all = self.h.n_messages
        for log in self.h.routers:
            topics, flags, inv, resp, picks = log.topic, log.flags, log.inv, log.resp, log.picks
            for i in range(len(topics)):
                n_done += 1
                if n_done & 0xFFFF == 0:
                    self.progress("check: routes", n_done, n_all)
                ti, f, a, b = topics[i], flags[i], inv[i], resp[i]
                how = "route" if f & PLAIN else "route_by_group"
                if i in log.errors:
                    self.add(
                        "ordinary",
                        f"{self._describe(log.thread, i, ti, a, b, how)} raised {log.errors[i]}",
                    )
                    continue
                lo, hi = a - self.slack, b - 1 + self.slack
                if f & RAW:
                    self._raw(log.thread, i, ti, a, b, f, log.raw.get(i))
                    if not f & ORD_BAD:
                        continue  # the group part could not be read
                row = picks[i * width : (i + 1) * width]
                if f & PLAIN:
                    plain += 1
                    got = [m for m in row if m >= 0]
                    deliveries = self._assign(log.thread, i, ti, a, b, got, lo, hi)
                    if deliveries is None:
                        continue
                else:
                    deliveries = {g: m for g, m in enumerate(row) if m >= 0}
                problems, n_obs, n_busy = self._judge(ti, lo, hi, deliveries)
                total_obs += n_obs
                busy += n_busy
                for g in deliveries:
                    anchored_deliveries += (g, ti) in self.anchored
                for check, text in problems:
                    if self.report.keeps(check):
                        shown = {sp.groups[g]: sp.name(BASE + m) for g, m in deliveries.items()}
                        self.add(
                            check,
                            f"{self._describe(log.thread, i, ti, a, b, how)} delivered the "
                            f"groups {shown}: {text}",
                        )
                    else:
                        self.report.counts[check] += 1
        self.stats.update(
            {
                "routed_plain": plain,
                "group_observations": total_obs,
                "group_observations_contended": busy,
                "anchored_deliveries": anchored_deliveries,
            }
        )

    def _raw(self, t: int, i: int, ti: int, a: int, b: int, f: int, r: Any) -> None:
        how = "route" if f & PLAIN else "route_by_group"
        want = [self.sp.name(x) for x in self.sp.expected[ti]]
        if f & ORD_BAD:
            self.add(
                "ordinary",
                f"{self._describe(t, i, ti, a, b, how)} -> {r!r}: the ordinary part is not "
                f"{want} (what lookup says; ordinary pairs never change in this run)",
            )
        else:
            self.add(
                "deliveries",
                f"{self._describe(t, i, ti, a, b, how)} -> {r!r}: not ordinary subscribers "
                "then members of this run's groups (more deliveries than groups, or objects "
                "that are no member)",
            )

    def _assign(
        self, t: int, i: int, ti: int, a: int, b: int, got: list[int], lo: int, hi: int
    ) -> dict[int, int] | None:
        """The groups of a ``route`` list's members: the assignment (member ->
        distinct matching group it may belong to) with the fewest problems."""
        sp = self.sp
        options = [self.member_groups.get((m, ti), []) for m in got]
        for m, opts in zip(got, options, strict=True):
            if not opts:
                self.add(
                    "deliveries",
                    f"{self._describe(t, i, ti, a, b, 'route')} delivered "
                    f"{sp.name(BASE + m)}, which is no member of any group on a filter "
                    f"matching the topic",
                )
                return None
        best: tuple[int, dict[int, int]] | None = None
        for choice in product(*options):
            if len(set(choice)) != len(choice):
                continue
            deliveries = dict(zip(choice, got, strict=True))
            if len(options) == 1 or all(len(o) == 1 for o in options):
                return deliveries
            n = len(self._judge(ti, lo, hi, deliveries)[0])
            if best is None or n < best[0]:
                best = (n, deliveries)
        if best is None:
            self.add(
                "once",
                f"{self._describe(t, i, ti, a, b, 'route')} delivered "
                f"{[sp.name(BASE + m) for m in got]}: no way to give each to a distinct "
                "group (a group delivered twice)",
            )
            return None
        return best[1]

    def _judge(
        self, ti: int, lo: int, hi: int, deliveries: dict[int, int]
    ) -> tuple[list[tuple[str, str]], int, int]:
        """Problems of one route's group part; observations, and how many of
        them overlapped a join or leave of the group on a matching filter."""
        sp = self.sp
        problems: list[tuple[str, str]] = []
        restricted: list[tuple[str, list[tuple[int, int]]]] = []
        n_obs = n_busy = 0
        for g, m in deliveries.items():
            n_obs += 1
            n_busy += _overlaps(self.busy[(g, ti)], lo, hi) if (g, ti) in self.busy else 0
            iv = self.maybe.get((g, m, ti))
            if iv is None:
                if g not in sp.groups_of_topic[ti]:
                    problems.append(
                        ("deliveries", f"group {sp.groups[g]!r} has no filter matching the topic")
                    )
                else:
                    problems.append(
                        (
                            "deliveries",
                            f"{sp.name(BASE + m)} is never a member of {sp.groups[g]!r} on a "
                            "filter matching the topic",
                        )
                    )
                continue
            if not _overlaps(iv, lo, hi):
                problems.append(
                    (
                        "deliveries",
                        f"{sp.name(BASE + m)} was surely not a member of {sp.groups[g]!r} on a "
                        f"matching filter during the call; {self._slot_story(g, m, ti, lo, hi)}",
                    )
                )
                continue
            if not _covers(iv, lo, hi):
                restricted.append((f"{sp.groups[g]} via {sp.labels[m]}", _clip(iv, lo, hi)))
        for g in sp.groups_of_topic[ti]:
            if g in deliveries:
                continue
            n_obs += 1
            n_busy += _overlaps(self.busy[(g, ti)], lo, hi)
            cov = self.cover[(g, ti)]
            gaps = _gaps(cov, lo, hi)
            if not gaps:
                anchored = (g, ti) in self.anchored
                problems.append(
                    (
                        "missing",
                        f"{'the anchored' if anchored else 'group'} {sp.groups[g]!r} was not "
                        f"delivered, but it surely had a member on a matching filter during "
                        f"the whole call; {self._group_story(g, ti, lo, hi)}",
                    )
                )
                continue
            if len(gaps) != 1 or gaps[0] != (lo, hi):
                restricted.append((f"{sp.groups[g]} empty", gaps))
        if len(restricted) >= 2 and not problems:
            cells = restricted[0][1]
            for _, allowed in restricted[1:]:
                cells = _intersect(cells, allowed)
                if not cells:
                    break
            if not cells:
                parts = "; ".join(f"{what}: cells {spans}" for what, spans in restricted)
                problems.append(
                    ("instant", f"no single instant fits every group at once ({parts})")
                )
        return problems, n_obs, n_busy

    def _slot_story(self, g: int, m: int, ti: int, lo: int, hi: int) -> str:
        sp = self.sp
        out = []
        for s, (gg, f, mm, _) in enumerate(sp.slots):
            if gg == g and mm == m and f in sp.matching[ti]:
                out.append(f"{sp.filters[f]!r}: {self._ops_near(s, lo, hi)}")
        return "; ".join(out)

    def _group_story(self, g: int, ti: int, lo: int, hi: int) -> str:
        sp = self.sp
        out = []
        for s, (gg, f, m, anchor) in enumerate(sp.slots):
            if gg == g and f in sp.matching[ti] and _covers(self.def_iv[s], lo, hi):
                what = "anchor since before the run" if anchor else self._ops_near(s, lo, hi)
                out.append(f"{sp.labels[m]!r} on {sp.filters[f]!r} ({what})")
        return "held by " + ", ".join(out[:4])

    def _ops_near(self, s: int, lo: int, hi: int) -> str:
        ops = self.slot_ops[s]
        before = [o for o in ops if o[2] <= lo]
        around = before[-1:] + [o for o in ops if o[2] > lo and o[1] <= hi + 1]
        after = [o for o in ops if o[1] > hi + 1][:1]
        shown = [
            f"thread {th} {'join' if k == JOIN else 'leave'} [t={i0}..{i1}] -> {bool(r)}"
            for k, i0, i1, r, th in (around + after)
        ]
        return ", ".join(shown) if shown else "no join or leave"

    # ------------------------------------------------------------ snapshots
    def _slot_of(self) -> dict[tuple[str, str, int], int]:
        sp = self.sp
        return {
            (sp.filters[f], sp.groups[g], BASE + m): s for s, (g, f, m, _) in enumerate(sp.slots)
        }

    def _check_snapshots(self) -> None:
        sp = self.sp
        slot_of = self._slot_of()
        ordinary = sorted((sp.filters[f], BASE + s) for f, s in sp.ordinary)
        routes = 0
        for snap in self.h.snapshots:
            where = (
                f"router thread {snap.thread} snapshot after message #{snap.message} "
                f"[t={snap.inv}..{snap.resp}]"
            )
            if snap.error:
                self.add("snapshots", f"{where} raised {snap.error}")
                continue
            present: set[int] = set()
            plain_pairs = []
            for key, sub in snap.pairs:
                if isinstance(key, Shared):
                    s = slot_of.get((key.pattern, key.group, sub))
                    if s is None:
                        self.add("snapshots", f"{where} holds {key!r} {sp.name(sub)}: no slot")
                    elif s in present:
                        self.add("snapshots", f"{where} holds {key!r} {sp.name(sub)} twice")
                    else:
                        present.add(s)
                else:
                    plain_pairs.append((key, sub))
            if sorted(plain_pairs) != ordinary:
                self.add(
                    "snapshots",
                    f"{where}: ordinary pairs {sorted(plain_pairs)} are not the stable {ordinary}",
                )
            if snap.length != len(snap.pairs):
                self.add(
                    "snapshots",
                    f"{where}: len(snapshot) is {snap.length} but iterating it gave "
                    f"{len(snap.pairs)}",
                )
            lo, hi = snap.inv - self.slack, snap.resp - 1 + self.slack
            cells = [(lo, hi)]
            for s in range(len(sp.slots)):
                if s in present:
                    allowed = _clip(self.pos_iv[s], lo, hi)
                else:
                    allowed = _gaps(self.def_iv[s], lo, hi)
                cells = _intersect(cells, allowed)
                if not allowed or not cells:
                    state = "holds" if s in present else "lacks"
                    self.add(
                        "snapshots",
                        f"{where} {state} {sp.slot_text(s)}: not a state the trie passed "
                        f"through during the call (with the other slots: "
                        f"{'alone' if not allowed else 'mixes states'}); "
                        f"{self._ops_near(s, lo, hi)}",
                    )
                    break
            routes += len(snap.routes)
            for ti, (by_group, plain) in enumerate(snap.routes):
                self._check_snapshot_route(where, ti, present, by_group, plain)
            if isinstance(snap.late_routes, str):
                self.add("snapshots", f"{where}, routed again later: {snap.late_routes}")
            elif snap.late_routes is not None:
                routes += len(snap.late_routes)
                for ti, (by_group, plain) in enumerate(snap.late_routes):
                    self._check_snapshot_route(
                        f"{where}, routed again later", ti, present, by_group, plain
                    )
        self.stats["snapshot_routes"] = routes

    def _check_snapshot_route(
        self, where: str, ti: int, present: set[int], by_group: Any, plain: Any
    ) -> None:
        sp = self.sp
        topic = sp.topics[ti]
        members: dict[int, set[int]] = {}
        for s in present:
            g, f, m, _ = sp.slots[s]
            if f in sp.matching[ti]:
                members.setdefault(g, set()).add(BASE + m)
        want = {sp.groups[g]: ms for g, ms in members.items()}
        try:
            ordinary, chosen = by_group
            ok = sorted(ordinary) == sp.expected[ti]
            ok = ok and set(chosen) == set(want)
            ok = ok and all(chosen[g] in want[g] for g in chosen)
        except Exception:
            ok = False
        if not ok:
            shown = {g: sorted(sp.name(x) for x in ms) for g, ms in want.items()}
            self.add(
                "snapshots",
                f"{where}: snapshot.route_by_group({topic!r}) -> {by_group!r}, but its own "
                f"members on matching filters are {shown} and the ordinary subscribers "
                f"{sp.expected[ti]}",
            )
        k = len(sp.expected[ti])
        try:
            ok = sorted(plain[:k]) == sp.expected[ti] and len(plain) == k + len(want)
            rest = list(plain[k:])
            ok = ok and self._matchable(rest, want)
        except Exception:
            ok = False
        if not ok:
            self.add(
                "snapshots",
                f"{where}: snapshot.route({topic!r}) -> {plain!r}: not the ordinary "
                f"subscribers then one member of each of {sorted(want)}",
            )

    @staticmethod
    def _matchable(rest: list[Any], want: dict[str, set[int]]) -> bool:
        groups = list(want)
        options = [[g for g in groups if m in want[g]] for m in rest]
        return any(len(set(c)) == len(c) for c in product(*options)) if rest else not want

    # ---------------------------------------------------------------- final
    def _check_final(self) -> None:
        h, sp = self.h, self.sp
        where = "after the run"
        if h.invariant_error:
            self.add("final", f"{where}: check_invariants(strict=True): {h.invariant_error}")
        slot_of = self._slot_of()
        got: set[int] = set()
        plain = []
        for key, sub in h.final_pairs:
            if isinstance(key, Shared):
                s = slot_of.get((key.pattern, key.group, sub))
                if s is None or s in got:
                    self.add("final", f"{where}: unexpected membership {key!r} {sp.name(sub)}")
                else:
                    got.add(s)
            else:
                plain.append((key, sub))
        want = {s for s, on in enumerate(self.final_state) if on}
        for s in sorted(want - got):
            self.add("final", f"{where}: {sp.slot_text(s)} is missing (the replay ends in)")
        for s in sorted(got - want):
            self.add("final", f"{where}: {sp.slot_text(s)} is there (the replay ends out)")
        ordinary = sorted((sp.filters[f], BASE + s) for f, s in sp.ordinary)
        if sorted(plain) != ordinary:
            self.add("final", f"{where}: ordinary pairs {sorted(plain)}, not {ordinary}")
        if h.final_length != len(h.final_pairs):
            self.add("final", f"{where}: len(trie) {h.final_length} != {len(h.final_pairs)} pairs")
        shared = h.final_stats.get("shared_subscriptions")
        if shared != len(got):
            self.add(
                "final",
                f"{where}: stats()['shared_subscriptions'] is {shared}, iteration shows "
                f"{len(got)} memberships",
            )
        for ti, topic in enumerate(sp.topics):
            for when, rows in (("before", h.lookup_before), ("after", h.lookup_after)):
                if sorted(rows[ti]) != sp.expected[ti]:
                    self.add(
                        "ordinary",
                        f"trie.lookup({topic!r}) {when} the run -> {rows[ti]!r}, not "
                        f"{sp.expected[ti]} (the design's ordinary pairs, matched by PyTrie)",
                    )


def check_round_robin(rr: RoundRobinResult, max_imbalance: float) -> list[str]:
    """Problems of the round-robin phase: the floor on the round-robin groups'
    imbalance, every message reaching every group once, the counter."""
    out = []
    if rr.bad_messages:
        out.append(
            f"{rr.bad_messages} message(s) did not reach every group exactly once, e.g. "
            f"{rr.examples}"
        )
    for g, policy in rr.policies.items():
        if policy != "round-robin":
            continue
        if rr.imbalance[g] > max_imbalance:
            out.append(
                f"round-robin group {g!r}: imbalance {100 * rr.imbalance[g]:.3f}% > "
                f"{100 * max_imbalance:g}% over {rr.messages:,} messages: {rr.counts[g]}"
            )
        c = rr.counters.get(g)
        if c is not None and c != rr.messages:
            out.append(
                f"round-robin group {g!r}: its counter says {c:,} picks for {rr.messages:,} "
                "messages (one pick per message expected: nothing was retried)"
            )
    return out
