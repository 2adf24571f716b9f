"""The `logbus` command is part of the broker install: importing it, or any of its subcommand
modules, must not load ``mirror`` or ``pipelines`` (their extras may be missing on a broker host)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import broker.tools

ROOT = Path(__file__).resolve().parents[1]
TOOLS = sorted(f"broker.tools.{m.name}" for m in pkgutil.iter_modules(broker.tools.__path__))

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("mirror", "pipelines"))))
"""


def test_the_cli_and_every_tool_import_without_mirror_or_pipelines() -> None:
    assert "broker.tools.mirror_maker" in TOOLS
    proc = subprocess.run([sys.executable, "-c", PROBE, "broker.cli", *TOOLS], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(proc.stdout) == []


def test_the_mirror_maker_command_still_has_its_flags() -> None:
    from broker.cli import build_parser

    args = build_parser("mirror-maker").parse_args(["--consumer.config", "a.properties", "--num.streams", "2"])
    assert args.consumer_configs == ["a.properties"] and args.num_streams == 2
