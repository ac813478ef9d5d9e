"""``cstrie spark-match``: match a message log with Spark, write the matches.

Reads the subscriptions (an export in any format, or PATTERN<TAB>SUBSCRIBER
text) on the driver, broadcasts them as a compiled-matcher payload, matches the
messages (Parquet, JSON Lines, CSV with a header, ORC, or text with one topic per
line) in every executor's Python workers and writes one row per
(message, pattern, subscriber) match: the message's columns plus ``pattern`` and
``subscriber``, as Parquet or JSON Lines.

``--content``: the subscriptions are a content subscription file (what
``ContentIndex.export`` writes, read by ``cstrie content``), matched as
``cstrie.spark.content_match`` matches: on each message's fields column
(``--fields-col``, default ``headers``: a map with string keys or a struct;
Parquet, ORC, or JSON Lines, where a JSON object becomes a struct whose field
types Spark infers over the whole file; CSV and text cannot carry one) and
its topic (``--topic-col``; without it ``topic`` is used if the messages have
it, else the messages have no topic and only bindings without a topic filter
match; a column named with ``--topic-col`` must exist).  One row per
(message, matching binding): the message's columns plus ``criteria`` (JSON),
``pattern`` (the binding's topic filter, null if none) and ``subscriber``;
``--per-subscriber``: one row per (message, subscriber), plus ``subscriber``
only.  The mode is chosen by the flag, not guessed from the file: it decides
the output's columns and which options apply (``--fields-col`` and
``--per-subscriber`` without ``--content``, ``--dialect`` or
``--input-format`` with it, are usage errors).

Null topics, topics invalid in the dialect (and with ``--content`` null
fields) never fail the job: they are counted in the summary and written with
their reason to ``--rejected PATH`` when given.  ``--master`` defaults to
``local[*]`` (an embedded Spark on this machine); any master URL
(``spark://host:7077``, ``yarn``, ``k8s://...``) runs the same job on a
cluster, whose Python workers need cstrie installed (see docs/spark.md).
Needs the ``spark`` extra: pip install 'cstrie[spark]'.

At the end a summary is printed (add ``--summary-json PATH`` for a file),
counted in the same pass that writes the matches (no second job): messages,
matched, unmatched, null and invalid topics (null fields), matches written,
the top subscribers and (topic subscriptions only) the top patterns.  Exit
codes: 0 done (invalid topics included); 2 bad usage or unreadable input (a
corrupt content file names its line); 1 the Spark job failed.

Examples::

    cstrie spark-match --subscriptions subs.cstrie --messages logs/ --output out/
    cstrie spark-match --content --subscriptions subs.jsonl --messages log.jsonl --output out/
    cstrie spark-match --content --subscriptions subs.jsonl --messages log.parquet
        --output out/ --fields-col props --topic-col subject --per-subscriber
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading
import time
from typing import Any

from cstrie.commands._common import add_common, read_content, read_subscriptions
from cstrie.commands._progress import Bar, enabled

GROUP = "cstrie-spark-match"
_READERS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "json",
    ".ndjson": "json",
    ".json": "json",
    ".csv": "csv",
    ".orc": "orc",
    ".txt": "text",
    ".log": "text",
}


def messages_format(path: str, choice: str) -> str:
    """The Spark reader for the messages: by ``choice``, the path's suffix, or the
    suffix of the first data file in a directory (default parquet)."""
    if choice != "auto":
        return {"jsonl": "json"}.get(choice, choice)
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    if suffix in _READERS:
        return _READERS[suffix]
    if os.path.isdir(path):
        for _root, _dirs, files in os.walk(path):
            for name in sorted(files):
                if name.startswith((".", "_")):
                    continue
                ext = os.path.splitext(name.removesuffix(".gz").removesuffix(".snappy"))[1]
                if ext.lower() in _READERS:
                    return _READERS[ext.lower()]
    return "parquet"


def read_messages(spark: Any, path: str, fmt: str, topic_col: str) -> Any:
    reader = spark.read
    if fmt == "text":
        return reader.text(path).withColumnRenamed("value", topic_col)
    if fmt == "csv":
        return reader.option("header", "true").csv(path)
    return reader.format(fmt).load(path)


def _session(args: argparse.Namespace, show_spark_bar: bool) -> tuple[Any, bool]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None:
        return existing, False
    builder = SparkSession.builder.appName("cstrie spark-match").master(args.master)
    builder = builder.config("spark.ui.showConsoleProgress", str(show_spark_bar).lower())
    for item in args.conf or ():
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--conf expects KEY=VALUE, got {item!r}")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(args.log_level)
    return spark, True


class _Progress:
    """Polls Spark's status tracker for the jobs of this command and draws a bar."""

    def __init__(self, sc: Any, bar: Bar) -> None:
        self.sc = sc
        self.bar = bar
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        tracker = self.sc.statusTracker()
        while not self.stop.wait(0.5):
            done = total = 0
            try:
                for job in tracker.getJobIdsForGroup(GROUP):
                    info = tracker.getJobInfo(job)
                    for sid in info.stageIds if info else ():
                        stage = tracker.getStageInfo(sid)
                        if stage is not None:
                            total += stage.numTasks
                            done += stage.numCompletedTasks
            except Exception:  # the context is stopping
                return
            if total:
                self.bar(done, total)

    def __enter__(self) -> _Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _write(df: Any, path: str, fmt: str, overwrite: bool) -> None:
    w = df.write.mode("overwrite" if overwrite else "errorifexists")
    if fmt == "jsonl":
        w.option("ignoreNullFields", "false").json(path)
    else:
        w.parquet(path)


