"""The driver side of the Spark pipeline (see :mod:`cstrie.spark` for the overview)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

from cstrie.dialect import Dialect, resolve_dialect
from cstrie.spark import engine as _eng
from cstrie.spark.payload import ContentPayload, Payload, digest

__all__ = [
    "SparkContentMatcher",
    "SparkMatcher",
    "StatsParam",
    "content_match",
    "content_payload",
    "content_rejected",
    "content_summary",
    "content_unmatched",
    "deliver",
    "filter_join",
    "match",
    "per_pattern",
    "per_subscriber",
    "rejected",
    "route",
    "summary",
    "to_payload",
    "unmatched",
]

COUNTERS = _eng.COUNTERS


def to_payload(
    subscriptions: Any,
    dialect: str | Dialect | None = None,
    pattern_col: str = "pattern",
    subscriber_col: str = "subscriber",
    group_col: str = "group",
    policies: Mapping[str, str] | None = None,
) -> Payload:
    """A :class:`~cstrie.spark.payload.Payload` from any accepted subscription source:
    a Trie/Snapshot, a PyTrie (or any iterable of pairs with a ``dialect``), a Spark
    DataFrame or Arrow table with pattern and subscriber columns (and optionally
    a ``group_col`` column: a row with a group is a share-group membership), a
    path to a subscription file (an export in any format, or
    PATTERN<TAB>SUBSCRIBER text), a Payload or its bytes.  ``policies``
    ({group name: policy}) set the groups' policies for :meth:`SparkMatcher.deliver`,
    over those the source has (a Trie's, an export's)."""
    payload = _to_payload(subscriptions, dialect, pattern_col, subscriber_col, group_col)
    if policies:
        payload = dataclasses.replace(payload, policies={**payload.policies, **policies})
    return payload


def _to_payload(
    subscriptions: Any,
    dialect: str | Dialect | None,
    pattern_col: str,
    subscriber_col: str,
    group_col: str,
) -> Payload:
    d = resolve_dialect(dialect) if dialect is not None else None
    if isinstance(subscriptions, SparkMatcher):
        payload = subscriptions.payload
    elif isinstance(subscriptions, Payload):
        payload = subscriptions
    elif isinstance(subscriptions, (bytes, bytearray, memoryview)):
        payload = Payload.from_bytes(subscriptions)
    elif isinstance(subscriptions, DataFrame):
        missing = [c for c in (pattern_col, subscriber_col) if c not in subscriptions.columns]
        if missing:
            raise ValueError(
                f"the subscriptions DataFrame has no column {missing[0]!r} "
                f"(columns: {subscriptions.columns}); pass pattern_col=/subscriber_col="
            )
        cols = [pattern_col, subscriber_col]
        cols += [group_col] if group_col in subscriptions.columns else []
        table = _collect_arrow(subscriptions.select(*cols))
        return Payload.from_arrow(table, d or "amqp", pattern_col, subscriber_col, group_col)
    elif isinstance(subscriptions, pa.Table):
        return Payload.from_arrow(
            subscriptions, d or "amqp", pattern_col, subscriber_col, group_col
        )
    elif isinstance(subscriptions, (str, os.PathLike)):
        from cstrie.commands._common import read_subscriptions

        trie, _ = read_subscriptions(
            os.fspath(subscriptions), d.name if d is not None and d.name != "custom" else None
        )
        payload = Payload.from_reader(trie)
    elif hasattr(subscriptions, "_h") and hasattr(subscriptions, "snapshot"):
        payload = Payload.from_reader(subscriptions)
    elif hasattr(subscriptions, "dialect") and hasattr(subscriptions, "__iter__"):
        payload = Payload.from_pairs(subscriptions, subscriptions.dialect)
    else:
        raise TypeError(
            "subscriptions must be a cstrie Trie/Snapshot, a DataFrame with pattern and "
            "subscriber columns, a subscription file path or a Payload, not "
            f"{type(subscriptions).__name__}"
        )
    if d is not None and d != payload.dialect:
        raise ValueError(
            f"dialect {d.name!r} does not match the subscriptions' dialect {payload.dialect.name!r}"
        )
    return payload


def _collect_arrow(sel: DataFrame) -> pa.Table:
    """A DataFrame collected to the driver as one Arrow table."""
    table = sel.toArrow() if hasattr(sel, "toArrow") else cast(Any, sel)._collect_as_arrow()
    if not isinstance(table, pa.Table):  # pyspark 3.5: a list of record batches
        table = pa.Table.from_batches(table, schema=None if table else _empty(sel))
    return table


def _empty(df: DataFrame) -> Any:
    """The Arrow schema of a DataFrame (for an empty collect on pyspark 3.5)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema)


