#!/usr/bin/env python3
"""CPU of the broker's request framing alone: KafkaConnection.dataReceived cutting a stream into frames.

    .venv/bin/python bench/framing.py

Feeds streams of size-prefixed frames (1 MiB, 16 KiB and 200 bytes) in 64 KiB and 256 KiB
reads, the way the reactor delivers them, to one connection whose frame handler does nothing,
and reports process CPU per frame.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.server.connection import KafkaConnection  # noqa: E402


class _Config:
    socket_request_max_bytes = 100 << 20


class _Broker:
    config = _Config


def main() -> None:
    for size, chunk in ((1 << 20, 65536), (1 << 20, 262144), (16384, 65536), (200, 65536)):
        connection = KafkaConnection(_Broker(), None)  # type: ignore[arg-type]
        got: list[int] = []
        connection._handle_frame = lambda frame, got=got: got.append(len(frame))  # type: ignore[method-assign]
        n = max(50, (64 << 20) // size)
        stream = (size.to_bytes(4, "big") + bytes(size)) * n
        chunks = [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
        t = time.process_time()
        for piece in chunks:
            connection.dataReceived(piece)
        dt = time.process_time() - t
        assert len(got) == n and set(got) == {size}
        print(f"frames of {size:>8} B in {chunk // 1024:>3} KiB reads: {dt / n * 1e6:8.1f} us per frame, "
              f"{len(stream) / dt / 2**20:6.0f} MiB/s")


if __name__ == "__main__":
    main()
