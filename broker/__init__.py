"""logbus: the Kafka design of the LinkedIn papers, rebuilt in Python."""

__version__ = "0.1.0"
