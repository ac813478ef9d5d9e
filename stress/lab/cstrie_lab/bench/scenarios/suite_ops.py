"""``suite-ops``: workload (a) of the classic-matchers suite -- subscribe, unsubscribe and lookup
cost, cold and hot, for cstrie and every classic matcher.

Workload (:func:`~cstrie_lab.bench.workloads.ops_workload`, AMQP, the method of the
"Fast Topic Matching" article): *cold* is an empty matcher, *hot* one holding
1,000 random 5-word subscriptions (16 words per level, ``*`` at levels 2-4 with
probability 0.1, a trailing ``#`` with probability 0.05).  Both also hold
``foo.*.baz.qux.quux`` for the lookups, which are of ``foo.W.baz.qux.quux``
topics (``W`` a random level-2 word; 512 of them).  The writes are 512 distinct
``foo.*.baz.qux.quux``-shaped patterns (``*`` second, vocabulary words elsewhere,
none among the hot ones), one new subscriber each.

Timing: one round times, per matcher, a batch of 32 subscribes on the cold
matcher, the 32 unsubscribes that undo them, the same on the hot matcher, then 32
lookups on the cold and on the hot one (the next 32 writes / topics each round).
Matchers take turns within a round, in an order that rotates every round; the
figure is the median ns per operation over the rounds.  Every matcher must
answer every lookup topic (and a sample of its topic space) as cstrie does
before anything is timed.  paho runs the exact MQTT translation of the workload;
the full inverted bitmap is given the topic space up front (the lookup topics
plus one topic filled from every hot and write pattern).

Floors: cstrie's lookup is faster than every other matcher's, hot and cold; the
full inverted bitmap and the lazy DFA (a baseline) are exempt and their gaps
reported.  The hot matcher's writes come before its lookups in every round, so
the lazy DFA's hot lookups run on a DFA its updates have just dropped; its cold
matcher is never written to, so its lookups run on a warm DFA.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cstrie_lab.bench import suite
from cstrie_lab.bench.base import BenchError, Context, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.timing import chunks, summarize, time_batch
from cstrie_lab.bench.workloads import ops_workload

NAME = "suite-ops"
DEFAULT = [1_000]
BATCH = 32
OPS = ("subscribe", "unsubscribe", "lookup")
STATES = ("cold", "hot")
CASES = tuple(f"{op} {state}" for op in OPS for state in STATES)


class _Cell:
    """One matcher: its cold-write, cold-lookup and hot instances and batches."""

    def __init__(self, kind: str, w: Any, hot: list[tuple[str, int]]) -> None:
        self.cold_w = suite.new_entry(kind, w.topic_space)
        self.cold_l = suite.new_entry(kind, w.topic_space)
        self.hot = suite.new_entry(kind, w.topic_space)
        e = self.hot
        subject = e.pairs([w.subject])
        self.cold_l.build(subject)
        self.hot.build(e.pairs(hot) + subject)
        self.label = e.label
        self.entries = (self.cold_w, self.cold_l, self.hot)
        writes = chunks(e.pairs(w.writes), BATCH)
        topics = chunks(e.topics(w.lookups), BATCH)
        self.batches: list[dict[str, Callable[[], object]]] = []
        for i in range(max(len(writes), len(topics))):
            b = writes[i % len(writes)]
            t = topics[i % len(topics)]
            self.batches.append(
                {
                    "subscribe cold": _subs(self.cold_w, b),
                    "unsubscribe cold": _unsubs(self.cold_w, b),
                    "subscribe hot": _subs(self.hot, b),
                    "unsubscribe hot": _unsubs(self.hot, b),
                    "lookup cold": self.cold_l.matcher.batch(t),
                    "lookup hot": self.hot.matcher.batch(t),
                }
            )
        self.round = 0

    def run_round(self) -> dict[str, float]:
        b = self.batches[self.round % len(self.batches)]
        self.round += 1
        # subscribe then unsubscribe on each instance, so it ends as it started
        return {
            case: time_batch(b[case], BATCH)
            for case in (
                "subscribe cold",
                "unsubscribe cold",
                "subscribe hot",
                "unsubscribe hot",
                "lookup cold",
                "lookup hot",
            )
        }


def _subs(e: suite.Entry, pairs: list[tuple[str, Any]]) -> Callable[[], object]:
    sub = e.matcher.ops()[0]

    def run() -> None:
        for p, s in pairs:
            sub(p, s)

    return run


def _unsubs(e: suite.Entry, pairs: list[tuple[str, Any]]) -> Callable[[], object]:
    unsub = e.matcher.ops()[1]

    def run() -> None:
        for p, s in pairs:
            unsub(p, s)

    return run


def _check_writes(cells: list[_Cell], w: Any) -> None:
    """Subscribe/unsubscribe return True on new/present pairs, sizes agree, and
    a topic matching a written pattern is answered alike while it is there."""
    for c in cells:
        for e in (c.cold_w, c.hot):
            sub, unsub, _ = e.matcher.ops()
            before = _size(e)
            pairs = e.pairs(w.writes[:BATCH])
            if not all(sub(p, s) for p, s in pairs):
                raise BenchError(f"{c.label}: subscribe of a new pair returned False")
            if _size(e) != before + len(pairs):
                raise BenchError(f"{c.label}: size {_size(e)} after {len(pairs)} subscribes")
            if not all(unsub(p, s) for p, s in pairs):
                raise BenchError(f"{c.label}: unsubscribe of a present pair returned False")
            if _size(e) != before:
                raise BenchError(f"{c.label}: size {_size(e)} != {before} after undoing")


def _size(e: suite.Entry) -> int:
    return e.size()


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, DEFAULT)
    hot_n = sizes[-1]
    repeat = ctx.pick_repeat(200, 20)
    rng = ctx.rng(NAME)
    w = ops_workload(rng, hot=hot_n)
    res = Result(
        NAME,
        params={
            "hot_subscriptions": hot_n,
            "lookup_topics": len(w.lookups),
            "write_pairs": len(w.writes),
            "batch": BATCH,
            "repeat": repeat,
            "topic_space": len(w.topic_space),
            "dialect": "amqp (paho: exact MQTT translation)",
            "subject": w.subject[0],
        },
    )
    cells: list[_Cell] = []
    skipped: dict[str, str] = {}
    with ctx.progress.task(f"{NAME}: build {len(suite.KINDS)} matchers x 3", len(suite.KINDS)) as t:
        for kind in suite.KINDS:
            try:
                cells.append(_Cell(kind, w, w.hot))
            except suite.Skipped as exc:
                skipped[suite.label(kind)] = str(exc)
            t.advance()
    if not cells or cells[0].label != "cstrie":
        raise BenchError("cstrie could not be built")
    sample_rng = ctx.rng(f"{NAME}:check")
    check_topics = sorted(set(w.lookups)) + sample_rng.sample(
        w.topic_space, min(300, len(w.topic_space))
    )
    suite.check_agree([c.hot for c in cells], check_topics, what=" (hot)")
    suite.check_agree([c.cold_l for c in cells], check_topics, what=" (cold)")
    ref = cells[0]
    matches = {
        state: sum(len(e.matcher.lookup(t)) for t in w.lookups) / len(w.lookups)
        for state, e in (("hot", ref.hot), ("cold", ref.cold_l))
    }
    _check_writes(cells, w)
    with ctx.progress.task(f"{NAME}: warm-up", len(cells)) as t:
        for c in cells:
            for _ in range(len(c.batches)):
                c.run_round()
            t.advance()
    gc.collect()
    samples: dict[str, dict[str, list[float]]] = {c.label: {k: [] for k in CASES} for c in cells}
    with ctx.progress.task(f"{NAME}: time {len(CASES)} cases x {len(cells)} matchers", repeat) as t:
        for r in range(repeat):
            k = r % len(cells)
            for c in cells[k:] + cells[:k]:
                for case, v in c.run_round().items():
                    samples[c.label][case].append(v)
            gc.collect(0)
            t.advance()
    stats = {lab: {case: summarize(v) for case, v in by.items()} for lab, by in samples.items()}
    for c in cells:  # every instance is back where it started
        if _size(c.cold_w) != 0 or _size(c.hot) != hot_n + 1:
            raise BenchError(f"{c.label}: the write batches did not undo themselves")

    cost = Table(
        f"(a) cost per operation, AMQP, cold = empty, hot = {fmt_size(hot_n)} random 5-word "
        f"subscriptions; {matches['hot']:.2f} subscribers per hot lookup (median ns, IQR in "
        "brackets)",
        ["matcher", *CASES],
    )
    ratio = Table(
        "(a) other / cstrie (time ratio: above 1.00x cstrie is faster)",
        ["matcher", *CASES],
    )
    for c in cells:
        s = stats[c.label]
        cost.add(c.label, *[f"{fmt_ns(s[k].median)} [{fmt_ns(s[k].iqr)}]" for k in CASES])
        if c.label != "cstrie":
            cs = stats["cstrie"]
            ratio.add(c.label, *[fmt_ratio(s[k].median / cs[k].median) for k in CASES])
    for lab, why in skipped.items():
        cost.add(lab, *[f"skipped: {why}"] + [""] * (len(CASES) - 1))
    res.tables += [cost, ratio]
    floors_info: dict[str, Any] = {}
    for state in ("hot", "cold"):
        ns = {lab: stats[lab][f"lookup {state}"].median for lab in stats}
        floor, info = suite.lookup_floor(
            f"suite-ops-lookup-{state}",
            f"(a) {state} lookup, {'1k' if state == 'hot' else 'one'} subscription"
            + ("s" if state == "hot" else ""),
            ns,
            exempt=(suite.EXEMPT, *suite.BASELINES),
            standard=standard,
        )
        res.floors.append(floor)
        floors_info[state] = info
        if state == "hot":
            cached = suite.cached_floor(
                "suite-ops-lookup-hot-cached",
                "(a) hot lookup, 1k subscriptions",
                ns,
                standard=standard,
            )
            if cached is not None:
                res.floors.append(cached)
        note = suite.exempt_note(info, f"(a) {state} lookup")
        if note:
            res.notes.append(note)
        res.notes += suite.baseline_note(info, f"(a) {state} lookup")
    res.notes += suite.memo_note([c.hot for c in cells], "(a) hot")
    res.notes += suite.memo_note([c.cold_l for c in cells], "(a) cold")
    res.notes.append(
        "paho runs the exact MQTT translation of the workload ('.'->'/', '*'->'+', '#' "
        "only last); locked-trie is cstrie_lab.pytrie.PyTrie (one lock). Cold lookups run "
        "on a matcher holding only foo.*.baz.qux.quux."
    )
    res.data = {
        "ns_per_op": {
            lab: {case: st.to_dict() for case, st in by.items()} for lab, by in stats.items()
        },
        "matches_per_lookup": matches,
        "floors": floors_info,
        "skipped": skipped,
        "build_seconds": {c.label: c.hot.build_seconds for c in cells},
        "descriptions": {c.label: getattr(c.hot.matcher, "description", "") for c in cells},
    }
    return res


def plot(res: Result, out: Path) -> list[Path]:
    from cstrie_lab.bench.plots import grouped_bars

    data = res.data["ns_per_op"]
    labels = list(data)
    path = out / "suite-ops.png"
    grouped_bars(
        path,
        groups=list(CASES),
        series={lab: [data[lab][c]["median"] for c in CASES] for lab in labels},
        ylabel="ns per operation (median, log)",
        title="(a) subscribe / unsubscribe / lookup, cold and hot (1k subs), AMQP",
        log=True,
    )
    return [path]


SCENARIO = Scenario(
    NAME, "suite (a): subscribe/unsubscribe/lookup cost, cold and hot, all matchers", run, plot
)
