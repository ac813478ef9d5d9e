"""Memory of subscriber churn while a snapshot is open (registry rule 3).

A broker takes a snapshot (an export, a slow consumer of the subscription
set) and keeps it open while clients come and go.  Clients that subscribe
after the snapshot and leave again must not stay alive for it: the snapshot
holds none of their pairs.  This measures the process's resident set before
and after N such clients (each with a 10 KB buffer, as a session object
would have), once with no snapshot open and once with one, in one process.

    python stress/lab/bench_snapshot_churn.py [--clients 100000] [--size 10000]

Prints the RSS growth of both runs and the registry's size; exits 1 when the
run with the snapshot grew more than 5% (the floor) over its start.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys


def rss_bytes() -> int:
    """The current resident set (Linux /proc), or the peak elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Client:
    __slots__ = ("buf", "n")

    def __init__(self, n: int, size: int) -> None:
        self.n = n
        self.buf = bytearray(size)


def churn(clients: int, size: int, with_snapshot: bool) -> tuple[int, int, int]:
    from cstrie import Trie

    trie = Trie("mqtt")
    for k in range(1000):
        trie.subscribe(f"site/{k % 10}/dev/{k}/#", f"resident-{k}")
    snap = trie.snapshot() if with_snapshot else None
    gc.collect()
    before = rss_bytes()
    for n in range(clients):
        c = Client(n, size)
        trie.subscribe(f"site/{n % 10}/dev/{n % 1000}/+", c)
        trie.subscribe("site/#", c)
        trie.unsubscribe(f"site/{n % 10}/dev/{n % 1000}/+", c)
        trie.unsubscribe("site/#", c)
        del c
    gc.collect()
    after = rss_bytes()
    ids = len(trie._reg)
    assert snap is None or len(snap) == 1000
    return before, after, ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=10_000, help="bytes held by each client")
    args = ap.parse_args(argv)
    worst = 0.0
    for with_snapshot in (False, True):
        before, after, ids = churn(args.clients, args.size, with_snapshot)
        growth = (after - before) / before
        label = "one snapshot open" if with_snapshot else "no snapshot"
        print(
            f"{label:18s} RSS {before / 2**20:7.1f} MiB -> {after / 2**20:7.1f} MiB "
            f"({growth * 100:+.1f}%), registry ids after: {ids}"
        )
        if with_snapshot:
            worst = growth
    ok = worst <= 0.05
    print(f"floor (RSS growth <= 5% with a snapshot open): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