def _print_summary(s: dict[str, Any], out: Any) -> None:
    rows = [
        ("messages", s["messages"]),
        ("matched messages", s["matched"]),
        ("unmatched messages", s["unmatched"]),
        ("null fields" if s.get("content") else "null topics", s["null"]),
        ("invalid topics", s["invalid"]),
        ("matches written", s["matches"]),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>14,}", file=out)
    for title, key in (("top subscribers", "top_subscribers"), ("top patterns", "top_patterns")):
        if s.get(key):
            print(f"{title} (matches{'' if key == 'top_subscribers' else ': messages'}):", file=out)
            for name, n in s[key]:
                print(f"  {n:>14,}  {name}", file=out)
    print(
        f"{s['seconds']:.1f} s, {s['messages'] / max(s['seconds'], 1e-9):,.0f} messages/s "
        f"on {s['master']}; output: {s['output']} ({s['format']})",
        file=out,
    )


def check_usage(args: argparse.Namespace, fmt: str) -> None:
    """``ValueError`` (exit 2) for an option the mode does not use, or
    messages that cannot carry a fields column in content mode."""
    if args.content:
        for flag, given in (
            ("--dialect", args.dialect is not None),
            ("--input-format", args.input_format != "auto"),
        ):
            if given:
                raise ValueError(
                    f"{flag} applies to topic subscription files; a content subscription "
                    "file carries its own dialect and format (drop it, or drop --content)"
                )
        if fmt in ("text", "csv"):
            raise ValueError(
                f"--content needs messages with a fields column (Parquet, JSON Lines or "
                f"ORC); {fmt} messages cannot carry one"
            )
        return
    for flag, given in (
        ("--fields-col", args.fields_col is not None),
        ("--per-subscriber", args.per_subscriber),
    ):
        if given:
            raise ValueError(f"{flag} applies to content subscriptions only: add --content")


def _need_column(messages: Any, name: str, flag: str) -> None:
    if name not in messages.columns:
        raise ValueError(
            f"the messages have no column {name!r} (columns: {messages.columns}); "
            f"name it with {flag}"
        )


@dataclasses.dataclass
class _Job:
    """One matching job: the matcher, the column arguments its ``match`` and
    ``rejected`` take after the messages, ``match``'s own keywords, and what
    the summary adds about the subscriptions."""

    matcher: Any
    cols: tuple[str | None, ...]
    keywords: dict[str, Any]
    info: dict[str, Any]


def _topic_job(args: argparse.Namespace, spark: Any, messages: Any, trie: Any) -> _Job:
    from cstrie.spark import SparkMatcher

    topic_col = args.topic_col or "topic"
    _need_column(messages, topic_col, "--topic-col")
    matcher = SparkMatcher(trie, spark)
    info = {"content": False, "pairs": matcher.npairs, "topic_col": topic_col}
    return _Job(matcher, (topic_col,), {}, info)


def _content_job(args: argparse.Namespace, spark: Any, messages: Any, index: Any) -> _Job:
    from cstrie.spark import SparkContentMatcher

    topic_col = args.topic_col
    if topic_col is None and "topic" in messages.columns:
        topic_col = "topic"
    elif topic_col is None:
        print(
            "cstrie spark-match: note: the messages have no 'topic' column: matching "
            "without topics (only bindings without a topic filter can match)",
            file=sys.stderr,
        )
    else:
        _need_column(messages, topic_col, "--topic-col")
    fields_col = args.fields_col or "headers"
    _need_column(messages, fields_col, "--fields-col")
    matcher = SparkContentMatcher(index, spark)
    info = {
        "content": True,
        "bindings": matcher.nbindings,
        "fields_col": fields_col,
        "topic_col": topic_col,
        "per_subscriber": bool(args.per_subscriber),
    }
    return _Job(matcher, (fields_col, topic_col), {"bindings": not args.per_subscriber}, info)


