"""Tools: what a chat model can call, and ``@tool`` to build one from a typed Python function.

A tool describes itself with :meth:`BaseTool.info` (name, description, JSON schema of its parameters) and runs
through one or both of two protocols: :class:`InvokableTool` (``await run(arguments) -> str``) and
:class:`StreamableTool` (``await stream(arguments) -> StreamReader[str]``). ``arguments`` is the JSON object
the model wrote, as a string. A :class:`~compose.tools.node.ToolsNode` derives the missing paradigm of a tool
that implements only one (eino-semantics section 2).

Tools may declare two optional attributes read by the ToolsNode and by agents: ``parallel_safe`` (default
True: the tool may run at the same time as other tools) and ``timeout`` (seconds, default None). :func:`tool`
records both as attributes and in ``ToolInfo.extra``; :func:`tool_parallel_safe` and :func:`tool_timeout` read
them from any tool.

Example:
    >>> @tool
    ... async def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: the first number.
    ...         b: the second number.
    ...     '''
    ...     return a + b
    >>> add.info().parameters["required"]
    ['a']
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, cast, overload, runtime_checkable

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic_core import PydanticSerializationError, to_json

from compose.schema import ToolInfo
from compose.stream import StreamReader
from compose.tools.arguments import _unknown_arguments, parse_arguments

__all__ = [
    "BaseTool",
    "FunctionTool",
    "InvokableTool",
    "StreamableTool",
    "StreamingFunctionTool",
    "tool",
    "tool_parallel_safe",
    "tool_timeout",
]


@runtime_checkable
class BaseTool(Protocol):
    """Anything that can describe itself to a chat model."""

    def info(self) -> ToolInfo:
        """The tool's name, description and parameters schema."""
        ...


@runtime_checkable
class InvokableTool(BaseTool, Protocol):
    """A tool that answers with one string."""

    async def run(self, arguments: str) -> str:
        """Run the tool on ``arguments`` (a JSON object as a string) and return its result."""
        ...


@runtime_checkable
class StreamableTool(BaseTool, Protocol):
    """A tool that answers with a stream of strings (the result is their concatenation)."""

    async def stream(self, arguments: str) -> StreamReader[str]:
        """Start the tool on ``arguments``; the caller owns (and must close) the returned reader."""
        ...


def tool_parallel_safe(t: BaseTool) -> bool:
    """Whether ``t`` may run alongside other tools.

    Its ``parallel_safe`` attribute, else ``info().extra["parallel_safe"]``, else True.
    """
    value = getattr(t, "parallel_safe", None)
    if value is None:
        value = t.info().extra.get("parallel_safe", True)
    return bool(value)


def tool_timeout(t: BaseTool) -> float | None:
    """The time limit of ``t`` in seconds, or None.

    Its ``timeout`` attribute, else ``info().extra["timeout"]``, else None.
    """
    value = getattr(t, "timeout", None)
    if value is None:
        value = t.info().extra.get("timeout")
    return None if value is None else float(value)


# ----------------------------------------------------------------------------------------------------------
# @tool


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what the OpenAI API (and most others) accept
_TOOL_NAME_RULE = "letters, digits, '_' and '-', at most 64"
_EXTRA_ARGUMENTS = ("forbid", "ignore")
_INTERNAL_KEY = re.compile(r'"p\d+"\s*:')


def _valid_tool_name(name: str) -> bool:
    return _TOOL_NAME.fullmatch(name) is not None


