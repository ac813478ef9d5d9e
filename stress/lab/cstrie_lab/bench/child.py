"""Run a piece of a scenario in a fresh interpreter (memory isolation).

The parent calls :func:`run_child` with a dotted ``module:function`` name and JSON
parameters; the child (``python -m cstrie_lab.bench.child``) imports the function,
calls it with the parameters and prints its JSON-able return value as the last
line of stdout.  The child inherits stderr, so its progress lines show; its exit
status and stderr tail become a :class:`~cstrie_lab.bench.base.BenchError` if it
fails.  Interpreter options (``-X gil=0`` and the like) are passed on.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

from cstrie_lab.bench.base import BenchError

__all__ = ["main", "run_child"]

_MARK = "@@cstrie-bench-result@@ "


def _interpreter() -> list[str]:
    cmd = [sys.executable]
    for key, value in getattr(sys, "_xoptions", {}).items():
        cmd.append(f"-X{key}" if value is True else f"-X{key}={value}")
    return cmd


def run_child(target: str, params: dict[str, Any], timeout: float | None = None) -> Any:
    """Call ``target`` (``"package.module:function"``) with ``**params`` in a child."""
    cmd = [*_interpreter(), "-m", "cstrie_lab.bench.child", target, json.dumps(params)]
    try:
        proc = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=None, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"child {target} timed out after {timeout:.0f}s") from exc
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARK):
            if proc.returncode != 0:
                break
            return json.loads(line[len(_MARK) :])
    raise BenchError(
        f"child {target} failed with exit status {proc.returncode}; "
        f"stdout tail: {proc.stdout[-500:]!r}"
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m cstrie_lab.bench.child MODULE:FUNCTION JSON", file=sys.stderr)
        return 2
    module, _, name = args[0].partition(":")
    fn = getattr(importlib.import_module(module), name)
    result = fn(**json.loads(args[1]))
    sys.stdout.write(_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
