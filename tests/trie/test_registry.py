"""The subscriber registry's rules (cstrie/registry.py), each from the rule.

1. An object has at most one id; a freed id's slot is reused for a later new
   subscriber (of its stripe, or of any once the stripe keeps too many), so
   churn through new subscribers does not grow the table past the ids alive
   plus ``STRIPES * LOCAL_FREE`` waiting.
3. A snapshot's ids stay mapped while it is open (and more in test_snapshots).
4. A read of a live trie maps the ids of the engine's answer inside a read
   section: a slot freed while it is open is not reused until it ends (two
   epochs later), so the read never returns another subscriber; an id freed
   between the answer and the mapping (its slot FREE) makes the read run
   again.  After ``MAX_ATTEMPTS`` such races it takes a read pin, after which
   no id can be freed until the read ends.

The races of rule 4 are replayed deterministically: the fast path's race hook
(``Reader._set_race_hook``, for tests) runs "the other thread's" unsubscribe
and subscribe right after the engine has answered and before the ids are
mapped (in the same thread: the lookup holds no lock then); the Python reads
(``subscribers``) are raced by wrapping their engine call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers import Sub

import cstrie.trie as trie_module
from cstrie import _binding as nb
from cstrie.registry import FREE, LOCAL_FREE, MAX_ATTEMPTS, STRIPES
from cstrie.trie import Trie


def _reuse_race(trie: Trie, undo: bool = False) -> Callable[[], None]:
    # (the reads below all map inside a read section, the Python ones too)
    """The other thread: 'x' leaves (its id is freed) and 'y' arrives on another
    pattern; the read is open, so y cannot take x's slot; with ``undo`` both go
    back, so that the race can repeat."""

    def race() -> None:
        reg = trie._reg
        if reg._pinned() > 0:  # the read holds a read pin: no frees
            return
        x_id = reg.existing_id("x")
        trie.unsubscribe("a.b", "x")
        trie.subscribe("other", "y")
        assert reg.existing_id("y") != x_id  # not while a read may map x_id
        if undo:
            trie.unsubscribe("other", "y")
            trie.subscribe("a.b", "x")

    return race


def _race_after_first(real: Callable[..., Any], race: Callable[[], None]) -> Any:
    """``real`` wrapped to run ``race`` right after its first call returns;
    ``.answers`` records what each call returned."""
    answers: list[Any] = []

    def racing(*args: Any) -> Any:
        out = real(*args)
        answers.append(out)
        if len(answers) == 1:
            race()
        return out

    racing.answers = answers  # type: ignore[attr-defined]
    return racing


def _racy_trie() -> Trie:
    trie = Trie()
    trie.subscribe("a.b", "x")
    return trie


# ----------------------------------------------------------------- rule 1
# A freed id waits in its stripe (at most LOCAL_FREE per stripe) or in the
# shared ring, and a new slot is made only when the newcomer's stripe and the
# ring have none ready: the slots beyond those alive are bounded by this.
WAITING = STRIPES * LOCAL_FREE


def test_freed_slots_are_reused_by_new_subscribers() -> None:
    trie = Trie()
    trie.subscribe("keep", "anchor")
    for k in range(5000):  # 5,000 newcomers, one at a time
        trie.subscribe("a.b", k)
        assert trie.unsubscribe("a.b", k)
    reg = trie._reg
    assert len(reg) == 1
    grown = len(reg.objects)
    assert grown <= 2 + 1 + WAITING  # slot 0, the anchor, one alive, the waiting
    for k in range(5000, 10_000):  # the churn goes on: no more slots
        trie.subscribe("a.b", k)
        assert trie.unsubscribe("a.b", k)
    assert len(reg.objects) <= 2 + 1 + WAITING
    assert trie.lookup("keep") == ["anchor"]


def test_freed_slots_of_any_stripe_are_reused() -> None:
    """3,000 leave at once: more than the stripes keep (LOCAL_FREE each), so
    the rest wait in the shared ring, which every stripe's newcomers take
    from: a newcomer gets a new slot only when the ring has none."""
    trie = Trie()
    for k in range(3000):
        trie.subscribe("a", k)
    reg = trie._reg
    for k in range(3000):
        assert trie.unsubscribe("a", k)
    ring, stripes = reg._waiting()
    assert ring + stripes == 3000 and stripes <= WAITING
    for k in range(3000, 6000):
        ring, _ = reg._waiting()
        size = len(reg.objects)
        trie.subscribe("b", k)
        if reg.existing_id(k) >= size:  # a new slot
            assert ring == 0, f"newcomer {k} made a slot while {ring} waited in the ring"
    assert len(reg.objects) <= 1 + 3000 + WAITING  # not 6,001: reused
    assert sorted(trie.lookup("b")) == list(range(3000, 6000))


def test_equal_objects_share_one_id_and_free_it_once() -> None:
    trie = Trie()
    a, b = Sub("n"), Sub("n")  # equal, distinct
    trie.subscribe("p", a)
    trie.subscribe("q", b)
    reg = trie._reg
    assert len(reg) == 1
    n_id = reg.existing_id(a)
    assert trie.unsubscribe("p", b) and trie.unsubscribe("q", a)
    assert len(reg) == 0 and reg.live_objects() == []
    assert reg.objects[n_id] is FREE
    # freed once, so reused at most once: newcomers all get ids of their own
    news = [f"new{k}" for k in range(2000)]
    for o in news:
        trie.subscribe("r", o)
    ids = [reg.existing_id(o) for o in news]
    assert len(set(ids)) == len(ids) and 0 not in ids
    assert sorted(reg.live_objects()) == sorted(news)
    assert sorted(trie.lookup("r")) == sorted(news)


class _Str(str):
    """A str subclass: equal to the plain str of its characters (and of the
    same hash), but not an exact str."""


@pytest.mark.parametrize(
    "text",
    ["", "c", "client-1234567", "client-12345678", "client-123456789", "clïent-1", "x" * 200],
    ids=["empty", "one", "14", "15", "16", "non-ascii", "long"],
)
def test_equal_strs_passed_afresh_share_one_id(text: str) -> None:
    # Rule 1 for the subscribers brokers pass most: a client id decoded afresh
    # from each packet, an equal str that is another object each time (short
    # ASCII ones are recognised from the characters kept in the id table).
    trie = Trie("mqtt")
    reg = trie._reg

    def fresh() -> str:
        s = text.encode().decode()
        assert s == text and (s is not text or len(text) <= 1)
        return s

    first = fresh()
    assert trie.subscribe("a/b", first) is True
    assert trie.subscribe("a/b", fresh()) is False  # the same pair
    assert trie.subscribe("a/c", fresh()) is True
    assert trie.subscribe("a/d", _Str(text)) is True  # equal: the same subscriber
    assert len(reg) == 1 and reg.existing_id(fresh()) == reg.existing_id(first)
    # another str of the same length and a prefix are other subscribers
    other, prefix = text[:-1] + ("y" if text[-1:] != "y" else "z"), text[:-1]
    for s in {other, prefix} - {text}:
        assert trie.subscribe("a/b", s) is True
    assert [x for x in trie.lookup("a/b") if x == text] == [text]
    assert trie.lookup("a/b").count(text) == 1 and trie.lookup("a/d") == [text]
    assert any(x is first for x in trie.lookup("a/c"))  # the object registered first
    for pattern in ("a/b", "a/c", "a/d"):
        assert trie.unsubscribe(pattern, fresh()) is True
    assert reg.existing_id(fresh()) is None
    assert all(x != text for x in trie.lookup("a/b"))


def test_a_slot_freed_while_a_snapshot_holds_it_is_not_reused() -> None:
    trie = Trie()
    trie.subscribe("a", "x")
    reg = trie._reg
    x_id = reg.existing_id("x")
    snap = trie.snapshot()
    trie.unsubscribe("a", "x")
    for k in range(3000):  # none may take x's slot: the snapshot maps it
        trie.subscribe("b", k)
        assert reg.existing_id(k) != x_id
    assert snap.lookup("a") == ["x"] and list(snap) == [("a", "x")]
    assert sorted(trie.lookup("b")) == list(range(3000))
    del snap
    assert reg.objects[x_id] is FREE  # x's slot is free now
    for k in range(3000, 13_000):  # so a newcomer (of its stripe) takes it
        trie.subscribe("c", k)
        if reg.existing_id(k) == x_id:
            break
    else:
        raise AssertionError("x's slot was never reused")


def test_last_handle_gone_frees_every_slot() -> None:
    trie = Trie()
    for k in range(10):
        trie.subscribe("a", k)
    reg = trie._reg
    del trie
    assert len(reg) == 0 and reg.live_objects() == []


# ----------------------------------------------------------------- rule 4
def _hook_first(trie: Trie, race: Callable[[], None]) -> list[int]:
    """Set a race hook that runs ``race`` after the first engine answer of a
    read; returns the list of attempts the hook saw."""
    attempts: list[int] = []

    def hook(attempt: int) -> None:
        attempts.append(attempt)
        if len(attempts) == 1:
            race()

    trie._set_race_hook(hook)
    return attempts


def test_lookup_that_meets_a_freed_id_asks_again_and_no_one_takes_the_slot() -> None:
    trie = _racy_trie()
    attempts = _hook_first(trie, _reuse_race(trie))
    got = trie.lookup("a.b")
    trie._set_race_hook(None)
    # The first answer named x's id, whose slot is FREE now: the lookup asks
    # again, after x left.
    assert got == []
    assert attempts == [0, 1]


def test_lookup_gives_up_racing_and_reads_under_a_read_pin() -> None:
    trie = _racy_trie()
    race = _reuse_race(trie, undo=True)
    seen: list[bool] = []

    def hook(attempt: int) -> None:
        seen.append(trie._reg._pinned() > 0)
        race()

    trie._set_race_hook(hook)
    got = trie.lookup("a.b")
    trie._set_race_hook(None)
    assert got == ["x"]
    # every attempt before the pin lost its race; the pinned one stands
    assert seen == [False] * MAX_ATTEMPTS + [True]


def test_match_repeats_after_a_reused_id() -> None:
    trie = _racy_trie()
    attempts = _hook_first(trie, _reuse_race(trie))
    assert trie.match("a.b") == []
    assert attempts == [0, 1]


def test_subscribers_repeats_after_a_reused_id(monkeypatch: Any) -> None:
    trie = _racy_trie()
    ids_call = _race_after_first(nb.ids_call, _reuse_race(trie))
    monkeypatch.setattr(trie_module.nb, "ids_call", ids_call)
    assert trie.subscribers("a.b") == []
    assert len(ids_call.answers) == 2  # asked again


def test_matcher_lookup_repeats_after_a_reused_id() -> None:
    trie = _racy_trie()
    attempts = _hook_first(trie, _reuse_race(trie))
    assert trie.matcher().lookup("a.b") == []
    assert attempts == [0, 1]


def test_lookup_many_repeats_a_row_after_a_reused_id() -> None:
    trie = _racy_trie()
    trie.subscribe("c", "z")
    attempts = _hook_first(trie, _reuse_race(trie))
    assert trie.lookup_many(["a.b", "c", "a.b"]) == [[], ["z"], []]
    assert attempts[:2] == [0, 1]  # the first row was asked again


def test_snapshot_reads_keep_their_ids_through_the_race() -> None:
    """Rule 3: a snapshot's ids cannot be freed while it is open, so the same
    race changes nothing in its answer."""
    trie = _racy_trie()
    snap = trie.snapshot()

    def race() -> None:
        x_id = trie._reg.existing_id("x")
        trie.unsubscribe("a.b", "x")
        trie.subscribe("other", "y")
        assert trie._reg.existing_id("y") != x_id  # the snapshot keeps x's slot

    attempts = _hook_first(snap, race)
    assert snap.lookup("a.b") == ["x"]
    assert attempts == [0]  # no id was freed: the first answer stands


@pytest.mark.parametrize("n", [1, 3])
def test_without_races_a_lookup_maps_each_id_once(n: int) -> None:
    trie = Trie()
    for k in range(n):
        trie.subscribe("a.*", k)
    before = trie._reg.freed
    assert sorted(trie.lookup("a.b")) == list(range(n))
    assert trie._reg.freed == before


def test_none_is_a_subscriber_like_any_other() -> None:
    """A slot that holds None is in use: clear(), a snapshot's end and a dropped
    copy free it like any other (FREE, not None, marks a free slot)."""
    trie = Trie()
    trie.subscribe("a", None)
    trie.clear()
    assert len(trie._reg) == 0
    trie.subscribe("a", None)
    snap = trie.snapshot()
    trie.unsubscribe("a", None)
    assert len(trie._reg) == 1 and snap.lookup("a") == [None]
    del snap
    assert len(trie._reg) == 0
    trie.subscribe("keep", "k")
    dup = trie.copy()
    dup.subscribe("b", None)
    del dup
    assert trie._reg.live_objects() == ["k"]
