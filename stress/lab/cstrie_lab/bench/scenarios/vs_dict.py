"""``vs-dict``: cstrie against the trie users write by hand, and paho-mqtt.

Issue "Lookups at C speed", item 7: users compare cstrie with a plain dict-per-level
pure-Python trie (:class:`cstrie_lab.classic.DictTrie`: no lock, no validation), so
this scenario measures the issue's four floors, all MQTT:

* ``random`` - 10,000 random 5-level filters over 30 words
  (:func:`~cstrie_lab.bench.workloads.random5_mqtt_filters`), subscriber ``i`` for
  filter ``i``; 20,000 random topics over the same words, as the issue states
  it.  Floor: paho / cstrie >= 10.  ``random-filled`` has the same filters and
  topics made by filling a random filter's ``+``/``#`` with words (every topic
  matches: more branches to walk); reported, no floor.
* ``digits`` - the "Fast Topic Matching" article's 1,000 filters over three digit
  levels (100 ``+/d/d``, 20 ``d/+/d``, 9 ``d/d/+``, 871 ``d/d/d``;
  :func:`~cstrie_lab.bench.workloads.digits_mqtt`); topics fill a random filter's
  wildcard.  Floor: paho / cstrie >= 10.
* ``iot`` - 20,000 IoT pairs (:func:`~cstrie_lab.bench.workloads.iot_pairs`: sites x
  devices x metrics, 10% wildcard filters, several subscribers per filter, ~13
  matching subscribers per topic).  Floor: dict trie / cstrie >= 5.
* ``sub+unsub`` - 50,000 IoT pairs subscribed into a fresh trie, then unsubscribed
  in the same order.  Floor: dict trie / cstrie >= 2.

Lookups are timed two ways in the same run, both as ratios:

* full passes (the issue's method, which the floors use): each matcher looks up
  every topic of the workload in one pass (50,000 topics for digits and iot,
  20,000 for random; 5,000 with ``--quick``), the matchers taking turns in
  rotating order, ``PASS_ROUNDS`` rounds; the figure is the best pass, in ns
  per lookup.  A matcher's structures stay in cache from one topic to the
  next, as in a broker whose matching thread does little else;
* interleaved batches: 2,000 topics, batches of 32 (the next 32 each time), the
  matchers' batches interleaved round-robin in rotating order; the figure is
  the median ns per lookup.  Each batch starts with caches the other matchers
  used: the colder case, which costs a pointer-chasing structure more than an
  interpreter-bound one.  paho is ``list(iter_match(topic))`` where each filter has
one subscriber (random, digits) and the union of per-filter sets where it has
several (iot: the ``paho-sets`` matcher).  Every matcher must give the same
answers on every topic before anything is timed.

Writes: per round, each trie (rotating order) is made fresh and the pairs are
subscribed, then unsubscribed, in timed blocks of 500 with the GC paused; each
phase's time is the sum over blocks of the block's median across rounds (a block
the scheduler interrupted in one round does not count).

``--sizes vs-dict=R[,I[,W]]`` sets the random filters, the IoT pairs and the
write pairs (default 10k,20k,50k); ``--quick`` keeps the lookup sizes and writes
10k pairs (that floor is then indicative).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cstrie.trie import Trie
from cstrie_lab.bench import matchers as mk
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.timing import (
    chunks,
    full_passes,
    gc_paused,
    interleave,
    paired_ratio,
    rotating,
    summarize,
)
from cstrie_lab.bench.workloads import (
    digits_mqtt,
    iot_pairs,
    iot_topics,
    random5_mqtt_filters,
    random5_topics,
    random5_uniform_topics,
)
from cstrie_lab.classic.dict_trie import DictTrie

NAME = "vs-dict"
DEFAULT = [10_000, 20_000, 50_000]  # random filters, IoT pairs, write pairs
QUICK_WRITES = 10_000
TOPICS = 2_000
CHUNK = 32
#: topics of the full passes per workload (the issue's counts) and rounds
PASS_TOPICS = {"random": 20_000, "random-filled": 20_000, "digits": 50_000, "iot": 50_000}
QUICK_PASS_TOPICS = 5_000
PASS_ROUNDS = 5
BLOCK = 500
FLOOR_PAHO = 10.0
FLOOR_DICT_LOOKUP = 5.0
FLOOR_DICT_WRITES = 2.0
#: the columns of the lookup table (paho is "paho" or "paho-sets", per workload)
COLUMNS = ("paho", "dict-trie", "cstrie")
WRITERS: dict[str, Callable[[], Any]] = {
    "cstrie": lambda: Trie("mqtt"),
    "dict-trie": lambda: DictTrie("mqtt"),
}


def _passes(built: dict[str, mk.Matcher], topics: list[str], rounds: int) -> dict[str, Any]:
    """Full passes over ``topics`` per matcher (:func:`full_passes`)."""
    return full_passes({col: m.batch(topics) for col, m in built.items()}, len(topics), rounds)


def _lookups(
    ctx: Context,
    label: str,
    pairs: Sequence[tuple[str, Any]],
    topics: list[str],
    paho: str,
    repeat: int,
    pass_topics: list[str],
) -> dict[str, Any]:
    """Build the three matchers, check they agree on every topic, time them:
    interleaved batches of ``topics`` and full passes over ``pass_topics``."""
    kinds = {"paho": paho, "dict-trie": "dict-trie", "cstrie": "cstrie"}
    built: dict[str, mk.Matcher] = {}
    build_s: dict[str, float] = {}
    with ctx.progress.task(f"{NAME}: {label}: build 3 matchers", 1):
        for col, kind in kinds.items():
            m = mk.make(kind, "mqtt")
            t0 = time.perf_counter()
            m.add_all(pairs)
            build_s[col] = time.perf_counter() - t0
            built[col] = m
    total = 0
    for t in dict.fromkeys(topics + pass_topics):
        answers = {col: sorted(m.lookup(t)) for col, m in built.items()}
        first = answers["cstrie"]
        if any(a != first for a in answers.values()):
            raise BenchError(f"{label}: matchers disagree on topic {t!r}: {answers}")
    for t in pass_topics:
        total += len(built["cstrie"].lookup(t))
    with ctx.progress.task(f"{NAME}: {label}: full passes", 1):
        passes = _passes(built, pass_topics, PASS_ROUNDS)
    parts = chunks(topics, CHUNK)
    cases = {col: rotating([m.batch(p) for p in parts]) for col, m in built.items()}
    with ctx.progress.task(f"{NAME}: {label}: time lookups", repeat) as task:
        stats = interleave(cases, CHUNK, repeat=repeat, warmup=len(parts), tick=task.advance)
    cs = stats["cstrie"]
    best = {n: p["best"] for n, p in passes.items()}
    return {
        "pass_topics": len(pass_topics),
        "pass_rounds": PASS_ROUNDS,
        "pass_ns_per_lookup": passes,
        "pass_paho_over_cstrie": best["paho"] / best["cstrie"],
        "pass_dict_over_cstrie": best["dict-trie"] / best["cstrie"],
        "filters": len({p for p, _ in pairs}),
        "pairs": len(pairs),
        "topics": len(topics),
        "paho_kind": paho,
        "mean_matches": total / len(pass_topics),
        "build_seconds": build_s,
        "ns_per_lookup": {k: s.to_dict() for k, s in stats.items()},
        "paho_over_cstrie": stats["paho"].median / cs.median,
        "dict_over_cstrie": stats["dict-trie"].median / cs.median,
        "paho_over_cstrie_paired": paired_ratio(stats["paho"], cs).to_dict(),
        "dict_over_cstrie_paired": paired_ratio(stats["dict-trie"], cs).to_dict(),
    }


def _blocks(fn: Callable[[str, Any], object], pairs: Sequence[tuple[str, Any]]) -> list[float]:
    """Call ``fn`` on every pair in blocks of BLOCK, GC paused; ns per block."""
    clock = time.perf_counter_ns
    out = []
    with gc_paused():
        for b in range(0, len(pairs), BLOCK):
            block = pairs[b : b + BLOCK]
            t0 = clock()
            for p, s in block:
                fn(p, s)
            out.append(float(clock() - t0))
    return out


def _write_round(new: Callable[[], Any], pairs: Sequence[tuple[str, Any]]) -> list[list[float]]:
    """Subscribe every pair into a fresh trie, then unsubscribe them in the same
    order; ns per block of each phase.  The trie must be full, then empty."""
    trie = new()
    gc.collect()
    subs = _blocks(trie.subscribe, pairs)
    if len(trie) != len(pairs):
        raise BenchError(f"{type(trie).__name__} holds {len(trie)} pairs, expected {len(pairs)}")
    gc.collect()
    unsubs = _blocks(trie.unsubscribe, pairs)
    if len(trie) != 0:
        raise BenchError(f"{type(trie).__name__} holds {len(trie)} pairs after unsubscribing")
    del trie
    gc.collect()
    return [subs, unsubs]


def _writes(ctx: Context, pairs: list[tuple[str, str]], repeat: int) -> dict[str, Any]:
    names = list(WRITERS)
    rounds: dict[str, list[list[list[float]]]] = {n: [] for n in names}
    with ctx.progress.task(f"{NAME}: sub+unsub x {fmt_size(len(pairs))}", repeat) as task:
        for n in names:  # warm-up, untimed
            _write_round(WRITERS[n], pairs[: len(pairs) // 10 or 1])
        for r in range(repeat):
            k = r % len(names)
            for n in names[k:] + names[:k]:
                rounds[n].append(_write_round(WRITERS[n], pairs))
            task.advance()
    out: dict[str, Any] = {}
    for n in names:
        phases = []
        for phase in (0, 1):
            blocks = [
                statistics.median(rd[phase][b] for rd in rounds[n])
                for b in range(len(rounds[n][0][phase]))
            ]
            phases.append(sum(blocks) / 1e9)
        per_round = [sum(rd[0]) / 1e9 + sum(rd[1]) / 1e9 for rd in rounds[n]]
        out[n] = {
            "subscribe_s": phases[0],
            "unsubscribe_s": phases[1],
            "total_s": phases[0] + phases[1],
            "round_totals_s": summarize(per_round).to_dict(),
        }
    c, d = out["cstrie"], out["dict-trie"]
    out["dict_over_cstrie"] = d["total_s"] / c["total_s"]
    rc, rd = c["round_totals_s"]["samples"], d["round_totals_s"]["samples"]
    out["dict_over_cstrie_per_round"] = summarize(
        [b / a for a, b in zip(rc, rd, strict=True)]
    ).to_dict()
    out["pairs"], out["block"], out["rounds"] = len(pairs), BLOCK, repeat
    return out


def run(ctx: Context) -> Result:
    sizes = list(ctx.sizes or [])
    if len(sizes) > 3:
        raise ValueError("vs-dict takes up to 3 sizes: random filters, IoT pairs, write pairs")
    n_random, n_iot, n_writes = sizes + DEFAULT[len(sizes) :]
    if ctx.quick and len(sizes) < 3:
        n_writes = QUICK_WRITES
    repeat = ctx.pick_repeat(1000, 150)
    write_repeat = ctx.pick_repeat(7, 3)
    res = Result(
        NAME,
        params={
            "random_filters": n_random,
            "iot_pairs": n_iot,
            "write_pairs": n_writes,
            "topics": TOPICS,
            "batch": CHUNK,
            "repeat": repeat,
            "write_block": BLOCK,
            "write_repeat": write_repeat,
        },
    )

    def npass(key: str) -> int:
        return QUICK_PASS_TOPICS if ctx.quick else PASS_TOPICS[key]

    filters = random5_mqtt_filters(ctx.rng(f"{NAME}:random"), n_random)
    random_pairs = [(f, i) for i, f in enumerate(filters)]
    rng = ctx.rng(f"{NAME}:random-topics")
    uniform = random5_uniform_topics(rng, npass("random"))
    random_w = (random_pairs, uniform[:TOPICS], uniform)
    filled = random5_topics(rng, filters, npass("random-filled"))
    filled_w = (random_pairs, filled[:TOPICS], filled)
    digits_pairs, digits_topics = digits_mqtt(ctx.rng(f"{NAME}:digits"), npass("digits"))
    digits_w = (digits_pairs, digits_topics[:TOPICS], digits_topics)
    iot_t = iot_topics(ctx.rng(f"{NAME}:iot-t"), npass("iot"))
    iot_w = (iot_pairs(ctx.rng(f"{NAME}:iot"), n_iot), iot_t[:TOPICS], iot_t)
    workloads: dict[str, tuple[str, Any, str]] = {
        "random": (f"{fmt_size(n_random)} random 5-level filters, random topics", random_w, "paho"),
        "random-filled": (
            f"{fmt_size(n_random)} random 5-level filters, topics filled from filters",
            filled_w,
            "paho",
        ),
        "digits": ("1k digit filters (article)", digits_w, "paho"),
        "iot": (f"{fmt_size(n_iot)} IoT pairs", iot_w, "paho-sets"),
    }
    passes = Table(
        f"Lookup cost per topic, full passes (the issue's method: best of {PASS_ROUNDS} passes "
        "over every topic, matchers in turn), MQTT",
        [
            "workload",
            "filters",
            "topics",
            "matches/topic",
            *COLUMNS,
            "paho / cstrie",
            "dict-trie / cstrie",
        ],
    )
    table = Table(
        f"Lookup cost per topic, interleaved batches of {CHUNK} (median ns, IQR in brackets, "
        f"{repeat} rounds: colder caches), MQTT",
        ["workload", "filters", "matches/topic", *COLUMNS, "paho / cstrie", "dict-trie / cstrie"],
    )
    for key, (label, (pairs, topics, pass_topics), paho) in workloads.items():
        d = _lookups(ctx, key, pairs, topics, paho, repeat, pass_topics)
        res.data[key] = d
        ns = d["ns_per_lookup"]
        best = d["pass_ns_per_lookup"]
        passes.add(
            label,
            f"{d['filters']:,}",
            f"{d['pass_topics']:,}",
            f"{d['mean_matches']:.2f}",
            *[fmt_ns(best[c]["best"]) for c in COLUMNS],
            fmt_ratio(d["pass_paho_over_cstrie"]),
            fmt_ratio(d["pass_dict_over_cstrie"]),
        )
        table.add(
            label,
            f"{d['filters']:,}",
            f"{d['mean_matches']:.2f}",
            *[f"{fmt_ns(ns[c]['median'])} [{fmt_ns(ns[c]['iqr'])}]" for c in COLUMNS],
            fmt_ratio(d["paho_over_cstrie"]),
            fmt_ratio(d["dict_over_cstrie"]),
        )
    res.tables.append(passes)
    res.tables.append(table)

    w = _writes(ctx, iot_pairs(ctx.rng(f"{NAME}:writes"), n_writes), write_repeat)
    res.data["writes"] = w
    wt = Table(
        f"Subscribe, then unsubscribe, {fmt_size(n_writes)} IoT pairs in a fresh trie "
        f"(sum of per-block medians over {write_repeat} rounds)",
        ["trie", "subscribe", "unsubscribe", "sub+unsub", "per pair", "time / cstrie"],
    )
    for n in WRITERS:
        x = w[n]
        wt.add(
            n,
            f"{x['subscribe_s']:.3f} s",
            f"{x['unsubscribe_s']:.3f} s",
            f"{x['total_s']:.3f} s",
            fmt_ns(x["total_s"] * 1e9 / n_writes),
            "-" if n == "cstrie" else fmt_ratio(x["total_s"] / w["cstrie"]["total_s"]),
        )
    res.tables.append(wt)

    standard_sizes = dict(zip(("random", "iot", "writes"), DEFAULT, strict=True))
    res.floors += [
        Floor(
            name="vs-dict-random-paho",
            description=f"paho MQTTMatcher / cstrie lookup time, {fmt_size(n_random)} random "
            "5-level MQTT filters, random topics (full passes)",
            measured=res.data["random"]["pass_paho_over_cstrie"],
            limit=FLOOR_PAHO,
            kind="min",
            standard=n_random == standard_sizes["random"],
        ),
        Floor(
            name="vs-dict-digits-paho",
            description="paho MQTTMatcher / cstrie lookup time, 1k three-digit filters (article, "
            "full passes)",
            measured=res.data["digits"]["pass_paho_over_cstrie"],
            limit=FLOOR_PAHO,
            kind="min",
        ),
        Floor(
            name="vs-dict-iot-dict",
            description=f"dict trie / cstrie lookup time, {fmt_size(n_iot)} IoT pairs (full "
            "passes)",
            measured=res.data["iot"]["pass_dict_over_cstrie"],
            limit=FLOOR_DICT_LOOKUP,
            kind="min",
            standard=n_iot == standard_sizes["iot"],
        ),
        Floor(
            name="vs-dict-writes-dict",
            description=f"dict trie / cstrie subscribe+unsubscribe time, {fmt_size(n_writes)} "
            "IoT pairs",
            measured=w["dict_over_cstrie"],
            limit=FLOOR_DICT_WRITES,
            kind="min",
            standard=n_writes == standard_sizes["writes"],
        ),
    ]
    res.notes.append(
        "dict-trie is cstrie_lab.classic.DictTrie, the dict-per-level trie a user writes "
        "(no lock, no validation). paho is list(MQTTMatcher.iter_match(topic)) with one "
        "subscriber per filter (random, digits) and the union of per-filter subscriber "
        "sets on iot. Floors use the full passes (the issue's method); the interleaved "
        "batches are the colder-cache view of the same matchers."
    )
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 4), gridspec_kw={"width_ratios": [3, 1]})
    keys = [k for k in ("random", "digits", "iot") if k in res.data]
    width = 0.8 / len(COLUMNS)
    for j, col in enumerate(COLUMNS):
        ys = [res.data[k]["ns_per_lookup"][col]["median"] for k in keys]
        ax.bar([i + j * width for i in range(len(keys))], ys, width, label=col)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))])
    ax.set_xticklabels(keys)
    ax.set_ylabel("ns per lookup (median)")
    ax.set_title("MQTT lookup", fontsize=10)
    ax.legend(fontsize=8)
    w = res.data["writes"]
    names = list(WRITERS)
    bx.bar(names, [w[n]["subscribe_s"] for n in names], label="subscribe")
    bx.bar(
        names,
        [w[n]["unsubscribe_s"] for n in names],
        bottom=[w[n]["subscribe_s"] for n in names],
        label="unsubscribe",
    )
    bx.set_ylabel("seconds")
    bx.set_title(f"{fmt_size(w['pairs'])} IoT pairs", fontsize=10)
    bx.legend(fontsize=8)
    fig.suptitle("cstrie vs the dict-per-level trie and paho-mqtt", fontsize=11)
    path = out / "vs-dict.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "cstrie vs a hand-written dict-per-level trie and paho (issue floors)", run, plot
)
