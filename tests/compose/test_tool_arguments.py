"""parse_arguments and SchemaTool: one reading of a call's arguments, one error shape."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from compose.errors import ToolArgumentsError
from compose.schema import ToolInfo
from compose.tools import SchemaTool, parse_arguments

pytestmark = pytest.mark.anyio
SCHEMA = {"properties": {"path": {"type": "string"}, "n": {"type": "integer"}, "all": {"type": "boolean"}}}


@pytest.mark.parametrize(
    ("arguments", "field", "msg"),
    [
        ("{", None, "failed to unmarshal: EOF while parsing an object at line 1 column 1"),
        ("[1]", None, "arguments must be a JSON object, got list"),
        ('{"path": 3}', "path", "3 is not of type 'string'"),
        ('{"path": "p", "n": true}', "n", "True is not of type 'integer'"),
        ('{"path": "p", "all": 0}', "all", "0 is not of type 'boolean'"),
        ('{"n": 1, "pth": "p"}', "path", "is required (unknown arguments: pth)"),
        ('{"path": null}', "path", "is required"),
    ],
)
def test_a_schema_checks_top_level_types_and_the_required_names(arguments: str, field: str | None, msg: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        parse_arguments("t", arguments, SCHEMA, required=["path"], not_json="failed to unmarshal")
    assert str(info.value) == f"invalid arguments for tool 't'{f' field {field!r}' if field else ''}: {msg}"
    assert (info.value.tool_name, info.value.field) == ("t", field)


async def test_a_schema_tool_runs_on_the_parsed_arguments_and_a_model_validates() -> None:
    async def run(args: dict[str, Any]) -> str:
        return repr(args)

    t = SchemaTool(ToolInfo(name="t", description="d", parameters=SCHEMA), run, required=["path"])
    assert await t.run('{"path": "a", "n": null, "x": [1]}') == "{'path': 'a', 'n': None, 'x': [1]}"
    assert (repr(t), t.info().parameters, parse_arguments("t", " ")) == ("SchemaTool('t')", SCHEMA, {})
    with pytest.raises(ToolArgumentsError, match="field 'path': is required"):
        await t.run("")

    class Point(BaseModel):
        x: int

    assert parse_arguments("p", '{"x": 1}', Point) == Point(x=1)
    with pytest.raises(ToolArgumentsError, match=r"^invalid arguments for tool 'p': not JSON: EOF"):
        parse_arguments("p", "{", Point, not_json="not JSON")
