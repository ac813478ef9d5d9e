"""A deterministic automaton over topic words, built lazily and dropped on every update.

The patterns form a nondeterministic automaton (NFA): a trie of their words in
which a one-word wildcard is an edge taking any word and a many-word wildcard
leads to a node that loops on any word (it may take more words) and, where the
dialect lets it match zero words (``multi_min`` 0), is also reached without
reading a word.  Prefixes are shared, so one NFA node stands for every
(pattern, position) pair with the same words read so far; the tails stay apart
because each accepting node must know its own subscribers.

A DFA state is the set of NFA nodes still alive after the topic words read so
far (the NFA made deterministic by the subset construction).  It is made on
first need, never up front: the first time a state reads a word, its successor
is computed from the NFA and memoised in the state's ``dict`` (word -> state);
the successor on any word that no alive node names literally is the same for
all such words (only wildcards make progress), so it is computed once and kept
as the state's "other" transition.  States are interned by their frozen set of
NFA nodes, so equal sets share one state however the topic reached them.  A
state accepts the subscribers of the patterns complete in it, collected once.

Dialect rules: ``#``-style wildcards of ``multi_min`` 0 match zero words (AMQP
``#`` anywhere, MQTT ``a/#`` matching ``a``), ``multi_min`` 1 needs a word (NATS
``>``); empty words are ordinary words; with ``dollar_rule`` (MQTT) a topic
whose first word starts with ``$`` starts from a separate start state that
follows only literal edges of the root, so no pattern whose first word is a
wildcard can match it.

Costs (``w`` topic words, ``s`` subscribers returned, ``k`` NFA nodes alive in
a state, ``e`` their literal edges):

* lookup, warm (every state on the way already made): one ``dict`` probe per
  word -- two for a word no pattern names at that point (the memo, then the
  state's literal words, then the "other" transition) -- plus O(s) to copy the
  answer.  No backtracking: the DFA is the trie walk with the branching done in
  advance.
* lookup, cold: for each new state O(k + e) to index its nodes' edges once,
  then O(nodes in the successor) per new transition to build and intern its set.
* subscribe / unsubscribe: O(pattern words) to edit the NFA, and O(1) to drop
  the whole DFA (the memo is simply forgotten); the lookups after it pay the
  cold cost again until the states they need are rebuilt.
* memory: the NFA (one node per distinct prefix) plus every state made: its
  frozen node set, its transitions and its answer.  With ``max_states`` set the
  DFA is dropped (and rebuilt as lookups need it) whenever it would grow past
  that many states: a memory budget, paid for in rebuilds.  :meth:`dfa_size`
  reports states, transitions and an estimate of the DFA's bytes.

Where it loses: every update throws the automaton away, so interleaved writes
and lookups keep it cold (a broker with steady churn rebuilds all the time);
and the number of states can blow up with many wildcard patterns -- each
AMQP ``#`` anywhere keeps its node alive for the rest of the topic, so the
node sets (and how many distinct ones the topics reach) grow with the
combinations of ``#`` patterns alive at once.  Where it wins: a stable set of
patterns and repeated topic shapes, where a lookup is a few dict probes.

Not thread safe.

    >>> m = LazyDFA("amqp")
    >>> m.subscribe("a.*.c", "x"), m.subscribe("a.#", "y")
    (True, True)
    >>> sorted(m.lookup("a.b.c")), m.lookup("a")
    (['x', 'y'], ['y'])
    >>> m.dfa_size()["states"] > 0
    True
    >>> m.subscribe("#.c", "z")  # drops the DFA
    True
    >>> m.dfa_size()["states"], sorted(m.lookup("a.b.c"))
    (0, ['x', 'y', 'z'])
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any

from cstrie.dialect import Dialect
from cstrie_lab.classic.base import ClassicMatcher

__all__ = ["DEFAULT_MAX_STATES", "LazyDFA"]

#: the default memory budget, in DFA states (``None``: no budget)
DEFAULT_MAX_STATES = 65_536


class _Node:
    """One NFA node: the point reached after a prefix of pattern words."""

    __slots__ = ("lit", "loop", "multi", "single", "subs")

    def __init__(self, loop: bool = False) -> None:
        self.lit: dict[str, _Node] = {}  # literal word -> next node
        self.single: _Node | None = None  # after the one-word wildcard
        self.multi: _Node | None = None  # after the many-word wildcard
        self.loop = loop  # this node follows a many-word wildcard: it may take more words
        self.subs: set[Hashable] | None = None  # subscribers of the pattern ending here


class _State:
    """One DFA state: a frozen set of NFA nodes and what was learnt about it."""

    __slots__ = ("accept", "literal_only", "lits", "nodes", "other", "trans", "wild")

    def __init__(self, nodes: frozenset[_Node], literal_only: bool = False) -> None:
        self.nodes = nodes
        self.literal_only = literal_only  # the '$' start: wildcard edges are not followed
        self.trans: dict[str, _State] = {}  # word -> successor, for words named literally
        self.other: _State | None = None  # the successor on every other word
        # made with the first transition: literal word -> nodes it reaches, and the
        # nodes any word reaches (loops and wildcard edges)
        self.lits: dict[str, list[_Node]] | None = None
        self.wild: list[_Node] = []
        self.accept: list[Hashable] | None = None  # subscribers, collected once


class LazyDFA(ClassicMatcher):
    """A lazily built DFA over topic words (all dialects).  Not thread safe.

    Args:
        dialect: as for every classic matcher.
        max_states: the most DFA states kept; making one more drops the whole DFA
            first (it is rebuilt as lookups need it).  ``None``: no limit.
    """

    name = "lazy-dfa"
    description = "a DFA of pattern positions built lazily per word, dropped on every update"
    thread_safe = False

    def __init__(
        self, dialect: str | Dialect = "amqp", *, max_states: int | None = DEFAULT_MAX_STATES
    ) -> None:
        super().__init__(dialect)
        if max_states is not None and (isinstance(max_states, bool) or max_states < 1):
            raise ValueError(f"max_states must be a positive int or None, got {max_states!r}")
        d = self._dialect
        self._single = d.single
        self._multi = d.multi
        self._zero_multi = d.multi_min == 0  # the many-word wildcard may take no word
        self._dollar_rule = d.dollar_rule
        self._max_states = max_states
        self._root = _Node()
        self._nfa_nodes = 1
        self._drops = 0  # DFAs dropped by updates
        self._resets = 0  # DFAs dropped by the state budget
        self._forget()

    def _forget(self) -> None:
        """Drop the DFA: O(1) here (the states become garbage)."""
        self._states: dict[frozenset[_Node], _State] = {}
        self._transitions = 0
        self._start: _State | None = None
        self._start_dollar: _State | None = None

    # ---------------------------------------------------------------- updates
    def _add(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        node = self._root
        single, multi = self._single, self._multi
        for word in words:
            if word == single:
                nxt = node.single
                if nxt is None:
                    nxt = node.single = _Node()
                    self._nfa_nodes += 1
            elif word == multi:
                nxt = node.multi
                if nxt is None:
                    nxt = node.multi = _Node(loop=True)
                    self._nfa_nodes += 1
            else:
                nxt = node.lit.get(word)
                if nxt is None:
                    nxt = node.lit[word] = _Node()
                    self._nfa_nodes += 1
            node = nxt
        if node.subs is None:
            node.subs = set()
        elif subscriber in node.subs:
            return False
        node.subs.add(subscriber)
        self._drops += 1
        self._forget()
        return True

    def _remove(self, pattern: str, words: list[str], subscriber: Hashable) -> bool:
        single, multi = self._single, self._multi
        path = [self._root]
        for word in words:
            node = path[-1]
            if word == single:
                nxt = node.single
            elif word == multi:
                nxt = node.multi
            else:
                nxt = node.lit.get(word)
            if nxt is None:
                return False
            path.append(nxt)
        end = path[-1]
        if end.subs is None or subscriber not in end.subs:
            return False
        end.subs.discard(subscriber)
        if not end.subs:
            end.subs = None
            # prune the nodes no pattern needs any more, deepest first
            for i in range(len(words) - 1, -1, -1):
                child = path[i + 1]
                if child.subs or child.lit or child.single or child.multi:
                    break
                parent, word = path[i], words[i]
                if word == single:
                    parent.single = None
                elif word == multi:
                    parent.multi = None
                else:
                    del parent.lit[word]
                self._nfa_nodes -= 1
        self._drops += 1
        self._forget()
        return True

    # ---------------------------------------------------------------- queries
    def lookup(self, topic: str) -> list[Hashable]:
        words = self._split_topic(topic)
        if self._dollar_rule and words and words[0][:1] == "$":
            state = self._start_dollar or self._make_start(True)
        else:
            state = self._start or self._make_start(False)
        for word in words:
            nxt = state.trans.get(word)
            if nxt is None:
                lits = state.lits
                other = state.other
                if other is not None and lits is not None and word not in lits:
                    nxt = other
                else:
                    nxt = self._step(state, word)
            state = nxt
            if not state.nodes:  # dead: nothing can match any more
                return []
        accept = state.accept
        if accept is None:
            accept = self._collect(state)
        return list(accept)

    def _make_start(self, dollar: bool) -> _State:
        if dollar:
            # not interned: {root} read with literal edges only is a state of its own
            st = self._start_dollar = _State(frozenset((self._root,)), literal_only=True)
            return st
        st = self._start = self._intern(self._closure([self._root]))
        return st

    def _step(self, state: _State, word: str) -> _State:
        """Make ``state``'s transition on ``word`` and memoise it."""
        lits = state.lits
        if lits is None:
            lits = self._index(state)
        targets = lits.get(word)
        if targets is None:
            nxt = state.other
            if nxt is None:
                nxt = state.other = self._intern(self._closure(state.wild))
                self._transitions += 1
            return nxt
        nxt = self._intern(self._closure(state.wild + targets))
        state.trans[word] = nxt
        self._transitions += 1
        return nxt

    def _index(self, state: _State) -> dict[str, list[_Node]]:
        """Index ``state``'s edges once: O(nodes + literal edges)."""
        lits: dict[str, list[_Node]] = {}
        wild: list[_Node] = []
        follow_wild = not state.literal_only
        take_one = not self._zero_multi  # multi_min 1: the wildcard's first word
        for node in state.nodes:
            if node.loop:
                wild.append(node)
            if follow_wild:
                if node.single is not None:
                    wild.append(node.single)
                if take_one and node.multi is not None:
                    wild.append(node.multi)
            for word, child in node.lit.items():
                got = lits.get(word)
                if got is None:
                    lits[word] = [child]
                else:
                    got.append(child)
        state.lits = lits
        state.wild = wild
        return lits

    def _closure(self, nodes: list[_Node]) -> frozenset[_Node]:
        """``nodes`` plus what they reach by a zero-word many-word wildcard."""
        if not self._zero_multi:
            return frozenset(nodes)
        seen = set(nodes)
        stack = [n.multi for n in nodes if n.multi is not None]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                if node.multi is not None:
                    stack.append(node.multi)
        return frozenset(seen)

    def _intern(self, nodes: frozenset[_Node]) -> _State:
        states = self._states
        st = states.get(nodes)
        if st is None:
            if self._max_states is not None and len(states) >= self._max_states:
                # over budget: start a new DFA (the states in use now stay valid,
                # they are only no longer shared)
                self._resets += 1
                self._forget()
                states = self._states
            st = states[nodes] = _State(nodes)
        return st

    def _collect(self, state: _State) -> list[Hashable]:
        found: set[Hashable] = set()
        for node in state.nodes:
            if node.subs:
                found |= node.subs
        accept = state.accept = list(found)
        return accept

    # ------------------------------------------------------------------ sizes
    def dfa_size(self, *, measure_bytes: bool = False) -> dict[str, Any]:
        """How big the DFA is now.

        ``states`` and ``transitions`` (memoised word transitions plus "other"
        transitions) are O(1); with ``measure_bytes`` also ``positions`` (NFA nodes
        summed over the states) and ``bytes``, an estimate of the DFA's own memory
        by ``sys.getsizeof`` of its states, sets, dicts and lists (the NFA and the
        subscribers are not counted), O(states + transitions).  ``nfa_nodes`` is
        the NFA's size; ``drops`` and ``resets`` count the DFAs thrown away by
        updates and by the ``max_states`` budget.
        """
        states = len(self._states) + (self._start_dollar is not None)
        out: dict[str, Any] = {
            "states": states,
            "transitions": self._transitions,
            "nfa_nodes": self._nfa_nodes,
            "drops": self._drops,
            "resets": self._resets,
            "max_states": self._max_states,
        }
        if measure_bytes:
            every = list(self._states.values())
            if self._start_dollar is not None:
                every.append(self._start_dollar)
            size = sys.getsizeof(self._states)
            positions = 0
            for st in every:
                positions += len(st.nodes)
                size += sys.getsizeof(st) + sys.getsizeof(st.nodes) + sys.getsizeof(st.trans)
                if st.lits is not None:
                    size += sys.getsizeof(st.lits) + sys.getsizeof(st.wild)
                    size += sum(sys.getsizeof(v) for v in st.lits.values())
                if st.accept is not None:
                    size += sys.getsizeof(st.accept)
            out["positions"] = positions
            out["bytes"] = size
        return out
