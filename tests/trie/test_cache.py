"""The result cache (``Trie.set_cache`` / ``Trie.cache_stats``), checked by behaviour.

Rules under test (cstrie/trie.py ``set_cache``, native/cache.c's opening comment):

1. Exact: with a cache of any budget, ``lookup`` (and ``lookup_many``) answers
   exactly what the same trie without a cache answers, at every moment, after
   any sequence of ``subscribe``/``unsubscribe`` (share-group memberships
   included: ``group=`` and MQTT's ``$share/g/filter``), ``subscribe_many``,
   ``clear()`` and ``set_cache`` changes (shrinking to a tiny budget, to 0 and
   back on).  Empty answers are cached too.  In every built-in dialect, with
   its special rules (AMQP ``#`` matches zero words, MQTT ``$`` topics are not
   matched by a leading wildcard, NATS ``>`` needs a word).
2. Precise: an update whose filter cannot match a cached topic leaves that
   topic's entry valid (its next lookup is a hit); one whose filter matches it
   drops it (``invalidated`` rises; the next lookup misses, and the topic is
   cached again after it).
3. Within budget: ``bytes <= budget`` after every operation of a lone thread;
   a small budget over many topics evicts, and the answers stay exact.
4. A bad budget (not an ``int``, a ``bool``, negative, above the maximum)
   raises TypeError/ValueError naming the problem and changes nothing.  A
   Snapshot has no cache (no ``set_cache``); ``copy()`` starts without one.
5. Threads: lookups through the cache while other threads subscribe and
   unsubscribe return an answer the trie had during the lookup (each writer's
   share of it is one of that writer's states from before to after its
   operation in flight); afterwards every cached answer is the uncached one.

No test assumes when a topic is admitted (its first miss, or a later one):
"cached" below means "looked up until a lookup was a hit", within a few tries.

The uncached reference is the oracle (tests/support/oracle.py), an uncached
twin trie fed the same operations, and a snapshot of the same trie (which has
no cache, and walks the very same nodes, so it gives the same order).

Random tests draw from ``CSTRIE_SEED`` (printed; a failure replays with
``CSTRIE_SEED=<seed> python -m pytest tests/trie/test_cache.py``).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import oracle
import pytest
from helpers import Sub, run_threads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie import _binding as nb
from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.trie import Trie

SEED = oracle.choose_seed()
DIALECTS: dict[str, Dialect] = {"amqp": AMQP, "mqtt": MQTT, "nats": NATS}
WORDS = ["a", "b", "c", "ab", "$x"]
SUBS: list[Hashable] = [*range(5), "s", ("t", 1), Sub("u")]
GROUPS = ["g1", "g2"]
ROOMY = 1 << 20  # no eviction for the few hundred topics used here
#: lookups of a topic within which, with room, it is cached (admission may wait
#: for a repeat) and then served from the cache
ADMIT_TRIES = 3
#: budgets the fuzz switches between: off, below one entry, a few entries, roomy
BUDGETS = [0, 1, 700, 2500, 1 << 14, ROOMY]

Pairs = set[tuple[str, Hashable]]


def _anchors(d: Dialect, subs: Sequence[Hashable]) -> Pairs:
    """A pair for each subscriber on a filter no topic here has ("zz" is no
    topic word): held throughout, it keeps the subscriber's id in use, so
    that a stale cached answer shows as a wrong subscriber, not as an id
    freed meanwhile (which a lookup answers by asking again, forever)."""
    return {(d.separator.join(["zz", "anchor"]), s) for s in subs}


def _rng(*parts: str) -> random.Random:
    rng: random.Random = oracle.seeded_rng(SEED, *parts)
    return rng


def _key(items: Any) -> list[str]:
    return sorted(map(repr, items))


def _stats(trie: Trie) -> dict[str, int]:
    return trie.cache_stats()


def _check_budget(trie: Trie, ctx: object = "") -> None:
    """Rule 3: what the entries are charged fits the budget (one thread)."""
    s = _stats(trie)
    assert 0 <= s["bytes"] <= s["budget"], (s, ctx, SEED)
    assert 0 <= s["entries"], (s, ctx)


def _assert_answer(got: list[Any], want: set[Hashable], ctx: object) -> None:
    assert len(got) == len(set(got)), f"duplicate subscribers {got!r}: {ctx}"
    assert set(got) == want, f"got {_key(got)}, want {_key(want)}: {ctx}"


def _shared_text(d: Dialect, group: str, filt: str) -> str:
    return f"{d.share_prefix}{d.separator}{group}{d.separator}{filt}"


# ====================================================================== rule 1
class _Twins:
    """A trie with a cache, an uncached twin fed the same calls, and the
    model: ordinary pairs (what lookup answers) and group memberships."""

    def __init__(self, d: Dialect, budget: int) -> None:
        self.d = d
        self.cached = Trie(d)
        self.cached.set_cache(budget)
        self.plain = Trie(d)
        self.pairs: Pairs = set()
        self.members: set[tuple[str, str, Hashable]] = set()
        self.pins: list[Any] = []  # snapshots from before each clear: its ids stay mapped
        self.anchor()

    def anchor(self) -> None:
        for pair in sorted(_anchors(self.d, SUBS), key=repr):
            self.subscribe(*pair)

    def subscribe(self, p: str, s: Hashable) -> None:
        new = (p, s) not in self.pairs
        assert self.cached.subscribe(p, s) is new, (p, s)
        assert self.plain.subscribe(p, s) is new
        self.pairs.add((p, s))

    def unsubscribe(self, p: str, s: Hashable) -> None:
        had = (p, s) in self.pairs
        assert self.cached.unsubscribe(p, s) is had, (p, s)
        assert self.plain.unsubscribe(p, s) is had
        self.pairs.discard((p, s))

    def group(self, join: bool, p: str, g: str, s: Hashable, as_text: bool) -> None:
        """Join or leave group g on filter p: ``group=``, or MQTT's text."""
        new = (p, g, s) not in self.members
        for trie in (self.cached, self.plain):
            if as_text:
                text = _shared_text(self.d, g, p)
                r = trie.subscribe(text, s) if join else trie.unsubscribe(text, s)
            else:
                r = trie.subscribe(p, s, group=g) if join else trie.unsubscribe(p, s, group=g)
            assert r is (new if join else not new), (join, p, g, s)
        if join:
            self.members.add((p, g, s))
        else:
            self.members.discard((p, g, s))

    def subscribe_many(self, items: list[tuple[str, Hashable]]) -> None:
        want = len({pair for pair in items if pair not in self.pairs})
        assert self.cached.subscribe_many(items) == want
        assert self.plain.subscribe_many(items) == want
        self.pairs.update(items)

    def clear(self) -> None:
        self.pins.append(self.cached.snapshot())
        self.cached.clear()
        self.plain.clear()
        self.pairs.clear()
        self.members.clear()
        self.anchor()

    def check(self, topic: str, ctx: object) -> None:
        """One lookup through the cache, against the oracle, the twin and a
        snapshot of the same trie (same nodes: same list, order included)."""
        got = self.cached.lookup(topic)
        ctx = (self.d.name, topic, ctx, SEED)
        _assert_answer(got, oracle.expected_lookup(self.d, self.pairs, topic), ctx)
        assert _key(got) == _key(self.plain.lookup(topic)), ctx
        assert got == self.cached.snapshot().lookup(topic), ctx

    def check_all(self, topics: Sequence[str], ctx: object) -> None:
        for topic in topics:  # again and again: admitted, filled, then (if it fits) a hit
            for _ in range(ADMIT_TRIES):
                self.check(topic, ctx)
        many = self.cached.lookup_many(list(topics))
        for topic, got in zip(topics, many, strict=True):
            _assert_answer(got, oracle.expected_lookup(self.d, self.pairs, topic), (topic, ctx))


