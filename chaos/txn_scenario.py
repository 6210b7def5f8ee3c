"""A scenario's transactional workload (``workload.transactions``): exactly-once consume-transform-produce.

    workload:
      producers: {count: 1, topic: tx-in, rate: 40}   # the input (acks=all; each value once)
      transactions:
        input: tx-in                 # what the pipelines read (read_committed) ...
        output: tx-out               # ... and write, one record per input record, in transactions
        group: eos                   # the pipelines' consumer group (its offsets go in the transactions)
        transactional.id: eos        # the pipelines' transactional ids: eos-0, eos-1, ...
        pipelines: 1                 # 1..8
        client: confluent-kafka      # confluent-kafka (librdkafka) or java (Kafka 2.8.2's Java client)
        max.records: 20              # input records per transaction (at most)
        transaction.timeout.ms: 10000
        readers: 1                   # read_committed consumers of the output, recording what they read
        zombie.interval.ms: [8000, 12000]   # optional (confluent-kafka): a pipeline freezes before a commit
        zombie.ms: 3000                     # ...this long while a new one takes its transactional id over

Every key is checked, as the rest of a scenario (chaos/scenario.py).  Faults can be aimed at
``txn-coordinator:<transactional id>`` (one of the pipelines').
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

TXN_CLIENTS = ("confluent-kafka", "java")


@dataclass(frozen=True)
class TxnSpec:
    input: str
    output: str
    group: str
    transactional_id: str = "eos"
    pipelines: int = 1
    client: str = "confluent-kafka"
    max_records: int = 20
    transaction_timeout_ms: int = 10000
    readers: int = 1
    zombie_interval_ms: Any = None       # chaos.scenario.Range, or None
    zombie_ms: int = 3000

    def transactional_ids(self) -> list[str]:
        return [f"{self.transactional_id}-{i}" for i in range(self.pipelines)]


def parse_transactions(r: Any, source: str, topic_names: set[str], group_ids: set[str],
                       range_of: Callable[[Any, str], Any]) -> TxnSpec:
    """``r``: chaos/scenario.py's reader of ``workload.transactions``; ``range_of(reader, key)`` reads a range."""
    spec = TxnSpec(
        input=r.get("input", str), output=r.get("output", str), group=r.get("group", str),
        transactional_id=r.get("transactional.id", str, "eos"), pipelines=r.get("pipelines", int, 1, lo=1, hi=8),
        client=r.get("client", str, "confluent-kafka", choices=TXN_CLIENTS),
        max_records=r.get("max.records", int, 20, lo=1, hi=10000),
        transaction_timeout_ms=r.get("transaction.timeout.ms", int, 10000, lo=1000, hi=900000),
        readers=r.get("readers", int, 1, lo=0, hi=4),
        zombie_interval_ms=range_of(r, "zombie.interval.ms"), zombie_ms=r.get("zombie.ms", int, 3000, lo=0))
    r.done(("input", "output", "group", "transactional.id", "pipelines", "client", "max.records",
            "transaction.timeout.ms", "readers", "zombie.interval.ms", "zombie.ms"))
    for key, topic in (("input", spec.input), ("output", spec.output)):
        if topic not in topic_names:
            r.fail(key, f"{topic!r} is not in topics")
    if spec.input == spec.output:
        r.fail("output", "the output topic must not be the input topic")
    if spec.group in group_ids:
        r.fail("group", f"{spec.group!r} is also a workload group")
    if spec.zombie_interval_ms is not None and spec.client != "confluent-kafka":
        r.fail("zombie.interval.ms", "zombies need client: confluent-kafka")
    return spec
