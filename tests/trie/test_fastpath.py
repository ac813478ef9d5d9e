"""The C fast path (``cstrie._hotpath``) against references that do not use it.

``Trie``/``Snapshot`` serve ``lookup``, ``has_subscribers``, ``match``,
``lookup_many``, ``route``, ``route_by_group``, ``subscribe`` and
``unsubscribe`` from C (``native/hotpath/``), each from one entry point.
Every test here checks those calls against something that does not go through
them: the cffi engine calls (``_binding.ids_call(lib.cst_lookup, ...)``,
``lib.cst_has_subscribers``, ``lib.cst_match`` with a ``_binding.ChunkBuffers``
buffer) mapped through the registry's public ``objects`` list, the independent
matcher in ``tests/support/oracle.py``, and ``Dialect.split_topic`` /
``Dialect.split_pattern``, the single source of error messages.

Sections, each stating the rule it proves:

1. Parity: same subscribers, pairs, rows and exceptions as the references, for
   every dialect (a custom one with the separator ``"::"`` takes the engine's
   general splitter), with non-ASCII, huge results (more ids than the fast
   path's 256-id stack buffer), str subclasses, non-str, lone surrogates,
   keyword calls and wrong argument counts.
2. Errors leave everything as it was (trie contents and registry).
3. Registry rule 4: ids freed and reused while a read runs (replayed through
   ``Reader._set_race_hook``): every answer is a state the trie was in during
   the call.
4. A dropped trie: snapshots and copies outlive it; its registry's ids.
5. Reference counts: nothing leaked or over-released.
6. Threads, and the free-threaded build (``PYTHON_GIL=0`` on 3.13t).

Random workloads draw
from ``random.Random`` seeded by ``CSTRIE_SEED`` (a fresh seed each run
unless set; failures print it), and from hypothesis.
``CSTRIE_FASTPATH_SCALE`` (default 1) multiplies the sizes of the ``slow``
tests and the thread tests' durations.
"""

from __future__ import annotations

import gc
import os
import random
import re
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import oracle
import pytest
from helpers import JOIN_TIMEOUT, run_threads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie import _binding as nb
from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.registry import MAX_ATTEMPTS
from cstrie.trie import Snapshot, Trie

SEED = int(os.environ.get("CSTRIE_SEED", "").strip() or random.SystemRandom().randrange(2**32))
REPLAY = f"replay with CSTRIE_SEED={SEED}"
SCALE = max(1, int(os.environ.get("CSTRIE_FASTPATH_SCALE", "1") or 1))
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
#: the ids the fast path keeps on its C stack before it asks for heap room
LOCAL_IDS = 256

#: A custom dialect with a two-character separator and wildcards (the engine's
#: general splitter) and MQTT-like validation, so that it has invalid input too.
COLONS = Dialect(
    name="colons",
    separator="::",
    single="+",
    multi="**",
    multi_last_only=True,
    strict_wildcards=True,
    topic_wildcards=False,
    empty_topic=False,
    forbid_nul=True,
    max_levels=12,
)
DIALECTS: dict[str, Dialect] = {"amqp": AMQP, "mqtt": MQTT, "nats": NATS, "colons": COLONS}
NAMES = list(DIALECTS)

#: Literal words: ASCII, 2-, 3- and 4-byte UTF-8, a "$" word (MQTT's rule),
#: and ":b" / "x:y", which sit next to the "::" separator in the custom dialect
#: (":b" after a separator makes ":::b": the separator is the first "::").
WORDS = ["a", "b", "c", "é", "日本", "𝄞", "aé日𝄞", "x:y", ":b", "$sys", "*"]

HYPOTHESIS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class Obj:
    """A subscriber told apart by identity, weakly referenceable, held by
    nobody but the test and the trie (so its reference count is the test's to
    predict)."""

    __slots__ = ("__weakref__", "n")

    def __init__(self, n: object) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Obj({self.n!r})"


class StrSub(str):
    """A str subclass: the C calls read its characters as they read a str's."""

    __slots__ = ()


def raised(fn: Callable[[], object]) -> BaseException | None:
    """The exception ``fn()`` raises, or None."""
    try:
        fn()
    except Exception as exc:
        return exc
    return None


def same_error(got: BaseException | None, want: BaseException | None, ctx: str) -> None:
    assert want is not None, ctx
    assert got is not None, f"{ctx}: no exception, expected {want!r}"
    assert type(got) is type(want), f"{ctx}: {got!r} instead of {want!r}"
    assert str(got) == str(want), f"{ctx}: message {str(got)!r} instead of {str(want)!r}"


def ids(objs: Iterable[object]) -> Counter[int]:
    """A multiset of identities: the API hands back the stored objects."""
    return Counter(map(id, objs))


def pair_ids(pairs: Iterable[tuple[str, object]]) -> Counter[tuple[str, int]]:
    return Counter((p, id(s)) for p, s in pairs)


def contents(r: Trie | Snapshot) -> list[tuple[str, Any]]:
    return sorted(r, key=repr)


def _run_child(script: str, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter (this one), from the repository."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        env={**os.environ, **env},
        check=False,
    )


# ---------------------------------------------------------------------------
# The references: cffi engine calls, mapped through the registry's objects
# ---------------------------------------------------------------------------
def ref_lookup(r: Trie | Snapshot, topic: str) -> list[Any]:
    """lookup() through ``_binding.ids_call(lib.cst_lookup, ...)``."""
    got = nb.ids_call(nb.lib.cst_lookup, r._h, topic.encode())
    if isinstance(got, int):
        nb.raise_status(got, r._dialect, "topic", topic)
    objects = r._reg.objects
    return [objects[i] for i in got]


def ref_has(r: Trie | Snapshot, topic: str) -> bool:
    data = topic.encode()
    got = nb.lib.cst_has_subscribers(r._h, data, len(data))
    if got < 0:
        nb.raise_status(got, r._dialect, "topic", topic)
    return bool(got)


def ref_match(r: Trie | Snapshot, topic: str) -> list[tuple[str, Any]]:
    """match() through ``lib.cst_match`` with a ``ChunkBuffers`` buffer (grown on
    CST_ETRUNC as the engine asks)."""
    data = topic.encode()
    g = nb.ChunkBuffers(64, 8, 4)  # small on purpose: exercises the truncation path
    while True:
        st_ = nb.lib.cst_match(r._h, data, len(data), g.s)
        if st_ == nb.lib.CST_ETRUNC:
            s = g.s
            g.resize(2 * s.need_pat + 16, 2 * s.need_ids + 16, 2 * s.need_entries + 16)
            continue
        if st_ < 0:
            nb.raise_status(st_, r._dialect, "topic", topic)
        break
    objects = r._reg.objects
    return [(p.decode(), objects[i]) for p, group in g.read() for i in group]


