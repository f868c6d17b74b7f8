"""``AsyncHermesDesktop``: the Desktop HTTP routes of one Hermes runtime (``/api/*``) — another
endpoint, with other operations, than the control plane. A Desktop URL is not a control-plane
URL: ``AsyncHermesDesktop.remote(url, token)`` talks to a runtime with its session token;
``instance.desktop()`` reaches an instance's runtime through the control plane with the
application's key. One method per route of the pinned routes (``_desktop_routes.py``)."""

from __future__ import annotations

from typing import Any

from edith_hermes._closing import ClosesOnExit
from edith_hermes._core import HermesDesktop
from edith_hermes._desktop_routes import DesktopRoutes


class AsyncHermesDesktop(DesktopRoutes, ClosesOnExit):
    """The Desktop routes of one runtime."""

    def __init__(self, desktop: HermesDesktop) -> None:
        self._desktop = desktop

    @classmethod
    def remote(
        cls, url: str, token: str | None = None, *, http_client: Any = None
    ) -> AsyncHermesDesktop:
        """A runtime at ``url`` (e.g. ``http://127.0.0.1:9119``), with its session token
        (``HERMES_DASHBOARD_SESSION_TOKEN``). With ``http_client`` (an ``httpx.AsyncClient``,
        created on the running event loop) every request goes through it and it stays yours:
        ``close()`` never closes it; ``for_profile()`` clients share it."""
        return cls(HermesDesktop.remote(url, token, http_client))

    def for_profile(self, name: str) -> AsyncHermesDesktop:
        """A client acting on the runtime's profile ``name`` wherever a route takes one. It
        shares this client's connection without owning it: closing it leaves this one open;
        closing this one ends it too."""
        return AsyncHermesDesktop(self._desktop.for_profile(name))

    @property
    def profile(self) -> str | None:
        return self._desktop.profile

    @property
    def base_url(self) -> str:
        return self._desktop.base_url

    async def capabilities(self) -> dict[str, Any]:
        """What the server offers: ``version``, ``runtime`` (``None`` for Hermes itself), the
        route ``groups`` it serves, the dashboard plugins with routes (``plugin_routes``) and
        the MCP servers its catalog offers (``mcp_catalog``).
        Discover before relying on a group: not every deployment serves every route."""
        return await self._desktop.capabilities()

    async def plugin_get(self, plugin: str, path: str) -> Any:
        """``GET /api/plugins/<plugin>/<path>`` of a dashboard plugin the server offers
        (``UnsupportedError`` otherwise)."""
        return await self._desktop.plugin_get(plugin, path)

    async def plugin_post(self, plugin: str, path: str, body: dict[str, Any]) -> Any:
        """``POST /api/plugins/<plugin>/<path>``; see ``plugin_get``."""
        return await self._desktop.plugin_post(plugin, path, body)

    async def close(self) -> None:
        """Closes this client and those ``for_profile`` made from it."""
        await self._desktop.close()
