"""The kombu integration (``cstrie.integrations.kombu``), tested through kombu's own clients.

Rules, from AMQP 0-9-1 section 3.1.3.3 (topic exchange): a routing key is zero or
more words delimited by dots; in a binding key ``*`` matches a single word and
``#`` zero or more words ("``*.stock.#`` matches the routing keys ``usd.stock``
and ``eur.stock.db`` but not ``stock.nasdaq``").  As RabbitMQ: words may be empty
(``a..c``), the empty key is zero words, wildcards are whole words only, and a
message reaches each queue with a matching binding once.

Stock kombu's regexes differ in documented ways (``docs/brokers.md``); the tests
below assert each difference explicitly, and compare whole sessions of real kombu
producers and consumers on the stock and the integrated memory transport.
"""

from __future__ import annotations

import copy
import pickle
import random
from typing import Any

import pytest

pytest.importorskip("kombu")

import kombu_helpers as kh
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu import Connection, Exchange, Queue
from kombu.transport import TRANSPORT_ALIASES, get_transport_cls
from kombu.transport import memory as kmemory
from kombu.transport.virtual.exchange import TopicExchange
from kombu_helpers import SAFE_BINDINGS, SAFE_KEYS

from cstrie.integrations import kombu as ck

CSTRIE = ck.MemoryTransport
STOCK = kh.STOCK
RULES = kh.INSTALLED_RULES
needs_known_stock = pytest.mark.skipif(
    RULES is None,
    reason=f"kombu's TopicExchange.wildcards {TopicExchange.wildcards!r} are not one of the "
    "documented regex tables (kombu 5.3-5.6, 5.7): document its differences first",
)

# (binding key, routing key, AMQP, stock kombu 5.7, stock kombu 5.3-5.6)
CASES: list[tuple[str, str, bool, bool, bool]] = [
    # the specification's own example
    ("*.stock.#", "usd.stock", True, False, False),
    ("*.stock.#", "eur.stock.db", True, True, True),
    ("*.stock.#", "stock.nasdaq", False, False, False),
    # "*" is exactly one word
    ("a.*", "a.b", True, True, True),
    ("a.*", "a.b.c", False, False, True),
    ("a.*", "a", False, False, False),
    ("*", "", False, False, False),
    ("*", "a", True, True, True),
    ("a.*.c", "a..c", True, False, False),
    ("*.*", ".", True, False, False),
    # "#" is zero or more words, anywhere
    ("a.#", "a", True, False, False),
    ("#.a", "a", True, False, False),
    ("a.#.b", "a.b", True, False, False),
    ("a.#.b", "a.x.y.b", True, True, True),
    ("#.#", "a", True, False, False),
    ("#", "", True, True, True),
    ("#", "a.b.c", True, True, True),
    ("a.#", "a.", True, True, True),
    # other words match only themselves
    ("a.b", "a.b", True, True, True),
    ("a.b", "ab", False, False, False),
    ("a.b", "a.b.c", False, False, False),
    ("A", "a", False, False, False),
    ("a..c", "a..c", True, True, True),
    ("a+b", "aab", False, False, False),
    ("a+b", "a+b", True, True, True),
    # wildcards are whole words; in a routing key they are literals
    ("a*", "a*", True, False, False),
    ("ab*", "a", False, True, True),
    ("#b", "#b", True, True, True),
    ("#b", "xb", False, False, False),
    ("a.*", "a.*", True, True, True),
    ("a.b", "a.*", False, False, False),
    # newlines are ordinary characters
    ("a.b", "a.b\n", False, True, True),
    ("#", "a\nb", True, False, False),
]

CASE_IDS = [f"{b!r}~{k!r}" for b, k, *_ in CASES]


