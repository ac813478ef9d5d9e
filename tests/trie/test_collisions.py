"""Hash collisions, forced with the engine's debug hash mask.

``lib.cst_debug_set_hash_mask(mask)`` keeps only the ``mask`` bits of every word
hash: with 0 every word collides on the full 64-bit hash (the engine's L-nodes,
reached below the last hash level), with 0x1f words collide in groups of about
1/32 of the level.  The mask is process-global and must be set before creating a
trie, so each check runs in a fresh interpreter (``subprocess``), never disturbing
other tests of the same xdist worker, with a timeout in case an update loops.

Checked against the independent oracle (tests/support/oracle.py): lookups, match,
has_subscribers, subscribers, iteration, len, snapshots and copies, unsubscribe,
and the structural invariants, with hundreds of colliding words.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
MASKS = {"mask0": 0, "mask1f": 0x1F}

PRELUDE = """
import random, sys
import oracle
from cstrie._binding import lib
from cstrie.dialect import AMQP, MQTT, NATS
from cstrie.trie import Trie

lib.cst_debug_set_hash_mask({mask})
"""

EPILOGUE = """
lib.cst_debug_set_hash_mask(~0 & 0xFFFFFFFFFFFFFFFF)
print("DONE")
"""


def run_isolated(body: str, mask: int, timeout: float = 90.0) -> None:
    """Run ``body`` in a fresh interpreter with the hash mask set; fail on any error,
    on a timeout (an engine update that never finishes), or without its DONE line."""
    code = PRELUDE.format(mask=mask) + textwrap.dedent(body) + EPILOGUE
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(TESTS / "support"), env.get("PYTHONPATH", "")]
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(
            f"timed out after {timeout}s (an engine call never returned); "
            f"its output so far: {out[-2000:]!r}",
            pytrace=False,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert proc.stdout.rstrip().endswith("DONE"), proc.stdout[-3000:]


ORACLE_WORKLOAD = """
d = {{"amqp": AMQP, "mqtt": MQTT, "nats": NATS}}["{dialect}"]
rng = random.Random("{dialect}-{mask}")
words = [f"w{{i}}" for i in range(300)]
few = words[:6]

def check(reader, pairs, ntopics=80):
    assert len(reader) == len(pairs), (len(reader), len(pairs))
    listed = list(reader)
    assert len(listed) == len(pairs) and set(listed) == pairs
    by_pat = {{}}
    for p, s in pairs:
        by_pat.setdefault(p, set()).add(s)
    for p, subs in by_pat.items():
        got = reader.subscribers(p)
        assert len(got) == len(subs) and set(got) == subs, p
    for _ in range(ntopics):
        t = oracle.random_topic(rng, d, words if rng.random() < 0.5 else few, 4)
        hits = [p for p in by_pat if oracle.matches(d, p, t)]
        want = set().union(*(by_pat[p] for p in hits))
        got = reader.lookup(t)
        assert len(got) == len(want) and set(got) == want, (t, got, want)
        want_pairs = {{(p, s) for p in hits for s in by_pat[p]}}
        assert set(reader.match(t)) == want_pairs, t
        assert reader.has_subscribers(t) is bool(want), t

trie = Trie(d)
model = set()
for i in range(800):
    # hundreds of distinct words at the top level, a few words deeper down
    pool = words if rng.random() < 0.6 else few
    p = oracle.random_pattern(rng, d, pool, 4)
    s = rng.randrange(12)
    assert trie.subscribe(p, s) is ((p, s) not in model), (p, s)
    model.add((p, s))
for w in words:  # every colliding word at one level, all found
    assert trie.subscribe(w, "all") is ((w, "all") not in model)
    model.add((w, "all"))
trie.check_invariants(strict=True)
stats = trie.stats()
assert stats["lnodes"] > 0 if {mask} == 0 else True, stats
check(trie, model)
for w in words:
    assert "all" in trie.lookup(w), w

snap = trie.snapshot()
frozen = set(model)
dup = trie.copy()
dup_model = set(model)

