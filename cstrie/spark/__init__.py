"""Match message logs with Spark: which subscribers would have received these messages?

Needs the ``spark`` extra (``pip install 'cstrie[spark]'``: pyspark, pyarrow,
pandas for ``mapInArrow``, numpy); the core package never imports this.

>>> from cstrie.spark import match                                # doctest: +SKIP
>>> out = match(messages_df, trie, topic_col="topic")            # doctest: +SKIP
>>> out.columns                                                  # doctest: +SKIP
['topic', 'payload', 'pattern', 'subscriber']

How it works
    The driver serialises the subscriptions into a compact columnar payload
    (:mod:`cstrie.spark.payload`), validates them by building the matcher once,
    and broadcasts the bytes.  ``mapInArrow`` runs :func:`cstrie.spark.engine.run`
    on every partition: each Python worker rebuilds the native matcher once per
    payload (cached by SHA-256, reused across tasks) and matches whole Arrow
    batches in C, reading the topic column's buffers directly.  Output comes in
    batches of at most ``chunk_rows`` rows, so one message that reaches 100,000
    subscribers does not blow up a batch.

Deliveries
    :func:`deliver` routes a message log as ``Trie.route`` does: every ordinary
    subscriber, plus exactly one member of each matching share group (MQTT 5
    shared subscriptions, NATS queue groups) per message.

Filters against stored topics
    :func:`filter_join` answers the other question: which filters of a small
    table match which topics of a large one (retained messages, stored
    subjects), without a cross join: each batch of topics is put into a
    :class:`cstrie.topics.TopicIndex` and queried once per distinct filter.

Content subscriptions
    :func:`content_match` runs a :class:`cstrie.content.ContentIndex` (or a
    RabbitMQ :class:`cstrie.content.rabbitmq.HeadersExchange`) over a log
    whose fields are a map or struct column: one row per (message, matching
    binding), or per (message, subscriber) with ``bindings=False``, each row
    matched as ``ContentIndex.match_bindings`` matches its non-null fields
    and topic (:class:`SparkContentMatcher`).

Bad topics never fail the job
    Null topics and topics invalid in the dialect are counted (:meth:`summary`)
    and can be kept with their reason (:meth:`rejected`, :meth:`route`).

See ``docs/spark.md`` for running on a cluster, memory sizing and throughput.
"""

from cstrie.spark.api import (
    SparkContentMatcher,
    SparkMatcher,
    content_match,
    content_rejected,
    content_summary,
    content_unmatched,
    deliver,
    filter_join,
    match,
    per_pattern,
    per_subscriber,
    rejected,
    route,
    summary,
    to_payload,
    unmatched,
)
from cstrie.spark.payload import ContentPayload, Payload

__all__ = [
    "ContentPayload",
    "Payload",
    "SparkContentMatcher",
    "SparkMatcher",
    "content_match",
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
