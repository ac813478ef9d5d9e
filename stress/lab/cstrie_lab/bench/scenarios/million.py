"""``million``: a large trie under uniform and skewed traffic, and its memory.

What the engine's large-trie work is judged on, all ratios measured in one run,
in one process (memory in fresh ones):

1. **uniform traffic** - ``N`` random 5-level MQTT filters (1,000,000; 100,000
   with ``--quick``; :func:`~cstrie_lab.bench.workloads.random5_mqtt_filters`),
   subscriber ``i`` for filter ``i``, in a :class:`cstrie.Trie` and in paho's
   ``MQTTMatcher`` (``list(iter_match(topic))``); topics of five uniformly random
   words (:func:`~cstrie_lab.bench.workloads.random5_uniform_topics`).  Floor:
   paho / cstrie >= 10.
2. **lookup_many** - the same topics through ``Trie.lookup_many`` in batches of
   256, against one ``Trie.lookup`` call per topic.  Floor: lookup / lookup_many
   >= 1.5.
3. **skewed traffic** - 100,000 distinct topics (10,000 with ``--quick``), each
   made by filling a random filter's ``+`` and ``#`` with words (so each matches),
   ranked in random order; the stream draws from them with Zipf exponent
   s = 1.1 (:func:`~cstrie_lab.bench.workloads.zipf_sample`; the most frequent
   topic is ~13% of the traffic at 100,000).  cstrie without and with its result
   cache (``Trie.set_cache``, 64 MiB, on an O(1) copy of the trie that starts
   empty; the warm-up pass fills it) vs paho.  Floors with the cache on: paho /
   cstrie >= 25, and one hot topic's ``Trie.lookup`` <= 150 ns.  The cache's
   cost where it cannot win is measured on uniform traffic that never repeats a
   topic (a fresh topic list every pass, so every lookup misses and fills):
   floor cache on / off <= 1.05.
4. **memory** - RSS added by building each matcher with the ``N`` pairs, in a
   fresh interpreter (the ``memory`` scenario's method: input strings built
   first, one-time state warmed up, ``gc.collect()`` and the engine's
   reclamation before each reading), divided by the pairs; once with one
   subscriber per filter, once with the filters shared by 5,000 subscribers
   (``i % 5000``, the floor's shape).  Floor: cstrie <= 200 bytes per
   subscription with 5,000 subscribers.

Timing: full passes (as ``vs-dict``): each matcher looks up every topic of the
traffic in one pass (20,000 topics; 5,000 with ``--quick``), the matchers taking
turns in rotating order, GC paused, one warm-up round and ``--repeat`` rounds
(5; 3 with ``--quick``); the figure is the best pass, in ns per lookup.  Before
anything is timed, paho, ``Trie.lookup`` and ``Trie.lookup_many`` must give the
same answers (sorted) on a sample of each traffic's topics.

``--sizes million=N[,D]`` sets the filters and the distinct skewed topics.
Floors are standard at N = 1,000,000 (and D = 100,000) only.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cstrie_lab.bench import matchers as mk
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.child import run_child
from cstrie_lab.bench.format import fmt_bytes, fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.machine import rss_bytes
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.timing import chunks, full_passes
from cstrie_lab.bench.workloads import (
    random5_mqtt_filters,
    random5_uniform_topics,
    random5_zipf_topics,
    zipf_share,
)

NAME = "million"
DEFAULT_FILTERS = 1_000_000
QUICK_FILTERS = 100_000
ZIPF_S = 1.1
ZIPF_DISTINCT = 100_000
QUICK_ZIPF_DISTINCT = 10_000
PASS_TOPICS = 20_000
QUICK_PASS_TOPICS = 5_000
MANY_BATCH = 256
SAMPLE = 500
FLOOR_PAHO = 10.0
FLOOR_MANY = 1.5
FLOOR_ZIPF_CACHE = 25.0
FLOOR_MEMORY = 200.0
#: The memory floor's shape (the issue's): the N filters shared by this many
#: subscribers, subscriber i % MEMORY_SUBSCRIBERS for filter i.  The table also
#: shows one subscriber per filter (N subscribers), where the registry holds N
#: objects.
MEMORY_SUBSCRIBERS = 5_000
#: the columns of the lookup table, in the order the matchers take turns
COLUMNS = ("paho", "cstrie", "cstrie-many", "cstrie-cache")
IMPLS = ("cstrie", "paho")
#: The result cache's budget for the cached columns (Trie.set_cache).
CACHE_BUDGET = 64 << 20
#: A cached lookup of a hot topic from Python may take at most this (ns).
FLOOR_CACHED_NS = 150.0
#: With the cache on, uniform traffic (no topic twice) may be at most this
#: much slower than without it.
FLOOR_UNIFORM_CACHE_COST = 1.05


def filters_for(seed: int, n: int) -> list[str]:
    """The scenario's filters (the same in the parent and the memory children)."""
    return random5_mqtt_filters(random.Random(f"{seed}:{NAME}:filters"), n)


