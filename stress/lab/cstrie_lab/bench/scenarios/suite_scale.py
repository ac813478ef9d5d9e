"""``suite-scale``: workload (d) of the classic-matchers suite -- 10k, 100k and 1M subscriptions.

Workload (AMQP): the first ``n`` of one seeded list of random 5-word patterns
(:func:`~cstrie_lab.bench.workloads.article_patterns` with 32 words per level, ``*``
at levels 2-4 with probability 0.1, a trailing ``#`` with probability 0.05),
subscriber ``i`` for pattern ``i``; lookups of a pool of 8,192 topics
(:func:`~cstrie_lab.bench.workloads.scale_article_topics`), each filled from a random
pattern of the ``n``, so each matches at least one.  paho runs the exact MQTT
translation; the full inverted bitmap is given the pool as its topic space.

For every size, smallest first:

* **lookup cost** -- every matcher that can answer in reasonable time is built in
  this process, checked against cstrie on a sample of the pool, and timed in
  interleaved rounds (batches of up to 50 topics of the pool, about 0.3 ms each,
  the matchers in a rotating order); median ns per lookup;
* **memory** -- every matcher that can hold ``n`` subscriptions is built again,
  alone, in a fresh interpreter (:mod:`cstrie_lab.bench.child`): bytes per
  subscription = (RSS after building - RSS before) / ``n``, the input strings
  made before the first reading (as in the ``memory`` scenario).  ``--quick``
  measures memory at the largest size only.

The full inverted bitmap needs its topic space up front; here that is every
5-word key of the vocabulary (32^5, 33.5M topics), so it is skipped, with the
reason.  Shown instead, outside the floor: ``inverted-bitmap (pool)``, the same
structure told only the pool of topics the run will look up.

A matcher is skipped where it would take unreasonably long, and the table says
why: a build projected (from the previous size) or found to take more than the
build budget (45 s; 10 s with ``--quick``), or lookups projected or probed at more
than 50 ms each (5 ms with ``--quick``) -- the scans (naive, regex) at large
sizes, and the full inverted bitmap, whose every subscribe tests the pattern
against the whole topic space.

Floors: at each size, cstrie's lookup is faster than every other matcher that was
timed, except ``inverted-bitmap (pool)`` and the lazy DFA (a baseline), whose
gaps are reported.  The memory table is RSS after building, before any lookup:
for the lazy DFA that is its NFA only, so the notes add the size of its DFA
after the timed lookups, by its own count.
"""

from __future__ import annotations

import gc
import random
import time
from pathlib import Path
from typing import Any

from cstrie_lab.bench import suite
from cstrie_lab.bench.base import BenchError, Context, Result, Scenario, Table
from cstrie_lab.bench.child import run_child
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.machine import rss_bytes
from cstrie_lab.bench.timing import chunks, interleave, rotating
from cstrie_lab.bench.workloads import article_patterns, scale_article_topics

NAME = "suite-scale"
DEFAULT = [10_000, 100_000, 1_000_000]
QUICK = [1_000, 2_000, 5_000]
WIDTH = 32
POOL, POOL_QUICK = 8_192, 1_024
MAX_BATCH = 50
TARGET_NS = 300_000
BUILD_BUDGET, BUILD_BUDGET_QUICK = 45.0, 10.0
LOOKUP_LIMIT_NS, LOOKUP_LIMIT_QUICK_NS = 50e6, 5e6


def _patterns(seed: int, n: int) -> list[str]:
    # the same seed gives the same sequence: the first n of any longer list
    return article_patterns(random.Random(f"{seed}:{NAME}:patterns"), n, width=WIDTH)


def _pool(seed: int, patterns: list[str], n: int, size: int) -> list[str]:
    return scale_article_topics(random.Random(f"{seed}:{NAME}:topics:{n}"), patterns[:n], size)


