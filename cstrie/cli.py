"""The ``cstrie`` command.

Subcommands register themselves through ``add_parser(subparsers)`` functions in
their own modules, so this file only wires them together:

* ``cstrie export`` - convert a subscription file to jsonl/parquet/binary
* ``cstrie load``   - verify an export, summarise it or convert it back
* ``cstrie tree``   - the subscription tree as text, JSON, DOT, PNG or SVG
* ``cstrie stats``  - statistics of a subscription file
* ``cstrie match``  - match topics from a file or stdin, JSON Lines out
* ``cstrie relate`` - is pattern A a subset of B, do they intersect (ACL checks)
* ``cstrie retained`` - the stored topics that filters match (a topic index)
* ``cstrie selectors`` - match topics against a selector file, or its stats
  (these eight: :mod:`cstrie.commands`, one module each)
* ``cstrie spark-match`` - match a message log with Spark

Other installed distributions add subcommands through the entry point group
``cstrie.commands`` (:data:`PLUGIN_GROUP`): each entry point names a callable
that takes the subparsers and adds the subcommand of the entry point's name,
as the modules above do.  A plugin never replaces a built-in subcommand, and
one that fails to load becomes a subcommand that says why.  The benchmark lab
(``stress/lab``) adds ``cstrie demo``, the README's main job, and ``cstrie
bench`` this way; the subcommands of :data:`PLUGIN_HINTS` say how to install
the distribution that provides them when none does.

Exit codes: 0 success, 1 a check or comparison failed, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

#: the entry point group of plugin subcommands
PLUGIN_GROUP = "cstrie.commands"

#: subcommands that another distribution provides: what to install when none does
PLUGIN_HINTS = {
    "bench": "the benchmark lab: pip install -e stress/lab (from a cstrie source checkout)",
    "demo": "the benchmark lab: pip install -e stress/lab (from a cstrie source checkout)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = PlainHelpParser(
        prog="cstrie",
        description="Lock-free concurrent subscription trie: topic matching for AMQP, "
        "MQTT and NATS.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=PlainHelpParser)
    sub.required = True
    try:
        from cstrie import commands
    except ImportError:  # pragma: no cover - a build that left the subpackage out
        pass
    else:
        commands.add_parsers(sub)
        try:
            from cstrie.commands import spark_match_cmd
        except ImportError:  # pragma: no cover - installed without the spark command
            pass
        else:
            spark_match_cmd.add_parser(sub)
    add_plugins(sub, plugin_entry_points())
    return parser


def plugin_entry_points() -> list[metadata.EntryPoint]:
    """The installed entry points of :data:`PLUGIN_GROUP`, by name."""
    return sorted(metadata.entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name)


def add_plugins(sub: Any, entry_points: Iterable[metadata.EntryPoint]) -> None:
    """Add the plugin subcommands of ``entry_points`` whose names are free, then
    a stub for each subcommand of :data:`PLUGIN_HINTS` that is still missing."""
    for ep in entry_points:
        if ep.name in sub.choices:
            continue
        try:
            add_parser = ep.load()
            add_parser(sub)
        except Exception as exc:  # a broken plugin leaves the other subcommands working
            if ep.name not in sub.choices:
                _add_stub(sub, ep.name, f"the plugin {ep.value} failed to load: {exc}")
    for name, hint in PLUGIN_HINTS.items():
        if name not in sub.choices:
            _add_stub(sub, name, f"not installed; it comes with {hint}")


def _add_stub(sub: Any, name: str, message: str) -> None:
    """A subcommand that takes any arguments, prints ``message`` and exits 2."""

    def run(args: argparse.Namespace) -> int:
        print(f"cstrie {name}: {message}", file=sys.stderr)
        return EXIT_USAGE

    p = sub.add_parser(name, help="(not available here: run it to see why)", add_help=False)
    p.set_defaults(func=run, any_arguments=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or EXIT_OK)
    except (ValueError, TypeError, OSError) as exc:
        print(f"cstrie {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


# ---------------------------------------------------------------- help text
# A subcommand's description is its module's docstring, in the RST that every
# docstring here is written in; the parsers print it as plain text.

# :role:`target`, :role:`~mod.name` (shown: name), :role:`title <target>`
_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(~?)([^`<]*?)(?:\s*<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_DEFAULT_ROLE = re.compile(r"(?<![`\w])`([^`\n]+)`(?![`\w])")
# the "::" at the end of a line that introduces a literal block
_BLOCK = re.compile(r"(\S?)([ \t]*)::$", re.MULTILINE)


def plain(text: str) -> str:
    """``text`` (a docstring or a help string, RST) as plain text for a terminal.

    Roles show their text (``:mod:`cstrie.demo``` -> ``cstrie.demo``;
    ``:class:`~cstrie.topics.TopicIndex``` -> ``TopicIndex``; ``:meth:`title
    <target>``` -> ``title``), inline literals and default-role text lose their
    backquotes, and the ``::`` that introduces a literal block becomes ``:``
    after a word (``order::`` -> ``order:``) and goes after a space or alone
    on its line.  Everything else, the layout included, is kept.

    >>> plain("``cstrie export``: see :func:`cstrie.export.export`::")
    'cstrie export: see cstrie.export.export:'
    """
    text = _ROLE.sub(lambda m: m.group(2).rpartition(".")[2] if m.group(1) else m.group(2), text)
    text = _LITERAL.sub(r"\1", text)
    text = _DEFAULT_ROLE.sub(r"\1", text)
    return _BLOCK.sub(lambda m: m.group(1) + ("" if m.group(2) or not m.group(1) else ":"), text)


class PlainHelpParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose ``--help`` is plain text (:func:`plain`):
    the ``cstrie`` command's parser and, through ``add_subparsers``, every
    subcommand's."""

    def format_help(self) -> str:
        return plain(super().format_help())


if __name__ == "__main__":
    sys.exit(main())
