"""Callback tools: the schema comes from the type hints; bad arguments never reach the
function."""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic
import pytest

from edith_hermes import EdithError, Hermes, Tool, tool


class Point(pydantic.BaseModel):
    x: float
    y: float


@tool
def distance(
    a: Point,
    b: Point,
    unit: Annotated[Literal["m", "km"], pydantic.Field(description="The unit of the result")] = "m",
) -> float:
    """The distance between two points.

    Longer explanations stay out of the description."""
    d = ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5
    return d / 1000 if unit == "km" else d


def test_the_schema_comes_from_the_type_hints():
    schema = distance.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["a", "b"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["unit"]["enum"] == ["m", "km"]
    assert schema["properties"]["unit"]["description"] == "The unit of the result"
    assert schema["properties"]["unit"]["default"] == "m"
    point = schema["$defs"]["Point"]
    assert point["required"] == ["x", "y"]
    assert distance.description == "The distance between two points."
    assert distance.definition()["name"] == "distance"


async def test_valid_arguments_are_checked_and_passed_as_their_types():
    assert await distance.invoke({"a": {"x": 0, "y": 0}, "b": {"x": 3, "y": 4}}) == 5.0
    result = await distance.invoke({"a": {"x": 0, "y": 0}, "b": {"x": 3000, "y": 4000}, "unit": "km"})
    assert result == 5.0
    # Still a plain function for Python callers.
    assert distance(Point(x=0, y=0), Point(x=0, y=2)) == 2.0


async def test_bad_arguments_never_reach_the_function():
    called = []

    @tool
    def record(text: str) -> None:
        """Records a text."""
        called.append(text)

    for bad in ({}, {"text": 1, "extra": True}, {"txt": "a"}):
        with pytest.raises(ValueError, match="invalid arguments"):
            await record.invoke(bad)
    assert called == []


def test_names_and_descriptions_can_be_given():
    @tool(name="shout", description="Upper-cases a text")
    async def upper(text: str) -> str:
        return text.upper()

    assert isinstance(upper, Tool)
    assert (upper.name, upper.description) == ("shout", "Upper-cases a text")


def test_parameters_without_a_name_for_the_model_are_refused():
    with pytest.raises(TypeError, match=r"\*args"):
        tool(lambda *words: len(words))


async def test_a_plain_function_is_registered_as_a_tool(hermes):
    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    registered = await hermes.register_tool(word_count)
    assert registered["description"] == "Count the words in a text."
    with pytest.raises(TypeError, match="a tool is a function"):
        await hermes.register_tool(42)


async def test_a_remote_client_has_no_tool_host_of_its_own(hermes):
    async with Hermes.remote(hermes.url, "key") as remote:
        with pytest.raises(EdithError, match="no tool host"):
            await remote.register_tool(distance)
