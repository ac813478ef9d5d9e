"""docs/shared-subscriptions.md: its runnable example runs as written (so the
page stays true)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "shared-subscriptions.md"


def test_the_broker_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the page has one runnable example"
    exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "docs_example"})
