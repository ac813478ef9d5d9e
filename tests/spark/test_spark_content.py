"""Content subscriptions on a Spark message log (``cstrie.spark.content_match``).

Every row is checked against ``ContentIndex.match_bindings`` (and
``match``, and the slow rule evaluator ``tests/support/content_oracle.py``)
on the Python dict of that row's non-null fields and its topic, as a
multiset: a binding found twice or missed fails.  Logs are seeded random
(map and struct columns, null values and null rows, NaN, -0.0, numbers of
every width, missing fields, valid, invalid and null topics) plus the rules'
own cases: RabbitMQ's headers exchange suites (``x-match`` all/any and
-with-x, presence only) and Prefix/Range/Not.

The first group needs no Spark (``engine.run`` over Arrow batches); the
Spark tests share ``test_spark.py``'s ``local[2]`` session (64-row Arrow
batches, so a partition arrives in several batches).
"""

from __future__ import annotations

import io
import json
import random
from collections import Counter
from typing import Any

import oracle
import pytest
from content_oracle import expected

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")
pytest.importorskip("pandas")

from test_spark import reason_for  # noqa: E402
from test_spark import spark as spark  # noqa: E402  (the shared session fixture)

from cstrie.content import (  # noqa: E402
    AllOf,
    AnyOf,
    ContentIndex,
    Criterion,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
    Suffix,
    from_json,
)
from cstrie.content.rabbitmq import HeadersExchange  # noqa: E402
from cstrie.dialect import MQTT  # noqa: E402
from cstrie.spark import engine  # noqa: E402
from cstrie.spark.payload import ContentPayload, digest  # noqa: E402

pytestmark = pytest.mark.spark

SEED = oracle.choose_seed()
NAMES = ["a", "b", "sym", "price", "n", "x-k", "é"]
TEXTS = ["", "x", "xy", "IBM", "IBM.N", "é", "x/#"]
NUMBERS: list[Any] = [0, 1, -1, 2, 2**40, 0.5, -0.0, 1.0, 1e300, float("inf"), float("nan")]
BOUNDS: list[Any] = [None, -1, 0, 0.5, 1, 2, 2**40]
FILTERS = [None, None, None, "a/+", "#", "+/#", "$s/#"]
TOPICS = [None, "a/b", "a", "$s/a", "/", "a/+", "", "a/#/b"]  # the last three invalid
STRUCT = [
    ("a", "string"),
    ("b", "bigint"),
    ("sym", "string"),
    ("price", "double"),
    ("n", "int"),
    ("x-k", "boolean"),
    ("é", "binary"),
]


def value(r: random.Random) -> Any:
    k = r.randrange(4)
    if k == 0:
        return r.choice(TEXTS)
    if k == 1:
        return r.choice([v for v in NUMBERS if v == v])
    if k == 2:
        return r.random() < 0.5
    return r.choice([b"x", b"", None])


def leaf(r: random.Random) -> Criterion:
    f = r.choice(NAMES)
    k = r.randrange(6)
    if k == 0:
        return Has(f)
    if k == 1:
        return Eq(f, value(r))
    if k == 2:
        return OneOf(f, [value(r) for _ in range(3)])
    if k == 3:
        return Prefix(f, r.choice(TEXTS))
    if k == 4:
        return Suffix(f, r.choice(TEXTS))
    lo, hi = sorted([r.choice(BOUNDS[1:]), r.choice(BOUNDS[1:])])
    if lo == hi:
        return Range(f, lo, hi)
    return Range(f, None if r.random() < 0.2 else lo, hi, low_inclusive=r.random() < 0.5)


def criterion(r: random.Random, depth: int = 1) -> Criterion:
    k = r.randrange(6) if depth < 3 else 5
    if k == 0:
        return AllOf(*(criterion(r, depth + 1) for _ in range(r.randrange(3))))
    if k == 1:
        return AnyOf(*(criterion(r, depth + 1) for _ in range(r.randrange(1, 4))))
    if k == 2:
        return Not(criterion(r, depth + 1))
    return leaf(r)


def random_index(r: random.Random, n: int = 60) -> ContentIndex:
    idx = ContentIndex("mqtt")
    for _ in range(n):
        idx.bind(criterion(r), f"s{r.randrange(12)}", r.choice(FILTERS))
    return idx


def map_value(r: random.Random, kind: str) -> Any:
    if r.random() < 0.15:
        return None
    if kind == "string":
        return r.choice(TEXTS)
    if kind == "double":
        return float(r.choice(NUMBERS))
    return r.choice([0, 1, -1, 2, 2**40, -(2**62)])


