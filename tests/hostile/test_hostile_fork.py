"""Hostile input, part 3: fork() while other threads are inside engine calls.

Rules under test (native/ebr.c, invariant 7):

* F1: after ``os.fork()`` the child keeps reclaiming, even if other threads of
  the parent were inside engine calls (epoch sections) at the fork: 100,000
  subscribe/unsubscribe pairs in the child keep ``cst_live_allocations()``
  bounded (without the child's fork handler it grows to 1,100,004), what
  is pending does not grow, and a dropped trie gives its bytes back at once, as
  in the parent.  Strictly, ``cst_reclaim()`` in the child returns 0 pending (a
  separate test).
* F2: the child does not hang: it can use the engine at once, including
  lock-free lookups of a trie it inherited from the busy parent.  Subscribing
  to the inherited trie while a parent thread held its subscriber locks at the
  fork is a separate test.
* F3: the same through ``multiprocessing`` with the "fork" start method: a
  child process looks up the inherited trie and subscribes (to a trie of its
  own) while the parent's threads are busy.

The parent runs two threads hammering subscribe/unsubscribe/lookup on a shared
trie and a third doing ~30 ms lookups, and forks while the third is inside one.
A hang is a failure: the parent kills the child after a timeout.  Python 3.12+
warns (DeprecationWarning) about fork() in a multi-threaded process: that is the
point here, so the warning is filtered.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import multiprocessing
import os
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Hashable, Iterator
from multiprocessing.connection import Connection

import pytest
from helpers import JOIN_TIMEOUT, exit_description

from cstrie._binding import lib
from cstrie.dialect import Dialect
from cstrie.trie import Trie

#: seconds a forked child may take (it needs about one); then it counts as hung
CHILD_TIMEOUT = 60.0
#: growth of cst_live_allocations() allowed during the child's churn (a few
#: hundred is typical; without reclamation it grows by about 11 per pair)
ALLOCATION_BOUND = 10_000
FORKS = 3

UNBOUNDED = Dialect(name="unbounded")  # AMQP rules without the word limit


class BusyParent:
    """Two threads hammering subscribe/unsubscribe/lookup on ``shared`` and one
    doing ~30 ms lookups of another trie (``entering`` is set just before each)."""

    def __init__(self) -> None:
        self.shared = Trie("mqtt")
        self.shared.subscribe("fixed/+", "fixed")
        self.stop = threading.Event()
        self.running = threading.Event()  # cleared: the threads pause between calls
        self.running.set()
        self.entering = threading.Event()
        self.counts = [0, 0, 0]
        self.errors: list[BaseException] = []
        slow = Trie(UNBOUNDED)
        slow.subscribe(".".join(["#"] * 10 + ["z"]), "s")
        self._slow, self._slow_key = slow, ".".join(["a"] * 500)
        targets: list[Callable[[], None]] = [
            lambda: self._hammer(0),
            lambda: self._hammer(1),
            self._long_lookups,
        ]
        self.threads = [threading.Thread(target=self._guard(f), daemon=True) for f in targets]

    def _guard(self, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                self.errors.append(exc)

        return run

    def _hammer(self, k: int) -> None:
        i = 0
        while not self.stop.is_set():
            self.running.wait()
            pattern, sub = f"h/{k}/{i % 50}", k * 100 + i % 7
            self.shared.subscribe(pattern, sub)
            self.shared.lookup(f"h/{k}/{(i * 3) % 50}")
            self.shared.unsubscribe(pattern, sub)
            self.counts[k] += 1
            i += 1

    def _long_lookups(self) -> None:
        while not self.stop.is_set():
            self.running.wait()
            self.entering.set()
            self._slow.lookup(self._slow_key)
            self.counts[2] += 1

    def start(self) -> None:
        for th in self.threads:
            th.start()
        deadline = time.monotonic() + 20
        while min(self.counts) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert min(self.counts) >= 3, f"the busy threads did not get going: {self.counts}"

    def inside_a_long_call(self) -> None:
        """Return while the long-lookup thread is inside an engine call."""
        self.entering.clear()
        assert self.entering.wait(10), "the long-lookup thread stalled"
        time.sleep(0.003)

    def pause(self) -> None:
        """Let the threads stop at their next call (the child's work is faster
        on a machine of two cores); ``resume`` lets them go on."""
        self.running.clear()

    def resume(self) -> None:
        self.running.set()

    def finish(self) -> None:
        self.stop.set()
        self.running.set()
        for th in self.threads:
            th.join(JOIN_TIMEOUT)
        assert not any(th.is_alive() for th in self.threads), "a busy thread hung"
        if self.errors:
            raise self.errors[0]


@contextlib.contextmanager
def busy_parent() -> Iterator[BusyParent]:
    busy = BusyParent()
    busy.start()
    try:
        yield busy
    finally:
        busy.finish()


def fork_run(
    work: Callable[[], str],
    timeout: float = CHILD_TIMEOUT,
    after_fork: Callable[[], None] | None = None,
) -> str:
    """Run ``work`` in a forked child; return what it returned.  The child's
    exception, crash or hang (it is killed after ``timeout`` s, its stack dumped
    to stderr a little before) fails the calling test.  ``after_fork`` runs in
    the parent right after the fork."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads
        pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.close(r)
            faulthandler.dump_traceback_later(timeout * 0.8, exit=True)
            try:
                message = "ok " + work()
                code = 0
            except BaseException:
                message = traceback.format_exc()
            os.write(w, message.encode()[-8000:])  # fits in the pipe: never blocks
        finally:
            os._exit(code)
    os.close(w)
    if after_fork is not None:
        after_fork()
    try:
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"the forked child hung (killed after {timeout:.0f} s)")
            time.sleep(0.01)
        message = os.read(r, 1 << 16).decode(errors="replace")
    finally:
        os.close(r)
    code = os.waitstatus_to_exitcode(status)
    assert code == 0, (
        f"the forked child failed ({exit_description(code)}; a faulthandler dump in "
        f"stderr means it hung): {message}"
    )
    assert message.startswith("ok "), message
    return message[3:]


