"""The content index: subscriptions on message fields, indexed on the engine.

A :class:`ContentIndex` holds *bindings*: (criteria, subscriber, optional
topic filter).  ``match(fields, topic)`` answers which subscribers want a
message without testing the bindings one by one::

    >>> from cstrie.content import ContentIndex, AllOf, Eq, Has, Range
    >>> idx = ContentIndex()                       # topic filters in AMQP rules
    >>> idx.bind(AllOf(Eq("currency", "USD"), Has("urgent")), "alice")
    True
    >>> idx.bind(Range("price", 10, 100), "bob", topic="stock.#")
    True
    >>> idx.match({"currency": "USD", "urgent": True, "price": 50})
    ['alice']
    >>> sorted(idx.match({"currency": "USD", "urgent": 1, "price": 50}, topic="stock.ibm"))
    ['alice', 'bob']

How (``docs/design.md``, "Content index"): every binding's criteria become
patterns of one internal :class:`cstrie.Trie` (keys in
:mod:`cstrie.content.keys`), each pattern's subscriber an int naming (binding,
clause, clauses).  A message takes ONE snapshot of that trie, looks its
field keys up in one engine call, counts the clauses hit per binding, and
keeps as candidates the bindings whose every clause was hit, plus the
bindings that can match with no key hit (the ``a`` list).  A binding counts
only if its marker ``b <id>`` is in the same snapshot: the marker is
inserted after everything else of the binding and removed before it, so a
snapshot holding the marker holds the whole binding (a snapshot taken while
no bind or unbind was writing holds only whole bindings, and skips that
check: ``_view``).  Each candidate is then
verified exactly (:meth:`Criterion.test`), so the index only has to be
complete, never exact; except a candidate whose clauses are also sufficient
(equality, set, presence, prefix and suffix tests under all/any: *exact*),
which matches a plain dict message on its hits alone.

Complexity (k = keys of the message: about 4 per str field, 3 per number,
2 otherwise; L = the longest str value looked at, at most ``max_value_length``):

========================  ================================================
``match``                 O(k + L * fields + hits + always + candidates *
                          criteria size); not O(bindings)
``bind``/``unbind``       O(patterns of the binding) engine updates,
                          lock-free in the engine
``snapshot``              O(1)
``len``                   O(1); ``stats``/``bindings``/``export`` O(bindings)
========================  ================================================

Concurrency: ``match`` never takes a lock and answers exactly as the
per-binding evaluation would on the bindings of the snapshot it took (a
state between the call's start and end).  ``bind``/``unbind`` of the same
(criteria, subscriber, topic) are serialised by that subscriber's own small
lock (no user code runs under it); different subscribers never wait for each
other.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from cstrie._hotpath import content_candidates
from cstrie.content.criteria import (
    MAX_DEPTH,
    AllOf,
    AnyOf,
    Criterion,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
    Suffix,
    value_token,
)
from cstrie.content.keys import KeySpace
from cstrie.dialect import Dialect, resolve_dialect
from cstrie.export.errors import FormatError
from cstrie.trie import Snapshot, Trie

__all__ = ["Binding", "ContentIndex", "ContentSnapshot"]

_BUILDING, _LIVE, _REMOVING = 0, 1, 2
_MAX_CLAUSES = 255  # a clause number and the clause count fit in a byte each
_NEVER: list[list[Criterion]] | None = None  # clauses() of a criterion that never holds
_EXACT_LEAVES = (Has, Eq, OneOf, Prefix, Suffix)  # a key hit iff the leaf holds (dict, str keys)


@dataclasses.dataclass(frozen=True)
class Binding:
    """One binding as :meth:`ContentIndex.bindings` lists it."""

    criteria: Criterion
    subscriber: Any
    topic: str | None = None


class _Record:
    """A binding inside the index: the marker's subscriber (compared by
    identity), immutable once built.  ``patterns`` are its (key, code)
    pairs; ``dollar``: its topic filter starts with a wildcard (the ``$``
    rule applies)."""

    __slots__ = (
        "always",
        "bid",
        "criteria",
        "dollar",
        "exact",
        "marker",
        "patterns",
        "state",
        "subscriber",
        "topic",
    )

    def __init__(
        self,
        bid: int,
        criteria: Criterion,
        subscriber: Any,
        topic: str | None,
        dollar: bool,
        patterns: list[tuple[str, int]],
        always: bool,
        marker: str,
        exact: bool = False,
    ) -> None:
        self.bid = bid
        self.criteria = criteria
        self.subscriber = subscriber
        self.topic = topic
        self.dollar = dollar
        self.patterns = patterns
        self.always = always
        self.marker = marker
        self.exact = exact
        self.state = _BUILDING


class _Subscriber:
    """The bindings of one subscriber, by (criteria key, topic), under its
    own lock.  ``dead``: the last binding left and the entry is being
    removed from the index's table (``popped`` once it is gone)."""

    __slots__ = ("cond", "dead", "popped", "slots")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.slots: dict[tuple[str, str | None], _Record] = {}
        self.dead = False
        self.popped = False


