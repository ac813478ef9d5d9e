"""An amqtt MQTT broker whose routing goes through cstrie.

amqtt's :class:`amqtt.broker.Broker` matches topics by scanning: every
published message is compared with every topic filter in the broker, every
SUBSCRIBE with every retained message (and every CONNECT with every filter
times every retained message), and every session that ends with every filter.
:class:`CstrieBroker` is the same broker (a subclass: same configuration,
plugins, listeners, clients and events) with those four paths replaced:

================================  ==================================  ==========================
operation                         stock amqtt 0.12                    CstrieBroker
================================  ==================================  ==========================
route one PUBLISH                 O(all filters)                      O(w * b + m): a
                                                                      :class:`cstrie.Trie` route
retained messages on SUBSCRIBE    O(all retained topics)              O(what the filter leaves
                                                                      open + matches): a
                                                                      :class:`cstrie.TopicIndex`
                                                                      query
retained messages on CONNECT      O(filters x retained), all clients' none (MQTT 3.1.1 3.3.1.3)
end of a session                  O(all filters)                      O(the client's filters)
================================  ==================================  ==========================

(w words in the topic, b wildcard branches tried per level, m matches.)

Use it where you would create a :class:`~amqtt.broker.Broker`::

    from cstrie.integrations.amqtt import CstrieBroker

    broker = CstrieBroker({"listeners": {"default": {"type": "tcp", "bind": "127.0.0.1:1883"}}})
    await broker.start()

or run ``python -m cstrie.integrations.amqtt [-c config.yaml]``, the
``amqtt`` command with this broker.

State kept in step
------------------
* ``broker.subscriptions`` is stock's ``{filter: [(session, qos), ...]}``
  dict, updated exactly as stock updates it.  Beside it a ``Trie("mqtt")``
  holds each filter that has subscribers once (the filter is its own
  subscriber), and each MQTT 5 shared subscription ``$share/{name}/{filter}``
  as a member ``(share filter, client id)`` of the group ``name``; a dict
  maps each client id to its filters, and another counts its shared ones
  (for the bounds).  Every change goes through
  :meth:`CstrieBroker.add_subscription` and ``_del_subscription``, which
  update them together, between two awaits.
* ``broker.retained_messages`` is a :class:`RetainedMessages`: a
  ``MutableMapping`` of topic to retained message stored in a
  ``TopicIndex("mqtt")``, so code that writes it directly (amqtt's
  persistence plugin does) keeps it queryable.

Bounds
------
A client is an attacker until shown otherwise: what one client subscribes
must not multiply what every message costs the broker.  Two bounds, each
refused with SUBACK 0x80 (which changes nothing) and logged, each an option
with a default (``None`` lifts it), given as keyword arguments or in a
``cstrie`` section of the configuration mapping (also from
``python -m cstrie.integrations.amqtt -c broker.yaml``; amqtt's own
configuration refuses keys it does not know, so the section is taken out
before amqtt reads the rest)::

    CstrieBroker(config, max_subscriptions_per_client=100, max_share_groups_per_client=10)

    cstrie:                               # in broker.yaml
      max_subscriptions_per_client: 100
      max_share_groups_per_client: 10

* ``max_subscriptions_per_client`` (default 100): the subscriptions a client
  holds at once, shared or not.  A SUBSCRIBE to a filter it already holds
  replaces that subscription and is always granted; UNSUBSCRIBE and the end
  of a session free their places.  (AWS IoT Core allows 50 per connection
  by default.)
* ``max_share_groups_per_client`` (default 10): the shared subscriptions
  (``$share/{ShareName}/{filter}``, each its own share group) among them.

With one copy per client (difference 12), a client's subscriptions cost the
route what it holds (a filter matching a message costs about 0.2 us, a
share group about 0.4 us) and one delivery; the defaults keep that within
a fraction of a message's cost (``docs/benchmarks.md``, "What one client can
cost the others": at the defaults, the worst a client can hold raised the
broker's CPU per message 1.60x over a client holding nothing; the floor is
2x).  Bounds apply where a subscription is made:
a SUBSCRIBE, a plugin's ``BrokerContext.add_subscription`` and the
persistence plugin's restored sessions.

Access control
--------------
amqtt's topic-filtering plugins decide who may subscribe, publish and
receive what.  CstrieBroker asks them about the filter it routes: for
``$share/{ShareName}/{filter}`` the filter (the ShareName is checked by the
MQTT 5 rules: not empty, no ``/``, ``+``, ``#`` or U+0000), and the
entries of amqtt's ACL plugin (``TopicAccessControlListPlugin``) are read by
the MQTT rules as well as by the plugin: both must grant (difference 8).
Every message sent to a client passes the receive check: live, queued for
a disconnected session and sent when it comes back, and retained messages
on SUBSCRIBE (difference 10); a will passes the publish check of its
client (difference 9).  UNSUBSCRIBE needs no permission: it removes the
subscription the same string made (``$share/g/f`` leaves share g on f, and
nothing else) and changes nothing when there is none.  ``$SYS`` topics
reach no filter that starts with a wildcard, shared or not, and no ACL
entry that starts with a wildcard grants them.

MQTT semantics
--------------
As stock amqtt where stock follows the specification: the ``$`` rule (a
filter starting with a wildcard does not see ``$`` topics), ``#`` matching
its parent level, ``+`` matching empty levels, the QoS granted to each
subscription (capped by ``max-qos``), topic filtering plugins asked for
every receiver, and messages queued for disconnected persistent sessions
(QoS 1 and 2).  Where stock is wrong, or where this broker chooses another
behaviour the specification allows, it differs
(``tests/integrations/test_integration_amqtt_rules.py`` pins each one, running it on
stock too, and ``docs/brokers.md`` lists them):

1. **CONNECT delivers no retained messages.**  Stock sends, at QoS 0, the
   retained messages matching *every client's* filters to each client that
   connects; a retained message is sent when a subscription is established
   (MQTT 3.1.1 section 3.3.1.3), and reconnecting does not establish one.
   Stock's loop also awaits while iterating the subscription dict, which
   raises "dictionary changed size during iteration" when another client
   subscribes or leaves meanwhile; this broker has no such loop.
2. **A repeated SUBSCRIBE replaces the subscription's QoS** (MQTT-3.8.4-3).
   Stock keeps the first QoS and acknowledges the new one.
3. **Invalid filters are refused (SUBACK 0x80)** and **invalid topics close
   the connection**, as for the wildcard rules stock already checks: the
   empty filter (MQTT-4.7.3-1) and filters or topics with U+0000
   (MQTT-4.7.3-2).  Stock stores such filters and routes such topics.
   ("Close" as amqtt closes for a wildcard in a topic: it ends the client's
   message loop, so nothing more from that connection is processed, but
   leaves the socket open and the session marked connected.)  A
   will message with such a topic is neither routed nor retained (stock
   retains it).
4. **Shared subscriptions.**  ``$share/{ShareName}/{filter}`` (MQTT 5
   section 4.8.2; amqtt's MQTT 3.1.1 protocol layer passes the filter
   through) delivers each message to one member of the group, round-robin,
   through :meth:`cstrie.Trie.route_by_group`; a member whose session is not
   connected is passed over for a connected one.  A shared subscription is
   its ShareName *and* its filter: ``$share/g/a/#`` and ``$share/g/a/+``
   each deliver a copy of ``a/b`` (one trie group per share filter).  No retained message is
   sent for a shared subscription (MQTT 5 section 4.8.2).  Stock treats the
   filter as an ordinary one whose first level is the word ``$share``.
5. **A message is delivered at the minimum of its QoS and the
   subscription's** (MQTT 3.1.1 3.8.4).  Stock delivers a client's PUBLISH
   at the subscription's QoS (a QoS 0 message reaches a QoS 1 subscriber at
   QoS 1), and a will or a plugin's broadcast with a QoS at that QoS, above
   the granted one if need be.  A plugin's broadcast without a QoS still
   goes at each subscription's.  What a disconnected persistent session
   queues is unchanged (stock's rule: by the subscription's QoS, or the
   given one); a QoS 0 message it queued reaches it at QoS 0 (3.1.2.4
   allows a server to store QoS 0 messages).
6. **A retained QoS 0 message is sent at QoS 0** to a new subscription
   (3.3.1.3, the minimum of the two).  Stock's ``min(qos, retained.qos or
   qos)`` reads QoS 0 as "unknown" and sends it at the subscription's.
7. **Messages queued for a disconnected session are sent with RETAIN 0**
   when it reconnects: they match a subscription it already had
   (MQTT-3.3.1-9).  Stock sets RETAIN 1, so the client takes them for
   retained messages.
8. **The topic ACL is checked on what is routed and read by the MQTT
   rules.**  Stock asks the plugins about the SUBSCRIBE string as sent,
   which for ``$share/{name}/{filter}`` is a string it never routes; this
   broker routes the filter, so it asks about the filter: an ACL entry
   ``+/alice/#`` grants ``$share/alice/#`` in stock (where it matches
   nothing) but would give alice every topic here, so it is refused.  amqtt's
   ACL plugin compares a filter with its entries level by level, so in
   stock the entry ``+`` grants the filter ``#`` (every topic), ``a/+``
   grants ``a/#``, and ``#`` grants ``$SYS/#``, which amqtt's documentation
   says it does not; here an entry grants a filter only when it matches
   every topic the filter matches (:func:`acl_entry_grants`, the ``$`` rule
   included), and the plugin must grant it too.  A message is sent to a
   client only when its ``receive-acl`` (if set, else its ``acl``) grants
   the topic, checked for the user name the session has when the message
   goes out: a persistent session resumed under another user name gets
   nothing that user may not read (stock sends what the first user's
   subscriptions match).
9. **A will is published only where its client may publish**: not to a
   topic starting with ``$`` (MQTT 4.7.2; stock refuses a PUBLISH there but
   routes a will there, so a client could write ``$SYS/...`` topics), and
   only where the topic filtering plugins allow the client to PUBLISH
   (amqtt's ``publish-acl``).  Stock publishes and retains every will.
10. **Retained and queued messages pass the receive check** that a live
    message passes (topic filtering plugins with RECEIVE).  Stock sends the
    retained messages a new subscription matches, and the messages queued
    for a session, without it.
11. **Per-client bounds** (see "Bounds"): a SUBSCRIBE beyond
    ``max_subscriptions_per_client`` or ``max_share_groups_per_client``
    gets 0x80.  Stock has no bound.
12. **One copy per client.**  A client whose several subscriptions match a
    message gets it once, at the highest QoS among them (still capped as
    in 5): MQTT 3.1.1 3.3.5 (MQTT 5 3.3.4) requires that QoS and allows,
    not requires, a copy per further subscription.  Stock sends one copy
    per matching filter, each at its filter's QoS.  This bounds what one
    client costs: its subscriptions, however many overlap, cost one
    delivery per message (stock: one per filter; 191 distinct filters
    match a six-level topic).  It also counts the shared subscriptions that
    picked the client: MQTT 5 4.8.2 describes a client with a matching
    shared and ordinary subscription as getting a second copy when the
    share picks it; here the one copy is the share's delivery too (each
    share group still sends each message to exactly one member).  That
    text states no requirement, and amqtt speaks MQTT 3.1.1, whose clients
    cannot tell copies apart (no subscription identifiers); paho, for one,
    hands one copy to every callback whose filter matches, so further
    copies only repeat the calls.  Without it, K share groups on ``#``
    make K copies of every message: with 2,000, a message cost 90.89 ms
    of broker time instead of 0.62 ms.

The broker runs on one asyncio event loop, as stock amqtt does.  Tested with
amqtt 0.12.0 and 0.12.1 (the extra ``cstrie[amqtt]`` pins ``>=0.12,<0.13``):
:meth:`CstrieBroker._handle_client_session` is stock's method without its
retained-message loop, so a new amqtt release needs a look before the range
grows.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

try:
    from amqtt.broker import Broker, RetainedApplicationMessage, Server
    from amqtt.contexts import Action
    from amqtt.errors import BrokerError
    from amqtt.events import BrokerEvents
    from amqtt.mqtt.constants import QOS_1, QOS_2
    from amqtt.mqtt.disconnect import DisconnectPacket
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
    from amqtt.plugins.topic_checking import TopicAccessControlListPlugin
    from amqtt.session import OutgoingApplicationMessage, Session
    from transitions import MachineError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"cstrie.integrations.amqtt needs amqtt: pip install 'cstrie[amqtt]' ({exc})"
    ) from exc

from cstrie.dialect import MQTT
from cstrie.groups import split_shared
from cstrie.topics import TopicIndex
from cstrie.trie import Trie

__all__ = ["CstrieBroker", "RetainedMessages"]

#: SUBACK's failure return code (MQTT 3.1.1 3.9.3)
SUBACK_FAILURE = 0x80

#: The per-client bounds, their defaults and what each counts (see the
#: module's documentation, "Bounds").  ``None`` lifts a bound.
LIMITS: dict[str, int | None] = {
    # subscriptions a client holds at once, shared or not (a SUBSCRIBE to a
    # filter it already holds replaces that subscription and is not counted)
    "max_subscriptions_per_client": 100,
    # shared subscriptions ($share/{ShareName}/{filter}: each its own share
    # group) a client holds at once; they count as subscriptions too
    "max_share_groups_per_client": 10,
}
#: the section of a configuration mapping that holds :data:`LIMITS` options
CONFIG_SECTION = "cstrie"

_MISSING: Any = object()
_log = logging.getLogger(__name__)

#: The QoS of the client PUBLISH whose handling is under way in this task:
#: stock's ``_handle_message_delivery`` drops it when it queues the broadcast,
#: so :meth:`CstrieBroker._handle_message_delivery` sets it around stock's
#: handling and :meth:`CstrieBroker._broadcast_message` puts it back
#: (difference 5).  A context variable, so each client's task sees its own.
_publish_qos: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "cstrie_amqtt_publish_qos", default=None
)


class RetainedMessages(MutableMapping[str, RetainedApplicationMessage]):
    """The broker's retained messages by topic, in a ``TopicIndex("mqtt")``.

    A ``MutableMapping`` (what amqtt and its plugins use: ``[]``, ``in``,
    ``del``, ``len``, ``items()``) plus :meth:`query`, the retained messages a
    filter matches.  ``len`` is O(1) (a count kept beside the index), the
    others O(levels of the topic); iteration reads a snapshot, so the mapping
    may change meanwhile.  A topic the MQTT rules refuse (with U+0000, longer
    than 65,535 bytes, with a wildcard) cannot be stored: ``ValueError``;
    reading one finds nothing, like a dict.

    >>> r = RetainedMessages()
    >>> r["a/b"] = RetainedApplicationMessage(None, "a/b", b"1", 0)
    >>> [(t, m.data) for t, m in r.query("a/+")], len(r), "a/c" in r
    ([('a/b', b'1')], 1, False)
    """

    def __init__(self) -> None:
        self._index = TopicIndex("mqtt")
        self._count = 0

    def __getitem__(self, topic: str) -> RetainedApplicationMessage:
        try:
            value = self._index.get(topic, _MISSING)
        except (ValueError, TypeError):
            value = _MISSING
        if value is _MISSING:
            raise KeyError(topic)
        return value

    def __contains__(self, topic: object) -> bool:
        try:
            return topic in self._index
        except (ValueError, TypeError):
            return False

    def __setitem__(self, topic: str, message: RetainedApplicationMessage) -> None:
        if self._index.put(topic, message):
            self._count += 1

    def __delitem__(self, topic: str) -> None:
        try:
            self._index.pop(topic)
        except (ValueError, TypeError):
            raise KeyError(topic) from None
        self._count -= 1

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return self._count

    def clear(self) -> None:
        self._index.clear()
        self._count = 0

    def query(self, topic_filter: str) -> Iterator[tuple[str, RetainedApplicationMessage]]:
        """``(topic, message)`` for every retained topic ``topic_filter``
        matches (MQTT rules), streamed from a snapshot taken now; costs what
        the filter's literal levels leave open, not the number of topics.
        ``ValueError`` for an invalid filter."""
        return self._index.query(topic_filter)


def _share_of(topic_filter: str) -> str | None:
    """The ShareName of an MQTT 5 shared subscription, None for an ordinary
    filter; ValueError for a malformed one (``$share/g`` has no filter)."""
    return split_shared(MQTT, topic_filter)[1]


def acl_entry_grants(entry: str, requested: str) -> bool:
    """Whether the ACL entry ``entry`` (a topic filter) matches every topic
    that ``requested`` (a topic, or a filter) matches, by the MQTT rules
    (3.1.1 section 4.7): ``+`` one level, ``#`` its parent and any levels
    below, and the ``$`` rule (4.7.2): an entry starting with a wildcard
    grants no topic or filter whose first level starts with ``$``, as amqtt's
    documentation of its ACL plugin says.  A wildcard level of ``requested``
    is granted only by an entry level at least as wide: ``+`` by ``+`` or
    ``#``, ``#`` by ``#``.  O(levels).

    >>> acl_entry_grants("+/alice/#", "site1/alice/x"), acl_entry_grants("+/alice/#", "#")
    (True, False)
    >>> acl_entry_grants("+", "#"), acl_entry_grants("#", "$SYS/#"), acl_entry_grants("a/#", "a")
    (False, False, True)
    """
    want = requested.split("/")
    have = entry.split("/")
    if want[0].startswith("$") and have[0] in ("+", "#"):
        return False
    for i, word in enumerate(have):
        if word == "#":
            return True
        if i >= len(want) or want[i] == "#":
            return False
        if word != "+" and want[i] != word:
            return False
    return len(want) == len(have)


def _limits(config: Any, given: dict[str, Any]) -> tuple[Any, dict[str, int | None]]:
    """``config`` without its :data:`CONFIG_SECTION` (amqtt's configuration
    refuses unknown keys), and each bound of :data:`LIMITS`: the keyword
    argument if given, else the section's value, else the default.
    ``ValueError``/``TypeError`` for an unknown option or a bad value."""
    section: Any = {}
    if isinstance(config, Mapping) and CONFIG_SECTION in config:
        section = config[CONFIG_SECTION]
        config = {k: v for k, v in config.items() if k != CONFIG_SECTION}
        if section is None:
            section = {}
        if not isinstance(section, Mapping):
            raise TypeError(
                f"the {CONFIG_SECTION!r} section of the configuration must be a mapping, "
                f"not {type(section).__name__}"
            )
    unknown = sorted(str(k) for k in [*section, *given] if k not in LIMITS)
    if unknown:
        raise ValueError(
            f"unknown CstrieBroker option(s) {', '.join(unknown)}: the options are "
            f"{', '.join(LIMITS)}"
        )
    limits: dict[str, int | None] = {}
    for name, default in LIMITS.items():
        value = given.get(name, section.get(name, default))
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1 (None lifts the bound), not {value}")
        limits[name] = value
    return config, limits


class CstrieBroker(Broker):
    """:class:`amqtt.broker.Broker` with its routing, retained-message lookups
    and session cleanup done by cstrie (see the module's documentation for the
    costs and the differences from stock amqtt).  Takes the same arguments,
    and the per-client bounds as keyword arguments (the module's "Bounds";
    they override the configuration's ``cstrie`` section).  ``ValueError`` or
    ``TypeError`` naming an unknown bound or a value that is not a positive
    int or None.
    """

    def __init__(
        self,
        config: Any = None,
        loop: asyncio.AbstractEventLoop | None = None,
        plugin_namespace: str | None = None,
        *,
        max_subscriptions_per_client: int | None = _MISSING,
        max_share_groups_per_client: int | None = _MISSING,
    ) -> None:
        given = {
            name: value
            for name, value in (
                ("max_subscriptions_per_client", max_subscriptions_per_client),
                ("max_share_groups_per_client", max_share_groups_per_client),
            )
            if value is not _MISSING
        }
        config, limits = _limits(config, given)
        super().__init__(config, loop, plugin_namespace)
        #: the most subscriptions a client may hold at once (None: no bound)
        self.max_subscriptions_per_client: int | None = limits["max_subscriptions_per_client"]
        #: the most shared subscriptions a client may hold at once (None: no bound)
        self.max_share_groups_per_client: int | None = limits["max_share_groups_per_client"]
        #: amqtt's ACL plugins among the topic-filtering plugins, whose
        #: entries :meth:`_topic_filtering` also reads by the MQTT rules
        self._acl_plugins: tuple[TopicAccessControlListPlugin, ...] = tuple(
            p
            for p in getattr(self.plugins_manager, "_topic_plugins", ())
            if isinstance(p, TopicAccessControlListPlugin)
        )
        self._retained_messages: RetainedMessages = RetainedMessages()
        self._reset_routes()

    def _reset_routes(self) -> None:
        #: every filter with subscribers once (subscriber: the filter), and each
        #: shared subscription's members ((share filter, client id), in the
        #: group _share_groups names)
        self._routes = Trie("mqtt")
        #: share filter -> the trie group of its members.  MQTT 5 (4.8.2) makes
        #: ShareName *and* filter one shared subscription ($share/g/a/# and
        #: $share/g/a/+ each deliver a copy), where the trie's groups are
        #: per name, so each share filter gets a group of its own while it has
        #: members.
        self._share_groups: dict[str, str] = {}
        self._group_ids = itertools.count()
        #: client id -> its filters (dict as an ordered set)
        self._filters_by_client: dict[str, dict[str, None]] = {}
        #: (share filter, client id) -> (session, qos) of a shared subscription
        self._share_entries: dict[tuple[str, str], tuple[Session, int]] = {}
        #: client id -> how many of its filters are shared subscriptions
        self._shares_by_client: dict[str, int] = {}

    async def start(self) -> None:
        # stock start() clears broker.subscriptions; the routes go with it
        self._reset_routes()
        await super().start()

    # --------------------------------------------------------------- subscriptions
    async def add_subscription(self, subscription: tuple[str, int], session: Session) -> int:
        """The checks, in order: the MQTT rules for the filter (stock's
        wildcard placement, plus the empty filter, U+0000 and a malformed
        ``$share``: ShareName and filter, MQTT 5 4.8.2); the topic-filtering
        plugins on the filter that is routed (for ``$share/{name}/{filter}``,
        the filter; difference 8); the client's bounds (difference 11);
        ``max-qos``.  Then the subscription is recorded in
        ``broker.subscriptions`` and the routes; a repeated subscription
        replaces its QoS.  Returns the granted QoS or 0x80, which changes
        nothing.  O(levels + subscribers of the filter)."""
        topic_filter, qos = subscription
        try:
            routed, group = split_shared(MQTT, topic_filter)
            self._routes.dialect.split_pattern(routed)
        except (ValueError, TypeError) as exc:
            _log.info("refusing subscription to %r: %s", topic_filter, exc)
            return SUBACK_FAILURE
        if not await self._topic_filtering(session, routed, Action.SUBSCRIBE):
            _log.info(
                "refusing subscription of %r to %r: the topic filtering plugins do not allow %r",
                session.client_id,
                topic_filter,
                routed,
            )
            return SUBACK_FAILURE
        # from here to the return: no await, so no other task sees a half-done change
        cid = session.client_id or ""
        mine = self._filters_by_client.get(cid, {})
        if topic_filter not in mine:
            over = self._over_limit(cid, len(mine), group is not None)
            if over is not None:
                _log.warning(
                    "refusing subscription of %r to %r: it holds %s", cid, topic_filter, over
                )
                return SUBACK_FAILURE
        max_qos = self.config.get("max-qos", qos)
        if not isinstance(max_qos, int):
            max_qos = qos
        code: int = min(qos, max_qos)
        entries = self._subscriptions.setdefault(topic_filter, [])
        k = next((k for k, e in enumerate(entries) if e[0].client_id == session.client_id), None)
        if k is None:
            entries.append((session, code))
        else:
            # MQTT-3.8.4-3: the new subscription replaces the old
            entries[k] = (entries[k][0], code)
        if group is None:
            self._routes.subscribe(topic_filter, topic_filter)
        else:
            self._share_entries[(topic_filter, cid)] = next(
                e for e in entries if e[0].client_id == session.client_id
            )
            trie_group = self._share_groups.get(topic_filter)
            if trie_group is None:
                trie_group = self._share_groups[topic_filter] = f"s{next(self._group_ids)}"
            self._routes.subscribe(routed, (topic_filter, cid), group=trie_group)
            if topic_filter not in mine:
                self._shares_by_client[cid] = self._shares_by_client.get(cid, 0) + 1
        self._filters_by_client.setdefault(cid, {})[topic_filter] = None
        return code

    def _over_limit(self, cid: str, held: int, shared: bool) -> str | None:
        """Why one more subscription (a shared one if ``shared``) would put
        client ``cid``, which holds ``held``, over its bounds; None if not."""
        most = self.max_subscriptions_per_client
        if most is not None and held >= most:
            return f"{held} subscriptions, the most max_subscriptions_per_client allows"
        most = self.max_share_groups_per_client
        shares = self._shares_by_client.get(cid, 0)
        if shared and most is not None and shares >= most:
            return f"{shares} shared subscriptions, the most max_share_groups_per_client allows"
        return None

    def _del_subscription(self, a_filter: str, session: Session) -> int:
        deleted: int = super()._del_subscription(a_filter, session)
        if deleted:
            cid = session.client_id or ""
            if _share_of(a_filter) is None:
                if not self._subscriptions[a_filter]:
                    self._routes.unsubscribe(a_filter, a_filter)
            else:
                self._share_entries.pop((a_filter, cid), None)
                inner = split_shared(MQTT, a_filter)[0]
                self._routes.unsubscribe(inner, (a_filter, cid), group=self._share_groups[a_filter])
                if not self._subscriptions[a_filter]:
                    del self._share_groups[a_filter]
                left = self._shares_by_client.pop(cid, 1) - 1
                if left:
                    self._shares_by_client[cid] = left
            mine = self._filters_by_client.get(cid)
            if mine is not None:
                mine.pop(a_filter, None)
                if not mine:
                    del self._filters_by_client[cid]
        return deleted

    async def _del_all_subscriptions(self, session: Session) -> None:
        """Remove every subscription of ``session``: O(its filters), where
        stock scans every filter in the broker."""
        for topic_filter in list(self._filters_by_client.get(session.client_id or "", ())):
            if self._del_subscription(topic_filter, session) and not self._subscriptions.get(
                topic_filter
            ):
                self._subscriptions.pop(topic_filter, None)

    # ------------------------------------------------------------ access control
    async def _topic_filtering(self, session: Session, topic: str, action: Action) -> bool:
        """Stock's check (every topic-filtering plugin allows ``topic`` for
        ``action``), and then each of amqtt's ACL plugins read by the MQTT
        rules (:func:`acl_entry_grants`; difference 8): for a SUBSCRIBE, an
        entry of the client's ``acl`` must grant the whole filter; for a
        PUBLISH, of its ``publish-acl`` when one is set; for a message sent
        to the client, of its ``receive-acl`` when one is set, else of its
        ``acl``.  Called with the filter that is routed, never a ``$share``
        string (:meth:`add_subscription`)."""
        if not await super()._topic_filtering(session, topic, action):
            return False
        if not self._acl_plugins or not self.plugins_manager.is_topic_filtering_enabled():
            return True
        return all(self._acl_allows(p, session, topic, action) for p in self._acl_plugins)

    @staticmethod
    def _acl_allows(
        plugin: TopicAccessControlListPlugin, session: Session | None, topic: str, action: Action
    ) -> bool:
        """Whether ``plugin``'s entries for the session's user name grant
        ``topic`` for ``action`` by :func:`acl_entry_grants`.  The entries are
        the plugin's own, found as it finds them (an ACL that is not set
        restricts nothing here; a user it does not list gets nothing)."""
        get = plugin._get_config_option
        if action == Action.PUBLISH:
            acl = get("publish-acl", None) or None  # empty: amqtt allows every PUBLISH
        elif action == Action.SUBSCRIBE:
            acl = get("subscribe-acl", get("acl", None))
        elif action == Action.RECEIVE:
            acl = get("receive-acl", None)
            if acl is None:
                acl = get("subscribe-acl", get("acl", None))
        else:
            return True
        if acl is None:
            return True
        user = session.username if session is not None else None
        entries = acl.get("anonymous" if user is None else user) or ()
        return any(isinstance(e, str) and acl_entry_grants(e, topic) for e in entries)

    async def _will_refused(self, session: Session) -> str | None:
        """Why ``session``'s will may not be published, None if it may: as
        for a PUBLISH from its client, a topic starting with ``$`` (MQTT
        4.7.2) or one its topic filtering plugins do not allow the client
        to publish to (difference 9)."""
        topic = session.will_topic
        if topic is None:
            return None
        if topic.startswith("$"):
            return "a client may not publish to a topic starting with '$' (MQTT 4.7.2)"
        if not await self._topic_filtering(session, topic, Action.PUBLISH):
            return "the topic filtering plugins do not allow the client to publish there"
        return None

    async def _handle_disconnect(
        self,
        client_session: Session,
        handler: BrokerProtocolHandler,
        disconnect_waiter: asyncio.Future[Any],
    ) -> None:
        """Stock's, after checking a will that stock would publish (a
        connection lost without DISCONNECT) as a PUBLISH from its client is
        checked: a will it refuses is neither routed nor retained
        (difference 9)."""
        result = disconnect_waiter.result()
        if not isinstance(result, DisconnectPacket) and client_session.will_flag:
            why = await self._will_refused(client_session)
            if why is not None:
                _log.warning(
                    "not publishing the will of %r on %r: %s",
                    client_session.client_id,
                    client_session.will_topic,
                    why,
                )
                client_session.will_flag = False
        await super()._handle_disconnect(client_session, handler, disconnect_waiter)

    # ------------------------------------------------------------------- routing
    async def _handle_message_delivery(
        self,
        client_session: Session,
        handler: BrokerProtocolHandler,
        wait_deliver: asyncio.Future[Any],
    ) -> bool:
        """Stock's handling of a PUBLISH from a client, after the MQTT topic
        rules stock does not check (U+0000, 65,535 bytes): such a topic ends
        the client's message loop, as stock does for a wildcard in a topic
        (amqtt calls that closing the connection; the socket stays open)."""
        app_message = wait_deliver.result()
        topic = getattr(app_message, "topic", None)
        if topic and "#" not in topic and "+" not in topic and not topic.startswith("$"):
            try:
                self._routes.dialect.split_topic(topic)
            except (ValueError, TypeError) as exc:
                await self.plugins_manager.fire_event(
                    BrokerEvents.MESSAGE_RECEIVED,
                    client_id=client_session.client_id,
                    message=app_message,
                )
                _log.warning(
                    "%s invalid TOPIC sent in PUBLISH message, closing connection: %s",
                    client_session.client_id,
                    exc,
                )
                return False
        token = _publish_qos.set(getattr(app_message, "qos", None))
        try:
            result: bool = await super()._handle_message_delivery(
                client_session, handler, wait_deliver
            )
        finally:
            _publish_qos.reset(token)
        return result

    async def _broadcast_message(
        self,
        session: Session | None,
        topic: str | None,
        data: bytes | bytearray | None,
        force_qos: int | None = None,
    ) -> None:
        """Stock's (the message, with ``"qos"`` when a will or a plugin gives
        one), plus the QoS of a client's PUBLISH (from :data:`_publish_qos`)
        under ``"publish_qos"``, which stock drops: :meth:`_deliver` sends
        the message at the minimum of its QoS and each subscription's
        (difference 5)."""
        broadcast: dict[str, Any] = {"session": session, "topic": topic, "data": data}
        if force_qos is not None:
            broadcast["qos"] = force_qos
        elif session is not None and (publish_qos := _publish_qos.get()) is not None:
            broadcast["publish_qos"] = publish_qos
        await self._broadcast_queue.put(broadcast)

    async def _run_broadcast(self, running_tasks: Any) -> None:
        """Deliver one queued message: one cstrie route (not a scan of all
        filters) gives the filters the topic matches and one member of each
        matching shared subscription; then each client gets one copy, at
        the highest QoS among its matching ordinary subscriptions and the
        shared subscriptions that picked it (difference 12).  The copies
        are chosen before the first await, so (un)subscribing meanwhile
        does not change them.  O(route + matching subscriptions)."""
        broadcast = await self._broadcast_queue.get()
        topic = broadcast["topic"]
        try:
            filters, picks = self._routes.route_by_group(topic)
        except (ValueError, TypeError) as exc:
            _log.warning("not broadcasting to invalid topic %r: %s", topic, exc)
            return
        copies: dict[str | None, tuple[Session, int]] = {}
        subscriptions = self._subscriptions
        for k_filter in filters:
            for entry in subscriptions.get(k_filter, ()):
                cid = entry[0].client_id
                had = copies.get(cid)
                if had is None or entry[1] > had[1]:
                    copies[cid] = entry
        for member in picks.values():
            picked = self._share_target(*member)
            if picked is not None:
                cid = picked[0].client_id
                had = copies.get(cid)
                if had is None or picked[1] > had[1]:
                    copies[cid] = picked
        for target_session, sub_qos in list(copies.values()):
            await self._deliver(broadcast, target_session, sub_qos, running_tasks)

    def _share_target(self, share_filter: str, cid: str) -> tuple[Session, int] | None:
        """The (session, qos) a shared subscription's pick delivers to: the
        picked member when it is connected, else the next connected member of
        that shared subscription (O(members), only then), else the pick
        (whose session may queue the message, as stock does for a
        disconnected session)."""
        entry = self._share_entries.get((share_filter, cid))
        if entry is None or entry[0].transitions.state == "connected":
            return entry
        members = self._subscriptions.get(share_filter, [])
        start = next((k for k, e in enumerate(members) if e[0].client_id == cid), 0)
        for k in range(1, len(members)):
            other: tuple[Session, int] = members[(start + k) % len(members)]
            if other[0].transitions.state == "connected":
                return other
        return entry

    async def _deliver(
        self,
        broadcast: dict[str, Any],
        target_session: Session,
        sub_qos: int,
        running_tasks: Any,
    ) -> None:
        """Stock's delivery of one broadcast to one subscription (the body of
        amqtt 0.12's ``Broker._run_broadcast`` loop), at the minimum of the
        message's QoS and the subscription's (MQTT 3.1.1 3.8.4, difference 5;
        stock sends at the subscription's, or at a given QoS above it).  A
        disconnected session queues what stock queues (by stock's QoS), at
        that QoS."""
        stock_qos = broadcast.get("qos", sub_qos)
        message_qos = broadcast.get("qos", broadcast.get("publish_qos"))
        qos = sub_qos if message_qos is None else min(message_qos, sub_qos)
        sendable = await self._topic_filtering(
            target_session, topic=broadcast["topic"], action=Action.RECEIVE
        )
        if not sendable:
            self.logger.info(
                f"{target_session.client_id} not allowed to receive messages from "
                f"TOPIC {broadcast['topic']}."
            )
            return
        # Queue what cannot be sent to a disconnected session: only when clean
        # session is false, for QoS 1 and 2 and a client that authenticated
        # [MQTT 3.1.2.4]
        if (
            target_session.transitions.state != "connected"
            and not target_session.clean_session
            and stock_qos in (QOS_1, QOS_2)
            and not target_session.is_anonymous
        ):
            await self._retain_broadcast_message(broadcast, qos, target_session)
            return
        if target_session.transitions.state != "connected":
            return
        handler = self._get_handler(target_session)
        if handler:
            task: asyncio.Task[OutgoingApplicationMessage] = asyncio.ensure_future(
                handler.mqtt_publish(broadcast["topic"], broadcast["data"], qos, retain=False)
            )
            running_tasks.append(task)

    # ---------------------------------------------------------- retained messages
    async def retain_message(
        self,
        source_session: Session | None,
        topic_name: str | None,
        data: bytes | bytearray | None,
        qos: int | None = None,
    ) -> None:
        """Stock's, except that a message whose topic the MQTT rules refuse
        (U+0000, a wildcard, over 65,535 bytes: the topic index cannot hold it)
        is not retained: logged and dropped.  Clients cannot publish such a
        topic, but a will can carry one, and stock would store it; raising
        here instead would end the disconnect handling half-way, leaving the
        session connected."""
        if data and topic_name is not None:
            try:
                self._routes.dialect.split_topic(topic_name)
            except (ValueError, TypeError) as exc:
                _log.warning("not retaining a message on invalid topic %r: %s", topic_name, exc)
                return
        await super().retain_message(source_session, topic_name, data, qos)

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        """Send the retained messages a new subscription matches: one topic
        index query, O(what the filter leaves open + matches), where stock
        compares the filter with every retained topic.  Each passes the
        check a live message passes (the topic filtering plugins, with
        RECEIVE; difference 10).  Nothing for a shared subscription (MQTT 5
        section 4.8.2)."""
        topic_filter, qos = subscription
        try:
            if _share_of(topic_filter) is not None:
                return
            found = list(self._retained_messages.query(topic_filter))
        except (ValueError, TypeError):
            return
        found = await self._receivable(session, found)
        handler = self._get_handler(session)
        if handler is None:
            return
        tasks = [
            asyncio.Task(
                handler.mqtt_publish(
                    retained.topic,
                    retained.data,
                    # the minimum of the two QoS (3.3.1.3); stock's
                    # `retained.qos or qos` reads a QoS 0 message as unknown (difference 6)
                    qos if retained.qos is None else min(qos, retained.qos),
                    retain=True,
                )
            )
            for _, retained in found
        ]
        if tasks:
            await asyncio.wait(tasks)

    async def _publish_session_retained_messages(self, session: Session) -> None:
        """Send, in order, the messages queued for ``session`` while it was
        disconnected, with RETAIN 0: they match a subscription the session
        already had (MQTT-3.3.1-9), where stock sets RETAIN 1 (difference 7).
        Each passes the check a live message passes again (RECEIVE, for the
        user name the session has now; difference 8)."""
        handler = self._get_handler(session)
        if handler is None:
            return
        queued = []
        while not session.retained_messages.empty():
            message = await session.retained_messages.get()
            queued.append((message.topic, message))
        tasks = [
            asyncio.ensure_future(
                handler.mqtt_publish(message.topic, message.data, message.qos, retain=False)
            )
            for _, message in await self._receivable(session, queued)
        ]
        if tasks:
            await asyncio.wait(tasks)

    async def _receivable(
        self, session: Session, messages: list[tuple[str, RetainedApplicationMessage]]
    ) -> list[tuple[str, RetainedApplicationMessage]]:
        """The ``(topic, message)`` pairs the topic filtering plugins allow
        ``session`` to receive (RECEIVE, as for a live message); all of them,
        without a call, when no plugin filters topics."""
        if not messages or not self.plugins_manager.is_topic_filtering_enabled():
            return messages
        allowed = []
        for topic, message in messages:
            if await self._topic_filtering(session, topic, Action.RECEIVE):
                allowed.append((topic, message))
            else:
                _log.info("not sending %r to %r: it may not receive it", topic, session.client_id)
        return allowed

    async def _handle_client_session(
        self,
        reader: Any,
        writer: Any,
        client_session: Session,
        handler: BrokerProtocolHandler,
        server: Server,
        listener_name: str,
    ) -> None:
        """amqtt 0.12's session lifecycle without its last step before the
        message loop, which sent every client's retained messages on CONNECT
        (see the module's documentation, difference 1)."""
        authenticated = await self._authenticate(
            client_session, self.listeners_config[listener_name]
        )
        if client_session.client_id is None:
            raise BrokerError("Client ID was not correctly created/set.")
        while True:
            try:
                client_session.transitions.connect()
                break
            except (MachineError, ValueError):
                if client_session.transitions.is_connected():
                    self.logger.warning(
                        f"Client {client_session.client_id} is already connected, "
                        "performing take-over."
                    )
                    old_session = self._sessions[client_session.client_id]
                    await old_session[1].handle_connection_closed()
                    await old_session[1].stop()
                    break
                self.logger.warning(
                    f"Client {client_session.client_id} is reconnecting too quickly, make it wait"
                )
                await asyncio.sleep(1)
        handler.attach(client_session, reader, writer)
        self._sessions[client_session.client_id] = (client_session, handler)
        await handler.mqtt_connack_authorize(authenticated)
        if not authenticated:
            await writer.close()
            return
        await self.plugins_manager.fire_event(
            BrokerEvents.CLIENT_CONNECTED,
            client_id=client_session.client_id,
            client_session=client_session,
        )
        await handler.start()
        # messages queued for this session while it was disconnected
        await self._publish_session_retained_messages(client_session)
        await self._client_message_loop(client_session, handler)

    # ------------------------------------------------------------------ debugging
    def check_routes(self) -> None:
        """Check that the routes equal ``broker.subscriptions`` and that the
        per-client index lists exactly each client's filters; ``AssertionError``
        naming the first difference.  O(subscriptions); for tests."""
        want_plain = {
            f for f, entries in self._subscriptions.items() if entries and _share_of(f) is None
        }
        have = self._routes.subscriptions()
        have_plain = {f for f in have if isinstance(f, str)}
        assert have_plain == want_plain, f"routed filters {have_plain ^ want_plain} differ"
        want_members = {
            (f, s.client_id)
            for f, entries in self._subscriptions.items()
            if _share_of(f) is not None
            for s, _ in entries
        }
        have_members = {m for k, subs in have.items() if not isinstance(k, str) for m in subs}
        assert have_members == want_members, f"share members {have_members ^ want_members} differ"
        assert set(self._share_entries) == want_members, "share entries differ"
        # one trie group per share filter, holding exactly that filter's members
        assert set(self._share_groups) == {f for f, _ in want_members}, "share groups differ"
        assert len(set(self._share_groups.values())) == len(self._share_groups), "group reused"
        for key, subs in have.items():
            if not isinstance(key, str):
                for share_filter, _ in subs:
                    assert self._share_groups[share_filter] == key.group, (share_filter, key)
                    assert split_shared(MQTT, share_filter)[0] == key.pattern, (share_filter, key)
        by_client: dict[str, set[str]] = {}
        for f, entries in self._subscriptions.items():
            for s, _ in entries:
                by_client.setdefault(s.client_id or "", set()).add(f)
        mine = {c: set(fs) for c, fs in self._filters_by_client.items()}
        assert mine == by_client, "the per-client filter index differs"
        shares = {c: sum(_share_of(f) is not None for f in fs) for c, fs in by_client.items()}
        shares = {c: n for c, n in shares.items() if n}
        assert self._shares_by_client == shares, "the per-client share counts differ"
        self._routes.check_invariants()


def main() -> None:
    """``python -m cstrie.integrations.amqtt``: amqtt's ``amqtt`` command
    (same options: ``-c config.yaml``, ``-d``) running a :class:`CstrieBroker`."""
    from amqtt.scripts import broker_script

    broker_script.Broker = CstrieBroker
    broker_script.main()


if __name__ == "__main__":
    main()
