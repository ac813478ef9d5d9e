"""Build hook: setuptools needs setup() to run the cffi builder (cffi_modules)
and to build the CPython fast path (cstrie._hotpath, see native/hotpath/)."""

import platform
import runpy
from pathlib import Path

from setuptools import Extension, setup

# native/sources.mk lists the fast path's sources (read by cstrie/_build.py).
native_sources = runpy.run_path(str(Path(__file__).parent / "cstrie" / "_build.py"))[
    "native_sources"
]

HOTPATH = Extension(
    "cstrie._hotpath",
    sources=[f"native/{name}" for name in native_sources("HOTPATH_SOURCES")],
    include_dirs=["native"],
    depends=[
        "native/sources.mk",
        "native/hotpath/hotpath.h",
        "native/hotpath/compat.h",
        "native/hotpath_api.h",
        "native/cstrie.h",
        "native/mix64.h",
    ],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra"]
    + (["-mpopcnt"] if platform.machine() in ("x86_64", "AMD64") else []),
)

setup(cffi_modules=["cstrie/_build.py:ffibuilder"], ext_modules=[HOTPATH])
