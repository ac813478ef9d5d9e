"""Tests of the stress harness's ``topics`` scenario (stress/harness/topics.py,
topic_checker.py, topic_cli.py).

The checker on hand-made histories: linearizable ones (reads on either side
of writes in flight) must pass, and each kind of violation -- a stale read, a
lost write, a query mixing two states, a wrong count, a new-old inversion, a
torn snapshot, shared topics written twice -- must be flagged with a message
naming the operations.  Then broken indexes run end to end through the same
recorder and checker (a query reading the live index topic by topic while
another thread writes, forced by events; stale gets; lost puts; a count off
by one; a "snapshot" that is the live index), and small real runs.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stress.harness import cli  # noqa: E402
from stress.harness.topic_checker import TOPIC_CHECKS, check_topics  # noqa: E402
from stress.harness.topics import (  # noqa: E402
    BAD,
    COUNT,
    GET,
    LEN,
    POP,
    PUT,
    QUERY,
    REMOVE,
    SNAPSHOT,
    SnapRecord,
    TopicHistory,
    TopicLog,
    build_space,
    flat_of,
    make_space,
    oracle,
    put_value,
    record_topics,
)

# Topics 0..4: a/x and a/y owned by thread 0, a/z and b/q by thread 1, s/1
# shared.  Filters: 0 'a/+', 1 '#', 2 'a/x', 3 'zz/#' (nothing), 4 's/#'.
TOPICS = ["a/x", "a/y", "a/z", "b/q", "s/1"]
AX, AY, AZ, BQ, S1 = range(5)
OWNER = [0, 0, 1, 1, -1]
FILTERS = ["a/+", "#", "a/x", "zz/#", "s/#"]
F_A, F_ALL, F_AX, F_NONE, F_S = range(5)
SPACE = make_space("mqtt", TOPICS, OWNER, FILTERS, 3, frozenset({F_NONE}))


def v(t: int, pos: int) -> int:
    """The value of thread t's put at position pos."""
    return put_value(t, pos)


class T:
    """One thread's history, built with readable calls (positions count from 0)."""

    def __init__(self, thread: int) -> None:
        self.log = TopicLog(thread)
        self.t = thread

    def put(self, x: int, inv: int, resp: int, new: bool = True) -> T:
        self.log.add(PUT, x, inv, resp, int(new))
        return self

    def remove(self, x: int, inv: int, resp: int, was: bool) -> T:
        self.log.add(REMOVE, x, inv, resp, int(was))
        return self

    def pop(self, x: int, inv: int, resp: int, value: int) -> T:
        self.log.add(POP, x, inv, resp, value)
        return self

    def get(self, x: int, inv: int, resp: int, value: int) -> T:
        self.log.add(GET, x, inv, resp, value)
        return self

    def query(self, f: int, inv: int, resp: int, pairs: list[tuple[int, int]]) -> T:
        self.log.add(QUERY, f, inv, resp, pairs=pairs)
        return self

    def count(self, f: int, inv: int, resp: int, n: int) -> T:
        self.log.add(COUNT, f, inv, resp, n)
        return self

    def len(self, inv: int, resp: int, n: int) -> T:
        self.log.add(LEN, -1, inv, resp, n)
        return self

    def snap(
        self,
        inv: int,
        resp: int,
        items: list[tuple[int, int]],
        late: tuple[list[tuple[int, int]], int, int, int] | None = None,
        **wrong: Any,
    ) -> T:
        """A snapshot whose own reads (get a/x, query/count 'a/+') agree with
        its items unless ``wrong`` overrides some."""
        have = dict(items)
        found = [(x, val) for x, val in items if x in SPACE.matches[F_A]]
        rec = SnapRecord(
            items=flat_of(items),
            length=wrong.get("length", len(items)),
            key=AX,
            got=wrong.get("got", have.get(AX, 0)),
            filt=F_A,
            found=flat_of(wrong.get("found", found)),
            counted=wrong.get("counted", len(found)),
        )
        if late is not None:
            rec.late = (flat_of(late[0]), late[1], late[2], late[3])
        self.log.add(SNAPSHOT, -1, inv, resp, snap=rec)
        return self


