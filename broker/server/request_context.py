"""Who sent the request being dispatched, and where it came in: the connection's identity, which it
sets as ``Broker.request`` for the length of one dispatch (``NO_REQUEST`` otherwise). Handlers
that answer by it (authorization, Metadata's endpoints, JoinGroup's client host) read it before
any Deferred."""

from __future__ import annotations

from dataclasses import dataclass

from broker.security.principal import ANONYMOUS


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One connection's identity, as a request from it is dispatched."""

    principal: str = ANONYMOUS  # "User:<name>" once a SASL login succeeds on the connection
    listener: str | None = None  # the listener's name: Metadata answers with its endpoints
    peer_host: str | None = None  # the client's address: the ACLs' host, JoinGroup's client host


#: ``Broker.request`` while no request is dispatched
NO_REQUEST = RequestContext()
