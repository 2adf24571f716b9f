"""A local cluster — an embedded ZooKeeper and N broker processes — that outlives its starter.

``LocalCluster(dir).up(3)`` starts Debian's ZooKeeper and three brokers on free ports, each
broker with its own home ``<dir>/broker-<id>/`` (``server.properties``, ``data/``, ``broker.out``),
ZooKeeper under ``<dir>/zookeeper/`` (``zoo.cfg``, ``data/``, ``zookeeper.log``), and records
pids and ports in ``<dir>/cluster.json``. The processes run in sessions of their own and are
not stopped when the starting interpreter exits, so ``status()`` and ``down()`` work from any
later process (they find the cluster through the state file). `logbus cluster up|status|down`
is a thin layer over this class; tests use it directly::

    with LocalCluster(tmp_path / "c") as cluster:   # down() on exit, even on failure
        cluster.up(3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})

Pids are checked together with the process start time recorded at start, so a stale state
file never makes ``down`` signal an unrelated process that reused a pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker.cluster.embedded_zk import EmbeddedZooKeeper, four_letter_word
from broker.cluster.local import BrokerProcess, BrokerStartError
from broker.cluster.local_security import LocalSecurity
from broker.cluster.net import free_port, port_open
from broker.config import BrokerConfig, ConfigError, load_properties

__all__ = [
    "DEFAULT_DIR",
    "ENV_DIR",
    "STATE_FILE",
    "ClusterAlreadyUpError",
    "ClusterError",
    "ClusterStatus",
    "LocalCluster",
    "Node",
    "NodeStatus",
    "NoClusterError",
    "RESERVED_KEYS",
    "default_dir",
    "pid_alive",
    "processes_running",
]

DEFAULT_DIR = ".logbus-cluster"
ENV_DIR = "LOGBUS_CLUSTER_DIR"
STATE_FILE = "cluster.json"
LOCK_FILE = ".lock"
STATE_VERSION = 1

#: Set per broker by the cluster; a --config file's values for them are replaced, and
#: overriding them is refused.
RESERVED_KEYS = (
    "broker.id", "listeners", "advertised.listeners", "port", "host.name", "advertised.host.name",
    "advertised.port", "log.dirs", "log.dir", "zookeeper.connect",
)


class ClusterError(RuntimeError):
    """A cluster operation failed; the message is one line."""


class ClusterAlreadyUpError(ClusterError):
    """The directory's state file names processes that are still running."""


class NoClusterError(ClusterError):
    """The directory has no state file."""


def default_dir() -> Path:
    """``$LOGBUS_CLUSTER_DIR``, else ``./.logbus-cluster``."""
    return Path(os.environ.get(ENV_DIR) or DEFAULT_DIR)


# --------------------------------------------------------------------------- processes by pid


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from /proc, or None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[19])  # fields 3 (state) and 22 (starttime) of proc(5)


def process_start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), where /proc tells it."""
    try:
        stat = _proc_stat(pid)
    except OSError:
        return None
    return stat[1] if stat else None


def pid_alive(pid: int | None, start_time: int | None = None) -> bool:
    """True when ``pid`` runs and, if ``start_time`` is given, is the process that started then.

    Reaps the pid when it is a dead child of this process; zombies count as dead.
    """
    if not pid:
        return False
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False  # our child, and it just exited
    except ChildProcessError:
        pass  # not our child (the usual case: `up` ran in another process)
    try:
        stat = _proc_stat(pid)
    except OSError:  # no /proc: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return False  # someone else's process: not one of ours
        return True
    if stat is None:
        return False
    state, started = stat
    if state in ("Z", "X"):
        return False
    return start_time is None or started == start_time


def processes_running(config_path: str) -> list[int]:
    """Pids of live `server-start <config_path>` processes (a broker restarted by hand included)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"server-start" in args and config_path.encode() in args and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def _chroot(connect: str) -> str:
    """The ``/chroot`` of a zookeeper.connect string ('' when none)."""
    _, slash, chroot = connect.strip().partition("/")
    return "/" + chroot.strip("/") if slash and chroot.strip("/") else ""


