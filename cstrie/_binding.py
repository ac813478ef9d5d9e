"""The one thin layer over the compiled engine (``cstrie._native``).

No other module of the library touches ``ffi``/``lib``: the public classes
(:mod:`cstrie.trie`, :mod:`cstrie.topics`), the formats (:mod:`cstrie.export`)
and the Spark matcher are built only on the functions below and on the fast
path.  :func:`raise_status` is the single place where an engine status code
becomes a Python exception.

Sections: statuses; dialects; handles; caller buffers; bulk build; iteration;
queries; topic index; table helpers of the formats; batch lookups (Spark);
statistics and debugging; the fast path's wiring.

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
from collections.abc import Iterable, Iterator
from itertools import compress
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from cstrie import _hotpath
from cstrie._native import ffi, lib

__all__ = ["IdNumbering", "address", "check", "ffi", "lib", "native_dialect"]

if TYPE_CHECKING:  # the binding layer imports nothing of the library
    from cstrie.dialect import Dialect

#: texts up to this many characters appear whole in error messages
SHOWN_WHOLE = 100


def shown(text: str, at: int | None = None) -> str:
    """``repr(text)`` for an error message, shortened when the text is long
    (a hostile 65,535-byte filter must not make a 130 KB message): its start,
    or the part around index ``at``, and its length."""
    if len(text) <= SHOWN_WHOLE:
        return repr(text)
    if at is None or at < 40:
        return f"{text[:40]!r}... ({len(text)} characters)"
    return f"...{text[at - 20 : at + 20]!r}... ({len(text)} characters)"


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
    lib.CST_EUTF8,
}


def raise_status(
    status: int, dialect: Dialect | None = None, what: str = "", text: object = None
) -> NoReturn:
    """Raise the exception for a negative engine status.

    A validation code becomes the ``ValueError`` that names the fault the
    engine found in ``text`` (a topic or pattern of ``dialect``, as ``what``
    says): see :func:`invalid`."""
    if status in _VALIDATION and dialect is not None:
        raise invalid(status, dialect, what, text)
    if status == lib.CST_ENOMEM:
        raise MemoryError("cstrie engine: out of memory")
    if status == lib.CST_EREADONLY:
        raise TypeError("this cstrie handle is read-only (a Snapshot); use Trie.copy()")
    if status == lib.CST_EINVAL:
        raise ValueError("cstrie engine: invalid argument")
    raise RuntimeError(f"cstrie engine: unexpected status {status}")


# ------------------------------------------------------------ validation
# The dialect's rules on topics and patterns are checked in the engine only
# (native/words.c); Dialect.split_topic/split_pattern and every message below
# come from its answer.


def _checker(d: Dialect) -> Any:
    """An empty engine handle of dialect ``d``, for validating text outside a
    trie: made once per Dialect object and kept on it (a Dialect is
    immutable; its fields make its hash, which is too slow to take per call)."""
    h = d.__dict__.get("_checker")
    if h is None:
        h = new_handle(d)
        object.__setattr__(d, "_checker", h)
    return h


def check_text(d: Dialect, text: object, what: str) -> int:
    """Validate ``text`` as a topic (``what`` "topic") or pattern of ``d``:
    its number of words, else the ``TypeError``/``ValueError`` naming the
    problem.  O(len(text))."""
    data = encode(text, what, d)
    n: int = lib.cst_validate(_checker(d), data, len(data), what == "pattern")
    if n < 0:
        raise_status(n, d, what, text)
    return n


def invalid(status: int, d: Dialect, what: str, text: object) -> ValueError:
    """The ``ValueError`` for ``text`` that the engine refused with the
    validation code ``status``: the engine is asked where the fault is
    (``cst_validate_at``), and the message names it."""
    if not isinstance(text, str):
        return ValueError(f"{what} {text!r} is invalid in the {d.name} dialect (code {status})")
    try:
        data = str.encode(text)
    except UnicodeEncodeError as exc:
        return ValueError(f"{what} {shown(text, exc.start)} is not valid UTF-8 text: {exc.reason}")
    fault = ffi.new("int64_t[2]")
    code = lib.cst_validate_at(
        _checker(d), data, len(data), 1 if what == "pattern" else 0, fault, fault + 1
    )
    if code >= 0 or code == lib.CST_ENOMEM:
        code = status  # not the fault of the text as it is now: name the code
    return ValueError(_describe(d, what, text, data, int(code), int(fault[0]), int(fault[1])))


def _describe(d: Dialect, what: str, text: str, data: bytes, code: int, at: int, k: int) -> str:
    """The message for the validation fault ``code`` at byte ``at`` / word
    ``k`` of ``text`` (UTF-8 ``data``)."""
    name = d.name
    if code == lib.CST_EEMPTY:
        return f"{what} must not be empty in the {name} dialect"
    if code == lib.CST_ETOOLONG:
        if d.max_bytes is not None and len(data) > d.max_bytes:
            return f"{what} is {len(data)} UTF-8 bytes long; {name} allows at most {d.max_bytes}"
        return f"{what} {shown(text)} has a word of more than 2**32 - 1 bytes"
    if code in (lib.CST_ENUL, lib.CST_EFORBIDDEN):
        i = len(data[:at].decode())  # the character at byte offset at
        if code == lib.CST_ENUL:
            return f"{what} {shown(text, i)} contains U+0000, which {name} forbids"
        return (
            f"{what} {shown(text, i)} contains {text[i]!r} (U+{ord(text[i]):04X}) at index {i}; "
            f"the {name} dialect forbids the characters {d.forbidden!r}"
        )
    if code == lib.CST_ETOODEEP:
        return (
            f"{what} {shown(text)} has {text.count(d.separator) + 1} words; "
            f"{name} allows at most {d.max_levels} (max_levels)"
        )
    if code == lib.CST_EEMPTYWORD:
        return (
            f"{what} {shown(text)} has an empty word at position {k}; "
            f"{name} does not allow empty words"
        )
    if code == lib.CST_EMULTIPOS:
        return f"pattern {shown(text)}: {d.multi!r} may only be the last word in the {name} dialect"
    if code in (lib.CST_EWILDWORD, lib.CST_EWILDTOPIC):
        word = data[at:].split(d.separator.encode(), 1)[0].decode()
        token = next(t for t in (d.single, d.multi) if t is not None and t in word)
        if code == lib.CST_EWILDWORD:
            return (
                f"pattern {shown(text)}: wildcard {token!r} must fill a whole level, "
                f"found in {shown(word)}"
            )
        return (
            f"topic {shown(text)} contains the wildcard {token!r}; "
            f"topics may not contain wildcards in the {name} dialect"
        )
    return f"{what} {shown(text)} is invalid in the {name} dialect (engine code {code})"


def type_name(obj: object) -> str:
    """The name of ``obj``'s type as the type object holds it (``tp_name``),
    as the fast path's messages give it: read past any ``__name__`` a
    metaclass defines, so that naming a hostile object runs none of its code."""
    name: str = type.__dict__["__name__"].__get__(type(obj), type)
    return name


def encode(text: object, what: str, dialect: Dialect) -> bytes:
    """The UTF-8 of ``text`` (a str or a str subclass: its characters) for
    the engine; ``TypeError`` for a non-str, the dialect's ``ValueError`` for
    text with no UTF-8 form (a lone surrogate).  ``what``: "topic" or
    "pattern".  The fast path's ``text_of`` does the same in C."""
    if not issubclass(type(text), str):  # by type, as in C: no __class__ asked
        raise TypeError(f"{what} must be a str, not {type_name(text)}")
    try:
        return str.encode(text)  # type: ignore[arg-type]  # a str by the check above
    except UnicodeEncodeError:
        raise_status(lib.CST_EUTF8, dialect, what, text)


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


