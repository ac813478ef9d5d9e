"""``route``: what share groups cost a message -- ``Trie.route`` against
``Trie.lookup`` on the same trie and the same topics (issue "Shared
subscriptions and queue groups").

Workloads (sizes: ``N`` filters, default 10,000):

* **mqtt** -- ``0.9 N`` ordinary random MQTT filters
  (:func:`~cstrie_lab.bench.workloads.random_mqtt_filters`, one subscriber each) and
  ``0.1 N`` shared ones, made 1-3 at a time from a topic of the workload (the
  topic generalised: one level made ``+``, or the tail made ``#``, or kept
  literal), each joined by its own group of 2-10 members
  (``$share/g<j>/<filter>``).  Two topic sets from the
  same pool (:func:`~cstrie_lab.bench.workloads.matching_topics`, so every topic
  has ordinary subscribers):

  - **(a) no group**: topics matching no shared filter: ``route`` must cost
    what ``lookup`` does;
  - **(b) 1-3 groups**: topics matching 1 to 3 groups: ``route`` = the lookup
    plus one pick per group.

* **(c) nats** -- a NATS request/reply service mesh: ``N / 20`` services of 8
  methods; each service has a queue group of 2-10 workers on
  ``svc.<s>.*`` and three in ten an audit queue group of 2-3 on ``svc.<s>.>``;
  ordinary subscribers: two monitors on ``svc.>``, a tracer per method on
  ``svc.*.<m>``, a health checker on ``svc.<s>.m0`` per service, and reply
  inboxes ``_INBOX.<id>`` (matching no request) up to ``N`` filters.
  Topics: ``svc.<s>.<m>``.

Every answer is checked first (on every timed topic): ``route`` returns the
lookup's subscribers, then one member per matching group; ``route_by_group``
names exactly the groups whose filter matches (found by an ordinary ``lookup``
on a second trie holding each shared filter with its group name as the
subscriber) and picks one of that group's members.

Timing: batches of 32 topics, ``lookup`` / ``route`` / ``route_by_group``
interleaved round-robin (order rotating), ``repeat`` rounds; median ns per
topic.  Floor: route / lookup <= 1.5 on (b) at N = 10,000.

Round-robin spread: a group of 5 members on ``rr/+/x``; 2 threads route
1,000,000 messages in all (100,000 with ``--quick``: indicative) with
``Trie.route`` and count each member's deliveries.  Floor: max |count - mean| /
mean <= 2%.  It is a count, not a time: the ratio does not depend on the machine.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from cstrie.trie import Trie
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.timing import chunks, interleave, paired_ratio, rotating
from cstrie_lab.bench.workloads import matching_topics, random_mqtt_filters

NAME = "route"
FLOOR_SIZE = 10_000
FLOOR = 1.5
RR_FLOOR = 2.0  # percent
RR_MESSAGES = 1_000_000
RR_QUICK = 100_000
RR_THREADS = 2
RR_MEMBERS = 5
TOPICS = 2_000
CHUNK = 32
SHARED = 0.10
MEMBER_BASE = 10_000_000
CASES = ("lookup", "route", "route_by_group")


class Workload:
    """A trie with ordinary subscriptions and groups, and the groups'
    expected members per name; ``ref`` holds each shared filter with its
    group's name as an ordinary subscriber (the independent answer)."""

    def __init__(self, dialect: str) -> None:
        self.trie = Trie(dialect)
        self.ref = Trie(dialect)
        self.members: dict[str, set[int]] = {}
        self.subscriptions = 0
        self.filters: set[str] = set()

    def ordinary(self, pattern: str, sub: Any) -> None:
        self.subscriptions += self.trie.subscribe(pattern, sub)
        self.filters.add(pattern)

    def join(self, pattern: str, group: str, member: int) -> None:
        if self.trie.dialect.share_prefix is not None:  # MQTT: $share/{group}/{filter}
            self.subscriptions += self.trie.subscribe(f"$share/{group}/{pattern}", member)
        else:
            self.subscriptions += self.trie.subscribe(pattern, member, group=group)
        self.ref.subscribe(pattern, group)
        self.filters.add(pattern)
        self.members.setdefault(group, set()).add(member)


