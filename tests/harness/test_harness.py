"""Tests of the stress harness's checker (stress/harness) on hand-made histories.

Linearizable histories must pass; each kind of violation must be detected with
a message naming the operations involved.  Plus small end-to-end runs of the
harness command (2 threads, a few thousand operations).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stress.harness import cli, impls, report  # noqa: E402
from stress.harness.checker import check_history  # noqa: E402
from stress.harness.history import History, SnapshotView, ThreadHistory  # noqa: E402
from stress.harness.workload import (  # noqa: E402
    BASE,
    CROWD_TOPICS,
    LOOKUP,
    LOOKUP_MANY,
    SNAPSHOT,
    SUBSCRIBE,
    UNSUBSCRIBE,
    Mix,
    build_keyspace,
    generate_ops,
    make_keyspace,
)

# Patterns 0..2, topics 0..2.  Subscribers: 0 owned by thread 0 ('a.*'),
# 1 owned by thread 1 ('a.b'), 2 shared ('a.*' bit 0, 'c.#' bit 1),
# 3 owned by thread 0 ('a.*' bit 0, 'c.#' bit 1).  lookup_many batches:
# 0 = ['a.b', 'a.x'], 1 = ['a.b', 'a.b'].
PATTERNS = ["a.*", "a.b", "c.#"]
TOPICS = ["a.b", "a.x", "c.d"]
A_B, A_X, C_D = 0, 1, 2
BATCHES = [(A_B, A_X), (A_B, A_B)]


def keyspace(n_threads: int = 2) -> Any:
    return make_keyspace(
        "amqp",
        PATTERNS,
        TOPICS,
        [(0,), (1,), (0, 2), (0, 2)],
        [0, 1, -1, 0],
        n_threads,
        batches=BATCHES,
    )


class Rec:
    """Builds one thread's history with readable calls."""

    def __init__(self, thread: int) -> None:
        self.h = ThreadHistory(thread)

    def sub(self, s: int, bit: int, inv: int, resp: int, result: bool) -> Rec:
        self.h.add(SUBSCRIBE, s, bit, inv, resp, result)
        return self

    def unsub(self, s: int, bit: int, inv: int, resp: int, result: bool) -> Rec:
        self.h.add(UNSUBSCRIBE, s, bit, inv, resp, result)
        return self

    def lookup(self, topic: int, inv: int, resp: int, subs: list[int]) -> Rec:
        self.h.add(LOOKUP, topic, 0, inv, resp, [BASE + s for s in subs])
        return self

    def many(self, batch: int, inv: int, resp: int, rows: list[list[int]]) -> Rec:
        self.h.add(LOOKUP_MANY, batch, 0, inv, resp, [[BASE + s for s in row] for row in rows])
        return self

    def snap(self, inv: int, resp: int, pairs: list[tuple[int, int]], topic: int = A_B) -> Rec:
        ks = keyspace()
        pp = [(PATTERNS[ks.cands[s][b]], BASE + s) for s, b in pairs]
        self.h.add(SNAPSHOT, topic, 0, inv, resp, SnapshotView(pp, len(pp), None))
        return self


def history(*recs: Rec, final: list[tuple[int, int]] | None = None, n: int = 2) -> History:
    ks = keyspace(n)
    threads = [r.h for r in recs]
    pairs = None
    if final is not None:
        pairs = [(PATTERNS[ks.cands[s][b]], BASE + s) for s, b in final]
    return History(
        ks, threads, final_pairs=pairs, final_length=None if pairs is None else len(pairs)
    )


def messages(rep: Any, check: str) -> list[str]:
    return [v.message for v in rep.violations if v.check == check]


def only(rep: Any, check: str, also: frozenset[str] = frozenset()) -> str:
    """The failing checks are ``check`` (and maybe some of ``also``); returns the
    messages of ``check`` joined."""
    failing = {k for k, v in rep.counts.items() if v}
    assert check in failing and failing <= {check} | also, rep.violations
    return "\n".join(messages(rep, check))


# ------------------------------------------------------------------ passing
def test_linearizable_history_passes() -> None:
    t0 = (
        Rec(0)
        .sub(0, 0, 1, 2, True)
        .lookup(A_B, 5, 8, [0])  # s1's subscribe [3, 6] is concurrent: not seeing it is fine
        .sub(2, 0, 9, 12, True)
        .lookup(A_X, 13, 14, [0, 2])
        .unsub(0, 0, 15, 16, True)
        .lookup(A_X, 17, 18, [2])
    )
    t1 = (
        Rec(1)
        .sub(1, 0, 3, 6, True)
        .lookup(A_B, 7, 8, [0, 1])
        .sub(2, 0, 10, 11, False)  # concurrent with t0's subscribe [9, 12]: t0 first
        .snap(19, 20, [(1, 0), (2, 0)])
    )
    rep = check_history(history(t0, t1, final=[(1, 0), (2, 0)]))
    assert rep.ok, rep.violations
    assert rep.stats["snapshots"] == 1


def test_concurrent_subscribe_true_twice_with_unsubscribe_between_passes() -> None:
    # t0's long subscribe [1, 10] linearizes first, then t1 unsubscribes and
    # subscribes again: True, True, True is explainable.
    t0 = Rec(0).sub(2, 0, 1, 10, True)
    t1 = Rec(1).unsub(2, 0, 2, 3, True).sub(2, 0, 4, 5, True)
    assert check_history(history(t0, t1, final=[(2, 0)])).ok


def test_concurrent_reads_either_side_of_a_write_pass() -> None:
    t1 = Rec(1).sub(1, 0, 1, 10, True)
    t0 = Rec(0).lookup(A_B, 2, 3, []).lookup(A_B, 4, 5, [1]).lookup(A_B, 11, 12, [1])
    assert check_history(history(t0, t1)).ok


def test_snapshot_during_updates_passes() -> None:
    # The snapshot [2, 9] may or may not include each concurrent update, as long
    # as one instant explains it: here s0 (done at 3) in, s1 (started at 6) out.
    t0 = Rec(0).sub(0, 0, 1, 3, True)
    t1 = Rec(1).snap(2, 9, [(0, 0)]).sub(1, 0, 10, 11, True)
    assert check_history(history(t0, t1)).ok


# ---------------------------------------------------------------- violations
def test_stale_read_after_own_write_is_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True).lookup(A_B, 3, 4, [])
    msg = only(check_history(history(t0, Rec(1))), "own-writes")
    assert "thread 0 op #1 matcher.lookup('a.b')" in msg
    assert "missed its own subscriber 1000000" in msg
    assert "thread 0 op #0 subscribe('a.*', 1000000) -> True" in msg


