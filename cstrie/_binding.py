"""The one thin layer over the compiled engine (``cstrie._native``).

Everything that touches ``ffi``/``lib`` lives here; the public classes in
:mod:`cstrie.trie` are built only on these functions and on the fast path.
:func:`raise_status` is the single place where an engine status code becomes a
Python exception.

The hot calls (lookups, subscribe, unsubscribe) do not go through cffi: a cffi
call builds an argument tuple, converts every argument, releases and re-takes
the GIL and saves errno, which cost more than the lookup itself.  They go
through ``cstrie._hotpath``, a small CPython extension (``native/hotpath/``)
that calls the same engine instance: at import this module hands it the
address of the engine's table of entry points (``cst_hot_api_table``) and
:func:`raise_status`, so engine errors raise exactly what they raise here.
"""

from __future__ import annotations

import os
import sysconfig
from array import array
from collections.abc import Iterator
from typing import Any, NoReturn

from cstrie import _hotpath
from cstrie._native import ffi, lib
from cstrie.dialect import Dialect, shown

__all__ = ["IdNumbering", "address", "check", "ffi", "lib", "native_dialect"]

_VALIDATION = {
    lib.CST_EEMPTY,
    lib.CST_EEMPTYWORD,
    lib.CST_EWILDTOPIC,
    lib.CST_ETOOLONG,
    lib.CST_ENUL,
    lib.CST_EMULTIPOS,
    lib.CST_EWILDWORD,
    lib.CST_EFORBIDDEN,
    lib.CST_ETOODEEP,
}


def raise_status(
    status: int, dialect: Dialect | None = None, what: str = "", text: object = None
) -> NoReturn:
    """Raise the exception for a negative engine status.

    Validation codes are turned into the dialect's own message (the Python
    validator in :mod:`cstrie.dialect` is the single source of those messages).
    """
    if status in _VALIDATION and dialect is not None:
        if what == "pattern":
            dialect.split_pattern(text)
        else:
            dialect.split_topic(text)
        text_shown = shown(text) if isinstance(text, str) else repr(text)
        raise ValueError(
            f"{what} {text_shown} is invalid in the {dialect.name} dialect (engine code {status})"
        )
    if status == lib.CST_ENOMEM:
        raise MemoryError("cstrie engine: out of memory")
    if status == lib.CST_EREADONLY:
        raise TypeError("this cstrie handle is read-only (a Snapshot); use Trie.copy()")
    if status == lib.CST_EINVAL:
        raise ValueError("cstrie engine: invalid argument")
    raise RuntimeError(f"cstrie engine: unexpected status {status}")


def check(status: int, dialect: Dialect | None = None, what: str = "", text: object = None) -> int:
    """Return ``status`` when it is a success (>= 0), else raise for it."""
    if status < 0:
        raise_status(status, dialect, what, text)
    return status


class NativeDialect:
    """A ``cst_dialect`` struct and the byte strings it points into."""

    __slots__ = ("_keep", "ptr")

    def __init__(self, d: Dialect) -> None:
        sep = ffi.new("char[]", d.separator.encode())
        single = ffi.new("char[]", d.single.encode()) if d.single is not None else ffi.NULL
        multi = ffi.new("char[]", d.multi.encode()) if d.multi is not None else ffi.NULL
        self._keep = (sep, single, multi)
        self.ptr = ffi.new("cst_dialect *")
        self.ptr.sep = sep
        self.ptr.sep_len = len(d.separator.encode())
        self.ptr.single = single
        self.ptr.single_len = len(d.single.encode()) if d.single is not None else 0
        self.ptr.multi = multi
        self.ptr.multi_len = len(d.multi.encode()) if d.multi is not None else 0
        self.ptr.multi_min = d.multi_min
        self.ptr.multi_last_only = int(d.multi_last_only)
        self.ptr.strict_wildcards = int(d.strict_wildcards)
        self.ptr.topic_wildcards = int(d.topic_wildcards)
        self.ptr.empty_topic = int(d.empty_topic)
        self.ptr.empty_words = int(d.empty_words)
        self.ptr.dollar_rule = int(d.dollar_rule)
        self.ptr.forbid_nul = int(d.forbid_nul)
        self.ptr.max_bytes = d.max_bytes or 0
        bits = [0, 0]
        for ch in d.forbidden:  # ASCII only (Dialect checks): one bit per byte value
            bits[ord(ch) >> 6] |= 1 << (ord(ch) & 63)
        self.ptr.forbidden = bits
        self.ptr.max_levels = d.max_levels or 0