# ---------------------------------------------------------------- the rules
@pytest.mark.parametrize(("binding", "key", "amqp", "s57", "s53"), CASES, ids=CASE_IDS)
def test_rule_integrated_exchange_type(
    binding: str, key: str, amqp: bool, s57: bool, s53: bool
) -> None:
    """The exchange type's lookup follows AMQP, on a TrieTable and on a plain list."""
    e = ck.CstrieTopicExchange(None)
    entry = (binding, e.key_to_pattern(binding), "q")
    want = {"q"} if amqp else set()
    assert e.lookup(ck.TrieTable([entry]), "x", key, None) == want
    assert e.lookup([entry], "x", key, None) == want


@needs_known_stock
@pytest.mark.parametrize(("binding", "key", "amqp", "s57", "s53"), CASES, ids=CASE_IDS)
def test_rule_stock_differences_are_the_documented_ones(
    binding: str, key: str, amqp: bool, s57: bool, s53: bool
) -> None:
    """Stock kombu's answer for each case is the one docs/brokers.md documents."""
    assert kh.stock_matches(binding, key, "kombu5.7") is s57
    assert kh.stock_matches(binding, key, "kombu5.3") is s53
    assert kh.stock_matches(binding, key, "installed") is (s57 if RULES == "kombu5.7" else s53)
    # the documentation's models say the same (where they apply: no newline, no
    # wildcard character inside a word)
    if "\n" not in key and not any(
        ("*" in w or "#" in w) and len(w) > 1 for w in binding.split(".")
    ):
        assert kh.model_match(binding, key, "amqp") is amqp
        assert kh.model_match(binding, key, "kombu5.7") is s57
        assert kh.model_match(binding, key, "kombu5.3") is s53


def test_rule_stock_star_at_word_start_breaks_the_exchange() -> None:
    """Stock kombu turns "*a" into an invalid regex: the publish raises.  cstrie routes it."""
    e = TopicExchange(None)
    table = [("*a", e.key_to_pattern("*a"), "q"), ("#", e.key_to_pattern("#"), "all")]
    with pytest.raises(Exception, match="nothing to repeat"):
        e.lookup(table, "x", "xa", None)
    assert ck.CstrieTopicExchange(None).lookup(ck.TrieTable(table), "x", "*a", None) == {
        "q",
        "all",
    }
    assert ck.CstrieTopicExchange(None).lookup(ck.TrieTable(table), "x", "xa", None) == {"all"}


def test_session_rule_cases_integrated() -> None:
    """Every case's binding on its own queue, every case's routing key published by a
    real kombu Producer on the integrated memory transport: each queue receives
    exactly the messages AMQP routes to it (cases x keys, not only the diagonal)."""
    bindings = {f"q{i:02d}": [b] for i, (b, *_) in enumerate(CASES)}
    keys = [k for _, k, *_ in CASES]
    got = kh.run_session(CSTRIE, bindings, keys)
    for i, (b, *_) in enumerate(CASES):
        want = [(j, k) for j, k in enumerate(keys) if ck.TrieTable([(b, "", "q")]).route(k)]
        assert got[f"q{i:02d}"] == want, b
    # and the diagonal is the table's AMQP column
    for i, (_b, k, amqp, *_) in enumerate(CASES):
        assert ((i, k) in got[f"q{i:02d}"]) is amqp


@needs_known_stock
def test_session_rule_cases_stock_vs_integrated() -> None:
    """The same session on stock kombu: on the diagonal every delivery differs from the
    integrated one exactly where the table says stock differs from AMQP."""
    usable = [c for c in CASES if not c[0].startswith("*a")]
    bindings = {f"q{i:02d}": [b] for i, (b, *_) in enumerate(usable)}
    keys = [k for _, k, *_ in usable]
    stock = kh.run_session(STOCK, bindings, keys)
    ours = kh.run_session(CSTRIE, bindings, keys)
    column = 3 if RULES == "kombu5.7" else 4
    for i, case in enumerate(usable):
        q, k = f"q{i:02d}", case[1]
        assert ((i, k) in ours[q]) is case[2]
        assert ((i, k) in stock[q]) is case[column]


