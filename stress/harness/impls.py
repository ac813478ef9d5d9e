"""The implementations a run drives: cstrie and the two baselines.

* ``cstrie``: the native trie; lookups through a per-thread ``Trie.matcher()``
  (in recorded runs one lookup in eight goes through ``Trie.lookup``), updates
  through ``Trie.subscribe``/``unsubscribe``, snapshots with ``Trie.snapshot()``,
  batches with ``Trie.lookup_many``.
* ``pytrie``: :class:`cstrie_lab.pytrie.PyTrie`, pure Python behind one lock; its
  "snapshot" is ``list(trie)`` (a consistent copy made under its lock), its
  ``lookup_many`` one ``lookup`` per topic.
* ``locked``: the native trie with every call behind one global
  :class:`threading.Lock` (what wrapping a thread-unsafe matcher would cost).

:meth:`Impl.bind` is called *inside* each worker thread, so every thread gets its
own bound methods, matcher and buffers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["IMPLS", "Bound", "Final", "Impl", "get_impl"]


@dataclass
class Bound:
    """One thread's callables for one trie."""

    lookup: Callable[[str], list[Any]]
    lookup_trie: Callable[[str], list[Any]]
    subscribe: Callable[[str, Any], bool]
    unsubscribe: Callable[[str, Any], bool]
    snapshot: Callable[[], Any]
    #: (snapshot, topic) -> (pairs, len, lookup of topic in the snapshot or None)
    read_snapshot: Callable[[Any, str], tuple[list[tuple[str, Any]], int, list[Any] | None]]
    lookup_many: Callable[[list[str]], list[list[Any]]]


@dataclass
class Final:
    """The state of a trie after a run."""

    pairs: list[tuple[str, Any]]
    length: int
    invariant_error: str | None


class Impl:
    name = ""
    label = ""

    def create(self, dialect: str) -> Any:
        raise NotImplementedError

    def bind(self, trie: Any) -> Bound:
        raise NotImplementedError

    def final(self, trie: Any) -> Final:
        raise NotImplementedError


def _read_native_snapshot(snap: Any, topic: str) -> tuple[list[tuple[str, Any]], int, list[Any]]:
    return list(snap), len(snap), snap.lookup(topic)


def _native_final(trie: Any) -> Final:
    error = None
    try:
        trie.check_invariants(strict=True)
    except AssertionError as exc:
        error = str(exc)
    return Final(list(trie), len(trie), error)


class CstrieImpl(Impl):
    name = "cstrie"
    label = "cstrie (per-thread matcher)"
    #: The result cache's budget in bytes for every trie a run makes (0: off;
    #: ``--cache``).  Its answers are checked like any other.
    cache_bytes = 0

    def create(self, dialect: str) -> Any:
        from cstrie import Trie

        trie = Trie(dialect)
        if self.cache_bytes:
            trie.set_cache(self.cache_bytes)
        return trie

    def bind(self, trie: Any) -> Bound:
        m = trie.matcher()
        return Bound(
            lookup=m.lookup,
            lookup_trie=trie.lookup,
            subscribe=trie.subscribe,
            unsubscribe=trie.unsubscribe,
            snapshot=trie.snapshot,
            read_snapshot=_read_native_snapshot,
            lookup_many=trie.lookup_many,
        )

    def final(self, trie: Any) -> Final:
        if self.cache_bytes:
            st = trie.cache_stats()
            print(
                f"  result cache: {st['hits']:,} hits, {st['misses']:,} misses, "
                f"{st['fills']:,} fills, {st['invalidated']:,} entries invalidated by updates, "
                f"{st['evicted']:,} evicted",
                flush=True,
            )
        return _native_final(trie)


class LockedImpl(Impl):
    name = "locked"
    label = "cstrie behind one global Lock"

    def create(self, dialect: str) -> Any:
        from cstrie import Trie

        return (Trie(dialect), threading.Lock())

    def bind(self, state: Any) -> Bound:
        trie, lock = state
        t_lookup = trie.lookup
        t_sub = trie.subscribe
        t_unsub = trie.unsubscribe
        t_snap = trie.snapshot
        t_many = trie.lookup_many

        def lookup(topic: str) -> list[Any]:
            with lock:
                return t_lookup(topic)

        def subscribe(pattern: str, sub: Any) -> bool:
            with lock:
                return t_sub(pattern, sub)

        def unsubscribe(pattern: str, sub: Any) -> bool:
            with lock:
                return t_unsub(pattern, sub)

        def snapshot() -> Any:
            with lock:
                return t_snap()

        def lookup_many(topics: list[str]) -> list[list[Any]]:
            with lock:
                return t_many(topics)

        return Bound(
            lookup, lookup, subscribe, unsubscribe, snapshot, _read_native_snapshot, lookup_many
        )

    def final(self, state: Any) -> Final:
        return _native_final(state[0])


class PyTrieImpl(Impl):
    name = "pytrie"
    label = "PyTrie (pure Python, one Lock)"

    def create(self, dialect: str) -> Any:
        from cstrie_lab.pytrie import PyTrie

        return PyTrie(dialect)

    def bind(self, trie: Any) -> Bound:
        def snapshot() -> Any:
            return list(trie)  # a consistent copy taken under the trie's lock

        def read(snap: Any, topic: str) -> tuple[list[tuple[str, Any]], int, None]:
            return snap, len(snap), None

        lookup = trie.lookup

        def lookup_many(topics: list[str]) -> list[list[Any]]:
            return [lookup(t) for t in topics]

        return Bound(lookup, lookup, trie.subscribe, trie.unsubscribe, snapshot, read, lookup_many)

    def final(self, trie: Any) -> Final:
        pairs = list(trie)
        return Final(pairs, len(trie), None)


IMPLS: dict[str, Impl] = {i.name: i for i in (CstrieImpl(), PyTrieImpl(), LockedImpl())}


def get_impl(name: str) -> Impl:
    try:
        return IMPLS[name]
    except KeyError:
        raise ValueError(f"unknown implementation {name!r} (have {', '.join(IMPLS)})") from None
