"""EDITH / Hermes for Python applications, over the Rust core.

``Hermes.local()`` starts an embedded control plane, runtime and tool host inside this process
(no server, no network, no model key); ``Hermes.remote(url, api_key)`` talks to an ``edith
serve`` elsewhere. Resource handles follow the seed: ``hermes.instances(iid).profiles(pid)``
builds a handle without I/O, ``await profile.get()`` fetches, ``profile.native.session.list()``
calls the runtime's native gateway through the control plane, and ``@tool`` functions are
served to the agent as callback tools.

Every call that talks to the control plane is awaitable and runs on the extension's own
threads, so the event loop is never blocked.
"""

from edith_hermes._core import (
    ApiError,
    ClosedError,
    DesktopError,
    EdithError,
    Hermes,
    NativeError,
    NotReadyError,
    ToolHost,
    TransportError,
    UnsupportedError,
    __version__,
)
from edith_hermes import _exit  # registers the exit hook
from edith_hermes._client import AsyncEdithHermes
from edith_hermes._desktop import AsyncHermesDesktop
from edith_hermes._tools import Tool, tool

__all__ = [
    "ApiError",
    "AsyncEdithHermes",
    "AsyncHermesDesktop",
    "ClosedError",
    "DesktopError",
    "EdithError",
    "Hermes",
    "NativeError",
    "NotReadyError",
    "Tool",
    "ToolHost",
    "TransportError",
    "UnsupportedError",
    "__version__",
    "tool",
]
