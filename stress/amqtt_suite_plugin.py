"""pytest plugin: run amqtt's own tests with cstrie's ``CstrieBroker`` as their broker.

Loaded by ``stress/amqtt_suite.py`` (``-p amqtt_suite_plugin``) before the
vendored test modules (``stress/amqtt_suite/tests``) and their ``conftest.py``
are imported.  ``$CSTRIE_AMQTT_SUITE_BROKER`` says which broker they get:

* ``cstrie`` (the default): ``amqtt.broker.Broker`` and every already imported
  module's ``Broker`` name that is stock's class (``amqtt.scripts.broker_script``
  among them) become :class:`cstrie.integrations.amqtt.CstrieBroker`, so the
  tests' own ``from amqtt.broker import Broker`` imports the integration;
* ``stock``: nothing is swapped (the same tests on stock amqtt, for the
  comparison).

The plugin counts what the brokers did: brokers created per class, messages
routed and retained-message lookups served by the integration (proof that the
swap was in effect), and after every test it runs ``check_routes()`` (trie ==
subscription dict == per-client index) on every ``CstrieBroker`` the test
created.  The counts and the failed checks are written as JSON to
``$CSTRIE_AMQTT_SUITE_REPORT``.

**Ports.**  amqtt's tests listen on and connect to fixed ports (1883, 1884,
8080, 8081; 8888 must be closed), some on every interface.  On a shared machine
another process may hold them, so the plugin maps each of them to a free port
chosen at start-up, below the kernel's ephemeral range, and every bind to a
wildcard address (``0.0.0.0``, ``::``, ``""``) to the loopback address: it
wraps ``socket.socket.bind``, ``connect`` and ``connect_ex``, which asyncio,
websockets and paho all go through.  The tests see their usual port numbers in
URIs and configurations; nothing leaves 127.0.0.1 / ::1.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import socket
import subprocess
import sys
import weakref
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

MODE = os.environ.get("CSTRIE_AMQTT_SUITE_BROKER", "cstrie")
if MODE not in ("cstrie", "stock"):
    raise ValueError(f"CSTRIE_AMQTT_SUITE_BROKER must be 'cstrie' or 'stock', not {MODE!r}")

COUNTS: Counter[str] = Counter()

# ------------------------------------------------------------------ ports
#: the fixed ports amqtt's tests use
FIXED_PORTS = (1883, 1884, 8080, 8081, 8888)
_WILDCARD = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1", *_WILDCARD}


def _free_port(taken: set[int]) -> int:
    """A port nothing listens on, on 127.0.0.1 and ::1, below the ephemeral range
    (so that no outgoing connection of another process is given it meanwhile)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(20000, max(20001, low - 1))
        if port in taken:
            continue
        try:
            for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
                try:
                    s = socket.socket(family, socket.SOCK_STREAM)
                except OSError:
                    continue  # no IPv6 here
                with s:
                    s.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port found for amqtt's tests")


PORT_MAP: dict[int, int] = {}
for _p in FIXED_PORTS:
    PORT_MAP[_p] = _free_port(set(PORT_MAP.values()))

_bind = socket.socket.bind
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _mapped(address: Any, binding: bool) -> Any:
    if not isinstance(address, tuple) or len(address) < 2 or not isinstance(address[1], int):
        return address  # AF_UNIX paths and the like
    host, port = address[0], address[1]
    if binding and host in _WILDCARD:
        host = _WILDCARD[host]
    if host in _LOOPBACK:
        port = PORT_MAP.get(port, port)
    return (host, port, *address[2:])


def _patched_bind(self: socket.socket, address: Any) -> None:
    _bind(self, _mapped(address, True))


def _patched_connect(self: socket.socket, address: Any) -> None:
    _connect(self, _mapped(address, False))


def _patched_connect_ex(self: socket.socket, address: Any) -> int:
    return _connect_ex(self, _mapped(address, False))


socket.socket.bind = _patched_bind  # type: ignore[method-assign]
socket.socket.connect = _patched_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _patched_connect_ex  # type: ignore[method-assign]

# ------------------------------------------------------------------ TLS keys
# amqtt's conftest makes a fresh self-signed certificate for every test that uses
# its broker configuration (`openssl req -x509 ... -keyout K -out C`, 0.5 s of CPU
# each, 50 tests); the plugin makes one per run and copies it to the paths asked.
_run = subprocess.run
_KEYS: dict[str, bytes] = {}


