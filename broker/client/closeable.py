"""``Closeable``: the one ``with client: ...`` protocol of the clients (a connection, the
consumers, the producer, the admin client): leaving the block closes the client."""

from __future__ import annotations

from typing import Self


class Closeable:
    """A client used as a context manager: ``__enter__`` gives itself, ``__exit__`` calls ``close``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
