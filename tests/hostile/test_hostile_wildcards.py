"""Hostile many-level wildcards: patterns of '#' anywhere (AMQP) cost a lookup
what the trie holds, not (what the trie holds) x (topic words).

Rules under test:

* '#' may stand anywhere in an AMQP pattern and matches zero or more words
  (RabbitMQ's topic exchange); a pattern matches exactly when the slow
  dynamic program of ``tests/support/oracle.py`` says so, for every mix of '#', '*',
  literal and empty words.
* Hostile input: every pattern comes from an attacker.  A lookup takes each
  S-node of the trie at most once (plus the nodes above the first '#'), so its
  step counter (``cst_debug_last_walk_steps``) never exceeds the number of
  S-nodes in the trie, whatever the patterns and however long the topic.
  Counting steps checks the bound without a timing assertion.
"""

from __future__ import annotations

import random

import pytest
from oracle import choose_seed, expected_lookup, expected_match, matches, seeded_rng

from cstrie import Trie
from cstrie._binding import lib
from cstrie.dialect import AMQP, Dialect

SEED = choose_seed()

#: a dialect like AMQP but with a one-word minimum for the many-level
#: wildcard and the dollar rule, so both rules meet the index-set walk
PLUS1 = Dialect(name="plus1", separator=":", single="?", multi="*", multi_min=1)
DOLLAR = Dialect(name="dollar", separator="/", single="+", multi="#", dollar_rule=True)


def _pattern(rng: random.Random, d: Dialect, words: list[str], n: int) -> str:
    return d.separator.join(rng.choice(words) for _ in range(n))


@pytest.mark.parametrize("dialect", [AMQP, PLUS1, DOLLAR], ids=lambda d: d.name)
def test_many_level_wildcards_anywhere_match_the_oracle(dialect: Dialect) -> None:
    """Rule: a pattern with many-level wildcards anywhere matches exactly the
    topics the oracle's dynamic program accepts (lookup, match, has_subscribers),
    over repeated words, empty words and long topics."""
    rng = seeded_rng(SEED, "wildcards-anywhere", dialect.name)
    d = dialect
    lit = ["a", "b", "ab"] + ([""] if d.name == "amqp" else [])
    pool = [d.multi, d.multi, d.single, *lit]
    assert d.multi is not None and d.single is not None
    for _ in range(12):
        pairs: list[tuple[str, int]] = []
        for k in range(rng.randint(1, 60)):
            p = _pattern(rng, d, pool, rng.randint(1, 9))
            if d.name == "dollar" and rng.random() < 0.2:
                p = "$x" + d.separator + p
            pairs.append((p, k % 7))
        trie = Trie(d)
        for p, s in pairs:
            trie.subscribe(p, s)
        for _ in range(40):
            words = [rng.choice(["a", "b", "ab", "c"]) for _ in range(rng.randint(0, 24))]
            if d.name == "dollar" and words and rng.random() < 0.3:
                words[0] = "$" + words[0]
            if d.name != "amqp" and not words:
                words = ["a"]
            topic = d.separator.join(words)
            assert set(trie.lookup(topic)) == expected_lookup(d, pairs, topic), topic
            assert set(trie.match(topic)) == expected_match(d, pairs, topic), topic
            assert trie.has_subscribers(topic) == bool(expected_lookup(d, pairs, topic))


ORDER_PROGRAM = """
import random, sys
from cstrie import Trie
rng = random.Random(sys.argv[1])
pool = ["#", "*", "a", "b", "c", "d"]
t = Trie()
for k in range(300):
    t.subscribe(".".join(rng.choice(pool) for _ in range(rng.randint(1, 6))), k)
for _ in range(60):
    print(t.lookup(".".join(rng.choice("abcd") for _ in range(rng.randint(1, 12)))))
"""


