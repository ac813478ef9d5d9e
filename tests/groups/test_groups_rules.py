"""Share groups (MQTT 5 shared subscriptions, NATS queue groups), rule by rule.

Written from the specifications, not from the code:

* OASIS MQTT Version 5.0, 4.8.2 "Shared Subscriptions": ``$share/{ShareName}/{filter}``;
  the ShareName is at least one character (MQTT-4.8.2-1) and holds no ``/``, ``+``
  or ``#`` (MQTT-4.8.2-2); a filter follows it and is an ordinary topic filter
  (4.7), so every filter rule applies to it, the ``$`` rule (4.7.2) included; a
  message goes to one session of each share group.
* NATS queue groups: one member per queue name per message; nats.go's
  ``badQueue`` rejects a queue name holding whitespace.
* cstrie's rules 1-5 in ``cstrie/groups.py`` (docs/shared-subscriptions.md):
  one delivery per group name per message however many of its filters match,
  chosen among the union of its members on them;
  ``lookup``/``match``/``has_subscribers`` keep their meaning; the policies
  (round-robin, random, sticky by rendezvous hashing); a group without members
  leaves no trace; snapshots, copies, ``clear``; reference counts.

Tests that change a trie run the engine's invariant checker
(``check_invariants()``); a rejected call must leave the trie exactly as it
was (``unchanged``: pairs, counts, registry size).  Tree views and export/load
keep memberships (export format version 2).
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from helpers import Sub, run_threads

from cstrie.dialect import Dialect
from cstrie.groups import Group, Shared
from cstrie.trie import Snapshot, Trie

# ------------------------------------------------------------------ helpers


def state(t: Trie) -> tuple[Any, ...]:
    """Everything a rejected call must leave as it was: the pairs, the counts,
    the registry's size (a group made for nothing would show there)."""
    s = t.stats()
    # reads count lookups, stats() itself takes a snapshot (a generation),
    # engine memory is process-wide
    del s["lookups"], s["generation"], s["engine_bytes"]
    return len(t), sorted(map(repr, t)), s, len(t._reg)


@contextmanager
def unchanged(t: Trie) -> Iterator[None]:
    before = state(t)
    yield
    assert state(t) == before
    t.check_invariants()


def populated(dialect: str | Dialect = "mqtt") -> Trie:
    """A trie with ordinary subscriptions and memberships, for 'unchanged' checks."""
    t = Trie(dialect)
    d = t.dialect
    sep, one = d.separator, d.single or "x"
    t.subscribe(sep.join(["a", one]), "o1")
    t.subscribe(sep.join(["a", "b"]), "o2")
    t.subscribe(sep.join(["a", one]), "m1", group="g")
    t.subscribe(sep.join(["a", "b"]), "m2", group="g")
    t.subscribe(sep.join(["a", "b"]), "m3", group="h")
    t.check_invariants()
    return t


def picks(route: Callable[[], dict[str, Any]], group: str, n: int) -> list[Any]:
    """The member ``group`` got in each of ``n`` routes."""
    return [route()[group] for _ in range(n)]


def in_turn(seq: list[Any], members: set[Any]) -> bool:
    """Every window of len(members) consecutive picks names each member once."""
    n = len(members)
    return all(set(seq[i : i + n]) == members for i in range(len(seq) - n + 1))


# ============================================================ MQTT 5 (4.8.2)


def test_share_syntax_makes_a_membership_on_the_inner_filter() -> None:
    t = Trie("mqtt")
    assert t.subscribe("$share/workers/sensors/+", "w") is True
    assert t.subscribe("$share/workers/sensors/+", "w") is False  # already a member
    assert t.route("sensors/t1") == ["w"]
    assert t.route_by_group("sensors/t1") == ([], {"workers": "w"})
    assert t.route("sensors/t1/x") == [] and t.route("sensors") == []
    assert list(t) == [(Shared("sensors/+", "workers"), "w")]
    assert len(t) == 1
    # the filter is "sensors/+", not "$share/workers/sensors/+"
    assert t.route("$share/workers/sensors/t1") == []
    t.check_invariants()


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("$share", "ShareName"),
        ("$share/", "ShareName"),
        ("$share/g", "filter"),
        ("$share//a", "ShareName"),
        ("$share//", "ShareName"),
        ("$share/g/", "filter"),
        ("$share/a+b/x", r"\+"),
        ("$share/+/x", r"\+"),
        ("$share/#/x", "#"),
        ("$share/g#/x", "#"),
        ("$share/\x00/x", "U\\+0000"),
    ],
)
def test_malformed_share_subscriptions_are_rejected_and_change_nothing(
    pattern: str, problem: str
) -> None:
    t = populated()
    with unchanged(t):
        with pytest.raises(ValueError, match=problem):
            t.subscribe(pattern, "new")
        with pytest.raises(ValueError, match=problem):
            t.subscribe(pattern, "m1")  # an existing member: no different
        with pytest.raises(ValueError, match=problem):
            t.unsubscribe(pattern, "m1")
        with pytest.raises(ValueError, match=problem):
            t.subscribers(pattern)


@pytest.mark.parametrize("name", ["a/b", "+", "a+", "#", "x#y", "/", "", "a\x00", "\ud800"])
def test_share_names_break_the_same_rules_given_as_group_or_shared(name: str) -> None:
    """MQTT-4.8.2-1 and -2 hold for the name however it is given."""
    t = populated()
    with unchanged(t):
        with pytest.raises(ValueError):
            t.subscribe("a/b", "new", group=name)
        with pytest.raises(ValueError):
            t.subscribe(Shared("a/b", name), "new")
        with pytest.raises(ValueError):
            t.unsubscribe("a/b", "m2", group=name)
        with pytest.raises(ValueError):
            t.set_group_policy(name, "random")
        with pytest.raises(ValueError):
            t.group_policy(name)


@pytest.mark.parametrize(
    "inner",
    [
        "a/#/b",  # '#' must be last (MQTT-4.7.1-1)
        "#/",
        "a+",  # '+' must fill its level (MQTT-4.7.1-2)
        "a/b#",
        "+a/b",
        "a/\x00",  # U+0000 (MQTT-4.7.3-2)
        "a" * 65536,  # a UTF-8 string holds at most 65,535 bytes (1.5.4)
        "é" * 32768,
    ],
)
def test_the_inner_filter_obeys_every_filter_rule(inner: str) -> None:
    t = populated()
    with unchanged(t):
        with pytest.raises(ValueError):
            t.subscribe("$share/g/" + inner, "new")
        with pytest.raises(ValueError):
            t.subscribe(inner, "new", group="g")
        with pytest.raises(ValueError):
            t.subscribe(Shared(inner, "g"), "new")
        with pytest.raises(ValueError):
            t.unsubscribe(inner, "m1", group="g")


