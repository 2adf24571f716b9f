"""The coordinator's committed-offset names; their home is ``broker.cluster.offset_store`` (one offset
store for the coordinator, the ZooKeeper consumer and the mirror). Kept so broker/server imports stay."""

from broker.cluster.offset_store import NO_OFFSET, Committed, Key, ZkOffsetStore

__all__ = ["NO_OFFSET", "Committed", "Key", "ZkOffsetStore"]
