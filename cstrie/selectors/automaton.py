"""A linear-time matcher for regular languages: a Thompson NFA run as a lazily
built DFA.

URI templates (:mod:`cstrie.selectors.uritemplate`) and regular expressions
(:mod:`cstrie.selectors.regex`) compile to the small syntax tree below and then
to an :class:`Automaton`.  A match reads each character of the topic once: no
backtracking, so no template or pattern can make a match cost more than
``O(len(topic) * states)`` (and ``O(len(topic))`` once the DFA states it meets
are built).

Syntax tree (plain tuples)::

    ("set", pred)              one character c with pred(c) true
    ("seq", [node, ...])       concatenation (an empty list: the empty string)
    ("alt", [node, ...])       alternation
    ("rep", node, lo, hi)      lo to hi repetitions (hi None: unbounded)

Characters are first sorted into *classes*: two characters are in one class
when every predicate of the automaton says the same of both, so the DFA's
transitions are per class, not per character.  Both memos are bounded
(``max_dfa_states`` DFA states, :data:`CHAR_MEMO` characters); past a bound a
step is computed and not kept, so memory stays bounded whatever topics arrive.
The memos are filled by whichever thread needs a step first: each entry is a
pure function of its key, so racing threads at worst compute one twice.

>>> a = Automaton(("seq", [("set", "a".__eq__), ("rep", ("set", "b".__eq__), 0, None)]))
>>> a.match("abbb"), a.match("ba"), a.match("a")
(True, False, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CHAR_MEMO", "Automaton", "Node"]

Node = tuple[Any, ...]
Pred = Callable[[str], bool]

#: characters whose class an automaton remembers
CHAR_MEMO = 512
#: NFA states an automaton may have (a template or pattern past it is refused)
DEFAULT_MAX_STATES = 4096
#: DFA states an automaton keeps
DEFAULT_MAX_DFA_STATES = 64


class _DState:
    """A DFA state: the NFA character states it stands for, whether it accepts,
    and its known transitions by character class."""

    __slots__ = ("accept", "next", "states")

    def __init__(self, states: tuple[int, ...], accept: bool) -> None:
        self.states = states
        self.accept = accept
        self.next: dict[int, _DState] = {}


class Automaton:
    """The NFA of ``tree`` and its lazily built DFA.  ``ValueError`` when the NFA
    would need more than ``max_states`` states (``a{1000}{1000}``)."""

    __slots__ = (
        "_chars",
        "_classes",
        "_dead",
        "_dstates",
        "_eps",
        "_max_dfa",
        "_out",
        "_pred_of",
        "_preds",
        "start",
    )

    def __init__(
        self,
        tree: Node,
        max_states: int = DEFAULT_MAX_STATES,
        max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    ) -> None:
        self._preds: list[Pred] = []
        pred_index: dict[object, int] = {}
        # per NFA state: its predicate's index (-1: an epsilon state), its
        # successor (character states) and its epsilon successors
        self._pred_of: list[int] = []
        self._out: list[int] = []
        self._eps: list[tuple[int, ...]] = []

        def new(pred: int, out: int, eps: tuple[int, ...]) -> int:
            if len(self._out) >= max_states:
                raise ValueError(f"too complex: it needs more than {max_states} automaton states")
            self._pred_of.append(pred)
            self._out.append(out)
            self._eps.append(eps)
            return len(self._out) - 1

        def build(node: Node, nxt: int) -> int:
            kind = node[0]
            if kind == "set":
                pred = node[1]
                # the tree holds every predicate while it is built: ids are unique
                k = ("eq", pred.__self__) if _is_eq(pred) else ("p", id(pred))
                if k not in pred_index:
                    pred_index[k] = len(self._preds)
                    self._preds.append(pred)
                return new(pred_index[k], nxt, ())
            if kind == "seq":
                for child in reversed(node[1]):
                    nxt = build(child, nxt)
                return nxt
            if kind == "alt":
                starts = tuple(build(child, nxt) for child in node[1])
                return new(-1, -1, starts)
            if kind == "rep":
                child, lo, hi = node[1], node[2], node[3]
                if hi is None:
                    loop = new(-1, -1, ())
                    body = build(child, loop)
                    self._eps[loop] = (body, nxt)
                    tail = loop
                else:
                    tail = nxt
                    for _ in range(hi - lo):
                        tail = new(-1, -1, (build(child, tail), nxt))
                for _ in range(lo):
                    tail = build(child, tail)
                return tail
            raise AssertionError(f"unknown node {kind!r}")

        accept = new(-1, -1, ())
        try:
            first = build(tree, accept)
        except RecursionError:
            raise ValueError("too complex: nested too deeply") from None
        self._classes: dict[int, int] = {}  # signature -> class id
        self._chars: dict[str, int] = {}  # character -> class id (CHAR_MEMO at most)
        self._max_dfa = max_dfa_states
        self._dstates: dict[tuple[tuple[int, ...], bool], _DState] = {}
        self._dead = _DState((), False)
        self.start = self._state(self._closure((first,)))

    def __len__(self) -> int:
        """The number of NFA states."""
        return len(self._out)

    # -- the DFA ---------------------------------------------------------
    def _closure(self, starts: tuple[int, ...]) -> tuple[tuple[int, ...], bool]:
        seen: set[int] = set()
        stack = list(starts)
        chars: list[int] = []
        accept = False
        pred_of, eps = self._pred_of, self._eps
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            if pred_of[s] >= 0:
                chars.append(s)
            elif s == 0:  # the accepting state, made first
                accept = True
            else:
                stack.extend(eps[s])
        chars.sort()
        return tuple(chars), accept

    def _state(self, closure: tuple[tuple[int, ...], bool]) -> _DState:
        states, accept = closure
        if not states and not accept:
            return self._dead
        d = self._dstates.get(closure)
        if d is not None:
            return d
        d = _DState(states, accept)
        if len(self._dstates) < self._max_dfa:
            d = self._dstates.setdefault(closure, d)
        return d

    def _classify(self, c: str) -> int:
        sig = 0
        for i, pred in enumerate(self._preds):
            if pred(c):
                sig |= 1 << i
        k = self._classes.get(sig)
        if k is None:
            k = self._classes.setdefault(sig, len(self._classes))
        if len(self._chars) < CHAR_MEMO:
            self._chars[c] = k
        return k

    def _step(self, d: _DState, c: str, k: int) -> _DState:
        pred_of, out, preds = self._pred_of, self._out, self._preds
        targets = tuple(out[s] for s in d.states if preds[pred_of[s]](c))
        n = self._state(self._closure(targets))
        if self._kept(d) and (n is self._dead or self._kept(n)):
            d.next[k] = n  # both kept: remember the step (bounded by the classes)
        return n

    def _kept(self, d: _DState) -> bool:
        return self._dstates.get((d.states, d.accept)) is d

    def match(self, text: str, start: int = 0, state: _DState | None = None) -> bool:
        """Whether the automaton accepts ``text[start:]``, read from ``state``
        (default: the start state).  O(len(text))."""
        d = self.start if state is None else state
        dead = self._dead
        chars = self._chars
        for c in text[start:] if start else text:
            k = chars.get(c)
            if k is None:
                k = self._classify(c)
            n = d.next.get(k)
            if n is None:
                n = self._step(d, c, k)
            if n is dead:
                return False
            d = n
        return d.accept

    def advance(self, text: str) -> _DState | None:
        """The state after reading ``text`` from the start state (None: no
        continuation can match), to start later matches from (a literal
        prefix read once).  The states on the way are not kept."""
        states, accept = self.start.states, self.start.accept
        pred_of, out, preds = self._pred_of, self._out, self._preds
        for c in text:
            states, accept = self._closure(
                tuple(out[s] for s in states if preds[pred_of[s]](c))
            )
            if not states and not accept:
                return None
        return self._state((states, accept))

    def memo_size(self) -> tuple[int, int]:
        """(DFA states kept, characters classified): both bounded."""
        return len(self._dstates), len(self._chars)


def _is_eq(pred: Pred) -> bool:
    return getattr(pred, "__name__", None) == "__eq__" and isinstance(
        getattr(pred, "__self__", None), str
    )
