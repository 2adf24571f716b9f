"""`logbus cluster up|status|restart|down`: a local cluster — an embedded ZooKeeper and N brokers —
whose processes outlive the command. The work is done by broker.cluster.local_cluster."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from broker.config import ConfigError, parse_overrides
from broker.tools import CommandError

if TYPE_CHECKING:
    from broker.cluster.local_cluster import LocalCluster


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="{up,status,restart,down}", required=True)

    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--dir", metavar="PATH",
            help="the cluster's directory: state file, logs and data (default: $LOGBUS_CLUSTER_DIR or ./.logbus-cluster)",
        )
        return p

    up = with_dir(actions.add_parser(
        "up", help="start ZooKeeper and N brokers in the background",
        description="Start an embedded ZooKeeper and N brokers on free ports, each with its own log dir; "
                    "print bootstrap.servers once all are registered and listening.",
    ))
    up.add_argument("--brokers", type=int, default=3, metavar="N", help="number of brokers (default: 3)")
    up.add_argument("--config", metavar="server.properties",
                    help="base broker config (ids, listeners, log.dirs and zookeeper.connect are set per broker)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for every broker (repeatable)")
    up.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="how long each process may take to start (default: 60)")
    up.add_argument("--metrics-port-base", type=int, metavar="PORT",
                    help="serve each broker's Prometheus metrics: broker N on PORT+N-1")
    up.add_argument("--security", action="store_true",
                    help="SASL_SSL listeners (a CA made for the cluster, SCRAM-SHA-512 logins) and ACLs; "
                         "prints the admin's client properties file")

    restart = with_dir(actions.add_parser(
        "restart", help="stop one broker cleanly and start it again",
        description="SIGTERM the broker (also one restarted by hand), wait, start it with its own "
                    "server.properties and wait until it listens and is registered.",
    ))
    restart.add_argument("broker_id", type=int, metavar="ID", help="the broker's id")
    restart.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                         help="how long the broker may take to shut down before SIGKILL (default: 15)")

    with_dir(actions.add_parser(
        "status", help="show whether ZooKeeper and each broker run and are registered",
        description="A table of ZooKeeper and the brokers: pid, port, alive (process and TCP), registered "
                    "in ZooKeeper. Exit code 0 when all are up, 1 otherwise.",
    ))

    down = with_dir(actions.add_parser(
        "down", help="stop the brokers (cleanly) and ZooKeeper, remove state and data",
        description="SIGTERM the brokers, SIGKILL those still up after --timeout, stop ZooKeeper, remove the "
                    "state file and (unless --keep-data) the data and logs.",
    ))
    down.add_argument("--keep-data", action="store_true", help="keep the brokers' and ZooKeeper's data and logs")
    down.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                      help="how long brokers may take to shut down before SIGKILL (default: 15)")


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from broker.cluster.local_cluster import ClusterError, LocalCluster

    # kazoo logs connection trouble at WARNING; the status table says it in one line instead
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    logging.getLogger("kazoo").propagate = False
    cluster = LocalCluster(args.dir, progress=_progress)
    try:
        return ACTIONS[args.action](cluster, args)
    except ClusterError as exc:
        raise CommandError(str(exc)) from None


def _up(cluster: LocalCluster, args: argparse.Namespace) -> int:
    try:
        overrides = parse_overrides(args.override)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    cluster.up(args.brokers, config=args.config, overrides=overrides, start_timeout=args.timeout,
               metrics_port_base=args.metrics_port_base, security=args.security)
    nodes = cluster.nodes()
    print(f"bootstrap.servers={cluster.bootstrap_servers}")
    print(f"zookeeper.connect={cluster.zookeeper_connect}")
    _print_security(cluster)
    metrics = metrics_urls(nodes)
    if metrics:
        print(f"metrics: {metrics}")
    print(f"logs: {', '.join(n.log_file for n in nodes)}")
    print(f"state: {cluster.state_path}   (`logbus cluster status|down --dir {cluster.dir}`)")
    return 0


def _print_security(cluster: LocalCluster) -> None:
    """For a secured cluster: the admin's client properties and how to add a user and its ACLs."""
    properties = cluster.client_properties
    if not properties:
        return
    print(f"security: SASL_SSL (TLS, SCRAM-SHA-512) with ACLs; admin's client properties: {properties}")
    print(f"  a user:  logbus configs --zookeeper {cluster.zookeeper_connect} --alter --entity-type users "
          "--entity-name alice --add-config 'SCRAM-SHA-512=[password=alice-secret]'")
    print(f"  an ACL:  logbus acls --bootstrap-server {cluster.bootstrap_servers.split(',')[0]} --command-config "
          f"{properties} --add --allow-principal User:alice --producer --topic page-views")


def metrics_urls(nodes: list) -> str:
    """``broker 1 http://host:port/metrics, ...`` of the brokers that serve metrics."""
    return ", ".join(f"broker {n.id} http://{n.host}:{n.metrics_port}/metrics"
                     for n in nodes if n.role == "broker" and n.metrics_port)


def _restart(cluster: LocalCluster, args: argparse.Namespace) -> int:
    node = cluster.restart(args.broker_id, timeout=args.timeout)
    print(f"broker {node.id} restarted on {node.address} (pid {node.pid})")
    return 0


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _status(cluster: LocalCluster, args: argparse.Namespace) -> int:
    st = cluster.status()
    rows = [("NODE", "ID", "PID", "ADDRESS", "METRICS", "ALIVE", "REGISTERED", "NOTE")]
    for ns in st.nodes:
        node = ns.node
        if ns.alive:
            alive = "yes"
        elif not ns.process_alive:
            alive = "no (no process)"
        else:
            alive = "no (port closed)"
        registered = _yes_no(ns.registered)
        if node.role == "broker" and ns.registered is None:
            registered = "?"
        rows.append((node.role, "-" if node.id is None else str(node.id), str(node.pid or "-"), node.address,
                     str(node.metrics_port or "-"), alive, registered, ns.note))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"cluster in {st.dir} (state: {st.state}, since {st.created})")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"bootstrap.servers={st.bootstrap_servers}")
    print(f"zookeeper.connect={st.zookeeper_connect}")
    _print_security(cluster)
    if st.zookeeper_error:
        print(f"registration unknown: {st.zookeeper_error}")
    ok = sum(1 for b in st.brokers if b.ok)
    zk_ok = any(n.ok for n in st.nodes if n.node.role == "zookeeper")
    print(f"{ok}/{len(st.brokers)} brokers up and registered; ZooKeeper {'up' if zk_ok else 'down'}"
          + ("" if st.all_up else " — not all up"))
    return 0 if st.all_up else 1


def _down(cluster: LocalCluster, args: argparse.Namespace) -> int:
    if not cluster.down(keep_data=args.keep_data, timeout=args.timeout):
        print(f"no cluster in {cluster.dir}; nothing to stop")
        return 0
    kept = f"; data and logs kept in {cluster.dir}" if args.keep_data else ""
    print(f"cluster in {cluster.dir} stopped{kept}")
    return 0


ACTIONS = {"up": _up, "status": _status, "restart": _restart, "down": _down}