WORD = st.sampled_from(["a", "b", "", "*", "#"])
TOPIC_WORD = st.sampled_from(["a", "b", "", "*"])


def _key(ws: list[str]) -> str:
    return ".".join(ws)


@needs_known_stock
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(WORD, min_size=0, max_size=4).map(_key),
    st.lists(TOPIC_WORD, min_size=0, max_size=4).map(_key),
)
def test_differential_stock_and_integrated_follow_their_models(pattern: str, topic: str) -> None:
    """On keys of the words a, b, "" and the wildcards: the integrated exchange type
    answers as AMQP and stock kombu (5.7 and 5.3-5.6 regex tables) exactly as the
    documented models, so the differences are the documented ones and no others."""
    ours = bool(ck.CstrieTopicExchange(None).lookup([(pattern, "", "q")], "x", topic, None))
    assert ours is kh.model_match(pattern, topic, "amqp")
    for rules in ("kombu5.7", "kombu5.3"):
        assert kh.stock_matches(pattern, topic, rules) is kh.model_match(pattern, topic, rules)
    assert RULES is not None
    assert kh.stock_matches(pattern, topic, "installed") is kh.model_match(pattern, topic, RULES)


def test_amqp_model_agrees_with_the_independent_oracle() -> None:
    """The test model's AMQP rules are the project's oracle's (two independent readings)."""
    import oracle

    from cstrie.dialect import AMQP

    rng = random.Random(7)
    alphabet = ["a", "b", "", "*", "#"]
    for _ in range(2000):
        p = ".".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
        t = ".".join(rng.choice(alphabet[:3]) for _ in range(rng.randrange(5)))
        assert kh.model_match(p, t, "amqp") is oracle.matches(AMQP, p, t), (p, t)


# ------------------------------------------------- sessions: stock vs integrated
def _random_bindings(rng: random.Random, queues: int, per_queue: int, alphabet: list[str]) -> Any:
    def key() -> str:
        return ".".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))

    return {f"q{i}": [key() for _ in range(rng.randint(1, per_queue))] for i in range(queues)}


@needs_known_stock
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("consume", ["get", "drain"])
def test_session_differential_random(seed: int, consume: str) -> None:
    """Random bindings and routing keys, real producers and consumers (basic_get, and
    Consumer callbacks with drain_events): every delivery of the integrated transport
    is AMQP's, every delivery of stock kombu is its documented model's, and the two
    sessions agree on every message the models agree on."""
    rng = random.Random(seed)
    bindings = _random_bindings(rng, 8, 4, ["a", "b", "c", "", "*", "#"])
    keys = [".".join(rng.choice("abc") for _ in range(rng.randint(0, 4))) for _ in range(60)]
    empties = ["a", "b", ""]
    keys += [".".join(rng.choice(empties) for _ in range(rng.randint(1, 4))) for _ in range(20)]
    ours = kh.run_session(CSTRIE, bindings, keys, consume=consume)
    stock = kh.run_session(STOCK, bindings, keys, consume=consume)
    assert ours == kh.expected(bindings, keys, "amqp")
    assert RULES is not None
    assert stock == kh.expected(bindings, keys, RULES)
    # where the models agree, the sessions agree message by message
    for q, qkeys in bindings.items():
        agree = [
            (i, k)
            for i, k in enumerate(keys)
            if any(kh.model_match(b, k, "amqp") for b in qkeys)
            == any(kh.model_match(b, k, RULES) for b in qkeys)
        ]
        assert [d for d in ours[q] if d in agree] == [d for d in stock[q] if d in agree]


def _churn_script(seed: int, steps: int) -> list[tuple[str, ...]]:
    rng = random.Random(seed)
    script: list[tuple[str, ...]] = []
    for _ in range(steps):
        r = rng.random()
        q = f"q{rng.randrange(5)}"
        if r < 0.45:
            script.append(("bind", q, rng.choice(SAFE_BINDINGS)))
        elif r < 0.75:
            script.append(("unbind", q, rng.choice(SAFE_BINDINGS)))
        elif r < 0.8:
            script.append(("delete", q))
        else:
            script.append(("publish", *rng.sample(SAFE_KEYS, 3)))
    script.append(("publish", *SAFE_KEYS))
    return script