def new_handle(d: Dialect) -> Any:
    """A new writable engine handle freed when the returned cdata is collected."""
    return ffi.gc(new_trie_ptr(d), lib.cst_free)


def free(ptr: Any) -> None:
    """Free an engine handle made by :func:`new_trie_ptr`/:func:`snapshot_ptr`
    that no owner took (a failed bind)."""
    lib.cst_free(ptr)


def address(handle: Any) -> int:
    """The engine handle's address, for the fast path (``Reader._bind``)."""
    return int(ffi.cast("uintptr_t", handle))


#: True on a free-threaded (``--disable-gil``) build of CPython.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


# ------------------------------------------------------------ caller buffers
#: memoryview formats of 8-byte integers and of bytes (Arrow buffers are "b")
_WORD_FORMATS = frozenset("qQlLnN")
_BYTE_FORMATS = frozenset("bBc")


def _buffer_view(obj: object, what: str, kind: str) -> memoryview:
    """``obj``'s buffer, which must be contiguous, or ``TypeError`` naming
    ``what``."""
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{what} must be {kind} (bytes, bytearray, memoryview, array, numpy or Arrow "
            f"buffer, or a cffi array), not {type(obj).__name__}"
        ) from None
    if not view.c_contiguous:
        raise TypeError(f"{what} must be a contiguous buffer")
    return view


