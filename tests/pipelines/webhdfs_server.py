"""A small real HTTP server speaking the WebHDFS REST subset the ``hdfs`` package uses, backed
by a directory: CREATE (with the namenode's 307 redirect to a "datanode" URL, as HDFS does),
OPEN, LISTSTATUS, GETFILESTATUS, MKDIRS, RENAME (no overwrite, as HDFS), DELETE.

It is a test double for the protocol, not an HDFS: a real HDFS is exercised only through
``docker/``."""

from __future__ import annotations

import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

PREFIX = "/webhdfs/v1"


class WebHdfsServer:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _local(self, path: str) -> Path:
                rel = unquote(path[len(PREFIX):]).lstrip("/")
                target = (server.root / rel).resolve()
                if not str(target).startswith(str(server.root.resolve())):
                    raise PermissionError(path)
                return target

            def _send(self, code: int, body: dict | bytes | None = None, headers: dict | None = None) -> None:
                data = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if isinstance(body, dict) else "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, exception: str, message: str) -> None:
                self._send(code, {"RemoteException": {"exception": exception, "javaClassName": f"java.io.{exception}",
                                                      "message": message}})

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            @staticmethod
            def _status(p: Path) -> dict:
                st = p.stat()
                return {"pathSuffix": p.name, "type": "DIRECTORY" if p.is_dir() else "FILE",
                        "length": 0 if p.is_dir() else st.st_size, "modificationTime": int(st.st_mtime * 1000),
                        "accessTime": int(st.st_atime * 1000), "blockSize": 134217728, "replication": 1,
                        "owner": "test", "group": "test", "permission": "755"}

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                op = q.get("op", "").upper()
                server.requests.append((method, op))
                if not url.path.startswith(PREFIX):
                    return self._error(404, "FileNotFoundException", url.path)
                try:
                    p = self._local(url.path)
                except PermissionError:
                    return self._error(403, "AccessControlException", url.path)
                if method == "PUT" and op == "CREATE":
                    if q.get("datanode") != "true":  # the namenode answers with a redirect, as HDFS does
                        self._body()
                        host = self.headers.get("Host")
                        return self._send(307, b"", {"Location": f"http://{host}{self.path}&datanode=true"})
                    data = self._body()
                    if p.exists() and q.get("overwrite", "false").lower() != "true":
                        return self._error(403, "FileAlreadyExistsException", f"{url.path} already exists")
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_bytes(data)
                    return self._send(201, b"", {"Location": f"hdfs://{url.path[len(PREFIX):]}"})
                if method == "GET" and op == "OPEN":
                    if not p.is_file():
                        return self._error(404, "FileNotFoundException", f"File {url.path} does not exist.")
                    data = p.read_bytes()
                    offset = int(q.get("offset", 0))
                    length = q.get("length")
                    data = data[offset:] if length is None else data[offset:offset + int(length)]
                    return self._send(200, data)
                if method == "GET" and op == "GETFILESTATUS":
                    if not p.exists():
                        return self._error(404, "FileNotFoundException", f"File does not exist: {url.path}")
                    st = self._status(p)
                    st["pathSuffix"] = ""
                    return self._send(200, {"FileStatus": st})
                if method == "GET" and op == "LISTSTATUS":
                    if not p.exists():
                        return self._error(404, "FileNotFoundException", f"File {url.path} does not exist.")
                    items = [self._status(c) for c in sorted(p.iterdir())] if p.is_dir() else [{**self._status(p), "pathSuffix": ""}]
                    return self._send(200, {"FileStatuses": {"FileStatus": items}})
                if method == "PUT" and op == "MKDIRS":
                    p.mkdir(parents=True, exist_ok=True)
                    return self._send(200, {"boolean": True})
                if method == "PUT" and op == "RENAME":
                    dst = self._local(PREFIX + q["destination"])
                    if not p.exists() or dst.exists() and not dst.is_dir() or not dst.parent.is_dir():
                        return self._send(200, {"boolean": False})
                    if dst.is_dir():
                        dst = dst / p.name
                    os.rename(p, dst)
                    return self._send(200, {"boolean": True})
                if method == "DELETE" and op == "DELETE":
                    if not p.exists():
                        return self._send(200, {"boolean": False})
                    if p.is_dir():
                        if any(p.iterdir()) and q.get("recursive", "false").lower() != "true":
                            return self._error(403, "PathIsNotEmptyDirectoryException", f"{url.path} is non empty")
                        shutil.rmtree(p)
                    else:
                        p.unlink()
                    return self._send(200, {"boolean": True})
                return self._error(400, "IllegalArgumentException", f"unsupported {method} op={op}")

            def do_GET(self) -> None:
                self._handle("GET")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="webhdfs-test-server", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> WebHdfsServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
