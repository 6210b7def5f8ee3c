"""The transaction coordinator, as a sans-IO state machine per __transaction_state partition (Kafka 2.8).

* :mod:`transactions.core` — :class:`~transactions.core.TxnCoordinator`: one typed method per API
  (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), the markers' outcomes, load/unload,
  replay, appends and keyed timers.
* :mod:`transactions.state` — the states, the one table of legal transitions, the stored metadata.
* :mod:`transactions.records` — the __transaction_state key and value (TransactionLogKey/Value v0).
* :mod:`transactions.messages` — requests, responses, and the marker command.
* :mod:`transactions.config` — TxnConfig.
* :mod:`transactions.leadership`, :mod:`transactions.load` — which partitions are loaded, and their load.
* :mod:`transactions.testing` — a fake shell for tests.
* ``partition_for(transactional_id, n)`` is in :mod:`kafkacommon.hashing`.
"""
