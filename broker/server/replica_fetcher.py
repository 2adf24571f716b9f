"""Followers fetch from leaders: one fetcher (one connection) per leader broker.

A partition added to a fetcher first truncates its log to where it agrees with the leader
(OffsetForLeaderEpoch, API 23), then long-polls Fetch v11 with ``replica_id`` = this broker,
appends what comes back as a follower, and takes the leader's high watermark.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import defer
from twisted.logger import Logger

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.messages import ApiKey
from broker.protocol.records import Tail, iter_batches
from broker.protocol.records import layout as batch
from broker.server.kafka_client import KafkaClientProtocol
from broker.server.replication_quota import FOLLOWER_REPLICAS, is_throttled
from broker.storage.leader_epoch import UNDEFINED_EPOCH

if TYPE_CHECKING:
    from broker.server.broker import Broker
    from broker.server.partition import Partition

log = Logger()

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
RESPONSE_MAX_BYTES = 10 * 1024 * 1024
ERROR_BACKOFF_MAX_S = 0.5


@dataclass(eq=False)
class FetchState:
    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    delayed_until: float = 0.0


def whole_batches(records: Any) -> Any:
    """The prefix of ``records`` made of whole batches (a fetch may end in a partial one)."""
    view = memoryview(records)
    end = 0
    for pos, header in iter_batches(view, Tail.STOP, verify=False):
        end = pos + header.size
    return view[:end]


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, broker: Broker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._conn: KafkaClientProtocol | None = None
        self._running = False
        self._wakeup: defer.Deferred[None] | None = None
        self._loop: defer.Deferred[None] | None = None
        config = broker.config
        self.wait_ms = config.replica_fetch_wait_max_ms
        self.min_bytes = config.replica_fetch_min_bytes
        self.max_bytes = config.replica_fetch_max_bytes
        self.backoff_s = min(config.replica_fetch_backoff_ms / 1000.0, ERROR_BACKOFF_MAX_S)
        self.timeout_s = config.replica_socket_timeout_ms / 1000.0

    def add(self, partition: Partition, leader_epoch: int) -> None:
        self.partitions[partition.tp] = FetchState(partition, leader_epoch)
        self._wake()

    def remove(self, tp: tuple[str, int]) -> None:
        self.partitions.pop(tp, None)

    def start(self) -> None:
        self._running = True
        self._loop = self._run()

    def stop(self) -> None:
        self._running = False
        self._wake()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _wake(self) -> None:
        d, self._wakeup = self._wakeup, None
        if d is not None and not d.called:
            d.callback(None)

    def _sleep(self, seconds: float) -> defer.Deferred[None]:
        """Sleep, cut short by add()/stop()."""
        d: defer.Deferred[None] = defer.Deferred()
        self._wakeup = d
        def wake() -> None:
            if not d.called:
                d.callback(None)

        def stop_timer(result: None) -> None:
            if timer.active():
                timer.cancel()
            return result

        timer = self.broker.reactor.callLater(seconds, wake)
        return d.addBoth(stop_timer)

    @defer.inlineCallbacks
    def _run(self) -> Any:
        while self._running:
            try:
                if not self.partitions:
                    yield self._sleep(1.0)
                    continue
                if self._conn is None or not self._conn.connected_:
                    self._conn = yield self._connect()
                    if self._conn is None:
                        yield self._sleep(self.backoff_s)
                        continue
                truncating = [s for s in self.partitions.values() if s.needs_truncation]
                if truncating:
                    yield self._truncate(truncating)
                now = time.monotonic()
                ready = {tp: s for tp, s in self.partitions.items() if not s.needs_truncation and s.delayed_until <= now}
                if not ready:
                    yield self._sleep(self.backoff_s)
                    continue
                yield self._fetch(ready)
            except Exception as exc:
                if self._running:
                    log.info("fetcher from broker {leader}: {exc}; retrying", leader=self.leader_id, exc=exc)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if self._running:
                    yield self._sleep(self.backoff_s)

    def _connect(self) -> defer.Deferred[KafkaClientProtocol | None]:
        endpoint = self.broker.metadata.brokers.get(self.leader_id)
        if endpoint is None:
            return defer.succeed(None)
        client_id = f"replica-fetcher-{self.broker.broker_id}"
        connecting = self.broker.inter_broker.connect(self.broker.reactor, endpoint.host, endpoint.port, client_id,
                                                      self.timeout_s)
        return cast("defer.Deferred[KafkaClientProtocol | None]", connecting)

    def _request(self, api_key: ApiKey, version: int, body: dict) -> defer.Deferred[dict]:
        if self._conn is None:
            raise ConnectionError(f"no connection to broker {self.leader_id}")
        d = self._conn.request(api_key, version, body)
        return d.addTimeout(self.timeout_s, self.broker.reactor)

    # -- truncation ----------------------------------------------------------------------------

    @defer.inlineCallbacks
    def _truncate(self, states: list[FetchState]) -> Any:
        asked: dict[tuple[str, int], tuple[FetchState, int]] = {}
        topics: dict[str, list[dict]] = {}
        for s in states:
            p = s.partition
            epoch = p.epochs.latest_epoch
            if epoch == UNDEFINED_EPOCH:
                # no epochs known: keep what is committed, refetch the rest
                p.truncate_to(p.log.high_watermark)
                s.needs_truncation = False
                continue
            asked[p.tp] = (s, epoch)
            topics.setdefault(p.topic, []).append(
                {"partition": p.partition, "current_leader_epoch": s.leader_epoch, "leader_epoch": epoch}
            )
        if not asked:
            return
        response = yield self._request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {"replica_id": self.broker.broker_id, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]},
        )
        for topic in response["topics"]:
            for part in topic["partitions"]:
                tp = (topic["topic"], part["partition"])
                found = asked.get(tp)
                if found is None or self.partitions.get(tp) is not found[0]:
                    continue
                s = found[0]
                p = s.partition
                if part["error_code"] != ErrorCode.NONE:
                    s.delayed_until = time.monotonic() + self.backoff_s
                    continue
                leader_epoch, leader_end = part["leader_epoch"], part["end_offset"]
                if leader_epoch == UNDEFINED_EPOCH or leader_end < 0:
                    target = p.log.high_watermark
                else:
                    _, local_end = p.epochs.end_offset_for(leader_epoch, p.log.log_end_offset)
                    target = min(leader_end, local_end if local_end >= 0 else p.log.high_watermark)
                p.truncate_to(max(target, 0))
                s.needs_truncation = False

    # -- fetch ---------------------------------------------------------------------------------

    @defer.inlineCallbacks
    def _fetch(self, ready: dict[tuple[str, int], FetchState]) -> Any:
        quota = self.broker.follower_quota
        throttled = {tp for tp, s in ready.items()
                     if quota.limited and is_throttled(s.partition.log.config, FOLLOWER_REPLICAS, tp[1], self.broker.broker_id)}
        if throttled and quota.exceeded():  # over follower.replication.throttled.rate: the others only
            ready = {tp: s for tp, s in ready.items() if tp not in throttled}
            if not ready:
                yield self._sleep(min(self.backoff_s, quota.window_s / 10))
                return
        topics: dict[str, list[dict]] = {}
        offsets = {}
        for tp, s in ready.items():
            offset = s.partition.log.log_end_offset
            offsets[tp] = offset
            topics.setdefault(tp[0], []).append({
                "partition": tp[1],
                "current_leader_epoch": s.leader_epoch,
                "fetch_offset": offset,
                "log_start_offset": s.partition.log.log_start_offset,
                "partition_max_bytes": self.max_bytes,
            })
        response = yield self._request(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": self.broker.broker_id,
            "max_wait_ms": self.wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": RESPONSE_MAX_BYTES,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        })
        if response.get("error_code", 0) != ErrorCode.NONE:
            raise RuntimeError(f"fetch failed with error {ErrorCode(response['error_code']).name}")
        for topic in response["responses"]:
            for part in topic["partitions"]:
                tp = (topic["topic"], part["partition_index"])
                fetched = ready.get(tp)
                if fetched is None or self.partitions.get(tp) is not fetched:
                    continue  # the partition moved while the fetch was out
                s = fetched
                if tp in throttled and part["records"]:
                    quota.record(len(part["records"]))
                try:
                    self._process(s, offsets[tp], part)
                except KafkaError as exc:
                    # batches that do not fit our log (diverged batch boundaries, corruption):
                    # agree with the leader again before fetching more
                    log.warn("{tp}: follower append failed ({exc}); truncating again", tp=s.partition.name, exc=exc)
                    s.needs_truncation = True
                    s.delayed_until = time.monotonic() + self.backoff_s

    def _process(self, s: FetchState, fetched_at: int, part: dict) -> None:
        p = s.partition
        code = part["error_code"]
        if code == ErrorCode.NONE:
            if p.log.log_end_offset != fetched_at:
                return
            p.log.advance_log_start_offset(part["log_start_offset"])  # records the leader deleted (DeleteRecords)
            records = part["records"]
            if records:
                data = whole_batches(records)
                if len(data):
                    first = batch.read_header(data, 0).base_offset
                    if first < fetched_at:
                        # the leader's batch straddles our log end (batch boundaries differed
                        # in a truncated tail): take the leader's batch whole
                        p.truncate_to(first)
                    p.log.append_as_follower(data)
                    p.follower_appended(data, part["high_watermark"])
                    return
            p.update_follower_high_watermark(part["high_watermark"])
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = part["log_start_offset"]
            if 0 <= leader_start and fetched_at < leader_start:
                p.start_at(leader_start)
            else:
                s.needs_truncation = True
                s.delayed_until = time.monotonic() + self.backoff_s
        else:
            # NOT_LEADER_OR_FOLLOWER, UNKNOWN/FENCED_LEADER_EPOCH...: the leader has not caught
            # up with the new state yet (or we have not): wait for ZooKeeper to tell us.
            s.delayed_until = time.monotonic() + self.backoff_s


class ReplicaFetcherManager:
    """Which leader each followed partition fetches from."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._assigned: dict[tuple[str, int], int] = {}

    def add(self, partition: Partition, leader_id: int, leader_epoch: int) -> None:
        self.remove(partition.tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self.broker, leader_id)
            fetcher.start()
        fetcher.add(partition, leader_epoch)
        self._assigned[partition.tp] = leader_id

    def remove(self, tp: tuple[str, int]) -> None:
        leader_id = self._assigned.pop(tp, None)
        if leader_id is None:
            return
        fetcher = self.fetchers.get(leader_id)
        if fetcher is not None:
            fetcher.remove(tp)
            if not fetcher.partitions:
                fetcher.stop()
                del self.fetchers[leader_id]

    def stop(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self._assigned.clear()
