"""`logbus topics --create/--delete`: an existing (or missing) topic is an error, unless
--if-not-exists (or --if-exists) says that is the wanted state."""

from __future__ import annotations

import argparse
import uuid

import pytest

from broker.tools import CommandError, topics


def topics_command(bootstrap: str, *argv: str) -> int:
    parser = argparse.ArgumentParser()
    topics.add_arguments(parser)
    return topics.run(parser.parse_args(["--bootstrap-server", bootstrap, *argv]))


def test_create_and_delete_twice(broker, capsys):
    topic = f"tool-{uuid.uuid4().hex[:8]}"
    assert topics_command(broker.bootstrap, "--create", "--topic", topic, "--partitions", "2") == 0
    assert capsys.readouterr().out == f"Created topic {topic}.\n"
    with pytest.raises(CommandError, match="TOPIC_ALREADY_EXISTS"):
        topics_command(broker.bootstrap, "--create", "--topic", topic)
    assert topics_command(broker.bootstrap, "--create", "--topic", topic, "--if-not-exists") == 0
    assert topics_command(broker.bootstrap, "--delete", "--topic", topic) == 0
    assert capsys.readouterr().out == f"Deleted topic {topic}.\n"
    with pytest.raises(CommandError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        topics_command(broker.bootstrap, "--delete", "--topic", topic)
    assert topics_command(broker.bootstrap, "--delete", "--topic", topic, "--if-exists") == 0
    assert capsys.readouterr().out == ""
