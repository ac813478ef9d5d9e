"""Running the workload on N threads: timed (measure) and recorded (check) runs.

Both kinds of run give every worker thread its *own* Python objects for the hot
path, built inside the thread before the start barrier: topic and pattern
strings, subscriber ints, bound methods and (for cstrie) a ``Trie.matcher()``.
Only the trie itself is shared -- as it would be in a broker.  A
``LOOKUP_MANY`` op's argument is the thread's own list of its batch's topics.

* :func:`measure` runs the ops with no recording and reports throughput, plus
  the CPU time the workers got (``cpu_per_wall`` close to the thread count
  means they really ran in parallel; close to 1 means they took turns -- a
  lock, or a machine busy with something else).
* :func:`record` stamps every op with the shared clock and keeps what it
  returned, producing a :class:`~stress.harness.history.History` to check.
"""

from __future__ import annotations

import sys
import threading
import time

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None  # type: ignore[assignment]
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stress.harness.clock import Clock
from stress.harness.history import History, OpError, SnapshotView, ThreadHistory
from stress.harness.impls import Impl
from stress.harness.progress import Counter, Progress
from stress.harness.workload import (
    BASE,
    LOOKUP,
    LOOKUP_MANY,
    LOOKUP_TRIE,
    SNAPSHOT,
    SUBSCRIBE,
    UNSUBSCRIBE,
    KeySpace,
    OpSequence,
)

__all__ = ["HangError", "MeasureResult", "measure", "record"]

CHUNK = 512


@dataclass
class MeasureResult:
    impl: str
    threads: int
    ops: int
    seconds: float
    cpu_seconds: float
    lookups: int
    updates: int
    snapshots: int
    #: voluntary context switches of the workers (they blocked: a lock wait)
    waits: int = 0
    #: involuntary ones (preempted: other runnable threads or processes)
    preempted: int = 0

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def ops_per_cpu_s(self) -> float:
        """Operations per CPU-second the workers got: unlike ops/s this does not
        drop when other processes take the cores, only when the work per op grows
        (contended cache lines, spinning)."""
        return self.ops / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def cpu_per_wall(self) -> float:
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "impl": self.impl,
            "threads": self.threads,
            "ops": self.ops,
            "seconds": round(self.seconds, 4),
            "ops_per_s": round(self.ops_per_s, 1),
            "cpu_seconds": round(self.cpu_seconds, 4),
            "cpu_per_wall": round(self.cpu_per_wall, 3),
            "ops_per_cpu_s": round(self.ops_per_cpu_s, 1),
            "lookups": self.lookups,
            "updates": self.updates,
            "snapshots": self.snapshots,
            "voluntary_context_switches": self.waits,
            "involuntary_context_switches": self.preempted,
        }


def _switches() -> tuple[int, int]:
    """(voluntary, involuntary) context switches of the calling thread so far."""
    who = getattr(resource, "RUSAGE_THREAD", None) if resource is not None else None
    if who is None:
        return 0, 0
    r = resource.getrusage(who)
    return r.ru_nvcsw, r.ru_nivcsw


def _fresh_str(s: str) -> str:
    """An equal str that is a new object (owned by the calling thread)."""
    return s.encode().decode()


#: What a worker subscribes (``measure`` only; a recorded run's checker
#: reads ``BASE + s`` ints): ``int``, new int objects made by each thread (the
#: default: a lookup hands every thread the registered one, whose reference
#: count the threads then share); ``interned``, interned strings (immortal on
#: CPython 3.13t: no count is changed).
SUBSCRIBER_KINDS = ("int", "interned")


def _subscribers(n: int, kind: str) -> list[Any]:
    if kind == "interned":
        return [sys.intern(f"s{s}") for s in range(n)]
    return [BASE + s for s in range(n)]  # new int objects


class _ThreadObjects:
    """The per-thread objects for one op sequence, built in the worker thread."""

    def __init__(self, ks: KeySpace, seq: OpSequence, subscribers: str = "int") -> None:
        topics = [_fresh_str(t) for t in ks.topics]
        patterns = [_fresh_str(p) for p in ks.patterns]
        subs = _subscribers(len(ks.cands), subscribers)
        cands = ks.cands
        self.topics = topics
        self.initial = [(patterns[cands[s][b]], subs[s]) for s, b in seq.initial]
        batches = [[topics[ti] for ti in batch] for batch in ks.batches]
        a: list[Any] = []
        x: list[Any] = []
        for kind, arg, bit in zip(seq.kind, seq.arg, seq.bit, strict=True):
            if kind == SUBSCRIBE or kind == UNSUBSCRIBE:
                a.append(patterns[cands[arg][bit]])
                x.append(subs[arg])
            elif kind == LOOKUP_MANY:
                a.append(batches[arg])
                x.append(None)
            else:
                a.append(topics[arg])
                x.append(None)
        self.chunks = [
            (seq.kind[i : i + CHUNK], a[i : i + CHUNK], x[i : i + CHUNK])
            for i in range(0, len(seq.kind), CHUNK)
        ]