def _cached_openssl(cmd: Any, *args: Any, **kwargs: Any) -> Any:
    if not (isinstance(cmd, str) and cmd.startswith("openssl req -x509 ") and "-keyout" in cmd):
        return _run(cmd, *args, **kwargs)
    words = shlex.split(cmd)
    key, cert = words[words.index("-keyout") + 1], words[words.index("-out") + 1]
    if not _KEYS:
        done = _run(cmd, *args, **kwargs)
        if done.returncode != 0:
            return done
        _KEYS.update(key=Path(key).read_bytes(), cert=Path(cert).read_bytes())
    Path(key).write_bytes(_KEYS["key"])
    Path(cert).write_bytes(_KEYS["cert"])
    COUNTS["certificates reused"] += 1
    return subprocess.CompletedProcess(cmd, 0, "", "")


subprocess.run = _cached_openssl  # type: ignore[assignment]

# ------------------------------------------------------------------ the swap
import amqtt.broker  # noqa: E402 - after the port mapping, before the tests
import amqtt.scripts.broker_script  # noqa: E402 - so that its Broker name is swapped too

StockBroker = amqtt.broker.Broker
CHECK_FAILURES: list[str] = []
SWAPPED: list[str] = []
_created: weakref.WeakSet[Any] = weakref.WeakSet()

_stock_init = StockBroker.__init__


def _counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
    COUNTS[f"brokers:{type(self).__name__}"] += 1
    _created.add(self)
    _stock_init(self, *args, **kwargs)


StockBroker.__init__ = _counting_init  # type: ignore[method-assign]

if MODE == "cstrie":
    from cstrie.integrations.amqtt import CstrieBroker

    for _name, _module in list(sys.modules.items()):
        if _name.startswith("cstrie"):
            continue  # the integration subclasses stock's Broker by that name
        if _module is not None and getattr(_module, "Broker", None) is StockBroker:
            _module.Broker = CstrieBroker  # type: ignore[attr-defined]
            SWAPPED.append(_name)

    _run_broadcast = CstrieBroker._run_broadcast
    _publish_retained = CstrieBroker._publish_retained_messages_for_subscription
    _add_subscription = CstrieBroker.add_subscription

    async def _counted_run_broadcast(self: Any, running_tasks: Any) -> None:
        await _run_broadcast(self, running_tasks)
        COUNTS["routed messages"] += 1

    async def _counted_publish_retained(self: Any, subscription: Any, session: Any) -> None:
        COUNTS["retained lookups"] += 1
        await _publish_retained(self, subscription, session)

    async def _counted_add_subscription(self: Any, subscription: Any, session: Any) -> int:
        code: int = await _add_subscription(self, subscription, session)
        COUNTS["subscriptions"] += 1
        return code

    CstrieBroker._run_broadcast = _counted_run_broadcast  # type: ignore[method-assign]
    CstrieBroker._publish_retained_messages_for_subscription = _counted_publish_retained  # type: ignore[method-assign]
    CstrieBroker.add_subscription = _counted_add_subscription  # type: ignore[method-assign]


_before_test: set[int] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _before_test.clear()
    _before_test.update(map(id, _created))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """After the test body (its event loop idle, its fixtures' brokers not yet
    shut down): the routes of every CstrieBroker the test created equal the
    subscriptions."""
    yield
    if MODE != "cstrie":
        return
    for broker in list(_created):
        if id(broker) in _before_test or not hasattr(broker, "check_routes"):
            continue
        if "_routes" not in vars(broker):
            COUNTS["brokers whose construction raised"] += 1
            continue
        try:
            broker.check_routes()
            COUNTS["route checks"] += 1
        except Exception as exc:  # recorded, then held against the integration
            CHECK_FAILURES.append(f"{item.nodeid}: {type(exc).__name__}: {exc}")


def pytest_report_header() -> str:
    where = ", ".join(f"{k}->{v}" for k, v in PORT_MAP.items())
    if MODE == "cstrie":
        return f"cstrie: amqtt's Broker is CstrieBroker (swapped in {SWAPPED}); ports {where}"
    return f"cstrie: stock amqtt Broker; ports {where}"


def pytest_sessionfinish() -> None:
    path = os.environ.get("CSTRIE_AMQTT_SUITE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(
                {
                    "mode": MODE,
                    "counts": dict(COUNTS),
                    "check_routes_failures": CHECK_FAILURES,
                    "swapped_in": SWAPPED,
                    "ports": PORT_MAP,
                },
                f,
            )
