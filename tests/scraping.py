"""Reading a broker's Prometheus endpoint (``metrics.port``) in tests."""

from __future__ import annotations

import re
import urllib.request

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def scrape(port: int) -> dict[str, float]:
    """'name{labels}' -> value, after checking every line is valid exposition text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not exposition format: {line!r}"
        samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return samples
