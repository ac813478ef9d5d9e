"""Loader fuzz: crafted files and offset tables, from the rule that every file
and buffer comes from an attacker.

* ``cstrie.load`` of any file gives a sound trie (or topic index) or raises
  :class:`~cstrie.export.FormatError`; never another exception, a crash or a
  read out of bounds (docs/export.md, "Checked on load").
* ``Trie.from_buffers`` (a public API taking buffers) builds exactly the
  pairs its buffers hold, or raises ``ValueError`` naming the first bad
  offset (negative, decreasing or past the end of the data) or pair.

The corpus of crafted files (``tests/export/loader_corpus/``, written by
``python tests/support/loader_fuzz.py --write-corpus tests/export/loader_corpus`` plus
``fuzz-*`` files that the mutator found) is replayed in a child process, so
that a crash fails one test and names the file.  The seeded mutator
(:mod:`loader_fuzz`) makes ``CSTRIE_LOADER_FUZZ_CASES`` (default 1500) files
from seed ``CSTRIE_LOADER_FUZZ_SEED`` (default 1); a failure names the case,
and ``python tests/support/loader_fuzz.py --seed S --start I --cases 1`` replays it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from array import array
from pathlib import Path

import loader_fuzz
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cstrie import Trie

CORPUS = Path(__file__).parent / "loader_corpus"
FUZZ = Path(__file__).parents[1] / "support" / "loader_fuzz.py"
CASES = int(os.environ.get("CSTRIE_LOADER_FUZZ_CASES", "1500"))
SEED = int(os.environ.get("CSTRIE_LOADER_FUZZ_SEED", "1"))
EXAMPLES = int(os.environ.get("CSTRIE_HOSTILE_EXAMPLES", "200"))

needs_pyarrow = pytest.mark.skipif(not loader_fuzz.has_pyarrow(), reason="needs pyarrow")


@needs_pyarrow
def test_every_corpus_file_raises_format_error() -> None:
    """Each crafted file is refused with FormatError, in a child process: a
    crash (pyarrow's JSON reader on nested input, a garbage-collected view)
    ends the child, and the last name it printed is the file."""
    files = sorted(p.name for p in CORPUS.iterdir())
    assert len(files) >= 60, files
    run = subprocess.run(
        [sys.executable, str(FUZZ), "--replay", str(CORPUS)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = run.stdout.splitlines()
    outcomes = dict(line.split(" ", 1) if " " in line else (line, "") for line in lines)
    assert run.returncode in (0, 1), (
        f"the replay crashed (exit status {run.returncode}) on "
        f"{lines[-1].split()[0] if lines else '?'}: {run.stderr[-2000:]}"
    )
    wrong = {name: outcome for name, outcome in outcomes.items() if outcome != "FormatError"}
    assert not wrong, wrong
    assert sorted(outcomes) == files


@pytest.mark.parametrize("fmt", ["binary", "jsonl", "parquet"])
def test_seeded_crafted_files_load_soundly_or_raise_format_error(fmt: str) -> None:
    if fmt == "parquet" and not loader_fuzz.has_pyarrow():
        pytest.skip("needs pyarrow")
    failures = []
    outcomes: dict[str, int] = {}
    for note, f, raw in loader_fuzz.cases(SEED, CASES):
        if f != fmt:
            continue
        try:
            outcome = loader_fuzz.check(raw, f)
        except AssertionError as exc:
            failures.append(f"{note!a}: {exc}")
            continue
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert not failures, "\n".join(failures[:20])
    assert outcomes.get("FormatError", 0) > 0, outcomes


# ------------------------------------------------------------ from_buffers
def first_bad_entry(offsets: list[int], size: int) -> int | None:
    """The rule: the first entry of an offset table that is negative (entry
    0), below the entry before it, or past the end of the data."""
    prev = 0
    for k, o in enumerate(offsets):
        if o < prev or o > size:
            return k
        prev = o
    return None


INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


@st.composite
def offset_tables(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Pattern data and an offset table: a valid one, or one with a few
    entries replaced by anything an int64 holds or by values near the data's
    edges (rises past the end that come back down included)."""
    words = draw(st.lists(st.sampled_from(["a", "b", "*", "#", "é", "日本", ""]), max_size=12))
    patterns = [".".join(words[i : i + 2]) or "x" for i in range(0, len(words), 2)] or []
    data = "".join(patterns).encode()
    offsets = [0]
    for p in patterns:
        offsets.append(offsets[-1] + len(p.encode()))
    size = len(data)
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, len(offsets) - 1))
        offsets[k] = draw(
            INT64
            | st.sampled_from([-1, size, size + 1, 1 << 40, -(1 << 63), (1 << 63) - 1])
            | st.integers(-3, size + 3)
        )
    return data, offsets


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(table=offset_tables(), mv=st.booleans())
def test_from_buffers_checks_every_offset_before_reading(
    table: tuple[bytes, list[int]], mv: bool
) -> None:
    data, offsets = table
    n = len(offsets) - 1
    refs = array("Q", [1] * n)
    off = array("q", offsets)
    bad = first_bad_entry(offsets, len(data))
    args = (memoryview(data), memoryview(off), memoryview(refs)) if mv else (data, off, refs)
    if bad is not None:
        with pytest.raises(ValueError, match=rf"offsets(\[{bad}\]| decrease at pair {bad - 1}:)"):
            Trie.from_buffers(*args, ["x"])
        return
    pieces = [data[offsets[i] : offsets[i + 1]] for i in range(n)]
    try:
        t = Trie.from_buffers(*args, ["x"])
    except ValueError as exc:
        # a good table: only a pattern may be refused (UTF-8 cut apart, the
        # dialect's rules), and the message names its pair
        assert "pair " in str(exc) or "pattern" in str(exc), exc
        assert any(not _utf8(p) or not _amqp_valid(p.decode("utf-8", "replace")) for p in pieces), (
            pieces,
            exc,
        )
        return
    assert sorted(p for p, _ in t) == sorted({p.decode() for p in pieces})
    t.check_invariants()


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _amqp_valid(p: str) -> bool:
    from cstrie import AMQP

    try:
        AMQP.split_pattern(p)
    except ValueError:
        return False
    return True
