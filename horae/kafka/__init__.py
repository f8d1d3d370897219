"""Kafka adapters shared by the stream processors (confluent-kafka / librdkafka)."""