def _topic_pool(rng: random.Random, d: Dialect, n: int) -> list[str]:
    pool = {oracle.random_topic(rng, d, WORDS, 4) for _ in range(n)}
    return sorted(pool)


@pytest.mark.parametrize("name", sorted(DIALECTS))
@pytest.mark.parametrize("start", [ROOMY, 2500], ids=["roomy", "small"])
def test_random_operations_match_uncached(name: str, start: int) -> None:
    """Rule 1 (and rule 3 after every step): a random sequence of subscribe,
    unsubscribe, group joins/leaves, subscribe_many, clear and set_cache
    (to 0, below one entry, tiny, roomy) on a trie with a cache; after every
    step the lookups of a pool of topics (asked again and again, so they are
    served from the cache) equal the uncached answers."""
    d = DIALECTS[name]
    rng = _rng(name, str(start), "ops")
    tw = _Twins(d, start)
    pool = _topic_pool(rng, d, 40)
    budget = start
    for step in range(4000):
        roll = rng.random()
        if roll < 0.28:
            tw.subscribe(oracle.random_pattern(rng, d, WORDS, 4), rng.choice(SUBS))
        elif roll < 0.42 and tw.pairs:
            tw.unsubscribe(*rng.choice(sorted(tw.pairs, key=repr)))
        elif roll < 0.45:
            tw.unsubscribe(oracle.random_pattern(rng, d, WORDS, 4), rng.choice(SUBS))
        elif roll < 0.51:
            joined = sorted(tw.members, key=repr)
            as_text = d.share_prefix is not None and rng.random() < 0.5
            if joined and rng.random() < 0.4:
                p, g, s = rng.choice(joined)
                tw.group(False, p, g, s, as_text)
            else:
                p = oracle.random_pattern(rng, d, WORDS, 4)
                tw.group(True, p, rng.choice(GROUPS), rng.choice(SUBS), as_text)
        elif roll < 0.54:
            items = [
                (oracle.random_pattern(rng, d, WORDS, 4), rng.choice(SUBS))
                for _ in range(rng.randint(1, 6))
            ]
            tw.subscribe_many(items)
        elif roll < 0.543:
            tw.clear()
        elif roll < 0.56:
            budget = rng.choice(BUDGETS)
            tw.cached.set_cache(budget)
            assert _stats(tw.cached)["budget"] == budget
        else:
            fresh = rng.random() < 0.1
            topic = oracle.random_topic(rng, d, WORDS, 4) if fresh else rng.choice(pool)
            tw.check(topic, step)
            tw.check(topic, step)
        _check_budget(tw.cached, step)
        if budget == 0:
            assert _stats(tw.cached)["bytes"] == 0, step
        if step % 500 == 0:
            tw.check_all(pool, step)
    hits = _stats(tw.cached)["hits"]
    tw.cached.set_cache(ROOMY)
    tw.check_all(pool, "end")
    assert _stats(tw.cached)["hits"] > hits, "the cache served no hits"
    _check_budget(tw.cached, "end")