def history(*threads: T, final: list[tuple[int, int]] | None = None, **kw: Any) -> TopicHistory:
    logs = [th.log for th in threads]
    while len(logs) < SPACE.threads:
        logs.append(TopicLog(len(logs)))
    return TopicHistory(
        space=SPACE,
        clock=kw.get("clock", "atomics"),
        logs=logs,
        final_items=None if final is None else flat_of(final),
        final_length=kw.get("length", None if final is None else len(final)),
        invariant_error=kw.get("invariant_error"),
    )


def failing(rep: Any) -> set[str]:
    return {k for k, n in rep.counts.items() if n}


def only(rep: Any, check: str, also: frozenset[str] = frozenset()) -> str:
    """``check`` fails (and at most the checks of ``also`` besides); its
    messages, joined."""
    assert check in failing(rep) and failing(rep) <= {check} | also, rep.violations
    return "\n".join(x.message for x in rep.violations if x.check == check)


# ------------------------------------------------------------------ the space
def test_space_matching_is_the_oracle_s() -> None:
    assert SPACE.matches[F_A] == {AX, AY, AZ}
    assert SPACE.matches[F_ALL] == set(range(5))
    assert SPACE.matches[F_NONE] == frozenset() and SPACE.shapes[F_NONE] == "none"
    assert SPACE.shapes[:3] == ["single", "multi", "literal"]
    o = oracle()
    for d in ("mqtt", "amqp", "nats"):
        sp = build_space(d, 200, 3, 5)
        assert len(sp.topics) == 200 and len(sp.shared) == 6
        assert sorted(len(x) for x in sp.own) == [64, 65, 65]
        assert {"literal", "single", "multi", "single+multi", "none"} <= set(sp.shapes)
        for f, m in zip(sp.filters, sp.matches, strict=True):
            assert m == {i for i, t in enumerate(sp.topics) if o.matches(sp.dialect, f, t)}
        assert all(sp.matches[i] for i, s in enumerate(sp.shapes) if s != "none")
    mqtt = build_space("mqtt", 256, 2, 1)
    dollar = [i for i, t in enumerate(mqtt.topics) if t.startswith("$")]
    assert dollar and not set(dollar) & mqtt.matches[mqtt.filters.index("#")]
    assert any("//" in t for t in mqtt.topics)  # empty levels
    amqp = build_space("amqp", 256, 2, 1)
    assert "" in amqp.topics and any(".*" in t or ".#" in t for t in amqp.topics)


# ------------------------------------------------------------------ passing
def test_linearizable_history_passes() -> None:
    t0 = (
        T(0)
        .put(AX, 1, 2)  # v(0,0)
        .put(AY, 3, 20)  # v(0,1): in flight while thread 1 reads
        .remove(AX, 21, 22, True)
        .get(AX, 23, 24, 0)
    )
    t1 = (
        T(1)
        .put(AZ, 4, 5)  # v(1,0)
        .query(F_A, 6, 8, [(AX, v(0, 0)), (AZ, v(1, 0))])  # before a/y's put
        .query(F_A, 9, 11, [(AX, v(0, 0)), (AY, v(0, 1)), (AZ, v(1, 0))])  # after it
        .count(F_A, 12, 13, 3)
        .len(14, 15, 3)
        .get(AY, 16, 17, v(0, 1))
        .snap(18, 19, [(AX, v(0, 0)), (AY, v(0, 1)), (AZ, v(1, 0))])
        .query(F_ALL, 25, 26, [(AY, v(0, 1)), (AZ, v(1, 0))])
        .query(F_NONE, 27, 28, [])
    )
    rep = check_topics(history(t0, t1, final=[(AY, v(0, 1)), (AZ, v(1, 0))]))
    assert rep.ok, rep.violations
    assert rep.stats["reads_judged"] == 9 and rep.stats["reads_contended"] >= 2


def test_reads_either_side_of_a_write_in_flight_pass() -> None:
    t0 = T(0).put(AX, 1, 2).put(AX, 3, 30, False)  # v(0,0) then v(0,1), the second slow
    t1 = T(1).get(AX, 4, 5, v(0, 0)).get(AX, 6, 7, v(0, 1)).count(F_AX, 8, 9, 1)
    t2 = T(2).query(F_AX, 5, 8, [(AX, v(0, 0))]).get(AX, 31, 32, v(0, 1))
    assert check_topics(history(t0, t1, t2)).ok


