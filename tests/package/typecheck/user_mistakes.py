"""A user's program with type errors: tests/package/test_typing.py type-checks it
with ``mypy --strict`` against the installed cstrie and expects exactly the
errors marked ``# E: <code>`` on their lines (never run)."""

from __future__ import annotations

import cstrie

t = cstrie.Trie()
t.lookup(1)  # E: arg-type
t.lookup(b"a.b")  # E: arg-type
t.has_subscribers(None)  # E: arg-type
t.match(["a", "b"])  # E: arg-type
t.lookup_many([1, 2])  # E: list-item
t.subscribe(1, "alice")  # E: arg-type
t.subscribe("a.b", ["an", "unhashable", "list"])  # E: arg-type
t.unsubscribe("a.b", "alice", group=3)  # E: arg-type
t.route("a.b", key=1.5)  # E: arg-type
found: int = t.lookup("a.b")  # E: assignment
snap = t.snapshot()
snap.subscribe("a.b", "alice")  # E: attr-defined
t.lookup("a.b", "c")  # E: call-arg
