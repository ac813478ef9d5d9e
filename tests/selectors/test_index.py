"""SelectorIndex: its answers against a brute-force model (every selector of
every subscriber tested), through cache hits, watermarked refreshes, removals
pruned on read and compactions; snapshots; the byte budget; bad input; limits;
subscriber code calling back; threads.  Seeded by ``CSTRIE_SEED`` (printed)."""

from __future__ import annotations

import functools
import gc
import sys
import threading
import tracemalloc
from typing import Any

import oracle
import pytest

from cstrie.selectors import Selector, SelectorIndex, compile_selector
from cstrie.selectors import index as index_mod

SEED = oracle.choose_seed()

SELECTORS = [
    ("exact", "a/1"),
    ("exact", "b/2"),
    ("exact", "a/b/c"),
    ("glob", "a/*"),
    ("glob", "*/2"),
    ("glob", "?/?"),
    ("glob", "[ab]/*"),
    ("glob", "*"),
    ("template", "a/{x}"),
    ("template", "{x}/2"),
    ("template", "a{/x,y}"),
    ("template", "*"),
    ("template", "b/2"),
    ("regex", r"a/\d"),
    ("regex", "(a|b)/.*"),
    ("regex", "[^/]+"),
]
TOPICS = ["a/1", "b/2", "a/b/c", "a/x", "c/2", "a", "ab", "x/y", "a/b", "", "é/2", "a/22"]


@functools.cache
def compiled(kind: str, text: str) -> Any:
    return compile_selector(kind, text)


def brute(model: dict[Any, set[tuple[str, str]]], order: list[Any], topic: str) -> list[Any]:
    out = []
    for sub in order:
        sels = model.get(sub)
        if sels and any(compiled(k, t).match(topic, topic.encode()) for k, t in sels):
            out.append(sub)
    return out


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20, 3000])
@pytest.mark.parametrize("compact_min", [4, 1024])
def test_model_fuzz(monkeypatch: pytest.MonkeyPatch, cache_bytes: int, compact_min: int) -> None:
    monkeypatch.setattr(index_mod, "COMPACT_MIN", compact_min)
    rng = oracle.seeded_rng(SEED, "selectors", "model", str(cache_bytes), str(compact_min))
    idx = SelectorIndex(cache_bytes=cache_bytes)
    model: dict[Any, set[tuple[str, str]]] = {}
    order: list[Any] = []  # ids follow first subscription; a subscriber that keeps
    # some selectors after a removal moves to the end (it took a new id)
    for step in range(1500):
        sub = rng.randrange(12)
        op = rng.random()
        kind, text = rng.choice(SELECTORS)
        if op < 0.5:
            new = (kind, text) not in model.get(sub, set())
            assert idx.add(sub, text, kind) is new
            if sub not in model or not model[sub]:
                model[sub] = set()
                if sub in order:
                    order.remove(sub)
                order.append(sub)
            model[sub].add((kind, text))
        elif op < 0.8:
            held = (kind, text) in model.get(sub, set())
            assert idx.remove(sub, text, kind) is held
            if held:
                model[sub].discard((kind, text))
                order.remove(sub)
                if model[sub]:
                    order.append(sub)
        elif op < 0.85:
            n = len(model.get(sub, ()))
            assert idx.remove_subscriber(sub) == n
            model.pop(sub, None)
            if sub in order:
                order.remove(sub)
        for _ in range(3):
            topic = rng.choice(TOPICS)
            assert idx.lookup(topic) == brute(model, order, topic), (step, topic)
        ts = rng.sample(TOPICS, 2)
        expect = [
            s for s in order if s in set(brute(model, order, ts[0]) + brute(model, order, ts[1]))
        ]
        assert idx.lookup_any(ts) == expect
    assert len(idx) == sum(len(v) for v in model.values())
    assert idx.subscriptions() == {
        s: sorted((Selector(*x) for x in model[s]), key=lambda x: -1) for s in order
    } or {s: set(v) for s, v in idx.subscriptions().items()} == {
        s: {Selector(*x) for x in model[s]} for s in order
    }
    cs = idx.cache_stats()
    assert cs["bytes"] <= cs["budget"]
    if cache_bytes == 1 << 20:
        assert cs["hits"] > 0 and cs["refreshes"] > 0


