"""Structured output: ``ChatModelAgent(..., output=OutputConfig(Invoice))`` answers with a validated ``Invoice``.

``OutputConfig.type`` is a pydantic model, a dataclass or a TypedDict; its JSON schema (pydantic's) is what the
model is asked for, in one of two ways (``OutputConfig.mode``):

* ``"native"`` (the default for models with ``supports_response_format = True``, such as ``OpenAIChatModel``):
  every model call carries ``response_format={"type": "json_schema", "json_schema": {name, schema, strict}}``;
  ``strict`` is true when the schema fits OpenAI's strict subset (every property required, no unsupported
  keyword), and the strict form closes every object (``additionalProperties: false``). The final answer's text
  is the JSON.
* ``"tool"`` (the default for the others): the model is offered a ``final_answer`` tool whose parameters are the
  schema; a valid call ends the run with the tool's result (the canonical JSON) as the answer, like a
  return-directly tool. A text answer that happens to be valid JSON of the schema is accepted too.

With ``mode="auto"`` a native agent falls back to the tool mode when the server refuses
``response_format`` (:class:`~compose.errors.ResponseFormatUnsupportedError`, e.g. llama.cpp's server, which takes
only ``text`` and ``json_object``): the refused call is made again at once without it, offering ``final_answer``
(forced with ``tool_choice="final_answer"`` when the agent has no other tools), and the agent stays in the tool
mode from then on. An explicit ``mode="native"`` fails with the error instead.

Every answer is validated with pydantic. An invalid one is answered with the validation errors (a user message,
or the ``final_answer`` call's tool result) and the model is asked again, at most ``OutputConfig.retries`` times; then
the run fails with :class:`~adk.errors.StructuredOutputError` carrying the last raw answer. The valid answer's
event carries the parsed object as ``event.output.structured``. Streaming runs stream the JSON text as usual;
it is parsed when the stream ends.

Example::

    class Weather(BaseModel):
        city: str
        celsius: float

    agent = ChatModelAgent("w", "weather", model=OpenAIChatModel("gpt-4o-mini"), output=OutputConfig(Weather))
    async for event in Runner(agent).query("Weather in Hangzhou?"):
        if event.output is not None and event.output.structured is not None:
            weather: Weather = event.output.structured
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

from adk.chat_model._context import current_react
from adk.errors import StructuredOutputError
from compose.errors import ResponseFormatUnsupportedError
from compose.models.base import ChatModel
from compose.schema import Message, ToolInfo, user_message
from compose.stream import StreamReader
from compose.tools.middleware import get_tool_call_id

__all__ = [
    "FINAL_ANSWER_TOOL_NAME",
    "FinalAnswerTool",
    "OutputMode",
    "OutputSchema",
    "ResponseFormatFallback",
    "StructuredOutputCheck",
    "strict_json_schema",
]

OutputMode = Literal["auto", "native", "tool"]
FINAL_ANSWER_TOOL_NAME = "final_answer"

# JSON-schema keywords outside OpenAI's strict structured-output subset
_NOT_STRICT = frozenset(
    {
        "default",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "if",
        "then",
        "else",
        "not",
        "dependentRequired",
        "dependentSchemas",
    }
)
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def strict_json_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``schema`` with every object closed (``additionalProperties: false``), and whether it fits OpenAI's strict
    mode: a root object, every property required, no open object, no keyword outside the strict subset."""
    strict_schema = copy.deepcopy(schema)
    ok = strict_schema.get("type") == "object"

    def walk(node: Any) -> None:
        nonlocal ok
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if _NOT_STRICT.intersection(node):
            ok = False
        if node.get("type") == "object" or "properties" in node:
            extra = node.setdefault("additionalProperties", False)
            if extra is not False:
                ok = False
            props = node.get("properties", {})
            if set(node.get("required", ())) != set(props):
                ok = False
            for sub in props.values():
                walk(sub)
        for key, value in node.items():
            if key in ("properties", "additionalProperties"):
                continue
            if isinstance(value, (dict, list)):
                walk(value)

    walk(strict_schema)
    return strict_schema, ok


