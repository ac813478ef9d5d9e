"""Redis globs against a real ``redis-server``: ``PSUBSCRIBE`` every pattern of a
batch on one connection, ``PUBLISH`` each topic from another, and compare the
patterns Redis delivered through with :class:`cstrie.selectors.glob.Glob`'s
answers.  0 differences allowed.

The fuzz is hypothesis's, seeded by ``CSTRIE_SEED`` (printed; replay with
``CSTRIE_SEED=<seed>``).  The server is Debian's ``redis-server`` (``make test``
installs it with apt-get, .ci/redis-server), started on loopback per session;
where it is missing the tests skip, saying so.
"""

from __future__ import annotations

from collections.abc import Iterator

import oracle
import pytest
import redis_server
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from cstrie.selectors.glob import MAX_NESTING, Glob

redis = pytest.importorskip("redis")

SEED = oracle.choose_seed()

# the pattern bytes that mean something, literals around them, and bytes past ASCII
# (a two-byte character and its lead byte alone, to reach the signed-char ranges)
ALPHABET = ["a", "b", "z", "*", "?", "[", "]", "^", "-", "\\", "é", "Ã", "\u00ff", "0"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis_server.RedisServer]:
    if redis_server.REDIS_SERVER is None:
        pytest.skip("redis-server is not on PATH (make test installs Debian's package)")
    s = redis_server.RedisServer(redis_server.REDIS_SERVER, tmp_path_factory.mktemp("redis"))
    try:
        yield s
    finally:
        s.stop()


class PubSub:
    """One subscriber connection and one publisher connection."""

    def __init__(self, port: int) -> None:
        self.pub = redis.Redis(host="127.0.0.1", port=port)
        self.sub = self.pub.pubsub()

    def delivered(self, patterns: list[str], topics: list[str]) -> list[set[str]]:
        """For each topic, the patterns Redis delivered a PUBLISH to it through."""
        raw = [p.encode() for p in patterns]
        self.sub.psubscribe(*raw)
        confirmed = 0
        while confirmed < len(set(raw)):
            m = self.sub.get_message(timeout=10)
            assert m is not None, "no psubscribe confirmation"
            confirmed += m["type"] == "psubscribe"
        out = []
        for t in topics:
            n = self.pub.publish(t.encode(), b"m")
            got: set[str] = set()
            while len(got) < n:
                m = self.sub.get_message(timeout=10)
                assert m is not None, f"PUBLISH {t!r} counted {n} receivers, fewer came"
                if m["type"] == "pmessage":
                    got.add(m["pattern"].decode())
            out.append(got)
        self.sub.punsubscribe()
        while self.sub.get_message(timeout=0.2) is not None:
            pass
        return out


def ours(patterns: list[str], topics: list[str]) -> list[set[str]]:
    globs = [Glob(p) for p in patterns]
    return [{g.pattern for g in globs if g.match(t.encode())} for t in topics]


texts = st.lists(st.sampled_from(ALPHABET), max_size=7).map("".join)


@seed(SEED)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    patterns=st.lists(texts, min_size=1, max_size=30, unique=True),
    topics=st.lists(texts, min_size=1, max_size=30),
)
def test_glob_fuzz_matches_redis_psubscribe(
    server: redis_server.RedisServer, patterns: list[str], topics: list[str]
) -> None:
    print(f"replay with CSTRIE_SEED={SEED}")
    ps = PubSub(server.port)
    # the topics also include the patterns themselves (a pattern matching itself
    # is where escapes and sets show)
    topics = topics + patterns
    assert ours(patterns, topics) == ps.delivered(patterns, topics)


EDGES = [
    # (pattern, topics): the rules' edges, each checked against the server
    ("*", ["", "a", "é"]),
    ("", ["", "a"]),
    ("?", ["", "a", "é"]),  # é is two bytes
    ("??", ["é", "ab"]),
    ("[a-]x]", ["x", "]", "^", "a", "b", "-"]),
    ("[]", ["]", "a", "[]"]),
    ("[^]", ["]", "a", "\x00"]),
    ("[", ["[", "a", ""]),
    ("[^", ["q", "", "^"]),
    ("[ab", ["a", "b", "[ab", "c"]),
    ("[z-a]", ["m", "A"]),
    ("[a-\u00c3]", ["b", "A", "\x00", "é", "ÿ"]),  # signed chars: 0xc3..0xff and 0x00..a
    ("[\\]]", ["]", "\\"]),
    ("[a\\", ["a", "\\"]),
    ("\\", ["\\", ""]),
    ("a\\", ["a\\", "a"]),
    ("\\*", ["*", "a"]),
    ("a**b", ["ab", "axxb", "a*b"]),
    ("*a*b*c*", ["abc", "xaxbxcx", "acb"]),
]


@pytest.mark.parametrize(("pattern", "topics"), EDGES)
def test_glob_edges_match_redis(
    server: redis_server.RedisServer, pattern: str, topics: list[str]
) -> None:
    assert ours([pattern], topics) == PubSub(server.port).delivered([pattern], topics)


@pytest.mark.parametrize("runs", [MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1])
def test_glob_nesting_limit_matches_redis(server: redis_server.RedisServer, runs: int) -> None:
    """More than 1,000 ``*`` runs before the last token: Redis stops (no match)."""
    topic = "a" * (runs + 1)
    patterns = ["*a" * runs + "*a", "*a" * runs + "*"]
    assert ours(patterns, [topic]) == PubSub(server.port).delivered(patterns, [topic])
