# Types of the cffi extension that cstrie/_build.py compiles from native/:
# ffi is its cffi.FFI instance, lib the engine's C functions and constants
# (cstrie/_build.py reads their declarations from native/cstrie.h).
from typing import Any

ffi: Any
lib: Any
