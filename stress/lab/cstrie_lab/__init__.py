"""The benchmark lab of cstrie: what cstrie is measured and checked against.

* :mod:`cstrie_lab.pytrie`: :class:`~cstrie_lab.pytrie.PyTrie`, the pure-Python
  trie behind one lock (also the reference trie of the tests and the stress
  harness);
* :mod:`cstrie_lab.classic`: the classic topic matchers (naive scan, inverted
  bitmaps, locked trie, regex per binding, paho-mqtt) and the hand-written
  dict-per-level trie;
* :mod:`cstrie_lab.bench`: ``cstrie bench``, the benchmark scenarios;
* :mod:`cstrie_lab.demo`: ``cstrie demo``, the README's main job;
* :mod:`cstrie_lab.spark`: the Spark pipeline's baselines (rlike, PyTrie).

It is the distribution ``cstrie-lab`` (``stress/lab``), installed beside the
library (``pip install -e . -e stress/lab``); ``cstrie bench`` and ``cstrie
demo`` come from its entry points in the group ``cstrie.commands``.
"""
