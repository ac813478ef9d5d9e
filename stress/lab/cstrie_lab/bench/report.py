"""Printing results (Markdown tables), writing JSON, drawing plots."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from cstrie_lab.bench.base import Floor, Result, Scenario, Table

__all__ = ["floors_table", "markdown", "plot_all", "print_result", "write_json"]


def markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table with aligned columns."""
    cols = table.columns
    widths = [len(c) for c in cols]
    for row in table.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [
        f"**{table.title}**",
        "",
        line(cols),
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    out.extend(line(r) for r in table.rows)
    return "\n".join(out)


def floors_table(floors: Sequence[tuple[str, Floor]]) -> Table:
    t = Table("Floors", ["scenario", "floor", "measured", "limit", "verdict"])
    for scenario, f in floors:
        op = "<=" if f.kind == "max" else ">="
        value = (
            f"{f.measured:.2f}{f.unit}" if f.unit in ("x", "%") else f"{f.measured:.0f} {f.unit}"
        )
        limit = (
            f"{op} {f.limit:g}{f.unit}" if f.unit in ("x", "%") else f"{op} {f.limit:g} {f.unit}"
        )
        verdict = f.verdict if f.standard else f"{f.verdict} (indicative: {f.indicative})"
        t.add(scenario, f.description, value, limit, verdict)
    return t


def print_result(res: Result, stream: TextIO | None = None) -> None:
    out = stream if stream is not None else sys.stdout
    out.write(f"\n## {res.name}  ({res.seconds:.1f}s)\n\n")
    if res.error:
        out.write(f"ERROR: {res.error}\n")
    for table in res.tables:
        out.write(markdown(table) + "\n\n")
    for note in res.notes:
        out.write(f"Note: {note}\n")
    out.flush()


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def plot_all(results: Sequence[tuple[Scenario, Result]], out: Path) -> list[Path]:
    """Draw every scenario's plot into ``out``; [] (and a warning) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print(
            "cstrie bench: matplotlib is not installed; no plots drawn (pip install matplotlib)",
            file=sys.stderr,
        )
        return []
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for scenario, res in results:
        if scenario.plot is None or not res.data:
            continue
        try:
            paths.extend(scenario.plot(res, out))
        except Exception as exc:  # a broken plot must not lose the measurements
            print(f"cstrie bench: plot for {res.name} failed: {exc!r}", file=sys.stderr)
    return paths
