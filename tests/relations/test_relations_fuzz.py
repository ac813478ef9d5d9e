"""Random filter relations checked against the independent oracle
(``relation_oracle.py``): a few thousand pairs per dialect, in seconds.  The
100,000-per-dialect run is ``stress/relations_oracle.py``.

The seed comes from ``CSTRIE_SEED`` (a fresh one each run otherwise; all xdist
workers share it) and is printed; replay a failure with

    CSTRIE_SEED=<seed> python -m pytest tests/relations/test_relations_fuzz.py
"""

from __future__ import annotations

import random

import oracle
import pytest
import relation_oracle as ro

from cstrie.relations import intersects, is_subset

CHECKS = 2500  # pairs per dialect; each pair is two relation checks


SEED = oracle.choose_seed()


@pytest.mark.parametrize("name", list(ro.FUZZ_DIALECTS))
def test_relations_match_the_oracle(name: str) -> None:
    d = ro.FUZZ_DIALECTS[name]
    print(f"replay with CSTRIE_SEED={SEED}")
    rng = random.Random(f"{SEED}/relations/{name}")
    for _ in range(CHECKS):
        a, b = ro.random_pair(rng, d, max_len=5)
        counter = ro.search(d, a, b, want_b=False)
        assert is_subset(d, a, b) is (counter is None), (
            f"{name}: is_subset({a!r}, {b!r}); oracle counterexample {counter} (CSTRIE_SEED={SEED})"
        )
        witness = ro.search(d, a, b, want_b=True)
        assert intersects(d, a, b) is (witness is not None), (
            f"{name}: intersects({a!r}, {b!r}); oracle witness {witness} (CSTRIE_SEED={SEED})"
        )


@pytest.mark.parametrize("name", ["amqp", "mqtt", "plus1", "dollar1"])
def test_oracle_search_agrees_with_plain_enumeration(name: str) -> None:
    """The oracle prunes equivalent prefixes; listing every topic up to
    len(a) + len(b) + 2 words without pruning finds the same shortest answers
    (every pattern of at most two words from a few tokens)."""
    d = ro.FUZZ_DIALECTS[name]
    tokens = ["x", "$x" if d.dollar_rule else "y", *(t for t in (d.single, d.multi) if t)]
    if d.empty_words:
        tokens.append("")
    patterns = ro.all_patterns(tokens, d, 2)
    rng = random.Random(f"{SEED}/plain/{name}")
    for a, b in rng.sample([(a, b) for a in patterns for b in patterns], 40):
        bound = len(ro.oracle.words_of(d, a)) + len(ro.oracle.words_of(d, b)) + 2
        for want_b in (False, True):
            pruned = ro.search(d, a, b, want_b)
            plain = ro.brute_search(d, a, b, want_b, bound)
            assert (pruned is None) == (plain is None), (a, b, want_b, pruned, plain)
            assert pruned is None or plain is None or len(pruned) == len(plain)