def test_own_unsubscribe_not_seen_is_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True).unsub(0, 0, 3, 4, True).lookup(A_X, 5, 6, [0])
    msg = only(check_history(history(t0, Rec(1))), "own-writes")
    assert "op #2" in msg and "saw its own subscriber 1000000" in msg
    assert "op #1 unsubscribe('a.*', 1000000)" in msg


def test_own_subscribe_returning_true_twice_is_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True).sub(0, 0, 3, 4, True)
    rep = check_history(history(t0, Rec(1)))
    assert rep.counts["linearizability"] == 1  # (c) sees it too
    msg = "\n".join(messages(rep, "own-writes"))
    assert "thread 0 op #1 subscribe('a.*', 1000000) -> True" in msg
    assert "thread 0 op #0 subscribe" in msg and "must return False" in msg


def test_shared_subscribe_returning_true_twice_is_detected() -> None:
    t0 = Rec(0).sub(2, 0, 1, 2, True)
    t1 = Rec(1).sub(2, 0, 3, 4, True)
    msg = only(check_history(history(t0, t1)), "linearizability")
    assert "subscriber 1000002 (shared)" in msg
    assert "thread 1 op #0 subscribe('a.*', 1000002) -> True" in msg
    assert "thread 0 op #0 subscribe('a.*', 1000002) -> True" in msg  # the earlier one


def test_lookup_seeing_a_key_never_added_is_detected() -> None:
    # s1 ('a.b', owned by thread 1) is never subscribed, yet thread 0 sees it.
    t0 = Rec(0).lookup(A_B, 1, 2, [1])
    msg = only(check_history(history(t0, Rec(1), final=[])), "linearizability")
    assert "subscriber 1000001 (owned by thread 1)" in msg
    assert "thread 0 op #0 matcher.lookup('a.b') -> [1000001]" in msg


def test_lookup_seeing_an_impossible_subscriber_is_detected() -> None:
    # s0's only pattern 'a.*' cannot match 'c.d'; 1000099 was never a subscriber.
    t0 = Rec(0).sub(0, 0, 1, 2, True).lookup(C_D, 3, 4, [0]).lookup(A_B, 5, 6, [0, 99])
    msg = only(check_history(history(t0, Rec(1))), "results")
    assert "op #1 matcher.lookup('c.d')" in msg and "none of its patterns" in msg
    assert "op #2" in msg and "saw 1000099: it is not a subscriber this run ever added" in msg


def test_duplicate_in_lookup_result_is_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True)
    t0.h.add(LOOKUP, A_B, 0, 3, 4, [BASE, BASE])
    assert "more than once" in only(check_history(history(t0, Rec(1))), "results")


def test_new_old_inversion_is_detected() -> None:
    # While t1's subscribe [1, 10] is in flight, t0 sees it and then, later,
    # does not: no single instant for the subscribe explains both.
    t1 = Rec(1).sub(1, 0, 1, 10, True)
    t0 = Rec(0).lookup(A_B, 2, 3, [1]).lookup(A_B, 4, 5, [])
    msg = only(check_history(history(t0, t1)), "linearizability")
    assert "thread 0 op #1 matcher.lookup('a.b') -> []" in msg
    assert "thread 1 op #0 subscribe('a.b', 1000001)" in msg


def test_read_after_completed_unsubscribe_is_detected() -> None:
    t1 = Rec(1).sub(2, 0, 1, 2, True).unsub(2, 0, 3, 4, True)
    t0 = Rec(0).lookup(A_X, 5, 6, [2])
    msg = only(check_history(history(t0, t1)), "linearizability")
    assert "thread 0 op #0 matcher.lookup('a.x') -> [1000002]" in msg
    assert "thread 1 op #1 unsubscribe('a.*', 1000002) -> True" in msg


def test_snapshot_mixing_two_writers_states_is_detected() -> None:
    # Writer 0's subscribe completed (at 3) before writer 1's began (at 5); the
    # snapshot [1, 10] shows writer 1's but not writer 0's: each part alone is
    # a real state, together they are not.
    t0 = Rec(0).sub(0, 0, 2, 3, True)
    t1 = Rec(1).sub(1, 0, 5, 6, True)
    t2 = Rec(2).snap(1, 10, [(1, 0)])
    msg = only(check_history(history(t0, t1, t2, n=3)), "snapshots")
    assert "thread 2 op #0 snapshot()" in msg and "mixes states" in msg


def test_snapshot_in_a_state_never_passed_through_is_detected() -> None:
    # Writer 0 added 'a.*' then 'c.#' for subscriber 3; a later snapshot shows
    # only 'c.#': no prefix of writer 0's updates gives that.
    t0 = Rec(0).sub(3, 0, 1, 2, True).sub(3, 1, 3, 4, True)
    t1 = Rec(1).snap(5, 6, [(3, 1)])
    msg = "\n".join(messages(check_history(history(t0, t1)), "snapshots"))
    assert "thread 1 op #0 snapshot()" in msg
    assert "not a state the trie passed through" in msg
    assert "1000003: snapshot has {'c.#'}, replay has {'a.*', 'c.#'}" in msg


def test_snapshot_missing_own_update_is_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True).snap(3, 4, [])
    # (c) sees it too: snapshot contents are observations of every subscriber.
    msg = only(check_history(history(t0, Rec(1))), "snapshots", frozenset({"linearizability"}))
    assert "thread 0 op #1 snapshot()" in msg and "after its update thread 0 op #0" in msg


def test_snapshot_len_and_lookup_must_agree_with_contents() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True)
    pairs = [("a.*", BASE)]
    t0.h.add(SNAPSHOT, A_B, 0, 3, 4, SnapshotView(pairs, 2, []))
    msg = only(check_history(history(t0, Rec(1))), "snapshots")
    assert "len(snapshot) is 2 but iterating it gave 1" in msg
    assert "snapshot.lookup('a.b') returned [] but the snapshot's own pairs give [1000000]" in msg


def test_final_state_and_invariants_are_checked() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True)
    h = history(t0, Rec(1), final=[])
    h.invariant_error = "cstrie invariant broken: tomb left behind"
    msg = "\n".join(messages(check_history(h), "final"))
    assert "tomb left behind" in msg
    assert "subscriber 1000000 (owned by thread 0) ends as {}" in msg


def test_operation_errors_are_reported() -> None:
    from stress.harness.history import OpError

    t0 = Rec(0)
    t0.h.add(LOOKUP, A_B, 0, 1, 2, OpError("RuntimeError('boom')"))
    msg = only(check_history(history(t0, Rec(1))), "results")
    assert "raised RuntimeError('boom')" in msg
    t1 = Rec(1)
    t1.h.add(SNAPSHOT, A_B, 0, 3, 4, OpError("reading the snapshot: KeyError(7)"))
    msg = only(check_history(history(Rec(0), t1)), "snapshots")
    assert "thread 1 op #0 snapshot() -> raised reading the snapshot: KeyError(7)" in msg


