"""The baselines the Spark pipeline is measured against.

* :func:`rlike_match`: what a Spark user writes without cstrie: a cross join of
  the messages with the subscriptions, filtered by ``rlike`` with one regular
  expression per pattern (:func:`pattern_regex`).
* ``SparkMatcher(..., engine=PyMatcher)``: the same ``mapInArrow`` pipeline as
  the native one, matching with the pure-Python :class:`cstrie_lab.pytrie.PyTrie`
  (:class:`PyMatcher`).

The regex translation works on the topic with the separator put in front of
every word (``"a.b"`` -> ``".a.b"``, the empty AMQP topic -> ``""``, zero words),
so each pattern word becomes one anchored piece:

===========  =======================  =========================================
word         regex piece              why
===========  =======================  =========================================
literal w    ``SEP w``                w escaped: ASCII punctuation backslashed
one-level    ``SEP [^SEP]*``          exactly one word, possibly empty
many-level   ``(?:SEP [^SEP]*)*``     zero or more words (AMQP ``#`` anywhere,
                                      MQTT ``#`` also matching the parent)
             ``(?:SEP [^SEP]*)+``     one or more (NATS ``>``: ``multi_min`` 1)
===========  =======================  =========================================

The whole is ``^`` ... ``\\z`` (Java: end of input, not before a final newline),
and a pattern starting with a wildcard gets ``(?!SEP\\$)`` under the MQTT
``$`` rule.  Multi-character separators use ``(?:(?!SEP).)*`` with DOTALL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pyarrow as pa

from cstrie.dialect import Dialect, resolve_dialect
from cstrie.spark.engine import DEFAULT_CAP, NULL, MatcherBase
from cstrie.spark.payload import Payload
from cstrie_lab.classic.regex_bindings import pattern_regex as translate

__all__ = ["PyMatcher", "pattern_regex", "rlike_match", "topic_key", "with_regex"]


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch.isascii() and not ch.isalnum():
            if ch.isprintable():
                out.append("\\" + ch)
            else:
                out.append(f"\\x{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return "".join(out)


def pattern_regex(dialect: str | Dialect, pattern: str) -> str:
    """A Java regular expression (for Spark's ``rlike``) that matches a topic's
    :func:`topic_key` exactly when ``pattern`` matches the topic."""
    d = resolve_dialect(dialect)
    words = d.split_pattern(pattern)
    flags = "(?s)" if len(d.separator) != 1 else ""  # "." also matches newlines
    return flags + "^" + translate(d, words, _escape) + "\\z"


def topic_key(topic_col: Any, dialect: str | Dialect) -> Any:
    """The Spark column expression the regexes run on: SEP + topic, or "" for the
    empty topic (zero words)."""
    from pyspark.sql import functions as F

    d = resolve_dialect(dialect)
    col = F.col(topic_col) if isinstance(topic_col, str) else topic_col
    return F.when(col == F.lit(""), F.lit("")).otherwise(F.concat(F.lit(d.separator), col))


def with_regex(
    subscriptions: Any, dialect: str | Dialect = "amqp", pattern_col: str = "pattern"
) -> Any:
    """The subscriptions DataFrame plus a ``_regex`` column (:func:`pattern_regex`
    of each pattern), computed once on the driver (subscriptions are small)."""
    from pyspark.sql import functions as F

    d = resolve_dialect(dialect)
    patterns = [r[0] for r in subscriptions.select(pattern_col).distinct().collect()]
    spark = subscriptions.sparkSession
    table = spark.createDataFrame(
        [(p, pattern_regex(d, p)) for p in patterns], f"`{pattern_col}` string, _regex string"
    )
    return subscriptions.join(F.broadcast(table), pattern_col)


def rlike_match(
    messages: Any,
    subscriptions: Any,
    topic_col: str = "topic",
    dialect: str | Dialect = "amqp",
    pattern_col: str = "pattern",
    subscriber_col: str = "subscriber",
) -> Any:
    """The cross-join + ``rlike`` baseline: the messages' columns plus pattern and
    subscriber, one row per match (valid topics only: it does not validate).

    ``subscriptions`` is a DataFrame with pattern and subscriber columns, and
    optionally ``_regex`` (:func:`with_regex`; computed here when missing)."""
    from pyspark.sql import functions as F

    d = resolve_dialect(dialect)
    if "_regex" not in subscriptions.columns:
        subscriptions = with_regex(subscriptions, d, pattern_col)
    subs = subscriptions.select(pattern_col, subscriber_col, "_regex")
    keyed = messages.withColumn("_key", topic_key(topic_col, d))
    return (
        keyed.crossJoin(F.broadcast(subs)).where(F.expr("_key RLIKE _regex")).drop("_key", "_regex")
    )


class PyMatcher(MatcherBase):
    """The matcher interface of :class:`cstrie.spark.engine.NativeMatcher` over
    :class:`cstrie_lab.pytrie.PyTrie` (the benchmark's pure-Python baseline): one
    ``lookup`` per row, subscribers are pair indexes."""

    def __init__(self, payload: Payload) -> None:
        from cstrie_lab.pytrie import PyTrie

        self._tables(payload)
        trie = PyTrie(self.dialect)
        pats = self.patterns.to_pylist()
        for k, p in enumerate(self.pair_pattern.tolist()):
            trie.subscribe(pats[p], k)
        self._trie = trie

    def scan(
        self, column: Any, status: np.ndarray, cap: int = DEFAULT_CAP
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        lookup = self._trie.lookup
        rows: list[int] = []
        pairs: list[int] = []
        binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
        for r, topic in enumerate(column.to_pylist()):
            if topic is None:
                status[r] = NULL
                continue
            try:
                found = lookup(topic.decode() if binary else topic)
            except (ValueError, UnicodeDecodeError):
                status[r] = -17
                continue
            for k in found:
                rows.append(r)
                pairs.append(cast(int, k))
                if len(rows) == cap:
                    yield np.array(rows, np.int64), np.array(pairs, np.int64)
                    rows, pairs = [], []
        if rows:
            yield np.array(rows, np.int64), np.array(pairs, np.int64)


def lab_session(master: str, app: str, **conf: str) -> Any:
    """The Spark session of a lab benchmark: ``master``, no UI or console
    progress bar, a 2 GiB driver, the log at ERROR, plus ``conf``.  Sets
    ``SPARK_LOCAL_IP`` (loopback) and ``PYSPARK_PYTHON`` (this interpreter)
    when they are not set."""
    import os
    import sys

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
    )
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
