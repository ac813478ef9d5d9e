"""Redis glob patterns, matched exactly as ``PSUBSCRIBE`` matches channels.

Redis matches a pattern against a channel with ``stringmatchlen`` (``util.c``),
byte by byte: here the pattern and the topic are read as their UTF-8 bytes, as a
client that sends ``str`` channels in UTF-8 would have Redis see them.  The rules,
from that function (tests: ``tests/selectors/test_glob.py``, and a fuzz against a
real ``redis-server`` in ``tests/selectors/test_glob_redis.py``):

- ``*`` any run of bytes (a run of ``*`` is one); ``?`` exactly one byte.
- ``[...]`` one byte of the set; ``[^...]`` one byte not in it.  Inside, ``\\x``
  is the byte ``x``, ``a-z`` a range (ends in either order; compared as *signed*
  chars, as on x86-64, so ``[a-\\xc3]`` spans ``0xc3..0xff`` and ``0x00..a``), and
  any other byte itself.  A ``]`` right after ``[`` or ``[^`` closes the set (so
  ``[]`` matches nothing and ``[^]`` any byte); a ``-`` after a first byte makes a
  range even when the end is ``]`` (``[a-]x]`` is the range ``]..a`` plus ``x``).
  An unterminated set ends with the pattern: ``[ab`` is ``[ab]``; ``[`` alone
  matches nothing and ``[^`` alone any byte.
- ``\\x`` outside a set is the byte ``x``; a trailing ``\\`` is itself.
- Everything else is itself.
- An empty topic matches only the empty pattern (``*`` does not match it).
- A pattern with more than 1,000 ``*`` runs before its last token never matches
  (Redis's nesting limit against abusive patterns, CVE-2024-31228).

Matching never backtracks: the pattern is split at its ``*`` runs into segments
of fixed length; the first is tried at the start, the last at the end, and each
middle one at its leftmost place (C-level ``bytes.find`` or a fixed-length
regular expression), so one match costs ``O(len(topic) * len(pattern))`` at
worst and usually ``O(len(topic))``.

>>> g = Glob("h[ae]llo*")
>>> g.match("hello world".encode()), g.match("hillo".encode()), g.prefix
(True, False, 'h')
"""

from __future__ import annotations

import re

__all__ = ["MAX_NESTING", "Glob"]

#: the most ``*`` runs before the last token that Redis follows (util.c)
MAX_NESTING = 1000

_STAR = None  # the token of a run of ``*``
_ALL = frozenset(range(256))


def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def _tokens(p: bytes) -> list[frozenset[int] | None]:
    """The pattern as tokens: ``None`` for a run of ``*``, else the set of bytes
    the token matches (one byte of the topic each)."""
    out: list[frozenset[int] | None] = []
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == 0x2A:  # '*'
            while i + 1 < n and p[i + 1] == 0x2A:
                i += 1
            out.append(_STAR)
        elif c == 0x3F:  # '?'
            out.append(_ALL)
        elif c == 0x5B:  # '['
            i += 1
            negate = i < n and p[i] == 0x5E  # '^'
            if negate:
                i += 1
            members: set[int] = set()
            while True:
                if i < n and p[i] == 0x5C and n - i >= 2:  # '\\' escapes one byte
                    i += 1
                    members.add(p[i])
                elif i < n and p[i] == 0x5D:  # ']'
                    break
                elif i >= n:  # unterminated: the set ends with the pattern
                    i -= 1
                    break
                elif n - i >= 3 and p[i + 1] == 0x2D:  # 'a-z', compared as signed chars
                    lo, hi = sorted((_signed(p[i]), _signed(p[i + 2])))
                    members.update(b for b in range(256) if lo <= _signed(b) <= hi)
                    i += 2
                else:
                    members.add(p[i])
                i += 1
            out.append(frozenset(_ALL - members if negate else members))
        elif c == 0x5C and n - i >= 2:  # '\\x': the byte x
            i += 1
            out.append(frozenset((p[i],)))
        else:
            out.append(frozenset((c,)))
        i += 1
    return out


