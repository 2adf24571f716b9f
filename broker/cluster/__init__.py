"""ZooKeeper coordination through kazoo: broker registration, topics, partition state."""