# ---------------------------------------------------------------- lookup_many
def test_lookup_many_rows_at_different_instants_pass() -> None:
    # Rows are separate lookups: row 0 before t1's subscribe [3, 6], row 1
    # after it, both inside the call [1, 10].
    t1 = Rec(1).sub(1, 0, 3, 6, True)
    t0 = Rec(0).many(1, 1, 10, [[], [1]]).many(0, 11, 12, [[1], []])
    rep = check_history(history(t0, t1, final=[(1, 0)]))
    assert rep.ok, rep.violations
    assert rep.stats["lookup_many_rows"] == 4 and rep.stats["lookup_many_largest_row"] == 1


def test_lookup_many_row_missing_a_subscriber_held_for_the_whole_call_is_detected() -> None:
    t1 = Rec(1).sub(1, 0, 1, 2, True)
    t0 = Rec(0).many(0, 3, 10, [[], []])
    rep = check_history(history(t0, t1))
    msg = only(rep, "rows", frozenset({"linearizability"}))
    assert "thread 0 op #0 trie.lookup_many(['a.b', 'a.x']) row 0 ('a.b')" in msg
    assert "1 missing that held a matching pattern for the whole call [1000001]" in msg
    assert "since thread 1 op #0 subscribe('a.b', 1000001) -> True" in msg
    # (c) sees it too, naming the row.
    assert "row 0 ('a.b') -> 0 subscribers" in "\n".join(messages(rep, "linearizability"))


def test_lookup_many_row_of_no_single_instant_is_detected() -> None:
    # Thread 0 unsubscribes 1000000, then subscribes 1000003, both during the
    # call; the row shows both: before the first update and after the second.
    # Each subscriber alone is linearizable, so only (d) sees it.
    t0 = Rec(0).sub(0, 0, 1, 2, True).unsub(0, 0, 4, 5, True).sub(3, 0, 6, 7, True)
    t1 = Rec(1).many(0, 3, 20, [[0, 3], [0, 3]])
    msg = only(check_history(history(t0, t1)), "rows")
    assert "thread 1 op #0 trie.lookup_many(['a.b', 'a.x']) row 0 ('a.b')" in msg
    assert "1000000 (in the row) puts the row before thread 0 op #1 unsubscribe" in msg
    assert "1000003 (in the row) puts it after thread 0 op #2 subscribe" in msg


def test_lookup_many_row_mixing_two_writers_states_is_detected() -> None:
    # Writer 0's subscribe completed (at 3) before writer 1's began (at 5); the
    # row [1, 10] shows writer 1's but not writer 0's.
    t0 = Rec(0).sub(0, 0, 2, 3, True)
    t1 = Rec(1).sub(1, 0, 5, 6, True)
    t2 = Rec(2).many(1, 1, 10, [[1], [0, 1]])
    msg = only(check_history(history(t0, t1, t2, n=3)), "rows")
    assert "thread 2 op #0 trie.lookup_many(['a.b', 'a.b']) row 0 ('a.b')" in msg
    assert "mixes states" in msg and "row 1" not in msg


def test_lookup_many_row_errors_are_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True).many(1, 3, 4, [[0, 0], [0]]).many(1, 5, 6, [[0]])
    msg = only(check_history(history(t0, Rec(1))), "results")
    assert "op #1 trie.lookup_many(['a.b', 'a.b']) row 0 ('a.b') -> 2 subscribers" in msg
    assert "returned [1000000] more than once" in msg and "row 1" not in msg
    assert "op #2 trie.lookup_many(['a.b', 'a.b']) -> <rows of 1 subscribers>" in msg
    assert "returned something else than 2 rows" in msg


def test_lookup_many_row_missing_own_subscriber_is_detected() -> None:
    t0 = Rec(0).sub(0, 0, 1, 2, True).many(0, 3, 4, [[], [0]])
    msg = only(check_history(history(t0, Rec(1))), "own-writes", frozenset({"rows"}))
    assert "op #1 trie.lookup_many(['a.b', 'a.x']) row 0 ('a.b')" in msg
    assert "missed 1 of its own subscribers: 1000000 holds {'a.*'}" in msg
    assert "after thread 0 op #0 subscribe('a.*', 1000000) -> True" in msg


# ------------------------------------------------------------------ workload
def test_op_sequences_are_deterministic_per_seed() -> None:
    ks = build_keyspace("mqtt", 200, 2, seed=7)
    again = build_keyspace("mqtt", 200, 2, seed=7)
    assert ks.patterns == again.patterns and ks.topics == again.topics
    a = generate_ops(ks, 1, 500, Mix.parse("50/50"), 50, seed=7)
    b = generate_ops(again, 1, 500, Mix.parse("50/50"), 50, seed=7)
    c = generate_ops(ks, 0, 500, Mix.parse("50/50"), 50, seed=7)
    assert (a.kind, a.arg, a.bit, a.initial) == (b.kind, b.arg, b.bit, b.initial)
    assert (a.kind, a.arg) != (c.kind, c.arg)
    assert a.kind.count(SNAPSHOT) == 10
    # Threads only ever write their own or shared subscribers.
    for seq in (a, c):
        for k, s in zip(seq.kind, seq.arg, strict=True):
            if k in (SUBSCRIBE, UNSUBSCRIBE):
                assert ks.owner[s] in (-1, seq.thread)


def test_crowd_keyspace_and_lookup_many_ops() -> None:
    plain = build_keyspace("mqtt", 200, 2, seed=7)
    ks = build_keyspace("mqtt", 200, 2, seed=7, crowd=300)
    # The ordinary key space is unchanged; ordinary lookups never see the crowd.
    n = len(plain.topics)
    assert ks.patterns[: len(plain.patterns)] == plain.patterns and ks.topics[:n] == plain.topics
    assert ks.cands[: len(plain.cands)] == plain.cands and ks.lookup_topics == n
    assert ks.topics[n:] == [f"crowd/{j}" for j in range(CROWD_TOPICS)]
    crowd = range(len(plain.cands), len(ks.cands))
    assert len(crowd) == 300 and {ks.owner[s] for s in crowd} == {-1, 0, 1}
    for ti in range(n, len(ks.topics)):  # every crowd subscriber matches every crowd topic
        assert {s for s, _ in ks.interest[ti]} >= set(crowd)
    assert all(set(b) >= set(range(n, len(ks.topics))) for b in ks.batches)
    mix = Mix.parse("50/50")
    for t in range(2):
        seq = generate_ops(ks, t, 400, mix, 0, seed=7, many_every=20)
        many = [i for i, k in enumerate(seq.kind) if k == LOOKUP_MANY]
        assert len(many) == 20 and {i % 20 for i in many} == {(19 - 10 * t) % 20}
        assert all(0 <= seq.arg[i] < len(ks.batches) for i in many)
        assert all(a < n for k, a in zip(seq.kind, seq.arg, strict=True) if k == LOOKUP)
    with pytest.raises(ValueError, match="crowd"):
        generate_ops(plain, 0, 10, mix, 0, seed=7, many_every=5)


