"""Python regular expressions as selectors, matched in linear time.

A regex selector matches a topic when ``re.fullmatch(pattern, topic)`` would
(the whole topic; write ``.*`` for "contains").  It is not run by ``re``: its
parse tree (``re``'s own parser, so the syntax and the meaning of ``\\d``,
``\\w``, ``[...]``, ``.`` and the flags are Python's) is compiled to an
:class:`~cstrie.selectors.automaton.Automaton`, which reads each topic character
once.  So no pattern can backtrack catastrophically (``(a+)+b``, ``(a|a)*b`` and
``a*a*a*a*b`` cost what ``ab`` costs), and the constructs that have no such
matcher are refused with ``ValueError`` when the selector is added:

- backreferences (``\\1``, ``(?P=name)``, ``(?(1)a|b)``): they make matching
  NP-hard;
- lookaheads and lookbehinds, atomic groups ``(?>...)`` and possessive
  repeats (``a*+``): they change which strings match in ways a finite automaton
  without lookaround cannot follow;
- case-insensitive matching (``re.I``, ``(?i)``): Python folds cases with
  tables of its own; write the cases out (``[Aa]``);
- anchors other than a leading ``^``/``\\A`` and a trailing ``$``/``\\Z`` (of the
  pattern or of its top-level alternatives), which under ``fullmatch`` change
  nothing; ``\\b``, ``\\B`` and anchors in the middle are refused.

Repeat counts are expanded (``x{3,5}`` is three copies of ``x`` and two optional
ones), so a pattern that needs more automaton states than the index allows
(``max_automaton_states``) is refused as too complex.  Its length is bounded by
the index's ``max_selector_length``.

>>> r = Regex(r"news\\.(sport|tech)\\.[a-z]+")
>>> r.match("news.sport.tennis"), r.match("news.sport.tennis.x"), r.prefix
(True, False, 'news.')
"""

from __future__ import annotations

import re
import sys
from typing import Any

from cstrie.selectors.automaton import DEFAULT_MAX_DFA_STATES, DEFAULT_MAX_STATES, Automaton, Node

if sys.version_info >= (3, 11):
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse

__all__ = ["Regex"]

_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
}
_LEADING = ("AT_BEGINNING", "AT_BEGINNING_STRING")
_TRAILING = ("AT_END", "AT_END_STRING")


def _name(op: Any) -> str:
    return str(getattr(op, "name", op))


class _Class:
    """The predicate of one ``[...]`` (or ``\\d``...) item of a pattern."""

    __slots__ = ("cats", "chars", "negate", "ranges")

    def __init__(self, items: list[tuple[Any, Any]], flags: int) -> None:
        self.negate = False
        self.chars: set[str] = set()
        self.ranges: list[tuple[int, int]] = []
        self.cats: list[re.Pattern[str]] = []
        for op, av in items:
            name = _name(op)
            if name == "NEGATE":
                self.negate = True
            elif name == "LITERAL":
                self.chars.add(chr(av))
            elif name == "RANGE":
                self.ranges.append(av)
            elif name == "CATEGORY":
                self.cats.append(re.compile(_CATEGORIES[_name(av)], flags & re.ASCII))
            else:
                raise ValueError(f"unsupported item {name} in a character class")

    def __call__(self, c: str) -> bool:
        hit = (
            c in self.chars
            or any(lo <= ord(c) <= hi for lo, hi in self.ranges)
            or any(p.fullmatch(c) is not None for p in self.cats)
        )
        return hit != self.negate


def _refuse(what: str) -> ValueError:
    return ValueError(f"regex selectors cannot use {what} (see cstrie.selectors.regex)")


