"""Filter relations, rule by rule, written from the specifications.

``is_subset(a, b)``: every topic that a matches, b matches; ``intersects(a, b)``:
some valid topic matches both.  Each case also asks the independent oracle
(``relation_oracle.py``), so a wrong expectation here fails as loudly as a wrong
answer.  Sources: MQTT 5.0 section 4.7 (topic names and filters) and 4.7.2
(topics beginning with ``$``); the AMQP 0-9-1 topic exchange (RabbitMQ's
tutorial 5 bindings); the NATS subject rules and the cases of nats-server's
``TestSubjectIsSubsetMatch`` / ``TestSubjectsCollide`` (its ``IsSubsetMatch`` and
``SubjectsCollide``); EMQX's ``emqx_topic:intersection``.
"""

from __future__ import annotations

import pytest
import relation_oracle as ro

from cstrie.dialect import AMQP, MQTT, NATS, Dialect
from cstrie.relations import intersects, is_subset


def check(
    d: Dialect, a: str, b: str, *, subset: bool | None = None, meet: bool | None = None
) -> None:
    """Assert the relations of (a, b), and that the oracle agrees."""
    if subset is not None:
        assert is_subset(d, a, b) is subset, f"{d.name}: is_subset({a!r}, {b!r})"
        assert ro.expected_subset(d, a, b) is subset, f"oracle: is_subset({a!r}, {b!r})"
    if meet is not None:
        assert intersects(d, a, b) is meet, f"{d.name}: intersects({a!r}, {b!r})"
        assert ro.expected_intersects(d, a, b) is meet, f"oracle: intersects({a!r}, {b!r})"


def same(d: Dialect, a: str, b: str) -> None:
    check(d, a, b, subset=True, meet=True)
    check(d, b, a, subset=True, meet=True)


# ----------------------------------------------------------------- MQTT
def test_mqtt_plus_within_hash() -> None:
    """4.7.1.2/4.7.1.3: "sensors/+/temp" only matches topics "sensors/#" matches."""
    check(MQTT, "sensors/+/temp", "sensors/#", subset=True, meet=True)
    check(MQTT, "sensors/#", "sensors/+/temp", subset=False, meet=True)
    check(MQTT, "sport/tennis/player1/#", "sport/#", subset=True)
    check(MQTT, "sport/tennis/+", "sport/tennis/#", subset=True)
    check(MQTT, "sport/+", "sport/#", subset=True)
    check(MQTT, "sport/#", "sport/+", subset=False)  # "sport" and "sport/a/b"


def test_mqtt_hash_matches_the_parent_level() -> None:
    """4.7.1.2: "sport/#" also matches "sport", so it contains the filter "sport"."""
    check(MQTT, "sport", "sport/#", subset=True, meet=True)
    check(MQTT, "a", "a/#", subset=True)
    check(MQTT, "a/#", "a", subset=False)
    check(MQTT, "a/#", "a/+/#", subset=False)  # "a" itself
    check(MQTT, "a/+/#", "a/#", subset=True)


def test_mqtt_hash_is_reflexive_and_everything() -> None:
    same(MQTT, "#", "#")
    check(MQTT, "a/b/c", "#", subset=True)
    check(MQTT, "+/+/+", "#", subset=True)
    check(MQTT, "#", "+/+/+", subset=False, meet=True)


def test_mqtt_hash_equals_plus_hash() -> None:
    """Every MQTT topic has at least one level and "+" may match an empty one, so
    "+/#" matches exactly what "#" matches (both exclude "$" topics)."""
    same(MQTT, "#", "+/#")
    check(MQTT, "#", "+/+/#", subset=False)  # "a" has one level


def test_mqtt_plus_matches_one_level_which_may_be_empty() -> None:
    """4.7.1.3: "+" matches one level; "/finance" is matched by "+/+" and "/+"."""
    check(MQTT, "/finance", "+/+", subset=True)
    check(MQTT, "/finance", "/+", subset=True)
    check(MQTT, "/finance", "+", subset=False, meet=False)
    check(MQTT, "/+", "+/+", subset=True)
    check(MQTT, "+/+", "/+", subset=False, meet=True)
    check(MQTT, "/", "+/+", subset=True)  # two empty levels
    check(MQTT, "+", "/", meet=False)