@pytest.mark.parametrize("text", ["90/20", "abc", "-10/110", "90"])
def test_bad_mix_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="mix"):
        Mix.parse(text)


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_keyspace_interest_agrees_with_the_oracle(dialect: str) -> None:
    import oracle

    ks = build_keyspace(dialect, 120, 2, seed=3)
    for ti, topic in enumerate(ks.topics):
        want = {}
        for s, cands in enumerate(ks.cands):
            mask = sum(
                1 << b
                for b, p in enumerate(cands)
                if oracle.matches(ks.dialect, ks.patterns[p], topic)
            )
            if mask:
                want[s] = mask
        assert dict(ks.interest[ti]) == want, topic


# --------------------------------------------------------------- end to end
def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main([*args, "--no-progress"])
    return code, capsys.readouterr().out


def test_end_to_end_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "report.json"
    code, out = run_cli(
        [
            *"--thread-counts 1,2 --ops 3000 --mix 70/30 --snapshot-every 250 --keys 128 "
            "--seed 11 --baselines --check-baselines".split(),
            *("--json", str(out_json)),
        ],
        capsys,
    )
    data = json.loads(out_json.read_text())
    assert code == 0, out
    assert "seed: 11" in out and "PASSED" in out
    assert data["passed"] is True and data["seed"] == 11
    assert isinstance(data["gil_enabled"], bool)
    assert {c["impl"] for c in data["checks"]} == {"cstrie", "locked", "pytrie"}
    assert all(c["violations"] == 0 for c in data["checks"])
    assert {r["impl"] for r in data["throughput"]} == {"cstrie", "locked", "pytrie"}
    assert set(data["ratios"]["cstrie"]) == {"2/1"}
    two = next(c for c in data["checks"] if c["threads"] == 2 and c["impl"] == "cstrie")
    assert two["ops"] >= 6000 and two["stats"]["snapshots"] == 24


def test_end_to_end_mqtt_with_perf_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(
        "--thread-counts 2 --ops 2000 --dialect mqtt --mix 50/50 --snapshot-every 400 "
        "--keys 64 --seed 3 --no-measure --clock perf".split(),
        capsys,
    )
    assert code == 0, out
    assert "perf_counter_ns" in out


class _StaleImpl(impls.CstrieImpl):
    """A broken 'implementation': lookups answer from a per-thread cache that
    updates never invalidate."""

    def bind(self, trie: Any) -> impls.Bound:
        b = super().bind(trie)
        cache: dict[str, list[Any]] = {}
        inner = b.lookup

        def lookup(topic: str) -> list[Any]:
            if topic not in cache:
                cache[topic] = inner(topic)
            return list(cache[topic])

        b.lookup = lookup
        return b


def test_end_to_end_broken_implementation_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(impls.IMPLS, "cstrie", _StaleImpl())
    code, out = run_cli(
        "--thread-counts 2 --ops 2000 --mix 50/50 --keys 64 --seed 1 --no-measure".split(),
        capsys,
    )
    assert code == 1, out
    assert "VIOLATION [own-writes]" in out and "FAILED" in out


class _RacyImpl(impls.CstrieImpl):
    """A broken 'implementation': subscribe/unsubscribe answer from a check made
    before the update (check-then-act), so racing updates of a shared pair can
    both return True."""

    def bind(self, trie: Any) -> impls.Bound:
        b = super().bind(trie)

        def subscribe(pattern: str, sub: Any) -> bool:
            was = sub in trie.subscribers(pattern)
            time.sleep(0.0002)  # widen the window
            trie.subscribe(pattern, sub)
            return not was

        def unsubscribe(pattern: str, sub: Any) -> bool:
            was = sub in trie.subscribers(pattern)
            time.sleep(0.0002)
            trie.unsubscribe(pattern, sub)
            return was

        b.subscribe, b.unsubscribe = subscribe, unsubscribe
        return b


