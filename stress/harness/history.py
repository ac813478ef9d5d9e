"""What a recorded run leaves behind: per-thread operation histories.

Every thread records, for each operation it performed, the operation itself
(``kind``, ``arg``, ``bit``: see :mod:`stress.harness.workload`), its invocation
and response stamps from the shared clock (:mod:`stress.harness.clock`) and what
it saw:

* subscribe/unsubscribe: the returned bool;
* lookup: the returned list (subscriber objects are ``BASE + index`` ints);
* lookup_many: the returned list of rows (lists), one per topic of the batch;
* snapshot: ``SnapshotView(pairs, length, lookup)``, read *after* the response
  stamp (a snapshot is immutable, so reading it later is the same);
* an operation that raised: an :class:`OpError`.

Positions ``0 .. n_initial-1`` of a thread are the initial subscribes done
before the timed part; ``describe`` numbers the timed operations from 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stress.harness.workload import (
    BASE,
    LOOKUP,
    LOOKUP_MANY,
    LOOKUP_TRIE,
    SNAPSHOT,
    SUBSCRIBE,
    UNSUBSCRIBE,
    KeySpace,
)

__all__ = ["History", "OpError", "SnapshotView", "ThreadHistory"]


@dataclass(frozen=True)
class OpError:
    """An operation raised instead of returning."""

    text: str


@dataclass(frozen=True)
class SnapshotView:
    """What was read from one snapshot: its pairs, its ``len`` and one lookup."""

    pairs: list[tuple[str, Any]]
    length: int
    lookup: list[Any] | None = None


@dataclass
class ThreadHistory:
    """The operations of one thread, in program order (parallel lists)."""

    thread: int
    kind: list[int] = field(default_factory=list)
    arg: list[int] = field(default_factory=list)
    bit: list[int] = field(default_factory=list)
    inv: list[int] = field(default_factory=list)
    resp: list[int] = field(default_factory=list)
    result: list[Any] = field(default_factory=list)
    n_initial: int = 0

    def __len__(self) -> int:
        return len(self.kind)

    def add(self, kind: int, arg: int, bit: int, inv: int, resp: int, result: Any) -> int:
        """Append one operation (for hand-made histories); returns its position."""
        self.kind.append(kind)
        self.arg.append(arg)
        self.bit.append(bit)
        self.inv.append(inv)
        self.resp.append(resp)
        self.result.append(result)
        return len(self.kind) - 1


@dataclass
class History:
    """All threads' histories of one run plus the trie's final state."""

    keyspace: KeySpace
    threads: list[ThreadHistory]
    #: pairs in the trie after the run, or None when not known
    final_pairs: list[tuple[str, Any]] | None = None
    final_length: int | None = None
    #: message from ``check_invariants(strict=True)``, None when it passed
    invariant_error: str | None = None
    impl: str = ""
    clock: str = ""

    @property
    def n_ops(self) -> int:
        return sum(len(t) for t in self.threads)

    # ------------------------------------------------------------ describing
    def op_name(self, thread: int, pos: int) -> str:
        th = self.threads[thread]
        if pos < th.n_initial:
            return f"thread {thread} initial op #{pos}"
        return f"thread {thread} op #{pos - th.n_initial}"

    def describe(
        self, thread: int, pos: int, with_result: bool = True, row: int | None = None
    ) -> str:
        """``thread 1 op #52 subscribe('a.*', 1000003) -> True [t=120..125]``.

        With ``row`` (a ``lookup_many``): that row and its size, ``thread 0 op #9
        trie.lookup_many(['crowd.1', 'crowd.0']) row 1 ('crowd.0') -> 1712
        subscribers [t=..]``."""
        if thread < 0:
            return "the final contents of the trie (after all threads joined)"
        ks = self.keyspace
        th = self.threads[thread]
        kind, arg, bit = th.kind[pos], th.arg[pos], th.bit[pos]
        if kind in (LOOKUP, LOOKUP_TRIE):
            via = "matcher.lookup" if kind == LOOKUP else "trie.lookup"
            call = f"{via}({ks.topics[arg]!r})"
        elif kind in (SUBSCRIBE, UNSUBSCRIBE):
            name = "subscribe" if kind == SUBSCRIBE else "unsubscribe"
            call = f"{name}({ks.patterns[ks.cands[arg][bit]]!r}, {BASE + arg})"
        elif kind == SNAPSHOT:
            call = "snapshot()"
        elif kind == LOOKUP_MANY:
            batch = ks.batches[arg] if 0 <= arg < len(ks.batches) else ()
            call = f"trie.lookup_many({[ks.topics[ti] for ti in batch]!r})"
            if row is not None:
                topic = ks.topics[batch[row]] if 0 <= row < len(batch) else "?"
                call += f" row {row} ({topic!r})"
        else:
            call = f"<unknown op kind {kind}>"
        text = f"{self.op_name(thread, pos)} {call}"
        if with_result:
            result = th.result[pos]
            if row is not None and isinstance(result, list) and 0 <= row < len(result):
                text += f" -> {len(result[row])} subscribers"
            else:
                text += f" -> {_short(result)}"
        return f"{text} [t={th.inv[pos]}..{th.resp[pos]}]"


def _short(result: Any) -> str:
    if isinstance(result, SnapshotView):
        return f"<snapshot of {result.length} pairs>"
    if isinstance(result, OpError):
        return f"raised {result.text}"
    if isinstance(result, list) and result and all(type(x) is list for x in result):
        return "<rows of " + ", ".join(str(len(x)) for x in result) + " subscribers>"
    if isinstance(result, list):
        if len(result) > 12:
            shown = ", ".join(repr(x) for x in sorted(result, key=repr)[:12])
            return f"[{shown}, ... ({len(result)} in all)]"
        return repr(sorted(result, key=repr))
    return repr(result)