def child_churn(shared: Trie, pairs: int) -> str:
    """F1 and F2, in the child: churn, reclaim, prompt drop, inherited lookups."""
    assert shared.lookup("fixed/x") == ["fixed"]  # lock-free, whatever the dead threads left
    assert shared.has_subscribers("fixed/y")
    shared.lookup("h/0/1")
    # What the parent's threads left is collectable in the child (but see
    # test_forked_child_reclaims_to_zero_pending): it must not grow from here.
    inherited = int(lib.cst_reclaim())
    start = int(lib.cst_live_allocations())
    t = Trie("mqtt")
    peak = 0
    for i in range(pairs):
        pattern = f"c/{i % 100}/{i}"
        assert t.subscribe(pattern, i % 7) is True
        assert t.unsubscribe(pattern, i % 7) is True
        if i % 1000 == 0:
            peak = max(peak, int(lib.cst_live_allocations()) - start)
    assert peak <= ALLOCATION_BOUND, f"live allocations grew by {peak:,} in the child"
    pending = int(lib.cst_reclaim())
    assert pending <= inherited, f"{pending:,} pending after the churn, {inherited:,} before"
    base = int(lib.cst_live_bytes())
    big = Trie.from_pairs([(f"d/{i % 300}/{i}", i % 50) for i in range(50_000)], "mqtt")
    held = int(lib.cst_live_bytes()) - base
    del big
    gc.collect()
    left = int(lib.cst_live_bytes()) - base
    assert left <= 0.05 * held, f"a dropped trie kept {left:,} of {held:,} bytes in the child"
    return f"peak={peak} pending={pending}/{inherited} left={left}/{held}"


def test_forked_child_keeps_reclaiming_while_parent_threads_were_in_the_engine() -> None:
    """F1 + F2: fork several times while two threads hammer a trie and a third is
    inside a long lookup; each child churns 100,000 subscribe/unsubscribe pairs
    with bounded live allocations, reclaims everything, and does not hang."""
    with busy_parent() as busy:
        for _ in range(FORKS):
            busy.inside_a_long_call()
            fork_run(lambda: child_churn(busy.shared, 100_000), after_fork=busy.pause)
            busy.resume()
        assert busy.shared.lookup("fixed/z") == ["fixed"]  # the parent goes on too


def _pending_in_child() -> str:
    first = int(lib.cst_reclaim())
    t = Trie("mqtt")
    for i in range(2000):
        t.subscribe(f"c/{i}", 1)
        t.unsubscribe(f"c/{i}", 1)
    return f"{first} {int(lib.cst_reclaim())}"


