"""The console's HTTP side (twisted.web): paths to pages, Jinja2 templates packaged with the code,
the stylesheet served locally, ``/metrics``. Thin: the numbers come from ``views`` and ``lag_metrics``.

Pages built from the collector's last sample render on the reactor thread; the two that ask the
cluster something more (a topic's log start offsets and overrides, a group's ZooKeeper consumers)
render on the thread pool. Every answer says ``Content-Security-Policy: default-src 'self'``, so a
browser loads nothing from anywhere else.
"""

from __future__ import annotations

from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import jinja2
from twisted.internet import defer, threads
from twisted.web import resource, server

from broker.console import views
from broker.console.actions import ActionError, Actions
from broker.console.collector import Collector
from broker.console.lag_history import LagView
from broker.console.reader import ClusterReader, ClusterSample
from broker.console.sources import LoadsSource, MirrorsSource
from broker.console.zk_consumers import ZkConsumers
from broker.metrics_text import CONTENT_TYPE as METRICS_TYPE

HTML = "text/html; charset=utf-8"
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'none'; frame-ancestors 'none'"
#: A run's Data Docs page is one file with its styles inline: it may use those and nothing else.
DOCS_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
DOCS_TYPE = "text/html; charset=utf-8; docs"  # an HTML page that gets DOCS_CSP
ACTIONS = ("reset", "delete")  # --allow-actions: /groups/<group>/<action>, GET confirms, POST does it

Answer = tuple[int, str, bytes]