def native_dialect(d: Dialect) -> NativeDialect:
    return NativeDialect(d)


def new_trie_ptr(d: Dialect) -> Any:
    """A new writable engine handle, not freed by cffi: for a ``Trie``, whose C
    base owns it from ``_bind`` on (the caller frees it if binding fails)."""
    nd = NativeDialect(d)
    ptr = lib.cst_new(nd.ptr)
    if ptr == ffi.NULL:
        raise MemoryError("cstrie engine: out of memory creating a trie")
    return ptr


def snapshot_ptr(handle: Any, readonly: bool) -> Any:
    """An O(1) snapshot (read-only) or copy of ``handle``, not freed by cffi
    (see :func:`new_trie_ptr`)."""
    ptr = lib.cst_snapshot(handle, 1 if readonly else 0)
    if ptr == ffi.NULL:
        raise MemoryError("cstrie engine: out of memory taking a snapshot")
    return ptr


def snapshot(handle: Any, readonly: bool) -> Any:
    """A snapshot or copy freed when the returned cdata is collected."""
    return ffi.gc(snapshot_ptr(handle, readonly), lib.cst_free)


def clear_take(handle: Any) -> Any:
    ptr = lib.cst_clear_take(handle)
    if ptr == ffi.NULL:
        raise MemoryError("cstrie engine: out of memory clearing a trie")
    return ffi.gc(ptr, lib.cst_free)


def address(handle: Any) -> int:
    """The engine handle's address, for the fast path (``Reader._bind``)."""
    return int(ffi.cast("uintptr_t", handle))


#: True on a free-threaded (``--disable-gil``) build of CPython.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class Groups:
    """A ``cst_chunk`` output struct with its buffers."""

    __slots__ = ("_ends", "_ids", "_pat", "_share", "s", "with_share")

    def __init__(
        self, pat_cap: int, ids_cap: int, groups_cap: int, with_share: bool = False
    ) -> None:
        self.s = ffi.new("cst_chunk *")
        self.with_share = with_share
        self.resize(pat_cap, ids_cap, groups_cap)

    def resize(self, pat_cap: int, ids_cap: int, groups_cap: int) -> None:
        self._pat = ffi.new("char[]", max(pat_cap, 1))
        self._ids = ffi.new("uint64_t[]", max(ids_cap, 1))
        self._ends = (
            ffi.new("int64_t[]", max(groups_cap, 1)),
            ffi.new("int64_t[]", max(groups_cap, 1)),
        )
        s = self.s
        s.pat = self._pat
        s.pat_cap = max(pat_cap, 1)
        s.ids = self._ids
        s.ids_cap = max(ids_cap, 1)
        s.pat_end = self._ends[0]
        s.ids_end = self._ends[1]
        s.entries_cap = max(groups_cap, 1)
        if self.with_share:
            self._share = ffi.new("uint64_t[]", max(groups_cap, 1))
            s.share = self._share

    def read(self) -> list[tuple[bytes, list[int]]]:
        """The groups in the buffers: (pattern bytes, ids) each."""
        s = self.s
        n = s.nentries
        pat_end = ffi.unpack(s.pat_end, n)
        ids_end = ffi.unpack(s.ids_end, n)
        pat = ffi.buffer(s.pat, pat_end[-1] if n else 0)[:]
        ids = ffi.unpack(s.ids, ids_end[-1]) if n else []
        out = []
        p0 = i0 = 0
        for g in range(n):
            out.append((pat[p0 : pat_end[g]], ids[i0 : ids_end[g]]))
            p0, i0 = pat_end[g], ids_end[g]
        return out


