"""The local stack: a real Apache Kafka 4 broker (from Maven Central jars) and a throwaway
PostgreSQL cluster (from Debian's server packages), both on loopback, their data kept under the
state directory (``Settings.state_dir``, by default ``horae.paths.default_state_dir()``), the Kafka
jars under the cache directory (``horae.paths.default_cache_dir()``). Used by ``horae dev`` and by
the integration test fixtures.

Failures a developer can fix (no Java, Maven unreachable, a port taken, no PostgreSQL server)
raise :class:`StackError` with what is wrong and what to do; the CLI prints it without a traceback.
"""

from __future__ import annotations


class StackError(RuntimeError):
    """A local-stack failure with an actionable message."""