def _play(transport: type[Any], script: list[tuple[str, ...]]) -> list[Any]:
    s = kh.Session(transport)
    trace: list[Any] = []
    n = 0
    try:
        for step in script:
            op = step[0]
            if op == "bind":
                s.bind(step[1], [step[2]])
            elif op == "unbind":
                s.unbind(step[1], step[2])
            elif op == "delete":
                s.delete(step[1])
            else:
                s.publish(step[1:], start=n)
                n += len(step) - 1
                trace.append(s.get_all())
        trace.append(sorted((k, q) for k, _, q in s.table))
        if isinstance(s.table, ck.TrieTable):
            kh.assert_in_step(s.table)
        return trace
    finally:
        s.close()


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_session_churn_bind_unbind_delete(seed: int) -> None:
    """Scripted sessions of binds, unbinds, queue deletions and publishes (200 steps)
    give the same deliveries, message by message, and the same final routing table,
    on stock and integrated kombu; the integrated trie stays equal to its table."""
    script = _churn_script(seed, 200)
    assert _play(CSTRIE, script) == _play(STOCK, script)


# ------------------------------------------------------------------ TrieTable
E = [("a.#", "r1", "q1"), ("a.*", "r2", "q2"), ("#", "r3", "q3"), ("a.#", "r1", "q4")]


def test_table_every_list_mutation_keeps_the_trie_in_step() -> None:
    t = ck.TrieTable()
    t.append(E[0])
    t.extend([E[1], E[2]])
    t += [E[3]]
    t.insert(0, E[2])
    kh.assert_in_step(t)
    assert t.route("a.b") == sorted(t.route("a.b"), key=str) or set(t.route("a.b")) == {
        "q1",
        "q2",
        "q3",
        "q4",
    }
    t.remove(E[2])  # one of two copies: q3 still bound with "#"
    assert "q3" in t.route("zzz")
    kh.assert_in_step(t)
    assert t.pop() == E[3]
    kh.assert_in_step(t)
    t[0] = ("x.y", "", "q9")
    kh.assert_in_step(t)
    t[1:2] = [("p", "", "q5"), ("p", "", "q6")]
    kh.assert_in_step(t)
    del t[0]
    kh.assert_in_step(t)
    del t[::2]
    kh.assert_in_step(t)
    t *= 3
    kh.assert_in_step(t)
    t.sort()
    t.reverse()
    kh.assert_in_step(t)
    t *= 0
    assert list(t) == [] and len(t.trie) == 0
    t.extend(E)
    t.clear()
    assert t.route("a.b") == [] and len(t.trie) == 0
    t.__init__(E)  # type: ignore[misc]  # re-initialising replaces the content
    assert list(t) == E
    kh.assert_in_step(t)


def test_table_kombu_unbind_idioms() -> None:
    """kombu's queue_unbind rebuilds the table in place (t[:] = ...); discard() is the
    integration's O(n) C-scan replacement.  Both drop every equal entry."""
    t = ck.TrieTable([E[0], E[1], E[0]])
    t[:] = [m for m in t if m != E[0]]
    assert list(t) == [E[1]] and t.route("a") == []
    kh.assert_in_step(t)
    t.extend([E[0], E[0]])
    assert t.discard(E[0]) == 2 and t.discard(E[0]) == 0
    assert list(t) == [E[1]] and t.route("a") == []
    kh.assert_in_step(t)


def test_table_duplicate_entries_are_counted() -> None:
    t = ck.TrieTable([E[0], E[0]])
    t.remove(E[0])
    assert t.route("a") == ["q1"]
    t.remove(E[0])
    assert t.route("a") == []
    with pytest.raises(ValueError):
        t.remove(E[0])
    kh.assert_in_step(t)