def test_shared_topic_written_by_two_threads_passes() -> None:
    # Two overlapping puts: one returns True (first), the other False; a pop
    # returns the value of the one that came second.
    t0 = T(0).put(S1, 1, 10, True)
    t1 = T(1).put(S1, 2, 9, False).pop(S1, 11, 12, v(1, 0)).get(S1, 13, 14, 0)
    t2 = T(2).query(F_S, 3, 4, []).query(F_S, 5, 6, [(S1, v(0, 0))]).count(F_S, 7, 8, 1)
    assert check_topics(history(t0, t1, t2, final=[])).ok


# ---------------------------------------------------------------- violations
def test_stale_get_is_detected() -> None:
    t0 = T(0).put(AX, 1, 2).put(AX, 3, 4, False)
    t1 = T(1).get(AX, 5, 6, v(0, 0))
    msg = only(check_topics(history(t0, t1)), "linearizability")
    assert "thread 1 op #0 get('a/x') -> v0:0" in msg and "never held v0:0" in msg
    assert "thread 0 op #1 put('a/x', v0:1) -> False" in msg


def test_lost_write_is_detected() -> None:
    # The put returned True, a later get sees nothing, and it is not there at the end.
    t0 = T(0).put(AX, 1, 2)
    t1 = T(1).get(AX, 3, 4, 0)
    rep = check_topics(history(t0, t1, final=[]))
    assert failing(rep) == {"linearizability", "final"}, rep.violations
    msg = "\n".join(x.message for x in rep.violations)
    assert "get('a/x') -> None" in msg and "'a/x' holds None, but replaying thread 0" in msg


def test_own_write_results_are_checked() -> None:
    t0 = T(0).put(AX, 1, 2, True).put(AX, 3, 4, True).remove(AY, 5, 6, True).pop(AX, 7, 8, 0)
    msg = only(check_topics(history(t0)), "own-writes")
    assert "thread 0 op #1 put('a/x', v0:1) -> True [t=3..4] is wrong" in msg
    assert "must return False" in msg and "op #2 remove('a/y')" in msg
    assert "op #3 pop('a/x') -> None [t=7..8] is wrong" in msg and "must return v0:1" in msg


def test_query_mixing_two_states_of_one_writer_is_detected() -> None:
    # Thread 0 replaces a/x, then puts a/y; a query over both shows the new
    # a/y but the old a/x: a state thread 0 never passed through.
    t0 = T(0).put(AX, 1, 2).put(AX, 5, 6, False).put(AY, 7, 8)
    t1 = T(1).query(F_A, 3, 10, [(AX, v(0, 0)), (AY, v(0, 2))])
    msg = only(check_topics(history(t0, t1)), "queries")
    assert "thread 1 op #0 query('a/+')" in msg and "is not one state of the index" in msg
    assert "put('a/x', v0:1)" in msg and "put('a/y', v0:2)" in msg


def test_query_mixing_two_writers_states_is_detected() -> None:
    # Thread 0's put of a/x ended (at 6) before thread 1's put of a/z began
    # (at 7); the query sees a/z's but not a/x's: each part alone is a real
    # state, together they are not.
    t0 = T(0).put(AX, 5, 6)
    t1 = T(1).put(AZ, 7, 8)
    t2 = T(2).query(F_A, 3, 10, [(AZ, v(1, 0))])
    msg = only(check_topics(history(t0, t1, t2)), "queries")
    assert "thread 2 op #0 query('a/+')" in msg and "mixes states" in msg
    assert "thread 0's topics fit only cells 3..5" in msg
    assert "thread 1's topics fit only cells 7..9" in msg


def test_query_missing_a_topic_held_for_the_whole_call_is_detected() -> None:
    t0 = T(0).put(AX, 1, 2).put(AY, 3, 4)
    t1 = T(1).query(F_A, 5, 6, [(AY, v(0, 1))])
    msg = only(check_topics(history(t0, t1)), "queries")
    assert "'a/x': the answer has None, the index had v0:0 when the call began" in msg
    assert "no write of them was in flight; Before the call: thread 0 op #0 put('a/x'" in msg


def test_query_showing_a_removed_topic_is_detected() -> None:
    t0 = T(0).put(AX, 1, 2).remove(AX, 3, 4, True)
    t1 = T(1).query(F_ALL, 5, 6, [(AX, v(0, 0))])
    msg = only(check_topics(history(t0, t1)), "queries")
    assert "'a/x': the answer has v0:0, the index had None" in msg
    assert "remove('a/x') -> True" in msg


