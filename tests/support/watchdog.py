"""A pytest plugin: the backstop behind pytest-timeout for a test that hangs
in C.

pytest-timeout (configured in ``pyproject.toml``: ``timeout``,
``timeout_method = "thread"``) fails a test that runs past its limit, but its
timer is a Python thread: it never runs while a C loop spins holding the GIL
(an engine mutant whose retry loop never ends, a regular expression that
backtracks forever).  This plugin arms :func:`faulthandler.dump_traceback_later`
for every test, a watchdog thread written in C that needs no GIL: a minute
(``watchdog_grace``) after the test's own limit it prints every thread's stack and ends the
process (under pytest-xdist the worker dies, the test is reported failed, and
a fresh worker takes the rest).  So no test hangs a run for longer than its
limit plus a minute.

The limit is the test's ``@pytest.mark.timeout(seconds)`` if it has one, else
the ``timeout`` ini setting; ``timeout = 0`` (no limit) arms nothing.

faulthandler's watchdog does not survive ``fork()``: a child that inherits an
armed one finds its state saying a thread runs that the child does not have,
and its own ``dump_traceback_later`` then waits for that thread forever.  So
the watchdog is disarmed just before every fork and armed again in the parent
just after, for the time the test has left; a child starts with none.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time
from collections.abc import Iterator

import pytest

#: seconds past the test's own limit before the watchdog ends the process
#: (the ini setting ``watchdog_grace``)
GRACE = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "watchdog_grace",
        "seconds past a test's time limit before the watchdog ends the process",
        default=str(GRACE),
    )


_stderr: int | None = None  # a copy of the process's stderr, made before capture
_deadline: float | None = None  # time.monotonic() at which the armed watchdog fires


def _arm(seconds: float) -> None:
    global _deadline
    _deadline = time.monotonic() + seconds
    faulthandler.dump_traceback_later(
        seconds, exit=True, file=_stderr if _stderr is not None else sys.__stderr__
    )


def _disarm() -> None:
    global _deadline
    _deadline = None
    faulthandler.cancel_dump_traceback_later()


def _before_fork() -> None:
    if _deadline is not None:
        faulthandler.cancel_dump_traceback_later()  # _deadline stays: the parent re-arms


def _after_fork_in_parent() -> None:
    if _deadline is not None:
        _arm(max(_deadline - time.monotonic(), 1.0))


def _after_fork_in_child() -> None:
    global _deadline
    _deadline = None


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


def pytest_configure(config: pytest.Config) -> None:
    # pytest captures fd 2 while a test runs; the stacks go to what fd 2 was
    # when the run began (as pytest's own faulthandler plugin does).
    global _stderr
    try:
        _stderr = os.dup(sys.__stderr__.fileno())
    except (AttributeError, OSError, ValueError):
        _stderr = None


def pytest_unconfigure(config: pytest.Config) -> None:
    global _stderr
    if _stderr is not None:
        os.close(_stderr)
        _stderr = None


def limit_of(item: pytest.Item) -> float:
    """The time limit of ``item`` in seconds (0: none)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    limit = limit_of(item)
    if limit > 0:
        _arm(limit + float(item.config.getini("watchdog_grace")))
    try:
        return (yield)
    finally:
        if limit > 0:
            _disarm()
