"""The C-level tests of the engine, run through ``stress/Makefile``.

``make -C stress test asan`` builds and runs the C unit test
(``tests/native/test_engine.c``) plainly and under AddressSanitizer + UBSan,
together with the two pthread torture programs (``stress/torture_trie.c``,
``stress/torture_ebr.c``).  ``make -C stress tsan`` runs the same three under
ThreadSanitizer; it is slower, so it is a test of its own.  Any sanitizer
report fails the run (the Makefile sets ``halt_on_error``), and the unit test
must end with a line ``N passed, 0 failed``.

Skipped, with the reason, when gcc or make is missing or when the compiler
cannot build with the sanitizer in question.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STRESS = ROOT / "stress"
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")
SANITIZER_REPORTS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "WARNING: ThreadSanitizer",
    "runtime error:",
)


def _require_toolchain(sanitizer: str | None = None) -> None:
    missing = [tool for tool in ("gcc", "make") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the native C tests need {' and '.join(missing)} on PATH")
    if sanitizer is None:
        return
    # Some toolchains ship gcc without libasan/libtsan: probe once.
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("int main(void) { return 0; }\n")
        probe = subprocess.run(
            ["gcc", f"-fsanitize={sanitizer}", str(src), "-o", str(Path(tmp) / "probe")],
            capture_output=True,
            text=True,
            check=False,
        )
    if probe.returncode != 0:
        pytest.skip(f"gcc cannot build with -fsanitize={sanitizer}: {probe.stderr.strip()[:200]}")


def _run_make(*targets: str, timeout: float = 900) -> str:
    """Run make -k in stress/ and return its combined output; fail on a non-zero exit."""
    proc = subprocess.run(
        ["make", "-k", "-C", str(STRESS), *targets],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in order: reports next to their run
        text=True,
        timeout=timeout,
        check=False,
    )
    output = proc.stdout
    tail = "\n".join(output.splitlines()[-80:])
    assert proc.returncode == 0, f"make {' '.join(targets)} exited {proc.returncode}:\n{tail}"
    for report in SANITIZER_REPORTS:
        assert report not in output, f"sanitizer report ({report!r}):\n{tail}"
    return output


def _check_unit_summaries(output: str, expected_runs: int) -> None:
    summaries = [m for line in output.splitlines() if (m := SUMMARY.match(line.strip()))]
    assert len(summaries) == expected_runs, (
        f"expected {expected_runs} unit-test summary lines, found {len(summaries)}:\n"
        + "\n".join(output.splitlines()[-40:])
    )
    for m in summaries:
        assert int(m.group(1)) > 0 and m.group(2) == "0", m.group(0)
    # The closing line of the unit-test run is the summary.
    last_summary = [line for line in output.splitlines() if SUMMARY.match(line.strip())][-1]
    assert last_summary.strip().endswith("passed, 0 failed")


def test_native_unit_and_asan() -> None:
    """make test asan: the unit test (plain -O2 and ASan+UBSan) and both torture programs."""
    _require_toolchain("address,undefined")
    output = _run_make("test", "asan")
    _check_unit_summaries(output, expected_runs=2)
    assert "torture_trie: ok" in output
    assert "torture_ebr: ok" in output


@pytest.mark.slow
def test_native_tsan() -> None:
    """make tsan: the unit test and both torture programs under ThreadSanitizer."""
    _require_toolchain("thread")
    output = _run_make("tsan")
    _check_unit_summaries(output, expected_runs=1)
    assert "torture_trie: ok" in output
    assert "torture_ebr: ok" in output
