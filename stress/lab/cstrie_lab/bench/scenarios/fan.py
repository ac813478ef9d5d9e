"""``fan``: fan-in to one pattern and fan-out at one level must not cost O(n).

Two cases, each on a fresh :class:`cstrie.Trie` (AMQP dialect) per round:

* ``one-pattern`` - ``N`` distinct subscribers (``client-NNNNNN``) subscribe to the
  one pattern ``news.#``: the subscriber set of one branch grows to ``N``;
* ``one-level``   - ``N`` patterns ``root.w0`` ... ``root.w{N-1}`` (one subscriber
  each): the word map of one level grows to ``N`` entries.

The ``N`` subscribes are timed in blocks of ``N/1000`` (100 subscribes, a
fraction of a millisecond).  A window is ``N/10`` subscribes (10,000 of
100,000): its cost is the median of its 100 blocks, which shrugs off a block hit
by a dict resize or by the scheduler on a busy machine.  Per round the
ratio last window / first window is computed; the reported figure is the median
over rounds.  Floor: <= 2 for each case.

Then the same pairs are unsubscribed in the same order and timed the same way;
first window (set/level full) / last window (nearly empty) is reported, without a
floor, and the subscribes are repeated as bare engine calls (a diagnostic that
separates the engine from the Python registry).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cstrie.trie import Trie
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.timing import gc_paused, summarize

NAME = "fan"
DEFAULT = [100_000]
QUICK = [20_000]
FLOOR = 2.0
BLOCKS = 1000
WINDOW_BLOCKS = 100


def _cases(n: int) -> dict[str, list[tuple[str, str]]]:
    subs = [f"client-{i:06d}" for i in range(n)]
    return {
        "one-pattern": [("news.#", s) for s in subs],
        "one-level": [(f"root.w{i}", s) for i, s in enumerate(subs)],
    }


def _timed_blocks(
    fn: Callable[[Any, Any], object], pairs: Sequence[tuple[Any, Any]]
) -> list[float]:
    """Call fn on every pair, in BLOCKS blocks; ns per call for each block."""
    block = len(pairs) // BLOCKS
    clock = time.perf_counter_ns
    out = []
    with gc_paused():
        for b in range(BLOCKS):
            chunk = pairs[b * block : (b + 1) * block]
            t0 = clock()
            for p, s in chunk:
                fn(p, s)
            out.append((clock() - t0) / block)
    return out


def _one_round(pairs: list[tuple[str, str]]) -> tuple[list[float], list[float]]:
    """Subscribe all pairs into a fresh trie, then unsubscribe them in the same
    order; ns per call for each block of each phase."""
    trie = Trie("amqp")
    gc.collect()
    subs = _timed_blocks(trie.subscribe, pairs)
    n = len(pairs) // BLOCKS * BLOCKS
    if len(trie) != n:
        raise BenchError(f"fan trie has {len(trie)} pairs, expected {n}")
    gc.collect()
    unsubs = _timed_blocks(trie.unsubscribe, pairs)
    if len(trie) != len(pairs) - n:
        raise BenchError(f"fan trie has {len(trie)} pairs left after unsubscribing")
    del trie
    gc.collect()
    return subs, unsubs


def _engine_round(pairs: list[tuple[str, str]]) -> list[float]:
    """Diagnostic: the same subscribes as bare engine calls (pre-encoded pattern,
    integer ids), without the Python wrapper and its subscriber registry."""
    from cstrie import _binding as nb

    trie = Trie("amqp")
    h, sub = trie._h, nb.lib.cst_subscribe
    encoded: dict[str, bytes] = {}
    items = [(encoded.setdefault(p, p.encode()), i + 1) for i, (p, _) in enumerate(pairs)]

    def call(data: bytes, i: int) -> bool:
        return bool(sub(h, data, len(data), i))

    gc.collect()
    out = _timed_blocks(call, items)
    del trie
    gc.collect()
    return out


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, QUICK)
    n = sizes[-1]
    if n < BLOCKS:
        raise ValueError(f"fan needs at least {BLOCKS} subscribers, got {n}")
    repeat = ctx.pick_repeat(7, 3)
    window = n // BLOCKS * WINDOW_BLOCKS
    res = Result(
        NAME,
        params={"subscribers": n, "window": window, "block": n // BLOCKS, "repeat": repeat},
    )
    cases = _cases(n)
    table = Table(
        f"Subscribe cost, first vs last {fmt_size(window)} of {fmt_size(n)} (median ns/subscribe)",
        [
            "case",
            "pattern(s)",
            f"first {fmt_size(window)}",
            f"last {fmt_size(window)}",
            "last / first (median of rounds)",
            "IQR of ratio",
        ],
    )
    describe = {"one-pattern": "news.# (one pattern)", "one-level": "root.w{i}"}
    info = Table(
        f"Unsubscribe cost, first {fmt_size(window)} (set/level full) vs last "
        f"{fmt_size(window)} (nearly empty), informational",
        ["case", f"first {fmt_size(window)}", f"last {fmt_size(window)}", "first / last"],
    )
    diag = Table(
        "Diagnostic: the same subscribes as bare engine calls (no Python wrapper/registry)",
        ["case", f"first {fmt_size(window)}", f"last {fmt_size(window)}", "last / first"],
    )
    for name, pairs in cases.items():
        rounds: list[tuple[list[float], list[float]]] = []
        with ctx.progress.task(f"{NAME}: {name} x {fmt_size(n)}", repeat) as task:
            _one_round(pairs[: max(n // 10, BLOCKS)])  # warm-up, untimed
            engine: list[list[float]] = []
            for _ in range(repeat):
                rounds.append(_one_round(pairs))
                engine.append(_engine_round(pairs))
                task.advance()
        med: Callable[[list[float]], float] = statistics.median
        firsts = [med(r[0][:WINDOW_BLOCKS]) for r in rounds]
        lasts = [med(r[0][-WINDOW_BLOCKS:]) for r in rounds]
        ratio = summarize([b / a for a, b in zip(firsts, lasts, strict=True)])
        table.add(
            name,
            describe[name],
            fmt_ns(statistics.median(firsts)),
            fmt_ns(statistics.median(lasts)),
            fmt_ratio(ratio.median),
            f"{ratio.q1:.2f}-{ratio.q3:.2f}",
        )
        res.floors.append(
            Floor(
                name=f"fan-{name}",
                description=f"{describe[name]}: last {fmt_size(window)} / first "
                f"{fmt_size(window)} subscribes of {fmt_size(n)}",
                measured=ratio.median,
                limit=FLOOR,
                standard=standard,
            )
        )
        u_first = [med(r[1][:WINDOW_BLOCKS]) for r in rounds]
        u_last = [med(r[1][-WINDOW_BLOCKS:]) for r in rounds]
        u_ratio = summarize([a / b for a, b in zip(u_first, u_last, strict=True)])
        info.add(
            name,
            fmt_ns(statistics.median(u_first)),
            fmt_ns(statistics.median(u_last)),
            fmt_ratio(u_ratio.median),
        )
        e_first = [med(r[:WINDOW_BLOCKS]) for r in engine]
        e_last = [med(r[-WINDOW_BLOCKS:]) for r in engine]
        e_ratio = summarize([b / a for a, b in zip(e_first, e_last, strict=True)])
        diag.add(
            name,
            fmt_ns(statistics.median(e_first)),
            fmt_ns(statistics.median(e_last)),
            fmt_ratio(e_ratio.median),
        )
        res.data[name] = {
            "engine_first_window_ns": summarize(e_first).to_dict(),
            "engine_last_window_ns": summarize(e_last).to_dict(),
            "engine_ratio": e_ratio.to_dict(),
            "first_window_ns": summarize(firsts).to_dict(),
            "last_window_ns": summarize(lasts).to_dict(),
            "ratio": ratio.to_dict(),
            "block_ns_median": [statistics.median(r[0][b] for r in rounds) for b in range(BLOCKS)],
            "unsubscribe_first_window_ns": summarize(u_first).to_dict(),
            "unsubscribe_last_window_ns": summarize(u_last).to_dict(),
            "unsubscribe_ratio_first_over_last": u_ratio.to_dict(),
            "unsubscribe_block_ns_median": [
                statistics.median(r[1][b] for r in rounds) for b in range(BLOCKS)
            ],
        }
    res.tables.append(table)
    res.tables.append(info)
    res.tables.append(diag)
    return res


def _smooth(ys: list[float], k: int) -> list[float]:
    """Running median over ``k`` neighbouring blocks (spikes of single blocks vanish)."""
    h = max(k // 2, 1)
    return [statistics.median(ys[max(0, i - h) : i + h + 1]) for i in range(len(ys))]


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    block = res.params["block"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in ("one-pattern", "one-level"):
        ys = _smooth(res.data[name]["block_ns_median"], BLOCKS // 50)
        ax.plot([(i + 1) * block for i in range(len(ys))], ys, label=f"{name}: subscribe")
        us = _smooth(res.data[name]["unsubscribe_block_ns_median"], BLOCKS // 50)
        total = block * len(us)
        ax.plot(
            [total - i * block for i in range(len(us))],
            us,
            linestyle="--",
            label=f"{name}: unsubscribe",
        )
    ax.set_xlabel("subscribers in the set / words at the level")
    ax.set_ylabel("ns per call (median of rounds, running median)")
    ax.set_ylim(bottom=0)
    ax.set_title("cstrie: subscribe/unsubscribe cost as one pattern / one level fills up")
    ax.legend(fontsize=8)
    path = out / "fan.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "fan-in to one pattern / fan-out at one level (last vs first 10%)", run, plot
)
