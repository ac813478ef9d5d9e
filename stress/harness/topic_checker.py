"""Checks of a recorded ``topics`` run (:mod:`stress.harness.topics`).

Time is the shared clock's stamps.  An operation took effect at some moment
strictly between its two stamps: with distinct stamps (the atomics clock), in
one of the *cells* ``inv .. resp - 1`` (cell ``c`` is the stretch of time
between stamp ``c`` and stamp ``c + 1``).  A read stamped ``(a, b)`` read the
index in one of the cells ``a .. b - 1``.  (With ``perf_counter_ns`` stamps,
which two threads may share, every interval is widened by one stamp on both
sides first: ties count as overlapping, which only makes the checks more
permissive.)  Every put stores a value no other put stores, so a value read
names the put that wrote it.

Owned topics: the exact model
-----------------------------
A thread's own topics are written by that thread only, one operation after
the other, so their state at any moment is the state after some *prefix* of
that thread's writes to them: after the first ``k`` writes it holds in the
cells ``inv(write k - 1) .. resp(write k) - 1`` (the write k - 1 may have
taken effect, write k not surely).  A read, restricted to one writer's
topics that it can see (its filter's, one topic for a get, all for a
snapshot), fits a set of prefixes, so a set of cells; the read is one state
of the index exactly when one cell of the call fits every writer's part.
That is exact: a topic the writer held for the whole call must be in the
answer, one it held for none of it must not, the writes in flight must be
seen or not as of one moment, and a part of one writer's topics must be a
state that writer passed through -- so an answer mixing two moments
(``b`` put after ``a``: seeing ``b``'s new value but ``a``'s old one) fits no
cell, whichever threads wrote them.

Shared topics: sound bounds, and an exact search per topic
----------------------------------------------------------
A shared topic's writes may overlap, so its state in a cell is not always
known.  For the one-instant checks it contributes what is sure: a value
``v`` of put ``P`` is possible from ``inv(P)`` until the response of the
first write that began after ``P`` ended; the topic is *surely present*
after a put ``P`` ended until a remove or pop that may follow ``P`` began,
*surely absent* after a remove or pop ``R`` ended until a put that may
follow ``R`` began (or before any put began); elsewhere either.  Per shared
topic, the exact question is answered by the just-in-time linearizability
search of :mod:`stress.harness.checker` (sweep in stamp order keeping every
reachable (state, pending ops already linearized) configuration): every put
(returned "new?"), remove (returned "was there?"), pop (returned the value),
get, what every query and snapshot saw of it, and the final state.

The checks
----------
results
    No operation raised; every answer is well formed: a query returns each
    topic once, only topics its filter matches (by ``tests/support/oracle.py``), and
    every value returned (by get, pop, query, snapshot) was put under that
    very topic.
own-writes
    A thread's put/remove/pop of its own topics return what its own replay
    says (put: True when absent; remove: True when present; pop: the value
    it last put there, or None).
linearizability
    Per topic: every get is one state of its topic in its call (owned: the
    exact model; shared: the search, with the writes' own results); and no
    get, query or snapshot sees an older state of a writer's topics than one
    of them that ended before it began saw (one sees a write still in
    flight, a later one does not: a new-old inversion).  The stats count the
    reads that saw a write still in flight (``reads_ahead``): the ones a
    later read could contradict.
queries
    Every query's answer (after ``query()`` returned; streamed afterwards) is
    one state of the whole index at one cell of the call: owned topics by the
    exact model (nothing missing, nothing extra, no two moments mixed) and
    shared ones within their bounds, at the same cell.
counts
    ``count(F)`` is the number of topics ``F`` matches, and ``len()`` the
    number of topics, in the index at one cell of the call (owned: exact,
    per writer the prefixes possible in that cell; shared: between the
    surely present and the possibly present ones in that cell).
snapshots
    Every snapshot's items are one state of the index at one cell of the
    ``snapshot()`` call (as for a query of everything), and what was read
    from it -- ``len``, ``get``, ``query``, ``count``, right away and again
    when the thread took its next snapshot -- is exactly what its own items
    give (by the oracle's matching).
final
    After the run the index holds exactly the replay of every owned topic's
    writes (and, per shared topic, a state the search reaches at the end);
    ``len`` agrees with the items; ``check_invariants(strict=True)`` passes.

What is not claimed: the reads are checked one at a time against the
writes, and against each other only per writer (the new-old order) and per
shared topic; a set of concurrent multi-topic reads that are each one state
but could not all be linearized together (each sees one of two concurrent
writes of different threads and not the other) is not searched for.
"""

from __future__ import annotations

import heapq
import time
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from stress.harness.checker import CheckReport
from stress.harness.topics import (
    BAD,
    COUNT,
    GET,
    LEN,
    POP,
    POS_MASK,
    PUT,
    QUERY,
    REMOVE,
    SHIFT,
    SNAPSHOT,
    TopicHistory,
    flat_pairs,
    put_value,
    value_name,
)

__all__ = ["TOPIC_CHECKS", "check_topics"]