def _check_output_type(output_type: Any) -> None:
    is_model = isinstance(output_type, type) and issubclass(output_type, BaseModel)
    is_dataclass = isinstance(output_type, type) and dataclasses.is_dataclass(output_type)
    if not (is_model or is_dataclass or is_typeddict(output_type)):
        raise TypeError(
            f"output_type must be a pydantic model, a dataclass or a TypedDict, got {output_type!r} (wrap other "
            "types in a model with one field)"
        )


class OutputSchema:
    """An ``output_type`` with its JSON schema, its ``response_format`` and its ``final_answer`` tool info.

    Raises:
        TypeError: ``output_type`` is not a pydantic model, dataclass or TypedDict.
    """

    def __init__(self, output_type: Any) -> None:
        _check_output_type(output_type)
        self.output_type = output_type
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            self.schema: dict[str, Any] = self.adapter.json_schema()
        except PydanticUserError as exc:  # e.g. typing.TypedDict before Python 3.12
            raise TypeError(f"output_type {output_type!r}: {exc.message}") from exc
        self.name = re.sub(r"[^a-zA-Z0-9_-]", "_", getattr(output_type, "__name__", "output"))[:64] or "output"
        self.description: str = self.schema.get("description") or f"The final answer, a {self.name} object."
        self.strict_schema, self.strict = strict_json_schema(self.schema)

    def __repr__(self) -> str:
        return f"OutputSchema({self.name}, strict={self.strict})"

    def response_format(self) -> dict[str, Any]:
        """The chat-completions ``response_format`` asking for this schema."""
        return {
            "type": "json_schema",
            "json_schema": {
                "name": self.name,
                "description": self.description,
                "schema": self.strict_schema if self.strict else self.schema,
                "strict": self.strict,
            },
        }

    def tool_info(self) -> ToolInfo:
        """The ``final_answer`` tool: its parameters are the schema."""
        return ToolInfo(
            name=FINAL_ANSWER_TOOL_NAME,
            description=f"Give the final answer with this tool (and only this tool): {self.description}",
            parameters=self.schema,
        )

    def parse(self, text: str) -> Any:
        """The answer ``text`` (JSON, optionally in a Markdown code fence) validated as the output type.

        Raises:
            ValidationError: the text is not JSON or does not match the type.
        """
        fenced = _FENCE.match(text)
        return self.adapter.validate_json(fenced.group(1) if fenced else text)

    def try_parse(self, text: str) -> Any:
        """:meth:`parse`, or None when the text is not valid."""
        try:
            return self.parse(text)
        except ValidationError:
            return None

    def dump(self, value: Any) -> str:
        """``value`` as canonical JSON text."""
        return self.adapter.dump_json(value).decode()


def describe_errors(exc: ValidationError) -> str:
    """One line per validation error: ``field.path: message``."""
    lines = []
    for err in exc.errors(include_url=False, include_context=False):
        where = ".".join(str(p) for p in err["loc"]) or "(answer)"
        lines.append(f"{where}: {err['msg']}")
    return "; ".join(lines)


class StructuredOutputCheck:
    """The graph's ``OutputCheck`` (``adk.chat_model.react``) and the ``final_answer`` tool's validation, sharing one
    count
    of invalid answers per run (``State.output_failures``).

    ``fallback``: the native mode may turn into the tool mode (``mode="auto"``; see the module docstring);
    ``mode`` is then changed once, for every later call of the agent.
    """

    def __init__(
        self, schema: OutputSchema, retries: int, mode: Literal["native", "tool"], *, fallback: bool = False
    ) -> None:
        if retries < 0:
            raise ValueError(f"output_retries must be 0 or more, got {retries}")
        self.schema = schema
        self.retries = retries
        self.mode = mode
        self.fallback = fallback and mode == "native"

    def __repr__(self) -> str:
        return f"StructuredOutputCheck({self.schema.name}, mode={self.mode!r}, retries={self.retries})"

    def _failed(self, st: Any, raw: str, error: str) -> None:
        st.output_failures += 1
        if st.output_failures > self.retries:
            raise StructuredOutputError(self.schema.name, raw, error, st.output_failures)

    async def check(self, message: Message, st: Any) -> Message | None:
        """A final answer without tool calls: None when valid (the run's structured answer is set), else the
        message asking again (raises once the retries are used up)."""
        text = message.content
        try:
            value = self.schema.parse(text)
        except ValidationError as exc:
            error = describe_errors(exc)
            self._failed(st, text, error)
            if self.mode == "tool":
                ask = (
                    f"Your answer is not a valid {self.schema.name} ({error}). Give the final answer by calling "
                    f"the `{FINAL_ANSWER_TOOL_NAME}` tool."
                )
            else:
                ask = (
                    f"Your answer does not match the required JSON schema of {self.schema.name}: {error}. Answer "
                    "again with only the corrected JSON object."
                )
            return user_message(ask)
        run = current_react.get()
        if run is not None:
            run.structured = ("", value)
        return None


