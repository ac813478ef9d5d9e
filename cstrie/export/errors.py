"""Errors of the export formats."""

from __future__ import annotations

__all__ = ["FormatError"]


class FormatError(ValueError):
    """A file is not a valid cstrie export: truncated, corrupt, of an unknown
    format or of a newer format version.  Nothing was built when it is raised."""