TOPIC_CHECKS = {
    "results": "no op raised; answers well formed (each topic once, matching, values put there)",
    "own-writes": "put/remove/pop of a thread's own topics return what its replay says",
    "linearizability": "each get is a state of its topic in its call; no read sees an older state",
    "queries": "every query answer is one state of the whole index at one instant of the call",
    "counts": "count(filter) and len() are those of one state at one instant of the call",
    "snapshots": "snapshots are one state at one instant; their reads agree with their items",
    "final": "the index ends as the replay of every write; len; check_invariants(strict=True)",
}

INF = 1 << 62
ALL = -1  # the scope of a snapshot and of len(): every topic

Ivals = list[tuple[int, int]]  # sorted, disjoint, inclusive cell ranges

# Codes of the per-topic search (shared topics).
_PUT, _REM, _POP, _READ, _EQ = range(5)


def check_topics(
    h: TopicHistory, progress: Callable[[str, int, int], None] | None = None
) -> CheckReport:
    """Run every check on ``h``; see the module docstring."""
    return _TopicChecker(h, progress or (lambda stage, done, total: None)).run()


# ---------------------------------------------------------------- intervals
def _merge(spans: Iterable[tuple[int, int]]) -> Ivals:
    out: Ivals = []
    for s, e in sorted(spans):
        if s > e:
            continue
        if out and s <= out[-1][1] + 1:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _intersect(a: Ivals, b: Ivals) -> Ivals:
    out: Ivals = []
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


def _clip(iv: Ivals, lo: int, hi: int, starts: list[int] | None = None) -> Ivals:
    """The part of iv in lo..hi (``starts``: iv's starts, for a bisection)."""
    if starts is None:
        return _intersect(iv, [(lo, hi)])
    out: Ivals = []
    i = max(0, bisect_right(starts, lo) - 1)
    while i < len(iv) and iv[i][0] <= hi:
        s, e = max(iv[i][0], lo), min(iv[i][1], hi)
        if s <= e:
            out.append((s, e))
        i += 1
    return out


def _complement(iv: Ivals, lo: int, hi: int, starts: list[int] | None = None) -> Ivals:
    out: Ivals = []
    cur = lo
    for s, e in _clip(iv, lo, hi, starts):
        if s > cur:
            out.append((cur, s - 1))
        cur = e + 1
    if cur <= hi:
        out.append((cur, hi))
    return out


def _inside(iv: Ivals, starts: list[int], c: int) -> bool:
    i = bisect_right(starts, c) - 1
    return i >= 0 and iv[i][1] >= c


def _cells(iv: Ivals) -> str:
    def one(s: int, e: int) -> str:
        a = "-inf" if s <= -INF else str(s)
        b = "inf" if e >= INF else str(e)
        return a if s == e else f"{a}..{b}"

    return ", ".join(one(s, e) for s, e in iv[:6]) + (" ..." if len(iv) > 6 else "") or "none"


class _Shared:
    """What is sure about one shared topic, from its writes (see the module
    docstring): possible cells per value, surely present / surely absent."""

    def __init__(self, writes: list[tuple[int, int, int, int]]) -> None:
        # writes: (inv, resp, kind, value of a put else 0), effective stamps
        ws = sorted(writes)
        invs = [w[0] for w in ws]
        suffix = [INF] * (len(ws) + 1)  # min resp of the writes from i on
        for i in range(len(ws) - 1, -1, -1):
            suffix[i] = min(suffix[i + 1], ws[i][1])
        self.window: dict[int, tuple[int, int]] = {}
        puts = [w for w in ws if w[2] == PUT]
        dels = [w for w in ws if w[2] != PUT]
        for inv, resp, _, v in puts:
            end = suffix[bisect_left(invs, resp)]
            self.window[v] = (inv, end - 1 if end < INF else INF)
        # surely present after put P: [resp(P), min inv(R) over R with resp(R) > inv(P)) - 1]
        self.present = _merge(_sure_after(puts, dels))
        first_put = min((w[0] for w in puts), default=INF)
        self.absent = _merge([(-INF, first_put - 1), *_sure_after(dels, puts)])
        self.p_starts = [s for s, _ in self.present]
        self.a_starts = [s for s, _ in self.absent]

    def possible(self, v: int, lo: int, hi: int) -> Ivals:
        """The cells of lo..hi where the topic may hold v (0: absent)."""
        if v == 0:
            return _complement(self.present, lo, hi, self.p_starts)
        w = self.window.get(v)
        if w is None:
            return []
        return _clip([w], lo, hi)


def _sure_after(
    mine: list[tuple[int, int, int, int]], others: list[tuple[int, int, int, int]]
) -> list[tuple[int, int]]:
    """Per op of ``mine``: the cells from its response until an op of
    ``others`` that may follow it began (exclusive)."""
    by_resp = sorted(others, key=itemgetter(1))
    resps = [o[1] for o in by_resp]
    suffix = [INF] * (len(by_resp) + 1)  # min inv of the ops from i on (by resp)
    for i in range(len(by_resp) - 1, -1, -1):
        suffix[i] = min(suffix[i + 1], by_resp[i][0])
    out = []
    for inv, resp, _, _ in mine:
        d = suffix[bisect_right(resps, inv)]
        out.append((resp, d - 1 if d < INF else INF))
    return out


