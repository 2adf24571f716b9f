"""logbus's own Python clients: no reactor needed, so they work in scripts, Spark executors
and Airflow tasks.

- ``Producer``: batching sync/async producer (murmur2 partitioning, compression, idempotence).
- ``SimpleConsumer``: the stateless low-level consumer of the original design.
- ``ZookeeperConsumerConnector``: the high-level consumer, with the original rebalance algorithm.
- ``GroupConsumer``: a consumer-group member through the brokers' group coordinator (Kafka's
  classic group protocol, KafkaConsumer semantics); shares groups with librdkafka and Java clients.
- ``AdminClient``: create, delete, describe and alter topics.
"""

from broker.client.accumulator import FutureRecordMetadata, RecordMetadata
from broker.client.admin import AdminClient, PartitionDescription, TopicDescription
from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.group_config import GroupConsumerConfig
from broker.client.group_consumer import GroupConsumer, NoOffsetForPartitionError, TopicPartition
from broker.client.metadata import ClusterMetadata, KafkaTimeoutError, TopicInfo
from broker.client.partitioner import (
    DefaultPartitioner,
    KeyRoundRobinPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    load_partitioner,
    murmur2,
    murmur2_partition,
)
from broker.client.producer import Producer, ProducerClosedError
from broker.client.rebalance import Blacklist, Whitelist
from broker.client.simple_consumer import (
    EARLIEST_TIME,
    LATEST_TIME,
    LeaderNotAvailableError,
    MessageAndMetadata,
    MessageSet,
    SimpleConsumer,
)
from broker.client.zk_consumer import (
    ConsumerConfig,
    ConsumerRebalanceFailedException,
    ConsumerTimeoutException,
    KafkaStream,
    ZookeeperConsumerConnector,
)

__all__ = [
    "AdminClient",
    "Blacklist",
    "BrokerConnection",
    "BrokerConnectionError",
    "ClusterMetadata",
    "ConsumerConfig",
    "ConsumerRebalanceFailedException",
    "ConsumerTimeoutException",
    "DefaultPartitioner",
    "EARLIEST_TIME",
    "FutureRecordMetadata",
    "GroupConsumer",
    "GroupConsumerConfig",
    "KafkaStream",
    "KafkaTimeoutError",
    "KeyRoundRobinPartitioner",
    "LATEST_TIME",
    "LeaderNotAvailableError",
    "MessageAndMetadata",
    "MessageSet",
    "NoOffsetForPartitionError",
    "PartitionDescription",
    "Partitioner",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "RoundRobinPartitioner",
    "SimpleConsumer",
    "TopicDescription",
    "TopicInfo",
    "TopicPartition",
    "Whitelist",
    "ZookeeperConsumerConnector",
    "load_partitioner",
    "murmur2",
    "murmur2_partition",
]
