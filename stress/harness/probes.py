"""Contention probes: where does a multithreaded cstrie workload stop scaling?

``python -m stress.harness.probes [--threads 2] [--seconds 1] [PROBE ...]``

Each probe runs one small piece of the hot path in a loop, alone and on N
threads, and prints for each thread count:

* ops/s over all threads (wall clock) and the N/1 ratio;
* ops per CPU-second and its N/1 ratio ("efficiency"): 1.0 means a thread does
  as much work per CPU-second next to the others as alone.  Contended cache
  lines (shared reference counts, a lock word, a shared counter) make it drop.
  Unlike ops/s it does not depend on how busy the machine is;
* cpu/wall: how many cores the workers really used (close to N = in parallel);
* blocking waits (voluntary context switches) per 1,000 ops: a lock that makes
  threads sleep (``threading.Lock``, a dict's or a list's per-object mutex on
  the free-threaded build, cffi/interpreter locks).

Reading it: a probe with efficiency ~1.0 and no waits scales; comparing probes
that differ by one layer (engine call -> matcher -> ``Trie.lookup``; engine
update -> ``Trie.subscribe``) isolates the layer that adds the contention.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

__all__ = ["PROBES", "main", "run_probe"]

BASE = 1_000_000
N_PATTERNS = 400


def _switches() -> int:
    who = getattr(resource, "RUSAGE_THREAD", None) if resource is not None else None
    return resource.getrusage(who).ru_nvcsw if who is not None else 0


def _topics(k: int, n: int = 512) -> list[str]:
    """Per-thread topic strings (new objects, built in the calling thread)."""
    out = []
    for i in range(n):
        j = (i * 7919 + k * 104729) % N_PATTERNS
        out.append(f"r{j % 40}.w{j % 4}.x{i % 13}".encode().decode())
    return out


def _populate(trie: Any, subscriber: Callable[[int], Any] = lambda j: BASE + j) -> None:
    for j in range(N_PATTERNS):
        pats = (f"r{j % 40}.w{j % 4}.*", f"r{j % 40}.#", f"r{j % 40}.w{j % 4}.x{j % 13}")
        trie.subscribe(pats[j % 3], subscriber(j))


# A probe: setup(shared, thread_index) -> step(), where one step() is 512 ops.
Setup = Callable[[Any, int], Callable[[], None]]


def _shared_trie() -> Any:
    """The trie every probe's threads share: subscribers are ints >= 1,000,000
    (ordinary objects, each returned to every thread that matches it)."""
    from cstrie import Trie

    t = Trie()
    _populate(t)
    return t


def _shared_trie_str_subscribers() -> Any:
    """The same patterns, subscribers interned strings (like client ids read
    from a config).  On 3.13t interned strings are immortal: returning one to
    many threads touches no shared reference count."""
    from cstrie import Trie

    t = Trie()
    _populate(t, lambda j: sys.intern(f"client-{j}"))
    return t


def probe_python_loop(shared: Any, k: int) -> Callable[[], None]:
    topics = _topics(k)

    def step() -> None:
        for x in topics:
            x + "a"

    return step


def probe_engine_lookup(shared: Any, k: int) -> Callable[[], None]:
    from cstrie import _binding as nb

    h = nb.ffi.cast("cst_trie *", shared._h)
    sig = "int64_t(*)(cst_trie *, const char *, size_t, uint64_t *, size_t)"
    f = nb.ffi.cast(sig, nb.ffi.addressof(nb.lib, "cst_lookup"))
    buf = nb.ffi.new("uint64_t[]", 256)
    datas = [t.encode() for t in _topics(k)]

    def step() -> None:
        for d in datas:
            f(h, d, len(d), buf, 256)

    return step


def probe_matcher_lookup(shared: Any, k: int) -> Callable[[], None]:
    lookup = shared.matcher().lookup
    topics = _topics(k)

    def step() -> None:
        for x in topics:
            lookup(x)

    return step


_SHARED_TOPICS: list[str] = []


def probe_matcher_lookup_nomatch(shared: Any, k: int) -> Callable[[], None]:
    lookup = shared.matcher().lookup
    topics = [f"none.{t}" for t in _topics(k)]  # match no pattern: empty results

    def step() -> None:
        for x in topics:
            lookup(x)

    return step


def probe_matcher_shared_topics(shared: Any, k: int) -> Callable[[], None]:
    lookup = shared.matcher().lookup
    topics = _SHARED_TOPICS  # the same str objects in every thread

    def step() -> None:
        for x in topics:
            lookup(x)

    return step


def probe_trie_lookup(shared: Any, k: int) -> Callable[[], None]:
    lookup = shared.lookup
    topics = _topics(k)

    def step() -> None:
        for x in topics:
            lookup(x)

    return step


def probe_trie_lookup_inline(shared: Any, k: int) -> Callable[[], None]:
    topics = _topics(k)

    def step() -> None:
        for x in topics:
            shared.lookup(x)  # the attribute read and the call, on the shared trie each time

    return step


_SHARED_STR = "".join(["shared", "-text"]) * 4  # one mortal str every thread uses


def probe_str_method_inline(shared: Any, k: int) -> Callable[[], None]:
    topics = _topics(k)
    text = _SHARED_STR

    def step() -> None:
        for x in topics:
            text.startswith(x)  # a core C method on one shared object: CPython's own cost

    return step


def _engine_updates(shared: Any, k: int, same: bool) -> Callable[[], None]:
    from cstrie import _binding as nb

    h = nb.ffi.cast("cst_trie *", shared._h)
    sig = "int(*)(cst_trie *, const char *, size_t, uint64_t)"
    sub = nb.ffi.cast(sig, nb.ffi.addressof(nb.lib, "cst_subscribe"))
    unsub = nb.ffi.cast(sig, nb.ffi.addressof(nb.lib, "cst_unsubscribe"))
    prefix = "" if same else f"t{k}."
    pats = [f"{prefix}r{j % 40}.w{j % 4}.*".encode() for j in range(256)]
    ident = 5_000_000 + k * 1000  # an engine id no other thread uses

    def step() -> None:
        for p in pats:
            sub(h, p, len(p), ident)
            unsub(h, p, len(p), ident)

    return step


def probe_engine_update(shared: Any, k: int) -> Callable[[], None]:
    return _engine_updates(shared, k, same=False)


def probe_engine_update_same(shared: Any, k: int) -> Callable[[], None]:
    return _engine_updates(shared, k, same=True)


def _own_subscriber_updates(shared: Any, k: int, keep: bool) -> Callable[[], None]:
    subscribe, unsubscribe = shared.subscribe, shared.unsubscribe
    subs = [BASE * 2 + k * 1000 + i for i in range(16)]
    # patterns of this thread only: no engine-level conflict with other threads
    pats = [f"t{k}.r{j % 40}.w{j % 4}.x{j % 13}".encode().decode() for j in range(16)]
    if keep:  # one permanent pair each: the id is never freed
        for s in subs:
            subscribe(f"t{k}.keep", s)

    def step() -> None:
        for _ in range(16):
            for p, s in zip(pats, subs, strict=True):
                subscribe(p, s)
                unsubscribe(p, s)

    return step


def probe_trie_update_keep_id(shared: Any, k: int) -> Callable[[], None]:
    return _own_subscriber_updates(shared, k, keep=True)


def probe_trie_update_free_id(shared: Any, k: int) -> Callable[[], None]:
    return _own_subscriber_updates(shared, k, keep=False)


def probe_snapshot(shared: Any, k: int) -> Callable[[], None]:
    snap = shared.snapshot

    def step() -> None:
        for _ in range(512):
            snap()

    return step


# name -> (what, setup[, the shared trie's factory])
PROBES: dict[str, tuple[Any, ...]] = {
    "python-loop": ("pure Python loop (the interpreter's own scaling)", probe_python_loop),
    "engine-lookup": ("cst_lookup through a per-thread cdata pointer", probe_engine_lookup),
    "matcher-lookup": ("per-thread Trie.matcher().lookup, own topics", probe_matcher_lookup),
    "matcher-lookup-nomatch": (
        "per-thread matcher, topics matching nothing (no subscriber objects returned)",
        probe_matcher_lookup_nomatch,
    ),
    "matcher-shared-topics": (
        "per-thread matcher, topic str objects shared by threads",
        probe_matcher_shared_topics,
    ),
    "trie-lookup": (
        "the shared Trie's lookup, bound once per thread (lookup = trie.lookup)",
        probe_trie_lookup,
    ),
    "trie-lookup-str-subs": (
        "the same, subscribers are interned strings (immortal on 3.13t)",
        probe_trie_lookup,
        _shared_trie_str_subscribers,
    ),
    "trie-lookup-inline": (
        "trie.lookup(t) written in the loop (reads the shared trie object per call)",
        probe_trie_lookup_inline,
    ),
    "str-method-inline": (
        "baseline: s.startswith(t) on one shared str, written in the loop",
        probe_str_method_inline,
    ),
    "engine-update": (
        "cst_subscribe + cst_unsubscribe, per-thread pointers, own ids, own patterns",
        probe_engine_update,
    ),
    "engine-update-same": (
        "the same, every thread on the same 256 patterns (one subscriber set each)",
        probe_engine_update_same,
    ),
    "trie-update-keep-id": (
        "Trie.subscribe + unsubscribe, own patterns, subscribers that keep a pair",
        probe_trie_update_keep_id,
    ),
    "trie-update-free-id": (
        "Trie.subscribe + unsubscribe, own patterns, the subscriber's last pair (id freed)",
        probe_trie_update_free_id,
    ),
    "snapshot": ("Trie.snapshot() taken and dropped", probe_snapshot),
}


def run_probe(
    setup: Setup, n: int, seconds: float, make_shared: Callable[[], Any] = _shared_trie
) -> dict[str, float]:
    """Run one probe on n threads; ops counts 512 per step."""
    shared = make_shared()
    if not _SHARED_TOPICS:
        _SHARED_TOPICS.extend(_topics(0))
    barrier = threading.Barrier(n + 1)
    out: list[tuple[int, float, float, float, int]] = [(0, 0.0, 0.0, 0.0, 0)] * n
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            step = setup(shared, k)
            step()  # warm up
            barrier.wait()
            sw0 = _switches()
            c0 = time.thread_time()
            t0 = time.perf_counter()
            deadline = t0 + seconds
            steps = 0
            while True:
                step()
                steps += 1
                if time.perf_counter() >= deadline:
                    break
            t1 = time.perf_counter()
            out[k] = (steps * 512, t0, t1, time.thread_time() - c0, _switches() - sw0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    ops = sum(o[0] for o in out)
    wall = max(o[2] for o in out) - min(o[1] for o in out)
    cpu = sum(o[3] for o in out)
    return {
        "ops": ops,
        "ops_per_s": ops / wall,
        "ops_per_cpu_s": ops / cpu if cpu else 0.0,
        "cpu_per_wall": cpu / wall,
        "waits_per_1k": 1000.0 * sum(o[4] for o in out) / ops,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m stress.harness.probes",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("probes", nargs="*", metavar="PROBE", help=f"any of: {', '.join(PROBES)}")
    p.add_argument("--threads", type=int, default=2, help="thread count compared with 1")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds per measurement")
    p.add_argument("--repeat", type=int, default=3, help="measurements each; the best is kept")
    p.add_argument(
        "--no-gc",
        action="store_true",
        help="disable the cyclic GC while measuring (its collections stop every thread)",
    )
    args = p.parse_args(argv)
    if args.no_gc:
        gc.disable()
    names = args.probes or list(PROBES)
    unknown = [x for x in names if x not in PROBES]
    if unknown:
        p.error(f"unknown probe(s): {', '.join(unknown)}")
    import cstrie.trie  # noqa: F401  (import the engine before reading the GIL state)

    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(
        f"python {sys.version.split()[0]}, GIL enabled: {gil}, threads 1 vs {args.threads}, "
        f"gc {'off' if args.no_gc else 'on'}"
    )
    print(
        f"{'probe':<24}{'ops/s 1':>12}{'ops/s N':>12}{'N/1':>7}{'eff N/1':>9}"
        f"{'cpu/wall N':>11}{'waits/1k N':>11}"
    )
    for name in names:
        what, setup, *factory = PROBES[name]
        best: dict[int, dict[str, float]] = {}
        for _ in range(args.repeat):
            for n in (1, args.threads):
                r = run_probe(setup, n, args.seconds, *factory)
                if n not in best or r["ops_per_s"] > best[n]["ops_per_s"]:
                    best[n] = r
        one, many = best[1], best[args.threads]
        print(
            f"{name:<24}{one['ops_per_s']:>12,.0f}{many['ops_per_s']:>12,.0f}"
            f"{many['ops_per_s'] / one['ops_per_s']:>7.2f}"
            f"{many['ops_per_cpu_s'] / one['ops_per_cpu_s']:>9.2f}"
            f"{many['cpu_per_wall']:>11.2f}{many['waits_per_1k']:>11.2f}   {what}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
