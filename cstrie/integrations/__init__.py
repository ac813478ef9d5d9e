"""cstrie inside existing message brokers.

Each submodule plugs a :class:`cstrie.Trie` into one broker library's routing,
keeping that library's own clients and API:

* :mod:`cstrie.integrations.kombu` - topic exchanges of kombu's virtual
  transports (memory, Redis, SQS, ...), as used by Celery.
* :mod:`cstrie.integrations.amqtt` - the asyncio MQTT broker amqtt: its
  PUBLISH routing, retained messages (a :class:`cstrie.TopicIndex`) and
  session cleanup.

A submodule imports its broker library when it is imported, and raises
``ImportError`` naming the extra to install (``pip install 'cstrie[kombu]'``)
when the library is missing.  See ``docs/brokers.md``.
"""