def test_query_results_must_be_well_formed() -> None:
    t0 = T(0).put(AX, 1, 2).put(AY, 3, 4)
    t1 = T(1).put(BQ, 5, 6)
    t2 = (
        T(2)
        .query(F_A, 7, 8, [(AX, v(0, 0)), (AY, v(0, 1)), (BQ, v(1, 0))])  # b/q: no match
        .query(F_A, 9, 10, [(AX, v(0, 0)), (AX, v(0, 0)), (AY, v(0, 1))])  # twice
        .query(F_A, 11, 12, [(AX, v(0, 1)), (AY, v(0, 0))])  # values swapped
        .query(F_NONE, 13, 14, [(AX, v(0, 0))])
        .get(AY, 15, 16, v(1, 0))
    )
    rep = check_topics(history(t0, t1, t2))
    msg = only(rep, "results")
    assert rep.counts["results"] == 5
    assert "'b/q', which the filter does not match" in msg and "'a/x' twice" in msg
    assert "'a/x' -> v0:1, a value never put there" in msg
    assert "get('a/y') -> v1:0 [t=15..16]: a value never put under 'a/y'" in msg


def test_errors_are_reported() -> None:
    t0 = T(0).put(AX, 1, 2)
    t0.log.add(GET, AX, 3, 4, BAD)
    t0.log.errors[1] = "raised KeyError(7)"
    msg = only(check_topics(history(t0)), "results")
    assert "thread 0 op #1 get('a/x') -> raised KeyError(7)" in msg


def test_wrong_count_and_len_are_detected() -> None:
    t0 = T(0).put(AX, 1, 2).put(AY, 3, 4)
    t1 = T(1).count(F_A, 5, 6, 3).len(7, 8, 1).count(F_A, 9, 10, 2).len(11, 12, 2)
    rep = check_topics(history(t0, t1))
    msg = only(rep, "counts")
    assert rep.counts["counts"] == 2
    assert "count('a/+') -> 3" in msg and "len() -> 1" in msg and "have 2" in msg


def test_count_fits_only_the_states_of_its_call() -> None:
    # a/x removed during the count: 1 or 0 fit, 2 does not; with a shared
    # topic in scope the count may be one more only while it may be there.
    t0 = T(0).put(AX, 1, 2).put(AY, 3, 4).remove(AX, 6, 9, True)
    t1 = T(1).count(F_A, 5, 10, 1).count(F_A, 7, 8, 2).count(F_A, 11, 12, 1)
    assert check_topics(history(t0, t1)).ok
    t2 = T(2).count(F_A, 5, 10, 3)
    assert "count('a/+') -> 3" in only(check_topics(history(t0, T(1), t2)), "counts")
    s0 = T(0).put(S1, 20, 30)
    s1 = T(1).len(21, 22, 1).len(23, 24, 0).len(31, 32, 1)
    assert check_topics(history(s0, s1)).ok
    s2 = T(2).len(31, 32, 0)  # the put ended at 30: surely there
    assert "len() -> 0" in only(check_topics(history(s0, T(1), s2)), "counts")


def test_new_old_inversion_is_detected() -> None:
    # While the put [1, 10] is in flight, a get sees it; a later one does not.
    t0 = T(0).put(AX, 1, 10)
    t1 = T(1).get(AX, 2, 3, v(0, 0))
    t2 = T(2).get(AX, 4, 5, 0)
    msg = only(check_topics(history(t0, t1, t2)), "linearizability")
    assert "thread 2 op #0 get('a/x') -> None" in msg and "new-old inversion" in msg
    assert "thread 1 op #0 get('a/x') -> v0:0" in msg
    # the same between a query (of several topics) and a get
    t1 = T(1).query(F_A, 2, 3, [(AX, v(0, 0))])
    msg = only(check_topics(history(t0, t1, t2)), "linearizability")
    assert "older state of thread 0's topics than thread 1 op #0 query('a/+')" in msg


def test_shared_topic_put_twice_as_new_is_detected() -> None:
    t0 = T(0).put(S1, 1, 2, True)
    t1 = T(1).put(S1, 3, 4, True)
    msg = only(check_topics(history(t0, t1)), "linearizability")
    assert "shared 's/1': no linearization explains thread 1 op #0 put('s/1', v1:0)" in msg


