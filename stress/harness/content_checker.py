"""Checks of a recorded ``content`` run (:mod:`stress.harness.content`).

A binding's state is known between its owner's operations and unknown
while one is in flight (its effect lands somewhere inside the call's
stamps).  A read -- a ``match``, or a snapshot's reads, all judged at the
``snapshot()`` call -- passes when some ONE moment t inside its call has,
for every binding the message satisfies, a possible state that gives the
answer: bindings in the answer bound at t, the others unbound at t.  It
fails when the moments where some binding's known state contradicts the
answer cover the whole call.

========== ===============================================================
``state``  every read is the slow evaluator's answer on one state of its call
``snapshot`` a snapshot answers a message again as it did at first
``writes`` ``bind``/``unbind`` of a binding only its owner writes return True
``errors`` no operation raised
``final``  the index's final bindings and ``len`` are the owners' last states
========== ===============================================================
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from stress.harness.content import BIND, MATCH, SNAPSHOT, UNBIND, ContentHistory, Op

__all__ = ["CONTENT_CHECKS", "ContentReport", "check_content"]

CONTENT_CHECKS = {
    "state": "every answer is the slow evaluator's on one state during its call",
    "snapshot": "a snapshot answers a message again as it did at first",
    "writes": "bind/unbind of an owned binding return True",
    "errors": "no operation raised",
    "final": "final bindings and len are the owners' last states",
}
SHOWN = 20


@dataclass
class ContentReport:
    counts: dict[str, int] = field(default_factory=dict)
    violations: list[tuple[str, str]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def ok(self) -> bool:
        return self.total == 0

    def flag(self, check: str, message: str) -> None:
        self.counts[check] = self.counts.get(check, 0) + 1
        if len(self.violations) < SHOWN:
            self.violations.append((check, message))

    def to_dict(self) -> dict[str, Any]:
        return {
            "violations": self.total,
            "counts": {k: self.counts.get(k, 0) for k in CONTENT_CHECKS},
            "shown": [{"check": c, "message": m} for c, m in self.violations],
            "stats": self.stats,
        }


class _Timeline:
    """One binding's writes, in its owner's order: ``known[i]`` is the state
    on the open interval (``ends[i-1]``, ``starts[i]``) (``ends[-1]`` is -inf)."""

    def __init__(self, initial: bool, writes: list[Op]) -> None:
        self.starts = [w.start for w in writes]
        self.ends = [w.end for w in writes]
        self.known = [initial] + [w.kind == BIND for w in writes]

    def in_flight(self, lo: int, hi: int) -> bool:
        """Does a write of this binding overlap (lo, hi)?"""
        i = bisect.bisect_right(self.ends, lo)
        return i < len(self.starts) and self.starts[i] < hi

    def forbidden(self, want: bool, lo: int, hi: int) -> list[tuple[float, float]]:
        """The open intervals inside (lo, hi) where the state is known to
        differ from ``want``."""
        out: list[tuple[float, float]] = []
        i = bisect.bisect_right(self.ends, lo)  # first write ending after lo
        while True:
            a = float("-inf") if i == 0 else self.ends[i - 1]
            b = float("inf") if i == len(self.starts) else self.starts[i]
            if a >= hi:
                break
            if self.known[i] != want and b > lo:
                out.append((max(a, lo), min(b, hi)))
            if i == len(self.starts):
                break
            i += 1
        return out


def _covered(lo: int, hi: int, intervals: list[tuple[float, float]]) -> bool:
    """Do the open ``intervals`` cover every moment of the open (lo, hi)?"""
    cur: float = lo
    for a, b in sorted(intervals):
        if a > cur or (a == cur and cur != lo):
            return False  # (cur, a) or the point cur is left free
        cur = max(cur, b)
        if cur >= hi:
            return True
    return cur >= hi


def _judge(
    h: ContentHistory, lines: dict[int, _Timeline], op: Op, reads: list[tuple[int, tuple[int, ...]]]
) -> str | None:
    """Why no one state in ``op``'s call gives ``reads``, or None."""
    bad: list[tuple[float, float]] = []
    for m, answer in reads:
        got = set(answer)
        holds = h.space.holds[m]
        extra = got - holds
        if extra:
            return f"message {m} answered {sorted(extra)}, which it does not satisfy"
        for b in holds:
            bad.extend(lines[b].forbidden(b in got, op.start, op.end))
    if _covered(op.start, op.end, bad):
        return "no state during the call gives these answers"
    return None


def check_content(h: ContentHistory, step: Any = None) -> ContentReport:
    rep = ContentReport()
    writes: dict[int, list[Op]] = {b: [] for b in range(len(h.space.criteria))}
    for ops in h.ops:
        for op in ops:
            if op.kind in (BIND, UNBIND):
                writes[op.b].append(op)
    lines = {b: _Timeline(b in h.initial, w) for b, w in writes.items()}
    reads = contended = 0
    for t, ops in enumerate(h.ops):
        for pos, op in enumerate(ops):
            where = f"thread {t} op {pos} ({op.kind} [{op.start}, {op.end}])"
            if op.error is not None:
                rep.flag("errors", f"{where} raised {op.error}")
                continue
            if op.kind in (BIND, UNBIND):
                if not op.ok:
                    rep.flag("writes", f"{where} of binding {op.b} returned False")
                continue
            first = op.reads if op.kind == MATCH else op.reads[:2]
            reads += len(first)
            why = _judge(h, lines, op, first)
            if why is not None:
                rep.flag("state", f"{where}: {why}: {first}")
            if any(
                lines[b].in_flight(op.start, op.end) for m, _ in first for b in h.space.holds[m]
            ):
                contended += 1
            if op.kind == SNAPSHOT:
                for k, (m, answer) in enumerate(op.reads[2:]):
                    if (m, answer) != op.reads[k]:
                        rep.flag(
                            "snapshot",
                            f"{where}: message {m} answered {answer}, "
                            f"then {op.reads[k][1]} at first",
                        )
        if step is not None:
            step("check content", t + 1, len(h.ops))
    last = {b for b in h.initial}
    for b, w in writes.items():
        if w:
            (last.add if w[-1].kind == BIND else last.discard)(b)
    if h.final != sorted(last) or h.final_len != len(last):
        rep.flag(
            "final",
            f"final bindings {h.final} (len {h.final_len}), owners last bound {sorted(last)}",
        )
    rep.stats = {
        "operations": h.n_timed(),
        "kinds": h.kind_counts(),
        "reads_judged": reads,
        "reads_contended": contended,
        "bindings": len(h.space.criteria),
    }
    return rep
