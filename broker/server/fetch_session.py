"""Fetch sessions (Kafka's KIP-227): a fetcher names its partitions once, then each
incremental fetch names only what changed, and each answer carries only partitions with news.

Without them a follower sends every partition it follows in every fetch, and the leader
answers every one, so an idle cluster's cost grows with its partition count. A session keeps,
per partition, where the fetcher reads and what it was last told (high watermark, log start
offset); ``FetchSessionCache.context`` turns a Fetch request (v7+) into a ``FetchContext``. As
in Kafka:

- ``session_id`` 0 and epoch -1: a full fetch without a session (clients before v7, librdkafka);
- epoch 0: a full fetch that opens a session (closing the named one, if any);
- epoch -1 with a session id: close it, and answer as a full fetch without a session;
- epoch > 0: an incremental fetch of that session; the epoch must be the one expected
  (INVALID_FETCH_SESSION_EPOCH), the session must exist (FETCH_SESSION_ID_NOT_FOUND).

An incremental fetch reads only the session's *dirty* partitions, not all of them: those it
names, those an event touched since (``mark``: an append, a high watermark, a leadership
change), and those whose last read found something or could not tell. A partition whose last
read found nothing to send is *quiet* and is skipped until an event marks it. Every
``rescan_s`` a session's fetch reads all its partitions once more, which bounds what an event
without a ``mark`` (a log start moved by retention) can hide, and refreshes the followers'
caught-up times that the ISR rule needs (``rescan_s`` is below replica.lag.time.max.ms).

Sessions live in ``max.incremental.fetch.session.cache.slots`` slots; when they are full, the
least recently used consumer session (or, with none, follower session) makes room.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.protocol.errors import ErrorCode, FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from broker.server.fetch_parts import FetchedPartition, FetchWanted

TopicPartition = tuple[str, int]

NO_SESSION = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: epochs wrap from the largest int32 back to 1 (0 would mean "open a new session")
MAX_EPOCH = 2**31 - 1
#: the topic of a session's purgatory key (no topic name can hold a NUL)
SESSION_KEY_TOPIC = "\x00fetch-session"


@dataclass(slots=True)
class SessionPartition:
    """One partition of a session: where the fetcher reads, and what it was last answered."""

    offset: int
    max_bytes: int
    leader_epoch: int
    high_watermark: int = -2  # never answered: the first answer always includes the partition
    log_start_offset: int = -2


@dataclass(eq=False)
class FetchSession:
    session_id: int
    follower: bool
    rescan_at: float
    epoch: int = 1  # the epoch the next incremental fetch must carry
    partitions: OrderedDict[TopicPartition, SessionPartition] = field(default_factory=OrderedDict)
    #: partitions the next fetch reads, in the order it reads them
    dirty: dict[TopicPartition, None] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)  # partitions held per topic

    @property
    def key(self) -> TopicPartition:
        """The purgatory key its long polls wait on."""
        return (SESSION_KEY_TOPIC, self.session_id)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= MAX_EPOCH else self.epoch + 1


def _news(kept: SessionPartition, part: FetchedPartition) -> bool:
    """Whether an incremental answer must include ``part``; remembers what it says."""
    changed = (part.records is not None or part.error_code != ErrorCode.NONE
               or part.high_watermark != kept.high_watermark or part.log_start_offset != kept.log_start_offset)
    kept.high_watermark, kept.log_start_offset = part.high_watermark, part.log_start_offset
    return changed


class FetchContext:
    """One Fetch request seen through its session: ``wanted()`` what to read now (again after a
    long poll), ``wait_key`` what a long poll waits on, the session id to answer, and
    ``answer`` to choose the partitions of the response."""

    def __init__(self, cache: FetchSessionCache, requested: list[FetchWanted], session: FetchSession | None,
                 incremental: bool) -> None:
        self._cache = cache
        self._requested = requested
        self.session = session
        self.incremental = incremental

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else NO_SESSION

    @property
    def wait_key(self) -> TopicPartition | None:
        """A session's own key for an incremental fetch (appends reach it through ``mark``);
        None: wait on the partitions read."""
        return self.session.key if self.incremental and self.session is not None else None

    def wanted(self) -> list[FetchWanted]:
        """The partitions to read: all of a full fetch; a session's dirty ones (all of them
        when its rescan is due)."""
        session = self.session
        if not self.incremental or session is None:
            return self._requested
        now = self._cache.now()
        if now >= session.rescan_at:
            session.rescan_at = now + self._cache.rescan_s
            session.dirty = dict.fromkeys(session.partitions)
        kept = session.partitions
        return [FetchWanted(tp[0], tp[1], p.offset, p.max_bytes, p.leader_epoch)
                for tp in session.dirty for p in (kept[tp],)]

    def answer(self, parts: list[FetchedPartition]) -> list[FetchedPartition]:
        """The partitions to answer: all of a full fetch; of an incremental one those with
        records, an error, or a new high watermark or log start offset. A partition with
        nothing to send becomes quiet; one that sent records moves to the end of the reading
        order, so that a response's byte limit does not always favour the same ones."""
        session = self.session
        if session is None:
            return parts
        kept, dirty = session.partitions, session.dirty
        answered = []
        for part in parts:
            tp = (part.topic, part.partition)
            entry = kept.get(tp)
            if entry is None:
                answered.append(part)
                continue
            if _news(entry, part) or not self.incremental:
                answered.append(part)
            if part.at_end and part.error_code == ErrorCode.NONE:
                dirty.pop(tp, None)
            elif part.records is not None:
                dirty.pop(tp, None)
                dirty[tp] = None
        return answered


