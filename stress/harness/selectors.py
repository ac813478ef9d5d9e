"""``python -m stress.harness --scenario selectors``: one
:class:`cstrie.selectors.SelectorIndex` under threads, every answer checked.

Each of n threads owns ``--keys`` subscribers (only it adds and removes their
selectors, so each subscriber's states follow one another in the order that
thread made them) and runs ``--ops`` operations drawn from a seeded pool of
selectors of every kind and a pool of topics: ``--mix R/W`` percent reads
(a lookup on the live index, which goes through the result cache and its
watermarks, or a lookup on a snapshot taken at once) and writes (``add`` or
``remove`` of one selector, now and then ``remove_subscriber``).  Every call
is stamped with a monotonic clock before and after.

The checks (0 violations expected):

* ``own-writes``: each write's return value is the one its subscriber's own
  history gives (``add`` True iff it did not hold the selector, ...);
* ``lookup``: for every subscriber, its presence in a live lookup's answer
  is what brute force (every selector of it tested with the kind's matcher)
  gives on one of its states that may have been current between the call's
  start and end; no subscriber twice;
* ``snapshot``: a snapshot's lookup equals brute force over the snapshot's
  own subscriptions, in the same order, and each subscriber's selectors in
  it are one of its states possible during the ``snapshot()`` call;
* ``final``: after the threads end, the index's subscriptions are exactly the
  last states and every topic's lookup equals brute force on them.

``--compact-min`` lowers the dead ids a compaction waits for
(:data:`cstrie.selectors.index.COMPACT_MIN`), so that a short run renumbers
the subscribers and empties the cache many times while readers read.

The full run (PYTHON_GIL=0 on a free-threaded interpreter)::

    python -m stress.harness --scenario selectors --thread-counts 2,4 \\
        --ops 20000 --seed 1 --no-progress
"""

from __future__ import annotations

import argparse
import bisect
import functools
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Report", "check_run", "main_selectors", "record_run"]

SELECTORS: list[tuple[str, str]] = [
    ("exact", "news/eu"),
    ("exact", "https://example.com/books/1"),
    ("glob", "news/*"),
    ("glob", "n?ws/e[a-u]"),
    ("glob", "*"),
    ("glob", "h[^e]llo"),
    ("glob", "https://example.com/*/1"),
    ("template", "https://example.com/books/{id}"),
    ("template", "https://example.com/{section}/1"),
    ("template", "*"),
    ("template", "news/eu"),
    ("template", "{+path}"),
    ("regex", r"news/\w+"),
    ("regex", "(hello|hallo)"),
    ("regex", r"https://example\.com/books/\d+"),
]
TOPICS = [
    "news/eu",
    "news/us",
    "nows/eu",
    "hallo",
    "hello",
    "hxllo",
    "https://example.com/books/1",
    "https://example.com/books/22",
    "https://example.com/music/1",
    "other",
    "",
]

READ, SNAP, ADD, REMOVE, DROP = "lookup", "snapshot", "add", "remove", "remove_subscriber"


@functools.cache
def _compiled(kind: str, text: str) -> Any:
    from cstrie.selectors import compile_selector

    return compile_selector(kind, text)


@functools.cache
def matches(kind: str, text: str, topic: str) -> bool:
    """Brute force: does the selector match the topic (its kind's matcher)?"""
    c = _compiled(kind, text)
    if c.match_all:
        return True
    if c.exact:
        return topic == c.text
    return bool(c.match(topic, topic.encode()))


def holds(state: frozenset[tuple[str, str]], topic: str) -> bool:
    return any(matches(k, t, topic) for k, t in state)


@dataclass
class Op:
    kind: str
    start: int
    end: int
    sub: str = ""
    selector: tuple[str, str] = ("", "")
    result: Any = None
    topic: str = ""
    snap_subs: dict[Any, frozenset[tuple[str, str]]] | None = None
    snap_order: list[Any] | None = None


@dataclass
class Report:
    counts: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    ops: int = 0
    judged: int = 0

    def fail(self, check: str, message: str) -> None:
        self.counts[check] = self.counts.get(check, 0) + 1
        if len(self.messages) < 20:
            self.messages.append(f"[{check}] {message}")

    @property
    def ok(self) -> bool:
        return not self.counts


