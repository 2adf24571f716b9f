#!/usr/bin/env python3
"""In-process cost of the compiled small-request paths against their Python references (issue 20).

    .venv/bin/python bench/compiled_paths.py

Per call, best of three ``timeit`` runs: the request header's reader, the Produce v7 request
reader and response writer (compiled, then generated), a batch's header check
(``layout.check_batch`` with and without ``fields_c.check_header``) at 170 bytes, 11 KB and
1 MB, and an append's checks of one small batch (``validator.validate_append`` with and without
``fields_c.check_produced``). Needs the compiled modules (``make setup`` builds them).
"""

from __future__ import annotations

import os
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.protocol import codegen, header  # noqa: E402
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey  # noqa: E402
from broker.protocol.records import encode_batch, layout  # noqa: E402
from broker.protocol.schema import _REFERENCE  # noqa: E402
from broker.protocol.types import Writer  # noqa: E402
from broker.storage import validator  # noqa: E402
from broker.storage.config import LogConfig  # noqa: E402


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    return min(timeit.repeat(fn, number=calls, repeat=3)) / calls * 1e6


def main() -> None:
    request = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
               "topic_data": [{"name": "lat", "partition_data": [{"index": 0, "records": b"x" * 170}]}]}
    frame = header.encode_request_header(ApiKey.PRODUCE, 7, 12345, "rdkafka") + REQUESTS[ApiKey.PRODUCE].encode_bytes(7, request)
    body = memoryview(bytearray(frame))[header.decode_request_header(frame).body_offset:]
    response = {"responses": [{"name": "lat", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0}]}],
        "throttle_time_ms": 0}
    fields = RESPONSES[ApiKey.PRODUCE].fields
    generated_reader = codegen.generate_reader("ProduceRequest", REQUESTS[ApiKey.PRODUCE].fields, 7, False, _REFERENCE)
    generated_writer = codegen.generate_writer("ProduceResponse", fields, 7, False, _REFERENCE)
    compiled_reader, compiled_writer = REQUESTS[ApiKey.PRODUCE].reader(7), RESPONSES[ApiKey.PRODUCE].writer(7)
    checked = header._decode_request_header_checked
    rows = [
        ("request header, compiled", lambda: header.decode_request_header(frame)),
        ("request header, checked (Python)", lambda: checked(frame, 0)),
        ("Produce v7 request, compiled", lambda: compiled_reader(body, 0, len(body))),
        ("Produce v7 request, generated", lambda: generated_reader(body, 0, len(body))),
        ("Produce v7 response, compiled", lambda: compiled_writer(Writer(), response)),
        ("Produce v7 response, generated", lambda: generated_writer(Writer(), response)),
    ]
    for count, size in ((1, 100), (1, 10_000), (1000, 1000)):
        batch = bytearray(encode_batch([(None, os.urandom(size), [], 0)] * count))
        rows.append((f"batch check, {len(batch):,} bytes, compiled first", lambda b=batch: layout.check_batch(b)))
        rows.append((f"batch check, {len(batch):,} bytes, Python", lambda b=batch: _in_python(layout, "_compiled_check", lambda: layout.check_batch(b))))
    now = int(time.time() * 1000)
    produced = bytearray(encode_batch([(None, os.urandom(100), [], now)]))
    config = LogConfig()
    policy = validator.policy_of(config)
    rows.append(("append check, 1 record, compiled first", lambda: validator.validate_append(produced, config, policy, now)))
    rows.append(("append check, 1 record, Python", lambda: _in_python(
        validator, "_compiled_produced", lambda: validator.validate_append(produced, config, policy, now))))
    for name, fn in rows:
        print(f"{name:48s} {per_call_us(fn, 20_000):8.2f} µs")


def _in_python(module: Any, compiled_name: str, fn: Callable[[], Any]) -> Any:
    """``fn()`` with ``module``'s compiled path (its attribute ``compiled_name``) switched off."""
    compiled = getattr(module, compiled_name)
    setattr(module, compiled_name, None)
    try:
        return fn()
    finally:
        setattr(module, compiled_name, compiled)


if __name__ == "__main__":
    main()
