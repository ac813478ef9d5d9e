"""The content index's private key space: criteria and message fields as
patterns and topics of an internal :class:`cstrie.Trie`.

Every key is a sequence of words in the index's topic dialect (the user's
topic patterns live in the same trie, so the dialect is theirs, with the
``$`` rule and the length limits lifted: the index applies those itself).
The first word names the kind of key:

==========================  ================================================
``t <topic words>``         a topic pattern (the binding's topic filter)
``h <F>``                   field ``F`` is present
``e <F> <V>``               field ``F`` has the typed value ``V``
``p <F> <c1> ... <cn> #``   field ``F`` is a str starting with c1..cn
``x <F> <cn> ... <c1> #``   ... ending with c1..cn (the value reversed)
``r <F> <n1> ... <nk> #``   field ``F`` is a number whose 64-bit order key
                            starts with the hex digits n1..nk
``b <id>``                  binding ``id`` is visible (its marker)
``a``                       the bindings that can match with no key hit
==========================  ================================================

(``#`` stands for the dialect's many-level wildcard.)  A message field
looks up ``h``, ``e``, ``p``/``x`` (str values) and ``r`` (numbers) topics;
``p``, ``x`` and ``r`` topics end with the word :attr:`KeySpace.end`, so a
wildcard that must take at least one word (NATS ``>``) still matches a
prefix equal to the whole value.

Words are escaped so that every key is valid and literal in the dialect: a
character that is not a letter or digit becomes ``~hex~`` (``~`` stands for
:attr:`KeySpace.esc`) and the empty word is ``~~``.  So no word contains the
separator, a wildcard character, whitespace or NUL, no word is empty, and
different texts give different words.  A per-character word is one letter
or digit, or an escape of three characters or more, so it never equals the
end word.

Numbers: an int or float maps to its IEEE-754 double (an int rounded to the
nearest double, huge ones to infinity), and the double to the 64-bit key
whose unsigned order is the numbers' order (:func:`order_key`).  Rounding is
monotone, so every number in a range has a key between the bounds' keys;
that interval is covered by at most ``budget`` aligned
blocks of 16**j keys (:func:`cover`), each one prefix pattern.  Rounding
and coarse blocks only add candidates; the index verifies every candidate
exactly.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from cstrie.dialect import Dialect

__all__ = ["NIBBLES", "KeySpace", "cover", "order_key"]

#: Hex digits in a number's order key (64 bits).
NIBBLES = 16
_MASK = (1 << 64) - 1
_SIGN = 1 << 63
_pack, _unpack = struct.Struct(">d").pack, struct.Struct(">Q").unpack
_ESCAPES = "~%!=:@^&,;"


def order_key(x: int | float) -> int:
    """The 64-bit key of the number ``x`` (not NaN): ``a <= b`` implies
    ``order_key(a) <= order_key(b)``; ``-0.0`` and ``0.0`` share a key.  An
    int is rounded to the nearest double (huge ones to an infinity), which
    keeps the order (rounding is monotone), so a number within a range's
    bounds has a key within the keys of the bounds.

    >>> order_key(-1.0) < order_key(0) < order_key(2**80) < order_key(2**1100)
    True
    >>> order_key(2**1100) == order_key(float("inf")), order_key(2**53 + 1) == order_key(2**53)
    (True, True)
    """
    if type(x) is not float:
        try:
            x = float(x)
        except OverflowError:
            x = math.inf if x > 0 else -math.inf
    bits: int = _unpack(_pack(x + 0.0))[0]  # -0.0 + 0.0 is 0.0
    return (~bits & _MASK) if bits & _SIGN else (bits | _SIGN)


def cover(lo: int, hi: int, budget: int) -> list[tuple[int, int]]:
    """At most ``budget`` (>= 16) aligned blocks ``(start, digits)`` that
    cover the keys ``lo..hi`` (inclusive): block ``(s, j)`` holds the keys
    whose top ``j`` hex digits are those of ``s``.  The finest cover within
    the budget: blocks are at most ``NIBBLES - d`` digits coarser than the
    exact decomposition, for the largest depth ``d`` that fits.
    O(budget * NIBBLES).

    >>> cover(0, (1 << 64) - 1, 16)
    [(0, 0)]
    >>> [(hex(s), j) for s, j in cover(0x10 << 56, (0x30 << 56) - 1, 16)]
    [('0x1000000000000000', 1), ('0x2000000000000000', 1)]
    """
    if budget < 16:
        raise ValueError("a range cover needs a budget of at least 16 blocks")
    best = None
    for depth in range(1, NIBBLES + 1):
        shift = 4 * (NIBBLES - depth)
        a = (lo >> shift) << shift
        b = ((hi >> shift) << shift) | ((1 << shift) - 1)
        blocks = _decompose(a, b, shift, budget)
        if blocks is None:
            break
        best = blocks
    assert best is not None  # depth 1 needs at most 16 blocks
    return best


def _decompose(a: int, b: int, min_shift: int, budget: int) -> list[tuple[int, int]] | None:
    """The exact cover of a..b (aligned to 16**min_shift) by maximal aligned
    blocks, or None if it needs more than ``budget`` blocks."""
    out: list[tuple[int, int]] = []
    while a <= b:
        shift = min_shift
        while shift < 64 and not a & ((1 << (shift + 4)) - 1) and a + (1 << (shift + 4)) - 1 <= b:
            shift += 4
        out.append((a, (64 - shift) // 4))
        if len(out) > budget:
            return None
        a += 1 << shift
    return out


class KeySpace:
    """The keys of one index, in the words of ``dialect`` (see the module).

    ``dialect`` needs a many-level wildcard, and its separator, wildcards and
    forbidden characters may not hold letters or digits (the words the index
    writes are made of those)."""

    __slots__ = ("_word", "dialect", "end", "esc", "multi", "sep")

    def __init__(self, dialect: Dialect) -> None:
        if dialect.multi is None:
            raise ValueError("a content index needs a dialect with a many-level wildcard")
        special = dialect.separator + (dialect.single or "") + dialect.multi + dialect.forbidden
        if any(ch.isalnum() for ch in special):
            raise ValueError(
                "a content index needs a dialect whose separator, wildcards and forbidden "
                "characters are not letters or digits"
            )
        esc = next((c for c in _ESCAPES if c not in special), None)
        if esc is None:  # pragma: no cover - a dialect that uses all ten
            raise ValueError("the dialect leaves no escape character for a content index")
        self.dialect = dialect
        self.sep = dialect.separator
        self.multi = dialect.multi
        self.esc = esc
        self.end = esc + esc + esc
        self._word: Callable[[str], str] = self._make_word()

    def _make_word(self) -> Callable[[str], str]:
        esc = self.esc

        def escape_char(c: str) -> str:
            return c if c.isalnum() else f"{esc}{ord(c):x}{esc}"

        def word(s: str) -> str:
            if s.isalnum():
                return s
            if not s:
                return esc + esc
            return "".join(map(escape_char, s))

        return word

    # ------------------------------------------------------------- words
    def word(self, s: str) -> str:
        """``s`` as one escaped, non-empty word."""
        return self._word(s)

    def chars(self, s: str) -> str:
        """One word per character of ``s``, joined by the separator."""
        if s.isalnum():
            return self.sep.join(s)
        w = self._word
        return self.sep.join([w(c) for c in s])

    def key(self, *words: str) -> str:
        return self.sep.join(words)

    def value_word(self, tok: tuple[str, object]) -> str:
        """The word of a typed value (a :func:`~cstrie.content.criteria.value_token`)."""
        v = tok[1]
        if isinstance(v, str):
            return "s" + self._word(v)
        if isinstance(v, bool):
            return "bt" if v else "bf"
        if isinstance(v, int):
            return ("i" + format(v, "x")) if v >= 0 else ("m" + format(-v, "x"))
        if isinstance(v, float):
            return "f" + format(_unpack(_pack(v))[0], "x")
        if isinstance(v, bytes):
            return "y" + v.hex()
        return "n"

    # -------------------------------------------------------------- keys
    def topic(self, topic: str) -> str:
        """The key of a user topic or topic pattern (already valid in the
        user's dialect): ``t`` then its words (none for the empty topic)."""
        return ("t" + self.sep + topic) if topic else "t"

    def number_key(self, field_word: str, x: int | float) -> str:
        """The ``r`` topic of the number ``x`` (not NaN) in a field."""
        return self.sep.join(("r", field_word, *format(order_key(x), "016x"), self.end))

    def range_patterns(
        self, field_word: str, low: int | float | None, high: int | float | None, budget: int
    ) -> list[str]:
        """The ``r`` patterns whose topics include every number in [low, high]."""
        lo = 0 if low is None else order_key(low)
        hi = _MASK if high is None else order_key(high)
        out = []
        for start, digits in cover(lo, hi, budget):
            nibbles = format(start, "016x")[:digits]
            out.append(self.sep.join(("r", field_word, *nibbles, self.multi)))
        return out
