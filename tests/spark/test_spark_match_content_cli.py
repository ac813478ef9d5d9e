"""``cstrie spark-match --content``: a content subscription file over a log.

The rule (docs/spark.md "Content subscriptions"): each message's row is
the dict of its non-null fields and its topic; the command writes one row
per (message, binding) that ``ContentIndex.match_bindings`` returns (with
``--per-subscriber``, one per subscriber ``ContentIndex.match`` returns);
null fields and topics the dialect rejects go to ``--rejected`` with their
reason.  Every test here writes the subscription file with a real
``ContentIndex.export`` and runs the command in-process on the shared
``local[2]`` session of ``test_spark.py``; the output is read back from
disk and compared row by row with the index.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import oracle
import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("pandas")
import pyarrow.parquet as pq  # noqa: E402
from test_spark import spark as spark  # noqa: E402  (the shared session fixture)
from test_spark_content import got_rows, present, want_rows  # noqa: E402

from cstrie.cli import main  # noqa: E402
from cstrie.content import (  # noqa: E402
    AllOf,
    AnyOf,
    ContentIndex,
    Eq,
    Has,
    Not,
    OneOf,
    Prefix,
    Range,
)

pytestmark = pytest.mark.spark

SEED = oracle.choose_seed()
TOPICS = [None, "stock/nyse", "stock/lse", "fx", "a/+", "", "a/#/b"]  # the last three invalid


def content_index() -> ContentIndex:
    idx = ContentIndex("mqtt")
    idx.bind(Eq("ccy", "USD"), "usd")
    idx.bind(AllOf(Eq("ccy", "USD"), Has("urgent")), "desk-1")
    idx.bind(Range("price", 10, 100), "desk-2", topic="stock/#")
    idx.bind(Prefix("sym", "IBM"), "desk-2")  # a second binding of desk-2
    idx.bind(Not(Eq("ccy", "EUR")), "not-eur", topic="+/lse")
    idx.bind(AnyOf(OneOf("qty", [1, 2]), Eq("urgent", True)), "small")
    return idx


def random_fields(r: Any) -> dict[str, Any] | None:
    """One message's fields, each field always of one JSON type (so Spark's
    inferred struct keeps every value as json.loads reads it); a field is
    left out or null at random, a whole message is null now and then."""
    if r.random() < 0.08:
        return None
    choices = {
        "ccy": lambda: r.choice(["USD", "EUR", "usd", ""]),
        "price": lambda: r.choice([5.0, 10.0, 50.5, 100.0, 150.0]),
        "sym": lambda: r.choice(["IBM", "IBM.N", "MSFT", "ibm"]),
        "qty": lambda: r.choice([0, 1, 2, 3, 2**40]),
        "urgent": lambda: r.random() < 0.5,
    }
    out: dict[str, Any] = {}
    for name, make in choices.items():
        k = r.random()
        if k < 0.2:
            continue  # absent
        out[name] = None if k < 0.3 else make()
    return out


def spark_match(*args: str | Path) -> int:
    return int(main(["spark-match", "--no-progress", *map(str, args)]))


def content_run(subs: Path, msgs: Path, out: Path, *more: str | Path) -> int:
    """``spark-match --content`` of ``subs`` over ``msgs`` into ``out``."""
    return spark_match(
        "--content", "--subscriptions", subs, "--messages", msgs, "--output", out, *more
    )


@pytest.fixture
def subs(tmp_path: Path) -> Path:
    path = tmp_path / "content.jsonl"
    assert content_index().export(str(path)) == 6
    return path


def test_jsonl_log_struct_fields_row_by_row(
    spark: Any, tmp_path: Path, subs: Path, capsys: Any
) -> None:
    """A JSON Lines log whose ``headers`` are objects (a struct column in
    Spark): every (message, binding) row of match_bindings, nothing else;
    null fields and invalid topics rejected with their reason; the summary
    counts them in the same pass."""
    r = oracle.seeded_rng(SEED, "spark-match-content-jsonl")
    log = [(i, random_fields(r), r.choice(TOPICS)) for i in range(240)]
    msgs = tmp_path / "log.jsonl"
    msgs.write_text(
        "".join(json.dumps({"id": i, "topic": t, "headers": f}) + "\n" for i, f, t in log)
    )
    out, rej, summ = tmp_path / "out", tmp_path / "rej", tmp_path / "s.json"
    code = content_run(subs, msgs, out, "--rejected", rej, "--summary-json", summ)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    idx = content_index()
    want, rejected = want_rows(idx, log)
    assert sum(want.values()) > 100 and "null fields" in rejected.values()
    assert any(reason != "null fields" for reason in rejected.values())
    table = pq.read_table(str(out))
    assert table.column_names[-3:] == ["criteria", "pattern", "subscriber"]
    assert pa.types.is_struct(table.schema.field("headers").type)
    assert got_rows(table.to_pylist()) == want
    got_rej = {row["id"]: row["reason"] for row in pq.read_table(str(rej)).to_pylist()}
    assert got_rej == rejected
    s = json.loads(summ.read_text())
    matched = {i for (i, _, _, _) in want}
    assert (s["messages"], s["matched"], s["matches"]) == (len(log), len(matched), len(table))
    assert s["null"] == sum(v == "null fields" for v in rejected.values())
    assert s["invalid"] == len(rejected) - s["null"]
    assert s["unmatched"] == len(log) - len(matched) - len(rejected)
    per_sub = Counter(sub for (_, _, _, sub) in want.elements())
    assert dict(s["top_subscribers"]) == dict(per_sub)
    assert (s["content"], s["bindings"], s["topic_col"]) == (True, 6, "topic")
    assert "top_patterns" not in s
    assert re.search(rf"null fields\s+{s['null']}\b", printed.out), printed.out
    assert "top patterns" not in printed.out


def map_log(r: Any, n: int) -> list[tuple[int, dict[str, Any] | None, str | None]]:
    """Messages whose fields are strings (a Parquet map<string, string>)."""
    out = []
    for i in range(n):
        f = random_fields(r)
        if f is not None:
            f = {k: None if v is None else str(v) for k, v in f.items()}
        out.append((i, f, r.choice(TOPICS)))
    return out


def test_parquet_log_map_fields_and_per_subscriber(
    spark: Any, tmp_path: Path, subs: Path, capsys: Any
) -> None:
    """A Parquet log with a map<string, string> fields column and a topic
    column of another name; then ``--per-subscriber`` (ContentIndex.match:
    each subscriber once per message) with ``--keep-unmatched``."""
    r = oracle.seeded_rng(SEED, "spark-match-content-parquet")
    log = map_log(r, 200)
    msgs = tmp_path / "log.parquet"
    fields_type = pa.map_(pa.string(), pa.string())
    pq.write_table(
        pa.table(
            {
                "id": [i for i, _, _ in log],
                "props": pa.array(
                    [None if f is None else list(f.items()) for _, f, _ in log], fields_type
                ),
                "subject": [t for _, _, t in log],
            }
        ),
        str(msgs),
    )
    cols = ["--fields-col", "props", "--topic-col", "subject"]
    out = tmp_path / "out"
    assert content_run(subs, msgs, out, *cols) == 0
    idx = content_index()
    want, rejected = want_rows(idx, log)
    assert sum(want.values()) > 50
    table = pq.read_table(str(out))
    assert table.column_names == ["id", "props", "subject", "criteria", "pattern", "subscriber"]
    assert got_rows(table.to_pylist()) == want

    per, summ = tmp_path / "per", tmp_path / "s.json"
    more = ["--per-subscriber", "--keep-unmatched", "--summary-json", summ]
    code = content_run(subs, msgs, per, *cols, *more)
    assert code == 0
    rows = pq.read_table(str(per))
    assert rows.column_names == ["id", "props", "subject", "subscriber"]
    pairs = Counter((row["id"], row["subscriber"]) for row in rows.to_pylist())
    want_pairs: Counter = Counter()
    for i, f, t in log:
        found = [] if i in rejected else idx.match(present(f) or {}, t)
        for sub in found:
            want_pairs[(i, sub)] += 1
        if not found:
            want_pairs[(i, None)] += 1  # kept once, with a null subscriber
    assert pairs == want_pairs
    s = json.loads(summ.read_text())
    written = sum(n for (_, sub), n in want_pairs.items() if sub is not None)
    assert s["matches"] == written and s["per_subscriber"] is True
    assert s["topic_col"] == "subject" and s["fields_col"] == "props"


def test_topic_column_absent_means_no_topic_unless_named(
    spark: Any, tmp_path: Path, subs: Path, capsys: Any
) -> None:
    """Without --topic-col, a log without a ``topic`` column has no topics
    (only bindings without a filter match, as content_match with
    topic_col=None); naming a missing column is an error."""
    msgs = tmp_path / "log.jsonl"
    fields = [{"ccy": "USD", "price": 50.0}, {"ccy": "GBP", "price": 50.0}]
    msgs.write_text(
        "".join(json.dumps({"id": i, "headers": f}) + "\n" for i, f in enumerate(fields))
    )
    out = tmp_path / "out"
    assert content_run(subs, msgs, out) == 0
    assert "no 'topic' column" in capsys.readouterr().err
    idx = content_index()
    want = Counter(
        (i, b.criteria.key, b.topic, b.subscriber)
        for i, f in enumerate(fields)
        for b in idx.match_bindings(f)
    )
    assert got_rows(pq.read_table(str(out)).to_pylist()) == want
    # desk-2's Range binding needs the topic stock/#: with no topic it never matches
    assert not any(p for (_, _, p, _) in want)
    code = content_run(subs, msgs, tmp_path / "o2", "--topic-col", "topic")
    assert code == 2
    assert "no column 'topic'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fields-col", "h"], "--fields-col applies to content subscriptions only"),
        (["--per-subscriber"], "--per-subscriber applies to content subscriptions only"),
    ],
)
def test_content_options_without_content(
    tmp_path: Path, subs: Path, capsys: Any, extra: list[str], message: str
) -> None:
    topic_subs = tmp_path / "subs.tsv"
    topic_subs.write_text("a/+\ts\n")
    msgs = tmp_path / "log.jsonl"
    msgs.write_text('{"topic": "a/b"}\n')
    code = spark_match(
        "--subscriptions", topic_subs, "--messages", msgs, "--output", tmp_path / "o", *extra
    )
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_usage_errors_in_content_mode(tmp_path: Path, subs: Path, capsys: Any) -> None:
    """Exit 2 with a message naming the problem, before Spark starts."""
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"topic": "a", "headers": {"ccy": "USD"}}\n')
    text, csv = tmp_path / "log.txt", tmp_path / "log.csv"
    text.write_text("a/b\n")
    csv.write_text("topic,headers\na,x\n")
    topic_export = tmp_path / "topics.jsonl"
    from cstrie import Trie
    from cstrie.export import export

    export(Trie.from_pairs([("a/+", "s")], "mqtt").snapshot(), str(topic_export), "jsonl")

    def err(*args: str | Path) -> str:
        assert spark_match("--output", tmp_path / "o", *args) == 2
        return str(capsys.readouterr().err)

    content = ["--content", "--subscriptions", subs]
    assert "--dialect applies to topic subscription files" in err(
        *content, "--messages", jsonl, "--dialect", "mqtt"
    )
    assert "--input-format applies to topic" in err(
        *content, "--messages", jsonl, "--input-format", "jsonl"
    )
    assert "text messages cannot carry one" in err(*content, "--messages", text)
    assert "csv messages cannot carry one" in err(*content, "--messages", csv)
    # a topic subscription export is not a content file, and the other way round
    assert "header format is 'cstrie-jsonl'" in err(
        "--content", "--subscriptions", topic_export, "--messages", jsonl
    )
    e = err("--subscriptions", subs, "--messages", jsonl)
    assert "is a content subscription file" in e and "--content" in e
    assert not (tmp_path / "o").exists()


def test_corrupt_content_file_names_the_line(tmp_path: Path, subs: Path, capsys: Any) -> None:
    """A FormatError while reading the content file: exit 2, the file and
    line named (the footer's crc32 removed, as docs say to edit by hand)."""
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"topic": "a", "headers": {"ccy": "USD"}}\n')
    lines = subs.read_text().splitlines(keepends=True)
    footer = json.loads(lines[-1])
    del footer["end"]["crc32"]
    lines[-1] = json.dumps(footer) + "\n"
    lines[2] = json.dumps({"criteria": {"eq": ["ccy"]}, "subscriber": "x"}) + "\n"
    subs.write_text("".join(lines))
    code = content_run(subs, jsonl, tmp_path / "o")
    assert code == 2
    e = capsys.readouterr().err
    assert f"{subs}: line 3:" in e, e
    subs.write_text("".join(lines)[:-3])  # truncated: the footer has no line end
    code = content_run(subs, jsonl, tmp_path / "o")
    assert code == 2 and "truncated" in capsys.readouterr().err


