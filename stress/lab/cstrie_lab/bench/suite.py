"""What the four scenarios of the classic-matchers suite share (``suite-ops``,
``suite-throughput``, ``suite-threads``, ``suite-scale``).

The suite puts :class:`cstrie.Trie` beside the classic matchers of
:mod:`cstrie_lab.classic` (built through the generic
:class:`~cstrie_lab.bench.matchers.ClassicAdapter`).  The workloads are AMQP (the
articles' dialect); paho-mqtt only speaks MQTT, so it gets the exact MQTT
translation of the same workload (:func:`~cstrie_lab.bench.workloads.to_mqtt`) and is
labelled ``paho (mqtt)``; where a pattern has no exact translation paho is left
out of that workload, with the reason in the table.

:class:`Entry` is one matcher taking part: its label, the adapter and how to
translate the workload's strings for it.  :func:`check_agree` compares every
matcher's answers with cstrie's before anything is timed (a disagreement is a
:class:`~cstrie_lab.bench.base.BenchError`); :func:`lookup_floor` turns lookup
ratios into the suite's floor "cstrie's lookup is faster than every other
matcher".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cstrie_lab.bench import matchers as mk
from cstrie_lab.bench.base import BenchError, Context, Floor, MissingDependency
from cstrie_lab.bench.format import fmt_ratio
from cstrie_lab.bench.workloads import to_mqtt

__all__ = [
    "BASELINES",
    "EXEMPT",
    "KINDS",
    "Entry",
    "Skipped",
    "baseline_note",
    "check_agree",
    "label",
    "lookup_floor",
    "memo_note",
    "new_entry",
]

#: matchers of the suite (registry names of :data:`cstrie_lab.bench.matchers.MATCHERS`),
#: in table order.  ``locked-trie`` is :class:`cstrie_lab.pytrie.PyTrie` under the
#: classic interface, so PyTrie is not listed twice.
KINDS = (
    "cstrie",
    "cstrie-cache",
    "inverted-bitmap",
    "level-bitmap",
    "locked-trie",
    "naive",
    "regex",
    "lazy-dfa",
    "paho-classic",
)
#: the matcher exempt from the lookup floor on workloads (a) and (b): it needs
#: the whole topic space up front
EXEMPT = "inverted-bitmap"
#: baselines shown beside the others but exempt from every lookup floor of the
#: suite, like :data:`EXEMPT`: the lazily built DFA (a reference point for the
#: trie-vs-DFA question, not a matcher the floors were set against)
BASELINES = ("lazy-dfa",)
#: cstrie with its result cache on: not a competitor of cstrie's floor (it is
#: cstrie), but held to its own: at least as fast as the full inverted bitmap
#: on the hot lookup (a) and the three-digit throughput (b)
CACHED = "cstrie-cache"
_LABELS = {"paho-classic": "paho (mqtt)"}


def label(kind: str) -> str:
    """The name a table shows for ``kind``."""
    return _LABELS.get(kind, kind)


class Skipped(Exception):
    """A matcher cannot take part (missing package, no exact translation, budget)."""


def _same(text: str) -> str:
    return text


def _mqtt(text: str) -> str:
    out = to_mqtt(text)
    if out is None:
        raise Skipped(f"no exact MQTT translation of {text!r} (paho speaks MQTT only)")
    return out


@dataclass
class Entry:
    """One matcher taking part in a suite scenario."""

    kind: str
    matcher: mk.Matcher
    translate: Callable[[str], str]
    build_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: a table label other than the kind's own (a variant of the same matcher)
    alias: str | None = None

    @property
    def label(self) -> str:
        return self.alias or label(self.kind)

    @property
    def thread_safe(self) -> bool:
        return self.matcher.thread_safe

    def size(self) -> int:
        """The number of (pattern, subscriber) pairs the matcher holds."""
        m: Any = self.matcher
        return len(m.trie)

    def pairs(self, pairs: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
        tr = self.translate
        return [(tr(p), s) for p, s in pairs]

    def topics(self, topics: Iterable[str]) -> list[str]:
        tr = self.translate
        return [tr(t) for t in topics]

    def build(
        self, pairs: Sequence[tuple[str, Any]], budget: float | None = None, every: int = 2_000
    ) -> None:
        """Subscribe ``pairs`` (already translated); :class:`Skipped` if it takes
        longer than ``budget`` seconds (checked every ``every`` pairs)."""
        add = self.matcher.add
        t0 = time.perf_counter()
        for i in range(0, len(pairs), every):
            for p, s in pairs[i : i + every]:
                add(p, s)
            spent = time.perf_counter() - t0
            if budget is not None and spent > budget and i + every < len(pairs):
                raise Skipped(
                    f"building took over {budget:.0f} s (stopped at {i + every:,} "
                    f"of {len(pairs):,} subscriptions)"
                )
        self.build_seconds = time.perf_counter() - t0


def new_entry(
    kind: str, topic_space: Sequence[str] | None = None, alias: str | None = None
) -> Entry:
    """An empty matcher of ``kind`` for an AMQP workload, paho on its MQTT
    translation; :class:`Skipped` when it cannot take part."""
    translate = _mqtt if kind == "paho-classic" else _same
    dialect = "mqtt" if kind == "paho-classic" else "amqp"
    space = None
    if mk.MATCHERS[kind].needs_topics:
        if topic_space is None:
            raise Skipped("needs the topic space up front")
        space = [translate(t) for t in topic_space]
    try:
        m = mk.make(kind, dialect, topics=space)
    except MissingDependency as exc:
        raise Skipped(str(exc)) from exc
    return Entry(kind, m, translate, alias=alias)


def build_all(
    ctx: Context,
    name: str,
    topic_space: Sequence[str],
    pairs: Sequence[tuple[str, Any]],
    prepare: Callable[[Entry], None] | None = None,
) -> tuple[list[Entry], dict[str, str]]:
    """Every kind of :data:`KINDS` built with ``pairs`` (and ``prepare``d):
    the entries, cstrie first, and the skipped kinds' reasons by label.
    :class:`BenchError` when cstrie itself could not be built."""
    entries: list[Entry] = []
    skipped: dict[str, str] = {}
    with ctx.progress.task(f"{name}: build {len(KINDS)} matchers", len(KINDS)) as t:
        for kind in KINDS:
            try:
                e = new_entry(kind, topic_space)
                e.build(e.pairs(pairs))
                if prepare is not None:
                    prepare(e)
                entries.append(e)
            except Skipped as exc:
                skipped[label(kind)] = str(exc)
            t.advance()
    if not entries or entries[0].label != "cstrie":
        raise BenchError("cstrie could not be built")
    return entries, skipped


def check_agree(
    entries: Sequence[Entry],
    topics: Sequence[str],
    rng: random.Random | None = None,
    sample: int | None = None,
    what: str = "",
) -> float:
    """Every entry answers every topic (or a ``sample`` of them) as the first
    entry (cstrie) does, as sets; :class:`BenchError` otherwise.  Returns the mean
    number of subscribers per topic."""
    chosen = list(topics)
    if sample is not None and len(chosen) > sample:
        chosen = (rng or random.Random(0)).sample(chosen, sample)
    if not entries or not chosen:
        return 0.0
    ref = entries[0]
    total = 0
    for t in chosen:
        want = sorted(ref.matcher.lookup(ref.translate(t)))
        total += len(want)
        for e in entries[1:]:
            got = sorted(e.matcher.lookup(e.translate(t)))
            if got != want:
                raise BenchError(
                    f"{e.label} disagrees with {ref.label} on topic {t!r}{what}: "
                    f"{got[:10]} != {want[:10]} ({len(got)} vs {len(want)} subscribers)"
                )
    return total / len(chosen)


def lookup_floor(
    name: str,
    what: str,
    ns: dict[str, float],
    *,
    exempt: Sequence[str] = (),
    standard: bool = True,
) -> tuple[Floor, dict[str, Any]]:
    """The floor "cstrie's lookup is faster than every other matcher".

    ``ns`` maps labels to median ns per lookup (cstrie's label is ``cstrie``).
    The measured value is the smallest ratio other / cstrie over the matchers
    that are not ``exempt`` (above 1.0: cstrie is faster than all of them).
    Returns the floor and the ratios (for the JSON and the notes).
    """
    cs = ns["cstrie"]
    ratios = {k: v / cs for k, v in ns.items() if k not in ("cstrie", CACHED)}
    counted = {k: r for k, r in ratios.items() if k not in exempt}
    if counted:
        closest = min(counted, key=lambda k: counted[k])
        measured = counted[closest]
        desc = f"{what}: closest other matcher ({closest}) / cstrie lookup time"
    else:
        closest, measured = "none", float("nan")
        desc = f"{what}: no other matcher was measured"
    info = {
        "ratios_other_over_cstrie": ratios,
        "closest": closest,
        "exempt": {k: ratios[k] for k in exempt if k in ratios},
    }
    return (
        Floor(
            name=name, description=desc, measured=measured, limit=1.0, kind="min", standard=standard
        ),
        info,
    )


def cached_floor(
    name: str, what: str, ns: dict[str, float], *, standard: bool = True
) -> Floor | None:
    """The floor "cstrie with its result cache is at least as fast as the full
    inverted bitmap": inverted-bitmap / cstrie-cache time >= 1.0.  None when
    either was not measured."""
    if CACHED not in ns or EXEMPT not in ns:
        return None
    return Floor(
        name=name,
        description=f"{what}: {EXEMPT} / {CACHED} lookup time (the result cache on)",
        measured=ns[EXEMPT] / ns[CACHED],
        limit=1.0,
        kind="min",
        standard=standard,
    )


def exempt_note(info: dict[str, Any], what: str) -> str | None:
    """A note stating the exempt matcher's gap (the issue asks for it honestly)."""
    ex = info.get("exempt") or {}
    if EXEMPT not in ex:
        return None
    r = ex[EXEMPT]
    if r < 1:
        return (
            f"{what}: the full inverted bitmap (exempt: it needs every topic up front) "
            f"is {fmt_ratio(1 / r)} FASTER than cstrie ({EXEMPT} / cstrie = {fmt_ratio(r)}): "
            "a lookup is one dict hit on a precomputed (and cached) answer, where cstrie "
            "parses the topic and walks the trie"
        )
    return (
        f"{what}: the full inverted bitmap (exempt) is slower than cstrie here "
        f"({EXEMPT} / cstrie = {fmt_ratio(r)})"
    )


def baseline_note(info: dict[str, Any], what: str) -> list[str]:
    """Notes stating each exempt baseline's ratio to cstrie (:data:`BASELINES`)."""
    ex = info.get("exempt") or {}
    out = []
    for lab in BASELINES:
        if lab in ex:
            r = ex[lab]
            faster = f"{fmt_ratio(1 / r)} faster than" if r < 1 else f"{fmt_ratio(r)} slower than"
            out.append(f"{what}: {lab} (a baseline, exempt from the floor) is {faster} cstrie")
    return out


def memo_note(entries: Iterable[Entry], what: str) -> list[str]:
    """The size of every matcher that reports one (the lazy DFA's states and
    transitions, :meth:`~cstrie_lab.classic.LazyDFA.dfa_size`), as notes: its
    memory beside its time."""
    out = []
    for e in entries:
        size = getattr(e.matcher.trie, "dfa_size", None) if hasattr(e.matcher, "trie") else None
        if size is None:
            continue
        s = size(measure_bytes=True)
        out.append(
            f"{what}: {e.label} DFA after the timed lookups: {s['states']:,} states, "
            f"{s['transitions']:,} transitions, {s['positions']:,} NFA positions, "
            f"~{s['bytes'] / 1024:,.0f} KiB by its own count (NFA: {s['nfa_nodes']:,} nodes); "
            f"dropped {s['drops']:,} time{'' if s['drops'] == 1 else 's'} by updates"
            + (
                f", {s['resets']:,} by its {s['max_states']:,}-state budget"
                if s["max_states"] is not None
                else ""
            )
        )
    return out


def batch_size(ns_per_op: float, target_ns: float, lo: int, hi: int) -> int:
    """Operations per timed batch so that a batch lasts about ``target_ns``."""
    if ns_per_op <= 0 or ns_per_op != ns_per_op:
        return hi
    return max(lo, min(hi, int(target_ns / ns_per_op)))


def probe(fn: Callable[[str], object], topics: Sequence[str], limit_ns: float) -> float:
    """Median-free quick estimate of ns per call: call ``fn`` on topics until
    ``limit_ns`` is spent or all are done; returns ns per call."""
    t0 = time.perf_counter_ns()
    n = 0
    for t in topics:
        fn(t)
        n += 1
        if time.perf_counter_ns() - t0 > limit_ns:
            break
    return (time.perf_counter_ns() - t0) / max(n, 1)