class Views:
    """The views this layer makes of a caller's buffers, released together on
    exit (``with Views() as v: ...``).

    A view holds an export of the caller's buffer until it is released, and a
    traceback keeps a frame's views alive: a memoryview collected in one
    garbage cycle with a view of it crashes CPython 3.11 (its tp_clear drops
    the buffer the view still holds).  So none outlives the call."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: list[Any] = []

    def __enter__(self) -> Views:
        return self

    def __exit__(self, *exc: object) -> None:
        for view in self._held:
            ffi.release(view)
        self._held.clear()

    def bytes_of(self, data: object) -> Any:
        """``data`` as a ``char[]`` of its exact length: a cffi byte array or
        any contiguous buffer (the bytes of UTF-8 patterns)."""
        if isinstance(data, ffi.CData):
            t = ffi.typeof(data)
            if t.kind != "array" or ffi.sizeof(t.item) != 1:
                raise TypeError(f"data must be a char[] or uint8_t[] array, not cdata '{t.cname}'")
            view = ffi.from_buffer(ffi.buffer(data))
        else:
            _buffer_view(data, "data", "a buffer of UTF-8 bytes")
            view = ffi.from_buffer(data)
        self._held.append(view)
        return view

    def words_of(self, obj: object, ctype: str, what: str) -> Any:
        """``obj`` as a cffi ``ctype[]`` (``int64_t`` or ``uint64_t``): a cffi
        array of that type, or a buffer of 8-byte integers or of bytes (a
        whole number of 8-byte words)."""
        if isinstance(obj, ffi.CData):
            t = ffi.typeof(obj)
            if t.kind != "array" or t.item != ffi.typeof(ctype):
                article = "an" if ctype[0] == "i" else "a"
                raise TypeError(f"{what} must be {article} {ctype}[] array, not cdata '{t.cname}'")
            return obj
        view = _buffer_view(obj, what, f"a buffer of {ctype}")
        fmt = view.format.lstrip("@=<>!")
        if fmt not in _WORD_FORMATS and fmt not in _BYTE_FORMATS:
            raise TypeError(
                f"{what} must hold 8-byte integers ({ctype}), not items of format {view.format!r}"
            )
        if view.nbytes % 8:
            raise ValueError(
                f"{what} has {view.nbytes} bytes, not a whole number of 8-byte integers"
            )
        words = ffi.from_buffer(f"{ctype}[]", obj)
        self._held.append(words)
        return words

    def table(self, data: object, offsets: object, refs: object) -> tuple[Any, Any, Any]:
        """(data, offsets, refs) of a pattern table (see :func:`build`) as
        cffi arrays, or the ``TypeError``/``ValueError`` that names the buffer
        of the wrong kind or size."""
        blob = self.bytes_of(data)
        off = self.words_of(offsets, "int64_t", "offsets")
        ids = self.words_of(refs, "uint64_t", "refs")
        if len(off) != len(ids) + 1:
            raise ValueError(
                f"offsets has {len(off)} entries; expected {len(ids) + 1} (one more than refs)"
            )
        return blob, off, ids


def int64s(values: Iterable[int]) -> Any:
    """A new cffi ``int64_t[]`` holding ``values``."""
    return ffi.new("int64_t[]", list(values))


def uint64s(values: Iterable[int]) -> Any:
    """A new cffi ``uint64_t[]`` holding ``values``."""
    return ffi.new("uint64_t[]", list(values))


# ------------------------------------------------------------ bulk build
def build(
    d: Dialect, blob: Any, off: Any, ids: Any, nsubs: int, *, count: bool = True
) -> tuple[Any, list[tuple[int, int]]]:
    """The engine's bulk build (``cst_build``) over buffers checked by
    :meth:`Views.table`: n patterns ``blob[off[k]:off[k + 1]]`` with 1-based subscriber ids
    ``ids[k]`` in ``1..nsubs``.  Returns (a new handle, not freed by cffi: see
    :func:`new_trie_ptr`; with ``count``, (id, pairs kept) for every id the
    build kept a pair of, else []).  Nothing is built on error:
    ``ValueError`` names the first offset that is negative, decreases or
    points past the data, else the first pair whose reference is out of range
    or whose pattern is invalid."""
    n = len(ids)
    size = len(blob)
    kept = ffi.new("uint8_t[]", max(n, 1)) if count else ffi.NULL
    status = ffi.new("int *")
    bad = ffi.new("int64_t *")
    native = NativeDialect(d)
    ptr = lib.cst_build(native.ptr, blob, size, off, ids, n, nsubs, kept, status, bad)
    if ptr == ffi.NULL:
        k = bad[0]
        if status[0] == lib.CST_EBOUNDS:
            raise ValueError(_offset_error(off, k, size))
        if status[0] == lib.CST_EINVAL:
            if k < 0:
                raise ValueError(f"{n} pairs are more than one bulk build takes (2**32 - 2)")
            if not 1 <= ids[k] <= nsubs:
                raise ValueError(f"pair {k} refers to subscriber #{ids[k]}, outside 1..{nsubs}")
            raise ValueError(f"pair {k}: pattern is not valid UTF-8")
        text: object = None
        if 0 <= k < n and 0 <= off[k] <= off[k + 1] <= size:
            text = ffi.buffer(blob)[off[k] : off[k + 1]].decode("utf-8", "replace")
        raise_status(status[0], d, "pattern", text)
    if not count:
        return ptr, []
    try:
        return ptr, _count_ids(ids, kept, n, nsubs)
    except BaseException:
        lib.cst_free(ptr)
        raise


def _count_ids(ids: Any, kept: Any, n: int, max_id: int) -> list[tuple[int, int]]:
    """(id, pairs) for every subscriber id among the n pairs a bulk build kept
    (counted in C: a Counter over a million ids would make a million Python
    ints)."""
    per_id = array("I", bytes(4 * (max_id + 1)))
    check(lib.cst_count_ids(ids, kept, n, ffi.from_buffer("uint32_t[]", per_id), max_id))
    return _nonzero(per_id)


def _nonzero(per_id: array[int]) -> list[tuple[int, int]]:
    return list(zip(compress(range(len(per_id)), per_id), compress(per_id, per_id), strict=True))


def pair_counts(handle: Any) -> list[tuple[int, int]]:
    """(id, count) for every id that a consistent snapshot of ``handle``
    holds: a subscriber's pairs, and a share group's memberships (its id
    counts once per member on each filter): the counts a writable handle
    keeps (registry rule 2)."""
    per_id = array("I")
    for c in chunks(handle, shared=True):
        if c.ids:
            top = max(c.ids)
            if top >= len(per_id):
                per_id.extend(bytes(top + 1 - len(per_id)))
            with ffi.from_buffer("uint32_t[]", per_id) as out:  # released: per_id may grow
                ids = ffi.from_buffer("uint64_t[]", c.ids)
                check(lib.cst_count_ids(ids, ffi.NULL, len(c.ids), out, len(per_id) - 1))
        assert c.share is not None
        if c.share.tobytes().strip(b"\0"):
            start = 0
            for end, share in zip(c.ids_end, c.share, strict=True):
                if share:
                    if share >= len(per_id):
                        per_id.extend(bytes(share + 1 - len(per_id)))
                    per_id[share] += end - start
                start = end
    return _nonzero(per_id)


def _offset_error(off: Any, k: int, size: int) -> str:
    """What is wrong with entry ``k`` of an offset table that the engine
    refused (its first bad entry), over pattern data of ``size`` bytes."""
    v = off[k]
    if k == 0 and v < 0:
        return f"offsets[0] = {v} is negative: pair 0 would start before the pattern data"
    if k > 0 and v < off[k - 1]:
        return (
            f"offsets decrease at pair {k - 1}: offsets[{k - 1}] = {off[k - 1]} > "
            f"offsets[{k}] = {v}"
        )
    if v > size:
        pair = f"pair {k - 1} would end" if k else "pair 0 would start"
        return (
            f"offsets[{k}] = {v} is past the end of the pattern data ({size} bytes): "
            f"{pair} outside it"
        )
    return f"offsets[{k}] = {v} changed while the trie was being built"


# ------------------------------------------------------------ iteration
class ChunkBuffers:
    """A ``cst_chunk`` output struct with its buffers: what
    ``cst_iter_next`` and ``cst_match`` fill."""

    __slots__ = ("_ends", "_ids", "_pat", "_share", "s", "with_share")

    def __init__(
        self, pat_cap: int, ids_cap: int, entries_cap: int, with_share: bool = False
    ) -> None:
        self.s = ffi.new("cst_chunk *")
        self.with_share = with_share
        self.resize(pat_cap, ids_cap, entries_cap)

    def resize(self, pat_cap: int, ids_cap: int, entries_cap: int) -> None:
        self._pat = ffi.new("char[]", max(pat_cap, 1))
        self._ids = ffi.new("uint64_t[]", max(ids_cap, 1))
        self._ends = (
            ffi.new("int64_t[]", max(entries_cap, 1)),
            ffi.new("int64_t[]", max(entries_cap, 1)),
        )
        s = self.s
        s.pat = self._pat
        s.pat_cap = max(pat_cap, 1)
        s.ids = self._ids
        s.ids_cap = max(ids_cap, 1)
        s.pat_end = self._ends[0]
        s.ids_end = self._ends[1]
        s.entries_cap = max(entries_cap, 1)
        if self.with_share:
            self._share = ffi.new("uint64_t[]", max(entries_cap, 1))
            s.share = self._share

    def grow(self) -> None:
        """Room for what a call that answered ``CST_ETRUNC`` needs, doubled."""
        s = self.s
        self.resize(
            max(s.need_pat * 2, s.pat_cap),
            max(s.need_ids * 2, s.ids_cap),
            max(s.need_entries * 2, s.entries_cap),
        )

    def raw(self) -> RawChunk:
        """The filled entries as flat copies (see :class:`RawChunk`)."""
        s = self.s
        n = s.nentries
        pat_end = _copy(s.pat_end, "q", n)
        ids_end = _copy(s.ids_end, "q", n)
        pat = bytes(ffi.buffer(s.pat, pat_end[-1])) if n else b""
        ids = _copy(s.ids, "Q", ids_end[-1] if n else 0)
        share = _copy(s.share, "Q", n) if self.with_share else None
        return RawChunk(pat, pat_end, ids, ids_end, share)

    def read(self) -> list[tuple[bytes, list[int]]]:
        """The entries in the buffers: (pattern bytes, ids) each."""
        return self.raw().entries()


def _copy(buf: Any, typecode: str, n: int) -> array[int]:
    out = array(typecode)
    if n:
        out.frombytes(ffi.buffer(buf, n * out.itemsize))
    return out


class RawChunk(NamedTuple):
    """Entries of (pattern, subscriber ids) as the engine lays them out: entry
    e's pattern is ``pat[pat_end[e-1]:pat_end[e]]`` and its ids
    ``ids[ids_end[e-1]:ids_end[e]]`` (the -1 entries being 0); ``share``
    (when asked for) holds per entry 0 for an ordinary pattern's subscribers,
    else the id of the share group whose members the ids are."""

    pat: bytes
    pat_end: array[int]
    ids: array[int]
    ids_end: array[int]
    share: array[int] | None

    def entries(self) -> list[tuple[bytes, list[int]]]:
        pat, ids = self.pat, self.ids
        out = []
        p0 = i0 = 0
        for p1, i1 in zip(self.pat_end, self.ids_end, strict=True):
            out.append((pat[p0:p1], ids[i0:i1].tolist()))
            p0, i0 = p1, i1
        return out


#: Pairs per chunk of an iteration (the unit of streaming, a Parquet row group, ...).
CHUNK_PAIRS = 1 << 14


def chunks(
    handle: Any, *, per_pair: bool = False, shared: bool = False, pairs: int = CHUNK_PAIRS
) -> Iterator[RawChunk]:
    """The chunks of a consistent snapshot of ``handle``, taken now (a
    ``MemoryError`` is raised here, not during the iteration), of about
    ``pairs`` pairs each.  With ``per_pair`` every entry is one pair (the
    engine repeats a pattern once per subscriber).  Without ``shared`` the
    walk gives the ordinary pairs only (share-group memberships are skipped
    in the engine); with it, memberships too, told apart by
    :attr:`RawChunk.share`."""
    it = (lib.cst_iter_new_pairs if per_pair else lib.cst_iter_new)(handle)
    if it == ffi.NULL:
        raise MemoryError("cstrie engine: out of memory starting an iteration")
    it = ffi.gc(it, lib.cst_iter_free)
    return _chunks(it, ChunkBuffers(pairs * 16, pairs, pairs, with_share=shared))


def _chunks(it: Any, g: ChunkBuffers) -> Iterator[RawChunk]:
    while True:
        r = lib.cst_iter_next(it, g.s)
        if r == lib.CST_ETRUNC:
            g.grow()
            continue
        check(r)
        if r == 0:
            return
        yield g.raw()


def iterate(handle: Any) -> Iterator[tuple[bytes, list[int]]]:
    """(pattern bytes, ids) entries of a consistent snapshot of handle: the
    ordinary pairs only (share-group memberships: :func:`iterate_shared`).
    The snapshot is taken now."""
    return _entries(chunks(handle, pairs=CHUNK_PAIRS * 4))


def _entries(it: Iterator[RawChunk]) -> Iterator[tuple[bytes, list[int]]]:
    for c in it:
        yield from c.entries()


def iterate_shared(handle: Any) -> Iterator[tuple[bytes, int, list[int]]]:
    """(pattern bytes, share, ids) of every entry of a consistent snapshot:
    share is 0 for an ordinary pattern's subscribers, else the id of the share
    group whose members ids are (on that filter).  The snapshot is taken now."""
    return _shared_entries(chunks(handle, shared=True, pairs=CHUNK_PAIRS * 4))


def _shared_entries(it: Iterator[RawChunk]) -> Iterator[tuple[bytes, int, list[int]]]:
    for c in it:
        assert c.share is not None
        for (pat, ids), share in zip(c.entries(), c.share, strict=True):
            yield pat, share, ids


# ------------------------------------------------------------ queries
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


def subscribers(handle: Any, data: bytes, d: Dialect, filt: object) -> list[int]:
    """The ids subscribed to exactly the encoded pattern ``data``."""
    ids = ids_call(lib.cst_subscribers, handle, data)
    if isinstance(ids, int):
        raise_status(ids, d, "pattern", filt)
    return ids


def share_members(handle: Any, data: bytes, gid: int, d: Dialect, filt: object) -> list[int]:
    """The ids of share group ``gid``'s members on exactly the pattern ``data``."""
    ids = ids_call(
        lambda h, p, n, out, cap: lib.cst_share_members(h, p, n, gid, out, cap), handle, data
    )
    if isinstance(ids, int):
        raise_status(ids, d, "pattern", filt)
    return ids