def environment() -> jinja2.Environment:
    """The templates of ``broker/console/templates``, autoescaped; ``segment`` quotes a name for one path segment."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("broker.console", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["segment"] = lambda name: quote(str(name), safe="")
    return env


def static_files() -> dict[str, tuple[str, bytes]]:
    """Every file of ``broker/console/static`` by name, read once."""
    folder = resources.files("broker.console") / "static"
    return {f.name: (STATIC_TYPES.get("." + f.name.rpartition(".")[2], "application/octet-stream"), f.read_bytes())
            for f in folder.iterdir() if f.is_file()}


class Console:
    """Answers a GET path with (code, content type, body), or a Deferred of it."""

    def __init__(self, collector: Collector, reader: ClusterReader, zk: ZkConsumers | None = None,
                 bootstrap: str = "", loads: LoadsSource | None = None, mirrors: MirrorsSource | None = None,
                 actions: Actions | None = None) -> None:
        self.collector = collector
        self.reader = reader
        self.zk = zk
        self.bootstrap = bootstrap
        self.loads = loads
        self.mirrors = mirrors
        self.actions = actions
        self.env = environment()
        self.static = static_files()

    def answer(self, path: str) -> Answer | defer.Deferred[Answer]:
        parts = [unquote(p) for p in path.split("?")[0].strip("/").split("/") if p]
        if self.actions is not None and len(parts) == 3 and parts[0] == "groups" and parts[2] in ACTIONS:
            query = {k: v[-1] for k, v in parse_qs(path.partition("?")[2]).items()}
            return threads.deferToThread(self._confirm, self.actions, parts[2], parts[1], query)
        head, rest = (parts[0], parts[1:]) if parts else ("", [])
        if head == "static" and len(rest) == 1 and rest[0] in self.static:
            kind, body = self.static[rest[0]]
            return 200, kind, body
        latest = self.collector.latest
        if latest is None:
            return 503, "text/plain; charset=utf-8", b"no sample of the cluster yet\n"
        if head == "metrics" and not rest:
            return 200, METRICS_TYPE, latest.metrics
        sample, lag = latest.sample, latest.view
        if not parts:
            return self._page("cluster.html", "cluster", views.cluster_page(sample))
        if head == "topics" and not rest:
            return self._page("topics.html", "topics", views.topics_page(sample))
        if head == "topics" and len(rest) == 1:
            return threads.deferToThread(self._topic, sample, rest[0])
        if head == "groups" and not rest:
            return self._page("groups.html", "groups", {**views.groups_page(sample, lag),
                                                         "window": self.collector.history.window,
                                                         "stop_after": int(self.collector.history.stop_after)})
        if head == "groups" and len(rest) == 1:
            if self.zk is None:
                return self._group(sample, lag, rest[0], None, None)
            return threads.deferToThread(self._group_with_zk, sample, lag, rest[0])
        if head == "loads" and self.loads is not None and not rest:
            return threads.deferToThread(self._loads, self.loads)
        if head == "loads" and self.loads is not None and len(rest) == 3 and rest[2] == "docs":
            return threads.deferToThread(self._docs, self.loads, rest[0], rest[1])
        if head == "mirrors" and self.mirrors is not None and not rest:
            return threads.deferToThread(self._mirrors, self.mirrors)
        return self._missing("No such page.")

    def act(self, path: str, form: dict[str, str]) -> Answer | defer.Deferred[Answer]:
        """A POST: the confirmed action (``--allow-actions`` only; its token checked first)."""
        parts = [unquote(p) for p in path.split("?")[0].strip("/").split("/") if p]
        if self.actions is None or len(parts) != 3 or parts[0] != "groups" or parts[2] not in ACTIONS:
            return 405, "text/plain; charset=utf-8", b"the console is read-only here\n"
        return threads.deferToThread(self._execute, self.actions, parts[2], parts[1], form)

    def _confirm(self, actions: Actions, action: str, group: str, query: dict[str, str]) -> Answer:
        """What the action would do, and the form that does it."""
        page: dict[str, Any] = {"group": group, "action_path": f"/groups/{quote(group, safe='')}/{action}",
                                "token": actions.token(action, group), "fields": {}, "rows": [], "done": ""}
        try:
            if action == "reset":
                page["rows"] = actions.plan_rows(actions.reset(group, query, execute=False))
                page["fields"] = {k: query.get(k, "") for k in ("to", "value", "topic")}
                page.update(title=f"Reset the offsets of group {group}?", confirm="Reset these offsets")
            else:
                page.update(title=f"Delete group {group}?", confirm="Delete the group and its committed offsets")
        except ActionError as exc:
            return self._action_page(page, 409, title=f"Cannot {action} group {group}", action_error=str(exc))
        return self._action_page(page, 200)

    def _execute(self, actions: Actions, action: str, group: str, form: dict[str, str]) -> Answer:
        page: dict[str, Any] = {"group": group, "action_path": "", "token": "", "fields": {}, "rows": [], "done": ""}
        try:
            actions.check(form.get("token", ""), action, group)
            if action == "reset":
                page["rows"] = actions.plan_rows(actions.reset(group, form, execute=True))
                page.update(title=f"Offsets of group {group} reset", done="Committed.")
            else:
                actions.delete(group)
                page.update(title=f"Group {group} deleted", done="Deleted.")
        except ActionError as exc:
            code = 403 if "token" in str(exc) else 409
            return self._action_page(page, code, title=f"Group {group}: nothing was changed", action_error=str(exc))
        return self._action_page(page, 200)

    def _action_page(self, page: dict[str, Any], code: int, **more: Any) -> Answer:
        _, kind, body = self._page("action.html", "groups", {"action_error": "", "confirm": "", **page, **more})
        return code, kind, body

    def _loads(self, loads: LoadsSource) -> Answer:
        return self._page("loads.html", "loads", views.loads_page(loads.runs(), loads.warehouse))

    def _docs(self, loads: LoadsSource, topic: str, run_id: str) -> Answer:
        page = loads.docs_page(topic, run_id)
        if page is None:
            return self._missing(f"Run {run_id} of topic '{topic}' has no Data Docs.")
        return 200, DOCS_TYPE, page

    def _mirrors(self, mirrors: MirrorsSource) -> Answer:
        return self._page("mirrors.html", "mirrors", views.mirrors_page(mirrors.statuses()))

    def _topic(self, sample: ClusterSample, name: str) -> Answer:
        if not any(t.name == name for t in sample.cluster.topics):
            return self._missing(f"Topic '{name}' does not exist.")
        page = views.topic_page(sample, name, self.reader.log_starts(sample, name), self.reader.partition_sizes(sample, name),
                                self.reader.config_overrides(name))
        return self._page("topic.html", "topics", page or {})

    def _group_with_zk(self, sample: ClusterSample, lag: LagView, name: str) -> Answer:
        assert self.zk is not None
        return self._group(sample, lag, name, self.zk.members(name), self.zk.owners(name))

    def _group(self, sample: ClusterSample, lag: LagView, name: str, members: list[str] | None,
               owners: dict | None) -> Answer:
        page = views.group_page(sample, lag, name, members, owners)
        if page is None:
            return self._missing(f"Consumer group '{name}' does not exist.")
        return self._page("group.html", "groups", {**page, "allow_actions": self.actions is not None})

    def _missing(self, what: str) -> Answer:
        code, kind, body = self._page("not_found.html", "", {"what": what})
        return 404, kind, body

    def _page(self, template: str, section: str, page: dict[str, Any]) -> Answer:
        latest = self.collector.latest
        age = max(round(self.collector.now() - latest.time), 0) if latest is not None else "-"
        html = self.env.get_template(template).render(section=section, bootstrap=self.bootstrap, age=age,
                                                      interval=self.collector.interval, error=self.collector.error,
                                                      has_loads=self.loads is not None,
                                                      has_mirrors=self.mirrors is not None, **page)
        return 200, HTML, html.encode()


class ConsoleResource(resource.Resource):
    """Every GET goes to ``Console.answer``; other methods are refused (the console is read-only)."""

    isLeaf = True

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def render_GET(self, request: server.Request) -> Any:
        request.setHeader(b"X-Content-Type-Options", b"nosniff")
        return self._reply(request, self.console.answer(request.uri.decode("utf-8", "replace")))

    def render_POST(self, request: server.Request) -> Any:
        request.setHeader(b"X-Content-Type-Options", b"nosniff")
        form = {k.decode("utf-8", "replace"): v[-1].decode("utf-8", "replace") for k, v in (request.args or {}).items()}
        return self._reply(request, self.console.act(request.uri.decode("utf-8", "replace"), form))

    def _reply(self, request: server.Request, found: Answer | defer.Deferred[Answer]) -> Any:
        if not isinstance(found, defer.Deferred):
            return self._write(request, found)
        found.addCallback(lambda answer: self._finish(request, answer))
        found.addErrback(lambda failure: self._finish(request, (500, "text/plain; charset=utf-8",
                                                                f"{failure.getErrorMessage()}\n".encode())))
        return server.NOT_DONE_YET

    def _write(self, request: server.Request, answer: Answer) -> bytes:
        code, kind, body = answer
        request.setResponseCode(code)
        docs = kind == DOCS_TYPE
        request.setHeader(b"Content-Security-Policy", (DOCS_CSP if docs else CSP).encode())
        request.setHeader(b"Content-Type", (HTML if docs else kind).encode())
        return body

    def _finish(self, request: server.Request, answer: Answer) -> None:
        body = self._write(request, answer)
        if not request.finished and not request._disconnected:
            request.write(body)
            request.finish()


def site(console: Console) -> server.Site:
    s = server.Site(ConsoleResource(console))
    s.noisy = False
    s.displayTracebacks = False
    return s
