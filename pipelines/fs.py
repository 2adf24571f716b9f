"""The warehouse's filesystem, chosen by the URL's scheme.

- ``file:///...``  the local filesystem (or any mounted one): ``os.rename`` is the commit.
- ``webhdfs://host:port/path``  WebHDFS through the ``hdfs`` package: manifests, offsets and
  (from the Python tasks) the data files; a rename is the commit (HDFS renames do not
  overwrite, so the old file is deleted first).
- ``hdfs://namenode:8020/path``  Hadoop's own client inside Spark's JVM (py4j), on the driver.
  Data for ``hdfs://`` is written by Spark's Hadoop writer (see ``pipelines.hadoop_writer``).

Every path handed to these classes is relative to the warehouse root, with ``/`` separators.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse


def read_parquet(fs: WarehouseFS, path: str, columns: list[str] | None = None):
    """A Parquet file of the warehouse (or those ``columns`` of it) as an Arrow table, memory-mapped where
    the file is local."""
    import io

    import pyarrow.parquet as pq

    if isinstance(fs, LocalFS):  # ParquetFile: no dataset discovery per file (reading many small files)
        with pq.ParquetFile(fs.local(path), memory_map=True) as f:
            return f.read(columns=columns)
    with pq.ParquetFile(io.BytesIO(fs.read_bytes(path))) as f:
        return f.read(columns=columns)


class WarehouseFS:
    url: str

    def read_bytes(self, path: str) -> bytes:  # FileNotFoundError when missing
        raise NotImplementedError

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write ``data`` atomically: to a temporary name beside ``path``, then rename (replacing)."""
        raise NotImplementedError

    def list(self, path: str) -> list[str]:
        """Names in directory ``path`` (empty when it does not exist)."""
        raise NotImplementedError

    def is_dir(self, path: str) -> bool:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, replacing ``dst`` if it exists."""
        raise NotImplementedError

    def delete(self, path: str, recursive: bool = False) -> None:
        raise NotImplementedError

    def size(self, path: str) -> int:
        raise NotImplementedError

    def uri(self, path: str) -> str:
        """The full URL of ``path`` (what Spark and pyarrow readers take)."""
        return self.url.rstrip("/") + "/" + path.lstrip("/")

    def walk_files(self, path: str) -> Iterator[str]:
        """Every file below ``path``, relative to the root, skipping names starting with ``_`` or ``.``
        below ``path`` (staging, offsets, errors)."""
        for name in sorted(self.list(path)):
            if name.startswith(("_", ".")):
                continue
            child = posixpath.join(path, name)
            if self.is_dir(child):
                yield from self.walk_files(child)
            else:
                yield child

    @staticmethod
    def temp_name(path: str) -> str:
        head, tail = posixpath.split(path)
        return posixpath.join(head, f".{tail}.{uuid.uuid4().hex[:12]}.tmp")


class LocalFS(WarehouseFS):
    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"file:// warehouse must be local, not {url!r}")
        self.root = parsed.path or "/"
        self.url = "file://" + self.root

    def local(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def read_bytes(self, path: str) -> bytes:
        with open(self.local(path), "rb") as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        target = self.local(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = self.local(self.temp_name(path))
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, target)

    def list(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.local(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self.local(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(self.local(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(self.local(path), exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(self.local(dst)), exist_ok=True)
        os.rename(self.local(src), self.local(dst))  # atomic, replaces dst

    def delete(self, path: str, recursive: bool = False) -> None:
        import shutil

        target = self.local(path)
        if os.path.isdir(target) and not os.path.islink(target):
            if recursive:
                shutil.rmtree(target, ignore_errors=True)
            else:
                os.rmdir(target)
        elif os.path.lexists(target):
            os.unlink(target)

    def size(self, path: str) -> int:
        return os.path.getsize(self.local(path))


class WebHdfsFS(WarehouseFS):
    """WebHDFS through the ``hdfs`` package (``hdfs.InsecureClient``)."""

    def __init__(self, url: str, user: str | None = None, timeout: float = 60.0) -> None:
        from hdfs import InsecureClient

        parsed = urlparse(url)
        if not parsed.netloc:
            raise ValueError(f"webhdfs:// warehouse needs host:port, not {url!r}")
        self.root = parsed.path or "/"
        self.url = f"webhdfs://{parsed.netloc}{self.root}"
        self.client = InsecureClient(f"http://{parsed.netloc}", user=user, timeout=timeout)

    def _p(self, path: str) -> str:
        return posixpath.join(self.root, path.lstrip("/")) if path else self.root

    def read_bytes(self, path: str) -> bytes:
        from hdfs.util import HdfsError

        try:
            with self.client.read(self._p(path)) as reader:
                return reader.read()
        except HdfsError as exc:
            if "FileNotFoundException" in str(getattr(exc, "exception", "")) or "does not exist" in str(exc):
                raise FileNotFoundError(path) from None
            raise

    def write_bytes(self, path: str, data: bytes) -> None:
        tmp = self.temp_name(path)
        self.client.write(self._p(tmp), data=data, overwrite=True)
        self.rename(tmp, path)

    def _status(self, path: str) -> dict | None:
        return self.client.status(self._p(path), strict=False)

    def list(self, path: str) -> list[str]:
        status = self._status(path)
        if not status or status["type"] != "DIRECTORY":
            return []
        return sorted(s["pathSuffix"] for s in self.client._list_status(self._p(path)).json()["FileStatuses"]["FileStatus"])

    def is_dir(self, path: str) -> bool:
        status = self._status(path)
        return bool(status and status["type"] == "DIRECTORY")

    def exists(self, path: str) -> bool:
        return self._status(path) is not None

    def makedirs(self, path: str) -> None:
        self.client.makedirs(self._p(path))

    def rename(self, src: str, dst: str) -> None:
        self.client.makedirs(posixpath.dirname(self._p(dst)))
        if self._status(dst) is not None:  # HDFS renames never replace a file
            self.client.delete(self._p(dst))
        self.client.rename(self._p(src), self._p(dst))

    def delete(self, path: str, recursive: bool = False) -> None:
        self.client.delete(self._p(path), recursive=recursive)

    def size(self, path: str) -> int:
        status = self._status(path)
        if status is None:
            raise FileNotFoundError(path)
        return int(status["length"])


class HadoopFS(WarehouseFS):
    """Hadoop's FileSystem API through Spark's JVM (driver only): ``hdfs://`` and anything Hadoop reads."""

    def __init__(self, url: str, spark) -> None:
        self.url = url.rstrip("/")
        self._jvm = spark._jvm
        conf = spark._jsc.hadoopConfiguration()
        self._Path = self._jvm.org.apache.hadoop.fs.Path
        self._fs = self._Path(self.url).getFileSystem(conf)
        if self._fs.getScheme() == "file":  # no .crc sidecars: a later plain rename over the file would leave them stale
            self._fs = self._fs.getRawFileSystem()

    def _p(self, path: str):
        return self._Path(self.uri(path)) if path else self._Path(self.url)

    def read_bytes(self, path: str) -> bytes:
        if not self._fs.exists(self._p(path)):
            raise FileNotFoundError(path)
        stream = self._fs.open(self._p(path))
        try:
            out = bytearray()
            length = self._fs.getFileStatus(self._p(path)).getLen()
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
            out.extend(bytes(data))
            assert len(out) == length
            return bytes(out)
        finally:
            stream.close()

    def write_bytes(self, path: str, data: bytes) -> None:
        tmp = self.temp_name(path)
        stream = self._fs.create(self._p(tmp), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        self.rename(tmp, path)

    def list(self, path: str) -> list[str]:
        p = self._p(path)
        if not self._fs.exists(p) or not self._fs.getFileStatus(p).isDirectory():
            return []
        return sorted(s.getPath().getName() for s in self._fs.listStatus(p))

    def is_dir(self, path: str) -> bool:
        p = self._p(path)
        return bool(self._fs.exists(p) and self._fs.getFileStatus(p).isDirectory())

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._p(path)))

    def makedirs(self, path: str) -> None:
        self._fs.mkdirs(self._p(path))

    def rename(self, src: str, dst: str) -> None:
        self._fs.mkdirs(self._p(posixpath.dirname(dst)))
        if self._fs.exists(self._p(dst)):
            self._fs.delete(self._p(dst), False)
        if not self._fs.rename(self._p(src), self._p(dst)):
            raise OSError(f"cannot rename {src} to {dst} in {self.url}")

    def delete(self, path: str, recursive: bool = False) -> None:
        self._fs.delete(self._p(path), recursive)

    def size(self, path: str) -> int:
        return int(self._fs.getFileStatus(self._p(path)).getLen())


def open_fs(url: str, user: str | None = None, spark=None, webhdfs_address: str | None = None) -> WarehouseFS:
    """The filesystem of a warehouse URL. ``hdfs://`` goes through Spark's Hadoop client when a
    SparkSession is given, else through WebHDFS at ``webhdfs_address`` (the namenode's HTTP
    host:port): that is how Airflow's tasks read plans and manifests outside Spark."""
    scheme = url.split("://", 1)[0]
    if scheme == "file":
        return LocalFS(url)
    if scheme == "webhdfs":
        return WebHdfsFS(url, user=user)
    if scheme == "hdfs":
        if spark is not None:
            return HadoopFS(url, spark)
        if webhdfs_address:
            return WebHdfsFS(f"webhdfs://{webhdfs_address}{urlparse(url).path or '/'}", user=user)
        raise ValueError(f"{url}: outside Spark an hdfs:// warehouse is reached through WebHDFS: "
                         "set webhdfs.address to the namenode's HTTP host:port (e.g. namenode:9870)")
    raise ValueError(f"unsupported warehouse URL {url!r} (file://, hdfs://, webhdfs://)")