def test_table_copy_and_pickle_keep_routing() -> None:
    t = ck.TrieTable(E)
    for c in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert isinstance(c, ck.TrieTable) and list(c) == E
        kh.assert_in_step(c)
        c.clear()
        assert set(t.route("a.b")) == {"q1", "q2", "q3", "q4"}  # the original is untouched


LONG = ".".join(["w"] * 257)


@pytest.mark.parametrize(
    ("entry", "exc", "words"),
    [
        ((LONG, "", "q"), ValueError, ["257 words", "'q'"]),
        (("a.\ud800", "", "q"), ValueError, ["UTF-8", "'q'"]),
        ((None, "", "q"), TypeError, ["must be a str", "None"]),
        (("a", "", ["unhashable"]), TypeError, ["unhashable"]),
        (("a", "q"), TypeError, ["(routing_key, pattern, queue) triple"]),
        ("abc", TypeError, ["(routing_key, pattern, queue) triple"]),
        (42, TypeError, ["(routing_key, pattern, queue) triple"]),
    ],
)
def test_table_refuses_bad_entries_and_stays_as_it_was(
    entry: Any, exc: type[Exception], words: list[str]
) -> None:
    t = ck.TrieTable(E)
    before = list(t)
    for mutate in (
        lambda: t.append(entry),
        lambda: t.extend([("b", "", "qb"), entry]),
        lambda: t.insert(0, entry),
        lambda: t.__setitem__(0, entry),
        lambda: t.__setitem__(slice(0, 2), [("c", "", "qc"), entry]),
        lambda: t.__iadd__([entry]),
    ):
        with pytest.raises(exc) as info:
            mutate()
        for w in words:
            assert w in str(info.value)
        assert list(t) == before
        assert "qb" not in t.route("b") and "qc" not in t.route("c")
        kh.assert_in_step(t)
    with pytest.raises(exc):
        ck.TrieTable([entry])


def test_table_extended_slice_of_wrong_length_changes_nothing() -> None:
    t = ck.TrieTable(E)
    with pytest.raises(ValueError, match="extended slice"):
        t[::2] = [("z", "", "qz")]
    assert list(t) == E and "qz" not in t.route("z")
    kh.assert_in_step(t)


# ----------------------------------------------------------- the exchange type
def test_lookup_untracked_table_follows_every_change() -> None:
    """A plain list (a stock-created table, or a fresh list per publish as Redis
    hands over) is mirrored: changes of the same length are seen too."""
    e = ck.CstrieTopicExchange(None)
    table = [("a.*", "", "q1")]
    assert e.lookup(table, "ex", "a.b", None) == {"q1"}
    table[0] = ("a.#", "", "q2")  # same length, different content
    assert e.lookup(table, "ex", "a", None) == {"q2"}
    assert e.lookup(list(reversed([*table, ("a", "", "q3")])), "ex", "a", None) == {"q2", "q3"}
    assert e.lookup([], "ex", "a", None) == set()
    # another exchange has a mirror of its own
    assert e.lookup([("a", "", "q4")], "other", "a", None) == {"q4"}
    assert e.lookup([("a", "", "q5")], "ex", "a", None) == {"q5"}


def test_lookup_untracked_table_with_a_refused_key_raises_naming_it() -> None:
    e = ck.CstrieTopicExchange(None)
    with pytest.raises(ValueError, match="257 words"):
        e.lookup([("a", "", "q1"), (LONG, "", "q2")], "ex", "a", None)
    # nothing was half-applied: the good binding still routes once the bad one is gone
    assert e.lookup([("a", "", "q1")], "ex", "a", None) == {"q1"}


