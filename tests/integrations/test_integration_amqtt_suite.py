"""amqtt's own broker tests (vendored in ``stress/amqtt_suite/``) run with
``CstrieBroker`` swapped in for amqtt's ``Broker`` by ``stress/amqtt_suite.py``.

The script runs its default selection (about 170 tests, a minute, mostly the
tests' own sleeps), re-runs each failing test with the integration and on stock
amqtt, and explains every failure: it fails on stock amqtt too, or it is one of
the integration's documented differences from stock (the script's
``EXPECTED_DIFFERENCES``).  Skipped only when amqtt is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("amqtt")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "stress" / "amqtt_suite.py"
_spec = importlib.util.spec_from_file_location("amqtt_suite", SCRIPT)
assert _spec is not None and _spec.loader is not None
amqtt_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(amqtt_suite)


def test_amqtts_own_tests_pass_with_the_integration() -> None:
    # a hung run is cut by the script's own per-run limit (and each amqtt test
    # by its 15 s pytest-timeout); this is the outer bound
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"amqtt_suite.py printed no summary (exit {done.returncode}):\n{done.stderr}")
    assert "error" not in summary, summary
    integrated = summary["integrated"]
    tail = "\n".join(integrated["output_tail"])
    # every failure is explained: it fails on stock amqtt too, or it is an
    # expected difference (which must then fail with the integration and pass
    # on stock)
    assert summary["failures_due_to_integration"] == [], tail
    assert summary["expected_differences_not_seen"] == [], summary["failures_explained"]
    assert len(integrated["failing_ids"]) == integrated["failed"], tail
    assert integrated["tests"] >= 150 and integrated["passed"] >= 150, tail
    # the swap was in effect: the tests' brokers were CstrieBrokers (no stock
    # Broker was created), which routed messages and answered retained lookups,
    # and their routes equalled their subscriptions after every test
    counts = integrated["plugin"]["counts"]
    assert counts.get("brokers:Broker", 0) == 0, counts
    assert counts["brokers:CstrieBroker"] > 50, counts
    assert counts["routed messages"] > 50 and counts["retained lookups"] > 10, counts
    assert counts["route checks"] > 50, counts
    assert integrated["plugin"]["check_routes_failures"] == []
    assert done.returncode == 0


def test_expected_differences_are_documented_ones() -> None:
    """Each expected difference names one of the module's seven documented
    differences and a test the default selection runs."""
    for node, (number, why) in amqtt_suite.EXPECTED_DIFFERENCES.items():
        assert number in range(1, 8), node
        assert why
        assert not any(node.startswith(d) for d in amqtt_suite.DESELECTED_BY_DEFAULT), node
        path = node.split("::")[0]
        assert path in amqtt_suite.MODULES, node
        assert (amqtt_suite.SUITE / path).exists(), node
