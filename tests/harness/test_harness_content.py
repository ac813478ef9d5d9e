"""Tests of the stress harness's ``content`` scenario (stress/harness/content.py,
content_checker.py, content_cli.py).

The checker on hand-made histories (answers on one state of their call pass,
answers mixing two states, stale answers and answers the message does not
satisfy fail), then broken indexes run end to end through the same recorder
and checker (a stale match, a "snapshot" that is the live index, a bind that
reports False), and real runs through the command line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cstrie.content import ContentIndex, Eq, Has  # noqa: E402
from stress.harness import cli  # noqa: E402
from stress.harness.clock import make_clock  # noqa: E402
from stress.harness.content import (  # noqa: E402
    BIND,
    MATCH,
    SNAPSHOT,
    UNBIND,
    ContentHistory,
    ContentSpace,
    Op,
    build_space,
    record_content,
)
from stress.harness.content_checker import check_content  # noqa: E402
from stress.harness.progress import Progress  # noqa: E402

# Bindings 0 (A: has a, thread 0) and 1 (B: a == 1, thread 1); message 0
# {"a": 1} satisfies both, message 1 {} neither.
SPACE = ContentSpace(
    "amqp",
    [Has("a"), Eq("a", 1)],
    [None, None],
    [0, 1],
    [({"a": 1}, None), ({}, None)],
    [frozenset({0, 1}), frozenset()],
    2,
)
A, B = 0, 1


def history(ops0: list[Op], ops1: list[Op], initial: set[int], final: list[int]) -> ContentHistory:
    return ContentHistory(SPACE, initial, [ops0, ops1], final, len(final), 0.0)


def writes() -> tuple[list[Op], list[Op]]:
    """A bound during [10, 20], B unbound during [30, 40] (B bound at first)."""
    return [Op(BIND, 10, 20, b=A)], [Op(UNBIND, 30, 40, b=B)]


def judge(reader: Op) -> dict[str, int]:
    w0, w1 = writes()
    return check_content(history([*w0, reader], w1, {B}, [A])).counts


@pytest.mark.parametrize(
    ("start", "end", "answer"),
    [
        (1, 5, (B,)),  # before both writes
        (50, 60, (A,)),  # after both
        (15, 35, (A, B)),  # between the writes' moments: t in (20, 30) or either in flight
        (15, 35, (B,)),  # A not yet bound, B still bound
        (15, 35, (A,)),  # A bound, B already unbound
    ],
)
def test_answers_on_one_state_of_their_call_pass(
    start: int, end: int, answer: tuple[int, ...]
) -> None:
    assert judge(Op(MATCH, start, end, reads=[(0, answer)])) == {}


@pytest.mark.parametrize(
    ("start", "end", "answer", "why"),
    [
        (50, 60, (A, B), "stale: B was unbound before the call"),
        (1, 5, (), "lost: B was bound during the whole call"),
        (15, 35, (), "two states: A unbound needs t < 20, B unbound needs t > 30"),
        (22, 28, (B,), "A bound during the whole call"),
        (1, 5, (A, B), "A bound before its bind began"),
    ],
)
def test_answers_no_state_of_their_call_gives_fail(
    start: int, end: int, answer: tuple[int, ...], why: str
) -> None:
    assert judge(Op(MATCH, start, end, reads=[(0, answer)])) == {"state": 1}, why


def test_an_answer_the_message_does_not_satisfy_fails() -> None:
    assert judge(Op(MATCH, 50, 60, reads=[(1, (A,))])) == {"state": 1}


def test_a_snapshot_is_judged_at_its_call_and_must_answer_again_alike() -> None:
    snap = Op(SNAPSHOT, 50, 60, reads=[(0, (A,)), (1, ()), (0, (A,)), (1, ())])
    assert judge(snap) == {}
    moved = Op(SNAPSHOT, 50, 60, reads=[(0, (A,)), (1, ()), (0, (A, B)), (1, ())])
    assert judge(moved) == {"snapshot": 1}
    stale = Op(SNAPSHOT, 50, 60, reads=[(0, (B,)), (1, ())])
    assert judge(stale) == {"state": 1}


def test_writes_errors_and_final_state_are_checked() -> None:
    w0, w1 = writes()
    w0[0].ok = False
    err = Op(MATCH, 70, 71, error="RuntimeError()")
    counts = check_content(history([*w0, err], w1, {B}, [A, B])).counts
    assert counts == {"writes": 1, "errors": 1, "final": 1}


# ---------------------------------------------------------------- broken indexes
class StaleIndex(ContentIndex):
    """Answers every match on the snapshot it took first."""

    _first: Any = None

    def match(self, fields: Any, topic: str | None = None) -> list[Any]:
        if self._first is None:
            self._first = self.snapshot()
        return self._first.match(fields, topic)


class LiveSnapshot(ContentIndex):
    """A "snapshot" that is the live index."""

    def snapshot(self) -> Any:
        return self


class FalseBind(ContentIndex):
    """A bind that reports False one time in seven."""

    calls = 0

    def bind(self, criteria: Any, subscriber: Any, topic: str | None = None) -> bool:
        new = super().bind(criteria, subscriber, topic)
        self.calls += 1
        return new and self.calls % 7 != 0


def run(index: ContentIndex | None, seed: int = 2) -> dict[str, int]:
    space = build_space("amqp", 48, 2, seed)
    h = record_content(
        space,
        1500,
        seed,
        make_clock("auto"),
        Progress(False),
        "test",
        read_percent=70,
        snapshot_every=50,
        index=index,
    )
    return check_content(h).counts


@pytest.mark.parametrize(
    ("index", "check"),
    [(StaleIndex, "state"), (LiveSnapshot, "snapshot"), (FalseBind, "writes")],
)
def test_broken_indexes_are_detected(index: type[ContentIndex], check: str) -> None:
    assert run(index("amqp")).get(check, 0) > 0


def test_the_honest_index_passes_the_same_runs() -> None:
    assert run(None) == {}


# ---------------------------------------------------------------- command line
def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main([*args, "--no-progress"])
    return code, capsys.readouterr().out


def test_end_to_end_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "content.json"
    code, out = run_cli(
        [
            *"--scenario content --thread-counts 2,3 --ops 2000 --snapshot-every 100 "
            "--seed 3".split(),
            *("--json", str(out_json)),
        ],
        capsys,
    )
    assert code == 0, out
    data = json.loads(out_json.read_text())
    assert data["passed"] is True and data["violations"] == 0 and data["scenario"] == "content"
    for c in data["checks"]:
        kinds = c["stats"]["kinds"]
        assert c["ops"] == 2000 * c["threads"] and kinds["snapshot"] == 20 * c["threads"]
        assert all(kinds[k] > 0 for k in ("bind", "unbind", "match"))
        assert c["stats"]["reads_judged"] > 0


@pytest.mark.parametrize("dialect", ["mqtt", "nats"])
def test_end_to_end_other_dialects(dialect: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(
        f"--scenario content --dialect {dialect} --thread-counts 2 --ops 1500 --seed 4".split(),
        capsys,
    )
    assert code == 0, out


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("--duration 1", "not --duration"),
        ("--keys 3 --thread-counts 2", "too few"),
        ("--snapshot-every -1", "must be >= 0"),
        ("--mix 50/40", "add up to 100"),
        ("--no-check", "a checked run"),
    ],
)
def test_usage_errors(args: str, error: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--scenario", "content", *args.split(), "--no-progress"]) == 2
    assert error in capsys.readouterr().err
