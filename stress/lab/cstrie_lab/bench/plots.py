"""Plot helpers shared by the suite's scenarios (matplotlib, PNG, small files).

Only called from a scenario's ``plot`` callable, which :func:`cstrie_lab.bench.report.plot_all`
runs after selecting the ``Agg`` backend (and skips, with a note, without matplotlib).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DPI", "grouped_bars", "hbars", "lines", "save"]

DPI = 80


def save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def grouped_bars(
    path: Path,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    ylabel: str,
    title: str,
    log: bool = False,
) -> None:
    """One group of bars per entry of ``groups``, one bar per series (None: no bar)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    n = max(len(series), 1)
    width = 0.8 / n
    for j, (name, ys) in enumerate(series.items()):
        xs = [i + j * width for i, y in enumerate(ys) if y is not None and y == y]
        vals = [y for y in ys if y is not None and y == y]
        ax.bar(xs, vals, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    save(fig, path)


def hbars(
    path: Path,
    values: Mapping[str, float],
    *,
    xlabel: str,
    title: str,
    log: bool = False,
    highlight: str | None = None,
) -> None:
    """One horizontal bar per entry, values printed at the bars' ends."""
    import matplotlib.pyplot as plt

    names = list(values)
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
    colors = ["tab:red" if n == highlight else "tab:blue" for n in names]
    ax.barh(names, [values[n] for n in names], color=colors)
    for i, n in enumerate(names):
        ax.text(values[n], i, f" {values[n]:,.0f}", va="center", fontsize=7)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    save(fig, path)


def lines(
    ax: Any,
    xs: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    loglog: bool = False,
) -> None:
    """One line per series on ``ax`` (None or NaN points are left out)."""
    for name, ys in series.items():
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None and y == y]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    if loglog:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
