"""Workload generators: filters, topics and subscribers, all seeded.

Every generator takes a :class:`random.Random` (or is deterministic), so a run
with the same ``--seed`` builds the same workload.  The shapes are described in
``docs/benchmarks.md``; the docstrings here are the reference.
"""

from __future__ import annotations

import bisect
import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ARTICLE_SUBJECT",
    "BROKER_FILTERS_PER_CLIENT",
    "DigitsWorkload",
    "OpsWorkload",
    "article_patterns",
    "article_vocab",
    "broker_pairs",
    "broker_topics",
    "digits_mqtt",
    "digits_workload",
    "fill_pattern",
    "harsh_pairs",
    "harsh_topics",
    "iot_pairs",
    "iot_topics",
    "matching_topics",
    "mix_chunks",
    "ops_workload",
    "random5_mqtt_filters",
    "random5_topics",
    "random5_zipf_topics",
    "random_mqtt_filters",
    "scale_article_topics",
    "scale_extra_pairs",
    "scale_pairs",
    "scale_topics",
    "to_mqtt",
    "zipf_cumulative",
    "zipf_sample",
    "zipf_share",
]

# ------------------------------------------------------------ random MQTT filters
# Six levels of a building-automation style namespace; each level has its own
# vocabulary, small near the root and wider below (as real namespaces are).
_LEVEL_NAMES = ("building", "floor", "room", "device", "metric", "unit")
_LEVEL_WIDTH = (8, 16, 64, 64, 32, 16)


def _vocab() -> list[list[str]]:
    pairs = zip(_LEVEL_NAMES, _LEVEL_WIDTH, strict=True)
    return [[f"{name}{i}" for i in range(w)] for name, w in pairs]


