"""The broker's flush pass and offset checkpoint run in a worker thread, never in the reactor's:
a roll's fsync of a whole segment takes seconds on a slow disk (measured: a 1.7-2 s stall of
every connection), and the broker's stop waits for a pass under way before it closes the logs."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

from broker.server import broker as broker_module
from broker.server.broker import FLUSH_CHECK_MAX_INTERVAL_MS
from tests.server.unit.wire import unstarted_broker


class _Logs:
    def __init__(self) -> None:
        self.flushed_in_caller = 0
        self.checkpoints_in_caller = 0

    def flush_pass(self, now_ms: int) -> int:
        self.flushed_in_caller += 1
        return 0

    def retention_pass(self, now_ms: int) -> int:
        return 0

    def checkpoint(self) -> None:
        self.checkpoints_in_caller += 1


class _Replicas:
    def shrink_isrs(self, lag_ms: int) -> None:
        pass


def _started_with_threads_held(monkeypatch) -> tuple[Any, _Logs, list[tuple[Any, defer.Deferred[int]]]]:
    """A broker with its loops on a Clock; what it hands to a thread is kept, not run."""
    in_thread: list[tuple[Any, defer.Deferred[int]]] = []

    def defer_to_thread(f: Any, *args: Any) -> defer.Deferred[int]:
        d: defer.Deferred[int] = defer.Deferred()
        in_thread.append((f, d))
        return d

    monkeypatch.setattr(broker_module.threads, "deferToThread", defer_to_thread)
    broker = unstarted_broker()
    logs = _Logs()
    broker._logs, broker._replicas = logs, _Replicas()  # type: ignore[assignment]
    broker._start_loops()
    return broker, logs, in_thread


def test_the_flush_pass_goes_to_a_thread_and_the_stop_waits_for_it(monkeypatch) -> None:
    broker, logs, in_thread = _started_with_threads_held(monkeypatch)
    interval_s = min(broker.config.log_flush_scheduler_interval_ms, FLUSH_CHECK_MAX_INTERVAL_MS) / 1000
    broker.reactor.advance(interval_s)
    [(work, running)] = in_thread
    assert work == logs.flush_pass and logs.flushed_in_caller == 0  # handed over, not run on the reactor
    broker.reactor.advance(interval_s)
    assert len(in_thread) == 1, "no second pass while one runs"

    waiting = broker._disk_work.acquire()  # what the stop waits for
    assert not waiting.called
    running.callback(0)
    assert waiting.called
    for loop in broker._loops:
        loop.stop()


def test_the_offset_checkpoint_goes_to_a_thread_after_a_flush_pass_under_way(monkeypatch) -> None:
    broker, logs, in_thread = _started_with_threads_held(monkeypatch)
    broker.reactor.advance(broker.config.log_flush_offset_checkpoint_interval_ms / 1000)
    flush, flushing = in_thread[0]
    assert flush == logs.flush_pass
    assert [work for work, _ in in_thread] == [logs.flush_pass], "the checkpoint waits for the pass under way"
    flushing.callback(0)
    assert [work for work, _ in in_thread][-1] == logs.checkpoint
    assert logs.checkpoints_in_caller == 0
    in_thread[-1][1].callback(None)
    for loop in broker._loops:
        loop.stop()
