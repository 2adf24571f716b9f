"""Followers fetch from leaders: one fetcher (one connection) per leader broker.

A partition added to a fetcher first truncates its log to where it agrees with the leader
(OffsetForLeaderEpoch, API 23), then long-polls Fetch v11 with ``replica_id`` = this broker,
appends what comes back as a follower, and takes the leader's high watermark. Fetches run in a
fetch session (KIP-227, ``FetcherSession``): after the first, a fetch names only partitions
whose position changed, and the leader answers only partitions with news, so an idle
follower's fetch costs the same at any partition count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from twisted.internet import defer
from twisted.logger import Logger

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.messages import ApiKey
from broker.protocol.records import Tail, iter_batches
from broker.protocol.records import layout as batch
from broker.server.fetch_session import INITIAL_EPOCH, MAX_EPOCH, NO_SESSION
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
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
#: a fetcher works out every partition's position at least this often (a log start offset
#: moved by local retention is the one change it does not track)
RESYNC_S = 10.0


@dataclass(eq=False)
class FetchState:
    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    delayed_until: float = 0.0


class FetchPosition(NamedTuple):
    """What a fetch asks of one partition."""

    offset: int
    leader_epoch: int
    log_start_offset: int
    max_bytes: int


class FetcherSession:
    """The fetcher's side of its fetch session with the leader: what the leader holds for each
    partition, so that a fetch names only what changed (and what to forget)."""

    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self._held: dict[tuple[str, int], FetchPosition] = {}

    def reset(self) -> None:
        """The next fetch is a full one, opening a new session (closing the old, if any)."""
        self.epoch = INITIAL_EPOCH
        self._held = {}

    def request(self, positions: dict[tuple[str, int], FetchPosition]
                ) -> tuple[dict[tuple[str, int], FetchPosition], list[tuple[str, int]]]:
        """The partitions to name in the next fetch, and those to forget; the leader holds
        ``positions`` once it has answered."""
        if self.epoch == INITIAL_EPOCH:
            changed, forgotten = dict(positions), []
        else:
            held = self._held
            changed = {tp: at for tp, at in positions.items() if held.get(tp) != at}
            forgotten = [tp for tp in held if tp not in positions]
        self._held = dict(positions)
        return changed, forgotten

    def request_changes(self, changes: dict[tuple[str, int], FetchPosition | None]
                        ) -> tuple[dict[tuple[str, int], FetchPosition], list[tuple[str, int]]]:
        """Like ``request``, from only the partitions that may have moved (None: leave the
        session); the others stay as the leader holds them."""
        held = self._held
        changed: dict[tuple[str, int], FetchPosition] = {}
        forgotten = []
        for tp, at in changes.items():
            if at is None:
                if held.pop(tp, None) is not None:
                    forgotten.append(tp)
            elif held.get(tp) != at:
                changed[tp] = held[tp] = at
        return changed, forgotten

    def held(self, tp: tuple[str, int]) -> FetchPosition | None:
        """Where the leader reads ``tp`` for this session."""
        return self._held.get(tp)

    def answered(self, session_id: int) -> None:
        """The leader answered: the session it gave (none: every fetch stays a full one)."""
        if session_id == NO_SESSION:
            self.session_id, self.epoch = NO_SESSION, INITIAL_EPOCH
        elif self.epoch == INITIAL_EPOCH or session_id != self.session_id:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = 1 if self.epoch >= MAX_EPOCH else self.epoch + 1


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
        self.session = FetcherSession()
        self._in_session: dict[tuple[str, int], FetchState] = {}  # what the session names, as named
        self._moved: set[tuple[str, int]] = set()  # position or readiness may differ from the session's
        self._truncating: set[tuple[str, int]] = set()
        self._delayed: dict[tuple[str, int], float] = {}
        self._resync_at = 0.0
        self._pause_s = 0.0  # how long to wait when a fetch found nothing to fetch
        config = broker.config
        self.wait_ms = config.replica_fetch_wait_max_ms
        self.min_bytes = config.replica_fetch_min_bytes
        self.max_bytes = config.replica_fetch_max_bytes
        self.backoff_s = min(config.replica_fetch_backoff_ms / 1000.0, ERROR_BACKOFF_MAX_S)
        self.timeout_s = config.replica_socket_timeout_ms / 1000.0

    def add(self, partition: Partition, leader_epoch: int) -> None:
        self.partitions[partition.tp] = FetchState(partition, leader_epoch)
        self._truncating.add(partition.tp)
        self._moved.add(partition.tp)
        self._wake()

    def remove(self, tp: tuple[str, int]) -> None:
        self.partitions.pop(tp, None)
        self._moved.add(tp)

    def _needs_truncation(self, s: FetchState) -> None:
        """Agree with the leader again (OffsetForLeaderEpoch) before fetching more."""
        s.needs_truncation = True
        self._truncating.add(s.partition.tp)
        self._moved.add(s.partition.tp)

    def _delay(self, s: FetchState) -> None:
        """Leave the partition out of fetches for a backoff (the session forgets it meanwhile)."""
        s.delayed_until = time.monotonic() + self.backoff_s
        self._delayed[s.partition.tp] = s.delayed_until
        self._moved.add(s.partition.tp)

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
                    self.session.reset()
                    self._conn = yield self._connect()
                    if self._conn is None:
                        yield self._sleep(self.backoff_s)
                        continue
                truncating = [s for s in (self.partitions.get(tp) for tp in self._truncating)
                              if s is not None and s.needs_truncation]
                self._truncating = {s.partition.tp for s in truncating}
                if truncating:
                    yield self._truncate(truncating)
                fetched = yield self._fetch()
                if not fetched:
                    yield self._sleep(self._pause_s)
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
                self._truncated(s)
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
                    self._delay(s)
                    continue
                leader_epoch, leader_end = part["leader_epoch"], part["end_offset"]
                if leader_epoch == UNDEFINED_EPOCH or leader_end < 0:
                    target = p.log.high_watermark
                else:
                    _, local_end = p.epochs.end_offset_for(leader_epoch, p.log.log_end_offset)
                    target = min(leader_end, local_end if local_end >= 0 else p.log.high_watermark)
                p.truncate_to(max(target, 0))
                self._truncated(s)

    def _truncated(self, s: FetchState) -> None:
        s.needs_truncation = False
        self._truncating.discard(s.partition.tp)
        self._moved.add(s.partition.tp)

    # -- fetch ---------------------------------------------------------------------------------

    def _position(self, s: FetchState) -> FetchPosition:
        log_ = s.partition.log
        return FetchPosition(log_.log_end_offset, s.leader_epoch, log_.log_start_offset, self.max_bytes)

    def _changes(self) -> tuple[dict[tuple[str, int], FetchPosition], list[tuple[str, int]]] | None:
        """What to name and forget in the next fetch: from every partition for a full fetch
        (a new session, every RESYNC_S, or while a replication throttle is set), otherwise from
        the partitions that moved since the last one; None when nothing is to be fetched."""
        now = time.monotonic()
        quota = self.broker.follower_quota
        self._pause_s = self.backoff_s
        if self.session.epoch == INITIAL_EPOCH or quota.limited or now >= self._resync_at:
            ready = {tp: s for tp, s in self.partitions.items() if not s.needs_truncation and s.delayed_until <= now}
            if quota.limited and quota.exceeded():  # over follower.replication.throttled.rate: the others only
                ready = {tp: s for tp, s in ready.items()
                         if not is_throttled(s.partition.log.config, FOLLOWER_REPLICAS, tp[1], self.broker.broker_id)}
                self._pause_s = min(self.backoff_s, quota.window_s / 10)
            if not ready:
                return None
            self._in_session, self._moved = ready, set()
            self._delayed = {tp: until for tp, until in self._delayed.items() if until > now}
            self._resync_at = now + RESYNC_S
            return self.session.request({tp: self._position(s) for tp, s in ready.items()})
        due = [tp for tp, until in self._delayed.items() if until <= now]
        for tp in due:
            del self._delayed[tp]
        moved, self._moved = self._moved.union(due), set()
        changes: dict[tuple[str, int], FetchPosition | None] = {}
        for tp in moved:
            s = self.partitions.get(tp)
            if s is None or s.needs_truncation or s.delayed_until > now:
                changes[tp] = None
                self._in_session.pop(tp, None)
            else:
                changes[tp] = self._position(s)
                self._in_session[tp] = s
        if not self._in_session:
            self.session.reset()  # the next fetch with partitions opens a new session
            return None
        return self.session.request_changes(changes)

    @defer.inlineCallbacks
    def _fetch(self) -> Any:
        """One fetch in the session; False when there was nothing to fetch."""
        wanted = self._changes()
        if wanted is None:
            return False
        changed, forgotten = wanted
        topics: dict[str, list[dict]] = {}
        for tp, at in changed.items():
            topics.setdefault(tp[0], []).append({
                "partition": tp[1],
                "current_leader_epoch": at.leader_epoch,
                "fetch_offset": at.offset,
                "log_start_offset": at.log_start_offset,
                "partition_max_bytes": at.max_bytes,
            })
        gone: dict[str, list[int]] = {}
        for topic, partition in forgotten:
            gone.setdefault(topic, []).append(partition)
        response = yield self._request(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": self.broker.broker_id,
            "max_wait_ms": self.wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": RESPONSE_MAX_BYTES,
            "isolation_level": 0,
            "session_id": self.session.session_id,
            "session_epoch": self.session.epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()],
            "rack_id": "",
        })
        code = response.get("error_code", 0)
        if code in SESSION_ERRORS:  # the leader lost or moved on from our session: a full fetch next
            log.info("fetcher from broker {leader}: {error}; starting a new fetch session", leader=self.leader_id,
                     error=ErrorCode(code).name)
            self.session.reset()
            return True
        if code != ErrorCode.NONE:
            raise RuntimeError(f"fetch failed with error {ErrorCode(code).name}")
        self.session.answered(response["session_id"])
        quota = self.broker.follower_quota
        for topic in response["responses"]:
            for part in topic["partitions"]:
                tp = (topic["topic"], part["partition_index"])
                s = self._in_session.get(tp)
                held = self.session.held(tp)
                if s is None or held is None or self.partitions.get(tp) is not s:
                    continue  # the partition moved while the fetch was out
                self._moved.add(tp)
                if quota.limited and part["records"] and \
                        is_throttled(s.partition.log.config, FOLLOWER_REPLICAS, tp[1], self.broker.broker_id):
                    quota.record(len(part["records"]))
                try:
                    self._process(s, held.offset, part)
                except KafkaError as exc:
                    # batches that do not fit our log (diverged batch boundaries, corruption):
                    # agree with the leader again before fetching more
                    log.warn("{tp}: follower append failed ({exc}); truncating again", tp=s.partition.name, exc=exc)
                    self._needs_truncation(s)
                    self._delay(s)
        return True

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
                self._needs_truncation(s)
                self._delay(s)
        else:
            # NOT_LEADER_OR_FOLLOWER, UNKNOWN/FENCED_LEADER_EPOCH...: the leader has not caught
            # up with the new state yet (or we have not): wait for ZooKeeper to tell us.
            self._delay(s)


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
