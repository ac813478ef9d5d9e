"""The lab plugs into the ``cstrie`` command: its distribution's entry points
in the group ``cstrie.commands`` give ``cstrie bench`` and ``cstrie demo``."""

from __future__ import annotations

import subprocess
import sys

from cstrie import cli


def test_the_lab_registers_bench_and_demo() -> None:
    eps = {ep.name: ep for ep in cli.plugin_entry_points()}
    assert eps["bench"].value == "cstrie_lab.bench:add_parser"
    assert eps["demo"].value == "cstrie_lab.demo:add_parser"
    assert eps["bench"].dist is not None and eps["bench"].dist.name == "cstrie-lab"


def test_the_installed_command_runs_the_lab() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cstrie", "bench", "--list"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "vs-dict" in out
