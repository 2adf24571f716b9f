"""The console's Loads and Mirrors pages: the loader's runs read from a real warehouse layout
(plans, manifests, validation results and Data Docs written where the loader writes them), the
mirrors' status files as the mirror-maker writes them. No cluster: the pages read files only."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from twisted.internet import defer

from broker.console.web import DOCS_CSP, DOCS_TYPE, Console, ConsoleResource
from mirror.stats import MirrorStatusFiles, Reporter
from pipelines.console_loads import WarehouseLoads
from pipelines.loader import Loader
from pipelines.manifest import OffsetStore
from tests.console.samples import sample
from tests.console.test_console_pages import console


def _warehouse(tmp_path: Path) -> Path:
    """A loader config and its warehouse: one committed run that passed validation, one that
    failed, one pending."""
    warehouse = tmp_path / "wh"
    config = tmp_path / "loader.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"bootstrap.servers": "127.0.0.1:1"}, "warehouse": f"file://{warehouse}",
                                      "topics": [{"name": "page-views", "format": "raw"}]}))
    loads = WarehouseLoads(str(config))
    with Loader(loads.config) as loader:
        store, fs = OffsetStore(loader.fs), loader.fs
    for run_id, passed in (("20261124T100000", True), ("20261124T110000", False)):
        store.write_manifest({"run_id": run_id, "topic": "page-views", "kind": "load",
                              "partitions": [{"partition": 0, "start": 0, "end": 10, "next": 10}],
                              "totals": {"records": 10, "errors": 0, "duplicates_dropped": 1}})
        base = f"page-views/_validation/{run_id}"
        fs.write_bytes(f"{base}/validation.json", json.dumps({"success": passed, "evaluated": 12, "failed": 0 if passed else 2,
                                                              "rows": 10, "checks": [], "run_id": run_id}).encode())
        fs.write_bytes(f"{base}/docs/index.html", f"<html><style>p{{}}</style><p>run {run_id}</p></html>".encode())
    store.write_plan({"run_id": "20261124T120000", "topic": "page-views",
                      "partitions": [{"partition": 0, "start": 10, "end": 25}]})
    return config


def _answer(c: Console, path: str):
    found = c.answer(path)
    if isinstance(found, defer.Deferred):  # pages that read files run on the thread pool: run inline here
        out: list = []
        found.addCallback(out.append)
        return out[0]
    return found


def test_the_loads_page_lists_runs_newest_first_with_their_validation_and_docs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("twisted.internet.threads.deferToThread", lambda f, *a: defer.maybeDeferred(f, *a))
    c, _ = console([sample()])
    c.loads = WarehouseLoads(str(_warehouse(tmp_path)))
    code, _, body = _answer(c, "/loads")
    html = body.decode()
    assert code == 200 and 'href="/loads"' in html  # in the navigation once configured
    order = [html.index(f'data-run="{r}"') for r in ("20261124T120000", "20261124T110000", "20261124T100000")]
    assert order == sorted(order)
    failed = html[html.index('data-run="20261124T110000"'):html.index('data-run="20261124T100000"')]
    assert 'class="bad"' in failed and "FAILED" in failed and ">10/12<" in failed
    pending = html[html.index('data-run="20261124T120000"'):html.index('data-run="20261124T110000"')]
    assert "pending" in pending and "0:10-25" in pending and "/docs" not in pending
    assert "validation passed: 1" in html and "validation FAILED: 1" in html

    code, kind, docs = _answer(c, "/loads/page-views/20261124T100000/docs")
    assert (code, kind) == (200, DOCS_TYPE) and b"run 20261124T100000" in docs
    assert _answer(c, "/loads/page-views/20261124T120000/docs")[0] == 404
    assert _answer(c, "/loads/page-views/..%2F..%2Fetc/docs")[0] == 404


def test_the_docs_page_gets_its_own_policy_and_the_rest_the_consoles() -> None:
    class Request:
        def __init__(self) -> None:
            self.headers: dict[bytes, bytes] = {}
            self.code = 0

        def setHeader(self, k: bytes, v: bytes) -> None:  # noqa: N802 - twisted's name
            self.headers[k] = v

        def setResponseCode(self, code: int) -> None:  # noqa: N802
            self.code = code

    r = ConsoleResource.__new__(ConsoleResource)
    docs, page = Request(), Request()
    r._write(docs, (200, DOCS_TYPE, b"<html/>"))  # type: ignore[arg-type]
    r._write(page, (200, "text/html; charset=utf-8", b"<html/>"))  # type: ignore[arg-type]
    assert docs.headers[b"Content-Security-Policy"] == DOCS_CSP.encode()
    assert docs.headers[b"Content-Type"] == b"text/html; charset=utf-8"
    assert b"'self'" in page.headers[b"Content-Security-Policy"] and b"unsafe-inline" not in page.headers[b"Content-Security-Policy"]


def test_the_mirrors_page_shows_each_status_file_and_one_it_cannot_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("twisted.internet.threads.deferToThread", lambda f, *a: defer.maybeDeferred(f, *a))
    status = tmp_path / "mirror.status.json"
    Reporter(str(status)).report({("dc1", "page-views"): 1200}, {("dc1", "page-views"): 35},
                                 {"state": "running", "target_cluster_id": "agg-id", "records_copied": 1200,
                                  "last_commit_age_s": 1.5, "time": time.time()})
    c, _ = console([sample()])
    c.mirrors = MirrorStatusFiles([str(status), str(tmp_path / "missing.json")])
    code, _, body = _answer(c, "/mirrors")
    html = body.decode()
    assert code == 200 and 'href="/mirrors"' in html
    row = html[html.index('data-source="dc1" data-topic="page-views"'):]
    assert ">1200<" in row and ">35<" in row.split("</tr>")[0]
    assert "running" in html and "agg-id" in html and "1 topic(s) lagging" in html
    assert "last_commit_age_s" in html and "cannot read" in html and "missing.json" in html


def test_without_sources_there_are_no_such_pages() -> None:
    c, _ = console([sample()])
    assert _answer(c, "/loads")[0] == 404 and _answer(c, "/mirrors")[0] == 404
    html = _answer(c, "/")[2].decode()
    assert 'href="/loads"' not in html and 'href="/mirrors"' not in html
