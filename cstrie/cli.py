"""The ``cstrie`` command.

Subcommands register themselves through ``add_parser(subparsers)`` functions in
their own modules, so this file only wires them together:

* ``cstrie demo``   - the README's main job (:mod:`cstrie.demo`)
* ``cstrie export`` - convert a subscription file to jsonl/parquet/binary
* ``cstrie load``   - verify an export, summarise it or convert it back
* ``cstrie tree``   - the subscription tree as text, JSON, DOT, PNG or SVG
* ``cstrie stats``  - statistics of a subscription file
* ``cstrie match``  - match topics from a file or stdin, JSON Lines out
* ``cstrie relate`` - is pattern A a subset of B, do they intersect (ACL checks)
* ``cstrie retained`` - the stored topics that filters match (a topic index)
  (these seven: :mod:`cstrie.commands`, one module each)
* ``cstrie bench``  - the benchmark suite (:mod:`cstrie.bench`)

Exit codes: 0 success, 1 a check or comparison failed, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cstrie",
        description="Lock-free concurrent subscription trie: topic matching for AMQP, "
        "MQTT and NATS.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from cstrie import demo

    demo.add_parser(sub)
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
    try:
        from cstrie import bench
    except ImportError:  # pragma: no cover - the bench package is optional
        return parser
    if hasattr(bench, "add_parser"):
        bench.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or EXIT_OK)
    except (ValueError, TypeError, OSError) as exc:
        print(f"cstrie {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