class StatsParam(AccumulatorParam):  # type: ignore[type-arg, misc, unused-ignore]
    """Merges the per-partition statistics :func:`engine.run` adds: counters and
    sparse per-pair match counts."""

    def zero(self, value: Any) -> dict[str, Any]:
        return {}

    def addInPlace(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        for k, v in b.items():
            if k == "pairs":
                pairs = a.setdefault("pairs", {})
                for p, n in v.items():
                    pairs[p] = pairs.get(p, 0) + n
            else:
                a[k] = a.get(k, 0) + v
        return a


def _session(df: DataFrame) -> SparkSession:
    return df.sparkSession


def _active(spark: SparkSession | None, subscriptions: Any) -> SparkSession:
    if spark is None:
        if isinstance(subscriptions, DataFrame):
            spark = subscriptions.sparkSession
        else:
            spark = SparkSession.getActiveSession()
    if spark is None:
        raise ValueError("no active SparkSession: pass spark=")
    return spark


def _check_messages(
    messages: DataFrame, topic_col: str | None, new: list[str]
) -> dict[str, T.StructField]:
    """The messages' fields by name, after checking that ``messages`` is a
    DataFrame, that ``topic_col`` (unless None) is a string or binary
    column, and that no ``new`` output column name is taken."""
    if not isinstance(messages, DataFrame):
        raise TypeError(f"messages must be a Spark DataFrame, not {type(messages).__name__}")
    fields = {f.name: f for f in messages.schema.fields}
    if topic_col is not None and topic_col not in fields:
        raise ValueError(
            f"the messages have no column {topic_col!r} (columns: {messages.columns}); "
            "pass topic_col="
        )
    if topic_col is not None and not isinstance(
        fields[topic_col].dataType, (T.StringType, T.BinaryType)
    ):
        raise TypeError(
            f"the topic column {topic_col!r} must be a string (or binary UTF-8) column, "
            f"not {fields[topic_col].dataType.simpleString()}"
        )
    for name in new:
        if name in fields:
            raise ValueError(
                f"the messages already have a column {name!r}; choose another output "
                "column name (pattern_col=, subscriber_col=, route_col=, reason_col=, "
                "group_col=, criteria_col=)"
            )
    if len(set(new)) != len(new):
        raise ValueError(f"two output columns have the same name: {new}")
    return fields


class _Broadcast:
    """What the matchers share: a payload (``raw``, named by its SHA-256
    ``key``) broadcast once, and the ``mapInArrow`` jobs that run
    :func:`cstrie.spark.engine.run` over it with the engine ``engine``."""

    spark: SparkSession
    raw: bytes
    key: str
    engine: Any
    build_counter: Any
    _bc: Any

    def _start(self, spark: SparkSession, raw: bytes, engine: Any, check: Any = None) -> None:
        self.spark = spark
        self.raw = raw
        self.key = digest(raw)
        self.engine = engine
        #: an int accumulator; when set, each matcher build in a worker adds 1
        self.build_counter = None
        # Build once here (with ``check``, the engine by default): validates
        # every subscription (ValueError) before a job starts.
        _eng.get_matcher(self.key, raw, engine if check is None else check)
        try:
            sc = spark.sparkContext
        except Exception as exc:  # Spark Connect has no SparkContext
            raise TypeError(
                "cstrie.spark needs a classic SparkSession (broadcast variables); "
                "Spark Connect is not supported"
            ) from exc
        self._bc = sc.broadcast(raw)

    def destroy(self) -> None:
        """Drop the broadcast from the executors (the matcher cannot be used after)."""
        self._bc.destroy()

    def stats_accumulator(self) -> Any:
        """An accumulator to pass as ``stats=``: after the job it holds the
        counters and {pair: matches}; read it with ``read_stats``.  Exact when
        the matching runs in the job's final stage (a write or collect); a stage
        that Spark re-runs may count twice."""
        return self.spark.sparkContext.accumulator({}, StatsParam())

    @staticmethod
    def _read_stats(
        acc: Any, pair_subscriber: Any, subscribers: Any, top: int
    ) -> tuple[dict[str, Any], Mapping[int, int]]:
        """(counters + the ``top`` subscribers by rows, {pair: rows}) from an
        accumulator; ``pair_subscriber``: each pair's index into the Arrow
        array ``subscribers``.  O(pairs that matched)."""
        value = dict(acc.value)
        pair_counts: Mapping[int, int] = value.pop("pairs", {})
        out: dict[str, Any] = {name: int(value.get(name, 0)) for name in COUNTERS}
        subs = pair_subscriber.to_numpy(zero_copy_only=False)
        by_sub: dict[int, int] = {}
        for pair, n in pair_counts.items():
            by_sub[int(subs[pair])] = by_sub.get(int(subs[pair]), 0) + n
        out["top_subscribers"] = _top(by_sub, subscribers, top)
        return out, pair_counts

    def _arrow(self, t: T.DataType) -> Any:
        return _arrow_type(self.spark, t)

    def _map(
        self,
        messages: DataFrame,
        plan: _eng.Plan,
        new_fields: list[T.StructField],
        with_messages: bool = True,
    ) -> DataFrame:
        plan.key = self.key
        plan.engine = self.engine
        plan.builds = self.build_counter
        plan.extra = [(f.name, self._arrow(f.dataType)) for f in new_fields]
        schema = T.StructType((list(messages.schema.fields) if with_messages else []) + new_fields)
        fn = _Runner(self._bc, plan)
        return messages.mapInArrow(fn, schema)

    def _rejected(self, messages: DataFrame, plan: _eng.Plan, reason_col: str) -> DataFrame:
        """The rows the matcher rejects, with their reason."""
        plan.mode = "rejected"
        return self._map(messages, plan, [T.StructField(reason_col, T.StringType(), False)])

    def _counts(self, messages: DataFrame, plan: _eng.Plan) -> DataFrame:
        """(pair, n) summed over the job, counters under negative keys."""
        plan.mode = "counts"
        fields = [
            T.StructField("pair", T.LongType(), False),
            T.StructField("n", T.LongType(), False),
        ]
        return (
            self._map(messages, plan, fields, with_messages=False)
            .groupBy("pair")
            .agg(F.sum("n").alias("n"))
        )

    def _counters(self, messages: DataFrame, plan: _eng.Plan) -> dict[str, int]:
        rows = self._counts(messages, plan).where(F.col("pair") < 0).collect()
        by_key = {r["pair"]: r["n"] for r in rows}
        return {name: int(by_key.get(key, 0) or 0) for name, key in COUNTERS.items()}


class SparkMatcher(_Broadcast):
    """A subscription set compiled for Spark: serialised once, broadcast once.

    Every method returns a lazy DataFrame (except :meth:`summary`); each Python
    worker rebuilds the matcher once and keeps it (see :mod:`cstrie.spark.engine`).
    ``engine``, a :class:`~cstrie.spark.engine.MatcherBase` subclass, matches
    with it instead of the native engine (the benchmark's pure-Python baseline;
    same pipeline otherwise): it must be importable in the workers.

    Raises ``ValueError`` naming the first invalid pattern, before any job runs.
    """

    def __init__(
        self,
        subscriptions: Any,
        spark: SparkSession | None = None,
        *,
        dialect: str | Dialect | None = None,
        pattern_col: str = "pattern",
        subscriber_col: str = "subscriber",
        group_col: str = "group",
        policies: Mapping[str, str] | None = None,
        engine: str | type[_eng.MatcherBase] = "native",
    ) -> None:
        if engine != "native" and not (
            isinstance(engine, type) and issubclass(engine, _eng.MatcherBase)
        ):
            raise ValueError(
                "engine must be 'native' or a subclass of cstrie.spark.engine.MatcherBase, "
                f"not {engine!r}"
            )
        spark = _active(spark, subscriptions)
        self.payload = to_payload(
            subscriptions, dialect, pattern_col, subscriber_col, group_col, policies
        )
        raw = self.payload.to_bytes()
        if self.payload.nmembers or self.payload.policies:
            _eng.get_matcher(digest(raw), raw, "router")  # validates the memberships
        self._start(spark, raw, engine, "native")
        self.subscriber_type = from_arrow_type(self.payload.subscribers.type)

    @property
    def dialect(self) -> Dialect:
        return self.payload.dialect

    @property
    def npairs(self) -> int:
        return self.payload.npairs

    def __repr__(self) -> str:
        return (
            f"<cstrie.spark.SparkMatcher dialect={self.dialect.name} pairs={self.npairs} "
            f"payload={len(self.raw):,} bytes sha256={self.key[:12]}>"
        )

    # ------------------------------------------------------------ plumbing
    def _check(
        self, messages: DataFrame, topic_col: str, new: list[str], key_col: str | None = None
    ) -> None:
        fields = _check_messages(messages, topic_col, new)
        if key_col is not None:
            if key_col not in fields:
                raise ValueError(
                    f"the messages have no column {key_col!r} (columns: {messages.columns}); "
                    "pass key_col="
                )
            keys = (T.StringType, T.BinaryType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)
            if not isinstance(fields[key_col].dataType, keys):
                raise TypeError(
                    f"the key column {key_col!r} must be a string, binary or integer column, "
                    f"not {fields[key_col].dataType.simpleString()}"
                )

    # ------------------------------------------------------------- outputs
    def match(
        self,
        messages: DataFrame,
        topic_col: str = "topic",
        *,
        keep_unmatched: bool = False,
        pattern_col: str = "pattern",
        subscriber_col: str = "subscriber",
        chunk_rows: int = _eng.DEFAULT_CAP,
        stats: Any = None,
    ) -> DataFrame:
        """The message's columns plus ``pattern`` and ``subscriber``, one row per
        matching (pattern, subscriber) pair.  With ``keep_unmatched`` every message
        without a match (including null and invalid topics) is kept once, with
        nulls in both new columns.  Output batches hold at most ``chunk_rows``
        rows, however many subscribers one message reaches.  ``stats``: an
        accumulator made with :meth:`stats_accumulator`, filled as the job runs."""
        self._check(messages, topic_col, [pattern_col, subscriber_col])
        plan = _eng.Plan(
            key="",
            mode="match",
            topic_col=topic_col,
            keep_unmatched=keep_unmatched,
            cap=_cap(chunk_rows),
            stats=stats,
        )
        fields = [
            T.StructField(pattern_col, T.StringType(), keep_unmatched),
            T.StructField(subscriber_col, self.subscriber_type, keep_unmatched),
        ]
        return self._map(messages, plan, fields)

    def route(
        self,
        messages: DataFrame,
        topic_col: str = "topic",
        *,
        pattern_col: str = "pattern",
        subscriber_col: str = "subscriber",
        route_col: str = "route",
        reason_col: str = "reason",
        chunk_rows: int = _eng.DEFAULT_CAP,
        stats: Any = None,
    ) -> DataFrame:
        """Every message, routed: one row per match (``route`` = "match") and one
        row for each message without one: "unmatched", "null" or "invalid", the
        last two with a ``reason``.  Filter on ``route`` to split the output."""
        self._check(messages, topic_col, [pattern_col, subscriber_col, route_col, reason_col])
        plan = _eng.Plan(
            key="", mode="route", topic_col=topic_col, cap=_cap(chunk_rows), stats=stats
        )
        fields = [
            T.StructField(pattern_col, T.StringType(), True),
            T.StructField(subscriber_col, self.subscriber_type, True),
            T.StructField(route_col, T.StringType(), False),
            T.StructField(reason_col, T.StringType(), True),
        ]
        return self._map(messages, plan, fields)

    def deliver(
        self,
        messages: DataFrame,
        topic_col: str = "topic",
        *,
        key_col: str | None = None,
        subscriber_col: str = "subscriber",
        group_col: str = "group",
        chunk_rows: int = _eng.DEFAULT_CAP,
    ) -> DataFrame:
        """The deliveries of every message, as ``Trie.route`` makes them: the
        message's columns plus ``subscriber`` and ``group``, one row per ordinary
        subscriber (each once, ``group`` null) and one row per share group with
        a member on a matching filter (exactly one member per group and message,
        ``group`` its name).  ``key_col`` (string, binary or integer; optional)
        is the key of "sticky" groups, the topic when null.  Messages with a
        null or invalid topic or no match deliver nothing (see :meth:`rejected`).

        Each Python worker routes with its own copy of the trie, so a
        round-robin group rotates per worker process and per partition order,
        not over the whole log; see docs/spark.md."""
        self._check(messages, topic_col, [subscriber_col, group_col], key_col)
        plan = _eng.Plan(
            key="", mode="deliver", topic_col=topic_col, key_col=key_col, cap=_cap(chunk_rows)
        )
        fields = [
            T.StructField(subscriber_col, self.subscriber_type, False),
            T.StructField(group_col, T.StringType(), True),
        ]
        return self._map(messages, plan, fields)

    def rejected(
        self, messages: DataFrame, topic_col: str = "topic", *, reason_col: str = "reason"
    ) -> DataFrame:
        """The messages whose topic is null or invalid in the dialect, each with
        the ``reason`` (the dialect's own error message, or "null topic")."""
        self._check(messages, topic_col, [reason_col])
        return self._rejected(messages, _eng.Plan(key="", topic_col=topic_col), reason_col)

    def unmatched(self, messages: DataFrame, topic_col: str = "topic") -> DataFrame:
        """The messages with a valid topic that no subscription matches."""
        self._check(messages, topic_col, [])
        plan = _eng.Plan(key="", mode="unmatched", topic_col=topic_col)
        return self._map(messages, plan, [])

    # ----------------------------------------------------------- summaries
    def pairs(self) -> DataFrame:
        """The subscriptions: (pair, pattern, subscriber), pair numbered from 0."""
        p = self.payload
        table = pa.table(
            {
                "pair": pa.array(range(p.npairs), pa.int64()),
                "pattern": p.patterns.take(p.pair_pattern),
                "subscriber": p.subscribers.take(p.pair_subscriber),
            }
        )
        schema = T.StructType(
            [
                T.StructField("pair", T.LongType(), False),
                T.StructField("pattern", T.StringType(), False),
                T.StructField("subscriber", self.subscriber_type, False),
            ]
        )
        if p.npairs == 0:
            return self.spark.createDataFrame([], schema)
        return self.spark.createDataFrame(table, schema)

    def counts(self, messages: DataFrame, topic_col: str = "topic") -> DataFrame:
        """Partial counts aggregated: (pair, n) for every pair with n > 0 matches,
        and the counters under negative keys (see ``cstrie.spark.engine.COUNTERS``).  Computed
        in the workers without materialising the matches."""
        self._check(messages, topic_col, [])
        return self._counts(messages, _eng.Plan(key="", topic_col=topic_col))

    def summary(self, messages: DataFrame, topic_col: str = "topic") -> dict[str, int]:
        """Counts (runs a job): messages, matched, unmatched, null, invalid (topics)
        and matches ((message, pattern, subscriber) rows)."""
        self._check(messages, topic_col, [])
        return self._counters(messages, _eng.Plan(key="", topic_col=topic_col))

    def _joined(self, messages: DataFrame, topic_col: str) -> DataFrame:
        counts = self.counts(messages, topic_col).where(F.col("pair") >= 0)
        return self.pairs().join(counts, "pair", "left").fillna(0, ["n"])

    def per_subscriber(self, messages: DataFrame, topic_col: str = "topic") -> DataFrame:
        """(subscriber, patterns, matches) for every subscriber, most matches first;
        ``matches`` counts (message, pattern) pairs delivered to the subscriber."""
        return (
            self._joined(messages, topic_col)
            .groupBy("subscriber")
            .agg(F.count("*").alias("patterns"), F.sum("n").alias("matches"))
            .orderBy(F.desc("matches"), "subscriber")
        )

    def per_pattern(self, messages: DataFrame, topic_col: str = "topic") -> DataFrame:
        """(pattern, subscribers, messages, matches) for every pattern, most
        messages first; ``messages`` is how many messages the pattern matched."""
        return (
            self._joined(messages, topic_col)
            .groupBy("pattern")
            .agg(
                F.count("*").alias("subscribers"),
                F.max("n").alias("messages"),
                F.sum("n").alias("matches"),
            )
            .orderBy(F.desc("messages"), "pattern")
        )

    def read_stats(self, acc: Any, top: int = 10) -> dict[str, Any]:
        """Counters plus the ``top`` subscribers and patterns from an accumulator."""
        p = self.payload
        out, pair_counts = self._read_stats(acc, p.pair_subscriber, p.subscribers, top)
        pats = p.pair_pattern.to_numpy(zero_copy_only=False)
        by_pat: dict[int, int] = {}
        for pair, n in pair_counts.items():
            k = int(pats[pair])
            by_pat[k] = max(by_pat.get(k, 0), n)
        out["top_patterns"] = _top(by_pat, p.patterns, top)
        return out


def _top(counts: Mapping[int, int], values: Any, top: int) -> list[tuple[Any, int]]:
    """The ``top`` (value, count) of ``counts`` (index into the Arrow array
    ``values`` -> count), largest first."""
    best = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    return [(values[k].as_py(), n) for k, n in best]


def _arrow_type(spark: SparkSession, t: T.DataType) -> Any:
    """The Arrow type Spark uses for ``t`` in ``mapInArrow`` batches."""
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
    try:
        return to_arrow_type(t, prefers_large_types=str(large).lower() == "true")
    except TypeError:  # pyspark 3.5: no prefers_large_types
        return to_arrow_type(t)


class _Runner:
    """The picklable mapInArrow function: (broadcast, plan) -> engine.run, or
    engine.run_join for a :class:`~cstrie.spark.engine.JoinPlan`."""

    __slots__ = ("bc", "plan")

    def __init__(self, bc: Any, plan: _eng.Plan | _eng.JoinPlan) -> None:
        self.bc = bc
        self.plan = plan

    def __call__(self, batches: Any) -> Any:
        from cstrie.spark import engine

        if isinstance(self.plan, engine.JoinPlan):
            return engine.run_join(self.bc, self.plan, batches)
        return engine.run(self.bc, self.plan, batches)


def _cap(chunk_rows: int) -> int:
    if not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, not {chunk_rows!r}")
    return chunk_rows


# ------------------------------------------------------- one-call functions
def _matcher(messages: DataFrame, subscriptions: Any, dialect: Any) -> SparkMatcher:
    if isinstance(subscriptions, SparkMatcher):
        if dialect is not None and resolve_dialect(dialect) != subscriptions.dialect:
            raise ValueError("dialect does not match the SparkMatcher's dialect")
        return subscriptions
    if not isinstance(messages, DataFrame):
        raise TypeError(f"messages must be a Spark DataFrame, not {type(messages).__name__}")
    return SparkMatcher(subscriptions, _session(messages), dialect=dialect)


def match(
    messages: DataFrame,
    subscriptions: Any,
    topic_col: str = "topic",
    *,
    keep_unmatched: bool = False,
    dialect: str | Dialect | None = None,
    pattern_col: str = "pattern",
    subscriber_col: str = "subscriber",
    chunk_rows: int = _eng.DEFAULT_CAP,
) -> DataFrame:
    """Match a DataFrame of messages against subscriptions (see
    :meth:`SparkMatcher.match`).  ``subscriptions``: a Trie/Snapshot, a DataFrame
    with ``pattern`` and ``subscriber`` columns, a subscription file path, or a
    :class:`SparkMatcher` (reuse one to broadcast once for several jobs)."""
    return _matcher(messages, subscriptions, dialect).match(
        messages,
        topic_col,
        keep_unmatched=keep_unmatched,
        pattern_col=pattern_col,
        subscriber_col=subscriber_col,
        chunk_rows=chunk_rows,
    )


def route(
    messages: DataFrame, subscriptions: Any, topic_col: str = "topic", **kw: Any
) -> DataFrame:
    """See :meth:`SparkMatcher.route`."""
    dialect = kw.pop("dialect", None)
    return _matcher(messages, subscriptions, dialect).route(messages, topic_col, **kw)


def deliver(
    messages: DataFrame, subscriptions: Any, topic_col: str = "topic", **kw: Any
) -> DataFrame:
    """See :meth:`SparkMatcher.deliver`."""
    dialect = kw.pop("dialect", None)
    return _matcher(messages, subscriptions, dialect).deliver(messages, topic_col, **kw)


def rejected(
    messages: DataFrame, subscriptions: Any, topic_col: str = "topic", **kw: Any
) -> DataFrame:
    """See :meth:`SparkMatcher.rejected`."""
    dialect = kw.pop("dialect", None)
    return _matcher(messages, subscriptions, dialect).rejected(messages, topic_col, **kw)


def unmatched(
    messages: DataFrame,
    subscriptions: Any,
    topic_col: str = "topic",
    dialect: str | Dialect | None = None,
) -> DataFrame:
    """See :meth:`SparkMatcher.unmatched`."""
    return _matcher(messages, subscriptions, dialect).unmatched(messages, topic_col)


def summary(
    messages: DataFrame,
    subscriptions: Any,
    topic_col: str = "topic",
    dialect: str | Dialect | None = None,
) -> dict[str, int]:
    """See :meth:`SparkMatcher.summary`."""
    return _matcher(messages, subscriptions, dialect).summary(messages, topic_col)


def per_subscriber(
    messages: DataFrame,
    subscriptions: Any,
    topic_col: str = "topic",
    dialect: str | Dialect | None = None,
) -> DataFrame:
    """See :meth:`SparkMatcher.per_subscriber`."""
    return _matcher(messages, subscriptions, dialect).per_subscriber(messages, topic_col)


def per_pattern(
    messages: DataFrame,
    subscriptions: Any,
    topic_col: str = "topic",
    dialect: str | Dialect | None = None,
) -> DataFrame:
    """See :meth:`SparkMatcher.per_pattern`."""
    return _matcher(messages, subscriptions, dialect).per_pattern(messages, topic_col)


# ------------------------------------------- filters against stored topics
def filter_join(
    filters: Any,
    topics: DataFrame,
    filter_col: str = "filter",
    topic_col: str = "topic",
    *,
    dialect: str | Dialect = "amqp",
    filter_cols: Sequence[str] = (),
    topic_cols: Sequence[str] = (),
    index_rows: int | None = None,
    chunk_rows: int = _eng.DEFAULT_CAP,
) -> DataFrame:
    """Which filters match which stored topics, without a cross join.

    ``filters`` (the small side: a DataFrame, an Arrow table or a list of
    filter strings) is collected to the driver and broadcast; ``topics`` (the
    large side, a DataFrame) is never shuffled.  The result is a lazy
    DataFrame with one row per (filter row, topic row) pair where the filter
    matches the topic under ``dialect``'s rules (what
    :meth:`cstrie.topics.TopicIndex.query` answers), with the columns
    ``filter_col``, then ``filter_cols`` (carried from the filter table), then
    ``topic_col``, then ``topic_cols`` (carried from the topic table), in that
    order and with their own types.  Every row is its own: a topic stored on
    two rows pairs twice with each filter that matches it, and a filter on two
    rows of the filter table pairs twice with each of its topics.

    How: every partition of ``topics`` runs through ``mapInArrow``; for each
    Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10,000
    by default) the worker builds a :class:`~cstrie.topics.TopicIndex` of the
    batch's distinct topics and runs one ``query`` per distinct filter.  With
    ``index_rows`` it indexes consecutive batches of a partition together
    until they hold at least that many rows (fewer queries when there are
    many filters; more memory).  The index lives for one batch (or group);
    nothing of a partition is held beyond it.

    Cost, per index of n topic rows: O(n) to group equal topics (an Arrow
    dictionary encoding, in C), one ``put`` per distinct valid topic (O(levels)),
    then for each distinct filter one query costing the part of the index the
    filter's literal words leave open (a literal word is a hash probe, a
    wildcard reads the whole level), plus one output row per pair.  Over the
    job: the topics, plus (number of indexes) x (distinct filters) queries
    that mostly stop at a probe, plus the output; not filters x topics.

    Rules:

    * An **invalid filter** raises ``ValueError`` naming it on the driver, before
      any job runs (as :class:`SparkMatcher` does for patterns); a **null
      filter** is skipped.  Filters are taken as written: in MQTT
      ``$share/g/a/+`` is the literal filter of three words, not a share-group
      subscription on ``a/+`` (strip the prefix to ask about the group's filter).
    * **Null topics and topics invalid in the dialect** pair with nothing and
      never fail the job, as :func:`match` treats message topics; list them
      with their reason by ``rejected(topics, cstrie.Trie(dialect), topic_col)``.
    * The filter and topic columns are string columns (binary columns are read
      as UTF-8; a topic that is not valid UTF-8 is invalid).  The output
      column names must all differ (``ValueError``: rename a column first).

    Output batches hold at most ``chunk_rows`` rows, however many topics one
    filter matches (``#``).  See docs/spark.md, "Which filters match which
    stored topics".
    """
    from cstrie.topics import TopicIndex

    d = resolve_dialect(dialect)
    if not isinstance(topics, DataFrame):
        raise TypeError(f"topics must be a Spark DataFrame, not {type(topics).__name__}")
    filter_cols = [filter_cols] if isinstance(filter_cols, str) else list(filter_cols)
    topic_cols = [topic_cols] if isinstance(topic_cols, str) else list(topic_cols)
    cap = _cap(chunk_rows)
    if index_rows is not None and (not isinstance(index_rows, int) or index_rows < 1):
        raise ValueError(f"index_rows must be a positive int or None, not {index_rows!r}")
    names = [filter_col, *filter_cols, topic_col, *topic_cols]
    dup = next((c for i, c in enumerate(names) if c in names[:i]), None)
    if dup is not None:
        raise ValueError(
            f"the output would have two columns named {dup!r} (filter_col, filter_cols, "
            "topic_col and topic_cols make its columns); rename one of them first "
            "(DataFrame.withColumnRenamed)"
        )
    tfields = {f.name: f for f in topics.schema.fields}
    _has_columns("topics", tfields, topic_col, topic_cols, "topic_col=/topic_cols=")
    if not isinstance(tfields[topic_col].dataType, (T.StringType, T.BinaryType)):
        raise TypeError(
            f"the topic column {topic_col!r} must be a string (or binary UTF-8) column, "
            f"not {tfields[topic_col].dataType.simpleString()}"
        )
    table, ffields = _filter_table(filters, filter_col, filter_cols)
    table = table.filter(pc.is_valid(table.column(0)))  # null filters: skipped
    probe = TopicIndex(d)  # validates each distinct filter (empty: no work)
    for word in pc.unique(table.column(0)).to_pylist():
        try:
            probe.count(word.decode("utf-8") if isinstance(word, bytes) else word)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"invalid filter {word!r} in column {filter_col!r} ({d.name}): {exc}"
            ) from None
    spark = _session(topics)
    fields = [
        T.StructField(filter_col, ffields[0].dataType, False),
        *ffields[1:],
        T.StructField(topic_col, tfields[topic_col].dataType, False),
        *(tfields[c] for c in topic_cols),
    ]
    schema = T.StructType(fields)
    if table.num_rows == 0:  # nothing can pair: no job over the topics
        return spark.createDataFrame([], schema)
    try:
        sc = spark.sparkContext
    except Exception as exc:  # Spark Connect has no SparkContext
        raise TypeError(
            "cstrie.spark needs a classic SparkSession (broadcast variables); "
            "Spark Connect is not supported"
        ) from exc
    raw = _eng.FilterSet.to_bytes(table)
    plan = _eng.JoinPlan(
        key=digest(raw),
        dialect=d,
        schema=pa.schema([pa.field(f.name, _arrow_type(spark, f.dataType)) for f in fields]),
        cap=cap,
        index_rows=index_rows or 0,
    )
    runner = _Runner(sc.broadcast(raw), plan)
    # The worker reads the columns by position; plain names spare mapInArrow
    # (which looks its input columns up by unquoted name) dots and backticks.
    cols = [_column(c).alias(f"_c{i}") for i, c in enumerate((topic_col, *topic_cols))]
    return topics.select(*cols).mapInArrow(runner, schema)


