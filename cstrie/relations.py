"""Filter relations: is one pattern within another, and do two patterns overlap?

* :func:`is_subset` ``(dialect, a, b)``: every topic that ``a`` matches, ``b``
  matches too (an ACL check: may a client holding ``b`` subscribe to ``a``?).
* :func:`intersects` ``(dialect, a, b)``: some valid topic matches both.

Both are exact for every :class:`~cstrie.dialect.Dialect`: ``multi`` anywhere
(AMQP ``#``), ``multi_min`` 0 or 1, the ``$`` rule, empty words, the empty topic,
topics that hold wildcard tokens as literal words, forbidden characters.  They
are also available as :meth:`Dialect.is_subset` and :meth:`Dialect.intersects`::

    >>> from cstrie.dialect import AMQP, MQTT, NATS
    >>> MQTT.is_subset("sensors/+/temp", "sensors/#")
    True
    >>> MQTT.is_subset("$SYS/#", "#")    # "#" never matches a "$" topic
    False
    >>> MQTT.is_subset("a", "a/#")        # "a/#" matches its parent "a"
    True
    >>> NATS.is_subset("a", "a.>")        # ">" needs at least one token
    False
    >>> AMQP.is_subset("#.#", "#") and AMQP.is_subset("#", "#.#")
    True
    >>> AMQP.intersects("a.*.#", "#.b"), MQTT.intersects("+/x", "$a/x")
    (True, False)

**Scope: the length limits are not part of the relations.**  A topic's words
follow every rule of the dialect, but ``max_levels`` and ``max_bytes`` are not
applied to the topics quantified over (the patterns themselves are validated with
them).  A witness or counterexample may therefore be longer than those limits;
that only happens for patterns within about ``len(a) + len(b)`` words (or bytes) of
a limit.  Both answers then err on the side an ACL wants: ``is_subset`` may say
False where only an over-long topic is a counterexample, ``intersects`` may say
True where only an over-long topic is a witness.  Taking the limits in exactly
would make the relations depend on byte counts and cost more than O(m * n).

How the answers are computed, and why they are exact: :mod:`cstrie._relations`.
"""

from __future__ import annotations

from cstrie import _relations
from cstrie.dialect import Dialect, resolve_dialect

__all__ = ["intersects", "is_subset"]


def intersects(dialect: Dialect | str, a: str, b: str) -> bool:
    """True if some valid topic of ``dialect`` matches both patterns ``a`` and ``b``.

    ``dialect`` is a :class:`Dialect` or a built-in name.  Raises ``TypeError`` /
    ``ValueError`` naming the argument for an invalid pattern.  O(m * n) time and
    space for patterns of m and n words (O(m + n) for MQTT and NATS)::

        >>> intersects("mqtt", "a/+/c", "a/b/#")
        True
        >>> intersects("nats", "a.>", "a")
        False
    """
    return _relations.intersects(resolve_dialect(dialect), a, b)


def is_subset(dialect: Dialect | str, a: str, b: str) -> bool:
    """True if every valid topic of ``dialect`` that ``a`` matches, ``b`` matches too.

    ``dialect`` is a :class:`Dialect` or a built-in name.  Raises ``TypeError`` /
    ``ValueError`` naming the argument for an invalid pattern.  O(m * n) time and
    O(m + n) space for patterns of m and n words (O(m + n) time for MQTT and
    NATS)::

        >>> is_subset("mqtt", "sensors/+/temp", "sensors/#")
        True
        >>> is_subset("amqp", "a.#.b", "a.*.#.b")   # "a.b" is a counterexample
        False
        >>> is_subset("amqp", "a.*.#.b", "a.#.b")
        True
    """
    return _relations.is_subset(resolve_dialect(dialect), a, b)
