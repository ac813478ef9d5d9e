"""What every classic matcher shares: the interface, validation and pattern programs.

:class:`ClassicMatcher` is the abstract base class.  It resolves the dialect, checks
input the way :class:`cstrie.Trie` does (in Python, with :mod:`cstrie_lab.words`:
an invalid pattern or topic raises the library's ``ValueError``/``TypeError``; an
unhashable subscriber raises ``TypeError``), always *before* anything changes, and
counts (pattern, subscriber) pairs.  A subclass implements :meth:`_add`,
:meth:`_remove` and :meth:`lookup`.

:func:`compile_pattern` turns a pattern's words into a :data:`Program`, a tuple the
scanning matchers test a topic against without re-parsing the pattern:
fixed-position words are checked through one :func:`operator.itemgetter` call and
many-word wildcards in the middle of a pattern (AMQP ``a.#.b.#.c``) by a greedy
left-most placement of the fixed segments between them, which is exact for
``*``/``#``-style patterns and linear in the topic length per segment.

:func:`decode_bits` lists the set bits of a Python ``int`` bitmap, lowest first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, ClassVar

from cstrie.dialect import Dialect, resolve_dialect
from cstrie_lab.words import split_pattern, split_topic

__all__ = [
    "ClassicMatcher",
    "Getter",
    "Middle",
    "Program",
    "check_hashable",
    "compile_pattern",
    "decode_bits",
    "program_matches",
    "topic_is_dollar",
]

Getter = Callable[[Sequence[str]], Any]
Middle = Callable[[Sequence[str], int], bool]

#: A compiled pattern: ``(min_len, fixed, wild_first, getter, expected, middle)``.
#:
#: * ``min_len`` - the fewest topic words the pattern can match (the exact count
#:   when ``fixed``: a pattern without a many-word wildcard);
#: * ``wild_first`` - the first word is a wildcard and the dialect has the ``$``
#:   rule, so a topic whose first word starts with ``$`` never matches;
#: * ``getter`` / ``expected`` - ``getter(words) == expected`` checks every literal
#:   word at a fixed position (from the start before the first many-word wildcard,
#:   from the end after the last one); ``getter`` is ``None`` when there is none;
#: * ``middle`` - ``None``, or ``middle(words, n)`` checking the words between the
#:   first and the last many-word wildcard.
Program = tuple[int, bool, bool, Getter | None, Any, Middle | None]


class ClassicMatcher(ABC):
    """A topic matcher with the :class:`cstrie.Trie` update/lookup interface.

    Args:
        dialect: ``"amqp"``, ``"mqtt"``, ``"nats"`` or a :class:`cstrie.Dialect`.

    Subclasses set the class attributes :attr:`name` (the key in
    :data:`cstrie_lab.classic.CLASSIC`), :attr:`description` (one line, for tables) and
    :attr:`thread_safe`, and implement :meth:`_add`, :meth:`_remove` and
    :meth:`lookup` (which must validate its topic with ``self._split_topic``).
    """

    name: ClassVar[str] = "?"
    description: ClassVar[str] = ""
    thread_safe: ClassVar[bool] = False

    # Instance attributes the base methods use (set by _setup).
    _dialect: Dialect
    _split_pattern: Callable[[object], list[str]]
    _split_topic: Callable[[object], list[str]]
    _size: int

    def __init__(self, dialect: str | Dialect = "amqp", **options: Any) -> None:
        # ``options`` keeps ``CLASSIC[name](dialect=..., topics=...)`` well typed;
        # a subclass consumes the options it knows and passes none on.
        if options:
            raise TypeError(
                f"{type(self).__name__} got unexpected options: {', '.join(sorted(options))}"
            )
        self._setup(resolve_dialect(dialect))

    def _setup(self, dialect: Dialect) -> None:
        self._check_dialect(dialect)
        self._dialect = dialect
        self._split_pattern = partial(split_pattern, dialect)
        self._split_topic = partial(split_topic, dialect)
        self._size = 0

    def _check_dialect(self, dialect: Dialect) -> None:
        """Raise ``ValueError`` naming why when this matcher cannot speak ``dialect``.

        Every dialect is fine unless a subclass says otherwise.
        """
        return None

    # ----------------------------------------------------------------- basics
    @property
    def dialect(self) -> Dialect:
        """The :class:`~cstrie.dialect.Dialect` this matcher matches with."""
        return self._dialect

    def __len__(self) -> int:
        """The number of (pattern, subscriber) pairs.  O(1)."""
        return self._size

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dialect={self._dialect.name!r}, size={len(self)})"

    # ---------------------------------------------------------------- updates
    def subscribe(self, pattern: str, subscriber: Hashable) -> bool:
        """Add the (pattern, subscriber) pair; True if it was new.

        Raises ``TypeError`` (non-str pattern, unhashable subscriber) or
        ``ValueError`` (pattern invalid in the dialect), leaving the matcher as it was.
        """
        words = self._split_pattern(pattern)
        check_hashable(subscriber)
        added = self._add(pattern, words, subscriber)
        if added:
            self._size += 1
        return added

    def unsubscribe(self, pattern: str, subscriber: Hashable) -> bool:
        """Remove the pair; True if it was there.  Raises like :meth:`subscribe`."""
        words = self._split_pattern(pattern)
        check_hashable(subscriber)
        removed = self._remove(pattern, words, subscriber)
        if removed:
            self._size -= 1
        return removed

    @abstractmethod
    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        """Add a validated pair; True if it was new."""

    @abstractmethod
    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        """Remove a validated pair; True if it was there."""

    # ---------------------------------------------------------------- queries
    @abstractmethod
    def lookup(self, topic: str) -> list[Hashable]:
        """Every subscriber of a pattern matching ``topic``, each once, in no order.

        Raises ``TypeError`` for a non-str and ``ValueError`` for a topic invalid in
        the dialect.
        """


def check_hashable(subscriber: object) -> None:
    """Raise ``TypeError`` naming the problem if ``subscriber`` cannot be hashed."""
    try:
        hash(subscriber)
    except TypeError as exc:
        raise TypeError(
            f"subscriber must be hashable, got {type(subscriber).__name__}: {exc}"
        ) from None


# ------------------------------------------------------------ pattern programs
def _literal_getter(positions: list[int], words: list[str]) -> tuple[Getter | None, Any]:
    """``(getter, expected)`` checking ``topic[positions[i]] == words[i]`` at once."""
    if not positions:
        return None, None
    if len(positions) == 1:
        return itemgetter(positions[0]), words[0]
    return itemgetter(*positions), tuple(words)


def _segment_middle(start: int, tail: int, k: int, segments: list[list[str | None]]) -> Middle:
    """The check for the words between the first and last many-word wildcard.

    The topic words ``start .. n - tail`` must read ``M seg1 M seg2 ... M`` where each
    ``M`` takes ``k`` or more words and each segment is a run of fixed words
    (``None`` for the one-word wildcard).  Placing every segment at its left-most
    possible position is optimal (it leaves the most room for the rest), so one
    forward scan decides the match.
    """
    segs = [
        (len(seg), tuple((i, w) for i, w in enumerate(seg) if w is not None)) for seg in segments
    ]

    def middle(words: Sequence[str], n: int) -> bool:
        pos = start + k
        end = n - tail
        for length, lits in segs:
            last = end - length - k
            j = pos
            while j <= last:
                for off, word in lits:
                    if words[j + off] != word:
                        break
                else:
                    break
                j += 1
            else:
                return False
            pos = j + length + k
        return pos <= end

    return middle


def compile_pattern(dialect: Dialect, words: list[str]) -> Program:
    """Compile a validated pattern's words into a :data:`Program`.  O(len(words))."""
    single, multi, k = dialect.single, dialect.multi, dialect.multi_min
    wild_first = bool(dialect.dollar_rule and words and words[0] in (single, multi))
    multis = [i for i, w in enumerate(words) if w == multi]
    if not multis:
        lits = [(i, w) for i, w in enumerate(words) if w != single]
        getter, expected = _literal_getter([i for i, _ in lits], [w for _, w in lits])
        return (len(words), True, wild_first, getter, expected, None)
    first, last = multis[0], multis[-1]
    fixed_words = len(words) - len(multis)
    min_len = fixed_words + k * len(multis)
    positions: list[int] = []
    expect: list[str] = []
    for i in range(first):
        if words[i] != single:
            positions.append(i)
            expect.append(words[i])
    for i in range(last + 1, len(words)):
        if words[i] != single:
            positions.append(i - len(words))  # from the end: topic[-1] is the last word
            expect.append(words[i])
    getter, expected = _literal_getter(positions, expect)
    middle: Middle | None = None
    if len(multis) > 1:
        segments: list[list[str | None]] = []
        current: list[str | None] = []
        for w in words[first + 1 : last]:
            if w == multi:
                segments.append(current)
                current = []
            else:
                current.append(None if w == single else w)
        segments.append(current)
        if any(segments):
            # (only empty segments, as in "a.#.#.b": min_len already says it all)
            middle = _segment_middle(first, len(words) - last - 1, k, segments)
    return (min_len, False, wild_first, getter, expected, middle)


def program_matches(program: Program, words: Sequence[str], dollar: bool) -> bool:
    """True if ``program`` matches the topic ``words``.

    ``dollar`` says the topic's first word starts with ``$`` and the dialect has the
    ``$`` rule.
    """
    min_len, fixed, wild_first, getter, expected, middle = program
    n = len(words)
    if (n != min_len) if fixed else (n < min_len):
        return False
    if dollar and wild_first:
        return False
    if getter is not None and getter(words) != expected:
        return False
    return middle is None or middle(words, n)


def topic_is_dollar(dialect: Dialect, words: Sequence[str]) -> bool:
    """True if the ``$`` rule applies to the topic ``words``."""
    return bool(dialect.dollar_rule and words and words[0][:1] == "$")


def decode_bits(bits: int) -> list[int]:
    """The positions of the set bits of ``bits`` (>= 0), lowest first.

    Isolates the lowest set bit with ``bits & -bits`` each round: O(set bits) big-int
    operations, the fastest pure-Python way for the sparse results matchers produce.
    """
    out: list[int] = []
    append = out.append
    while bits:
        low = bits & -bits
        append(low.bit_length() - 1)
        bits ^= low
    return out
