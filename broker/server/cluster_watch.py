"""ZooKeeper -> reactor: topics, their assignments and every partition's state znode.

Watches fire on kazoo's threads and only hand what they read to the reactor thread
(``callFromThread``); blocking reads run in the reactor's thread pool. A topic deleted and
created again gets a new generation, so watches of the old one stop.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from twisted.internet import threads
from twisted.logger import Logger
from twisted.python.failure import Failure

from broker.cluster.zkdata import PartitionState, TopicZNode
from broker.server.topics import read_topic

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()


class ClusterWatch:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._generations: dict[str, int] = {}
        self._counter = itertools.count(1)
        self._state_watched: set[tuple[str, int, int]] = set()
        self._stopped = False

    @property
    def zk(self) -> Any:
        return self.broker.zk

    def start(self) -> None:
        """Load every topic and state now (blocking, before the reactor runs), then watch."""
        for topic in self.zk.all_topics():
            gen = self._generations[topic] = next(self._counter)
            self.broker.apply_found_topic(topic, read_topic(self.zk, topic))
            self._watch_topic(topic, gen)
        self.zk.watch_topics(self._on_topics)

    def stop(self) -> None:
        self._stopped = True

    # -- topics ------------------------------------------------------------------------------

    def _on_topics(self, names: list[str]) -> None:
        if not self._stopped:
            self.broker.reactor.callFromThread(self._sync_topics, set(names))

    def _sync_topics(self, names: set[str]) -> None:
        for topic in sorted(names - set(self._generations)):
            gen = self._generations[topic] = next(self._counter)
            threads.deferToThread(self._watch_topic, topic, gen).addErrback(self._log_failure, "watching topic {t}", topic)
        for topic in set(self._generations) - names:
            del self._generations[topic]
            if topic in self.broker.metadata.topics:
                log.info("topic {topic} was deleted", topic=topic)
            self.broker.replicas.remove_topic(topic)

    def _watch_topic(self, topic: str, gen: int) -> None:
        """Blocking: watch /brokers/topics/<topic> (partitions added)."""

        def on_data(data: bytes | None, stat: Any, *args: Any) -> bool | None:
            if self._stopped or self._generations.get(topic) != gen:
                return False
            if data is not None:
                self.broker.reactor.callFromThread(self._on_assignment, topic, gen, TopicZNode.decode(data), stat.mzxid)
            return None

        self.zk.watch_topic(topic, on_data)

    def _on_assignment(self, topic: str, gen: int, assignment: dict[int, list[int]], zxid: int) -> None:
        if self._generations.get(topic) != gen:
            return
        d = threads.deferToThread(self.zk.topic_config, topic)

        def apply(config: dict[str, str]) -> Any:
            if self._generations.get(topic) != gen:
                return None
            self.broker.replicas.apply_topic(topic, assignment, config, zxid)
            new = [p for p in assignment if (topic, gen, p) not in self._state_watched]
            self._state_watched.update((topic, gen, p) for p in new)
            if new:
                return threads.deferToThread(self._watch_states, topic, gen, new)
            return None

        d.addCallback(apply)
        d.addErrback(lambda f: log.failure("loading topic {t}", f, t=topic))

    @staticmethod
    def _log_failure(failure: Failure, what: str, topic: str) -> None:
        log.failure(what, failure, t=topic)

    # -- partition states ----------------------------------------------------------------------

    def _watch_states(self, topic: str, gen: int, partitions: list[int]) -> None:
        """Blocking: watch each partition's state znode."""
        for partition in partitions:
            self._watch_state(topic, gen, partition)

    def _watch_state(self, topic: str, gen: int, partition: int) -> None:
        def on_state(state: PartitionState | None) -> bool | None:
            if self._stopped or self._generations.get(topic) != gen:
                self._state_watched.discard((topic, gen, partition))
                return False
            if state is not None:
                self.broker.reactor.callFromThread(self._apply_state, topic, gen, partition, state)
            return None

        self.zk.watch_partition_state(topic, partition, on_state)

    def _apply_state(self, topic: str, gen: int, partition: int, state: Any) -> None:
        if self._generations.get(topic) == gen:
            self.broker.replicas.apply_state(topic, partition, state)
