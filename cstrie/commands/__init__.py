"""The ``cstrie`` subcommands that work on subscription files.

One module per subcommand (``export``, ``load``, ``tree``, ``stats``,
``match``, ``relate``, which compares two patterns rather than reading a
file, ``retained``, which reads stored topics rather than
subscriptions, ``selectors``, which reads selector files of a
:class:`~cstrie.selectors.SelectorIndex`, and ``content``, for content
subscription files), each with ``add_parser(subparsers)``; :func:`add_parsers`
registers them all.  What they share (reading a subscription file, the common
options) is in :mod:`cstrie.commands._common`.

A *subscription file* is either an export (JSON Lines, Parquet or binary; told
by suffix, then by its first bytes) or a text file of ``PATTERN<TAB>SUBSCRIBER``
lines (subscribers are strings; the dialect comes from ``--dialect``).  ``-``
reads standard input.  ``export``, ``load``, ``tree`` and ``stats`` also read
a *topic index export* (a :class:`cstrie.TopicIndex` written by
:func:`cstrie.export.export`: its header says so, :func:`read_source`);
``retained`` reads those or topic text; ``match`` refuses them.

Exit codes (for scripts): 0 success; 1 the command ran but something failed
(``match``: some topics were invalid; ``tree``: Graphviz could not draw);
2 bad usage or unreadable, corrupt or invalid input (nothing was written).
"""

from __future__ import annotations

from typing import Any

from cstrie.commands._common import add_common, read_source, read_subscriptions

__all__ = ["add_common", "add_parsers", "read_source", "read_subscriptions"]


def add_parsers(sub: Any) -> None:
    from cstrie.commands import (
        content_cmd,
        export_cmd,
        load_cmd,
        match_cmd,
        relate_cmd,
        retained_cmd,
        selectors_cmd,
        stats_cmd,
        tree_cmd,
    )

    for module in (
        export_cmd,
        load_cmd,
        tree_cmd,
        stats_cmd,
        match_cmd,
        relate_cmd,
        retained_cmd,
        selectors_cmd,
        content_cmd,
    ):
        module.add_parser(sub)
