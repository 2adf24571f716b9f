#!/usr/bin/env python3
"""Produce and consume over SASL_SSL (SCRAM-SHA-256, TLS) against PLAINTEXT, one broker, one run.

    .venv/bin/python bench/security_bench.py [--records N] [--partitions P] [--rounds R] [--json out.json]

One embedded ZooKeeper and one broker listening on PLAINTEXT and SASL_SSL (certificates made for
the run). For each listener, alternating, --rounds times: librdkafka produces N 100-byte records
(acks=1, linger.ms=5, as bench/produce_consume.py) into a fresh topic, then a librdkafka consumer
reads them all back. Reported: records/s of each phase (the best round), the SASL_SSL/PLAINTEXT
ratio, and the broker's CPU per record (broker CPU seconds / records, in microseconds). The
machine may be shared: the other processes' CPU is in the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.produce_consume import Cluster, CpuMeter, consume_phase, create_topics, produce_phase, progress  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from broker.cluster.net import free_port
    from tests.security.certs import KEY_PASSWORD, make_certs

    data = Path(tempfile.mkdtemp(prefix="logbus-security-bench-"))
    certs = make_certs(data / "certs")
    sasl_port = free_port()
    cluster = Cluster(data, {})
    cluster.overrides.update({
        "listeners": f"{cluster.overrides['listeners']},SASL_SSL://127.0.0.1:{sasl_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "ssl.keystore.location": str(certs.broker),
        "ssl.key.password": KEY_PASSWORD,
    })
    results: dict[str, list[dict[str, Any]]] = {"PLAINTEXT": [], "SASL_SSL": []}
    try:
        cluster.start(60)
        from broker.cluster.zk import ZkClient
        from broker.cluster.zkdata import ConfigType
        from broker.security.scram import make_credential

        zk = ZkClient(cluster.overrides["zookeeper.connect"], session_timeout_ms=10000)
        zk.start(timeout=10)
        zk.change_entity_config(ConfigType.USER, "bench",
                                {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "bench-secret").to_config()})
        zk.stop()
        clients = {
            "PLAINTEXT": (cluster.bootstrap, {}),
            "SASL_SSL": (f"127.0.0.1:{sasl_port}", {
                "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca), "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "bench", "sasl.password": "bench-secret"}),
        }
        for round_no in range(args.rounds):
            for name, (bootstrap, extra) in clients.items():
                topic = f"bench-{name.lower()}-{round_no}"
                create_topics(cluster.bootstrap, {topic: args.partitions})
                progress(f"round {round_no + 1}: {name} produce {args.records:,} records")
                meter = CpuMeter(cluster.broker.pid).start()
                produced = produce_phase(bootstrap, topic, args.records, args.timeout, cluster.check_alive, dict(extra))
                produced["cpu"] = meter.stop()
                progress(f"round {round_no + 1}: {name} consume")
                meter = CpuMeter(cluster.broker.pid).start()
                consumed = consume_phase(bootstrap, topic, args.partitions, produced["delivered"], args.timeout,
                                         cluster.check_alive, dict(extra))
                consumed["cpu"] = meter.stop()
                results[name].append({"produce": produced, "consume": consumed})
                progress(f"  {name}: produce {produced['records_s']:,} rec/s, consume {consumed['records_s']:,} rec/s")
    finally:
        cluster.close()

    def best(name: str, phase: str) -> dict[str, Any]:
        return max((r[phase] for r in results[name]), key=lambda p: p["records_s"])

    summary: dict[str, Any] = {}
    for phase in ("produce", "consume"):
        rows = {}
        for name in results:
            p = best(name, phase)
            broker_cpu_s = p["cpu"]["broker_cores"] * p["cpu"]["wall_s"]
            rows[name] = {"records_s": p["records_s"], "broker_cores": p["cpu"]["broker_cores"],
                          "broker_cpu_us_per_record": round(broker_cpu_s / max(p["records"], 1) * 1e6, 2),
                          "other_cores": p["cpu"]["other_cores"]}
        rows["ratio"] = round(rows["SASL_SSL"]["records_s"] / rows["PLAINTEXT"]["records_s"], 3)
        summary[phase] = rows
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "records": args.records,
           "partitions": args.partitions, "rounds": args.rounds, "summary": summary, "runs": results}
    print(f"{'phase':8} {'listener':10} {'records/s':>12} {'broker cores':>13} {'broker µs/record':>17}")
    for phase, rows in summary.items():
        for name in ("PLAINTEXT", "SASL_SSL"):
            r = rows[name]
            print(f"{phase:8} {name:10} {r['records_s']:>12,} {r['broker_cores']:>13} {r['broker_cpu_us_per_record']:>17}")
        print(f"{phase:8} {'ratio':10} {rows['ratio']:>12}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
