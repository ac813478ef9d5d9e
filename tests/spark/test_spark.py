"""The Spark pipeline (:mod:`cstrie.spark`) against the slow reference matcher.

Needs pyspark, pyarrow, pandas (Spark's ``mapInArrow`` checks for it) and Java;
skipped otherwise.  One ``local[2]`` SparkSession serves the whole file; one
test starts a real standalone master and worker on 127.0.0.1 and runs the
``cstrie spark-match`` command through them.  The first group of tests needs no
Spark at all (payload, worker cache, batch matching on Arrow arrays).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oracle
import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")
pytest.importorskip("pandas")
import pyarrow.parquet as pq  # noqa: E402

from cstrie import Trie  # noqa: E402
from cstrie.dialect import AMQP, MQTT, NATS, Dialect  # noqa: E402
from cstrie.spark import engine  # noqa: E402
from cstrie.spark.payload import Payload, digest  # noqa: E402
from cstrie_lab.spark import PyMatcher, pattern_regex  # noqa: E402

pytestmark = pytest.mark.spark

DIALECTS = [AMQP, MQTT, NATS]
WORDS = ["a", "b", "c", "dd", "$sys", "x y", "é", "k-1"]
INVALID = {
    "amqp": [],
    "mqtt": ["", "a/+", "a/#/b", "sp/+x", "nul\x00l"],
    "nats": ["", "a..b", "a.*", "a.>", ".a"],
}


def _java() -> bool:
    return bool(shutil.which("java") or os.environ.get("JAVA_HOME"))


def workload(d: Dialect, seed: int, npat: int = 60, ntop: int = 250) -> tuple[list, list]:
    """(pairs, topics): random patterns with 1-3 subscribers each (some shared),
    random valid topics, plus the dialect's invalid topics and some nulls."""
    rng = random.Random(seed)
    pairs = set()
    subs = [f"s{i}" for i in range(12)]
    for _ in range(npat):
        p = oracle.random_pattern(rng, d, WORDS, 5)
        for s in rng.sample(subs, rng.randint(1, 3)):
            pairs.add((p, s))
    topics: list[str | None] = [oracle.random_topic(rng, d, WORDS, 5) for _ in range(ntop)]
    topics += INVALID[d.name] + [None, None, None]
    rng.shuffle(topics)
    return sorted(pairs), topics


def reason_for(d: Dialect, topic: str | None) -> str:
    if topic is None:
        return "null topic"
    with pytest.raises(ValueError) as info:
        d.split_topic(topic)
    return str(info.value)


# ------------------------------------------------------- without Spark
def test_payload_round_trip_from_trie() -> None:
    t = Trie("mqtt")
    t.subscribe("a/+", "alice")
    t.subscribe("a/#", "alice")
    t.subscribe("a/#", "bob")
    t.subscribe("#", "carol")
    p = Payload.from_reader(t.snapshot())
    q = Payload.from_bytes(p.to_bytes())
    assert q.dialect == MQTT
    pats, subs = q.patterns.to_pylist(), q.subscribers.to_pylist()
    got = {
        (pats[i], subs[j])
        for i, j in zip(q.pair_pattern.to_pylist(), q.pair_subscriber.to_pylist(), strict=True)
    }
    assert got == set(t)
    assert q.npairs == 4


def test_payload_from_arrow_dedupes_and_rejects_nulls() -> None:
    table = pa.table({"pattern": ["a.*", "a.*", "b"], "subscriber": [1, 1, 2]})
    p = Payload.from_arrow(table)
    assert p.npairs == 2 and p.subscribers.type == pa.int64()
    with pytest.raises(ValueError, match="nulls"):
        Payload.from_arrow(pa.table({"pattern": ["a", None], "subscriber": [1, 2]}))
    with pytest.raises(ValueError, match="no column 'pattern'"):
        Payload.from_arrow(pa.table({"p": ["a"], "subscriber": [1]}))
    with pytest.raises(ValueError, match="magic"):
        Payload.from_bytes(b"not a payload at all")


def test_mixed_subscriber_types_become_strings() -> None:
    with pytest.warns(UserWarning, match="str"):
        p = Payload.from_pairs([("a", 1), ("b", "x")])
    assert p.subscribers.type == pa.string()


def test_invalid_pattern_is_named_when_building() -> None:
    p = Payload.from_arrow(pa.table({"pattern": ["a/+", "a/#/b"], "subscriber": ["s", "s"]}), MQTT)
    with pytest.raises(ValueError, match="a/#/b"):
        engine.NativeMatcher(p)