# remove about 70% of the pairs (existing pairs only), checking as we go
order = sorted(model, key=repr)
rng.shuffle(order)
for n, (p, s) in enumerate(order[: len(order) * 7 // 10]):
    assert trie.unsubscribe(p, s) is True, (p, s)
    assert trie.unsubscribe(p, s) is False, (p, s)  # through a just-emptied level
    model.discard((p, s))
    if n % 100 == 0:
        trie.check_invariants(strict=True)
        assert len(trie) == len(model)
trie.check_invariants(strict=True)
check(trie, model)
# and back: re-subscribe some removed pairs below words whose levels were emptied
for p, s in order[: len(order) // 10]:
    assert trie.subscribe(p, s) is True, (p, s)
    model.add((p, s))
trie.check_invariants(strict=True)
check(trie, model, 40)

# the snapshot and the copy did not move; the copy is still writable
check(snap, frozen, 40)
snap.check_invariants(strict=True)
check(dup, dup_model, 40)
for w in words[:50]:
    assert dup.subscribe(w + ".extra", "x") is True
    dup_model.add((w + ".extra", "x"))
check(dup, dup_model, 40)
check(snap, frozen, 20)
dup.check_invariants(strict=True)
"""


@pytest.mark.parametrize("dialect", ["amqp", "mqtt", "nats"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_colliding_words_against_oracle(mask: str, dialect: str) -> None:
    m = MASKS[mask]
    run_isolated(ORACLE_WORKLOAD.format(dialect=dialect, mask=m), m)


SINGLE_LEVEL = """
trie = Trie()
words = [f"c{i}" for i in range(400)]
rng = random.Random(5)
for w in words:
    assert trie.subscribe(w, 1) is True
    assert trie.subscribe(w, 2) is True
trie.check_invariants(strict=True)
for w in words:
    assert sorted(trie.lookup(w)) == [1, 2], w
    assert trie.has_subscribers(w)
assert trie.lookup("nope") == [] and not trie.has_subscribers("c400")
assert len(trie) == 800 and len(list(trie)) == 800
rng.shuffle(words)
for n, w in enumerate(words):
    assert trie.unsubscribe(w, 1) is True
    assert trie.unsubscribe(w, 2) is True
    assert trie.lookup(w) == []
    if n % 40 == 0:
        trie.check_invariants(strict=True)
        assert len(trie) == 2 * (len(words) - n - 1)
trie.check_invariants(strict=True)
assert len(trie) == 0 and trie.stats()["nodes"] <= 2, trie.dump()
for w in words:  # and back again
    assert trie.subscribe(w, 3) is True
for w in words:
    assert trie.lookup(w) == [3]
trie.check_invariants(strict=True)
"""


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_single_level_collisions_prune_fully(mask: str) -> None:
    run_isolated(SINGLE_LEVEL, MASKS[mask])


# Two words A and B that collide on every hash bit kept: with mask 0 any two words;
# with 0x1f, subscribe 40 words (pigeonhole: some share the 5 bits) and read the
# words of an L-node off the dump.
COLLIDING_PAIR = """
def _collide():
    t = Trie()
    for i in range(40):
        t.subscribe(f"k{i}", 0)
    lines = t.dump().splitlines()
    for n, line in enumerate(lines):
        if line.strip().startswith("L n="):
            inner = len(line) - len(line.lstrip()) + 2
            found = [
                l.strip().split("'")[1]
                for l in lines[n + 1 :]
                if len(l) - len(l.lstrip()) == inner and l.strip().startswith("S word '")
            ]
            return found[0], found[1]
    raise AssertionError("no fully colliding pair: " + t.dump())
A, B = _collide()
probe = Trie()
probe.subscribe(A, 0)
probe.subscribe(B, 0)
assert probe.stats()["lnodes"] == 1, probe.dump()
"""

# An L-node's S-nodes have child I-nodes (the next topic level), so clean() must
# handle an L-node like a C-node: when such a child level empties, it is entombed
# and the parent resurrects it.  Were it left entombed, the S-node would keep a
# dead child, and every later update through that word would meet the tomb, ask
# the parent to clean (update_level case 5), find nothing to do and restart
# forever.  So the updates run in a subprocess with a timeout.

PRUNE = """
trie = Trie()
trie.subscribe(A + ".x", 1)
trie.subscribe(B, 1)  # A and B collide on the full hash: one L-node holds both
assert trie.unsubscribe(A + ".x", 1) is True
assert sorted(trie) == [(B, 1)] and trie.lookup(A + ".x") == []
trie.check_invariants(strict=True)  # A must not keep an entombed child level
"""

THROUGH_DEAD_WORD = """
trie = Trie()
trie.subscribe(A + ".x", 1)
trie.subscribe(B, 1)
trie.unsubscribe(A + ".x", 1)
print("updating through A", flush=True)
assert {op}  # with a dead child level left behind, this would never return
trie.check_invariants(strict=True)
print("returned", flush=True)
"""
UPDATES = {
    "resubscribe": 'trie.subscribe(A + ".x", 1) is True',
    "subscribe-sibling": 'trie.subscribe(A + ".y", 1) is True',
    "unsubscribe-absent": 'trie.unsubscribe(A + ".x", 1) is False',
}


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_colliding_pair_is_found(mask: str) -> None:
    run_isolated(COLLIDING_PAIR, MASKS[mask], timeout=30)


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_unsubscribe_below_fully_colliding_word_prunes(mask: str) -> None:
    run_isolated(COLLIDING_PAIR + PRUNE, MASKS[mask], timeout=30)


@pytest.mark.parametrize("update", sorted(UPDATES))
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_update_below_emptied_fully_colliding_word(mask: str, update: str) -> None:
    body = COLLIDING_PAIR + THROUGH_DEAD_WORD.format(op=UPDATES[update])
    run_isolated(body, MASKS[mask], timeout=30)


COLLIDING_GROUPS = """
# 200 share groups on one filter: with mask 0 their ids' words collide on the
# full hash, so the share level is C-nodes down to the last hash level and an
# L-node below it; a route must still deliver to every group once.
trie = Trie("mqtt")
for g in range(200):
    assert trie.subscribe(f"$share/g{g}/a/#", f"m{g}") is True
trie.check_invariants(strict=True)
plain, groups = trie.route_by_group("a/b")
assert plain == [] and groups == {f"g{g}": f"m{g}" for g in range(200)}, len(groups)
"""


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_route_finds_every_group_of_a_colliding_share_level(mask: str) -> None:
    """Rule (shared subscriptions): a message goes to one member of every group
    with a matching filter, however the groups' ids collide in the hash trie."""
    run_isolated(COLLIDING_GROUPS, MASKS[mask], timeout=60)
