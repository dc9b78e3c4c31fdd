"""Tool protocols and @tool: schema generation, argument validation, results, streaming tools."""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from compose.errors import ToolArgumentsError
from compose.schema import ToolInfo
from compose.stream import StreamReader
from compose.tools import (
    BaseTool,
    FunctionTool,
    InvokableTool,
    StreamableTool,
    StreamingFunctionTool,
    tool,
    tool_parallel_safe,
    tool_timeout,
)

pytestmark = pytest.mark.anyio


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    """A postal address."""

    city: str
    zip_code: str | None = None


@tool
async def search(
    query: str,
    limit: int = 5,
    unit: Unit = Unit.CELSIUS,
    mode: Literal["fast", "deep"] = "fast",
    address: Address | None = None,
    title: Annotated[str, Field(description="a heading")] = "",
) -> dict[str, Any]:
    """Search the web.

    Returns the best pages.

    Args:
        query: what to look for,
            in plain words.
        limit (int): how many results.
        address: where the user is.

    Returns:
        a dictionary.
    """
    return {"query": query, "limit": limit, "unit": unit, "mode": mode, "address": address, "title": title}


# ----------------------------------------------------------------------------------------------------------
# Schema


def test_schema_from_signature_and_docstring() -> None:
    info = search.info()
    assert info.name == "search"
    assert info.description == "Search the web.\n\nReturns the best pages."
    assert info.extra == {"parallel_safe": True}
    assert info.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string", "description": "what to look for, in plain words."},
            "limit": {"type": "integer", "default": 5, "description": "how many results."},
            "unit": {"$ref": "#/$defs/Unit", "default": "celsius"},
            "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
            "address": {
                "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                "default": None,
                "description": "where the user is.",
            },
            "title": {"type": "string", "default": "", "description": "a heading"},
        },
        "required": ["query"],
        "$defs": {
            "Address": {
                "type": "object",
                "description": "A postal address.",
                "properties": {
                    "city": {"type": "string"},
                    "zip_code": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["city"],
            },
            "Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
    }


def test_name_description_and_declarations_override() -> None:
    def lookup(key: str) -> str:
        """Ignored docstring."""
        return key

    t = tool(lookup, name="kv_get", description="Read a key.", parallel_safe=False, timeout=2.5)
    info = t.info()
    assert (info.name, info.description) == ("kv_get", "Read a key.")
    assert info.extra == {"parallel_safe": False, "timeout": 2.5}
    assert (t.parallel_safe, t.timeout) == (False, 2.5)
    assert tool_parallel_safe(t) is False
    assert tool_timeout(t) == 2.5


def test_what_cannot_be_a_tool_fails_at_the_call() -> None:
    with pytest.raises(ValueError, match=r"tool name '<lambda>' is not a valid tool name .*tool\(fn, name=\.\.\.\)"):
        tool(lambda x: x)
    assert tool(lambda x: x, name="echo").info().name == "echo"
    with pytest.raises(ValueError, match="tool name 'two words' is not a valid tool name"):
        tool(lambda x: x, name="two words")
    with pytest.raises(TypeError, match=r"tool\(\) needs a function, got int"):
        tool(3)  # type: ignore[call-overload]


def test_decorator_with_options_and_no_parameters() -> None:
    @tool(name="now")
    def clock() -> str:
        return "noon"

    assert isinstance(clock, FunctionTool)
    info = clock.info()
    assert info.name == "now"
    assert info.description == ""
    assert info.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_parameter_names_that_shadow_basemodel_attributes() -> None:
    @tool
    def f(json: str, schema: int, model_config: bool = False) -> str:
        return f"{json}{schema}{model_config}"

    assert f.info().parameters["required"] == ["json", "schema"]
    assert list(f.info().parameters["properties"]) == ["json", "schema", "model_config"]


def test_unannotated_parameter_accepts_anything() -> None:
    @tool
    def echo(value) -> str:  # type: ignore[no-untyped-def]
        return str(value)

    assert echo.info().parameters == {
        "type": "object",
        "properties": {"value": {}},
        "required": ["value"],
        "additionalProperties": False,
    }


def test_annotations_naming_local_classes_resolve() -> None:
    class Point(BaseModel):
        x: int
        y: int

    @tool(name="dist")
    def distance(a: Point, b: Point) -> float:
        return float(abs(a.x - b.x) + abs(a.y - b.y))

    def norm(p: Point) -> float:
        return float(abs(p.x) + abs(p.y))

    assert distance.info().parameters["properties"]["a"] == {"$ref": "#/$defs/Point"}
    assert tool(norm).info().parameters["required"] == ["p"]


def test_var_args_are_rejected() -> None:
    def f(*items: int) -> int:
        return sum(items)

    with pytest.raises(TypeError, match=r"tool f: \*args and \*\*kwargs"):
        tool(f)


def test_unsupported_annotation_is_a_type_error_naming_the_tool() -> None:
    class Opaque:
        pass

    def g(x: Opaque) -> str:
        return ""

    with pytest.raises(TypeError, match="tool g: cannot build the parameters schema"):
        tool(g)


def test_protocols() -> None:
    @tool
    async def inv(x: int) -> int:
        return x

    @tool
    async def streamer(x: int) -> AsyncIterator[str]:
        yield str(x)

    assert isinstance(inv, FunctionTool)
    assert isinstance(streamer, StreamingFunctionTool)
    assert isinstance(inv, InvokableTool) and not isinstance(inv, StreamableTool)
    assert isinstance(streamer, StreamableTool) and not isinstance(streamer, InvokableTool)
    assert isinstance(inv, BaseTool)
    assert repr(inv) == "FunctionTool(name='inv', parallel_safe=True)"


class ClassTool:
    parallel_safe = False

    def info(self) -> ToolInfo:
        return ToolInfo(name="cls", extra={"timeout": 3})

    async def run(self, arguments: str) -> str:
        return arguments


def test_declarations_of_class_based_tools() -> None:
    t = ClassTool()
    assert isinstance(t, InvokableTool)
    assert tool_parallel_safe(t) is False
    assert tool_timeout(t) == 3.0
    plain = FunctionTool(lambda: "x", name="plain")
    assert tool_parallel_safe(plain) is True
    assert tool_timeout(plain) is None


# ----------------------------------------------------------------------------------------------------------
# Running


async def test_run_validates_and_serialises_non_string_results() -> None:
    out = await search.run('{"query": "q", "unit": "fahrenheit", "address": {"city": "Paris"}}')
    assert json.loads(out) == {
        "query": "q",
        "limit": 5,
        "unit": "fahrenheit",
        "mode": "fast",
        "address": {"city": "Paris", "zip_code": None},
        "title": "",
    }


async def test_string_results_are_returned_as_they_are() -> None:
    @tool
    def greet(name: str, *, punctuation: str = "!") -> str:
        return f"hello {name}{punctuation}"

    assert await greet.run('{"name": "ann"}') == "hello ann!"
    assert await greet.run('{"name": "bo", "punctuation": "?"}') == "hello bo?"
    assert greet("cy") == "hello cy!"  # still callable as the function


async def test_model_and_none_results_are_json() -> None:
    @tool
    async def where(city: str) -> Address:
        return Address(city=city)

    @tool
    async def nothing() -> None:
        return None

    assert await where.run('{"city": "Oslo"}') == '{"city":"Oslo","zip_code":null}'
    assert await nothing.run("") == "null"
    assert await nothing.run("  ") == "null"


async def test_sync_function_in_a_worker_thread() -> None:
    @tool(run_in_thread=True)
    def which_thread() -> str:
        return threading.current_thread().name

    @tool
    def inline() -> str:
        return threading.current_thread().name

    assert await which_thread.run("{}") != threading.current_thread().name
    assert await inline.run("{}") == threading.current_thread().name


def test_run_in_thread_is_rejected_for_streaming_tools() -> None:
    async def gen() -> AsyncIterator[str]:
        yield ""

    with pytest.raises(TypeError, match="run_in_thread applies to plain functions only"):
        tool(gen, run_in_thread=True)


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ("{", None, "invalid arguments for tool 'search': arguments are not valid JSON"),
        ("[1, 2]", None, "invalid arguments for tool 'search': arguments must be a JSON object"),
        ('{"limit": 2}', "query", "invalid arguments for tool 'search' field 'query': Field required"),
        (
            '{"query": "q", "limit": "many"}',
            "limit",
            "invalid arguments for tool 'search' field 'limit': Input should be a valid integer",
        ),
        ('{"query": "q", "mode": "slow"}', "mode", "field 'mode': Input should be 'fast' or 'deep'"),
        ('{"query": "q", "address": {}}', "address.city", "field 'address.city': Field required"),
    ],
)
async def test_bad_arguments_name_tool_and_field(arguments: str, field: str | None, message: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        await search.run(arguments)
    assert info.value.tool_name == "search"
    assert info.value.field == field
    assert message in str(info.value)


async def test_an_argument_the_function_does_not_take_is_an_error_naming_it() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        await search.run('{"query": "q", "limt": 3}')
    assert info.value.field == "limt"
    assert str(info.value) == (
        "invalid arguments for tool 'search' field 'limt': not a parameter of the tool, which takes query, limit, "
        "unit, mode, address, title"
    )
    with pytest.raises(ToolArgumentsError) as info:
        await search.run('{"query": "q", "a": 1, "b": 2}')
    assert info.value.field == "a"
    assert "'a', 'b' are not parameters of the tool" in str(info.value)
    # the internal field names are not a way in either
    with pytest.raises(ToolArgumentsError, match="field 'p0': not a parameter"):
        await search.run('{"query": "q", "p0": "x"}')

    @tool
    def now() -> str:
        return "noon"

    with pytest.raises(ToolArgumentsError, match="field 'tz': not a parameter of the tool, which takes no arguments"):
        await now.run('{"tz": "UTC"}')


async def test_extra_arguments_ignore_drops_unknown_arguments() -> None:
    @tool(extra_arguments="ignore")
    def greet(name: str) -> str:
        return f"hello {name}"

    assert await greet.run('{"name": "bo", "ignored": 1}') == "hello bo"
    assert "additionalProperties" not in greet.info().parameters
    assert greet.extra_arguments == "ignore"
    assert repr(greet) == "FunctionTool(name='greet', parallel_safe=True, extra_arguments='ignore')"

    async def spell(word: str) -> AsyncIterator[str]:
        yield word

    streaming = tool(spell, extra_arguments="ignore")
    reader = await streaming.stream('{"word": "w", "x": 0}')
    assert [c async for c in reader] == ["w"]
    with pytest.raises(ValueError, match="extra_arguments must be 'forbid' or 'ignore', got 'allow'"):
        tool(spell, extra_arguments="allow")  # type: ignore[call-overload]


async def test_nested_models_keep_their_own_extra_configuration() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        x: int

    @tool
    def place(address: Address, strict: Strict | None = None) -> str:
        return address.city

    schema = place.info().parameters
    assert schema["additionalProperties"] is False
    assert "additionalProperties" not in schema["$defs"]["Address"]  # pydantic's default: ignore
    assert schema["$defs"]["Strict"]["additionalProperties"] is False
    assert await place.run('{"address": {"city": "Oslo", "planet": "Earth"}}') == "Oslo"
    with pytest.raises(ToolArgumentsError) as info:
        await place.run('{"address": {"city": "Oslo"}, "strict": {"x": 1, "y": 2}}')
    assert info.value.field == "strict.y"
    assert "Extra inputs are not permitted" in str(info.value)


async def test_several_validation_errors_are_all_listed() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        await search.run('{"limit": "x"}')
    assert info.value.field == "query"
    assert str(info.value) == (
        "invalid arguments for tool 'search' field 'query': "
        "query: Field required; limit: Input should be a valid integer, unable to parse string as an integer"
    )


# ----------------------------------------------------------------------------------------------------------
# Streaming tools


async def test_streaming_tool_starts_in_the_call_and_yields_the_rest_lazily() -> None:
    log: list[str] = []

    @tool
    async def count(n: int) -> AsyncIterator[Any]:
        """Count up to n."""
        log.append("start")
        for i in range(n):
            log.append(f"yield {i}")
            yield str(i) if i % 2 == 0 else {"i": i}
        log.append("end")

    assert count.info().parameters["required"] == ["n"]
    reader = await count.stream('{"n": 3}')
    assert isinstance(reader, StreamReader)
    assert log == ["start", "yield 0"]  # up to the first chunk, inside the call
    assert [chunk async for chunk in reader] == ["0", '{"i":1}', "2"]
    assert log == ["start", "yield 0", "yield 1", "yield 2", "end"]


async def test_closing_a_streaming_tool_reader_closes_the_generator() -> None:
    log: list[str] = []

    @tool
    async def forever() -> AsyncIterator[str]:
        try:
            while True:
                yield "x"
        finally:
            log.append("closed")

    reader = await forever.stream("{}")
    assert await reader.recv() == "x"
    await reader.aclose()
    assert log == ["closed"]


async def test_streaming_tool_validates_before_returning_a_reader() -> None:
    @tool
    async def gen(n: int) -> AsyncIterator[str]:
        yield str(n)

    with pytest.raises(ToolArgumentsError, match="field 'n'"):
        await gen.stream('{"n": "x"}')