def test_worker_cache_builds_once_per_payload() -> None:
    raw = Payload.from_pairs([("cache.test.*", "s")]).to_bytes()
    key = digest(raw)
    before = engine.build_count()

    class Source:
        reads = 0

        @property
        def value(self) -> bytes:
            Source.reads += 1
            return raw

    m1 = engine.get_matcher(key, Source())
    m2 = engine.get_matcher(key, Source())
    assert m1 is m2
    assert engine.build_count() == before + 1
    assert Source.reads == 1  # a cached matcher never touches the broadcast
    with pytest.raises(ValueError, match="SHA-256"):
        engine.get_matcher("0" * 64, raw)


def _scan(m: Any, col: Any, cap: int = 1000) -> tuple[set[tuple[int, int]], list[int], int]:
    status = np.zeros(len(col), np.int8)
    pairs: set[tuple[int, int]] = set()
    biggest = 0
    for rows, ids in m.scan(col, status, cap):
        assert len(rows) == len(ids) <= cap
        biggest = max(biggest, len(rows))
        new = set(zip(rows.tolist(), ids.tolist(), strict=True))
        assert not new & pairs, "a pair was delivered twice"
        pairs |= new
    return pairs, status.tolist(), biggest


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_scan_matches_oracle_on_arrow_layouts(d: Dialect) -> None:
    """string, large_string, binary, sliced (array offset + validity bit offset)
    and chunked columns all give the oracle's pairs."""
    pairs, topics = workload(d, 7, npat=40, ntop=120)
    payload = Payload.from_pairs(pairs, d)
    m = engine.NativeMatcher(payload)
    py = PyMatcher(payload)
    pats, subs = payload.patterns.to_pylist(), payload.subscribers.to_pylist()
    pp, ps = payload.pair_pattern.to_pylist(), payload.pair_subscriber.to_pylist()

    def named(found: set[tuple[int, int]]) -> set[tuple[int, str, str]]:
        return {(r, pats[pp[k]], subs[ps[k]]) for r, k in found}

    expected = {
        (r, p, s)
        for r, t in enumerate(topics)
        if t is not None and oracle.valid_topic(d, t)
        for p, s in pairs
        if oracle.matches(d, p, t)
    }
    base = pa.array(topics, pa.string())
    padded = pa.array([None, "pad", *topics, "tail"], pa.string()).slice(2, len(topics))
    layouts = {
        "string": base,
        "large_string": base.cast(pa.large_string()),
        "binary": base.cast(pa.binary()),
        "sliced": padded,
        "chunked": pa.chunked_array([base.slice(0, 50), base.slice(50)]),
    }
    for name, col in layouts.items():
        found, status, _ = _scan(m, col, cap=37)
        assert named(found) == expected, name
        for t, st in zip(topics, status, strict=True):
            if t is None:
                assert st == 1, name
            elif oracle.valid_topic(d, t):
                assert st == 0, (name, t)
            else:
                assert st < 0, (name, t)
    found, _, _ = _scan(py, base, cap=37)
    assert named(found) == expected


def test_big_trie_rows_split_or_whole_match_the_trie() -> None:
    """Over 50,000 pairs the rows walk in shared rounds (16 a group); a row
    split between calls (cap 37) still delivers each of its pairs once, and
    every row gets exactly the pairs the Trie matches."""
    rng = random.Random(11)
    words = [f"w{i}" for i in range(12)]
    pats: set[str] = set()
    while len(pats) < 20_000:
        parts = [rng.choice([*words, "+"]) for _ in range(rng.randint(1, 4))]
        pats.add("/".join(parts + (["#"] if rng.random() < 0.1 else [])))
    pairs = [(p, f"s{rng.randrange(500)}") for p in sorted(pats) for _ in range(3)]
    pairs = sorted(set(pairs))
    assert len(pairs) > 50_000
    payload = Payload.from_pairs(pairs, MQTT)
    m = engine.NativeMatcher(payload)
    trie = Trie("mqtt")
    trie.subscribe_many(pairs)
    topics = ["/".join(rng.choice(words) for _ in range(rng.randint(1, 5))) for _ in range(300)]
    topics += ["w1/+", "", "$SYS/w1"]
    pp, ps = payload.pair_pattern.to_pylist(), payload.pair_subscriber.to_pylist()
    plist, slist = payload.patterns.to_pylist(), payload.subscribers.to_pylist()
    for cap in (37, 1 << 16):
        found, status, _ = _scan(m, pa.array(topics, pa.string()), cap=cap)
        got: dict[int, set[tuple[str, str]]] = {}
        for r, k in found:
            got.setdefault(r, set()).add((plist[pp[k]], slist[ps[k]]))
        for r, t in enumerate(topics):
            if t in ("w1/+", ""):
                assert status[r] < 0 and r not in got
            else:
                assert status[r] == 0 and got.get(r, set()) == set(trie.match(t)), t


