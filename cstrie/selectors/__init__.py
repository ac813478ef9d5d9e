"""Selector index: subscriptions a topic trie cannot index.

Redis glob patterns (as ``PSUBSCRIBE``), URI templates (as Mercure), regular
expressions (linear-time) and exact topics, matched against topics with the
skipfilter's per-topic result cache.  See :class:`SelectorIndex`,
docs/api.md and docs/design.md ("Selector index").

>>> from cstrie.selectors import SelectorIndex
>>> idx = SelectorIndex()
>>> idx.add("dashboard", "sensors.*.temp", "glob")
True
>>> idx.lookup("sensors.kitchen.temp")
['dashboard']
"""

from cstrie.selectors.index import SelectorIndex, SelectorSnapshot
from cstrie.selectors.kinds import KINDS, Selector, compile_selector

__all__ = ["KINDS", "Selector", "SelectorIndex", "SelectorSnapshot", "compile_selector"]