def test_an_inner_filter_of_65535_bytes_is_a_filter() -> None:
    t = Trie("mqtt")
    longest = "a/" + "b" * 65531 + "/#"
    assert len(longest.encode()) == 65535
    assert t.subscribe(longest, "w", group="g")
    assert t.route("a/" + "b" * 65531) == ["w"]
    assert t.route("a/" + "b" * 65531 + "/x") == ["w"]
    t.check_invariants()


@pytest.mark.parametrize("pattern", ["$shared/x", "$sharex/x", "$SHARE/g/x", "$Share/g/x"])
def test_a_first_level_that_is_not_exactly_share_is_an_ordinary_filter(pattern: str) -> None:
    t = Trie("mqtt")
    assert t.subscribe(pattern, "s")
    assert t.lookup(pattern) == ["s"]  # its own topic: it is a literal filter
    assert t.route(pattern) == ["s"]
    assert t.stats()["shared_subscriptions"] == 0
    assert list(t) == [(pattern, "s")]
    t.check_invariants()


def test_share_below_the_first_level_is_a_literal_word() -> None:
    t = Trie("mqtt")
    assert t.subscribe("a/$share/g/x", "s")
    assert t.lookup("a/$share/g/x") == ["s"]
    assert t.stats()["shared_subscriptions"] == 0


def test_the_dollar_rule_applies_to_the_inner_filter() -> None:
    """4.7.2: a filter starting with a wildcard does not match a topic starting
    with '$'; the filter of a shared subscription is the part after the name."""
    t = Trie("mqtt")
    t.subscribe("$share/all/#", "a")
    t.subscribe("$share/plus/+/x", "p")
    t.subscribe("$share/sys/$SYS/#", "s")
    assert t.route_by_group("$SYS/x") == ([], {"sys": "s"})
    assert t.route_by_group("$SYS") == ([], {"sys": "s"})  # '#' matches the parent
    assert t.route_by_group("$other/x") == ([], {})
    assert t.route_by_group("user/x") == ([], {"all": "a", "plus": "p"})
    t.check_invariants()


def test_multi_level_wildcard_matches_the_parent_for_a_group() -> None:
    t = Trie("mqtt")
    t.subscribe("$share/g/sport/#", "w")
    assert t.route("sport") == ["w"]
    assert t.route("sport/tennis/player1") == ["w"]
    assert t.route("sports") == []


def test_every_ordinary_subscriber_and_one_member_of_each_group() -> None:
    t = Trie("mqtt")
    for o in ("o1", "o2", "o3"):
        t.subscribe("a/+", o)
    t.subscribe("a/#", "o3")  # o3 matches twice: still one ordinary delivery
    for m in ("g1", "g2", "g3"):
        t.subscribe("$share/g/a/+", m)
    for m in ("h1", "h2"):
        t.subscribe("a/b", m, group="h")
    t.subscribe("x/+", "z", group="other")  # does not match a/b
    for _ in range(12):
        got = t.route("a/b")
        ordinary, chosen = t.route_by_group("a/b")
        assert Counter(ordinary) == Counter(t.lookup("a/b")) == Counter(["o1", "o2", "o3"])
        assert got[:3] == t.lookup("a/b")  # the ordinary ones first, as lookup
        assert len(got) == 5
        assert sorted(chosen) == ["g", "h"]
        assert chosen["g"] in {"g1", "g2", "g3"} and chosen["h"] in {"h1", "h2"}
        tail = got[3:]
        assert sum(m in {"g1", "g2", "g3"} for m in tail) == 1
        assert sum(m in {"h1", "h2"} for m in tail) == 1
    t.check_invariants()


def test_one_delivery_per_share_name_however_many_of_its_filters_match() -> None:
    """Rule 1 of cstrie/groups.py: a group on several matching filters delivers
    once, chosen among the union of its members on those filters."""
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "w1")
    t.subscribe("$share/g/a/#", "w2")
    t.subscribe("$share/g/a/b", "w3")
    t.subscribe("$share/g/+/b", "w4")
    t.subscribe("$share/g/c", "w5")  # does not match a/b
    route = lambda: t.route_by_group("a/b")[1]  # noqa: E731
    for _ in range(20):
        got = t.route("a/b")
        assert len(got) == 1 and got[0] in {"w1", "w2", "w3", "w4"}
    # round-robin over the union: every matching member in turn, w5 never
    seq = picks(route, "g", 40)
    assert in_turn(seq, {"w1", "w2", "w3", "w4"})
    # another topic: another union
    seq = picks(lambda: t.route_by_group("a/x")[1], "g", 10)
    assert in_turn(seq, {"w1", "w2"})
    t.check_invariants()


def test_a_member_on_several_matching_filters_is_one_candidate() -> None:
    """The union is a set: a member on two matching filters is not picked twice
    as often."""
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "both")
    t.subscribe("$share/g/a/#", "both")
    t.subscribe("$share/g/a/#", "one")
    seq = picks(lambda: t.route_by_group("a/b")[1], "g", 40)
    assert Counter(seq) == {"both": 20, "one": 20}
    assert in_turn(seq, {"both", "one"})


def test_an_ordinary_subscriber_that_is_also_a_member_gets_both_deliveries() -> None:
    t = Trie("mqtt")
    assert t.subscribe("a/b", "c") is True
    assert t.subscribe("$share/g/a/+", "c") is True  # a membership: new
    assert t.lookup("a/b") == ["c"]
    assert t.route("a/b") == ["c", "c"]
    assert t.route_by_group("a/b") == (["c"], {"g": "c"})
    assert len(t) == 2
    # leaving the group leaves the ordinary subscription, and back
    assert t.unsubscribe("$share/g/a/+", "c") is True
    assert t.route("a/b") == ["c"]
    assert t.subscribe("$share/g/a/+", "c") is True
    assert t.unsubscribe("a/b", "c") is True
    assert t.route("a/b") == ["c"] and t.lookup("a/b") == []
    t.check_invariants()


