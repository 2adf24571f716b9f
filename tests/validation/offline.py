"""What a page would fetch when opened: every resource it names (scripts, styles, fonts, images)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

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