def measure(kind: str, n: int, seed: int, pool: int, budget: float) -> dict[str, Any]:
    """Child side: build one matcher of ``n`` subscriptions; what it added to RSS."""
    from cstrie import _binding as nb

    patterns = _patterns(seed, n)
    space = _pool(seed, patterns, n, pool) if kind == suite.EXEMPT else None
    try:
        warm = suite.new_entry(kind, space[:1] if space else None)
        pairs = warm.pairs((p, i) for i, p in enumerate(patterns))
        topic = space[0] if space else patterns[0].replace("*", "w").replace(".#", "")
        del patterns
        warm.build(pairs[:1])
        warm.matcher.lookup(warm.translate(topic))
    except suite.Skipped as exc:
        return {"skipped": str(exc)}
    del warm
    gc.collect()
    nb.reclaim()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    e = suite.new_entry(kind, space)
    try:
        e.build(pairs, budget=budget)
    except suite.Skipped as exc:
        return {"skipped": str(exc)}
    build = time.perf_counter() - t0
    gc.collect()
    nb.reclaim()
    rss1 = rss_bytes()
    if e.size() != n:
        raise RuntimeError(f"{kind} holds {e.size()} pairs, expected {n}")
    return {
        "kind": kind,
        "subscriptions": n,
        "rss_baseline": rss0,
        "rss_after": rss1,
        "bytes_per_subscription": (rss1 - rss0) / n,
        "build_seconds": build,
    }


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, QUICK)
    sizes = sorted(set(sizes))
    repeat = ctx.pick_repeat(400, 30)
    pool_size = POOL_QUICK if ctx.quick else POOL
    budget = BUILD_BUDGET_QUICK if ctx.quick else BUILD_BUDGET
    limit_ns = LOOKUP_LIMIT_QUICK_NS if ctx.quick else LOOKUP_LIMIT_NS
    res = Result(
        NAME,
        params={
            "sizes": sizes,
            "repeat": repeat,
            "pool": pool_size,
            "vocabulary_per_level": WIDTH,
            "build_budget_s": budget,
            "lookup_limit_ms": limit_ns / 1e6,
            "dialect": "amqp (paho: exact MQTT translation)",
        },
    )
    with ctx.progress.task(f"{NAME}: {fmt_size(sizes[-1])} random 5-word patterns", 1):
        patterns = _patterns(ctx.seed, sizes[-1])
    parts = _participants()
    labels = [lab for lab, _ in parts] + [suite.EXEMPT]
    lookup: dict[str, dict[int, Any]] = {lab: {} for lab in labels}
    memory: dict[str, dict[int, Any]] = {lab: {} for lab in labels}
    matches: dict[int, float] = {}
    # per matcher: (size, seconds per subscription) / (size, ns per lookup) last seen
    build_rate: dict[str, float] = {}
    lookup_seen: dict[str, tuple[int, float]] = {}
    lookup_skip: dict[str, str] = {}
    for n in sizes:
        pool = _pool(ctx.seed, patterns, n, pool_size)
        pairs = [(p, i) for i, p in enumerate(patterns[:n])]
        entries: list[suite.Entry] = []
        lookup[suite.EXEMPT][n] = memory[suite.EXEMPT][n] = {"skipped": _space_reason(n)}
        with ctx.progress.task(f"{NAME}: build for lookups, {fmt_size(n)}", len(parts)) as t:
            for lab, kind in parts:
                why = _why_skip(lab, n, build_rate, lookup_seen, lookup_skip, budget, limit_ns)
                if why:
                    lookup[lab][n] = {"skipped": why}
                    t.advance()
                    continue
                try:
                    e = suite.new_entry(kind, pool, alias=lab)
                    e.build(e.pairs(pairs), budget=budget)
                except suite.Skipped as exc:
                    lookup[lab][n] = {"skipped": str(exc)}
                    build_rate[lab] = float("inf")
                    t.advance()
                    continue
                build_rate[lab] = e.build_seconds / n
                topics = e.topics(pool)
                est = suite.probe(e.matcher.ops()[2], topics[:50], 50_000_000)
                if est > limit_ns:
                    why = f"one lookup takes ~{fmt_ns(est)} (limit {fmt_ns(limit_ns)})"
                    lookup[lab][n] = {"skipped": why}
                    lookup_skip[lab] = why
                    del e
                    t.advance()
                    continue
                e.extra["estimate"] = est
                entries.append(e)
                t.advance()
        if not entries or entries[0].label != "cstrie":
            raise BenchError(f"cstrie could not be built at {n}")
        check = [e for e in entries if e.extra["estimate"] * 50 < 2e9 or e.label == "cstrie"]
        sample = max(20, min(200, int(2e9 / max(e.extra["estimate"] for e in check))))
        matches[n] = suite.check_agree(
            check, pool, ctx.rng(f"{NAME}:check:{n}"), sample=sample, what=f" at {n}"
        )
        cases = {}
        ops: dict[str, int] = {}
        for e in entries:
            b = suite.batch_size(e.extra["estimate"], TARGET_NS, 1, MAX_BATCH)
            ops[e.label] = b
            cases[e.label] = rotating([e.matcher.batch(p) for p in chunks(e.topics(pool), b)])
        gc.collect()
        with ctx.progress.task(f"{NAME}: time lookups at {fmt_size(n)}", repeat) as t:
            stats = interleave(cases, ops, repeat=repeat, warmup=2, tick=t.advance)
        for e in entries:
            s = stats[e.label]
            lookup[e.label][n] = {"ns": s.to_dict(), "batch": ops[e.label]}
            lookup_seen[e.label] = (n, s.median)
        res.notes += suite.memo_note(entries, f"(d) {fmt_size(n)}")
        del entries, cases
        gc.collect()
        # memory, one fresh interpreter per matcher (--quick: at the largest size only)
        for lab, kind in parts:
            if ctx.quick and n != sizes[-1]:
                memory[lab][n] = {"skipped": "--quick measures memory at the largest size only"}
                continue
            rate = build_rate.get(lab)
            before = _prev(sizes, n)
            prev = memory[lab].get(before) if before is not None else None
            if prev and before and "build_seconds" in prev:
                rate = max(rate or 0.0, prev["build_seconds"] / before)
            if prev and "skipped" in prev and prev.get("final"):
                why = prev["skipped"]
                if not why.startswith("at "):
                    why = f"at {fmt_size(before or 0)} already: {why}"
                memory[lab][n] = {"skipped": why, "final": True}
                continue
            if rate is not None and rate * n > budget:
                memory[lab][n] = {
                    "skipped": f"build projected at ~{rate * n:.0f} s (budget {budget:.0f} s)",
                    "final": True,
                }
                continue
            ctx.progress.note(f"{NAME}: memory of {lab} at {fmt_size(n)} (fresh process)")
            r = run_child(
                "cstrie_lab.bench.scenarios.suite_scale:measure",
                {"kind": kind, "n": n, "seed": ctx.seed, "pool": pool_size, "budget": budget},
                timeout=budget * 4 + 120,
            )
            if "skipped" in r:
                r["final"] = True
            memory[lab][n] = r

    # ----------------------------------------------------------------- tables
    cols = [fmt_size(n) for n in sizes]
    cost = Table(
        "(d) lookup cost by subscriptions, AMQP random 5-word patterns (median ns, IQR in "
        "brackets); matches per topic: " + ", ".join(f"{matches[n]:.2f}" for n in sizes),
        ["matcher", *cols],
    )
    ratio = Table(
        "(d) other / cstrie lookup time (above 1.00x cstrie is faster)", ["matcher", *cols]
    )
    mem = Table(
        "(d) memory per subscription: RSS added / subscriptions, each built alone in a fresh "
        "process",
        ["matcher", *cols],
    )
    build = Table("(d) build time per subscription (in the fresh process)", ["matcher", *cols])
    for lab in labels:
        cells, rcells, mcells, bcells = [], [], [], []
        for n in sizes:
            d = lookup[lab].get(n, {"skipped": "?"})
            if "ns" in d:
                cells.append(f"{fmt_ns(d['ns']['median'])} [{fmt_ns(d['ns']['iqr'])}]")
                cs = lookup["cstrie"][n]["ns"]["median"]
                rcells.append(fmt_ratio(d["ns"]["median"] / cs))
            else:
                cells.append(f"skipped: {d['skipped']}")
                rcells.append("skipped")
            m = memory[lab].get(n, {"skipped": "?"})
            if "bytes_per_subscription" in m:
                mcells.append(f"{m['bytes_per_subscription']:,.0f} B")
                bcells.append(fmt_ns(1e9 * m["build_seconds"] / n))
            else:
                mcells.append(f"skipped: {m['skipped']}")
                bcells.append("skipped")
        cost.add(lab, *cells)
        if lab != "cstrie":
            ratio.add(lab, *rcells)
        mem.add(lab, *mcells)
        build.add(lab, *bcells)
    res.tables += [cost, ratio, mem, build]
    floors_info: dict[str, Any] = {}
    for n in sizes:
        ns = {lab: lookup[lab][n]["ns"]["median"] for lab in labels if "ns" in lookup[lab][n]}
        floor, info = suite.lookup_floor(
            f"suite-scale-lookup-{fmt_size(n)}",
            f"(d) lookup at {fmt_size(n)} subscriptions",
            ns,
            exempt=(POOL_LABEL, *suite.BASELINES),
            standard=standard,
        )
        res.floors.append(floor)
        floors_info[str(n)] = info
        res.notes += suite.baseline_note(info, f"(d) {fmt_size(n)}")
    res.notes.append(
        "Skipped cells say why; 'projected' = extrapolated linearly from the previous size."
    )
    res.notes.append(
        f"{suite.EXEMPT}: its topic space must be known up front, and this workload's is "
        f"every 5-word key of the vocabulary, {WIDTH}^5 = {WIDTH**5:,} topics, each with a "
        "bitmap of n bits; it cannot be built at these sizes."
    )
    res.notes.append(
        f"{POOL_LABEL} is the full inverted bitmap told only the {pool_size:,} topics the "
        "run looks up, not the workload's real topic space (every 5-word key of the "
        f"vocabulary, {WIDTH**5:,} topics): a different, easier problem -- it precomputes "
        "the answers to exactly the questions that will be asked. It is shown for what "
        "that costs (every subscribe tests the pattern against the whole pool) and is "
        "not counted in the floor."
    )
    res.data = {
        "lookup": {lab: {str(n): v for n, v in by.items()} for lab, by in lookup.items()},
        "memory": {lab: {str(n): v for n, v in by.items()} for lab, by in memory.items()},
        "matches_per_lookup": {str(n): v for n, v in matches.items()},
        "floors": floors_info,
    }
    return res