def test_huge_fan_out_comes_in_bounded_chunks() -> None:
    n = 30_000
    pairs = [("#", f"sub{i:05d}") for i in range(n)] + [("a.b", "one")]
    m = engine.NativeMatcher(Payload.from_pairs(pairs))
    col = pa.array(["a.b", "zz", None, "a.b"])
    found, status, biggest = _scan(m, col, cap=4096)
    assert len(found) == 2 * (n + 1) + n
    assert biggest == 4096
    assert status == [0, 0, 1, 0]
    # Through the whole batch pipeline: every output batch is bounded too.
    raw = Payload.from_pairs(pairs).to_bytes()
    plan = engine.Plan(
        key=digest(raw),
        mode="match",
        cap=5000,
        extra=[("pattern", pa.string()), ("subscriber", pa.string())],
    )
    batch = pa.RecordBatch.from_arrays([col, pa.array([0, 1, 2, 3])], names=["topic", "id"])
    sizes = [b.num_rows for b in engine.run(raw, plan, iter([batch]))]
    assert max(sizes) <= 5000 and sum(sizes) == 2 * (n + 1) + n


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_regex_translation_agrees_with_oracle(d: Dialect) -> None:
    """The rlike baseline's regexes, checked with Python's re (Spark's Java
    regexes are checked on a sample in test_rlike_baseline_in_spark)."""
    rng = random.Random(3)
    words = [*WORDS, "d.e", "q*", "x+y", "(p)", "[z]"]
    for _ in range(150):
        p = oracle.random_pattern(rng, d, words, 5)
        rx = re.compile(pattern_regex(d, p).replace("\\z", "\\Z"))
        for _ in range(30):
            t = oracle.random_topic(rng, d, words, 5)
            key = "" if t == "" else d.separator + t
            assert (rx.search(key) is not None) == oracle.matches(d, p, t), (p, t)


