"""Callback tools: Python functions the agent calls, in this process.

The JSON Schema of a tool's arguments comes from its type hints (pydantic does the work, so
``Annotated[str, Field(description=...)]`` and pydantic models as parameters are welcome); its
description is the docstring's first paragraph. Arguments that do not match the schema never
reach the function: the model is told why. A plain ``def`` runs in a worker thread, an
``async def`` on the event loop that registered it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from collections.abc import Callable
from typing import Any, overload

import pydantic
import pydantic_core


class Tool:
    """A callback tool: ``name``, ``description``, ``input_schema`` and the function."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description or _first_paragraph(inspect.getdoc(fn)) or self.name
        self._arguments = _arguments_model(fn, self.name)
        schema = self._arguments.model_json_schema()
        schema.pop("title", None)
        self.input_schema: dict[str, Any] = schema

    def definition(self) -> dict[str, Any]:
        """The tool as the control plane registers it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Checks ``arguments`` against the schema and calls the function, as the agent would."""
        try:
            checked = self._arguments.model_validate(arguments)
        except pydantic.ValidationError as e:
            raise ValueError(f"invalid arguments: {e}") from None
        kwargs = {field: getattr(checked, field) for field in type(checked).model_fields}
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        result = await asyncio.to_thread(self.fn, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _run_json(self, arguments: str) -> str:
        """The extension's entry: JSON arguments in, JSON result out."""
        result = await self.invoke(json.loads(arguments))
        return json.dumps(pydantic_core.to_jsonable_python(result))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Makes a function a callback tool: ``@tool`` or ``@tool(name=..., description=...)``."""
    if fn is None:
        return lambda f: Tool(f, name=name, description=description)
    return Tool(fn, name=name, description=description)


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """``value`` if it is a tool, else the function made into one."""
    if isinstance(value, Tool):
        return value
    if callable(value):
        return Tool(value)
    raise TypeError(f"a tool is a function or an edith_hermes.Tool, not {type(value).__name__}")


def _arguments_model(fn: Callable[..., Any], name: str) -> type[pydantic.BaseModel]:
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs have no schema")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(f"tool {name}: positional-only parameters have no name for the model")
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    return pydantic.create_model(
        f"{name}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )


def _first_paragraph(doc: str | None) -> str | None:
    if not doc:
        return None
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")
