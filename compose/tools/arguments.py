"""A tool call's arguments: :func:`parse_arguments` reads them for any tool, with one error shape
(:class:`~compose.errors.ToolArgumentsError` naming the tool and the field); :class:`SchemaTool` is a tool made of
a hand-written schema and a function of the parsed arguments.
"""

from __future__ import annotations

import reprlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from compose.errors import ToolArgumentsError
from compose.schema import ToolInfo

__all__ = ["SchemaTool", "parse_arguments"]

M = TypeVar("M", bound=BaseModel)
Run = Callable[[dict[str, Any]], Awaitable[str]]
NOT_JSON = "arguments are not valid JSON"
_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


@overload
def parse_arguments(tool_name: str, arguments: str, schema: type[M], *, not_json: str = ...) -> M: ...
@overload
def parse_arguments(
    tool_name: str,
    arguments: str,
    schema: Mapping[str, Any] | None = ...,
    *,
    required: Sequence[str] = ...,
    not_json: str = ...,
) -> dict[str, Any]: ...
def parse_arguments(
    tool_name: str,
    arguments: str,
    schema: type[BaseModel] | Mapping[str, Any] | None = None,
    *,
    required: Sequence[str] = (),
    not_json: str = NOT_JSON,
) -> BaseModel | dict[str, Any]:
    """Read ``arguments``, the JSON object a model wrote for ``tool_name`` (``""`` counts as ``{}``).

    A pydantic model class as ``schema`` validates them and is returned (``@tool`` builds one from a signature).
    Otherwise the object is returned as a dict: an argument whose property in the JSON ``schema`` has a ``type``
    must have that JSON type or be null, as Go's ``encoding/json`` fills a struct (nested values and unknown
    arguments are the tool's to judge; an MCP tool checks the whole schema), and each name in ``required`` must be
    given, not null (a schema's own ``required`` often names more than a call needs, as Eino's file tools do).
    ``not_json`` starts the message for a text that is not JSON (some tools keep Eino's words).

    Raises:
        ToolArgumentsError: not JSON, not an object, an argument of the wrong type or missing; names the field.
    """
    text = arguments if arguments.strip() else "{}"
    if isinstance(schema, type):
        try:
            return schema.model_validate_json(text)
        except ValidationError as exc:
            fields = [field.alias or name for name, field in schema.model_fields.items()]
            raise _arguments_error(tool_name, exc, fields, not_json) from exc
    try:
        value = from_json(text)
    except ValueError as exc:
        raise ToolArgumentsError(tool_name, f"{not_json}: {exc}") from exc
    if not isinstance(value, dict):
        raise ToolArgumentsError(tool_name, f"arguments must be a JSON object, got {type(value).__name__}")
    props: Mapping[str, Any] = (schema.get("properties") or {}) if schema is not None else {}
    for key, item in value.items():
        want = props[key].get("type") if isinstance(props.get(key), Mapping) else None
        kind: Any = _TYPES.get(want) if isinstance(want, str) else None
        ok = item is None or kind is None or (isinstance(item, kind) and isinstance(item, bool) == (want == "boolean"))
        if not ok:
            raise ToolArgumentsError(tool_name, f"{reprlib.repr(item)} is not of type '{want}'", field=key)
    for key in required:
        if value.get(key) is None:
            unknown = sorted(set(value) - set(props))
            hint = f" (unknown arguments: {', '.join(unknown)})" if unknown else ""
            raise ToolArgumentsError(tool_name, f"is required{hint}", field=key)
    return value


class SchemaTool:
    """An invokable tool made of its :class:`~compose.schema.ToolInfo` (sent as it is) and ``async run(args:
    dict) -> str``, which gets the arguments :func:`parse_arguments` read against ``info.parameters``."""

    def __init__(self, info: ToolInfo, run: Run, *, required: Sequence[str] = (), not_json: str = NOT_JSON) -> None:
        self._info, self._run, self._required, self._not_json = info, run, tuple(required), not_json

    def info(self) -> ToolInfo:
        return self._info

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._info.name!r})"

    async def run(self, arguments: str) -> str:
        """Parse ``arguments`` and run the function on them."""
        info = self._info
        args = parse_arguments(info.name, arguments, info.parameters, required=self._required, not_json=self._not_json)
        return await self._run(args)


def _unknown_arguments(tool_name: str, unknown: Sequence[str], params: Sequence[str]) -> ToolArgumentsError:
    """The error of a call giving ``unknown`` arguments to a tool that takes ``params``."""
    takes = f"which takes {', '.join(params)}" if params else "which takes no arguments"
    if len(unknown) == 1:
        return ToolArgumentsError(tool_name, f"not a parameter of the tool, {takes}", field=unknown[0])
    names = ", ".join(repr(k) for k in unknown)
    return ToolArgumentsError(tool_name, f"{names} are not parameters of the tool, {takes}", field=unknown[0])


def _arguments_error(
    tool_name: str, exc: ValidationError, params: Sequence[str], not_json: str = NOT_JSON
) -> ToolArgumentsError:
    # the errors of the fields the tool takes come before unknown keys (pydantic's own order varies by version)
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] == "extra_forbidden")
    first = errors[0]
    if all(e["type"] == "extra_forbidden" and len(e["loc"]) == 1 for e in errors):
        return _unknown_arguments(tool_name, [str(e["loc"][0]) for e in errors], params)
    if first["type"] == "json_invalid":
        return ToolArgumentsError(tool_name, f"{not_json}: {first['msg'].removeprefix('Invalid JSON: ')}")
    if not first["loc"]:
        return ToolArgumentsError(tool_name, f"arguments must be a JSON object: {first['msg']}")
    field = ".".join(str(part) for part in first["loc"])
    if len(errors) == 1:
        return ToolArgumentsError(tool_name, first["msg"], field=field)
    details = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in errors)
    return ToolArgumentsError(tool_name, details, field=field)
