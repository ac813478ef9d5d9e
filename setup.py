"""Build hook: setuptools needs setup() to run the cffi builder (cffi_modules)."""

from setuptools import setup

setup(cffi_modules=["cstrie/_build.py:ffibuilder"])