#: forks in the zero-pending test (a child handler that did not count the
#: reachable limbo chunks again would leave a stuck count in 5-20% of forks)
PENDING_FORKS = 40


def test_forked_child_reclaims_to_zero_pending() -> None:
    """F1, strictly: in every child, ``cst_reclaim()`` returns 0 pending.  Forks
    up to PENDING_FORKS times while the parent's threads are busy and stops at the
    first child whose count does not reach 0."""
    with busy_parent() as busy:
        for k in range(PENDING_FORKS):
            busy.inside_a_long_call()
            first, again = map(int, fork_run(_pending_in_child).split())
            assert (first, again) == (0, 0), (
                f"fork {k + 1}: the child's cst_reclaim() returned {first:,} pending, and "
                f"{again:,} after 2,000 more subscribe/unsubscribe pairs"
            )


def _mp_child(shared: Trie, conn: Connection) -> None:
    try:
        faulthandler.dump_traceback_later(CHILD_TIMEOUT * 0.8, exit=True)
        found = shared.lookup("fixed/q")
        own = Trie("mqtt")
        added = own.subscribe("child/+", "me")
        conn.send(("ok", found, added, own.lookup("child/1")))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_multiprocessing_fork_child_looks_up_and_subscribes() -> None:
    """F3: a ``multiprocessing`` child (start method "fork") started while the
    parent's threads are inside engine calls looks up the inherited trie,
    subscribes to a new one, and exits; none of them hangs."""
    ctx = multiprocessing.get_context("fork")
    with busy_parent() as busy:
        for _ in range(FORKS):
            recv, send = ctx.Pipe(duplex=False)
            busy.inside_a_long_call()
            proc = ctx.Process(target=_mp_child, args=(busy.shared, send))
            proc.start()
            busy.pause()
            send.close()
            proc.join(CHILD_TIMEOUT)
            if proc.is_alive():
                proc.kill()
                proc.join()
                pytest.fail(f"the multiprocessing child hung (killed after {CHILD_TIMEOUT} s)")
            got = recv.recv() if recv.poll(5) else ("no answer",)
            recv.close()
            busy.resume()
            assert proc.exitcode == 0, f"{exit_description(proc.exitcode or 0)}: {got}"
            assert got == ("ok", ["fixed"], True, ["me"]), got


class _HoldsTheLocks:
    """A subscriber whose second ``__hash__`` (made by subscribe_many while it holds
    every subscriber stripe lock) announces itself and waits."""

    def __init__(self, inside: threading.Event, release: threading.Event) -> None:
        self.calls = 0
        self.inside, self.release = inside, release

    def __hash__(self) -> int:
        self.calls += 1
        if self.calls == 2:
            self.inside.set()
            self.release.wait(JOIN_TIMEOUT)
        return 12345

    def __eq__(self, other: object) -> bool:
        return self is other


def _subscribe_in_child(shared: Trie) -> str:
    assert shared.lookup("fixed/x") == ["fixed"]
    assert shared.subscribe("child/x", "c") is True
    assert sorted(shared.lookup("child/x")) == ["c"]
    return "subscribed"


def test_child_subscribes_to_the_inherited_trie_while_a_parent_thread_held_its_locks() -> None:
    """F2 for the Python layer: a parent thread is inside ``subscribe_many``
    (documented to hold every subscriber stripe lock while it runs) at the fork;
    the child subscribes to the same, inherited trie and must not hang."""
    shared = Trie("mqtt")
    shared.subscribe("fixed/+", "fixed")
    inside, release = threading.Event(), threading.Event()
    blocker = _HoldsTheLocks(inside, release)
    th = threading.Thread(
        target=lambda: shared.subscribe_many([("b/1", blocker), ("b/2", "other")]), daemon=True
    )
    th.start()
    try:
        assert inside.wait(10)
        fork_run(lambda: _subscribe_in_child(shared), timeout=5.0)
    finally:
        release.set()
        th.join(JOIN_TIMEOUT)
    assert not th.is_alive()
    pairs: list[tuple[str, Hashable]] = sorted(shared, key=repr)
    assert pairs == sorted([("fixed/+", "fixed"), ("b/1", blocker), ("b/2", "other")], key=repr)