@pytest.mark.parametrize(
    ("name", "patterns", "topics"),
    [
        # AMQP: "#" matches zero words (and the empty topic); topics may hold
        # "*" and "#" as plain words
        (
            "amqp",
            ["#", "a.#", "#.b", "a.#.b", "*", "a.*", "*.*", "#.#", "a..b", "*.#"],
            ["", "a", "a.b", "a.x.b", "a..b", "b", "a.*", "#", "*.#", "$x.a"],
        ),
        # MQTT: "#" matches the parent level; no leading wildcard matches a $ topic
        (
            "mqtt",
            ["#", "+", "+/+", "a/#", "+/#", "$SYS/#", "$SYS/+", "/#", "a//b", "+/b"],
            ["a", "a/b", "a//b", "/", "/b", "$SYS", "$SYS/x", "$x/b", "b/a/c"],
        ),
        # NATS: ">" matches one or more words, never zero
        (
            "nats",
            [">", "a.>", "*", "*.>", "a.*", "*.b", "$x.>", "a.b.>"],
            ["a", "a.b", "a.b.c", "b", "x.b", "$x", "$x.a"],
        ),
    ],
)
def test_dialect_rules_through_the_cache(name: str, patterns: list[str], topics: list[str]) -> None:
    """Rule 1, the special rules: each pattern is added, then removed, with
    every topic cached before and asked after; answers (empty ones too) are
    the oracle's, the unaffected topics are hits and the affected ones are
    filled again."""
    d = DIALECTS[name]
    tw = _Twins(d, ROOMY)
    for pair in sorted(_anchors(d, range(len(patterns))), key=repr):
        tw.subscribe(*pair)
    anchored = set(tw.pairs)
    for i, p in enumerate(patterns):
        for topic in topics:  # fill, then a hit: every answer is cached
            tw.check(topic, p)
        tw.subscribe(p, i)
        tw.check_all(topics, ("after subscribe", p))
    for i, p in enumerate(patterns):
        tw.unsubscribe(p, i)
        tw.check_all(topics, ("after unsubscribe", p))
    assert tw.pairs == anchored and len(tw.cached) == len(anchored)
    assert all(a == [] for a in tw.cached.lookup_many(topics))
    s = _stats(tw.cached)
    assert s["hits"] > 0 and s["invalidated"] > 0 and s["clears"] == 0, s


def test_empty_answers_are_cached() -> None:
    """Rule 1: an empty answer is cached (a repeated lookup is a hit, and
    still empty) and is dropped by a subscription that matches its topic."""
    trie = Trie("mqtt")
    trie.set_cache(ROOMY)
    assert _until_hit(trie, "a/b"), _stats(trie)
    s1 = _stats(trie)
    assert trie.lookup("a/b") == []
    assert _stats(trie)["hits"] == s1["hits"] + 1 and s1["entries"] == 1, s1
    trie.subscribe("a/+", "x")
    assert _stats(trie)["invalidated"] == s1["invalidated"] + 1
    assert trie.lookup("a/b") == ["x"]
    assert _until_hit(trie, "a/b") and trie.lookup("a/b") == ["x"]


def test_clear_drops_every_answer() -> None:
    """Rule 1: after clear() no cached answer is served; the next lookups
    are misses that answer for the empty trie, then fill again."""
    trie = Trie("amqp")
    trie.set_cache(ROOMY)
    topics = ["a", "a.b", "b.c", "", "x.y.z"]
    trie.subscribe_many([("#", 1), ("a.*", 2), ("b.#", 3)])
    _cache_all(trie, topics)
    s0 = _stats(trie)
    pin = trie.snapshot()  # keeps ids 1-3 mapped: a stale answer shows as one
    trie.clear()
    s1 = _stats(trie)
    assert s1["clears"] > s0["clears"], s1
    assert s0["entries"] > 0 and s1["entries"] == 0, (s0, s1)  # none counts as valid now
    for t in topics:
        assert trie.lookup(t) == [], t
    s2 = _stats(trie)
    assert s2["hits"] == s1["hits"], "an answer from before clear() was served"
    trie.subscribe("a.#", 4)
    _cache_all(trie, topics)
    for t in topics:  # served from the cache now: still right
        assert trie.lookup(t) == ([4] if t.split(".")[0] == "a" else []), t
    assert len(pin) == 3


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_group_memberships_through_the_cache(name: str) -> None:
    """Rule 1: share-group memberships (which lookup does not return) and
    the ordinary subscriptions of the same filters, joined and left in any
    order, leave the cached answers exact."""
    d = DIALECTS[name]
    sep = d.separator
    filters = [f"a{sep}b", f"a{sep}{d.single}", f"{d.multi}", f"a{sep}{d.multi}"]
    topics = [f"a{sep}b", f"a{sep}c", f"a{sep}b{sep}c", "a"]
    tw = _Twins(d, ROOMY)
    for round_ in range(2):
        for i, f in enumerate(filters):
            tw.check_all(topics, (round_, f))
            tw.group(True, f, GROUPS[i % 2], "m", d.share_prefix is not None and i % 2 == 1)
            tw.check_all(topics, (round_, f, "joined"))
            tw.subscribe(f, i)
            tw.check_all(topics, (round_, f, "subscribed"))
        for i, f in enumerate(filters):
            tw.group(False, f, GROUPS[i % 2], "m", False)
            tw.check_all(topics, (round_, f, "left"))
            tw.unsubscribe(f, i)
            tw.check_all(topics, (round_, f, "unsubscribed"))
    assert sorted(tw.cached.route(f"a{sep}b")) == []


# ====================================================================== rule 2
def _until_hit(trie: Trie, topic: str, tries: int = ADMIT_TRIES + 1) -> bool:
    """Look topic up until a lookup is a hit (at most ``tries`` times)."""
    for _ in range(tries):
        before = _stats(trie)["hits"]
        trie.lookup(topic)
        if _stats(trie)["hits"] > before:
            return True
    return False


def _cache_all(trie: Trie, topics: Sequence[str]) -> None:
    """Get every topic cached, then check that each one hits."""
    for t in topics:
        assert _until_hit(trie, t), ("never served from the cache", t, _stats(trie))
    before = _stats(trie)["hits"]
    for t in topics:
        trie.lookup(t)
    assert _stats(trie)["hits"] - before == len(topics), (topics, _stats(trie))