def _literal(seg: list[frozenset[int]]) -> bytes | None:
    """The bytes of a segment whose tokens are all single bytes, else None."""
    if all(len(t) == 1 for t in seg):
        return bytes(next(iter(t)) for t in seg)
    return None


def _regex(seg: list[frozenset[int]]) -> re.Pattern[bytes]:
    """A fixed-length regular expression (classes only, no quantifier) for a segment."""
    parts = []
    for t in seg:
        if not t:
            parts.append("(?!)")
            continue
        ranges: list[str] = []
        run: list[int] = []
        for b in sorted(t):
            if run and b == run[-1] + 1:
                run.append(b)
                continue
            if run:
                ranges.append(_range(run[0], run[-1]))
            run = [b]
        ranges.append(_range(run[0], run[-1]))
        parts.append("[" + "".join(ranges) + "]")
    return re.compile("".join(parts).encode("ascii"))


def _range(lo: int, hi: int) -> str:
    return f"\\x{lo:02x}" if lo == hi else f"\\x{lo:02x}-\\x{hi:02x}"


class _Segment:
    __slots__ = ("literal", "n", "regex")

    def __init__(self, seg: list[frozenset[int]]) -> None:
        self.n = len(seg)
        self.literal = _literal(seg)
        self.regex = None if self.literal is not None else _regex(seg)

    def at(self, s: bytes, pos: int) -> bool:
        if self.literal is not None:
            return s.startswith(self.literal, pos)
        assert self.regex is not None
        return self.regex.match(s, pos) is not None

    def find(self, s: bytes, pos: int, end: int) -> int:
        """The leftmost place at or after ``pos`` where the segment lies within ``s[:end]``."""
        if self.literal is not None:
            return s.find(self.literal, pos, end)
        assert self.regex is not None
        m = self.regex.search(s, pos, end)
        return -1 if m is None else m.start()


class Glob:
    """A compiled Redis glob pattern.  ``match(data)`` takes the topic's UTF-8
    bytes.  ``prefix`` is the literal text every matching topic starts with."""

    __slots__ = ("_first", "_last", "_middle", "_never", "_star", "pattern", "prefix", "raw")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.raw = pattern.encode("utf-8")
        tokens = _tokens(self.raw)
        runs_before_last = sum(1 for t in tokens[:-1] if t is _STAR)
        self._never = runs_before_last > MAX_NESTING
        segs: list[list[frozenset[int]]] = [[]]
        for t in tokens:
            if t is _STAR:
                segs.append([])
            else:
                segs[-1].append(t)
        self._star = len(segs) > 1
        self._first = _Segment(segs[0])
        self._last = _Segment(segs[-1]) if self._star else None
        self._middle = [_Segment(s) for s in segs[1:-1] if s]
        lead = bytearray()
        for t in segs[0]:
            if len(t) != 1:
                break
            lead.append(next(iter(t)))
        try:
            self.prefix = bytes(lead).decode("utf-8")
        except UnicodeDecodeError as e:  # a set of one byte may cut a character
            self.prefix = bytes(lead[: e.start]).decode("utf-8")

    def match(self, s: bytes) -> bool:
        """Whether Redis's PSUBSCRIBE with this pattern receives channel ``s``."""
        if not s:
            return not self.raw
        if self._never:
            return False
        n = len(s)
        first = self._first
        if not self._star:
            return n == first.n and first.at(s, 0)
        last = self._last
        assert last is not None
        end = n - last.n
        if end < first.n or not first.at(s, 0) or not last.at(s, end):
            return False
        pos = first.n
        for seg in self._middle:
            at = seg.find(s, pos, end)
            if at < 0:
                return False
            pos = at + seg.n
        return True

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"
