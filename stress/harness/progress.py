"""A progress bar on stderr for long runs.

Workers never touch a shared object for progress: each thread owns a
:class:`Counter` it writes once per chunk of operations, and a monitor thread
(waking four times a second) sums them and redraws one line.  On a terminal
the line is redrawn in place; otherwise (``--progress`` into a log) a line is
printed every few seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

__all__ = ["Counter", "Progress"]


class Counter:
    """One worker's count of finished operations (written only by that worker)."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = 0


class Progress:
    """Draws ``label [#####.....] 52% 1.2M ops 340K ops/s`` for a running phase."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = 0.25 if self.tty else 5.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_line = 0.0
        self._width = 0

    # ---------------------------------------------------------- worker phase
    def watch(
        self,
        label: str,
        counters: list[Counter],
        total_ops: int | None,
        duration: float | None,
    ) -> None:
        """Start redrawing for a phase; stop with :meth:`done`."""
        if not self.enabled:
            return
        self._stop.clear()
        start = time.monotonic()

        def loop() -> None:
            while not self._stop.wait(0.25):
                done = sum(c.done for c in counters)
                elapsed = time.monotonic() - start
                if total_ops:
                    frac = done / total_ops
                elif duration:
                    frac = elapsed / duration
                else:
                    frac = 0.0
                rate = done / elapsed if elapsed > 0 else 0.0
                self._draw(f"{label} {_bar(frac)} {_num(done)} ops {_num(rate)} ops/s")

        self._thread = threading.Thread(target=loop, name="harness-progress", daemon=True)
        self._thread.start()

    def done(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.clear()

    # ----------------------------------------------------------- check phase
    def step(self, stage: str, done: int, total: int) -> None:
        """A callback for the checker: ``stage`` is at ``done`` of ``total``."""
        if self.enabled:
            self._draw(f"{stage} {_bar(done / total if total else 1.0)}")

    # ---------------------------------------------------------------- output
    def _draw(self, line: str) -> None:
        now = time.monotonic()
        if self.tty:
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._width = len(line)
            self.stream.flush()
        elif now - self._last_line >= self.interval:
            self._last_line = now
            self.stream.write(line + "\n")
            self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def _bar(frac: float, width: int = 24) -> str:
    frac = min(max(frac, 0.0), 1.0)
    full = int(frac * width)
    return "[" + "#" * full + "." * (width - full) + f"] {100 * frac:3.0f}%"


def _num(x: float) -> str:
    for unit, div in (("M", 1e6), ("K", 1e3)):
        if x >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:.0f}"