def validate(handle: Any, data: bytes, d: Dialect, what: str, text: object) -> None:
    """Raise what the engine's validation of ``data`` as a pattern (``what``
    "pattern") or a topic finds wrong with it."""
    check(lib.cst_validate(handle, data, len(data), 1 if what == "pattern" else 0), d, what, text)


def length(handle: Any) -> int:
    """The number of (pattern, subscriber) pairs (exact, consistent)."""
    return check(lib.cst_len(handle))


def clear_if(handle: Any, expected: Any) -> bool:
    """Empty ``handle`` if its contents are still those of the snapshot
    ``expected``; False (nothing done) if an update came between."""
    return bool(check(lib.cst_clear_if(handle, expected)))


def compact(handle: Any) -> None:
    check(lib.cst_compact(handle))


# ------------------------------------------------------------ result cache
CACHE_STATS = (
    "hits",
    "misses",
    "fills",
    "skipped",
    "invalidated",
    "evicted",
    "clears",
    "entries",
    "bytes",
    "budget",
)
#: The largest budget accepted (bytes): 1 TiB, far above any table it sizes.
CACHE_MAX_BUDGET = 1 << 40


def cache_set(handle: Any, budget: object) -> None:
    """Give the handle's result cache ``budget`` bytes (0: off)."""
    if type(budget) is not int:
        raise TypeError(f"the cache budget must be an int (bytes), not {type(budget).__name__}")
    if not 0 <= budget <= CACHE_MAX_BUDGET:
        raise ValueError(
            f"the cache budget must be between 0 and {CACHE_MAX_BUDGET} bytes, not {budget}"
        )
    check(lib.cst_cache_set(handle, budget))


