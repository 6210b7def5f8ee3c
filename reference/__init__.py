"""Kafka 2.8.2 itself, run beside kafkasim as its reference (docs/reference.md)."""
