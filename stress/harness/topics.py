"""The ``topics`` scenario: a :class:`cstrie.topics.TopicIndex` written and
queried by several threads at once, every operation recorded and checked.

``python -m stress.harness --scenario topics`` (see
:mod:`stress.harness.topic_cli`) runs, for each thread count n, n threads on
one index, each doing a seeded mix of writes and reads; the checks are in
:mod:`stress.harness.topic_checker`.

The space (:func:`build_space`)
-------------------------------
``--keys`` topics of one to four levels, drawn from small word pools so
that filters overlap (``r1/m0/x2``, ``r0/m3``, ...), with the dialect's
edge cases mixed in: MQTT topics under ``$s`` (the ``$`` rule: ``#`` and
``+/...`` must not see them) and empty levels (``r0//x1``), AMQP topics that
hold ``*`` or ``#`` as literal words and the empty topic.  Each topic is
either *owned* by one thread -- dealt round-robin after a seeded shuffle, so
every filter's answer mixes every thread's topics -- and written only by
that thread, or *shared* (``--shared-topics``, default keys // 32): written
by every thread.

Filters of every shape, built from the topics so that they match some:
literal topics, ``+`` single-level (``r1/+/x0``, ``+/+/+``), ``#``/``>``
multi-level (``#``, ``r0/#``, ``+/m1/#``; in AMQP also ``#.x0`` and
``r0.#.e1``), filters that match nothing (``zz/+/none``, ``zz/#``) and, in
MQTT, ``$s/#``.  Which filter matches which topic is decided by the
independent reference matcher ``tests/support/oracle.py`` (written from the dialect
rules; it shares no code with cstrie), never by cstrie's own query.

The run (:func:`record_topics`)
-------------------------------
Every thread first puts a seeded half of its own topics (and of a share of
the shared ones), then, released together by a barrier, runs ``--ops``
operations: ``--mix R/W`` percent reads and writes.  A write is a ``put``
(55%) with a fresh value no other put ever stores -- an int naming the
thread and the op, so every read names the write it saw -- a ``remove``
(25%) or a ``pop`` (20%); one write in eight goes to a shared topic, the
rest to the thread's own.  A read is a ``get`` of any topic (30%), a
``query`` of a random filter (40%), a ``count`` of one (20%) or ``len()``
(10%).  Every ``--snapshot-every``-th operation is a ``snapshot()``, read
right away (its items, ``len``, a ``get``, a ``query`` and a ``count``) and
again (query, count, len, get) when the thread takes its next one: the
live index has moved on by then, the snapshot must not have.

Each operation is stamped before and after by the shared clock
(:mod:`stress.harness.clock`); ``query`` is stamped around the call itself,
and its iterator read after the second stamp: the documented answer is the
index's at the call.  What a read returned is kept as topic indices and
values (a query's pairs as one flat array), never as the strings and objects
the index returned.  After the threads join: the final items, ``len`` and
``check_invariants(strict=True)``.
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cstrie.dialect import Dialect, resolve_dialect
from stress.harness.clock import Clock
from stress.harness.progress import Counter, Progress

__all__ = [
    "BAD",
    "COUNT",
    "GET",
    "KIND_NAMES",
    "LEN",
    "POP",
    "PUT",
    "QUERY",
    "REMOVE",
    "SNAPSHOT",
    "SnapRecord",
    "TopicHistory",
    "TopicLog",
    "TopicSpace",
    "build_space",
    "generate_ops",
    "make_space",
    "oracle",
    "put_value",
    "record_topics",
    "value_name",
]

# Operation kinds.
PUT, REMOVE, POP, GET, QUERY, COUNT, LEN, SNAPSHOT = range(8)
KIND_NAMES = ("put", "remove", "pop", "get", "query", "count", "len", "snapshot")
WRITES = (PUT, REMOVE, POP)

#: result of an op that raised or returned something of the wrong type (the
#: text is in TopicLog.errors); values are > 0 and "nothing" is 0
BAD = -1
#: a put's value: ((thread + 1) << SHIFT) | position of the op in its thread
SHIFT = 40
POS_MASK = (1 << SHIFT) - 1

#: one write in this many goes to a shared topic
SHARED_EVERY = 8
#: write kinds and read kinds with their weights
WRITE_WEIGHTS = ((PUT, 55), (REMOVE, 25), (POP, 20))
READ_WEIGHTS = ((GET, 30), (QUERY, 40), (COUNT, 20), (LEN, 10))

_oracle: ModuleType | None = None


def oracle() -> ModuleType:
    """``tests/support/oracle.py``, the reference matcher written from the dialect rules
    (loaded from the file: ``tests`` is not a package)."""
    global _oracle
    if _oracle is None:
        path = Path(__file__).resolve().parents[2] / "tests" / "support" / "oracle.py"
        spec = importlib.util.spec_from_file_location("cstrie_stress_oracle", path)
        if spec is None or spec.loader is None:  # pragma: no cover
            raise ImportError(f"cannot load the reference matcher {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _oracle = mod
    return _oracle


def put_value(thread: int, pos: int) -> int:
    """The value the put at ``pos`` of ``thread`` stores (unique in a run)."""
    return ((thread + 1) << SHIFT) | pos


def value_name(v: int) -> str:
    """``v1:52`` for the value of thread 1's op #52; ``None`` for 0."""
    if v == 0:
        return "None"
    if v < 0 or v >> SHIFT == 0:
        return f"<not a put's value: {v}>"
    return f"v{(v >> SHIFT) - 1}:{v & POS_MASK}"