def _signal(pid: int, start_time: int | None, sig: int) -> bool:
    """Send ``sig`` if the process is still the one recorded; True when sent."""
    if not pid_alive(pid, start_time):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------- state


@dataclass
class Node:
    """One process of the cluster as recorded in the state file."""

    role: str  # "zookeeper" or "broker"
    pid: int | None
    start_time: int | None
    host: str
    port: int
    home: str  # the node's directory under the cluster dir
    data_dir: str  # ZooKeeper's dataDir, or the broker's log.dirs
    log_file: str  # the process's stdout/stderr
    id: int | None = None  # broker.id; None for ZooKeeper
    config: str | None = None  # the broker's server.properties / ZooKeeper's zoo.cfg
    metrics_port: int | None = None  # the broker's metrics.port (Prometheus /metrics), when set

    def adopt_running(self) -> bool:
        """When the recorded process is gone but the broker runs again (restarted by hand, or
        by `cluster restart` from elsewhere), take that process's pid. True when adopted."""
        if self.role != "broker" or not self.config or self.alive():
            return False
        pids = processes_running(self.config)
        if not pids:
            return False
        self.pid, self.start_time = pids[0], process_start_time(pids[0])
        return True

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def name(self) -> str:
        return "zookeeper" if self.role == "zookeeper" else f"broker {self.id}"

    def alive(self) -> bool:
        return pid_alive(self.pid, self.start_time)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Node:
        known = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**known)  # type: ignore[arg-type]


@dataclass
class NodeStatus:
    """What ``status()`` found for one node."""

    node: Node
    process_alive: bool
    port_open: bool
    registered: bool | None = None  # in /brokers/ids; None for ZooKeeper or when ZooKeeper is unreachable
    note: str = ""

    @property
    def alive(self) -> bool:
        return self.process_alive and self.port_open

    @property
    def ok(self) -> bool:
        if self.node.role == "zookeeper":
            return self.alive
        return self.alive and self.registered is True


@dataclass
class ClusterStatus:
    """The cluster's nodes, ZooKeeper first; ``all_up`` when every one is alive (and registered)."""

    dir: Path
    state: str
    created: str
    bootstrap_servers: str
    zookeeper_connect: str
    nodes: list[NodeStatus] = field(default_factory=list)
    zookeeper_error: str | None = None

    @property
    def all_up(self) -> bool:
        return bool(self.nodes) and self.state == "up" and all(n.ok for n in self.nodes)

    @property
    def brokers(self) -> list[NodeStatus]:
        return [n for n in self.nodes if n.node.role == "broker"]


# --------------------------------------------------------------------------- the cluster


