"""cffi build script: compiles the C engine in ``native/`` into ``cstrie._native``.

The cdef is read from ``native/cstrie.h`` itself (preprocessor lines dropped), so
the C header stays the single declaration of the interface.

On a free-threaded interpreter (``Py_GIL_DISABLED``) the module is built with
``_CFFI_NO_LIMITED_API``: the limited API is not available there
(docs/free-threading.md).
"""

from __future__ import annotations

import platform
import re
import sysconfig
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"


def native_sources(name: str) -> list[str]:
    """The files listed as ``name`` (``ENGINE_SOURCES``, ``HOTPATH_SOURCES``) in
    ``native/sources.mk``, the one list of the engine's sources that the
    Makefiles include too; relative to ``native/``."""
    text = (NATIVE / "sources.mk").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        found = re.match(rf"{name}\s*:=(.*)", line)
        if found:
            return found.group(1).split()
    raise LookupError(f"native/sources.mk lists no {name}")


def cdef_from_header(text: str) -> str:
    """The declarations of ``cstrie.h`` in the form cffi's cdef parser accepts."""
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        match = re.match(r"#define\s+(CST_\w+)\s+\(?(-?\w+)\)?", stripped)
        if match:
            out.append(f"#define {match.group(1)} {match.group(2)}")
        elif stripped.startswith("#"):
            continue
        else:
            out.append(line)
    return "\n".join(out)


FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

ffibuilder = FFI()
ffibuilder.cdef(cdef_from_header((NATIVE / "cstrie.h").read_text()))
ffibuilder.set_source(
    "cstrie._native",
    '#include "cstrie.h"',
    sources=[str((NATIVE / name).relative_to(ROOT)) for name in native_sources("ENGINE_SOURCES")],
    include_dirs=[str(NATIVE.relative_to(ROOT))],
    define_macros=[("_GNU_SOURCE", None)]
    + ([("_CFFI_NO_LIMITED_API", None)] if FREE_THREADED else []),
    # -mpopcnt: the hash tries index their bitmaps with popcount; without it gcc
    # calls a library routine (every x86-64 CPU of the last 15 years has it).
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra"]
    + (["-mpopcnt"] if platform.machine() in ("x86_64", "AMD64") else []),
    libraries=["pthread"],
    py_limited_api=False if FREE_THREADED else None,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
