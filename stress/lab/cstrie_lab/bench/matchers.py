"""Matchers the suite can put side by side, behind one small interface.

A :class:`Matcher` is built from (filter, value) pairs and answers "which values
match this topic?" for a whole list of topics through :meth:`Matcher.batch`,
which returns a zero-argument callable doing one pass over the topics: that is
what the timing helpers time.  Each kind registers in :data:`MATCHERS`; a later
scenario adds its own matchers (regex, other libraries) by adding entries here.

Built in:

* ``cstrie``          - :meth:`cstrie.Trie.lookup`, one call per topic (the API);
* ``cstrie-many``     - :meth:`cstrie.Trie.lookup_many`, one call for the batch;
* ``cstrie-engine``   - the bare cffi call into the engine on pre-encoded bytes,
                        without the Python wrapper (a *diagnostic*: it tells how
                        much of ``cstrie``'s time is the engine itself);
* ``cstrie-engine-empty`` / ``cstrie-parse`` - diagnostics: the same engine call on
                        an empty trie (its fixed cost), and ``cst_validate`` alone
                        (splitting and hashing the topic); ``cstrie-nullcall``:
                        a trivial engine call (the cost of a cffi call itself);
* ``pytrie``          - :class:`cstrie_lab.pytrie.PyTrie` (pure Python, one lock);
* ``dict-trie``       - :class:`cstrie_lab.classic.DictTrie`, the dict-per-level trie
                        a user writes by hand (no lock, no validation; MQTT, AMQP);
* ``paho``            - ``paho.mqtt.matcher.MQTTMatcher`` (pure Python, MQTT only,
                        one value per filter);
* ``paho-sets``       - the same with a ``set`` of subscribers per filter and the
                        union of the sets ``iter_match`` yields (each subscriber
                        once): for workloads with several subscribers per filter.

The classic matchers of :mod:`cstrie_lab.classic` (the suite's) register through
one generic adapter, :class:`ClassicAdapter`: ``naive``, ``inverted-bitmap``
(needs the topic space up front: ``make(..., topics=...)``), ``level-bitmap``,
``locked-trie``, ``regex``, ``lazy-dfa`` (the DFA built lazily and dropped on
every update) and ``paho-classic`` (paho's ``MQTTMatcher`` with a set
of subscribers per filter and unsubscribe, MQTT only).  Every matcher that can
also remove pairs implements :meth:`Matcher.remove`; :attr:`Matcher.thread_safe`
says whether threads may share it without a lock of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from cstrie_lab.bench.base import MissingDependency

__all__ = ["CLASSIC_KEYS", "MATCHERS", "ClassicAdapter", "Matcher", "MatcherKind", "make"]


class Matcher:
    """Base class: subclasses fill :meth:`add` and :meth:`batch`."""

    name = "?"
    #: threads may share it without a lock of their own
    thread_safe = False

    def add(self, pattern: str, value: Any) -> None:
        raise NotImplementedError

    def remove(self, pattern: str, value: Any) -> bool:
        """Remove one pair (for matchers that can; the suite's write workloads)."""
        raise NotImplementedError(f"{self.name} cannot remove pairs")

    def ops(self) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[str], Any]]:
        """The underlying object's own ``(subscribe, unsubscribe, lookup)`` bound
        methods, so that timed loops call them without this adapter in between."""
        return self.add, self.remove, self.lookup

    def add_all(self, pairs: Iterable[tuple[str, Any]]) -> None:
        for pattern, value in pairs:
            self.add(pattern, value)

    def lookup(self, topic: str) -> list[Any]:
        """The values matching one topic (for correctness checks, not timing)."""
        raise NotImplementedError

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        """A callable that looks up every topic once (what gets timed)."""
        lookup = self.lookup

        def run() -> None:
            for t in topics:
                lookup(t)

        return run


class Subscribing(Matcher):
    """A matcher around an object with the ``subscribe`` / ``unsubscribe`` /
    ``lookup`` interface (``self.trie``): cstrie, PyTrie, :mod:`cstrie_lab.classic`.
    Timed loops call that object's own bound methods."""

    trie: Any

    def add(self, pattern: str, value: Any) -> None:
        self.trie.subscribe(pattern, value)

    def remove(self, pattern: str, value: Any) -> bool:
        return bool(self.trie.unsubscribe(pattern, value))

    def ops(self) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[str], Any]]:
        return self.trie.subscribe, self.trie.unsubscribe, self.trie.lookup

    def lookup(self, topic: str) -> list[Any]:
        return list(self.trie.lookup(topic))

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        lookup = self.trie.lookup

        def run() -> None:
            for t in topics:
                lookup(t)

        return run


class CstrieMatcher(Subscribing):
    name = "cstrie"
    thread_safe = True

    def __init__(self, dialect: str) -> None:
        from cstrie.trie import Trie

        self.trie = Trie(dialect)