def _check_precision(
    trie: Trie,
    d: Dialect,
    topics: Sequence[str],
    filt: str,
    update: Callable[[], object],
    pairs: Pairs,
    drops: bool,
) -> None:
    """Cache every topic, run ``update`` (on filter ``filt``; ``pairs`` is
    the trie's model after it), then: each topic filt cannot match is still a
    hit; with ``drops``, each it matches was dropped (counted in
    ``invalidated``), is a miss, then is cached again; every answer is exact."""
    topics = sorted(set(topics))
    _cache_all(trie, topics)
    s0 = _stats(trie)
    update()
    s1 = _stats(trie)
    matched = {t for t in topics if oracle.matches(d, filt, t)}
    ctx = (d.name, filt, topics, sorted(matched))
    assert s1["clears"] == s0["clears"], ("the update dropped every entry", ctx)
    assert s0["evicted"] == s1["evicted"] == 0, ctx  # precondition: nothing left otherwise
    dropped = s1["invalidated"] - s0["invalidated"]
    if drops:
        assert dropped == len(matched), (dropped, ctx)
    else:
        assert dropped <= len(matched), (dropped, ctx)
    for t in topics:
        a = _stats(trie)
        got = trie.lookup(t)
        b = _stats(trie)
        _assert_answer(got, oracle.expected_lookup(d, pairs, t), (t, ctx))
        if t not in matched:
            assert b["hits"] == a["hits"] + 1, ("kept entry not hit", t, ctx)
        elif drops:
            assert b["hits"] == a["hits"], ("dropped entry hit", t, ctx)
            assert _until_hit(trie, t), ("not cached again", t, ctx)
            _assert_answer(trie.lookup(t), oracle.expected_lookup(d, pairs, t), (t, ctx))


PRECISION_CASES = {
    "amqp": (
        ["", "a", "a.b", "a.b.c", "b.a", "a..b", "a.*", "#", "$x.a", "c"],
        ["#", "a.#", "#.b", "*", "*.*", "a.*", "a.b", "a.#.c", "#.#", "c.#", "*.a", "a.*.#", "x"],
    ),
    "mqtt": (
        ["a", "a/b", "a/b/c", "/", "a//b", "$SYS", "$SYS/x", "$x/a", "b/a", "/a"],
        ["#", "+", "+/+", "a/#", "$SYS/#", "$SYS/+", "+/b", "a/+/c", "/#", "+/#", "$x/+", "c"],
    ),
    "nats": (
        ["a", "a.b", "a.b.c", "b.a", "$x.a", "a*b"],
        [">", "a.>", "*", "*.>", "a.*", "*.a", "a.b.c", "c.>", "$x.>", "a*b", "*.*.*"],
    ),
}


@pytest.mark.parametrize("name", sorted(PRECISION_CASES))
def test_precision_by_dialect_rules(name: str) -> None:
    """Rule 2 on hand-picked filters and topics per dialect (dollar topics,
    zero-word ``#``, one-or-more ``>``, empty words, the empty topic): a new
    subscription and its removal drop exactly the cached topics the filter
    matches; a group membership on it keeps every other entry."""
    d = DIALECTS[name]
    topics, filters = PRECISION_CASES[name]
    trie = Trie(d)
    trie.set_cache(ROOMY)
    base: Pairs = {(topics[1], "base"), (filters[0], "all")} | _anchors(d, ["new", "m"])
    for pair in sorted(base, key=repr):
        trie.subscribe(*pair)
    for f in filters:
        pairs = base | {(f, "new")}
        join = partial(trie.subscribe, f, "m", group="g")
        leave = partial(trie.unsubscribe, f, "m", group="g")
        _check_precision(trie, d, topics, f, partial(trie.subscribe, f, "new"), pairs, True)
        _check_precision(trie, d, topics, f, partial(trie.unsubscribe, f, "new"), base, True)
        _check_precision(trie, d, topics, f, join, base, False)
        _check_precision(trie, d, topics, f, leave, base, False)


def test_precision_mqtt_shared_text() -> None:
    """Rule 2 for MQTT's ``$share/group/filter``: the filter is what counts
    (not the ``$share`` words), so the cached topics it cannot match stay."""
    d = MQTT
    topics = ["a/b", "a/c", "$share/g/a/b", "x"]
    trie = Trie(d)
    trie.set_cache(ROOMY)
    trie.subscribe("#", "all")
    base: Pairs = {("#", "all")}
    _check_precision(
        trie, d, topics, "a/b", lambda: trie.subscribe("$share/g/a/b", "m"), base, False
    )
    _check_precision(
        trie, d, topics, "a/b", lambda: trie.unsubscribe("$share/g/a/b", "m"), base, False
    )
    assert trie.lookup("$share/g/a/b") == []  # a $ topic: "#" does not match it


def _texts(d: Dialect, *, pattern: bool) -> st.SearchStrategy[str]:
    """Valid patterns (or topics) of d: joined word lists, filtered by the oracle."""
    words = ["a", "b", "", "$a", "a$", d.single or "a", d.multi or "b"]
    valid = oracle.valid_pattern if pattern else oracle.valid_topic
    lists = st.lists(st.sampled_from(words), max_size=5)
    return lists.map(d.separator.join).filter(lambda s: valid(d, s))


_HYPOTHESIS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", sorted(DIALECTS))
@_HYPOTHESIS
@given(data=st.data())
def test_hypothesis_precision(name: str, data: st.DataObject) -> None:
    """Rule 2 on any small set of cached topics, base patterns and filter:
    subscribe and unsubscribe of the filter drop exactly the topics it
    matches (hypothesis shrinks a failure to a minimal example)."""
    d = DIALECTS[name]
    topics = data.draw(st.lists(_texts(d, pattern=False), min_size=1, max_size=8), "topics")
    base_patterns = data.draw(st.lists(_texts(d, pattern=True), max_size=3), "base")
    filt = data.draw(_texts(d, pattern=True), "filter")
    trie = Trie(d)
    trie.set_cache(ROOMY)
    base: Pairs = {(p, i) for i, p in enumerate(base_patterns)} | _anchors(d, ["new"])
    for pair in sorted(base, key=repr):
        trie.subscribe(*pair)
    pairs = base | {(filt, "new")}
    _check_precision(trie, d, topics, filt, lambda: trie.subscribe(filt, "new"), pairs, True)
    _check_precision(trie, d, topics, filt, lambda: trie.unsubscribe(filt, "new"), base, True)