class _FunctionToolBase:
    """What the two function tools share: the schema, argument validation and the declared attributes."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        parallel_safe: bool,
        timeout: float | None,
        namespace: Mapping[str, Any] | None,
        extra_arguments: Literal["forbid", "ignore"] = "forbid",
    ) -> None:
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _valid_tool_name(self.name):
            raise ValueError(
                f"tool name {self.name!r} is not a valid tool name ({_TOOL_NAME_RULE}): pass tool(fn, name=...)"
            )
        if extra_arguments not in _EXTRA_ARGUMENTS:
            raise ValueError(f"tool {self.name}: extra_arguments must be 'forbid' or 'ignore', got {extra_arguments!r}")
        self.extra_arguments: Literal["forbid", "ignore"] = extra_arguments
        summary, param_docs = _parse_docstring(fn.__doc__ or "")
        self.description = summary if description is None else description
        self.parallel_safe = parallel_safe
        self.timeout = timeout
        self._fn = fn
        self._model, self._binding = _arguments_model(fn, self.name, param_docs, namespace, extra_arguments)
        extra: dict[str, Any] = {"parallel_safe": parallel_safe}
        if timeout is not None:
            extra["timeout"] = timeout
        self._info = ToolInfo(
            name=self.name,
            description=self.description,
            parameters=_clean_schema(self._model.model_json_schema()),
            extra=extra,
        )
        functools.update_wrapper(self, fn)

    def info(self) -> ToolInfo:
        """The tool's name, description, JSON schema of its parameters, and ``extra`` declarations."""
        return self._info

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (no validation, no JSON)."""
        return self._fn(*args, **kwargs)

    def parse_arguments(self, arguments: str) -> tuple[list[Any], dict[str, Any]]:
        """Validate ``arguments`` (a JSON object as a string) and return the positional and keyword arguments.

        An empty string counts as ``{}`` (models often send it for tools without parameters). A field the
        schema does not have is an error, or is dropped with ``extra_arguments="ignore"``.

        Raises:
            ToolArgumentsError: the arguments are not a JSON object or fail validation (an unknown field
                included); names the first field.
        """
        validated = parse_arguments(self.name, arguments, self._model)
        if self.extra_arguments == "forbid" and _INTERNAL_KEY.search(arguments):
            self._refuse_internal_names(arguments)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field, param, positional in self._binding:
            value = getattr(validated, field)
            if positional:
                args.append(value)
            else:
                kwargs[param] = value
        return args, kwargs

    def _refuse_internal_names(self, arguments: str) -> None:
        # pydantic (2.13) ignores a key that is a field's own name when the field has an alias, even with
        # extra="forbid": the neutral names (p0, p1...) must not be a way in, so they are refused here
        # (the cheap regex above keeps this off the common path)
        params = [param for _, param, _ in self._binding]
        keys = json.loads(arguments)
        unknown = [key for key in self._model.model_fields if key in keys and key not in params]
        if unknown:
            raise _unknown_arguments(self.name, unknown, params)

    def __repr__(self) -> str:
        timeout = "" if self.timeout is None else f", timeout={self.timeout}"
        extra = "" if self.extra_arguments == "forbid" else f", extra_arguments={self.extra_arguments!r}"
        return f"{type(self).__name__}(name={self.name!r}, parallel_safe={self.parallel_safe}{timeout}{extra})"


class FunctionTool(_FunctionToolBase):
    """An invokable tool built by :func:`tool` from a sync or async function.

    ``namespace`` resolves string annotations that name local classes (``tool`` passes its caller's locals).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parallel_safe: bool = True,
        timeout: float | None = None,
        run_in_thread: bool = False,
        namespace: Mapping[str, Any] | None = None,
        extra_arguments: Literal["forbid", "ignore"] = "forbid",
    ) -> None:
        super().__init__(
            fn,
            name=name,
            description=description,
            parallel_safe=parallel_safe,
            timeout=timeout,
            namespace=namespace,
            extra_arguments=extra_arguments,
        )
        self.run_in_thread = run_in_thread
        self._is_async = inspect.iscoroutinefunction(fn)

    async def run(self, arguments: str) -> str:
        """Validate ``arguments``, call the function and return its result (JSON unless it is a string)."""
        args, kwargs = self.parse_arguments(arguments)
        if self._is_async:
            result = await self._fn(*args, **kwargs)
        elif self.run_in_thread:
            result = await anyio.to_thread.run_sync(functools.partial(self._fn, *args, **kwargs))
        else:
            result = self._fn(*args, **kwargs)
        return _to_text(result)


class StreamingFunctionTool(_FunctionToolBase):
    """A streamable tool built by :func:`tool` from an async generator function; each item is one chunk."""

    async def stream(self, arguments: str) -> StreamReader[str]:
        """Validate ``arguments``, run the generator to its first item, and return a reader of its items (JSON
        unless strings).

        What the generator does before its first ``yield`` belongs to this call, as the body of an Eino
        streamable tool runs before it returns its reader: an exception (or an interrupt) raised there is
        raised here, and :func:`~compose.tools.node.get_tool_call_id` or ``send_tool_gen_action`` see this call.
        After the first item the generator runs as the reader is read, in the reader's task; closing the reader
        closes it.
        """
        args, kwargs = self.parse_arguments(arguments)
        return await StreamReader.from_started(_texts(self._fn(*args, **kwargs)))


