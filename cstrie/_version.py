"""The package's version (``cstrie.__version__``), in a module that imports
nothing, so that the formats can name their writer without importing the
package's ``__init__`` (which imports them on first use)."""

__version__ = "0.1.0"
