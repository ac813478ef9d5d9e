"""cffi build script: compiles the C engine in ``native/`` into ``cstrie._native``.

The cdef is read from ``native/cstrie.h`` itself (preprocessor lines dropped), so
the C header stays the single declaration of the interface.

On a free-threaded interpreter (``Py_GIL_DISABLED``) the module is built with
``_CFFI_NO_LIMITED_API``: the limited API is not available there (DESIGN.md).
"""

from __future__ import annotations

import platform
import re
import sysconfig
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"
SOURCES = [
    "alloc.c",
    "ebr.c",
    "subset.c",
    "words.c",
    "trie.c",
    "match.c",
    "reverse.c",
    "walk.c",
    "build.c",
    "numbering.c",
    "tables.c",
    "hotpath_api.c",
]


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
    sources=[str((NATIVE / name).relative_to(ROOT)) for name in SOURCES],
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
