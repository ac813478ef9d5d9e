"""The key space and the per-thread operation sequences of a stress run.

Key space
---------
A run works on a fixed, seeded set of *patterns*, *topics* and *subscribers*:

* every subscriber ``s`` has 1-3 *candidate patterns* (``cands[s]``); the pair
  ``(cands[s][b], s)`` is key ``(s, b)``, and the subscriber's state is a bit mask
  over its candidates (bit ``b`` set = subscribed to ``cands[s][b]``);
* every subscriber is either *owned* by one thread (only that thread ever
  subscribes/unsubscribes it, so the thread knows its exact state: check (a) and
  the snapshot check (b) rely on this) or *shared* (every thread writes it, so the
  return values of subscribe/unsubscribe really race: check (c));
* subscriber objects are ints ``BASE + s`` (hashable, cheap, not from the
  small-int cache, so they behave like ordinary heap objects), which lets the
  checker read a lookup result without any translation table.

Which patterns match which topic is computed once with :class:`cstrie_lab.pytrie.PyTrie`
(pure Python, independent of the C engine), giving for every topic the subscribers
whose state a lookup of it reveals and the mask of their candidates that match
(``interest``).  A lookup result containing ``BASE + s`` thus says
``state[s] & mask != 0``.

Operations
----------
Each thread gets its own sequence, a function of ``(seed, thread, options)`` only:
``LOOKUP`` (through a per-thread ``Trie.matcher()``), ``LOOKUP_TRIE`` (through
``Trie.lookup``; only in recorded runs, one lookup in eight), ``SUBSCRIBE``,
``UNSUBSCRIBE`` (on one of the thread's own keys or a shared key) and
``SNAPSHOT`` (every ``snapshot_every``-th operation) and ``LOOKUP_MANY`` (every
``many_every``-th operation that is not a snapshot).  Before the timed part every
thread subscribes a seeded half of its own keys (``initial_ops``).

The crowd (``lookup_many``)
---------------------------
``build_keyspace(..., crowd=N)`` adds N *crowd* subscribers on a few extra
patterns (``crowd.*``, ``crowd.#`` and ``crowd.<j>`` in the dialect's syntax)
and :data:`CROWD_TOPICS` crowd topics (``crowd.<j>``) that each match thousands
of them, plus seeded *batches*: topic lists (every crowd topic, one of them
twice, between a few ordinary topics) for ``LOOKUP_MANY`` operations, whose
``arg`` is a batch index.  A row of a crowd topic holds more ids than one engine call of
``lookup_many`` returns (at least 1024), so it is answered in several calls.
Crowd subscribers are owned or shared like the others, so the ordinary
updates write them (most own updates do: they are most of the subscribers)
while other threads' ``lookup_many`` calls read them.  Ordinary lookups never
look up a crowd topic (``lookup_topics``): that would make every lookup a
thousand observations to check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from cstrie.dialect import Dialect, resolve_dialect
from cstrie_lab.pytrie import PyTrie

__all__ = [
    "BASE",
    "CROWD_TOPICS",
    "KIND_NAMES",
    "LOOKUP",
    "LOOKUP_MANY",
    "LOOKUP_TRIE",
    "SNAPSHOT",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "KeySpace",
    "Mix",
    "OpSequence",
    "build_keyspace",
    "generate_ops",
    "make_keyspace",
]

BASE = 1_000_000

LOOKUP = 0
SUBSCRIBE = 1
UNSUBSCRIBE = 2
SNAPSHOT = 3
LOOKUP_TRIE = 4
LOOKUP_MANY = 5
KIND_NAMES = {
    LOOKUP: "lookup",
    SUBSCRIBE: "subscribe",
    UNSUBSCRIBE: "unsubscribe",
    SNAPSHOT: "snapshot",
    LOOKUP_TRIE: "lookup",
    LOOKUP_MANY: "lookup_many",
}

#: Share of the updates that go to shared subscribers (the rest to own ones).
SHARED_UPDATE_SHARE = 0.25
#: Share of the subscribers that are shared.
SHARED_SUBSCRIBER_SHARE = 0.25
#: One lookup in this many goes through ``Trie.lookup`` in recorded runs.
TRIE_LOOKUP_EVERY = 8
#: Crowd topics (``crowd.0`` ...), each matching (nearly) every crowd subscriber.
CROWD_TOPICS = 4
#: Batches (topic lists) that ``LOOKUP_MANY`` operations choose from.
CROWD_BATCHES = 8


@dataclass(frozen=True)
class Mix:
    """Percentages of lookups and updates, e.g. ``Mix.parse("90/10")``."""

    lookup: int
    update: int

    @classmethod
    def parse(cls, text: str) -> Mix:
        try:
            left, right = text.split("/")
            lookup, update = int(left), int(right)
        except ValueError:
            raise ValueError(f"mix must look like 90/10 (lookup/update), not {text!r}") from None
        if lookup < 0 or update < 0 or lookup + update != 100:
            raise ValueError(f"mix {text!r}: the two percentages must be >= 0 and add up to 100")
        return cls(lookup, update)

    def __str__(self) -> str:
        return f"{self.lookup}/{self.update}"


@dataclass
class KeySpace:
    """Patterns, topics, subscribers and who owns what (see the module docstring)."""

    dialect: Dialect
    n_threads: int
    patterns: list[str]
    topics: list[str]
    cands: list[tuple[int, ...]]
    owner: list[int]  # thread index, or -1 for a shared subscriber
    interest: list[list[tuple[int, int]]]  # per topic: (subscriber, matching-candidate mask)
    own_subs: list[list[int]] = field(default_factory=list)  # per thread
    shared_subs: list[int] = field(default_factory=list)
    own_topics: list[list[int]] = field(default_factory=list)  # per thread: topics seeing them
    pattern_index: dict[str, int] = field(default_factory=dict)
    key_bit: dict[tuple[int, int], int] = field(default_factory=dict)  # (s, pattern) -> bit
    #: ordinary lookups look up topics[:lookup_topics] only (not the crowd topics)
    lookup_topics: int = 0
    #: topic lists for LOOKUP_MANY (arg = index); empty without a crowd
    batches: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def n_keys(self) -> int:
        return sum(len(c) for c in self.cands)

    def describe_state(self, s: int, mask: int) -> str:
        """``{'a.*', 'b.#'}``: the patterns of subscriber s set in mask."""
        pats = [self.patterns[p] for b, p in enumerate(self.cands[s]) if mask >> b & 1]
        return "{" + ", ".join(repr(p) for p in pats) + "}"

    def sub_name(self, s: int) -> str:
        who = "shared" if self.owner[s] < 0 else f"owned by thread {self.owner[s]}"
        return f"subscriber {BASE + s} ({who})"


# ------------------------------------------------------------------ generation
def _words(rng: random.Random, first: int, depth: int) -> list[str]:
    out = [f"r{rng.randrange(first)}"]
    out.extend(f"w{rng.randrange(4)}" for _ in range(depth - 1))
    return out


def _make_pattern(rng: random.Random, d: Dialect, first: int) -> str:
    words = _words(rng, first, rng.randint(1, 4))
    if d.dollar_rule and rng.random() < 0.04:
        words[0] = "$SYS"
    if d.single is not None:
        for i in range(len(words)):
            # A wildcard first word matches a whole share of the topics: keep it rare.
            if rng.random() < (0.03 if i == 0 else 0.2):
                words[i] = d.single
    if d.multi is not None:
        r = rng.random()
        if r < 0.15:
            words.append(d.multi)
        elif r < 0.2 and not d.multi_last_only and len(words) > 1:
            words.insert(rng.randrange(1, len(words)), d.multi)
    return d.separator.join(words)


def _instantiate(rng: random.Random, d: Dialect, pattern: str, first: int) -> str:
    out: list[str] = []
    for i, w in enumerate(pattern.split(d.separator)):
        if w == d.single:
            out.append(f"r{rng.randrange(first)}" if i == 0 else f"w{rng.randrange(4)}")
        elif w == d.multi:
            out.extend(f"w{rng.randrange(4)}" for _ in range(rng.randint(d.multi_min, 2)))
        else:
            out.append(w)
    if not out:
        out = [f"r{rng.randrange(first)}"]
    return d.separator.join(out)


def build_keyspace(
    dialect: str | Dialect, keys: int, n_threads: int, seed: int, crowd: int = 0
) -> KeySpace:
    """The key space for ``keys`` (pattern, subscriber) pairs shared by n_threads,
    plus ``crowd`` crowd subscribers and the batches of ``LOOKUP_MANY`` (see the
    module docstring).

    Patterns, topics and candidates depend on ``(dialect, keys, seed, crowd)``
    only (the ordinary ones do not depend on ``crowd``); the ownership split
    depends on ``n_threads`` too.
    """
    if keys < 4:
        raise ValueError("--keys must be at least 4")
    if n_threads < 1:
        raise ValueError("need at least one thread")
    d = resolve_dialect(dialect)
    rng = random.Random(f"cstrie-stress/keyspace/{d.name}/{keys}/{seed}")
    n_patterns = max(4, keys // 2)
    first = max(4, n_patterns // 6)
    patterns: list[str] = []
    seen: set[str] = set()
    tries = 0
    while len(patterns) < n_patterns:
        tries += 1
        p = _make_pattern(rng, d, first)
        if tries > 50 * n_patterns:
            p = d.separator.join([f"x{len(patterns)}", *_words(rng, first, 2)])
        if p in seen:
            continue
        d.split_pattern(p)  # must be valid in the dialect
        seen.add(p)
        patterns.append(p)

    n_topics = max(8, n_patterns)
    topics: list[str] = []
    tseen: set[str] = set()
    while len(topics) < n_topics:
        if rng.random() < 0.1:
            t = d.separator.join(_words(rng, first, rng.randint(1, 4)))
        else:
            t = _instantiate(rng, d, rng.choice(patterns), first)
        if t in tseen:
            continue
        d.split_topic(t)
        tseen.add(t)
        topics.append(t)

    # Subscribers with 1-3 candidate patterns until the pairs add up to `keys`.
    cands: list[tuple[int, ...]] = []
    total = 0
    while total < keys:
        k = min(rng.choice((1, 2, 2, 3)), keys - total)
        cands.append(tuple(rng.sample(range(n_patterns), k)))
        total += k
    n_subs = len(cands)
    order = list(range(n_subs))
    rng.shuffle(order)
    n_shared = round(n_subs * SHARED_SUBSCRIBER_SHARE) if n_subs >= 2 else 0
    owner = [0] * n_subs
    for pos, s in enumerate(order):
        owner[s] = -1 if pos < n_shared else (pos - n_shared) % n_threads
    if crowd <= 0:
        return make_keyspace(d, patterns, topics, cands, owner, n_threads)

    # The crowd: its own random stream, so the ordinary key space stays the same.
    crng = random.Random(f"cstrie-stress/crowd/{d.name}/{keys}/{crowd}/{seed}")
    n_ordinary = len(topics)
    sep = d.separator
    wide: list[int] = []  # indices of crowd.<single>, crowd.<multi>: match every crowd topic
    for w in (d.single, d.multi):
        if w is not None:
            wide.append(len(patterns))
            patterns.append(f"crowd{sep}{w}")
    exact: list[int] = []  # crowd.<j>: matches crowd topic j only
    for j in range(CROWD_TOPICS):
        exact.append(len(patterns))
        patterns.append(f"crowd{sep}{j}")
        topics.append(f"crowd{sep}{j}")
    for i in range(crowd):
        j = exact[i % CROWD_TOPICS]
        if not wide:
            cands.append((j,))
        elif crng.random() < 0.7:
            cands.append((crng.choice(wide),))
        else:
            pair = (crng.choice(wide), j)
            cands.append(pair if crng.random() < 0.5 else pair[::-1])
    order = list(range(n_subs, len(cands)))
    crng.shuffle(order)
    n_shared = round(crowd * SHARED_SUBSCRIBER_SHARE)
    owner.extend([0] * crowd)
    for pos, s in enumerate(order):
        owner[s] = -1 if pos < n_shared else (pos - n_shared) % n_threads
    crowd_topics = list(range(n_ordinary, len(topics)))
    batches: list[tuple[int, ...]] = []
    for _ in range(CROWD_BATCHES):
        batch = list(crowd_topics)
        batch.append(crng.choice(crowd_topics))  # one row twice: each is its own lookup
        batch.extend(crng.randrange(n_ordinary) for _ in range(crng.randint(0, 4)))
        crng.shuffle(batch)
        batches.append(tuple(batch))
    return make_keyspace(
        d, patterns, topics, cands, owner, n_threads, lookup_topics=n_ordinary, batches=batches
    )


def make_keyspace(
    dialect: str | Dialect,
    patterns: list[str],
    topics: list[str],
    cands: list[tuple[int, ...]],
    owner: list[int],
    n_threads: int,
    lookup_topics: int | None = None,
    batches: list[tuple[int, ...]] | None = None,
) -> KeySpace:
    """A key space from explicit parts (also how tests build small ones by hand).

    Ordinary lookups use ``topics[:lookup_topics]`` (default: all);
    ``batches`` are the topic lists of ``LOOKUP_MANY`` operations."""
    d = resolve_dialect(dialect)
    if len(owner) != len(cands):
        raise ValueError("owner and cands must have one entry per subscriber")
    n_lookup = len(topics) if lookup_topics is None else lookup_topics
    # Which patterns match which topic: the pure-Python trie, not the engine.
    ref = PyTrie(d)
    for p in patterns:
        ref.subscribe(p, p)
    pattern_index = {p: i for i, p in enumerate(patterns)}
    matching = [{pattern_index[str(p)] for p in ref.lookup(t)} for t in topics]
    by_pattern: list[list[tuple[int, int]]] = [[] for _ in patterns]
    for s, cs in enumerate(cands):
        for b, p in enumerate(cs):
            by_pattern[p].append((s, b))
    interest: list[list[tuple[int, int]]] = []
    for m in matching:
        masks: dict[int, int] = {}
        for p in m:
            for s, b in by_pattern[p]:
                masks[s] = masks.get(s, 0) | (1 << b)
        interest.append(sorted(masks.items()))

    ks = KeySpace(
        dialect=d,
        n_threads=n_threads,
        patterns=list(patterns),
        topics=list(topics),
        cands=list(cands),
        owner=list(owner),
        interest=interest,
        pattern_index=pattern_index,
        lookup_topics=n_lookup,
        batches=list(batches or []),
    )
    ks.own_subs = [[] for _ in range(n_threads)]
    for s in range(len(cands)):
        if owner[s] < 0:
            ks.shared_subs.append(s)
        else:
            ks.own_subs[owner[s]].append(s)
    ks.own_topics = [[] for _ in range(n_threads)]
    for ti, inter in enumerate(interest[:n_lookup]):
        for t in sorted({owner[s] for s, _ in inter if owner[s] >= 0}):
            ks.own_topics[t].append(ti)
    ks.key_bit = {(s, p): b for s, cs in enumerate(cands) for b, p in enumerate(cs)}
    return ks


@dataclass
class OpSequence:
    """One thread's operations as parallel lists (``kind[i]``, ``arg[i]``, ``bit[i]``).

    ``arg`` is a topic index (lookups, snapshots: the topic looked up in the
    snapshot), a batch index (``LOOKUP_MANY``: ``ks.batches[arg]``) or a
    subscriber index (updates, with ``bit`` the candidate).
    ``initial`` lists the (subscriber, bit) keys subscribed before the timed part.
    """

    thread: int
    kind: list[int]
    arg: list[int]
    bit: list[int]
    initial: list[tuple[int, int]]

    def __len__(self) -> int:
        return len(self.kind)


def generate_ops(
    ks: KeySpace,
    thread: int,
    n_ops: int,
    mix: Mix,
    snapshot_every: int,
    seed: int,
    trie_lookups: bool = False,
    many_every: int = 0,
) -> OpSequence:
    """The op sequence of one thread (deterministic in all arguments).

    Every ``many_every``-th operation (0: none) that is not a snapshot is a
    ``LOOKUP_MANY`` of one of ``ks.batches`` (it needs a key space with a crowd),
    thread t's shifted by ``many_every * t / n_threads`` so that the threads
    take turns (a row is torn only by a write made while it is read).
    """
    if many_every > 0 and not ks.batches:
        raise ValueError("lookup_many operations need a key space with a crowd (batches)")
    rng = random.Random(f"cstrie-stress/ops/{seed}/{thread}")
    # Threads take their lookup_many turns evenly spread, not all at once: the
    # others write while one reads.
    phase = many_every * thread // max(1, ks.n_threads)
    own = ks.own_subs[thread]
    shared = ks.shared_subs
    own_topics = ks.own_topics[thread]
    n_topics = ks.lookup_topics or len(ks.topics)
    cands = ks.cands
    initial = [(s, b) for s in own for b in range(len(cands[s])) if rng.random() < 0.5]
    kind: list[int] = []
    arg: list[int] = []
    bit: list[int] = []
    lookups = 0
    p_lookup = mix.lookup / 100.0
    for i in range(n_ops):
        if snapshot_every > 0 and (i + 1) % snapshot_every == 0:
            kind.append(SNAPSHOT)
            arg.append(rng.randrange(n_topics))
            bit.append(0)
            continue
        if many_every > 0 and (i + 1 + phase) % many_every == 0:
            kind.append(LOOKUP_MANY)
            arg.append(rng.randrange(len(ks.batches)))
            bit.append(0)
            continue
        if rng.random() < p_lookup or not (own or shared):
            lookups += 1
            k = LOOKUP_TRIE if trie_lookups and lookups % TRIE_LOOKUP_EVERY == 0 else LOOKUP
            kind.append(k)
            if own_topics and rng.random() < 0.5:
                arg.append(rng.choice(own_topics))
            else:
                arg.append(rng.randrange(n_topics))
            bit.append(0)
        else:
            kind.append(SUBSCRIBE if rng.random() < 0.5 else UNSUBSCRIBE)
            pool = shared if (not own or (shared and rng.random() < SHARED_UPDATE_SHARE)) else own
            s = rng.choice(pool)
            arg.append(s)
            bit.append(rng.randrange(len(cands[s])))
    return OpSequence(thread, kind, arg, bit, initial)