# ------------------------------------------------------------------ checker
class _TopicChecker:
    def __init__(self, h: TopicHistory, progress: Callable[[str, int, int], None]) -> None:
        self.h = h
        self.sp = sp = h.space
        self.progress = progress
        self.report = CheckReport(counts=dict.fromkeys(TOPIC_CHECKS, 0))
        self.s = 0 if h.clock == "atomics" else 1
        n = len(h.logs)
        self.n = n
        # per writer: its writes of its own topics, in program order
        self.u_inv = [array("q") for _ in range(n)]
        self.u_resp = [array("q") for _ in range(n)]
        self.u_key = [array("i") for _ in range(n)]
        self.u_val = [array("q") for _ in range(n)]
        self.u_pos = [array("i") for _ in range(n)]
        #: reads to judge against the model: (A, B, thread, pos), A..B their cells
        self.reads: list[tuple[int, int, int, int]] = []
        self.sh_writes: dict[int, list[tuple[int, int, int, int]]] = {x: [] for x in sp.shared}
        #: per shared topic: the search's events
        #: (inv, resp, code, a, b, slot, thread, pos)
        self.sh_ops: dict[int, list[tuple[int, ...]]] = {x: [] for x in sp.shared}
        self.shared: dict[int, _Shared] = {}
        self.own_state: dict[int, int] = {}
        #: per filter (and ALL): the writers owning a topic it matches
        self.scope_writers: dict[int, list[int]] = {}
        for f, m in enumerate(sp.matches):
            self.scope_writers[f] = sorted({sp.owner[x] for x in m if sp.owner[x] >= 0})
        self.scope_writers[ALL] = sorted({w for w in sp.owner if w >= 0})
        self.stats: dict[str, Any] = {
            "reads_judged": 0,
            "reads_contended": 0,
            "query_pairs": 0,
            "shared_events": 0,
            "reads_ahead": 0,
        }

    # ------------------------------------------------------------------ run
    def run(self) -> CheckReport:
        t0 = time.perf_counter()
        for t in range(self.n):
            self.progress("check: replay", t, self.n)
            self._replay(t)
        t1 = time.perf_counter()
        for x, ws in self.sh_writes.items():
            self.shared[x] = _Shared(ws)
        self._sweep()
        t2 = time.perf_counter()
        self._check_final()
        for i, (x, ops) in enumerate(self.sh_ops.items()):
            self.progress("check: shared topics", i, len(self.sh_ops))
            self.stats["shared_events"] += len(ops)
            self._search(x, ops)
        t3 = time.perf_counter()
        h = self.h
        self.stats.update(
            {
                "operations": h.n_ops,
                "timed_operations": h.n_timed(),
                "threads": self.n,
                "topics": len(self.sp.topics),
                "shared_topics": len(self.sp.shared),
                "filters": len(self.sp.filters),
                "kinds": h.kind_counts(),
                "record_seconds": round(h.seconds, 3),
                "seconds": {
                    "replay": round(t1 - t0, 3),
                    "reads": round(t2 - t1, 3),
                    "shared_final": round(t3 - t2, 3),
                    "total": round(t3 - t0, 3),
                },
            }
        )
        self.report.stats = self.stats
        return self.report

    def add(self, check: str, message: str | Callable[..., str], *args: Any) -> None:
        """Count a violation; a callable message is built (with ``args``) only
        if it is kept."""
        if self.report.keeps(check):
            self.report.add(check, message if isinstance(message, str) else message(*args))
        else:
            self.report.counts[check] += 1

    # ---------------------------------------------------------------- replay
    def _put_of(self, v: int, x: int) -> bool:
        """v is the value of a put of topic x (one that did not raise)."""
        if v <= 0:
            return False
        t, pos = (v >> SHIFT) - 1, v & POS_MASK
        if not 0 <= t < self.n:
            return False
        g = self.h.logs[t]
        return (
            pos < len(g)
            and g.kind[pos] == PUT
            and g.arg[pos] == x
            and pos not in g.errors
            and g.result[pos] != BAD
        )

    def _bad_pairs(self, pairs: list[tuple[int, int]], scope: int) -> list[str]:
        """What is wrong with (topic, value) pairs an answer gave."""
        sp = self.sp
        out = []
        seen: set[int] = set()
        match = sp.matches[scope] if scope != ALL else None
        for x, v in pairs:
            if not 0 <= x < len(sp.topics):
                out.append(f"a topic this run never put (value {value_name(v)})")
                continue
            if x in seen:
                out.append(f"{sp.topic(x)} twice")
            seen.add(x)
            if match is not None and x not in match:
                out.append(
                    f"{sp.topic(x)}, which the filter does not match (tests/support/oracle.py)"
                )
            if not self._put_of(v, x):
                out.append(f"{sp.topic(x)} -> {value_name(v)}, a value never put there")
        return out

    def _replay(self, t: int) -> None:
        h, sp, s = self.h, self.sp, self.s
        g = h.logs[t]
        owner = sp.owner
        last: dict[int, int] = {}  # own topic -> position of its last write
        reads = self.reads
        for pos in range(len(g)):
            kind, a, r = g.kind[pos], g.arg[pos], g.result[pos]
            inv, resp = g.inv[pos] - s, g.resp[pos] + s
            if r == BAD or pos in g.errors:
                self.add("results", h.describe(t, pos))
                continue
            if kind in (PUT, REMOVE, POP):
                w = owner[a]
                if w == t:
                    self._own_write(t, pos, kind, a, r, inv, resp, last)
                elif w < 0:
                    v = put_value(t, pos) if kind == PUT else 0
                    self.sh_writes[a].append((inv, resp, kind, v))
                    if kind == PUT:
                        ev = (inv, resp, _PUT, v, r, t, t, pos)
                    elif kind == REMOVE:
                        ev = (inv, resp, _REM, 0, r, t, t, pos)
                    else:
                        if r and not self._put_of(r, a):
                            self.add(
                                "results",
                                f"{h.describe(t, pos)}: popped a value never put there",
                            )
                            continue
                        ev = (inv, resp, _POP, r, 0, t, t, pos)
                    self.sh_ops[a].append(ev)
                else:
                    raise ValueError(f"bad history: {h.describe(t, pos)} writes thread {w}'s topic")
            elif kind == GET:
                if r and not self._put_of(r, a):
                    self.add(
                        "results", f"{h.describe(t, pos)}: a value never put under {sp.topic(a)}"
                    )
                elif owner[a] >= 0:
                    reads.append((inv, resp - 1, t, pos))
                else:
                    self.sh_ops[a].append((inv, resp, _READ, r, 0, t, t, pos))
            elif kind == QUERY:
                pairs = g.pairs(pos)
                self.stats["query_pairs"] += len(pairs)
                bad = self._bad_pairs(pairs, a)
                if bad:
                    self.add("results", f"{h.describe(t, pos)} returned " + "; ".join(bad[:6]))
                    continue
                reads.append((inv, resp - 1, t, pos))
                seen = dict(pairs)
                for x in sp.matches[a]:
                    if owner[x] < 0:
                        self.sh_ops[x].append((inv, resp, _READ, seen.get(x, 0), 0, t, t, pos))
            elif kind in (COUNT, LEN):
                reads.append((inv, resp - 1, t, pos))
            elif kind == SNAPSHOT:
                if self._snapshot_reads(t, pos):
                    reads.append((inv, resp - 1, t, pos))
                    items = dict(flat_pairs(g.snaps[pos].items))
                    for x in sp.shared:
                        self.sh_ops[x].append((inv, resp, _READ, items.get(x, 0), 0, t, t, pos))
            else:
                self.add("results", f"{h.describe(t, pos)}: unknown operation kind")

    def _own_write(
        self,
        t: int,
        pos: int,
        kind: int,
        x: int,
        r: int,
        inv: int,
        resp: int,
        last: dict[int, int],
    ) -> None:
        h, sp = self.h, self.sp
        old = self.own_state.get(x, 0)
        if kind == PUT:
            want, new = (1 if old == 0 else 0), put_value(t, pos)
        elif kind == REMOVE:
            want, new = (1 if old else 0), 0
        else:
            want, new = old, 0
        if r != want:
            prev = last.get(x)

            def text() -> str:
                before = (
                    f"its own {h.describe(t, prev)} left {sp.topic(x)} "
                    f"{'holding ' + value_name(old) if old else 'absent'}"
                    if prev is not None
                    else f"{sp.topic(x)} was never written before, so it was absent"
                )
                need = {PUT: str(bool(want)), REMOVE: str(bool(want))}.get(kind, value_name(want))
                return f"{h.describe(t, pos)} is wrong: {before}, so it must return {need}"

            self.add("own-writes", text)
        self.own_state[x] = new
        last[x] = pos
        self.u_inv[t].append(inv)
        self.u_resp[t].append(resp)
        self.u_key[t].append(x)
        self.u_val[t].append(new)
        self.u_pos[t].append(pos)

    def _snapshot_reads(self, t: int, pos: int) -> bool:
        """A snapshot's items well formed, and its own reads agree with them.
        Returns whether the items can be judged as a state."""
        h, sp = self.h, self.sp
        rec = h.logs[t].snaps.get(pos)
        where = h.describe(t, pos)
        if rec is None:
            self.add("results", f"{where}: nothing recorded")
            return False
        items = flat_pairs(rec.items)
        bad = self._bad_pairs(items, ALL)
        if bad:
            self.add("snapshots", f"{where}: its items hold " + "; ".join(bad[:6]))
            return False
        have = dict(items)
        want_q = sorted((x, v) for x, v in items if x in sp.matches[rec.filt])
        f = sp.filters[rec.filt]
        problems = []
        if rec.length != len(items):
            problems.append(f"len(snapshot) is {rec.length}, its items are {len(items)}")
        if rec.got != have.get(rec.key, 0):
            problems.append(
                f"snapshot.get({sp.topic(rec.key)}) -> {value_name(rec.got)}, its items "
                f"have {value_name(have.get(rec.key, 0))}"
            )
        found = flat_pairs(rec.found)
        if sorted(found) != want_q:
            problems.append(
                f"snapshot.query({f!r}) -> {h.pairs_text(found)}, its items give "
                f"{h.pairs_text(want_q)}"
            )
        if rec.counted != len(want_q):
            problems.append(f"snapshot.count({f!r}) -> {rec.counted}, its items give {len(want_q)}")
        if isinstance(rec.late, str):
            problems.append(rec.late)
        elif rec.late is not None:
            lq, lc, ll, lg = rec.late
            again = flat_pairs(lq)
            if sorted(again) != want_q or lc != len(want_q) or ll != len(items):
                problems.append(
                    f"read again when the thread took its next snapshot (the index had "
                    f"moved on): query({f!r}) -> {h.pairs_text(again)}, count -> {lc}, "
                    f"len -> {ll}; its items give {h.pairs_text(want_q)}, {len(want_q)}, "
                    f"{len(items)}"
                )
            if lg != have.get(rec.key, 0):
                problems.append(
                    f"get({sp.topic(rec.key)}) again -> {value_name(lg)}, its items have "
                    f"{value_name(have.get(rec.key, 0))}"
                )
        if problems:
            self.add("snapshots", f"{where}: " + "; ".join(problems))
        return True

    # ---------------------------------------------------------------- sweep
    def _sweep(self) -> None:
        """Judge every read against the owned model (and the shared bounds),
        in order of their first cell: each writer's topics are kept at the
        state after the writes that surely took effect before that cell."""
        sp, n = self.sp, self.n
        self.reads.sort()
        n_topics = len(sp.topics)
        self.cur = [0] * n_topics
        self.cur_f: dict[int, dict[int, int]] = {f: {} for f in range(len(sp.filters))}
        self.cur_f[ALL] = {}
        self.cnt: dict[int, list[int]] = {f: [0] * n for f in self.cur_f}
        self.key_filters = [
            [f for f in range(len(sp.filters)) if x in sp.matches[f]] + [ALL]
            for x in range(n_topics)
        ]
        self.at = [0] * n
        #: per writer: heap of (last cell, -kmin, thread, pos) of judged reads
        self.pending: list[list[tuple[int, int, int, int]]] = [[] for _ in range(n)]
        #: per writer: (kmin, thread, pos) of the strongest read that ended
        self.best: list[tuple[int, int, int]] = [(0, -1, -1)] * n
        total = len(self.reads)
        for i, (A, B, t, pos) in enumerate(self.reads):
            if i & 0x3FFF == 0:
                self.progress("check: reads", i, total)
            for w in range(n):
                lo = bisect_right(self.u_resp[w], A)
                if self.at[w] < lo:
                    self._advance(w, lo)
            kind = self.h.logs[t].kind[pos]
            self.stats["reads_judged"] += 1
            if kind == GET:
                self._judge_get(A, B, t, pos)
            elif kind in (COUNT, LEN):
                self._judge_count(A, B, t, pos, kind)
            else:
                self._judge_state(A, B, t, pos, kind)
        # what is left after the last read: the final state of the owned topics
        for w in range(n):
            self._advance(w, len(self.u_key[w]))

    def _advance(self, w: int, to: int) -> None:
        cur, cur_f, cnt, kf = self.cur, self.cur_f, self.cnt, self.key_filters
        keys, vals = self.u_key[w], self.u_val[w]
        for j in range(self.at[w], to):
            x, v = keys[j], vals[j]
            old = cur[x]
            cur[x] = v
            for f in kf[x]:
                if v:
                    cur_f[f][x] = v
                    if not old:
                        cnt[f][w] += 1
                elif old:
                    del cur_f[f][x]
                    cnt[f][w] -= 1
        self.at[w] = to

    # ---- one writer's part of a read
    def _fit(
        self,
        w: int,
        A: int,
        B: int,
        scope: int | None,
        key: int,
        obs: dict[int, int],
        diff: set[int],
    ) -> tuple[Ivals, int, int, bool]:
        """The cells of A..B where writer w's topics in the scope (a filter,
        ALL, or None for the one topic ``key``) are as observed (``obs``:
        topic -> value; ``diff``: w's topics where obs and the state at the
        first cell differ).  Returns (cells, kmin, kmax, contended): the
        prefixes that fit, kmin > kmax when none."""
        lo = self.at[w]
        hi = bisect_right(self.u_inv[w], B)
        keys = self.u_key[w]
        if scope is None:
            touched = any(keys[j] == key for j in range(lo, hi))
        elif scope == ALL:
            touched = hi > lo
        else:
            m = self.sp.matches[scope]
            touched = any(keys[j] in m for j in range(lo, hi))
        if not touched:
            if diff:
                return [], 1, 0, False
            return [(A, B)], lo, hi, False
        u_inv, u_resp, vals = self.u_inv[w], self.u_resp[w], self.u_val[w]
        n_w = len(keys)
        m2 = None if scope is None or scope == ALL else self.sp.matches[scope]
        diff = set(diff)
        cells: Ivals = []
        kmin, kmax = 1, 0
        for k in range(lo, hi + 1):
            if not diff:
                a = max(A, u_inv[k - 1]) if k > 0 else A
                b = min(B, u_resp[k] - 1) if k < n_w else B
                if a <= b:
                    if cells and a <= cells[-1][1] + 1:
                        cells[-1] = (cells[-1][0], max(b, cells[-1][1]))
                    else:
                        cells.append((a, b))
                    if kmin > kmax:
                        kmin = k
                    kmax = k
            if k < hi:
                x = keys[k]
                if (scope is None and x == key) or scope == ALL or (m2 is not None and x in m2):
                    if obs.get(x, 0) != vals[k]:
                        diff.add(x)
                    else:
                        diff.discard(x)
        return cells, kmin, kmax, True

    def _inversion(self, w: int, A: int, B: int, kmin: int, kmax: int, t: int, pos: int) -> None:
        """No read of writer w's topics that ended before this one began saw
        a later state of them (reads come in order of A)."""
        heap = self.pending[w]
        best = self.best[w]
        while heap and heap[0][0] < A:
            _, nk, t1, p1 = heapq.heappop(heap)
            if -nk > best[0]:
                best = (-nk, t1, p1)
        self.best[w] = best
        if kmax < best[0]:
            kind = self.h.logs[t].kind[pos]
            check = "linearizability"
            _, t1, p1 = best
            h = self.h
            seen = self.u_pos[w][best[0] - 1]
            not_yet = self.u_pos[w][kmax]

            def text() -> str:
                return (
                    f"{h.describe(t, pos)} sees an older state of thread {w}'s topics than "
                    f"{h.describe(t1, p1)}, which ended before it began: the earlier read "
                    f"already saw {h.describe(w, seen)}, the later one fits only states "
                    f"before {h.describe(w, not_yet)}"
                    + (" (a new-old inversion)" if kind == GET else "")
                )

            self.add(check, text)
        if kmin > self.at[w]:  # it saw a write in flight (else no later read can be older)
            self.stats["reads_ahead"] += 1
            heapq.heappush(heap, (B, -kmin, t, pos))

    # ---- get of an owned topic
    def _judge_get(self, A: int, B: int, t: int, pos: int) -> None:
        g = self.h.logs[t]
        x, v = g.arg[pos], g.result[pos]
        w = self.sp.owner[x]
        diff = {x} if self.cur[x] != v else set()
        cells, kmin, kmax, busy = self._fit(w, A, B, None, x, {x: v} if v else {}, diff)
        self.stats["reads_contended"] += busy
        if not cells:
            self.add("linearizability", self._get_text, A, B, t, pos, w, x, v)
            return
        self._inversion(w, A, B, kmin, kmax, t, pos)

    def _get_text(self, A: int, B: int, t: int, pos: int, w: int, x: int, v: int) -> str:
        h, sp = self.h, self.sp
        return (
            f"{h.describe(t, pos)}: {sp.topic(x)} never held {value_name(v)} during the "
            f"call. {self._history_of(w, x, A, B)}"
        )

    def _history_of(self, w: int, x: int, A: int, B: int) -> str:
        """Writer w's writes of topic x around cells A..B, in words."""
        h = self.h
        lo = self.at[w]
        hi = bisect_right(self.u_inv[w], B)
        keys = self.u_key[w]
        before = [j for j in range(lo) if keys[j] == x][-2:]
        during = [j for j in range(lo, hi) if keys[j] == x][:4]
        parts = []
        if before:
            parts.append(
                "Before the call: " + "; ".join(h.describe(w, self.u_pos[w][j]) for j in before)
            )
        else:
            parts.append("Before the call it was never written (absent)")
        if during:
            parts.append(
                "in flight during it: " + "; ".join(h.describe(w, self.u_pos[w][j]) for j in during)
            )
        else:
            parts.append("no write of it was in flight")
        return ", ".join(parts)

    # ---- query / snapshot: one state of their scope
    def _judge_state(self, A: int, B: int, t: int, pos: int, kind: int) -> None:
        sp, g = self.sp, self.h.logs[t]
        if kind == QUERY:
            scope = g.arg[pos]
            pairs = g.pairs(pos)
            check = "queries"
        else:
            scope = ALL
            pairs = flat_pairs(g.snaps[pos].items)
            check = "snapshots"
        owner = sp.owner
        obs = {x: v for x, v in pairs if owner[x] >= 0}
        cur = self.cur_f[scope]
        diff: set[int] = set()
        if obs != cur:
            diff = {x for x in obs.keys() | cur.keys() if obs.get(x, 0) != cur.get(x, 0)}
        allowed: Ivals = [(A, B)]
        parts: list[tuple[str, Ivals]] = []
        fits: list[tuple[int, int, int]] = []
        contended = False
        for w in self.scope_writers[scope]:
            dw = {x for x in diff if owner[x] == w}
            cells, kmin, kmax, busy = self._fit(w, A, B, scope, -1, obs, dw)
            contended |= busy
            if not cells:
                self.add(check, self._state_text, A, B, t, pos, w, dw, obs, scope)
                return
            if busy:
                parts.append((f"thread {w}'s topics", cells))
            allowed = _intersect(allowed, cells)
            fits.append((w, kmin, kmax))
        seen = dict(pairs)
        match = sp.matches[scope] if scope != ALL else None
        for x in sp.shared:
            if match is not None and x not in match:
                continue
            v = seen.get(x, 0)
            cells = self.shared[x].possible(v, A, B)
            if cells != [(A, B)]:
                contended = True
                parts.append((f"shared {sp.topic(x)} as {value_name(v)}", cells))
            allowed = _intersect(allowed, cells)
        self.stats["reads_contended"] += contended
        if not allowed:
            self.add(check, self._mixed_text, t, pos, parts)
            return
        for w, kmin, kmax in fits:
            self._inversion(w, A, B, kmin, kmax, t, pos)

    def _state_text(
        self,
        A: int,
        B: int,
        t: int,
        pos: int,
        w: int,
        dw: set[int],
        obs: dict[int, int],
        scope: int,
    ) -> str:
        h, sp = self.h, self.sp
        lines = []
        for x in sorted(dw)[:4]:
            lines.append(
                f"{sp.topic(x)}: the answer has {value_name(obs.get(x, 0))}, the index had "
                f"{value_name(self.cur[x])} when the call began"
            )
        lo = self.at[w]
        hi = bisect_right(self.u_inv[w], B)
        keys = self.u_key[w]
        m = None if scope == ALL else sp.matches[scope]
        flight = [j for j in range(lo, hi) if m is None or keys[j] in m]
        if flight:
            lines.append(
                f"thread {w}'s writes of them in flight during the call: "
                + "; ".join(
                    f"{h.describe(w, self.u_pos[w][j])} (the answer has "
                    f"{value_name(obs.get(keys[j], 0))})"
                    for j in flight[:6]
                )
                + (f" and {len(flight) - 6} more" if len(flight) > 6 else "")
            )
        else:
            x = min(dw)
            lines.append(f"no write of them was in flight; {self._history_of(w, x, A, B)}")
        return (
            f"{h.describe(t, pos, with_result=False)} is not one state of the index: "
            f"thread {w}'s topics in it fit no state thread {w} passed through during the "
            "call. " + ". ".join(lines)
        )

    def _mixed_text(self, t: int, pos: int, parts: list[tuple[str, Ivals]]) -> str:
        return (
            f"{self.h.describe(t, pos, with_result=False)} mixes states: each part is a "
            "state some moment of the call had, no one moment has them all ("
            + "; ".join(f"{what} fit only cells {_cells(c)}" for what, c in parts[:8])
            + ")"
        )

    # ---- count / len
    def _judge_count(self, A: int, B: int, t: int, pos: int, kind: int) -> None:
        sp, g = self.sp, self.h.logs[t]
        scope = g.arg[pos] if kind == COUNT else ALL
        got = g.result[pos]
        match = sp.matches[scope] if scope != ALL else None
        # per writer: [(cells, count)] of its prefixes possible in A..B
        options: list[list[tuple[int, int, int]]] = []
        base = 0
        points = {A}
        keys_all = self.u_key
        for w in self.scope_writers[scope]:
            lo = self.at[w]
            hi = bisect_right(self.u_inv[w], B)
            c = self.cnt[scope][w]
            keys = keys_all[w]
            if not any(match is None or keys[j] in match for j in range(lo, hi)):
                base += c
                continue
            u_inv, u_resp, vals = self.u_inv[w], self.u_resp[w], self.u_val[w]
            n_w = len(keys)
            tmp: dict[int, int] = {}
            opts = []
            for k in range(lo, hi + 1):
                a = max(A, u_inv[k - 1]) if k > 0 else A
                b = min(B, u_resp[k] - 1) if k < n_w else B
                if a <= b:
                    opts.append((a, b, c))
                    points.add(a)
                    points.add(b + 1)
                if k < hi:
                    x = keys[k]
                    if match is None or x in match:
                        was = tmp.get(x, self.cur[x])
                        now = vals[k]
                        c += (1 if now else 0) - (1 if was else 0)
                        tmp[x] = now
            options.append(opts)
        shared = [x for x in sp.shared if match is None or x in match]
        for x in shared:
            sh = self.shared[x]
            for iv, starts in ((sh.present, sh.p_starts), (sh.absent, sh.a_starts)):
                for s_, e in _clip(iv, A, B, starts):
                    points.add(s_)
                    points.add(e + 1)
        self.stats["reads_contended"] += bool(options) or len(points) > 1
        for p in sorted(q for q in points if A <= q <= B):
            sums = {base}
            for opts in options:
                here = {c for a, b, c in opts if a <= p <= b}
                sums = {s_ + c for s_ in sums for c in here}
            lo_s = sum(_inside(self.shared[x].present, self.shared[x].p_starts, p) for x in shared)
            hi_s = len(shared) - sum(
                _inside(self.shared[x].absent, self.shared[x].a_starts, p) for x in shared
            )
            if any(s_ + lo_s <= got <= s_ + hi_s for s_ in sums):
                return
        self.add("counts", self._count_text, A, B, t, pos, base, options, shared)

    def _count_text(
        self,
        A: int,
        B: int,
        t: int,
        pos: int,
        base: int,
        options: list[list[tuple[int, int, int]]],
        shared: list[int],
    ) -> str:
        h = self.h
        span = []
        for opts in options[:4]:
            span.append(", ".join(f"{c} in cells {_cells([(a, b)])}" for a, b, c in opts[:6]))
        sh = self.shared
        lo_s = [x for x in shared if _clip(sh[x].present, A, B, sh[x].p_starts) == [(A, B)]]
        maybe = [x for x in shared if _clip(sh[x].absent, A, B, sh[x].a_starts) != [(A, B)]]
        return (
            f"{h.describe(t, pos)}: no moment of the call has that many: the writers "
            f"without writes in flight have {base}"
            + (f", the others {'; '.join(span)}" if span else "")
            + f", and of {len(shared)} shared topic(s) in scope {len(lo_s)} surely and "
            f"{len(maybe)} possibly there"
        )

    # ---------------------------------------------------------------- final
    def _check_final(self) -> None:
        h, sp = self.h, self.sp
        where = "after the run"
        if h.invariant_error:
            self.add("final", f"{where}: check_invariants(strict=True): {h.invariant_error}")
        for e in h.final_errors:
            self.add("final", f"{where}: {e}")
        if h.final_items is None:
            return
        items = flat_pairs(h.final_items)
        bad = self._bad_pairs(items, ALL)
        for b in bad[:6]:
            self.add("final", f"{where}: the index holds {b}")
        have = dict(items)
        if h.final_length is not None and h.final_length != len(items):
            self.add("final", f"{where}: len() is {h.final_length}, the items are {len(items)}")
        for x in range(len(sp.topics)):
            w = sp.owner[x]
            if w < 0:
                continue
            want = self.own_state.get(x, 0)
            if have.get(x, 0) != want:
                last = [j for j in range(len(self.u_key[w])) if self.u_key[w][j] == x][-1:]
                after = h.describe(w, self.u_pos[w][last[0]]) if last else "no write of it"
                self.add(
                    "final",
                    f"{where}: {sp.topic(x)} holds {value_name(have.get(x, 0))}, but replaying "
                    f"thread {w}'s writes gives {value_name(want)} (its last write: {after})",
                )
        end = 2 + max((g.resp[-1] for g in h.logs if len(g)), default=0)
        for x in sp.shared:
            self.sh_ops[x].append((end, end + 1, _EQ, have.get(x, 0), 0, self.n, -1, -1))

    # ----------------------------------------------------- shared: search
    def _search(self, x: int, ops: list[tuple[int, ...]]) -> None:
        """The just-in-time linearizability search for one shared topic
        (:meth:`stress.harness.checker._Checker._check_object`, for a
        register: the state is the value held, 0 when absent)."""
        ops.sort(key=itemgetter(0))
        configs: set[tuple[int, int]] = {(0, 0)}
        pending: dict[int, tuple[int, ...]] = {}
        heap: list[tuple[int, int]] = []
        recent: deque[tuple[int, ...]] = deque(maxlen=6)

        def step(st: int, op: tuple[int, ...]) -> int:
            code, a, b = op[2], op[3], op[4]
            if code == _PUT:
                return a if (st == 0) == bool(b) else -1
            if code == _REM:
                return 0 if (st != 0) == bool(b) else -1
            if code == _POP:
                return 0 if st == a else -1
            return st if st == a else -1

        def respond(slot: int) -> bool:
            nonlocal configs
            op = pending[slot]
            bit = 1 << slot
            if op[2] in (_READ, _EQ) and all(o[2] in (_READ, _EQ) for o in pending.values()):
                new = {(st, lm & ~bit) for st, lm in configs if lm & bit or st == op[3]}
            else:
                seen = set(configs)
                stack = list(configs)
                items = [(1 << sl, o) for sl, o in pending.items()]
                while stack:
                    st, lm = stack.pop()
                    for b2, o in items:
                        if lm & b2:
                            continue
                        nst = step(st, o)
                        if nst < 0:
                            continue
                        c = (nst, lm | b2)
                        if c not in seen:
                            seen.add(c)
                            stack.append(c)
                new = {(st, lm & ~bit) for st, lm in seen if lm & bit}
            if not new:
                self._search_violation(x, op, configs, pending, recent)
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
                ((st, _),) = configs
                nst = step(st, op)
                if nst < 0:
                    self._search_violation(x, op, configs, {op[5]: op}, recent)
                    return
                configs = {(nst, 0)}
                recent.append(op)
                continue
            while heap and heap[0][0] < inv:
                _, slot = heapq.heappop(heap)
                if not respond(slot):
                    return
            slot = op[5]
            if slot in pending:  # widened perf_counter_ns stamps: program order wins
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

    def _op_text(self, op: tuple[int, ...]) -> str:
        t, pos = op[6], op[7]
        if t < 0:
            return "the final contents of the index"
        return self.h.describe(t, pos)

    def _search_violation(
        self,
        x: int,
        op: tuple[int, ...],
        configs: set[tuple[int, int]],
        pending: dict[int, tuple[int, ...]],
        recent: deque[tuple[int, ...]],
    ) -> None:
        sp = self.sp
        code, a, b = op[2], op[3], op[4]
        if code == _PUT:
            need = "absent before it" if b else "present before it"
        elif code == _REM:
            need = "present before it" if b else "absent before it"
        else:
            need = f"holding {value_name(a)}"
        states = " or ".join(sorted({value_name(st) for st, _ in configs}))
        others = "; ".join(self._op_text(o) for o in pending.values() if o is not op) or "none"
        prev = "; ".join(self._op_text(o) for o in recent) or "none"
        what = self._op_text(op)
        if code == _READ and self.h.logs[op[6]].kind[op[7]] != GET:
            what += f" (it saw {sp.topic(x)} as {value_name(a)})"
        self.add(
            "linearizability" if code != _EQ else "final",
            f"shared {sp.topic(x)}: no linearization explains {what} (needs the topic "
            f"{need}); it can only hold {states} by then. Concurrent: {others}. Last "
            f"completed: {prev}",
        )