def test_the_same_filter_ordinary_and_shared_are_two_subscriptions() -> None:
    t = Trie("mqtt")
    assert t.subscribe("a/+", "c") is True
    assert t.subscribe("$share/g/a/+", "c") is True
    assert t.subscribers("a/+") == ["c"]
    assert t.subscribers("a/+", group="g") == ["c"]
    assert t.unsubscribe("a/+", "c") is True
    assert t.unsubscribe("a/+", "c") is False
    assert t.subscribers("a/+", group="g") == ["c"]
    t.check_invariants()


def test_a_member_of_two_groups_gets_one_delivery_per_group() -> None:
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "c")
    t.subscribe("$share/h/a/#", "c")
    assert t.route("a/b") == ["c", "c"]
    assert t.route_by_group("a/b") == ([], {"g": "c", "h": "c"})
    assert t.route("a") == ["c"]  # only h's filter matches "a"
    t.check_invariants()


@pytest.mark.parametrize("how", ["syntax", "group", "shared"])
def test_an_empty_group_delivers_nothing_and_leaves_no_trace(how: str) -> None:
    t = Trie("mqtt")
    t.subscribe("a/+", "o")
    baseline = state(t)
    filters = ["a/+", "a/#", "a/b"]
    members = [Sub(k) for k in range(3)]

    def call(method: Callable[..., bool], f: str, m: Sub) -> bool:
        if how == "syntax":
            return method(f"$share/g/{f}", m)
        if how == "group":
            return method(f, m, group="g")
        return method(Shared(f, "g"), m)

    for f in filters:
        for m in members:
            assert call(t.subscribe, f, m) is True
    assert t.stats()["shared_filters"] == 3
    assert t.stats()["shared_subscriptions"] == 9
    for f in filters:
        for m in members:
            assert call(t.unsubscribe, f, m) is True
            assert call(t.unsubscribe, f, m) is False
    assert t.route("a/b") == ["o"]
    assert t.route_by_group("a/b") == (["o"], {})
    assert t.subscribers("a/+", group="g") == []
    assert state(t) == baseline
    assert t.stats()["shared_filters"] == 0
    assert t._reg.live_objects() == ["o"]  # no group object left mapped
    t.check_invariants()


def test_leaving_a_group_one_never_joined_changes_nothing() -> None:
    t = populated()
    with unchanged(t):
        assert t.unsubscribe("a/+", "m1", group="never") is False  # unknown group
        assert t.unsubscribe("a/+", "nobody", group="g") is False  # unknown member
        assert t.unsubscribe("a/b", "m1", group="g") is False  # member elsewhere
        assert t.unsubscribe("a/+", "m2", group="g") is False
        assert t.unsubscribe("a/+", "m1", group="h") is False  # of another group
        assert t.unsubscribe("$share/g/a/b", "o2") is False  # ordinary, not member
        assert t.unsubscribe("a/+", "m1") is False  # member, not ordinary


# ===================================================================== NATS


def test_nats_queue_groups_on_wildcard_subjects() -> None:
    t = Trie("nats")
    t.subscribe("orders.*", "q1", group="billing")
    t.subscribe("orders.>", "q2", group="billing")
    t.subscribe("orders.>", "s1", group="shipping")
    t.subscribe("orders.*", "plain")
    for _ in range(8):
        ordinary, chosen = t.route_by_group("orders.new")
        assert ordinary == ["plain"]
        assert set(chosen) == {"billing", "shipping"}
        assert chosen["billing"] in {"q1", "q2"} and chosen["shipping"] == "s1"
    # '>' takes one token or more: "orders" alone matches nothing
    assert t.route_by_group("orders") == ([], {})
    # two tokens: only orders.> matches, so only q2 of billing can be chosen
    assert {t.route_by_group("orders.eu.new")[1]["billing"] for _ in range(6)} == {"q2"}
    seq = picks(lambda: t.route_by_group("orders.new")[1], "billing", 10)
    assert in_turn(seq, {"q1", "q2"})
    t.check_invariants()


@pytest.mark.parametrize("name", [" ", "\t", "\r", "\n", "\f", "a b", "work\ters", "q\n", ""])
def test_nats_queue_names_hold_no_whitespace_and_are_not_empty(name: str) -> None:
    t = populated("nats")
    with unchanged(t):
        with pytest.raises(ValueError):
            t.subscribe("a.b", "new", group=name)
        with pytest.raises(ValueError):
            t.subscribe(Shared("a.b", name), "new")
        with pytest.raises(ValueError):
            t.unsubscribe("a.b", "m2", group=name)
        with pytest.raises(ValueError):
            t.subscribers("a.b", group=name)


@pytest.mark.parametrize("name", ["workers.eu", "q*", ">", "a/b", "$share", "#"])
def test_nats_queue_names_may_hold_anything_but_whitespace(name: str) -> None:
    t = Trie("nats")
    assert t.subscribe("a.*", "m", group=name)
    assert t.route_by_group("a.b") == ([], {name: "m"})
    assert t.subscribers("a.*", group=name) == ["m"]
    t.check_invariants()


def test_nats_has_no_share_syntax() -> None:
    t = Trie("nats")
    assert t.subscribe("$share.g.x", "s")
    assert t.lookup("$share.g.x") == ["s"]
    assert t.stats()["shared_subscriptions"] == 0


# ============================================================ AMQP / custom


def test_amqp_groups_with_hash_anywhere() -> None:
    t = Trie("amqp")
    t.subscribe("a.#.b", "m1", group="g")
    t.subscribe("#.b", "m2", group="g")
    t.subscribe("#", "all", group="h")
    t.subscribe("#.#", "twice", group="hh")
    t.subscribe("", "empty", group="e")
    for topic in ("a.b", "a.x.y.b", "b", "x.b"):
        ordinary, chosen = t.route_by_group(topic)
        assert ordinary == []
        assert chosen.keys() == {"g", "h", "hh"}, topic
    seq = picks(lambda: t.route_by_group("a.x.b")[1], "g", 10)
    assert in_turn(seq, {"m1", "m2"})
    assert {t.route_by_group("x.b")[1]["g"] for _ in range(6)} == {"m2"}
    assert t.route_by_group("a") == ([], {"h": "all", "hh": "twice"})
    assert t.route_by_group("") == ([], {"h": "all", "hh": "twice", "e": "empty"})
    t.check_invariants()