def struct_value(r: random.Random, kind: str) -> Any:
    if r.random() < 0.3:
        return None
    return {
        "string": lambda: r.choice(TEXTS),
        "bigint": lambda: r.choice([0, 1, -1, 2**40, 2**62]),
        "int": lambda: r.choice([0, 1, 2, -1]),
        "double": lambda: float(r.choice(NUMBERS)),
        "boolean": lambda: r.random() < 0.5,
        "binary": lambda: r.choice([b"x", b"", b"\xff"]),
    }[kind]()


def random_log(r: random.Random, shape: str, rows: int = 300) -> tuple[list[tuple], str]:
    """(rows (id, fields, topic), the fields column's Spark DDL type)."""
    out: list[tuple] = []
    if shape == "struct":
        ddl = "struct<" + ",".join(f"`{n}`:{t}" for n, t in STRUCT) + ">"
    else:
        ddl = f"map<string,{shape}>"
    for i in range(rows):
        topic = r.choice(TOPICS)
        if r.random() < 0.05:
            fields: Any = None
        elif shape == "struct":
            fields = {n: struct_value(r, t) for n, t in STRUCT}
        else:
            fields = {n: map_value(r, shape) for n in r.sample(NAMES, r.randrange(len(NAMES)))}
        out.append((i, fields, topic))
    return out, ddl


