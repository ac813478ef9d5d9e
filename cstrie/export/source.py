"""Raw, columnar chunks of a snapshot for the exporters.

:func:`chunks` walks a consistent engine snapshot with ``cst_iter_next`` and
hands out each chunk as flat buffers (the engine's own entry layout), so the
formats can turn a chunk into file bytes with a few C-speed operations instead
of making Python objects per pair.  Memory is bounded by the chunk size.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, chain, compress, islice, repeat
from operator import sub
from typing import Any

from cstrie import _binding as nb
from cstrie.groups import POLICIES

__all__ = [
    "CHUNK_PAIRS",
    "ByteTable",
    "Chunk",
    "GroupNames",
    "Numbering",
    "chunks",
    "distinct_ids",
    "membership_chunks",
]

_POLICY_NAMES = {code: name for name, code in POLICIES.items()}

#: Pairs per engine chunk (the unit of streaming, a Parquet row group, ...).
CHUNK_PAIRS = nb.CHUNK_PAIRS


@dataclass
class Chunk:
    """Entries of (pattern, subscriber ids): entry e's pattern is
    ``pat[pat_end[e-1]:pat_end[e]]`` and its ids ``ids[ids_end[e-1]:ids_end[e]]``
    (the -1 entries being 0).  Ids are engine subscriber ids."""

    pat: bytes
    pat_end: array[int]
    ids: array[int]
    ids_end: array[int]
    _simple: bool | None = None
    #: with ``shared``: per entry, 0 for an ordinary pattern's subscribers, else
    #: the engine id of the share group whose members the entry's ids are
    share: array[int] | None = None

    @property
    def npairs(self) -> int:
        return len(self.ids)

    @property
    def nentries(self) -> int:
        return len(self.pat_end)

    def counts(self) -> list[int]:
        """Ids per entry (an entry can have none: it continues in the next chunk)."""
        ends = self.ids_end
        return list(map(sub, ends, chain((0,), ends)))

    @property
    def simple(self) -> bool:
        """Every entry has exactly one id (so entries and pairs line up)."""
        if self._simple is None:
            n = len(self.ids_end)
            self._simple = n == len(self.ids) and self.ids_end == array("q", range(1, n + 1))
        return self._simple

    def pair_patterns(self, base: int = 0) -> tuple[bytes, list[int]]:
        """Every pair's pattern back to back, and each pair's end offset in that
        blob plus ``base`` (an entry's pattern is repeated once per id).  Runs of
        one-id entries are copied as they are; only the others are expanded."""
        pat = self.pat
        ends = self.pat_end.tolist()
        if self.simple:
            return pat, list(map(base.__add__, ends)) if base else ends
        counts = self.counts()
        pieces: list[bytes] = []
        out: list[int] = []
        prev = 0  # first entry not yet emitted
        shift = base  # added to the engine's offsets of the entries from prev on
        start = 0  # byte offset in pat of entry prev
        for g in [g for g, k in enumerate(counts) if k != 1]:
            g_start = ends[g - 1] if g else 0
            if g > prev:
                pieces.append(pat[start:g_start])
                out.extend([shift + e for e in ends[prev:g]] if shift else ends[prev:g])
            p = pat[g_start : ends[g]]
            k, size = counts[g], len(p)
            pieces.append(p * k)
            first = shift + g_start + size
            out.extend(range(first, first + size * k, size) if size else repeat(first, k))
            shift += size * (k - 1)
            prev, start = g + 1, ends[g]
        if prev < len(ends):
            pieces.append(pat[start:])
            out.extend([shift + e for e in ends[prev:]] if shift else ends[prev:])
        return b"".join(pieces), out

    def entry_patterns(self) -> list[bytes]:
        """Each entry's pattern as bytes."""
        ends = self.pat_end
        return list(map(self.pat.__getitem__, map(slice, chain((0,), ends), ends)))


class ByteTable:
    """Byte strings by number, laid out as the engine's table helpers take them
    (:func:`cstrie._binding.interleave`, :func:`cstrie._binding.gather`): one
    ``blob`` and each item's end offset in ``ends``.  Item 0 is empty, since
    :class:`Numbering` numbers start at 1."""

    def __init__(self) -> None:
        self.blob = bytearray()
        self.ends = array("q", (0,))

    def __len__(self) -> int:
        return len(self.ends)

    def extend(self, body: bytes, sizes: Iterable[int]) -> None:
        """Append items given back to back in ``body``, with their byte sizes."""
        self.ends.extend(islice(accumulate(sizes, initial=self.ends[-1]), 1, None))
        self.blob += body


#: engine id -> 1, 2, 3, ... in order of first appearance, a chunk at a time in
#: one engine call (see :class:`cstrie._binding.IdNumbering`).
Numbering = nb.IdNumbering


def chunks(
    reader: Any, chunk_pairs: int = CHUNK_PAIRS, per_pair: bool = False, shared: bool = False
) -> Iterator[Chunk]:
    """The chunks of ``reader``'s engine handle (a Snapshot or a TopicSnapshot:
    it is immutable, so every walk over it gives the same pairs).  With ``per_pair`` every entry is
    one pair (the engine repeats a pattern once per subscriber), so every chunk
    is :attr:`Chunk.simple`: what the row-per-pair formats want.  Without
    ``shared`` the walk gives the ordinary pairs only (share-group memberships
    are skipped in the engine); with it, memberships too, told apart by
    :attr:`Chunk.share`."""
    # a Snapshot's engine handle, or a TopicSnapshot's (one id per topic, so
    # every entry of a topic snapshot is one (topic, value id) pair)
    handle = reader._handle if hasattr(reader, "_handle") else reader._h
    simple = True if per_pair else None
    for c in nb.chunks(handle, per_pair=per_pair, shared=shared, pairs=chunk_pairs):
        yield Chunk(c.pat, c.pat_end, c.ids, c.ids_end, simple, c.share)


def membership_chunks(reader: Any, chunk_pairs: int = CHUNK_PAIRS) -> Iterator[Chunk]:
    """The share-group memberships of ``reader`` only, one row per membership
    (each chunk :attr:`Chunk.simple`, its :attr:`Chunk.share` never 0): the
    group's filter as the pattern, the member as the id.  A second walk of the
    snapshot; chunks without a membership cost one C-speed test each."""
    for c in chunks(reader, chunk_pairs, per_pair=True, shared=True):
        share = c.share
        assert share is not None
        raw = share.tobytes()
        if not raw.strip(b"\0"):
            continue  # ordinary pairs only
        keep = list(compress(range(len(share)), share))  # C speed; Python per membership
        if len(keep) == len(share):
            yield c
            continue
        pat, ends = c.pat, c.pat_end
        picked = [pat[ends[k - 1] if k else 0 : ends[k]] for k in keep]
        yield Chunk(
            b"".join(picked),
            array("q", accumulate(map(len, picked))),
            array("Q", map(c.ids.__getitem__, keep)),
            array("q", range(1, len(keep) + 1)),
            True,
            array("Q", map(share.__getitem__, keep)),
        )


class GroupNames:
    """Share-group engine ids -> 1, 2, 3, ... in order of first appearance,
    with each group's name and its policy name (read from the live group
    object: policies belong to the trie family, not to a snapshot)."""

    def __init__(self, objects: Any) -> None:
        self._objects = objects
        self._index: dict[int, int] = {}
        self.names: list[str] = []
        self.policies: list[str] = []

    def __len__(self) -> int:
        return len(self.names)

    def number(self, share: int) -> int:
        k = self._index.get(share)
        if k is None:
            g = self._objects[share]
            self.names.append(g.name)
            self.policies.append(_POLICY_NAMES[g.policy])
            k = self._index[share] = len(self.names)
        return k

    def numbers(self, shares: Iterable[int]) -> list[int]:
        return list(map(self.number, shares))

    def policy_map(self) -> dict[str, str]:
        """{group name: policy name} of the groups numbered so far."""
        return dict(zip(self.names, self.policies, strict=True))


def distinct_ids(reader: Any) -> tuple[list[int], int, int]:
    """The snapshot's distinct subscriber ids, share-group members included
    (ascending: registry order), its number of pairs (memberships included,
    as ``len``) and of memberships."""
    seen: set[int] = set()
    total = members = 0
    for c in chunks(reader, shared=True):
        seen.update(c.ids)
        total += len(c.ids)
        assert c.share is not None
        if c.share.tobytes().strip(b"\0"):
            members += sum(k for k, s in zip(c.counts(), c.share, strict=True) if s)
    return sorted(seen), total, members
