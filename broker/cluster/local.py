"""Broker processes on this machine, for tests and `logbus cluster up`.

A BrokerProcess runs ``python -m broker.cli server-start <props> --override k=v ...`` and
treats the broker as ready once its listener accepts TCP connections (the server opens its
listener only after it has registered in ZooKeeper).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import broker
from broker.cluster.net import free_port, port_open
from broker.config import BrokerConfig, ConfigError, Listener, load_properties, parse_listeners

__all__ = ["BrokerProcess", "BrokerStartError", "free_port", "write_properties"]

_REPO_ROOT = Path(broker.__file__).resolve().parent.parent


class BrokerStartError(RuntimeError):
    """The broker exited or did not listen in time; the message carries its log tail."""


def write_properties(path: str | os.PathLike[str], props: Mapping[str, str]) -> Path:
    """Write a dict as a .properties file (escaping what needs it) and return the path."""

    def esc(text: str, is_key: bool) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        if is_key:
            out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
        elif out[:1] == " ":
            out = "\\" + out
        return out

    path = Path(path)
    path.write_text("".join(f"{esc(k, True)}={esc(str(v), False)}\n" for k, v in props.items()))
    return path


#: Brokers still running at interpreter exit are stopped, so an aborted run leaves none behind.
_RUNNING: set[BrokerProcess] = set()


@atexit.register
def _stop_leftovers() -> None:
    for proc in list(_RUNNING):
        proc.stop(timeout=5)


def _first_listener(props: Mapping[str, str]) -> Listener:
    """The first listener of a config that may be invalid elsewhere."""
    try:
        if props.get("listeners", "").strip():
            return parse_listeners(props["listeners"])[0]
        return Listener("PLAINTEXT", props.get("host.name", "").strip() or "0.0.0.0", int(props.get("port", 9092)))
    except (ConfigError, ValueError):
        raise ConfigError("BrokerProcess needs a parseable listener to wait on", "listeners") from None


class BrokerProcess:
    """One broker child process: start, wait for its port, stop, kill -9, restart.

    ``config`` is a server.properties path or a dict (written to ``<log_dir>/server.properties``);
    ``overrides`` go on the command line as ``--override k=v``. The process's stdout and
    stderr go to ``<log_dir>/broker.out``. Its listener must have a fixed port (not 0).
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, str],
        log_dir: str | os.PathLike[str],
        overrides: Mapping[str, str] | None = None,
        start_timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(config, Mapping):
            self.config_path = write_properties(self.log_dir / "server.properties", config)
            props = dict(config)
        else:
            self.config_path = Path(config).resolve()
            props = load_properties(self.config_path)
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        props.update(self.overrides)
        self.props = props
        try:
            self.config: BrokerConfig | None = BrokerConfig.from_properties(props)
            self.listener = self.config.listeners[0]
        except ConfigError:
            # Still startable: tests of bad configs expect the broker itself to refuse.
            self.config = None
            self.listener = _first_listener(props)
        if self.listener.port == 0:
            raise ConfigError("BrokerProcess needs a fixed listener port, got 0", "listeners")
        self.out_path = self.log_dir / "broker.out"
        self.start_timeout = start_timeout
        self.env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ properties

    @property
    def broker_id(self) -> int | str:
        """broker.id (the raw string when the config does not validate)."""
        return self.config.broker_id if self.config else self.props.get("broker.id", "?")

    @property
    def host(self) -> str:
        host = self.listener.host
        return "127.0.0.1" if host in ("0.0.0.0", "") else host

    @property
    def port(self) -> int:
        return self.listener.port

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients' bootstrap.servers."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def command(self) -> list[str]:
        """The command line that starts this broker."""
        cmd = [sys.executable, "-m", "broker.cli", "server-start", str(self.config_path)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    # ------------------------------------------------------------------ lifecycle

    def start(self, wait: bool = True) -> BrokerProcess:
        """Spawn the broker; with ``wait`` block until its port accepts connections."""
        if self.alive:
            return self
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.out_path, "ab") as out:
            out.write(f"--- {time.strftime('%H:%M:%S')} start: {' '.join(self.command())}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=str(self.log_dir), start_new_session=True,
            )
        _RUNNING.add(self)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the listener accepts TCP; raise BrokerStartError if it dies or times out."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.start_timeout)
        while True:
            if self._proc is None:
                raise BrokerStartError(f"broker {self.broker_id} was not started")
            code = self._proc.poll()
            if code is not None:
                raise BrokerStartError(
                    f"broker {self.broker_id} exited with code {code} during start-up; "
                    f"{self.out_path} ends with: {self.log_tail()}"
                )
            if port_open(self.host, self.port, timeout=0.2):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(
                    f"broker {self.broker_id} did not listen on {self.bootstrap} within "
                    f"{timeout or self.start_timeout:g}s; {self.out_path} ends with: {self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> int | None:
        """Clean shutdown: SIGTERM, wait, then SIGKILL. Returns the exit code."""
        proc = self._proc
        _RUNNING.discard(self)
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def kill(self) -> int | None:
        """kill -9, for crash-recovery tests. Returns the exit code."""
        proc = self._proc
        _RUNNING.discard(self)
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        proc.kill()
        return proc.wait()

    def detach(self) -> int | None:
        """Let the broker outlive this interpreter: no stop at exit. Returns its pid.

        The child already runs in a session of its own with its output in ``out_path``;
        `logbus cluster up` detaches its brokers and records their pids in a state file.
        """
        _RUNNING.discard(self)
        if self._proc is not None:
            # Popen warns (ResourceWarning) when collected while its child runs; a detached
            # child is meant to. poll()/wait()/signals keep working.
            self._proc._child_created = False  # type: ignore[attr-defined]
        return self.pid

    def restart(self, wait: bool = True) -> BrokerProcess:
        """Stop (cleanly) and start again with the same config and port."""
        self.stop()
        return self.start(wait=wait)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the process output, joined on one line."""
        try:
            text = self.out_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return "(no output)"
        return " | ".join(t.rstrip() for t in text if t.strip()) or "(no output)"

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.alive else "stopped"
        return f"<BrokerProcess id={self.broker_id} {self.bootstrap} {state}>"
