"""``cstrie demo`` (``make demo``) on a tiny workload: it runs, checks that the three
tries agree, and prints subscribe/unsubscribe and lookup rates with the ratios
for cstrie, PyTrie and the hand-written dict trie.  No assertion on any rate."""

from __future__ import annotations

import re

import pytest

from cstrie.cli import main
from cstrie_lab.demo import TRIES


def test_demo_prints_every_trie_and_the_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--filters", "600", "--topics", "300", "--seconds", "0.05"]) == 0
    out = capsys.readouterr().out
    writes, lookups = out.split("\nlookup (")
    for label in TRIES:
        assert re.search(rf"{re.escape(label)} +[\d,]+ subscribes/s +[\d,]+ unsubscribes/s", writes)
        assert re.search(rf"{re.escape(label)} +[\d,]+ topics/s", lookups)
    assert len(re.findall(r"time / cstrie: \d+\.\d\dx", writes)) == 2
    assert re.search(r"as fast as PyTrie and \d+\.\dx as fast as the dict trie", lookups)
    assert "snapshot: " in lookups


def test_demo_reports_a_mismatch(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cstrie_lab.classic.dict_trie import DictTrie

    monkeypatch.setattr(DictTrie, "lookup", lambda self, topic: [])
    assert main(["demo", "--filters", "300", "--topics", "100", "--seconds", "0.02"]) == 1
    assert "MISMATCH" in capsys.readouterr().err
