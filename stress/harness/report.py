"""Output of a harness run: console text, the JSON report and the PNG plot."""

from __future__ import annotations

import json
import os
import platform
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from stress.harness.checker import CHECKS, CheckReport
from stress.harness.runner import MeasureResult

__all__ = [
    "best_results",
    "environment",
    "format_check",
    "format_measure",
    "gil_enabled",
    "plot",
    "ratios",
    "write_json",
]


def free_threaded_build() -> bool:
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def gil_enabled() -> bool:
    """Whether the GIL is on right now (always True before 3.13)."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else bool(probe())


def environment() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        load = []
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "free_threaded_build": free_threaded_build(),
        "gil_enabled": gil_enabled(),
        "PYTHON_GIL": os.environ.get("PYTHON_GIL"),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "loadavg_at_start": load,
    }


def print_banner(argv: list[str] | None, seed: int) -> dict[str, Any]:
    """Print the lines every scenario opens with (the command, the seed to rerun
    it, the interpreter and machine); returns :func:`environment` with the
    command line under ``"command"``."""
    env = environment()
    cmd = "python -m stress.harness " + " ".join(argv if argv is not None else sys.argv[1:])
    env["command"] = cmd.strip()
    print(f"stress harness: {env['command']}")
    print(f"seed: {seed}   (rerun with --seed {seed})")
    print(
        f"python {env['python']} ({env['executable']}), free-threaded build: "
        f"{env['free_threaded_build']}, GIL enabled: {env['gil_enabled']}, "
        f"PYTHON_GIL={env['PYTHON_GIL']}, cpus: {env['cpus']}, load average: "
        f"{env['loadavg_at_start']}"
    )
    return env


def gil_wrongly_on(env: dict[str, Any]) -> bool:
    """True, after saying why on stderr, when this is a free-threaded build whose
    GIL is enabled: a run would measure and check nothing it claims to."""
    if not (env["free_threaded_build"] and env["gil_enabled"]):
        return False
    print(
        "error: this is a free-threaded build but the GIL is enabled "
        "(sys._is_gil_enabled() is True): an extension module (cffi, cstrie._native, "
        "atomics) re-enabled it on import. Run with PYTHON_GIL=0 (or python -X gil=0).",
        file=sys.stderr,
    )
    return True


#: exit status of the three harness CLIs
EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2


def finish(
    data: dict[str, Any],
    env: dict[str, Any],
    failed: bool,
    t_start: float,
    seed: int,
    json_path: str | None,
) -> int:
    """The end of a harness run, for every scenario: fail it if the GIL got
    enabled meanwhile on a free-threaded build, record the time and verdict in
    ``data``, write the JSON, print the verdict; the exit status."""
    gil_after = gil_enabled()
    data["gil_enabled_at_end"] = gil_after
    if env["free_threaded_build"] and gil_after:
        print(
            "error: the GIL got enabled during the run (an extension imported late)",
            file=sys.stderr,
        )
        failed = True
        data["gil_enabled"] = True
    data["seconds"] = round(time.perf_counter() - t_start, 2)
    data["passed"] = not failed
    if json_path:
        write_json(json_path, data)
        print(f"\njson written to {json_path}")
    print(f"\n{'PASSED' if not failed else 'FAILED'} in {data['seconds']:.1f} s (seed {seed})")
    if env["free_threaded_build"] and gil_after:
        return EXIT_USAGE
    return EXIT_VIOLATION if failed else EXIT_OK


def format_measure(r: MeasureResult, label: str) -> str:
    return (
        f"  {label:<40} {r.threads:>2} thr  {r.ops:>10,} ops in {r.seconds:6.2f} s = "
        f"{r.ops_per_s:>11,.0f} ops/s  cpu/wall {r.cpu_per_wall:4.2f}  "
        f"{r.ops_per_cpu_s:>11,.0f} ops/cpu-s  waits {r.waits:>6}"
    )


def best_results(results: list[MeasureResult]) -> dict[tuple[str, int], MeasureResult]:
    """The fastest run per (impl, threads) (the least disturbed one on a busy machine)."""
    best: dict[tuple[str, int], MeasureResult] = {}
    for r in results:
        key = (r.impl, r.threads)
        if key not in best or r.ops_per_s > best[key].ops_per_s:
            best[key] = r
    return best


def ratios(
    best: dict[tuple[str, int], MeasureResult], per_cpu: bool = False
) -> dict[str, dict[str, float]]:
    """Per impl: throughput at n threads / throughput at 1 thread, keyed ``"n/1"``.

    With ``per_cpu`` the ratio of ops per CPU-second instead: 1.0 means a thread
    does as much per CPU-second next to others as alone (no contention), whatever
    share of the cores the machine gave the run."""
    out: dict[str, dict[str, float]] = {}
    for (impl, n), r in sorted(best.items()):
        one = best.get((impl, 1))
        if one is None or n == 1:
            continue
        a, b = (r.ops_per_cpu_s, one.ops_per_cpu_s) if per_cpu else (r.ops_per_s, one.ops_per_s)
        if b > 0:
            out.setdefault(impl, {})[f"{n}/1"] = round(a / b, 3)
    return out


def format_check(report: CheckReport, label: str) -> list[str]:
    st = report.stats
    rows = st.get("lookup_many_rows", 0)
    largest = st.get("lookup_many_largest_row", 0)
    lines = [
        f"  {label}: {st.get('operations', 0):,} operations, {st.get('snapshots', 0)} snapshots, "
        f"{f'{rows:,} lookup_many rows (largest {largest:,}), ' if rows else ''}"
        f"{st.get('linearizability_events', 0):,} per-subscriber events checked in "
        f"{st.get('seconds', {}).get('total', 0):.1f} s"
    ]
    for name, what in CHECKS.items():
        n = report.counts.get(name, 0)
        lines.append(f"    {'FAIL' if n else 'ok  '} {name:<16} {n:>6} violation(s)  {what}")
    for v in report.violations:
        lines.append(f"    VIOLATION [{v.check}] {v.message}")
    hidden = report.total - len(report.violations)
    if hidden > 0:
        lines.append(f"    ... and {hidden} more violation(s) not shown")
    return lines


def write_json(path: str, data: dict[str, Any]) -> None:
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def plot(path: str, best: dict[tuple[str, int], MeasureResult], title: str) -> str | None:
    """Throughput vs threads, one line per implementation.  Returns an error
    message instead of raising when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError as exc:
        return f"--plot needs matplotlib ({exc}); pip install matplotlib"
    labels = {
        "cstrie": "cstrie (per-thread matcher)",
        "pytrie": "PyTrie (one lock)",
        "locked": "cstrie behind one global lock",
    }
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for impl in ("cstrie", "locked", "pytrie"):
        pts = sorted((n, r.ops_per_s) for (i, n), r in best.items() if i == impl)
        if not pts:
            continue
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker="o", label=labels.get(impl, impl))
        for x, y in pts:
            ax.annotate(
                f"{y / 1e3:,.0f}K",
                (x, y),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=8,
            )
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / 1e3:,.0f}K"))
    ax.set_xlabel("threads")
    ax.set_ylabel("operations / s (all threads)")
    ax.set_title(title, fontsize=9)
    ax.set_xticks(sorted({n for _, n in best}))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p)
    plt.close(fig)
    return None