def _column(name: str) -> Any:
    """A column by its exact name (dots and backticks included)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _has_columns(side: str, fields: Mapping[str, Any], col: str, more: list[str], how: str) -> None:
    for name in (col, *more):
        if name not in fields:
            raise ValueError(
                f"the {side} have no column {name!r} (columns: {list(fields)}); pass {how}"
            )


def _filter_table(
    filters: Any, filter_col: str, filter_cols: list[str]
) -> tuple[pa.Table, list[T.StructField]]:
    """The filter side as an Arrow table (the filter column first, then
    ``filter_cols``) and its Spark fields."""
    cols = [filter_col, *filter_cols]
    if isinstance(filters, DataFrame):
        fields = {f.name: f for f in filters.schema.fields}
        _has_columns("filters", fields, filter_col, filter_cols, "filter_col=/filter_cols=")
        table = _collect_arrow(filters.select(*(_column(c) for c in cols)))
        spark_fields = [fields[c] for c in cols]
    elif isinstance(filters, pa.Table):
        fields = {f.name: f for f in filters.schema}
        _has_columns("filters", fields, filter_col, filter_cols, "filter_col=/filter_cols=")
        table = filters.select(cols)
        spark_fields = [
            T.StructField(f.name, from_arrow_type(f.type), f.nullable) for f in table.schema
        ]
    elif isinstance(filters, (str, bytes)):
        raise TypeError(
            "filters must be a DataFrame, an Arrow table or a list of filters: "
            f"pass [{filters!r}] for one filter"
        )
    elif isinstance(filters, Sequence) or hasattr(filters, "__iter__"):
        if filter_cols:
            raise ValueError("filter_cols= needs a filter table (a DataFrame or an Arrow table)")
        texts = list(filters)
        for text in texts:
            if text is not None and not isinstance(text, str):
                raise TypeError(f"a filter must be a str, not {type(text).__name__}")
        table = pa.table({filter_col: pa.array(texts, pa.string())})
        spark_fields = [T.StructField(filter_col, T.StringType(), True)]
    else:
        raise TypeError(
            "filters must be a Spark DataFrame, an Arrow table or a list of filter strings, "
            f"not {type(filters).__name__}"
        )
    if not isinstance(spark_fields[0].dataType, (T.StringType, T.BinaryType)):
        raise TypeError(
            f"the filter column {filter_col!r} must be a string (or binary UTF-8) column, "
            f"not {spark_fields[0].dataType.simpleString()}"
        )
    return table, spark_fields


# ------------------------------------------------------ content subscriptions
#: The Spark types a message field may have (in a map's values or a struct's
#: fields); NullType only in a struct (a field that is always absent).
_FIELD_TYPES = (
    T.StringType,
    T.BinaryType,
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
)


def content_payload(subscriptions: Any) -> ContentPayload:
    """A :class:`~cstrie.spark.payload.ContentPayload` from a
    :class:`~cstrie.content.ContentIndex` or ``ContentSnapshot``, a
    :class:`~cstrie.content.rabbitmq.HeadersExchange`, a path to a content
    subscription file (:mod:`cstrie.content.export`, native subscribers), a
    ContentPayload or its bytes."""
    if isinstance(subscriptions, SparkContentMatcher):
        return subscriptions.payload
    if isinstance(subscriptions, ContentPayload):
        return subscriptions
    if isinstance(subscriptions, (bytes, bytearray, memoryview)):
        return ContentPayload.from_bytes(subscriptions)
    if isinstance(subscriptions, (str, os.PathLike)):
        from cstrie.content import ContentIndex

        return ContentPayload.from_index(ContentIndex.load(os.fspath(subscriptions)))
    return ContentPayload.from_index(subscriptions)


def _check_fields(fields: Mapping[str, T.StructField], fields_col: str) -> None:
    """``TypeError``/``ValueError`` unless ``fields_col`` is a map of string
    keys or a struct, with values of :data:`_FIELD_TYPES`."""
    if fields_col not in fields:
        raise ValueError(
            f"the messages have no column {fields_col!r} (columns: {list(fields)}); "
            "pass fields_col="
        )
    t = fields[fields_col].dataType
    allowed = ", ".join(k.typeName() for k in _FIELD_TYPES)
    if isinstance(t, T.MapType):
        if not isinstance(t.keyType, T.StringType):
            raise TypeError(
                f"the fields column {fields_col!r} is a map with {t.keyType.simpleString()} "
                "keys; field names are strings"
            )
        if not isinstance(t.valueType, _FIELD_TYPES):
            raise TypeError(
                f"the fields column {fields_col!r} is a map of "
                f"{t.valueType.simpleString()} values; values may be {allowed}"
            )
        return
    if not isinstance(t, T.StructType):
        raise TypeError(
            f"the fields column {fields_col!r} must be a map (string keys) or a struct, "
            f"not {t.simpleString()}"
        )
    seen: set[str] = set()
    for f in t.fields:
        if f.name in seen:
            raise ValueError(f"the fields column {fields_col!r} has two fields named {f.name!r}")
        seen.add(f.name)
        if not isinstance(f.dataType, (*_FIELD_TYPES, T.NullType)):
            raise TypeError(
                f"field {f.name!r} of the fields column {fields_col!r} is "
                f"{f.dataType.simpleString()}; fields may be {allowed}"
            )


class SparkContentMatcher(_Broadcast):
    """Content subscriptions compiled for Spark: a
    :class:`~cstrie.content.ContentIndex`'s bindings (or a RabbitMQ
    :class:`~cstrie.content.rabbitmq.HeadersExchange`'s) serialised once
    (:class:`~cstrie.spark.payload.ContentPayload`: the index's export file
    plus the subscribers), broadcast once.

    Each Python worker loads the index once per payload (cached by SHA-256,
    as the topic matchers are) and matches every row of a batch as
    ``ContentIndex.match_every(fields, topic)`` matches the dict of the
    row's non-null fields and its topic; for a headers exchange the fields
    go through ``headers_fields`` first (RabbitMQ's rules) and the
    subscriber is the queue.  Per row: O(fields + the index's match), not
    O(bindings).

    Every method returns a lazy DataFrame (except :meth:`summary`).  Messages
    are a DataFrame with a fields column, a map (string keys) or a struct,
    whose values are strings, binary, booleans, integers or floats (a null
    value is an absent field), and optionally a topic column (string or
    binary UTF-8; null: the message has no topic, so only bindings without
    a topic filter can match).  Bad rows never fail the job: a null fields
    value ("null fields") and a topic the dialect rejects are counted by
    :meth:`summary` (``null``, ``invalid``) and listed with their reason by
    :meth:`rejected`.  A column of another type raises ``TypeError`` on
    the driver, before any job runs.
    """

    def __init__(self, subscriptions: Any, spark: SparkSession | None = None) -> None:
        spark = _active(spark, subscriptions)
        self.payload = content_payload(subscriptions)
        self._start(spark, self.payload.to_bytes(), "content")
        self.subscriber_type = from_arrow_type(self.payload.subscribers.type)

    @property
    def dialect(self) -> Dialect:
        return self.payload.dialect

    @property
    def nbindings(self) -> int:
        return self.payload.nbindings

    def __repr__(self) -> str:
        kind = " headers" if self.payload.headers else ""
        return (
            f"<cstrie.spark.SparkContentMatcher{kind} dialect={self.dialect.name} "
            f"bindings={self.nbindings} payload={len(self.raw):,} bytes "
            f"sha256={self.key[:12]}>"
        )

    def _plan(
        self,
        messages: DataFrame,
        mode: str,
        fields_col: str,
        topic_col: str | None,
        new: list[str],
        **kw: Any,
    ) -> _eng.Plan:
        fields = _check_messages(messages, topic_col, new)
        _check_fields(fields, fields_col)
        return _eng.Plan(key="", mode=mode, topic_col=topic_col, fields_col=fields_col, **kw)

    def match(
        self,
        messages: DataFrame,
        fields_col: str = "headers",
        topic_col: str | None = None,
        *,
        bindings: bool = True,
        keep_unmatched: bool = False,
        criteria_col: str = "criteria",
        pattern_col: str = "pattern",
        subscriber_col: str = "subscriber",
        chunk_rows: int = _eng.DEFAULT_CAP,
        stats: Any = None,
    ) -> DataFrame:
        """The messages' columns plus ``criteria`` (the binding's criteria
        as JSON text, :meth:`Criterion.to_json
        <cstrie.content.criteria.Criterion.to_json>`), ``pattern`` (its
        topic filter, null when it has none) and ``subscriber``: one row per
        (message, matching binding), as ``ContentIndex.match_bindings``.
        With ``bindings=False``: the messages' columns plus ``subscriber``
        only, one row per (message, matching subscriber), each subscriber
        once per message, as ``ContentIndex.match`` (a headers exchange:
        each queue once, as ``HeadersExchange.route``).  With
        ``keep_unmatched`` every message without a match (rejected ones
        included) is kept once, with nulls.  Output batches hold at most
        ``chunk_rows`` rows.  ``stats``: an accumulator made with
        :meth:`stats_accumulator`, filled as the job runs (read it with
        :meth:`read_stats`)."""
        new = [criteria_col, pattern_col, subscriber_col] if bindings else [subscriber_col]
        plan = self._plan(
            messages,
            "match",
            fields_col,
            topic_col,
            new,
            keep_unmatched=keep_unmatched,
            cap=_cap(chunk_rows),
            bindings=bool(bindings),
            stats=stats,
        )
        out = [T.StructField(subscriber_col, self.subscriber_type, keep_unmatched)]
        if bindings:
            out = [
                T.StructField(criteria_col, T.StringType(), keep_unmatched),
                T.StructField(pattern_col, T.StringType(), True),
                *out,
            ]
        return self._map(messages, plan, out)

    def rejected(
        self,
        messages: DataFrame,
        fields_col: str = "headers",
        topic_col: str | None = None,
        *,
        reason_col: str = "reason",
    ) -> DataFrame:
        """The messages with a null fields value (reason "null fields") or
        a topic the dialect rejects (its own error message), with ``reason``."""
        plan = self._plan(messages, "rejected", fields_col, topic_col, [reason_col])
        return self._rejected(messages, plan, reason_col)

    def unmatched(
        self, messages: DataFrame, fields_col: str = "headers", topic_col: str | None = None
    ) -> DataFrame:
        """The valid messages that no binding matches."""
        return self._map(messages, self._plan(messages, "unmatched", fields_col, topic_col, []), [])

    def summary(
        self, messages: DataFrame, fields_col: str = "headers", topic_col: str | None = None
    ) -> dict[str, int]:
        """Counts (runs a job): ``messages``, ``matched``, ``unmatched``,
        ``null`` (null fields), ``invalid`` (topics) and ``matches``
        ((message, binding) rows)."""
        return self._counters(messages, self._plan(messages, "counts", fields_col, topic_col, []))

    def read_stats(self, acc: Any, top: int = 10) -> dict[str, Any]:
        """The counters of :meth:`summary` from an accumulator filled by
        :meth:`match` (``matches``: the rows it wrote, so (message,
        subscriber) rows with ``bindings=False``), plus the ``top``
        subscribers by rows written.  O(bindings that matched)."""
        p = self.payload
        col = p.bindings.column("subscriber").combine_chunks()
        return self._read_stats(acc, col, p.subscribers, top)[0]


def _content(messages: DataFrame, subscriptions: Any) -> SparkContentMatcher:
    if isinstance(subscriptions, SparkContentMatcher):
        return subscriptions
    if not isinstance(messages, DataFrame):
        raise TypeError(f"messages must be a Spark DataFrame, not {type(messages).__name__}")
    return SparkContentMatcher(subscriptions, _session(messages))


def content_match(
    messages: DataFrame,
    subscriptions: Any,
    fields_col: str = "headers",
    topic_col: str | None = None,
    **kw: Any,
) -> DataFrame:
    """Match a DataFrame of messages against content subscriptions (see
    :meth:`SparkContentMatcher.match`).  ``subscriptions``: a
    :class:`~cstrie.content.ContentIndex` or ``ContentSnapshot``, a
    :class:`~cstrie.content.rabbitmq.HeadersExchange`, a content
    subscription file path, or a :class:`SparkContentMatcher` (reuse one
    to broadcast once for several jobs).

    >>> out = content_match(log, index, "headers", "topic")     # doctest: +SKIP
    >>> out.columns                                             # doctest: +SKIP
    ['topic', 'headers', 'criteria', 'pattern', 'subscriber']
    """
    return _content(messages, subscriptions).match(messages, fields_col, topic_col, **kw)


def content_rejected(
    messages: DataFrame,
    subscriptions: Any,
    fields_col: str = "headers",
    topic_col: str | None = None,
    **kw: Any,
) -> DataFrame:
    """See :meth:`SparkContentMatcher.rejected`."""
    return _content(messages, subscriptions).rejected(messages, fields_col, topic_col, **kw)


def content_unmatched(
    messages: DataFrame,
    subscriptions: Any,
    fields_col: str = "headers",
    topic_col: str | None = None,
) -> DataFrame:
    """See :meth:`SparkContentMatcher.unmatched`."""
    return _content(messages, subscriptions).unmatched(messages, fields_col, topic_col)


def content_summary(
    messages: DataFrame,
    subscriptions: Any,
    fields_col: str = "headers",
    topic_col: str | None = None,
) -> dict[str, int]:
    """See :meth:`SparkContentMatcher.summary`."""
    return _content(messages, subscriptions).summary(messages, fields_col, topic_col)
