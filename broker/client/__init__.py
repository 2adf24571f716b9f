"""logbus's own Python clients (producer, SimpleConsumer, ZooKeeper consumer) and admin."""
