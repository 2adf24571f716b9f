"""The Kafka wire protocol: primitive types, message schemas, record batches, codecs. No sockets."""