def test_mqtt_dollar_topics_are_not_in_wildcard_first_filters() -> None:
    """4.7.2: filters starting with a wildcard do not match topics starting with "$"."""
    check(MQTT, "$SYS/#", "#", subset=False, meet=False)
    check(MQTT, "$SYS/monitor/+", "+/monitor/+", subset=False, meet=False)
    check(MQTT, "+/x", "$a/x", subset=False, meet=False)
    check(MQTT, "$SYS/monitor/+", "$SYS/#", subset=True, meet=True)
    check(MQTT, "$SYS/#", "$SYS/monitor/Clients", subset=False, meet=True)
    # a "$" word later in the topic is an ordinary word
    check(MQTT, "a/$b", "+/+", subset=True)
    check(MQTT, "a/$b", "#", subset=True)
    # a wildcard-first filter never sees "$" topics, so it stays within "#"
    check(MQTT, "+/$b", "#", subset=True)


def test_mqtt_literals() -> None:
    check(MQTT, "a/b", "a/b", subset=True, meet=True)
    check(MQTT, "a/b", "a/c", subset=False, meet=False)
    check(MQTT, "a/b", "A/b", meet=False)  # case matters
    check(MQTT, "a/b", "a/b/c", meet=False)
    check(MQTT, "a/+", "+/b", subset=False, meet=True)


def test_mqtt_emqx_intersection_cases() -> None:
    """emqx_topic:intersection: "t/#" and "t/+/1" overlap, "t/+" and "t/+/+" do not."""
    check(MQTT, "t/#", "t/+/1", meet=True)
    check(MQTT, "t/+", "t/+/+", meet=False)
    check(MQTT, "t/+/1", "t/#", subset=True)
    check(MQTT, "#", "t/+", meet=True)


# ----------------------------------------------------------------- AMQP
def test_amqp_tutorial_bindings() -> None:
    """RabbitMQ tutorial 5: "*.orange.*", "*.*.rabbit", "lazy.#"."""
    check(AMQP, "*.orange.*", "*.*.rabbit", subset=False, meet=True)  # quick.orange.rabbit
    check(AMQP, "lazy.orange.*", "lazy.#", subset=True)
    check(AMQP, "*.orange.*", "lazy.#", subset=False, meet=True)
    check(AMQP, "lazy.#", "*.orange.*", subset=False, meet=True)
    check(AMQP, "quick.orange.rabbit", "*.orange.*", subset=True)


def test_amqp_hash_runs_collapse() -> None:
    """A "#" is zero or more words anywhere, so "#.#" and "#.#.#" are just "#"."""
    same(AMQP, "#.#", "#")
    same(AMQP, "#.#.#", "#")
    same(AMQP, "#.#.#.a", "#.a")
    same(AMQP, "a.#.#.b", "a.#.b")


def test_amqp_star_hash_order_does_not_matter() -> None:
    """A run of wildcards with s stars and any "#" is "s or more words"."""
    same(AMQP, "*.#", "#.*")
    same(AMQP, "*.#.*", "#.*.*")
    same(AMQP, "a.*.#.b", "a.#.*.b")
    check(AMQP, "*.#", "#", subset=True)
    check(AMQP, "#", "*.#", subset=False, meet=True)  # the empty key ""


def test_amqp_hash_in_the_middle() -> None:
    check(AMQP, "a.*.#.b", "a.#.b", subset=True, meet=True)
    check(AMQP, "a.#.b", "a.*.#.b", subset=False, meet=True)  # "a.b"
    check(AMQP, "a.#.a", "#.a.#", subset=True)
    check(AMQP, "#.a.#", "a.#.a", subset=False)
    check(AMQP, "a.#", "#.b", subset=False, meet=True)  # "a.b"
    check(AMQP, "a.*", "*.b.*", meet=False)


