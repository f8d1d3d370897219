"""Removing what a test created on the broker: every topic under the test's unique prefix."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from horae.kafka.config import client_config

# A prefix shorter than this cannot be a test's own: refuse rather than delete a shared topic.
MIN_PREFIX_LENGTH = 8


def topics_under(admin: AdminClient, prefix: str) -> list[str]:
    """Names of the topics that start with ``prefix``."""
    return sorted(name for name in admin.list_topics(timeout=30).topics if name.startswith(prefix))


def delete_topics_under(bootstrap: str, prefix: str) -> list[str]:
    """Delete every topic whose name starts with ``prefix`` and wait until the broker confirms;
    return their names. A topic already gone is fine; any other failure raises."""
    if len(prefix) < MIN_PREFIX_LENGTH:
        raise ValueError(f"refusing to delete topics under the short prefix {prefix!r}")
    admin = AdminClient(client_config(bootstrap, {"log_level": 3}))
    names = topics_under(admin, prefix)
    if not names:
        return []
    for future in admin.delete_topics(names, operation_timeout=30).values():
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return names
