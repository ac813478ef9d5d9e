"""The filter relations' algorithm: :func:`is_subset` and :func:`intersects`
of two patterns under a resolved :class:`~cstrie.dialect.Dialect`.

:mod:`cstrie.relations` is the public API (a dialect or its name; the scope of
the answers), and :meth:`Dialect.is_subset` / :meth:`Dialect.intersects` call
here directly.  This module needs the dialect only for its type, so
``cstrie.dialect`` imports it without a cycle.

Algorithm
=========

*Words.*  A pattern word is a literal (matches one identical word), ``single``
(any one word) or ``multi`` (any run of at least ``multi_min`` words).  The topic
alphabet is infinite, but a word that is no literal of ``a`` or ``b`` behaves like
any other such word, so the topics are read over the literals of both patterns
plus a *fresh* word ``z``: non-empty, not starting with ``$``, no literal, valid
in the dialect (one always exists: the forbidden characters are ASCII, so a word
repeating a non-ASCII character that is in neither the separator nor a wildcard
token is valid, and long enough it is no literal).

*Normal form.*  In a run of consecutive wildcards with ``s`` singles and ``k >= 1``
multis the order does not matter: the run matches any ``s + k * multi_min`` or
more words.  :func:`_normalise` rewrites it as that many ``ANY`` items followed by
one ``STAR`` (zero or more words).  So ``multi_min`` disappears, no two ``STAR``
are adjacent, and every item that follows a ``STAR`` is a literal.  The ``$`` rule
needs only "was the first word a wildcard", kept aside.

*Valid topics.*  A topic is valid when each word is (literals and ``z`` are)
and it is not ``[]`` unless ``empty_topic``, nor ``[""]`` (the text ``""`` is zero
words, so a one-word topic whose word is empty cannot be written).  Topics of two
or more words are therefore always valid.

intersects
----------
A product automaton of the two patterns, explored from (0, 0): a state is
(i, j, c) with i, j positions in the normal forms and c in {no word yet, one
word that is ``""``, one other word, two or more words}.  A step emits one word
that both items accept: the common literal, the literal of the one literal item,
or ``z`` when both are wildcards (``z`` is never empty and never ``$``, so it is
the best choice); a ``STAR`` stays or is skipped.  Under the ``$`` rule the first
word may not be a ``$`` literal when either pattern starts with a wildcard.  The
patterns intersect iff (len(a), len(b), c) is reachable with c accepting
(``[]`` only with ``empty_topic``, ``[""]`` never).  Each (i, j) is expanded at
most four times (once per new c), so the cost is O(m * n) time and space for
m and n words, and only the reachable states are stored: O(m + n) when no
``STAR`` is followed by more words (MQTT, NATS).

is_subset
---------
*Generic counterexamples.*  If t is matched by ``a`` and not by ``b``, so is the
topic t' that has ``z`` at every word matched by a wildcard of ``a`` (a word of
``b`` matching ``z`` is a wildcard and would match the old word as well; the ``$``
rule cannot tell them apart because ``a`` starting with a wildcard already rules
out a ``$`` first word; t' has t's length, so it is as valid).  So only the
*generic topics* of ``a`` need checking: A_0 z^l1 A_1 ... z^lr A_r, its literals
fixed, ``z`` for ``ANY``, l_j >= 0 words for each ``STAR``.  The ``$`` rule: if
``a`` starts with a ``$`` literal and ``b`` with a wildcard, ``b`` matches none of
``a``'s topics (False); if ``a`` starts with a wildcard, a leading ``STAR``
followed by a ``$`` literal must take a word (``a`` cannot match that literal
first), which :func:`_dollar_guard` writes as ``ANY STAR``.  Generic topics of at
most one word are few (:func:`_short_topics`), and are tested directly, skipping
the invalid ones; the longer ones are the generic topics of at most two refined
forms of ``a`` (:func:`_longer`), all valid.

*The game.*  Write ``b`` = B_0 STAR B_1 ... STAR B_s.  (Without a ``STAR``, ``b``
has one length, and the answer is a position-by-position comparison.)  An
adversary builds a generic topic of ``a`` word by word; ``b``'s best run is
greedy: B_0 on the first words, then every middle block B_g at its earliest
complete occurrence after the previous one, then B_s on the last words.  (Taking
an occurrence early never hurts: a ``STAR`` that is reached earlier can swallow
the difference.)  Let a "position" p be the adversary's state in ``a`` (the number
of items done; a ``STAR`` loops).  When ``b`` has just reached its ``STAR`` before
B_g, the rest of ``b``, L_g = STAR B_g ... B_s, is closed under prepending words;
since ``a`` is a line, every continuation from position p passes through every
later position p' (it is v u' with u' a continuation from p'), and u not in L_g
implies u' not in L_g.  So being at a *later* position is never worse for the
adversary, and each stage only needs the largest position it can reach:

1. *Prefix.*  Follow the set of positions reachable after k words, k <
   len(B_0).  The adversary wins if one of them can end the topic, or emit a word
   that B_0[k] rejects; else p_1 is the largest position after len(B_0) words.
2. *Middle blocks.*  B_g starts with a literal (normal form); let K be the offset
   of its last literal.  An occurrence starting at the a-item at position i is
   *rigid* if items i .. i+K contain no ``STAR`` and match B_g[0..K] (a literal of
   B_g needs the same literal, an ``ANY`` of B_g takes anything): it occurs
   whatever the run lengths are (occurrences only start at a literal of ``a``).
   Let R, at i_R, be the first rigid one at or after p_g.  An occurrence W
   starting at i < i_R is impossible (items i .. i+K star-free but not
   matching), or has a ``STAR`` among items i .. i+K, reached by offset K, and
   that ``STAR`` comes before i_R: were items i .. i_R star-free, items
   i .. i+K (which lie in i .. i_R + K, star-free through R) would be too, and
   W would be rigid and before R, or impossible.  A run of more than len(B_g)
   words at that ``STAR`` puts ``z`` under B_g's literal at K and kills W,
   changing nothing at or after i_R.
   So the adversary kills everything before R, and R completes after its
   t = len(B_g) - 1 - K trailing wildcards: p_(g+1) is the largest position
   reachable from i_R + K + 1 with exactly t words, and the adversary wins if it
   can end the topic with fewer.  (Letting some W complete instead does not
   help: on that topic W completes no later in ``a`` than R would, and where R
   completes depends only on the runs after R's literals.)  No rigid occurrence
   at or after p_g: the adversary wins (all runs long).
3. *Suffix.*  The adversary wins if a continuation from p_s is shorter than B_s
   or ends in words that B_s rejects: the prefix test of stage 1 on the reversed
   items and block.

*Complexity.*  Normalising is O(m + n).  A set of positions holds at most two
per ``STAR`` of ``a`` plus one, so a stage of w words costs O(m * w); the
search for rigid occurrences of B_g costs O(m * len(B_g)).  In all O(m * n) time
and O(m + n) space, with no recursion; for MQTT and NATS (at most one ``STAR``, at
the end) it is O(m + n).  No state outlives a call, so hostile patterns cannot
grow a cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cstrie.dialect import Dialect

__all__ = ["intersects", "is_subset"]

#: an item of a normal form: a literal word (str), ANY (one word) or STAR (any run);
#: in a generic topic ANY stands for the fresh word ``z``
Item = str | int
ANY = 0
STAR = 1


# ----------------------------------------------------------------- parsing
def _words(dialect: Dialect, pattern: object, name: str) -> list[str]:
    """``pattern`` validated and split, errors naming the argument."""
    try:
        return dialect.split_pattern(pattern)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"argument {name}: {exc}") from None


def _normalise(words: list[str], dialect: Dialect) -> list[Item]:
    """Each maximal run of wildcards becomes ``ANY`` times (singles + multis *
    multi_min), then ``STAR`` if the run had a multi.  O(len(words))."""
    out: list[Item] = []
    singles = 0
    star = False
    for word in words:
        if word == dialect.multi:
            star = True
            singles += dialect.multi_min
        elif word == dialect.single:
            singles += 1
        else:
            if singles:
                out.extend([ANY] * singles)
            if star:
                out.append(STAR)
            singles, star = 0, False
            out.append(word)
    if singles:
        out.extend([ANY] * singles)
    if star:
        out.append(STAR)
    return out


def _starts_wild(words: list[str], dialect: Dialect) -> bool:
    return bool(words) and words[0] in (dialect.single, dialect.multi)


def _parse(d: Dialect, a: object, b: object) -> tuple[list[str], list[str]]:
    return _words(d, a, "a"), _words(d, b, "b")


# ------------------------------------------------------------ intersects
def intersects(d: Dialect, a: object, b: object) -> bool:
    """True if some valid topic of ``d`` matches both patterns ``a`` and ``b``
    (:func:`cstrie.relations.intersects` once the dialect is resolved)."""
    wa, wb = _parse(d, a, b)
    guard = d.dollar_rule and (_starts_wild(wa, d) or _starts_wild(wb, d))
    return _product_accepts(_normalise(wa, d), _normalise(wb, d), guard, d.empty_topic)


# the "c" component of a product state, as bits of a mask
_NONE, _ONE_EMPTY, _ONE, _MORE = 1, 2, 4, 8


def _after_word(mask: int, empty: bool) -> int:
    """The c bits after one more word (``empty``: the word is ``""``)."""
    out = 0
    if mask & _NONE:
        out |= _ONE_EMPTY if empty else _ONE
    if mask & (_ONE_EMPTY | _ONE | _MORE):
        out |= _MORE
    return out


def _product_accepts(x: list[Item], y: list[Item], guard: bool, empty_topic: bool) -> bool:
    """Is a valid topic generated by both normal forms?  Explores the reachable
    (i, j) pairs with a worklist; each pair is pushed again only when its mask of
    c bits grows (at most four times)."""
    m, n = len(x), len(y)
    width = n + 1
    final = m * width + n
    accepting = _ONE | _MORE | (_NONE if empty_topic else 0)
    seen: dict[int, int] = {0: _NONE}
    work = [0]
    while work:
        key = work.pop()
        mask = seen[key]
        if key == final and mask & accepting:
            return True
        i, j = divmod(key, width)
        targets: list[tuple[int, int]] = []
        xi = x[i] if i < m else None
        yj = y[j] if j < n else None
        if xi == STAR:
            targets.append((key + width, mask))
        if yj == STAR:
            targets.append((key + 1, mask))
        if xi is not None and yj is not None:
            if isinstance(xi, str) and isinstance(yj, str):
                word: str | None = xi if xi == yj else None
                ok = word is not None
            elif isinstance(xi, str):
                word, ok = xi, True
            elif isinstance(yj, str):
                word, ok = yj, True
            else:
                word, ok = None, True  # the fresh word: non-empty, no "$"
            if ok:
                emit = mask
                if guard and word is not None and word.startswith("$"):
                    emit &= ~_NONE  # a "$" word may not come first
                if emit:
                    after = _after_word(emit, word == "")
                    nxt = key + (0 if xi == STAR else width) + (0 if yj == STAR else 1)
                    targets.append((nxt, after))
        for nxt, bits in targets:
            old = seen.get(nxt, 0)
            if bits & ~old:
                seen[nxt] = old | bits
                work.append(nxt)
    return False


# ------------------------------------------------------------- is_subset
def is_subset(d: Dialect, a: object, b: object) -> bool:
    """True if every valid topic of ``d`` that ``a`` matches, ``b`` matches too
    (:func:`cstrie.relations.is_subset` once the dialect is resolved)."""
    wa, wb = _parse(d, a, b)
    x, y = _normalise(wa, d), _normalise(wb, d)
    if d.dollar_rule:
        if x and not _starts_wild(wa, d) and str(x[0]).startswith("$"):
            if _starts_wild(wb, d):
                return False  # b matches no topic that starts with a "$" word
        elif _starts_wild(wa, d):
            x = _dollar_guard(x)
    return not _has_counterexample(x, y, d.empty_topic)


def _dollar_guard(x: list[Item]) -> list[Item]:
    """``a`` starts with a wildcard, so its topics' first word has no ``$``: a
    leading ``STAR`` followed by a ``$`` literal must take at least one word."""
    if len(x) >= 2 and x[0] == STAR and isinstance(x[1], str) and x[1].startswith("$"):
        return [ANY, STAR, *x[1:]]
    return x


def _has_counterexample(x: list[Item], y: list[Item], empty_topic: bool) -> bool:
    """Is some valid generic topic of ``x`` not matched by ``y``?"""
    fixed = len(x) - x.count(STAR)
    if fixed >= 2:  # every generic topic has two or more words: all valid
        return _adversary_wins(x, y)
    for topic in _short_topics(x, fixed):
        if (topic or empty_topic) and topic != [""] and not _generic_match(y, topic):
            return True
    return any(_adversary_wins(longer, y) for longer in _longer(x, fixed))


def _short_topics(x: list[Item], fixed: int) -> list[list[Item]]:
    """The generic topics of at most one word of ``x`` (which has ``fixed`` < 2
    non-STAR items)."""
    if fixed == 0:  # [] or [STAR]
        return [[], [ANY]] if x else [[]]
    return [[next(item for item in x if item != STAR)]]


def _longer(x: list[Item], fixed: int) -> list[list[Item]]:
    """Normal forms whose generic topics are those of ``x`` with two or more words.

    In normal form ``x`` is [], [X], [STAR], [X, STAR], [STAR, X] or
    [STAR, X, STAR]; a ``STAR`` must supply the missing 2 - fixed words."""
    stars = [i for i, item in enumerate(x) if item == STAR]
    if not stars:
        return []
    if len(stars) == 1:
        i = stars[0]
        return [[*x[:i], *([ANY] * (2 - fixed)), *x[i:]]]
    # [STAR, X, STAR]: the first run takes a word, or is empty and the last one does
    return [[ANY, *x], [x[1], ANY, STAR]]


def _covers(b_item: Item, a_item: Item) -> bool:
    """Does the ``b`` item (not STAR) accept the word an ``a`` item emits (a
    literal, or ``z`` for ANY and STAR)?"""
    return b_item == ANY or (isinstance(a_item, str) and a_item == b_item)


def _generic_match(y: list[Item], topic: list[Item]) -> bool:
    """Does the normal form ``y`` match ``topic`` (literals, ANY = ``z``)?  The
    usual set-of-positions simulation: O(len(y) * len(topic))."""
    now = _closure(y, {0})
    for word in topic:
        nxt: set[int] = set()
        for j in now:
            if j == len(y):
                continue
            if y[j] == STAR:
                nxt.add(j)
            elif _covers(y[j], word):
                nxt.add(j + 1)
        now = _closure(y, nxt)
        if not now:
            return False
    return len(y) in now


def _closure(x: list[Item], positions: set[int]) -> set[int]:
    """``positions`` plus what a ``STAR`` reaches by taking no word (normal forms
    have no adjacent STARs, so one step each suffices)."""
    return positions | {i + 1 for i in positions if i < len(x) and x[i] == STAR}


def _step(x: list[Item], positions: set[int]) -> set[int]:
    """The positions after one more word from ``positions`` (none at the end)."""
    return _closure(x, {i if x[i] == STAR else i + 1 for i in positions if i < len(x)})


def _blocks(y: list[Item]) -> list[list[Item]]:
    out: list[list[Item]] = [[]]
    for item in y:
        if item == STAR:
            out.append([])
        else:
            out[-1].append(item)
    return out


def _prefix_fails(x: list[Item], start: int, block: list[Item]) -> set[int] | None:
    """Can a continuation of ``x`` from ``start`` end before len(block) words, or
    emit a word that ``block`` rejects at its offset?  None if so, else the set of
    positions after len(block) words."""
    now = _closure(x, {start})
    end = len(x)
    for want in block:
        if end in now:
            return None
        for i in now:
            if not _covers(want, x[i]):
                return None
        now = _step(x, now)
    return now


def _adversary_wins(x: list[Item], y: list[Item]) -> bool:
    """Is some generic topic of ``x`` (all valid, first word no ``$`` concern) not
    matched by ``y``?  The three stages of the module docstring."""
    if STAR not in y:
        if STAR in x or len(x) != len(y):
            return True
        return not all(_covers(want, item) for item, want in zip(x, y, strict=True))
    blocks = _blocks(y)
    after = _prefix_fails(x, 0, blocks[0])
    if after is None:
        return True
    pos = max(after)
    for block in blocks[1:-1]:
        pos = _first_occurrence(x, block, pos)
        if pos < 0:
            return True
    tail = x[pos:][::-1]
    return _prefix_fails(tail, 0, blocks[-1][::-1]) is None


def _first_occurrence(x: list[Item], block: list[Item], pos: int) -> int:
    """The largest position of ``x`` at which the adversary can make ``block``'s
    earliest occurrence after ``pos`` complete, or -1 if it can avoid one."""
    assert block and isinstance(block[0], str), "middle blocks start with a literal"
    span = 1 + max(k for k, item in enumerate(block) if isinstance(item, str))
    end = len(x)
    for i in range(pos, end - span + 1):
        if all(x[i + k] != STAR and _covers(block[k], x[i + k]) for k in range(span)):
            break
    else:
        return -1
    now = _closure(x, {i + span})
    for _ in range(len(block) - span):
        if end in now:
            return -1  # the topic can end before the trailing wildcards
        now = _step(x, now)
    return max(now)
