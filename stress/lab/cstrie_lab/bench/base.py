"""The types every scenario shares: its context, its result, floors and tables."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cstrie_lab.bench.progress import Progress

__all__ = [
    "BenchError",
    "Context",
    "Floor",
    "MissingDependency",
    "Result",
    "Scenario",
    "Table",
]


class BenchError(RuntimeError):
    """A scenario could not produce a trustworthy number (e.g. matchers disagree)."""


class MissingDependency(BenchError):
    """An optional package a scenario needs is not installed."""


@dataclass
class Floor:
    """A performance floor from the issue, checked against a measured value.

    ``kind`` is ``"max"`` (measured must be <= limit) or ``"min"`` (>= limit).
    ``standard`` is False when the value was measured in other conditions than
    the floor is defined for (by default: other sizes, from ``--quick`` or
    ``--sizes``); it is then indicative only, and ``indicative`` says why.
    """

    name: str
    description: str
    measured: float
    limit: float
    kind: str = "max"
    unit: str = "x"
    standard: bool = True
    indicative: str = "non-standard sizes"

    @property
    def passed(self) -> bool:
        if math.isnan(self.measured):
            return False
        if self.kind == "max":
            return self.measured <= self.limit
        return self.measured >= self.limit

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "measured": self.measured,
            "limit": self.limit,
            "kind": self.kind,
            "unit": self.unit,
            "standard": self.standard,
            "indicative": None if self.standard else self.indicative,
            "passed": self.passed,
        }


@dataclass
class Table:
    """A result table for the terminal and the docs (cells already formatted)."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": self.columns, "rows": self.rows}


@dataclass
class Result:
    """What one scenario run produced."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    floors: list[Floor] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "params": self.params,
            "tables": [t.to_dict() for t in self.tables],
            "floors": [f.to_dict() for f in self.floors],
            "data": self.data,
            "notes": self.notes,
            "seconds": self.seconds,
            "error": self.error,
        }


@dataclass
class Context:
    """Options a scenario runs with.

    ``sizes`` is the ``--sizes`` override for this scenario (None: its defaults);
    ``repeat`` the ``--repeat`` override.  Each scenario gets its own
    :class:`random.Random` seeded from ``seed`` and its name, so running one
    scenario alone gives the same workload as running it among others.
    """

    seed: int
    quick: bool = False
    sizes: list[int] | None = None
    repeat: int | None = None
    progress: Progress = field(default_factory=Progress)
    plots: Path | None = None

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}:{name}")

    def pick_sizes(self, default: Sequence[int], quick: Sequence[int]) -> tuple[list[int], bool]:
        """The sizes to run and whether they are the standard (floor) sizes."""
        if self.sizes:
            chosen = list(self.sizes)
            return chosen, chosen == list(default)
        if self.quick:
            return list(quick), list(quick) == list(default)
        return list(default), True

    def pick_repeat(self, default: int, quick: int) -> int:
        if self.repeat:
            return self.repeat
        return quick if self.quick else default


@dataclass(frozen=True)
class Scenario:
    """A registered scenario: ``run(ctx) -> Result``, optional ``plot``."""

    name: str
    summary: str
    run: Callable[[Context], Result]
    plot: Callable[[Result, Path], list[Path]] | None = None
    subprocess: bool = False
