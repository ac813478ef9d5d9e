"""The real ``redis-server`` the kombu Redis tests share (one per test process).

It starts on 127.0.0.1 at a free port, with persistence off; ``redis_url`` empties
database 0 before each test.  ``make test`` installs Debian's ``redis-server``
when it is missing (``.ci/redis-server``); where it could not, the tests skip,
saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

try:  # kombu_helpers needs kombu; without it the kombu tests skip themselves
    import kombu_helpers as kh
except ImportError:  # pragma: no cover - only without kombu
    kh = None

NO_SERVER = (
    "redis-server is not on PATH; `make test` installs Debian's redis-server when it "
    "is missing (.ci/redis-server: `apt-get install -y redis-server`, as root or with "
    "password-less sudo), and could not here, or was not run"
)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if kh is None or kh.REDIS_SERVER is None:
        pytest.skip(NO_SERVER)
    server = kh.RedisServer(kh.REDIS_SERVER, tmp_path_factory.mktemp("redis-server"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: Any) -> str:
    """The URL of database 0 of the test server, emptied for this test."""
    redis_server.flush()
    return f"{redis_server.url}/0"
