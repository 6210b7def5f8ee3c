"""The committed offsets of one __consumer_offsets partition: OffsetCommit, OffsetFetch and expiry.

:class:`OffsetsManager` owns the offsets cache and follows Kafka 2.8.2's
GroupMetadataManager (storeOffsets, getOffsets, removeAllOffsets) with
GroupMetadata.removeExpiredOffsets.  Whether a commit is accepted at all
(member, generation, group state) is :mod:`coordinator.commit_checks`' question,
asked by :meth:`coordinator.membership.MembershipManager.validate_commit`; the group
a read or an expiry needs is passed in.

The offsets cache is changed only by :meth:`OffsetsManager.replay`.  Commits in
flight are tracked per key (for requireStable and expiry); offsets whose acks=0
tombstone is queued behind a pending append are already gone, as in Kafka's
cache (:meth:`OffsetsManager.hide`).

**Transactional offsets** (TxnOffsetCommit, :meth:`OffsetsManager.txn_commit`) are written as a
transactional batch with the producer's id and epoch, and replayed into a pending map per producer
(GroupMetadata's pendingTransactionalOffsetCommits), invisible to OffsetFetch.  The marker that ends the
transaction on this partition (:meth:`OffsetsManager.replay_marker`, from the log's control batch or from
the live WriteTxnMarkers append) commits them into the cache, each only if it is newer in the log than the
offset cached (Kafka's ``olderThan`` on the record offsets), or discards them.
"""
from __future__ import annotations

from typing import Iterable

from coordinator import records as rec
from coordinator.config import GroupConfig
from coordinator.group import CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, STABLE, GroupMetadata
from coordinator.messages import (
    FetchedOffset, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    TxnOffsetCommitRequest,
)
from coordinator.result import Result, Write
from kafkacommon import errors

TP = tuple[str, int]