class CstrieCacheMatcher(CstrieMatcher):
    """cstrie with its result cache on (``Trie.set_cache``)."""

    name = "cstrie-cache"
    #: the budget the suite gives the cache: 1 MiB, room for about 5,000
    #: answers of a few subscribers (the suite's workloads have 1,000 topics)
    BUDGET = 1 << 20

    def __init__(self, dialect: str) -> None:
        super().__init__(dialect)
        self.trie.set_cache(self.BUDGET)


class CstrieManyMatcher(CstrieMatcher):
    name = "cstrie-many"

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        many = self.trie.lookup_many
        listed = list(topics)
        return lambda: many(listed)


class CstrieEngineMatcher(CstrieMatcher):
    """The engine call alone, through cffi: encode once up front, no id ->
    object mapping (a diagnostic: Trie.lookup goes through the fast path, not
    cffi)."""

    name = "cstrie-engine"

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        from cstrie import _binding as nb

        cap = 4096
        fn, h, ids = nb.lib.cst_lookup, self.trie._h, nb.ffi.new("uint64_t[]", cap)
        encoded = [t.encode() for t in topics]

        def run() -> None:
            for d in encoded:
                fn(h, d, len(d), ids, cap)

        return run


class CstrieEmptyMatcher(CstrieEngineMatcher):
    """Diagnostic: the engine call on an *empty* trie: the fixed cost of one call
    (cffi, topic parsing, epoch enter/exit) without any walk.  Ignores ``add``."""

    name = "cstrie-engine-empty"

    def add(self, pattern: str, value: Any) -> None:
        pass

    def lookup(self, topic: str) -> list[Any]:
        raise NotImplementedError("a diagnostic, not a matcher")


class CstrieParseMatcher(CstrieEmptyMatcher):
    """Diagnostic: ``cst_validate`` only: one cffi call that splits, checks and
    hashes the topic's words, as every lookup does first."""

    name = "cstrie-parse"

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        from cstrie import _binding as nb

        fn, h = nb.lib.cst_validate, self.trie._h
        encoded = [t.encode() for t in topics]

        def run() -> None:
            for d in encoded:
                fn(h, d, len(d), 0)

        return run


class CstrieNullCallMatcher(CstrieEmptyMatcher):
    """Diagnostic: a trivial engine call (``cst_is_readonly``) per topic: what a
    cffi call costs by itself."""

    name = "cstrie-nullcall"

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        from cstrie import _binding as nb

        fn, h = nb.lib.cst_is_readonly, self.trie._h
        encoded = [t.encode() for t in topics]

        def run() -> None:
            for _ in encoded:
                fn(h)

        return run


class PyTrieMatcher(Subscribing):
    name = "pytrie"
    thread_safe = True  # one lock inside

    def __init__(self, dialect: str) -> None:
        from cstrie_lab.pytrie import PyTrie

        self.trie = PyTrie(dialect)


class DictTrieMatcher(Subscribing):
    """The hand-written dict-per-level trie (:class:`cstrie_lab.classic.DictTrie`)."""

    name = "dict-trie"

    def __init__(self, dialect: str) -> None:
        from cstrie_lab.classic.dict_trie import DictTrie

        self.trie = DictTrie(dialect)


class PahoMatcher(Matcher):
    """paho-mqtt's trie: one value per filter, so values are filter indexes."""

    name = "paho"

    def __init__(self, dialect: str) -> None:
        if dialect != "mqtt":
            raise ValueError("paho's MQTTMatcher only speaks MQTT")
        try:
            from paho.mqtt.matcher import MQTTMatcher
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MissingDependency(
                "paho-mqtt is not installed (pip install paho-mqtt, or cstrie-lab[bench])"
            ) from exc
        factory: Any = MQTTMatcher  # an untyped library
        self.m: Any = factory()

    def add(self, pattern: str, value: Any) -> None:
        self.m[pattern] = value

    def lookup(self, topic: str) -> list[Any]:
        return list(self.m.iter_match(topic))

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        it = self.m.iter_match

        def run() -> None:
            for t in topics:
                list(it(t))

        return run


class PahoSetsMatcher(PahoMatcher):
    """paho-mqtt's trie holding a ``set`` of subscribers per filter; a lookup is
    the union of the sets ``iter_match`` yields (each subscriber once), as a broker
    on paho would answer.  No validation (unlike ``paho-classic``)."""

    name = "paho-sets"

    def add(self, pattern: str, value: Any) -> None:
        try:
            self.m[pattern].add(value)
        except KeyError:
            self.m[pattern] = {value}

    def lookup(self, topic: str) -> list[Any]:
        return list(set().union(*self.m.iter_match(topic)))

    def batch(self, topics: Sequence[str]) -> Callable[[], object]:
        it = self.m.iter_match

        def run() -> None:
            for t in topics:
                list(set().union(*it(t)))

        return run