class _Plan:
    __slots__ = ("always", "clauses", "dollar", "exact", "key", "topic")

    def __init__(
        self,
        key: tuple[str, str | None],
        topic: str | None,
        dollar: bool,
        clauses: list[list[str]],
        always: bool,
        exact: bool,
    ) -> None:
        self.key = key
        self.topic = topic
        self.dollar = dollar
        self.clauses = clauses
        self.always = always
        self.exact = exact


class _Reader:
    """What :class:`ContentIndex` and :class:`ContentSnapshot` share."""

    __slots__ = ()

    #: Whether an exact record counts on its hits alone (tests turn it off
    #: to hold the shortcut to the verifier).
    _fast = True
    _ks: KeySpace
    _dialect: Dialect
    _max_len: int
    _int_bits: int

    def limits(self) -> dict[str, int]:
        raise NotImplementedError

    def _snap(self) -> Snapshot:
        raise NotImplementedError

    def _view(self) -> tuple[Snapshot, bool]:
        """A snapshot of the internal trie, and whether it is *quiet*: no
        bind or unbind was writing while it was taken (see ``_matching``)."""
        raise NotImplementedError

    def _live(self) -> dict[int, _Record]:
        raise NotImplementedError

    @property
    def dialect(self) -> Dialect:
        """The dialect of the bindings' topic filters and the messages' topics."""
        return self._dialect

    # ------------------------------------------------------------ match
    def match(self, fields: Mapping[str, Any], topic: str | None = None) -> list[Any]:
        """Every subscriber with a binding the message satisfies, each once.

        ``fields`` is a mapping of field names to values (any values; keys
        that are not str are ignored).  ``topic``: the message's topic, or
        None for a message without one (it matches no binding that has a
        topic filter).  Answers exactly as testing every binding would, on
        one snapshot taken at the call.  ``TypeError`` if ``fields`` is not
        a mapping; ``ValueError``/``TypeError`` for an invalid topic.

        >>> from cstrie.content import ContentIndex, Eq, OneOf
        >>> idx = ContentIndex("mqtt")
        >>> _ = idx.bind(OneOf("ccy", ["USD", "EUR"]), "fx", topic="trades/#")
        >>> idx.match({"ccy": "EUR"}, "trades/ny"), idx.match({"ccy": "EUR"})
        (['fx'], [])
        """
        return [r.subscriber for r in self._matching(self._view(), fields, topic, True)]

    def match_every(self, fields: Mapping[str, Any], topic: str | None = None) -> list[Any]:
        """The subscriber of every binding the message satisfies, once per
        binding (a subscriber bound several ways that match comes several
        times).  As :meth:`match` without its de-duplication, which hashes
        each matching subscriber: for a caller that de-duplicates on
        something cheaper (the headers exchange, on queue names).

        >>> from cstrie.content import ContentIndex, Eq, Has
        >>> idx = ContentIndex()
        >>> _ = idx.bind(Eq("a", 1), "s"), idx.bind(Has("a"), "s")
        >>> idx.match_every({"a": 1}), idx.match({"a": 1})
        (['s', 's'], ['s'])
        """
        return [r.subscriber for r in self._matching(self._view(), fields, topic, False)]

    def match_bindings(self, fields: Mapping[str, Any], topic: str | None = None) -> list[Binding]:
        """The bindings the message satisfies (a subscriber bound several
        ways that match comes once per binding).  As :meth:`match`."""
        return [
            Binding(r.criteria, r.subscriber, r.topic)
            for r in self._matching(self._view(), fields, topic, False)
        ]

    def _keys(self, fields: Mapping[str, Any]) -> tuple[list[str], bool]:
        """The topics a message looks up (``h``/``e``/``p``/``x``/``r``
        keys), and whether a hit on them decides the exact leaves
        (``_EXACT_LEAVES``) without testing them: ``fields`` is a plain dict
        whose str keys are all exactly ``str`` (a subclass may hash or
        compare otherwise than its text, and a mapping's ``get`` may
        disagree with its ``items``)."""
        if not isinstance(fields, Mapping):
            raise TypeError(f"fields must be a mapping, not {type(fields).__name__}")
        plain = type(fields) is dict
        ks = self._ks
        sep, end, word, chars, L = ks.sep, ks.end, ks.word, ks.chars, self._max_len
        keys: list[str] = []
        add = keys.append
        for f, v in fields.items():
            if type(f) is not str:
                if not isinstance(f, str):
                    continue
                f = str.__str__(f)
                plain = False
            if len(f) > L:
                continue  # no criterion names so long a field
            fw = word(f)
            add("h" + sep + fw)
            tok = value_token(v)
            if tok is None:
                continue
            tag, x = tok
            if tag == "s":
                s: str = x  # type: ignore[assignment]
                if len(s) <= L:
                    add(sep.join(("e", fw, "s" + word(s))))
                head = s[:L]
                add(sep.join(("p", fw, chars(head), end)) if head else sep.join(("p", fw, end)))
                tail = s[-L:][::-1] if s else ""
                add(sep.join(("x", fw, chars(tail), end)) if tail else sep.join(("x", fw, end)))
            elif isinstance(x, (int, float)) and tag != "b":
                if isinstance(x, float) or x.bit_length() <= self._int_bits:
                    add(sep.join(("e", fw, ks.value_word(tok))))
                add(ks.number_key(fw, x))
            elif tag != "y" or len(x) <= L:  # type: ignore[arg-type]
                add(sep.join(("e", fw, ks.value_word(tok))))
        return keys, plain

    def _matching(
        self,
        view: tuple[Snapshot, bool],
        fields: Mapping[str, Any],
        topic: str | None,
        dedupe: bool,
    ) -> list[_Record]:
        """The records of the snapshot that the message satisfies.  Each
        code hit is ``binding << 16 | clauses << 8 | clause``: the distinct
        codes are counted per ``binding << 8 | clauses``
        (native/hotpath/content.c), and a binding is a candidate when its
        count is its clause count.  A candidate counts if it is whole in the
        snapshot: when the snapshot is quiet (no bind or unbind was writing
        while it was taken), every binding in it is whole, and the candidate
        is its record from the live table, or, if it was unbound since, the
        record its marker names in the snapshot; otherwise its marker must
        be in the snapshot.  A candidate whose record is exact is a match
        when the fields are :meth:`_keys`' plain dict; any other is tested."""
        snap, quiet = view
        ks = self._ks
        keys, plain = self._keys(fields)
        dollar = False
        if topic is not None:
            words = self._dialect.split_topic(topic)
            dollar = self._dialect.dollar_rule and bool(words) and words[0].startswith("$")
            keys.append(ks.topic(topic))
        keys.append("a")
        rows = snap.lookup_many(keys)
        always: list[_Record] = rows.pop()  # the "a" list: records
        bids = content_candidates(rows)
        out: list[_Record] = []
        if not bids and not always:
            return out
        marker = "b" + ks.sep
        recs: list[_Record] = []
        unsure: list[str] = []
        if quiet:
            get = self._live().get
            for b in bids:
                rec = get(b)
                if rec is None:
                    unsure.append(marker + str(b))
                else:
                    recs.append(rec)
            recs.extend(always)
        else:
            unsure = [marker + str(b) for b in bids]
            unsure.extend(rec.marker for rec in always)
        if unsure:
            recs.extend(r[0] for r in snap.lookup_many(unsure) if r)
        fast = plain and self._fast
        seen: set[Any] = set()
        for rec in recs:
            if dollar and rec.dollar:
                continue
            if dedupe and rec.subscriber in seen:
                continue
            if (fast and rec.exact) or rec.criteria.test(fields):
                out.append(rec)
                if dedupe:
                    seen.add(rec.subscriber)
        return out

    # ------------------------------------------------------------ whole
    def _records(self) -> Iterator[_Record]:
        return self._records_of(self._snap())

    def bindings(self) -> list[Binding]:
        """Every binding, from one snapshot, in no particular order.  O(bindings)."""
        return [Binding(r.criteria, r.subscriber, r.topic) for r in self._records()]

    def stats(self) -> dict[str, int]:
        """Counts for a dashboard, from one snapshot: ``bindings``,
        ``subscribers`` (distinct), ``with_topic`` (bindings with a topic
        filter), ``always`` (bindings every message verifies: no positive
        criterion to index), ``patterns`` (internal (pattern, code) pairs),
        ``nodes`` and ``engine_bytes`` of the internal trie.  O(bindings +
        patterns)."""
        snap = self._snap()
        recs = list(self._records_of(snap))
        s = snap.stats()
        return {
            "bindings": len(recs),
            "subscribers": len({r.subscriber for r in recs}),
            "with_topic": sum(r.topic is not None for r in recs),
            "always": sum(r.always for r in recs),
            "patterns": s["subscriptions"],
            "nodes": s["nodes"],
            "engine_bytes": s["engine_bytes"],
        }

    def _records_of(self, snap: Snapshot) -> Iterator[_Record]:
        ks = self._ks
        for _, rec in snap.intersecting(ks.key("b", ks.multi)):
            yield rec

    def export(self, dest: Any, *, encode: Any = None) -> int:
        """Write the bindings of one snapshot to ``dest`` (a path or a binary
        file) as JSON Lines; :func:`cstrie.content.load` reads it back.  See
        :mod:`cstrie.content.export`.  Returns the number of bindings."""
        from cstrie.content.export import write

        return write(self, dest, encode)


