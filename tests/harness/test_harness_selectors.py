"""Tests of the stress harness's ``selectors`` scenario
(stress/harness/selectors.py): small real runs pass with 0 violations; the
checker flags each kind of wrong answer -- a lookup missing a subscriber, a
stale cached answer, a write returning the wrong value, a torn snapshot --
on broken indexes run through the same recorder."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cstrie.selectors import SelectorIndex  # noqa: E402
from cstrie.selectors import index as index_mod  # noqa: E402
from stress.harness import cli  # noqa: E402
from stress.harness.selectors import Timeline, _possible, check_run, record_run  # noqa: E402


@pytest.fixture
def compact_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_mod, "COMPACT_MIN", 8)


@pytest.mark.parametrize("threads", [1, 3])
def test_real_runs_pass(threads: int, compact_often: None) -> None:
    index = SelectorIndex(cache_bytes=1 << 16)
    logs = record_run(index, threads, 6, 600, 7, 60)
    report = check_run(index, logs)
    assert report.ok, report.messages
    assert report.judged > 0
    stats = index.cache_stats()
    assert stats["clears"] > 0 and stats["refreshes"] > 0  # compactions and watermarks ran


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(
        [
            "--scenario",
            "selectors",
            "--thread-counts",
            "2",
            "--ops",
            "400",
            "--seed",
            "3",
            "--keys",
            "4",
            "--compact-min",
            "8",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ok   lookup" in out and "PASSED" in out


class Dropping(SelectorIndex):
    """Lookups lose the last subscriber of their answer."""

    def lookup(self, topic: str) -> list[Any]:
        return super().lookup(topic)[:-1]


class Lying(SelectorIndex):
    """``add`` always says the selector was new."""

    def add(self, subscriber: Any, selector: str, kind: str = "exact") -> bool:
        super().add(subscriber, selector, kind)
        return True


class Torn(SelectorIndex):
    """Snapshots see a subscriber that never subscribed."""

    def snapshot(self) -> Any:
        snap = super().snapshot()
        real = snap.subscriptions

        def subscriptions() -> dict[Any, Any]:
            return {**real(), "ghost": []}

        snap.subscriptions = subscriptions  # type: ignore[method-assign]
        return snap


@pytest.mark.parametrize(
    ("cls", "check"), [(Dropping, "lookup"), (Lying, "own-writes"), (Torn, "snapshot")]
)
def test_broken_indexes_are_caught(cls: type[SelectorIndex], check: str) -> None:
    index = cls()
    report = check_run(index, record_run(index, 2, 4, 400, 5, 60))
    assert report.counts.get(check, 0) > 0, report.counts


def test_stale_cache_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache entry served at a later version without its refresh (the
    watermark ignored) answers with an old state."""

    def stale(v: Any, e: Any, text: str, data: bytes) -> int:
        return int(e.bits & v.live)

    monkeypatch.setattr(index_mod, "_refresh", stale)
    index = SelectorIndex()
    report = check_run(index, record_run(index, 1, 4, 600, 9, 60))
    assert report.counts.get("lookup", 0) > 0, report.counts


def test_possible_states_are_those_of_the_definition() -> None:
    """State k of a subscriber may be current at some time in [start, end]
    iff write k began by ``end`` (k = 0: always) and write k+1 (if any) did
    not end before ``start``; checked against that definition, written out,
    on random sequential writes and windows."""
    rng = random.Random(7)
    for _ in range(300):
        line, t = Timeline(), 0
        for w in range(rng.randrange(0, 8)):
            t += rng.randrange(0, 4)
            start = t
            t += rng.randrange(0, 4)
            line.starts.append(start)
            line.ends.append(t)
            line.states.append(frozenset({("exact", f"w{w}")}))
        for _ in range(10):
            a = rng.randrange(-1, t + 3)
            b = a + rng.randrange(0, 6)
            n = len(line.states)
            want = [
                line.states[k]
                for k in range(n)
                if line.starts[k] <= b and not (k + 1 < n and line.ends[k + 1] < a)
            ]
            assert _possible(line, a, b) == want, (line, a, b)