def cache_stats(handle: Any) -> dict[str, int]:
    out = ffi.new("int64_t[]", len(CACHE_STATS))
    lib.cst_cache_stats(handle, out, len(CACHE_STATS))
    return {name: int(out[i]) for i, name in enumerate(CACHE_STATS)}


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


# ------------------------------------------------------------ topic index, bulk
def topic_put_table(handle: Any, raw: bytes, offsets: Any) -> tuple[int, int] | None:
    """Store topic k (``raw[offsets[k]:offsets[k + 1]]``) under id k + 1 for
    every k, in order; stop at the first that is not new: (k, status), status
    0 when topic k is stored already, else the engine's error.  None when all
    were new."""
    put = lib.cst_topic_put
    old = ffi.new("uint64_t *")
    base = ffi.from_buffer(raw)
    for k in range(len(offsets) - 1):
        a = offsets[k]
        r = put(handle, base + a, offsets[k + 1] - a, k + 1, old)
        if r != 1:
            return k, int(r)
    return None


# ------------------------------------------------------------ table helpers of the formats
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


def jsonl_scan(
    body: bytes | memoryview,
    nlines: int,
    pat: bytearray,
    pat_off: array[int],
    refs: array[int],
    sub: bytearray,
    sub_end: array[int],
    kinds: bytearray,
) -> int:
    """``cst_jsonl_scan`` over the lines of a JSON Lines export (cstrie.h):
    the number of lines read into the output buffers, or -1 when a line is
    not in the simple form it reads (the caller then parses the general way)."""
    r = lib.cst_jsonl_scan(
        ffi.from_buffer(body),
        len(body),
        nlines,
        ffi.from_buffer(pat, require_writable=True),
        ffi.from_buffer("int64_t[]", pat_off, require_writable=True),
        ffi.from_buffer("uint64_t[]", refs, require_writable=True),
        ffi.from_buffer(sub, require_writable=True),
        ffi.from_buffer("int64_t[]", sub_end, require_writable=True),
        ffi.from_buffer(kinds, require_writable=True),
    )
    return -1 if r == -1 else check(r)