# ------------------------------------------------------------- with Spark
@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if not _java():
        pytest.skip("no Java runtime")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("cstrie-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "64")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def messages_df(spark: Any, topics: list[str | None], partitions: int = 3) -> Any:
    rows = [(i, t) for i, t in enumerate(topics)]
    return spark.createDataFrame(rows, "id long, topic string").repartition(partitions)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_random_workload_equals_oracle(spark: Any, d: Dialect) -> None:
    from cstrie.spark import SparkMatcher

    pairs, topics = workload(d, {"amqp": 1, "mqtt": 2, "nats": 3}[d.name])
    trie = Trie.from_pairs(pairs, d)
    m = SparkMatcher(trie, spark)
    msgs = messages_df(spark, topics)
    rows = m.route(msgs).collect()
    expected = {
        (i, p, s)
        for i, t in enumerate(topics)
        if t is not None and oracle.valid_topic(d, t)
        for p, s in pairs
        if oracle.matches(d, p, t)
    }
    got = {(r.id, r.pattern, r.subscriber) for r in rows if r.route == "match"}
    assert got == expected
    assert len([r for r in rows if r.route == "match"]) == len(expected)  # no duplicates
    matched_ids = {i for i, _, _ in expected}
    others = {r.id: (r.route, r.reason) for r in rows if r.route != "match"}
    for i, t in enumerate(topics):
        if i in matched_ids:
            assert i not in others
        elif t is None:
            assert others[i] == ("null", "null topic")
        elif not oracle.valid_topic(d, t):
            assert others[i] == ("invalid", reason_for(d, t)), t
        else:
            assert others[i] == ("unmatched", None)
    # match() is the "match" route with the message columns unchanged.
    plain = m.match(msgs).collect()
    assert plain[0].asDict().keys() == {"id", "topic", "pattern", "subscriber"}
    assert {(r.id, r.pattern, r.subscriber) for r in plain} == expected


def test_summaries_and_python_engine(spark: Any) -> None:
    from cstrie.spark import SparkMatcher

    pairs, topics = workload(AMQP, 11, npat=40, ntop=200)
    topics += ["", "a..b"]
    trie = Trie.from_pairs(pairs)
    m = SparkMatcher(trie, spark)
    msgs = messages_df(spark, topics)
    valid = [(i, t) for i, t in enumerate(topics) if t is not None]
    hits = {(i, p, s) for i, t in valid for p, s in pairs if oracle.matches(AMQP, p, t)}
    summary = m.summary(msgs)
    assert summary == {
        "messages": len(topics),
        "matched": len({i for i, _, _ in hits}),
        "unmatched": len(valid) - len({i for i, _, _ in hits}),
        "null": topics.count(None),
        "invalid": 0,
        "matches": len(hits),
    }
    per_sub = {r.subscriber: (r.patterns, r.matches) for r in m.per_subscriber(msgs).collect()}
    for s in {s for _, s in pairs}:
        npat = sum(1 for _, x in pairs if x == s)
        assert per_sub[s] == (npat, sum(1 for _, _, x in hits if x == s)), s
    per_pat = {
        r.pattern: (r.subscribers, r.messages, r.matches) for r in m.per_pattern(msgs).collect()
    }
    for p in {p for p, _ in pairs}:
        nsub = sum(1 for x, _ in pairs if x == p)
        nmsg = len({i for i, x, _ in hits if x == p})
        assert per_pat[p] == (nsub, nmsg, nmsg * nsub), p
    unmatched = {r.id for r in m.unmatched(msgs).collect()}
    assert unmatched == {i for i, _ in valid} - {i for i, _, _ in hits}
    # The pure-Python baseline engine gives the same rows through the same pipeline.
    py = SparkMatcher(trie, spark, engine=PyMatcher)
    got = {(r.id, r.pattern, r.subscriber) for r in py.match(msgs).collect()}
    assert got == hits
    for bad in ("python", Trie, PyMatcher(py.payload)):
        with pytest.raises(ValueError, match="MatcherBase"):
            SparkMatcher(trie, spark, engine=bad)


def test_subscription_sources(spark: Any, tmp_path: Path) -> None:
    """A DataFrame (typed subscribers, duplicates), an exported file, a Snapshot."""
    from cstrie.export import export
    from cstrie.spark import match, to_payload

    topics = ["a.b", "a.c.d", None, "x"]
    msgs = messages_df(spark, topics, 2)
    subs_df = spark.createDataFrame(
        [("a.*", 1), ("a.#", 2), ("a.#", 2), ("#.d", 3)], "pattern string, subscriber long"
    )
    got = {(r.id, r.pattern, r.subscriber) for r in match(msgs, subs_df).collect()}
    assert got == {(0, "a.*", 1), (0, "a.#", 2), (1, "a.#", 2), (1, "#.d", 3)}
    trie = Trie()
    for p, s in [("a.*", "u"), ("a.#", "v"), ("#.d", "w")]:
        trie.subscribe(p, s)
    snap = trie.snapshot()
    trie.unsubscribe("a.#", "v")  # the snapshot keeps it
    reference = to_payload(snap)
    for fmt in ("binary", "jsonl", "parquet"):
        path = tmp_path / f"subs.{fmt}"
        export(snap, str(path), format=fmt)
        p = to_payload(str(path))
        assert p.patterns.equals(reference.patterns), fmt
        assert p.subscribers.equals(reference.subscribers), fmt
        assert p.pair_pattern.equals(reference.pair_pattern), fmt
    rows = match(msgs, str(tmp_path / "subs.binary"), keep_unmatched=True).collect()
    got2 = {(r.id, r.pattern, r.subscriber) for r in rows}
    assert got2 == {
        (0, "a.*", "u"),
        (0, "a.#", "v"),
        (1, "a.#", "v"),
        (1, "#.d", "w"),
        (2, None, None),
        (3, None, None),
    }


def test_empty_inputs(spark: Any) -> None:
    from cstrie.spark import SparkMatcher

    empty_msgs = spark.createDataFrame([], "id long, topic string")
    m = SparkMatcher(Trie.from_pairs([("a.*", "s")]), spark)
    assert m.match(empty_msgs).collect() == []
    assert m.summary(empty_msgs)["messages"] == 0
    none = SparkMatcher(Trie(), spark)
    msgs = messages_df(spark, ["a", None, "b.c"], 2)
    assert none.match(msgs).collect() == []
    kept = none.match(msgs, keep_unmatched=True).collect()
    assert sorted(r.id for r in kept) == [0, 1, 2]
    assert all(r.pattern is None and r.subscriber is None for r in kept)
    assert none.per_subscriber(msgs).collect() == []


def test_huge_fan_out_in_spark(spark: Any) -> None:
    from cstrie.spark import SparkMatcher

    n = 20_000
    pairs = [("#", f"s{i}") for i in range(n)] + [("a.*", "x")]
    m = SparkMatcher(Trie.from_pairs(pairs), spark)
    msgs = messages_df(spark, ["a.b", "q", None, "a.z.z"], 2)
    out = m.match(msgs, chunk_rows=1000)
    counts = {r.id: r["count"] for r in out.groupBy("id").count().collect()}
    assert counts == {0: n + 1, 1: n, 3: n}
    assert out.select("id", "subscriber").distinct().count() == 3 * n + 1


def test_each_worker_builds_the_matcher_once(spark: Any) -> None:
    """8 tasks on local[2]: at most one build per Python worker, never one per task."""
    from cstrie.spark import SparkMatcher

    m = SparkMatcher(Trie.from_pairs([("once.per.worker.#", "s"), ("*", "t")]), spark)
    builds = spark.sparkContext.accumulator(0)
    m.build_counter = builds
    msgs = messages_df(spark, [f"w{i}" for i in range(400)], 8)
    assert m.match(msgs).count() == 400
    assert 1 <= builds.value <= 2, builds.value
    # A second job over the same matcher finds it in the workers' caches.
    assert m.match(msgs).count() == 400
    assert builds.value <= 2, builds.value


def test_bad_arguments(spark: Any) -> None:
    from cstrie.spark import SparkMatcher, match

    msgs = messages_df(spark, ["a"], 1)
    with pytest.raises(ValueError, match="'a/#/b'"):
        subs = spark.createDataFrame([("a/#/b", "s")], "pattern string, subscriber string")
        match(msgs, subs, dialect="mqtt")
    m = SparkMatcher(Trie.from_pairs([("a", "s")]), spark)
    with pytest.raises(ValueError, match="no column 'subject'"):
        m.match(msgs, "subject")
    with pytest.raises(ValueError, match="already have a column 'topic'"):
        m.match(msgs, pattern_col="topic")
    with pytest.raises(TypeError, match="string"):
        m.match(msgs, "id")
    with pytest.raises(ValueError, match="does not match"):
        match(msgs, Trie.from_pairs([("a", "s")]), dialect="nats")
    with pytest.raises(TypeError, match="subscriptions must be"):
        match(msgs, 42)


def test_rlike_baseline_in_spark(spark: Any) -> None:
    """Spark's own rlike with the translated regexes agrees with the engine."""
    from cstrie.spark import SparkMatcher
    from cstrie_lab.spark import rlike_match

    for d in DIALECTS:
        pairs, topics = workload(d, 21, npat=30, ntop=80)
        topics = [t for t in topics if t is not None and oracle.valid_topic(d, t)]
        msgs = messages_df(spark, topics, 2)
        subs = spark.createDataFrame(pairs, "pattern string, subscriber string")
        got = {
            (r.id, r.pattern, r.subscriber) for r in rlike_match(msgs, subs, dialect=d).collect()
        }
        native = SparkMatcher(subs, spark, dialect=d).match(msgs).collect()
        assert got == {(r.id, r.pattern, r.subscriber) for r in native}, d.name


def test_cli_local(spark: Any, tmp_path: Path, capsys: Any) -> None:
    """``cstrie spark-match`` in-process (it reuses the running session)."""
    from cstrie.cli import main

    subs = tmp_path / "subs.tsv"
    subs.write_text("a.*\talice\na.#\tbob\nnever\tnobody\n")
    msgs = tmp_path / "msgs.jsonl"
    topics = ["a.b", None, "a", "x.y", "a.b"]
    msgs.write_text("".join(json.dumps({"n": i, "topic": t}) + "\n" for i, t in enumerate(topics)))
    out, rej, summ = tmp_path / "out", tmp_path / "rejected", tmp_path / "summary.json"

    def spark_match(output: Path, *more: str) -> int:
        common = ["--subscriptions", str(subs), "--messages", str(msgs), "--no-progress"]
        return int(main(["spark-match", *common, "--output", str(output), *more]))

    code = spark_match(out, "--rejected", str(rej), "--summary-json", str(summ))
    assert code == 0
    printed = capsys.readouterr().out
    assert re.search(r"null topics\s+1\b", printed), printed
    table = pq.read_table(str(out))
    got = sorted(
        zip(
            table["n"].to_pylist(),
            table["pattern"].to_pylist(),
            table["subscriber"].to_pylist(),
            strict=True,
        )
    )
    assert got == [
        (0, "a.#", "bob"),
        (0, "a.*", "alice"),
        (2, "a.#", "bob"),
        (4, "a.#", "bob"),
        (4, "a.*", "alice"),
    ]
    s = json.loads(summ.read_text())
    assert (s["messages"], s["matched"], s["unmatched"], s["null"], s["matches"]) == (5, 3, 1, 1, 5)
    assert s["top_subscribers"][0] == ["bob", 3]
    rejected = pq.read_table(str(rej)).to_pylist()
    assert rejected == [{"n": 1, "topic": None, "reason": "null topic"}]
    # jsonl output; an existing output without --overwrite is an error (exit 2)
    code = spark_match(tmp_path / "j", "--format", "jsonl", "--keep-unmatched")
    assert code == 0
    lines = [json.loads(x) for f in sorted((tmp_path / "j").glob("part-*")) for x in f.open()]
    assert len(lines) == 5 + 2 and {x["n"] for x in lines if x["pattern"] is None} == {1, 3}
    assert spark_match(out) == 2


# ------------------------------------------------------ standalone cluster
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(path: Path, text: str, proc: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"{text!r} not in {path} after {timeout}s:\n{path.read_text()[-3000:]}")


def test_standalone_cluster(tmp_path: Path) -> None:
    """A real standalone master + worker (from the installed pyspark) on
    127.0.0.1, and the command run through them in a separate driver process."""
    if not _java():
        pytest.skip("no Java runtime")
    from pyspark.find_spark_home import _find_spark_home

    home = _find_spark_home()
    spark_class = os.path.join(home, "bin", "spark-class")
    if not os.path.exists(spark_class):
        pytest.skip("this pyspark has no bin/spark-class")
    env = dict(
        os.environ,
        SPARK_HOME=home,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    port, ui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[Any] = []
    logs = {name: tmp_path / f"{name}.log" for name in ("master", "worker")}
    try:
        with open(logs["master"], "wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--webui-port",
                        str(ui),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        _wait_for(logs["master"], "elected leader", procs[0], 120)
        with open(logs["worker"], "wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(_free_port()),
                        "--webui-port",
                        str(_free_port()),
                        "--cores",
                        "2",
                        "--memory",
                        "1g",
                        "--work-dir",
                        str(tmp_path / "work"),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        _wait_for(logs["worker"], "Successfully registered with master", procs[1], 120)

        trie = Trie.from_pairs([("sensors/+/temp", "dash"), ("sensors/#", "archive")], "mqtt")
        from cstrie.export import export

        export(trie.snapshot(), str(tmp_path / "subs.cstrie"), format="binary")
        topics = [f"sensors/r{i % 7}/temp" for i in range(300)] + ["sensors/+", "other"]
        pq.write_table(pa.table({"topic": topics}), str(tmp_path / "msgs.parquet"))
        out = tmp_path / "out"
        cmd = [
            sys.executable,
            "-m",
            "cstrie",
            "spark-match",
            "--master",
            url,
            "--subscriptions",
            str(tmp_path / "subs.cstrie"),
            "--messages",
            str(tmp_path / "msgs.parquet"),
            "--output",
            str(out),
            "--summary-json",
            str(tmp_path / "s.json"),
            "--no-progress",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.host=127.0.0.1",
        ]
        res = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert res.returncode == 0, res.stderr[-4000:]
        s = json.loads((tmp_path / "s.json").read_text())
        assert s["master"] == url
        assert (s["messages"], s["matched"], s["invalid"], s["unmatched"], s["matches"]) == (
            302,
            300,
            1,
            1,
            600,
        )
        assert pq.read_table(str(out)).num_rows == 600
        # the work really ran in an executor launched by the standalone worker
        assert any((tmp_path / "work").glob("app-*/*/stderr"))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_cli_rejects_a_missing_messages_path(tmp_path: Path, capsys: Any) -> None:
    """Checked before Spark starts: exit 2 with a message."""
    from cstrie.cli import main

    subs = tmp_path / "subs.tsv"
    subs.write_text("a\ts\n")
    code = main(
        [
            "spark-match",
            "--subscriptions",
            str(subs),
            "--messages",
            str(tmp_path / "nope.parquet"),
            "--output",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


# ------------------------------------------------------------ deliveries
# Rules (docs/spark.md "Deliveries", Trie.route): for every message with a valid
# topic, every ordinary subscriber of a matching pattern gets exactly one
# delivery (group null), and every share group with a member on a matching
# filter gets exactly one delivery, to one of those members (group = its name);
# null and invalid topics deliver nothing.  Round-robin rotates per worker
# process; sticky is a function of (key, members), the same in every worker.
GROUP_NAMES = ["billing", "grüppe", "q3"]


def group_workload(
    d: Dialect, seed: int, ntop: int = 200
) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]], list[str | None]]:
    """(pairs, memberships (filter, group, member), topics): groups spread over
    several filters that overlap, members that are also ordinary subscribers."""
    pairs, topics = workload(d, seed, npat=40, ntop=ntop)
    rng = random.Random(seed)
    members = set()
    for _ in range(30):
        f = oracle.random_pattern(rng, d, WORDS, 4)
        for m in rng.sample([f"s{i}" for i in range(6)] + ["w1", "w2", "w3"], rng.randint(1, 3)):
            members.add((f, rng.choice(GROUP_NAMES), m))
    if d.multi is not None:
        members |= {(d.multi, "q3", "w1"), (d.multi, "q3", "w2")}
    return pairs, sorted(members), topics


def expected_deliveries(
    d: Dialect, pairs: list[tuple[str, str]], members: list[tuple[str, str, str]], topic: str
) -> tuple[set[str], dict[str, set[str]]]:
    """The oracle: (ordinary subscribers, {group: candidate members})."""
    plain = {s for p, s in pairs if oracle.matches(d, p, topic)}
    groups: dict[str, set[str]] = {}
    for f, g, m in members:
        if oracle.matches(d, f, topic):
            groups.setdefault(g, set()).add(m)
    return plain, groups


def check_deliveries(
    d: Dialect,
    pairs: list[tuple[str, str]],
    members: list[tuple[str, str, str]],
    topics: list[str | None],
    rows: list[tuple[int, str, str | None]],
) -> dict[int, dict[str, str]]:
    """Every (message id, subscriber, group) row against the oracle; returns
    the member each group got, per message."""
    by_msg: dict[int, list[tuple[str, str | None]]] = {}
    for i, s, g in rows:
        by_msg.setdefault(i, []).append((s, g))
    picks: dict[int, dict[str, str]] = {}
    for i, t in enumerate(topics):
        got = by_msg.get(i, [])
        if t is None or not oracle.valid_topic(d, t):
            assert got == [], (t, got)
            continue
        plain, groups = expected_deliveries(d, pairs, members, t)
        ordinary = [s for s, g in got if g is None]
        assert sorted(ordinary) == sorted(plain), t  # each ordinary subscriber once
        chosen = [(g, s) for s, g in got if g is not None]
        assert sorted(g for g, _ in chosen) == sorted(groups), t  # each group once
        for g, s in chosen:
            assert s in groups[g], (t, g, s)
        picks[i] = dict(chosen)
    assert set(by_msg) <= set(range(len(topics)))
    return picks


def test_payload_carries_memberships_and_policies() -> None:
    from cstrie.groups import Shared

    t = Trie("mqtt")
    t.subscribe("a/+", "x")
    t.subscribe("$share/g/a/#", "w1")
    t.subscribe("a/#", "x", group="日本")
    t.set_group_policy("g", "sticky")
    p = Payload.from_bytes(Payload.from_reader(t.snapshot()).to_bytes())
    subs = p.subscribers.to_pylist()
    got = {
        (f, g, subs[k])
        for f, k, g in zip(
            *(p.members.column(c).to_pylist() for c in ("filter", "subscriber", "group")),
            strict=True,
        )
    }
    assert got == {("a/#", "g", "w1"), ("a/#", "日本", "x")}
    assert p.npairs == 1 and p.policies == {"g": "sticky", "日本": "round-robin"}
    # the same from an Arrow table (group column, MQTT share syntax) and pairs
    table = pa.table(
        {
            "pattern": ["a/+", "$share/g/a/#", "a/#", "a/#"],
            "subscriber": ["x", "w1", "x", "x"],
            "group": [None, None, "日本", "日本"],
        }
    )
    q = Payload.from_arrow(table, MQTT)
    assert q.members.equals(p.members) and q.npairs == 1
    r = Payload.from_pairs(
        [("a/+", "x"), (Shared("a/#", "g"), "w1"), ("$share/日本/a/#", "x")], MQTT
    )
    assert r.members.equals(p.members)
    with pytest.raises(ValueError, match="as well"):
        Payload.from_arrow(
            pa.table({"pattern": ["$share/g/a"], "subscriber": ["x"], "group": ["h"]}), MQTT
        )
    with pytest.raises(ValueError, match="ShareName"):
        Payload.from_arrow(pa.table({"pattern": ["$share//a"], "subscriber": ["x"]}), MQTT)
    # a version 1 payload (three streams, no memberships) still reads
    raw = Payload.from_pairs([("a", "x")]).to_bytes()
    meta_len = int.from_bytes(raw[12:16], "little")
    meta = json.loads(raw[16 : 16 + meta_len])
    del meta["memberships"], meta["policies"]
    new_meta = json.dumps(meta).encode()
    body, pos = raw[16 + meta_len :], 0
    for _ in range(3):
        pos += 8 + int.from_bytes(body[pos : pos + 8], "little")
    v1 = (
        raw[:8]
        + (1).to_bytes(4, "little")
        + len(new_meta).to_bytes(4, "little")
        + new_meta
        + body[:pos]
    )
    old = Payload.from_bytes(v1)
    assert old.npairs == 1 and old.nmembers == 0 and old.policies == {}


def test_router_rejects_bad_groups() -> None:
    bad = Payload.from_arrow(
        pa.table({"pattern": ["a.*"], "subscriber": ["x"], "group": ["two words"]}), NATS
    )
    with pytest.raises(ValueError, match="two words"):
        engine.Router(bad)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_deliver_batches_without_spark(d: Dialect) -> None:
    """engine.run in "deliver" mode over Arrow batches (string and binary topics,
    bounded output batches) against the oracle."""
    pairs, members, topics = group_workload(d, 31, ntop=120)
    payload = Payload.from_pairs(
        [*pairs, *((f"$share/{g}/{f}" if d is MQTT else _shared(f, g), m) for f, g, m in members)],
        d,
    )
    raw = payload.to_bytes()
    plan = engine.Plan(
        key=digest(raw),
        mode="deliver",
        cap=7,
        extra=[("subscriber", pa.string()), ("group", pa.string())],
    )
    for typ in (pa.string(), pa.binary()):
        batch = pa.RecordBatch.from_arrays(
            [pa.array(range(len(topics)), pa.int64()), pa.array(topics, pa.string()).cast(typ)],
            names=["id", "topic"],
        )
        out = list(engine.run(raw, plan, iter([batch.slice(0, 50), batch.slice(50)])))
        assert max(b.num_rows for b in out) == 7  # bounded output batches
        rows = [
            (i, s, g)
            for b in out
            for i, s, g in zip(
                b.column("id").to_pylist(),
                b.column("subscriber").to_pylist(),
                b.column("group").to_pylist(),
                strict=True,
            )
        ]
        check_deliveries(d, pairs, members, topics, rows)


def _shared(f: str, g: str) -> Any:
    from cstrie.groups import Shared

    return Shared(f, g)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_deliveries_in_spark_one_member_per_group(spark: Any, d: Dialect) -> None:
    from cstrie.spark import SparkMatcher

    pairs, members, topics = group_workload(d, {"amqp": 41, "mqtt": 42, "nats": 43}[d.name])
    subs = spark.createDataFrame(
        [(p, s, None) for p, s in pairs] + [(f, m, g) for f, g, m in members],
        "pattern string, subscriber string, group string",
    )
    m = SparkMatcher(subs, spark, dialect=d, policies={"grüppe": "random"})
    out = m.deliver(messages_df(spark, topics))
    assert out.columns == ["id", "topic", "subscriber", "group"]
    rows = [(r.id, r.subscriber, r.group) for r in out.collect()]
    picks = check_deliveries(d, pairs, members, topics, rows)
    assert any(picks.values())  # the workload does route to groups


def test_deliveries_balance_per_worker_and_sticky_keys(spark: Any) -> None:
    """Round-robin: one group on '#' (the same 3 candidates for every message):
    each worker process rotates over them in turn, so over the job the counts
    differ by at most the number of processes (<= partitions).  Sticky: the
    member is a function of (key, members), the same in every worker as in a
    router built on the driver from the same payload."""
    from cstrie.spark import SparkMatcher, deliver

    t = Trie("mqtt")
    for w in ("w1", "w2", "w3"):
        t.subscribe("$share/rr/#", w)
        t.subscribe("$share/st/#", w)
    t.subscribe("#", "audit")
    t.set_group_policy("st", "sticky")
    n, parts = 300, 3
    rows = [(i, f"t/{i % 17}", f"k{i % 11}") for i in range(n)] + [
        (n, None, "k"),
        (n + 1, "a/+", "k"),
    ]
    msgs = spark.createDataFrame(rows, "id long, topic string, key string").repartition(parts)
    m = SparkMatcher(t, spark)
    got = m.deliver(msgs, key_col="key", group_col="grp", subscriber_col="to").collect()
    by_group: dict[str | None, list[Any]] = {}
    for r in got:
        by_group.setdefault(r.grp, []).append(r)
    assert sorted(r.id for r in by_group[None]) == list(range(n))  # audit, once each
    counts = Counter(r.to for r in by_group["rr"])
    assert sorted(counts) == ["w1", "w2", "w3"] and sum(counts.values()) == n
    assert max(counts.values()) - min(counts.values()) <= parts, counts
    router = engine.Router(m.payload)  # subscribers: indexes into the payload's table
    names = m.payload.subscribers.to_pylist()
    for r in by_group["st"]:
        assert r.to == names[router.route(r.topic, r.key)[1]["st"]], r
    assert len({(r.key, r.to) for r in by_group["st"]}) == 11  # one member per key
    # the one-call form, with a key column of another type and no policies given
    ints = spark.createDataFrame([(1, "t/x", 5)], "id long, topic string, key long")
    assert {r.group for r in deliver(ints, t, key_col="key").collect()} == {None, "rr", "st"}
    with pytest.raises(TypeError, match="key column"):
        m.deliver(
            spark.createDataFrame([(1, "t", 1.5)], "id long, topic string, k double"), key_col="k"
        )
    with pytest.raises(ValueError, match="already have a column 'id'"):
        m.deliver(msgs, group_col="id")