def run(args: argparse.Namespace) -> int:
    try:
        import cstrie.spark  # noqa: F401
    except ImportError as exc:
        print(
            f"cstrie spark-match: error: {exc}; install the extra: pip install 'cstrie[spark]'",
            file=sys.stderr,
        )
        return 2
    if args.chunk_rows < 1:
        raise ValueError("--chunk-rows must be positive")
    if "://" not in args.messages and not os.path.exists(args.messages):
        raise ValueError(f"messages path {args.messages!r} does not exist")
    fmt = messages_format(args.messages, args.messages_format)
    check_usage(args, fmt)
    if args.content:
        subscriptions = read_content(args.subscriptions)
    else:
        subscriptions, _info = read_subscriptions(
            args.subscriptions, args.dialect, args.input_format
        )
    show = enabled(args.progress)
    spark, owned = _session(args, show_spark_bar=False)
    try:
        messages = read_messages(spark, args.messages, fmt, args.topic_col or "topic")
        if args.partitions:
            messages = messages.repartition(args.partitions)
        make = _content_job if args.content else _topic_job
        job = make(args, spark, messages, subscriptions)
        acc = job.matcher.stats_accumulator()
        out = job.matcher.match(
            messages,
            *job.cols,
            keep_unmatched=args.keep_unmatched,
            chunk_rows=args.chunk_rows,
            stats=acc,
            **job.keywords,
        )
        rejected = job.matcher.rejected(messages, *job.cols) if args.rejected else None
        sc = spark.sparkContext
        sc.setJobGroup(GROUP, "cstrie spark-match")
        start = time.monotonic()
        bar = Bar("spark-match", show, unit="tasks")
        try:
            with _Progress(sc, bar):
                _write(out, args.output, args.format, args.overwrite)
                if rejected is not None:
                    _write(rejected, args.rejected, args.format, args.overwrite)
        finally:
            bar.close()
        seconds = time.monotonic() - start
        summary = job.matcher.read_stats(acc, args.top)
        summary.update(
            seconds=seconds,
            master=sc.master,
            output=args.output,
            format=args.format,
            rejected_output=args.rejected,
            dialect=job.matcher.dialect.name,
            **job.info,
        )
        _print_summary(summary, sys.stdout)
        if args.summary_json:
            with open(args.summary_json, "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=2, default=str)
                f.write("\n")
        job.matcher.destroy()
    except Exception as exc:
        if isinstance(exc, (ValueError, TypeError, OSError)):
            raise
        name = type(exc).__name__
        if "AnalysisException" in name or "PATH_NOT_FOUND" in str(exc):
            raise ValueError(str(exc).splitlines()[0]) from None
        print(f"cstrie spark-match: the Spark job failed: {name}: {exc}", file=sys.stderr)
        return 1
    finally:
        if owned:
            spark.stop()
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "spark-match",
        help="match a message log with Spark (local or a cluster), write the matches",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--subscriptions",
        required=True,
        metavar="FILE",
        help="subscription file (with --content: a content subscription file)",
    )
    p.add_argument("--messages", required=True, metavar="PATH", help="message file or directory")
    p.add_argument(
        "--content",
        action="store_true",
        help="the subscriptions are a content subscription file (ContentIndex.export): "
        "match criteria on each message's fields column",
    )
    p.add_argument(
        "--fields-col",
        metavar="NAME",
        help="with --content: the messages' fields column, a map or struct (default headers)",
    )
    p.add_argument(
        "--per-subscriber",
        action="store_true",
        help="with --content: one row per (message, subscriber), without criteria and "
        "pattern (default: one row per matching binding)",
    )
    p.add_argument("--output", required=True, metavar="PATH", help="output directory")
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master URL (default local[*]: embedded Spark on this machine)",
    )
    p.add_argument(
        "--format",
        choices=("parquet", "jsonl"),
        default="parquet",
        help="output format (default parquet)",
    )
    p.add_argument(
        "--messages-format",
        choices=("auto", "parquet", "jsonl", "json", "csv", "orc", "text"),
        default="auto",
        help="format of the messages (default: from the suffix; text = one topic per line; "
        "a fields column needs parquet, jsonl or orc)",
    )
    p.add_argument(
        "--topic-col",
        metavar="NAME",
        help="the messages' topic column (default topic; with --content: topic if the "
        "messages have one, else no topics)",
    )
    p.add_argument(
        "--keep-unmatched",
        action="store_true",
        help="also write each message without a match once, with nulls in the new columns",
    )
    p.add_argument(
        "--rejected",
        metavar="PATH",
        help="write messages with null or invalid topics (or null fields) here, with the reason",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing output")
    p.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="repartition the messages first (default: as read)",
    )
    p.add_argument(
        "--chunk-rows",
        type=int,
        default=65536,
        help="most rows per output Arrow batch (default 65536)",
    )
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark setting")
    p.add_argument("--summary-json", metavar="PATH", help="also write the summary as JSON")
    p.add_argument("--top", type=int, default=10, help="subscribers/patterns in the summary")
    p.add_argument("--log-level", default="ERROR", help="Spark log level (default ERROR)")
    add_common(p)
    p.set_defaults(func=run)