_AnyTool = FunctionTool | StreamingFunctionTool


class _ToolDecorator(Protocol):
    """What ``tool(name=...)`` returns: a decorator typed like ``tool`` itself."""

    @overload
    def __call__(self, fn: Callable[..., AsyncIterator[Any]], /) -> StreamingFunctionTool: ...

    @overload
    def __call__(self, fn: Callable[..., Any], /) -> FunctionTool: ...

    def __call__(self, fn: Callable[..., Any], /) -> _AnyTool: ...


@overload
def tool(
    fn: Callable[..., AsyncIterator[Any]],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = True,
    timeout: float | None = None,
    extra_arguments: Literal["forbid", "ignore"] = "forbid",
) -> StreamingFunctionTool: ...


@overload
def tool(
    fn: Callable[..., Awaitable[Any]] | Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = True,
    timeout: float | None = None,
    run_in_thread: bool = False,
    extra_arguments: Literal["forbid", "ignore"] = "forbid",
) -> FunctionTool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = True,
    timeout: float | None = None,
    run_in_thread: bool = False,
    extra_arguments: Literal["forbid", "ignore"] = "forbid",
) -> _ToolDecorator: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = True,
    timeout: float | None = None,
    run_in_thread: bool = False,
    extra_arguments: Literal["forbid", "ignore"] = "forbid",
) -> _AnyTool | _ToolDecorator:
    """Build a tool from a typed function: ``@tool``, ``@tool(name=...)`` or ``tool(fn, name=...)``.

    The parameters' JSON schema comes from the signature through pydantic: defaults, optional fields, nested
    pydantic models, enums and ``Literal``s, ``Annotated[..., Field(...)]``; parameter descriptions come from
    the ``Args:`` section of a Google-style docstring, the tool description from the text before the first
    section.

    An ``async def`` or plain function makes an invokable tool (a plain function runs in the event loop's
    thread, or in a worker thread with ``run_in_thread=True``); an async generator function makes a streaming
    tool whose chunks are its items. Results and chunks that are not strings are serialised to JSON.

    The schema says ``"additionalProperties": false`` and a call with an argument the function does not take
    fails with :class:`~compose.errors.ToolArgumentsError` naming it; ``extra_arguments="ignore"`` drops such
    arguments instead (and leaves ``additionalProperties`` out of the schema). This applies to the parameters
    object only: a pydantic model (or dataclass, TypedDict) among the parameters keeps its own ``extra``
    configuration for its schema and its validation, pydantic's default being to ignore unknown fields. For
    OpenAI's strict mode, which wants ``additionalProperties: false`` on every object, give such models
    ``model_config = ConfigDict(extra="forbid")``.

    Args:
        fn: the function (omit it to get a decorator).
        name: the tool name; defaults to the function's name.
        description: the tool description; defaults to the docstring's text before its first section.
        parallel_safe: whether the tool may run at the same time as other tools (recorded, for agents).
        timeout: seconds the ToolsNode lets one call run (its stream included) before failing it.
        run_in_thread: run a plain (sync) function in a worker thread.
        extra_arguments: ``"forbid"`` (default) fails a call with an argument the function does not take;
            ``"ignore"`` drops it.

    Returns:
        A :class:`FunctionTool` or :class:`StreamingFunctionTool`, still callable like ``fn`` itself.

    Raises:
        TypeError: the signature cannot be described (``*args``/``**kwargs``, a type pydantic cannot handle).
        ValueError: the name is not a valid tool name (letters, digits, ``_`` and ``-``, at most 64), or
            ``extra_arguments`` is neither ``"forbid"`` nor ``"ignore"``.

    Example:
        >>> @tool(name="weather", timeout=5)
        ... async def get_weather(city: str) -> dict[str, str]:
        ...     '''Tell the weather in a city.'''
        ...     return {"city": city, "sky": "clear"}
        >>> get_weather.info().extra
        {'parallel_safe': True, 'timeout': 5}
    """

    def build(f: Callable[..., Any], namespace: Mapping[str, Any]) -> _AnyTool:
        if not callable(f):
            raise TypeError(f"tool() needs a function, got {type(f).__qualname__}")
        options: dict[str, Any] = {
            "name": name,
            "description": description,
            "parallel_safe": parallel_safe,
            "timeout": timeout,
            "namespace": namespace,
            "extra_arguments": extra_arguments,
        }
        if inspect.isasyncgenfunction(f):
            if run_in_thread:
                raise TypeError(f"tool {name or f.__name__}: run_in_thread applies to plain functions only")
            return StreamingFunctionTool(f, **options)
        return FunctionTool(f, run_in_thread=run_in_thread, **options)

    # The caller's locals resolve postponed annotations naming classes local to the caller.
    if fn is None:
        return cast(_ToolDecorator, lambda f: build(f, sys._getframe(1).f_locals))
    return build(fn, sys._getframe(1).f_locals)


