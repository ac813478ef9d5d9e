"""What the numbers were measured on: CPU, cores, Python, versions, load."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import sysconfig
from importlib import metadata
from typing import Any

__all__ = ["describe", "rss_bytes", "version_of"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process, from ``/proc/self/statm`` (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * _PAGE


def version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def engine_build() -> dict[str, Any]:
    """Which engine was measured: the loaded extension's hash and the git state."""
    out: dict[str, Any] = {}
    try:
        from cstrie import _native

        path = getattr(_native, "__file__", None)
        if isinstance(path, str):
            with open(path, "rb") as f:
                out["native_sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
            root = os.path.dirname(os.path.dirname(os.path.abspath(path)))
            git = ["git", "-C", root]
            head = subprocess.run(
                [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
            )
            if head.returncode == 0:
                out["git_head"] = head.stdout.strip()
                dirty = subprocess.run(
                    [*git, "status", "--porcelain", "--", "native", "cstrie"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
                out["git_dirty"] = [
                    line[3:] for line in dirty.stdout.splitlines() if "bench/" not in line
                ]
    except (ImportError, OSError, subprocess.SubprocessError):
        pass
    return out


def describe() -> dict[str, Any]:
    """A JSON-able description of the machine and interpreter."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    gil = getattr(sys, "_is_gil_enabled", None)
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {
        "nproc": usable,
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "free_threaded_build": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "gil_enabled": bool(gil()) if gil is not None else True,
        "executable": sys.executable,
        "loadavg_at_start": load,
        "engine": engine_build(),
        "versions": {
            name: version_of(name)
            for name in ("cstrie", "cffi", "paho-mqtt", "matplotlib", "pytest-benchmark")
        },
    }