def record_run(
    index: Any, threads: int, keys: int, ops: int, seed: int, read_percent: int
) -> list[list[Op]]:
    """Run ``threads`` threads on ``index``; each one's operations, in order."""
    logs: list[list[Op]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []
    clock = time.perf_counter_ns

    def work(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        log = logs[i]
        subs = [f"t{i}s{j}" for j in range(keys)]
        barrier.wait()
        try:
            for _ in range(ops):
                r = rng.randrange(100)
                if r < read_percent:
                    topic = rng.choice(TOPICS)
                    if rng.random() < 0.8:
                        t0 = clock()
                        res = index.lookup(topic)
                        log.append(Op(READ, t0, clock(), topic=topic, result=res))
                    else:
                        t0 = clock()
                        snap = index.snapshot()
                        t1 = clock()
                        res = snap.lookup(topic)
                        got = snap.subscriptions()
                        log.append(
                            Op(
                                SNAP,
                                t0,
                                t1,
                                topic=topic,
                                result=res,
                                snap_subs={s: frozenset(v) for s, v in got.items()},
                                snap_order=list(got),
                            )
                        )
                    continue
                sub = rng.choice(subs)
                sel = rng.choice(SELECTORS)
                kind = DROP if rng.random() < 0.05 else ADD if rng.random() < 0.55 else REMOVE
                t0 = clock()
                if kind == ADD:
                    res = index.add(sub, sel[1], sel[0])
                elif kind == REMOVE:
                    res = index.remove(sub, sel[1], sel[0])
                else:
                    res = index.remove_subscriber(sub)
                log.append(Op(kind, t0, clock(), sub=sub, selector=sel, result=res))
        except BaseException as exc:  # reported, not lost with the thread
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return logs


@dataclass
class Timeline:
    """One subscriber's writes in its owner's order (so their starts, and
    their ends, increase): ``starts[k]``, ``ends[k]`` of write k and
    ``states[k]``, the state after it; k = 0 is the empty state before any
    write."""

    starts: list[int] = field(default_factory=lambda: [-1])
    ends: list[int] = field(default_factory=lambda: [-1])
    states: list[frozenset[tuple[str, str]]] = field(default_factory=lambda: [frozenset()])


def _timelines(logs: list[list[Op]], report: Report) -> dict[str, Timeline]:
    """Each subscriber's states after each of its writes (from its owner's
    log), checking each write's return value (``own-writes``)."""
    lines: dict[str, Timeline] = {}
    for log in logs:
        state: dict[str, frozenset[tuple[str, str]]] = {}
        for op in log:
            if op.kind in (READ, SNAP):
                continue
            before = state.get(op.sub, frozenset())
            if op.kind == ADD:
                want: Any = op.selector not in before
                after = before | {op.selector}
            elif op.kind == REMOVE:
                want = op.selector in before
                after = before - {op.selector}
            else:
                want = len(before)
                after = frozenset()
            if op.result != want:
                report.fail(
                    "own-writes",
                    f"{op.kind}({op.sub}, {op.selector}) gave {op.result!r}, expected {want!r}",
                )
            state[op.sub] = after
            line = lines.setdefault(op.sub, Timeline())
            line.starts.append(op.start)
            line.ends.append(op.end)
            line.states.append(after)
    return lines


def _possible(line: Timeline, start: int, end: int) -> list[frozenset[tuple[str, str]]]:
    """The states of one subscriber that may have been current at some time
    in [start, end]: state k once write k may have begun before ``end``,
    until write k+1 surely ended before ``start``.  Two binary searches
    (the owner's writes are sequential), so checking a run is not quadratic
    in its writes."""
    first = bisect.bisect_left(line.ends, start) - 1  # write first+1 ends at or after start
    last = bisect.bisect_right(line.starts, end)  # writes before `last` began by end
    return line.states[max(first, 0) : last]


def check_run(index: Any, logs: list[list[Op]]) -> Report:
    report = Report()
    lines = _timelines(logs, report)
    for log in logs:
        for op in log:
            report.ops += 1
            if op.kind == READ:
                _check_lookup(op, lines, report)
            elif op.kind == SNAP:
                _check_snapshot(op, lines, report)
    final = {s: line.states[-1] for s, line in lines.items() if line.states[-1]}
    got = {s: frozenset(v) for s, v in index.subscriptions().items()}
    if got != final:
        report.fail(
            "final",
            f"subscriptions differ from the last states: {len(got)} vs {len(final)} subscribers",
        )
    order = list(index.subscriptions())
    for topic in TOPICS:
        want = [s for s in order if holds(got[s], topic)]
        if index.lookup(topic) != want:
            report.fail("final", f"lookup({topic!r}) = {index.lookup(topic)} != {want}")
    return report


def _check_lookup(op: Op, lines: dict[str, Timeline], report: Report) -> None:
    res = op.result
    if len(set(res)) != len(res):
        report.fail("lookup", f"lookup({op.topic!r}) lists a subscriber twice: {res}")
    present = set(res)
    for sub in present - lines.keys():
        report.fail("lookup", f"lookup({op.topic!r}) gave {sub!r}, which never subscribed")
    for sub, line in lines.items():
        report.judged += 1
        answers = {holds(st, op.topic) for st in _possible(line, op.start, op.end)}
        if (sub in present) not in answers:
            report.fail(
                "lookup",
                f"lookup({op.topic!r}) {'gave' if sub in present else 'missed'} {sub!r}; "
                f"no state of it during the call says so",
            )


def _check_snapshot(op: Op, lines: dict[str, Timeline], report: Report) -> None:
    subs, order = op.snap_subs, op.snap_order
    assert subs is not None and order is not None
    want = [s for s in order if holds(subs[s], op.topic)]
    if op.result != want:
        report.fail(
            "snapshot", f"snapshot lookup({op.topic!r}) = {op.result} != brute force {want}"
        )
    for sub in subs.keys() - lines.keys():
        report.fail("snapshot", f"snapshot holds {sub!r}, which never subscribed")
    for sub, line in lines.items():
        report.judged += 1
        if subs.get(sub, frozenset()) not in _possible(line, op.start, op.end):
            report.fail(
                "snapshot",
                f"snapshot holds {sub!r} as {sorted(subs.get(sub, ()))}, "
                "no state of it during snapshot()",
            )


def main_selectors(args: argparse.Namespace, argv: list[str] | None) -> int:
    from cstrie.selectors import SelectorIndex
    from cstrie.selectors import index as index_mod
    from stress.harness import report as rep
    from stress.harness import scenario_cli

    keys = args.keys if args.keys is not None else 16
    ops = args.ops if args.ops is not None else 20_000
    mix = args.mix or "70/30"
    try:
        read_percent = int(mix.split("/")[0])
        if not 0 <= read_percent <= 100:
            raise ValueError
    except ValueError:
        print(f"error: --mix {mix!r}: expected R/W percent", file=sys.stderr)
        return 2
    counts = scenario_cli.thread_counts(args, [2, 4])
    seed = scenario_cli.seed(args)
    compact = args.compact_min if args.compact_min is not None else 64
    env = rep.print_banner(argv, seed)
    print(
        f"scenario selectors: SelectorIndex, {len(SELECTORS)} selectors of 4 kinds, "
        f"{len(TOPICS)} topics, {keys} subscribers per thread, mix {mix}, thread counts "
        f"{counts}, {ops:,} ops/thread, compaction after {compact} dead ids"
    )
    if rep.gil_wrongly_on(env):
        return 2
    t_start = time.perf_counter()
    failed = False
    checks = []
    saved = index_mod.COMPACT_MIN
    index_mod.COMPACT_MIN = compact
    try:
        for n in counts:
            index = SelectorIndex(cache_bytes=args.cache or 1 << 20)
            t0 = time.perf_counter()
            logs = record_run(index, n, keys, ops, seed, read_percent)
            wall = time.perf_counter() - t0
            r = check_run(index, logs)
            cs = index.cache_stats()
            print(
                f"  {n} thread(s): {r.ops:,} operations in {wall:.2f} s, {r.judged:,} "
                f"subscriber answers judged; cache {cs['hits']:,} hits, {cs['refreshes']:,} "
                f"refreshes, {cs['clears']:,} clears"
            )
            for name in ("own-writes", "lookup", "snapshot", "final"):
                c = r.counts.get(name, 0)
                print(f"    {'FAIL' if c else 'ok  '} {name:<11} {c:>6} violation(s)")
            for m in r.messages:
                print(f"    VIOLATION {m}")
            failed |= not r.ok
            checks.append(
                {"threads": n, "ops": r.ops, "violations": sum(r.counts.values()), "cache": cs}
            )
    finally:
        index_mod.COMPACT_MIN = saved
    data: dict[str, Any] = {
        "command": env["command"],
        "scenario": "selectors",
        "seed": seed,
        "gil_enabled": env["gil_enabled"],
        "environment": env,
        "checks": checks,
        "violations": sum(c["violations"] for c in checks),
        "operations": sum(c["ops"] for c in checks),
    }
    return rep.finish(data, env, failed, t_start, seed, args.json)