# ----------------------------------------------------------------------------------------------------------
# Helpers: signature -> pydantic model -> JSON schema; docstrings; results


def _arguments_model(
    fn: Callable[..., Any],
    tool_name: str,
    param_docs: dict[str, str],
    namespace: Mapping[str, Any] | None,
    extra: Literal["forbid", "ignore"],
) -> tuple[type[BaseModel], list[tuple[str, str, bool]]]:
    """The pydantic model of ``fn``'s parameters, and how to bind its fields back: (field, parameter,
    positional).

    Fields get neutral names (``p0``, ``p1``...) with the parameter name as alias, so a parameter may be
    called ``json`` or ``schema`` without shadowing a ``BaseModel`` attribute. ``extra`` applies to this
    model only (``"forbid"`` also writes ``"additionalProperties": false`` in its schema); models nested in the
    parameters keep their own configuration.
    """
    try:
        signature = inspect.signature(fn, eval_str=True, locals=namespace)
    except (NameError, TypeError) as exc:
        raise TypeError(f"tool {tool_name}: cannot read the signature: {exc}") from exc
    fields: dict[str, Any] = {}
    binding: list[tuple[str, str, bool]] = []
    for i, (pname, param) in enumerate(signature.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name}: *args and **kwargs cannot be described to a model ({pname})")
        annotation = Any if param.annotation is param.empty else param.annotation
        options: dict[str, Any] = {"alias": pname}
        if pname in param_docs:
            options["description"] = param_docs[pname]
        default = ... if param.default is param.empty else param.default
        field = f"p{i}"
        fields[field] = (annotation, Field(default, **options))
        binding.append((field, pname, param.kind is not param.KEYWORD_ONLY))
    model_name = "".join(part.capitalize() for part in re.split(r"\W+|_", tool_name) if part) or "Tool"
    try:
        model = create_model(f"{model_name}Arguments", __config__=ConfigDict(extra=extra), **fields)
        model.model_json_schema()
    except Exception as exc:  # pydantic raises several types for an unsupported annotation
        raise TypeError(f"tool {tool_name}: cannot build the parameters schema: {exc}") from exc
    return model, binding


def _clean_schema(node: Any, *, in_mapping: bool = False) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for a model), keeping property and definition names."""
    if isinstance(node, dict):
        if in_mapping:
            return {key: _clean_schema(value) for key, value in node.items()}
        return {
            key: _clean_schema(value, in_mapping=key in ("properties", "$defs"))
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_clean_schema(item) for item in node]
    return node


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|Attributes|Warnings?|"
    r"See Also|Todo|References):\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description (text before any section) and ``Args:`` entries."""
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        if line[:1] not in (" ", "\t") and (match := _SECTION.match(stripped)):
            section, entry_indent, current = match.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params") or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            arg = _ARG_LINE.match(stripped)
            current = None
            if arg:
                current = arg.group(1)
                params[current] = arg.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(summary).strip(), params


def _to_text(value: Any, what: str = "the result") -> str:
    if isinstance(value, str):
        return value
    try:
        return to_json(value).decode()
    except PydanticSerializationError as exc:  # the one boundary where pydantic's error becomes a TypeError
        raise TypeError(
            f"{what} of type {type(value).__qualname__} cannot be serialised to JSON ({exc}): "
            f"{'return' if what == 'the result' else 'yield'} a str or a JSON-serialisable value"
        ) from exc


async def _texts(items: AsyncIterator[Any]) -> AsyncGenerator[str, None]:
    """The items of a streaming tool's generator as strings; closing this closes the generator."""
    try:
        async for item in items:
            yield _to_text(item, "a chunk")
    finally:
        if isinstance(items, AsyncGenerator):
            await items.aclose()
