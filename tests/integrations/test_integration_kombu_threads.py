"""The kombu integration under threads.

Rule: whatever interleaving of binds, unbinds and publishes threads make, once they
stop the trie of every table routes exactly that table's entries (AMQP), each
(routing_key, queue) pair counted once per entry that holds it and routed as long
as at least one such entry is left; and a lookup running meanwhile only ever
returns queues that some entry names.

The threads switch every microsecond (``sys.setswitchinterval``) so that the GIL
hands over inside the bookkeeping as often as possible.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("kombu")

import kombu_helpers as kh
from helpers import run_threads
from kombu import Connection, Exchange, Queue

from cstrie.integrations import kombu as ck


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


POOL = [(k, "", q) for k in ("a", "a.#", "*.b", "#", "a.b.c") for q in ("q1", "q2", "q3")]
QUEUES = {q for _, _, q in POOL}


def test_table_mutated_by_threads_stays_in_step() -> None:
    """Four writers append, remove, discard and rebuild (kombu's unbind idiom) the same
    entries of one TrieTable, so duplicate entries come and go; a reader routes."""
    table = ck.TrieTable()
    stop = threading.Event()
    seen: set[Any] = set()

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(1500):
            entry = rng.choice(POOL)
            r = rng.random()
            if r < 0.5:
                table.append(entry)
            elif r < 0.7:
                try:
                    table.remove(entry)
                except ValueError:
                    pass  # another thread removed the last copy first
            elif r < 0.85:
                table.discard(entry)
            else:
                table[:] = [m for m in table if m != entry]

    def reader() -> None:
        while not stop.is_set():
            for topic in ("a", "a.b", "x.b", "a.b.c"):
                seen.update(table.route(topic))

    r = threading.Thread(target=reader, daemon=True)
    r.start()
    try:
        run_threads([lambda s=s: writer(s) for s in range(4)])  # type: ignore[misc]
    finally:
        stop.set()
        r.join(30)
    assert seen <= QUEUES
    kh.assert_in_step(table)
    topics = ["a", "a.b", "x.b", "a.b.c", ""]
    kh.assert_routes_as(table, list(table), topics)
    # every duplicate the threads left routes until its last copy is popped
    kh.assert_drains_as_a_list(table, topics)


def test_kombu_channels_in_threads_bind_unbind_publish() -> None:
    """Four threads, each with its own kombu connection to one (isolated) memory broker,
    declare the same topic exchange at once, then bind and unbind their own queues
    with shared binding keys and publish; afterwards the exchange's table is one
    TrieTable in step with its entries, and a publish reaches exactly AMQP's queues."""
    transport = kh.isolated(ck.MemoryTransport)
    keys = ["a", "a.#", "*.b", "#.c", "a.b.c", "b"]
    start = threading.Barrier(4)

    def worker(n: int) -> None:
        rng = random.Random(n)
        with Connection(transport=transport) as conn:
            ch = conn.channel()
            ex = Exchange("threads", type="topic")
            start.wait()
            ex(ch).declare()
            producer = conn.Producer(ch, exchange=ex)
            for i in range(150):
                queue = f"t{n}-{rng.randrange(3)}"
                key = rng.choice(keys)
                if rng.random() < 0.6:
                    Queue(queue, ex, routing_key=key)(ch).declare()
                else:
                    Queue(queue, no_declare=True)(ch).unbind_from(ex, routing_key=key)
                producer.publish({"i": i}, routing_key=rng.choice(["a", "a.b", "x.c", "b"]))

    run_threads([lambda n=n: worker(n) for n in range(4)])  # type: ignore[misc]
    with Connection(transport=transport) as conn:
        ch = conn.channel()
        table = ch.state.exchanges["threads"]["table"]
        assert isinstance(table, ck.TrieTable)
        kh.assert_in_step(table)
        # kombu's own record of the bindings and the table agree
        entries = {(q, k) for k, _, q in table}
        recorded = {(b.queue, b.routing_key) for b in ch.state.bindings if b.exchange == "threads"}
        assert entries == recorded
        for q in transport.Channel.queues.values():
            q.queue.clear()
        producer = conn.Producer(ch, exchange=Exchange("threads", type="topic"))
        for i, topic in enumerate(["a", "a.b", "x.c", "b", "a.b.c"]):
            producer.publish({"i": i}, routing_key=topic)
            want = {q for k, _, q in table if kh.model_match(k, topic, "amqp")}
            got = set()
            for name in {q for _, _, q in table}:
                m = Queue(name, no_declare=True)(ch).get(no_ack=True)
                if m is not None:
                    assert m.payload == {"i": i}
                    got.add(name)
            assert got == want, topic
