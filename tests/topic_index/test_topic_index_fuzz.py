"""Random workloads on ``cstrie.topics.TopicIndex`` checked against a dict model
and the independent slow matcher in ``oracle.py``.

Every test draws from ``random.Random`` seeded by ``CSTRIE_SEED`` (a fresh seed
each run unless that variable is set; under pytest-xdist all workers share
one).  The seed is printed, and every assertion message carries it: replay with

    CSTRIE_SEED=<seed> python -m pytest tests/topic_index/test_topic_index_fuzz.py

Besides the three built-in dialects, custom dialects exercise the general
``Dialect`` fields (multi-character wildcard tokens, a many-word wildcard that
needs one word and may appear anywhere, the ``$`` rule on another separator, a
level limit with forbidden characters).
"""

from __future__ import annotations

import random
from typing import Any

import oracle
import pytest
from topic_index_helpers import check_contents, check_query, collect, same_values

from cstrie.dialect import Dialect
from cstrie.topics import TopicIndex, TopicSnapshot

SEED = oracle.choose_seed()
DIALECTS = oracle.FUZZ_DIALECTS
WORDS = ["a", "b", "c", "ab", "$x"]


def _rng(*parts: str) -> random.Random:
    return oracle.seeded_rng(SEED, *parts)


def _value(rng: random.Random, step: int) -> object:
    """A fresh value: unhashable, None, or an int/str/tuple (checked by identity)."""
    kind = rng.randrange(5)
    if kind == 0:
        return {"step": step}
    if kind == 1:
        return [step]
    if kind == 2:
        return None
    if kind == 3:
        return ("v", step)
    return f"s{step}"


def _instantiate(rng: random.Random, d: Dialect, pattern: str) -> str:
    """A topic built to match ``pattern`` (if the result is valid): wildcards
    replaced by literal words."""
    out: list[str] = []
    for word in oracle.words_of(d, pattern):
        if word == d.single:
            out.append(rng.choice(["a", "b", "c"]))
        elif word == d.multi:
            out.extend(rng.choice(["a", "b"]) for _ in range(rng.randint(d.multi_min, 2)))
        else:
            out.append(word)
    return d.separator.join(out)


def _junk(rng: random.Random, d: Dialect) -> str:
    """A short random string over the characters that matter to validation."""
    alphabet = [d.separator, "a", "b", "$", "\x00", "\u00e9", " ", "\t"]
    alphabet += [t for t in (d.single, d.multi) if t is not None]
    alphabet += [d.separator] * 2 + ["a"] * 3
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))