def test_amqp_a_block_can_straddle_a_hash() -> None:
    """Every topic of "#.x.#.x" has an "x" followed by another word (the last "x"
    when the middle "#" is empty), although no word of it maps to "*" alone."""
    check(AMQP, "#.x.#.x", "#.x.*.#", subset=True)
    check(AMQP, "#.x", "#.x.*.#", subset=False)


def test_amqp_long_counterexample() -> None:
    """The shortest counterexample can be longer than both patterns together:
    every run of the "#" shorter than four words makes one of the "x"s land four
    words before the "y"."""
    check(AMQP, "x.x.x.x.#.y", "#.x.*.*.*.y.#", subset=False)
    assert ro.search(AMQP, "x.x.x.x.#.y", "#.x.*.*.*.y.#", want_b=False) == [
        "x", "x", "x", "x", "f", "x", "x", "x", "y"
    ]  # fmt: skip


def test_amqp_empty_key_and_empty_words() -> None:
    """The empty key "" has zero words (only "" and all-"#" patterns match it);
    "a..b" has an empty middle word."""
    check(AMQP, "", "#", subset=True, meet=True)
    check(AMQP, "", "*", meet=False)
    check(AMQP, "", "#.#", subset=True)
    check(AMQP, "a..b", "a.*.b", subset=True)
    check(AMQP, ".", "*.*", subset=True)
    check(AMQP, "*.*", ".", subset=False, meet=True)


def test_amqp_one_empty_word_is_not_a_topic() -> None:
    """A one-word topic whose word is empty would be the text "", which is the
    zero-word key; so "*" and "#." (a last empty word) share no topic, and every
    topic of "#." but that impossible one has two or more words."""
    check(AMQP, "*", "#.", meet=False)
    check(AMQP, "#.", "*.#.", subset=True)
    check(AMQP, "#.", "*.*", meet=True)  # "x." / "."
    check(AMQP, "#.", "*", subset=False)
    # "#..#": every key holding an empty word but "" itself; ".f" (empty word
    # first) and "f." (empty word last) are the counterexamples
    check(AMQP, "#..#", "*.#..#", subset=False)
    check(AMQP, "#..#", "#..*.#", subset=False)
    check(AMQP, "#..#", "#..#.#", subset=True)


def test_amqp_wildcard_words_in_keys_are_literals() -> None:
    """Routing keys may contain "*" and "#" as plain words; no pattern literal can
    be "*", so they never change a relation, and the oracle tries them."""
    assert {"*", "#"} <= set(ro.alphabet(AMQP, "a", "b"))
    check(AMQP, "a.*", "a.#", subset=True)
    check(AMQP, "a.*", "a.b", subset=False, meet=True)


# ----------------------------------------------------------------- NATS
@pytest.mark.parametrize(
    "a, b, want",
    [
        ("foo.bar", "foo.bar", True),
        ("foo.*", ">", True),
        ("foo.*", "*.*", True),
        ("foo.*", "foo.*", True),
        ("foo.*", "foo.>", True),
        ("foo.*", "foo.bar", False),
        ("foo.>", ">", True),
        ("foo.>", "*.>", True),
        ("foo.>", "foo.>", True),
        ("foo.>", "foo.bar", False),
        ("foo.*.bar", "foo.>", True),
        ("foo.*.bar", "foo.bar.>", False),
        ("foo.bar.>", "foo.*.bar", False),
    ],
)
def test_nats_is_subset_match(a: str, b: str, want: bool) -> None:
    """nats-server's TestSubjectIsSubsetMatch: IsSubsetMatch(a, b) is a within b.
    (Its "foo..bar" cases are invalid subjects here: empty tokens.)"""
    check(NATS, a, b, subset=want)


