"""Helpers shared by the test modules (importable as ``helpers``: pytest runs
with ``tests`` on the path)."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["JOIN_TIMEOUT", "Sub", "run_threads"]

#: seconds a test thread may take before the test calls it hung
JOIN_TIMEOUT = 30.0


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