def test_shared_topic_popped_twice_is_detected() -> None:
    t0 = T(0).put(S1, 1, 2).pop(S1, 3, 8, v(0, 0))
    t1 = T(1).pop(S1, 4, 7, v(0, 0))  # concurrent, the same value
    msg = only(check_topics(history(t0, t1)), "linearizability")
    assert "pop('s/1') -> v0:0" in msg


def test_shared_topic_seen_by_a_query_after_its_removal_is_detected() -> None:
    t0 = T(0).put(S1, 1, 2).remove(S1, 3, 4, True)
    t1 = T(1).query(F_S, 5, 6, [(S1, v(0, 0))])
    rep = check_topics(history(t0, t1))
    assert failing(rep) == {"linearizability", "queries"}, rep.violations
    assert "(it saw 's/1' as v0:0)" in "\n".join(x.message for x in rep.violations)


def test_snapshot_mixing_two_states_is_detected() -> None:
    t0 = T(0).put(AX, 5, 6)
    t1 = T(1).put(AZ, 7, 8)
    t2 = T(2).snap(3, 10, [(AZ, v(1, 0))])
    msg = only(check_topics(history(t0, t1, t2)), "snapshots")
    assert "thread 2 op #0 snapshot() [t=3..10] mixes states" in msg


def test_snapshot_reads_must_agree_with_its_items() -> None:
    t0 = T(0).put(AX, 1, 2)
    items = [(AX, v(0, 0))]
    for wrong, text in [
        ({"length": 2}, "len(snapshot) is 2"),
        ({"got": 0}, "snapshot.get('a/x') -> None"),
        ({"found": []}, "snapshot.query('a/+') -> []"),
        ({"counted": 0}, "snapshot.count('a/+') -> 0"),
    ]:
        msg = only(check_topics(history(t0, T(1).snap(3, 4, items, **wrong))), "snapshots")
        assert text in msg
    late_ok = T(1).snap(3, 4, items, late=(items, 1, 1, v(0, 0)))
    assert check_topics(history(t0, late_ok)).ok
    moved = T(1).snap(3, 4, items, late=([], 0, 0, 0))  # it followed the live index
    msg = only(check_topics(history(t0, moved)), "snapshots")
    assert "read again when the thread took its next snapshot" in msg


def test_final_state_len_and_invariants_are_checked() -> None:
    t0 = T(0).put(AX, 1, 2).put(AY, 3, 4).remove(AY, 5, 6, True)
    assert check_topics(history(t0, final=[(AX, v(0, 0))])).ok
    rep = check_topics(
        history(t0, final=[(AX, v(0, 0)), (AY, v(0, 1))], length=3, invariant_error="broken")
    )
    msg = only(rep, "final")
    assert rep.counts["final"] == 3
    assert "check_invariants(strict=True): broken" in msg and "len() is 3" in msg
    assert "'a/y' holds v0:1, but replaying thread 0's writes gives None" in msg
    s0 = T(0).put(S1, 1, 2)
    assert "shared 's/1'" in only(check_topics(history(s0, final=[])), "final")


def test_perf_counter_stamps_tie_without_false_alarms() -> None:
    # Equal stamps of two threads may be either order with perf_counter_ns.
    t0 = T(0).put(AX, 1, 5)
    t1 = T(1).get(AX, 5, 6, 0)
    assert not check_topics(history(t0, t1)).ok  # atomics: the put ended before
    assert check_topics(history(t0, t1, clock="perf_counter_ns")).ok


#: per check: a minimal history that fails it alone
FAILS_ALONE = {
    "results": lambda: history(T(0).get(AX, 1, 2, v(1, 0))),  # a value never put there
    "own-writes": lambda: history(T(0).put(AX, 1, 2, False)),  # absent, yet "replaced"
    "linearizability": lambda: history(T(0).put(AX, 1, 2), T(1).get(AX, 3, 4, 0)),
    "queries": lambda: history(T(0).put(AX, 1, 2), T(1).query(F_A, 3, 4, [])),
    "counts": lambda: history(T(0).put(AX, 1, 2), T(1).count(F_A, 3, 4, 0)),
    "snapshots": lambda: history(T(0).snap(1, 2, [], length=1)),
    "final": lambda: history(T(0).put(AX, 1, 2), final=[]),
}