class LocalCluster:
    """ZooKeeper plus N brokers under one directory, controlled through ``<dir>/cluster.json``.

    ``progress`` receives one human-readable line per step (the CLI prints them to stderr).
    """

    def __init__(
        self,
        dir: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.dir = Path(dir if dir is not None else default_dir()).absolute()
        self.host = host
        self.progress = progress or (lambda line: None)
        self._state: dict[str, Any] | None = None

    # ------------------------------------------------------------------ state file

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def read_state(self) -> dict[str, Any] | None:
        """The state file's content, or None when there is none."""
        try:
            text = self.state_path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ClusterError(f"cannot read {self.state_path}: {exc.strerror}") from None
        try:
            state = json.loads(text)
            if not isinstance(state, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            raise ClusterError(f"{self.state_path} is not a logbus cluster state file ({exc}); remove it") from None
        return state

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.state_path)
        self._state = state

    def _state_or_raise(self) -> dict[str, Any]:
        state = self.read_state()
        if state is None:
            raise NoClusterError(f"no cluster in {self.dir} (no {STATE_FILE}); start one with `logbus cluster up`")
        return state

    def nodes(self, state: Mapping[str, Any] | None = None) -> list[Node]:
        """ZooKeeper then the brokers, from the state file (or the given state)."""
        state = state if state is not None else self._state_or_raise()
        nodes = [Node.from_json(state["zookeeper"])] if state.get("zookeeper") else []
        return nodes + [Node.from_json(b) for b in state.get("brokers", [])]

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes() if n.role == "broker"]

    @property
    def zookeeper(self) -> Node | None:
        return next((n for n in self.nodes() if n.role == "zookeeper"), None)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,host:port,...`` of the brokers, for clients' bootstrap.servers."""
        return str(self._state_or_raise().get("bootstrap_servers", ""))

    @property
    def security_dir(self) -> Path:
        """Certificates and passwords of a cluster started with ``security``."""
        return self.dir / "security"

    @property
    def client_properties(self) -> str | None:
        """The admin's client properties file of a secured cluster (None: PLAINTEXT)."""
        return (self._state_or_raise().get("client_properties") or None)

    @property
    def zookeeper_connect(self) -> str:
        return str(self._state_or_raise().get("zookeeper_connect", ""))

    def is_up(self) -> bool:
        """True when any process named in the state file still runs."""
        state = self.read_state()
        return state is not None and any(n.alive() for n in self.nodes(state))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One `up`/`down` at a time per directory."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / LOCK_FILE, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ClusterError(f"another `logbus cluster` command is working on {self.dir}") from None
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ up

    def broker_properties(
        self,
        broker_id: int,
        port: int,
        data_dir: Path,
        zookeeper_connect: str,
        config: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The full server.properties of one broker: the config file, the overrides, then its own keys.

        ``zookeeper_connect`` is the embedded server's ``host:port``; a chroot in the config
        file's zookeeper.connect (``localhost:2181/logbus``) is kept.
        """
        props = load_properties(config) if config is not None else {}
        chroot = _chroot(props.get("zookeeper.connect", ""))
        for key in RESERVED_KEYS:
            props.pop(key, None)
        props.update(overrides or {})
        props.update({
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{port}",
            "log.dirs": str(data_dir),
            "zookeeper.connect": zookeeper_connect + chroot,
        })
        return props

    def up(
        self,
        brokers: int = 3,
        config: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        start_timeout: float = 60.0,
        metrics_port_base: int | None = None,
        security: bool = False,
    ) -> LocalCluster:
        """Start ZooKeeper and ``brokers`` brokers; return once all are registered and listening.
        With ``metrics_port_base`` P, broker N serves its metrics on port P+N-1; with ``security``,
        TLS + SCRAM + ACLs (broker/cluster/local_security.py).

        Raises ClusterAlreadyUpError when the directory's cluster still runs, ClusterError
        (after stopping whatever it had started) when anything fails to start.
        """
        if brokers < 1:
            raise ClusterError(f"--brokers must be at least 1, got {brokers}")
        overrides = {k: str(v) for k, v in (overrides or {}).items()}
        reserved = sorted(set(overrides) & set(RESERVED_KEYS))
        if reserved:
            raise ClusterError(f"{', '.join(reserved)} cannot be overridden: `logbus cluster up` sets it per broker")
        if brokers > 1 and overrides.get("metrics.port", "0") != "0":
            raise ClusterError(f"metrics.port={overrides['metrics.port']} would be the same port for every broker; "
                               f"use --metrics-port-base {overrides['metrics.port']} (broker N gets it + N-1)")
        if metrics_port_base is not None and not 0 < metrics_port_base <= 65535 - brokers:
            raise ClusterError(f"--metrics-port-base must leave room for {brokers} ports below 65536, got {metrics_port_base}")
        if config is not None:
            config = Path(config).absolute()
            if not config.is_file():
                raise ClusterError(f"config file {config} not found")
        # Validate the brokers' configuration before starting anything.
        try:
            BrokerConfig.from_properties(
                self.broker_properties(1, 9092, self.dir / "x", "127.0.0.1:2181", config, overrides)
            )
        except (ConfigError, OSError) as exc:
            raise ClusterError(str(exc)) from None

        with self._locked():
            old = self.read_state()
            if old is not None:
                running = [n for n in self.nodes(old) if n.alive()]
                if running:
                    raise ClusterAlreadyUpError(
                        f"a cluster is already up in {self.dir} ("
                        + ", ".join(f"{n.name} pid {n.pid}" for n in running)
                        + "); stop it with `logbus cluster down` first"
                    )
                self.progress(f"found a stale {STATE_FILE} (none of its processes runs); starting afresh")
                self.state_path.unlink()
            self._start(brokers, config, overrides, start_timeout, metrics_port_base, security)
        return self

    def _start(
        self, n: int, config: Path | None, overrides: Mapping[str, str], start_timeout: float,
        metrics_port_base: int | None = None, security: bool = False,
    ) -> None:
        t0 = time.monotonic()
        state: dict[str, Any] = {
            "version": STATE_VERSION,
            "state": "starting",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dir": str(self.dir),
            "config": str(config) if config else None,
            "overrides": dict(overrides),
            "zookeeper": None,
            "brokers": [],
            "bootstrap_servers": "",
            "zookeeper_connect": "",
        }
        zk: EmbeddedZooKeeper | None = None
        procs: list[BrokerProcess] = []
        try:
            zk = EmbeddedZooKeeper(self.dir / "zookeeper", host=self.host)
            self.progress(f"starting ZooKeeper on {zk.connect_string} ...")
            try:
                zk.start(timeout=start_timeout)
            except RuntimeError as exc:
                raise ClusterError(f"ZooKeeper failed to start: {exc}") from None
            zk.detach()
            state["zookeeper"] = asdict(Node(
                role="zookeeper", pid=zk.pid, start_time=process_start_time(zk.pid or 0), host=zk.host,
                port=zk.port, home=str(zk.data_dir), data_dir=str(zk.data_dir / "data"),
                log_file=str(zk.log_path), config=str(zk.data_dir / "zoo.cfg"),
            ))
            state["zookeeper_connect"] = zk.connect_string + _chroot(
                load_properties(config).get("zookeeper.connect", "") if config else ""
            )
            self._write_state(state)
            self.progress(f"ZooKeeper ready on {zk.connect_string} (pid {zk.pid}, {time.monotonic() - t0:.1f}s)")
            secured = None
            if security:
                secured = LocalSecurity.create(self.security_dir, [self.host, "localhost"])
                secured.add_users(str(state["zookeeper_connect"]))
                state["client_properties"] = str(secured.client_properties)
                self._write_state(state)
                self.progress(f"TLS certificates and SCRAM users made in {self.security_dir}")

            ports: list[int] = []
            while len(ports) < n:
                port = free_port(self.host)
                if port not in ports and port != zk.port:
                    ports.append(port)
            self.progress(f"starting {n} broker{'s' if n > 1 else ''} ...")
            for broker_id, port in enumerate(ports, start=1):
                home = self.dir / f"broker-{broker_id}"
                props = self.broker_properties(
                    broker_id, port, home / "data", zk.connect_string, config, overrides
                )
                if metrics_port_base is not None:
                    props["metrics.port"] = str(metrics_port_base + broker_id - 1)
                if secured is not None:
                    props.update(secured.broker_properties(self.host, port))
                proc = BrokerProcess(props, home, start_timeout=start_timeout)
                procs.append(proc)
                proc.start(wait=False)
                proc.detach()
                state["brokers"].append(asdict(Node(
                    role="broker", id=broker_id, pid=proc.pid, start_time=process_start_time(proc.pid or 0),
                    host=proc.host, port=port, home=str(home), data_dir=str(home / "data"),
                    log_file=str(proc.out_path), config=str(proc.config_path),
                    metrics_port=int(props.get("metrics.port", "0")) or None,
                )))
                self._write_state(state)  # so `down` can clean up even if this process dies now
            for proc in procs:
                try:
                    proc.wait_ready()
                except BrokerStartError as exc:
                    summary = str(exc).split(";")[0]
                    raise ClusterError(
                        f"{summary}; see {proc.out_path} (ends with: {proc.log_tail(3)})"
                    ) from None
                self.progress(f"broker {proc.broker_id} ready on {proc.bootstrap} (pid {proc.pid})")
            state["bootstrap_servers"] = ",".join(p.bootstrap for p in procs)
            self._wait_registered(state, [int(p.broker_id) for p in procs], timeout=start_timeout)
            state["state"] = "up"
            self._write_state(state)
            self.progress(f"cluster up in {time.monotonic() - t0:.1f}s")
        except BaseException as exc:
            self.progress("start failed; stopping what had started ...")
            self._stop_nodes(self.nodes(state), broker_timeout=10.0)
            for proc in procs:  # any started but not yet recorded
                proc.kill()
            if zk is not None:
                zk.stop()
            with contextlib.suppress(OSError):
                self.state_path.unlink()
            if isinstance(exc, (ClusterError, KeyboardInterrupt, SystemExit)):
                raise
            raise ClusterError(f"cluster start failed: {exc}; logs are under {self.dir}") from exc

    def _wait_registered(self, state: Mapping[str, Any], ids: list[int], timeout: float) -> None:
        from broker.cluster.zk import ZkClient, ZkError

        connect = str(state["zookeeper_connect"])
        deadline = time.monotonic() + timeout
        client = ZkClient(connect, session_timeout_ms=6000)
        try:
            client.start(timeout=min(10.0, timeout))
        except ZkError as exc:
            raise ClusterError(str(exc)) from None
        try:
            while True:
                missing = sorted(set(ids) - set(client.live_brokers()))
                if not missing:
                    return
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"broker(s) {', '.join(map(str, missing))} listen but are not registered in ZooKeeper "
                        f"at {connect} after {timeout:g}s; see {self.dir}/broker-*/broker.out"
                    )
                time.sleep(0.1)
        finally:
            client.stop()

    # ------------------------------------------------------------------ status

    def status(self, zk_timeout: float = 5.0) -> ClusterStatus:
        """Each node: process alive, port open, and for brokers registration in /brokers/ids."""
        state = self._state_or_raise()
        result = ClusterStatus(
            dir=self.dir, state=str(state.get("state", "?")), created=str(state.get("created", "")),
            bootstrap_servers=str(state.get("bootstrap_servers", "")),
            zookeeper_connect=str(state.get("zookeeper_connect", "")),
        )
        registered: set[int] | None = None
        for node in self.nodes(state):
            adopted = node.adopt_running()
            st = NodeStatus(node, process_alive=node.alive(), port_open=port_open(node.host, node.port, timeout=0.5))
            if adopted:
                st.note = f"restarted outside `cluster` (pid {node.pid})"
            if node.role == "zookeeper" and st.alive:
                reply = four_letter_word(node.host, node.port, "srvr", timeout=1.0)
                mode = next((ln.split(":", 1)[1].strip() for ln in reply.splitlines() if ln.startswith("Mode:")), "")
                st.note = f"mode {mode}" if mode else "not serving"
                if mode:
                    registered, result.zookeeper_error = self._registered_ids(state, zk_timeout)
                else:
                    result.zookeeper_error = "ZooKeeper accepts connections but is not serving"
            result.nodes.append(st)
        if registered is None and result.zookeeper_error is None:
            result.zookeeper_error = "ZooKeeper is down"
        for st in result.brokers:
            st.registered = None if registered is None else st.node.id in registered
        return result

    def _registered_ids(self, state: Mapping[str, Any], timeout: float) -> tuple[set[int] | None, str | None]:
        from broker.cluster.zk import ZkClient, ZkError

        client = ZkClient(str(state.get("zookeeper_connect", "")), session_timeout_ms=6000)
        try:
            client.start(timeout=timeout)
        except ZkError as exc:
            return None, str(exc)
        try:
            return set(client.live_brokers()), None
        except Exception as exc:  # a session lost mid-read: report, do not crash the status
            return None, f"reading /brokers/ids failed: {exc}"
        finally:
            client.stop()

    # ------------------------------------------------------------------ restart

    def restart(self, broker_id: int, timeout: float = 15.0, start_timeout: float = 60.0) -> Node:
        """Stop broker ``broker_id`` cleanly (wherever it was started from) and start it again with
        its own server.properties; return once it listens and is registered."""
        with self._locked():
            state = self._state_or_raise()
            entry = next((b for b in state.get("brokers", []) if b.get("id") == broker_id), None)
            if entry is None:
                known = ", ".join(str(b.get("id")) for b in state.get("brokers", []))
                raise ClusterError(f"no broker {broker_id} in the cluster in {self.dir} (brokers: {known})")
            node = Node.from_json(entry)
            node.adopt_running()
            self._terminate([node], timeout)
            if node.config and processes_running(node.config):
                raise ClusterError(f"broker {broker_id} did not stop; not starting a second one")
            proc = BrokerProcess(str(node.config), node.home, start_timeout=start_timeout)
            self.progress(f"starting broker {broker_id} on {node.address} ...")
            proc.start(wait=False)
            proc.detach()
            node.pid, node.start_time = proc.pid, process_start_time(proc.pid or 0)
            entry.update(pid=node.pid, start_time=node.start_time)
            self._write_state(state)
            try:
                proc.wait_ready()
            except BrokerStartError as exc:
                raise ClusterError(f"{str(exc).split(';')[0]}; see {proc.out_path}") from None
            self._wait_registered(state, [broker_id], timeout=start_timeout)
            self.progress(f"broker {broker_id} ready on {node.address} (pid {node.pid})")
            return node

    # ------------------------------------------------------------------ down

    def down(self, keep_data: bool = False, timeout: float = 15.0) -> bool:
        """SIGTERM the brokers (clean shutdown), SIGKILL those still up after ``timeout`` s,
        stop ZooKeeper, remove the state file and, unless ``keep_data``, the nodes' directories.
        Returns False when there was no cluster in the directory."""
        if not self.state_path.exists():
            return False
        with self._locked():
            state = self.read_state()
            if state is None:
                return False
            nodes = self.nodes(state)
            for node in nodes:
                node.adopt_running()
            self._stop_nodes(nodes, broker_timeout=timeout)
            still = {id(n): processes_running(n.config) for n in nodes if n.role == "broker" and n.config}
            self.state_path.unlink(missing_ok=True)
            if not keep_data:
                for node in nodes:
                    home = Path(node.home)
                    if still.get(id(node)):
                        self.progress(f"{node.name} still runs (pid {', '.join(map(str, still[id(node)]))}); "
                                      f"its data in {home} is kept")
                    elif home.parent == self.dir:  # only what `up` made
                        shutil.rmtree(home, ignore_errors=True)
        if not keep_data:
            shutil.rmtree(self.security_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                (self.dir / LOCK_FILE).unlink()
                self.dir.rmdir()  # only when nothing else is in it
        self._state = None
        return True

    def _stop_nodes(self, nodes: list[Node], broker_timeout: float) -> None:
        brokers = [n for n in nodes if n.role == "broker"]
        zks = [n for n in nodes if n.role == "zookeeper"]
        self._terminate(brokers, broker_timeout)
        self._terminate(zks, 10.0)

    def _terminate(self, nodes: list[Node], timeout: float) -> None:
        """SIGTERM all, wait until they are gone, SIGKILL the stragglers."""
        signalled = []
        for node in nodes:
            if _signal(node.pid or 0, node.start_time, signal.SIGTERM):
                self.progress(f"stopping {node.name} (pid {node.pid})")
                signalled.append(node)
        deadline = time.monotonic() + timeout
        while signalled and time.monotonic() < deadline:
            signalled = [n for n in signalled if n.alive()]
            if signalled:
                time.sleep(0.05)
        for node in signalled:
            if _signal(node.pid or 0, node.start_time, signal.SIGKILL):
                self.progress(f"{node.name} (pid {node.pid}) did not stop within {timeout:g}s; killed it")
        kill_deadline = time.monotonic() + 5.0
        while any(n.alive() for n in signalled) and time.monotonic() < kill_deadline:
            time.sleep(0.05)

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __repr__(self) -> str:
        return f"<LocalCluster {self.dir}>"
