"""A large answer's arrays of structs (each topic's partitions) built and encoded a bounded
number of items per step, for ``Turns`` to run one step per reactor turn (issue 20)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from broker.protocol.types import EncodedItems


def encode_in_steps(encode: Callable[[list[Mapping[str, Any]]], EncodedItems],
                    holders: Sequence[MutableMapping[str, Any]], field: str,
                    answer: Callable[[Any], Mapping[str, Any]], per_step: int) -> Iterator[None]:
    """Replace each holder's ``field`` (a list of items) by its ``EncodedItems``: every item
    made its answer (``answer``) and written (``encode``, a ``MessageSchema.items_encoder``);
    a step ends after about ``per_step`` items, across holders."""
    since_step = 0
    for holder in holders:
        items = holder[field]
        pieces = []
        for start in range(0, len(items), per_step):
            piece = items[start:start + per_step]
            pieces.append(encode([answer(item) for item in piece]).data)
            since_step += len(piece)
            if since_step >= per_step:
                since_step = 0
                yield None
        holder[field] = EncodedItems(len(items), b"".join(pieces))
