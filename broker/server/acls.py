"""The broker's ACLs: loaded from ZooKeeper at start, kept current by change notifications,
changed by CreateAcls and DeleteAcls.

ACLs live at Kafka's paths (/kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name>);
a writer adds a notification under /kafka-acl-changes (or /kafka-acl-extended-changes) naming
the resource, and every broker watching them re-reads that resource: a change made through
one broker (or `logbus acls --authorizer-properties`) applies on all within moments. Writes are
conditional on the znode's version, so two admins changing one resource never lose an ACL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import defer, threads
from twisted.logger import Logger

from broker.cluster.acls import PATTERN_TYPES, Stored, add_acls, load_all, remove_acls
from broker.security.acl import AclBinding, AclBindingFilter, PatternType, ResourcePattern
from broker.security.authorizer import AclAuthorizer
from broker.server.notification_watcher import NotificationWatcher

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()

class AclStore(NotificationWatcher[Stored]):
    """Keeps ``authorizer``'s ACLs in step with ZooKeeper on one broker."""

    what = "ACL changes"

    def __init__(self, broker: Broker, authorizer: AclAuthorizer) -> None:
        super().__init__(broker)
        self.authorizer = authorizer
        self.last_seen: dict[PatternType, int] = {p: -1 for p in PATTERN_TYPES}

    def start(self) -> None:
        """Load every ACL (blocking, before the broker serves), then watch the notifications."""
        zk = self.broker.zk
        for pattern_type in PATTERN_TYPES:
            changes = zk.acl_changes(pattern_type)
            self.last_seen[pattern_type] = changes[-1][0] if changes else -1
        self.authorizer.replace_all(load_all(zk))
        log.info("loaded ACLs of {n} resource patterns", n=len(self.authorizer.acls()))
        zk.watch_acl_changes(self.on_notifications)

    def read_new(self) -> Stored:
        """The ACLs of every resource named since the last pass."""
        zk = self.broker.zk
        changed: set[ResourcePattern] = set()
        for pattern_type in PATTERN_TYPES:
            for seq, child in zk.acl_changes(pattern_type):
                if seq > self.last_seen[pattern_type]:
                    self.last_seen[pattern_type] = seq
                    pattern = zk.acl_change(pattern_type, child)
                    if pattern is not None:
                        changed.add(pattern)
        return {pattern: zk.acls(pattern)[0] for pattern in changed}

    def apply(self, found: Stored) -> None:
        for pattern, entries in sorted(found.items()):
            log.info("ACLs of {p} changed: {n} entries", p=str(pattern), n=len(entries))
            self.authorizer.set_acls(pattern, entries)

    # -- CreateAcls, DeleteAcls

    def create(self, bindings: list[AclBinding]) -> defer.Deferred[None]:
        """Store the bindings; this broker applies them before answering, others on the notification."""
        d = threads.deferToThread(add_acls, self.broker.zk, bindings)
        return d.addCallback(self.apply)

    def delete(self, filters: list[AclBindingFilter]) -> defer.Deferred[list[list[AclBinding]]]:
        """Delete what each filter matches; per filter, the ACLs deleted."""
        d = threads.deferToThread(remove_acls, self.broker.zk, filters)

        def applied(outcome: tuple[list[list[AclBinding]], Stored]) -> list[list[AclBinding]]:
            self.apply(outcome[1])
            return outcome[0]

        return d.addCallback(applied)
