"""The scaling benchmark runs end to end: ``python -m stress.lab.scaling`` and the C
program ``stress/scale_engine.c`` (``make -C stress scale``), with tiny
durations.

Nothing here asserts a time or a ratio (the machine is shared and noisy; the
numbers are read in docs/benchmarks.md, "Scaling with threads"): only that every
row runs, the JSON lines carry the same fields from both programs, and
``--from-json`` reads, summarises and plots them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stress.lab import scaling  # noqa: E402

FIELDS = {
    "bench",
    "row",
    "what",
    "locked",
    "threads",
    "ops",
    "wall_s",
    "cpu_s",
    "ops_per_s",
    "ops_per_cpu_s",
    "cpu_per_wall",
    "waits_per_1k",
    "speedup",
    "efficiency",
}


def _check_records(records: list[dict[str, Any]], rows: list[str], threads: list[int]) -> None:
    assert [(r["row"], r["threads"]) for r in records] == [(x, n) for x in rows for n in threads]
    for r in records:
        assert set(r) == FIELDS, r
        assert r["ops"] > 0 and r["ops_per_s"] > 0 and r["ops_per_cpu_s"] > 0
        assert r["locked"] == r["row"].startswith("locked-")
        if r["threads"] == 1:
            assert r["speedup"] == pytest.approx(1.0) and r["efficiency"] == pytest.approx(1.0)


def test_python_rows_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "python.jsonl"
    rows = list(scaling.ROWS)
    rc = scaling.main(["--threads", "2", "--seconds", "0.01", "--json", str(out), *rows])
    assert rc == 0
    text = capsys.readouterr().out
    assert "ops/cpu-s" in text and "update-own-trie" in text
    meta, records = scaling.read_records(str(out))
    assert meta["bench"] == "python" and meta["threads"] == [1, 2]
    _check_records(records, rows, [1, 2])
    assert all(r["bench"] == "python" for r in records)


def test_default_threads() -> None:
    assert scaling.default_threads(1) == [1]
    assert scaling.default_threads(2) == [1, 2]
    assert scaling.default_threads(6) == [1, 2, 4, 6]
    assert scaling.default_threads(16) == [1, 2, 4, 8, 16]


def test_refuses_a_free_threaded_run_with_the_gil_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stress.harness import report

    env = dict(report.environment(), free_threaded_build=True, gil_enabled=True)
    monkeypatch.setattr(report, "environment", lambda: env)
    assert scaling.main(["--threads", "1", "--seconds", "0.01", "lookup-str"]) == 2
    assert "PYTHON_GIL=0" in capsys.readouterr().err


def test_unknown_row_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        scaling.main(["no-such-row"])
    assert exc.value.code == 2


@pytest.fixture(scope="module")
def scale_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("make") is None or shutil.which("gcc") is None:
        pytest.skip("make or gcc missing")
    bin_dir = tmp_path_factory.mktemp("scale-bin")
    subprocess.run(
        ["make", "-s", "-C", str(ROOT / "stress"), "scale", f"BIN={bin_dir}", "CC=gcc"],
        check=True,
        capture_output=True,
    )
    return bin_dir / "scale_engine"


def test_engine_rows_end_to_end(scale_engine: Path, tmp_path: Path) -> None:
    listed = subprocess.run(
        [str(scale_engine), "--list"], check=True, capture_output=True, text=True
    ).stdout
    rows = [line.split()[0] for line in listed.splitlines()]
    assert {"lookup", "update-own-trie", "update-disjoint", "update-same", "snapshot"} <= set(rows)
    assert {"snapshot-writer", "route", "mix-90-10", "mix-50-50", "locked-mix-50-50"} <= set(rows)
    out = tmp_path / "engine.jsonl"
    run = subprocess.run(
        [str(scale_engine), "--threads", "2", "--seconds", "0.01", "--json", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "ops/cpu-s" in run.stdout
    meta, records = scaling.read_records(str(out))
    assert meta["bench"] == "engine" and meta["threads"] == [1, 2]
    _check_records(records, rows, [1, 2])
    # the same records also come as the table's lines
    assert len([x for x in run.stdout.splitlines() if x.split()[:1] == ["lookup"]]) == 2


def test_engine_rejects_bad_arguments(scale_engine: Path) -> None:
    for args in (["--rows", "nope"], ["--threads", "0"], ["--seconds", "-1"], ["--bogus", "1"]):
        run = subprocess.run([str(scale_engine), *args], capture_output=True, text=True)
        assert run.returncode != 0, args
        assert run.stderr, args


def test_from_json_summary_and_plot(
    scale_engine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = tmp_path / "engine.jsonl"
    subprocess.run(
        [str(scale_engine), "--threads", "1,2", "--seconds", "0.01", "--rows",
         "update-own-trie,locked-update-disjoint,update-disjoint", "--json", str(engine)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    python = tmp_path / "python.jsonl"
    assert (
        scaling.main(["--threads", "2", "--seconds", "0.01", "--json", str(python), "snapshot"])
        == 0
    )
    harness = tmp_path / "harness.json"
    harness.write_text(
        json.dumps(
            {
                "config": {"mix": "90/10", "thread_counts": [1, 2]},
                "passed": True,
                "ratios": {"cstrie": {"2/1": 1.9}},
                "cpu_efficiency_ratios": {"cstrie": {"2/1": 0.95}},
            }
        )
    )
    capsys.readouterr()
    args = ["--from-json", str(engine), str(python), "--harness-json", str(harness)]
    assert scaling.main([*args, "--summary-only"]) == 0
    text = capsys.readouterr().out
    assert "engine update-own-trie" in text and "python snapshot" in text
    assert "floor" in text and "engine update-disjoint at 2" in text
    assert "floor met    harness mixed 90/10 at 2: 1.90x" in text
    assert scaling.main([*args[:3], "--markdown"]) == 0
    text = capsys.readouterr().out
    assert "**engine**" in text and "**python**" in text
    assert "| `update-own-trie` |" in text and "| `snapshot` |" in text
    pytest.importorskip("matplotlib")
    png = tmp_path / "scaling.png"
    assert scaling.main([*args, "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