@pytest.mark.parametrize(
    ("name", "filt"), [("mqtt", "#"), ("mqtt", "a/+/#"), ("nats", ">"), ("amqp", "#")]
)
def test_one_update_drops_many_and_long_topics(name: str, filt: str) -> None:
    """Rule 2 at scale: one update whose filter matches hundreds of cached
    topics, some of them thousands of bytes long, drops every one of them
    (and only them); every answer is then exact."""
    d = DIALECTS[name]
    sep = d.separator
    rng = _rng(name, filt, "many")
    topics = [sep.join(["a", str(i), "c"]) for i in range(300)]
    topics += [sep.join(["b", str(i)]) for i in range(50)]  # not under a/...
    # long topics: past the invalidation's first text buffer, alone and together
    topics += [sep.join(["a", "x" * (1000 * k + i), "y"]) for k in (1, 3) for i in range(4)]
    topics += [sep.join(["a", *["w"] * 200, str(i)]) for i in range(4)]  # many words
    rng.shuffle(topics)
    trie = Trie(d)
    trie.set_cache(ROOMY)
    base: Pairs = {(sep.join(["a", d.single or "", "c"]), "ac")} | _anchors(d, ["new"])
    for pair in sorted(base, key=repr):
        trie.subscribe(*pair)
    _check_precision(
        trie, d, topics, filt, lambda: trie.subscribe(filt, "new"), base | {(filt, "new")}, True
    )
    _check_precision(trie, d, topics, filt, lambda: trie.unsubscribe(filt, "new"), base, True)


# ====================================================================== rule 3
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_small_budget_evicts_and_stays_exact(name: str) -> None:
    """Rule 3: with a budget of a few entries and hundreds of distinct
    topics, the charge never passes the budget, entries are evicted and
    every answer is exact (hits included)."""
    d = DIALECTS[name]
    rng = _rng(name, "small-budget")
    words = [*WORDS, "d", "e", "f", "g"]
    trie = Trie(d)
    pairs: Pairs = _anchors(d, [*range(9), *SUBS])
    for pair in sorted(pairs, key=repr):
        trie.subscribe(*pair)
    for i in range(60):
        p = oracle.random_pattern(rng, d, words, 3)
        trie.subscribe(p, i % 9)
        pairs.add((p, i % 9))
    trie.set_cache(3000)
    topics = sorted({oracle.random_topic(rng, d, words, 4) for _ in range(600)})
    assert len(topics) > 200
    for step in range(2500):
        topic = rng.choice(topics) if rng.random() < 0.7 else rng.choice(topics[:10])
        for _ in range(rng.choice([1, 2])):
            _assert_answer(trie.lookup(topic), oracle.expected_lookup(d, pairs, topic), topic)
            _check_budget(trie, step)
        if rng.random() < 0.05:
            p, s = oracle.random_pattern(rng, d, words, 3), rng.choice(SUBS)
            if (p, s) in pairs:
                trie.unsubscribe(p, s)
                pairs.discard((p, s))
            else:
                trie.subscribe(p, s)
                pairs.add((p, s))
            _check_budget(trie, step)
    c = _stats(trie)
    assert c["evicted"] > 0 and c["hits"] > 0 and c["fills"] > c["evicted"] // 2, c


def test_shrink_to_tiny_to_zero_and_back() -> None:
    """Rule 3 and rule 1 across set_cache: shrinking evicts at once down to
    the new budget; 0 turns the cache off (nothing charged, no hits, answers
    right); turning it back on caches again."""
    d = MQTT
    trie = Trie(d)
    pairs: Pairs = {("a/+", 1), ("#", 2), ("a/b/#", 3), ("$SYS/#", 4)}
    for p, s in pairs:
        trie.subscribe(p, s)
    topics = [f"a/{i}" for i in range(100)] + ["a/b/c", "$SYS/x", "x"]

    def check_all() -> None:
        for t in topics:
            _assert_answer(trie.lookup(t), oracle.expected_lookup(d, pairs, t), t)
            _check_budget(trie, t)

    trie.set_cache(ROOMY)
    for _ in range(ADMIT_TRIES):
        check_all()
    s1 = _stats(trie)
    assert s1["entries"] == len(topics) and s1["bytes"] > 2000, s1
    trie.set_cache(2000)
    s2 = _stats(trie)
    assert s2["bytes"] <= 2000 and s2["evicted"] > s1["evicted"] and s2["budget"] == 2000, s2
    check_all()
    trie.set_cache(0)
    s3 = _stats(trie)
    assert s3["bytes"] == 0 and s3["entries"] == 0 and s3["budget"] == 0, s3
    check_all()
    trie.subscribe("a/7", 5)  # an update while off, then on again: no stale answer
    pairs.add(("a/7", 5))
    check_all()
    assert _stats(trie)["hits"] == s3["hits"], "a hit with the cache off"
    trie.set_cache(ROOMY)
    for _ in range(ADMIT_TRIES):
        check_all()
    s4 = _stats(trie)
    assert s4["hits"] >= s3["hits"] + len(topics) and s4["budget"] == ROOMY, s4
    trie.set_cache(1)  # below any entry
    s5 = _stats(trie)
    assert s5["bytes"] == 0 and s5["entries"] == 0, s5
    for _ in range(ADMIT_TRIES):
        check_all()
    s6 = _stats(trie)
    assert s6["skipped"] > s5["skipped"] and s6["bytes"] == 0 and s6["hits"] == s5["hits"], s6