class ContentSnapshot(_Reader):
    """A read-only, consistent view of a :class:`ContentIndex` at one moment
    (O(1) to take); it keeps answering for that moment while the index
    changes."""

    __slots__ = ("_dialect", "_index", "_int_bits", "_ks", "_max_len", "_quiet", "_s")

    def __init__(self, index: ContentIndex) -> None:
        self._s, self._quiet = index._view()
        self._index = index
        self._ks = index._ks
        self._dialect = index._dialect
        self._max_len = index._max_len
        self._int_bits = index._int_bits

    def _snap(self) -> Snapshot:
        return self._s

    def _view(self) -> tuple[Snapshot, bool]:
        return self._s, self._quiet

    def _live(self) -> dict[int, _Record]:
        return self._index._bids

    def limits(self) -> dict[str, int]:
        """The limits of the index this snapshot was taken from."""
        return self._index.limits()

    def __len__(self) -> int:
        """The number of bindings in the snapshot (O(bindings))."""
        return sum(1 for _ in self._records())

    def __repr__(self) -> str:
        return f"<cstrie.content.ContentSnapshot dialect={self._dialect.name}>"


class ContentIndex(_Reader):
    """Content subscriptions: criteria on message fields, optionally with a
    topic filter, matched through an index (see the module docstring).

    ``dialect``: the rules of the topic filters (``"amqp"``, ``"mqtt"``,
    ``"nats"`` or a :class:`~cstrie.Dialect` with a many-level wildcard and
    no letters or digits in its tokens).  Limits, checked before a binding
    changes anything (``ValueError`` naming the limit):

    - ``max_criteria``: field tests (leaves) per binding (64)
    - ``max_values``: values of one :class:`OneOf` (256)
    - ``max_value_length``: characters of a field name, of a str value and
      of a prefix or suffix, bytes of a bytes value, and hex digits of an
      int (256)
    - ``max_depth``: nesting of the criteria, a leaf being 1 (8; at most 64)
    - ``max_bindings_per_subscriber`` (10,000)
    - ``max_patterns``: internal patterns one binding may add (4,096)
    - ``range_patterns``: patterns per :class:`Range`, at least 16 (32); a
      smaller budget indexes a range more coarsely (more candidates to
      verify), never wrongly

    Subscribers are any hashable objects, told apart by ``==``/``hash``; a
    subscriber bound several ways that match a message is returned once.
    """

    __slots__ = (
        "_bids",
        "_count",
        "_dialect",
        "_done",
        "_int_bits",
        "_ks",
        "_lock",
        "_max_bindings",
        "_max_criteria",
        "_max_depth",
        "_max_len",
        "_max_patterns",
        "_max_values",
        "_next",
        "_range_budget",
        "_started",
        "_subs",
        "_trie",
    )

    def __init__(
        self,
        dialect: str | Dialect = "amqp",
        *,
        max_criteria: int = 64,
        max_values: int = 256,
        max_value_length: int = 256,
        max_depth: int = 8,
        max_bindings_per_subscriber: int = 10_000,
        max_patterns: int = 4096,
        range_patterns: int = 32,
    ) -> None:
        d = resolve_dialect(dialect)
        limits = {
            "max_criteria": max_criteria,
            "max_values": max_values,
            "max_value_length": max_value_length,
            "max_depth": max_depth,
            "max_bindings_per_subscriber": max_bindings_per_subscriber,
            "max_patterns": max_patterns,
            "range_patterns": range_patterns,
        }
        for name, v in limits.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, not {type(v).__name__}")
            if v < 1:
                raise ValueError(f"{name} must be at least 1, not {v}")
        if max_depth > MAX_DEPTH:
            raise ValueError(f"max_depth must be at most {MAX_DEPTH}, not {max_depth}")
        if range_patterns < 16:
            raise ValueError(f"range_patterns must be at least 16, not {range_patterns}")
        inner = dataclasses.replace(
            d,
            name=f"content-{d.name}",
            dollar_rule=False,
            max_levels=None,
            max_bytes=None,
            share_prefix=None,
        )
        self._ks = KeySpace(inner)
        self._dialect = d
        self._trie = Trie(inner)
        self._max_criteria = max_criteria
        self._max_values = max_values
        self._max_len = max_value_length
        self._int_bits = 4 * max_value_length
        self._max_depth = max_depth
        self._max_bindings = max_bindings_per_subscriber
        self._max_patterns = max_patterns
        self._range_budget = range_patterns
        self._subs: dict[Hashable, _Subscriber] = {}
        self._lock = threading.Lock()  # guards what follows
        self._next = 0
        self._count = 0
        # The trie's writers (bind's insert, unbind's removal) started and
        # done so far, and the whole bindings by number (numbers are never
        # reused): what lets a quiet snapshot's candidates skip their markers.
        self._started = 0
        self._done = 0
        self._bids: dict[int, _Record] = {}

    def _snap(self) -> Snapshot:
        return self._trie.snapshot()

    def _view(self) -> tuple[Snapshot, bool]:
        """The snapshot, quiet if every writer that had started when it was
        taken (``_started``, read after it) had already finished before it
        (``_done``, read before it): then no writer's patterns were half in
        (both counters change under ``_lock``; the snapshot is one atomic
        step of the engine between the two reads)."""
        done = self._done
        snap = self._trie.snapshot()
        return snap, self._started == done

    def _live(self) -> dict[int, _Record]:
        return self._bids

    def limits(self) -> dict[str, int]:
        """The limits this index was made with (its constructor's keywords)."""
        return {
            "max_criteria": self._max_criteria,
            "max_values": self._max_values,
            "max_value_length": self._max_len,
            "max_depth": self._max_depth,
            "max_bindings_per_subscriber": self._max_bindings,
            "max_patterns": self._max_patterns,
            "range_patterns": self._range_budget,
        }

    @classmethod
    def load(
        cls,
        src: Any,
        decode: Any = None,
        **limits: int,
    ) -> ContentIndex:
        """A new index with the bindings of a file that :meth:`export` wrote
        (same dialect; the file's limits unless given here as keywords).
        ``decode`` maps each stored subscriber back (required for files
        written with ``encode=``).  :class:`~cstrie.export.FormatError` for
        anything wrong, naming the line (a binding the limits refuse too);
        nothing is built then.  See :mod:`cstrie.content.export`."""
        from cstrie.content.export import read

        dialect, file_limits, rows = read(src, decode)
        try:
            idx = cls(dialect, **{**file_limits, **limits})
        except (TypeError, ValueError) as exc:
            raise FormatError(f"invalid limits: {exc}") from None
        for n, criteria, sub, topic in rows:
            try:
                idx.bind(criteria, sub, topic)
            except (TypeError, ValueError) as exc:
                raise FormatError(f"line {n}: {exc}") from None
        return idx

    def snapshot(self) -> ContentSnapshot:
        """A consistent read-only view, O(1)."""
        return ContentSnapshot(self)

    def __len__(self) -> int:
        """The number of bindings (those whose ``bind`` has returned True and
        whose ``unbind`` has not begun, give or take the calls in flight)."""
        return self._count

    def __repr__(self) -> str:
        return f"<cstrie.content.ContentIndex dialect={self._dialect.name} bindings={len(self)}>"

    # ----------------------------------------------------------- planning
    def _topic(self, topic: str | None) -> tuple[str | None, bool]:
        """(topic filter, starts with a wildcard) after the dialect's check."""
        if topic is None:
            return None, False
        words = self._dialect.split_pattern(topic)
        d = self._dialect
        return topic, bool(words) and words[0] in (d.single, d.multi)

    def _check(self, criteria: Criterion) -> None:
        """The index's limits (the criteria's own rules were checked when
        they were built); ValueError naming the first one broken."""
        if not isinstance(criteria, Criterion):
            raise TypeError(f"criteria must be a Criterion, not {type(criteria).__name__}")
        if criteria.depth > self._max_depth:
            raise ValueError(
                f"criteria nested {criteria.depth} deep; this index allows {self._max_depth}"
            )
        if criteria.leaves > self._max_criteria:
            raise ValueError(
                f"{criteria.leaves} field tests in one binding; this index allows "
                f"{self._max_criteria}"
            )
        L = self._max_len
        stack = [criteria]
        while stack:
            c = stack.pop()
            if isinstance(c, (AllOf, AnyOf)):
                stack.extend(c.criteria)
                continue
            if isinstance(c, Not):
                stack.append(c.criterion)
                continue
            field = c.field  # type: ignore[attr-defined]
            if len(field) > L:
                raise ValueError(f"field name of {len(field)} characters; this index allows {L}")
            if isinstance(c, OneOf):
                if len(c.values) > self._max_values:
                    raise ValueError(
                        f"OneOf with {len(c.values)} values; this index allows {self._max_values}"
                    )
                values: tuple[Any, ...] = c.values
            elif isinstance(c, Eq):
                values = (c.value,)
            elif isinstance(c, (Prefix, Suffix)):
                values = (c.text,)
            else:
                values = ()
            for v in values:
                if isinstance(v, (str, bytes)) and len(v) > L:
                    raise ValueError(
                        f"a value of length {len(v)} in {field!r}; this index allows {L}"
                    )
                if type(v) is int and v.bit_length() > self._int_bits:
                    raise ValueError(f"an int of {v.bit_length()} bits in {field!r}; too large")

    def _clauses(self, c: Criterion) -> tuple[list[list[Criterion]] | None, bool]:
        """Necessary conditions of ``c``: clauses (lists of positive field
        tests), each of which must have a test hit for ``c`` to hold; [] if
        none is known; None if ``c`` never holds.  And whether they are
        also sufficient (*exact*): ``c`` holds iff every clause has a hit,
        when its leaves are ``_EXACT_LEAVES`` and no clause was dropped.
        Depth-bounded recursion."""
        if isinstance(c, Not):
            return [], False
        if isinstance(c, AllOf):
            out: list[list[Criterion]] = []
            exact = True
            for sub in c.criteria:
                got, ex = self._clauses(sub)
                if got is None:
                    return None, False
                out.extend(got)
                exact = exact and ex
            return out, exact
        if isinstance(c, AnyOf):
            union: list[Criterion] = []
            live = False
            exact = True
            for sub in c.criteria:
                got, ex = self._clauses(sub)
                if got is None:
                    continue  # a part that never holds adds nothing to an OR
                if not got:
                    return [], ex  # a part that always holds (exact) or is unknown
                live = True
                # One clause stands for the part exactly; of several, the
                # shortest is only necessary.
                exact = exact and ex and len(got) == 1
                union.extend(min(got, key=len))  # type: ignore[arg-type]
            return ([union], exact) if live else (None, False)
        return [[c]], isinstance(c, _EXACT_LEAVES)

    def _patterns(self, c: Criterion) -> list[str]:
        ks = self._ks
        fw = ks.word(c.field)  # type: ignore[attr-defined]
        if isinstance(c, Has):
            return [ks.key("h", fw)]
        if isinstance(c, Eq):
            return [ks.key("e", fw, ks.value_word(c.token))]
        if isinstance(c, OneOf):
            return [ks.key("e", fw, ks.value_word(value_token(v))) for v in c.values]  # type: ignore[arg-type]
        if isinstance(c, (Prefix, Suffix)):
            ns, text = ("p", c.text) if isinstance(c, Prefix) else ("x", c.text[::-1])
            if not text:
                return [ks.key(ns, fw, ks.multi)]
            return [ks.key(ns, fw, ks.chars(text), ks.multi)]
        assert isinstance(c, Range)
        return ks.range_patterns(fw, c.low, c.high, self._range_budget)

    def _plan(self, criteria: Criterion, topic: str | None) -> _Plan:
        self._check(criteria)
        topic, dollar = self._topic(topic)
        clauses, exact = self._clauses(criteria)
        pats: list[list[str]] = []
        if topic is not None:
            pats.append([self._ks.topic(topic)])
        if clauses is not None:
            room = _MAX_CLAUSES - len(pats)
            # Any subset of necessary clauses is necessary: keep the cheapest.
            sized = [[p for leaf in cl for p in self._patterns(leaf)] for cl in clauses]
            sized.sort(key=len)
            exact = exact and len(sized) <= room
            pats.extend(list(dict.fromkeys(ps)) for ps in sized[:room])
        total = sum(map(len, pats))
        if total > self._max_patterns:
            raise ValueError(
                f"the binding needs {total} index patterns; this index allows {self._max_patterns}"
            )
        always = clauses is not None and not pats
        return _Plan((criteria.key, topic), topic, dollar, pats, always, exact)

    # ------------------------------------------------------------ updates
    def bind(self, criteria: Criterion, subscriber: Hashable, topic: str | None = None) -> bool:
        """Add the binding (criteria, subscriber, topic); True if it is new.

        ``topic``: a topic filter in the index's dialect that the message's
        topic must match as well, or None.  Every check (criteria types,
        limits, the topic filter, the subscriber's hash) is made before
        anything changes: ``TypeError``/``ValueError`` leave the index as it
        was.  When it returns True, every later ``match`` sees the binding.
        O(patterns of the binding).

        >>> from cstrie.content import ContentIndex, Eq
        >>> idx = ContentIndex()
        >>> idx.bind(Eq("a", 1), "s"), idx.bind(Eq("a", 1), "s"), len(idx)
        (True, False, 1)
        """
        plan = self._plan(criteria, topic)
        hash(subscriber)
        full = 0  # the subscriber's bindings when it has too many (named after the lock)
        while True:
            st = self._subs.get(subscriber)
            if st is None:
                st = self._subs.setdefault(subscriber, _Subscriber())
            with st.cond:
                if st.dead:
                    st.cond.wait_for(lambda: st.popped)  # noqa: B023
                    continue
                rec = st.slots.get(plan.key)
                if rec is None:
                    if len(st.slots) >= self._max_bindings:
                        full = len(st.slots)
                        break
                    rec = self._record(plan, criteria, subscriber)
                    st.slots[plan.key] = rec
                    break
                if rec.state == _LIVE:
                    return False
                st.cond.wait()  # being built or removed: look again when it is done
        if rec is None:  # too many: repr() is the subscriber's code, never under its lock
            raise ValueError(
                f"subscriber {subscriber!r} has {full} bindings; this "
                f"index allows {self._max_bindings}"[:300]
            )
        try:
            self._insert(rec)
        except BaseException:
            self._release(subscriber, st, plan.key)
            raise
        with st.cond:
            rec.state = _LIVE
            st.cond.notify_all()
        return True

    def unbind(self, criteria: Criterion, subscriber: Hashable, topic: str | None = None) -> bool:
        """Remove the binding (criteria, subscriber, topic); True if it was
        there.  Only that binding: the subscriber's others stay.  When it
        returns, no later ``match`` sees it.  O(patterns of the binding)."""
        if not isinstance(criteria, Criterion):
            raise TypeError(f"criteria must be a Criterion, not {type(criteria).__name__}")
        key = (criteria.key, self._topic(topic)[0])
        hash(subscriber)
        st = self._subs.get(subscriber)
        if st is None:
            return False
        with st.cond:
            while True:
                rec = st.slots.get(key)
                if rec is None:
                    return False
                if rec.state == _LIVE:
                    rec.state = _REMOVING
                    break
                if rec.state == _REMOVING:  # another unbind has it: wait for its end
                    st.cond.wait_for(lambda: st.slots.get(key) is not rec)  # noqa: B023
                    return False
                st.cond.wait()
        self._remove(rec)
        self._release(subscriber, st, key)
        return True

    def _record(self, plan: _Plan, criteria: Criterion, subscriber: Any) -> _Record:
        with self._lock:
            self._next += 1
            bid = self._next
        patterns = [
            (p, (bid << 16) | (len(plan.clauses) << 8) | i)
            for i, ps in enumerate(plan.clauses)
            for p in ps
        ]
        marker = self._ks.key("b", str(bid))
        return _Record(
            bid,
            criteria,
            subscriber,
            plan.topic,
            plan.dollar,
            patterns,
            plan.always,
            marker,
            plan.exact,
        )

    def _writing(self, step: int) -> None:
        """Count a writer of the trie starting (``step`` 0) or done (1)."""
        with self._lock:
            if step == 0:
                self._started += 1
            else:
                self._done += 1

    def _insert(self, rec: _Record) -> None:
        t = self._trie
        pats = [p for p, _ in rec.patterns]
        codes: list[Any] = [c for _, c in rec.patterns]
        self._writing(0)
        try:
            if pats:
                t.subscribe_many(zip(pats, codes, strict=True))
            if rec.always:
                t.subscribe("a", rec)
            t.subscribe(rec.marker, rec)  # visible from here on
            with self._lock:
                self._count += 1
                self._bids[rec.bid] = rec
        except BaseException:
            self._remove(rec)
            raise
        finally:
            self._writing(1)

    def _remove(self, rec: _Record) -> None:
        t = self._trie
        self._writing(0)
        try:
            with self._lock:
                self._bids.pop(rec.bid, None)
            if t.unsubscribe(rec.marker, rec):  # invisible from here on
                with self._lock:
                    self._count -= 1
            if rec.always:
                t.unsubscribe("a", rec)
            for p, code in rec.patterns:
                t.unsubscribe(p, code)
        finally:
            self._writing(1)

    def _release(self, subscriber: Any, st: _Subscriber, key: tuple[str, str | None]) -> None:
        """Forget ``st``'s binding ``key``; drop ``st`` when it was the last."""
        with st.cond:
            del st.slots[key]
            dead = st.dead = not st.slots
            st.cond.notify_all()
        if not dead:
            return
        try:
            if self._subs.get(subscriber) is st:
                del self._subs[subscriber]
        finally:
            with st.cond:
                st.popped = True
                st.cond.notify_all()
