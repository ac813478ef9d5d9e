"""``cstrie.spark.filter_join``: which filters match which stored topics.

Every answer is checked against the slow reference matcher (``tests/support/oracle.py``)
over all (filter row, topic row) pairs, as a multiset: a pair found twice or
missed fails.  The workloads mix hand-picked cases (the MQTT ``$`` rule, AMQP
``#`` in the middle, NATS ``>``, a filter matching nothing, duplicate topics
and filters, nulls, invalid topics) with random filters and topics.

The first group needs no Spark (``engine.run_join`` over Arrow batches); the
Spark tests share ``test_spark.py``'s session fixture (one ``local[2]``
session with 64-row Arrow batches, so a partition arrives in several batches).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import oracle
import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")
pytest.importorskip("pandas")

from test_spark import INVALID, WORDS  # noqa: E402
from test_spark import spark as spark  # noqa: E402  (the shared session fixture)

from cstrie import Trie  # noqa: E402
from cstrie.dialect import AMQP, MQTT, NATS, Dialect  # noqa: E402
from cstrie.spark import engine  # noqa: E402
from cstrie.spark.payload import digest  # noqa: E402

pytestmark = pytest.mark.spark

DIALECTS = [AMQP, MQTT, NATS]

# Hand-picked (filters, topics) per dialect, beside the random ones.
CASES: dict[str, tuple[list[str | None], list[str | None]]] = {
    "mqtt": (
        ["#", "+/#", "$SYS/#", "+/x", "a/+/c", "a/#", "a/#", "no/such/topic", None],
        ["$SYS/x", "$SYS/broker/up", "a/b/c", "a/b/c", "a", "/x", "a//c", "x", "a/+", "", None],
    ),
    "amqp": (
        ["#", "a.#.c", "#.c", "*.b.*", "a.*", "a.#.c", "no.such.topic", None],
        ["a.c", "a.b.c", "a.b.b.c", "a.b.c", "x.b.y", "", "a", "a..c", "#", None],
    ),
    "nats": (
        [">", "a.>", "*.b", "a.*.c", "$SYS.>", ">", "no.such.topic", None],
        ["a", "a.b", "a.b.c", "a.b.c", "$SYS.x", "x.b", "a..b", "a.*", "", None],
    ),
}


def workload(d: Dialect, seed: int) -> tuple[list[str | None], list[str | None]]:
    """(filters, topics): the hand-picked ones, random valid filters and
    topics (a third of the topics stored twice), the dialect's invalid topics
    and some nulls."""
    rng = random.Random(seed)
    filters, topics = (list(x) for x in CASES[d.name])
    filters += [oracle.random_pattern(rng, d, WORDS, 5) for _ in range(40)]
    fresh = [oracle.random_topic(rng, d, WORDS, 5) for _ in range(150)]
    topics += fresh + rng.sample(fresh, 50) + INVALID[d.name] + [None, None]
    rng.shuffle(topics)
    return filters, topics


def expected(d: Dialect, filters: list[str | None], topics: list[str | None]) -> Counter:
    """The oracle over all pairs: Counter of (filter row, topic row)."""
    return Counter(
        (i, j)
        for i, f in enumerate(filters)
        if f is not None
        for j, t in enumerate(topics)
        if t is not None and oracle.valid_topic(d, t) and oracle.matches(d, f, t)
    )


# ------------------------------------------------------- without Spark
@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_run_join_batches_equal_oracle(d: Dialect) -> None:
    """engine.run_join over Arrow batches: string, large_string, binary (with a
    topic that is not UTF-8) and sliced columns; one index per batch and per
    group of batches; output batches of at most ``cap`` rows."""
    filters, topics = workload(d, {"amqp": 1, "mqtt": 2, "nats": 3}[d.name])
    want = expected(d, filters, topics)
    kept = [(i, f) for i, f in enumerate(filters) if f is not None]  # the driver drops nulls
    table = pa.table({"filter": [f for _, f in kept], "fid": [i for i, _ in kept]})
    raw = engine.FilterSet.to_bytes(table)
    base = pa.array(topics, pa.string())
    padded = pa.array(["pad", None, *topics], pa.string()).slice(2)
    layouts = {
        "string": base,
        "large_string": base.cast(pa.large_string()),
        "binary": pa.array([*topics, b"\xff\xfe"], pa.binary()),
        "sliced": padded,
    }
    for name, col in layouts.items():
        schema = pa.schema(
            [("filter", pa.string()), ("fid", pa.int64()), ("topic", col.type), ("tid", pa.int64())]
        )
        for cap, index_rows in ((7, 0), (65536, 0), (50, 100), (1, 10_000)):
            plan = engine.JoinPlan(digest(raw), d, schema, cap=cap, index_rows=index_rows)
            batch = pa.RecordBatch.from_arrays(
                [col, pa.array(range(len(col)), pa.int64())], names=["topic", "tid"]
            )
            parts = [batch.slice(0, 70), batch.slice(70, 0), batch.slice(70)]
            out = list(engine.run_join(raw, plan, iter(parts)))
            assert all(0 < b.num_rows <= cap for b in out), (name, cap)
            got = Counter((r["fid"], r["tid"]) for b in out for r in b.to_pylist())
            assert got == want, (name, cap, index_rows)
            for b in out[:3]:  # the carried columns are the rows' own
                for r in b.to_pylist():
                    assert r["filter"] == filters[r["fid"]]
                    t = r["topic"].decode() if isinstance(r["topic"], bytes) else r["topic"]
                    assert t == topics[r["tid"]]


def test_one_filter_on_many_rows_comes_in_bounded_batches() -> None:
    """'#' on 300 filter rows x 40 topics: 12,000 pairs in batches of at most cap."""
    table = pa.table({"filter": ["#"] * 300 + ["a.b"], "fid": range(301)})
    raw = engine.FilterSet.to_bytes(table)
    fs = engine.FilterSet.from_bytes(raw)
    assert fs.texts == ["#", "a.b"] and len(fs.rows[0]) == 300
    schema = pa.schema([("filter", pa.string()), ("fid", pa.int64()), ("topic", pa.string())])
    plan = engine.JoinPlan(digest(raw), AMQP, schema, cap=1000)
    col = pa.array([f"t{i % 20}" for i in range(40)])
    out = list(engine.run_join(raw, plan, iter([pa.record_batch([col], names=["topic"])])))
    assert max(b.num_rows for b in out) == 1000
    assert sum(b.num_rows for b in out) == 300 * 40
    with pytest.raises(ValueError, match="SHA-256"):
        engine.get_filters("0" * 64, raw)


# ------------------------------------------------------------- with Spark
def frames(spark: Any, filters: list[str | None], topics: list[str | None]) -> tuple[Any, Any]:
    fdf = spark.createDataFrame(list(enumerate(filters)), "fid long, filter string")
    tdf = spark.createDataFrame(
        [(j, t, f"payload {j}") for j, t in enumerate(topics)],
        "tid long, topic string, body string",
    ).repartition(3)
    return fdf, tdf


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_filter_join_equals_oracle(spark: Any, d: Dialect) -> None:
    from cstrie.spark import filter_join

    filters, topics = workload(d, {"amqp": 11, "mqtt": 12, "nats": 13}[d.name])
    want = expected(d, filters, topics)
    fdf, tdf = frames(spark, filters, topics)
    out = filter_join(fdf, tdf, dialect=d, filter_cols=["fid"], topic_cols=["tid", "body"])
    assert out.columns == ["filter", "fid", "topic", "tid", "body"]
    rows = out.collect()
    assert Counter((r.fid, r.tid) for r in rows) == want
    for r in rows:
        assert (r.filter, r.topic, r.body) == (filters[r.fid], topics[r.tid], f"payload {r.tid}")
    # the filter matching nothing, and the dialect's own rules on hand-picked rows
    assert "no.such.topic" not in {r.filter for r in rows}
    assert "no/such/topic" not in {r.filter for r in rows}
    pairs = {(r.filter, r.topic) for r in rows}
    if d is MQTT:
        assert ("#", "$SYS/x") not in pairs and ("+/#", "$SYS/x") not in pairs
        assert ("$SYS/#", "$SYS/x") in pairs and ("#", "/x") in pairs
        assert sum(1 for r in rows if (r.filter, r.topic) == ("a/#", "a/b/c")) == 4  # 2 x 2 rows
    elif d is AMQP:
        assert {("a.#.c", t) for t in ("a.c", "a.b.c", "a.b.b.c")} <= pairs
        assert ("#", "") in pairs and ("*.b.*", "x.b.y") in pairs
    else:
        assert (">", "a") in pairs and ("a.>", "a") not in pairs and ("a.>", "a.b.c") in pairs
        assert (">", "$SYS.x") in pairs  # NATS has no $ rule
    if d is MQTT:  # one index per group of batches, tiny output batches: the same pairs
        grouped = filter_join(
            fdf,
            tdf,
            dialect=d,
            filter_cols=["fid"],
            topic_cols=["tid"],
            index_rows=1000,
            chunk_rows=7,
        )
        assert Counter((r.fid, r.tid) for r in grouped.collect()) == want


def test_filter_join_inputs_and_errors(spark: Any) -> None:
    from cstrie.spark import filter_join, rejected

    topics = ["a/b", "a/c", "$SYS/x", None, "a/+", "a/b"]
    tdf = spark.createDataFrame(
        [(j, t) for j, t in enumerate(topics)], "id long, topic string"
    ).repartition(3)
    # a list of filters (nulls skipped), the default output columns
    out = filter_join(["a/+", None, "#", "zzz"], tdf, dialect="mqtt")
    assert out.columns == ["filter", "topic"]
    assert Counter(tuple(r) for r in out.collect()) == Counter(
        {("a/+", "a/b"): 2, ("a/+", "a/c"): 1, ("#", "a/b"): 2, ("#", "a/c"): 1}
    )
    # an Arrow table with other column names; a binary topic column and a
    # dotted column name (mapInArrow looks its input columns up unquoted)
    table = pa.table({"f": ["a/b", "+/+"], "who": ["x", "y"]})
    binary = tdf.select(tdf["topic"].cast("binary").alias("topic"), tdf["id"].alias("row.id"))
    got = filter_join(
        table, binary, "f", dialect="mqtt", filter_cols="who", topic_cols=["row.id"]
    ).collect()
    assert sorted((r["who"], r["topic"], r["row.id"]) for r in got) == [
        ("x", b"a/b", 0),
        ("x", b"a/b", 5),
        ("y", b"a/b", 0),
        ("y", b"a/b", 5),
        ("y", b"a/c", 1),
    ]
    # null and invalid topics pair with nothing; the documented way to list them
    bad = rejected(tdf, Trie("mqtt"), "topic").collect()
    assert sorted((r.id, r.reason) for r in bad) == [
        (3, "null topic"),
        (
            4,
            "topic 'a/+' contains the wildcard '+'; topics may not contain wildcards in the "
            "mqtt dialect",
        ),
    ]
    # no filter left: an empty result with the full schema, no job over the topics
    empty = filter_join([None], tdf, dialect="mqtt", topic_cols=["id"])
    assert empty.columns == ["filter", "topic", "id"] and empty.collect() == []
    # errors, all raised on the driver before any job
    with pytest.raises(ValueError, match=r"invalid filter 'a/#/b' in column 'filter' \(mqtt\)"):
        filter_join(["a/+", "a/#/b"], tdf, dialect="mqtt")
    with pytest.raises(ValueError, match="two columns named 'id'"):
        fdf = spark.createDataFrame([(1, "a/b")], "id long, filter string")
        filter_join(fdf, tdf, dialect="mqtt", filter_cols=["id"], topic_cols=["id"])
    with pytest.raises(ValueError, match="no column 'subject'"):
        filter_join(["a"], tdf, topic_col="subject")
    with pytest.raises(ValueError, match="filters have no column 'pattern'"):
        filter_join(table, tdf, "pattern")
    with pytest.raises(TypeError, match="topic column 'id' must be a string"):
        filter_join(["a"], tdf, topic_col="id")
    with pytest.raises(TypeError, match=r"pass \['a/b'\]"):
        filter_join("a/b", tdf)
    with pytest.raises(ValueError, match="filter_cols= needs a filter table"):
        filter_join(["a"], tdf, filter_cols=["x"])
    with pytest.raises(ValueError, match="index_rows"):
        filter_join(["a"], tdf, index_rows=0)


def test_the_docs_example_runs(spark: Any, capsys: Any) -> None:
    """docs/spark.md, "Which filters match which stored topics": the example
    runs as written (in the running session) and prints the table shown."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text("utf-8")
    section = doc.split("## Which filters match which stored topics", 1)[1].split("\n## ", 1)[0]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)[:2]
    exec(compile(code, "docs/spark.md", "exec"), {"__name__": "docs_example"})
    printed = capsys.readouterr().out
    assert printed.strip() == shown.strip()
