"""A progress bar on stderr for long CLI runs.

Shown when stderr is a terminal, or always with ``--progress``; never with
``--no-progress``.  Redrawn in place at most ten times a second; the final
state is printed once with a newline.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Bar", "enabled"]


def enabled(choice: bool | None, stream: TextIO | None = None) -> bool:
    """``choice`` from --progress/--no-progress, else: is stderr a terminal?"""
    if choice is not None:
        return choice
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class Bar:
    """``bar(done, total)`` draws; ``bar.close()`` ends the line.  A total of 0
    (unknown) shows a count and a rate instead of a bar."""

    WIDTH = 30

    def __init__(self, label: str, on: bool, stream: TextIO | None = None, unit: str = "") -> None:
        self.label = label
        self.on = on
        self.stream = stream or sys.stderr
        self.unit = unit
        self.start = time.monotonic()
        self.last = 0.0
        self.done = 0
        self.total = 0
        self.drawn = False

    def __call__(self, done: int, total: int = 0) -> None:
        self.done, self.total = done, total
        if not self.on:
            return
        now = time.monotonic()
        if now - self.last >= 0.1:
            self.last = now
            self._draw(now, end="")

    def _draw(self, now: float, end: str) -> None:
        elapsed = now - self.start
        unit = f" {self.unit}" if self.unit else ""
        if self.total > 0:
            frac = min(self.done / self.total, 1.0)
            fill = round(frac * self.WIDTH)
            bar = "#" * fill + "." * (self.WIDTH - fill)
            text = (
                f"{self.label} [{bar}] {100 * frac:3.0f}% "
                f"{self.done:,}/{self.total:,}{unit} {elapsed:.1f}s"
            )
        else:
            rate = self.done / elapsed if elapsed > 0 else 0.0
            text = f"{self.label}: {self.done:,}{unit} ({rate:,.0f}/s) {elapsed:.1f}s"
        self.stream.write("\r" + text + "\x1b[K" + end)
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.on:
            self._draw(time.monotonic(), end="\n")