def test_bad_fields_column(spark: Any, tmp_path: Path, subs: Path, capsys: Any) -> None:
    """A missing fields column names --fields-col; a fields value that is not
    an object (a string column in Spark) or holds a nested object is a
    TypeError naming the column: exit 2, nothing written."""
    cases = {
        "no headers column": ('{"topic": "a", "h": {"ccy": "USD"}}\n', "name it with --fields-col"),
        "a string": ('{"topic": "a", "headers": "ccy=USD"}\n', "must be a map"),
        "nested": ('{"topic": "a", "headers": {"ccy": {"x": 1}}}\n', "field 'ccy'"),
    }
    for name, (line, message) in cases.items():
        msgs = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        msgs.write_text(line)
        out = tmp_path / f"out-{name.replace(' ', '_')}"
        code = content_run(subs, msgs, out)
        assert code == 2, name
        assert message in capsys.readouterr().err, name
        assert not out.exists(), name


def test_jsonl_field_types_are_inferred_over_the_file(spark: Any, tmp_path: Path) -> None:
    """Spark's JSON reader gives each struct field one type for the whole
    file (docs/spark.md): ints beside a float become doubles, a number
    beside a string becomes a string; the index then matches those values."""
    idx = ContentIndex("amqp")
    idx.bind(Eq("n", 1), "int")
    idx.bind(Eq("n", 1.0), "float")
    idx.bind(Eq("s", 1), "int-s")
    idx.bind(Eq("s", "1"), "str-s")
    subs = tmp_path / "subs.jsonl"
    idx.export(str(subs))
    rows = [{"n": 1}, {"n": 1.5}, {"s": 1}, {"s": "x"}]
    msgs = tmp_path / "log.jsonl"
    msgs.write_text("".join(json.dumps({"id": i, "headers": h}) + "\n" for i, h in enumerate(rows)))
    out = tmp_path / "out"
    assert content_run(subs, msgs, out) == 0
    table = pq.read_table(str(out))
    assert sorted(zip(table["id"].to_pylist(), table["subscriber"].to_pylist(), strict=True)) == [
        (0, "float"),
        (2, "str-s"),
    ]
    assert idx.match({"n": 1}) == ["int"]  # what the same line means to the index