def check_reads(
    r: Trie | Snapshot, topic: str, pairs: set[tuple[str, Any]] | None, ctx: str
) -> None:
    """lookup, match and has_subscribers of ``topic`` equal the references
    (and the oracle, when the pairs are known)."""
    got = r.lookup(topic)
    want = ref_lookup(r, topic)
    assert type(got) is list
    assert len(set(map(id, got))) == len(got), f"{ctx}: a subscriber twice in {got!r}"
    assert ids(got) == ids(want), f"{ctx}: lookup {got!r} != reference {want!r}"
    pairs_got = r.match(topic)
    pairs_want = ref_match(r, topic)
    assert all(type(p) is tuple and type(p[0]) is str for p in pairs_got)
    assert pair_ids(pairs_got) == pair_ids(pairs_want), f"{ctx}: match"
    has = r.has_subscribers(topic)
    assert has is ref_has(r, topic) is bool(want), f"{ctx}: has_subscribers"
    assert set(map(id, got)) == {id(s) for _, s in pairs_got}, f"{ctx}: match vs lookup"
    if pairs is not None:
        d = r.dialect
        assert pair_ids(pairs_got) == pair_ids(oracle.expected_match(d, pairs, topic)), (
            f"{ctx}: match against the oracle"
        )


# ===========================================================================
# 1. Parity with an independent path
# ===========================================================================
def _random_trie(
    d: Dialect, rng: random.Random, n_pairs: int
) -> tuple[Trie, set[tuple[str, Any]], list[Any]]:
    """A trie of random pairs (and the same pairs as a set), with subscribers
    of several kinds (identity objects, str, int, None, a tuple)."""
    subs: list[Any] = [Obj(k) for k in range(30)] + ["s", "é", 7, None, ("t", 1)]
    trie = Trie(d)
    pairs: set[tuple[str, Any]] = set()
    for _ in range(n_pairs):
        p = oracle.random_pattern(rng, d, WORDS, 5)
        s = rng.choice(subs)
        assert trie.subscribe(p, s) is ((p, s) not in pairs)
        pairs.add((p, s))
    for p, s in rng.sample(sorted(pairs, key=repr), n_pairs // 5):
        assert trie.unsubscribe(p, s) is True
        pairs.discard((p, s))
    return trie, pairs, subs


@pytest.mark.parametrize("name", NAMES)
def test_random_workload_reads_equal_the_engine_and_the_oracle(name: str) -> None:
    """lookup, match, has_subscribers and lookup_many of random valid topics
    (ASCII and 2/3/4-byte UTF-8) give the engine's answer through cffi and the
    oracle's, on the trie and on a snapshot; lookup_many's rows are lookups."""
    d = DIALECTS[name]
    rng = random.Random(f"{SEED}-{name}")
    trie, pairs, _ = _random_trie(d, rng, 150)
    topics = [oracle.random_topic(rng, d, WORDS, 6) for _ in range(150)]
    for topic in topics:
        check_reads(trie, topic, pairs, f"{name} {topic!r} ({REPLAY})")
    rows = trie.lookup_many(topics)
    assert [ids(r) for r in rows] == [ids(ref_lookup(trie, t)) for t in topics], REPLAY
    snap = trie.snapshot()
    for p, s in list(pairs)[:20]:
        trie.unsubscribe(p, s)  # the snapshot keeps answering the old state
    for topic in topics[:50]:
        check_reads(snap, topic, pairs, f"snapshot {name} {topic!r} ({REPLAY})")
    assert [ids(r) for r in snap.lookup_many(topics)] == [ids(r) for r in rows], REPLAY


@pytest.mark.parametrize("name", NAMES)
@HYPOTHESIS
@given(data=st.data())
def test_hypothesis_workloads_match_the_engine(name: str, data: st.DataObject) -> None:
    """Random subscribe/unsubscribe sequences and lookups drawn by hypothesis:
    the fast path's answers are the engine's (through cffi) and the oracle's."""
    d = DIALECTS[name]
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = random.Random(seed)
    patterns = [oracle.random_pattern(rng, d, WORDS, 4) for _ in range(12)]
    topics = [oracle.random_topic(rng, d, WORDS, 5) for _ in range(12)]
    subs = [Obj(k) for k in range(6)]
    steps = data.draw(
        st.lists(
            st.tuples(st.booleans(), st.integers(0, 11), st.integers(0, 5), st.integers(0, 11)),
            max_size=30,
        ),
        label="steps",
    )
    trie = Trie(d)
    pairs: set[tuple[str, Any]] = set()
    for add, pi, si, ti in steps:
        pair = (patterns[pi], subs[si])
        if add:
            assert trie.subscribe(*pair) is (pair not in pairs)
            pairs.add(pair)
        else:
            assert trie.unsubscribe(*pair) is (pair in pairs)
            pairs.discard(pair)
        check_reads(trie, topics[ti], pairs, f"{name} {topics[ti]!r}")
    assert [ids(r) for r in trie.lookup_many(topics)] == [ids(ref_lookup(trie, t)) for t in topics]
    assert len(trie._reg) == len({id(s) for _, s in pairs})


def _huge_trie(d: Dialect, n: int) -> tuple[Trie, str, list[Obj]]:
    """A trie where one topic matches ``n`` subscribers on the many-level
    wildcard plus 256 distinct patterns (every mix of literal and one-level
    wildcard over 8 non-ASCII words): more ids, groups and pattern bytes than
    the fast path's stack buffers hold."""
    assert d.multi is not None and d.single is not None
    words = [f"w{i}é日𝄞" for i in range(8)]
    topic = d.join(words)
    trie = Trie(d)
    crowd = [Obj(k) for k in range(n)]
    for s in crowd:
        trie.subscribe(d.multi, s)
    for mask in range(256):
        pattern = d.join([w if mask >> i & 1 else d.single for i, w in enumerate(words)])
        trie.subscribe(pattern, crowd[mask])  # already a subscriber: lookup keeps one
        trie.subscribe(pattern, Obj(("p", mask)))
    return trie, topic, crowd


@pytest.mark.parametrize("name", NAMES)
def test_huge_result_sets_equal_the_engine(name: str) -> None:
    """A topic matching 10,500 + 256 subscribers over 257 patterns: lookup,
    match, lookup_many and has_subscribers equal the references (the fast path
    leaves its 256-id stack buffer for the heap); each subscriber once."""
    d = DIALECTS[name]
    trie, topic, crowd = _huge_trie(d, 10_500)
    got = trie.lookup(topic)
    assert len(got) == 10_500 + 256 > LOCAL_IDS
    check_reads(trie, topic, None, name)
    pairs = trie.match(topic)
    assert len(pairs) == 10_500 + 2 * 256
    other = d.join(["nothing", "here"])
    rows = trie.lookup_many([topic, other, topic])
    assert [ids(r) for r in rows] == [ids(ref_lookup(trie, t)) for t in (topic, other, topic)]
    snap = trie.snapshot()
    for s in crowd[:100]:
        trie.unsubscribe(d.multi, s)
    assert ids(snap.lookup(topic)) == ids(got)
    check_reads(snap, topic, None, f"snapshot {name}")
    check_reads(trie, topic, None, f"after unsubscribes {name}")


# --------------------------------------------------------- what goes slow
NON_STR: list[Any] = [None, 5, 3.5, b"a", bytearray(b"a"), ["a"], ("a",), object()]


def _reader_trie(name: str) -> Trie:
    d = DIALECTS[name]
    trie = Trie(d)
    rng = random.Random(f"reader-{name}")
    for k in range(40):
        trie.subscribe(oracle.random_pattern(rng, d, WORDS, 4), Obj(k))
    assert d.multi is not None
    trie.subscribe(d.multi, "everyone")
    return trie


_READER_TRIES: dict[str, Trie] = {}


def reader_trie(name: str) -> Trie:
    """One read-only trie per dialect, shared by the tests that only read."""
    if name not in _READER_TRIES:
        _READER_TRIES[name] = _reader_trie(name)
    return _READER_TRIES[name]


def _check_topic_text(trie: Trie | Snapshot, text: Any, ctx: str) -> None:
    """Whatever ``text`` is (any str, a str subclass, a non-str), every read
    method answers what the references answer or raises exactly what
    ``Dialect.split_topic`` raises."""
    d = trie.dialect
    want = raised(lambda: d.split_topic(text))
    calls: dict[str, Callable[[], object]] = {
        "lookup": lambda: trie.lookup(text),
        "match": lambda: trie.match(text),
        "has_subscribers": lambda: trie.has_subscribers(text),
        "lookup_many": lambda: trie.lookup_many([text]),
        "lookup_many tuple": lambda: trie.lookup_many((text, text)),
    }
    if want is not None:
        for what, call in calls.items():
            same_error(raised(call), want, f"{ctx} {what}({text!r})")
        return
    plain = str.__str__(text)
    check_reads(trie, plain, None, ctx)
    assert ids(trie.lookup(text)) == ids(ref_lookup(trie, plain)), ctx
    assert pair_ids(trie.match(text)) == pair_ids(ref_match(trie, plain)), ctx
    assert trie.has_subscribers(text) is ref_has(trie, plain), ctx
    assert [ids(r) for r in trie.lookup_many([text, plain])] == [ids(ref_lookup(trie, plain))] * 2


def _pieces(d: Dialect) -> list[str]:
    """Bits of text that make valid and invalid topics and patterns."""
    assert d.single is not None and d.multi is not None
    return [
        *WORDS,
        d.separator,
        d.separator,
        d.single,
        d.multi,
        "",
        "\x00",
        " ",
        "\t",
        "$",
        "\ud800",
        "\udfff",
        "+",
        "#",
        ">",
        "/",
        ".",
        "**",
    ]


@pytest.mark.parametrize("name", NAMES)
@HYPOTHESIS
@given(data=st.data())
def test_any_text_topic_answers_or_raises_like_the_python_layer(
    name: str, data: st.DataObject
) -> None:
    """Arbitrary text (separators, wildcards, NUL, whitespace, lone
    surrogates, non-ASCII) as a str and as a str subclass: the same answer as
    the engine through cffi, or the exception and message of
    ``Dialect.split_topic``."""
    d = DIALECTS[name]
    text = "".join(data.draw(st.lists(st.sampled_from(_pieces(d)), max_size=8), label="pieces"))
    trie = reader_trie(name)
    _check_topic_text(trie, text, name)
    _check_topic_text(trie, StrSub(text), f"{name} StrSub")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("topic", ["a\ud800", "\ud800", "\udfff.a", "é\ud83d"], ids=ascii)
def test_lone_surrogates_raise_the_dialects_value_error(name: str, topic: str) -> None:
    """Text that does not encode (a lone surrogate) raises
    ``Dialect.split_topic``'s / ``split_pattern``'s ValueError, in every read
    and write call."""
    trie = reader_trie(name)
    _check_topic_text(trie, topic, name)
    _check_topic_text(trie.snapshot(), topic, f"snapshot {name}")
    d = DIALECTS[name]
    writable = Trie(d)
    want = raised(lambda: d.split_pattern(topic))
    same_error(raised(lambda: writable.subscribe(topic, "x")), want, "subscribe")
    same_error(raised(lambda: writable.unsubscribe(topic, "x")), want, "unsubscribe")
    assert len(writable) == 0 and len(writable._reg) == 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", NON_STR, ids=lambda v: type(v).__name__)
def test_non_str_topics_and_patterns_raise_the_python_layers_type_error(
    name: str, value: Any
) -> None:
    """A non-str topic raises the TypeError ``Dialect.split_topic`` raises
    (same message), in every read call, lookup_many included (before any
    row is matched); a non-str pattern raises ``split_pattern``'s."""
    trie = reader_trie(name)
    d = trie.dialect
    _check_topic_text(trie, value, name)
    want = raised(lambda: d.split_topic(value))
    assert isinstance(want, TypeError)
    assert d.multi is not None
    same_error(raised(lambda: trie.lookup_many([d.multi, value])), want, "lookup_many")
    writable = Trie(d)
    want = raised(lambda: d.split_pattern(value))
    same_error(raised(lambda: writable.subscribe(value, "x")), want, "subscribe")
    same_error(raised(lambda: writable.unsubscribe(value, "x")), want, "unsubscribe")
    assert len(writable) == 0 and len(writable._reg) == 0


@pytest.mark.parametrize("name", NAMES)
def test_str_subclass_patterns_subscribe_like_str(name: str) -> None:
    """A str subclass pattern makes the same pair as the plain str: each one
    sees the other's pair."""
    d = DIALECTS[name]
    trie = Trie(d)
    rng = random.Random(f"{SEED}-sub-{name}")
    for k in range(30):
        p = oracle.random_pattern(rng, d, WORDS, 4)
        s = Obj(k)
        assert trie.subscribe(StrSub(p), s) is True
        assert trie.subscribe(p, s) is False
        assert trie.unsubscribe(p, s) is True
        assert trie.unsubscribe(StrSub(p), s) is False
        assert trie.subscribe(p, s) is True
    for _ in range(30):
        topic = oracle.random_topic(rng, d, WORDS, 5)
        _check_topic_text(trie, StrSub(topic), f"{name} ({REPLAY})")
    assert all(type(p) is str for p, _ in trie)


def test_lookup_many_takes_any_iterable_of_topics() -> None:
    """lookup_many of a tuple, a generator, a list subclass, dict keys, and a
    list holding one str object many times: the rows of lookup() each."""
    trie = reader_trie("amqp")
    topics = ["a.b", "é.日本", "𝄞", "", "x:y.c", "a.日本.𝄞"]
    want = [ids(ref_lookup(trie, t)) for t in topics]

    class Topics(list):  # type: ignore[type-arg]
        pass

    forms: list[Iterable[str]] = [
        tuple(topics),
        (t for t in topics),
        Topics(topics),
        dict.fromkeys(topics).keys(),
        iter(topics),
    ]
    for form in forms:
        assert [ids(r) for r in trie.lookup_many(form)] == want, type(form)
    same = "a.b"
    assert [ids(r) for r in trie.lookup_many([same] * 300)] == [ids(ref_lookup(trie, same))] * 300
    assert trie.lookup_many([]) == [] and trie.lookup_many(()) == []
    with pytest.raises(TypeError):
        trie.lookup_many(5)  # type: ignore[arg-type]


def test_keyword_calls_of_subscribe_and_unsubscribe() -> None:
    """Keyword calls behave like positional ones."""
    trie = Trie()
    s = Obj("kw")
    assert trie.subscribe(pattern="a.*", subscriber=s) is True
    assert trie.subscribe("a.*", subscriber=s) is False
    assert trie.subscribe(subscriber=s, pattern="b") is True
    assert ids(trie.lookup("a.x")) == ids([s])
    assert trie.unsubscribe(pattern="a.*", subscriber=s) is True
    assert trie.unsubscribe("b", subscriber=s) is True
    assert trie.unsubscribe(pattern="b", subscriber=s) is False
    assert len(trie) == 0 and len(trie._reg) == 0


_ARITY: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    (("a",), {}),
    (("a", 1, 2), {}),
    (("a",), {"pattern": "b"}),
    (("a", 1), {"subscriber": 2}),
    (("a", 1), {"extra": 2}),
    ((), {"pattern": "a"}),
    ((), {"subscriber": 1}),
]