def measure_memory(
    impl: str, n: int, seed: int, subscribers: int | None = None
) -> dict[str, Any]:
    """Child side: build one matcher with the ``n`` pairs (subscriber ``i`` for
    filter ``i``, or ``i % subscribers``); what it added to RSS."""
    from cstrie import _binding as nb

    pairs = [
        (f, i if subscribers is None else i % subscribers)
        for i, f in enumerate(filters_for(seed, n))
    ]
    warm = mk.make(impl, "mqtt")
    warm.add("warm/up", -1)
    warm.lookup("warm/up")
    del warm
    gc.collect()
    nb.reclaim()
    rss0, eng0 = rss_bytes(), nb.live_bytes()
    t0 = time.perf_counter()
    m = mk.make(impl, "mqtt")
    m.add_all(pairs)
    build = time.perf_counter() - t0
    gc.collect()
    nb.reclaim()
    rss1, eng1 = rss_bytes(), nb.live_bytes()
    return {
        "impl": impl,
        "subscriptions": n,
        "rss_delta": rss1 - rss0,
        "bytes_per_subscription": (rss1 - rss0) / n,
        "engine_bytes_per_subscription": (eng1 - eng0) / n if impl == "cstrie" else None,
        "build_seconds": build,
    }


def _many_batch(trie: Any, topics: Sequence[str]) -> Callable[[], object]:
    """One pass of ``Trie.lookup_many`` over ``topics`` in batches of MANY_BATCH."""
    many = trie.lookup_many
    parts = chunks(topics, MANY_BATCH)

    def run() -> None:
        for p in parts:
            many(p)

    return run


def check_answers(paho: mk.Matcher, trie: Any, topics: Sequence[str]) -> dict[str, Any]:
    """paho, ``Trie.lookup`` and ``Trie.lookup_many`` give the same sorted
    answers on every topic of ``topics`` (else :class:`BenchError`)."""
    many = trie.lookup_many(list(topics))
    total = 0
    for t, row in zip(topics, many, strict=True):
        want = sorted(paho.lookup(t))
        got = {"cstrie": sorted(trie.lookup(t)), "cstrie-many": sorted(row)}
        if any(g != want for g in got.values()):
            raise BenchError(f"matchers disagree on topic {t!r}: paho {want}, {got}")
        total += len(want)
    return {"topics": len(topics), "mean_matches": total / max(len(topics), 1)}


def _cached_batch(trie: Any, passes: list[list[str]]) -> Callable[[], object]:
    """One pass of ``Trie.lookup`` over the next topic list of ``passes`` (one
    list for a stream that repeats, a fresh one per pass for traffic that
    never repeats a topic)."""
    lookup = trie.lookup
    turn = [0]

    def run() -> None:
        topics = passes[turn[0] % len(passes)]
        turn[0] += 1
        for t in topics:
            lookup(t)

    return run


def _traffic(
    ctx: Context,
    label: str,
    paho: mk.Matcher,
    cs: mk.Matcher,
    topics: list[str],
    check: list[str],
    rounds: int,
    cached_passes: list[list[str]],
) -> dict[str, Any]:
    trie = cs.trie  # type: ignore[attr-defined]
    checked = check_answers(paho, trie, check)
    # the cached trie: an O(1) copy of the same trie with a result cache
    cached = trie.copy()
    cached.set_cache(CACHE_BUDGET)
    cached_check = check_answers(paho, cached, check)  # fills, then compares
    cached_again = check_answers(paho, cached, check)  # from the cache now
    if cached_check != checked or cached_again != checked:
        raise BenchError(f"{label}: the cached trie's answers differ")
    cached.set_cache(0)  # empty: the passes start cold
    cached.set_cache(CACHE_BUDGET)
    cases = {
        "paho": paho.batch(topics),
        "cstrie": cs.batch(topics),
        "cstrie-many": _many_batch(trie, topics),
        "cstrie-cache": _cached_batch(cached, cached_passes),
    }
    if len(cached_passes) > 1:
        # the cache's baseline on fresh topics: the same lists, no cache (a
        # list repeated every pass keeps more of its paths in the CPU caches)
        cases["cstrie-fresh"] = _cached_batch(trie, cached_passes)
    with ctx.progress.task(f"{NAME}: {label}: {rounds} rounds of full passes", 1):
        passes = full_passes(cases, len(topics), rounds)
    best = {n: p["best"] for n, p in passes.items()}
    stats = cached.cache_stats()
    del cached
    return {
        "topics": len(topics),
        "distinct": len(set(topics)),
        "rounds": rounds,
        "checked": checked,
        "mean_matches": checked["mean_matches"],
        "pass_ns_per_lookup": passes,
        "paho_over_cstrie": best["paho"] / best["cstrie"],
        "lookup_over_many": best["cstrie"] / best["cstrie-many"],
        "paho_over_cached": best["paho"] / best["cstrie-cache"],
        "cached_over_cstrie": best["cstrie-cache"] / best.get("cstrie-fresh", best["cstrie"]),
        "cache_stats": stats,
        "cache_fresh_topics_per_pass": len(cached_passes) > 1,
    }