class ClassicAdapter(Subscribing):
    """Any matcher of :mod:`cstrie_lab.classic`, by its key in ``CLASSIC``.

    ``topics`` is the topic space, given to the matchers that need it up front
    (the full inverted bitmap) and ignored by the others.  Raises
    :class:`MissingDependency` when :mod:`cstrie_lab.classic` (or, for paho,
    paho-mqtt) is not installed, ``ValueError`` for a dialect the matcher does
    not speak.
    """

    def __init__(self, key: str, dialect: str, topics: Sequence[str] | None = None) -> None:
        try:
            from cstrie_lab.classic import make_classic
        except ImportError as exc:  # pragma: no cover - depends on the checkout
            raise MissingDependency(f"cstrie_lab.classic is not available: {exc}") from exc
        kwargs: dict[str, Any] = {}
        if key in NEEDS_TOPICS:
            if topics is None:
                raise ValueError(f"the {key} matcher needs the topic space up front")
            kwargs["topics"] = list(topics)
        self.trie = make_classic(key, dialect=dialect, **kwargs)
        self.key = key
        self.name = key
        self.description = str(getattr(self.trie, "description", key))
        self.thread_safe = bool(getattr(self.trie, "thread_safe", False))


#: the keys of :data:`cstrie_lab.classic.CLASSIC`, in the suite's order
CLASSIC_KEYS = (
    "inverted-bitmap",
    "level-bitmap",
    "locked-trie",
    "naive",
    "regex",
    "lazy-dfa",
    "paho",
)
#: classic matchers that must be told the topic space up front
NEEDS_TOPICS = frozenset({"inverted-bitmap"})
_CLASSIC_DESCRIPTIONS = {
    "naive": "cstrie_lab.classic naive: every pattern tested on every lookup",
    "inverted-bitmap": "cstrie_lab.classic inverted bitmap: one bitmap per topic of a known space",
    "level-bitmap": "cstrie_lab.classic optimised inverted bitmap: per-level bitmaps ANDed",
    "locked-trie": "cstrie_lab.classic trie behind one lock (the classic broker structure)",
    "regex": "cstrie_lab.classic regex per binding (as kombu's in-memory topic exchange)",
    "lazy-dfa": "cstrie_lab.classic lazy DFA: states made per word on first need, "
    "dropped on every update (RabbitMQ's experiment)",
    "paho": "cstrie_lab.classic paho: paho-mqtt MQTTMatcher with subscriber sets (MQTT only)",
}


@dataclass(frozen=True)
class MatcherKind:
    name: str
    factory: Callable[..., Matcher]
    description: str
    diagnostic: bool = False
    #: the factory takes ``topics=`` (the topic space known up front)
    needs_topics: bool = False


MATCHERS: dict[str, MatcherKind] = {
    k.name: k
    for k in (
        MatcherKind("paho", PahoMatcher, "paho-mqtt MQTTMatcher, list(iter_match(topic))"),
        MatcherKind(
            "paho-sets",
            PahoSetsMatcher,
            "paho-mqtt MQTTMatcher with a set of subscribers per filter, union of iter_match",
        ),
        MatcherKind("pytrie", PyTrieMatcher, "cstrie_lab.pytrie.PyTrie.lookup (pure Python)"),
        MatcherKind(
            "dict-trie",
            DictTrieMatcher,
            "cstrie_lab.classic.DictTrie.lookup: the dict-per-level trie a user writes (no lock)",
        ),
        MatcherKind("cstrie", CstrieMatcher, "cstrie.Trie.lookup"),
        MatcherKind(
            "cstrie-cache",
            CstrieCacheMatcher,
            "cstrie.Trie.lookup with its result cache on (Trie.set_cache, 1 MiB)",
        ),
        MatcherKind("cstrie-many", CstrieManyMatcher, "cstrie.Trie.lookup_many (one call)"),
        MatcherKind(
            "cstrie-engine",
            CstrieEngineMatcher,
            "bare engine call on pre-encoded bytes (diagnostic, not an API)",
            diagnostic=True,
        ),
        MatcherKind(
            "cstrie-engine-empty",
            CstrieEmptyMatcher,
            "bare engine call on an empty trie: fixed cost per call (diagnostic)",
            diagnostic=True,
        ),
        MatcherKind(
            "cstrie-nullcall",
            CstrieNullCallMatcher,
            "cst_is_readonly: a trivial cffi call (diagnostic)",
            diagnostic=True,
        ),
        MatcherKind(
            "cstrie-parse",
            CstrieParseMatcher,
            "cst_validate: parse + hash the topic only (diagnostic)",
            diagnostic=True,
        ),
    )
}
for _key in CLASSIC_KEYS:
    # "paho" is taken by the add-only adapter above: the classic one is "paho-classic"
    _name = "paho-classic" if _key == "paho" else _key
    MATCHERS[_name] = MatcherKind(
        _name,
        partial(ClassicAdapter, _key),
        _CLASSIC_DESCRIPTIONS[_key],
        needs_topics=_key in NEEDS_TOPICS,
    )


def make(name: str, dialect: str, *, topics: Sequence[str] | None = None) -> Matcher:
    """A new, empty matcher of the registered kind ``name``.

    ``topics`` (the topic space) goes to the kinds that need it up front and is
    ignored by the others.
    """
    kind = MATCHERS[name]
    if kind.needs_topics:
        return kind.factory(dialect, topics=topics)
    return kind.factory(dialect)