# ------------------------------------------------------------ batch lookups (Spark)
class BatchLookup:
    """``cst_lookup_batch`` over Arrow string columns, on one engine handle,
    with its output buffers (numpy arrays of ``cap`` rows and ids, reused
    while ``cap`` stays the same).  One per thread."""

    def __init__(self, handle: Any) -> None:
        self._h = handle
        self._cap = 0
        self._next_row = ffi.new("int64_t *")
        self._next_skip = ffi.new("uint64_t *")
        self._need = ffi.new("size_t *")

    def _buffers(self, cap: int, rows: Any, ids: Any) -> None:
        if cap != self._cap:
            self._rows_p = ffi.from_buffer("int64_t[]", rows)
            self._ids_p = ffi.from_buffer("uint64_t[]", ids)
            self._cap = cap

    def scan(
        self,
        buffers: list[Any],
        offset: int,
        nrows: int,
        wide: bool,
        status: Any,
        rows: Any,
        ids: Any,
    ) -> Iterator[int]:
        """Match the rows of one Arrow array (its ``buffers()``: validity,
        offsets of 32 or 64 bits (``wide``), data; its ``offset`` and length
        ``nrows``).  Fills ``rows``/``ids`` (int64/uint64 buffers of one
        length, the chunk size) and yields how many pairs they hold, until
        every row is done; ``status`` (int8, one per row) gets 0 valid, 1
        null, a negative code for an invalid topic."""
        validity = ffi.from_buffer(buffers[0]) if buffers[0] is not None else ffi.NULL
        ctype = "int64_t[]" if wide else "int32_t[]"
        offsets = ffi.from_buffer(ctype, buffers[1]) + offset
        data = ffi.from_buffer(buffers[2]) if buffers[2] is not None and buffers[2].size else b"\0"
        st = ffi.from_buffer("int8_t[]", status)
        cap = len(rows)
        self._buffers(cap, rows, ids)
        rows_p, ids_p = self._rows_p, self._ids_p
        next_row, next_skip, need = self._next_row, self._next_skip, self._need
        fn = lib.cst_lookup_batch
        h = self._h
        w = 1 if wide else 0
        row, skip = 0, 0
        while row < nrows:
            got = fn(
                h,
                data,
                offsets,
                w,
                validity,
                offset,
                nrows,
                row,
                skip,
                rows_p,
                ids_p,
                cap,
                next_row,
                next_skip,
                need,
                st,
            )
            if got < 0:
                raise_status(got)
            row, skip = next_row[0], next_skip[0]
            if got:
                yield got


# ------------------------------------------------------------ statistics and debugging
def live_bytes() -> int:
    """Bytes the engine holds now, all tries together."""
    return int(lib.cst_live_bytes())


def live_allocations() -> int:
    """Blocks the engine holds now, all tries together."""
    return int(lib.cst_live_allocations())


def reclaim() -> int:
    """Free what this thread can of the engine's retired memory now: the
    number of retired blocks still waiting (on other threads' epochs)."""
    return int(lib.cst_reclaim())


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
