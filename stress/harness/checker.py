"""Checks of a recorded history (see :mod:`stress.harness.history`).

``check_history`` runs every check and returns a :class:`CheckReport`; each
violation names the operations that prove it.

results
    Every operation returned normally and sensibly: lookups (and every row of a
    ``lookup_many``) return each subscriber once, and only subscribers having a
    candidate pattern that matches the topic (anything else -- e.g. a subscriber
    that was never added under a matching pattern -- is explained by *no* state
    of the trie); a ``lookup_many`` returns one row per topic.
(a) own-writes
    A thread sees its own completed updates.  Owned subscribers are written by
    one thread only, so that thread knows their exact state: every lookup it
    makes (and every row of its ``lookup_many`` calls: one violation per row)
    must show exactly the owned subscribers whose state matches, and every
    subscribe/unsubscribe it makes must return what its own replay predicts.
(b) snapshots
    Every snapshot is a state the trie passed through.  For each writer, the
    snapshot restricted to that writer's owned subscribers must equal the state
    after some prefix of its updates, the prefix must respect real time
    (include every update that responded before the snapshot was invoked,
    exclude every update invoked after it responded), and the prefixes chosen
    for all writers must fit one instant ``L`` inside the snapshot's interval
    (``inv(last included) < L < resp(first excluded)`` for every writer) -- a
    snapshot mixing an old state of one writer with a newer state of another
    is caught.  ``len(snapshot)`` and ``snapshot.lookup`` must agree with the
    snapshot's own contents.
(c) linearizability
    Per subscriber (its set of candidate patterns is a small set object; with
    one candidate that is exactly per-(pattern, subscriber)): the history of
    subscribe/unsubscribe return values (True = was absent / was present),
    lookup observations (present iff some matching candidate is set), snapshot
    contents and the final contents must have a linearization respecting real
    time.  The search is the "just-in-time" linearizability algorithm: sweep the
    operations in stamp order keeping the set of reachable configurations
    (model state, which pending operations are already linearized); at each
    response keep only configurations where that operation took effect.  With
    at most one pending operation per thread the set stays small (memoized as
    a set), so the cost is linear in the history.  Every row of a
    ``lookup_many`` is, per subscriber, an observation like a lookup's, over
    the whole call's interval.
(d) rows
    Every row of a ``lookup_many`` is one state of the trie: like a snapshot
    in (b), for each writer the row restricted to that writer's owned
    subscribers (of interest to the row's topic) must equal whether they match
    after some prefix of its updates allowed by real time, and one instant
    inside the call must fit every writer's prefix.  So a subscriber that held
    a matching pattern for the whole call must be in the row, one that held
    none must not, and the in-flight updates must be seen or not seen as of
    one instant.  (Rows need not agree with each other: ``lookup_many`` is
    documented as one ``lookup`` per topic.)
final
    ``check_invariants(strict=True)`` passes, ``len`` agrees with iteration,
    every pair is in the key space, and every writer's owned subscribers end
    exactly as its replay says.
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from stress.harness.history import History, OpError, SnapshotView
from stress.harness.workload import (
    BASE,
    LOOKUP,
    LOOKUP_MANY,
    LOOKUP_TRIE,
    SNAPSHOT,
    SUBSCRIBE,
    UNSUBSCRIBE,
)

__all__ = ["CHECKS", "CheckReport", "Violation", "check_history"]

CHECKS = {
    "results": "lookup/update results well-formed (no errors, duplicates, impossible subscribers)",
    "own-writes": "(a) every thread sees its own completed updates",
    "snapshots": "(b) every snapshot is a state the trie passed through",
    "linearizability": "(c) per-subscriber linearizability of subscribe/unsubscribe/lookup",
    "rows": "(d) every lookup_many row is one state of the trie (one instant in the call)",
    "final": "final contents match every writer's replay; check_invariants(strict=True)",
}

#: How many violation messages are kept per check (all are counted).
MAX_MESSAGES = 25

# Operation codes inside the per-subscriber checker.
_SUB, _UNSUB, _OBS, _EQ = 0, 1, 2, 3


@dataclass
class Violation:
    check: str
    message: str


@dataclass
class CheckReport:
    violations: list[Violation] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def keeps(self, check: str) -> bool:
        """Whether the next violation of ``check`` keeps its message (build
        costly messages only then)."""
        return self.counts[check] < MAX_MESSAGES

    def add(self, check: str, message: str) -> None:
        self.counts[check] += 1
        if self.counts[check] <= MAX_MESSAGES:
            self.violations.append(Violation(check, message))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "violations": self.total,
            "by_check": dict(self.counts),
            "messages": [{"check": v.check, "message": v.message} for v in self.violations],
            "stats": self.stats,
        }


Progress = Callable[[str, int, int], None]


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def check_history(h: History, progress: Progress | None = None) -> CheckReport:
    """Run every check on ``h``; see the module docstring."""
    return _Checker(h, progress or _no_progress).run()


class _Checker:
    def __init__(self, h: History, progress: Progress) -> None:
        self.h = h
        self.ks = h.keyspace
        self.progress = progress
        self.report = CheckReport()
        n_subs = len(self.ks.cands)
        self.n_subs = n_subs
        self.obj_ops: list[list[tuple[Any, ...]]] = [[] for _ in range(n_subs)]
        self.own_state = [0] * n_subs
        # per writer: [(pos, s, xor_bits)] of its updates on owned subscribers
        self.updates: list[list[tuple[int, int, int]]] = [[] for _ in h.threads]
        # (inv, resp, thread, pos, masks) per snapshot
        self.snapshots: list[tuple[int, int, int, int, dict[int, int]]] = []
        # (inv, resp, thread, pos, row, topic) per row of a lookup_many
        self.rows: list[tuple[int, int, int, int, int, int]] = []
        self.largest_row = 0
        self.interest = [dict(i) for i in self.ks.interest]
        # per topic: the subscriber objects a lookup of it may return
        self.valid = [{BASE + s for s, _ in i} for i in self.ks.interest]

    # ------------------------------------------------------------------ run
    def run(self) -> CheckReport:
        t0 = time.perf_counter()
        ks = self.ks
        for th in self.h.threads:
            for pos in range(len(th)):
                kind, s = th.kind[pos], th.arg[pos]
                w = ks.owner[s] if kind in (SUBSCRIBE, UNSUBSCRIBE) else -1
                if w >= 0 and w != th.thread:
                    raise ValueError(
                        f"bad history: {self.h.describe(th.thread, pos)} writes {ks.sub_name(s)}"
                    )
        t_replay = time.perf_counter()
        for i, th in enumerate(self.h.threads):
            self.progress("check: replay threads (a)", i, len(self.h.threads))
            self._replay_thread(th)
        t_snap = time.perf_counter()
        self._check_snapshots()
        t_final = time.perf_counter()
        self._check_final()
        t_rows = time.perf_counter()
        self._check_rows()
        t_lin = time.perf_counter()
        n_events = self._check_objects()
        t_end = time.perf_counter()
        self.report.stats = {
            "operations": self.h.n_ops,
            "threads": len(self.h.threads),
            "snapshots": len(self.snapshots),
            "lookup_many_rows": len(self.rows),
            "lookup_many_largest_row": self.largest_row,
            "subscribers": self.n_subs,
            "keys": ks.n_keys,
            "linearizability_events": n_events,
            "seconds": {
                "replay_and_own_writes": round(t_snap - t_replay, 3),
                "snapshots": round(t_final - t_snap, 3),
                "final": round(t_rows - t_final, 3),
                "rows": round(t_lin - t_rows, 3),
                "linearizability": round(t_end - t_lin, 3),
                "total": round(t_end - t0, 3),
            },
        }
        return self.report

    # ------------------------------------------------------- (a) + results
    def _replay_thread(self, th: Any) -> None:
        h, ks, rep = self.h, self.ks, self.report
        t = th.thread
        owner = ks.owner
        state = self.own_state
        obj_ops = self.obj_ops
        updates = self.updates[t]
        last_own: dict[tuple[int, int], int] = {}
        own_cache: dict[int, list[tuple[int, int]]] = {}
        other_cache: dict[int, list[tuple[int, int]]] = {}
        kinds, args, bits, invs, resps, results = (
            th.kind,
            th.arg,
            th.bit,
            th.inv,
            th.resp,
            th.result,
        )
        valid = self.valid
        for pos in range(len(kinds)):
            kind = kinds[pos]
            r = results[pos]
            if kind == LOOKUP or kind == LOOKUP_TRIE:
                if type(r) is not list:
                    self._bad_result(t, pos, r, "a non-list")
                    continue
                topic = args[pos]
                seen = set(r)
                if len(seen) != len(r) or not seen <= valid[topic]:
                    self._bad_lookup(t, pos, r, seen)
                own = own_cache.get(topic)
                if own is None:
                    inter_list = ks.interest[topic]
                    own = own_cache[topic] = [(s, m) for s, m in inter_list if owner[s] == t]
                    other_cache[topic] = [(s, m) for s, m in inter_list if owner[s] != t]
                for s, mask in own:
                    if (not state[s] & mask) == (BASE + s in seen):
                        expect = bool(state[s] & mask)
                        self._own_lookup_violation(t, pos, s, mask, expect, last_own)
                inv = invs[pos]
                resp = resps[pos]
                for s, mask in other_cache[topic]:
                    obj_ops[s].append((inv, resp, _OBS, mask, BASE + s in seen, t, pos))
            elif kind == SUBSCRIBE or kind == UNSUBSCRIBE:
                if type(r) is not bool:
                    self._bad_result(t, pos, r, "a non-bool")
                    continue
                s = args[pos]
                m = 1 << bits[pos]
                sub = kind == SUBSCRIBE
                obj_ops[s].append((invs[pos], resps[pos], _SUB if sub else _UNSUB, m, r, t, pos))
                if owner[s] == t:
                    old = state[s]
                    expected = not (old & m) if sub else bool(old & m)
                    if r != expected:
                        prev = last_own.get((s, m))
                        before = (
                            f"its own {h.describe(t, prev)} left the pair "
                            f"{'present' if old & m else 'absent'}"
                            if prev is not None
                            else "the pair was never written before, so it was absent"
                        )
                        rep.add(
                            "own-writes",
                            f"{h.describe(t, pos)} is wrong for {ks.sub_name(s)}: {before}, "
                            f"so {'subscribe' if sub else 'unsubscribe'} must return {expected}",
                        )
                    new = old | m if sub else old & ~m
                    state[s] = new
                    updates.append((pos, s, old ^ new))
                    last_own[(s, m)] = pos
            elif kind == SNAPSHOT:
                if isinstance(r, OpError):
                    rep.add(
                        "snapshots",
                        f"{h.describe(t, pos)}: taking or reading the snapshot raised (a "
                        "KeyError here means the snapshot holds a subscriber id the registry "
                        "already freed)",
                    )
                else:
                    self._record_snapshot(t, pos, r)
            elif kind == LOOKUP_MANY:
                self._replay_many(t, pos, r, last_own, own_cache, other_cache)
            else:
                rep.add("results", f"{h.describe(t, pos)}: unknown operation kind")

    def _bad_result(self, t: int, pos: int, r: Any, what: str) -> None:
        h = self.h
        if isinstance(r, OpError):
            self.report.add("results", f"{h.describe(t, pos)}: the operation raised")
        else:
            self.report.add("results", f"{h.describe(t, pos)}: returned {what}")

    def _bad_lookup(
        self,
        t: int,
        pos: int,
        r: list[Any],
        seen: set[Any],
        topic: int | None = None,
        row: int | None = None,
    ) -> None:
        h, ks, rep = self.h, self.ks, self.report
        if topic is None:
            topic = h.threads[t].arg[pos]
        what = h.describe(t, pos, row=row)
        if len(seen) != len(r):
            counts: dict[Any, int] = {}
            for x in r:
                counts[x] = counts.get(x, 0) + 1
            dups = sorted((x for x, c in counts.items() if c > 1), key=repr)
            if len(dups) <= 12:
                rep.add("results", f"{what}: returned {dups} more than once")
            else:
                rep.add(
                    "results",
                    f"{what}: returned {len(dups)} subscribers more than once "
                    f"({len(r) - len(seen)} extra entries), e.g. {dups[:12]}",
                )
        for x in sorted(seen - self.valid[topic], key=repr):
            s = x - BASE if type(x) is int else -1
            if 0 <= s < self.n_subs:
                why = (
                    f"none of its patterns {ks.describe_state(s, -1)} matches "
                    f"{ks.topics[topic]!r}, so no state of the trie explains it"
                )
            else:
                why = "it is not a subscriber this run ever added"
            rep.add("results", f"{what} saw {x!r}: {why}")

    def _replay_many(
        self,
        t: int,
        pos: int,
        r: Any,
        last_own: dict[tuple[int, int], int],
        own_cache: dict[int, list[tuple[int, int]]],
        other_cache: dict[int, list[tuple[int, int]]],
    ) -> None:
        """One ``lookup_many``: each row is checked like a lookup (results,
        (a), observations for (c)) and queued for the one-state check (d)."""
        h, ks = self.h, self.ks
        th = h.threads[t]
        arg = th.arg[pos]
        if not 0 <= arg < len(ks.batches):
            self.report.add("results", f"{h.describe(t, pos)}: unknown lookup_many batch")
            return
        batch = ks.batches[arg]
        if type(r) is not list or len(r) != len(batch) or any(type(x) is not list for x in r):
            self._bad_result(t, pos, r, f"something else than {len(batch)} rows (lists)")
            return
        owner, state, valid = ks.owner, self.own_state, self.valid
        inv, resp = th.inv[pos], th.resp[pos]
        # Per subscriber, the distinct (mask, seen) observations of this call
        # and the first row making each: rows are separate lookups that may
        # linearize at different instants of the call, but equal observations
        # over the same interval are one (it keeps the search for (c) small).
        first: dict[int, tuple[int, bool, int]] = {}
        more: dict[int, dict[tuple[int, bool], int]] = {}
        for i, (topic, row) in enumerate(zip(batch, r, strict=True)):
            seen = set(row)
            if len(seen) != len(row) or not seen <= valid[topic]:
                self._bad_lookup(t, pos, row, seen, topic, i)
            self.largest_row = max(self.largest_row, len(row))
            own = own_cache.get(topic)
            if own is None:
                inter_list = ks.interest[topic]
                own = own_cache[topic] = [(s, m) for s, m in inter_list if owner[s] == t]
                other_cache[topic] = [(s, m) for s, m in inter_list if owner[s] != t]
            wrong = [s for s, m in own if (not state[s] & m) == (BASE + s in seen)]
            if wrong:
                self._own_row_violation(t, pos, i, topic, wrong, last_own)
            for s, m in other_cache[topic]:
                e = BASE + s in seen
                f = first.get(s)
                if f is None:
                    first[s] = (m, e, i)
                elif f[0] != m or f[1] != e:
                    d = more.setdefault(s, {})
                    if (m, e) not in d:
                        d[(m, e)] = i
            self.rows.append((inv, resp, t, pos, i, topic))
        obj_ops = self.obj_ops
        for s, (m, e, i) in first.items():
            obj_ops[s].append((inv, resp, _OBS, m, e, t, pos, i, 0))
        for s, d in more.items():
            for k, ((m, e), i) in enumerate(d.items(), 1):
                obj_ops[s].append((inv, resp, _OBS, m, e, t, pos, i, k))

    def _own_row_violation(
        self,
        t: int,
        pos: int,
        row: int,
        topic: int,
        wrong: list[int],
        last_own: dict[tuple[int, int], int],
    ) -> None:
        """One (a) violation for a row that gets some of the reader's own
        subscribers wrong, with the own updates behind the first few."""
        if not self.report.keeps("own-writes"):
            self.report.add("own-writes", "")
            return
        h, ks = self.h, self.ks
        mask = dict(ks.interest[topic])
        missed = [s for s in wrong if self.own_state[s] & mask[s]]
        extra = [s for s in wrong if not self.own_state[s] & mask[s]]
        parts = []
        for label, subs in (("missed", missed), ("saw", extra)):
            if not subs:
                continue
            examples = []
            for s in subs[:3]:
                lasts = sorted(
                    p
                    for b in range(len(ks.cands[s]))
                    if (p := last_own.get((s, 1 << b))) is not None
                )
                own = "; ".join(h.describe(t, p) for p in lasts) or "none (never written)"
                examples.append(
                    f"{BASE + s} holds {ks.describe_state(s, self.own_state[s])} after {own}"
                )
            more = f" and {len(subs) - 3} more" if len(subs) > 3 else ""
            parts.append(
                f"{label} {len(subs)} of its own subscribers: " + "; ".join(examples) + more
            )
        self.report.add(
            "own-writes",
            f"{h.describe(t, pos, row=row)} disagrees with its own completed updates on "
            f"{ks.topics[topic]!r}: " + ". It ".join(parts),
        )

    def _own_lookup_violation(
        self,
        t: int,
        pos: int,
        s: int,
        mask: int,
        expect: bool,
        last_own: dict[tuple[int, int], int],
    ) -> None:
        h, ks = self.h, self.ks
        state = self.own_state[s]
        lasts = sorted(
            p for b in range(len(ks.cands[s])) if (p := last_own.get((s, 1 << b))) is not None
        )
        topic = ks.topics[h.threads[t].arg[pos]]
        own = "; ".join(h.describe(t, p) for p in lasts) or "none (never written: absent)"
        self.report.add(
            "own-writes",
            f"{h.describe(t, pos)} {'missed' if expect else 'saw'} its own {ks.sub_name(s)}: "
            f"after its own completed updates the subscriber holds {ks.describe_state(s, state)}, "
            f"of which {ks.describe_state(s, state & mask) if expect else 'none'} match "
            f"{topic!r}; its last own updates of this subscriber: {own}",
        )

    def _pair_masks(self, pairs: Any, category: str, where: str) -> dict[int, int]:
        """Per subscriber, the bitmask of its keys among (pattern, subscriber)
        ``pairs`` (a snapshot's or the final trie's contents); a pair this run
        never subscribed, or one listed twice, is reported under ``category``."""
        ks, rep = self.ks, self.report
        masks: dict[int, int] = {}
        for pat, x in pairs:
            p = ks.pattern_index.get(pat, -1)
            s = x - BASE if type(x) is int else -1
            b = ks.key_bit.get((s, p))
            if b is None:
                rep.add(category, f"{where} holds the pair ({pat!r}, {x!r}), never subscribed")
                continue
            if masks.get(s, 0) >> b & 1:
                rep.add(category, f"{where} holds ({pat!r}, {x!r}) twice")
            masks[s] = masks.get(s, 0) | 1 << b
        return masks

    def _record_snapshot(self, t: int, pos: int, r: Any) -> None:
        h, ks, rep = self.h, self.ks, self.report
        th = h.threads[t]
        if not isinstance(r, SnapshotView):
            rep.add("results", f"{h.describe(t, pos)}: no snapshot contents recorded")
            return
        masks = self._pair_masks(r.pairs, "snapshots", h.describe(t, pos))
        if r.length != len(r.pairs):
            rep.add(
                "snapshots",
                f"{h.describe(t, pos)}: len(snapshot) is {r.length} but iterating it "
                f"gave {len(r.pairs)} pairs",
            )
        if r.lookup is not None:
            topic = th.arg[pos]
            want = {BASE + s for s, m in ks.interest[topic] if masks.get(s, 0) & m}
            got = set(r.lookup)
            if want != got or len(got) != len(r.lookup):
                rep.add(
                    "snapshots",
                    f"{h.describe(t, pos)}: snapshot.lookup({ks.topics[topic]!r}) returned "
                    f"{sorted(r.lookup, key=repr)} but the snapshot's own pairs give "
                    f"{sorted(want)}",
                )
        inv, resp = th.inv[pos], th.resp[pos]
        self.snapshots.append((inv, resp, t, pos, masks))
        obj_ops = self.obj_ops
        get = masks.get
        for s in range(self.n_subs):
            obj_ops[s].append((inv, resp, _EQ, get(s, 0), None, t, pos))

    # -------------------------------------------------------------- (b)
    def _check_snapshots(self) -> None:
        if not self.snapshots:
            return
        h, ks = self.h, self.ks
        n_snaps = len(self.snapshots)
        # Per snapshot, per writer: the allowed instants as closed intervals in
        # doubled stamps (open (a, b) -> [2a+1, 2b-1]).
        allowed: list[list[list[tuple[int, int]]]] = [[] for _ in range(n_snaps)]
        failed = [False] * n_snaps
        order_by_inv = sorted(range(n_snaps), key=lambda i: self.snapshots[i][0])
        big = 1 << 62
        # Distinct stamps: open intervals.  perf_counter_ns stamps may be equal
        # across threads, and equal means "may overlap": closed intervals.
        tie = 0 if h.clock == "perf_counter_ns" else 1
        for w, th in enumerate(h.threads):
            self.progress("check: snapshots (b)", w, len(h.threads))
            ups = self.updates[w]
            own = ks.own_subs[w] if w < len(ks.own_subs) else []
            up_inv = [th.inv[p] for p, _, _ in ups]
            up_resp = [th.resp[p] for p, _, _ in ups]
            cur: dict[int, int] = {}
            at = 0  # cur = state after the first `at` updates
            for si in order_by_inv:  # lo is monotone in inv (resps are increasing)
                s_inv, s_resp, _, _, masks = self.snapshots[si]
                lo = bisect_left(up_resp, s_inv)  # updates responded before: included
                hi = bisect_left(up_inv, s_resp)  # updates invoked before resp: may be
                hi = max(hi, lo)
                while at < lo:
                    _, s, x = ups[at]
                    if x:
                        cur[s] = cur.get(s, 0) ^ x
                    at += 1
                diff: dict[int, int] = {}
                for s in own:
                    x = masks.get(s, 0) ^ cur.get(s, 0)
                    if x:
                        diff[s] = x
                diff_lo = dict(diff)
                ivals: list[tuple[int, int]] = []
                for k in range(lo, hi + 1):
                    if not diff:
                        a = 2 * up_inv[k - 1] + tie if k > 0 else -big
                        b = 2 * up_resp[k] - tie if k < len(ups) else big
                        a = max(a, 2 * s_inv + tie)
                        b = min(b, 2 * s_resp - tie)
                        if a <= b:
                            ivals.append((a, b))
                    if k < hi:
                        _, s, x = ups[k]
                        if x:
                            y = diff.get(s, 0) ^ x
                            if y:
                                diff[s] = y
                            else:
                                del diff[s]
                if not ivals:
                    failed[si] = True
                    self._snapshot_violation(si, w, lo, hi, diff_lo, cur)
                allowed[si].append(ivals)
        for si in range(n_snaps):
            if failed[si]:
                continue
            per_writer = allowed[si]
            points = sorted({a for ivals in per_writer for a, _ in ivals})
            if not any(
                all(any(a <= p <= b for a, b in ivals) for ivals in per_writer) for p in points
            ):
                self._mixed_snapshot_violation(si, per_writer)

    def _snapshot_violation(
        self, si: int, w: int, lo: int, hi: int, diff: dict[int, int], cur: dict[int, int]
    ) -> None:
        h, ks = self.h, self.ks
        _, _, st, spos, masks = self.snapshots[si]
        ups = self.updates[w]
        start = f"after its update {h.describe(w, ups[lo - 1][0])}" if lo else "before any update"
        lines = []
        for s in sorted(diff)[:6]:
            lines.append(
                f"{BASE + s}: snapshot has {ks.describe_state(s, masks.get(s, 0))}, "
                f"replay has {ks.describe_state(s, cur.get(s, 0))}"
            )
        window = "; ".join(h.describe(w, ups[k][0]) for k in range(lo, min(hi, lo + 6)))
        self.report.add(
            "snapshots",
            f"{h.describe(st, spos)} is not a state the trie passed through: thread {w}'s "
            f"owned subscribers match no prefix of thread {w}'s updates allowed by real time "
            f"(between {hi - lo} update(s) of the window). Compared with thread {w}'s state "
            f"{start}: "
            + "; ".join(lines)
            + (f". Updates in the window: {window}" if window else ". No update was in flight"),
        )

    def _mixed_snapshot_violation(self, si: int, per_writer: list[list[tuple[int, int]]]) -> None:
        h = self.h
        _, _, st, spos, _ = self.snapshots[si]
        parts = []
        for w, ivals in enumerate(per_writer):
            spans = ", ".join(f"({(a - 1) // 2}, {(b + 1) // 2})" for a, b in ivals)
            parts.append(f"thread {w}'s part fits only instants in {spans}")
        self.report.add(
            "snapshots",
            f"{h.describe(st, spos)} mixes states: each writer's part is a real state but "
            "no single instant explains all of them (" + "; ".join(parts) + ")",
        )

    # ---------------------------------------------------------------- (d)
    def _check_rows(self) -> None:
        """One instant inside the call explains each lookup_many row (see (d))."""
        rows = self.rows
        if not rows:
            return
        h, ks = self.h, self.ks
        tie = 0 if h.clock == "perf_counter_ns" else 1  # as in _check_snapshots
        big = 1 << 62
        rows.sort(key=_first)  # by inv: each writer's lo is then monotone
        writers = []
        for w, th in enumerate(h.threads):
            ups = self.updates[w]
            writers.append(
                (w, ups, [th.inv[p] for p, _, _ in ups], [th.resp[p] for p, _, _ in ups])
            )
        curs: list[dict[int, int]] = [{} for _ in writers]
        ats = [0] * len(writers)
        mine_cache: dict[tuple[int, int], dict[int, int]] = {}
        owner = ks.owner
        for n, (inv, resp, t, pos, i, topic) in enumerate(rows):
            if n % 256 == 0:
                self.progress("check: lookup_many rows (d)", n, len(rows))
            seen = set(h.threads[t].result[pos][i])
            c_lo, c_hi = 2 * inv + tie, 2 * resp - tie
            per_writer: list[tuple[int, list[tuple[int, int]]]] = []
            for w, ups, up_inv, up_resp in writers:
                mine = mine_cache.get((w, topic))
                if mine is None:
                    mine = {s: m for s, m in ks.interest[topic] if owner[s] == w}
                    mine_cache[(w, topic)] = mine
                if not mine:
                    continue
                lo = bisect_left(up_resp, inv)  # responded before the call: included
                hi = max(lo, bisect_left(up_inv, resp))  # invoked before its end: may be
                cur = curs[w]
                at = ats[w]
                while at < lo:
                    _, s, x = ups[at]
                    if x:
                        cur[s] = cur.get(s, 0) ^ x
                    at += 1
                ats[w] = at
                diff = {s for s, m in mine.items() if bool(cur.get(s, 0) & m) != (BASE + s in seen)}
                diff_lo = set(diff)
                tmp: dict[int, int] = {}
                ivals: list[tuple[int, int]] = []
                for k in range(lo, hi + 1):
                    if not diff:
                        a = 2 * up_inv[k - 1] + tie if k > 0 else -big
                        b = 2 * up_resp[k] - tie if k < len(ups) else big
                        a, b = max(a, c_lo), min(b, c_hi)
                        if a <= b:
                            ivals.append((a, b))
                    if k < hi:
                        _, s, x = ups[k]
                        m = mine.get(s, 0)
                        if x & m:
                            st = tmp.get(s, cur.get(s, 0)) ^ x
                            tmp[s] = st
                            if bool(st & m) != (BASE + s in seen):
                                diff.add(s)
                            else:
                                diff.discard(s)
                if not ivals:
                    self._row_violation(rows[n], w, lo, hi, diff_lo, cur, mine, seen)
                    break
                per_writer.append((w, ivals))
            else:
                if len(per_writer) > 1:
                    points = sorted({a for _, ivals in per_writer for a, _ in ivals})
                    if not any(
                        all(any(a <= p <= b for a, b in ivals) for _, ivals in per_writer)
                        for p in points
                    ):
                        self._mixed_row_violation(rows[n], per_writer)

    def _row_violation(
        self,
        row: tuple[int, int, int, int, int, int],
        w: int,
        lo: int,
        hi: int,
        diff: set[int],
        cur: dict[int, int],
        mine: dict[int, int],
        seen: set[Any],
    ) -> None:
        """Writer w's part of a row fits no prefix ``lo..hi`` of its updates:
        name the subscribers and updates that prove it."""
        if not self.report.keeps("rows"):
            self.report.add("rows", "")
            return
        h, ks = self.h, self.ks
        _, _, t, pos, i, _ = row
        ups = self.updates[w]
        th = h.threads[w]
        result = h.threads[t].result[pos][i]
        # subscribers whose match of the row's topic changed during the call
        touched = set()
        for s in {ups[k][1] for k in range(lo, hi) if ups[k][2] & mine.get(ups[k][1], 0)}:
            st, m = cur.get(s, 0), mine[s]
            matches = {bool(st & m)}
            for k in range(lo, hi):
                if ups[k][1] == s:
                    st ^= ups[k][2]
                    matches.add(bool(st & m))
            if len(matches) > 1:
                touched.add(s)
        held = sorted(s for s in diff if s not in touched and cur.get(s, 0) & mine[s])
        never = sorted(s for s in diff if s not in touched and not cur.get(s, 0) & mine[s])

        def last_update(s: int) -> str:
            for k in range(lo - 1, -1, -1):
                if ups[k][1] == s and ups[k][2]:
                    return h.describe(w, ups[k][0])
            return f"thread {w}'s initial subscribes" if th.n_initial else "no update"

        def names(subs: list[int]) -> str:
            more = f" and {len(subs) - 12} more" if len(subs) > 12 else ""
            return f"{[BASE + s for s in subs[:12]]}{more}"

        parts = []
        if held:
            s0 = held[0]
            parts.append(
                f"{len(held)} missing that held a matching pattern for the whole call "
                f"{names(held)} (e.g. {BASE + s0} holds {ks.describe_state(s0, cur.get(s0, 0))} "
                f"since {last_update(s0)})"
            )
        if never:
            s0 = never[0]
            parts.append(
                f"{len(never)} present that held no matching pattern during the call "
                f"{names(never)} (e.g. {BASE + s0} holds {ks.describe_state(s0, cur.get(s0, 0))} "
                f"since {last_update(s0)})"
            )
        if not parts:
            parts.append(self._in_flight_proof(w, lo, hi, touched, cur, mine, seen))
        dups = len(result) - len(seen)
        self.report.add(
            "rows",
            f"{h.describe(t, pos, with_result=False, row=i)} -> {len(seen)} distinct subscribers"
            f"{f' ({dups} repeated entries)' if dups else ''} is not one state of the trie: "
            f"thread {w}'s subscribers in it fit no prefix of thread {w}'s updates allowed by "
            f"real time ({hi - lo} of them in flight during the call): " + "; ".join(parts),
        )

    def _in_flight_proof(
        self,
        w: int,
        lo: int,
        hi: int,
        touched: set[int],
        cur: dict[int, int],
        mine: dict[int, int],
        seen: set[Any],
    ) -> str:
        """Why no prefix fits when every mismatch is a subscriber with updates
        in flight: two of them that need the row's instant on either side of
        each other's update, if there are such two."""
        h, ups = self.h, self.updates[w]
        fits: dict[int, list[int]] = {}  # subscriber -> prefixes (k) it agrees with
        for s in sorted(touched):
            m, obs, st, ok = mine[s], BASE + s in seen, cur.get(s, 0), []
            for k in range(lo, hi + 1):
                if bool(st & m) == obs:
                    ok.append(k)
                if k < hi and ups[k][1] == s:
                    st ^= ups[k][2]
            fits[s] = ok

        def shown(s: int) -> str:
            return f"{BASE + s} ({'in' if BASE + s in seen else 'not in'} the row)"

        bad = [s for s, ok in fits.items() if not ok]
        if bad:
            return f"{shown(bad[0])} agrees with no state of it during the call"
        before = min(fits, key=lambda s: fits[s][-1])  # the row is before ups[kb]
        after = max(fits, key=lambda s: fits[s][0])  # the row is after ups[ka - 1]
        kb, ka = fits[before][-1], fits[after][0]
        if ka > kb:
            return (
                f"{shown(before)} puts the row before {h.describe(w, ups[kb][0])} took effect, "
                f"{shown(after)} puts it after {h.describe(w, ups[ka - 1][0])} took effect, "
                f"which thread {w} made later"
            )
        spans = "; ".join(
            f"{shown(s)} fits prefixes {ok[:8]}" for s, ok in list(fits.items())[:6] if ok
        )
        return f"no prefix {lo}..{hi} of thread {w}'s updates fits all of them: {spans}"

    def _mixed_row_violation(
        self,
        row: tuple[int, int, int, int, int, int],
        per_writer: list[tuple[int, list[tuple[int, int]]]],
    ) -> None:
        _, _, t, pos, i, _ = row
        parts = []
        for w, ivals in per_writer:
            spans = ", ".join(f"({(a - 1) // 2}, {(b + 1) // 2})" for a, b in ivals)
            parts.append(f"thread {w}'s part fits only instants in {spans}")
        self.report.add(
            "rows",
            f"{self.h.describe(t, pos, with_result=False, row=i)} mixes states: each writer's "
            "part is a real state but no single instant explains all of them ("
            + "; ".join(parts)
            + ")",
        )

    # --------------------------------------------------------------- final
    def _check_final(self) -> None:
        h, ks, rep = self.h, self.ks, self.report
        if h.invariant_error is not None:
            rep.add("final", f"check_invariants(strict=True) failed: {h.invariant_error}")
        if h.final_pairs is None:
            return
        masks = self._pair_masks(h.final_pairs, "final", "the final trie")
        if h.final_length is not None and h.final_length != len(h.final_pairs):
            rep.add(
                "final",
                f"len(trie) is {h.final_length} after the run but iterating it gave "
                f"{len(h.final_pairs)} pairs",
            )
        for s in range(self.n_subs):
            w = ks.owner[s]
            if w >= 0 and masks.get(s, 0) != self.own_state[s]:
                rep.add(
                    "final",
                    f"{ks.sub_name(s)} ends as {ks.describe_state(s, masks.get(s, 0))} in the "
                    f"trie, but replaying thread {w}'s updates gives "
                    f"{ks.describe_state(s, self.own_state[s])}",
                )
        end = 1 + max((th.resp[-1] for th in h.threads if len(th)), default=0)
        for s in range(self.n_subs):
            self.obj_ops[s].append((end, end + 1, _EQ, masks.get(s, 0), None, -1, 0))

    # ---------------------------------------------------------------- (c)
    def _check_objects(self) -> int:
        n_events = 0
        slot_final = len(self.h.threads)
        total = self.n_subs
        for s in range(total):
            if s % 64 == 0:
                self.progress("check: linearizability (c)", s, total)
            ops = self.obj_ops[s]
            n_events += len(ops)
            if ops:
                self._check_object(s, ops, slot_final)
            self.obj_ops[s] = []
        return n_events

    def _check_object(self, s: int, ops: list[tuple[Any, ...]], slot_final: int) -> None:
        """The just-in-time linearizability search for one subscriber.

        Pending operations are keyed by a slot: the thread (at most one pending
        op each), ``slot_final`` for the final contents, and for the k-th (k >= 1)
        distinct observation of one lookup_many call of thread t (all pending
        together) ``t + (slot_final + 1) * k``."""
        ops.sort(key=_first)
        configs: set[tuple[int, int]] = {(0, 0)}
        pending: dict[int, tuple[Any, ...]] = {}
        heap: list[tuple[int, int]] = []
        recent: deque[tuple[Any, ...]] = deque(maxlen=6)

        def respond(slot: int) -> bool:
            nonlocal configs
            op = pending[slot]
            bit = 1 << slot
            if len(pending) == 1:
                new = set()
                code, arg, expect = op[2], op[3], op[4]
                for st, lm in configs:
                    if lm & bit:
                        new.add((st, 0))
                    elif code == _OBS:
                        if bool(st & arg) == expect:
                            new.add((st, 0))
                    elif code == _SUB:
                        if (not st & arg) == expect:
                            new.add((st | arg, 0))
                    elif code == _UNSUB:
                        if bool(st & arg) == expect:
                            new.add((st & ~arg, 0))
                    elif st == arg:
                        new.add((st, 0))
            elif op[2] == _OBS and all(o[2] == _OBS for o in pending.values()):
                # Only observations pending (e.g. overlapping lookup_many calls):
                # none changes the state, so linearizing the others first
                # reaches no new state; the later searches still may.
                arg, expect = op[3], op[4]
                new = {
                    (st, lm & ~bit) for st, lm in configs if lm & bit or bool(st & arg) == expect
                }
            else:
                seen = set(configs)
                stack = list(configs)
                items = [(1 << sl, o[2], o[3], o[4]) for sl, o in pending.items()]
                while stack:
                    st, lm = stack.pop()
                    for b2, code, arg, expect in items:
                        if lm & b2:
                            continue
                        if code == _OBS:
                            if bool(st & arg) != expect:
                                continue
                            c = (st, lm | b2)
                        elif code == _SUB:
                            if (not st & arg) != expect:
                                continue
                            c = (st | arg, lm | b2)
                        elif code == _UNSUB:
                            if bool(st & arg) != expect:
                                continue
                            c = (st & ~arg, lm | b2)
                        else:
                            if st != arg:
                                continue
                            c = (st, lm | b2)
                        if c not in seen:
                            seen.add(c)
                            stack.append(c)
                new = {(st, lm & ~bit) for st, lm in seen if lm & bit}
            if not new:
                self._object_violation(s, op, configs, pending, recent)
                return False
            configs = new
            del pending[slot]
            recent.append(op)
            return True

        n_ops = len(ops)
        for i in range(n_ops):
            op = ops[i]
            inv = op[0]
            if not heap and (i + 1 == n_ops or op[1] < ops[i + 1][0]) and len(configs) == 1:
                # Fast path: nothing pending, the op overlaps no other op on this
                # subscriber, and the state is known: apply it directly.
                ((st, _),) = configs
                code, arg, expect = op[2], op[3], op[4]
                if code == _OBS:
                    ok = bool(st & arg) == expect
                elif code == _SUB:
                    ok = (not st & arg) == expect
                    st |= arg
                elif code == _UNSUB:
                    ok = bool(st & arg) == expect
                    st &= ~arg
                else:
                    ok = st == arg
                if not ok:
                    self._object_violation(s, op, configs, {0: op}, recent)
                    return
                if code == _SUB or code == _UNSUB:
                    configs = {(st, 0)}
                recent.append(op)
                continue
            while heap and heap[0][0] < inv:
                _, slot = heapq.heappop(heap)
                if not respond(slot):
                    return
            slot = op[5] if op[5] >= 0 else slot_final
            if len(op) > 8 and op[8]:  # a lookup_many's k-th distinct observation
                slot += (slot_final + 1) * op[8]
            if slot in pending:  # equal stamps (perf_counter_ns): program order wins
                heap.remove((pending[slot][1], slot))
                heapq.heapify(heap)
                if not respond(slot):
                    return
            pending[slot] = op
            heapq.heappush(heap, (op[1], slot))
        while heap:
            _, slot = heapq.heappop(heap)
            if not respond(slot):
                return

    def _object_violation(
        self,
        s: int,
        op: tuple[Any, ...],
        configs: set[tuple[int, int]],
        pending: dict[int, tuple[Any, ...]],
        recent: deque[tuple[Any, ...]],
    ) -> None:
        h, ks = self.h, self.ks
        code, arg, expect = op[2], op[3], op[4]
        if code == _SUB:
            need = f"{ks.describe_state(s, arg)} {'absent' if expect else 'present'} before it"
        elif code == _UNSUB:
            need = f"{ks.describe_state(s, arg)} {'present' if expect else 'absent'} before it"
        elif code == _OBS:
            need = (
                f"one of {ks.describe_state(s, arg)} present"
                if expect
                else f"none of {ks.describe_state(s, arg)} present"
            )
        else:
            need = f"exactly {ks.describe_state(s, arg)}"
        states = sorted({st for st, _ in configs})
        possible = " or ".join(ks.describe_state(s, st) for st in states)
        others = [o for o in pending.values() if o is not op]
        conc = "; ".join(_op_text(h, o) for o in others) or "none"
        prev = "; ".join(_op_text(h, o) for o in recent) or "none"
        self.report.add(
            "linearizability",
            f"{ks.sub_name(s)}: no linearization explains {_op_text(h, op)} (needs {need}); "
            f"the state can only be {possible} by then. Concurrent operations: {conc}. "
            f"Last completed operations on this subscriber: {prev}",
        )


_first = itemgetter(0)


def _op_text(h: History, op: tuple[Any, ...]) -> str:
    """An op of the per-subscriber search (a lookup_many row carries its row)."""
    return h.describe(op[5], op[6], row=op[7] if len(op) > 7 else None)
