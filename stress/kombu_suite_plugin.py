"""pytest plugin: run kombu's own unit tests with cstrie's topic exchange swapped in.

Loaded by ``stress/kombu_suite.py`` (``-p kombu_suite_plugin``) before kombu's test
modules are imported, so their ``exchange.TopicExchange`` is the integration's:

* ``kombu.transport.virtual.exchange.TopicExchange`` and the ``"topic"`` entry of
  ``STANDARD_EXCHANGE_TYPES`` and of the virtual ``Channel.exchange_types`` (which
  the memory and Redis channels inherit) are ``CstrieTopicExchange``;
* the ``"headers"`` entry of the virtual ``Channel.exchange_types`` is
  ``CstrieHeadersExchange`` (kombu has none: every kombu test runs with it
  installed, and the one generated test class that publishes to a headers
  exchange routes through it);
* the ``memory`` transport alias and ``kombu.transport.virtual.Transport`` are the
  integration's transports (their channels create ``TrieTable`` tables).

kombu's exchange tests also assert that ``TopicExchange._compiled``, its regex
cache, is non-empty; the integration compiles no regexes, so its class gets a
one-entry ``_compiled`` here (and only here) so that those tests go on to check the
routing answers.  The plugin counts the integration's lookups, per kind of table
(``headers`` for the headers exchange), and writes them as JSON to
``$CSTRIE_KOMBU_SUITE_REPORT``: proof that the swap was in effect.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, _transport_cache, virtual
from kombu.transport.virtual import base, exchange

from cstrie.integrations import kombu as ck

CALLS: Counter[str] = Counter()
_lookup = ck.CstrieTopicExchange.lookup


def _counted_lookup(self: Any, table: Any, *args: Any) -> Any:
    CALLS["TrieTable" if isinstance(table, ck.TrieTable) else "mirror"] += 1
    return _lookup(self, table, *args)


ck.CstrieTopicExchange.lookup = _counted_lookup  # type: ignore[method-assign]
_route = ck.CstrieHeadersExchange.route


def _counted_route(self: Any, table: Any, *args: Any) -> Any:
    CALLS["headers"] += 1
    return _route(self, table, *args)


ck.CstrieHeadersExchange.route = _counted_route  # type: ignore[method-assign]
ck.CstrieTopicExchange._compiled = {"(cstrie compiles no regexes)": None}

exchange.TopicExchange = ck.CstrieTopicExchange
exchange.STANDARD_EXCHANGE_TYPES["topic"] = ck.CstrieTopicExchange
base.Channel.exchange_types["topic"] = ck.CstrieTopicExchange
base.Channel.exchange_types["headers"] = ck.CstrieHeadersExchange
TRANSPORT_ALIASES["memory"] = "cstrie.integrations.kombu:MemoryTransport"
_transport_cache.clear()
virtual.Transport = ck.make_transport(base.Transport, "VirtualTransport")


def pytest_report_header() -> str:
    return "cstrie: kombu's topic exchange is cstrie.integrations.kombu.CstrieTopicExchange"


def pytest_sessionfinish() -> None:
    path = os.environ.get("CSTRIE_KOMBU_SUITE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(dict(CALLS), f)
