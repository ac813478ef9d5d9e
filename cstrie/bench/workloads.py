"""Workload generators: filters, topics and subscribers, all seeded.

Every generator takes a :class:`random.Random` (or is deterministic), so a run
with the same ``--seed`` builds the same workload.  The shapes are described in
``docs/benchmarks.md``; the docstrings here are the reference.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator

__all__ = [
    "BROKER_FILTERS_PER_CLIENT",
    "broker_pairs",
    "broker_topics",
    "harsh_pairs",
    "harsh_topics",
    "matching_topics",
    "random_mqtt_filters",
    "scale_extra_pairs",
    "scale_pairs",
    "scale_topics",
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