def test_hit_tests_nothing_and_refresh_tests_only_new_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watermark: a cached topic at the same version is a copy; after a
    write, only the records added since are tested."""
    idx = SelectorIndex()
    for i in range(50):
        idx.add(f"s{i}", f"t/{i}/*", "glob")
    assert idx.lookup("t/7/x") == ["s7"]
    calls: list[str] = []
    real = index_mod._evaluate

    def counting(*a: Any) -> int:
        calls.append("evaluate")
        return real(*a)

    monkeypatch.setattr(index_mod, "_evaluate", counting)
    assert idx.lookup("t/7/x") == ["s7"]
    assert calls == [] and idx.cache_stats()["hits"] == 1
    idx.add("late", "t/*/x", "glob")
    tested: list[str] = []
    orig = index_mod.Compiled.match

    def spy(self: Any, text: str, data: bytes) -> bool:
        tested.append(self.text)
        return orig(self, text, data)

    monkeypatch.setattr(index_mod.Compiled, "match", spy)
    assert idx.lookup("t/7/x") == ["s7", "late"]
    assert calls == [] and tested == ["t/*/x"]
    idx.remove_subscriber("s7")  # pruned on read: no test at all
    tested.clear()
    assert idx.lookup("t/7/x") == ["late"]
    assert tested == [] and calls == []


def test_snapshot_is_frozen() -> None:
    idx = SelectorIndex()
    idx.add("a", "x.*", "glob")
    snap = idx.snapshot()
    idx.add("b", "x.*", "glob")
    idx.remove_subscriber("a")
    assert snap.lookup("x.1") == ["a"]
    assert idx.lookup("x.1") == ["b"]
    assert snap.subscriptions() == {"a": [Selector("glob", "x.*")]}
    assert len(snap) == 1 and snap.stats()["subscribers"] == 1


def test_cache_bytes_never_exceed_budget_and_match_real_sizes() -> None:
    budget = 200_000
    idx = SelectorIndex(cache_bytes=budget)
    for i in range(100):
        idx.add(i, f"user/{i % 10}/*", "glob")
    peak = 0
    for n in range(20_000):
        idx.lookup(f"user/{n % 10}/{n}")
        peak = max(peak, idx.cache_stats()["bytes"])
    cs = idx.cache_stats()
    assert peak <= budget and cs["evicted"] > 0
    # the counter is the sum of each kept entry's real size
    entries = idx._cache.entries()
    real = sum(
        sys.getsizeof(t)
        + sys.getsizeof(e.bits)
        + sys.getsizeof(e.result)
        + sys.getsizeof(e)
        + index_mod.ResultCache.__dict__.get("SLOT", 0)
        + 64
        for t, e in entries
    )
    assert cs["bytes"] == real and cs["entries"] == len(entries)


def test_cache_charge_covers_what_python_allocates() -> None:
    """tracemalloc's count of the memory a full cache holds is within the
    charge, give or take the dict's own table (charged at 64 bytes a slot)."""
    idx = SelectorIndex(cache_bytes=1 << 30)
    for i in range(200):
        idx.add(i, f"u/{i}/*", "glob")
    topics = [f"u/{n % 200}/{n:08d}" for n in range(20_000)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for t in topics:
        idx.lookup(t)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    charged = idx.cache_stats()["bytes"]
    # the topics themselves were allocated before: add them to what was measured
    held += sum(sys.getsizeof(t) for t in topics)
    assert 0.7 * held <= charged <= 1.3 * held, (held, charged)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda i: i.add("s", 5, "glob"), TypeError),
        (lambda i: i.add("s", "x", "nope"), ValueError),
        (lambda i: i.add("s", "x", 3), TypeError),
        (lambda i: i.add("s", "a\ud800", "glob"), ValueError),
        (lambda i: i.add("s", "x" * 101, "glob"), ValueError),
        (lambda i: i.add("s", r"(a)\1", "regex"), ValueError),
        (lambda i: i.add(["unhashable"], "x", "glob"), TypeError),
        (lambda i: i.lookup(b"bytes"), TypeError),
        (lambda i: i.lookup("t" * 201), ValueError),
        (lambda i: i.lookup("\udfff"), ValueError),
        (lambda i: i.remove("s", "x", "nope"), ValueError),
    ],
)
def test_bad_input_raises_and_changes_nothing(call: Any, error: type[Exception]) -> None:
    idx = SelectorIndex(max_selector_length=100, max_topic_length=200)
    idx.add("s", "k", "exact")
    before = (idx.subscriptions(), idx._version.seq)
    with pytest.raises(error):
        call(idx)
    assert (idx.subscriptions(), idx._version.seq) == before