@pytest.mark.parametrize("check", list(TOPIC_CHECKS))
def test_every_check_fails_alone_on_its_minimal_history(check: str) -> None:
    assert set(FAILS_ALONE) == set(TOPIC_CHECKS)
    rep = check_topics(FAILS_ALONE[check]())
    assert failing(rep) == {check} and rep.counts[check] == 1, rep.violations


# ------------------------------------------------- broken indexes, end to end
class _Proxy:
    """A cstrie.topics.TopicIndex to break one method of."""

    def __init__(self, dialect: Any) -> None:
        from cstrie.topics import TopicIndex

        self._i = TopicIndex(dialect)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._i, name)

    def __len__(self) -> int:
        return len(self._i)


class _StaleGets(_Proxy):
    """get answers from a per-thread cache that writes never clear."""

    def __init__(self, dialect: Any) -> None:
        super().__init__(dialect)
        self._cache = threading.local()

    def get(self, topic: str, default: Any = None) -> Any:
        c = self._cache.__dict__.setdefault("c", {})
        if topic not in c:
            c[topic] = self._i.get(topic, default)
        return c[topic]


class _LostPuts(_Proxy):
    """Every 7th put answers as if it stored the value, and does not."""

    def __init__(self, dialect: Any) -> None:
        super().__init__(dialect)
        self._n = 0
        self._lock = threading.Lock()

    def put(self, topic: str, value: Any) -> bool:
        with self._lock:
            self._n += 1
            lose = self._n % 7 == 0
        if lose:
            return topic not in self._i
        return bool(self._i.put(topic, value))


class _CountOff(_Proxy):
    def count(self, filt: str) -> int:
        n = int(self._i.count(filt))
        return n + 1 if n else 0


class _LiveSnapshot(_Proxy):
    """snapshot() returns the live index: it moves on with the writes."""

    def snapshot(self) -> Any:
        return self._i


