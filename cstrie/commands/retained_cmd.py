"""``cstrie retained``: which stored topics does a filter match?

    cstrie retained --dialect mqtt --filter 'sensors/+/temp' retained.tsv
    cstrie retained --dialect mqtt --filter 'sensors/#' --filter '#' --count < retained.tsv

The question a broker asks for retained messages (a client subscribes to
``sensors/+/temp``: which retained topics does it get?), answered by a
:class:`cstrie.topics.TopicIndex` built from TOPICS: a file, or standard input
when TOPICS is ``-`` or missing, of one stored topic per line, optionally
followed by a tab and its value (``TOPIC<TAB>VALUE``; the value is the rest
of the line).  A trailing ``\\r`` is dropped, blank lines are skipped, and a
topic given twice keeps its last value.

Output, for each ``--filter`` in order (its matches in no particular order
unless ``--sort``): one line per matching topic, ``TOPIC`` or
``TOPIC<TAB>VALUE`` when the topic had a value; with two filters or more each
line starts with ``FILTER<TAB>``.  ``--count`` prints the number of matches
instead (``N``, or ``FILTER<TAB>N``).  ``--json`` writes JSON Lines instead:
``{"filter": F, "topic": T, "value": V}`` (``V`` null without a value) or
``{"filter": F, "count": N}``.

TOPICS may also be a topic index export (``TopicIndex.export``, any format;
told by ``--input-format``, the suffix or the first bytes): its topics, values
and dialect are loaded as written (``--dialect``, when given, must be the
file's).  A subscription export is refused.  Values that are bytes print as
their Python repr, and as ``{"bytes": "<base64>"}`` with ``--json``.

Exit codes: 0 done (also when nothing matched); 2 bad usage, an invalid
filter (named), an invalid or non-UTF-8 input line (its line number is given),
a corrupt or truncated export, or unreadable input: nothing is written then.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

from cstrie.dialect import Dialect, resolve_dialect
from cstrie.topics import TopicIndex


def read_topics(lines: Iterable[bytes], index: TopicIndex, name: str) -> int:
    """Store every ``TOPIC[<TAB>VALUE]`` line of ``lines`` in ``index`` (value
    ``None`` without a tab); the number of lines stored.  ``ValueError``
    naming ``name`` and the line number for an invalid or non-UTF-8 line."""
    put = index.put
    stored = 0
    for lineno, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}:{lineno}: not UTF-8 text ({exc.reason})") from None
        line = line.removesuffix("\n").removesuffix("\r")
        if not line:
            continue
        topic, tab, value = line.partition("\t")
        try:
            put(topic, value if tab else None)
        except ValueError as exc:
            raise ValueError(f"{name}:{lineno}: {exc}") from None
        stored += 1
    return stored


def _open(path: str | None) -> tuple[IO[bytes], str]:
    if path in (None, "-"):
        return sys.stdin.buffer, "<stdin>"
    assert path is not None
    return open(path, "rb"), path


def _matches(index: TopicIndex, filt: str, sort: bool) -> Iterator[tuple[str, Any]]:
    found = index.query(filt)
    return iter(sorted(found, key=lambda pair: pair[0])) if sort else found


#: the first bytes of a JSON Lines export's header as cstrie writes it
_JSONL_HEAD = re.compile(rb'\{\s*"format"\s*:\s*"cstrie-')


def source_format(path: str | None, choice: str = "auto") -> str:
    """``"text"`` or the export format (jsonl, parquet, binary) of TOPICS:
    ``--input-format``, else the suffix (.tsv/.txt/.tab: text), else the
    first bytes (a binary or Parquet export's magic, a JSON Lines export's
    header), else text."""
    from cstrie.commands._common import TEXT_SUFFIXES
    from cstrie.export import _from_suffix
    from cstrie.export.binary import MAGIC

    if choice != "auto":
        return choice
    if path not in (None, "-"):
        assert path is not None
        if path.lower().endswith(TEXT_SUFFIXES):
            return "text"
        fmt = _from_suffix(path)
        if fmt is not None:
            return fmt
        with open(path, "rb") as f:
            head = f.read(64)
    else:
        stdin = sys.stdin.buffer
        head = stdin.peek(64)[:64] if hasattr(stdin, "peek") else b""
    if head.startswith(MAGIC):
        return "binary"
    if head.startswith(b"PAR1"):
        return "parquet"
    if _JSONL_HEAD.match(head):
        return "jsonl"
    return "text"


def _check_filters(dialect: Dialect, filters: list[str]) -> None:
    probe = TopicIndex(dialect)
    for f in filters:
        try:
            probe.count(f)
        except ValueError as exc:
            raise ValueError(f"argument --filter: {exc}") from None


def run(args: argparse.Namespace) -> int:
    fmt = source_format(args.topics, args.input_format)
    if fmt != "text":
        from cstrie.commands._common import TOPICS, read_source

        # a topic index export carries its dialect (--dialect, when given,
        # must be the same); its records are loaded whole, then the filters
        # are checked, before anything is written
        index, _ = read_source(args.topics or "-", args.dialect, fmt, (TOPICS,))
        _check_filters(index.dialect, args.filter)
    else:
        dialect = resolve_dialect(args.dialect or "amqp")
        # every filter is checked before anything is read or written
        _check_filters(dialect, args.filter)
        index = TopicIndex(dialect)
        stream, name = _open(args.topics)
        try:
            read_topics(stream, index, name)
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()

    out = sys.stdout
    prefix = len(args.filter) > 1
    dumps = json.dumps
    for f in args.filter:
        if args.count:
            n = index.count(f)
            if args.json:
                out.write(dumps({"filter": f, "count": n}) + "\n")
            else:
                out.write(f"{f}\t{n}\n" if prefix else f"{n}\n")
            continue
        lines: list[str] = []
        for topic, value in _matches(index, f, args.sort):
            if args.json:
                lines.append(dumps({"filter": f, "topic": topic, "value": _json(value)}))
            else:
                text = topic if value is None else f"{topic}\t{value}"
                lines.append(f"{f}\t{text}" if prefix else text)
            if len(lines) >= 4096:
                out.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            out.write("\n".join(lines) + "\n")
    out.flush()
    return 0


def _json(value: Any) -> Any:
    """A value as JSON: None, str and int as they are, bytes (from a topic
    index export) as ``{"bytes": "<base64>"}``."""
    if value is None or type(value) in (str, int):
        return value
    from cstrie.export.codec import json_value

    return json_value(value) if type(value) is bytes else repr(value)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "retained",
        help="the stored topics (file or stdin) that filters match: retained messages",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "topics",
        nargs="?",
        help="file of TOPIC or TOPIC<TAB>VALUE lines, or a topic index export (default/- = stdin)",
    )
    p.add_argument(
        "-f",
        "--filter",
        action="append",
        metavar="FILTER",
        required=True,
        help="a filter to answer (repeatable)",
    )
    p.add_argument(
        "--dialect",
        help="amqp (default), mqtt or nats; an export carries its own (then --dialect must match)",
    )
    p.add_argument(
        "--input-format",
        choices=("auto", "text", "jsonl", "parquet", "binary"),
        default="auto",
        help="TOPICS is text or a topic index export (default: from the suffix or first bytes)",
    )
    p.add_argument("-c", "--count", action="store_true", help="print the number of matches only")
    p.add_argument("--sort", action="store_true", help="sort each filter's matches by topic")
    p.add_argument("--json", action="store_true", help="write JSON Lines")
    p.set_defaults(func=run)
