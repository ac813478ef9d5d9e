"""The exact shortcut: a binding whose index clauses are also sufficient
(equality, set, presence, prefix and suffix leaves under all/any, no clause
dropped) matches on its hits alone, without ``Criterion.test``, when the
message is a plain dict with ``str`` keys.  Rule: the shortcut never changes
an answer; each test compares it with the verifier (``_fast`` off) and with
the slow evaluator (tests/support/content_oracle.py).

Replay a random failure with ``CSTRIE_SEED=<seed>``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

import oracle
import pytest
from content_oracle import expected

from cstrie.content import (
    AllOf,
    AnyOf,
    ContentIndex,
    Criterion,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
    Suffix,
)

SEED = oracle.choose_seed()
FIELDS = ["a", "b", "c", ""]
TEXTS = ["", "x", "xy", "yx", "x.y", "é"]
VALUES: list[Any] = [*TEXTS, 0, 1, 1.0, -0.0, True, False, None, b"x", 2**70, float("nan"), [1]]


def exact_leaf(r: random.Random) -> Criterion:
    f, k = r.choice(FIELDS), r.randrange(5)
    ok = [v for v in VALUES if v == v and not isinstance(v, list)]
    if k == 0:
        return Has(f)
    if k == 1:
        return Eq(f, r.choice(ok))
    if k == 2:
        return OneOf(f, r.sample(ok, 3))
    return (Prefix if k == 3 else Suffix)(f, r.choice(TEXTS))


def criterion(r: random.Random, depth: int = 1) -> Criterion:
    """Mostly shapes the shortcut takes (all/any of exact leaves), some it
    must refuse (Not, Range, any of all)."""
    k = r.randrange(8) if depth < 3 else 7
    if k in (0, 1):
        return AllOf(*(criterion(r, depth + 1) for _ in range(r.randrange(4))))
    if k in (2, 3):
        return AnyOf(*(criterion(r, depth + 1) for _ in range(r.randrange(4))))
    if k == 4:
        return Not(exact_leaf(r))
    if k == 5:
        return Range(r.choice(FIELDS), 0, 1)
    return exact_leaf(r)


def records(idx: ContentIndex) -> list[Any]:
    return list(idx._records())


@pytest.fixture
def verifier(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A function answering with the shortcut off."""

    def slow(idx: ContentIndex, fields: Any, topic: str | None = None) -> list[Any]:
        with monkeypatch.context() as m:
            m.setattr(ContentIndex, "_fast", False)
            return idx.match(fields, topic)

    yield slow


def test_shortcut_agrees_with_the_verifier_and_the_slow_evaluator(verifier: Any) -> None:
    r = oracle.seeded_rng(SEED, "content-exact")
    used = 0
    for _ in range(80):
        idx = ContentIndex(max_value_length=r.choice([2, 256]))
        bindings = []
        for s in range(r.randrange(1, 30)):
            c, t = criterion(r), r.choice([None, None, "a.*", "#"])
            try:
                idx.bind(c, s, t)
            except ValueError:  # past max_value_length
                continue
            bindings.append((c, s, t))
        used += sum(rec.exact for rec in records(idx))
        for _ in range(30):
            fields = {f: r.choice(VALUES) for f in r.sample(FIELDS, r.randrange(len(FIELDS) + 1))}
            topic = r.choice([None, "a.b", "b"])
            fast, slow = idx.match(fields, topic), verifier(idx, fields, topic)
            ctx = f"{bindings} {fields!r} {topic!r} (CSTRIE_SEED={SEED})"
            assert sorted(fast) == sorted(slow), ctx
            assert set(fast) == expected(bindings, fields, topic), ctx
    assert used > 100  # the shortcut was taken (about 40% of the bindings), not just allowed


@pytest.mark.parametrize(
    ("criteria", "exact"),
    [
        (Has("a"), True),
        (Eq("a", 1), True),
        (OneOf("a", [1, "x"]), True),
        (Prefix("a", "x"), True),
        (Suffix("a", ""), True),
        (AllOf(Eq("a", 1), Has("b"), Prefix("c", "x")), True),
        (AnyOf(Eq("a", 1), Has("b")), True),
        (AllOf(AnyOf(Eq("a", 1), Has("b")), Eq("c", 2)), True),
        (AnyOf(AllOf(Eq("a", 1)), Has("b")), True),  # one clause each: still exact
        (AllOf(), True),  # holds for every message
        (AnyOf(AllOf(), Not(Has("a"))), True),  # the AllOf() part holds always
        (AnyOf(AllOf(Eq("a", 1), Has("b")), Has("c")), False),  # shortest clause only
        (Range("a", 0, 1), False),  # ranges are indexed coarsely
        (AllOf(Eq("a", 1), Range("b", 0, 1)), False),
        (Not(Has("a")), False),
        (AllOf(Eq("a", 1), Not(Has("b"))), False),
        (AnyOf(Not(Has("a")), Has("b")), False),
        (AllOf(Eq("a", 1), AnyOf()), False),  # never holds: only a topic clause
    ],
)
def test_which_bindings_are_exact(criteria: Criterion, exact: bool) -> None:
    idx = ContentIndex()
    idx.bind(criteria, "s", "a.#")
    (rec,) = records(idx)
    assert rec.exact is exact


def test_a_binding_that_never_holds_with_a_topic_is_not_matched_by_its_topic() -> None:
    idx = ContentIndex()
    idx.bind(AllOf(Eq("a", 1), AnyOf()), "s", "a.#")
    assert idx.match({"a": 1}, "a.b") == []


def test_dropped_clauses_make_a_binding_inexact() -> None:
    """255 clauses fit a code; of 256 presence tests one is not indexed, so
    a message without that field is a candidate the verifier must refuse."""
    fields = [f"f{i}" for i in range(256)]
    idx = ContentIndex(max_criteria=300)
    idx.bind(AllOf(*(Has(f) for f in fields)), "s")
    assert not records(idx)[0].exact
    for left_out in (fields[0], fields[-1]):
        assert idx.match({f: 1 for f in fields if f != left_out}) == []
    assert idx.match(dict.fromkeys(fields, 1)) == ["s"]


class OddKey(str):
    """A str whose hash differs from its text's: ``"a" in {OddKey("a"): 1}``
    is False, though the index reads its text ``a``."""

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return other is self


class Lying(Mapping[str, Any]):
    """A mapping whose items name a field its lookups do not find."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        return 1

    def items(self) -> Any:
        return [("a", 1)]


@pytest.mark.parametrize("fields", [{OddKey("a"): 1}, Lying()], ids=["str-subclass-key", "mapping"])
def test_no_shortcut_for_messages_that_are_not_plain_dicts(fields: Any, verifier: Any) -> None:
    idx = ContentIndex()
    idx.bind(Has("a"), "has")
    idx.bind(Eq("a", 1), "eq")
    assert idx.match(fields) == verifier(idx, fields) == []


def test_a_str_subclass_value_counts_by_its_text() -> None:
    class Shouting(str):
        def startswith(self, *a: Any) -> bool:  # type: ignore[override]
            return False

        def endswith(self, *a: Any) -> bool:  # type: ignore[override]
            return False

    idx = ContentIndex()
    idx.bind(Prefix("a", "x"), "p")
    idx.bind(Suffix("a", "y"), "s")
    assert sorted(idx.match({"a": Shouting("xy")})) == ["p", "s"]
    assert Prefix("a", "x").test({"a": Shouting("xy")})
