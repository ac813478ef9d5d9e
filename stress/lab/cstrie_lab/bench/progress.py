"""A small progress display on stderr for long runs.

On a terminal one status line is redrawn in place (``\\r``); otherwise (CI logs,
files) a line is printed at most every few seconds and at the end of each task, so
logs stay short.  ``quiet`` turns it off.  Child processes started by the suite
write to the same stderr, so their progress shows too.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress", "Task"]


class Task:
    """One step with a known number of units; use as a context manager."""

    def __init__(self, progress: Progress, label: str, total: int) -> None:
        self._p = progress
        self.label = label
        self.total = max(int(total), 1)
        self.done = 0
        self._start = time.monotonic()
        self._last = 0.0

    def advance(self, units: int = 1) -> None:
        """Record ``units`` more units done (redraws at most ~10 times a second)."""
        self.done += units
        now = time.monotonic()
        if now - self._last >= self._p.interval:
            self._last = now
            self._p._show(self._line(now), final=False)

    def _line(self, now: float) -> str:
        frac = min(self.done / self.total, 1.0)
        elapsed = now - self._start
        eta = ""
        if 0 < frac < 1 and elapsed > 1:
            eta = f", ~{elapsed * (1 - frac) / frac:.0f}s left"
        return f"{self.label}: {100 * frac:3.0f}% ({elapsed:.1f}s{eta})"

    def __enter__(self) -> Task:
        self._p._show(f"{self.label} ...", final=False)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        elapsed = time.monotonic() - self._start
        status = "done" if exc_type is None else f"failed ({exc_type.__name__})"
        self._p._show(f"{self.label}: {status} in {elapsed:.1f}s", final=True)


class Progress:
    """Progress lines on ``stream`` (stderr by default)."""

    def __init__(
        self, enabled: bool = True, stream: TextIO | None = None, prefix: str = ""
    ) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        # On a terminal redraw often; in a log print at most every 5 s.
        self.interval = 0.1 if self.tty else 5.0
        self._dirty = False

    def task(self, label: str, total: int = 1) -> Task:
        return Task(self, label, total)

    def note(self, message: str) -> None:
        """A line that stays (e.g. a result as soon as it is known)."""
        self._show(message, final=True)

    def _show(self, line: str, final: bool) -> None:
        if not self.enabled:
            return
        text = f"{self.prefix}{line}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
            self._dirty = not final
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