class HangError(RuntimeError):
    """Worker threads did not finish in time (a hung or livelocked operation)."""


class _Run:
    """Threads, a start barrier and error collection for one run."""

    def __init__(self, n: int, timeout: float) -> None:
        self.timeout = timeout
        self.barrier = threading.Barrier(n + 1)
        self.errors: list[BaseException] = []
        self.counters = [Counter() for _ in range(n)]

    def start(self, target: Callable[[int], None], n: int) -> list[threading.Thread]:
        def wrap(t: int) -> None:
            try:
                target(t)
            except BaseException as exc:
                self.errors.append(exc)
                self.barrier.abort()

        threads = [
            threading.Thread(target=wrap, args=(t,), name=f"harness-worker-{t}") for t in range(n)
        ]
        for th in threads:
            th.start()
        return threads

    def go(
        self,
        target: Callable[[int], None],
        n: int,
        progress: Progress,
        label: str,
        total: int | None,
        duration: float | None,
    ) -> None:
        """Start n workers, release them together, show progress until they
        end, and join them (:class:`HangError` past the timeout)."""
        threads = self.start(target, n)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            pass
        progress.watch(label, self.counters, total, duration)
        try:
            self.join(threads)
        finally:
            progress.done()

    def join(self, threads: list[threading.Thread]) -> None:
        deadline = time.monotonic() + self.timeout
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
        stuck = [th.name for th in threads if th.is_alive()]
        if stuck:
            raise HangError(
                f"{', '.join(stuck)} still running {self.timeout:g} s after the start: "
                "an operation hangs or livelocks"
            )
        if self.errors:
            raise RuntimeError(f"a worker thread failed: {self.errors[0]!r}") from self.errors[0]


def _kind_counts(seqs: list[OpSequence], done: list[int]) -> tuple[int, int, int]:
    lookups = updates = snaps = 0
    for seq, n in zip(seqs, done, strict=True):
        if not len(seq):
            continue
        full, rest = divmod(n, len(seq))
        for part, times in ((seq.kind, full), (seq.kind[:rest], 1)):
            if not times:
                continue
            lookups += times * (
                part.count(LOOKUP) + part.count(LOOKUP_TRIE) + part.count(LOOKUP_MANY)
            )
            updates += times * (part.count(SUBSCRIBE) + part.count(UNSUBSCRIBE))
            snaps += times * part.count(SNAPSHOT)
    return lookups, updates, snaps


def measure(
    impl: Impl,
    ks: KeySpace,
    seqs: list[OpSequence],
    dialect: str,
    duration: float | None,
    progress: Progress,
    label: str,
    timeout: float = 600.0,
    subscribers: str = "int",
) -> MeasureResult:
    """Run ``seqs`` (one per thread) without recording; ``duration`` seconds
    (cycling through each sequence) or, when None, each sequence once.
    ``subscribers``: one of :data:`SUBSCRIBER_KINDS`."""
    n = len(seqs)
    state = impl.create(dialect)
    run = _Run(n, timeout)
    starts = [0.0] * n
    ends = [0.0] * n
    cpus = [0.0] * n
    done = [0] * n
    switches = [(0, 0)] * n

    def worker(t: int) -> None:
        b = impl.bind(state)
        objs = _ThreadObjects(ks, seqs[t], subscribers)
        for pattern, sub in objs.initial:
            b.subscribe(pattern, sub)
        lookup, lookup_trie, lookup_many = b.lookup, b.lookup_trie, b.lookup_many
        subscribe, unsubscribe, snapshot = b.subscribe, b.unsubscribe, b.snapshot
        chunks = objs.chunks
        counter = run.counters[t]
        clock = time.perf_counter
        count = 0
        run.barrier.wait()
        cpu0 = time.thread_time()
        sw0 = _switches()
        t0 = clock()
        deadline = t0 + duration if duration is not None else None
        while True:
            for kinds, args, subs in chunks:
                for k, a, x in zip(kinds, args, subs, strict=True):
                    if k == 0:
                        lookup(a)
                    elif k == 1:
                        subscribe(a, x)
                    elif k == 2:
                        unsubscribe(a, x)
                    elif k == 3:
                        snapshot()
                    elif k == 4:
                        lookup_trie(a)
                    else:
                        lookup_many(a)
                count += len(kinds)
                counter.done = count
                if deadline is not None and clock() >= deadline:
                    break
            else:
                if deadline is not None:
                    continue
            break
        ends[t] = clock()
        cpus[t] = time.thread_time() - cpu0
        sw1 = _switches()
        switches[t] = (sw1[0] - sw0[0], sw1[1] - sw0[1])
        starts[t] = t0
        done[t] = count

    total = None if duration is not None else sum(len(s) for s in seqs)
    run.go(worker, n, progress, label, total, duration)
    lookups, updates, snaps = _kind_counts(seqs, done)
    return MeasureResult(
        impl=impl.name,
        threads=n,
        ops=sum(done),
        seconds=max(ends) - min(starts),
        cpu_seconds=sum(cpus),
        lookups=lookups,
        updates=updates,
        snapshots=snaps,
        waits=sum(v for v, _ in switches),
        preempted=sum(i for _, i in switches),
    )