@pytest.mark.parametrize(
    "a, b, want",
    [
        ("foo.*", "foo.*.bar.>", False),
        ("foo.*.bar.>", "foo.*", False),
        ("foo.*", "foo.foo", True),
        ("foo.*", "*.foo", True),
        ("foo.bar.>", "*.bar.foo", True),
        ("orders.>", "orders.new", True),
        ("a.*.c", "a.b.>", True),
        ("orders.new", "orders.paid", False),
        ("orders.new", "orders.new", True),
    ],
)
def test_nats_subjects_collide(a: str, b: str, want: bool) -> None:
    """nats-server's TestSubjectsCollide."""
    check(NATS, a, b, meet=want)
    check(NATS, b, a, meet=want)


def test_nats_gt_needs_one_token() -> None:
    """A ">" matches one or more tokens, never zero: "a" is not within "a.>"."""
    check(NATS, "a", "a.>", subset=False, meet=False)
    check(NATS, "a.b", "a.>", subset=True)
    check(NATS, ">", "*.>", subset=False, meet=True)
    check(NATS, "*.>", ">", subset=True)
    check(NATS, "*", ">", subset=True)
    check(NATS, ">", "*", subset=False, meet=True)


def test_nats_has_no_dollar_rule() -> None:
    check(NATS, "$SYS.>", ">", subset=True)
    check(NATS, "*.x", "$a.x", meet=True)


# ------------------------------------------------------ custom dialects
GLOB = Dialect(name="glob", separator="/", single="?", multi="**")
PLUS1 = Dialect(name="plus1", separator=":", single="?", multi="*", multi_min=1)
DOLLAR = Dialect(name="dollar", separator="/", single="+", multi="#", dollar_rule=True)
LIMITED = Dialect(name="limited", separator=".", single="*", multi="#", max_levels=3)


def test_multi_min_one_anywhere() -> None:
    """With multi_min 1 a multi ("*" here) takes at least one word, so "*:*" is
    "?:*" (two or more words)."""
    same(PLUS1, "*:*", "?:*")
    same(PLUS1, "x:*:*", "x:?:*")
    check(PLUS1, "x:?:*", "x:*", subset=True)
    check(PLUS1, "x:*", "x:?:*", subset=False, meet=True)  # "x:y"
    check(PLUS1, "x", "x:*", subset=False, meet=False)
    check(PLUS1, "x:*:y", "x:?:*", subset=True)
    check(PLUS1, "x:?:y", "x:*:y", subset=True)
    check(PLUS1, "x:*:y", "x:?:y", subset=False)


def test_globstar_anywhere() -> None:
    same(GLOB, "**/**", "**")
    check(GLOB, "a/?/**/b", "a/**/b", subset=True)
    check(GLOB, "a/**/b", "a/?/**/b", subset=False)


def test_dollar_rule_with_multi_anywhere() -> None:
    """With "#" anywhere and the "$" rule, "#/$x" cannot start with "$x" (its first
    word is a wildcard), so its topics are "w/.../$x" with w not a "$" word."""
    check(DOLLAR, "#/$x", "$x", meet=False)
    check(DOLLAR, "#/$x", "+/#", subset=True)
    check(DOLLAR, "#/$x", "#/+/$x", subset=True)  # "$x" alone is no topic of a
    check(DOLLAR, "#/$x/#", "#/+/$x/#", subset=True)
    check(DOLLAR, "$x", "#/$x", subset=False)
    check(DOLLAR, "$x/#", "#", subset=False, meet=False)
    check(DOLLAR, "$x/#", "$x/#/#", subset=True)
    check(DOLLAR, "#/$x/#", "+/#", subset=True)


def test_length_limits_are_not_applied_to_topics() -> None:
    """max_levels validates the patterns, not the topics quantified over: within
    three words "*.*.#" only matches three-word keys, but "a.b.c.d" counts."""
    check(LIMITED, "*.*.#", "*.*.*", subset=False, meet=True)
    with pytest.raises(ValueError, match=r"^argument a: .*max_levels"):
        is_subset(LIMITED, "a.b.c.d", "#")
