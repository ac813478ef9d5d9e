"""``suite-throughput``: workload (b) of the classic-matchers suite -- messages per second.

Workload (:func:`~cstrie_lab.bench.workloads.digits_workload`, AMQP, the articles'
throughput test): 1,000 subscriptions over three levels of digits -- 100 of shape
``*.d.d`` (every ``d.d``), 20 ``d.*.d``, 9 ``d.d.*`` and 871 literal ``d.d.d`` --
and 100,000 messages, each made from a random subscription by filling its
wildcard with a random digit.  The topic space is every ``d.d.d`` (1,000 topics):
what the full inverted bitmap is given up front.  paho runs the exact MQTT
translation.  Every matcher must answer all 1,000 possible topics as cstrie does
before anything is timed (300 of them with ``--quick``).

Two measurements:

* **interleaved batches** (the figure the floor uses): each round runs one batch
  of consecutive messages per matcher, the matchers in a rotating order, the next
  messages of the stream each round; a batch lasts about 0.3 ms (at most 100
  messages; a slow matcher's batch is shorter, down to 1 message).  The median
  ns per message over the rounds gives messages/s.  With 1,000 rounds a fast
  matcher's batches cover the 100,000 messages exactly once.
* **whole stream** (the articles' method): the time of one pass over all
  100,000 messages, median of up to 3 passes taken in turns; a slow matcher
  makes as many passes as fit in 15 s (projected from its batches; 2 s with
  ``--quick``), one at least, and is skipped if even one would not fit.

Floor: cstrie's lookup is faster than every other matcher's (interleaved
figure); the full inverted bitmap and the lazy DFA (a baseline) are exempt and
their gaps reported.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from cstrie_lab.bench import suite
from cstrie_lab.bench.base import Context, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.timing import chunks, interleave, rotating
from cstrie_lab.bench.workloads import DIGIT_SHAPES, digits_workload

NAME = "suite-throughput"
DEFAULT = [100_000]
QUICK = [10_000]
MAX_BATCH = 100
TARGET_NS = 300_000
STREAM_BUDGET_S = 15.0
STREAM_BUDGET_QUICK_S = 2.0
STREAM_PASSES = 3


def _rate(ns: float) -> float:
    return 1e9 / ns if ns > 0 else float("nan")


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, QUICK)
    n_msgs = sizes[-1]
    repeat = ctx.pick_repeat(max(1_000, n_msgs // MAX_BATCH), 100)
    rng = ctx.rng(NAME)
    w = digits_workload(rng, n_msgs)
    res = Result(
        NAME,
        params={
            "subscriptions": len(w.pairs),
            "shapes": dict(DIGIT_SHAPES),
            "messages": n_msgs,
            "repeat": repeat,
            "max_batch": MAX_BATCH,
            "topic_space": len(w.topic_space),
            "dialect": "amqp (paho: exact MQTT translation)",
        },
    )

    def prepare(e: suite.Entry) -> None:
        e.extra["messages"] = e.topics(w.messages)

    entries, skipped = suite.build_all(ctx, NAME, w.topic_space, w.pairs, prepare)
    mean_matches = suite.check_agree(entries, w.topic_space, rng, sample=300 if ctx.quick else None)
    # batch sizes: about TARGET_NS per batch (from a quick probe), at most MAX_BATCH
    cases = {}
    ops: dict[str, int] = {}
    for e in entries:
        msgs = e.extra["messages"]
        est = suite.probe(e.matcher.ops()[2], msgs[:200], 20_000_000)
        ops[e.label] = b = suite.batch_size(est, TARGET_NS, 1, MAX_BATCH)
        cases[e.label] = rotating([e.matcher.batch(p) for p in chunks(msgs, b)])
    gc.collect()
    with ctx.progress.task(f"{NAME}: time {len(entries)} matchers", repeat) as t:
        stats = interleave(cases, ops, repeat=repeat, warmup=3, tick=t.advance)
    # the whole stream, as the articles timed it
    stream: dict[str, list[float]] = {e.label: [] for e in entries}
    stream_skip: dict[str, str] = {}
    budget = STREAM_BUDGET_QUICK_S if ctx.quick else STREAM_BUDGET_S
    n_passes: dict[str, int] = {}
    for e in entries:
        projected = stats[e.label].median * n_msgs / 1e9
        n_passes[e.label] = min(STREAM_PASSES, int(budget / projected)) if projected else 1
        if n_passes[e.label] < 1:
            stream_skip[e.label] = f"skipped: one pass would take ~{projected:.0f} s"
    passes = {
        e.label: e.matcher.batch(e.extra["messages"]) for e in entries if e.label not in stream_skip
    }
    with ctx.progress.task(f"{NAME}: whole-stream passes", STREAM_PASSES) as t:
        for r in range(STREAM_PASSES):
            names = list(passes)
            k = r % max(len(names), 1)
            for lab in names[k:] + names[:k]:
                if len(stream[lab]) >= n_passes[lab]:
                    continue
                gc.collect()
                with_gc = gc.isenabled()
                gc.disable()
                t0 = time.perf_counter_ns()
                passes[lab]()
                t1 = time.perf_counter_ns()
                if with_gc:
                    gc.enable()
                stream[lab].append(n_msgs * 1e9 / (t1 - t0))
            t.advance()

    cs = stats["cstrie"].median
    table = Table(
        f"(b) throughput, 1k subscriptions over 3 digit levels, {fmt_size(n_msgs)} messages, "
        f"{mean_matches:.2f} subscribers per message",
        [
            "matcher",
            "ns/message [IQR]",
            "messages/s (batches)",
            "messages timed",
            f"messages/s (whole stream, median of <= {STREAM_PASSES} passes)",
            "time / cstrie",
        ],
    )
    data: dict[str, Any] = {}
    for e in entries:
        s = stats[e.label]
        whole = sorted(stream[e.label])
        whole_med = whole[len(whole) // 2] if whole else float("nan")
        table.add(
            e.label,
            f"{fmt_ns(s.median)} [{fmt_ns(s.iqr)}]",
            f"{_rate(s.median):,.0f}",
            f"{ops[e.label] * repeat:,}",
            stream_skip.get(e.label, f"{whole_med:,.0f}"),
            "-" if e.label == "cstrie" else fmt_ratio(s.median / cs),
        )
        data[e.label] = {
            "ns_per_message": s.to_dict(),
            "messages_per_s": _rate(s.median),
            "batch": ops[e.label],
            "whole_stream_messages_per_s": whole,
            "whole_stream_skipped": stream_skip.get(e.label),
        }
    for lab, why in skipped.items():
        table.add(lab, f"skipped: {why}", "", "", "", "")
    res.tables.append(table)
    floor, info = suite.lookup_floor(
        "suite-throughput-lookup",
        "(b) digits throughput, 1k subscriptions",
        {lab: stats[lab].median for lab in stats},
        exempt=(suite.EXEMPT, *suite.BASELINES),
        standard=standard,
    )
    res.floors.append(floor)
    cached = suite.cached_floor(
        "suite-throughput-lookup-cached",
        "(b) digits throughput, 1k subscriptions",
        {lab: stats[lab].median for lab in stats},
        standard=standard,
    )
    if cached is not None:
        res.floors.append(cached)
    note = suite.exempt_note(info, "(b) throughput")
    if note:
        res.notes.append(note)
    res.notes += suite.baseline_note(info, "(b) throughput")
    res.notes += suite.memo_note(entries, "(b)")
    res.notes.append(
        "messages/s (batches) = 1e9 / median ns per message over interleaved batches; "
        "whole stream = one pass over every message (the articles' method), GC paused."
    )
    res.data = {
        "matchers": data,
        "mean_matches": mean_matches,
        "floor": info,
        "skipped": skipped,
    }
    return res


def plot(res: Result, out: Path) -> list[Path]:
    from cstrie_lab.bench.plots import hbars

    data = res.data["matchers"]
    path = out / "suite-throughput.png"
    hbars(
        path,
        {lab: d["messages_per_s"] for lab, d in data.items()},
        xlabel="messages per second (log)",
        title=f"(b) throughput: 1k digit subscriptions, {res.params['messages']:,} messages",
        log=True,
        highlight="cstrie",
    )
    return [path]


SCENARIO = Scenario(
    NAME, "suite (b): messages/s, 1k subscriptions over digits, all matchers", run, plot
)