@pytest.mark.parametrize("budget", [ROOMY, 4000])
def test_large_answers(budget: int) -> None:
    """Rule 1/3 for answers larger than the lookup's first buffer (hundreds
    of ids): a hit returns the same list as the walk; an answer that cannot
    fit the budget is not cached (``skipped``) and stays right."""
    trie = Trie("amqp")
    trie.set_cache(budget)
    n = 700
    trie.subscribe_many([("a.#", i) for i in range(n)] + [("a.b", "b"), ("zz.anchor", 5)])
    first = trie.lookup("a.b")
    assert sorted(first, key=repr) == sorted([*range(n), "b"], key=repr)
    for _ in range(ADMIT_TRIES):
        assert trie.lookup("a.b") == first == trie.snapshot().lookup("a.b")
    s = _stats(trie)
    if budget == ROOMY:
        assert s["hits"] >= 1 and s["entries"] == 1, s
    else:
        assert s["hits"] == 0 and s["skipped"] > 0 and s["bytes"] <= budget, s
    trie.unsubscribe("a.#", 5)
    got = trie.lookup("a.b")
    assert len(got) == n and 5 not in got and set(got) == set(first) - {5}
    assert trie.lookup("a.b") == got
    _check_budget(trie)


# ====================================================================== rule 4
class _IntLike(int):
    pass


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        ("10", TypeError, ["int", "str"]),
        (1.5, TypeError, ["int", "float"]),
        (True, TypeError, ["int", "bool"]),
        (None, TypeError, ["int", "NoneType"]),
        (_IntLike(10), TypeError, ["int", "_IntLike"]),
        (-1, ValueError, ["between", "-1"]),
        (1 << 41, ValueError, ["between", str(1 << 41)]),
        (nb.CACHE_MAX_BUDGET + 1, ValueError, ["between", str(nb.CACHE_MAX_BUDGET + 1)]),
    ],
    ids=["str", "float", "bool", "None", "int-subclass", "negative", "2**41", "max+1"],
)
@pytest.mark.parametrize("with_cache", [False, True])
def test_bad_budget_rejected(
    value: object, error: type, words: list[str], with_cache: bool
) -> None:
    """Rule 4: a budget that is not a plain int, or out of range, raises the
    error naming it, and changes nothing: the counters, the budget and the
    cached answers stay."""
    trie = Trie("nats")
    trie.subscribe("a.*", 1)
    if with_cache:
        trie.set_cache(5000)
        _cache_all(trie, ["a.b"])
    before = _stats(trie)
    with pytest.raises(error) as info:
        trie.set_cache(value)  # type: ignore[arg-type]
    msg = str(info.value)
    assert "budget" in msg and all(w in msg for w in words), msg
    assert _stats(trie) == before
    assert trie.lookup("a.b") == [1]
    after = _stats(trie)
    assert after["hits"] == before["hits"] + (1 if with_cache else 0), after
    assert after["budget"] == (5000 if with_cache else 0)


def test_snapshot_has_no_cache_and_stays_isolated() -> None:
    """Rule 4: a Snapshot has no set_cache; taken from a trie with a cache,
    it answers for its own moment while the trie's cached answers move on."""
    trie = Trie("amqp")
    trie.set_cache(ROOMY)
    trie.subscribe("a.*", 1)
    assert trie.lookup("a.b") == [1] and trie.lookup("a.b") == [1]
    snap = trie.snapshot()
    assert not hasattr(snap, "set_cache")
    trie.subscribe("#", 2)
    trie.unsubscribe("a.*", 1)
    assert snap.lookup("a.b") == [1]
    assert trie.lookup("a.b") == [2] and trie.lookup("a.b") == [2]
    assert snap.lookup("a.b") == [1]


def test_copy_starts_without_cache() -> None:
    """Rule 4: ``copy()`` (of a trie or of a snapshot) has no cache; its
    answers and the original's stay right as either changes."""
    d = AMQP
    trie = Trie(d)
    trie.set_cache(ROOMY)
    pairs: Pairs = {("a.*", 1), ("a.#", 2), ("b", 3)}
    for p, s in pairs:
        trie.subscribe(p, s)
    topics = ["a", "a.b", "a.b.c", "b", "c"]
    for t in topics * 2:
        trie.lookup(t)
    for dup in (trie.copy(), trie.snapshot().copy()):
        assert _stats(dup)["budget"] == 0 and set(_stats(dup).values()) == {0}
        dup_pairs = set(pairs)
        dup.subscribe("#", 4)
        dup_pairs.add(("#", 4))
        dup.unsubscribe("a.*", 1)
        dup_pairs.discard(("a.*", 1))
        for t in topics:
            _assert_answer(dup.lookup(t), oracle.expected_lookup(d, dup_pairs, t), t)
            _assert_answer(trie.lookup(t), oracle.expected_lookup(d, pairs, t), t)
        assert set(_stats(dup).values()) == {0}
        dup.set_cache(ROOMY)  # a copy may have a cache of its own
        for t in topics * ADMIT_TRIES:
            _assert_answer(dup.lookup(t), oracle.expected_lookup(d, dup_pairs, t), t)
        assert _stats(dup)["hits"] >= len(topics)
    trie.subscribe("c", 5)  # the original: its own cache, right
    pairs.add(("c", 5))
    for t in topics:
        _assert_answer(trie.lookup(t), oracle.expected_lookup(d, pairs, t), t)