def test_amqp_has_no_share_syntax_and_group_names_are_free_text() -> None:
    t = Trie("amqp")
    assert t.subscribe("$share.g.x", "s")
    assert t.lookup("$share.g.x") == ["s"]
    for name in ("a.b", "*", "#", "a/b+#"):
        assert t.subscribe("q.*", "m", group=name)
    assert t.route_by_group("q.1")[1] == {n: "m" for n in ("a.b", "*", "#", "a/b+#")}
    with pytest.raises(ValueError):
        t.subscribe("q.*", "m", group="")
    t.check_invariants()


SLASHES = Dialect(name="slashes", separator="::", single="<1>", multi="<*>", share_prefix="$queue")


def test_custom_dialect_with_a_share_prefix() -> None:
    t = Trie(SLASHES)
    assert t.subscribe("$queue::g::a::<*>::z", "m1")
    assert t.subscribe("a::<1>::z", "m2", group="g")
    assert t.subscribe("a:b::c", "m3", group="a:b")  # one colon is not the separator
    ordinary, chosen = t.route_by_group("a::x::z")
    assert ordinary == [] and chosen.keys() == {"g"}
    seq = picks(lambda: t.route_by_group("a::x::z")[1], "g", 6)
    assert in_turn(seq, {"m1", "m2"})
    assert t.route_by_group("a::x::y::z")[1] == {"g": "m1"}
    assert t.route("a:b::c") == ["m3"]
    assert t.subscribers("$queue::a:b::a:b::c") == ["m3"]
    for bad in (
        "$queue",
        "$queue::",
        "$queue::::x",
        "$queue::g",
        "$queue::g::",
        "$queue::<1>::x",
        "$queue::x<*>::y",
    ):
        with unchanged(t), pytest.raises(ValueError):
            t.subscribe(bad, "m")
    for bad_name in ("x::y", "<1>", "a<*>"):
        with pytest.raises(ValueError):
            t.subscribe("a", "m", group=bad_name)
    t.check_invariants()


def test_custom_dialect_without_a_share_prefix_uses_group() -> None:
    d = Dialect(name="glob", separator="/", single="?", multi="**")
    t = Trie(d)
    assert t.subscribe("$share/g/x", "plain")  # no share syntax: a literal filter
    assert t.lookup("$share/g/x") == ["plain"]
    assert t.subscribe("**/x", "m", group="g")
    assert t.route_by_group("$share/g/x") == (["plain"], {"g": "m"})
    t.check_invariants()


# ================================================= unchanged read meanings


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_lookup_match_and_has_subscribers_never_see_members(dialect: str) -> None:
    t = populated(dialect)
    sep = t.dialect.separator
    ab = sep.join(["a", "b"])
    ac = sep.join(["a", "c"])
    assert Counter(t.lookup(ab)) == Counter(["o1", "o2"])
    assert Counter(t.lookup(ac)) == Counter(["o1"])
    assert {s for _, s in t.match(ab)} == {"o1", "o2"}
    assert t.lookup_many([ab, ac]) == [t.lookup(ab), t.lookup(ac)]
    only = Trie(dialect)
    only.subscribe(ab, "m", group="g")
    assert only.lookup(ab) == [] and only.match(ab) == []
    assert only.has_subscribers(ab) is False
    assert only.lookup_many([ab]) == [[]]
    assert only.subscribers(ab) == []
    assert only.route(ab) == ["m"]
    snap = only.snapshot()
    assert snap.lookup(ab) == [] and snap.has_subscribers(ab) is False
    assert snap.route(ab) == ["m"]


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
def test_route_without_groups_is_lookup(dialect: str) -> None:
    t = Trie(dialect)
    d = t.dialect
    sep, one, many = d.separator, d.single, d.multi
    pats = ["a", sep.join(["a", "b"]), sep.join(["a", one]), sep.join([one, "b"])]
    pats += [sep.join(["a", many]), many, sep.join([one, one])]
    for k, p in enumerate(pats):
        t.subscribe(p, f"s{k}")
        t.subscribe(p, "common")
    t.subscribe(sep.join(["z", one]), "zm", group="g")  # a group elsewhere
    for topic in ("a", sep.join(["a", "b"]), sep.join(["x", "b"]), sep.join(["a", "b", "c"])):
        assert t.route(topic) == t.lookup(topic), topic
        assert t.route_by_group(topic) == (t.lookup(topic), {})
        assert t.route(topic, key="k") == t.lookup(topic)
    assert t.route_many(["a", "q"]) == t.lookup_many(["a", "q"])


# ================================================================= policies


def test_round_robin_visits_every_member_in_turn() -> None:
    t = Trie("mqtt")
    members = {f"w{k}" for k in range(4)}
    for m in sorted(members):
        t.subscribe("$share/g/jobs/+", m)
    assert t.group_policy("g") == "round-robin"  # the default
    k = 25
    seq = picks(lambda: t.route_by_group("jobs/1")[1], "g", k * len(members))
    assert Counter(seq) == dict.fromkeys(members, k)
    assert in_turn(seq, members)
    # route(), route_many() and route_by_group() draw from the same sequence
    mixed: list[Any] = []
    for _ in range(k):
        mixed += t.route("jobs/2")
        mixed += [row[0] for row in t.route_many(["jobs/3", "jobs/4"])]
        mixed.append(t.route_by_group("jobs/5")[1]["g"])
    assert Counter(mixed) == dict.fromkeys(members, k)
    assert in_turn(mixed, members)


def test_round_robin_stays_fair_with_many_ordinary_subscribers() -> None:
    """A route whose answer is long (hundreds of ordinary subscribers) still
    makes one pick per message."""
    t = Trie("mqtt")
    for k in range(600):
        t.subscribe("jobs/+", f"o{k}")
    members = {"w0", "w1", "w2"}
    for m in members:
        t.subscribe("jobs/#", m, group="g")
    seq = picks(lambda: t.route_by_group("jobs/1")[1], "g", 30)
    assert Counter(seq) == dict.fromkeys(members, 10)
    assert in_turn(seq, members)
    tails = [t.route("jobs/1")[600:] for _ in range(30)]
    assert all(len(tail) == 1 for tail in tails)
    assert in_turn([tail[0] for tail in tails], members)


@pytest.mark.parametrize("n", [2, 3, 17, 100])
def test_round_robin_over_groups_of_every_size(n: int) -> None:
    """Small groups keep their members in the node; big ones in a set: both
    give every member in turn."""
    t = Trie("amqp")
    members = {Sub(k) for k in range(n)}
    for m in members:
        t.subscribe("jobs.*", m, group="g")
    seq = picks(lambda: t.route_by_group("jobs.1")[1], "g", 3 * n)
    assert Counter(seq) == dict.fromkeys(members, 3)
    assert in_turn(seq, members)
    # on two matching filters (the union) as well
    for m in members:
        t.subscribe("jobs.#", m, group="g")
    seq = picks(lambda: t.route_by_group("jobs.1")[1], "g", 3 * n)
    assert Counter(seq) == dict.fromkeys(members, 3)