def ids_call(fn: Any, handle: Any, data: bytes) -> list[int] | int:
    """Run a ``(handle, bytes, len, out, cap)`` engine call that returns ids
    (not a hot path: a fresh buffer each time, so threads share none)."""
    cap = 256
    while True:
        buf = ffi.new("uint64_t[]", cap)
        n = fn(handle, data, len(data), buf, cap)
        if n < 0:
            return int(n)
        if n <= cap:
            ids: list[int] = ffi.unpack(buf, n)
            return ids
        cap = n


class IdNumbering:
    """Engine ids -> 1, 2, 3, ... in order of first appearance (``cst_numbering``).

    :meth:`number` numbers a whole array of ids in one engine call; ``order``
    lists the ids in the order they were numbered (id ``order[k - 1]`` has
    number ``k``).  One per export; not for sharing between threads.
    """

    __slots__ = ("_nm", "order")

    def __init__(self) -> None:
        nm = lib.cst_numbering_new()
        if nm == ffi.NULL:
            raise MemoryError("cstrie engine: out of memory starting a numbering")
        self._nm = ffi.gc(nm, lib.cst_numbering_free)
        self.order: list[int] = []

    def __len__(self) -> int:
        return len(self.order)

    def number(self, ids: array[int]) -> array[int]:
        """The numbers of ``ids`` (an ``array('Q')``), new ids numbered in order."""
        n = len(ids)
        refs = array("Q", bytes(8 * n))
        fresh = array("Q", bytes(8 * n))
        if n:
            r = lib.cst_numbering_apply(
                self._nm,
                ffi.from_buffer("uint64_t[]", ids),
                n,
                ffi.from_buffer("uint64_t[]", refs, require_writable=True),
                ffi.from_buffer("uint64_t[]", fresh, require_writable=True),
            )
            check(r)
            self.order.extend(fresh[:r])
        return refs


def interleave(
    a: bytes, a_end: array[int], b: bytes | bytearray, b_end: array[int], refs: array[int]
) -> bytearray:
    """Item i of byte table ``a`` then item ``refs[i]`` of table ``b``, for every
    i, in one engine call (``cst_interleave``).  A table is a blob and the end
    offset of each item (``array('q')``); ``refs`` is an ``array('Q')`` as long
    as ``a_end``.  ``ValueError`` for a ref past ``b``'s items."""
    n = len(a_end)
    if len(refs) != n:
        raise ValueError(f"interleave: {len(refs)} refs for {n} items")
    args = (
        ffi.from_buffer(a),
        ffi.from_buffer("int64_t[]", a_end),
        n,
        ffi.from_buffer(b),
        ffi.from_buffer("int64_t[]", b_end),
        len(b_end),
        ffi.from_buffer("uint64_t[]", refs),
    )
    out = bytearray(check(lib.cst_interleave(*args, ffi.NULL)))
    if out:
        lib.cst_interleave(*args, ffi.from_buffer(out, require_writable=True))
    return out


def gather(
    b: bytes | bytearray, b_end: array[int], refs: array[int]
) -> tuple[bytearray, array[int]]:
    """Item ``refs[i]`` of byte table ``b`` for every i, back to back, and the
    offsets of the result (``array('q')``, starting with 0: Arrow's layout),
    in one engine call (``cst_gather``).  ``ValueError`` for a ref past ``b``'s
    items."""
    n = len(refs)
    args = (ffi.from_buffer(b), ffi.from_buffer("int64_t[]", b_end), len(b_end))
    rp = ffi.from_buffer("uint64_t[]", refs)
    out = bytearray(check(lib.cst_gather(*args, rp, n, ffi.NULL, ffi.NULL)))
    offsets = array("q", (0,)) * (n + 1)
    if n:
        lib.cst_gather(
            *args,
            rp,
            n,
            ffi.from_buffer(out, require_writable=True) if out else ffi.new("char[]", 1),
            ffi.from_buffer("int64_t[]", offsets, require_writable=True) + 1,
        )
    return out, offsets


