"""Every test has a time limit (``pyproject.toml``: pytest-timeout, and the
backstop of ``tests/support/watchdog.py``).  Each case runs pytest in a
subprocess on a test that never ends, with a 2-second limit, and checks that
the run ends soon after, naming the hung test, plainly and under
pytest-xdist: a hang costs a run its limit, not the whole CI budget."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parents[1] / "support"

HANGS = {
    # a Python loop: pytest-timeout's timer thread fails it
    "python": "def test_hang():\n    while True:\n        pass\n",
    # a C loop that holds the GIL all along (exponential backtracking in re):
    # no Python thread runs, only the watchdog's C thread can end it
    "c-holding-the-gil": (
        "import re\n\ndef test_hang():\n    re.match(r'(a+)+$', 'a' * 64 + 'b')\n"
    ),
}


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "xdist"])
@pytest.mark.parametrize("kind", list(HANGS))
def test_a_hung_test_fails_at_its_limit(kind: str, xdist: bool, tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(HANGS[kind])
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["watchdog"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(SUPPORT)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio"]
    args += ["-o", "timeout=2", "-o", "timeout_method=thread"]
    args += ["-o", "watchdog_grace=1", "--rootdir", str(tmp_path)]
    if xdist:
        args += ["-n", "1"]
    t0 = time.monotonic()
    # Its own process group: if it hangs, the kill reaches its xdist worker
    # too, which would otherwise spin on after the test.
    proc = subprocess.Popen(
        [*args, str(tmp_path / "test_hang.py")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the run with a hung test did not end in 240 s")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left behind
    took = time.monotonic() - t0
    out = stdout + stderr
    assert proc.returncode != 0, out
    if xdist:  # the worker ends (its own report is lost with it); the controller says which test
        assert "crashed while running 'test_hang.py::test_hang'" in out, out
        assert "1 failed" in out, out
    else:  # the process ends after the stacks, pytest-timeout's or the watchdog's
        assert "Timeout" in out, out
        assert 'test_hang.py", line' in out, out
    assert took < 30, f"the run took {took:.0f} s\n{out}"  # 2 s, plus the watchdog's 1 s
