"""What a page would fetch when opened: every resource it names (scripts, styles, fonts, images), and
what headless Chromium shows and requests when it opens it."""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.IGNORECASE)
_LOADING_ATTRS = frozenset({"src", "href", "srcset", "data", "poster", "background"})


class _Resources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if value and (name in _LOADING_ATTRS and not (tag == "a" and name == "href")):
                self.found.append(value)
            if value and name == "style":
                self.found += [a or b for a, b in _CSS_URL.findall(value)]

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.found += [a or b for a, b in _CSS_URL.findall(data)]


def resources(html: str) -> list[str]:
    """Every URL the page loads by itself (links a reader clicks, ``<a href>``, are not loads)."""
    parser = _Resources()
    parser.feed(html)
    return parser.found


def remote_resources(html: str) -> list[str]:
    """The resources that would leave the machine: http(s) and protocol-relative URLs."""
    return [u for u in resources(html) if re.match(r"(?i)(https?:)?//", u.strip())]


def open_in_chromium(url: str, work: Path) -> tuple[bytes, list[str]]:
    """(a screenshot, the URLs requested for the page) from headless Chromium opening a file:// ``url``."""
    # in the NetLog, requests made for a file:// page carry its network isolation key; the browser's own
    # background requests (updates, accounts) do not
    work.mkdir(parents=True, exist_ok=True)
    shot, netlog = work / "page.png", work / "netlog.json"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", f"--user-data-dir={work / 'profile'}",
                    f"--log-net-log={netlog}", "--window-size=1000,700", f"--screenshot={shot}", url],
                   capture_output=True, timeout=60, check=True)
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = [e["params"]["url"] for e in log["events"] if e["type"] == start
            and str(e["params"].get("network_isolation_key", "")).startswith("file://")]
    return shot.read_bytes(), [u for u in urls if not u.startswith("file:")]
