"""The ``content`` scenario: one :class:`cstrie.content.ContentIndex` bound,
unbound and matched by several threads at once, every operation recorded
and checked (:mod:`stress.harness.content_checker`).

``python -m stress.harness --scenario content`` (see
:mod:`stress.harness.content_cli`).

The space (:func:`build_space`)
-------------------------------
``--keys`` bindings, dealt round-robin to the threads: binding ``b`` is
(criteria, subscriber ``b``, topic filter or None) and only its owner binds
and unbinds it, so its state is a sequence of the owner's operations.
Criteria are drawn over 4 fields and a few values (every leaf kind: presence,
equality on str/int/float/bool/bytes/None, sets, prefixes, suffixes, ranges,
negation, all/any nested), and many bindings share criteria, so that
threads write the same index keys at once.  Messages: ``MESSAGES`` field
dicts (with NaN, bool vs int, values of no criterion type) and topics over
the dialect's words.  Which binding a message satisfies is decided by the
slow evaluator ``tests/support/content_oracle.py`` (written from the rules,
not with ``Criterion.test``), once per (message, binding) before the run.

The run (:func:`record_content`)
--------------------------------
Each thread binds a seeded half of its bindings, then, released by a
barrier, runs ``--ops`` operations: ``--mix R/W`` percent ``match``es of a
random message and writes (a binding of its own toggled: ``bind`` if it is
out, ``unbind`` if it is in).  Every ``--snapshot-every``-th operation is a
``snapshot()`` matched right away with two messages, and matched again with
the same two when the thread takes its next one (the index has moved on, the
snapshot must not have).  Each operation is stamped before and after by the
shared clock; results are kept as sorted binding numbers.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

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
from stress.harness.clock import Clock
from stress.harness.progress import Progress

__all__ = [
    "BIND",
    "MATCH",
    "SNAPSHOT",
    "UNBIND",
    "ContentHistory",
    "ContentSpace",
    "Op",
    "build_space",
    "expected_of",
    "record_content",
]

BIND, UNBIND, MATCH, SNAPSHOT = "bind", "unbind", "match", "snapshot"
MESSAGES = 96
FIELDS = ["a", "b", "c", "d.e"]
TEXTS = ["", "x", "xy", "yx", "x.y", "é"]
VALUES: list[Any] = [*TEXTS, 0, 1, -1, 1.0, 0.5, -0.0, True, False, None, b"x", 2**70]
MESSAGE_VALUES: list[Any] = [*VALUES, float("nan"), [1], float("inf")]
WORDS = ["a", "b", "c"]

_content_oracle: ModuleType | None = None


def content_oracle() -> ModuleType:
    """``tests/support/content_oracle.py``, the slow evaluator (loaded from
    its file with ``tests/support`` on the path: it imports ``oracle``)."""
    global _content_oracle
    if _content_oracle is None:
        support = Path(__file__).resolve().parents[2] / "tests" / "support"
        if str(support) not in sys.path:
            sys.path.insert(0, str(support))
        spec = importlib.util.spec_from_file_location(
            "cstrie_stress_content_oracle", support / "content_oracle.py"
        )
        if spec is None or spec.loader is None:  # pragma: no cover
            raise ImportError(f"cannot load the slow evaluator in {support}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _content_oracle = mod
    return _content_oracle


@dataclass
class ContentSpace:
    """Bindings (criteria, topic filter, owner thread) and messages (fields,
    topic), and ``holds[m]``: the bindings message ``m`` satisfies when they
    are bound (frozen sets of binding numbers)."""

    dialect: str
    criteria: list[Criterion]
    topics: list[str | None]
    owner: list[int]
    messages: list[tuple[dict[str, Any], str | None]]
    holds: list[frozenset[int]]
    threads: int


def _leaf(r: random.Random) -> Criterion:
    f, k = r.choice(FIELDS), r.randrange(7)
    if k == 0:
        return Has(f)
    if k == 1:
        return Eq(f, r.choice(VALUES))
    if k == 2:
        return OneOf(f, r.sample(VALUES, 3))
    if k == 3:
        return Prefix(f, r.choice(TEXTS))
    if k == 4:
        return Suffix(f, r.choice(TEXTS))
    lo = r.choice([None, -1, 0, 0.5])
    return Range(f, lo, r.choice([None, 1, 2**70]), low_inclusive=r.random() < 0.5)


def _criterion(r: random.Random, depth: int = 1) -> Criterion:
    k = r.randrange(7) if depth < 3 else 6
    if k in (0, 1):
        return AllOf(*(_criterion(r, depth + 1) for _ in range(r.randrange(1, 4))))
    if k == 2:
        return AnyOf(*(_criterion(r, depth + 1) for _ in range(r.randrange(1, 4))))
    if k == 3:
        return Not(_criterion(r, depth + 1))
    return _leaf(r)


def _topic(sep: str, r: random.Random) -> str:
    return sep.join(r.choice(WORDS) for _ in range(r.randint(1, 3)))


def build_space(dialect: str, keys: int, threads: int, seed: int) -> ContentSpace:
    """The bindings and messages of a run (``ValueError`` for too few keys)."""
    if keys < 2 * threads:
        raise ValueError(f"--keys {keys}: too few bindings for {threads} threads (2 each)")
    r = random.Random(f"content/{seed}/{dialect}/{keys}")
    idx = ContentIndex(dialect)
    d = idx.dialect
    sep, multi = d.separator, d.multi
    filters: list[str | None] = [None, None, None, multi, f"a{sep}{multi}", f"{d.single}{sep}b"]
    pool = [_criterion(r) for _ in range(max(8, keys // 3))]  # shared criteria
    criteria = [r.choice(pool) for _ in range(keys)]
    topics = [r.choice(filters) for _ in range(keys)]
    owner = [b % threads for b in range(keys)]
    messages = []
    for _ in range(MESSAGES):
        fields = {
            f: r.choice(MESSAGE_VALUES) for f in r.sample(FIELDS, r.randrange(len(FIELDS) + 1))
        }
        messages.append((fields, None if r.random() < 0.2 else _topic(sep, r)))
    co = content_oracle()
    holds = [
        frozenset(
            b
            for b in range(keys)
            if co.expected([(criteria[b], b, topics[b])], fields, topic, dialect)
        )
        for fields, topic in messages
    ]
    return ContentSpace(dialect, criteria, topics, owner, messages, holds, threads)


def expected_of(space: ContentSpace, m: int, bound: set[int]) -> frozenset[int]:
    """The slow evaluator's answer to message ``m`` with ``bound`` bound."""
    return space.holds[m] & frozenset(bound)


