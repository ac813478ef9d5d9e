"""``TrieTable``, the integration's kombu routing table, against the rules of a
Python ``list`` and of a kombu topic exchange.

Rules:

* every list operation the table supports (``append``, ``extend``, ``+=``, ``*=``,
  ``insert``, ``remove``, ``pop``, item and slice assignment and deletion,
  ``clear``, ``sort``, ``reverse``, re-running ``__init__``) leaves the same
  entries in the same order, returns the same value and raises the same
  exception as on a plain ``list`` (Python's list semantics);
* the table routes as kombu routes a list of ``(binding key, regex, queue)``
  entries, with AMQP's topic rules: a routing key reaches each queue with at
  least one matching entry, once.  A (binding key, queue) pair held by several
  entries routes until the last of them is gone, so routing is compared with
  multiplicity: how many entries route each routing key to each queue.

The direct tests state one operation each; the state machine runs random
sequences of all of them on a table inside a real kombu session, against a plain
list, and publishes through kombu after every step.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("kombu")

import kombu_helpers as kh
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cstrie.integrations import kombu as ck

A = ("a.#", "ra", "q1")
A2 = ("a.#", "ra'", "q1")  # a different entry with A's (binding key, queue) pair
B = ("a.*", "rb", "q2")
C = ("#", "rc", "q3")
D = ("b", "rd", "q2")
TOPICS = ["a", "a.b", "a.b.c", "b", "x.b", ""]


def check(t: ck.TrieTable, want: list[Any]) -> None:
    """``t`` holds ``want`` and routes every topic as kombu routes that list."""
    assert type(t) is ck.TrieTable
    assert list(t) == want
    kh.assert_in_step(t)
    kh.assert_routes_as(t, want, TOPICS)


def same_outcome(t: ck.TrieTable, model: list[Any], op: Callable[[Any], Any]) -> None:
    """``op`` on the table and on the plain list: the same return value (the
    container itself where the list returns itself) or the same exception type."""
    outcomes = []
    for target in (t, model):
        try:
            got = op(target)
            outcomes.append(("self",) if got is target else ("value", got))
        except Exception as exc:
            outcomes.append(("raises", type(exc)))
    assert outcomes[0] == outcomes[1]


# ------------------------------------------------------------------ *=
def test_imul_two_then_two_pops_leaves_no_route_behind() -> None:
    """``t *= 2`` doubles every entry; popping both copies of the only entry leaves
    nothing routed, popping one of two copies leaves the queue routed."""
    t = ck.TrieTable([A])
    t *= 2
    check(t, [A, A])
    assert t.pop() == A
    check(t, [A])
    assert t.route("a") == ["q1"]
    assert t.pop() == A
    check(t, [])
    assert t.route("a") == [] and t.route("a.b") == []

    t = ck.TrieTable([A, B])
    t *= 2
    check(t, [A, B, A, B])
    t.pop()
    t.pop()
    check(t, [A, B])  # one copy of each left: both still route
    assert set(t.route("a.b")) == {"q1", "q2"}
    t.pop()
    t.pop()
    check(t, [])


@pytest.mark.parametrize("n", [-2, -1, 0, 1, 2, 3])
def test_imul_repeats_the_entries_n_times(n: int) -> None:
    t = ck.TrieTable([A, B, A2])
    same = t
    t *= n
    assert t is same
    check(t, [A, B, A2] * n)
    kh.assert_drains_as_a_list(t, TOPICS)


def test_imul_zero_routes_nothing_and_the_table_stays_usable() -> None:
    t = ck.TrieTable([A, A, B])
    t *= 0
    check(t, [])
    t.append(B)
    check(t, [B])
    t.pop()
    check(t, [])


def test_imul_refuses_a_non_integer_and_changes_nothing() -> None:
    t = ck.TrieTable([A])
    with pytest.raises(TypeError):
        t *= 2.0  # type: ignore[assignment]
    check(t, [A])


# ------------------------------------------------------- +=, extend, append
def test_iadd_returns_the_table_and_counts_each_copy() -> None:
    t = ck.TrieTable([A])
    same = t
    t += [A, B]
    assert t is same
    check(t, [A, A, B])
    t += (e for e in [C])  # any iterable, as list's +=
    check(t, [A, A, B, C])
    t += t  # its own entries, read before any is added
    check(t, [A, A, B, C] * 2)
    kh.assert_drains_as_a_list(t, TOPICS)


def test_iadd_refuses_a_non_iterable_and_changes_nothing() -> None:
    t = ck.TrieTable([A])
    with pytest.raises(TypeError):
        t += 5  # type: ignore[arg-type]
    check(t, [A])


def test_extend_counts_each_copy() -> None:
    t = ck.TrieTable()
    t.extend([A, A2])
    check(t, [A, A2])
    t.extend(iter([B]))
    t.extend(t)
    t.extend([])
    check(t, [A, A2, B] * 2)
    t.remove(A)
    t.remove(A2)
    t.remove(A)
    check(t, [B, A2, B])  # the last A2 still routes q1
    assert "q1" in t.route("a")
    t.remove(A2)
    check(t, [B, B])
    assert "q1" not in t.route("a")


def test_append_duplicates_route_until_the_last_is_removed() -> None:
    t = ck.TrieTable()
    t.append(C)
    t.append(C)
    check(t, [C, C])
    t.remove(C)
    check(t, [C])
    assert t.route("zzz") == ["q3"]
    t.remove(C)
    check(t, [])
    assert t.route("zzz") == []


# ------------------------------------------------------------- insert
@pytest.mark.parametrize("i", [0, 1, 2, 3, 100, -1, -2, -100])
def test_insert_at_any_index_as_a_list(i: int) -> None:
    t, model = ck.TrieTable([A, B, C]), [A, B, C]
    t.insert(i, D)
    model.insert(i, D)
    check(t, model)
    assert set(t.route("b")) == {"q2", "q3"}


# ------------------------------------------------------- remove and pop
def test_remove_takes_the_first_equal_entry_only() -> None:
    t = ck.TrieTable([A, B, A, A2])
    t.remove(A)
    check(t, [B, A, A2])
    t.remove(A)
    check(t, [B, A2])
    assert "q1" in t.route("a")  # A2 binds q1 with "a.#" as well
    with pytest.raises(ValueError):
        t.remove(A)
    check(t, [B, A2])
    t.remove(A2)
    check(t, [B])
    assert t.route("a") == []


@pytest.mark.parametrize("i", [None, 0, 1, 3, -1, -4])
def test_pop_returns_and_unroutes_the_entry_at_the_index(i: int | None) -> None:
    entries = [A, B, C, A2]
    t, model = ck.TrieTable(entries), list(entries)
    got = t.pop() if i is None else t.pop(i)
    assert got == (model.pop() if i is None else model.pop(i))
    check(t, model)


def test_pop_out_of_range_and_from_empty_raise_and_change_nothing() -> None:
    t = ck.TrieTable([A])
    for i in (1, -2, 100):
        with pytest.raises(IndexError):
            t.pop(i)
        check(t, [A])
    t.pop()
    with pytest.raises(IndexError):
        t.pop()
    check(t, [])


# ------------------------------------------------------------ t[i] = x
def test_item_assignment_replaces_the_route() -> None:
    t = ck.TrieTable([A, B])
    t[0] = D
    check(t, [D, B])
    assert t.route("a") == []  # A's route is gone with it
    assert set(t.route("b")) == {"q2"}
    t[-1] = C
    check(t, [D, C])
    assert t.route("a.b") == ["q3"]  # and B's


def test_item_assignment_over_one_of_two_copies_keeps_the_route() -> None:
    t = ck.TrieTable([A, A2])
    t[1] = B
    check(t, [A, B])
    assert set(t.route("a.b")) == {"q1", "q2"}
    t[0] = A  # the same entry again: nothing changes
    check(t, [A, B])
    t[0] = A2  # an equal pair in another entry: q1 stays routed
    check(t, [A2, B])


@pytest.mark.parametrize("i", [2, -3, 100])
def test_item_assignment_out_of_range_raises_and_changes_nothing(i: int) -> None:
    t = ck.TrieTable([A, B])
    with pytest.raises(IndexError):
        t[i] = C
    check(t, [A, B])
    assert t.route("zzz") == []


# ---------------------------------------------------------- t[i:j] = xs
@pytest.mark.parametrize(
    ("where", "new"),
    [
        (slice(1, 1), [D, D]),  # insert
        (slice(0, 2), [C]),  # shrink
        (slice(1, 2), [C, D, A2]),  # grow
        (slice(None), []),  # empty the table
        (slice(None), [D]),  # replace everything
        (slice(5, 9), [D]),  # past the end: append
        (slice(-2, None), [A]),
        (slice(3, 1), [D]),  # empty slice with stop < start: insert at 3
        (slice(None, None, 2), [D, C]),  # extended slice, same length
        (slice(None, None, -1), [D, D, C, B]),
        (slice(1, None, 2), [A2, A2]),
    ],
    ids=repr,
)
def test_slice_assignment_as_a_list(where: slice, new: list[Any]) -> None:
    entries = [A, B, A, C]
    t, model = ck.TrieTable(entries), list(entries)
    t[where] = new
    model[where] = new
    check(t, model)
    kh.assert_drains_as_a_list(t, TOPICS)


def test_slice_assignment_takes_any_iterable_and_the_table_itself() -> None:
    t = ck.TrieTable([A, B])
    t[1:1] = (e for e in [C])
    check(t, [A, C, B])
    t[1:] = t  # its own entries, read before the slice is replaced
    check(t, [A, A, C, B])
    t[:] = t
    check(t, [A, A, C, B])


def test_extended_slice_assignment_of_the_wrong_length_changes_nothing() -> None:
    t = ck.TrieTable([A, B, C])
    with pytest.raises(ValueError):
        t[::2] = [D]
    check(t, [A, B, C])
    assert t.route("b") == ["q3"]  # D was not added


# ------------------------------------------------------------ del t[...]
@pytest.mark.parametrize(
    "where",
    [0, -1, 2, slice(1, 3), slice(None), slice(None, None, 2), slice(None, None, -2), slice(9, 12)],
    ids=repr,
)
def test_deletion_as_a_list(where: int | slice) -> None:
    entries = [A, B, A, C]
    t, model = ck.TrieTable(entries), list(entries)
    del t[where]
    del model[where]
    check(t, model)
    kh.assert_drains_as_a_list(t, TOPICS)


def test_deletion_out_of_range_raises_and_changes_nothing() -> None:
    t = ck.TrieTable([A])
    with pytest.raises(IndexError):
        del t[1]
    check(t, [A])


# ---------------------------------------------------------------- clear
def test_clear_routes_nothing_and_the_table_stays_usable() -> None:
    t = ck.TrieTable([A, A, B, C])
    t.clear()
    check(t, [])
    for topic in TOPICS:
        assert t.route(topic) == []
    t.append(A)
    check(t, [A])
    t.pop()
    check(t, [])
    assert t.route("a") == []


# ---------------------------------------------------- sort and reverse
def test_sort_and_reverse_reorder_without_changing_routes() -> None:
    entries = [C, A, B, A2, A]
    t, model = ck.TrieTable(entries), list(entries)
    t.sort()
    model.sort()
    check(t, model)
    t.reverse()
    model.reverse()
    check(t, model)
    t.sort(key=operator.itemgetter(2), reverse=True)
    model.sort(key=operator.itemgetter(2), reverse=True)
    check(t, model)
    kh.assert_drains_as_a_list(t, TOPICS)


def test_sort_that_cannot_compare_raises_and_keeps_every_entry() -> None:
    odd = ("a.#", "ra", 1)  # A's key and regex, an int queue: the queues are compared
    t = ck.TrieTable([A, odd])
    with pytest.raises(TypeError):
        t.sort()
    assert sorted(map(repr, t)) == sorted(map(repr, [A, odd]))
    kh.assert_in_step(t)
    assert set(t.route("a")) == {"q1", 1}


# ----------------------------------------------------------- __init__
def test_init_again_replaces_the_entries() -> None:
    t = ck.TrieTable([A, A, B])
    t.__init__([C, A2])  # type: ignore[misc]
    check(t, [C, A2])
    t.__init__()  # type: ignore[misc]
    check(t, [])


# ------------------------------------------------------- state machine
POOL = [A, A2, B, C, D, ("a", "", "q1"), ("*.b", "", "q3")]
ENTRY = st.sampled_from(POOL)
ENTRIES = st.lists(ENTRY, max_size=4)
INDEX = st.integers(-8, 8)
STEP = st.sampled_from([None, 1, 2, 3, -1, -2])
QUEUES = sorted({q for _, _, q in POOL})
#: *= never grows the table past this many entries (the draw falls back to 1)
MAX_LEN = 48


class TableMachine(RuleBasedStateMachine):
    """A TrieTable that is the routing table of a topic exchange in a real kombu
    session (isolated memory broker, the integrated transport), and a plain list
    given the same operations.  After every step: the same entries, the trie and
    the table's counts in step with them, each topic routed to the same queues
    with the same multiplicity, and a publish of each topic through a kombu
    Producer delivered to exactly those queues, once each."""

    def __init__(self) -> None:
        super().__init__()
        self.session = kh.Session(ck.MemoryTransport)
        for q in QUEUES:
            self.session.channel.queue_declare(queue=q)
        self.session.queues.update(QUEUES)
        self.t: ck.TrieTable = self.session.table
        assert isinstance(self.t, ck.TrieTable)
        self.model: list[Any] = []
        self.published = 0

    def teardown(self) -> None:
        self.session.close()

    def apply(self, op: Callable[[Any], Any]) -> None:
        same_outcome(self.t, self.model, op)

    # ---- list operations
    @rule(entry=ENTRY)
    def append(self, entry: Any) -> None:
        self.apply(lambda x: x.append(entry))

    @rule(entries=ENTRIES, as_iterator=st.booleans())
    def extend(self, entries: list[Any], as_iterator: bool) -> None:
        self.apply(lambda x: x.extend(iter(entries) if as_iterator else entries))

    @rule(entries=ENTRIES)
    def iadd(self, entries: list[Any]) -> None:
        self.apply(lambda x: operator.iadd(x, entries))

    @rule()
    def iadd_itself(self) -> None:
        if 2 * len(self.model) <= MAX_LEN:
            self.apply(lambda x: operator.iadd(x, x))

    @rule(n=st.integers(-1, 3))
    def imul(self, n: int) -> None:
        if len(self.model) * n > MAX_LEN:
            n = 1
        self.apply(lambda x: operator.imul(x, n))

    @rule(i=INDEX, entry=ENTRY)
    def insert(self, i: int, entry: Any) -> None:
        self.apply(lambda x: x.insert(i, entry))

    @rule(entry=ENTRY)
    def remove(self, entry: Any) -> None:  # absent: ValueError on both
        self.apply(lambda x: x.remove(entry))

    @rule(i=st.none() | INDEX)
    def pop(self, i: int | None) -> None:  # out of range: IndexError on both
        self.apply(lambda x: x.pop() if i is None else x.pop(i))

    @rule(i=INDEX, entry=ENTRY)
    def set_item(self, i: int, entry: Any) -> None:
        self.apply(lambda x: operator.setitem(x, i, entry))

    @rule(start=INDEX, stop=INDEX, step=STEP, entries=ENTRIES)
    def set_slice(self, start: int, stop: int, step: int | None, entries: list[Any]) -> None:
        self.apply(lambda x: operator.setitem(x, slice(start, stop, step), entries))

    @rule(start=INDEX, step=STEP)
    def set_slice_from_itself(self, start: int, step: int | None) -> None:
        if 2 * len(self.model) <= MAX_LEN:
            self.apply(lambda x: operator.setitem(x, slice(start, None, step), x))

    @rule(i=INDEX)
    def del_item(self, i: int) -> None:
        self.apply(lambda x: operator.delitem(x, i))

    @rule(start=INDEX, stop=INDEX, step=STEP)
    def del_slice(self, start: int, stop: int, step: int | None) -> None:
        self.apply(lambda x: operator.delitem(x, slice(start, stop, step)))

    @rule()
    def clear(self) -> None:
        self.apply(lambda x: x.clear())

    @rule(by_queue=st.booleans(), reverse=st.booleans())
    def sort(self, by_queue: bool, reverse: bool) -> None:
        key = operator.itemgetter(2) if by_queue else None
        self.apply(lambda x: x.sort(key=key, reverse=reverse))

    @rule()
    def reverse(self) -> None:
        self.apply(lambda x: x.reverse())

    @rule(entries=ENTRIES)
    def init_again(self, entries: list[Any]) -> None:
        self.apply(lambda x: x.__init__(entries))

    # ---- the table's own operation (kombu's unbind): every equal entry goes
    @rule(entry=ENTRY)
    def discard(self, entry: Any) -> None:
        n = self.model.count(entry)
        self.model[:] = [e for e in self.model if e != entry]
        assert self.t.discard(entry) == n

    # ---- routing, observed only through routes: pop every entry, one at a time
    @rule()
    def drain(self) -> None:
        kh.assert_drains_as_a_list(self.t, TOPICS)
        self.model.clear()

    @invariant()
    def same_entries_and_counted_routes(self) -> None:
        assert list(self.t) == self.model
        kh.assert_in_step(self.t)
        kh.assert_routes_as(self.t, self.model, TOPICS)

    @invariant()
    def kombu_delivers_as_the_list_routes(self) -> None:
        start = self.published
        self.session.publish(TOPICS, start=start)
        self.published += len(TOPICS)
        want = {
            q: [
                (i, topic)
                for i, topic in enumerate(TOPICS, start)
                if kh.amqp_routes(self.model, topic)[q]
            ]
            for q in QUEUES
        }
        assert self.session.get_all() == want


TestTableMachine = TableMachine.TestCase
TestTableMachine.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