def _generalise(rng: random.Random, topic: str) -> str:
    """A filter matching ``topic``: one level from the third on made ``+``,
    or everything from the fourth on made ``#``, or the topic itself (wider
    filters -- ``building3/#`` -- would put a group on an eighth of all topics)."""
    words = topic.split("/")
    r = rng.random()
    if r < 0.4 and len(words) > 2:
        words[rng.randrange(2, len(words))] = "+"
    elif r < 0.7 and len(words) > 3:
        words = [*words[: rng.randrange(3, len(words))], "#"]
    return "/".join(words)


def mqtt_workload(rng: random.Random, n: int, topics: int) -> tuple[Workload, list[str], list[str]]:
    """(workload, (a) topics matching no group, (b) topics matching 1-3)."""
    n_shared = max(1, round(n * SHARED))
    w = Workload("mqtt")
    plain = random_mqtt_filters(rng, n - n_shared)
    for i, f in enumerate(plain):
        w.ordinary(f, i)
    pool = matching_topics(rng, plain, 10 * topics)
    shared: list[str] = []
    seen: set[str] = set(plain)
    while len(shared) < n_shared:
        topic = rng.choice(pool)  # 1-3 groups on filters of this topic
        for _ in range(rng.randint(1, 3)):
            f = _generalise(rng, topic)
            if f not in seen and len(shared) < n_shared:
                seen.add(f)
                shared.append(f)
    for j, f in enumerate(shared):
        for k in range(rng.randint(2, 10)):
            w.join(f, f"g{j}", MEMBER_BASE + 16 * j + k)
    none: list[str] = []
    some: list[str] = []
    for t in pool:
        g = len(w.ref.lookup(t))
        if g == 0:
            none.append(t)
        elif g <= 3:
            some.append(t)
    if len(none) < topics // 4 or len(some) < topics // 4:
        raise BenchError(
            f"route: the MQTT pool gave {len(none)} topics without a group and {len(some)} "
            f"with 1-3 groups; need {topics // 4} of each"
        )
    return w, _pick(rng, none, topics), _pick(rng, some, topics)


def _pick(rng: random.Random, items: list[str], k: int) -> list[str]:
    return rng.sample(items, k) if len(items) >= k else [rng.choice(items) for _ in range(k)]


