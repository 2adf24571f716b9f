"""docker/compose.yaml is checked without a Docker engine: it parses, every image, build,
volume and service it names is defined, every repository path its commands, health checks,
mounts and environment use exists, and every `logbus` command line parses with the real CLI.

`docker compose config -q` runs too when the Compose plugin is installed; without it only that
sub-check is skipped (the development machines have no Docker engine or plugin).
"""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.cli import SUBCOMMANDS, build_parser
from broker.config import load_broker_config, load_properties, parse_overrides

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and data.get("services"), "compose.yaml has no services"
    return data


def _dockerfile_copies() -> dict[str, Path]:
    """Container path -> repository path, for each COPY of docker/Dockerfile (context: the repo root)."""
    workdir = "/"
    copies: dict[str, Path] = {}
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "WORKDIR":
            workdir = posixpath.join(workdir, parts[1])
        elif parts[0] == "COPY" and not any(p.startswith("--") for p in parts[1:]):
            *sources, dest = parts[1:]
            dest = posixpath.join(workdir, dest)
            for src in sources:
                src_path = ROOT / src
                assert src_path.exists(), f"Dockerfile copies {src}, which is not in the repository"
                target = posixpath.join(dest, src_path.name) if dest.endswith("/") and len(sources) > 1 else dest
                copies[target.rstrip("/")] = src_path
    return copies


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> repository path, for the service's bind mounts of repository folders."""
    mounts: dict[str, Path] = {}
    for spec in service.get("volumes", []):
        source, target = (spec["source"], spec["target"]) if isinstance(spec, dict) else spec.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target.rstrip("/")] = (DOCKER / source).resolve()
    return mounts


def _repo_path(container_path: str, mounts: dict[str, Path], copies: dict[str, Path]) -> Path | None:
    """The repository file a container path comes from (longest mapped prefix), or None."""
    for table in (mounts, copies):  # a bind mount hides what the image copied there
        for prefix in sorted(table, key=len, reverse=True):
            if container_path == prefix or container_path.startswith(prefix + "/"):
                return table[prefix] / container_path[len(prefix) :].lstrip("/")
    return None


def _argv_lists(service: dict[str, Any]) -> Iterator[list[str]]:
    """The command and the health-check command of a service, as argument lists."""
    command = service.get("command")
    if command:
        yield command if isinstance(command, list) else command.split()
    test = (service.get("healthcheck") or {}).get("test")
    if isinstance(test, list) and test and test[0] == "CMD":
        yield test[1:]
    elif isinstance(test, list) and test and test[0] == "CMD-SHELL":
        yield test[1].split()


def _strings(service: dict[str, Any]) -> Iterator[str]:
    for argv in _argv_lists(service):
        yield from argv
    env = service.get("environment") or {}
    yield from (env.values() if isinstance(env, dict) else (e.partition("=")[2] for e in env))


def test_every_service_has_an_image_or_a_build_and_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        assert service.get("image") or service.get("build"), f"service {name} has neither image nor build"
        assert service.get("healthcheck", {}).get("test"), f"service {name} has no health check"
        build = service.get("build")
        if build:
            context = DOCKER / (build if isinstance(build, str) else build.get("context", "."))
            assert context.is_dir(), f"service {name}: build context {context} does not exist"
            dockerfile = context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")
            assert dockerfile.is_file(), f"service {name}: {dockerfile} does not exist"


def test_the_whole_system_is_there(compose: dict[str, Any]) -> None:
    names = set(compose["services"])
    expected = {"zookeeper-1", "zookeeper-2", "zookeeper-3", "broker-1", "broker-2", "broker-3",
                "zookeeper-b", "broker-b1", "mirror-maker", "namenode", "datanode",
                "spark-master", "spark-worker", "airflow"}
    assert expected <= names, f"missing services: {sorted(expected - names)}"