@pytest.mark.parametrize("method", ["subscribe", "unsubscribe"])
@pytest.mark.parametrize(("args", "kwargs"), _ARITY, ids=repr)
def test_wrong_arguments_to_updates_raise_type_error_and_change_nothing(
    method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Wrong argument counts and keywords raise TypeError, as the Python
    signature ``(pattern, subscriber)`` would, and change nothing."""
    trie = Trie()
    trie.subscribe("a", 1)
    before = (contents(trie), len(trie._reg))

    def reference(pattern: str, subscriber: Hashable) -> None:
        pass

    want = raised(lambda: reference(*args, **kwargs))
    assert isinstance(want, TypeError)
    got = raised(lambda: getattr(trie, method)(*args, **kwargs))
    assert isinstance(got, TypeError), got
    assert (contents(trie), len(trie._reg)) == before


@pytest.mark.parametrize("method", ["subscribe", "unsubscribe"])
def test_wrong_arguments_to_updates_name_the_method_called(method: str) -> None:
    """The TypeError of a wrong call names the method the caller called."""
    trie = Trie()
    for args, kwargs in _ARITY:
        got = raised(lambda a=args, k=kwargs: getattr(trie, method)(*a, **k))  # type: ignore[misc]
        assert got is not None
        assert re.search(rf"\b{method}\(\)", str(got)), str(got)
        assert "_slow" not in str(got), str(got)


@pytest.mark.parametrize("method", ["lookup", "match", "has_subscribers", "lookup_many"])
def test_wrong_argument_counts_to_reads_raise_type_error(method: str) -> None:
    """A read called with no argument or two raises TypeError naming it."""
    trie = reader_trie("amqp")
    fn = getattr(trie, method)
    for args in [(), ("a", "b")]:
        got = raised(lambda a=args: fn(*a))  # type: ignore[misc]
        assert isinstance(got, TypeError), got
        assert f"{method}()" in str(got)


@pytest.mark.parametrize(
    ("method", "keyword", "arg"),
    [
        ("lookup", "topic", "a.b"),
        ("match", "topic", "a.b"),
        ("has_subscribers", "topic", "a.b"),
        ("lookup_many", "topics", ["a.b"]),
    ],
)
def test_reads_take_their_argument_by_keyword(method: str, keyword: str, arg: Any) -> None:
    """The documented parameter names work as keywords, as in the Python API."""
    from cstrie_lab.pytrie import PyTrie

    baseline = getattr(PyTrie(), method, None)  # PyTrie has no lookup_many
    if baseline is not None:
        baseline(**{keyword: arg})
    trie = reader_trie("amqp")
    assert getattr(trie, method)(**{keyword: arg}) == getattr(trie, method)(arg)


@pytest.mark.parametrize("later", [StrSub("b/+"), "b\ud800"], ids=ascii)
def test_lookup_many_raises_for_the_first_invalid_topic(later: str) -> None:
    """``lookup_many`` raises the ValueError ``lookup()`` raises for the first
    invalid topic, whatever follows it."""
    trie = Trie("mqtt")
    want = raised(lambda: trie.lookup("a/+"))
    same_error(raised(lambda: trie.lookup_many(["a/+", later])), want, "lookup_many")


# ===========================================================================
# 2. Errors leave everything as it was
# ===========================================================================
INVALID_PATTERNS: dict[str, list[str]] = {
    "amqp": ["a\ud800", ".".join(["w"] * 257), "\udfff"],
    "mqtt": ["", "a/#/b", "a+/b", "a/b#", "#/a", "a\x00", "x" * 65_536, "é/+x", "a\ud800"],
    "nats": ["", "a..b", ".a", "a.", "a.>.b", "a b", "a\tb", "é\n", "a\ud800"],
    "colons": ["", "**::a", "a**", "a+::b", "a::+b", "\x00", "::".join(["w"] * 13), "é\ud800"],
}


@pytest.mark.parametrize("name", NAMES)
def test_invalid_patterns_raise_the_dialects_error_and_change_nothing(name: str) -> None:
    """subscribe/unsubscribe of an invalid pattern raise ``split_pattern``'s
    exception and message, for a new subscriber, a known one and (unsubscribe)
    an unknown one, as str and as str subclass, and change neither the pairs
    nor the registry."""
    d = DIALECTS[name]
    trie = _reader_trie(name)
    known = next(s for _, s in trie)

    def state() -> tuple[Any, ...]:
        return (contents(trie), len(trie), len(trie._reg), set(map(id, trie._reg.live_objects())))

    before = state()
    for bad in INVALID_PATTERNS[name]:
        want = raised(lambda b=bad: d.split_pattern(b))  # type: ignore[misc]
        assert isinstance(want, ValueError), bad
        want_sub = raised(lambda b=bad: d.split_pattern(StrSub(b)))  # type: ignore[misc]
        for sub in (Obj("new"), known, "never-seen"):
            for text, expected in ((bad, want), (StrSub(bad), want_sub)):
                for call in (trie.subscribe, trie.unsubscribe):
                    got = raised(lambda c=call, t=text, s=sub: c(t, s))  # type: ignore[misc]
                    same_error(got, expected, f"{call.__name__}({text!r}, {sub!r})")
        assert state() == before, bad
    trie.check_invariants(strict=True)


@pytest.mark.parametrize("case", ["failed subscribe", "born after the snapshot"])
def test_ids_born_after_every_open_snapshot_die_with_their_last_pair(case: str) -> None:
    """Rule 3 frees an id once no handle holds a pair for it and no snapshot
    taken while it was alive is open: a subscriber that arrives after the open
    snapshots and leaves again (or whose subscribe fails) is freed at once."""
    trie = Trie("mqtt")
    trie.subscribe("keep", "k")
    snap = trie.snapshot()
    newcomer = Obj("newcomer")
    gone = weakref.ref(newcomer)
    if case == "failed subscribe":
        with pytest.raises(ValueError):
            trie.subscribe("a/#/b", newcomer)
    else:
        for k in range(1000):
            trie.subscribe("a", Obj(k))
            trie.unsubscribe("a", next(s for p, s in trie if p == "a"))
        trie.subscribe("a", newcomer)
        trie.unsubscribe("a", newcomer)
    del newcomer
    gc.collect()
    assert len(trie._reg) == 1 and trie._reg.live_objects() == ["k"]
    assert gone() is None
    assert contents(snap) == [("keep", "k")]


@pytest.mark.parametrize("bad", [[1], {"k": 1}, {1, 2}, bytearray(b"x"), ([1],)], ids=repr)
@pytest.mark.parametrize("pattern", ["a.b", "new.pattern", "é.日本", "a\ud800"], ids=ascii)
def test_unhashable_subscribers_raise_type_error_and_register_nothing(
    bad: Any, pattern: str
) -> None:
    """An unhashable subscriber raises TypeError (hash()'s message for a valid
    pattern) from subscribe and unsubscribe, and registers nothing."""
    trie = Trie()
    trie.subscribe("a.b", "x")
    before = (contents(trie), len(trie._reg), trie._reg.live_objects())
    want = raised(lambda: hash(bad))
    for call in (trie.subscribe, trie.unsubscribe):
        got = raised(lambda c=call: c(pattern, bad))  # type: ignore[misc]
        if pattern.isascii() or pattern == "é.日本":
            same_error(got, want, f"{call.__name__}({pattern!r}, {bad!r})")
        else:
            assert isinstance(got, (TypeError, ValueError)), got
    assert (contents(trie), len(trie._reg), trie._reg.live_objects()) == before
    assert all(o is not bad for o in trie._reg.objects)


def test_failed_subscribes_give_their_new_ids_back() -> None:
    """A new subscriber whose subscribe fails leaves no id behind: its slot is
    free again (rule 1) and a later subscriber takes it."""
    trie = Trie("mqtt")
    trie.subscribe("keep", "k")
    slots = len(trie._reg.objects)
    for k in range(100):
        with pytest.raises(ValueError):
            trie.subscribe("a/#/b", Obj(k))
    assert len(trie._reg) == 1 and len(trie._reg.objects) <= slots + 1
    assert trie._reg.live_objects() == ["k"]


# ===========================================================================
# 3. Registry rule 4: ids freed and reused during reads
# ===========================================================================
RACE_PATTERNS = ["a.b", "a.*", "#", "a.#", "*.b", "x.y", "é.日本", "*.日本"]
RACE_TOPICS = ["a.b", "é.日本", "x.y", "a.c"]
_MATCHES = {(p, t): oracle.matches(AMQP, p, t) for p in RACE_PATTERNS for t in RACE_TOPICS}


class RaceModel:
    """The trie and "the other thread": ops the race hook runs between an
    engine answer and the mapping of its ids, and a log of every state."""

    def __init__(self) -> None:
        self.trie = Trie()
        self.pairs: set[tuple[str, Obj]] = set()
        self.log: list[frozenset[tuple[str, Obj]]] = [frozenset()]
        self.serial = 0
        self.hook_calls: list[int] = []
        self.batches: list[list[tuple[str, int]]] = []

    def new_sub(self) -> Obj:
        self.serial += 1
        return Obj(self.serial)

    def subs(self) -> list[Obj]:
        return sorted({s for _, s in self.pairs}, key=lambda s: s.n)  # type: ignore[arg-type, return-value]

    def apply(self, op: str, k: int) -> None:
        trie, live = self.trie, self.subs()
        if op == "arrive" or not live:
            # a new subscriber: takes the most recently freed slot
            pair = (RACE_PATTERNS[k % len(RACE_PATTERNS)], self.new_sub())
            assert trie.subscribe(*pair) is True
            self.pairs.add(pair)
        elif op == "leave":
            # every pair of one subscriber goes: its id is freed
            sub = live[k % len(live)]
            for pair in [x for x in self.pairs if x[1] is sub]:
                assert trie.unsubscribe(*pair) is True
                self.pairs.discard(pair)
        elif op == "add":
            pair = (RACE_PATTERNS[k % len(RACE_PATTERNS)], live[k % len(live)])
            assert trie.subscribe(*pair) is (pair not in self.pairs)
            self.pairs.add(pair)
        else:  # "drop": one pair
            pair = sorted(self.pairs, key=lambda x: (x[0], x[1].n))[k % len(self.pairs)]  # type: ignore[return-value]
            assert trie.unsubscribe(*pair) is True
            self.pairs.discard(pair)
        self.log.append(frozenset(self.pairs))

    def hook(self, attempt: int) -> None:
        self.hook_calls.append(attempt)
        if self.trie._reg._pinned() > 0:
            return  # the pinned attempt: nothing may free an id now
        if self.batches:
            for op, k in self.batches.pop(0):
                self.apply(op, k)
            # a read that takes no ids (no hook of its own) sees this state
            for t in RACE_TOPICS:
                assert self.trie.has_subscribers(t) is bool(self.lookup_of(self.log[-1], t))

    @staticmethod
    def lookup_of(state: frozenset[tuple[str, Obj]], topic: str) -> frozenset[int]:
        return frozenset(id(s) for p, s in state if _MATCHES[p, topic])

    @staticmethod
    def match_of(state: frozenset[tuple[str, Obj]], topic: str) -> Counter[tuple[str, int]]:
        return Counter((p, id(s)) for p, s in state if _MATCHES[p, topic])


_OP = st.tuples(st.sampled_from(["leave", "arrive", "add", "drop"]), st.integers(0, 63))


@HYPOTHESIS
@given(
    setup=st.lists(_OP, min_size=3, max_size=12),
    batches=st.lists(st.lists(_OP, min_size=1, max_size=3), max_size=8),
    reads=st.lists(
        st.tuples(st.sampled_from(["lookup", "match", "many", "snapshot"]), st.integers(0, 3)),
        min_size=1,
        max_size=4,
    ),
)
def test_reads_racing_frees_and_reuses_answer_a_state_of_their_call(
    setup: list[tuple[str, int]],
    batches: list[list[tuple[str, int]]],
    reads: list[tuple[str, int]],
) -> None:
    """Rule 4: whatever frees and reuses of ids "another thread" makes between
    the engine's answer and the mapping of its ids (the race hook runs them),
    every answer of lookup, match and lookup_many (each row) is the answer of
    a state the trie was in between the call's start and end, so it never
    names a subscriber that only took a freed slot; lookup_many's rows follow
    each other in time; a snapshot's answer is its own state (rule 3);
    has_subscribers, run from the hook, sees the state of the moment."""
    m = RaceModel()
    for op, k in setup:
        m.apply("arrive" if op == "leave" else op, k)
    m.batches = list(batches)
    for kind, ti in reads:
        topic = RACE_TOPICS[ti]
        if kind == "snapshot":
            snap = m.trie.snapshot()
            state = m.log[-1]
            snap._set_race_hook(m.hook)
            got = snap.lookup(topic)
            pairs = snap.match(topic)
            snap._set_race_hook(None)
            assert frozenset(map(id, got)) == m.lookup_of(state, topic)
            assert pair_ids(pairs) == m.match_of(state, topic)
            del snap  # its pin goes: later reads can meet frees again
            continue
        start = len(m.log) - 1
        m.trie._set_race_hook(m.hook)
        try:
            if kind == "lookup":
                answers: list[Any] = [m.trie.lookup(topic)]
            elif kind == "match":
                answers = [m.trie.match(topic)]
            else:
                answers = m.trie.lookup_many(RACE_TOPICS)
        finally:
            m.trie._set_race_hook(None)
        window = m.log[start:]
        if kind == "match":
            (got_pairs,) = answers
            assert any(pair_ids(got_pairs) == m.match_of(s, topic) for s in window), got_pairs
            continue
        row_topics = [topic] if kind == "lookup" else RACE_TOPICS
        earliest = 0  # rows are answered one after the other
        for row, t in zip(answers, row_topics, strict=True):
            assert len(set(map(id, row))) == len(row), row
            fits = [i for i, s in enumerate(window) if frozenset(map(id, row)) == m.lookup_of(s, t)]
            later = [i for i in fits if i >= earliest]
            assert later, f"{t!r}: {row!r} is no state of the call"
            earliest = later[0]
    assert m.hook_calls and m.hook_calls[0] == 0  # every read called the hook


def _retry_race(m: RaceModel) -> None:
    """Free the id of the subscriber on "a.b" and give its slot to a newcomer
    on "x.y", then undo both (so the race can repeat, ending as it began)."""
    trie = m.trie
    (old,) = [s for p, s in m.pairs if p == "a.b"]
    assert trie.unsubscribe("a.b", old)
    newcomer = Obj("newcomer")
    assert trie.subscribe("x.y", newcomer)
    assert trie._reg.existing_id(newcomer) is not None
    assert trie.unsubscribe("x.y", newcomer)
    assert trie.subscribe("a.b", old)


@pytest.mark.parametrize("method", ["lookup", "match", "lookup_many"])
def test_reads_that_lose_every_race_run_once_under_a_read_pin(method: str) -> None:
    """Rule 4's last resort: after MAX_ATTEMPTS lost races the read takes a
    read pin, after which no id can be freed until it ends, and answers
    (lookup, match and each lookup_many row)."""
    m = RaceModel()
    old = Obj("old")
    m.trie.subscribe("a.b", old)
    m.pairs.add(("a.b", old))
    seen: list[bool] = []

    def hook(attempt: int) -> None:
        locked = m.trie._reg._pinned() > 0
        seen.append(locked)
        if not locked:
            _retry_race(m)

    m.trie._set_race_hook(hook)
    call = {
        "lookup": lambda: m.trie.lookup("a.b"),
        "match": lambda: [s for _, s in m.trie.match("a.b")],
        "lookup_many": lambda: m.trie.lookup_many(["a.b"])[0],
    }[method]
    got = call()
    m.trie._set_race_hook(None)
    assert got == [old] and got[0] is old
    assert seen == [False] * MAX_ATTEMPTS + [True]


def test_a_pinned_read_whose_answer_grew_does_not_hang() -> None:
    """After MAX_ATTEMPTS lost races, the pinned read may find more ids than
    its buffer holds (300 subscribers arrived during the last race): it must
    grow the buffer and answer, not hang.  Run in a child process, each call in
    its own thread, with a deadline."""
    script = """
        import os, sys, threading, time
        from cstrie.trie import Trie
        from cstrie.registry import MAX_ATTEMPTS

        def run(method, out):
            trie = Trie()
            trie.subscribe("a.b", "x")
            reg = trie._reg

            def hook(attempt):
                if reg._pinned() > 0:
                    return
                trie.unsubscribe("a.b", "x"); trie.subscribe("other", "y")
                trie.unsubscribe("other", "y"); trie.subscribe("a.b", "x")
                if attempt == MAX_ATTEMPTS - 1:
                    for k in range(300):
                        trie.subscribe("a.b", k)

            trie._set_race_hook(hook)
            if method == "lookup_many":
                got = trie.lookup_many(["a.b"])[0]
            else:
                got = getattr(trie, method)("a.b")
            out[method] = len(got)

        out = {}
        threads = [threading.Thread(target=run, args=(m, out), daemon=True)
                   for m in ("lookup", "match", "lookup_many")]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 3.0  # a few milliseconds when nothing hangs
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
        print(sorted(out.items()), flush=True)
        os._exit(0 if out == {"lookup": 301, "match": 301, "lookup_many": 301} else 1)
    """
    proc = _run_child(script, timeout=60)
    assert proc.returncode == 0, f"hung or wrong: {proc.stdout!r} {proc.stderr[-2000:]!r}"


# ===========================================================================
# 4. A dropped trie
# ===========================================================================
def _populated(n: int = 300) -> tuple[Trie, list[Obj], list[str]]:
    trie = Trie()
    subs = [Obj(k) for k in range(n)]
    for k, s in enumerate(subs):
        trie.subscribe("#" if k % 2 else "é.*", s)
        trie.subscribe(f"t{k % 7}.日本", s)
    return trie, subs, ["é.x", "t3.日本", "a", "é.x.y"]


def _answers(r: Trie | Snapshot, topics: list[str]) -> list[Any]:
    return [
        [ids(r.lookup(t)) for t in topics],
        [pair_ids(r.match(t)) for t in topics],
        [r.has_subscribers(t) for t in topics],
        [ids(row) for row in r.lookup_many(topics)],
    ]


def test_snapshot_reads_after_its_trie_was_collected() -> None:
    """Rule 3: a snapshot keeps answering (every read method, heap-sized
    results) after its trie was deleted and collected, and keeps its
    subscribers mapped; once it goes too, the registry is empty and the
    subscribers are released."""
    trie, subs, topics = _populated()
    snap = trie.snapshot()
    want = _answers(snap, topics)
    assert want == _answers(trie, topics)
    reg = trie._reg
    gone = weakref.ref(trie)
    del trie
    gc.collect()
    assert gone() is None
    for _ in range(3):
        assert _answers(snap, topics) == want
    check_reads(snap, "é.x", None, "snapshot of a collected trie")
    assert len(reg) == len(subs)
    refs = [weakref.ref(s) for s in subs]
    del snap
    gc.collect()
    assert len(reg) == 0 and reg.live_objects() == []
    del subs
    gc.collect()
    assert all(r() is None for r in refs)


def test_trie_dropped_while_a_thread_loops_on_its_snapshots_lookup() -> None:
    """A thread loops on a snapshot's reads while the main thread changes the
    trie, then drops it and collects it: every answer stays the snapshot's."""
    trie, _subs, topics = _populated()
    snap = trie.snapshot()
    want = _answers(snap, topics)
    started = threading.Event()
    stop = threading.Event()
    rounds = [0]

    def reader() -> None:
        started.set()
        while not stop.is_set() or rounds[0] < 20:
            assert _answers(snap, topics) == want
            rounds[0] += 1

    def dropper() -> None:
        nonlocal trie
        started.wait(JOIN_TIMEOUT)
        for k in range(2000):
            trie.subscribe(f"t{k % 7}.日本", Obj(("late", k)))
            trie.unsubscribe("#", _subs[2 * (k % 150) + 1])
        del trie
        gc.collect()
        time.sleep(0.05)
        stop.set()

    run_threads([reader, dropper])
    assert rounds[0] >= 20


def test_a_copy_outlives_the_trie_it_was_copied_from() -> None:
    """Trie.copy: the family's registry keeps the copy's subscribers when the
    original is dropped, frees those only the original held, and the copy's
    reads stay exact."""
    trie, subs, topics = _populated(50)
    dup = trie.copy()
    only_original = Obj("only-original")
    trie.subscribe("é.*", only_original)
    want = _answers(dup, topics)
    reg = trie._reg
    del trie
    gc.collect()
    assert _answers(dup, topics) == want
    assert len(reg) == len(subs)
    assert all(o is not only_original for o in reg.live_objects())
    late = Obj("late")
    dup.subscribe("late", late)  # may take only_original's slot
    assert _answers(dup, topics) == want
    assert ids(dup.lookup("late")) == ids(ref_lookup(dup, "late"))
    assert any(s is late for s in dup.lookup("late"))


def test_a_snapshots_copy_made_after_the_trie_was_dropped() -> None:
    """Snapshot.copy after the trie is gone: the copy keeps the snapshot's
    subscribers mapped when the snapshot goes too, and new subscribers of the
    copy (which may take freed slots) never show up under old patterns."""
    trie, subs, topics = _populated(50)
    snap = trie.snapshot()
    want = _answers(snap, topics)
    reg = trie._reg
    del trie
    gc.collect()
    dup = snap.copy()
    del snap
    gc.collect()
    assert _answers(dup, topics) == want
    assert len(reg) == len(subs)
    for k in range(100):
        dup.subscribe(f"new.{k}", Obj(("new", k)))
    assert _answers(dup, topics) == want
    for s in subs:
        dup.unsubscribe("#", s)
        dup.unsubscribe("é.*", s)
    check_reads(dup, "é.x", None, "copy of a snapshot")


def test_dropping_every_handle_frees_every_subscriber() -> None:
    """The last handle of a family gone (trie, copy, snapshot): the registry is
    empty and every subscriber is released."""
    trie, subs, _ = _populated(50)
    dup = trie.copy()
    snap = dup.snapshot()
    reg = trie._reg
    refs = [weakref.ref(s) for s in subs]
    del trie, dup, subs
    gc.collect()
    assert len(reg) == 50
    del snap
    gc.collect()
    assert len(reg) == 0 and reg.live_objects() == []
    assert all(r() is None for r in refs)


def test_tries_and_snapshots_are_cleaned_up_by_their_own_deallocation() -> None:
    """A handle's ids, pins and engine memory are released by its C base's
    deallocation, after any finalizer or __del__ that can still read it, never
    by a weakref.finalize callback, which runs while the object is reachable at
    interpreter exit (atexit) and, in a garbage cycle, before its __del__s."""
    trie = Trie()
    trie.subscribe("a", Obj("a"))
    snap = trie.snapshot()
    copy = snap.copy()
    for obj in (trie, snap, copy):
        assert not [
            f
            for f in list(weakref.finalize._registry)  # type: ignore[attr-defined]
            if (f.peek() or (None,))[0] is obj
        ]


def test_a_daemon_thread_reading_at_interpreter_exit_never_sees_a_freed_slot() -> None:
    """Interpreter exit does not release a trie other threads still read: a
    daemon thread looping on lookups sees the same answer until the process
    ends."""
    script = """
        import threading
        from cstrie.trie import Trie
        from cstrie.registry import FREE

        trie = Trie()
        for k in range(50):
            trie.subscribe("a.#", f"s{k}")
        want = sorted(trie.lookup("a.b"))
        ready = threading.Event()

        def reader():
            ready.set()
            while True:
                got = trie.lookup("a.b")
                if any(x is FREE for x in got) or sorted(got) != want:
                    print("BAD", got[:3], flush=True)
                    return

        threading.Thread(target=reader, daemon=True).start()
        ready.wait()
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "BAD" not in proc.stdout, proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_lookup_many_of_a_list_another_thread_changes() -> None:
    """lookup_many of a shared list while another thread replaces its items
    with equal fresh strings and grows and shrinks it: every row is the lookup
    of the topic at that position (position i always holds a str equal to
    "t{i % 50}").  Checked in a child process (the bug can crash it)."""
    seconds = 5.0 if FREE_THREADED else 1.0
    script = f"""
        import sys, threading, time
        from cstrie.trie import Trie

        trie = Trie()
        trie.subscribe("#", "all")
        for k in range(50):
            trie.subscribe(f"t{{k}}", k)
        shared = ["".join(["t", str(k)]) for k in range(50)]
        stop = threading.Event()
        fail = []

        def reader():
            while not stop.is_set():
                try:
                    rows = trie.lookup_many(shared)
                except BaseException as exc:
                    fail.append(repr(exc)); stop.set(); return
                for i, row in enumerate(rows):
                    if sorted(row, key=repr) != sorted(["all", i % 50], key=repr):
                        fail.append((i, row)); stop.set(); return

        def writer():
            k = 0
            while not stop.is_set():
                i = k % 50
                shared[i] = "".join(["t", str(i)])
                if k % 10 == 0:
                    shared.extend(["".join(["t", str(j % 50)]) for j in range(200)])
                    del shared[50:]
                k += 1

        threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
        for th in threads:
            th.start()
        stop.wait({seconds})
        stop.set()
        for th in threads:
            th.join()
        print(fail[:1], flush=True)
        sys.exit(1 if fail else 0)
    """
    proc = _run_child(script, timeout=120, **({"PYTHON_GIL": "0"} if FREE_THREADED else {}))
    assert proc.returncode == 0, f"rc={proc.returncode} {proc.stdout!r} {proc.stderr[-1500:]!r}"


class Hostile(str):
    """A str subclass whose every method raises: a call that ran any of them
    (``encode``, ``__str__``, ``split``, ``__eq__``...) would fail."""

    __slots__ = ()

    def _boom(self, *args: object, **kwargs: object) -> Any:
        raise AssertionError("user code of a str subclass ran")

    encode = __str__ = split = startswith = __iter__ = __len__ = __getitem__ = _boom
    __contains__ = count = find = partition = _boom


@pytest.mark.parametrize("name", NAMES)
def test_str_subclass_text_is_read_without_running_its_methods(name: str) -> None:
    """The calls read a str subclass's characters, as the C API gives them:
    none of its (user-defined) methods runs, in any read or update."""
    d = DIALECTS[name]
    sep = d.separator
    trie = Trie(d)
    assert trie.subscribe(Hostile(f"a{sep}b"), "x") is True
    topic = Hostile(f"a{sep}b")
    assert trie.lookup(topic) == ["x"]
    assert trie.has_subscribers(topic) is True
    assert trie.match(topic) == [(f"a{sep}b", "x")]
    assert trie.lookup_many([topic, topic]) == [["x"], ["x"]]
    assert trie.route(topic) == ["x"]
    assert trie.route_by_group(topic) == (["x"], {})
    assert trie.snapshot().lookup(topic) == ["x"]
    assert trie.unsubscribe(Hostile(f"a{sep}b"), "x") is True
    assert len(trie) == 0


@pytest.mark.parametrize("method", ["route", "route_by_group"])
def test_routes_take_topic_and_key_by_keyword_and_refuse_wrong_calls(method: str) -> None:
    """``route``/``route_by_group(topic, key=None)``: both parameters by
    keyword give the same answer as positionally; a wrong call raises
    TypeError naming the method, as a Python signature would."""
    trie = Trie("nats")
    trie.subscribe("a.*", "plain")
    for k in range(5):
        trie.subscribe("a.*", f"w{k}", group="g")
    trie.set_group_policy("g", "sticky")
    fn = getattr(trie, method)
    want = fn("a.b", "k1")
    assert fn(topic="a.b", key="k1") == want
    assert fn("a.b", key="k1") == want
    assert fn("a.b") == fn("a.b", None) == fn(topic="a.b")

    def reference(topic: str, key: object = None) -> None:
        pass

    for args, kwargs in [((), {}), (("a.b", 1, 2), {}), (("a.b",), {"topic": "a.b"}),
                         (("a.b",), {"other": 1}), ((), {"key": 1})]:  # fmt: skip
        want_exc = raised(lambda a=args, k=kwargs: reference(*a, **k))  # type: ignore[misc]
        assert isinstance(want_exc, TypeError)
        got = raised(lambda a=args, k=kwargs: fn(*a, **k))  # type: ignore[misc]
        assert isinstance(got, TypeError), got
        assert f"{method}()" in str(got), str(got)


def test_a_non_str_topic_is_named_without_running_its_types_code() -> None:
    """The TypeError for a non-str names its type from the type object itself: a
    metaclass whose ``__name__`` is a property that runs code (or raises) is
    never asked, from any entry point."""
    asked: list[str] = []

    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            asked.append("__name__")
            raise RuntimeError("__name__ ran")

    class Odd(metaclass=Meta):
        pass

    t = Trie("mqtt")
    t.subscribe("a/+", 1)
    calls: list[Callable[[], object]] = [
        lambda: t.lookup(Odd()),
        lambda: t.has_subscribers(Odd()),
        lambda: t.match(Odd()),
        lambda: t.route(Odd()),
        lambda: t.lookup_many(["a/b", Odd()]),
        lambda: t.subscribe(Odd(), 2),
        lambda: t.unsubscribe(Odd(), 1),
        lambda: MQTT.split_topic(Odd()),
        lambda: MQTT.split_pattern(Odd()),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"must be a str, not Odd$"):
            call()
    assert asked == []
    assert t.lookup("a/b") == [1]
