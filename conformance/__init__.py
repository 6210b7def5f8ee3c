"""Protocol conformance: the same request bytes to Kafka 2.8.2 and to kafkasim, the answers compared field by field.

docs/conformance.md explains use and how to add a case.  Modules: ``compare`` (the pure, recursive comparison),
``wire`` (requests and responses on kafka-python's protocol classes), ``side`` (one cluster as the suite drives it:
routing and setup steps), ``cases`` and ``table_*`` (the declarative cases), ``clusters`` (both clusters up and
down), ``runner`` (running cases, the table, the fixes).
"""