def test_the_answer_order_does_not_depend_on_the_hash_seed() -> None:
    """Rule: the order of a lookup's answer depends on the pairs subscribed (and
    their order) and the topic, never on the per-process word-hash seed: below a
    '#' a level's literal branches are taken in the order of their word's first
    index in the topic, not in hash order.  Two processes (two random seeds)
    answer the same workload in the same order."""
    import subprocess
    import sys

    runs = [
        subprocess.run(
            [sys.executable, "-c", ORDER_PROGRAM, str(SEED)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2]


def _snodes(trie: Trie) -> int:
    return trie.stats()["snodes"]


def _steps_bound(trie: Trie) -> int:
    """Each S-node at most once, the state-by-state part above the first '#' at
    most once per S-node too: twice the S-nodes (plus the top level)."""
    return 2 * _snodes(trie) + 2


@pytest.mark.parametrize(
    "shape",
    ["one-hash-long-tail", "prefix-then-hash", "random-hash-star-word", "hashes-only"],
)
def test_adversarial_hash_patterns_cost_each_node_once(shape: str) -> None:
    """Hostile input: sets of patterns that made a state-by-state search take
    seconds per lookup (2,000 random patterns of 50-256 words over '#', '*' and
    one word; one '#' followed by a long tail of '*' and that word; 255 '#')
    cost each S-node of the trie at most once per lookup, against a topic of
    256 copies of the word, and still match the oracle."""
    rng = random.Random(f"{SEED}/{shape}")
    topic_words = ["a"] * 256
    topic = ".".join(topic_words)
    pats: list[str]
    if shape == "one-hash-long-tail":
        pats = [
            "#." + ".".join(rng.choice("*a") for _ in range(rng.randint(50, 127)))
            for _ in range(400)
        ]
    elif shape == "prefix-then-hash":
        pats = [
            ".".join(rng.choice("*a") for _ in range(rng.randint(3, 10)))
            + ".#."
            + ".".join(rng.choice("*a") for _ in range(rng.randint(50, 127)))
            for _ in range(400)
        ]
    elif shape == "random-hash-star-word":
        pats = [
            ".".join(rng.choice(["#", "*", "a"]) for _ in range(rng.randint(50, 256)))
            for _ in range(400)
        ]
    else:
        pats = [".".join(["#"] * 255), ".".join(["#"] * 255 + ["b"])]
    trie = Trie()
    for k, p in enumerate(pats):
        trie.subscribe(p, k)
    got = set(trie.lookup(topic))
    steps = lib.cst_debug_last_walk_steps()
    assert 0 < steps <= _steps_bound(trie), (steps, _snodes(trie))
    want = {k for k, p in enumerate(pats) if matches(AMQP, p, topic)}
    assert got == want
    # a topic that matches none of them is bounded the same way
    assert trie.lookup(".".join(["b"] * 256)) == [] or shape == "hashes-only"
    assert lib.cst_debug_last_walk_steps() <= _steps_bound(trie)


def test_a_wide_level_below_a_hash_is_probed_by_the_topic_words() -> None:
    """Hostile input: a level of 5,000 literal words below '#' against a topic of
    many copies of one word costs one probe per distinct topic word, not one per
    branch or per index (the step counter counts S-nodes taken: only the one
    branch that matches)."""
    trie = Trie()
    for k in range(5000):
        trie.subscribe(f"#.w{k}", k)
    topic = ".".join(["w7"] * 200)
    assert trie.lookup(topic) == [7]
    assert lib.cst_debug_last_walk_steps() <= 4


LONG_WALK_PROGRAM = """
import random, sys, threading, time
from cstrie import Trie
from cstrie._binding import lib
trie = Trie()
rng = random.Random(sys.argv[1])
for k in range(600):
    trie.subscribe("#." + ".".join(rng.choice("*a") for _ in range(100)), k)
topic = ".".join(["a"] * 120)
# With the GIL, the main thread never gives it up on its own now: the other
# thread can run only where a C call releases it.
sys.setswitchinterval(1000.0)
count = 0
stop = False
def counter():
    global count
    while not stop:
        count += 1
        time.sleep(0)  # gives the GIL back at once
th = threading.Thread(target=counter)
th.start()
while count == 0:
    time.sleep(0.001)
moved = 0
for _ in range(3):
    before = count
    trie.lookup(topic)
    moved += count - before
    assert lib.cst_debug_last_walk_steps() > 16384
stop = True
sys.setswitchinterval(0.005)
th.join()
print(moved)
"""


def test_other_threads_run_during_a_long_walk() -> None:
    """Rule: a lookup that has to take many states does not hold the interpreter
    while it walks: another Python thread keeps running during it (the fast
    path gives the GIL up every 16,384 steps; on a free-threaded build it
    detaches).  The trie makes one lookup take each of ~60,000 S-nodes; with a
    switch interval far longer than the test, the other thread can count only
    while a C call has given the GIL up."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", LONG_WALK_PROGRAM, str(SEED)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert int(out) > 0