def iterate(handle: Any, chunk: int = 65536) -> Iterator[tuple[bytes, list[int]]]:
    """(pattern bytes, ids) groups of a consistent snapshot of handle: the
    ordinary pairs only (share-group memberships: :func:`iterate_shared`).

    The snapshot and the buffers are taken now (a MemoryError is raised here,
    not during the iteration)."""
    it = lib.cst_iter_new(handle)
    if it == ffi.NULL:
        raise MemoryError("cstrie engine: out of memory starting an iteration")
    it = ffi.gc(it, lib.cst_iter_free)
    return _iter_groups(it, Groups(chunk * 4, chunk, chunk // 4))


def iterate_shared(handle: Any, chunk: int = 65536) -> Iterator[tuple[bytes, int, list[int]]]:
    """(pattern bytes, share, ids) of every group of a consistent snapshot:
    share is 0 for an ordinary pattern's subscribers, else the id of the share
    group whose members ids are (on that filter)."""
    it = lib.cst_iter_new(handle)
    if it == ffi.NULL:
        raise MemoryError("cstrie engine: out of memory starting an iteration")
    it = ffi.gc(it, lib.cst_iter_free)
    return _iter_shared(it, Groups(chunk * 4, chunk, chunk // 4, with_share=True))


def _iter_shared(it: Any, g: Groups) -> Iterator[tuple[bytes, int, list[int]]]:
    while True:
        r = lib.cst_iter_next(it, g.s)
        if r == lib.CST_ETRUNC:
            s = g.s
            g.resize(max(s.need_pat * 2, s.pat_cap), max(s.need_ids, s.ids_cap), s.entries_cap)
            continue
        check(r)
        if r == 0:
            return
        shares = ffi.unpack(g.s.share, r)
        for (pat, ids), share in zip(g.read(), shares, strict=True):
            yield pat, share, ids


def _iter_groups(it: Any, g: Groups) -> Iterator[tuple[bytes, list[int]]]:
    while True:
        r = lib.cst_iter_next(it, g.s)
        if r == lib.CST_ETRUNC:
            s = g.s
            g.resize(max(s.need_pat * 2, s.pat_cap), max(s.need_ids, s.ids_cap), s.entries_cap)
            continue
        check(r)
        if r == 0:
            return
        yield from g.read()


# ------------------------------------------------------------ topic index
def topic_put(handle: Any, key: bytes, ident: int, d: Dialect, topic: object) -> tuple[bool, int]:
    """(new, replaced id): store ident under the topic key."""
    old = ffi.new("uint64_t *")
    r = check(lib.cst_topic_put(handle, key, len(key), ident, old), d, "topic", topic)
    return r == 1, int(old[0])


def topic_get(handle: Any, key: bytes, d: Dialect, topic: object) -> int | None:
    ident = ffi.new("uint64_t *")
    r = check(lib.cst_topic_get(handle, key, len(key), ident), d, "topic", topic)
    return int(ident[0]) if r else None


def topic_remove(handle: Any, key: bytes, d: Dialect, topic: object) -> int | None:
    old = ffi.new("uint64_t *")
    r = check(lib.cst_topic_remove(handle, key, len(key), old), d, "topic", topic)
    return int(old[0]) if r else None


def reverse_query(
    handle: Any, data: bytes, d: Dialect, filt: object, chunk: int = 256, filters: bool = False
) -> Iterator[list[tuple[bytes, int]]]:
    """Chunks of (topic bytes, id) of every stored topic the filter matches,
    on a snapshot taken now (an invalid filter raises here, not later).  With
    filters=True, handle is a subscription trie and the chunks hold the
    stored filters that may intersect the filter (ids 0)."""
    err = ffi.new("int *")
    new = lib.cst_rquery_filters if filters else lib.cst_rquery_new
    q = new(handle, data, len(data), err)
    if q == ffi.NULL:
        raise_status(err[0], d, "pattern", filt)
    return _reverse_chunks(ffi.gc(q, lib.cst_rquery_free), chunk)


def _reverse_chunks(q: Any, chunk: int) -> Iterator[list[tuple[bytes, int]]]:
    text_cap = chunk * 32
    text = ffi.new("char[]", text_cap)
    ends = ffi.new("int64_t[]", chunk)
    ids = ffi.new("uint64_t[]", chunk)
    need = ffi.new("size_t *")
    while True:
        r = lib.cst_rquery_next(q, text, text_cap, ends, ids, chunk, need)
        if r == lib.CST_ETRUNC:
            text_cap = max(need[0], text_cap * 2)
            text = ffi.new("char[]", text_cap)
            continue
        check(r)
        if r == 0:
            return
        raw = ffi.unpack(text, ends[r - 1])
        out = []
        start = 0
        for k in range(r):
            end = ends[k]
            out.append((raw[start:end], int(ids[k])))
            start = end
        yield out


def reverse_count(handle: Any, data: bytes, d: Dialect, filt: object) -> int:
    return check(lib.cst_rquery_count(handle, data, len(data)), d, "pattern", filt)


def stats(handle: Any) -> dict[str, int]:
    s = ffi.new("cst_stats *")
    check(lib.cst_stats_get(handle, s))
    return {
        name: int(getattr(s, name))
        for name in (
            "pairs",
            "patterns",
            "inodes",
            "cnodes",
            "snodes",
            "tnodes",
            "lnodes",
            "setnodes",
            "max_depth",
            "lookups",
            "generation",
            "share_pairs",
            "share_groups",
        )
    }


def check_invariants(handle: Any, strict: bool = True) -> str | None:
    """None when the structure is sound, else the checker's message."""
    msg = ffi.new("char[]", 512)
    r = lib.cst_check(handle, 1 if strict else 0, msg, 512)
    return None if r == 0 else ffi.string(msg).decode()


def dump(handle: Any) -> str:
    n = lib.cst_dump(handle, ffi.NULL, 0)
    buf = ffi.new("char[]", n + 1)
    lib.cst_dump(handle, buf, n + 1)
    text: bytes = ffi.string(buf, n)
    return text.decode("utf-8", "replace")


def _realize_types() -> None:
    """Build every C type the binding uses, now, on the importing thread.

    cffi builds a function's and a struct's types on their first use.  On
    free-threaded CPython two threads doing that at once can build two copies
    of one type, and a cdata of one copy is then refused by a function typed
    with the other ("initializer for ctype 'struct cst_iter *' appears indeed
    to be 'struct cst_iter *', but the types are different"): seen on 3.13t
    when two threads iterated snapshots for the first time together."""
    for name in dir(lib):
        getattr(lib, name)
    for struct in ("cst_chunk", "cst_stats", "cst_dialect"):
        ffi.new(f"{struct} *")


_realize_types()

# The fast path calls this engine instance, and raises what raise_status does.
_hotpath.bind_engine(address(lib.cst_hot_api_table()))


def handle_of(address: int) -> Any:
    """A non-owning cffi handle of the engine handle at ``address`` (the
    ``_h`` the fast path makes on first use for the snapshots it makes)."""
    return ffi.cast("cst_trie *", address)


def configure_fast_path(snapshot_type: type) -> None:
    """Tell the fast path where errors go, how to make a cffi handle, and the
    class of the snapshots it makes (``cstrie.trie`` calls it once)."""
    _hotpath.configure(raise_status, handle_of, snapshot_type)


# A fork child has one thread: locks other threads held at the fork are free.
os.register_at_fork(after_in_child=_hotpath.after_fork_child)