class _TornQueries(_Proxy):
    """query() without a snapshot: it reads the live index topic by topic.

    The interleaving is forced with a condition variable, not left to luck.
    Thread ``topics-worker-0`` (the recorder's names) tears its first
    queries of at least 8 topics; the writes of ``topics-worker-1`` are
    gated: once worker 0 has begun its reads, they wait while no tear is
    open.  A tear reads the first half of the filter's topics, opens the
    gate until worker 1 has put over a topic of that half that it read as
    present (A) and then put a topic of the second half (B), closes the
    gate, waits for worker 1's write in flight to end, and reads the second
    half.  B is chosen as a put after A whose topic nothing wrote since, so
    the answer holds A's topic from before A and B's from after B, which
    worker 1 made later: no moment had both (a *forced tear*, which the
    checker must flag).  Every wait is bounded; one that times out opens
    the gate for good."""

    TEARS = 3
    WAIT = 5.0
    TEARER, GATED = "topics-worker-0", "topics-worker-1"

    def __init__(self, dialect: Any, topics: list[str]) -> None:
        super().__init__(dialect)
        self._d = self._i.dialect
        self._topics = topics
        self._cond = threading.Condition()
        self._tick = 0
        #: (thread name, topic, value put or None, start tick, end tick) of every write
        self._log: list[tuple[str, str, Any, int, int]] = []
        self._armed = self._open = self._busy = self._given_up = False
        self._flight = 0
        self.attempts = 0
        self.forced = 0

    def _wait(self, ready: Any) -> None:
        """Wait (holding the condition) until ready(); give up the gating on a timeout."""
        if not self._given_up and not self._cond.wait_for(ready, self.WAIT):
            self._given_up = True
            self._cond.notify_all()

    def _gate_open(self) -> bool:
        return self._given_up or self._open or (self.attempts >= self.TEARS and not self._busy)

    def _write(self, fn: Any, topic: str, value: Any, *args: Any) -> Any:
        me = threading.current_thread().name
        gated = me == self.GATED
        with self._cond:
            if gated and self._armed:
                self._wait(self._gate_open)
            self._tick += 1
            start = self._tick
            self._flight += gated
        try:
            return fn(topic, *args)
        finally:
            with self._cond:
                self._tick += 1
                self._flight -= gated
                self._log.append((me, topic, value, start, self._tick))
                self._cond.notify_all()

    def put(self, topic: str, value: Any) -> bool:
        return bool(self._write(self._i.put, topic, value, value))

    def remove(self, topic: str) -> bool:
        return bool(self._write(self._i.remove, topic, None))

    def pop(self, topic: str, *default: Any) -> Any:
        return self._write(self._i.pop, topic, None, *default)

    def _reading(self) -> None:
        """The first read of worker 0 arms the gate; worker 1 reads once it is armed."""
        me = threading.current_thread().name
        with self._cond:
            if me == self.TEARER and not self._armed:
                self._armed = True
                self._cond.notify_all()
            elif me == self.GATED:
                self._wait(lambda: self._armed)

    def get(self, topic: str, default: Any = None) -> Any:
        self._reading()
        return self._i.get(topic, default)

    def count(self, filt: str) -> int:
        self._reading()
        return int(self._i.count(filt))

    def __len__(self) -> int:
        self._reading()
        return len(self._i)

    def snapshot(self) -> Any:
        self._reading()
        return self._i.snapshot()

    def query(self, filt: str) -> Any:
        self._reading()
        o = oracle()
        cands = [t for t in self._topics if o.matches(self._d, filt, t)]
        with self._cond:
            honest = (
                threading.current_thread().name != self.TEARER
                or len(cands) < 8
                or self.attempts >= self.TEARS
                or self._given_up
            )
            if not honest:
                self.attempts += 1
                self._busy = True
        if honest:
            return self._i.query(filt)
        try:
            return iter(self._torn(cands))
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _torn(self, cands: list[str]) -> list[tuple[str, Any]]:
        first, second = cands[: len(cands) // 2], cands[len(cands) // 2 :]
        out = [(t, x) for t in first if (x := self._i.get(t)) is not None]
        present = {t for t, _ in out}
        second_set = set(second)
        with self._cond:
            self._tick += 1
            mark, since = self._tick, len(self._log)

            def a_end() -> int | None:
                """End tick of worker 1's first put over a present first-half topic."""
                for who, topic, value, start, end in self._log[since:]:
                    if who == self.GATED and value is not None and start > mark:
                        if topic in present:
                            return end
                return None

            def b() -> tuple[str, Any] | None:
                """A put of worker 1 after A, on a second-half topic, not written since."""
                end_a = a_end()
                if end_a is None:
                    return None
                written: set[str] = set()
                for who, topic, value, start, _ in reversed(self._log[since:]):
                    if start <= end_a:
                        break
                    if who == self.GATED and value is not None and topic in second_set:
                        if topic not in written:
                            return topic, value
                    written.add(topic)
                return None

            self._open = True
            self._cond.notify_all()
            self._wait(lambda: b() is not None)
            self._open = False
            self._wait(lambda: self._flight == 0)
            chosen = b()
        out += [(t, x) for t in second if (x := self._i.get(t)) is not None]
        if chosen is not None and chosen in out:
            self.forced += 1
        return out


def _broken_run(make: Any, ops: int = 3000, threads: int = 2, shared: int | None = None) -> Any:
    from stress.harness.clock import make_clock
    from stress.harness.progress import Progress

    space = build_space("mqtt", 64, threads, 7, shared)
    clock = make_clock("auto")
    try:
        index: list[Any] = []

        def create(d: Any) -> Any:
            index.append(make(d, space))
            return index[0]

        h = record_topics(space, ops, 7, clock, Progress(False), "x", 50, 100, 120.0, create)
    finally:
        clock.close()
    return check_topics(h), index[0]


@pytest.mark.parametrize(
    ("make", "must", "may"),
    [
        (_StaleGets, ("linearizability",), ()),
        (
            _LostPuts,
            ("own-writes",),
            ("linearizability", "queries", "counts", "snapshots", "final"),
        ),
        (_CountOff, ("counts",), ()),
        # a "snapshot" read again later sees later writes; whether a later read of
        # it also lands after a newer read of another thread (a new-old
        # inversion, "linearizability") depends on the interleaving
        (_LiveSnapshot, ("snapshots",), ("linearizability",)),
    ],
)
def test_broken_indexes_are_detected(
    make: Any, must: tuple[str, ...], may: tuple[str, ...]
) -> None:
    rep, _ = _broken_run(lambda d, space: make(d))
    assert all(rep.counts[c] > 0 for c in must), rep.counts
    assert failing(rep) <= {*must, *may}, rep.violations[:3]


def test_torn_queries_are_detected() -> None:
    """Queries that read the live index topic by topic, torn on purpose while
    another thread writes (see _TornQueries): every forced tear is flagged."""
    rep, index = _broken_run(lambda d, space: _TornQueries(d, space.topics), shared=0)
    assert index.forced == _TornQueries.TEARS, (index.attempts, index.forced)
    assert rep.counts["queries"] == index.forced and failing(rep) == {"queries"}, rep.violations
    assert "is not one state of the index" in rep.violations[0].message


def test_the_honest_index_passes_the_same_runs() -> None:
    rep, _ = _broken_run(lambda d, space: _Proxy(d))
    assert rep.ok, rep.violations[:3]


def test_values_from_the_future_injected_into_a_real_run_are_flagged() -> None:
    """A real recorded run passes; then in some query answers one topic's
    value is replaced by (or added as) the value of a put of that topic that
    began only after the query returned: each such answer must be flagged."""
    from stress.harness.clock import make_clock
    from stress.harness.progress import Progress

    space = build_space("mqtt", 64, 2, 11)
    clock = make_clock("auto")
    try:
        h = record_topics(space, 3000, 11, clock, Progress(False), "x", 50, 100)
    finally:
        clock.close()
    assert check_topics(h).ok
    puts = sorted(
        (g.inv[p], g.arg[p], put_value(g.thread, p))
        for g in h.logs
        for p in range(len(g))
        if g.kind[p] == PUT
    )
    injected = 0
    for g in h.logs:
        for p in range(g.n_initial, len(g)):
            if g.kind[p] != QUERY or injected >= 40 or p % 3:
                continue
            later = [
                (x, val) for inv, x, val in puts if inv > g.resp[p] and x in space.matches[g.arg[p]]
            ]
            if not later:
                continue
            x, val = later[0]
            pairs = [(y, w) for y, w in g.pairs(p) if y != x] + [(x, val)]
            g.result[p] = len(g.flat)
            g.flat.extend(flat_of(pairs))
            injected += 1
    assert injected >= 20
    rep = check_topics(h)
    assert rep.counts["queries"] == injected, rep.counts
    assert failing(rep) <= {"queries", "linearizability"}  # shared topics: the search too


# ---------------------------------------------------------------- end to end
def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main([*args, "--no-progress"])
    return code, capsys.readouterr().out


def test_end_to_end_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "topics.json"
    code, out = run_cli(
        [
            *"--scenario topics --thread-counts 2,3 --ops 4000 --snapshot-every 200 "
            "--seed 3".split(),
            *("--json", str(out_json)),
        ],
        capsys,
    )
    data = json.loads(out_json.read_text())
    assert code == 0, out
    assert "seed: 3" in out and "PASSED" in out
    assert data["passed"] is True and data["violations"] == 0 and data["scenario"] == "topics"
    assert [c["threads"] for c in data["checks"]] == [2, 3]
    for c in data["checks"]:
        st = c["stats"]
        assert c["ops"] == 4000 * c["threads"]
        assert st["kinds"]["snapshot"] == 20 * c["threads"]
        assert all(st["kinds"][k] > 0 for k in ("put", "remove", "pop", "get", "query", "count"))
        assert st["reads_contended"] > 0 and st["shared_events"] > 0


@pytest.mark.parametrize("dialect", ["amqp", "nats"])
def test_end_to_end_other_dialects(dialect: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(
        f"--scenario topics --dialect {dialect} --thread-counts 2 --ops 3000 --keys 128 "
        "--mix 70/30 --seed 4".split(),
        capsys,
    )
    assert code == 0, out


def test_end_to_end_with_perf_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(
        "--scenario topics --thread-counts 2 --ops 2000 --seed 5 --clock perf".split(), capsys
    )
    assert code == 0, out
    assert "perf_counter_ns" in out


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("--duration 1", "not --duration"),
        ("--keys 8 --thread-counts 8", "too few"),
        ("--shared-topics -1", "must be >= 0"),
        ("--mix 50/40", "add up to 100"),
        ("--no-check", "a checked run"),
    ],
)
def test_usage_errors(args: str, error: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--scenario", "topics", *args.split(), "--no-progress"]) == 2
    assert error in capsys.readouterr().err