def test_hundreds_of_groups_in_one_route() -> None:
    t = Trie("nats")
    for k in range(300):
        t.subscribe("a.*", f"m{k}", group=f"g{k}")
        t.subscribe("a.>", f"o{k}")
    ordinary, chosen = t.route_by_group("a.b")
    assert Counter(ordinary) == Counter(f"o{k}" for k in range(300))
    assert chosen == {f"g{k}": f"m{k}" for k in range(300)}
    got = t.route("a.b")
    assert len(got) == 600 and Counter(got[300:]) == Counter(f"m{k}" for k in range(300))


def test_equal_members_are_one_member() -> None:
    t = Trie("mqtt")
    a, b = Sub("n"), Sub("n")  # equal, distinct objects
    assert t.subscribe("$share/g/x", a) is True
    assert t.subscribe("$share/g/x", b) is False
    assert t.route("x")[0] is a
    assert t.unsubscribe("x", b, group="g") is True
    assert t.route("x") == [] and len(t._reg) == 0
    t.check_invariants()


def test_round_robin_is_shared_by_threads() -> None:
    """The counter is one sequence: two threads routing at once make k*n picks
    between them, each member exactly k times."""
    t = Trie("nats")
    members = {f"w{k}" for k in range(5)}
    for m in members:
        t.subscribe("jobs.*", m, group="g")
    out: list[list[Any]] = [[], []]

    def worker(i: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(5000):
                out[i].append(t.route("jobs.x")[0])

        return run

    run_threads([worker(0), worker(1)])
    assert Counter(out[0] + out[1]) == dict.fromkeys(members, 2000)


def test_random_stays_within_the_members_and_is_roughly_uniform() -> None:
    t = Trie("mqtt")
    members = {"r0", "r1", "r2", "r3"}
    for m in members:
        t.subscribe("$share/g/a/+", m)
    t.subscribe("$share/g/other", "never")
    t.set_group_policy("g", "random")
    assert t.group_policy("g") == "random"
    n = 20000
    counts = Counter(t.route("a/b")[0] for _ in range(n))
    assert set(counts) == members
    # even is 5,000 each, sd ~61: 20% off is 16 sd, never by chance
    for m in members:
        assert 0.8 * n / 4 <= counts[m] <= 1.2 * n / 4, counts


def test_random_picks_are_not_a_fixed_sequence() -> None:
    t = Trie("nats")
    for m in ("a", "b"):
        t.subscribe("x.*", m, group="g")
    t.set_group_policy("g", "random")
    seq = [t.route("x.y")[0] for _ in range(400)]
    # round-robin would alternate; a random stream repeats a pick often
    assert any(seq[i] == seq[i + 1] for i in range(len(seq) - 1))


def test_sticky_sends_the_same_key_to_the_same_member() -> None:
    t = Trie("mqtt")
    for k in range(5):
        t.subscribe("$share/g/dev/+", f"w{k}")
    t.set_group_policy("g", "sticky")
    for key in ("alpha", b"beta", 7, -3, 2**100):
        got = {t.route("dev/1", key=key)[0] for _ in range(50)}
        assert len(got) == 1, key
        # the key decides, not the topic
        assert {t.route(f"dev/{n}", key=key)[0] for n in range(20)} == got
    # no key: the topic's UTF-8 is the key
    for topic in ("dev/1", "dev/é", "dev/2"):
        first = t.route(topic)
        assert all(t.route(topic) == first for _ in range(20))
        assert t.route(topic, key=topic.encode()) == first
        assert t.route(topic, key=None) == first

    # the same answer whichever way the call is written
    class Topic(str):
        pass

    for key in ("alpha", 7):
        first = t.route("dev/1", key)
        assert t.route("dev/1", key=key) == first
        assert t.route(Topic("dev/1"), key) == first
        assert t.route_by_group(Topic("dev/1"), key=key) == ([], {"g": first[0]})
        assert t.snapshot().route("dev/1", key) == first
    # and the keys spread over the members
    spread = Counter(t.route("dev/1", key=k)[0] for k in range(1000))
    assert len(spread) == 5 and min(spread.values()) >= 100, spread


def test_sticky_moves_only_the_keys_of_a_member_that_leaves() -> None:
    t = Trie("nats")
    members = [f"w{k}" for k in range(6)]
    for m in members:
        t.subscribe("dev.*", m, group="g")
    t.set_group_policy("g", "sticky")
    keys = [f"key-{n}" for n in range(1000)]
    before = {k: t.route("dev.1", key=k)[0] for k in keys}
    assert set(before.values()) == set(members)
    assert t.unsubscribe("dev.*", "w2", group="g")
    after = {k: t.route("dev.1", key=k)[0] for k in keys}
    for k in keys:
        if before[k] == "w2":
            assert after[k] != "w2" and after[k] in members
        else:
            assert after[k] == before[k], k
    moved = Counter(after[k] for k in keys if before[k] == "w2")
    assert len(moved) >= 3  # spread over the others, not all onto one
    # a member joining takes keys only to itself (rendezvous hashing)
    t.subscribe("dev.*", "new", group="g")
    joined = {k: t.route("dev.1", key=k)[0] for k in keys}
    assert all(joined[k] in (after[k], "new") for k in keys)
    assert "new" in joined.values()
    t.check_invariants()


def test_sticky_leaving_member_on_one_of_two_filters() -> None:
    """A member still on another matching filter stays a candidate."""
    t = Trie("mqtt")
    t.set_group_policy("g", "sticky")
    for m in ("w0", "w1", "w2"):
        t.subscribe("$share/g/a/+", m)
    t.subscribe("$share/g/a/#", "w1")
    keys = range(300)
    before = {k: t.route("a/b", key=k)[0] for k in keys}
    t.unsubscribe("$share/g/a/+", "w1")  # still a member through a/#
    assert {k: t.route("a/b", key=k)[0] for k in keys} == before


def test_sticky_with_a_big_group() -> None:
    t = Trie("amqp")
    t.set_group_policy("g", "sticky")
    members = [Sub(k) for k in range(100)]
    for m in members:
        t.subscribe("x", m, group="g")
    before = {k: t.route("x", key=k)[0] for k in range(2000)}
    assert len(set(before.values())) > 80
    gone = before[0]
    t.unsubscribe("x", gone, group="g")
    after = {k: t.route("x", key=k)[0] for k in range(2000)}
    assert all(after[k] == before[k] for k in before if before[k] != gone)
    assert all(after[k] != gone for k in after)


@pytest.mark.parametrize("policy", ["fifo", "", "Round-Robin", "round_robin", "sticky "])
def test_unknown_policies_are_rejected(policy: str) -> None:
    t = populated()
    t.set_group_policy("g", "random")
    with unchanged(t):
        with pytest.raises(ValueError, match="policy"):
            t.set_group_policy("g", policy)
        with pytest.raises(ValueError, match="policy"):
            t.set_group_policy("fresh", policy)
    assert t.group_policy("g") == "random"
    assert t.group_policy("fresh") == "round-robin"


def test_group_policy_validates_the_group_name() -> None:
    t = Trie("mqtt")
    with pytest.raises(TypeError):
        t.set_group_policy(5, "random")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        t.group_policy(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        t.set_group_policy("a/b", "random")


def test_a_policy_survives_the_group_emptying_and_forming_again() -> None:
    t = Trie("mqtt")
    t.set_group_policy("g", "sticky")  # set before the group exists
    assert t.group_policy("g") == "sticky"
    for m in ("a", "b", "c"):
        t.subscribe("$share/g/x", m)
    assert len({t.route("x", key="k")[0] for _ in range(30)}) == 1
    for m in ("a", "b", "c"):
        t.unsubscribe("$share/g/x", m)
    assert len(t._reg) == 0  # the group itself is gone
    assert t.group_policy("g") == "sticky"
    for m in ("a", "b", "c"):
        t.subscribe("$share/g/y", m)
    assert t.group_policy("g") == "sticky"
    assert len({t.route("y", key="k")[0] for _ in range(30)}) == 1  # not in turn
    t.set_group_policy("g", "round-robin")
    assert in_turn([t.route("y", key="k")[0] for _ in range(9)], {"a", "b", "c"})
    t.check_invariants()


def test_policies_belong_to_the_family() -> None:
    t = Trie("nats")
    t.subscribe("x.*", "a", group="g")
    t.subscribe("x.*", "b", group="g")
    snap, dup = t.snapshot(), t.copy()
    t.set_group_policy("g", "sticky")
    assert snap.group_policy("g") == dup.group_policy("g") == "sticky"
    assert len({snap.route("x.1", key=1)[0] for _ in range(10)}) == 1
    dup.set_group_policy("g", "random")
    assert t.group_policy("g") == "random"
    other = Trie("nats")  # another family: its own policies
    assert other.group_policy("g") == "round-robin"


# ======================================================= snapshots, copies


def test_a_snapshot_routes_to_the_members_it_saw() -> None:
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "w1")
    t.subscribe("$share/g/a/+", "w2")
    snap = t.snapshot()
    t.unsubscribe("$share/g/a/+", "w1")
    t.unsubscribe("$share/g/a/+", "w2")
    t.subscribe("$share/g/a/+", "late")
    assert t.route("a/b") == ["late"]
    seq = [snap.route_by_group("a/b")[1]["g"] for _ in range(10)]
    assert in_turn(seq, {"w1", "w2"})
    assert sorted(map(repr, snap)) == sorted(
        map(repr, [(Shared("a/+", "g"), "w1"), (Shared("a/+", "g"), "w2")])
    )
    assert sorted(snap.subscribers("a/+", group="g")) == ["w1", "w2"]
    assert len(snap) == 2
    snap.check_invariants()
    t.unsubscribe("$share/g/a/+", "late")
    del snap
    gc.collect()
    assert len(t._reg) == 0
    t.check_invariants()


def test_a_snapshot_keeps_a_group_that_emptied_in_the_live_trie() -> None:
    t = Trie("nats")
    t.subscribe("a.*", "only", group="g")
    snap = t.snapshot()
    t.unsubscribe("a.*", "only", group="g")
    assert t.route("a.b") == [] and t.stats()["shared_filters"] == 0
    assert snap.route_by_group("a.b") == ([], {"g": "only"})
    assert snap.stats()["shared_filters"] == 1
    # the name joins again while the snapshot is open
    t.subscribe("a.*", "again", group="g")
    assert t.route_by_group("a.b") == ([], {"g": "again"})
    assert snap.route_by_group("a.b") == ([], {"g": "only"})
    t.check_invariants()


def test_copies_keep_memberships_and_diverge() -> None:
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "w1")
    t.subscribe("a/b", "o")
    dup = t.copy()
    assert dup.route_by_group("a/b") == (["o"], {"g": "w1"})
    assert dup.subscribe("$share/g/a/#", "w2") is True
    assert dup.subscribe("$share/h/a/b", "w3") is True
    for _ in range(4):
        assert t.route_by_group("a/b") == (["o"], {"g": "w1"})
    assert t.subscribers("a/#", group="g") == [] and len(t) == 2
    assert t.unsubscribe("$share/g/a/+", "w1") is True
    assert t.route("a/b") == ["o"]
    assert {dup.route_by_group("a/b")[1]["g"] for _ in range(4)} == {"w1", "w2"}
    assert dup.route_by_group("a/b")[1]["h"] == "w3"
    assert len(dup) == 4
    t.check_invariants()
    dup.check_invariants()
    # a copy of a snapshot keeps them too
    snap = dup.snapshot()
    dup.clear()
    again = snap.copy()
    assert Counter(again.subscriptions()) == Counter(snap.subscriptions())
    assert again.route_by_group("a/b")[1].keys() == {"g", "h"}
    del snap
    again.clear()
    t.clear()
    gc.collect()
    assert len(t._reg) == 0