# -------------------------------------------------------------------- space
@dataclass
class TopicSpace:
    """Topics (who writes each), filters and which filter matches which topic."""

    dialect: Dialect
    topics: list[str]
    #: per topic: the thread that writes it, or -1 (shared: every thread)
    owner: list[int]
    filters: list[str]
    #: per filter: literal, single, multi, single+multi, none
    shapes: list[str]
    #: per filter: the topics it matches (tests/support/oracle.py)
    matches: list[frozenset[int]]
    threads: int
    own: list[list[int]] = field(default_factory=list)
    shared: list[int] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def topic(self, x: int) -> str:
        return repr(self.topics[x]) if 0 <= x < len(self.topics) else f"<topic #{x}?>"

    def who(self, x: int) -> str:
        o = self.owner[x]
        return "shared" if o < 0 else f"thread {o}'s"


def _shape(d: Dialect, f: str) -> str:
    words = oracle().words_of(d, f)
    single = d.single is not None and d.single in words
    multi = d.multi is not None and d.multi in words
    if single and multi:
        return "single+multi"
    return "single" if single else "multi" if multi else "literal"


def make_space(
    dialect: str | Dialect,
    topics: list[str],
    owner: list[int],
    filters: list[str],
    threads: int,
    nothing: frozenset[int] = frozenset(),
) -> TopicSpace:
    """A space from explicit parts (the tests' hand-made histories use it).
    ``nothing``: the filters meant to match no topic (labelled ``none``)."""
    d = resolve_dialect(dialect)
    o = oracle()
    for t in topics:
        d.split_topic(t)
        if not o.valid_topic(d, t):
            raise ValueError(f"{t!r} is not a valid {d.name} topic for the oracle")
    for f in filters:
        d.split_pattern(f)
        if not o.valid_pattern(d, f):
            raise ValueError(f"{f!r} is not a valid {d.name} filter for the oracle")
    if len(set(topics)) != len(topics):
        raise ValueError("topics must be distinct")
    if len(owner) != len(topics) or any(not -1 <= w < threads for w in owner):
        raise ValueError("one owner per topic, -1 or a thread index")
    matches = [frozenset(i for i, t in enumerate(topics) if o.matches(d, f, t)) for f in filters]
    shapes = ["none" if i in nothing else _shape(d, f) for i, f in enumerate(filters)]
    for i in nothing:
        if matches[i]:
            raise ValueError(f"filter {filters[i]!r} was meant to match nothing")
    return TopicSpace(
        dialect=d,
        topics=list(topics),
        owner=list(owner),
        filters=list(filters),
        shapes=shapes,
        matches=matches,
        threads=threads,
        own=[[x for x, w in enumerate(owner) if w == t] for t in range(threads)],
        shared=[x for x, w in enumerate(owner) if w < 0],
        index={t: i for i, t in enumerate(topics)},
    )