POOL_LABEL = f"{suite.EXEMPT} (pool)"


def _participants() -> list[tuple[str, str]]:
    """(label, kind) of every matcher built in (d): the inverted bitmap only as
    its pool-only variant (the real one cannot be built: :func:`_space_reason`)."""
    out = []
    for kind in suite.KINDS:
        out.append((POOL_LABEL if kind == suite.EXEMPT else suite.label(kind), kind))
    return out


def _space_reason(n: int) -> str:
    space = WIDTH**5
    gib = space * max(n, 64) / 8 / 2**30
    return f"needs all {space / 1e6:.1f}M topics up front (~{gib:,.0f} GiB of bitmaps)"


def _prev(sizes: list[int], n: int) -> int | None:
    i = sizes.index(n)
    return sizes[i - 1] if i else None


def _why_skip(
    lab: str,
    n: int,
    build_rate: dict[str, float],
    lookup_seen: dict[str, tuple[int, float]],
    lookup_skip: dict[str, str],
    budget: float,
    limit_ns: float,
) -> str | None:
    """Why ``lab`` is not built for lookups at ``n`` (None: build it)."""
    if lab in lookup_skip:
        return f"{lookup_skip[lab]} at a smaller size already"
    seen = lookup_seen.get(lab)
    if seen is not None:
        projected = seen[1] * n / seen[0]
        if projected > limit_ns:
            return f"lookups projected at ~{fmt_ns(projected)} each (limit {fmt_ns(limit_ns)})"
    rate = build_rate.get(lab)
    if rate is not None and rate * n > budget:
        if rate == float("inf"):
            return "its build went over budget at a smaller size"
        return f"build projected at ~{rate * n:.0f} s (budget {budget:.0f} s)"
    return None


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from cstrie_lab.bench.plots import lines, save

    sizes = res.params["sizes"]
    look = res.data["lookup"]
    mem = res.data["memory"]

    def series(by: dict[str, dict[str, Any]], key: str) -> dict[str, list[float | None]]:
        out_: dict[str, list[float | None]] = {}
        for lab, d in by.items():
            ys: list[float | None] = []
            for n in sizes:
                v = d.get(str(n), {})
                ys.append(v["ns"]["median"] if key == "ns" and "ns" in v else v.get(key))
            out_[lab] = ys
        return out_

    fig, ax = plt.subplots(figsize=(7, 4))
    lines(
        ax,
        sizes,
        series(look, "ns"),
        xlabel="subscriptions",
        ylabel="ns per lookup (median)",
        title="(d) lookup cost vs subscriptions (log-log; missing = skipped)",
        loglog=True,
    )
    p1 = out / "suite-scale-lookup.png"
    save(fig, p1)
    fig, ax = plt.subplots(figsize=(7, 4))
    lines(
        ax,
        sizes,
        series(mem, "bytes_per_subscription"),
        xlabel="subscriptions",
        ylabel="bytes per subscription (RSS)",
        title="(d) memory per subscription vs subscriptions (fresh process each)",
        loglog=True,
    )
    p2 = out / "suite-scale-memory.png"
    save(fig, p2)
    return [p1, p2]


SCENARIO = Scenario(
    NAME,
    "suite (d): lookup cost and memory/subscription at 10k, 100k, 1M, all matchers",
    run,
    plot,
    True,
)
