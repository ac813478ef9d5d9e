"""Run kombu's own unit tests for topic exchanges and virtual transports against
cstrie's kombu integration.

    python stress/kombu_suite.py [--json PATH]

1. Fetches the source distribution of the *installed* kombu version with pip
   (``pip download kombu==X --no-binary :all: --no-deps``) into a cache under the
   running environment (``<sys.prefix>/kombu-suite/kombu-X/``, i.e. ``.venv``), and
   keeps only its tests (``t/``): the tests then import the installed kombu, the
   one the integration patches, not the sdist's copy.
2. Runs :data:`MODULES` there with pytest and ``-p kombu_suite_plugin`` (see
   ``stress/kombu_suite_plugin.py``), which swaps the integration's exchange type
   and transports in before the test modules load.
3. Prints a JSON summary: kombu version, tests run / passed / failed / skipped,
   failing test ids, and how many lookups the integration served (per kind of
   table).

Exit status: 0 every test passed, or failed without the integration as well, and
the integration served lookups; 1 a test failed because of the integration, none
ran, or the swap was not in effect; 3 the tests could not be obtained
(offline): the caller should skip, not pass.  About 30 s, mostly kombu's tests
sleeping (Redis retries, consume timeouts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path
from typing import Any

#: kombu's test modules about topic exchanges, the virtual channel and transports
#: that route in Python (paths inside the sdist).
MODULES = [
    "t/unit/transport/virtual/test_exchange.py",
    "t/unit/transport/virtual/test_base.py",
    "t/unit/transport/test_memory.py",
    "t/unit/transport/test_redis.py",
    "t/unit/test_entity.py",
    "t/unit/test_messaging.py",
    "t/unit/test_simple.py",
    "t/integration/test_cstrie_memory.py",
]

#: kombu's broker-independent integration test classes (``t/integration/common.py``,
#: written for real brokers) bound to ``memory://``: the one file this script adds
#: to kombu's tests.  A memory transport cannot fail to connect, so the four tests
#: of a failing connection are skipped, with that reason.
GENERATED = {
    "t/integration/test_cstrie_memory.py": '''"""kombu's integration test classes on memory://.

