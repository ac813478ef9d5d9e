"""Topic dialects: how a topic string splits into words and what the wildcards mean.

A :class:`Dialect` is a plain, immutable value object.  The three built-in dialects
are :data:`AMQP` (the default), :data:`MQTT` and :data:`NATS`; a custom dialect is made
by constructing :class:`Dialect` with other tokens or rules.

Rules (see "Dialects" in ``docs/api.md`` for the full table and where each
dialect deliberately differs from its reference implementation):

========  =========  ==========  ==============================================
dialect   separator  one level   many levels
========  =========  ==========  ==============================================
amqp      ``.``      ``*``       ``#`` zero or more words, anywhere in a pattern
                                 (at most 256 words)
mqtt      ``/``      ``+``       ``#`` last level only, also matches the parent
nats      ``.``      ``*``       ``>`` one or more tokens, last only (no
                                 whitespace)
========  =========  ==========  ==============================================

The rules on topics and patterns are checked in one place, the engine
(``native/words.c``); :meth:`Dialect.split_topic` and
:meth:`Dialect.split_pattern` ask it too, and the binding layer
(:func:`cstrie._binding.invalid`) turns the fault it reports into the
``ValueError`` that names it.

Examples::

    >>> AMQP.split_pattern("a.*.#")
    ['a', '*', '#']
    >>> AMQP.split_topic("")
    []
    >>> MQTT.split_pattern("sport/#")
    ['sport', '#']
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrie._binding import check_text, shown

__all__ = ["AMQP", "MQTT", "NATS", "Dialect", "resolve_dialect", "shown"]


def _check_text(d: Dialect, text: object, what: str) -> int:
    """The engine's check of a topic or pattern (``cstrie._binding.check_text``,
    which puts itself here when it is imported: it imports this module)."""
    from cstrie import _binding

    return _binding.check_text(d, text, what)


@dataclass(frozen=True)
class Dialect:
    """Matching rules for one family of topic strings.

    Attributes:
        name: a label used in exports and ``repr``.
        separator: the string between words (non-empty).
        single: the word that matches exactly one word, or ``None``.
        multi: the word that matches many words, or ``None``.
        multi_min: how many words ``multi`` must consume at least (0 or 1).
        multi_last_only: ``multi`` may only be the last word of a pattern.
        strict_wildcards: the wildcard tokens must fill their whole word; a word
            such as ``a+`` is an error instead of a literal (MQTT).
        topic_wildcards: topics may contain words equal to a wildcard token (as
            literals).  When false such a topic is an error; with
            ``strict_wildcards`` any wildcard character in a topic is an error.
        empty_topic: the empty string is a valid topic/pattern of zero words.
        empty_words: words may be empty (``a..b`` has an empty middle word).
        dollar_rule: a pattern whose first word is a wildcard never matches a
            topic whose first word starts with ``$`` (MQTT).
        max_bytes: the longest valid topic/pattern in UTF-8 bytes, or ``None``.
        forbid_nul: U+0000 is not allowed in topics or patterns.
        forbidden: the characters that topics and patterns may not contain
            anywhere (ASCII only, so that the engine checks them as bytes; none
            of them may occur in the separator or a wildcard token).  Stored
            sorted and without repeats, so equal sets make equal dialects.
            NATS forbids the whitespace that nats-server's ``IsValidSubject``
            rejects: space, ``\\t``, ``\\n``, ``\\r`` and ``\\f``.
        max_levels: the most words a topic or pattern may have, or ``None`` for
            no limit.  A many-level wildcard that may appear anywhere (AMQP
            ``#``) makes a lookup explore (node, word index) states, O(m * n)
            for a pattern of m words and a topic of n words; a dialect with such
            a wildcard and untrusted input should set a limit.  ``AMQP`` has
            256, the most words a 255-byte AMQP 0-9-1 key can have.
    """

    name: str = "custom"
    separator: str = "."
    single: str | None = "*"
    multi: str | None = "#"
    multi_min: int = 0
    multi_last_only: bool = False
    strict_wildcards: bool = False
    topic_wildcards: bool = True
    empty_topic: bool = True
    empty_words: bool = True
    dollar_rule: bool = False
    max_bytes: int | None = None
    forbid_nul: bool = False
    forbidden: str = ""
    max_levels: int | None = None
    share_prefix: str | None = None

    def __post_init__(self) -> None:
        for field in ("name", "separator"):
            if not isinstance(getattr(self, field), str):
                raise TypeError(f"Dialect.{field} must be a str")
        if not self.separator:
            raise ValueError("Dialect.separator must not be empty")
        for field in ("single", "multi"):
            token = getattr(self, field)
            if token is None:
                continue
            if not isinstance(token, str):
                raise TypeError(f"Dialect.{field} must be a str or None")
            if not token:
                raise ValueError(f"Dialect.{field} must not be empty")
            if self.separator in token:
                raise ValueError(f"Dialect.{field} {token!r} contains the separator")
        if self.single is not None and self.single == self.multi:
            raise ValueError("Dialect.single and Dialect.multi must differ")
        if self.multi_min not in (0, 1):
            raise ValueError("Dialect.multi_min must be 0 or 1")
        if self.max_bytes is not None and (
            not isinstance(self.max_bytes, int) or self.max_bytes < 1
        ):
            raise ValueError("Dialect.max_bytes must be a positive int or None")
        if self.max_levels is not None and (
            isinstance(self.max_levels, bool)
            or not isinstance(self.max_levels, int)
            or self.max_levels < 1
        ):
            raise ValueError("Dialect.max_levels must be a positive int or None")
        if self.share_prefix is not None and (
            not isinstance(self.share_prefix, str)
            or not self.share_prefix
            or self.separator in self.share_prefix
        ):
            raise ValueError("Dialect.share_prefix must be a non-empty str without the separator")
        self._check_forbidden()

    def _check_forbidden(self) -> None:
        if not isinstance(self.forbidden, str):
            raise TypeError("Dialect.forbidden must be a str")
        for ch in self.forbidden:
            if ord(ch) > 0x7F:
                raise ValueError(
                    f"Dialect.forbidden may only hold ASCII characters, not {ch!r} "
                    f"(U+{ord(ch):04X})"
                )
        for field in ("separator", "single", "multi"):
            token = getattr(self, field)
            if token is not None and any(ch in token for ch in self.forbidden):
                raise ValueError(
                    f"Dialect.forbidden holds a character of Dialect.{field} {token!r}"
                )
        # One spelling per set: equal sets make equal (and equally hashed) dialects.
        object.__setattr__(self, "forbidden", "".join(sorted(set(self.forbidden))))

    def __getstate__(self) -> dict[str, object]:
        # The fields only: the engine handle that checks this dialect's text
        # (cached on first use, see cstrie._binding) is remade where it is needed.
        return {k: v for k, v in self.__dict__.items() if k != "_checker"}

    # ------------------------------------------------------------------ checks
    def split_pattern(self, pattern: object) -> list[str]:
        """Validate ``pattern`` and return its words.

        Raises ``TypeError`` for a non-str and ``ValueError`` naming the problem for
        a pattern that is invalid in this dialect (checked by the engine, as in
        every other call).  O(len(pattern)).
        """
        check_text(self, pattern, "pattern")
        return str.split(pattern, self.separator) if pattern else []  # type: ignore[arg-type]

    def split_topic(self, topic: object) -> list[str]:
        """Validate ``topic`` (a concrete message topic) and return its words.

        Raises ``TypeError`` for a non-str and ``ValueError`` naming the problem.
        """
        check_text(self, topic, "topic")
        return str.split(topic, self.separator) if topic else []  # type: ignore[arg-type]

    def join(self, words: list[str]) -> str:
        """The inverse of splitting: ``separator.join(words)``."""
        return self.separator.join(words)

    # --------------------------------------------------------------- relations
    def is_subset(self, a: str, b: str) -> bool:
        """True if every topic that pattern ``a`` matches, pattern ``b`` matches too
        (an ACL check): ``MQTT.is_subset("sensors/+/temp", "sensors/#")`` is True.
        See :func:`cstrie.relations.is_subset`; O(m * n) for m and n words."""
        from cstrie._relations import is_subset

        return is_subset(self, a, b)

    def intersects(self, a: str, b: str) -> bool:
        """True if some valid topic matches both patterns ``a`` and ``b``:
        ``MQTT.intersects("+/x", "$a/x")`` is False (the ``$`` rule).  See
        :func:`cstrie.relations.intersects`; O(m * n) for m and n words."""
        from cstrie._relations import intersects

        return intersects(self, a, b)


AMQP = Dialect(name="amqp", separator=".", single="*", multi="#", max_levels=256)
"""AMQP topic exchange rules: ``*`` one word, ``#`` zero or more words anywhere.

At most 256 words (``max_levels``): RabbitMQ's keys are AMQP 0-9-1 short strings
of at most 255 bytes, which hold at most 256 words (255 separators; 128 words when
none is empty), so every key RabbitMQ can carry fits.  The limit bounds the
O(m * n) (node, word index) states that ``#`` anywhere makes a lookup explore."""

MQTT = Dialect(
    name="mqtt",
    separator="/",
    single="+",
    multi="#",
    multi_min=0,
    multi_last_only=True,
    strict_wildcards=True,
    topic_wildcards=False,
    empty_topic=False,
    empty_words=True,
    dollar_rule=True,
    max_bytes=65535,
    forbid_nul=True,
    share_prefix="$share",
)
"""MQTT 3.1.1/5 rules: ``+`` one level, ``#`` last level and parent, ``$`` topics,
and MQTT 5 shared subscriptions (``$share/{ShareName}/{filter}``)."""

NATS = Dialect(
    name="nats",
    separator=".",
    single="*",
    multi=">",
    multi_min=1,
    multi_last_only=True,
    topic_wildcards=False,
    empty_topic=False,
    empty_words=False,
    forbidden=" \t\n\r\f",
)
"""NATS subject rules: ``*`` one token, ``>`` one or more tokens at the end; no
whitespace (space, tab, LF, CR, FF: the set nats-server's ``IsValidSubject``
rejects)."""

_BUILTIN = {"amqp": AMQP, "mqtt": MQTT, "nats": NATS}


def resolve_dialect(dialect: str | Dialect) -> Dialect:
    """Return the :class:`Dialect` for a name (``"amqp"``, ``"mqtt"``, ``"nats"``)
    or the dialect itself."""
    if isinstance(dialect, Dialect):
        return dialect
    if isinstance(dialect, str):
        try:
            return _BUILTIN[dialect.lower()]
        except KeyError:
            raise ValueError(
                f"unknown dialect {dialect!r}; expected one of {sorted(_BUILTIN)} "
                "or a cstrie.Dialect"
            ) from None
    raise TypeError(f"dialect must be a str or cstrie.Dialect, not {type(dialect).__name__}")