def random_mqtt_filters(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct random MQTT filters of 3 to 6 levels.

    Level ``k`` holds a word from that level's vocabulary (8, 16, 64, 64, 32, 16
    words), ``+`` with probability 0.12 (levels after the first; 0.01 at the
    first), and the last level is ``#`` with probability 0.10.  So most filters
    are literal, about 40% have a wildcard, and ~1% are fleet-wide (``+/...``).
    """
    vocab = _vocab()
    out: set[str] = set()
    ordered: list[str] = []
    space = 1
    for w in _LEVEL_WIDTH:
        space *= w
    if n > space // 4:
        raise ValueError(f"at most {space // 4} random filters, asked for {n}")
    while len(ordered) < n:
        levels = rng.randint(3, 6)
        words = []
        for k in range(levels):
            r = rng.random()
            if r < (0.12 if k else 0.01):
                words.append("+")
            else:
                words.append(rng.choice(vocab[k]))
        if rng.random() < 0.10:
            words[-1] = "#"
        f = "/".join(words)
        if f not in out:
            out.add(f)
            ordered.append(f)
    return ordered


def matching_topics(rng: random.Random, filters: list[str], n: int) -> list[str]:
    """``n`` topics, each made from a random filter so that it matches at least it.

    ``+`` becomes a random word of its level; a trailing ``#`` becomes 0 to 2
    random words of the following levels.  Topics never start with ``$``.
    """
    vocab = _vocab()
    topics = []
    for _ in range(n):
        words: list[str] = []
        for k, w in enumerate(rng.choice(filters).split("/")):
            if w == "+":
                words.append(rng.choice(vocab[k]))
            elif w == "#":
                extra = rng.randint(0, min(2, len(vocab) - k))
                words.extend(rng.choice(vocab[k + j]) for j in range(extra))
            else:
                words.append(w)
        topics.append("/".join(words) if words else vocab[0][0])
    return topics


# ------------------------------------------------------------------ scale shape
# tenant/tNNNNNN/device/dNNN/mN: fixed-width words, so every topic has the same
# shape and byte length whatever the trie size.
SCALE_DEVICES = 100
SCALE_METRICS = 8
_PER_TENANT = SCALE_METRICS + 1 + SCALE_DEVICES * SCALE_METRICS


def _tenant_filters(t: int) -> Iterator[str]:
    tn = f"tenant/t{t:06d}"
    for m in range(SCALE_METRICS):
        yield f"{tn}/device/+/m{m}"
    yield f"{tn}/#"
    for d in range(SCALE_DEVICES):
        for m in range(SCALE_METRICS):
            yield f"{tn}/device/d{d:03d}/m{m}"


def scale_pairs(n: int) -> list[tuple[str, int]]:
    """``n`` (filter, subscriber) pairs, one subscriber (an int) per filter.

    Per tenant: ``tenant/T/device/+/mM`` for 8 metrics, ``tenant/T/#``, then
    ``tenant/T/device/dDDD/mM`` for 100 devices x 8 metrics (809 filters per
    tenant; tenants are added until there are ``n``).  Wildcard filters come
    first in each tenant, so every existing literal filter's topic matches exactly
    3 filters (literal, ``+``, ``#``) at every size.
    """
    out: list[tuple[str, int]] = []
    t = 0
    while len(out) < n:
        for f in _tenant_filters(t):
            out.append((f, len(out)))
            if len(out) == n:
                break
        t += 1
    return out


def scale_topics(rng: random.Random, n_subs: int, count: int) -> list[str]:
    """``count`` random topics of existing literal filters of ``scale_pairs(n_subs)``."""
    tenants = (n_subs + _PER_TENANT - 1) // _PER_TENANT
    topics: list[str] = []
    while len(topics) < count:
        t = rng.randrange(tenants)
        d = rng.randrange(SCALE_DEVICES)
        m = rng.randrange(SCALE_METRICS)
        index = t * _PER_TENANT + SCALE_METRICS + 1 + d * SCALE_METRICS + m
        if index < n_subs:
            topics.append(f"tenant/t{t:06d}/device/d{d:03d}/m{m}")
    return topics


def scale_extra_pairs(
    rng: random.Random, n_subs: int, count: int, first_id: int
) -> list[tuple[str, int]]:
    """``count`` new pairs of the same shape: devices 100-999 of existing tenants."""
    tenants = (n_subs + _PER_TENANT - 1) // _PER_TENANT
    if count > tenants * (1000 - SCALE_DEVICES) * SCALE_METRICS // 2:
        raise ValueError(f"too many extra pairs ({count}) for {n_subs} subscriptions")
    seen: set[str] = set()
    out: list[tuple[str, int]] = []
    while len(out) < count:
        f = (
            f"tenant/t{rng.randrange(tenants):06d}/device/"
            f"d{rng.randrange(SCALE_DEVICES, 1000):03d}/m{rng.randrange(SCALE_METRICS)}"
        )
        if f not in seen:
            seen.add(f)
            out.append((f, first_id + len(out)))
    return out


# ------------------------------------------------------------------ broker shape
BROKER_FILTERS_PER_CLIENT = 4
_DEVICES_PER_LINE = 250
_LINES_PER_SITE = 20


def _broker_place(i: int) -> tuple[int, int, int]:
    return (
        i // (_DEVICES_PER_LINE * _LINES_PER_SITE),
        (i // _DEVICES_PER_LINE) % _LINES_PER_SITE,
        i % _DEVICES_PER_LINE,
    )


def broker_client_filters(i: int) -> list[str]:
    """The 4 filters of client ``i`` in the broker shape (see :func:`broker_pairs`)."""
    s, ln, d = _broker_place(i)
    line = f"site/s{s:03d}/line/l{ln:02d}"
    return [
        f"{line}/dev/d{d:03d}/cmd",
        f"{line}/dev/d{d:03d}/config/#",
        f"{line}/+/status",
        f"site/s{s:03d}/broadcast/#",
    ]


def broker_pairs(clients: int) -> list[tuple[str, str]]:
    """A realistic IoT broker: ``clients`` devices with 4 filters each.

    Devices sit 250 to a production line and 20 lines to a site (5,000 per site).
    Device ``client-NNNNNNN`` subscribes to its own command topic
    ``site/S/line/L/dev/D/cmd`` and config tree ``site/S/line/L/dev/D/config/#``
    (2 filters unique to it), to its line's status feed ``site/S/line/L/+/status``
    (shared by 250 devices) and to its site's broadcasts ``site/S/broadcast/#``
    (shared by 5,000).  Filters have 4 to 8 levels; distinct filters are about
    2 per client.  Equal filter strings are one shared ``str`` object, as a broker
    that interns its filters would hold them.
    """
    interned: dict[str, str] = {}
    out: list[tuple[str, str]] = []
    for i in range(clients):
        client = f"client-{i:07d}"
        for f in broker_client_filters(i):
            out.append((interned.setdefault(f, f), client))
    return out


def broker_topics(rng: random.Random, clients: int, count: int) -> list[str]:
    """Topics that a broker of :func:`broker_pairs` delivers (status, cmd, broadcast)."""
    topics: list[str] = []
    for _ in range(count):
        s, ln, d = _broker_place(rng.randrange(clients))
        r = rng.random()
        if r < 0.5:
            topics.append(f"site/s{s:03d}/line/l{ln:02d}/d{d:03d}/status")
        elif r < 0.9:
            topics.append(f"site/s{s:03d}/line/l{ln:02d}/dev/d{d:03d}/cmd")
        else:
            topics.append(f"site/s{s:03d}/broadcast/firmware")
    return topics


# ------------------------------------------------------------------- harsh shape
_METRICS16 = tuple(f"metric{i}" for i in range(16))
_ALNUM = string.ascii_lowercase + string.digits


def _rand_word(rng: random.Random, k: int = 8) -> str:
    return "".join(rng.choices(_ALNUM, k=k))


def harsh_pairs(rng: random.Random, clients: int) -> list[tuple[str, str]]:
    """The harsh shape: one filter per client, nothing shared below level 2.

    ``fleet/gGG/XXXXXXXX/YYYYYYYY/metricM``: 64 groups, then two random 8-character
    words (so every filter opens its own path for 3 levels), then one of 16
    metrics; ``clients`` distinct subscribers ``cNNNNNNN``.  This is the worst
    realistic case for a trie: no prefix sharing and no subscriber sharing.
    """
    return [
        (
            f"fleet/g{rng.randrange(64):02d}/{_rand_word(rng)}/{_rand_word(rng)}/"
            f"{rng.choice(_METRICS16)}",
            f"c{i:07d}",
        )
        for i in range(clients)
    ]


def harsh_topics(rng: random.Random, pairs: list[tuple[str, str]], count: int) -> list[str]:
    return [rng.choice(pairs)[0] for _ in range(count)]


# ------------------------------------ the classic-matchers suite: the articles' workloads
# AMQP throughout (the articles' dialect): ``.`` between words, ``*`` one word,
# ``#`` zero or more words.  paho-mqtt only speaks MQTT, so it is given the exact
# MQTT translation of the same workload (:func:`to_mqtt`) where one exists.
ARTICLE_SUBJECT = "foo.*.baz.qux.quux"
ARTICLE_WORDS = ("foo", "bar", "baz", "qux", "quux")


def article_vocab(width: int) -> list[list[str]]:
    """Per-level vocabularies for 5-word topics: level ``k`` has ``width`` words,
    the article's word itself (``foo``, ``bar``, ``baz``, ``qux``, ``quux``) and
    ``foo1``, ``foo2``, ... (``bar1``, ...)."""
    return [[w] + [f"{w}{i}" for i in range(1, width)] for w in ARTICLE_WORDS]


def article_patterns(
    rng: random.Random,
    n: int,
    *,
    width: int = 16,
    star: float = 0.1,
    hash_last: float = 0.05,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
    """``n`` distinct random 5-word AMQP patterns (the articles' "random 5-word
    subscriptions"), none of them in ``exclude``.

    Level ``k`` is a word of :func:`article_vocab` (``width`` words per level) or,
    at levels 1 to 3, ``*`` with probability ``star``; the last word is ``#``
    with probability ``hash_last`` (so ``#`` is only ever last and the MQTT
    translation is exact).  The first word is always literal.
    """
    vocab = article_vocab(width)
    space = width * (width + 1) ** 3 * (width + 1)
    if n > space // 4:
        raise ValueError(f"at most {space // 4} patterns of width {width}, asked for {n}")
    seen: set[str] = set()
    out: list[str] = []
    choice, rand = rng.choice, rng.random
    while len(out) < n:
        words = [choice(vocab[0])]
        for k in (1, 2, 3):
            words.append("*" if rand() < star else choice(vocab[k]))
        words.append("#" if rand() < hash_last else choice(vocab[4]))
        p = ".".join(words)
        if p not in seen and p not in exclude:
            seen.add(p)
            out.append(p)
    return out


def fill_pattern(rng: random.Random, pattern: str, vocab: list[list[str]]) -> str:
    """A topic that ``pattern`` matches: each ``*`` becomes a word of its level's
    vocabulary (level ``k % len(vocab)``), a ``#`` 0 to 2 words of the next levels."""
    words: list[str] = []
    for k, w in enumerate(pattern.split(".")):
        if w == "*":
            words.append(rng.choice(vocab[k % len(vocab)]))
        elif w == "#":
            words.extend(rng.choice(vocab[(k + j) % len(vocab)]) for j in range(rng.randint(0, 2)))
        else:
            words.append(w)
    return ".".join(words)


def to_mqtt(text: str) -> str | None:
    """The exact MQTT form of an AMQP pattern or topic, or None if there is none.

    ``.`` -> ``/``, ``*`` -> ``+``, ``#`` -> ``#``.  Exact only when ``#`` is the
    last word (MQTT allows no other), no word contains ``/``, ``+``, ``#`` or is
    empty, and the first word does not start with ``$`` (MQTT's rule that
    wildcards skip ``$`` topics has no AMQP counterpart).  Then ``a.#`` and
    ``a/#`` agree (both match ``a`` itself), and so do ``*`` and ``+``.
    """
    if not text:
        return None
    words = text.split(".")
    out: list[str] = []
    for i, w in enumerate(words):
        if w == "*":
            out.append("+")
        elif w == "#":
            if i != len(words) - 1:
                return None
            out.append("#")
        elif not w or "/" in w or "+" in w or "#" in w or (i == 0 and w.startswith("$")):
            return None
        else:
            out.append(w)
    return "/".join(out)


@dataclass(frozen=True)
class OpsWorkload:
    """Workload (a): operation costs, cold and hot.

    * ``hot``: 1,000 random 5-word subscriptions (:func:`article_patterns`,
      16 words per level), subscriber ``i`` for pattern ``i``;
    * ``subject``: ``foo.*.baz.qux.quux`` with subscriber ``-1``: held by the
      cold lookup matcher alone and by the hot one beside ``hot``;
    * ``lookups``: ``foo.W.baz.qux.quux`` topics, ``W`` a random level-2 word
      (each matches ``subject``, and in the hot matcher the ``hot`` patterns that
      happen to match);
    * ``writes``: distinct ``foo.*.baz.qux.quux``-shaped patterns (``*`` second,
      literal words of the vocabulary elsewhere, none in ``hot``), one new
      subscriber each (ids from 1,000,000): subscribed in batches and removed again;
    * ``topic_space``: what the full inverted bitmap is told up front: the lookup
      topics, one topic filled from every hot and write pattern.
    """

    hot: list[tuple[str, int]]
    subject: tuple[str, int]
    lookups: list[str]
    writes: list[tuple[str, int]]
    topic_space: list[str]


def ops_workload(
    rng: random.Random, hot: int = 1_000, lookups: int = 512, writes: int = 512
) -> OpsWorkload:
    """Build workload (a); see :class:`OpsWorkload`."""
    width = 16
    vocab = article_vocab(width)
    hot_patterns = article_patterns(rng, hot, width=width, exclude={ARTICLE_SUBJECT})
    taken = set(hot_patterns) | {ARTICLE_SUBJECT}
    write_patterns: list[str] = []
    while len(write_patterns) < writes:
        p = ".".join([rng.choice(vocab[0]), "*", *(rng.choice(vocab[k]) for k in (2, 3, 4))])
        if p not in taken:
            taken.add(p)
            write_patterns.append(p)
    topics = [f"foo.{rng.choice(vocab[1])}.baz.qux.quux" for _ in range(lookups)]
    space = set(topics)
    space.update(fill_pattern(rng, p, vocab) for p in hot_patterns)
    space.update(fill_pattern(rng, p, vocab) for p in write_patterns)
    return OpsWorkload(
        hot=[(p, i) for i, p in enumerate(hot_patterns)],
        subject=(ARTICLE_SUBJECT, -1),
        lookups=topics,
        writes=[(p, 1_000_000 + i) for i, p in enumerate(write_patterns)],
        topic_space=sorted(space),
    )


@dataclass(frozen=True)
class DigitsWorkload:
    """Workload (b): the articles' throughput test over three levels of digits.

    ``pairs``: 1,000 subscriptions, 100 of shape ``*.d.d`` (every ``d.d``), 20 of
    ``d.*.d``, 9 of ``d.d.*`` and 871 literal ``d.d.d`` (random, distinct),
    subscriber ``i`` for pattern ``i``; ``messages``: made by picking a random
    subscription and filling its wildcard with a random digit; ``topic_space``:
    all 1,000 ``d.d.d`` topics (the full inverted bitmap's a-priori space).
    """

    pairs: list[tuple[str, int]]
    messages: list[str]
    topic_space: list[str]


DIGIT_SHAPES = (("*.d.d", 100), ("d.*.d", 20), ("d.d.*", 9), ("d.d.d", 871))


def digits_workload(rng: random.Random, messages: int = 100_000) -> DigitsWorkload:
    """Build workload (b); see :class:`DigitsWorkload`."""
    digits = "0123456789"
    patterns: list[str] = []
    for shape, count in DIGIT_SHAPES:
        every = []
        for combo in _digit_combos(shape.count("d")):
            fill = iter(combo)
            every.append(".".join(next(fill) if s == "d" else "*" for s in shape.split(".")))
        patterns.extend(rng.sample(every, count))
    pairs = [(p, i) for i, p in enumerate(patterns)]
    msgs = [
        ".".join(rng.choice(digits) if w == "*" else w for w in rng.choice(patterns).split("."))
        for _ in range(messages)
    ]
    return DigitsWorkload(pairs, msgs, [".".join(c) for c in _digit_combos(3)])


def _digit_combos(k: int) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for _ in range(k):
        combos = [(*c, d) for c in combos for d in "0123456789"]
    return combos


def mix_chunks(
    rng: random.Random,
    write_share: float,
    pairs: list[tuple[str, Any]],
    topics: list[str],
    chunks: int,
    size: int = 20,
) -> list[list[tuple[str, str, Any]]]:
    """Workload (c): ``chunks`` chunks of ``size`` operations for one thread.

    Each chunk has ``round(size * write_share)`` writes (an even number: half
    ``("sub", pattern, subscriber)``, half the matching ``("unsub", ...)``, each
    unsubscribe after its subscribe) and lookups ``("lookup", topic, None)`` of
    random ``topics`` in the other slots, shuffled.  So a chunk leaves the
    matcher's size as it found it, and a thread may stop at any chunk boundary.
    ``pairs`` are the write subjects, used round-robin.
    """
    writes = round(size * write_share)
    if writes % 2:
        raise ValueError(f"{size} x {write_share} writes per chunk is not an even number")
    out: list[list[tuple[str, str, Any]]] = []
    k = 0
    for _ in range(chunks):
        slots = sorted(rng.sample(range(size), writes))
        # pair the write slots: each subscribe is followed by its unsubscribe
        ops: list[tuple[str, str, Any]] = [
            ("lookup", rng.choice(topics), None) for _ in range(size)
        ]
        for _ in range(0, writes, 2):
            p, s = pairs[k % len(pairs)]
            k += 1
            a, b = sorted(rng.sample(slots, 2))
            slots.remove(a)
            slots.remove(b)
            ops[a] = ("sub", p, s)
            ops[b] = ("unsub", p, s)
        out.append(ops)
    return out


def scale_article_topics(rng: random.Random, patterns: list[str], count: int) -> list[str]:
    """Workload (d): ``count`` topics, each filled from a random pattern of
    ``patterns`` (width-32 vocabulary), so each matches at least that pattern."""
    vocab = article_vocab(32)
    return [fill_pattern(rng, rng.choice(patterns), vocab) for _ in range(count)]


# ------------------------------------- "Lookups at C speed": cstrie vs the dict trie
# MQTT throughout (``vs-dict``): the dict-per-level trie users write, and paho.
RANDOM5_WORDS = tuple(f"w{i}" for i in range(30))


def random5_mqtt_filters(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct random 5-level MQTT filters over 30 words (``w0`` ... ``w29``).

    Each level is ``+`` with probability 0.15, else a random word; then the last
    level is replaced by ``#`` with probability 0.10.  The same 30 words at every
    level (unlike :func:`random_mqtt_filters`' per-level vocabularies).
    """
    if n > len(RANDOM5_WORDS) ** 5 // 4:
        raise ValueError(f"too many random 5-level filters: {n}")
    seen: set[str] = set()
    out: list[str] = []
    choice, rand = rng.choice, rng.random
    while len(out) < n:
        words = ["+" if rand() < 0.15 else choice(RANDOM5_WORDS) for _ in range(5)]
        if rand() < 0.10:
            words[-1] = "#"
        f = "/".join(words)
        if f not in seen:
            seen.add(f)
            out.append(f)
    return out


def random5_topics(rng: random.Random, filters: list[str], count: int) -> list[str]:
    """``count`` 5-level topics, each made from a random filter of ``filters`` by
    replacing its ``+`` and ``#`` by random words (so it matches that filter)."""
    return [
        "/".join(rng.choice(RANDOM5_WORDS) if w in ("+", "#") else w for w in f.split("/"))
        for f in (rng.choice(filters) for _ in range(count))
    ]


def random5_uniform_topics(rng: random.Random, count: int) -> list[str]:
    """``count`` 5-level topics of uniformly random words of :data:`RANDOM5_WORDS`:
    the issue's "20k random topics" (most match a few filters, many none)."""
    choice = rng.choice
    return ["/".join(choice(RANDOM5_WORDS) for _ in range(5)) for _ in range(count)]


def zipf_cumulative(n: int, s: float) -> list[float]:
    """Cumulative weights of a Zipf distribution over ranks 1..n: entry ``k - 1``
    is ``sum(j ** -s for j in 1..k)``, so the last entry is ``H(n, s)``."""
    if n < 1:
        raise ValueError(f"a Zipf distribution needs at least one rank, got {n}")
    cum: list[float] = []
    total = 0.0
    for k in range(1, n + 1):
        total += k**-s
        cum.append(total)
    return cum


def zipf_share(n: int, s: float, rank: int = 1) -> float:
    """The probability of ``rank`` (1-based) under Zipf(n, s): ``rank**-s / H(n, s)``."""
    return float(rank**-s / zipf_cumulative(n, s)[-1])


def zipf_sample(rng: random.Random, items: list[Any], count: int, s: float) -> list[Any]:
    """``count`` draws from ``items`` where ``items[k]`` has rank ``k + 1`` and
    probability ``(k + 1) ** -s / H(len(items), s)`` (Zipf).

    Inverse CDF: a uniform number in ``[0, H)`` is looked up with :mod:`bisect`
    in the cumulative weights.  Deterministic for a seeded ``rng``.
    """
    cum = zipf_cumulative(len(items), s)
    total, last = cum[-1], len(items) - 1
    rand, find = rng.random, bisect.bisect_right
    # min(): guards the float edge where rand() * total rounds up to total
    return [items[min(find(cum, rand() * total), last)] for _ in range(count)]


def random5_zipf_topics(
    rng: random.Random, filters: list[str], distinct: int, count: int, s: float
) -> tuple[list[str], list[str]]:
    """Skewed traffic over ``filters``: ``distinct`` different topics of
    :func:`random5_topics` (each matches the filter it was filled from), ranked
    in the order they were made (a random order), and a stream of ``count``
    topics drawn from them by :func:`zipf_sample` with exponent ``s``.
    Returns ``(ranked distinct topics, stream)``."""
    seen: dict[str, None] = {}
    for _ in range(50):
        for t in random5_topics(rng, filters, distinct - len(seen)):
            seen[t] = None
        if len(seen) >= distinct:
            break
    else:
        raise ValueError(f"{len(filters)} filters do not make {distinct} distinct topics")
    ranked = list(seen)
    return ranked, zipf_sample(rng, ranked, count, s)


IOT_SITES = 50
IOT_DEVICES = 40
IOT_METRICS = ("temp", "hum", "co2", "power", "volt", "amp", "rssi", "status")


def iot_pairs(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """``n`` distinct (filter, subscriber) pairs of an IoT fleet on MQTT.

    50 sites x 40 devices x 8 metrics.  A pair's filter is ``siteS/devD/metric``
    (90%), ``siteS/+/metric`` (5%), ``siteS/devD/#`` (2.75%) or ``siteS/#``
    (2.25%), for a random site, device and metric; its subscriber is ``clientK``,
    ``K`` random below ``n / 2``.  So a filter has several subscribers (a literal
    one ~1.1, ``siteS/+/metric`` ~2.5, ``siteS/#`` ~9 at 20k pairs) and, at 20,000
    pairs, a topic of :func:`iot_topics` matches ~13 subscribers.
    """
    clients = max(n // 2, 1)
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    while len(out) < n:
        site, dev = f"site{rng.randrange(IOT_SITES)}", f"dev{rng.randrange(IOT_DEVICES)}"
        metric = rng.choice(IOT_METRICS)
        r = rng.random()
        if r < 0.90:
            f = f"{site}/{dev}/{metric}"
        elif r < 0.95:
            f = f"{site}/+/{metric}"
        elif r < 0.9775:
            f = f"{site}/{dev}/#"
        else:
            f = f"{site}/#"
        pair = (f, f"client{rng.randrange(clients)}")
        if pair not in seen:
            seen.add(pair)
            out.append(pair)
    return out


def iot_topics(rng: random.Random, count: int) -> list[str]:
    """``count`` random ``siteS/devD/metric`` topics of :func:`iot_pairs`' fleet."""
    return [
        f"site{rng.randrange(IOT_SITES)}/dev{rng.randrange(IOT_DEVICES)}/{rng.choice(IOT_METRICS)}"
        for _ in range(count)
    ]


def digits_mqtt(rng: random.Random, messages: int) -> tuple[list[tuple[str, int]], list[str]]:
    """Workload (b) (:func:`digits_workload`) in MQTT form: 100 ``+/d/d``, 20
    ``d/+/d``, 9 ``d/d/+`` and 871 literal ``d/d/d`` filters, subscriber ``i`` for
    filter ``i``, and ``messages`` topics each made by filling a random filter's
    wildcard with a random digit."""
    w = digits_workload(rng, messages)
    pairs = [(to_mqtt(p) or "", s) for p, s in w.pairs]
    topics = [to_mqtt(t) or "" for t in w.messages]
    if not all(p for p, _ in pairs) or not all(topics):  # pragma: no cover - by construction
        raise AssertionError("the digits workload has no exact MQTT form")
    return pairs, topics
