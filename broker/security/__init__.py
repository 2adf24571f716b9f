"""Security: who a request comes from (principals), how they prove it (TLS, SASL) and what they
may do (ACLs). No Twisted here: the server's connection and handlers use these pieces."""
