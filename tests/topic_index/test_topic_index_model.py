"""Stateful model test of ``cstrie.topics.TopicIndex``: random sequences of
operations against a plain ``dict`` model, one hypothesis
``RuleBasedStateMachine`` per built-in dialect.

The model is ``topic -> value``; what a filter matches comes from the
independent oracle (``tests/support/oracle.py``).  Values are fresh objects (dicts,
lists, ``None``, tuples) and must come back as the very object put.  A
snapshot is modelled by a frozen copy of the model when it was taken and is
checked again after later writes; an iterator taken with ``query`` and
advanced once is likewise drained later and must answer for its moment.
Invalid topics (drawn with wildcards, empty words, NUL or whitespace where the
dialect forbids them) are rejected with ``ValueError`` and change nothing.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import oracle
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from topic_index_helpers import check_contents, check_query, collect, expected_query, same_values

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.topics import TopicIndex, TopicSnapshot

MAX_SNAPSHOTS = 3
MAX_OPEN_QUERIES = 2

SETTINGS = settings(
    deadline=None,
    max_examples=100,
    stateful_step_count=50,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)

_counter = itertools.count()


@st.composite
def values(draw: st.DrawFn) -> object:
    """A fresh value of one of several kinds (fresh so that identity tells which
    put a value came from; None and small ints are shared, which is fine)."""
    kind = draw(st.sampled_from(["dict", "list", "none", "tuple", "int", "str"]))
    n = next(_counter)
    if kind == "dict":
        return {"n": n}
    if kind == "list":
        return [n]
    if kind == "none":
        return None
    if kind == "tuple":
        return ("t", n)
    if kind == "int":
        return n
    return f"s{n}"


@functools.cache
def topics(d: Dialect) -> st.SearchStrategy[str]:
    """Valid topics of 0-4 words over a tiny alphabet (so that filters hit often),
    with empty words and '$' first words where the dialect has them."""
    words = ["a", "b", "$s", ""]
    if d.topic_wildcards:
        words += [w for w in (d.single, d.multi) if w is not None]
    return (
        st.lists(st.sampled_from(words), max_size=4)
        .map(d.separator.join)
        .filter(lambda t: oracle.valid_topic(d, t))
    )


@functools.cache
def filters(d: Dialect) -> st.SearchStrategy[str]:
    """Valid filters of 0-4 words over the same alphabet plus the wildcards."""
    words = ["a", "b", "$s", ""] + [w for w in (d.single, d.multi) if w is not None]
    return (
        st.lists(st.sampled_from(words), max_size=4)
        .map(d.separator.join)
        .filter(lambda f: oracle.valid_pattern(d, f))
    )


@functools.cache
def invalid_topics(d: Dialect) -> st.SearchStrategy[str]:
    """Strings the oracle says are not topics of ``d`` (AMQP rejects only lone
    surrogates and more than 256 words)."""
    words = ["a", "", "a b", "a\x00", "x\t", "\ud800"]
    words += [w for w in (d.single, d.multi) if w is not None]
    drawn = (
        st.lists(st.sampled_from(words), max_size=3)
        .map(d.separator.join)
        .filter(lambda t: not oracle.valid_topic(d, t))
    )
    if d.max_levels is None:
        return drawn
    return st.one_of(drawn, st.just(d.separator.join(["a"] * (d.max_levels + 1))))


class TopicIndexModel(RuleBasedStateMachine):
    """Base machine; subclasses set ``dialect``."""

    dialect: Dialect = AMQP

    def __init__(self) -> None:
        super().__init__()
        self.idx = TopicIndex(self.dialect)
        self.model: dict[str, Any] = {}
        self.snapshots: list[tuple[TopicSnapshot, dict[str, Any]]] = []
        # (iterator advanced once, the pairs it gave, the answer at the call)
        self.open_queries: list[tuple[Iterator[tuple[str, Any]], dict[str, Any], dict[str, Any]]]
        self.open_queries = []

    # ---------------------------------------------------------------- writes
    @rule(data=st.data(), value=values(), via_setitem=st.booleans())
    def put(self, data: st.DataObject, value: object, via_setitem: bool) -> None:
        t = data.draw(topics(self.dialect), label="topic")
        if via_setitem:
            self.idx[t] = value
        else:
            assert self.idx.put(t, value) is (t not in self.model), t
        self.model[t] = value
        assert self.idx[t] is value

    @precondition(lambda self: self.model)
    @rule(data=st.data(), value=values())
    def replace(self, data: st.DataObject, value: object) -> None:
        t = data.draw(st.sampled_from(sorted(self.model)), label="stored topic")
        assert self.idx.put(t, value) is False, t
        self.model[t] = value

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        t = self._some_topic(data)
        assert self.idx.remove(t) is (t in self.model), t
        self.model.pop(t, None)
        assert t not in self.idx

    @rule(data=st.data(), with_default=st.booleans())
    def pop(self, data: st.DataObject, with_default: bool) -> None:
        t = self._some_topic(data)
        if with_default:
            sentinel = object()
            assert self.idx.pop(t, sentinel) is self.model.pop(t, sentinel), t
        elif t in self.model:
            assert self.idx.pop(t) is self.model.pop(t), t
        else:
            with pytest.raises(KeyError):
                self.idx.pop(t)

    @rule(data=st.data())
    def delitem(self, data: st.DataObject) -> None:
        t = self._some_topic(data)
        if t in self.model:
            del self.idx[t]
            del self.model[t]
        else:
            with pytest.raises(KeyError):
                del self.idx[t]

    @rule(data=st.data())
    def put_invalid(self, data: st.DataObject) -> None:
        t = data.draw(invalid_topics(self.dialect), label="invalid topic")
        with pytest.raises(ValueError):
            self.idx.put(t, "never stored")
        with pytest.raises(ValueError):
            self.idx[t] = "never stored"
        check_contents(self.idx, self.model, f"after put({t!r}) failed")

    @rule()
    def clear(self) -> None:
        self.idx.clear()
        self.model.clear()

    def _some_topic(self, data: st.DataObject) -> str:
        """A stored topic half of the time, else any topic."""
        stored: bool = data.draw(st.booleans(), label="stored?")
        if self.model and stored:
            return data.draw(st.sampled_from(sorted(self.model)), label="stored topic")
        return data.draw(topics(self.dialect), label="topic")

    # ----------------------------------------------------------------- reads
    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        t = self._some_topic(data)
        sentinel = object()
        assert self.idx.get(t, sentinel) is self.model.get(t, sentinel), t
        assert self.idx.get(t) is self.model.get(t), t
        assert (t in self.idx) is (t in self.model), t
        if t in self.model:
            assert self.idx[t] is self.model[t], t
        else:
            with pytest.raises(KeyError):
                self.idx[t]

    @rule(data=st.data())
    def query(self, data: st.DataObject) -> None:
        f = data.draw(filters(self.dialect), label="filter")
        check_query(self.idx, self.dialect, self.model, f)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def query_matching(self, data: st.DataObject) -> None:
        """A filter made from a stored topic (some words turned into wildcards)."""
        d = self.dialect
        words = oracle.words_of(d, data.draw(st.sampled_from(sorted(self.model)), label="base"))
        choices = [w for w in (d.single, d.multi) if w is not None]
        for i in range(len(words)):
            wild: bool = data.draw(st.booleans(), label=f"wild {i}")
            if choices and wild:
                words[i] = data.draw(st.sampled_from(choices), label=f"which {i}")
        f = d.separator.join(words)
        if oracle.valid_pattern(d, f):
            check_query(self.idx, d, self.model, f)

    @rule(data=st.data())
    def count(self, data: st.DataObject) -> None:
        f = data.draw(filters(self.dialect), label="filter")
        assert self.idx.count(f) == len(expected_query(self.dialect, self.model, f)), f

    @rule()
    def contents(self) -> None:
        check_contents(self.idx, self.model)

    # ------------------------------------------------- snapshots, open queries
    @rule()
    def take_snapshot(self) -> None:
        if len(self.snapshots) >= MAX_SNAPSHOTS:
            self.snapshots.pop(0)
        self.snapshots.append((self.idx.snapshot(), dict(self.model)))

    @precondition(lambda self: self.snapshots)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1), data=st.data())
    def check_snapshot(self, i: int, data: st.DataObject) -> None:
        snap, frozen = self.snapshots[i % len(self.snapshots)]
        f = data.draw(filters(self.dialect), label="filter")
        check_query(snap, self.dialect, frozen, f, "(snapshot)")
        check_contents(snap, frozen, "(snapshot)")

    @precondition(lambda self: self.snapshots)
    @rule(i=st.integers(0, MAX_SNAPSHOTS - 1))
    def drop_snapshot(self, i: int) -> None:
        self.snapshots.pop(i % len(self.snapshots))

    @precondition(lambda self: len(self.open_queries) < MAX_OPEN_QUERIES)
    @rule(data=st.data())
    def open_query(self, data: st.DataObject) -> None:
        """Start a query and take its first result; it is drained by a later rule."""
        f = data.draw(filters(self.dialect), label="filter")
        want = expected_query(self.dialect, self.model, f)
        it = iter(self.idx.query(f))
        seen = collect(itertools.islice(it, 1), f"first of {f!r}")
        self.open_queries.append((it, seen, want))

    @precondition(lambda self: self.open_queries)
    @rule(i=st.integers(0, MAX_OPEN_QUERIES - 1))
    def drain_query(self, i: int) -> None:
        it, seen, want = self.open_queries.pop(i % len(self.open_queries))
        rest = list(it)
        got = collect([*seen.items(), *rest], "(query opened earlier)")
        same_values(got, want, "(query opened earlier)")

    # ------------------------------------------------------------ invariants
    @invariant()
    def length(self) -> None:
        assert len(self.idx) == len(self.model)
        for snap, frozen in self.snapshots:
            assert len(snap) == len(frozen)


class AMQPTopicIndex(TopicIndexModel):
    dialect = AMQP


class MQTTTopicIndex(TopicIndexModel):
    dialect = MQTT


class NATSTopicIndex(TopicIndexModel):
    dialect = NATS


def _case(machine: type[RuleBasedStateMachine]) -> Any:
    case = machine.TestCase
    case.settings = SETTINGS
    return case


TestAMQPTopicIndex = _case(AMQPTopicIndex)
TestMQTTTopicIndex = _case(MQTTTopicIndex)
TestNATSTopicIndex = _case(NATSTopicIndex)
