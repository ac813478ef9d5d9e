"""The C-level tests of the engine, run through ``stress/Makefile``.

``make -C stress test asan`` builds and runs the C unit tests (every
``tests/native/*.c``, one program) plainly and under AddressSanitizer + UBSan,
together with the two pthread torture programs (``stress/torture_trie.c``,
``stress/torture_ebr.c``).  ``make -C stress tsan`` runs the same three under
ThreadSanitizer; it is slower, so it is a test of its own.  Any sanitizer
report fails the run (the Makefile sets ``halt_on_error``), and the unit test
must end with a line ``N passed, 0 failed``.

``make -C stress fuzz-replay`` replays the fuzz target's seed corpus
(``stress/fuzz_engine.c``, ``stress/fuzz_corpus/``) under ASan + UBSan with
gcc; ``make -C stress fuzz`` runs libFuzzer for a few seconds (clang only);
``make -C stress fuzz-known`` replays the inputs of engine bugs fixed since
(``stress/fuzz_known/``, regressions).  ``make -C stress fuzz-build-replay``
replays the bulk build's target (``stress/fuzz_build.c``: crafted offset
tables, ``stress/fuzz_build_corpus/``) and random inputs the same way.

Skipped, with the reason, when gcc or make is missing or when the compiler
cannot build with the sanitizer in question (clang with libFuzzer for the
fuzz run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    """make test asan: the unit test (plain -O2, plain over 64-way C-nodes, and
    ASan+UBSan) and both torture programs."""
    _require_toolchain("address,undefined")
    output = _run_make("test", "asan")
    _check_unit_summaries(output, expected_runs=3)
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


# ---- the C-loop benchmarks (stress/walk_engine.c, stress/write_engine.c) ----------
def test_c_loop_benchmarks_build_and_answer(tmp_path: Path) -> None:
    """make walk write: the before/after programs build with -Werror and
    measure what they say.  walk_engine looks up every topic (one of two matches
    "a/+", one "#" too) and reports ids per lookup; write_engine subscribes
    and unsubscribes every pair (it dies if the trie is not empty after)."""
    _require_toolchain()
    _run_make("walk", "write")
    (tmp_path / "f").write_text("a/+\n#\nb/c\n")
    (tmp_path / "t").write_text("a/x\nz\n")
    (tmp_path / "p").write_text("a/+\t1\na/+\t2\nb/#\t1\n")

    def run(program: str, *args: str) -> str:
        return subprocess.run(
            [str(STRESS / "bin" / program), *args], capture_output=True, text=True, check=True
        ).stdout

    for mode in ("plain", "warm", "batch"):
        out = run("walk_engine", str(tmp_path / "f"), str(tmp_path / "t"), "--mode", mode)
        assert "3 filters, 2 topics, 1.50 ids per lookup" in out, out
    out = run("write_engine", str(tmp_path / "p"), "--rounds", "2")
    assert re.match(r"mqtt: 3 pairs, best of 2 rounds: subscribe [\d.]+ ns", out), out
    bad = subprocess.run(
        [str(STRESS / "bin" / "write_engine"), str(tmp_path / "t")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "not pattern<TAB>subscriber" in bad.stderr


# ---- the fuzz target (stress/fuzz_engine.c) -----------------------------------
FUZZ_SEEDS = STRESS / "fuzz_corpus"
FUZZ_OK = re.compile(r"^fuzz_engine: ok: (\d+) inputs replayed")


def test_fuzz_replay() -> None:
    """make fuzz-replay: the fuzz target built with gcc (ASan + UBSan) as a plain
    program replays the committed seed corpus, every input checked against the
    harness's reference model, with no sanitizer report and no engine leak."""
    _require_toolchain("address,undefined")
    output = _run_make("fuzz-replay", "FUZZ_REPLAY_DIRS=fuzz_corpus")
    found = [m for line in output.splitlines() if (m := FUZZ_OK.match(line.strip()))]
    assert found, "\n".join(output.splitlines()[-40:])
    seeds = [p for p in FUZZ_SEEDS.iterdir() if not p.name.startswith(".")]
    assert int(found[-1].group(1)) == len(seeds) >= 30


def test_fuzz_known_bugs() -> None:
    """make fuzz-known: the inputs that showed engine bugs (fixed since),
    replayed as regressions without any workaround (each under `timeout`)."""
    _require_toolchain("address,undefined")
    if shutil.which("timeout") is None:
        pytest.skip("make fuzz-known needs the timeout program")
    _run_make("fuzz-known", "FUZZ_KNOWN_TIMEOUT=5", timeout=300)


FUZZ_BUILD_SEEDS = STRESS / "fuzz_build_corpus"
FUZZ_BUILD_OK = re.compile(r"^fuzz_build: ok: (\d+) inputs \((\d+) files, (\d+) random")


def test_fuzz_build_replay() -> None:
    """make fuzz-build-replay: cst_build fed crafted offset tables (stress/fuzz_build.c,
    its corpus and 20,000 random inputs) under ASan + UBSan: every table the rule
    refuses gives CST_EBOUNDS at its first bad entry, with no read out of bounds."""
    _require_toolchain("address,undefined")
    output = _run_make("fuzz-build-replay", "FUZZ_BUILD_RANDOM=20000")
    found = [m for line in output.splitlines() if (m := FUZZ_BUILD_OK.match(line.strip()))]
    assert found, "\n".join(output.splitlines()[-40:])
    seeds = [p for p in FUZZ_BUILD_SEEDS.iterdir() if not p.name.startswith(".")]
    assert int(found[-1].group(2)) == len(seeds) >= 20
    assert int(found[-1].group(3)) == 20000


def _require_libfuzzer() -> None:
    clang = shutil.which("clang")
    if clang is None or shutil.which("make") is None:
        pytest.skip("make fuzz needs clang (with libFuzzer) and make on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(
            "#include <stddef.h>\n#include <stdint.h>\n"
            "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
            " { (void)d; (void)n; return 0; }\n"
        )
        probe = subprocess.run(
            [clang, "-fsanitize=fuzzer,address,undefined", str(src), "-o", str(Path(tmp) / "p")],
            capture_output=True,
            text=True,
            check=False,
        )
    if probe.returncode != 0:
        pytest.skip(f"clang cannot link libFuzzer: {probe.stderr.strip()[:200]}")


@pytest.mark.slow
def test_fuzz_smoke() -> None:
    """make fuzz for a few seconds: the libFuzzer build links and runs from the
    seed corpus without a crash (the real runs are longer: FUZZ_SECONDS)."""
    _require_libfuzzer()
    with tempfile.TemporaryDirectory() as work:
        output = _run_make("fuzz", "FUZZ_SECONDS=5", f"FUZZ_WORK={work}")
        assert "Done " in output, "\n".join(output.splitlines()[-40:])
        assert not list(Path(work).glob("crash-*")), "libFuzzer wrote a crash input"