@dataclass
class Op:
    """One recorded operation: ``b`` the binding (writes), ``reads`` the
    (message, answer) pairs (a match: one; a snapshot: its reads, the later
    ones appended when they are made), ``ok`` what a write returned."""

    kind: str
    start: int
    end: int
    b: int = -1
    ok: bool = True
    reads: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    error: str | None = None


@dataclass
class ContentHistory:
    space: ContentSpace
    initial: set[int]
    ops: list[list[Op]]
    final: list[int]
    final_len: int
    seconds: float

    def n_timed(self) -> int:
        return sum(len(o) for o in self.ops)

    def kind_counts(self) -> dict[str, int]:
        out = dict.fromkeys((BIND, UNBIND, MATCH, SNAPSHOT), 0)
        for ops in self.ops:
            for op in ops:
                out[op.kind] += 1
        return out


def _answer(subscribers: list[Any]) -> tuple[int, ...]:
    return tuple(sorted(subscribers))


def record_content(
    space: ContentSpace,
    ops: int,
    seed: int,
    clock: Clock,
    progress: Progress,
    label: str,
    *,
    read_percent: int,
    snapshot_every: int,
    index: ContentIndex | None = None,
    timeout: float | None = None,
) -> ContentHistory:
    """Run the threads on ``index`` (a fresh one of the space's dialect by
    default; tests pass broken ones) and return what they did."""
    import time

    idx = index if index is not None else ContentIndex(space.dialect)
    n = space.threads
    initial: set[int] = set()
    states: list[set[int]] = []
    for t in range(n):
        r = random.Random(f"{seed}/{t}/init")
        mine = {b for b in range(len(space.criteria)) if space.owner[b] == t and r.random() < 0.5}
        for b in mine:
            idx.bind(space.criteria[b], b, space.topics[b])
        initial |= mine
        states.append(set(mine))
    logs: list[list[Op]] = [[] for _ in range(n)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)
    done = [0] * n

    def worker(t: int) -> None:
        r = random.Random(f"{seed}/{t}/ops")
        stamp = clock.stamper()
        log = logs[t]
        mine = [b for b in range(len(space.criteria)) if space.owner[b] == t]
        bound = states[t]
        pending: Op | None = None
        pending_snap: Any = None
        nm = len(space.messages)
        barrier.wait()
        for pos in range(ops):
            if snapshot_every and pos % snapshot_every == snapshot_every - 1:
                if pending is not None:
                    for m, _ in list(pending.reads[:2]):
                        f, tp = space.messages[m]
                        pending.reads.append((m, _answer(pending_snap.match(f, tp))))
                s = stamp()
                snap = idx.snapshot()
                e = stamp()
                op = Op(SNAPSHOT, s, e)
                for m in (r.randrange(nm), r.randrange(nm)):
                    f, tp = space.messages[m]
                    op.reads.append((m, _answer(snap.match(f, tp))))
                log.append(op)
                pending, pending_snap = op, snap
            elif r.randrange(100) < read_percent:
                m = r.randrange(nm)
                f, tp = space.messages[m]
                s = stamp()
                try:
                    got = idx.match(f, tp)
                except Exception as exc:
                    log.append(Op(MATCH, s, stamp(), error=repr(exc)))
                    continue
                e = stamp()
                log.append(Op(MATCH, s, e, reads=[(m, _answer(got))]))
            else:
                b = r.choice(mine)
                c, tp = space.criteria[b], space.topics[b]
                kind = UNBIND if b in bound else BIND
                s = stamp()
                ok = idx.unbind(c, b, tp) if kind == UNBIND else idx.bind(c, b, tp)
                e = stamp()
                (bound.discard if kind == UNBIND else bound.add)(b)
                log.append(Op(kind, s, e, b=b, ok=ok))
            done[t] = pos + 1
        if pending is not None:
            for m, _ in list(pending.reads[:2]):
                f, tp = space.messages[m]
                pending.reads.append((m, _answer(pending_snap.match(f, tp))))

    def wrap(t: int) -> None:
        try:
            worker(t)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=wrap, args=(t,), daemon=True) for t in range(n)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    total = ops * n
    deadline = None if timeout is None else t0 + timeout
    for th in threads:
        while th.is_alive():
            th.join(0.2)
            progress.step(label, sum(done), total)
            if deadline is not None and time.perf_counter() > deadline:
                from stress.harness.runner import HangError

                raise HangError(f"{label}: threads still running after {timeout} s")
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    final = sorted(s for s in (x.subscriber for x in idx.bindings()))
    return ContentHistory(space, initial, logs, final, len(idx), seconds)
