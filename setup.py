"""Build hook: setuptools needs setup() to run the cffi builder (cffi_modules)
and to build the CPython fast path (cstrie._hotpath, see native/hotpath/)."""

import platform

from setuptools import Extension, setup

HOTPATH = Extension(
    "cstrie._hotpath",
    sources=[f"native/hotpath/{name}.c" for name in ("module", "registry", "reader", "groups")],
    include_dirs=["native"],
    depends=[
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
