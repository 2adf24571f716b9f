"""Consumer-group coordination for standard Kafka clients, with offsets kept in ZooKeeper."""
