"""Subscribers are user objects: their ``__del__``, ``__hash__`` and ``__eq__``
are arbitrary code, and may call back into the trie.

Rule (registry rule 5, ``cstrie/registry.py``): no user code runs while the
engine or the registry holds a lock.  A subscriber's hash is taken before a
stripe lock, ``==`` runs with the locks dropped, and a reference the registry
drops under a lock (the slot of a freed id, the last handle's objects) is
released once the thread holds none.  So every public method called from
each of those three hooks returns or raises: it never hangs (a re-entrant
lock would wait for itself forever, on 3.11 and 3.13t alike).

Each hook runs in a child process with a watchdog (``faulthandler``): a hang
prints every thread's stack and fails the test instead of the whole run.
The child runs every method from the hook, on the trie whose registry is
inside the call that ran the hook, with subscribers hashed into the same
stripe as the hooked one (a held stripe lock would be the one they need).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import faulthandler, gc, io, sys, weakref
faulthandler.dump_traceback_later(60, exit=True)
from cstrie import Trie

HOOK = sys.argv[1]
H = 1234567  # every subscriber below shares this hash: one stripe

class Peer:
    """A subscriber in the hooked one's stripe, equal only to itself."""
    def __init__(self, n): self.n = n
    def __hash__(self): return H
    def __eq__(self, other): return self is other
    def __repr__(self): return f"Peer({self.n})"

calls = []
busy = []
errors = []

def every_method(t):
    """Each public method of a Trie (and of its snapshot); not again from a
    hook it sets off itself."""
    if busy:
        return
    busy.append(1)
    try:
        run_all(t)
    except BaseException as exc:  # a hook's exception may be swallowed: keep it
        import traceback
        errors.append("".join(traceback.format_exception(exc)))
        raise
    finally:
        busy.pop()

def run_all(t):
    p = Peer(len(calls))
    out = []
    out.append(t.subscribe("re.enter", p))
    out.append(t.subscribe("re.enter.g", p, group="grp"))
    out.append(t.lookup("re.enter"))
    out.append(t.match("re.enter"))
    out.append(t.has_subscribers("re.enter"))
    out.append(t.lookup_many(["re.enter", "x"]))
    out.append(t.route("re.enter.g"))
    out.append(t.route_by_group("re.enter.g"))
    out.append(t.subscribers("re.enter"))
    out.append(t.subscribers("re.enter.g", group="grp"))
    out.append(t.intersecting("re.*"))
    s = t.snapshot()
    out.append((s.lookup("re.enter"), len(s), list(s)[:1], s.subscriptions()))
    c = t.copy()
    out.append((c.subscribe("copy", p), c.lookup("copy")))
    del c
    c2 = s.copy()
    out.append(len(c2))
    del c2, s
    out.append(t.subscribe_many([("many.a", p), ("many.b", Peer(-1))]))
    out.append((len(t), bool(t), t.stats()["subscriptions"]))
    out.append(t.subscriptions())
    out.append(list(t)[:1])
    t.set_group_policy("grp", "random")
    out.append(t.group_policy("grp"))
    buf = io.BytesIO()
    out.append(t.export(buf, "jsonl", encode=lambda o: f"{type(o).__name__}:{id(o)}"))
    out.append(t.tree(2))
    t.compact()
    t.check_invariants(strict=True)
    out.append(t.unsubscribe("re.enter.g", p, group="grp"))
    out.append(t.unsubscribe("re.enter", p))
    out.append(t.unsubscribe("many.a", p))
    calls.append(out)

trie = Trie()

class Hooked:
    """Equal to every other Hooked with the same key; its hooks call back."""
    def __init__(self, key): self.key = key
    def __hash__(self):
        if HOOK == "hash":
            every_method(trie)
        return H
    def __eq__(self, other):
        if HOOK == "eq" and not calls:  # once: see the test below for "always"
            every_method(trie)
        return isinstance(other, Hooked) and other.key == self.key
    def __del__(self):
        if HOOK == "del":
            every_method(trie)

if HOOK == "del":
    # The registry holds the last reference to a: it is freed when the equal
    # b takes a's last pair away (reg_free, under the stripe lock), when a
    # snapshot that kept it closes (unpin), when clear() removes it, and when
    # the last handle goes (drop_handle).
    trie.subscribe("a", Hooked(1))
    trie.unsubscribe("a", Hooked(1))
    snap = trie.snapshot()
    trie.subscribe("b", Hooked(2))
    snap2 = trie.snapshot()
    trie.unsubscribe("b", Hooked(2))
    del snap, snap2
    trie.subscribe("c", Hooked(3))
    trie.clear()
    other = Trie()
    other.subscribe("d", Hooked(4))
    trie_ref = trie

    class LastHandle:
        def __hash__(self): return H
        def __del__(self): every_method(trie_ref)
    other.subscribe("e", LastHandle())
    del other
    gc.collect()
elif HOOK == "hash":
    trie.subscribe("a", Hooked(1))
    assert trie.lookup("a")
elif HOOK == "eq":
    first, second = Hooked(1), Hooked(1)
    trie.subscribe("a", first)
    trie.subscribe("b", second)  # == against first runs with no lock held
    assert sorted(trie.match("a") + trie.match("b"))
if errors:
    print(errors[0], file=sys.stderr)
    sys.exit(3)
print("calls", len(calls))
'''


@pytest.mark.parametrize("hook", ["del", "hash", "eq"])
def test_every_public_method_works_from_a_subscriber_hook(hook: str) -> None:
    """Rule: from a subscriber's ``__del__``, ``__hash__`` or ``__eq__``, every
    public method of the trie (and of its snapshots and copies) returns or
    raises; none waits for a lock its own thread holds."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), hook],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    calls = int(proc.stdout.split()[-1])
    assert calls >= 1, proc.stdout


MUTATING_EQ = r"""
import faulthandler, sys
faulthandler.dump_traceback_later(60, exit=True)
from cstrie import Trie
trie = Trie()
n = [0]
inside = []
class Churn:
    def __init__(self, key): self.key = key
    def __hash__(self): return 7
    def __eq__(self, other):
        if not inside:  # each outermost comparison subscribes one more of the same hash
            inside.append(1)
            n[0] += 1
            try:
                trie.subscribe("noise", Churn(("noise", n[0])))
            finally:
                inside.pop()
        return isinstance(other, Churn) and other.key == self.key
trie.subscribe("a", Churn(1))
try:
    trie.subscribe("b", Churn(1))
except RuntimeError as exc:
    print("raised", exc)
else:
    print("returned")
assert trie.lookup("a")
"""


def test_an_eq_that_always_changes_the_table_gets_an_error_not_a_hang() -> None:
    """Hostile input: an ``__eq__`` that subscribes a new subscriber of the same
    hash every time it runs keeps changing the table it is compared against;
    the registry compares with its locks dropped and tries again a bounded
    number of times, then raises ``RuntimeError`` (the call returns)."""
    proc = subprocess.run(
        [sys.executable, "-c", MUTATING_EQ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert proc.stdout.startswith("raised") and "kept changing" in proc.stdout