Added to kombu's tests by cstrie's stress/kombu_suite.py.
"""
import kombu
import pytest

from .common import BaseExchangeTypes, BaseMessage, BasicFunctionality

CANNOT_FAIL = pytest.mark.skip(reason="memory:// cannot fail to connect")


@pytest.fixture
def connection():
    return kombu.Connection("memory://")


class test_MemoryBasicFunctionality(BasicFunctionality):
    test_failed_connect = CANNOT_FAIL(BasicFunctionality.test_failed_connect)
    test_failed_connection = CANNOT_FAIL(BasicFunctionality.test_failed_connection)
    test_failed_channel = CANNOT_FAIL(BasicFunctionality.test_failed_channel)
    test_failed_default_channel = CANNOT_FAIL(BasicFunctionality.test_failed_default_channel)


class test_MemoryBaseExchangeTypes(BaseExchangeTypes):
    pass


class test_MemoryMessage(BaseMessage):
    pass


class test_MemoryHeadersExchange:
    """Not kombu's: its integration tests' style (SimpleQueue on memory://) for
    the headers exchange cstrie adds, RabbitMQ's rules."""

    def test_headers(self, connection):
        ex = kombu.Exchange("hx-suite", type="headers")
        q_all = kombu.Queue("h-all", ex, binding_arguments={"x-match": "all", "a": 1, "b": "2"})
        q_any = kombu.Queue("h-any", ex, binding_arguments={"x-match": "any", "a": 1, "b": "2"})
        with connection as conn:
            with conn.SimpleQueue(q_all) as s_all, conn.SimpleQueue(q_any) as s_any:
                producer = conn.Producer(exchange=ex)
                producer.publish({"i": 1}, headers={"a": 1, "b": "2"})
                producer.publish({"i": 2}, headers={"a": 1})
                producer.publish({"i": 3}, headers={"a": 1.0, "b": 2})
                assert s_all.get(timeout=1).payload == {"i": 1}
                assert [s_any.get(timeout=1).payload["i"] for _ in range(2)] == [1, 2]
                assert len(s_all) == 0 and len(s_any) == 0
''',
}

EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE = 0, 1, 3
HERE = Path(__file__).resolve().parent


class Unavailable(Exception):
    """kombu's tests could not be obtained (no kombu, or no network)."""


def cache_root() -> Path:
    return Path(sys.prefix) / "kombu-suite"


def obtain(version: str, root: Path | None = None, timeout: float = 180.0) -> Path:
    """The directory holding kombu ``version``'s ``t/`` tree, downloading it once."""
    root = root or cache_root()
    dest = root / f"kombu-{version}"
    if (dest / "t" / "unit").is_dir() and (dest / ".complete").exists():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", f"kombu=={version}"]
        cmd += ["--no-binary", ":all:", "--no-deps", "-d", tmp]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"pip download kombu=={version} took over {timeout:.0f} s") from None
        archives = sorted(Path(tmp).glob("kombu-*.tar.gz"))
        if done.returncode or not archives:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unavailable(
                f"could not download kombu=={version}'s source distribution (offline?): {last}"
            )
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        with tarfile.open(archives[0]) as tar:
            prefix = f"kombu-{version}/"
            members = [m for m in tar.getmembers() if m.name.startswith(prefix + "t/")]
            if not members:
                raise Unavailable(f"kombu=={version}'s sdist has no t/ directory")
            for m in members:
                m.name = m.name[len(prefix) :]
            try:
                tar.extractall(dest, members=members, filter="data")
            except TypeError:  # a Python without extraction filters (before 3.10.12)
                tar.extractall(dest, members=members)
    (dest / ".complete").touch()
    return dest


def _pytest(suite: Path, args: list[str], plugin: bool, env: dict[str, str]) -> Any:
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfE"]
    cmd += ["-p", "kombu_suite_plugin"] if plugin else []
    cmd += ["-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"]
    cmd += ["-o", "python_classes=test_*", "-o", "addopts=", "--rootdir", str(suite)]
    cmd += ["-W", "ignore::pytest.PytestUnknownMarkWarning", *args]
    return subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True)


def _failed_ids(stdout: str) -> list[str]:
    """Node ids of the FAILED / ERROR lines of pytest's short summary (-rfE)."""
    out = []
    for line in stdout.splitlines():
        for tag in ("FAILED ", "ERROR "):
            if line.startswith(tag):
                out.append(line[len(tag) :].split(" - ")[0].strip())
    return out


def run(suite: Path, modules: list[str] | None = None) -> dict[str, Any]:
    """Run the modules under pytest with the plugin; a summary dict.

    Tests that fail are run once more without the plugin (stock kombu): those
    that fail there too (an older kombu's tests against newer libraries, say)
    are reported apart and are not held against the integration.
    """
    modules = modules or MODULES
    for rel, text in GENERATED.items():
        (suite / rel).write_text(text)
    missing = [m for m in modules if not (suite / m).exists()]
    with tempfile.TemporaryDirectory() as tmp:
        junit, report = Path(tmp) / "junit.xml", Path(tmp) / "calls.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        env["CSTRIE_KOMBU_SUITE_REPORT"] = str(report)
        args = [f"--junitxml={junit}", *(m for m in modules if m not in missing)]
        done = _pytest(suite, args, True, env)
        cases = ET.parse(junit).getroot().iter("testcase") if junit.exists() else iter(())
        failed, skipped, total = [], 0, 0
        for case in cases:
            total += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(f"{case.get('classname')}::{case.get('name')}")
            elif case.find("skipped") is not None:
                skipped += 1
        calls = json.loads(report.read_text()) if report.exists() else {}
        ids = _failed_ids(done.stdout)
        stock_fails: list[str] = []
        if ids:
            stock = _pytest(suite, ids, False, env)
            stock_fails = [i for i in _failed_ids(stock.stdout) if i in ids]
    return {
        "modules": modules,
        "missing_modules": missing,
        "pytest_exit": done.returncode,
        "tests": total,
        "passed": total - len(failed) - skipped,
        "failed": len(failed),
        "skipped": skipped,
        "failures": failed,
        "failing_ids": ids,
        "failing_without_integration_too": stock_fails,
        "failures_due_to_integration": [i for i in ids if i not in stock_fails],
        "integration_lookups": calls,
        "output_tail": done.stdout.strip().splitlines()[-15:],
    }


def verdict(summary: dict[str, Any]) -> int:
    ok = (
        summary["tests"] > 0
        and len(summary["failing_ids"]) == summary["failed"]
        and not summary["failures_due_to_integration"]
        and summary["pytest_exit"] in (0, 1)
        and not summary["missing_modules"]
        and sum(summary["integration_lookups"].values()) > 0
    )
    return EXIT_OK if ok else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", type=Path, help="also write the summary here")
    args = p.parse_args(argv)
    try:
        version = metadata.version("kombu")
    except metadata.PackageNotFoundError:
        print(json.dumps({"unavailable": "kombu is not installed"}))
        return EXIT_UNAVAILABLE
    try:
        suite = obtain(version)
    except Unavailable as exc:
        print(json.dumps({"kombu": version, "unavailable": str(exc)}))
        return EXIT_UNAVAILABLE
    summary = {"kombu": version, "suite": str(suite), **run(suite)}
    text = json.dumps(summary, indent=2)
    print(text)
    (suite.parent / "last-run.json").write_text(text)
    if args.json:
        args.json.write_text(text)
    return verdict(summary)


if __name__ == "__main__":
    sys.exit(main())
