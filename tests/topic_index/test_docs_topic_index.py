"""docs/topic-index.md stays true: every ``python`` block runs as written (its
asserts are the examples' answers), and the ``cstrie retained`` transcript
prints what the page says, command by command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "topic-index.md"
TEXT = DOC.read_text(encoding="utf-8")
MARK = "@@next-command@@"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", TEXT, re.S)


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_examples_run(index: int) -> None:
    code = blocks("python")[index]
    if "parquet" in code:
        pytest.importorskip("pyarrow", reason="the example writes Parquet (cstrie[export])")
    exec(compile(code, f"{DOC}:python block {index}", "exec"), {"__name__": "docs_example"})


def test_there_are_examples() -> None:
    assert len(blocks("python")) >= 3
    assert any(b.startswith("$ ") for b in blocks("sh"))


def _transcript() -> list[tuple[str, str]]:
    """(command, expected output) pairs of the ``sh`` block written as a transcript."""
    (block,) = [b for b in blocks("sh") if b.startswith("$ ")]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return [(cmd, "".join(f"{x}\n" for x in out)) for cmd, out in steps]


def test_cli_transcript(tmp_path: Path) -> None:
    steps = _transcript()
    # one shell runs every command (files and $? carry over); a marker after
    # each splits the output and keeps its exit status for the next command
    script = "".join(f'{cmd}\n__rc=$?; echo "{MARK}"; (exit $__rc)\n' for cmd, _ in steps)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    # stderr is captured apart from stdout: a command whose expected output is an
    # error message must write nothing to stdout, and its message to stderr
    stdout = proc.stdout.split(f"{MARK}\n")
    assert len(stdout) == len(steps) + 1, proc.stdout
    for (cmd, want), got in zip(steps, stdout, strict=False):
        if "error:" in want:
            assert got == "", cmd
            assert want in proc.stderr, cmd
        else:
            assert got == want, cmd