def map_offset_append_error(code: int) -> int:
    """storeOffsets' mapping of an append error to the OffsetCommit error (others pass through)."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE, errors.INVALID_FETCH_SIZE):
        return errors.INVALID_COMMIT_OFFSET_SIZE
    return code


def java_length(s: str | None) -> int:
    """String.length(): UTF-16 code units (what Kafka compares with offset.metadata.max.bytes)."""
    if not s:
        return 0
    if s.isascii():  # one code unit per character: the usual metadata, checked without encoding
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


class OffsetsManager:
    def __init__(self, partition: int, config: GroupConfig) -> None:
        self.partition = partition
        self.config = config
        self._offsets: dict[str, dict[TP, rec.OffsetValue]] = {}          # durable: the replay of the records
        self._pending: dict[rec.OffsetKey, set[object]] = {}              # commits in flight (tokens), per key
        self._tombstoned: dict[rec.OffsetKey, Write] = {}                 # key -> the queued acks=0 write deleting it
        self._at: dict[rec.OffsetKey, int] = {}                           # durable: the log offset of each cached one
        # durable: transactional offsets not yet decided, per producer id: key -> (value or None, log offset)
        self._txn: dict[int, dict[rec.OffsetKey, tuple[rec.OffsetValue | None, int | None]]] = {}

    def clear(self) -> None:
        self._offsets, self._pending, self._tombstoned, self._at, self._txn = {}, {}, {}, {}, {}

    # ------------------------------------------------------------------ durable: the offsets cache

    def replay(self, key: rec.OffsetKey, value: rec.OffsetValue | None, write: Write | None,
               offset: int | None = None, producer_id: int | None = None) -> None:
        """One offset record (``write``: the write it came in, None during a load) at log ``offset``;
        ``producer_id``: a transactional one, pending until its marker."""
        if producer_id is not None:
            self._txn.setdefault(producer_id, {})[key] = (value, offset)
            return
        tp = (key.topic, key.partition)
        if value is None:
            self._at.pop(key, None)
        elif offset is not None:
            self._at[key] = offset
        if value is None:
            group_offsets = self._offsets.get(key.group)
            if group_offsets is not None:
                group_offsets.pop(tp, None)
                if not group_offsets:
                    del self._offsets[key.group]
            if write is not None and self._tombstoned.get(key) is write:
                del self._tombstoned[key]
        else:
            self._offsets.setdefault(key.group, {})[tp] = value

    def replay_marker(self, producer_id: int, commit: bool, offset: int | None = None) -> int:
        """The marker ending ``producer_id``'s transaction on this partition: its pending offsets are committed
        into the cache (each only if newer in the log than the one cached) or discarded.  Returns how many
        were committed."""
        pending = self._txn.pop(producer_id, None)
        if not pending or not commit:
            return 0
        done = 0
        for key, (value, at) in sorted(pending.items(), key=lambda kv: -1 if kv[1][1] is None else kv[1][1]):
            cached_at = self._at.get(key)
            cached = self._offsets.get(key.group, {}).get((key.topic, key.partition))
            if cached is None or cached_at is None or (at is not None and cached_at < at):
                self.replay(key, value, None, at)
                done += 1
        return done

    def txn_view(self) -> dict[int, dict[tuple[str, str, int], rec.OffsetValue | None]]:
        """{producer id: {(group, topic, partition): value}}: the transactional offsets not yet decided."""
        return {pid: dict(sorted((tuple(k), v) for k, (v, _at) in keys.items()))
                for pid, keys in sorted(self._txn.items()) if keys}

    def open_producers_groups(self, producer_id: int) -> list[str]:
        """The groups ``producer_id`` has transactional offsets not yet decided for."""
        return sorted({k.group for k in self._txn.get(producer_id, {})})

    def view(self) -> dict[tuple[str, str, int], rec.OffsetValue]:
        """{(group, topic, partition): OffsetValue}, canonically ordered."""
        offsets = {(g, t, p): v for g, tps in self._offsets.items() for (t, p), v in tps.items()}
        return dict(sorted(offsets.items()))

    def group_ids(self) -> list[str]:
        """The groups with committed offsets or undecided transactional ones, sorted."""
        return sorted(set(self._offsets) | {k.group for keys in self._txn.values() for k in keys})

    def count(self, group_id: str | None = None) -> int:
        """The offsets in the cache (of ``group_id``, or all)."""
        if group_id is not None:
            return len(self._offsets.get(group_id, {}))
        return sum(len(v) for v in self._offsets.values())

    # ------------------------------------------------------------------ views

    def _effective(self, group_id: str) -> dict[TP, rec.OffsetValue]:
        cached = self._offsets.get(group_id, {})
        tombstoned = self._tombstoned
        if not tombstoned:
            return dict(cached)
        return {tp: v for tp, v in cached.items() if (group_id, tp[0], tp[1]) not in tombstoned}

    def _is_pending(self, group_id: str, topic: str, partition: int) -> bool:
        key = rec.OffsetKey(group_id, topic, partition)
        return bool(self._pending.get(key)) or any(key in keys for keys in self._txn.values())

    def has_offsets(self, group_id: str, besides: Iterable[TP] = ()) -> bool:
        """Whether ``group_id`` keeps an offset other than ``besides``, or has a commit in flight."""
        skip = set(besides)
        return (any(tp not in skip for tp in self._effective(group_id))
                or any(ids and key[0] == group_id for key, ids in self._pending.items())
                or any(k.group == group_id for keys in self._txn.values() for k in keys))

    # ------------------------------------------------------------------ OffsetCommit

    def commit(self, handle: object, req: OffsetCommitRequest | TxnOffsetCommitRequest, now_ms: int) -> Result:
        """storeOffsets, once the commit is accepted: the offsets that fit, as one acks=-1 (by default)
        write; answered when it is done.  A TxnOffsetCommit's is a transactional batch of its producer."""
        out = Result(self.partition, now_ms)
        txn = isinstance(req, TxnOffsetCommitRequest)
        limit = self.config.offset_metadata_max_bytes
        fits = [java_length(o.metadata) <= limit for o in req.offsets]
        valid = [o for o, ok in zip(req.offsets, fits) if ok]
        if not valid:
            out.respond(handle, req.error_response(errors.OFFSET_METADATA_TOO_LARGE))
            return out
        expire = None if txn or req.retention_time_ms == -1 else now_ms + req.retention_time_ms
        group_id = req.group_id
        key, value = rec.OffsetKey, rec.OffsetValue
        records = [(key(group_id, o.topic, o.partition), value(o.offset, o.leader_epoch, o.metadata or "", now_ms,
                                                               expire))
                   for o in valid]
        keys = [k for k, _ in records]   # an OffsetKey is the (group, topic, partition) tuple itself
        token = object()                 # this commit, while in flight (not the write: no reference cycle)

        def answer(o: Result, code: int) -> None:
            o.respond(handle, OffsetCommitResponse([
                (c.topic, c.partition, code if ok else errors.OFFSET_METADATA_TOO_LARGE)
                for c, ok in zip(req.offsets, fits)]))

        def on_done(o: Result, code: int) -> None:
            for k in keys:
                tokens = self._pending.get(k)
                if tokens is not None:
                    tokens.discard(token)
                    if not tokens:
                        del self._pending[k]
            answer(o, errors.NONE if code == errors.NONE else map_offset_append_error(code))

        out.write(records, acks=self.config.commit_required_acks, on_done=on_done,
                  on_orphan=lambda o: answer(o, errors.NOT_COORDINATOR),
                  producer=(req.producer_id, req.producer_epoch) if txn else None)
        for k in keys:
            self._pending.setdefault(k, set()).add(token)
        return out

    # ------------------------------------------------------------------ OffsetFetch

    def fetch(self, group: GroupMetadata | None, req: OffsetFetchRequest) -> OffsetFetchResponse:
        if group is None or group.is_(DEAD):
            return OffsetFetchResponse(errors.NONE, [FetchedOffset(t, p, -1, -1, "", errors.NONE)
                                                     for t, p in (req.partitions or [])])
        offsets = self._effective(req.group_id)
        wanted = sorted(offsets) if req.partitions is None else list(req.partitions)
        result = []
        for topic, partition in wanted:
            value = offsets.get((topic, partition))
            if req.require_stable and self._is_pending(req.group_id, topic, partition):
                result.append(FetchedOffset(topic, partition, -1, -1, "", errors.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                result.append(FetchedOffset(topic, partition, -1, -1, "", errors.NONE))
            else:
                result.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch,
                                            value.metadata, errors.NONE))
        return OffsetFetchResponse(errors.NONE, result)

    # ------------------------------------------------------------------ removal and expiry

    def remove_all(self, group_id: str) -> list[TP]:
        """removeAllOffsets (a group is deleted): its offsets, sorted, to tombstone; its commits in flight
        no longer count."""
        for key in [k for k in self._pending if k[0] == group_id]:
            del self._pending[key]
        return sorted(self._effective(group_id))

    def remove(self, group_id: str, tps: Iterable[TP]) -> list[TP]:
        """GroupMetadata.removeOffsets (OffsetDelete): of ``tps``, the group's offsets, sorted, to tombstone; their
        commits in flight no longer count."""
        wanted = set(tps)
        for key in [k for k in self._pending if k[0] == group_id and (k[1], k[2]) in wanted]:
            del self._pending[key]
        return sorted(tp for tp in self._effective(group_id) if tp in wanted)

    def hide(self, write: Write) -> None:
        """``write`` (acks=0) deletes offsets: they are gone from now on, though it is replayed only once the
        appends before it are."""
        for key, value in write.records:
            if value is None and isinstance(key, rec.OffsetKey):
                self._tombstoned[key] = write

    def expired(self, group: GroupMetadata, now_ms: int) -> list[TP]:
        """removeExpiredOffsets: the group's offsets past their retention, sorted."""
        retention = self.config.offsets_retention_ms
        offsets = self._effective(group.group_id)
        subscribed: frozenset[str] = frozenset()
        if group.protocol_type is not None and group.is_(EMPTY):
            # retention counts from when the group became Empty (or the commit, with no timestamp)
            def base(v: rec.OffsetValue) -> int:
                return v.commit_timestamp if group.state_timestamp_ms is None else group.state_timestamp_ms
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
              and group.is_(STABLE)):
            subscribed = group.subscribed_topics

            def base(v: rec.OffsetValue) -> int:
                return v.commit_timestamp
        elif group.protocol_type is None:   # a simple group: by commit time

            def base(v: rec.OffsetValue) -> int:
                return v.commit_timestamp
        else:
            return []
        expired = []
        for (topic, partition), value in sorted(offsets.items()):
            if topic in subscribed or self._is_pending(group.group_id, topic, partition):
                continue
            if value.expire_timestamp is None:
                if now_ms - base(value) >= retention:
                    expired.append((topic, partition))
            elif now_ms >= value.expire_timestamp:
                expired.append((topic, partition))
        return expired