@pytest.mark.parametrize("name", list(DIALECTS))
def test_random_operations(name: str) -> None:
    """Puts (new and replacing), removes, pops, dels, gets, queries and counts in a
    random order, checked step by step against a dict and the oracle; snapshots
    taken along the way keep answering for their moment; invalid topics and
    filters are rejected exactly when the oracle says and change nothing."""
    d = DIALECTS[name]
    rng = _rng(name, "operations")
    ctx = f"(dialect {name}, CSTRIE_SEED={SEED})"
    idx = TopicIndex(d)
    model: dict[str, Any] = {}
    snapshots: list[tuple[TopicSnapshot, dict[str, Any]]] = []
    for step in range(2500):
        here = f"step {step} {ctx}"
        op = rng.random()
        if op < 0.30:
            topic = oracle.random_topic(rng, d, WORDS[:4], 4)
            value = _value(rng, step)
            if rng.random() < 0.5:
                assert idx.put(topic, value) is (topic not in model), f"put {topic!r} {here}"
            else:
                idx[topic] = value
            model[topic] = value
        elif op < 0.36 and model:  # replace an existing topic
            topic = rng.choice(sorted(model))
            value = _value(rng, step)
            assert idx.put(topic, value) is False, f"replace {topic!r} {here}"
            model[topic] = value
        elif op < 0.50:
            if model and rng.random() < 0.7:
                topic = rng.choice(sorted(model))
            else:
                topic = oracle.random_topic(rng, d, WORDS[:4], 4)
            how = rng.randrange(4)
            if how == 0:
                assert idx.remove(topic) is (topic in model), f"remove {topic!r} {here}"
            elif how == 1:
                sentinel = object()
                got = idx.pop(topic, sentinel)
                assert got is model.get(topic, sentinel), f"pop {topic!r} {here}"
            elif how == 2:
                if topic in model:
                    assert idx.pop(topic) is model[topic], f"pop {topic!r} {here}"
                else:
                    with pytest.raises(KeyError):
                        idx.pop(topic)
            elif topic in model:
                del idx[topic]
            else:
                with pytest.raises(KeyError):
                    del idx[topic]
            model.pop(topic, None)
            assert topic not in idx, f"{topic!r} still there {here}"
        elif op < 0.58:
            topic = oracle.random_topic(rng, d, WORDS[:4], 4)
            sentinel = object()
            assert idx.get(topic, sentinel) is model.get(topic, sentinel), f"get {topic!r} {here}"
            assert (topic in idx) is (topic in model), f"in {topic!r} {here}"
        elif op < 0.78:
            f = oracle.random_pattern(rng, d, WORDS[:4], 4)
            check_query(idx, d, model, f, here)
        elif op < 0.84 and model:  # a filter made from a stored topic: it matches something
            pattern = rng.choice(sorted(model))
            words = oracle.words_of(d, pattern)
            for i in range(len(words)):
                roll = rng.random()
                if roll < 0.3 and d.single is not None:
                    words[i] = d.single
                elif roll < 0.4 and d.multi is not None and not d.multi_last_only:
                    words[i] = d.multi
            if d.multi is not None and rng.random() < 0.3:
                words.append(d.multi)
            f = d.separator.join(words)
            if oracle.valid_pattern(d, f):
                check_query(idx, d, model, f, here)
        elif op < 0.88:
            text = _junk(rng, d)
            before = len(model)
            try:
                idx.put(text, step)
            except ValueError:
                assert not oracle.valid_topic(d, text), f"valid topic {text!r} rejected {here}"
            else:
                assert oracle.valid_topic(d, text), f"invalid topic {text!r} accepted {here}"
                model[text] = step
            assert len(idx) == len(model) >= before, f"len after put({text!r}) {here}"
            try:
                it = idx.query(text)
            except ValueError:
                assert not oracle.valid_pattern(d, text), f"valid filter {text!r} rejected {here}"
            else:
                assert oracle.valid_pattern(d, text), f"invalid filter {text!r} accepted {here}"
                same_values(
                    collect(it, here),
                    {t: model[t] for t in model if oracle.matches(d, text, t)},
                    here,
                )
        elif op < 0.92:
            if len(snapshots) >= 3:
                snapshots.pop(rng.randrange(3))
            snapshots.append((idx.snapshot(), dict(model)))
        elif op < 0.97 and snapshots:
            snap, frozen = rng.choice(snapshots)
            check_query(snap, d, frozen, oracle.random_pattern(rng, d, WORDS[:4], 4), here)
            topic = oracle.random_topic(rng, d, WORDS[:4], 4)
            sentinel = object()
            assert snap.get(topic, sentinel) is frozen.get(topic, sentinel), f"snap.get {here}"
        elif op < 0.975:
            idx.clear()
            model.clear()
        else:
            check_contents(idx, model, here)
        assert len(idx) == len(model), f"len {here}"
    check_contents(idx, model, f"at the end {ctx}")
    for snap, frozen in snapshots:
        check_contents(snap, frozen, f"snapshot at the end {ctx}")
    for topic in sorted(model):
        assert idx.remove(topic) is True, f"final remove {topic!r} {ctx}"
    check_contents(idx, {}, f"emptied {ctx}")
    for _ in range(20):
        f = oracle.random_pattern(rng, d, WORDS, 4)
        assert list(idx.query(f)) == [] and idx.count(f) == 0, f"{f!r} on empty {ctx}"


@pytest.mark.parametrize("name", list(DIALECTS))
def test_random_wide_index(name: str) -> None:
    """A wider index (about 1000 topics of up to 6 words) and random filters,
    some built to match stored topics; query and count agree with the oracle."""
    d = DIALECTS[name]
    rng = _rng(name, "wide")
    ctx = f"(dialect {name}, CSTRIE_SEED={SEED})"
    idx = TopicIndex(d)
    model: dict[str, Any] = {}
    for step in range(1200):
        topic = oracle.random_topic(rng, d, WORDS, 6)
        value = _value(rng, step)
        assert idx.put(topic, value) is (topic not in model), f"put {topic!r} {ctx}"
        model[topic] = value
    check_contents(idx, model, ctx)
    for i in range(90):
        f = oracle.random_pattern(rng, d, WORDS, 6)
        if i % 2:
            made = _instantiate(rng, d, f)
            if oracle.valid_topic(d, made):
                idx.put(made, i)
                model[made] = i
        check_query(idx, d, model, f, f"filter #{i} {ctx}")


@pytest.mark.parametrize("name", ["amqp", "glob", "plus1", "dollar"])
def test_random_many_word_wildcards_long_topics(name: str) -> None:
    """Dialects whose many-word wildcard may appear anywhere: long filters full of
    wildcards over long topics of a two-word vocabulary (the backtracking cases,
    including runs of several many-word wildcards)."""
    d = DIALECTS[name]
    rng = _rng(name, "long")
    ctx = f"(dialect {name}, CSTRIE_SEED={SEED})"
    idx = TopicIndex(d)
    model: dict[str, Any] = {}
    for step in range(150):
        topic = oracle.random_topic(rng, d, ["a", "b"], 16)
        model[topic] = _value(rng, step)
        idx.put(topic, model[topic])
    for i in range(80):
        f = oracle.random_pattern(rng, d, ["a", "b"], 8)
        if i % 4 == 0 and d.multi is not None:  # a run of many-word wildcards
            f = d.separator.join([d.multi] * rng.randint(2, 3) + ([f] if f else []))
            assert oracle.valid_pattern(d, f), f
        check_query(idx, d, model, f, f"filter #{i} {ctx}")