def test_clear_removes_memberships_and_frees_the_group_ids() -> None:
    t = Trie("mqtt")
    for k in range(5):
        t.subscribe(f"$share/g{k % 2}/a/+", f"w{k}")
        t.subscribe("a/#", f"o{k}")
    dup = t.copy()
    t.clear()
    assert len(t) == 0 and t.route("a/b") == [] and list(t) == []
    assert t.stats()["shared_subscriptions"] == t.stats()["shared_filters"] == 0
    assert dup.route_by_group("a/b")[1].keys() == {"g0", "g1"}  # the copy keeps them
    assert len(t._reg) > 0
    dup.clear()
    assert len(t._reg) == 0 and t._reg.live_objects() == []
    t.check_invariants()
    dup.check_invariants()
    # and the groups form again
    t.subscribe("$share/g0/a/+", "w")
    assert t.route("a/b") == ["w"]


def test_iteration_and_subscriptions_show_shared_keys() -> None:
    t = Trie("mqtt")
    t.subscribe("a/+", "o")
    t.subscribe("$share/g/a/+", "m1")
    t.subscribe("a/+", "m2", group="g")
    t.subscribe(Shared("a/+", "h"), "m1")
    pairs = list(t)
    assert len(pairs) == len(t) == 4
    assert Counter(pairs) == Counter(
        [
            ("a/+", "o"),
            (Shared("a/+", "g"), "m1"),
            (Shared("a/+", "g"), "m2"),
            (Shared("a/+", "h"), "m1"),
        ]
    )
    for key, _ in pairs:
        assert type(key) is str or type(key) is Shared
    subs = t.subscriptions()
    assert subs.keys() == {"a/+", Shared("a/+", "g"), Shared("a/+", "h")}
    assert type(next(k for k in subs if k == "a/+")) is str
    assert sorted(subs[Shared("a/+", "g")]) == ["m1", "m2"]
    assert subs["a/+"] == ["o"] and subs[Shared("a/+", "h")] == ["m1"]
    st = t.stats()
    assert st["subscriptions"] == 4
    assert st["shared_subscriptions"] == 3 and st["shared_filters"] == 2
    assert st["subscribers"] == 3  # o, m1, m2: a group is not a subscriber