def hot_lookup_ns(trie: Any, topic: str, n: int = 200_000) -> dict[str, float]:
    """ns per ``Trie.lookup`` of one topic over and over, with the cache off
    and on (best of 5 timings of n calls each)."""
    from cstrie_lab.bench.timing import time_batch

    lookup = trie.lookup
    out: dict[str, float] = {}
    for label, budget in (("off", 0), ("on", CACHE_BUDGET)):
        trie.set_cache(budget)
        lookup(topic)  # the fill

        def run() -> None:
            for _ in range(n):
                lookup(topic)

        out[label] = min(time_batch(run, n) for _ in range(5))
    trie.set_cache(0)
    return out


def run(ctx: Context) -> Result:
    sizes = list(ctx.sizes or [])
    if len(sizes) > 2:
        raise ValueError("million takes up to 2 sizes: filters, distinct skewed topics")
    n = sizes[0] if sizes else (QUICK_FILTERS if ctx.quick else DEFAULT_FILTERS)
    distinct = sizes[1] if len(sizes) > 1 else (QUICK_ZIPF_DISTINCT if ctx.quick else ZIPF_DISTINCT)
    n_topics = QUICK_PASS_TOPICS if ctx.quick else PASS_TOPICS
    rounds = ctx.pick_repeat(5, 3)
    standard = n == DEFAULT_FILTERS and distinct == ZIPF_DISTINCT
    res = Result(
        NAME,
        params={
            "filters": n,
            "pass_topics": n_topics,
            "rounds": rounds,
            "many_batch": MANY_BATCH,
            "zipf_s": ZIPF_S,
            "zipf_distinct": distinct,
            "sample": SAMPLE,
            "result_cache_budget": CACHE_BUDGET,
        },
    )

    # memory first, in fresh interpreters, before this process grows
    mem: dict[str, dict[str, Any]] = {}
    shared: dict[str, dict[str, Any]] = {}
    for impl in IMPLS:
        for subs, into in ((None, mem), (MEMORY_SUBSCRIBERS, shared)):
            ctx.progress.note(f"{NAME}: memory of {impl} at {fmt_size(n)} filters (fresh process)")
            into[impl] = run_child(
                "cstrie_lab.bench.scenarios.million:measure_memory",
                {"impl": impl, "n": n, "seed": ctx.seed, "subscribers": subs},
                timeout=1800,
            )
    res.data["memory"] = mem
    res.data["memory_shared"] = shared

    filters = filters_for(ctx.seed, n)
    pairs = [(f, i) for i, f in enumerate(filters)]
    rng = ctx.rng(f"{NAME}:topics")
    uniform = random5_uniform_topics(rng, n_topics)
    ranked, skewed = random5_zipf_topics(rng, filters, distinct, n_topics, ZIPF_S)
    built: dict[str, mk.Matcher] = {}
    build_s: dict[str, float] = {}
    with ctx.progress.task(f"{NAME}: build paho and cstrie x {fmt_size(n)}", 1):
        for impl in IMPLS:
            m = mk.make(impl, "mqtt")
            t0 = time.perf_counter()
            m.add_all(pairs)
            build_s[impl] = time.perf_counter() - t0
            built[impl] = m
    res.data["build_seconds"] = build_s
    paho, cs = built["paho"], built["cstrie"]
    held = len(cs.trie)  # type: ignore[attr-defined]
    if held != n:
        raise BenchError(f"cstrie holds {held} pairs, expected {n}")
    del pairs
    gc.collect()

    check_rng = ctx.rng(f"{NAME}:check")
    # the cached column of uniform traffic never sees a topic twice: a fresh
    # list of uniform topics for every pass
    fresh = [random5_uniform_topics(rng, n_topics) for _ in range(rounds + 1)]
    uni = _traffic(
        ctx,
        "uniform",
        paho,
        cs,
        uniform,
        check_rng.sample(uniform, min(SAMPLE, len(uniform))),
        rounds,
        fresh,
    )
    del fresh
    # the skewed check covers the most frequent topics and a sample of the rest
    zipf_check = list(dict.fromkeys(ranked[:50] + check_rng.sample(ranked, min(SAMPLE, distinct))))
    zipf = _traffic(ctx, "skewed", paho, cs, skewed, zipf_check, rounds, [skewed])
    hot = hot_lookup_ns(cs.trie.copy(), ranked[0])  # type: ignore[attr-defined]
    res.data["hot_lookup_ns"] = hot
    top = skewed.count(ranked[0]) / len(skewed)
    zipf.update(
        {
            "s": ZIPF_S,
            "distinct_ranked": distinct,
            "rank1_share": top,
            "rank1_share_expected": zipf_share(distinct, ZIPF_S),
        }
    )
    res.data["uniform"], res.data["skewed"] = uni, zipf
    res.data["answers_checked"] = uni["checked"]["topics"] + zipf["checked"]["topics"]

    lookups = Table(
        f"Lookup cost per topic, {fmt_size(n)} random 5-level MQTT filters, full passes "
        f"(best of {rounds} passes over {n_topics:,} topics, matchers in turn)",
        [
            "traffic",
            "distinct topics",
            "matches/topic",
            "paho",
            "cstrie",
            f"cstrie lookup_many ({MANY_BATCH})",
            "cstrie, cache on",
            "paho / cstrie",
            "lookup / lookup_many",
            "paho / cstrie cache on",
            "cache on / off (same topics)",
        ],
    )
    for label, d in (
        ("uniform random words", uni),
        (f"Zipf s={ZIPF_S} over {fmt_size(distinct)} matching topics", zipf),
    ):
        best = d["pass_ns_per_lookup"]
        lookups.add(
            label,
            f"{d['distinct']:,}",
            f"{d['mean_matches']:.2f}",
            *[fmt_ns(best[c]["best"]) for c in COLUMNS],
            fmt_ratio(d["paho_over_cstrie"]),
            fmt_ratio(d["lookup_over_many"]),
            fmt_ratio(d["paho_over_cached"]),
            fmt_ratio(d["cached_over_cstrie"]),
        )
    res.tables.append(lookups)
    ct = Table(
        f"The result cache ({fmt_bytes(CACHE_BUDGET)} budget) over the timed passes",
        ["traffic", "hits", "misses", "fills", "skipped", "evicted", "entries", "bytes"],
    )
    for label, d in (("uniform (a fresh topic list per pass)", uni), ("Zipf", zipf)):
        st = d["cache_stats"]
        ct.add(
            label,
            *[f"{st[k]:,}" for k in ("hits", "misses", "fills", "skipped", "evicted", "entries")],
            fmt_bytes(st["bytes"]),
        )
    ct.add(
        f"one hot topic, Trie.lookup: {fmt_ns(hot['off'])} cache off, {fmt_ns(hot['on'])} cache on",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
    )
    res.tables.append(ct)

    mt = Table(
        f"Resident memory added by the matcher, {fmt_size(n)} subscriptions (fresh process each)",
        ["matcher", "subscribers", "RSS added", "bytes/sub (RSS)", "engine bytes/sub", "build"],
    )
    for impl, label, r in [(i, fmt_size(n), mem[i]) for i in IMPLS] + [
        (i, f"{MEMORY_SUBSCRIBERS:,}", shared[i]) for i in IMPLS
    ]:
        eng = r["engine_bytes_per_subscription"]
        mt.add(
            impl,
            label,
            fmt_bytes(r["rss_delta"]),
            f"{r['bytes_per_subscription']:.0f}",
            "-" if eng is None else f"{eng:.0f}",
            f"{r['build_seconds']:.2f} s",
        )
    res.tables.append(mt)

    why = "non-standard sizes"
    res.floors += [
        Floor(
            name="million-uniform-paho",
            description=f"paho MQTTMatcher / cstrie lookup time, {fmt_size(n)} random 5-level "
            "MQTT filters, uniform random topics (full passes)",
            measured=uni["paho_over_cstrie"],
            limit=FLOOR_PAHO,
            kind="min",
            standard=standard,
            indicative=why,
        ),
        Floor(
            name="million-lookup-many",
            description=f"Trie.lookup / Trie.lookup_many ({MANY_BATCH} per call) time, "
            f"{fmt_size(n)} filters, uniform random topics",
            measured=uni["lookup_over_many"],
            limit=FLOOR_MANY,
            kind="min",
            standard=standard,
            indicative=why,
        ),
        Floor(
            name="million-memory",
            description=f"RSS bytes per subscription, cstrie, {fmt_size(n)} random 5-level "
            f"MQTT filters, {MEMORY_SUBSCRIBERS:,} subscribers",
            measured=shared["cstrie"]["bytes_per_subscription"],
            limit=FLOOR_MEMORY,
            unit="B/sub",
            standard=n == DEFAULT_FILTERS,
            indicative=why,
        ),
    ]
    res.floors += [
        Floor(
            name="million-skewed-paho-cache",
            description=f"paho / cstrie lookup time, Zipf s={ZIPF_S} traffic over "
            f"{fmt_size(distinct)} topics, {fmt_size(n)} filters, result cache on",
            measured=zipf["paho_over_cached"],
            limit=FLOOR_ZIPF_CACHE,
            kind="min",
            standard=standard,
            indicative=why,
        ),
        Floor(
            name="million-hot-cached-lookup",
            description="ns per Trie.lookup of the hottest topic from Python, result cache on",
            measured=hot["on"],
            limit=FLOOR_CACHED_NS,
            kind="max",
            unit="ns",
            standard=standard,
            indicative=why,
        ),
        Floor(
            name="million-uniform-cache-cost",
            description="cache on / cache off lookup time on uniform traffic that never "
            "repeats a topic (every lookup a miss and a fill)",
            measured=uni["cached_over_cstrie"],
            limit=FLOOR_UNIFORM_CACHE_COST,
            kind="max",
            standard=standard,
            indicative=why,
        ),
    ]
    ft = Table(
        "Floors of this scenario",
        ["floor", "measured", "limit", "verdict"],
    )
    for f in res.floors:
        op = "<=" if f.kind == "max" else ">="
        value = f"{f.measured:.2f}x" if f.unit == "x" else f"{f.measured:.0f} {f.unit}"
        limit = f"{op} {f.limit:g}{f.unit}" if f.unit == "x" else f"{op} {f.limit:g} {f.unit}"
        ft.add(f.name, value, limit, f.verdict if f.standard else f"{f.verdict} ({why})")
    res.tables.append(ft)
    res.notes.append(
        f"paho is list(MQTTMatcher.iter_match(topic)); cstrie is one Trie.lookup per topic; "
        f"lookup_many takes {MANY_BATCH} topics per call; 'cache on' is Trie.lookup on an O(1) "
        f"copy of the trie with Trie.set_cache({CACHE_BUDGET}), empty when the passes start "
        "(the first pass, a warm-up, fills it). On uniform traffic its passes each get a fresh "
        "list of uniform topics, so every lookup misses and fills. Answers of all were compared "
        f"(sorted) on {res.data['answers_checked']:,} topics before timing. The most frequent "
        f"skewed topic is {100 * top:.1f}% of the stream (Zipf expects "
        f"{100 * zipf['rank1_share_expected']:.1f}%)."
    )
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 4), gridspec_kw={"width_ratios": [3, 1]})
    keys = ("uniform", "skewed")
    width = 0.8 / len(COLUMNS)
    for j, col in enumerate(COLUMNS):
        ys = [res.data[k]["pass_ns_per_lookup"][col]["best"] for k in keys]
        ax.bar([i + j * width for i in range(len(keys))], ys, width, label=col)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))])
    ax.set_xticklabels(["uniform", f"Zipf s={ZIPF_S}"])
    ax.set_yscale("log")
    ax.set_ylabel("ns per lookup (best pass, log)")
    ax.set_title(f"{fmt_size(res.params['filters'])} random 5-level filters", fontsize=10)
    ax.legend(fontsize=8)
    mem = res.data["memory"]
    bx.bar(list(IMPLS), [mem[i]["bytes_per_subscription"] for i in IMPLS])
    bx.axhline(FLOOR_MEMORY, color="red", linestyle="--", label=f"floor {FLOOR_MEMORY:.0f} B")
    bx.set_ylabel("RSS bytes per subscription")
    bx.legend(fontsize=8, loc="lower center")
    fig.suptitle("cstrie vs paho-mqtt on a large trie", fontsize=11)
    path = out / "million.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME,
    "1M random filters: lookup vs paho, lookup_many, Zipf traffic, memory (floors)",
    run,
    plot,
)