@pytest.mark.parametrize("table", [ck.TrieTable(E), list(E)], ids=["TrieTable", "list"])
def test_lookup_refuses_bad_routing_keys_naming_the_exchange(table: Any) -> None:
    e = ck.CstrieTopicExchange(None)
    with pytest.raises(ValueError, match=r"topic exchange 'ex'.*257 words"):
        e.lookup(table, "ex", LONG, None)
    with pytest.raises(ValueError, match="UTF-8"):
        e.lookup(table, "ex", "a.\udc00", None)
    with pytest.raises(TypeError, match="must be a str, not bytes"):
        e.lookup(table, "ex", b"a.b", None)
    assert e.lookup(table, "ex", ".".join(["w"] * 256), None) == {"q3"}  # 256 words: fine


def test_prepare_bind_keeps_kombus_regex_for_shared_stores() -> None:
    ours, stock = ck.CstrieTopicExchange(None), TopicExchange(None)
    for key in ("stock.#", "a.*.b", "#", ""):
        assert ours.prepare_bind("q", "ex", key, {}) == stock.prepare_bind("q", "ex", key, {})


# ----------------------------------------------------------------- channels
def test_integrated_channel_creates_trie_tables_and_routes() -> None:
    s = kh.Session(CSTRIE)
    try:
        assert isinstance(s.table, ck.TrieTable)
        s.bind("q1", ["*.stock.#"])
        s.publish(["usd.stock", "stock.nasdaq"])
        assert s.get_all() == {"q1": [(0, "usd.stock")]}
        kh.assert_in_step(s.table)
        # direct and fanout exchanges keep kombu's own types and plain tables
        Exchange("d", type="direct")(s.channel).declare()
        Exchange("f", type="fanout")(s.channel).declare()
        assert type(s.channel.state.exchanges["d"]["table"]) is list
        assert type(s.channel.state.exchanges["f"]["table"]) is list
    finally:
        s.close()


def test_bind_with_a_refused_key_raises_before_kombu_records_it() -> None:
    s = kh.Session(CSTRIE)
    try:
        s.bind("q1", ["a"])
        for key, exc, text in (
            (LONG, ValueError, "257 words"),
            ("a.\ud800", ValueError, "UTF-8"),
            (None, TypeError, "must be a str"),
        ):
            with pytest.raises(exc, match=text) as info:
                s.channel.queue_bind("q1", "session", key)
            assert "'q1'" in str(info.value) and "'session'" in str(info.value)
            assert not s.channel.state.has_binding("q1", "session", key)
        assert list(s.table) == [("a", s.table[0][1], "q1")]
        kh.assert_in_step(s.table)
    finally:
        s.close()


def test_publish_with_a_refused_routing_key_raises() -> None:
    s = kh.Session(CSTRIE)
    try:
        s.bind("q1", ["#"])
        with pytest.raises(ValueError, match="257 words"):
            s.publish([LONG])
        s.publish([".".join(["w"] * 256)])
        assert len(s.get_all()["q1"]) == 1
    finally:
        s.close()


def test_mixed_stock_and_integrated_channels_share_one_broker() -> None:
    """Stock and integrated channels on one broker state: a table a stock channel
    created stays a list and is routed through the mirror; a stock channel binding
    to a TrieTable keeps it in step."""
    iso = kh.isolated(STOCK)
    shared = type(
        "Shared",
        (CSTRIE,),
        {
            "global_state": iso.global_state,
            "Channel": type("SharedChannel", (CSTRIE.Channel,), {"queues": iso.Channel.queues}),
        },
    )
    stock, ours = Connection(transport=iso), Connection(transport=shared)
    try:
        sc, oc = stock.channel(), ours.channel()
        ex_stock, ex_ours = Exchange("by-stock", type="topic"), Exchange("by-ours", type="topic")
        ex_stock(sc).declare()
        ex_ours(oc).declare()
        assert type(sc.state.exchanges["by-stock"]["table"]) is list
        assert isinstance(sc.state.exchanges["by-ours"]["table"], ck.TrieTable)
        Queue("m1", ex_stock, routing_key="a.#")(sc).declare()
        Queue("m2", ex_ours, routing_key="a.#")(sc).declare()  # stock channel, TrieTable
        kh.assert_in_step(sc.state.exchanges["by-ours"]["table"])
        ours.Producer(oc, exchange=ex_stock).publish({"i": 0}, routing_key="a")
        ours.Producer(oc, exchange=ex_ours).publish({"i": 1}, routing_key="a")
        assert Queue("m1")(oc).get(no_ack=True).payload == {"i": 0}
        assert Queue("m2")(oc).get(no_ack=True).payload == {"i": 1}
    finally:
        stock.release()
        ours.release()