def present(fields: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row's message: its non-null fields."""
    if fields is None:
        return None
    return {k: v for k, v in fields.items() if v is not None}


def want_rows(idx: ContentIndex, log: list[tuple]) -> tuple[Counter, dict[int, str]]:
    """The expected (id, criteria key, pattern, subscriber) multiset and the
    rejected rows' reasons, from ``ContentIndex.match_bindings``."""
    rows: Counter = Counter()
    rejected: dict[int, str] = {}
    for i, fields, topic in log:
        msg = present(fields)
        if msg is None:
            rejected[i] = "null fields"
            continue
        try:
            found = idx.match_bindings(msg, topic)
        except ValueError:
            rejected[i] = reason_for(MQTT, topic)
            continue
        for b in found:
            rows[(i, b.criteria.key, b.topic, b.subscriber)] += 1
    return rows, rejected


def got_rows(out: list[dict[str, Any]]) -> Counter:
    return Counter(
        (r["id"], from_json(json.loads(r["criteria"])).key, r["pattern"], r["subscriber"])
        for r in out
    )


# ------------------------------------------------------- without Spark
def test_payload_round_trip_and_bad_bytes() -> None:
    idx = ContentIndex("nats", max_value_length=32)
    idx.bind(AllOf(Eq("a", 1), Has("b")), "s", topic="x.*")
    idx.bind(Range("p", 1, 2), "s")
    idx.bind(Not(Has("a")), "t")
    p = ContentPayload.from_index(idx)
    q = ContentPayload.from_bytes(p.to_bytes())
    assert q.dialect == idx.dialect and not q.headers
    assert q.bindings.equals(p.bindings) and sorted(q.subscribers.to_pylist()) == ["s", "t"]
    got = {
        (from_json(json.loads(c)), q.subscribers[s].as_py(), t)
        for s, c, t in zip(
            *(q.bindings.column(k).to_pylist() for k in q.bindings.column_names), strict=True
        )
    }
    assert got == {(b.criteria, b.subscriber, b.topic) for b in idx.bindings()}
    # the export file inside numbers the bindings, and keeps the limits
    loaded = ContentIndex.load(io.BytesIO(q.index))
    assert loaded.limits() == idx.limits()
    assert sorted(b.subscriber for b in loaded.bindings()) == [0, 1, 2]
    with pytest.raises(ValueError, match="magic"):
        ContentPayload.from_bytes(b"CSTSPRK\n" + bytes(20))
    with pytest.raises(ValueError, match="truncated"):
        ContentPayload.from_bytes(p.to_bytes()[:-5])
    with pytest.raises(TypeError, match="ContentIndex"):
        ContentPayload.from_index({"a": 1})


def test_field_rows_null_values_are_absent() -> None:
    m = pa.array(
        [[("a", 1), ("b", None)], None, [], [("a", 1), ("a", 2)]], pa.map_(pa.string(), pa.int64())
    )
    assert engine.field_rows(m) == [{"a": 1}, None, {}, {"a": 2}]
    s = pa.array(
        [{"a": "x", "n": None}, None, {"a": None, "n": 1.5}],
        pa.struct([("a", pa.string()), ("n", pa.float64())]),
    )
    assert engine.field_rows(s) == [{"a": "x"}, None, {"n": 1.5}]
    assert engine.field_rows(s.slice(1)) == [None, {"n": 1.5}]
    assert engine.field_rows(pa.chunked_array([s.slice(0, 1), s.slice(2)])) == [
        {"a": "x"},
        {"n": 1.5},
    ]
    with pytest.raises(TypeError, match="map or a struct"):
        engine.field_rows(pa.array(["a"]))


def _run(raw: bytes, batches: list[Any], **plan: Any) -> list[dict[str, Any]]:
    extra = plan.pop(
        "extra", [("criteria", pa.string()), ("pattern", pa.string()), ("subscriber", pa.string())]
    )
    p = engine.Plan(
        key=digest(raw), engine="content", fields_col="f", topic_col="t", extra=extra, **plan
    )
    out = list(engine.run(raw, p, iter(batches)))
    cap = p.cap
    assert all(b.num_rows <= cap for b in out)
    return [row for b in out for row in b.to_pylist()]


def test_worker_matches_as_the_index_in_bounded_chunks() -> None:
    r = oracle.seeded_rng(SEED, "spark-content-worker")
    idx = random_index(r, 80)
    raw = ContentPayload.from_index(idx).to_bytes()
    log, _ = random_log(r, "struct", 400)
    typ = pa.struct(
        [
            (
                n,
                {
                    "string": pa.string(),
                    "bigint": pa.int64(),
                    "int": pa.int32(),
                    "double": pa.float64(),
                    "boolean": pa.bool_(),
                    "binary": pa.binary(),
                }[t],
            )
            for n, t in STRUCT
        ]
    )
    batches = [
        pa.record_batch(
            [
                pa.array([i for i, _, _ in part]),
                pa.array([f for _, f, _ in part], typ),
                pa.array([t for _, _, t in part], pa.string()),
            ],
            names=["id", "f", "t"],
        )
        for part in (log[:150], log[150:151], log[151:])
    ]
    want, rejected = want_rows(idx, log)
    assert sum(want.values()) > 200 and rejected  # the workload has matches and bad rows
    assert got_rows(_run(raw, batches, cap=7)) == want
    rows = _run(raw, batches, mode="rejected", extra=[("reason", pa.string())])
    assert {r["id"]: r["reason"] for r in rows} == rejected


# ------------------------------------------------------------- with Spark
def frame(spark: Any, log: list[tuple], ddl: str, partitions: int = 3) -> Any:
    return spark.createDataFrame(log, f"id int, f {ddl}, t string").repartition(partitions)


@pytest.mark.parametrize("shape", ["struct", "string", "double", "bigint"])
def test_random_log_matches_the_index_row_by_row(spark: Any, shape: str) -> None:
    from cstrie.spark import SparkContentMatcher

    r = oracle.seeded_rng(SEED, "spark-content", shape)
    idx = random_index(r)
    log, ddl = random_log(r, shape)
    df = frame(spark, log, ddl)
    cm = SparkContentMatcher(idx, spark)
    want, rejected = want_rows(idx, log)
    assert sum(want.values()) > 50
    out = cm.match(df, "f", "t", chunk_rows=5).collect()
    assert got_rows([row.asDict() for row in out]) == want
    # the rules' own evaluator agrees with the index on these rows
    binds = [(b.criteria, b.subscriber, b.topic) for b in idx.bindings()]
    for i, fields, topic in log:
        msg = present(fields)
        if msg is not None and i not in rejected:
            assert {s for (j, _, _, s) in want if j == i} == expected(binds, msg, topic, "mqtt")
    # one row per (message, subscriber): ContentIndex.match
    subs = Counter(
        (row["id"], row["subscriber"]) for row in cm.match(df, "f", "t", bindings=False).collect()
    )
    per_sub = Counter(
        (i, s)
        for i, fields, topic in log
        if i not in rejected
        for s in idx.match(present(fields) or {}, topic)
    )
    assert subs == per_sub
    got_rejected = {row["id"]: row["reason"] for row in cm.rejected(df, "f", "t").collect()}
    assert got_rejected == rejected
    matched = {i for (i, _, _, _) in want}
    assert cm.summary(df, "f", "t") == {
        "messages": len(log),
        "matched": len(matched),
        "unmatched": len(log) - len(matched) - len(rejected),
        "null": sum(reason == "null fields" for reason in rejected.values()),
        "invalid": sum(reason != "null fields" for reason in rejected.values()),
        "matches": sum(want.values()),
    }
    unmatched = {row["id"] for row in cm.unmatched(df, "f", "t").collect()}
    assert unmatched == {i for i, _, _ in log} - matched - set(rejected)


def test_stats_accumulator_counts_the_rows_written(spark: Any) -> None:
    """``match(stats=acc)`` counts, in the pass that writes, what ``summary``
    counts in its own job; ``matches`` and the top subscribers are the rows
    written (per subscriber with ``bindings=False``)."""
    from cstrie.spark import SparkContentMatcher

    r = oracle.seeded_rng(SEED, "spark-content-stats")
    idx = random_index(r)
    log, ddl = random_log(r, "struct")
    df = frame(spark, log, ddl)
    cm = SparkContentMatcher(idx, spark)
    for bindings in (True, False):
        acc = cm.stats_accumulator()
        rows = cm.match(df, "f", "t", bindings=bindings, stats=acc).collect()
        stats = cm.read_stats(acc, top=100)
        per_sub = Counter(row["subscriber"] for row in rows)
        assert dict(stats.pop("top_subscribers")) == dict(per_sub)
        want = cm.summary(df, "f", "t")
        assert stats == {**want, "matches": len(rows)}
        if bindings:  # one row per (message, binding): what summary counts
            assert len(rows) == want["matches"]
    top = cm.read_stats(acc, top=2)["top_subscribers"]
    assert [n for _, n in top] == sorted(per_sub.values(), reverse=True)[:2]


def test_without_a_topic_column_only_bindings_without_a_filter_match(spark: Any) -> None:
    from cstrie.spark import content_match

    idx = ContentIndex("amqp")
    idx.bind(Eq("a", "x"), "plain")
    idx.bind(Eq("a", "x"), "filtered", topic="#")  # needs a topic, even "#"
    df = spark.createDataFrame(
        [(1, {"a": "x"}), (2, {"a": "y"})], "id int, headers map<string,string>"
    )
    out = content_match(df, idx).collect()
    assert [(r["id"], r["subscriber"], r["pattern"]) for r in out] == [(1, "plain", None)]
    kept = content_match(df, idx, keep_unmatched=True).collect()
    assert sorted((r["id"], r["subscriber"]) for r in kept) == [(1, "plain"), (2, None)]


def test_rule_cases_prefix_range_not(spark: Any) -> None:
    from cstrie.spark import content_match

    idx = ContentIndex("amqp")
    idx.bind(Prefix("sym", "IBM"), "prefix")  # a str that starts with IBM
    idx.bind(Range("price", 10, 20, high_inclusive=False), "range")  # 10 <= price < 20
    idx.bind(Not(Eq("ccy", "USD")), "not-usd")  # also when ccy is absent
    idx.bind(AllOf(Has("urgent"), Suffix("sym", ".N")), "urgent-nyse", topic="stock.#")
    rows = [
        (1, "IBM.N", 10.0, "USD", True, "stock.nyse"),  # prefix, range (low bound), urgent-nyse
        (2, "IB", 20.0, "EUR", None, "stock.nyse"),  # high bound excluded; not-usd
        (3, None, float("nan"), None, True, "fx"),  # NaN in no range; ccy absent: not-usd
        (4, "ibm", 19.999, "USD", False, None),  # case matters; range; no topic for the filter
        (5, "IBM.N", -0.0, "USD", True, "stock.nyse"),  # prefix, urgent-nyse
    ]
    df = spark.createDataFrame(
        rows, "id int, sym string, price double, ccy string, urgent boolean, topic string"
    ).selectExpr(
        "id", "topic", "named_struct('sym', sym, 'price', price, 'ccy', ccy, 'urgent', urgent) AS m"
    )
    got = sorted((r["id"], r["subscriber"]) for r in content_match(df, idx, "m", "topic").collect())
    assert got == [
        (1, "prefix"),
        (1, "range"),
        (1, "urgent-nyse"),
        (2, "not-usd"),
        (3, "not-usd"),
        (4, "range"),
        (5, "prefix"),
        (5, "urgent-nyse"),
    ]


def test_headers_exchange_log_follows_rabbitmq_x_match(spark: Any) -> None:
    """exchanges_SUITE headers_exchange / key_presence_only, amqp_client_SUITE
    any-with-x, and the x- key rules, on one log."""
    from cstrie.spark import SparkContentMatcher

    x = HeadersExchange()
    x.bind("q", {"x-match": "all", "foo": "bar", "fuu": "ber"})
    x.bind("alt", {"x-match": "any", "foo": "bar", "fuu": "ber"})
    x.bind("all", {"x-match": "all-with-x", "foo": None, "x-foo": None})
    x.bind("any", {"x-match": "any-with-x", "foo": None, "x-foo": None})
    x.bind("apple", {"x-fruit": "apple", "x-match": "any-with-x"})
    x.bind("skip-x", {"x-match": "all", "x-fruit": "banana", "k": "1"})
    x.bind("skip-x", {"x-match": "any", "k": "1", "z": "2"})  # the same queue twice
    log = [
        (1, {"foo": "bar", "fuu": "ber"}),
        (2, {"foo": "bar"}),
        (3, None),  # no headers at all
        (4, {"foo": "anything", "x-foo": "42"}),
        (5, {"x-foo": "something"}),
        (6, {"x-fruit": "apple", "k": "1"}),
        (7, {"k": "1", "z": "2"}),
        (8, {"foo": None, "other": "value"}),  # a null value is no header
    ]
    df = spark.createDataFrame(log, "id int, headers map<string,string>")
    cm = SparkContentMatcher(x, spark)
    per_queue = sorted((r["id"], r["subscriber"]) for r in cm.match(df, bindings=False).collect())
    expect = [
        (1, "alt"), (1, "any"), (1, "q"),
        (2, "alt"), (2, "any"),
        (4, "all"), (4, "any"),
        (5, "any"),
        (6, "apple"), (6, "skip-x"),
        (7, "skip-x"),
    ]  # fmt: skip
    assert per_queue == expect
    # the same answer as the exchange itself, row by row
    assert per_queue == sorted(
        (i, q) for i, h in log for q in x.route(present(h) if h is not None else None)
    )
    # one row per binding: skip-x's two bindings both match messages 6 and 7
    per_binding = Counter(r["id"] for r in cm.match(df).collect() if r["subscriber"] == "skip-x")
    assert per_binding == {6: 2, 7: 2}
    assert cm.summary(df)["null"] == 0  # no headers is a message, not a bad row


def test_driver_refuses_bad_columns_before_any_job(spark: Any) -> None:
    from cstrie.spark import SparkContentMatcher

    idx = ContentIndex()
    idx.bind(Has("a"), "s")
    cm = SparkContentMatcher(idx, spark)
    df = spark.createDataFrame([], "f map<string,string>, t string, n int, subscriber string")
    cases = [
        ("map<int,string>", TypeError, "keys"),
        ("map<string,array<int>>", TypeError, "values may be"),
        ("struct<a:string,b:map<string,int>>", TypeError, "field 'b'"),
        ("struct<a:string,a:int>", ValueError, "two fields"),
        ("string", TypeError, "map .string keys. or a struct"),
        ("map<string,decimal(10,2)>", TypeError, "values may be"),
    ]
    for ddl, exc, text in cases:
        bad = spark.createDataFrame([], f"f {ddl}")
        with pytest.raises(exc, match=text):
            cm.match(bad, "f")
    with pytest.raises(ValueError, match="no column 'headers'"):
        cm.match(df, subscriber_col="who")
    with pytest.raises(TypeError, match="topic column 'n'"):
        cm.match(df, "f", "n", subscriber_col="who")
    with pytest.raises(ValueError, match="already have a column 'subscriber'"):
        cm.match(df, "f", "t")
    with pytest.raises(ValueError, match="chunk_rows"):
        cm.match(df, "f", chunk_rows=0, subscriber_col="who")
    with pytest.raises(TypeError, match="ContentIndex"):
        SparkContentMatcher(42, spark)


def test_content_file_and_binary_topics(spark: Any, tmp_path: Any) -> None:
    from cstrie.spark import content_match, content_rejected

    idx = ContentIndex("mqtt")
    idx.bind(OneOf("n", [1, 2]), 7, topic="a/#")
    path = tmp_path / "subs.jsonl"
    idx.export(path)
    df = spark.createDataFrame(
        [(1, {"n": 1}, b"a/b"), (2, {"n": 2}, b"\xff"), (3, {"n": 3}, b"a")],
        "id int, f map<string,int>, t binary",
    )
    out = content_match(df, str(path), "f", "t", bindings=False).collect()
    assert [(r["id"], r["subscriber"]) for r in out] == [(1, 7)]
    bad = content_rejected(df, str(path), "f", "t").collect()
    assert [(r["id"], r["reason"]) for r in bad] == [(2, "topic is not valid UTF-8")]
