"""What a user's type checker sees of the installed package.

cstrie ships ``py.typed`` and stubs of its compiled modules (``_hotpath.pyi``:
the methods ``Trie`` and ``Snapshot`` inherit from C; ``_native.pyi``).  These
tests check the stubs against the built modules (mypy's stubtest) and run
``mypy --strict`` on two user programs, with cstrie found the way an installed
package is (on a site-packages path, where mypy reads only packages that have
``py.typed``): tests/package/typecheck/user_program.py must pass, and
tests/package/typecheck/user_mistakes.py must fail with exactly the errors it marks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

import cstrie

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "package" / "typecheck"
PACKAGE = Path(cstrie.__file__).resolve().parent


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_package_has_py_typed_and_stubs():
    for name in ("py.typed", "_hotpath.pyi", "_native.pyi"):
        assert (PACKAGE / name).is_file(), name


def test_stubs_match_the_compiled_modules():
    r = _run(
        [
            "mypy.stubtest",
            "--concise",
            "--mypy-config-file",
            str(ROOT / "pyproject.toml"),
            "cstrie._hotpath",
            "cstrie._native",
        ],
        cwd=PACKAGE.parent,  # where mypy finds the package and its stubs
    )
    # PEP 800's @disjoint_base is left out of the stubs: mypy releases before
    # it do not know typing_extensions.disjoint_base.
    problems = [
        line
        for line in r.stdout.splitlines()
        if line and "is a disjoint base at runtime" not in line
    ]
    assert not problems and not r.stderr.strip(), r.stdout + r.stderr


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory):
    """A bare venv whose site-packages holds a .pth naming a folder that holds
    only the package: mypy finds cstrie as an installed package there."""
    base = tmp_path_factory.mktemp("installed")
    site = base / "site"
    site.mkdir()
    (site / "cstrie").symlink_to(PACKAGE, target_is_directory=True)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "cstrie-under-test.pth").write_text(f"{site}\n")
    return python


def _mypy_errors(python: Path, cwd: Path, *programs: Path) -> tuple[int, list[str]]:
    r = _run(
        [
            "mypy",
            "--strict",
            "--cache-dir",
            str(cwd / ".mypy_cache"),
            "--python-executable",
            str(python),
            "--show-error-codes",
            "--no-error-summary",
            *map(str, programs),
        ],
        cwd=cwd,
    )
    assert "error: Cannot read file" not in r.stdout + r.stderr
    return r.returncode, [line for line in r.stdout.splitlines() if ": error:" in line]


def _expected(program: Path) -> list[tuple[int, str]]:
    """(line, error code) of every ``# E: code`` mark in ``program``."""
    out = []
    for lineno, line in enumerate(program.read_text().splitlines(), 1):
        m = re.search(r"#\s*E:\s*([a-z-]+)\s*$", line)
        if m:
            out.append((lineno, m.group(1)))
    return out


def test_user_program_type_checks_and_mistakes_are_caught(installed_python, tmp_path):
    good = PROGRAMS / "user_program.py"
    bad = PROGRAMS / "user_mistakes.py"
    rc, errors = _mypy_errors(installed_python, tmp_path, good, bad)
    assert rc == 1, errors
    in_good = [e for e in errors if e.startswith(str(good))]
    assert not in_good, "\n".join(in_good)
    found = set()
    for e in errors:
        m = re.match(rf"{re.escape(str(bad))}:(\d+): error: .*\[([a-z-]+)\]$", e)
        assert m, e
        found.add((int(m.group(1)), m.group(2)))
    want = _expected(bad)
    assert len(want) >= 10
    assert found == set(want), "\n".join(errors)
