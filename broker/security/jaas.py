"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule> <flag> key="value" ...;``.

The broker reads PLAIN users from it (``user_<name>="<password>"``, PlainLoginModule) and its own
inter-broker credentials (``username``/``password``); clients read their login from it. Only the
syntax Kafka's JaasConfig accepts: quoted or bare values, one or more modules, each ending in ';'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(=)|(;)|([^\s=;"]+))', re.S)


class JaasError(ValueError):
    """A sasl.jaas.config value that does not parse."""


@dataclass(frozen=True)
class LoginModule:
    """One ``<class> <flag> options;`` entry."""

    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PLAIN users declared as ``user_<name>="<password>"``."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind is "q" (quoted), "=", ";" or "w" (bare word)."""
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError(f"unexpected character at position {pos} of sasl.jaas.config")
        pos = m.end()
        if m.group(1) is not None:
            out.append(("q", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2):
            out.append(("=", "="))
        elif m.group(3):
            out.append((";", ";"))
        else:
            out.append(("w", m.group(4)))
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    """Every login module of a sasl.jaas.config value; raises JaasError (one line) when malformed."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "w" or tokens[i + 1][0] != "w":
            raise JaasError("sasl.jaas.config must be '<LoginModule> <flag> key=\"value\" ...;'")
        name, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in FLAGS:
            raise JaasError(f"sasl.jaas.config: login module control flag {tokens[i + 1][1]!r} is not one of {', '.join(FLAGS)}")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if (i + 2 >= len(tokens) or tokens[i][0] != "w" or tokens[i + 1][0] != "="
                    or tokens[i + 2][0] not in ("q", "w")):
                raise JaasError(f"sasl.jaas.config: expected key=value in the options of {name}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError(f"sasl.jaas.config: the options of {name} must end with ';'")
        i += 1
        modules.append(LoginModule(name, flag, options))
    if not modules:
        raise JaasError("sasl.jaas.config is empty")
    return modules


def login_of(text: str) -> tuple[str, str]:
    """(username, password) of the first module that has both (a client's or broker's own login)."""
    for module in parse_jaas(text):
        if "username" in module.options and "password" in module.options:
            return module.options["username"], module.options["password"]
    raise JaasError("sasl.jaas.config has no username=\"...\" password=\"...\" options")
