"""The one ``async with`` rule of the Python-side clients: leaving the block closes them."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class ClosesOnExit:
    """``async with client:`` gives the client and closes it on the way out."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