def test_limits() -> None:
    idx = SelectorIndex(max_selectors_per_subscriber=2)
    assert idx.add("s", "a") and idx.add("s", "b")
    with pytest.raises(ValueError, match="max_selectors_per_subscriber=2"):
        idx.add("s", "c")
    assert idx.add("s", "a") is False  # held already: not over the limit
    assert len(idx) == 2
    with pytest.raises(ValueError, match="too complex"):
        SelectorIndex(max_automaton_states=50).add("s", "a{100}", "regex")
    with pytest.raises(ValueError, match="cache_bytes"):
        SelectorIndex(cache_bytes=-1)
    with pytest.raises(TypeError):
        SelectorIndex(max_dfa_states=1.5)  # type: ignore[arg-type]


class Reentrant:
    """A subscriber whose __hash__, __eq__ and __del__ call the index."""

    def __init__(self, idx: SelectorIndex, name: str) -> None:
        self.idx, self.name = idx, name

    def __hash__(self) -> int:
        self.idx.lookup("probe")
        return 7  # every one collides

    def __eq__(self, other: object) -> bool:
        self.idx.stats()
        return isinstance(other, Reentrant) and other.name == self.name

    def __del__(self) -> None:
        self.idx.lookup("probe")


def test_subscriber_code_may_call_the_index() -> None:
    """No lock is held while subscriber code runs: no deadlock."""
    idx = SelectorIndex()
    done = threading.Event()

    def work() -> None:
        a, b = Reentrant(idx, "a"), Reentrant(idx, "b")
        assert idx.add(a, "probe") and idx.add(b, "probe")
        assert idx.add(Reentrant(idx, "a"), "pr*", "glob")  # equal to a: same subscriber
        assert [s.name for s in idx.lookup("probe")] == ["a", "b"]
        del a, b
        assert idx.remove_subscriber(Reentrant(idx, "a")) == 2
        assert idx.remove(Reentrant(idx, "b"), "probe")
        gc.collect()
        done.set()

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(60)
    assert done.is_set(), "deadlocked"
    assert len(idx) == 0


def test_threads_keep_answers_consistent() -> None:
    """Writers on their own subscribers, readers looking up all along: every
    answer is one the index had (each writer's subscribers appear in order,
    nothing twice), and the end state is exact."""
    idx = SelectorIndex(cache_bytes=1 << 16)
    errors: list[str] = []

    def writer(w: int) -> None:
        for r in range(200):
            sub = (w, r % 5)
            idx.add(sub, f"w{w}/*", "glob")
            idx.add(sub, f"w{w}/{r}")
            if r % 3 == 0:
                idx.remove(sub, f"w{w}/*", "glob")

    def reader() -> None:
        for n in range(2000):
            got = idx.lookup(f"w{n % 3}/{n % 200}")
            if len(got) != len(set(got)):
                errors.append(f"duplicate in {got}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for w in range(3):
        for r in range(200):
            topic = f"w{w}/{r}"
            want = {
                (w, k)
                for k in range(5)
                if any(
                    compile_selector(kd, tx).match(topic, topic.encode())
                    for kd, tx in idx.subscriptions()[(w, k)]
                )
            }
            assert set(idx.lookup(topic)) == want