def test_end_to_end_check_then_act_race_is_detected(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(impls.IMPLS, "cstrie", _RacyImpl())
    code, out = run_cli(
        "--thread-counts 2 --ops 1500 --mix 20/80 --keys 16 --seed 1 --no-measure".split(),
        capsys,
    )
    assert code == 1, out
    assert "VIOLATION [linearizability]" in out and "(shared)" in out


# The lookup_many scenario: rows of ~1,300-1,700 subscribers (more than the
# 1024 ids one engine call of Trie.lookup_many returns), 5-9 rows per call,
# while the other thread subscribes and unsubscribes the same crowd patterns.
MANY_ARGS = (
    "--thread-counts 2 --ops 1500 --mix 50/50 --many-every 20 --many-subs 3000 --keys 128 "
    "--seed 5 --no-measure"
).split()


def run_many(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Any]:
    out_json = tmp_path / "many.json"
    code, out = run_cli([*MANY_ARGS, "--json", str(out_json)], capsys)
    (check,) = json.loads(out_json.read_text())["checks"]
    assert check["stats"]["lookup_many_rows"] > 500, out
    assert check["stats"]["lookup_many_largest_row"] > 1024, out
    return code, out, check


class _PerRowImpl(impls.CstrieImpl):
    """lookup_many as one Trie.lookup per topic: each row one state, what the
    engine must give."""

    def bind(self, trie: Any) -> impls.Bound:
        b = super().bind(trie)
        lookup = trie.lookup
        b.lookup_many = lambda topics: [lookup(t) for t in topics]
        return b


def test_end_to_end_lookup_many_rows_of_one_state_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(impls.IMPLS, "cstrie", _PerRowImpl())
    code, out, check = run_many(tmp_path, capsys)
    assert code == 0, out
    assert check["violations"] == 0 and check["by_check"]["rows"] == 0


def test_end_to_end_lookup_many_rows_are_one_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, check = run_many(tmp_path, capsys)
    assert check["violations"] == 0, "\n".join(
        line for line in out.splitlines() if "FAIL" in line or "VIOLATION" in line
    )[:4000]
    assert code == 0, out


def test_bad_many_every_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--many-every", "-1", "--no-progress"]) == 2
    assert "--many-every must be >= 0" in capsys.readouterr().err


def test_gil_enabled_on_free_threaded_build_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = report.environment

    def fake() -> dict[str, Any]:
        env = real()
        env.update(free_threaded_build=True, gil_enabled=True)
        return env

    monkeypatch.setattr(report, "environment", fake)
    code = cli.main(["--thread-counts", "1", "--ops", "10", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "GIL is enabled" in err and "PYTHON_GIL=0" in err


def test_progress_bar_draws(capsys: pytest.CaptureFixture[str]) -> None:
    from stress.harness.progress import Counter, Progress

    p = Progress(True)
    p.interval = 0.0
    c = Counter()
    p.watch("x", [c], 100, None)
    c.done = 50
    threading.Event().wait(0.6)
    p.done()
    assert "ops/s" in capsys.readouterr().err


# ======================================================== groups scenario
# Hand-made histories of stress/harness/groups.py's design (MQTT): every check
# of stress/harness/group_checker.py must pass a linearizable history and
# catch its kind of violation; then broken tries end to end, and a quick run.
from array import array  # noqa: E402

from cstrie.groups import Shared  # noqa: E402
from stress.harness import groups as gs  # noqa: E402
from stress.harness.group_checker import check_groups, check_round_robin  # noqa: E402

SPACE = gs.build_space("mqtt", 1)  # one churner owns every churned slot
G_TOPIC = {t: i for i, t in enumerate(SPACE.topics)}
A_TEMP, B_TEMP, A_ALARM, B_ALARM = (
    G_TOPIC[t] for t in ("g/a/temp", "g/b/temp", "g/a/x/alarm", "g/b/x/alarm")
)
GCOL = {g: i for i, g in enumerate(SPACE.groups)}


def gslot(group: str, filt: str, label: str) -> int:
    key = next(k for k, f in SPACE.filters.items() if f == filt)
    want = (GCOL[group], key, SPACE.labels.index(label))
    return next(s for s, (g, f, m, _) in enumerate(SPACE.slots) if (g, f, m) == want)


def gm(label: str) -> int:
    return gs.BASE + SPACE.labels.index(label)


F1 = gslot("flaky", "g/+/+/alarm", "f1")
F2 = gslot("flaky", "g/+/+/alarm", "f2")
T2 = gslot("twin", "g/#", "t2")


class GRec:
    """A groups history built by hand: churn ops (one thread), routes (one
    router), snapshots; the final state follows the replay unless given."""

    def __init__(self) -> None:
        self.churn = gs.ChurnLog(1)
        self.router = gs.RouterLog(0)
        self.snaps: list[gs.SnapshotRecord] = []
        self.present: set[int] = set()

    def op(self, s: int, join: bool, inv: int, resp: int, result: bool | None = None) -> GRec:
        changed = (s in self.present) != join
        c = self.churn
        c.slot.append(s)
        c.kind.append(gs.JOIN if join else gs.LEAVE)
        c.inv.append(inv)
        c.resp.append(resp)
        c.result.append(int(changed if result is None else result))
        (self.present.add if join else self.present.discard)(s)
        return self

    def route(self, topic: int, inv: int, resp: int, chosen: dict[str, str]) -> GRec:
        """route_by_group(topic) -> (ordinary as expected, chosen)."""
        row = [-1] * SPACE.n_groups
        for g, label in chosen.items():
            row[GCOL[g]] = SPACE.labels.index(label)
        return self._add(topic, 0, inv, resp, row)

    def plain(self, topic: int, inv: int, resp: int, members: list[str]) -> GRec:
        """route(topic) -> ordinary as expected, then these members."""
        row = [SPACE.labels.index(x) for x in members]
        return self._add(topic, gs.PLAIN, inv, resp, row + [-1] * (SPACE.n_groups - len(row)))

    def _add(self, topic: int, flags: int, inv: int, resp: int, row: list[int]) -> GRec:
        r = self.router
        r.topic.append(topic)
        r.flags.append(flags)
        r.inv.append(inv)
        r.resp.append(resp)
        r.picks.extend(array("h", row))
        return self

    def snap(self, inv: int, resp: int, slots: set[int], routes: list[Any] | None = None) -> GRec:
        pairs = self._pairs(slots | {s for s, (_, _, _, a) in enumerate(SPACE.slots) if a})
        self.snaps.append(gs.SnapshotRecord(0, 0, inv, resp, pairs, len(pairs), routes or []))
        return self

    @staticmethod
    def _pairs(slots: set[int]) -> list[tuple[Any, Any]]:
        pairs: list[tuple[Any, Any]] = [(SPACE.filters[f], gs.BASE + s) for f, s in SPACE.ordinary]
        for s in sorted(slots):
            g, f, m, _ = SPACE.slots[s]
            pairs.append((Shared(SPACE.filters[f], SPACE.groups[g]), gs.BASE + m))
        return pairs

    def history(self, final: set[int] | None = None) -> gs.GroupHistory:
        anchors = [(s, 1, 2) for s, (_, _, _, a) in enumerate(SPACE.slots) if a]
        held = self.present if final is None else final
        pairs = self._pairs(held | {s for s, _, _ in anchors})
        expected = [[*e] for e in SPACE.expected]
        return gs.GroupHistory(
            space=SPACE,
            clock="atomics",
            anchors=anchors,
            routers=[self.router],
            churners=[self.churn],
            snapshots=self.snaps,
            final_pairs=pairs,
            final_length=len(pairs),
            final_stats={"shared_subscriptions": len(pairs) - len(SPACE.ordinary)},
            invariant_error=None,
            lookup_before=expected,
            lookup_after=expected,
        )


def snap_routes(slots: set[int]) -> list[Any]:
    """Right answers of routes on a snapshot holding these slots and the
    anchors: (route_by_group, route) per topic, each group's first member."""
    held = slots | {s for s, (_, _, _, a) in enumerate(SPACE.slots) if a}
    out = []
    for ti in range(len(SPACE.topics)):
        chosen: dict[str, int] = {}
        for s in sorted(held):
            g, f, m, _ = SPACE.slots[s]
            if f in SPACE.matching[ti]:
                chosen.setdefault(SPACE.groups[g], gs.BASE + m)
        ordinary = SPACE.expected[ti]
        out.append(((list(ordinary), chosen), [*ordinary, *chosen.values()]))
    return out


def gonly(rep: Any, check: str) -> str:
    failing = {k for k, v in rep.counts.items() if v}
    assert failing == {check}, rep.violations
    return "\n".join(v.message for v in rep.violations if v.check == check)


def test_groups_design_matches_the_rules() -> None:
    # The design's overlaps are what the scenario claims (PyTrie decides).
    assert SPACE.matching[A_TEMP] == {"F0", "F1", "F3", "F4"}
    assert SPACE.groups_of_topic[A_TEMP] == [GCOL[g] for g in ("anchored", "span", "wide", "twin")]
    assert SPACE.groups_of_topic[G_TOPIC["other/x"]] == []
    assert SPACE.expected[A_TEMP] == sorted(gm(x) for x in ("O1", "O2", "O4", "A1", "s1"))
    span = [s for s, (g, _, _, _) in enumerate(SPACE.slots) if g == GCOL["span"]]
    assert len({SPACE.slots[s][1] for s in span}) == 2  # one group over two filters
    two = gs.build_space("mqtt", 2)
    for g in ("anchored", "span", "flaky", "wide", "twin"):  # every churned group on both threads
        owners = [
            c for c, mine in enumerate(two.churn_slots) for s in mine if two.slots[s][0] == GCOL[g]
        ]
        assert set(owners) == {0, 1}, g
    nats = gs.build_space("nats", 1)
    assert nats.filters["F1"] == "g.a.>" and "F1" not in nats.matching[G_TOPIC["g/a"]]


def test_groups_linearizable_history_passes() -> None:
    h = (
        GRec()
        .op(F1, True, 10, 12)
        .route(B_ALARM, 11, 13, {})  # the join is in flight: empty is possible
        .route(B_ALARM, 14, 16, {"flaky": "f1"})
        .plain(B_ALARM, 17, 18, ["f1"])
        .route(A_TEMP, 19, 20, {"anchored": "A2", "span": "S0"})
        .plain(A_ALARM, 21, 22, ["S0", "f1"])  # f1 could be flaky's or twin's: flaky's
        .op(F1, False, 30, 32)
        .op(F1, False, 33, 34)  # a repeat: False
        .route(B_ALARM, 31, 40, {"flaky": "f1"})  # the leave is in flight
        .route(B_ALARM, 41, 42, {})
        .snap(35, 36, set())
    ).history()
    rep = check_groups(h)
    assert rep.ok, rep.violations
    assert rep.stats["messages"] == 7 and rep.stats["routed_plain"] == 2
    assert rep.stats["anchored_deliveries"] == 3


def test_groups_delivery_through_a_member_that_left_is_detected() -> None:
    h = GRec().op(F1, True, 10, 12).op(F1, False, 13, 14).route(B_ALARM, 15, 16, {"flaky": "f1"})
    msg = gonly(check_groups(h.history()), "deliveries")
    assert "router thread 0 message #0 route_by_group('g/b/x/alarm') [t=15..16]" in msg
    assert "'f1' (2000" in msg and "surely not a member of 'flaky'" in msg
    assert "thread 1 leave [t=13..14] -> True" in msg


def test_groups_delivery_through_a_non_member_is_detected() -> None:
    h = GRec().op(F1, True, 10, 12).route(B_ALARM, 15, 16, {"flaky": "w0"})
    msg = gonly(check_groups(h.history()), "deliveries")
    assert "'w0'" in msg and "never a member of 'flaky'" in msg
    h = GRec().route(B_TEMP, 15, 16, {"anchored": "A1", "flaky": "f1"})  # no F2 in g/b/temp
    assert "has no filter matching" in gonly(check_groups(h.history()), "deliveries")


def test_groups_missing_group_is_detected_only_when_surely_not_empty() -> None:
    h = GRec().op(F1, True, 10, 12).route(B_ALARM, 13, 14, {})
    msg = gonly(check_groups(h.history()), "missing")
    assert "group 'flaky' was not delivered" in msg and "'f1' on 'g/+/+/alarm'" in msg
    # The anchored group: missing it is always a violation.
    h = GRec().route(B_TEMP, 5, 6, {"span": "S0"})  # S0 is on g/a/#: not span's here
    msg = "\n".join(v.message for v in check_groups(h.history()).violations)
    assert "the anchored 'anchored' was not delivered" in msg
    assert "anchor since before the run" in msg


def test_groups_one_instant_for_the_whole_route_is_checked() -> None:
    # flaky via f1 fits only after f1's join began (cell 10); twin empty fits
    # only before t2's join ended (cells 6-7): each alone is fine, not both.
    h = GRec().op(T2, True, 4, 8).op(F1, True, 10, 12).route(B_ALARM, 6, 20, {"flaky": "f1"})
    msg = gonly(check_groups(h.history()), "instant")
    assert "no single instant fits every group" in msg
    ok = (
        GRec()
        .op(T2, True, 4, 8)
        .op(F1, True, 10, 12)
        .route(B_ALARM, 6, 20, {"flaky": "f1", "twin": "t2"})
    )
    assert check_groups(ok.history()).ok


def test_groups_a_group_twice_in_a_route_is_detected() -> None:
    h = GRec().plain(B_TEMP, 5, 6, ["A1", "A2"])
    msg = gonly(check_groups(h.history()), "once")
    assert "route('g/b/temp')" in msg and "a group delivered twice" in msg


def test_groups_wrong_return_value_of_a_join_is_detected() -> None:
    h = GRec().op(F1, True, 10, 12).op(F1, True, 13, 14, result=True)
    msg = gonly(check_groups(h.history()), "own-writes")
    assert "op #1 join 'f1' in 'flaky' on 'g/+/+/alarm' [t=13..14] -> True" in msg
    assert "must return False" in msg


def test_groups_snapshots_are_checked() -> None:
    base = GRec().op(F1, True, 10, 12).op(F1, False, 20, 22).op(F2, True, 24, 26)
    assert check_groups(base.snap(19, 30, set()).history()).ok  # between the two
    msg = gonly(check_groups(base.snap(19, 30, {F1, F2}).history()), "snapshots")
    assert "mixes states" in msg
    msg = gonly(
        check_groups(GRec().op(F1, True, 10, 12).snap(13, 14, set()).history()), "snapshots"
    )
    assert "lacks 'f1' in 'flaky'" in msg and "alone" in msg
    routes = [(([], {}), [])] * len(SPACE.topics)  # every group missed, ordinary too
    msg = gonly(check_groups(GRec().snap(3, 4, set(), routes).history()), "snapshots")
    assert "snapshot.route_by_group('g/a/temp') -> ([], {})" in msg
    # Routed again later (after the live trie changed): still its own groups only.
    late = GRec().snap(3, 4, set()).op(F1, True, 10, 12)
    right = snap_routes(set())
    late.snaps[0].late_routes = right
    assert check_groups(late.history()).ok
    wrong = list(right)
    wrong[B_ALARM] = ((SPACE.expected[B_ALARM], {"flaky": gm("f1")}), right[B_ALARM][1])
    late.snaps[0].late_routes = wrong  # f1 joined after the snapshot: not its member
    msg = gonly(check_groups(late.history()), "snapshots")
    assert "routed again later: snapshot.route_by_group('g/b/x/alarm')" in msg


def test_groups_final_state_is_checked() -> None:
    h = GRec().op(F1, True, 10, 12).history(final=set())
    msg = gonly(check_groups(h), "final")
    assert "'f1' in 'flaky' on 'g/+/+/alarm' is missing" in msg


def test_round_robin_floor_and_counter_are_checked() -> None:
    rr = gs.RoundRobinResult(
        messages=300,
        threads=2,
        seconds=0.1,
        policies={"rr": "round-robin", "rr-random": "random"},
        counts={"rr": {"r0": 100, "r1": 110, "r2": 90}, "rr-random": {"x0": 10, "x1": 290}},
        imbalance={"rr": 0.1, "rr-random": 0.93},
        counters={"rr": 301, "rr-random": 0},
        bad_messages=0,
        examples=[],
    )
    problems = check_round_robin(rr, 0.02)
    assert len(problems) == 2 and "imbalance 10.000% > 2%" in problems[0]
    assert "counter says 301 picks for 300 messages" in problems[1]
    assert check_round_robin(rr, 0.2) == problems[1:]  # random (93%) has no floor


# ---------------------------------------------- groups: broken tries, end to end
class _TrieProxy:
    """A cstrie.Trie to break one method of (delegates everything else)."""

    def __init__(self, dialect: Any) -> None:
        from cstrie import Trie

        self._t = Trie(dialect)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)

    def __iter__(self) -> Any:
        return iter(self._t)

    def __len__(self) -> int:
        return len(self._t)


class _StaleRoutes(_TrieProxy):
    """Routes answered from a per-thread cache that joins and leaves never clear."""

    def __init__(self, dialect: Any) -> None:
        super().__init__(dialect)
        self._cache = threading.local()

    def _cached(self, kind: str, topic: str, fn: Any) -> Any:
        c = self._cache.__dict__.setdefault(kind, {})
        if topic not in c:
            c[topic] = fn(topic)
        r = c[topic]
        return (list(r[0]), dict(r[1])) if kind == "g" else list(r)

    def route(self, topic: str, key: Any = None) -> Any:
        return self._cached("r", topic, self._t.route)

    def route_by_group(self, topic: str, key: Any = None) -> Any:
        return self._cached("g", topic, self._t.route_by_group)


class _AnchorDropped(_TrieProxy):
    def route_by_group(self, topic: str, key: Any = None) -> Any:
        ordinary, chosen = self._t.route_by_group(topic, key)
        chosen.pop("anchored", None)
        return ordinary, chosen


class _GroupTwice(_TrieProxy):
    def route(self, topic: str, key: Any = None) -> Any:
        r = self._t.route(topic) if key is None else self._t.route(topic, key)
        return r + r[-1:] if len(r) > len(self._t.lookup(topic)) else r


def _broken_run(make: Any) -> Any:
    from stress.harness.clock import make_clock
    from stress.harness.progress import Progress

    clock = make_clock("auto")
    try:
        h = gs.record_groups(
            gs.build_space("mqtt", 1), 1, 5000, 1, clock, Progress(False), "x", 500, 120.0, make
        )
    finally:
        clock.close()
    return check_groups(h)


# (broken try, checks that must fire, checks that may fire too).  A list with
# the member of two groups twice reads as a group twice or as a delivery of
# the other group through a non-member: either way a violation.
@pytest.mark.parametrize(
    ("make", "must", "may"),
    [
        (_StaleRoutes, ("deliveries", "missing"), ("instant",)),
        (_AnchorDropped, ("missing",), ("instant",)),
        (_GroupTwice, ("once",), ("deliveries", "instant")),
    ],
)
def test_groups_broken_tries_are_detected(
    make: Any, must: tuple[str, ...], may: tuple[str, ...]
) -> None:
    # A stale answer shows only where the churners' joins and leaves overlap
    # the routes, and on a loaded machine (the parallel suite on 2 cores) a
    # churner can sleep through a whole run of 5,000 routes: up to four runs,
    # each of which may fire only the expected checks.
    for _ in range(4):
        rep = _broken_run(make)
        assert {k for k, v in rep.counts.items() if v} <= {*must, *may}, rep.violations[:3]
        if sum(rep.counts[c] for c in must) > 0:
            break
    assert sum(rep.counts[c] for c in must) > 0, rep.counts


# The quick groups run (CI): the full one is 1,000,000 messages per thread
# count and 1,000,000 in the round-robin phase (stress/harness/group_cli.py).
def test_groups_end_to_end_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "groups.json"
    code, out = run_cli(
        [
            *"--scenario groups --thread-counts 2,3 --messages 6000 --rr-messages 30000 "
            "--snapshot-every 500 --seed 3".split(),
            *("--json", str(out_json)),
        ],
        capsys,
    )
    data = json.loads(out_json.read_text())
    assert code == 0, out
    assert data["passed"] is True and data["violations"] == 0
    assert [c["stats"]["messages"] for c in data["checks"]] == [6000, 6000]
    assert [(c["routers"], c["churners"]) for c in data["checks"]] == [(1, 1), (2, 1)]
    for c in data["checks"]:
        st = c["stats"]
        assert st["routed_plain"] == 1500 and st["churn_ops"] > 0
        assert st["anchored_deliveries"] > 1000 and st["snapshot_routes"] > 0
    rr = data["round_robin"]
    assert rr["messages"] == 30000 and rr["bad_messages"] == 0
    assert rr["max_round_robin_imbalance"] <= 0.02
    assert all(sum(m.values()) == 30000 for m in rr["counts"].values())


def test_groups_needs_a_router_and_a_churner(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--scenario", "groups", "--thread-counts", "1", "--no-progress"]) == 2
    assert "leave no router" in capsys.readouterr().err


# ------------------------------------------- one walk, one state of the trie
# A walk that read the branches of a topic at different moments could miss a
# group that is never empty in a route (each group fitting some instant of the
# call, no instant fitting them all: the "instant" check of the harness's
# groups scenario), or return [] from a lookup while one of two pairs is always
# there.  So a walk checks what it read and runs again (match.c, "One state of
# the trie for the whole walk"), and these tests read while a writer keeps one
# of two pairs at every instant.  Engine calls through cffi, which releases the
# GIL around them: the walk and the writer run at once on every build.
def _walk_while_writing(group: bool) -> tuple[int, int]:
    """(reads, reads that saw neither P1 nor P2) while a writer keeps one of
    them at every instant: join/subscribe P2, leave P1, join P1, leave P2."""
    from cstrie import _binding as nb
    from cstrie.dialect import resolve_dialect

    ffi, lib = nb.ffi, nb.lib
    h = ffi.gc(nb.new_trie_ptr(resolve_dialect("amqp")), lib.cst_free)
    heavy = ("t" + ".#" * 60 + ".z").encode()  # walked between the branches, never matches
    assert lib.cst_subscribe(h, heavy, len(heavy), 99) == 1
    p1, p2 = b"#", b"*.x.#"  # root's '#' is read first, '*' last, 't' (heavy) between
    topic = ("t.x" + ".a" * 200).encode()
    if group:  # members 11, 12 of group 7

        def add(p: bytes, m: int) -> int:
            return int(lib.cst_share_subscribe(h, p, len(p), 7, m))

        def drop(p: bytes, m: int) -> int:
            return int(lib.cst_share_unsubscribe(h, p, len(p), 7, m))
    else:

        def add(p: bytes, m: int) -> int:
            return int(lib.cst_subscribe(h, p, len(p), m))

        def drop(p: bytes, m: int) -> int:
            return int(lib.cst_unsubscribe(h, p, len(p), m))

    @ffi.callback("int(void *, uint64_t, uint64_t, uint64_t *)")
    def pick(arg: Any, share: int, n: int, k: Any) -> int:
        k[0] = 0
        return 0  # CST_PICK_INDEX

    out = ffi.new("uint64_t[]", 64)
    shares = ffi.new("uint64_t[]", 64)
    nplain = ffi.new("size_t *")

    def delivered() -> int:
        if group:
            n = lib.cst_route(h, topic, len(topic), pick, ffi.NULL, out, shares, 64, nplain)
            assert n >= 0
            return int(n - nplain[0])  # groups delivered
        n = lib.cst_lookup(h, topic, len(topic), out, 64)
        assert n >= 0
        return int(n)

    assert add(p1, 11) == 1 and delivered() == 1
    return _race(lambda: delivered() == 0, add, drop, p1, p2, 4000)


def _race(
    missed_now: Callable[[], bool],
    add: Callable[[bytes, int], object],
    drop: Callable[[bytes, int], object],
    p1: bytes,
    p2: bytes,
    limit: int,
) -> tuple[int, int]:
    """(reads, reads that missed) while a writer keeps 11 on p1 or 12 on p2
    at every instant: add p2, drop p1, add p1, drop p2, over and over."""
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            add(p2, 12)
            drop(p1, 11)
            add(p1, 11)
            drop(p2, 12)

    w = threading.Thread(target=writer)
    w.start()
    reads = missed = 0
    deadline = time.monotonic() + 8
    try:
        while reads < limit and not missed and time.monotonic() < deadline:
            reads += 1
            missed += missed_now()
    finally:
        stop.set()
        w.join()
    return reads, missed


def _rounds_while_writing() -> tuple[int, int]:
    """As _walk_while_writing, for a walk in rounds (native/match.c, "A walk in
    rounds"): an MQTT trie that counts as big, cst_lookup_warm, P1 = '#' (read
    in the first round) and P2, '+' then seven of the topic's words and '#'
    (read eight rounds later), with up to 256 branches in each round between:
    the patterns that take '+' or the topic's word at each of 8 levels, then a
    word the topic lacks."""
    from cstrie import _binding as nb
    from cstrie.dialect import resolve_dialect

    ffi, lib = nb.ffi, nb.lib
    lib.cst_debug_set_warm_pairs(0)
    try:
        h = ffi.gc(nb.new_trie_ptr(resolve_dialect("mqtt")), lib.cst_free)
        words = ["t", "x"] + ["a"] * 14
        for mask in range(256):  # never match the topic; widen every round
            b = "/".join(["+" if mask >> i & 1 else words[i] for i in range(8)] + ["zz"]).encode()
            assert lib.cst_subscribe(h, b, len(b), 100 + mask) == 1
        p1, p2 = b"#", "/".join(["+", *words[1:8], "#"]).encode()
        topic = "/".join(words).encode()
        out = ffi.new("uint64_t[]", 64)

        def delivered() -> int:
            n = lib.cst_lookup_warm(h, topic, len(topic), out, 64)
            assert n >= 0
            return int(n)

        assert lib.cst_subscribe(h, p1, len(p1), 11) == 1 and delivered() == 1
        return _race(
            lambda: delivered() == 0,
            lambda p, m: lib.cst_subscribe(h, p, len(p), m),
            lambda p, m: lib.cst_unsubscribe(h, p, len(p), m),
            p1,
            p2,
            20000,
        )
    finally:
        lib.cst_debug_set_warm_pairs(-1)


def test_lookup_in_rounds_is_one_state_across_branches() -> None:
    reads, missed = _rounds_while_writing()
    assert missed == 0, f"{missed} of {reads} lookups returned [] though a pair was always there"


def test_route_is_one_state_across_branches() -> None:
    reads, missed = _walk_while_writing(group=True)
    assert missed == 0, f"{missed} of {reads} routes delivered no member of a never-empty group"


def test_lookup_is_one_state_across_branches() -> None:
    reads, missed = _walk_while_writing(group=False)
    assert missed == 0, f"{missed} of {reads} lookups returned [] though a pair was always there"


def test_throughput_subscriber_kinds() -> None:
    """--subscribers: each thread's own new ints (their registered one is handed
    to every thread), or interned strings (immortal on 3.13t)."""
    import sys

    from stress.harness.runner import _ThreadObjects

    ks = build_keyspace("amqp", 32, 2, seed=1)
    seq = generate_ops(ks, 0, 200, Mix.parse("90/10"), 0, seed=1)
    ints = _ThreadObjects(ks, seq)
    again = _ThreadObjects(ks, seq)
    interned = _ThreadObjects(ks, seq, "interned")
    assert ints.initial and all(type(x) is int and x >= BASE for _, x in ints.initial)
    # equal ints, distinct objects: made by each thread, not shared
    assert all(
        x == y and x is not y for (_, x), (_, y) in zip(ints.initial, again.initial, strict=True)
    )
    assert all(type(x) is str and sys.intern(x) is x for _, x in interned.initial)


def test_end_to_end_throughput_with_interned_subscribers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "report.json"
    code, out = run_cli(
        [
            *"--thread-counts 1,2 --ops 2000 --mix 90/10 --keys 64 --seed 2 --no-check "
            "--subscribers interned".split(),
            *("--json", str(out_json)),
        ],
        capsys,
    )
    assert code == 0, out
    data = json.loads(out_json.read_text())
    assert data["config"]["subscribers"] == "interned"
    assert {r["threads"] for r in data["throughput"]} == {1, 2}