def nats_workload(rng: random.Random, n: int, topics: int) -> tuple[Workload, list[str]]:
    """(workload, request topics)."""
    w = Workload("nats")
    services = max(2, n // 20)
    methods = 8
    member = MEMBER_BASE
    for s in range(services):
        for _ in range(rng.randint(2, 10)):
            w.join(f"svc.s{s}.*", f"q-s{s}", member)
            member += 1
        if rng.random() < 0.3:
            for _ in range(rng.randint(2, 3)):
                w.join(f"svc.s{s}.>", f"audit-s{s}", member)
                member += 1
        w.ordinary(f"svc.s{s}.m0", f"health-{s}")
    for m in range(methods):
        w.ordinary(f"svc.*.m{m}", f"tracer-{m}")
    w.ordinary("svc.>", "monitor-0")
    w.ordinary("svc.>", "monitor-1")
    i = 0
    while len(w.filters) < n:
        w.ordinary(f"_INBOX.{rng.getrandbits(64):016x}", f"client-{i}")
        i += 1
    out = [f"svc.s{rng.randrange(services)}.m{rng.randrange(methods)}" for _ in range(topics)]
    return w, out


def _check(w: Workload, topics: Sequence[str]) -> dict[str, float]:
    """Every route answer is right (BenchError if not); mean ordinary
    subscribers, groups and members per group per topic."""
    trie, ref = w.trie, w.ref
    ordinary = groups = members = 0
    for t in set(topics):
        plain = trie.lookup(t)
        want = set(ref.lookup(t))
        routed = trie.route(t)
        ordinary_part, chosen = trie.route_by_group(t)
        k = len(plain)
        ok = sorted(routed[:k], key=repr) == sorted(plain, key=repr)
        ok = ok and len(routed) == k + len(want)
        ok = ok and sorted(ordinary_part, key=repr) == sorted(plain, key=repr)
        ok = ok and set(chosen) == want and all(chosen[g] in w.members[g] for g in chosen)
        ok = ok and all(any(m in w.members[g] for g in want) for m in routed[k:])
        if not ok:
            raise BenchError(
                f"route: wrong answer for {t!r}: lookup {plain!r}, route {routed!r}, "
                f"route_by_group {(ordinary_part, chosen)!r}, groups expected {sorted(want)}"
            )
    for t in topics:
        names = ref.lookup(t)
        ordinary += len(trie.lookup(t))
        groups += len(names)
        members += sum(len(w.members[g]) for g in names)
    n = len(topics)
    return {
        "ordinary_per_topic": ordinary / n,
        "groups_per_topic": groups / n,
        "members_per_group": members / groups if groups else 0.0,
    }


def _batch(fn: Callable[[str], object], topics: Sequence[str]) -> Callable[[], object]:
    def run() -> None:
        for t in topics:
            fn(t)

    return run


def round_robin(messages: int, threads: int) -> dict[str, Any]:
    """A group of RR_MEMBERS on ``rr/+/x``; ``threads`` threads route ``messages``
    in all; each member's deliveries and the imbalance."""
    trie = Trie("mqtt")
    for k in range(RR_MEMBERS):
        trie.subscribe("$share/rr/rr/+/x", MEMBER_BASE + k)
    topics = [f"rr/{w}/x" for w in ("a", "b", "c", "d")]
    per = [messages // threads + (1 if t < messages % threads else 0) for t in range(threads)]
    counts = [[0] * RR_MEMBERS for _ in range(threads)]
    bad = [0] * threads
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            route = trie.route
            c = counts[t]
            mine = [topics[(t + i) % len(topics)] for i in range(len(topics))]
            barrier.wait()
            for i in range(per[t]):
                r = route(mine[i & 3])
                if len(r) != 1:
                    bad[t] += 1
                    continue
                c[r[0] - MEMBER_BASE] += 1
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    ths = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise BenchError(f"route: a round-robin thread failed: {errors[0]!r}")
    total = [sum(c[k] for c in counts) for k in range(RR_MEMBERS)]
    mean = sum(total) / RR_MEMBERS
    imbalance = max(abs(x - mean) for x in total) / mean if mean else 1.0
    return {
        "messages": sum(per),
        "threads": threads,
        "counts": total,
        "imbalance_percent": 100 * imbalance,
        "not_one_member": sum(bad),
        "seconds": seconds,
    }


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes([FLOOR_SIZE], [2_000])
    repeat = ctx.pick_repeat(1000, 150)
    rng = ctx.rng(NAME)
    res = Result(NAME, params={"sizes": sizes, "topics": TOPICS, "batch": CHUNK, "repeat": repeat})
    table = Table(
        "route vs lookup per topic, same trie and topics (median ns, IQR in brackets)",
        [
            "filters",
            "subscriptions",
            "workload",
            "ordinary/topic",
            "groups/topic",
            "members/group",
            *CASES,
            "route / lookup",
            "route_by_group / lookup",
        ],
    )
    per_size: dict[str, Any] = {}
    for n in sizes:
        with ctx.progress.task(f"{NAME}: build workloads x {fmt_size(n)}", 1):
            mqtt, none, some = mqtt_workload(rng, n, TOPICS)
            nats, requests = nats_workload(rng, n, TOPICS)
        runs = (
            ("(a) mqtt, no group", mqtt, none),
            ("(b) mqtt, 1-3 groups", mqtt, some),
            ("(c) nats queue groups", nats, requests),
        )
        rows: dict[str, Any] = {}
        for label, w, topics in runs:
            shape = _check(w, topics)
            parts = chunks(topics, CHUNK)
            fns: dict[str, Callable[[str], object]] = {
                "lookup": w.trie.lookup,
                "route": w.trie.route,
                "route_by_group": w.trie.route_by_group,
            }
            cases = {k: rotating([_batch(fn, p) for p in parts]) for k, fn in fns.items()}
            with ctx.progress.task(f"{NAME}: {label} x {fmt_size(n)}", repeat) as task:
                stats = interleave(
                    cases, CHUNK, repeat=repeat, warmup=len(parts), tick=task.advance
                )
            lk = stats["lookup"].median
            ratio = stats["route"].median / lk
            by_group = stats["route_by_group"].median / lk
            table.add(
                fmt_size(len(w.filters)),
                f"{w.subscriptions:,}",
                label,
                f"{shape['ordinary_per_topic']:.2f}",
                f"{shape['groups_per_topic']:.2f}",
                f"{shape['members_per_group']:.1f}",
                *[f"{fmt_ns(stats[k].median)} [{fmt_ns(stats[k].iqr)}]" for k in CASES],
                fmt_ratio(ratio),
                fmt_ratio(by_group),
            )
            rows[label] = {
                "filters": len(w.filters),
                "subscriptions": w.subscriptions,
                "shape": shape,
                "ns_per_topic": {k: s.to_dict() for k, s in stats.items()},
                "route_over_lookup": ratio,
                "route_over_lookup_paired": paired_ratio(stats["route"], stats["lookup"]).to_dict(),
                "route_by_group_over_lookup": by_group,
            }
            at_floor = n == FLOOR_SIZE or (FLOOR_SIZE not in sizes and n == sizes[-1])
            if label.startswith("(b)") and at_floor:
                res.floors.append(
                    Floor(
                        name="route-vs-lookup",
                        description=f"route / lookup per topic, MQTT, {fmt_size(n)} filters "
                        "(10% shared), topics matching 1-3 groups",
                        measured=ratio,
                        limit=FLOOR,
                        standard=standard and n == FLOOR_SIZE,
                    )
                )
        per_size[str(n)] = rows
        del mqtt, nats
    res.tables.append(table)
    res.data["sizes"] = per_size

    messages = RR_QUICK if ctx.quick else RR_MESSAGES
    with ctx.progress.task(f"{NAME}: round-robin, {messages:,} messages", 1):
        rr = round_robin(messages, RR_THREADS)
    if rr["not_one_member"]:
        raise BenchError(f"route: {rr['not_one_member']} round-robin routes gave not one member")
    rr_table = Table(
        f"Round-robin spread: one group of {RR_MEMBERS} members, {RR_THREADS} threads routing",
        ["messages", "deliveries per member", "max |count - mean| / mean"],
    )
    rr_table.add(
        f"{rr['messages']:,}",
        ", ".join(f"{c:,}" for c in rr["counts"]),
        f"{rr['imbalance_percent']:.4f}%",
    )
    res.tables.append(rr_table)
    res.data["round_robin"] = rr
    res.floors.append(
        Floor(
            name="route-rr-imbalance",
            description=f"round-robin imbalance, {RR_MEMBERS} members, {rr['messages']:,} "
            f"messages on {RR_THREADS} threads",
            measured=rr["imbalance_percent"],
            limit=RR_FLOOR,
            unit="%",
            standard=rr["messages"] >= RR_MESSAGES,
            indicative="fewer messages than the floor's 1,000,000",
        )
    )
    res.notes.append(
        "route = the lookup's walk plus the share slots of the matching filters and one pick "
        "per group (round-robin: an atomic counter); route_by_group builds the {group: member} "
        "dict in the Python layer (no C fast path)."
    )
    return res


SCENARIO = Scenario(NAME, "share groups: Trie.route vs Trie.lookup, round-robin spread", run)