def test_exchange_delete_drops_the_table() -> None:
    s = kh.Session(CSTRIE)
    try:
        s.bind("q1", ["a"])
        s.channel.exchange_delete("session")
        assert "session" not in s.channel.state.exchanges
        s.exchange(s.channel).declare()
        assert isinstance(s.table, ck.TrieTable) and list(s.table) == []
    finally:
        s.close()


def test_unroutable_messages_and_the_deadletter_queue_as_stock() -> None:
    """kombu's topic type creates the dead-letter queue for an unroutable message but
    filters it out of the delivery (TopicExchange.deliver): the integration inherits
    deliver, so both drop the message."""
    for transport in (STOCK, CSTRIE):
        iso = kh.isolated(transport)
        with Connection(transport=iso, transport_options={"deadletter_queue": "dlq"}) as c:
            ch = c.channel()
            ex = Exchange("dl", type="topic")
            Queue("q1", ex, routing_key="a.*")(ch).declare()
            p = c.Producer(ch, exchange=ex)
            with pytest.warns(UserWarning, match="could not be delivered"):
                p.publish({"i": 0}, routing_key="b")
            p.publish({"i": 1}, routing_key="a.x")
            assert "dlq" in iso.Channel.queues, transport
            assert Queue("dlq")(ch).get(no_ack=True) is None
            assert Queue("q1")(ch).get(no_ack=True).payload == {"i": 1}


# ------------------------------------------------------------ registration
def test_register_adds_transport_aliases() -> None:
    saved = dict(TRANSPORT_ALIASES)
    try:
        ck.register()
        ck.register()  # idempotent
        assert get_transport_cls("cstrie-memory") is ck.MemoryTransport
        with Connection("cstrie-memory://") as c:
            assert isinstance(c.transport, ck.MemoryTransport)
            assert issubclass(c.transport.Channel, ck.CstrieChannelMixin)
        # the same process-wide broker as memory://
        assert ck.MemoryTransport.global_state is kmemory.Transport.global_state
        TRANSPORT_ALIASES["cstrie-memory"] = "somebody.else:Transport"
        with pytest.raises(ValueError, match=r"already taken by 'somebody\.else:Transport'"):
            ck.register()
    finally:
        TRANSPORT_ALIASES.clear()
        TRANSPORT_ALIASES.update(saved)


def test_make_transport_and_channel() -> None:
    made = ck.make_transport(kmemory.Transport)
    assert issubclass(made, kmemory.Transport)
    assert issubclass(made.Channel, ck.CstrieChannelMixin)
    assert issubclass(made.Channel, kmemory.Channel)
    assert made.Channel.exchange_types["topic"] is ck.CstrieTopicExchange
    assert made.Channel.exchange_types["direct"] is kmemory.Channel.exchange_types["direct"]
    assert ck.make_transport(made) is made
    assert ck.make_channel(ck.MemoryChannel) is ck.MemoryChannel
    from kombu.transport import pyamqp

    with pytest.raises(TypeError, match="virtual Transport class"):
        ck.make_transport(pyamqp.Transport)
    with pytest.raises(TypeError, match="virtual Channel class"):
        ck.make_channel(object)
    with pytest.raises(TypeError, match="virtual Channel class"):
        ck.make_channel("memory")  # type: ignore[arg-type]
