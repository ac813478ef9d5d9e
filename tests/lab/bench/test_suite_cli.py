"""Smoke tests of the classic-matchers suite's scenarios through ``cstrie bench`` (``--quick``).

Tiny sizes, few repetitions; no assertion on any time or ratio (the machine is
shared and noisy; floors are checked by ``cstrie bench --check-floors``).  They
check that each scenario runs, that every matcher agrees with cstrie (a
disagreement is an error, exit status 1), and that ``--json`` and ``--plots``
write what they promise.  About 15 s in all on two cores.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cstrie_lab.bench import main, suite
from cstrie_lab.bench import scenarios as registry
from cstrie_lab.bench.workloads import (
    ARTICLE_SUBJECT,
    digits_workload,
    mix_chunks,
    ops_workload,
    to_mqtt,
)

SUITE = registry.GROUPS["suite"]
#: per scenario: --sizes value for a tiny run, and --repeat
TINY = {
    "suite-ops": ("200", "3"),
    "suite-throughput": ("2000", "30"),
    "suite-threads": ("20", "1"),
    "suite-scale": ("500,1000", "3"),
}


def test_suite_group_and_registry() -> None:
    assert SUITE == ["suite-ops", "suite-throughput", "suite-threads", "suite-scale"]
    for name in SUITE:
        assert registry.get(name).name == name


def test_list_mentions_the_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "suite-ops" in out and "suite " in out


def test_workloads_shapes() -> None:
    w = ops_workload(random.Random(1), hot=200, lookups=50, writes=40)
    assert len(w.hot) == 200 and len({p for p, _ in w.hot}) == 200
    assert all(len(p.split(".")) == 5 for p, _ in w.hot)
    assert all("#" not in p[:-1] for p, _ in w.hot)  # '#' only last: exact in MQTT
    assert w.subject == (ARTICLE_SUBJECT, -1)
    assert all(p.split(".")[1] == "*" for p, _ in w.writes)
    assert not {p for p, _ in w.writes} & {p for p, _ in w.hot}
    assert set(w.lookups) <= set(w.topic_space)
    d = digits_workload(random.Random(2), 500)
    shapes = [".".join("*" if x == "*" else "d" for x in p.split(".")) for p, _ in d.pairs]
    assert [shapes.count(s) for s in ("*.d.d", "d.*.d", "d.d.*", "d.d.d")] == [100, 20, 9, 871]
    assert len({p for p, _ in d.pairs}) == 1000
    assert len(d.messages) == 500 and set(d.messages) <= set(d.topic_space)
    assert len(d.topic_space) == 1000
    chunks = mix_chunks(random.Random(3), 0.1, w.writes, w.lookups, 5)
    for chunk in chunks:
        kinds = [k for k, _, _ in chunk]
        assert len(chunk) == 20 and kinds.count("sub") == kinds.count("unsub") == 1
        assert kinds.index("sub") < kinds.index("unsub")


@pytest.mark.parametrize(
    ("amqp", "mqtt"),
    [("a.*.c", "a/+/c"), ("a.#", "a/#"), ("#", "#"), ("#.a", None), ("a..b", None), ("$x.y", None)],
)
def test_to_mqtt(amqp: str, mqtt: str | None) -> None:
    assert to_mqtt(amqp) == mqtt


def test_every_matcher_agrees_with_cstrie_on_the_ops_workload() -> None:
    w = ops_workload(random.Random(4), hot=300, lookups=40, writes=20)
    entries = []
    for kind in suite.KINDS:
        try:
            e = suite.new_entry(kind, w.topic_space)
        except suite.Skipped:
            continue
        e.build(e.pairs([*w.hot, w.subject]))
        entries.append(e)
    assert entries[0].label == "cstrie" and len(entries) >= 6
    assert suite.check_agree(entries, w.topic_space) > 0


@pytest.mark.parametrize("scenario", SUITE)
def test_suite_scenario_quick_json_and_plots(scenario: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.json"
    plots = tmp_path / "plots"
    sizes, repeat = TINY[scenario]
    argv = ["--scenario", scenario, "--quick", "-q", "--seed", "7"]
    argv += ["--sizes", sizes, "--repeat", repeat, "--json", str(out), "--plots", str(plots)]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    res = doc["scenarios"][scenario]
    assert res["error"] is None
    assert res["tables"] and all(t["rows"] for t in res["tables"])
    assert res["floors"]
    for f in res["floors"]:
        assert isinstance(f["passed"], bool)
        assert f["standard"] is False  # tiny sizes (or a GIL build) are never standard
    pngs = sorted(plots.glob("*.png"))
    assert pngs, "every suite scenario draws at least one plot"
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2_000


def test_suite_group_on_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    argv = ["--scenario", "suite", "--quick", "-q", "--json", str(out), "--repeat", "2"]
    for name, (sizes, _) in TINY.items():
        argv += ["--sizes", f"{name}={sizes}"]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert list(doc["scenarios"]) == SUITE
    assert doc["options"]["scenarios"] == SUITE
