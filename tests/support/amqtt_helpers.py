"""Shared by the amqtt integration tests: a broker (stock amqtt or CstrieBroker)
on its own event loop in a background thread, listening on a free port of
127.0.0.1, and real MQTT 3.1.1 clients (paho-mqtt, each with its network thread)
whose every wait is bounded.

Only imported by modules that ran ``pytest.importorskip("amqtt")`` first.

Quiescence without sleeping: a client is subscribed to ``sync/<its id>``;
:meth:`Client.sync` has another client publish a marker there and waits for
it.  amqtt broadcasts every message through one queue, in the order it read
them, and writes to each client in order, so when the marker arrives, every
message that client had published before the marker has been delivered (or
not) to it.  Markers are not recorded as deliveries.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from amqtt.broker import Broker
from paho.mqtt import client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from cstrie.integrations.amqtt import CstrieBroker

#: every wait of these helpers gives up (and fails the test) after this many seconds
TIMEOUT = 10.0
SYNC = "sync/"
BROKERS: dict[str, type[Broker]] = {"stock": Broker, "cstrie": CstrieBroker}
T = TypeVar("T")
_ids = itertools.count()


#: the listener every test broker has: a free port of 127.0.0.1
LISTENERS = {"default": {"type": "tcp", "bind": "127.0.0.1:0", "max_connections": 200}}
#: amqtt's ACL plugin, as its documentation names it in a ``plugins`` section
ACL_PLUGIN = "amqtt.plugins.topic_checking.TopicAccessControlListPlugin"


def broker_config(plugins: dict[str, Any] | None = None) -> dict[str, Any]:
    """One TCP listener on a free port of 127.0.0.1, and authentication that
    needs a user name: amqtt queues messages only for sessions that are not
    anonymous (and its anonymous plugin marks every session anonymous when it
    allows anonymous clients).  ``plugins``: more of amqtt's ``plugins``
    section (plugin path -> its configuration)."""
    return {
        "listeners": LISTENERS,
        "plugins": {
            "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": False},
            **(plugins or {}),
        },
    }


class BrokerThread:
    """``BROKERS[kind]`` started on an event loop run by a daemon thread.

    ``config``: the broker's configuration (default :func:`broker_config`);
    ``bounds``: CstrieBroker's ``cstrie`` section (its per-client bounds),
    left out for stock, whose configuration has no such section.

    ``session_monitor=False`` stops amqtt's session monitor (a task that,
    once a second, removes every disconnected clean or anonymous session):
    for a test that removes them itself, at a point it chooses, not at a
    moment timing decides.

    ``call(fn)`` runs ``fn(broker)`` on the loop (so it sees no half-done
    change), ``run(coro)`` awaits a coroutine there; both bounded.
    """

    def __init__(
        self,
        kind: str = "cstrie",
        *,
        max_qos: int | None = None,
        config: dict[str, Any] | None = None,
        bounds: dict[str, Any] | None = None,
        session_monitor: bool = True,
    ) -> None:
        self.kind = kind
        config = dict(config or broker_config())
        if bounds is not None and kind == "cstrie":
            config["cstrie"] = bounds
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name=kind)
        self._thread.start()
        self.broker: Broker = self.run(self._start(BROKERS[kind], config, max_qos))
        if not session_monitor:
            self.run(self._stop_session_monitor(self.broker))
        server = self.broker._servers["default"].instance
        self.port: int = server.sockets[0].getsockname()[1]

    @staticmethod
    async def _start(cls: type[Broker], config: dict[str, Any], max_qos: int | None) -> Broker:
        broker = cls(config)
        if max_qos is not None:
            # amqtt 0.12's configuration refuses a "max-qos" key (its dataclass has
            # no such field), but Broker.add_subscription reads config.get("max-qos")
            broker.config.max_qos = max_qos
        await broker.start()
        return broker

    @staticmethod
    async def _stop_session_monitor(broker: Broker) -> None:
        task = broker._session_monitor_task
        assert task is not None, "amqtt's session monitor is not running: a new amqtt?"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[Broker], T], timeout: float = TIMEOUT) -> T:
        async def on_loop() -> T:
            return fn(self.broker)

        return self.run(on_loop(), timeout)

    def check_routes(self) -> None:
        """CstrieBroker's routes equal its subscriptions (nothing for stock)."""
        if isinstance(self.broker, CstrieBroker):
            self.call(lambda b: b.check_routes())  # type: ignore[attr-defined]

    def filters_of(self, client_id: str) -> set[str]:
        """The filters ``broker.subscriptions`` holds for ``client_id``."""
        return self.call(
            lambda b: {
                f
                for f, subs in b._subscriptions.items()
                for s, _ in subs
                if s.client_id == client_id
            }
        )

    def session_state(self, client_id: str) -> str | None:
        """The broker's state of ``client_id``'s session, None when it has none."""

        def state(b: Broker) -> str | None:
            entry = b._sessions.get(client_id)
            return None if entry is None else str(entry[0].transitions.state)

        return self.call(state)

    def stop(self) -> None:
        try:
            if self.broker.transitions.is_started():
                self.run(self.broker.shutdown(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(TIMEOUT)
            if not self._thread.is_alive():
                self.loop.close()


def wait_until(what: str, predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll ``predicate`` (every 5 ms) until it holds; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(0.005)


@contextmanager
def running_broker(kind: str = "cstrie", **kwargs: Any) -> Iterator[BrokerThread]:
    b = BrokerThread(kind, **kwargs)
    try:
        yield b
    finally:
        b.stop()


@dataclass(frozen=True)
class Delivery:
    topic: str
    payload: bytes
    qos: int
    retain: bool


class Client:
    """A paho-mqtt client (MQTT 3.1.1) with the user name ``username``
    (default ``user``), recording every message it receives, except markers,
    as a :class:`Delivery`.

    ``connect``, ``subscribe``, ``unsubscribe``, ``publish`` (QoS 1: until the
    PUBACK) and ``disconnect`` return once the broker has answered.
    ``connect`` also subscribes to the client's marker topic ``sync/<id>``.
    """

    def __init__(
        self,
        port: int,
        client_id: str | None = None,
        *,
        clean_session: bool = True,
        username: str = "user",
    ):
        self.port = port
        self.client_id = client_id or f"c{next(_ids)}"
        self.clean_session = clean_session
        self.username = username
        self._cond = threading.Condition()
        self.deliveries: list[Delivery] = []
        self.markers: list[bytes] = []
        self._acks: dict[int, list[int]] = {}
        self._connack: tuple[int, bool] | None = None
        self._disconnected = threading.Event()
        self._will: tuple[str, bytes, int, bool] | None = None
        self._new_paho()

    def _new_paho(self) -> None:
        c = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            clean_session=self.clean_session,
            protocol=paho.MQTTv311,
        )
        c.username_pw_set(self.username)
        c.on_connect = self._on_connect
        c.on_message = self._on_message
        c.on_subscribe = self._on_ack
        c.on_unsubscribe = self._on_ack
        c.on_disconnect = self._on_disconnect
        if self._will is not None:
            c.will_set(*self._will)
        self._c = c

    def set_will(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False) -> None:
        """The will message of the next connections."""
        self._will = (topic, payload, qos, retain)
        self._c.will_set(topic, payload, qos, retain)

    def clear_will(self) -> None:
        """No will message on the next connections."""
        self._will = None
        self._c.will_clear()

    # ------------------------------------------------------------ callbacks
    def _on_connect(self, _c: Any, _u: Any, flags: Any, rc: Any, _p: Any = None) -> None:
        with self._cond:
            self._connack = (int(rc.value), bool(flags.session_present))
            self._cond.notify_all()

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        with self._cond:
            if msg.topic.startswith(SYNC):
                self.markers.append(msg.payload)
            else:
                self.deliveries.append(
                    Delivery(msg.topic, bytes(msg.payload), int(msg.qos), bool(msg.retain))
                )
            self._cond.notify_all()

    def _on_ack(self, _c: Any, _u: Any, mid: int, codes: Any, _p: Any = None) -> None:
        with self._cond:
            self._acks[mid] = [int(getattr(rc, "value", rc)) for rc in codes]
            self._cond.notify_all()

    def _on_disconnect(self, _c: Any, _u: Any, _f: Any, _rc: Any, _p: Any = None) -> None:
        self._disconnected.set()

    # --------------------------------------------------------------- waits
    def _wait(self, what: str, predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise AssertionError(f"{self.client_id}: timed out after {timeout:.0f} s: {what}")

    def _ack(self, result: tuple[MQTTErrorCode, int | None], what: str) -> list[int]:
        rc, mid = result
        assert rc == MQTTErrorCode.MQTT_ERR_SUCCESS and mid is not None, f"{what}: {rc}"
        self._wait(what, lambda: mid in self._acks)
        with self._cond:
            return self._acks.pop(mid)

    # ------------------------------------------------------------- actions
    def connect(self, clean_session: bool | None = None, username: str | None = None) -> bool:
        """Connect (a new network connection; ``clean_session`` and
        ``username`` may change); returns CONNACK's session-present flag."""
        changed = False
        if clean_session is not None and clean_session != self.clean_session:
            self.clean_session, changed = clean_session, True
        if username is not None and username != self.username:
            self.username, changed = username, True
        if changed:
            self._new_paho()
        self._connack = None
        self._disconnected.clear()
        self._c.connect("127.0.0.1", self.port, keepalive=60)
        sock = self._c.socket()
        if isinstance(sock, socket.socket):
            # paho leaves Nagle's algorithm on: a marker right after a message
            # would wait for the broker's delayed ACK (40 ms)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._c.loop_start()
        self._wait("CONNACK", lambda: self._connack is not None)
        assert self._connack is not None
        rc, present = self._connack
        assert rc == 0, f"{self.client_id}: CONNACK return code {rc}"
        assert self.subscribe((SYNC + self.client_id, 0)) == [0]
        return present

    def subscribe(self, *filters: tuple[str, int]) -> list[int]:
        """SUBSCRIBE in one packet; the SUBACK's return codes."""
        return self._ack(self._c.subscribe(list(filters)), f"SUBACK for {filters}")

    def unsubscribe(self, *filters: str) -> None:
        self._ack(self._c.unsubscribe(list(filters)), f"UNSUBACK for {filters}")

    def publish(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False) -> None:
        info = self._c.publish(topic, payload, qos, retain)
        info.wait_for_publish(TIMEOUT)
        assert info.is_published(), f"{self.client_id}: publish to {topic!r} not done"

    def disconnect(self) -> None:
        """DISCONNECT, then wait until the connection is closed."""
        self._c.disconnect()
        if not self._disconnected.wait(TIMEOUT):
            raise AssertionError(f"{self.client_id}: no disconnect after {TIMEOUT:.0f} s")
        self._c.loop_stop()

    def drop(self) -> None:
        """End the connection without DISCONNECT (the broker then sends the will)."""
        # paho's loop thread would wait a second to reconnect: tell it to end
        # (loop_stop's own flag, set first: the loss wakes the thread, which
        # then ends, maybe before it reports the loss)
        self._c._thread_terminate = True
        sock = self._c.socket()
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)
        self._c.loop_stop()
        self._disconnected.set()

    def sync(self, via: Client, marker: bytes | None = None) -> None:
        """``via`` publishes a marker to this client's marker topic; wait for it.
        Every message ``via`` published before has then reached this client."""
        marker = marker or f"m{next(_ids)}".encode()
        via.send_marker(self.client_id, marker)
        self.wait_marker(marker)

    def send_marker(self, to: str, marker: bytes) -> None:
        """Publish ``marker`` (QoS 0) to client ``to``'s marker topic."""
        self.publish(SYNC + to, marker)

    def wait_marker(self, marker: bytes) -> None:
        """Wait until a marker with this payload arrived (any marker topic: a
        copy of another client's marker, through a filter like "#", was sent
        after the same messages)."""
        self._wait(f"marker {marker!r}", lambda: marker in self.markers)
        try:
            wait_until(f"{self.client_id}'s QoS 2 messages are released", self._no_qos2_pending)
        except AssertionError as exc:
            c: Any = self._c
            pending = [(m.mid, m.topic, m.payload, m.state) for m in c._in_messages.values()]
            raise AssertionError(f"{exc}; pending {pending}") from None

    def _no_qos2_pending(self) -> bool:
        """paho hands a QoS 2 message to on_message at its PUBREL, a round trip
        after the PUBLISH, so a QoS 0 marker sent after it can overtake it:
        a marker counts once no received QoS 2 message awaits its PUBREL.
        Copies of markers (through a filter like "#" at QoS 2) are left out:
        one still in flight when the client disconnects is never released
        (amqtt does not resume a QoS 2 exchange on reconnect) and carries no
        delivery."""
        c: Any = self._c
        with c._in_message_mutex:
            return not any(not m.topic.startswith(SYNC) for m in c._in_messages.values())

    def take(self) -> list[Delivery]:
        """The deliveries recorded so far, removed from the record."""
        with self._cond:
            out, self.deliveries = self.deliveries, []
            return out

    def wait_deliveries(self, n: int, timeout: float = TIMEOUT) -> list[Delivery]:
        """Wait until at least ``n`` deliveries are recorded; take them."""
        self._wait(f"{n} deliveries", lambda: len(self.deliveries) >= n)
        return self.take()

    def is_closed(self) -> bool:
        return self._disconnected.is_set()

    def close(self) -> None:
        """Stop the network thread whatever the state (test clean-up)."""
        try:
            if not self._disconnected.is_set():
                self._c.disconnect()
                self._disconnected.wait(2)
        finally:
            self._c.loop_stop()


# ------------------------------------------------------------------ raw MQTT
#
# paho refuses some packets a broker must handle (an empty filter), so these
# write MQTT 3.1.1 packets by hand (section 2 and 3 of the specification).


def _string(text: str | bytes) -> bytes:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return struct.pack("!H", len(data)) + data


def _packet(kind: int, body: bytes) -> bytes:
    n, length = len(body), b""
    while True:
        n, digit = divmod(n, 128)
        length += bytes([digit | (0x80 if n else 0)])
        if not n:
            return bytes([kind]) + length + body


class RawClient:
    """A socket speaking MQTT 3.1.1 by hand: CONNECT, SUBSCRIBE, PUBLISH (QoS 0)."""

    def __init__(self, port: int, client_id: str = "raw") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        header = _string("MQTT") + bytes([4, 0x82]) + struct.pack("!H", 60)  # clean, user name
        self.sock.sendall(_packet(0x10, header + _string(client_id) + _string("user")))
        kind, body = self.read()
        assert kind == 0x20 and body[1] == 0, f"CONNACK expected, got {kind:#x} {body!r}"

    def read(self) -> tuple[int, bytes]:
        """One packet (type byte, body); (0, b"") when the broker closed the connection."""
        first = self.sock.recv(1)
        if not first:
            return 0, b""
        length, shift = 0, 0
        while True:
            byte = self.sock.recv(1)[0]
            length += (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        body = b""
        while len(body) < length:
            chunk = self.sock.recv(length - len(body))
            assert chunk, "connection closed inside a packet"
            body += chunk
        return first[0], body

    def subscribe(self, *filters: tuple[str, int], packet_id: int = 1) -> list[int]:
        payload = b"".join(_string(f) + bytes([q]) for f, q in filters)
        self.sock.sendall(_packet(0x82, struct.pack("!H", packet_id) + payload))
        kind, body = self.read()
        assert kind == 0x90, f"SUBACK expected, got {kind:#x}"
        assert struct.unpack("!H", body[:2])[0] == packet_id
        return list(body[2:])

    def publish(self, topic: str, payload: bytes) -> None:
        self.sock.sendall(_packet(0x30, _string(topic) + payload))

    def closed_by_broker(self) -> bool:
        """Read until the broker closes the connection (True) or ``TIMEOUT`` passes."""
        try:
            while True:
                kind, _ = self.read()
                if kind == 0:
                    return True
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
