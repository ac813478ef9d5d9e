"""Share groups: MQTT 5 shared subscriptions, NATS queue groups.

A subscription may belong to a named *group*.  A message matching the
group's filter goes to every ordinary subscriber and to exactly **one**
member of each matching group (:meth:`cstrie.Trie.route`); ``lookup`` and
``match`` keep returning every subscriber and no member, so nothing
existing changes meaning.

How a subscription names its group:

- MQTT (``Dialect.share_prefix = "$share"``): ``$share/{ShareName}/{filter}``,
  as MQTT 5 section 4.8.2 writes it, or the ``group=`` argument.
- NATS, AMQP and custom dialects: the ``group=`` argument (NATS calls it the
  queue name).

Rules (``tests/groups/test_groups_rules.py``):

1. A group is a name, per trie family (a trie, its snapshots and copies).
   One message is delivered **once per group name**, however many of the
   group's filters match it (NATS queue groups; MQTT 5's ShareName).  The
   member is chosen among the union of the group's members on every
   matching filter.
2. Membership is separate from ordinary subscription: a subscriber may be
   both (it then gets the ordinary delivery *and* may be chosen for the
   group), or a member of several groups (one delivery per group that picks
   it).
3. A route is one walk of the trie: the member chosen was a member at that
   moment (joins and leaves are linearizable, as subscribe/unsubscribe).
   A group without members is no group: it delivers nothing.
4. Policies, per group name (:meth:`cstrie.Trie.set_group_policy`):
   ``"round-robin"`` (default; a lock-free counter per group, so threads
   routing at once share one fair sequence), ``"random"`` (per-thread
   generator) and ``"sticky"`` (rendezvous hashing of a key over the
   members' registry ids: in one process the same key goes to the same
   member while it stays; a leaving member's keys move, the others stay).
   Round-robin and random pick in O(log m) for a group of m members on one
   matching filter (the members' set keeps subtree sizes); a group with
   members on several matching filters picks from their union, O(m log m);
   sticky scores every member, O(m).
5. Group names: non-empty text.  MQTT: no ``/``, ``+``, ``#`` (MQTT-4.8.2-1,
   -2), no U+0000.  NATS: no whitespace (nats.go's ``badQueue``; the protocol
   splits on it).  Every dialect: the characters it forbids in topics.

>>> from cstrie import Trie
>>> t = Trie("mqtt")
>>> t.subscribe("$share/workers/jobs/+", "w1"), t.subscribe("$share/workers/jobs/+", "w2")
(True, True)
>>> t.subscribe("jobs/#", "audit")
True
>>> t.lookup("jobs/7")                      # every ordinary subscriber, no member
['audit']
>>> [t.route("jobs/7") for _ in range(2)]   # + one member per group, in turn
[['audit', 'w1'], ['audit', 'w2']]
"""

from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

from cstrie._hotpath import POLICY_RANDOM, POLICY_ROUND_ROBIN, POLICY_STICKY, Group
from cstrie.dialect import Dialect, shown

__all__ = ["POLICIES", "Group", "GroupTable", "Shared", "check_group", "split_shared"]

POLICIES: dict[str, int] = {
    "round-robin": POLICY_ROUND_ROBIN,
    "random": POLICY_RANDOM,
    "sticky": POLICY_STICKY,
}
_POLICY_NAMES = {v: k for k, v in POLICIES.items()}


class Shared(NamedTuple):
    """The key of a group membership in iteration and ``subscriptions()``:
    the member belongs to ``group`` on ``pattern`` (an ordinary pair's key is
    the pattern str itself)."""

    pattern: str
    group: str


