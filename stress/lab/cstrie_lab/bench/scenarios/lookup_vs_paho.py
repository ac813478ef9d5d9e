"""``lookup-vs-paho``: cstrie against paho-mqtt's MQTTMatcher, PyTrie and the dict trie.

Workload: ``N`` random MQTT filters (:func:`~cstrie_lab.bench.workloads.random_mqtt_filters`,
3-6 levels, literals, ``+`` and trailing ``#``), each subscribed once with its index
as the value, into every matcher (``dict-trie`` is :class:`cstrie_lab.classic.DictTrie`,
the dict-per-level trie a user writes by hand); 2,000 random topics made from the
filters (each matches at least one).  All matchers must give the same answers (checked first).

Timing: one batch = 32 topics (the next 32 of the 2,000 each time, so short
batches, well under a millisecond, still cover every topic); the matchers'
batches are interleaved round-robin for ``repeat`` rounds; the figure is the
median ns per lookup.  Floor: paho / cstrie >= 10 at N = 10,000.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from cstrie_lab.bench import matchers as mk
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.timing import chunks, interleave, paired_ratio, rotating
from cstrie_lab.bench.workloads import matching_topics, random_mqtt_filters

NAME = "lookup-vs-paho"
FLOOR_SIZE = 10_000
FLOOR = 10.0
TOPICS = 2_000
CHUNK = 32
KINDS = ("paho", "pytrie", "dict-trie", "cstrie", "cstrie-many", "cstrie-engine")
DIAGNOSTICS = ("cstrie-engine-empty", "cstrie-parse", "cstrie-nullcall")


def _check_agree(built: dict[str, mk.Matcher], topics: list[str], rng: random.Random) -> float:
    """Every matcher gives the same set on a sample of topics; mean matches/topic."""
    sample = rng.sample(topics, min(len(topics), 500))
    total = 0
    for t in sample:
        answers = {name: sorted(m.lookup(t)) for name, m in built.items()}
        first = next(iter(answers.values()))
        if any(a != first for a in answers.values()):
            raise BenchError(f"matchers disagree on topic {t!r}: {answers}")
        total += len(first)
    return total / len(sample)


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes([1_000, FLOOR_SIZE, 100_000], [1_000, FLOOR_SIZE])
    repeat = ctx.pick_repeat(1000, 150)
    rng = ctx.rng(NAME)
    res = Result(NAME, params={"sizes": sizes, "topics": TOPICS, "batch": CHUNK, "repeat": repeat})
    table = Table(
        "Lookup cost per topic (median ns, IQR in brackets), MQTT",
        [
            "filters",
            "matches/topic",
            *[k for k in KINDS],
            "paho / cstrie",
            "pytrie / cstrie",
            "dict-trie / cstrie",
        ],
    )
    per_size: dict[str, dict[str, object]] = {}
    breakdown = Table(
        "Where a lookup's time goes (differences of interleaved medians; the engine parts "
        "are timed through cffi, Trie.lookup takes the C fast path)",
        ["filters", "part", "ns/lookup", "share"],
    )
    for n in sizes:
        filters = random_mqtt_filters(rng, n)
        topics = matching_topics(rng, filters, TOPICS)
        built: dict[str, mk.Matcher] = {}
        with ctx.progress.task(f"{NAME}: build {len(KINDS)} matchers x {fmt_size(n)}", 1):
            for kind in KINDS + DIAGNOSTICS:
                m = mk.make(kind, "mqtt")
                t0 = time.perf_counter()
                m.add_all((f, i) for i, f in enumerate(filters))
                built[kind] = m
                res.data.setdefault("build_seconds", {}).setdefault(kind, {})[str(n)] = (
                    time.perf_counter() - t0
                )
        agree = {k: v for k, v in built.items() if k in KINDS and not mk.MATCHERS[k].diagnostic}
        mean_matches = _check_agree(agree, topics, rng)
        parts = chunks(topics, CHUNK)
        cases = {k: rotating([m.batch(p) for p in parts]) for k, m in built.items()}
        with ctx.progress.task(f"{NAME}: time lookups x {fmt_size(n)}", repeat) as task:
            stats = interleave(cases, CHUNK, repeat=repeat, warmup=len(parts), tick=task.advance)
        cs = stats["cstrie"]
        paho_ratio = stats["paho"].median / cs.median
        py_ratio = stats["pytrie"].median / cs.median
        dict_ratio = stats["dict-trie"].median / cs.median
        table.add(
            fmt_size(n),
            f"{mean_matches:.2f}",
            *[f"{fmt_ns(stats[k].median)} [{fmt_ns(stats[k].iqr)}]" for k in KINDS],
            fmt_ratio(paho_ratio),
            fmt_ratio(py_ratio),
            fmt_ratio(dict_ratio),
        )
        parts_ns = {
            "fast path beyond a bare cffi engine call (Trie.lookup - cffi call; "
            "< 0: cheaper than the call alone)": stats["cstrie"].median
            - stats["cstrie-engine"].median,
            "engine walk + result (engine call - empty-trie call)": stats["cstrie-engine"].median
            - stats["cstrie-engine-empty"].median,
            "fixed engine call cost beyond parsing (empty-trie call - parse)": stats[
                "cstrie-engine-empty"
            ].median
            - stats["cstrie-parse"].median,
            "topic parse and hash (cst_validate - trivial call)": stats["cstrie-parse"].median
            - stats["cstrie-nullcall"].median,
            "one cffi call (cst_is_readonly)": stats["cstrie-nullcall"].median,
        }
        for part, ns in parts_ns.items():
            breakdown.add(fmt_size(n), part, fmt_ns(ns), f"{100 * ns / cs.median:.0f}%")
        per_size[str(n)] = {
            "breakdown_ns": parts_ns,
            "mean_matches": mean_matches,
            "ns_per_lookup": {k: s.to_dict() for k, s in stats.items()},
            "paho_over_cstrie": paho_ratio,
            "paho_over_cstrie_paired": paired_ratio(stats["paho"], cs).to_dict(),
            "pytrie_over_cstrie": py_ratio,
            "dict_trie_over_cstrie": dict_ratio,
            "engine_share_of_cstrie": stats["cstrie-engine"].median / cs.median,
        }
        if n == FLOOR_SIZE or (not standard and n == sizes[-1] and FLOOR_SIZE not in sizes):
            res.floors.append(
                Floor(
                    name="lookup-vs-paho",
                    description=f"paho MQTTMatcher / cstrie lookup time at {fmt_size(n)} filters",
                    measured=paho_ratio,
                    limit=FLOOR,
                    kind="min",
                    standard=n == FLOOR_SIZE,
                )
            )
        del built, cases
    res.tables.append(table)
    res.tables.append(breakdown)
    res.data["sizes"] = per_size
    res.notes.append(
        "cstrie-engine is a diagnostic: the bare cffi call of the engine on pre-encoded bytes, "
        "without encoding or id->object mapping (Trie.lookup does both and calls the engine "
        "through its C fast path, not cffi); cstrie-many is Trie.lookup_many "
        "over one batch (32 topics). The breakdown also times, in the same rounds, the "
        "engine call on an empty trie, cst_validate (parse only) and a trivial call."
    )
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    sizes = list(res.data["sizes"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(KINDS)
    for j, kind in enumerate(KINDS):
        ys = [res.data["sizes"][s]["ns_per_lookup"][kind]["median"] for s in sizes]
        xs = [i + j * width for i in range(len(sizes))]
        ax.bar(xs, ys, width, label=kind)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))])
    ax.set_xticklabels([f"{int(s):,} filters" for s in sizes])
    ax.set_yscale("log")
    ax.set_ylabel("ns per lookup (median, log)")
    ax.set_title("MQTT lookup: cstrie vs paho-mqtt, PyTrie and the dict trie")
    ax.legend(fontsize=8)
    path = out / "lookup-vs-paho.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "cstrie vs paho-mqtt MQTTMatcher (and PyTrie, the dict trie) lookups", run, plot
)