def test_named_volumes_are_declared_and_used(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used: set[str] = set()
    for name, service in compose["services"].items():
        for spec in service.get("volumes", []):
            source = spec["source"] if isinstance(spec, dict) else spec.split(":")[0]
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"service {name} uses volume {source!r}, not declared under volumes:"
                used.add(source)
    assert declared <= used, f"declared but unused volumes: {sorted(declared - used)}"


def test_depends_on_names_services(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for dep in service.get("depends_on") or {}:
            assert dep in compose["services"], f"service {name} depends on unknown service {dep}"


def test_bind_mounts_and_dockerfile_copies_exist() -> None:
    copies = _dockerfile_copies()
    assert {"/app/broker", "/app/conf", "/app/dags", "/app/docker"} <= set(copies)
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    for name, service in compose["services"].items():
        for source in _bind_mounts(service).values():
            assert source.exists(), f"service {name} mounts {source}, which does not exist"
            assert ROOT in source.parents or source == ROOT, f"service {name} mounts {source} from outside the repository"


def test_every_repository_path_used_exists(compose: dict[str, Any]) -> None:
    copies = _dockerfile_copies()
    checked = 0
    for name, service in compose["services"].items():
        if not service.get("build"):
            continue  # third-party images (HDFS): their paths are their own
        mounts = _bind_mounts(service)
        for value in _strings(service):
            for word in re.findall(r"/app/[\w./-]+", str(value)):
                path = _repo_path(word, mounts, copies)
                assert path is not None, f"service {name}: {word} is neither copied into the image nor mounted"
                assert path.exists(), f"service {name}: {word} -> {path.relative_to(ROOT)} does not exist"
                checked += 1
    assert checked >= 10


def test_logbus_command_lines_parse(compose: dict[str, Any]) -> None:
    """Each `logbus X ...` is a real subcommand with real flags; broker configs load with their overrides."""
    copies = _dockerfile_copies()
    seen = set()
    for name, service in compose["services"].items():
        mounts = _bind_mounts(service)
        for argv in _argv_lists(service):
            if argv[0] != "logbus":
                continue
            assert argv[1] in SUBCOMMANDS, f"service {name}: unknown subcommand logbus {argv[1]}"
            seen.add(argv[1])
            args = build_parser(argv[1]).parse_args(argv[2:])
            if argv[1] == "server-start":
                config = _repo_path(args.config, mounts, copies)
                overrides = parse_overrides(args.override)
                cfg = load_broker_config(config, overrides)
                assert not cfg.unknown_keys(), f"service {name}: unknown broker keys {cfg.unknown_keys()}"
            if argv[1] == "mirror-maker" and not args.status:
                files = [*args.consumer_configs, args.producer_config]
                for f in files:
                    props = load_properties(_repo_path(f, mounts, copies))
                    assert props, f"service {name}: {f} is empty"
    assert {"server-start", "mirror-maker"} <= seen


def test_airflow_loader_config_loads(compose: dict[str, Any]) -> None:
    pytest.importorskip("pipelines.config")
    from pipelines.config import load_config

    airflow = compose["services"]["airflow"]
    path = _repo_path(airflow["environment"]["LOGBUS_LOADER_CONFIG"], _bind_mounts(airflow), _dockerfile_copies())
    config = load_config(str(path))
    # the real HDFS of the compose file: data through Spark's Hadoop client, manifests through WebHDFS
    assert config.warehouse.startswith("hdfs://namenode:8020/"), config.warehouse
    assert config.parquet_writer == "spark" and config.webhdfs_address == "namenode:9870"
    hdfs_ports = {p.split(":")[0] for p in compose["services"]["namenode"].get("ports", [])}
    assert "9870" in hdfs_ports
    dags_target = airflow["environment"]["AIRFLOW__CORE__DAGS_FOLDER"]
    assert _repo_path(dags_target, _bind_mounts(airflow), _dockerfile_copies()) == ROOT / "dags"


def _compose_plugin() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_docker_compose_config() -> None:
    if not _compose_plugin():
        pytest.skip("`docker compose version` fails here (no Compose plugin): `docker compose config` not run; "
                    "the checks above parse the file without it")
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_spark_image_has_no_logbus(compose: dict[str, Any]) -> None:
    """The Spark master and worker run the `spark` stage, which copies and installs nothing of
    logbus: executors get the packed environment and the shipped code, as on a shared cluster."""
    stages: dict[str, list[str]] = {}
    name = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if parts[:1] == ["FROM"]:
            name = parts[-1]
            stages[name] = []
        elif name:
            stages[name].append(line)
    assert list(stages) == ["spark", "logbus"], "the last stage is the default image: logbus"
    spark = "\n".join(stages["spark"])
    assert not re.search(r"COPY\s+(broker|pipelines|mirror|dags)/|pip install[^\n]*\s\.", spark), spark
    assert "pack-env" in "\n".join(stages["logbus"])
    for service in ("spark-master", "spark-worker"):
        assert compose["services"][service]["build"]["target"] == "spark"
    assert compose["services"]["airflow"]["build"]["target"] == "logbus"
    loader = yaml.safe_load((DOCKER / "conf" / "loader.yaml").read_text())
    assert loader["spark"]["python_env"] == "./environment/bin/python"
    assert loader["spark"]["archives"] == ["/opt/logbus/executor-env.tar.gz#environment"]