# ====================================================================== rule 5
@contextmanager
def _fast_switching() -> Iterator[None]:
    """With a GIL, switch threads often so that calls interleave."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class _History:
    """One writer's states: ``states[v]`` its pairs after its v-th operation.
    ``started`` is the last operation begun (its state appended first),
    ``done`` the last one finished: a lookup that reads ``done`` before and
    ``started`` after itself saw one of ``states[done .. started]``."""

    def __init__(self, subs: frozenset[Hashable]) -> None:
        self.subs = subs
        self.states: list[frozenset[tuple[str, Hashable]]] = [frozenset()]
        self.started = 0
        self.done = 0

    def run(
        self, new_states: list[frozenset[tuple[str, Hashable]]], op: Callable[[], object]
    ) -> None:
        self.states.extend(new_states)
        self.started = len(self.states) - 1
        op()
        self.done = self.started


def _share(
    answer: list[Any], h: _History, lo: int, hi: int, topic: str, m: dict[tuple[str, str], bool]
) -> str | None:
    """None if ``answer`` restricted to h's subscribers is h's answer in one
    of its states lo..hi; else a description."""
    mine = frozenset(s for s in answer if s in h.subs)
    options = [frozenset(s for p, s in h.states[v] if m[p, topic]) for v in range(lo, hi + 1)]
    if mine in options:
        return None
    return f"{topic!r}: {_key(mine)} not among states {lo}..{hi}: {[_key(o) for o in options]}"


def _reader(
    trie: Trie,
    hists: list[_History],
    topics: list[str],
    m: dict[tuple[str, str], bool],
    stop: threading.Event,
    seed: str,
) -> Callable[[], None]:
    everyone = frozenset().union(*(h.subs for h in hists))

    def run() -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            topic = rng.choice(topics)
            for _ in range(rng.choice([1, 2, 3])):  # again at once: a hit, often
                lo = [h.done for h in hists]
                answer = trie.lookup(topic)
                hi = [h.started for h in hists]
                assert len(answer) == len(set(answer)), answer
                assert set(answer) <= everyone, answer
                for h, a, b in zip(hists, lo, hi, strict=True):
                    bad = _share(answer, h, a, b, topic, m)
                    assert bad is None, f"{bad} (CSTRIE_SEED={SEED})"

    return run


def _final_check(trie: Trie, d: Dialect, pairs: Pairs, topics: list[str]) -> None:
    """After the threads: every answer (filled, then hit) is the uncached one."""
    trie.set_cache(ROOMY)
    _check_budget(trie, "final")
    plain = Trie.from_pairs(sorted(pairs, key=repr), d) if pairs else Trie(d)
    hits = _stats(trie)["hits"]
    for t in topics:
        want = oracle.expected_lookup(d, pairs, t)
        for _ in range(ADMIT_TRIES):
            got = trie.lookup(t)
            _assert_answer(got, want, ("final", t, SEED))
            assert _key(got) == _key(plain.lookup(t)), t
    assert _stats(trie)["hits"] >= hits + len(topics)
    _check_budget(trie, "final")


def _workload(
    rng: random.Random, d: Dialect, n_patterns: int, n_topics: int
) -> tuple[list[str], list[str], dict[tuple[str, str], bool]]:
    words = ["a", "b", "c"]
    patterns = sorted({oracle.random_pattern(rng, d, words, 3) for _ in range(n_patterns)})
    topics = sorted({oracle.random_topic(rng, d, words, 3) for _ in range(n_topics)})
    m = {(p, t): oracle.matches(d, p, t) for p in patterns for t in topics}
    return patterns, topics, m


THREAD_SECONDS = 1.0


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_threads_writers_and_cached_readers(name: str) -> None:
    """Rule 5: two writers toggle (pattern, subscriber) pairs of their own
    (plain, and for one of them also in batches) while two readers look
    topics up through the cache and a fifth thread changes the budget; every
    answer, restricted to a writer's subscribers, is one of that writer's
    states during the lookup.  Afterwards every answer is the uncached one."""
    d = DIALECTS[name]
    rng = _rng(name, "threads")
    patterns, topics, m = _workload(rng, d, 14, 24)
    trie = Trie(d)
    trie.set_cache(ROOMY)
    hists = [_History(frozenset({("w", w, j) for j in range(2)})) for w in range(2)]
    anchors = _anchors(d, sorted(frozenset().union(*(h.subs for h in hists)), key=repr))
    for pair in sorted(anchors, key=repr):
        trie.subscribe(*pair)
    stop = threading.Event()
    done = [threading.Event() for _ in hists]

    def writer(w: int) -> Callable[[], None]:
        h = hists[w]
        wrng = random.Random(f"{SEED}/{name}/writer/{w}")
        mine = [(p, s) for p in patterns for s in sorted(h.subs, key=repr)]

        def run() -> None:
            try:
                deadline = time.monotonic() + THREAD_SECONDS
                while time.monotonic() < deadline:
                    cur = h.states[-1]
                    if w == 1 and wrng.random() < 0.1:
                        batch = wrng.sample(mine, 3)
                        states, acc = [], set(cur)
                        for pair in batch:
                            acc.add(pair)
                            states.append(frozenset(acc))
                        h.run(states, partial(trie.subscribe_many, batch))
                        continue
                    p, s = wrng.choice(mine)
                    if (p, s) in cur:
                        h.run([cur - {(p, s)}], partial(trie.unsubscribe, p, s))
                    else:
                        h.run([cur | {(p, s)}], partial(trie.subscribe, p, s))
            finally:
                done[w].set()

        return run

    def budgets() -> None:
        brng = random.Random(f"{SEED}/{name}/budgets")
        while not all(e.is_set() for e in done):
            trie.set_cache(brng.choice([0, 600, 3000, 1 << 14, ROOMY, ROOMY]))
            time.sleep(0.002)

    def stopper() -> None:
        for e in done:
            e.wait()
        stop.set()

    readers = [_reader(trie, hists, topics, m, stop, f"{SEED}/{name}/reader/{r}") for r in range(2)]
    with _fast_switching():
        run_threads([writer(0), writer(1), *readers, budgets, stopper])
    s = _stats(trie)
    assert s["fills"] > 0 and s["invalidated"] > 0, s
    final: Pairs = set(anchors).union(*(h.states[-1] for h in hists))
    assert set(trie) == final
    _final_check(trie, d, final, topics)


@pytest.mark.parametrize("name", ["amqp", "mqtt"])
def test_threads_clear_against_cached_readers(name: str) -> None:
    """Rule 5 with clear(): one writer subscribes, unsubscribes, subscribes
    in batches and clears the trie while two readers look up through the
    cache; no answer from before a clear (or any other write) is served once
    it is done."""
    d = DIALECTS[name]
    rng = _rng(name, "threads-clear")
    patterns, topics, m = _workload(rng, d, 12, 20)
    subs = frozenset({"x", "y", "z"})
    pairs_all = [(p, s) for p in patterns for s in sorted(subs)]
    trie = Trie(d)
    trie.set_cache(ROOMY)
    h = _History(subs)
    for pair in sorted(_anchors(d, sorted(subs)), key=repr):
        trie.subscribe(*pair)
    pin = trie.snapshot()  # the ids of x, y, z stay mapped while it is open
    for pair in sorted(_anchors(d, sorted(subs)), key=repr):
        trie.unsubscribe(*pair)
    stop = threading.Event()

    def writer() -> None:
        wrng = random.Random(f"{SEED}/{name}/clear-writer")
        try:
            deadline = time.monotonic() + THREAD_SECONDS
            while time.monotonic() < deadline:
                cur = h.states[-1]
                roll = wrng.random()
                if roll < 0.1:
                    h.run([frozenset()], trie.clear)
                elif roll < 0.3:
                    batch = wrng.sample(pairs_all, 6)
                    states, acc = [], set(cur)
                    for pair in batch:
                        acc.add(pair)
                        states.append(frozenset(acc))
                    h.run(states, partial(trie.subscribe_many, batch))
                else:
                    p, s = wrng.choice(pairs_all)
                    if (p, s) in cur:
                        h.run([cur - {(p, s)}], partial(trie.unsubscribe, p, s))
                    else:
                        h.run([cur | {(p, s)}], partial(trie.subscribe, p, s))
        finally:
            stop.set()

    readers = [_reader(trie, [h], topics, m, stop, f"{SEED}/{name}/creader/{r}") for r in range(2)]
    with _fast_switching():
        run_threads([writer, *readers])
    s = _stats(trie)
    assert s["clears"] > 0 and s["fills"] > 0, s
    assert set(trie) == set(h.states[-1])
    _final_check(trie, d, set(h.states[-1]), topics)
    assert len(pin) == len(subs)


# ====================================================== suspected bug (rule 5)
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


@pytest.mark.skipif(
    _GIL,
    reason="with the GIL a subscribe holds it throughout, so no lookup can run inside one",
)
def test_cache_made_while_an_update_is_in_flight() -> None:
    """Rule 5 when the cache is made (the first set_cache) while another
    thread's subscribe is in flight: once both are done, the cached answer is
    the trie's.  (An update that read no cache neither counts itself nor
    kills entries: the new cache's fills wait until every such update has
    ended, native/cache.c, "A new cache".)  Trials until one goes wrong, for
    at most about 3 seconds."""
    deadline = time.monotonic() + 3.0
    trial = 0
    while time.monotonic() < deadline:
        trial += 1
        trie = _made_during_update(trial)
        got = trie.lookup(_DEEP)
        assert got == trie.lookup(_DEEP) == ["w"], (
            f"trial {trial}: the cache serves {got!r}; the trie (a snapshot) has "
            f"{trie.snapshot().lookup(_DEEP)!r}; {_stats(trie)}"
        )


_DEEP = ".".join(["a"] * 250)  # a deep new path: a long update


def _made_during_update(trial: int) -> Trie:
    """One trial: a thread subscribes _DEEP while another makes the cache
    and then looks _DEEP up until the subscribe is done."""
    trie = Trie("amqp")
    start = threading.Barrier(2)
    written = threading.Event()
    spin = (trial * 7919) % 600 * 5  # move the two threads against each other

    def writer() -> None:
        start.wait()
        for _ in range(spin if trial % 2 else 0):
            pass
        trie.subscribe(_DEEP, "w")
        written.set()

    def maker() -> None:
        start.wait()
        for _ in range(0 if trial % 2 else spin):
            pass
        trie.set_cache(1 << 14)
        while not written.is_set():  # fill as soon as the cache exists
            trie.lookup(_DEEP)

    run_threads([writer, maker])
    return trie


@pytest.mark.parametrize("levels", [5, 200])
def test_memory_held_stays_within_the_budget_for_deep_topics(levels: int) -> None:
    """Rule 3 against the engine's own byte count: what the cache holds
    (entries and the index of cached topics) stays within its budget plus its
    bucket table, however deep the topics a client publishes to (each level
    of a cached topic is a path in that index)."""
    budget = 256 << 10
    trie = Trie("mqtt")
    trie.subscribe("#", Sub("all"))
    trie.set_cache(budget)
    nb.reclaim()
    before = nb.live_bytes()
    for i in range(400):
        topic = "/".join(f"w{i}.{j}" for j in range(levels))
        for _ in range(3):
            assert len(trie.lookup(topic)) == 1
    nb.reclaim()
    held = nb.live_bytes() - before
    st = trie.cache_stats()
    assert st["entries"] > 0 and st["bytes"] <= budget, st
    assert held <= budget + (64 << 10), (held, st)
