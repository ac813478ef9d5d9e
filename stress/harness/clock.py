"""The shared logical clock that stamps every recorded operation.

Each recorded operation takes a stamp just before it is invoked and another just
after it returns.  The stamps come from one 64-bit atomic counter shared by all
threads (``atomics.atomic(width=8, atype=atomics.INT)``, fetch-and-increment), so
they are all distinct and totally ordered in real time: operation A *precedes* B
exactly when ``A.resp < B.inv``.  That order is what the linearizability checker
must respect.

``atomics`` is a dev/test dependency (ctypes-based; on free-threaded 3.13 it
installs through cffi 1.17).  Its ``fetch_inc()`` goes through several Python
layers (tens of microseconds per call on 3.13t); the clock calls the very same C
operation through the function pointer ``atomics`` resolved for that object,
with per-thread argument buffers, which is ~20x faster and keeps the stamps
dense around the operations.  If that internal route is missing (another
``atomics`` version) the public ``fetch_inc`` is used.  Without ``atomics`` the
clock falls back to ``time.perf_counter_ns()`` (CLOCK_MONOTONIC, consistent
across CPUs): stamps of two threads may then be equal, and equal stamps are
treated as overlapping, which only makes the checker more permissive.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Clock", "make_clock"]


class Clock:
    """A source of stamps; :meth:`stamper` gives a calling thread its own callable."""

    def __init__(self, kind: str, note: str, make: Callable[[], Callable[[], int]]) -> None:
        self.kind = kind  # "atomics" or "perf_counter_ns"
        self.note = note
        self._make = make
        self._keep: list[Any] = []

    def stamper(self) -> Callable[[], int]:
        """A stamp function for the calling thread (create one per thread)."""
        return self._make()

    def close(self) -> None:
        """Release the atomic (before interpreter shutdown, where ``atomics``'s
        own finalizers fail noisily)."""
        for obj in self._keep:
            core = getattr(obj, "_core", None)
            release = getattr(core, "release", None)
            if release is not None:
                try:
                    release()
                except Exception:  # pragma: no cover - best effort
                    pass
        self._keep.clear()


def _perf_clock(note: str) -> Clock:
    return Clock("perf_counter_ns", note, lambda: time.perf_counter_ns)


def _atomics_clock() -> Clock:
    import atomics  # optional dependency

    counter = atomics.atomic(width=8, atype=atomics.INT)
    counter.store(1)
    fast = _fast_fetch_inc(counter)
    if fast is None:
        clock = Clock("atomics", "atomics fetch_inc() (public API)", lambda: counter.fetch_inc)
    else:
        clock = Clock("atomics", "atomics 64-bit counter, fetch-and-increment (seq_cst)", fast)
    clock._keep.append(counter)
    return clock


def _fast_fetch_inc(counter: Any) -> Callable[[], Callable[[], int]] | None:
    """A per-thread stamper calling the atomic's own fetch_inc C function, or None."""
    try:
        from atomics._impl.enums import MemoryOrder, OpType

        core = counter._core
        fp = core.get_op_func(OpType.FETCH_INC)
        address = core.address
        order = int(MemoryOrder.SEQ_CST)
        if fp is None or core.width != 8:
            return None
        fp_type = type(fp)
        fp_address = ctypes.cast(fp, ctypes.c_void_p).value
    except Exception:
        return None

    def make() -> Callable[[], int]:
        f = fp_type(fp_address)  # this thread's own ctypes function object
        out = ctypes.c_int64(0)
        out_address = ctypes.addressof(out)

        def stamp() -> int:
            f(address, order, out_address)
            return out.value

        return stamp

    # Self-test against the public API before trusting it.
    try:
        s = make()
        a = s()
        b = counter.fetch_inc()
        c = s()
        if not (a < b < c):
            return None
    except Exception:
        return None
    return make


def make_clock(kind: str = "auto") -> Clock:
    """``auto`` (atomics if importable, else perf_counter_ns), ``atomics`` or ``perf``."""
    if kind == "perf":
        return _perf_clock("time.perf_counter_ns() (requested with --clock perf)")
    try:
        return _atomics_clock()
    except ImportError as exc:
        if kind == "atomics":
            raise
        return _perf_clock(
            f"time.perf_counter_ns() -- the atomics package is not importable ({exc}); "
            "equal stamps count as overlapping"
        )