class FetchSessionCache:
    """The broker's fetch sessions, by id, least recently used first, and which sessions hold
    each partition (so that an event there marks them)."""

    def __init__(self, slots: int, rescan_s: float, now: Callable[[], float],
                 rng: Callable[[], int] | None = None) -> None:
        self.slots = slots
        self.rescan_s = rescan_s
        self.now = now
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._holding: dict[TopicPartition, set[FetchSession]] = {}
        self._new_id = rng or (lambda: random.randint(1, MAX_EPOCH))

    def __len__(self) -> int:
        return len(self._sessions)

    def mark(self, tp: TopicPartition) -> list[FetchSession]:
        """Something changed at ``tp``: every session holding it reads it at its next fetch.
        Returns those sessions (the caller wakes their long polls)."""
        holding = self._holding.get(tp)
        if not holding:
            return []
        for session in holding:
            session.dirty[tp] = None
        return list(holding)

    def context(self, session_id: int, epoch: int, requested: list[FetchWanted],
                forgotten: Iterable[TopicPartition], follower: bool) -> FetchContext:
        """The context of a Fetch request (v7+); raises the session errors above."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self._close(session_id)
            if epoch == FINAL_EPOCH or not requested:
                return FetchContext(self, requested, None, False)
            session = self._open(follower)
            if session is not None:
                self._set(session, requested)
            return FetchContext(self, requested, session, False)
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionIdNotFoundError(f"fetch session {session_id} is not known to this broker")
        if epoch != session.epoch:
            raise InvalidFetchSessionEpochError(
                f"fetch session {session_id} expected epoch {session.epoch}, the request has {epoch}")
        self._set(session, requested)
        for tp in forgotten:
            self._forget(session, tp)
        session.next_epoch()
        self._sessions.move_to_end(session_id)
        return FetchContext(self, requested, session, True)

    def _set(self, session: FetchSession, requested: list[FetchWanted]) -> None:
        """Add or update the requested partitions; each is read at the next fetch."""
        kept = session.partitions
        for w in requested:
            tp = (w.topic, w.partition)
            entry = kept.get(tp)
            if entry is None:
                kept[tp] = SessionPartition(w.offset, w.max_bytes, w.leader_epoch)
                self._holding.setdefault(tp, set()).add(session)
                session.topics[w.topic] = session.topics.get(w.topic, 0) + 1
            else:
                entry.offset, entry.max_bytes, entry.leader_epoch = w.offset, w.max_bytes, w.leader_epoch
            session.dirty[tp] = None

    def drop_topics(self, session: FetchSession, topics: set[str]) -> list[FetchWanted]:
        """Take every partition of ``topics`` out of ``session`` (their reads are refused now);
        returns them."""
        dropped = [FetchWanted(tp[0], tp[1], p.offset, p.max_bytes, p.leader_epoch)
                   for tp, p in session.partitions.items() if tp[0] in topics]
        for w in dropped:
            self._forget(session, (w.topic, w.partition))
        return dropped

    def _forget(self, session: FetchSession, tp: TopicPartition) -> None:
        if session.partitions.pop(tp, None) is None:
            return
        session.dirty.pop(tp, None)
        left = session.topics.get(tp[0], 0) - 1
        if left > 0:
            session.topics[tp[0]] = left
        else:
            session.topics.pop(tp[0], None)
        self._release(session, tp)

    def _release(self, session: FetchSession, tp: TopicPartition) -> None:
        holding = self._holding.get(tp)
        if holding is not None:
            holding.discard(session)
            if not holding:
                del self._holding[tp]

    def _close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for tp in session.partitions:
                self._release(session, tp)

    def _open(self, follower: bool) -> FetchSession | None:
        """A new session, making room if the slots are full; None when there are no slots."""
        if self.slots <= 0:
            return None
        if len(self._sessions) >= self.slots:
            victims = [sid for sid, s in self._sessions.items() if not s.follower] or list(self._sessions)
            self._close(victims[0])
        session_id = next(i for i in (self._new_id() for _ in itertools.count()) if i not in self._sessions)
        session = self._sessions[session_id] = FetchSession(session_id, follower, self.now() + self.rescan_s)
        return session