def _topic_words(d: Dialect, n: int, rng: random.Random) -> list[list[str]]:
    p = max(3, math.ceil(n ** (1 / 3)) + 1)
    pools = [
        [f"r{i}" for i in range(max(2, p // 2))],
        [f"m{i}" for i in range(p)],
        [f"x{i}" for i in range(p)],
        [f"e{i}" for i in range(p)],
    ]
    odd_words = [w for w in (d.single, d.multi) if w is not None] if d.topic_wildcards else []
    seen: set[tuple[str, ...]] = set()
    out: list[list[str]] = []
    if d.empty_topic:
        seen.add(())
        out.append([])
    tries = 0
    while len(out) < n and tries < 60 * n:
        tries += 1
        depth = rng.choices((1, 2, 3, 4), (5, 25, 45, 25))[0]
        words = []
        for level in range(depth):
            roll = rng.random()
            if level == 0 and d.dollar_rule and roll < 0.06:
                words.append("$s")
            elif level > 0 and d.empty_words and roll < 0.04:
                words.append("")
            elif level > 0 and odd_words and roll < 0.07:
                words.append(rng.choice(odd_words))
            else:
                words.append(rng.choice(pools[level]))
        key = tuple(words)
        if key not in seen:
            seen.add(key)
            out.append(words)
    i = 0
    while len(out) < n:  # the pools are exhausted: numbered topics
        key = ("n", str(i))
        i += 1
        if key not in seen:
            seen.add(key)
            out.append(list(key))
    return out


def _filter_words(d: Dialect, topics: list[list[str]], rng: random.Random) -> list[list[str]]:
    """Filters of every shape, as word lists (the ones under ``zz`` match nothing)."""
    s, m = d.single, d.multi
    assert s is not None and m is not None
    plain = [w for w in topics if w and w[0] != "$s" and all(x not in (s, m) for x in w)]
    deep = [w for w in plain if len(w) >= 3] or plain
    two = [w for w in plain if len(w) >= 2] or plain
    out: list[list[str]] = [[m]]  # everything (but MQTT's $ topics)
    for w in rng.sample(plain, min(3, len(plain))):  # literal
        out.append(list(w))
    w = rng.choice(deep)
    out.append([w[0], s, *w[2:]])  # one '+'
    w = rng.choice(deep)
    out.append([s, w[1], s, *w[3:]])  # two '+'
    out.append([s, s, s])
    w = rng.choice(two)
    out.append([w[0], s])
    out.append([w[0], m])  # '#' / '>'
    w = rng.choice(deep)
    out.append([w[0], w[1], m])
    w = rng.choice(deep)
    out.append([s, w[1], m])  # '+' then '#'
    if not d.multi_last_only:  # AMQP: '#' anywhere
        w = rng.choice(deep)
        out.append([m, w[-1]])
        out.append([w[0], m, w[-1]])
        out.append([m, s, m])
    if d.dollar_rule:
        out.append(["$s", m])
        out.append([s, m])
    out.append(["zz", s, "none"])
    out.append(["zz", m])
    return out


def build_space(
    dialect: str | Dialect, keys: int, threads: int, seed: int, shared: int | None = None
) -> TopicSpace:
    """The seeded space of the module docstring for ``threads`` threads."""
    d = resolve_dialect(dialect)
    if d.single is None or d.multi is None:
        raise ValueError(f"the topics scenario needs both wildcards; {d.name} lacks one")
    n_shared = max(2, keys // 32) if shared is None else shared
    if keys < n_shared + threads:
        raise ValueError(
            f"--keys {keys} is too few for {threads} thread(s) and {n_shared} shared topics: "
            "every thread needs a topic of its own"
        )
    rng = random.Random(f"cstrie-stress/topics/space/{d.name}/{keys}/{seed}")
    words = _topic_words(d, keys, rng)
    sep = d.separator
    topics = [sep.join(w) for w in words]
    filters: list[str] = []
    nothing = set()
    for f in _filter_words(d, words, rng):
        text = sep.join(f)
        if text not in filters:
            if f[0] == "zz":
                nothing.add(len(filters))
            filters.append(text)
    order = list(range(len(topics)))
    rng.shuffle(order)
    owner = [0] * len(topics)
    for j, x in enumerate(order):
        owner[x] = -1 if j < n_shared else (j - n_shared) % threads
    return make_space(d, topics, owner, filters, threads, frozenset(nothing))


# ---------------------------------------------------------------- the ops
def generate_ops(
    space: TopicSpace,
    thread: int,
    count: int,
    read_percent: int,
    snapshot_every: int,
    seed: int,
) -> tuple[array[int], array[int], array[int]]:
    """(kinds, args, args2) of one thread's timed operations: the topic of a
    write or get, the filter of a query or count; a snapshot's filter (arg)
    and topic (arg2) for the reads made on it."""
    rng = random.Random(f"cstrie-stress/topics/ops/{seed}/{space.threads}/{thread}")
    own, shared = space.own[thread], space.shared
    n_topics, n_filters = len(space.topics), len(space.filters)
    w_kinds, w_weights = zip(*WRITE_WEIGHTS, strict=True)
    r_kinds, r_weights = zip(*READ_WEIGHTS, strict=True)
    kinds, args, args2 = array("B"), array("i"), array("i")
    for i in range(count):
        if snapshot_every and i % snapshot_every == snapshot_every - 1:
            kinds.append(SNAPSHOT)
            args.append(rng.randrange(n_filters))
            args2.append(rng.randrange(n_topics))
            continue
        if rng.random() * 100 < read_percent:
            k = rng.choices(r_kinds, r_weights)[0]
            a = rng.randrange(n_topics) if k == GET else rng.randrange(n_filters)
            kinds.append(k)
            args.append(-1 if k == LEN else a)
        else:
            k = rng.choices(w_kinds, w_weights)[0]
            if shared and (not own or rng.randrange(SHARED_EVERY) == 0):
                a = rng.choice(shared)
            else:
                a = rng.choice(own)
            kinds.append(k)
            args.append(a)
        args2.append(-1)
    return kinds, args, args2


# ------------------------------------------------------------------ records
@dataclass
class SnapRecord:
    """What one snapshot held and what was read from it."""

    #: its items: topic index, value, topic index, value, ...
    items: array[int]
    length: int
    #: snapshot.get(topics[key]) -> value or 0
    key: int
    got: int
    #: snapshot.query(filters[filt]) pairs (flat, like items) and count(filt)
    filt: int
    found: array[int]
    counted: int
    #: the same reads again when the thread took its next snapshot:
    #: (query pairs, count, len, get), or an error text
    late: tuple[array[int], int, int, int] | str | None = None


@dataclass
class TopicLog:
    """One thread's operations in program order (parallel arrays).

    ``result``: put/remove 1 or 0; pop/get the value or 0; count/len the
    number; query the offset of its pairs in ``flat`` (``flat[off]`` is the
    number of pairs, then topic index and value of each); snapshot 0 (its
    record is ``snaps[pos]``).  :data:`BAD` with the text in ``errors``."""

    thread: int
    kind: array[int] = field(default_factory=lambda: array("B"))
    arg: array[int] = field(default_factory=lambda: array("i"))
    inv: array[int] = field(default_factory=lambda: array("q"))
    resp: array[int] = field(default_factory=lambda: array("q"))
    result: array[int] = field(default_factory=lambda: array("q"))
    flat: array[int] = field(default_factory=lambda: array("q"))
    snaps: dict[int, SnapRecord] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    n_initial: int = 0

    def __len__(self) -> int:
        return len(self.kind)

    def add(
        self,
        kind: int,
        arg: int,
        inv: int,
        resp: int,
        result: int = 0,
        pairs: list[tuple[int, int]] | None = None,
        snap: SnapRecord | None = None,
    ) -> int:
        """Append one operation (for hand-made histories); returns its position.
        A query's ``pairs`` are (topic index, value)."""
        pos = len(self.kind)
        if kind == QUERY:
            result = len(self.flat)
            self.flat.append(len(pairs or ()))
            for x, v in pairs or ():
                self.flat.extend((x, v))
        if snap is not None:
            self.snaps[pos] = snap
        self.kind.append(kind)
        self.arg.append(arg)
        self.inv.append(inv)
        self.resp.append(resp)
        self.result.append(result)
        return pos

    def pairs(self, pos: int) -> list[tuple[int, int]]:
        """A query's (topic index, value) pairs."""
        return flat_pairs(self.flat, self.result[pos])


def flat_pairs(flat: array[int], off: int = 0) -> list[tuple[int, int]]:
    n = flat[off]
    it = iter(flat[off + 1 : off + 1 + 2 * n])
    return list(zip(it, it, strict=True))


def flat_of(pairs: list[tuple[int, int]]) -> array[int]:
    out = array("q", [len(pairs)])
    for x, v in pairs:
        out.extend((x, v))
    return out


@dataclass
class TopicHistory:
    space: TopicSpace
    clock: str
    logs: list[TopicLog]
    #: the index after the run (flat pairs, like a query's), len(), invariants
    final_items: array[int] | None = None
    final_length: int | None = None
    invariant_error: str | None = None
    seconds: float = 0.0
    #: the final items' raw problems (an unknown topic, a non-int value)
    final_errors: list[str] = field(default_factory=list)

    @property
    def n_ops(self) -> int:
        return sum(len(g) for g in self.logs)

    def n_timed(self) -> int:
        return sum(len(g) - g.n_initial for g in self.logs)

    def kind_counts(self) -> dict[str, int]:
        out = dict.fromkeys(KIND_NAMES, 0)
        for g in self.logs:
            for k in g.kind[g.n_initial :]:
                out[KIND_NAMES[k]] += 1
        return out

    def call(self, thread: int, pos: int) -> str:
        sp, g = self.space, self.logs[thread]
        kind, a = g.kind[pos], g.arg[pos]
        if kind == PUT:
            return f"put({sp.topic(a)}, {value_name(put_value(thread, pos))})"
        if kind in (REMOVE, POP, GET):
            return f"{KIND_NAMES[kind]}({sp.topic(a)})"
        if kind in (QUERY, COUNT):
            f = sp.filters[a] if 0 <= a < len(sp.filters) else f"<filter #{a}?>"
            return f"{KIND_NAMES[kind]}({f!r})"
        if kind == LEN:
            return "len()"
        if kind == SNAPSHOT:
            return "snapshot()"
        return f"<op kind {kind}?>"

    def describe(self, thread: int, pos: int, with_result: bool = True) -> str:
        """``thread 1 op #52 put('r0/m1', v1:52) -> True [t=120..125]``."""
        g = self.logs[thread]
        text = f"thread {thread} {'initial ' if pos < g.n_initial else ''}op #{pos} "
        text += self.call(thread, pos)
        if with_result:
            text += f" -> {self.result_text(thread, pos)}"
        return f"{text} [t={g.inv[pos]}..{g.resp[pos]}]"

    def result_text(self, thread: int, pos: int) -> str:
        g = self.logs[thread]
        kind, r = g.kind[pos], g.result[pos]
        if r == BAD or pos in g.errors:
            return g.errors.get(pos, "<bad result>")
        if kind in (PUT, REMOVE):
            return str(bool(r))
        if kind in (POP, GET):
            return value_name(r)
        if kind in (COUNT, LEN):
            return str(r)
        if kind == QUERY:
            return self.pairs_text(g.pairs(pos))
        if kind == SNAPSHOT:
            rec = g.snaps.get(pos)
            return f"<snapshot of {rec.length} topics>" if rec else "<snapshot>"
        return str(r)

    def pairs_text(self, pairs: list[tuple[int, int]], limit: int = 8) -> str:
        shown = ", ".join(
            f"({self.space.topic(x)}, {value_name(v)})" for x, v in sorted(pairs)[:limit]
        )
        more = f", ... ({len(pairs)} in all)" if len(pairs) > limit else ""
        return f"[{shown}{more}]"


# --------------------------------------------------------------------- run
def _fresh(s: str) -> str:
    """An equal str that is a new object (owned by the calling thread)."""
    return s.encode().decode()


def _initial_topics(space: TopicSpace, t: int, seed: int) -> list[int]:
    rng = random.Random(f"cstrie-stress/topics/initial/{seed}/{space.threads}/{t}")
    mine = [x for x in space.own[t] if rng.random() < 0.5]
    mine += [x for j, x in enumerate(space.shared) if j % space.threads == t and rng.random() < 0.5]
    return mine


def record_topics(
    space: TopicSpace,
    ops: int,
    seed: int,
    clock: Clock,
    progress: Progress,
    label: str,
    read_percent: int = 50,
    snapshot_every: int = 250,
    timeout: float = 600.0,
    make_index: Callable[[Dialect], Any] | None = None,
) -> TopicHistory:
    """Run ``space.threads`` threads of ``ops`` operations each on one index
    (see the module docstring).  ``make_index(dialect)`` (default
    :class:`cstrie.topics.TopicIndex`) lets the tests run deliberately broken
    indexes through the same checks."""
    from cstrie.topics import TopicIndex
    from stress.harness.runner import HangError

    n = space.threads
    idx = (make_index or TopicIndex)(space.dialect)
    seqs = [generate_ops(space, t, ops, read_percent, snapshot_every, seed) for t in range(n)]
    logs = [TopicLog(t) for t in range(n)]
    barrier = threading.Barrier(n + 1)
    errors: list[BaseException] = []
    counters = [Counter() for _ in range(n)]
    starts = [0.0] * n
    ends = [0.0] * n

    def worker(t: int) -> None:
        log = logs[t]
        topics = [_fresh(x) for x in space.topics]
        filters = [_fresh(f) for f in space.filters]
        key_of = {x: i for i, x in enumerate(topics)}
        kinds, args, args2 = seqs[t]
        stamp = clock.stamper()
        put, remove, pop, get = idx.put, idx.remove, idx.pop, idx.get
        query, count, length, snapshot = idx.query, idx.count, idx.__len__, idx.snapshot
        k_add, a_add = log.kind.append, log.arg.append
        i_add, o_add, r_add = log.inv.append, log.resp.append, log.result.append
        flat = log.flat
        errs = log.errors

        def pairs_of(it: Any, pos: int, out: array[int]) -> None:
            """Append a query's or items' pairs to ``out`` (count first)."""
            got = list(it)
            out.append(len(got))
            for pair in got:
                try:
                    tp, v = pair
                except (TypeError, ValueError):
                    tp, v = None, None
                x = key_of.get(tp, -1) if type(tp) is str else -1
                ok = type(v) is int and v > 0
                out.extend((x, v if ok else BAD))
                if x < 0 or not ok:
                    errs.setdefault(pos, f"returned the pair {pair!r}")

        def read_snapshot(snap: Any, pos: int, f: int, key: int) -> SnapRecord:
            items = array("q")
            pairs_of(snap.items(), pos, items)
            found = array("q")
            pairs_of(snap.query(filters[f]), pos, found)
            got = snap.get(topics[key])
            return SnapRecord(
                items=items,
                length=len(snap),
                key=key,
                got=0 if got is None else got if type(got) is int and got > 0 else BAD,
                filt=f,
                found=found,
                counted=snap.count(filters[f]),
            )

        def reread(snap: Any, rec: SnapRecord) -> tuple[array[int], int, int, int] | str:
            try:
                found = array("q")
                pairs_of(snap.query(filters[rec.filt]), -1, found)
                got = snap.get(topics[rec.key])
                value = 0 if got is None else got if type(got) is int and got > 0 else BAD
                return found, snap.count(filters[rec.filt]), len(snap), value
            except Exception as exc:
                return f"reading the snapshot again: {exc!r}"

        for x in _initial_topics(space, t, seed):
            pos = len(log.kind)
            i0 = stamp()
            r = put(topics[x], put_value(t, pos))
            i1 = stamp()
            k_add(PUT)
            a_add(x)
            i_add(i0)
            o_add(i1)
            r_add(1 if r is True else 0 if r is False else BAD)
            if r is not True and r is not False:
                errs[pos] = f"returned {r!r}"
        base = log.n_initial = len(log.kind)
        held: Any = None
        held_rec: SnapRecord | None = None
        counter = counters[t]
        barrier.wait()
        starts[t] = time.perf_counter()
        for i in range(len(kinds)):
            k = kinds[i]
            a = args[i]
            pos = base + i
            res = 0
            i0 = stamp()
            try:
                if k == PUT:
                    r = put(topics[a], ((t + 1) << SHIFT) | pos)
                    i1 = stamp()
                    res = 1 if r is True else 0 if r is False else BAD
                elif k == GET:
                    r = get(topics[a])
                    i1 = stamp()
                    res = 0 if r is None else r if type(r) is int and r > 0 else BAD
                elif k == QUERY:
                    it = query(filters[a])
                    i1 = stamp()
                    res = len(flat)
                    pairs_of(it, pos, flat)
                    r = None
                elif k == COUNT:
                    r = count(filters[a])
                    i1 = stamp()
                    res = r if type(r) is int and r >= 0 else BAD
                elif k == REMOVE:
                    r = remove(topics[a])
                    i1 = stamp()
                    res = 1 if r is True else 0 if r is False else BAD
                elif k == POP:
                    r = pop(topics[a], None)
                    i1 = stamp()
                    res = 0 if r is None else r if type(r) is int and r > 0 else BAD
                elif k == LEN:
                    r = length()
                    i1 = stamp()
                    res = r if type(r) is int and r >= 0 else BAD
                else:  # SNAPSHOT
                    snap = snapshot()
                    i1 = stamp()
                    r = None
                    if held is not None and held_rec is not None:
                        held_rec.late = reread(held, held_rec)
                    held = None
                    held_rec = log.snaps[pos] = read_snapshot(snap, pos, a, args2[i])
                    held = snap
                if res == BAD:
                    errs.setdefault(pos, f"returned {r!r}")
            except Exception as exc:
                i1 = stamp()
                res = BAD
                errs[pos] = f"raised {exc!r}"
            k_add(k)
            a_add(a)
            i_add(i0)
            o_add(i1)
            r_add(res)
            if i & 511 == 511:
                counter.done = i + 1
        counter.done = len(kinds)
        ends[t] = time.perf_counter()

    def wrap(t: int) -> None:
        try:
            worker(t)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=wrap, args=(t,), name=f"topics-worker-{t}") for t in range(n)
    ]
    for th in threads:
        th.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    progress.watch(label, counters, ops * n, None)
    deadline = time.monotonic() + timeout
    try:
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
    finally:
        progress.done()
    stuck = [th.name for th in threads if th.is_alive()]
    if stuck:
        raise HangError(f"{', '.join(stuck)} still running {timeout:g} s after the start")
    if errors:
        raise RuntimeError(f"a worker thread failed: {errors[0]!r}") from errors[0]
    final = array("q")
    final_errors: list[str] = []
    index = space.index
    got = list(idx.items())
    final.append(len(got))
    for pair in got:
        tp, v = pair
        x = index.get(tp, -1) if type(tp) is str else -1
        ok = type(v) is int and v > 0
        final.extend((x, v if ok else BAD))
        if x < 0 or not ok:
            final_errors.append(f"the final items hold {pair!r}")
    invariant_error = None
    try:
        idx.check_invariants(strict=True)
    except AssertionError as exc:
        invariant_error = str(exc)
    return TopicHistory(
        space=space,
        clock=clock.kind,
        logs=logs,
        final_items=final,
        final_length=len(idx),
        invariant_error=invariant_error,
        seconds=max(ends) - min(starts),
        final_errors=final_errors,
    )