class FinalAnswerTool:
    """The ``final_answer`` tool of the ``"tool"`` output mode: a valid call ends the run (it marks itself the
    run's return-directly call) with the canonical JSON as the answer; an invalid one answers with the errors."""

    def __init__(self, check: StructuredOutputCheck) -> None:
        self.check = check
        self._info = check.schema.tool_info()

    def info(self) -> ToolInfo:
        return self._info

    def __repr__(self) -> str:
        return f"FinalAnswerTool({self.check.schema.name})"

    async def run(self, arguments: str) -> str:
        run = current_react.get()
        st = run.state if run is not None else None
        if run is None or st is None:
            raise RuntimeError(f"the {FINAL_ANSWER_TOOL_NAME} tool runs only inside its agent's run")
        try:
            value = self.check.schema.parse(arguments)
        except ValidationError as exc:
            error = describe_errors(exc)
            self.check._failed(st, arguments, error)
            return (
                f"Invalid final answer: {error}. Call `{FINAL_ANSWER_TOOL_NAME}` again with arguments matching "
                "its schema."
            )
        call_id = get_tool_call_id() or ""
        run.structured = (call_id, value)
        st.has_return_directly = True
        st.return_directly_tool_call_id = call_id
        return self.check.schema.dump(value)


class ResponseFormatFallback:
    """The user's model under a ``mode="auto"`` agent whose model takes ``response_format``: in the
    native mode calls go through as they are; a call the server refuses for its ``response_format`` switches
    the agent to the tool mode and is made again at once, and every tool-mode call drops ``response_format``
    and is offered ``final_answer`` (forced when it is the only tool and the call names no ``tool_choice``).
    """

    def __init__(self, model: ChatModel, check: StructuredOutputCheck, tools: Sequence[ToolInfo] = ()) -> None:
        self.model = model
        self.check = check
        self.tools = tuple(tools)
        self._native = model.with_tools(self.tools) if self.tools else model
        final = check.schema.tool_info()
        self._with_final = model.with_tools(
            [*self.tools, final] if all(t.name != final.name for t in self.tools) else self.tools
        )
        self._forced = all(t.name == final.name for t in self.tools)

    def __repr__(self) -> str:
        return f"ResponseFormatFallback({self.model!r}, mode={self.check.mode!r})"

    def with_tools(self, tools: Sequence[ToolInfo]) -> ResponseFormatFallback:
        return ResponseFormatFallback(self.model, self.check, tools)

    def _tool_opts(self, opts: dict[str, Any]) -> dict[str, Any]:
        opts = {k: v for k, v in opts.items() if k != "response_format"}
        if self._forced and opts.get("tool_choice") is None:
            opts["tool_choice"] = FINAL_ANSWER_TOOL_NAME
        return opts

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        if self.check.mode == "native":
            try:
                return await self._native.generate(messages, **opts)
            except ResponseFormatUnsupportedError:
                self.check.mode = "tool"
        return await self._with_final.generate(messages, **self._tool_opts(opts))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        if self.check.mode == "native":
            try:
                return await self._native.stream(messages, **opts)
            except ResponseFormatUnsupportedError:
                self.check.mode = "tool"
        return await self._with_final.stream(messages, **self._tool_opts(opts))


def pick_mode(mode: OutputMode, model: Any) -> Literal["native", "tool"]:
    """The output mode to use with ``model``: ``"auto"`` is native when the model says it supports
    ``response_format`` (``supports_response_format = True``)."""
    if mode == "auto":
        return "native" if getattr(model, "supports_response_format", False) is True else "tool"
    if mode not in ("native", "tool"):
        raise ValueError(f"output_mode must be 'auto', 'native' or 'tool', got {mode!r}")
    return mode