def _tree(items: list[tuple[Any, Any]], flags: int) -> Node:
    out: list[Node] = []
    for op, av in items:
        name = _name(op)
        if name == "LITERAL":
            out.append(("set", chr(av).__eq__))
        elif name == "NOT_LITERAL":
            out.append(("set", chr(av).__ne__))
        elif name == "ANY":
            out.append(("set", _any if flags & re.DOTALL else _not_newline))
        elif name == "IN":
            out.append(("set", _Class(av, flags)))
        elif name == "BRANCH":
            out.append(("alt", [_tree(list(alt), flags) for alt in av[1]]))
        elif name == "SUBPATTERN":
            _group, add, remove, sub = av
            if add & re.IGNORECASE:
                raise _refuse("case-insensitive matching ((?i)); write the cases out")
            out.append(_tree(list(sub), (flags | add) & ~remove))
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, sub = av
            maxrepeat = _sre_parse.MAXREPEAT
            out.append(("rep", _tree(list(sub), flags), lo, None if hi == maxrepeat else hi))
        elif name == "POSSESSIVE_REPEAT":
            raise _refuse("possessive repeats (*+, ++, ?+)")
        elif name == "ATOMIC_GROUP":
            raise _refuse("atomic groups ((?>...))")
        elif name in ("GROUPREF", "GROUPREF_EXISTS"):
            raise _refuse("backreferences")
        elif name in ("ASSERT", "ASSERT_NOT"):
            raise _refuse("lookahead or lookbehind assertions")
        elif name == "AT":
            raise _refuse(f"the anchor {_name(av)} here (only a leading ^ and a trailing $)")
        else:
            raise _refuse(f"the construct {name}")
    return ("seq", out)


def _any(c: str) -> bool:
    return True


def _not_newline(c: str) -> bool:
    return c != "\n"


def _strip_anchors(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Drop a leading ^/\\A and a trailing $/\\Z: under fullmatch they hold anyway."""
    if items and _name(items[0][0]) == "AT" and _name(items[0][1]) in _LEADING:
        items = items[1:]
    if items and _name(items[-1][0]) == "AT" and _name(items[-1][1]) in _TRAILING:
        items = items[:-1]
    return items


def _prefix(items: list[tuple[Any, Any]]) -> str:
    """The literal text every match starts with (leading LITERAL items)."""
    out = []
    for op, av in items:
        if _name(op) != "LITERAL":
            break
        out.append(chr(av))
    return "".join(out)


class Regex:
    """A compiled regex selector (see the module): ``match(topic)`` is
    ``re.fullmatch(pattern, topic) is not None``; ``prefix`` is the literal
    text every matching topic starts with."""

    __slots__ = ("_after_prefix", "automaton", "pattern", "prefix")

    def __init__(
        self,
        pattern: str,
        max_states: int = DEFAULT_MAX_STATES,
        max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    ) -> None:
        self.pattern = pattern
        try:
            parsed = _sre_parse.parse(pattern, 0)
        except re.error as e:
            raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None
        except RecursionError:
            raise ValueError(f"regular expression {pattern[:40]!r}... nested too deeply") from None
        flags = parsed.state.flags
        if flags & re.IGNORECASE:
            raise _refuse("case-insensitive matching (re.I); write the cases out")
        items = _strip_anchors(list(parsed))  # type: ignore[call-overload]
        try:
            if len(items) == 1 and _name(items[0][0]) == "BRANCH":
                alts = [_strip_anchors(list(a)) for a in items[0][1][1]]
                tree: Node = ("alt", [_tree(a, flags) for a in alts])
                self.prefix = ""
            else:
                tree = _tree(items, flags)
                self.prefix = _prefix(items)
        except RecursionError:
            raise ValueError(f"regular expression {pattern[:40]!r}... nested too deeply") from None
        self.automaton = Automaton(tree, max_states, max_dfa_states)
        self._after_prefix = self.automaton.advance(self.prefix)

    def match(self, topic: str) -> bool:
        """``re.fullmatch(self.pattern, topic) is not None``, in O(len(topic))."""
        if not topic.startswith(self.prefix) or self._after_prefix is None:
            return False
        return self.automaton.match(topic, len(self.prefix), self._after_prefix)

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"
