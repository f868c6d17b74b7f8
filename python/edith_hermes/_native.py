"""Native gateway namespaces, named by the pinned catalog of Hermes 0.19's gateway methods.

``profile.native.session.list()`` calls the native method ``session.list`` through the control
plane. The names come from the catalog compiled into the extension (``NATIVE_METHODS``), so a
name the catalog lacks is an ``AttributeError`` here, before any request. A method in the
catalog is not a promise that the runtime behind an instance implements it: one it lacks raises
``UnsupportedError`` (see ``await instance.capabilities()``).
"""

from __future__ import annotations

from typing import Any

from edith_hermes._core import NATIVE_METHODS


class Native:
    """The catalog's namespaces on one route (an instance, or a profile of it)."""

    def __init__(self, route: Any, prefix: str = "") -> None:
        self._route = route
        self._prefix = prefix

    def __getattr__(self, part: str) -> Any:
        if part.startswith("_"):
            raise AttributeError(part)
        name = f"{self._prefix}.{part}" if self._prefix else part
        if name in NATIVE_METHODS:
            return NativeMethod(self._route, name)
        if any(method.startswith(name + ".") for method in NATIVE_METHODS):
            return Native(self._route, name)
        raise AttributeError(f"`{name}` is not in the pinned native catalog")

    def __dir__(self) -> list[str]:
        depth = self._prefix.count(".") + 1 if self._prefix else 0
        start = self._prefix + "." if self._prefix else ""
        return sorted(
            {m.split(".")[depth] for m in NATIVE_METHODS if m.startswith(start)}
        )

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Calls native ``method`` (a full catalog name) with ``params``."""
        return await self._route.call(method, params)


class NativeMethod(Native):
    """One native method; call it with the method's params as keyword arguments. A method
    whose name is also a namespace (``pet.info`` and ``pet.info.meta``) is both."""

    def __init__(self, route: Any, name: str) -> None:
        super().__init__(route, name)
        facts = NATIVE_METHODS[name]
        self.name = name
        self.params: list[str] = list(facts["params"])
        self.scope: str = facts["scope"]
        self.admin: bool = facts["admin"]
        where = {
            "session": "acts on a live session (session_id)",
            "profile": "acts on the profile it is called through",
            "instance": "instance-wide, even when called through a profile",
        }[self.scope]
        admin = " Administrative: needs an admin key." if self.admin else ""
        self.__doc__ = f"Native `{name}` ({where}). Params: {', '.join(self.params) or 'none'}.{admin}"

    async def __call__(self, **params: Any) -> Any:
        return await self._route.call(self.name, params)

    def __repr__(self) -> str:
        return f"<native method {self.name}>"
