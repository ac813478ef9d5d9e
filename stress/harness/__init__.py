"""Stress harness for cstrie: proof under contention.

Run ``python -m stress.harness --help`` from the repository root (or
``python stress/run_harness.py``).  The parts, one module per concept:

* :mod:`~stress.harness.workload` -- the seeded key space (patterns, topics,
  owned and shared subscribers) and per-thread operation sequences;
* :mod:`~stress.harness.clock` -- the shared atomic counter stamping operations;
* :mod:`~stress.harness.impls` -- cstrie and the two baselines (PyTrie, cstrie
  behind one global lock), bound per thread;
* :mod:`~stress.harness.runner` -- timed and recorded multithreaded runs;
* :mod:`~stress.harness.history` -- what a recorded run leaves;
* :mod:`~stress.harness.checker` -- the checks: own writes, snapshots,
  per-subscriber linearizability, lookup_many rows of one state, final state;
* :mod:`~stress.harness.report`, :mod:`~stress.harness.progress` -- output;
* :mod:`~stress.harness.cli` -- the command line;
* the ``groups`` scenario (``--scenario groups``; share groups routed while
  members join and leave, then the round-robin spread):
  :mod:`~stress.harness.groups` (design and runs),
  :mod:`~stress.harness.group_checker` (checks),
  :mod:`~stress.harness.group_cli` (its part of the command line);
* the ``topics`` scenario (``--scenario topics``; a TopicIndex put, removed
  and popped while threads get, query, count and snapshot it):
  :mod:`~stress.harness.topics` (design and runs),
  :mod:`~stress.harness.topic_checker` (checks),
  :mod:`~stress.harness.topic_cli` (its part of the command line);
* the ``selectors`` scenario (``--scenario selectors``; a SelectorIndex
  added to and removed from while threads look up, live and on snapshots):
  :mod:`~stress.harness.selectors` (runs, checks and command line).
* the ``content`` scenario (``--scenario content``; a ContentIndex bound and
  unbound while threads match messages on it and on its snapshots):
  :mod:`~stress.harness.content` (design and runs),
  :mod:`~stress.harness.content_checker` (checks),
  :mod:`~stress.harness.content_cli` (its part of the command line).
"""

from stress.harness.checker import CheckReport, Violation, check_history
from stress.harness.history import History, OpError, SnapshotView, ThreadHistory

__all__ = [
    "CheckReport",
    "History",
    "OpError",
    "SnapshotView",
    "ThreadHistory",
    "Violation",
    "check_history",
]