def record(
    impl: Impl,
    ks: KeySpace,
    seqs: list[OpSequence],
    dialect: str,
    duration: float | None,
    clock: Clock,
    progress: Progress,
    label: str,
    timeout: float = 600.0,
) -> tuple[History, float]:
    """Run ``seqs`` recording every op (see :mod:`stress.harness.history`).

    Returns the history and the wall time of the recorded part."""
    n = len(seqs)
    state = impl.create(dialect)
    run = _Run(n, timeout)
    hists = [ThreadHistory(t) for t in range(n)]
    starts = [0.0] * n
    ends = [0.0] * n

    def worker(t: int) -> None:
        b = impl.bind(state)
        objs = _ThreadObjects(ks, seqs[t])
        seq = seqs[t]
        h = hists[t]
        stamp = clock.stamper()
        inv_add, resp_add, res_add = h.inv.append, h.resp.append, h.result.append
        subscribe = b.subscribe
        for (pattern, sub), (s, bit) in zip(objs.initial, seq.initial, strict=True):
            i0 = stamp()
            r = subscribe(pattern, sub)
            i1 = stamp()
            h.kind.append(SUBSCRIBE)
            h.arg.append(s)
            h.bit.append(bit)
            inv_add(i0)
            resp_add(i1)
            res_add(r)
        h.n_initial = len(seq.initial)
        lookup, lookup_trie, lookup_many = b.lookup, b.lookup_trie, b.lookup_many
        unsubscribe, snapshot, read = b.unsubscribe, b.snapshot, b.read_snapshot
        counter = run.counters[t]
        perf = time.perf_counter
        count = 0
        passes = 0
        run.barrier.wait()
        t0 = perf()
        deadline = t0 + duration if duration is not None else None
        while True:
            for kinds, args, subs in objs.chunks:
                for k, a, x in zip(kinds, args, subs, strict=True):
                    i0 = stamp()
                    try:
                        if k == 0:
                            r = lookup(a)
                        elif k == 1:
                            r = subscribe(a, x)
                        elif k == 2:
                            r = unsubscribe(a, x)
                        elif k == 3:
                            r = snapshot()
                        elif k == 4:
                            r = lookup_trie(a)
                        else:
                            r = lookup_many(a)
                    except Exception as exc:
                        r = OpError(repr(exc))
                    i1 = stamp()
                    if k == 3 and not isinstance(r, OpError):
                        try:
                            r = SnapshotView(*read(r, a))
                        except Exception as exc:
                            r = OpError(f"reading the snapshot: {exc!r}")
                    inv_add(i0)
                    resp_add(i1)
                    res_add(r)
                count += len(kinds)
                counter.done = count
                if deadline is not None and perf() >= deadline:
                    break
            else:
                passes += 1
                if deadline is not None:
                    continue
            break
        ends[t] = perf()
        starts[t] = t0
        # The op lists of the history: the sequence, cycled as often as it ran.
        reps = -(-count // len(seq)) if len(seq) else 0
        for src, dst in ((seq.kind, h.kind), (seq.arg, h.arg), (seq.bit, h.bit)):
            dst.extend((src * reps)[:count])

    total = None if duration is not None else sum(len(s) for s in seqs)
    run.go(worker, n, progress, label, total, duration)
    final = impl.final(state)
    history = History(
        keyspace=ks,
        threads=hists,
        final_pairs=final.pairs,
        final_length=final.length,
        invariant_error=final.invariant_error,
        impl=impl.name,
        clock=clock.kind,
    )
    return history, max(ends) - min(starts)