def check_group(dialect: Dialect, group: object) -> str:
    """``group`` if it is a valid group name in ``dialect``; else ``TypeError``
    or ``ValueError`` naming the rule."""
    if not isinstance(group, str):
        raise TypeError(f"group must be a str, not {type(group).__name__}")
    if not group:
        raise ValueError("group must not be empty")
    try:
        group.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"group {shown(group, exc.start)} is not valid UTF-8 text: {exc.reason}"
        ) from None
    if dialect.forbid_nul and "\x00" in group:
        raise ValueError(f"group {shown(group)} contains U+0000, which {dialect.name} forbids")
    bad = set(dialect.forbidden)
    if dialect.name == "nats":
        bad |= set(" \t\n\r\f")
    for ch in sorted(bad):
        if ch in group:
            raise ValueError(
                f"group {shown(group, group.index(ch))} contains {ch!r}; the {dialect.name} "
                f"dialect forbids {''.join(sorted(bad))!r} in group names"
            )
    if dialect.share_prefix is not None:
        for what, token in (
            ("separator", dialect.separator),
            ("one-level wildcard", dialect.single),
            ("many-level wildcard", dialect.multi),
        ):
            if token and token in group:
                raise ValueError(
                    f"group {shown(group, group.index(token))} contains the {what} "
                    f"{token!r}; a {dialect.share_prefix} ShareName may not (MQTT-4.8.2-2)"
                )
    return group


def split_shared(dialect: Dialect, pattern: str) -> tuple[str, str | None]:
    """``(filter, group)`` for a pattern in the dialect's share syntax
    (``$share/g/a/+`` in MQTT), else ``(pattern, None)``.  ``ValueError`` for
    a malformed one (no group name, no filter, a bad name)."""
    prefix = dialect.share_prefix
    if prefix is None or not isinstance(pattern, str) or not pattern.startswith(prefix):
        return pattern, None
    sep = dialect.separator
    head = prefix + sep
    if pattern == prefix:
        raise ValueError(
            f"shared subscription {shown(pattern)} has no ShareName and no filter: "
            f"write {prefix}{sep}{{ShareName}}{sep}{{filter}}"
        )
    if not pattern.startswith(head):
        return pattern, None  # "$shared/...": an ordinary filter
    rest = pattern[len(head) :]
    group, found, filt = rest.partition(sep)
    if not group:
        raise ValueError(
            f"shared subscription {shown(pattern)}: the ShareName must be at least one "
            "character long (MQTT-4.8.2-1)"
        )
    check_group(dialect, group)
    if not found or not filt:
        raise ValueError(
            f"shared subscription {shown(pattern)}: a topic filter must follow the ShareName "
            f"({prefix}{sep}{{ShareName}}{sep}{{filter}})"
        )
    return filt, group


class GroupTable:
    """The groups of one trie family: name -> :class:`Group`, and the policies
    set by name.  A group object lives while the registry maps its id (while
    it has a membership somewhere in the family, or a snapshot that saw one
    is open), so one name has one group at a time; then it goes, and the
    table forgets it (weak values).  Creation is under a lock per name
    stripe, so two threads joining a new group at once make one group."""

    __slots__ = ("_groups", "_locks", "_policies")

    _STRIPES = 16

    def __init__(self) -> None:
        self._groups: weakref.WeakValueDictionary[str, Group] = weakref.WeakValueDictionary()
        self._locks = [threading.Lock() for _ in range(self._STRIPES)]
        self._policies: dict[str, int] = {}

    def get(self, name: str) -> Group:
        """The group named ``name``, made if there is none."""
        with self._locks[hash(name) % self._STRIPES]:
            g = self._groups.get(name)
            if g is None:
                g = Group(name, self._policies.get(name, POLICY_ROUND_ROBIN))
                self._groups[name] = g
            return g

    def find(self, name: str) -> Group | None:
        """The group named ``name`` if it exists."""
        return self._groups.get(name)

    def set_policy(self, name: str, policy: str) -> None:
        try:
            code = POLICIES[policy]
        except (KeyError, TypeError):
            raise ValueError(
                f"unknown group policy {policy!r}; expected one of {sorted(POLICIES)}"
            ) from None
        with self._locks[hash(name) % self._STRIPES]:
            if code == POLICY_ROUND_ROBIN:
                self._policies.pop(name, None)
            else:
                self._policies[name] = code
            g = self._groups.get(name)
            if g is not None:
                g.policy = code

    def policy(self, name: str) -> str:
        g = self._groups.get(name)
        code = g.policy if g is not None else self._policies.get(name, POLICY_ROUND_ROBIN)
        return _POLICY_NAMES[code]
