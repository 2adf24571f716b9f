"""MirrorMaker: N source clusters into one aggregate cluster, without losing a record.

Shape (Kafka 0.8's MirrorMaker): one ZookeeperConsumerConnector per source cluster, each with
``num.streams`` streams over the whitelist/blacklist; one thread per stream reads records and
sends them with the single Producer (acks=all, idempotent) into the aggregate cluster. A source
given only ``bootstrap.servers`` is a ``mirror.group_source.GroupSource`` instead (``num.streams``
members of a standard consumer group) behind the same methods: cluster id, partition counts and
topic configs of a source topic, streams, ``commit(positions)``, the lag probe, shutdown.

Commit protocol (no data loss):

- The connectors never commit on their own (``auto.commit.enable=false``).
- Each stream thread sends a record inside a shared section of a gate and then records
  "next offset to copy" for its source partition (``positions``).
- Every ``offset.commit.interval.ms`` the committer closes the gate (waits for sends in
  progress; new ones wait), snapshots the positions, flushes the producer (every record sent
  before is acknowledged by all in-sync replicas), reopens the gate and writes the snapshot to
  the source's ``/consumers/<group>/offsets/<topic>/<partition>`` (a group source hands it to its
  members, which commit it to the group coordinator from their own threads).
- A send that fails for good (after the producer's retries, within delivery.timeout.ms) sets
  the failure: nothing more is committed and the mirror stops (abort.on.send.failure=true, the
  default). So a restart resumes from offsets whose records are all in the aggregate cluster;
  at most the records after the last commit are copied again (the uncommitted window).
- SIGTERM: stop reading, final flush and commit, shut down, exit 0.

Bulk path (throughput): a stream thread takes a whole fetched chunk of one source partition at a
time (``KafkaStream.next_chunk``), passes the gate once for it, builds each copy's header block
from bytes precomputed per chunk (``OriginEncoder``) and hands the chunk to the producer with one
``Producer.send_batch`` (encoded into record batches outside the accumulator's lock, one
callback per batch instead of a future per record); then it notes the chunk's next offset. The
commit protocol above is unchanged: the gate and the positions just move per chunk.

Raw path (the streams are raw): a chunk is the fetched record batches of one partition, undecoded
(``RawChunk``). When the target has as many partitions as the source, ``mirror.rewrite`` turns
its batches into target batches (record bytes kept, origin header appended, loop check on
records with headers) and each goes to the same partition with one ``Producer.send_raw_batch``.
Otherwise (the producer must place records by key), and for legacy v0/v1 message sets, the chunk
is decoded and takes the bulk path. Either way the position moves to the chunk's next offset.

Exact resume and fencing (``mirror.resume``): when a source partition is claimed (start, or a
rebalance), the tail of its target says where copying really got to, and copying resumes there
instead of at the committed offset (``ExactResume.before_starting_fetchers``; a ZooKeeper
source's fetchers start there, a group source's member seeks there). Before a ZooKeeper source
gives partitions up (``before_releasing_partitions``) the senders are held at the gate, the
producer is flushed, the positions are committed and the partitions leave ``Source.owned``: a
chunk taken before that and sent after is dropped, so a process never writes a partition it
no longer owns, and the next owner's scan sees everything this one wrote. Within an ownership a
chunk is trimmed to the partition's position (records below it were copied).

Loop prevention: see mirror.origin. Target topics: see mirror.topics. Prometheus endpoint
(``--metrics.port``): see mirror.metrics.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from broker.client.accumulator import VARINT_TABLE, encode_headers
from broker.client.producer import Producer
from broker.client.security import ClientSecurity
from broker.client.zk_consumer import ConsumerTimeoutException, RawChunk, ZookeeperConsumerConnector
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import ClusterIdZNode
from broker.protocol.records.layout import HEADER_SIZE
from mirror.config import MirrorConfig, SourceConfig
from mirror.errors import MirrorError
from mirror.group_source import GroupSource
from mirror.metrics import MetricsServer, MirrorMetrics
from mirror.origin import Origin, OriginEncoder, came_from, with_origin
from mirror.resume import DEFAULT_SCAN_MAX_RECORDS, TailScanner
from mirror.rewrite import rewrite_chunk
from mirror.stats import LagProbe, RecordAges, Reporter
from mirror.topics import TargetAdmin, TargetTopics, choose_partition

log = logging.getLogger("mirror")


class Gate:
    """Many senders, one committer: ``enter``/``leave`` around a send, ``exclusive()`` to commit."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._writer = False
        self._waiting = 0

    def enter(self) -> None:
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._active += 1

    def leave(self) -> None:
        with self._cond:
            self._active -= 1
            if self._active == 0:
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._writer or self._active:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


