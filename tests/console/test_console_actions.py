"""``logbus console --allow-actions`` against a real broker: a group's offsets reset and a group
deleted through the pages, each only after its confirmation page and with that page's token; an
active group refused; without the flag the console takes no POST."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from twisted.internet import defer

from broker.client.admin import AdminClient
from broker.console.actions import Actions
from broker.tools.access import ClusterAccess
from broker.tools.translate_offsets import target_group
from tests.console.samples import sample
from tests.console.test_console_pages import console
from tests.producing import produce

pytestmark = pytest.mark.integration


def _now(found):
    """A page that would run on the thread pool, run inline (deferToThread is patched)."""
    if isinstance(found, defer.Deferred):
        out: list = []
        found.addCallback(out.append)
        return out[0]
    return found


def test_reset_and_delete_through_the_pages_need_the_confirmation_token(broker, monkeypatch) -> None:
    monkeypatch.setattr("twisted.internet.threads.deferToThread", lambda f, *a: defer.maybeDeferred(f, *a))
    topic, group = f"act-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 2, 1, {})
    produce(broker.bootstrap, topic, [{"value": b"v", "partition": p} for p in (0, 1) for _ in range(10)])
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)], asynchronous=False)
    committer.close()
    access = ClusterAccess(broker.bootstrap)
    c, _ = console([sample()])
    c.actions = Actions(access)

    code, _, body = _now(c.answer(f"/groups/{group}/reset?to=earliest&topic={topic}"))
    html = body.decode()
    assert code == 200 and 'id="confirm"' in html
    assert re.findall(r'data-partition="(\d)"><td>[^<]+</td><td class="num">\d</td><td class="num">(\d+)<', html) == [
        ("0", "0"), ("1", "0")]
    token = re.search(r'name="token" value="([0-9a-f]+)"', html).group(1)  # type: ignore[union-attr]
    assert target_group(access, group)[1] == {(topic, 0): 5, (topic, 1): 7}, "a preview changes nothing"

    forged = _now(c.act(f"/groups/{group}/reset", {"to": "earliest", "topic": topic, "token": "0" * 64}))
    assert forged[0] == 403 and target_group(access, group)[1] == {(topic, 0): 5, (topic, 1): 7}
    done = _now(c.act(f"/groups/{group}/reset", {"to": "earliest", "topic": topic, "token": token}))
    assert done[0] == 200 and b"Committed." in done[2]
    assert target_group(access, group)[1] == {(topic, 0): 0, (topic, 1): 0}
    bad = _now(c.answer(f"/groups/{group}/reset?to=offset&value=many"))
    assert bad[0] == 409 and b"is not a number" in bad[2]

    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 6000})
    member.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        refused = _now(c.act(f"/groups/{group}/reset", {"to": "latest", "token": c.actions.token("reset", group)}))
        assert refused[0] == 409 and b"inactive" in refused[2]
    finally:
        member.close()

    deletion = _now(c.answer(f"/groups/{group}/delete"))
    delete_token = re.search(r'name="token" value="([0-9a-f]+)"', deletion[2].decode()).group(1)  # type: ignore[union-attr]
    assert delete_token != token  # a token is for one action on one group
    assert _now(c.act(f"/groups/{group}/delete", {"token": token}))[0] == 403
    deleted = _now(c.act(f"/groups/{group}/delete", {"token": delete_token}))
    assert deleted[0] == 200 and b"Deleted." in deleted[2]
    assert target_group(access, group) == ("Dead", {})


def test_the_group_page_offers_actions_only_when_allowed() -> None:
    c, _ = console([sample()])
    assert 'id="reset-form"' not in _now(c.answer("/groups/readers"))[2].decode()
    assert _now(c.act("/groups/readers/reset", {"to": "earliest"}))[0] == 405
    c.actions = Actions(ClusterAccess("127.0.0.1:1"))
    assert 'id="reset-form"' in _now(c.answer("/groups/readers"))[2].decode()
