"""``reverse``: what a reverse query (filter -> stored topics) costs on a
:class:`~cstrie.topics.TopicIndex` (retained messages).

Workload: an MQTT index of ``n`` topics ``site{s}/dev{d}/{metric}``, 10
devices per site and 10 metrics per device (``temp`` among them), ``n / 100``
sites; values are ints.  ``site7/+/temp`` matches exactly 10 topics at every
``n``, ``site7/#`` 100, ``#`` all ``n``.  Sizes (``--sizes``: topic counts,
multiples of 100, at least 800, two or more; the smallest is the baseline):
1k, 100k and 1M (``--quick``: 1k and 100k).  Every index is built with
``put``, one topic at a time.

* **(A) cost vs n**: ``list(idx.query("site7/+/temp"))`` on every size,
  interleaved round-robin (batches of 16 queries), and ``count()`` beside it.
  Floor: time at the largest size (1M) <= 3x time at the smallest (1k): a
  query costs the part of the tree its literal words leave open, not ``n``.

* **(B) vs a Python scan** at 100k topics (the largest size when 100k is not
  one of them): the same question answered by scanning a ``dict`` of the
  same topics and values, with paho-mqtt's ``topic_matches_sub(filter,
  topic)`` and with the filter compiled once into a regular expression
  (``fullmatch`` per topic); both give ``[(topic, value), ...]`` as
  ``list(query())`` does.  Query, ``count()`` and both scans interleaved.
  Floor: the faster scan / the query >= 100 for ``site7/+/temp``; reported
  without a floor for ``site7/#`` and ``#``.

* **(C) writes** at the same size: ``put`` of a new topic, ``put`` over a
  stored one (a new retained message) and ``remove``, against the same
  operations on the ``dict`` (batches of 64, index and dict alternating).
  No floor.

Every answer is checked first: query, ``count()``, both scans and the
expected topics must agree.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from cstrie.topics import TopicIndex
from cstrie_lab.bench.base import (
    BenchError,
    Context,
    Floor,
    MissingDependency,
    Result,
    Scenario,
    Table,
)
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.timing import Stats, interleave, paired_ratio, summarize, time_batch

NAME = "reverse"
METRICS = ("temp", "hum", "pres", "co2", "volt", "amp", "rssi", "batt", "lux", "noise")
DEVICES = 10
PER_SITE = DEVICES * len(METRICS)
SITE = 7
FILTER = f"site{SITE}/+/temp"
BROAD = (f"site{SITE}/#", "#")
SIZES = [1_000, 100_000, 1_000_000]
QUICK_SIZES = [1_000, 100_000]
SCAN_SIZE = 100_000
SIZE_FLOOR = 3.0
SCAN_FLOOR = 100.0
QUERY_BATCH = 16
WRITE_BATCH = 64
WRITE_BATCHES = 8
BATCH_NS = 1_000_000  # aim for timed batches of about 1 ms (query side of (B))
WRITE_OPS = ("put new", "put replace", "remove")


def topics(n: int) -> list[str]:
    """The ``n`` topics of the workload (``n`` a multiple of 100, >= 800)."""
    check_size(n)
    return [
        f"site{s}/dev{d}/{m}" for s in range(n // PER_SITE) for d in range(DEVICES) for m in METRICS
    ]


def check_size(n: int) -> None:
    if n % PER_SITE or n < (SITE + 1) * PER_SITE:
        raise ValueError(
            f"reverse: a size must be a multiple of {PER_SITE} and at least "
            f"{(SITE + 1) * PER_SITE} (so that site{SITE} exists), not {n}"
        )


def expected(filt: str, n: int) -> list[str]:
    """The topics ``filt`` must match (the workload's, by construction)."""
    if filt == FILTER:
        return [f"site{SITE}/dev{d}/temp" for d in range(DEVICES)]
    if filt == f"site{SITE}/#":
        return [f"site{SITE}/dev{d}/{m}" for d in range(DEVICES) for m in METRICS]
    if filt == "#":
        return topics(n)
    raise ValueError(f"no expected answer for {filt!r}")


def build(n: int) -> tuple[TopicIndex, dict[str, int], float]:
    """(index, dict of the same topics and values, seconds the puts took)."""
    names = topics(n)
    idx = TopicIndex("mqtt")
    put = idx.put
    t0 = time.perf_counter()
    for i, t in enumerate(names):
        put(t, i)
    seconds = time.perf_counter() - t0
    return idx, dict(zip(names, range(n), strict=True)), seconds


def mqtt_regex(filt: str) -> re.Pattern[str]:
    """A regular expression whose ``fullmatch`` on a topic is the MQTT rule
    for the (valid) filter ``filt``: ``+`` one level, ``#`` the parent level
    and everything below it, no ``$`` topic for a leading wildcard."""
    words = filt.split("/")
    parts = []
    for i, w in enumerate(words):
        if w == "#":
            parts.append(".*" if i == 0 else "(?:/.*)?")
        else:
            parts.append(("/" if i else "") + ("[^/]*" if w == "+" else re.escape(w)))
    text = "".join(parts)
    if words[0] in ("+", "#"):
        text = r"(?!\$)" + text
    return re.compile(text, re.DOTALL)


def _paho() -> Callable[[str, str], bool]:
    try:
        from paho.mqtt.client import topic_matches_sub
    except ImportError:
        raise MissingDependency(
            "paho-mqtt is not installed (pip install paho-mqtt, or cstrie-lab[bench])"
        ) from None
    return topic_matches_sub


def query_batch(idx: Any, filt: str, k: int) -> Callable[[], object]:
    query = idx.query

    def run() -> None:
        for _ in range(k):
            list(query(filt))

    return run


def count_batch(idx: Any, filt: str, k: int) -> Callable[[], object]:
    count = idx.count

    def run() -> None:
        for _ in range(k):
            count(filt)

    return run


def regex_scan(d: dict[str, Any], filt: str) -> Callable[[], list[tuple[str, Any]]]:
    """The filter compiled once, ``fullmatch`` over every stored topic."""
    fullmatch = mqtt_regex(filt).fullmatch
    items = d.items

    def run() -> list[tuple[str, Any]]:
        return [(t, v) for t, v in items() if fullmatch(t)]

    return run


def paho_scan(d: dict[str, Any], filt: str) -> Callable[[], list[tuple[str, Any]]]:
    """paho-mqtt's ``topic_matches_sub(filter, topic)`` over every stored topic."""
    matches = _paho()
    items = d.items

    def run() -> list[tuple[str, Any]]:
        return [(t, v) for t, v in items() if matches(filt, t)]

    return run


def check_answers(idx: Any, d: dict[str, Any], filt: str) -> int:
    """The number of matches; ``BenchError`` unless the query, ``count()``,
    both scans and the workload's expected topics agree."""
    got = sorted(idx.query(filt))
    want = sorted((t, d[t]) for t in expected(filt, len(d)))
    answers = {
        "query": got,
        "regex scan": sorted(regex_scan(d, filt)()),
        "paho scan": sorted(paho_scan(d, filt)()),
    }
    for name, ans in answers.items():
        if ans != want:
            raise BenchError(
                f"reverse: {name} for {filt!r} on {fmt_size(len(d))} topics gave "
                f"{len(ans)} pairs, expected {len(want)} (first: {ans[:3]!r} vs {want[:3]!r})"
            )
    c = idx.count(filt)
    if c != len(want):
        raise BenchError(f"reverse: count({filt!r}) = {c}, expected {len(want)}")
    return len(want)


def _per_batch(fn: Callable[[], object]) -> float:
    """Nanoseconds one call of ``fn`` takes (the best of three, for sizing batches)."""
    fn()
    return min(time_batch(fn, 1) for _ in range(3))


def _batch_size(idx: Any, filt: str, limit: int = 64) -> int:
    one = _per_batch(query_batch(idx, filt, 1))
    return max(1, min(limit, int(BATCH_NS / max(one, 1.0))))


def writes(
    idx: Any,
    d: dict[str, Any],
    new: Sequence[Sequence[str]],
    old: Sequence[Sequence[str]],
    repeat: int,
    tick: Callable[[], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """ns per op of ``put`` (new topic), ``put`` (stored topic) and ``remove``
    on the index and the dict: each round times, for each side in turn (the
    order alternating), a batch of new topics put, a batch of stored ones put
    again, then the new ones removed (so both end as they started)."""

    def index_ops(k: int) -> list[Callable[[], object]]:
        put, remove, fresh, stored = idx.put, idx.remove, new[k], old[k]

        def put_new() -> None:
            for t in fresh:
                put(t, 0)

        def replace() -> None:
            for t in stored:
                put(t, 1)

        def rm() -> None:
            for t in fresh:
                remove(t)

        return [put_new, replace, rm]

    def dict_ops(k: int) -> list[Callable[[], object]]:
        fresh, stored = new[k], old[k]

        def put_new() -> None:
            for t in fresh:
                d[t] = 0

        def replace() -> None:
            for t in stored:
                d[t] = 1

        def rm() -> None:
            for t in fresh:
                del d[t]

        return [put_new, replace, rm]

    sides = {"index": index_ops, "dict": dict_ops}
    samples: dict[str, dict[str, list[float]]] = {s: {op: [] for op in WRITE_OPS} for s in sides}
    before = (len(idx), len(d))
    for r in range(repeat + 1):  # round 0 warms up
        k = r % len(new)
        order = list(sides) if r % 2 else list(sides)[::-1]
        for side in order:
            for op, fn in zip(WRITE_OPS, sides[side](k), strict=True):
                gc.collect(0)
                ns = time_batch(fn, len(new[k]))
                if r:
                    samples[side][op].append(ns)
        if r and tick is not None:
            tick()
    if (len(idx), len(d)) != before:
        raise BenchError(f"reverse: writes left {len(idx)} topics and {len(d)} keys, not {before}")
    out: dict[str, dict[str, Any]] = {}
    for op in WRITE_OPS:
        ix, dc = summarize(samples["index"][op]), summarize(samples["dict"][op])
        out[op] = {
            "index": ix,
            "dict": dc,
            "ratio": ix.median / dc.median,
            "paired": paired_ratio(ix, dc),
        }
    return out


def write_topics(n: int, rng: Any) -> tuple[list[list[str]], list[list[str]]]:
    """WRITE_BATCHES batches of WRITE_BATCH new topics (a new metric on
    existing devices) and as many batches of stored topics, all distinct."""
    sites = n // PER_SITE
    total = WRITE_BATCH * WRITE_BATCHES
    fresh = [f"site{rng.randrange(sites)}/dev{rng.randrange(DEVICES)}/new{j}" for j in range(total)]
    picks = rng.sample(range(n), total)
    stored = [
        f"site{i // PER_SITE}/dev{i % PER_SITE // len(METRICS)}/{METRICS[i % len(METRICS)]}"
        for i in picks
    ]
    cut = WRITE_BATCH
    return (
        [fresh[i : i + cut] for i in range(0, total, cut)],
        [stored[i : i + cut] for i in range(0, total, cut)],
    )


def _cell(s: Stats) -> str:
    return f"{fmt_ns(s.median)} [{fmt_ns(s.iqr)}]"


def check_filter(idx: Any, n: int) -> None:
    """The size floor's filter on one index: exactly the expected topics."""
    got = sorted(t for t, _ in idx.query(FILTER))
    if got != sorted(expected(FILTER, n)):
        raise BenchError(f"reverse: query({FILTER!r}) at {n} topics gave {got!r}")


def part_sizes(
    ctx: Context, res: Result, indexes: dict[int, Any], builds: dict[int, float], repeat: int
) -> None:
    """(A): the query (and count) on every index, interleaved; the size floor."""
    sizes = sorted(indexes)
    cases: dict[str, Callable[[], object]] = {}
    for n in sizes:
        cases[f"query {n}"] = query_batch(indexes[n], FILTER, QUERY_BATCH)
        cases[f"count {n}"] = count_batch(indexes[n], FILTER, QUERY_BATCH)
    with ctx.progress.task(f"{NAME}: {FILTER} at {len(sizes)} sizes", repeat) as task:
        stats = interleave(cases, QUERY_BATCH, repeat=repeat, warmup=3, tick=task.advance)
    base = stats[f"query {sizes[0]}"]
    table = Table(
        f"(A) list(query({FILTER!r})) and count() by index size: {DEVICES} matches at every "
        "size (median per query, IQR in brackets)",
        ["topics", "build (put)", "list(query)", "count()", "query / query at smallest"],
    )
    rows: dict[str, Any] = {}
    for n in sizes:
        q, c = stats[f"query {n}"], stats[f"count {n}"]
        seconds = builds[n]
        table.add(
            fmt_size(n),
            f"{seconds:.2f} s ({fmt_ns(seconds * 1e9 / n)}/put)",
            _cell(q),
            _cell(c),
            fmt_ratio(q.median / base.median),
        )
        rows[str(n)] = {
            "build_seconds": seconds,
            "build_ns_per_put": seconds * 1e9 / n,
            "query": q.to_dict(),
            "count": c.to_dict(),
            "query_over_smallest": q.median / base.median,
            "query_over_smallest_paired": paired_ratio(q, base).to_dict(),
        }
    res.tables.append(table)
    res.data["sizes"] = rows
    small, large = sizes[0], sizes[-1]
    res.floors.append(
        Floor(
            name="reverse-query-vs-n",
            description=f"list(query({FILTER!r})), {DEVICES} matches: time at "
            f"{fmt_size(large)} topics / time at {fmt_size(small)}",
            measured=stats[f"query {large}"].median / base.median,
            limit=SIZE_FLOOR,
            standard=(small, large) == (SIZES[0], SIZES[-1]),
            indicative=f"{fmt_size(small)} to {fmt_size(large)}, not 1k to 1M",
        )
    )


def part_scans(ctx: Context, res: Result, idx: Any, d: dict[str, int], repeat: int) -> None:
    """(B): query, count and both scans per filter, interleaved; the scan floor."""
    n = len(d)
    table = Table(
        f"(B) reverse query vs a Python scan of a dict of the same {fmt_size(n)} topics "
        "(median per query or scan, IQR in brackets)",
        [
            "filter",
            "matches",
            "list(query)",
            "count()",
            "regex scan",
            "paho scan",
            "regex / query",
            "paho / query",
            "list(query) / count",
        ],
    )
    rows: dict[str, Any] = {}
    for filt in (FILTER, *BROAD):
        matches = check_answers(idx, d, filt)
        k = _batch_size(idx, filt)
        cases = {
            "query": query_batch(idx, filt, k),
            "count": count_batch(idx, filt, k),
            "regex scan": regex_scan(d, filt),
            "paho scan": paho_scan(d, filt),
        }
        ops = {"query": k, "count": k, "regex scan": 1, "paho scan": 1}
        with ctx.progress.task(f"{NAME}: {filt} vs scans x {fmt_size(n)}", repeat) as task:
            st = interleave(cases, ops, repeat=repeat, warmup=1, tick=task.advance)
        q, c = st["query"].median, st["count"].median
        rx, ph = st["regex scan"].median, st["paho scan"].median
        table.add(
            filt,
            f"{matches:,}",
            *[_cell(st[x]) for x in ("query", "count", "regex scan", "paho scan")],
            fmt_ratio(rx / q),
            fmt_ratio(ph / q),
            fmt_ratio(q / c),
        )
        rows[filt] = {
            "matches": matches,
            "query_batch": k,
            "ns": {x: s.to_dict() for x, s in st.items()},
            "regex_over_query": rx / q,
            "paho_over_query": ph / q,
            "query_over_count": q / c,
        }
        if filt == FILTER:
            res.floors.append(
                Floor(
                    name="reverse-query-vs-scan",
                    description=f"the faster Python scan ({'regex' if rx <= ph else 'paho'}) "
                    f"/ list(query({FILTER!r})), {fmt_size(n)} topics",
                    measured=min(rx, ph) / q,
                    limit=SCAN_FLOOR,
                    kind="min",
                    standard=n == SCAN_SIZE,
                    indicative=f"{fmt_size(n)} topics, not 100k",
                )
            )
    res.tables.append(table)
    res.data["scans"] = rows


def part_writes(ctx: Context, res: Result, idx: Any, d: dict[str, int], repeat: int) -> None:
    """(C): put (new, replace) and remove on the index vs the dict."""
    n = len(d)
    new, old = write_topics(n, ctx.rng(NAME))
    with ctx.progress.task(f"{NAME}: writes x {fmt_size(n)}", repeat) as task:
        w = writes(idx, d, new, old, repeat, tick=task.advance)
    table = Table(
        f"(C) writes on the {fmt_size(n)} index vs the dict (median per op, batches "
        f"of {WRITE_BATCH}, IQR in brackets)",
        ["operation", "TopicIndex", "dict", "index / dict"],
    )
    for op in WRITE_OPS:
        table.add(op, _cell(w[op]["index"]), _cell(w[op]["dict"]), fmt_ratio(w[op]["ratio"]))
    res.tables.append(table)
    res.data["writes"] = {
        op: {
            "index": v["index"].to_dict(),
            "dict": v["dict"].to_dict(),
            "index_over_dict": v["ratio"],
            "index_over_dict_paired": v["paired"].to_dict(),
        }
        for op, v in w.items()
    }


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(SIZES, QUICK_SIZES)
    sizes = sorted(set(sizes))
    if len(sizes) < 2:
        raise ValueError("reverse: needs two sizes or more (the smallest is the baseline)")
    for n in sizes:
        check_size(n)
    _paho()  # a missing paho is known before the builds
    scan_n = SCAN_SIZE if SCAN_SIZE in sizes else sizes[-1]
    repeats = {
        "sizes": ctx.pick_repeat(400, 100),
        "scans": ctx.pick_repeat(11, 3),
        "writes": ctx.pick_repeat(300, 60),
    }
    res = Result(
        NAME,
        params={
            "sizes": sizes,
            "scan_size": scan_n,
            "filter": FILTER,
            "broad": list(BROAD),
            "query_batch": QUERY_BATCH,
            "write_batch": WRITE_BATCH,
            "repeat": repeats,
        },
    )
    indexes: dict[int, Any] = {}
    builds: dict[int, float] = {}
    scan_dict: dict[str, int] = {}
    for n in sizes:
        with ctx.progress.task(f"{NAME}: build {fmt_size(n)} topics with put", 1):
            idx, d, builds[n] = build(n)
        if len(idx) != n:
            raise BenchError(f"reverse: the index holds {len(idx)} topics after {n} puts")
        check_filter(idx, n)
        indexes[n] = idx
        if n == scan_n:
            scan_dict = d
        del d, idx

    part_sizes(ctx, res, indexes, builds, repeats["sizes"])
    idx = indexes[scan_n]
    indexes.clear()  # only the scan size's index is used from here on
    gc.collect()
    part_scans(ctx, res, idx, scan_dict, repeats["scans"])
    part_writes(ctx, res, idx, scan_dict, repeats["writes"])

    res.notes.append(
        "list(query) / count: what streaming the results costs beyond the walk (a "
        "snapshot, a pin on the values, the chunk buffers, a (topic, value) tuple per "
        "match); count() walks the same snapshot and reads no value."
    )
    res.notes.append(
        "The scans are the plain-Python alternative: a dict of topic -> value and a "
        "matcher per topic, paho-mqtt's topic_matches_sub (it builds an MQTTMatcher per "
        "call) or the filter compiled once into a regex (fullmatch per topic)."
    )
    if not standard:
        res.notes.append(f"sizes {', '.join(fmt_size(n) for n in sizes)}: not the floor sizes")
    return res


SCENARIO = Scenario(
    NAME, "topic index: reverse queries (filter -> stored topics) vs n, vs Python scans", run
)