def read_cluster_id(zk: ZkClient, timeout: float = 60.0, stop: threading.Event | None = None) -> str:
    """``/cluster/id`` of a cluster (written by its first broker); waits for it to appear."""
    deadline = time.monotonic() + timeout
    path = ClusterIdZNode.path()
    while True:
        try:
            found = zk.read(path)
            if found is not None:
                return ClusterIdZNode.decode(found[0])
        except Exception as exc:  # noqa: BLE001 - ZooKeeper trouble: wait like for a missing node
            log.debug("reading %s: %s", path, exc)
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            raise MirrorError(f"{getattr(zk, 'connect', 'source')}: "
                              f"no {path} (has a broker of this cluster ever started?)")
        time.sleep(0.5)


class Source:
    """One source cluster: its connector, its streams, what was sent and what was committed."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name or f"source{cfg.index}"
        self.connector: ZookeeperConsumerConnector | None = None
        self.cluster_id = ""
        self.positions: dict[tuple[str, int], int] = {}
        self.committed: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, int] = {}
        self.streams: list = []
        self.probe: LagProbe | None = None
        self.owned: set[tuple[str, int]] = set()  # partitions this process may write (see ExactResume)
        self.skip: dict[tuple[str, int], frozenset[int]] = {}  # offsets already in the target (keyed)

    @property
    def zk(self) -> ZkClient:
        return self.connector.zk  # type: ignore[union-attr]

    def start(self, topic_filter, num_streams: int, stop: threading.Event, prepare=None, flushed=None,
              listener=None) -> None:
        """Join the group and make the streams (``flushed`` is for sources that commit on a rebalance;
        ``listener``: the connector's rebalance listener, an ExactResume)."""
        self.connector = ZookeeperConsumerConnector(self.cfg.consumer_props)
        self.cluster_id = read_cluster_id(self.zk, timeout=300.0, stop=stop)
        if not self.cfg.name:
            self.name = self.cluster_id
        self.connector.rebalance_listener = listener
        self.streams = self.connector.create_message_streams_by_filter(topic_filter, num_streams, raw=True)
        if prepare is not None:
            # create/look up the target topics of the partitions just claimed while the group settles
            prepare(self, sorted({t for t, _ in self.connector.owned_partitions()}))
        # The connector's watches fire once when set, which rebalances again right after the
        # first one; start copying only once that has settled, or the records fetched in
        # between would be copied twice.
        # Settled: no rebalance asked for or running, and the count unchanged for a short while
        # (or, whatever happens, 0.5 s without a change; at most 5 s).
        connector = self.connector
        settle_until = time.monotonic() + 5.0
        seen, stable_since = connector.rebalance_count, time.monotonic()
        while time.monotonic() < settle_until:
            time.sleep(0.02)
            now = time.monotonic()
            if connector.rebalance_count != seen:
                seen, stable_since = connector.rebalance_count, now
                continue
            if now - stable_since >= 0.5:
                break
            if now - stable_since >= 0.05 and seen >= 2 and self._rebalance_idle(connector):
                break
        self.probe = LagProbe(self.zk, self.connector.config.security)
        log.info("source %s (cluster %s, %s, group %s): %d streams", self.name, self.cluster_id,
                 self.cfg.zookeeper_connect, self.cfg.group, len(self.streams))

    @staticmethod
    def _rebalance_idle(connector: ZookeeperConsumerConnector) -> bool:
        """No rebalance pending or in progress (the watches' first firing has been handled)."""
        needed = getattr(connector, "_rebalance_needed", None)
        lock = getattr(connector, "_lock", None)
        if needed is None or lock is None or needed.is_set():
            return False
        if not lock.acquire(blocking=False):
            return False
        lock.release()
        return not needed.is_set()

    def source_partition_count(self, topic: str, partition: int) -> int | None:
        count = self.partition_counts.get(topic)
        if count is None or partition >= count:
            assignment = self.zk.topic_assignment(topic)
            count = len(assignment) if assignment else None
            if count is not None:
                self.partition_counts[topic] = count
        return count

    def topic_configs(self, topic: str) -> dict[str, str]:
        """The source topic's per-topic configs (``/config/topics/<topic>``), for its target."""
        return self.zk.topic_config(topic) or {}

    def commit(self, positions: dict[tuple[str, int], int]) -> int:
        """Write changed offsets of the partitions still owned to ZooKeeper; returns how many were written."""
        if self.connector is None:
            return 0
        owned = self.connector.owned_partitions()
        changed = {tp: offset for tp, offset in sorted(positions.items())
                   if tp in owned and self.committed.get(tp) != offset}
        self.connector.offset_store.commit(self.cfg.group, changed)
        self.committed.update(changed)
        return len(changed)

    def shutdown(self) -> None:
        if self.probe is not None:
            self.probe.close()
        if self.connector is not None:
            self.connector.shutdown()


def make_source(cfg: SourceConfig) -> Source | GroupSource:
    """A ZooKeeper source when the config names ``zookeeper.connect``, else a group-protocol one."""
    return Source(cfg) if cfg.zookeeper_connect else GroupSource(cfg)


class MirrorMaker:
    """Build with a MirrorConfig; ``run()`` until SIGTERM/``stop()`` or a failure; returns an exit code."""

    def __init__(self, config: MirrorConfig) -> None:
        self.config = config
        self.sources = [make_source(s) for s in config.sources]
        self.gate = Gate()
        self.producer: Producer | None = None
        self.admin: TargetAdmin | None = None
        self.topics: TargetTopics | None = None
        self.scanner: TailScanner | None = None
        self.group_sync: Any = None  # a GroupOffsetSync with --sync.group.offsets
        self.target_id = ""
        self.failure: BaseException | None = None
        self.send_failures = 0
        self.skipped_loop = 0
        self.resumed = 0  # partitions resumed past their committed offset (exact resume)
        self.raw_batches = 0  # target batches sent by the raw path, and their records
        self.raw_records = 0
        self._raw_lock = threading.Lock()
        self.commits = 0
        self.last_commit = time.monotonic()
        self.last_commit_time: float | None = None  # unix time of the last commit, for metrics
        self.last_status: dict[str, Any] | None = None  # the last stats interval's report
        self.metrics_server: MetricsServer | None = None
        self.state = "starting"
        self._stop_requested = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._counters: list[dict[tuple[str, str], int]] = []  # records copied, one per copying thread
        self._byte_counters: list[dict[tuple[str, str], int]] = []  # source bytes taken, likewise
        self._reporter = Reporter(config.status_file)
        self.ages = RecordAges()
        self._callbacks: dict[str, Any] = {}  # per source name: the send callback observing record ages
        self._stats_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def _target_bootstrap(self) -> str:
        p = self.config.producer_props
        servers = p.get("bootstrap.servers") or p.get("metadata.broker.list") or ""
        if servers:
            return servers
        zk = ZkClient(p["zookeeper.connect"], session_timeout_ms=6000)
        zk.start(timeout=30)
        try:
            brokers = zk.live_brokers()
            out = []
            for info in brokers.values():
                ep = info.endpoint("PLAINTEXT")
                if ep is not None:
                    out.append(f"{ep.host or '127.0.0.1'}:{ep.port}")
            if not out:
                raise MirrorError("no broker of the aggregate cluster is registered in its ZooKeeper")
            return ",".join(out)
        finally:
            zk.stop()

    def start(self) -> None:
        cfg = self.config
        if cfg.metrics_port:
            self.metrics_server = MetricsServer(MirrorMetrics(self).render, cfg.metrics_host, cfg.metrics_port)
        bootstrap = self._target_bootstrap()
        security = ClientSecurity.from_props(cfg.producer_props)  # the aggregate's, as the producer's
        self.admin = TargetAdmin(bootstrap, security=security)
        self.scanner = TailScanner(bootstrap, cfg.resume_scan_max_records, security=security)
        self.target_id = self.admin.cluster_id(attempts=4)  # at start-up a target that is down is an error, said soon
        if not self.target_id:
            raise MirrorError("the aggregate cluster did not tell its cluster id (Metadata v2+); cannot prevent loops")
        self.producer = Producer(cfg.producer_props)
        self.topics = TargetTopics(self.admin, self.producer, cfg.target_replication_factor)
        log.info("aggregate cluster %s; filter %s %r; %d sources x %d streams", self.target_id,
                 "whitelist" if cfg.whitelist is not None else "blacklist",
                 cfg.whitelist if cfg.whitelist is not None else cfg.blacklist, len(self.sources), cfg.num_streams)
        topic_filter = cfg.topic_filter()
        for source in self.sources:
            source.start(topic_filter, cfg.num_streams, self._stop_requested, self._prepare_targets, self._flushed,
                         ExactResume(self, source))
            twin = next((s for s in self.sources if s is not source and s.cluster_id == source.cluster_id), None)
            if twin is not None:
                raise MirrorError(f"sources {twin.name} and {source.name} are the same cluster ({source.cluster_id}): "
                                  "give one --consumer.config per source cluster")
            if source.cluster_id == self.target_id:
                raise MirrorError(f"source {source.name} is the aggregate cluster itself (cluster id {self.target_id}): "
                                  "a mirror must not copy a cluster into itself")
            for i, stream in enumerate(source.streams):
                counts: dict[tuple[str, str], int] = {}
                self._counters.append(counts)
                t = threading.Thread(target=self._run_stream, args=(source, stream, counts),
                                     name=f"mirror-{source.name}-{i}", daemon=True)
                self._threads.append(t)
                t.start()
        stats = threading.Thread(target=self._stats_loop, name="mirror-stats", daemon=True)
        self._threads.append(stats)
        stats.start()
        if cfg.sync_topic_configs_interval_ms or cfg.refresh_topics_interval_ms:
            sync = threading.Thread(target=self._sync_loop, name="mirror-sync", daemon=True)
            self._threads.append(sync)
            sync.start()
        if cfg.sync_group_offsets:
            from broker.tools.access import ClusterAccess
            from mirror.group_sync import GroupOffsetSync

            self.group_sync = GroupOffsetSync(cfg.sources, topic_filter, ClusterAccess(bootstrap, security),
                                              cfg.sync_group_offsets_interval_ms,
                                              cfg.resume_scan_max_records or DEFAULT_SCAN_MAX_RECORDS, self._stopping)
            self.group_sync.start()
        self.state = "running"

    def _prepare_targets(self, source: Source, topics: list[str]) -> None:
        """In the background: make sure the targets of ``topics`` exist (the copying threads
        would do it on their first record; this overlaps it with the start-up)."""

        def work() -> None:
            for topic in topics:
                if self._stopping.is_set():
                    return
                try:
                    self.topics.partition_count(source.cfg.topic_prefix + topic, source, topic)  # type: ignore[union-attr]
                    source.source_partition_count(topic, 0)
                except Exception as exc:  # noqa: BLE001 - the copying thread tries again and reports
                    log.debug("preparing the target of %s: %s", topic, exc)

        if topics:
            threading.Thread(target=work, name=f"mirror-prepare-{source.name}", daemon=True).start()

    def request_stop(self, *_: Any) -> None:
        """Ask ``run()`` to stop cleanly (final flush and commit); safe from a signal handler."""
        self._stop_requested.set()

    def run(self, install_signals: bool = True) -> int:
        if install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        try:
            self.start()
        except BaseException:
            self._stopping.set()
            self._close(final_commit=False)
            raise
        interval = self.config.offset_commit_interval_ms / 1000.0
        next_commit = time.monotonic() + interval
        while not self._stop_requested.wait(0.05):
            if self.failure is not None:
                break
            if time.monotonic() >= next_commit:
                try:
                    self.commit()
                except Exception as exc:  # noqa: BLE001 - ZooKeeper hiccup: try again next time
                    log.warning("commit failed (will retry): %s", exc)
                next_commit = time.monotonic() + interval
        return self._close(final_commit=self.failure is None)

    def commit(self) -> None:
        """Flush the producer, then commit every source position whose records are acknowledged."""
        assert self.producer is not None
        with self.gate.exclusive():
            snapshot = [dict(s.positions) for s in self.sources]
            self.producer.flush()
        if self.failure is not None:
            log.error("not committing: a send failed (%s)", self.failure)
            return
        written = 0
        for source, positions in zip(self.sources, snapshot):
            written += source.commit(positions)
        self.commits += 1
        self.last_commit = time.monotonic()
        self.last_commit_time = time.time()
        log.debug("committed %d offsets", written)

    def _flushed(self) -> bool:
        """Flush the producer with the senders held at the gate; True when no send has failed, so
        positions noted before the call may be committed (a group source's rebalance uses it)."""
        if self.producer is None:
            return False
        with self.gate.exclusive():
            self.producer.flush()
        return self.failure is None

    def _close(self, final_commit: bool) -> int:
        self.state = "stopping"
        self._stopping.set()
        self._stop_requested.set()
        if final_commit and self.producer is not None:
            try:
                self.commit()
                log.info("final flush and commit done")
            except Exception as exc:  # noqa: BLE001
                log.error("final commit failed: %s", exc)
                if self.failure is None:
                    self.failure = exc
        for source in self.sources:
            try:
                source.shutdown()
            except Exception as exc:  # noqa: BLE001
                log.warning("shutting down source %s: %s", source.name, exc)
        for t in self._threads:
            t.join(timeout=10)
        if self.group_sync is not None:
            self.group_sync.join(timeout=10)
        if self.producer is not None:
            self.producer.close(timeout=30 if self.failure is None else 0)
        if self.admin is not None:
            self.admin.close()
        if self.scanner is not None:
            self.scanner.close()
        self.state = "failed" if self.failure is not None else "stopped"
        self._report()
        if self.metrics_server is not None:
            self.metrics_server.close()
        if self.failure is not None:
            log.error("mirror-maker stopped on a failure: %s", self.failure)
            return 1
        log.info("mirror-maker stopped cleanly")
        return 0

    # ------------------------------------------------------------------ copying

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            log.error("mirror failure: %s", exc)
        self._stop_requested.set()

    def _on_send(self, metadata: Any, exc: BaseException | None) -> None:
        if exc is None:
            return
        self.send_failures += 1
        if self.config.abort_on_send_failure:
            self._fail(MirrorError(f"a send failed for good: {exc}"))
        else:
            log.error("a send failed for good; its record(s) are SKIPPED (abort.on.send.failure=false): %s", exc)

    def _send_callback(self, source: Source | GroupSource) -> Any:
        """``_on_send`` plus the record-age histogram of ``source`` (one callback object per source)."""
        callback = self._callbacks.get(source.name)
        if callback is None:
            callback = self._callbacks[source.name] = self.ages.callback(source.name, self._on_send)
        return callback

    def _placement(self, source: Source | GroupSource, topic: str, partition: int) -> tuple[str, int | None]:
        """The target topic of a source partition and the partition its copies go to (None: by key).
        A source that grew past its followed target grows the target first (mirror.topics)."""
        topics = self.topics
        assert topics is not None
        target = source.cfg.topic_prefix + topic
        target_count = topics.partition_count(target, source, topic)
        source_count = source.source_partition_count(topic, partition)
        if source_count is not None and source_count > target_count and topics.follows(target):
            target_count = topics.grow(target, source_count)
        return target, choose_partition(partition, source_count, target_count)

    def _run_stream(self, source: Source, stream: Any, counts: dict[tuple[str, str], int]) -> None:
        if hasattr(stream, "next_chunk") and hasattr(self.producer, "send_batch"):
            return self._run_stream_bulk(source, stream, counts)
        it = iter(stream)
        try:
            while not self._stopping.is_set():
                try:
                    msg = next(it)
                except ConsumerTimeoutException:
                    continue
                except StopIteration:
                    return
                self.gate.enter()
                try:
                    if self._stopping.is_set():
                        return
                    self._mirror(source, msg, counts)
                finally:
                    self.gate.leave()
        except BaseException as exc:  # noqa: BLE001
            if not self._stopping.is_set():
                self._fail(exc)

    def _run_stream_bulk(self, source: Source, stream: Any, counts: dict[tuple[str, str], int]) -> None:
        """The fast path: whole fetched chunks, one gate pass and one producer call per chunk."""
        next_chunk = stream.next_chunk
        stopping = self._stopping
        sizes: dict[tuple[str, str], int] = {}
        self._byte_counters.append(sizes)
        gate = self.gate
        try:
            while not stopping.is_set():
                try:
                    chunk = next_chunk()
                except ConsumerTimeoutException:
                    continue
                except StopIteration:
                    return
                gate.enter()
                try:
                    if stopping.is_set():
                        return
                    chunk = _unsent_part(source, chunk)
                    if chunk is None:
                        continue
                    if type(chunk) is RawChunk:
                        self._mirror_raw(source, chunk, counts)
                        key = (source.name, chunk.topic)
                        sizes[key] = sizes.get(key, 0) + len(chunk.data)
                    else:
                        self._mirror_chunk(source, chunk, counts)
                finally:
                    gate.leave()
        except BaseException as exc:  # noqa: BLE001
            if not stopping.is_set():
                self._fail(exc)

    def _mirror_chunk(self, source: Source, chunk: list, counts: dict[tuple[str, str], int]) -> None:
        """Copy a chunk of one source partition (offset order) with one ``send_batch``.

        The same result as ``_mirror`` per record: loop check, origin header appended, the
        source timestamp kept (now when it has none), the partition kept when counts match."""
        first = chunk[0]
        topic, partition = first[0], first[1]
        skip = source.skip.get((topic, partition))
        if skip is not None:
            chunk = _without_copied(source, topic, partition, chunk, skip)
            if not chunk:
                return
        target, part = self._placement(source, topic, partition)
        encoder = OriginEncoder(source.cluster_id, topic, partition)
        prefix, block_head = encoder.value_prefix, encoder.block_head
        table = VARINT_TABLE  # origin values are far shorter than the table
        now = int(time.time() * 1000)
        # the common case first, at list-comprehension speed: no record has headers of its own
        records = [(ts if ts >= 0 else now, key, value, block_head + table[len(origin := prefix + b"%d" % offset)] + origin)
                   for (_t, _p, offset, key, value, headers, ts) in chunk if not headers and ts is not None]
        skipped = 0
        if len(records) != len(chunk):
            target_id = self.target_id
            records = []
            append = records.append
            for (_t, _p, offset, key, value, headers, ts) in chunk:
                if ts is None or ts < 0:
                    ts = now
                if headers:
                    if came_from(headers, target_id):
                        skipped += 1
                        continue
                    append((ts, key, value,
                            encode_headers(with_origin(headers, Origin(source.cluster_id, topic, partition, offset)))))
                else:
                    append((ts, key, value, encoder.header_block(offset)))
        if records:
            self.producer.send_batch(target, part, records, self._send_callback(source))  # type: ignore[union-attr]
            key = (source.name, topic)
            counts[key] = counts.get(key, 0) + len(records)
        if skipped:
            self.skipped_loop += skipped
        source.positions[(topic, partition)] = chunk[-1][2] + 1

    def _mirror_raw(self, source: Source, chunk: RawChunk, counts: dict[tuple[str, str], int]) -> None:
        """Copy a fetched chunk of one source partition batch by batch, without decoding records
        (see mirror.rewrite); decoded through ``_mirror_chunk`` when the partition is not kept."""
        topic, partition = chunk.topic, chunk.partition
        target, part = self._placement(source, topic, partition)
        if part is None or chunk.legacy or (topic, partition) in source.skip:
            messages = chunk.decode()
            if messages:
                self._mirror_chunk(source, messages, counts)
        else:
            producer = self.producer
            max_bytes = min(producer.batch_size, producer.max_request_size - HEADER_SIZE)  # type: ignore[union-attr]
            batches, dropped = rewrite_chunk(
                chunk.data, chunk.min_offset, OriginEncoder(source.cluster_id, topic, partition).value_prefix,
                self.target_id, max_bytes, producer.batch_count_limit, int(time.time() * 1000))  # type: ignore[union-attr]
            copied = 0
            callback = self._send_callback(source)
            for batch in batches:
                producer.send_raw_batch(target, part, batch.records, batch.records_count, batch.base_ts, batch.max_ts,  # type: ignore[union-attr]
                                        callback)
                copied += batch.records_count
            if copied:
                key = (source.name, topic)
                counts[key] = counts.get(key, 0) + copied
            with self._raw_lock:
                self.raw_batches += len(batches)
                self.raw_records += copied
                self.skipped_loop += dropped
        source.positions[(topic, partition)] = chunk.next_offset

    def _mirror(self, source: Source, msg: Any, counts: dict[tuple[str, str], int]) -> None:
        topic, partition, offset = msg[0], msg[1], msg[2]
        headers = msg[5]
        if headers and came_from(headers, self.target_id):
            self.skipped_loop += 1
            source.positions[(topic, partition)] = offset + 1
            return
        target, part = self._placement(source, topic, partition)
        ts = msg[6]
        self.producer.send(  # type: ignore[union-attr]
            target, msg[4], msg[3], part,
            with_origin(headers, Origin(source.cluster_id, topic, partition, offset)),
            ts if ts is not None and ts >= 0 else None,
            self._send_callback(source),
        )
        source.positions[(topic, partition)] = offset + 1
        key = (source.name, topic)
        counts[key] = counts.get(key, 0) + 1

    # ------------------------------------------------------------------ stats

    def _stats_loop(self) -> None:
        interval = self.config.stats_interval_ms / 1000.0
        while not self._stop_requested.wait(interval):
            try:
                self._report()
            except Exception as exc:  # noqa: BLE001
                log.warning("stats: %s", exc)

    def _sync_loop(self) -> None:
        """Keep target topics in step with their sources (mirror.topics: configs, partition counts)."""
        cfg, topics = self.config, self.topics
        assert topics is not None
        jobs = [(cfg.sync_topic_configs_interval_ms / 1000.0, topics.sync_configs),
                (cfg.refresh_topics_interval_ms / 1000.0, topics.sync_partitions)]
        due = [time.monotonic() + interval if interval else None for interval, _ in jobs]
        while not self._stop_requested.wait(0.1):
            for i, (interval, job) in enumerate(jobs):
                if due[i] is not None and time.monotonic() >= due[i]:  # type: ignore[operator]
                    try:
                        job()
                    except Exception as exc:  # noqa: BLE001 - the next round tries again
                        log.warning("topic sync: %s", exc)
                    due[i] = time.monotonic() + interval

    def record_counts(self) -> dict[tuple[str, str], int]:
        """Records copied so far per (source name, topic), summed over the copying threads."""
        return _sum_counters(self._counters)

    def byte_counts(self) -> dict[tuple[str, str], int]:
        """Source record-batch bytes taken so far per (source name, topic) (raw streams only)."""
        return _sum_counters(self._byte_counters)

    def _report(self) -> dict[str, Any]:
        with self._stats_lock:
            counts = self.record_counts()
            lags: dict[tuple[str, str], int | None] = {}
            if self.state == "running":
                for source in self.sources:
                    if source.probe is None:
                        continue
                    positions = dict(source.positions)
                    ends = source.probe.end_offsets(sorted(positions))
                    for (topic, partition), pos in positions.items():
                        key = (source.name, topic)
                        end = ends.get((topic, partition))
                        if end is None:
                            lags.setdefault(key, None)
                        else:
                            lags[key] = (lags.get(key) or 0) + max(end - pos, 0)
            extra = {
                "state": self.state,
                "target_cluster_id": self.target_id,
                "source_cluster_ids": {s.name: s.cluster_id for s in self.sources},
                "records_copied": sum(counts.values()),
                "records_skipped_loop": self.skipped_loop,
                "partitions_resumed_exactly": self.resumed,
                "target_configs_synced": self.topics.configs_synced if self.topics else 0,
                "target_partitions_added": self.topics.partitions_added if self.topics else 0,
                "record_age": self.ages.summary(),
                "raw_batches": self.raw_batches,
                "raw_records": self.raw_records,
                "send_failures": self.send_failures,
                "commits": self.commits,
                "last_commit_age_s": round(time.monotonic() - self.last_commit, 1),
                "error": str(self.failure) if self.failure is not None else None,
            }
            self.last_status = self._reporter.report(counts, lags, extra)
            return self.last_status


def _sum_counters(tables: list[dict[tuple[str, str], int]]) -> dict[tuple[str, str], int]:
    """Per-thread counters added up; the threads keep counting meanwhile (copies taken first)."""
    total: dict[tuple[str, str], int] = {}
    for table in list(tables):
        for k, v in list(table.items()):
            total[k] = total.get(k, 0) + v
    return total


class ExactResume:
    """A source's rebalance listener: flush and fence before partitions are given up, resume
    each claimed partition where its target's tail says copying got to (``mirror.resume``)."""

    def __init__(self, maker: MirrorMaker, source: Source | GroupSource) -> None:
        self.maker = maker
        self.source = source

    def before_releasing_partitions(self, partitions: set[tuple[str, int]]) -> None:
        source, maker = self.source, self.maker
        with maker.gate.exclusive():
            if maker.producer is not None:
                maker.producer.flush()
            if source.owned is not None:
                source.owned.difference_update(partitions)
            mine = {tp: source.positions.pop(tp) for tp in partitions if tp in source.positions}
            for tp in partitions:
                source.skip.pop(tp, None)
        if mine and maker.failure is None and isinstance(source, Source) and source.connector is not None:
            source.connector.offset_store.commit(source.cfg.group, mine)
            source.committed.update(mine)
            log.info("source %s: rebalance: committed %d partitions before giving them up", source.name, len(mine))

    def before_starting_fetchers(self, offsets: dict[tuple[str, int], int | None]) -> dict[tuple[str, int], int]:
        source, maker = self.source, self.maker
        starts: dict[tuple[str, int], int] = {}
        for (topic, partition), committed in sorted(offsets.items()):
            try:
                resume = self._resume(topic, partition, committed)
            except Exception as exc:  # noqa: BLE001 - never stop a rebalance: the committed offset is safe
                log.warning("source %s: exact resume of %s-%d failed (%s): resuming from the committed offset %s",
                            source.name, topic, partition, exc, committed)
                continue
            if resume.start is not None:
                source.positions[(topic, partition)] = resume.start
                if resume.start != committed:
                    starts[(topic, partition)] = resume.start
                    log.info("source %s: %s-%d resumes at %d, where its copies end in the aggregate cluster "
                             "(committed: %s)", source.name, topic, partition, resume.start, committed)
            if resume.skip:
                source.skip[(topic, partition)] = resume.skip
                log.info("source %s: %s-%d: %d records after the committed offset %s are in the aggregate cluster "
                         "already; they are skipped", source.name, topic, partition, len(resume.skip), committed)
        if source.owned is not None:
            source.owned.update(offsets)
        maker.resumed += len(starts)
        return starts

    def _resume(self, topic: str, partition: int, committed: int | None):
        source, maker = self.source, self.maker
        assert maker.topics is not None and maker.scanner is not None
        target = source.cfg.topic_prefix + topic
        target_count = maker.topics.partition_count(target, source, topic)
        kept = choose_partition(partition, source.source_partition_count(topic, partition), target_count) is not None
        return maker.scanner.resume(source.cluster_id, topic, partition, committed, target, range(target_count), kept)


def _unsent_part(source: Source | GroupSource, chunk: Any) -> Any:
    """What of a fetched chunk is still to copy: None when its partition is no longer this
    process's to write (released in a rebalance) or all of it is below the partition's position."""
    if type(chunk) is RawChunk:
        tp = (chunk.topic, chunk.partition)
    else:
        tp = (chunk[0][0], chunk[0][1])
    if source.owned is not None and tp not in source.owned:
        return None
    position = source.positions.get(tp)
    if position is None:
        return chunk
    if type(chunk) is RawChunk:
        if chunk.next_offset <= position:
            return None
        if chunk.min_offset < position:
            chunk.min_offset = position
        return chunk
    if chunk[-1][2] < position:
        return None
    return chunk if chunk[0][2] >= position else [m for m in chunk if m[2] >= position]


def _without_copied(source: Source | GroupSource, topic: str, partition: int, chunk: list,
                    skip: frozenset[int]) -> list:
    """The chunk's records whose offsets are not in ``skip`` (already copied, placed by key)."""
    kept = [m for m in chunk if m[2] not in skip]
    last = chunk[-1][2]
    if last >= max(skip):
        source.skip.pop((topic, partition), None)
    if not kept:
        source.positions[(topic, partition)] = last + 1
    return kept
