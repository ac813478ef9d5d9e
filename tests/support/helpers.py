"""Helpers shared by the test modules (importable as ``helpers``: pytest runs
with ``tests/support`` on the path)."""

from __future__ import annotations

import importlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

__all__ = [
    "JOIN_TIMEOUT",
    "Sub",
    "exit_description",
    "old_export_package",
    "run_isolated",
    "run_threads",
]

#: seconds a test thread may take before the test calls it hung
JOIN_TIMEOUT = 30.0

#: The fields of the engine's output chunk (``cst_chunk``) and its binding that exporters
#: taken from git history read, by the names they had then, and today's: the
#: fixtures that run those exporters over today's engine rewrite them.
_OLD_ENGINE_NAMES = {
    "s.ngroups": "s.nentries",
    "s.need_groups": "s.need_entries",
    "s.groups_cap": "s.entries_cap",
    "nb.Groups(": "nb.ChunkBuffers(",
}


REPO = Path(__file__).resolve().parents[2]


@contextmanager
def old_export_package(commit: str, name: str) -> Iterator[ModuleType]:
    """The ``cstrie.export`` package as it was at ``commit``, taken from git
    history and imported as ``name`` (its own imports redirected to it), over
    today's engine and ``Trie``; removed again on exit.  Skips the test where
    git or the history is missing."""
    import pytest

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")

    def show(*args: str) -> str:
        proc = subprocess.run(
            [git, "-C", str(REPO), *args], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            pytest.skip(f"no git history here ({proc.stderr.strip()})")
        return proc.stdout

    files = show("ls-tree", "--name-only", commit, "cstrie/export/").split()
    root = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    try:
        pkg = root / name
        pkg.mkdir()
        for path in files:
            text = show("show", f"{commit}:{path}").replace("cstrie.export", name)
            for old, new in _OLD_ENGINE_NAMES.items():
                text = text.replace(old, new)
            (pkg / Path(path).name).write_text(text, encoding="utf-8")
        sys.path.insert(0, str(root))
        try:
            module = importlib.import_module(name)
        finally:
            sys.path.remove(str(root))
        yield module
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Sub:
    """A hashable subscriber compared by name: distinct objects may be equal,
    so identity shows which of them the trie hands back."""

    __slots__ = ("name",)

    def __init__(self, name: object) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sub) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Sub", self.name))

    def __repr__(self) -> str:
        return f"Sub({self.name!r})"


def run_threads(targets: list[Callable[[], None]]) -> None:
    """Start every target in its own thread, join them, re-raise the first error."""
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for th in threads:
        th.start()
    for th in threads:
        th.join(JOIN_TIMEOUT)
    assert not any(th.is_alive() for th in threads), "a thread hung"
    if errors:
        raise errors[0]


def exit_description(status: int) -> str:
    """A process's exit status in words: ``exit code 1`` or ``killed by SIGSEGV``
    (``subprocess`` gives -N for signal N)."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit code {status}"


def run_isolated(code: str, timeout: float = 120.0) -> str:
    """Run ``code`` in a fresh interpreter (``python -c``) and return its stdout.

    For engine calls that could crash the process: a crash or a hang becomes an
    assertion error that names the exit signal (and shows the end of stderr)
    instead of killing the pytest worker."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the child process hung (no exit within {timeout:.0f} s)") from exc
    if proc.returncode != 0:
        raise AssertionError(
            f"the child process failed: {exit_description(proc.returncode)}\n"
            f"stderr (end):\n{proc.stderr[-3000:]}"
        )
    return proc.stdout