@pytest.mark.parametrize("reader", ["trie", "snapshot"])
def test_three_ways_to_ask_for_a_groups_members_agree(reader: str) -> None:
    t = Trie("mqtt")
    t.subscribe("$share/g/a/+", "m1")
    t.subscribe("$share/g/a/+", "m2")
    t.subscribe("$share/g/a/#", "m3")
    t.subscribe("$share/h/a/+", "m4")
    t.subscribe("a/+", "o")
    r: Trie | Snapshot = t if reader == "trie" else t.snapshot()
    ways = [
        r.subscribers(Shared("a/+", "g")),
        r.subscribers("$share/g/a/+"),
        r.subscribers("a/+", group="g"),
    ]
    assert all(sorted(w) == ["m1", "m2"] for w in ways), ways
    assert r.subscribers("a/+") == ["o"]
    assert r.subscribers("a/#", group="g") == ["m3"]
    assert r.subscribers("a/b", group="g") == []  # wildcards are not expanded
    assert r.subscribers("a/+", group="never") == []
    assert r.subscribers("$share/h/a/+") == ["m4"]


# ==================================================================== errors


def test_an_unhashable_member_is_a_type_error_and_changes_nothing() -> None:
    t = populated()
    with unchanged(t):
        for call in (
            lambda: t.subscribe("$share/g/a/+", []),
            lambda: t.subscribe("$share/new/a/+", {}),
            lambda: t.subscribe("a/+", [], group="g"),
            lambda: t.subscribe("a/+", [], group="brand-new"),
            lambda: t.subscribe(Shared("a/+", "other"), set()),
            lambda: t.unsubscribe("$share/g/a/+", []),
            lambda: t.unsubscribe("a/+", [], group="unknown"),
        ):
            with pytest.raises(TypeError):
                call()
    assert t.group_policy("brand-new") == "round-robin"


@pytest.mark.parametrize("group", [5, b"g", ("g",), 1.0])
def test_a_group_that_is_not_a_str_is_a_type_error(group: Any) -> None:
    t = populated()
    with unchanged(t):
        with pytest.raises(TypeError):
            t.subscribe("a/+", "m", group=group)
        with pytest.raises(TypeError):
            t.subscribe(Shared("a/+", group), "m")
        with pytest.raises(TypeError):
            t.unsubscribe("a/+", "m1", group=group)
        with pytest.raises(TypeError):
            t.subscribers("a/+", group=group)


def test_naming_the_group_twice_is_a_value_error() -> None:
    t = populated()
    with unchanged(t):
        with pytest.raises(ValueError):
            t.subscribe("$share/g/a/+", "m", group="g")
        with pytest.raises(ValueError):
            t.subscribe("$share/g/a/+", "m", group="h")
        with pytest.raises(ValueError):
            t.subscribe(Shared("a/+", "g"), "m", group="g")
        with pytest.raises(ValueError):
            t.unsubscribe("$share/g/a/+", "m1", group="g")
        with pytest.raises(ValueError):
            t.subscribers("$share/g/a/+", group="g")


@pytest.mark.parametrize("key", [1.5, [1], ("k",), object()])
def test_a_route_key_of_another_type_is_a_type_error(key: Any) -> None:
    t = populated()
    t.set_group_policy("h", "sticky")
    empty = Trie("mqtt")
    for r in (t, t.snapshot(), empty):
        with pytest.raises(TypeError):
            r.route("a/b", key)
        with pytest.raises(TypeError):
            r.route("a/b", key=key)
        with pytest.raises(TypeError):
            r.route_by_group("a/b", key)
        with pytest.raises(TypeError):
            r.route_many(["a/b"], [key])


def test_route_checks_its_topic_like_lookup() -> None:
    t = populated()
    for bad in ("a/+", "a/#", "", "a\x00"):
        with pytest.raises(ValueError):
            t.lookup(bad)
        with pytest.raises(ValueError):
            t.route(bad)
        with pytest.raises(ValueError):
            t.route_by_group(bad)
    for bad_type in (None, b"a/b", 5):
        with pytest.raises(TypeError):
            t.route(bad_type)  # type: ignore[arg-type]


def test_route_many_is_a_route_per_topic() -> None:
    t = populated()
    t.set_group_policy("g", "sticky")
    t.set_group_policy("h", "sticky")
    topics = ["a/b", "a/c", "q", "a/b"]
    assert t.route_many(topics) == [t.route(x) for x in topics]
    keys: list[object] = ["k1", b"k2", 3, None]
    assert t.route_many(topics, keys) == [t.route(x, k) for x, k in zip(topics, keys, strict=True)]


# ========================================================== reference counts


