"""``AsyncEdithHermes``: the low-level control-plane client, one method per operation of the
checked-in contract (generated into ``_operations.py``), over the Rust SDK's client."""

from __future__ import annotations

from typing import Any

from edith_hermes._closing import ClosesOnExit
from edith_hermes._core import ClosedError, EdithHermes
from edith_hermes._operations import Operations


class AsyncEdithHermes(Operations, ClosesOnExit):
    """``AsyncEdithHermes.remote(url, api_key)``, or ``hermes.sdk`` of a ``Hermes`` context."""

    def __init__(self, client: EdithHermes, *, owned: bool = True) -> None:
        self._client = client
        # `hermes.sdk` borrows its context's client: closing it must not close the context's.
        self._owned = owned

    @classmethod
    def remote(
        cls, url: str, api_key: str | None = None, *, http_client: Any = None
    ) -> AsyncEdithHermes:
        """A client for the control plane at ``url``. With ``http_client`` (an
        ``httpx.AsyncClient``, created on the running event loop) every request goes through
        it, and it stays yours: ``close()`` never closes it. Without, the client makes one of
        its own and closes it."""
        return cls(EdithHermes.remote(url, api_key, http_client))

    @property
    def base_url(self) -> str:
        return self._client.base_url

    async def close(self) -> None:
        """Closes the client; later calls raise ``ClosedError``. Deletes nothing. Closing
        ``hermes.sdk`` ends only that view: its ``Hermes`` context stays open (close that)."""
        if self._owned:
            await self._client.close()
        else:
            self._client = _Closed()  # type: ignore[assignment]


class _Closed:
    """Stands in for the client of a closed ``hermes.sdk`` view."""

    def __getattr__(self, name: str) -> Any:
        raise ClosedError("this AsyncEdithHermes was closed")