def _cycles(
    t: Trie, members: list[object], names: list[str], keys: list[object], topic: str
) -> None:
    """Join, route (200,000 routes in all, every policy, snapshots too), leave."""
    for r in range(20):
        for i, m in enumerate(members):
            for j, name in enumerate(names):
                if (i + j + r) % 3:
                    t.subscribe(f"$share/{name}/a/+", m)
                    t.subscribe("a/#", m, group=name)
        snap = t.snapshot() if r % 4 == 0 else None
        for n in range(2500):
            t.route(topic)
            t.route(topic, keys[n % 3])
            t.route_by_group(topic, keys[(n + 1) % 3])
            if snap is not None:
                snap.route(topic, keys[n % 3])
            else:
                t.route_many([topic], [keys[n % 3]])
        for m in members:
            for name in names:
                t.unsubscribe(Shared("a/+", name), m)
                t.unsubscribe(f"$share/{name}/a/#", m)


def test_join_route_leave_cycles_leave_reference_counts_as_they_were() -> None:
    t = Trie("mqtt")
    t.subscribe("a/#", "anchor")
    # objects made at run time (not interned, not cached small ints)
    members: list[object] = [Sub(k) for k in range(4)] + ["".join(["mem", "ber"]), 10**30]
    names = ["".join(["gr", "oup", str(k)]) for k in range(3)]
    keys: list[object] = ["".join(["ke", "y"]), b"".join([b"by", b"tes"]), 10**25]
    topic = "".join(["a/", "b"])
    t.set_group_policy(names[1], "random")
    t.set_group_policy(names[2], "sticky")
    watched: list[object] = [*members, *names, *keys, topic]
    gc.collect()
    baseline = [sys.getrefcount(o) for o in watched]
    _cycles(t, members, names, keys, topic)
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == baseline
    assert t._reg.live_objects() == ["anchor"]
    t.check_invariants()


# ============================================ linearizable picks (groups.py rule 3)


def test_a_route_never_returns_the_object_that_took_a_leaving_members_id() -> None:
    """The race hook runs 'another thread' after the engine picked and before
    the ids are mapped: w1 leaves (its id is freed) and a newcomer arrives;
    the route's read section keeps w1's slot from it.  The route must answer
    for one moment: never the newcomer (it runs again, after w1 left)."""
    t = Trie("nats")
    t.subscribe("a.*", "w1", group="g")
    t.subscribe("a.*", "w2", group="g")
    t.set_group_policy("g", "sticky")
    key = next(k for k in range(1000) if t.route("a.b", k) == ["w1"])
    w1_id = t._reg.existing_id("w1")
    done: list[int] = []

    def hook(attempt: int) -> None:
        done.append(attempt)
        if len(done) == 1:
            t.unsubscribe("a.*", "w1", group="g")
            t.subscribe("elsewhere", "newcomer")
            assert t._reg.existing_id("newcomer") != w1_id

    t._set_race_hook(hook)
    got = t.route("a.b", key)
    t._set_race_hook(None)
    assert got == ["w2"]
    assert len(done) >= 2
    t.check_invariants()


def test_routes_racing_joins_and_leaves_pick_only_members() -> None:
    """Threads join and leave (a group's members and ordinary subscribers that
    take freed ids) while others route: each route delivers exactly one member
    of the group (a steady member is always there) and never anything else."""
    t = Trie("mqtt")
    steady = Sub("steady")
    t.subscribe("$share/g/a/+", steady)
    members = {steady} | {Sub(f"m{k}") for k in range(4)}
    seen: set[Any] = set()

    def churn() -> None:
        for n in range(1500):
            m = Sub(f"m{n % 4}")
            t.subscribe("$share/g/a/#", m)
            t.subscribe(f"z/{n % 7}", Sub(f"z{n}"))  # takes freed ids
            t.unsubscribe("$share/g/a/#", m)
            t.unsubscribe(f"z/{n % 7}", Sub(f"z{n}"))

    def route() -> None:
        for n in range(3000):
            ordinary, chosen = t.route_by_group("a/b", n)
            assert ordinary == [] and chosen.keys() == {"g"}
            seen.add(chosen["g"])
            got = t.route("a/b")
            assert len(got) == 1 and got[0] in members, got

    t.set_group_policy("g", "random")
    run_threads([churn, route])
    assert seen <= members
    assert t.route("a/b") == [steady]
    live = t._reg.live_objects()
    assert {o for o in live if not isinstance(o, Group)} == {steady}
    assert [o.name for o in live if isinstance(o, Group)] == ["g"]
    t.check_invariants()


def test_a_route_never_maps_a_reused_group_id() -> None:
    """The group's last member leaves under the route: the group's id is freed
    and an ordinary subscriber takes it."""
    t = Trie("nats")
    t.subscribe("a.*", "w1", group="g")
    done: list[int] = []

    def hook(attempt: int) -> None:
        done.append(attempt)
        if len(done) == 1:
            t.unsubscribe("a.*", "w1", group="g")
            assert len(t._reg) == 0
            t.subscribe("x", "p1")
            t.subscribe("y", "p2")

    t._set_race_hook(hook)
    got = t.route_by_group("a.b")
    t._set_race_hook(None)
    assert got == ([], {})
    assert len(done) >= 2
    t.check_invariants()


# ============================== other views of a trie that holds memberships


def test_a_trie_with_memberships_round_trips_through_from_pairs() -> None:
    t = Trie("mqtt")
    t.subscribe("a/b", "o")
    t.subscribe("$share/g/a/+", "w1")
    t.subscribe(Shared("a/#", "h"), "w2")
    again = Trie.from_pairs(list(t), "mqtt")
    assert Counter(again) == Counter(t)
    bulk = Trie("mqtt")
    assert bulk.subscribe_many(list(t)) == 3
    assert Counter(bulk) == Counter(t)
    with unchanged(bulk), pytest.raises(ValueError):
        bulk.subscribe_many([("x/y", "new"), ("$share//a", "bad")])
    again.check_invariants()


def test_tree_of_a_trie_with_memberships() -> None:
    t = Trie("mqtt")
    t.subscribe("a/b", "o")
    t.subscribe("$share/g/a/+", "w")
    assert isinstance(t.tree(), dict)


@pytest.mark.parametrize("ext", ["jsonl", "bin"])
def test_export_and_load_keep_memberships(ext: str, tmp_path: Any) -> None:
    import cstrie

    t = Trie("mqtt")
    t.subscribe("a/b", "o")
    t.subscribe("$share/g/a/+", "w")
    path = tmp_path / f"subs.{ext}"
    written = t.export(path)
    back = cstrie.load(path)
    assert written == len(back)
    assert Counter(back) == Counter(t)
