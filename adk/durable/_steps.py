"""Model calls, tool calls and marked lambdas as DBOS steps.

Inside a DBOS workflow, :class:`DurableChatModel` runs each ``generate``/``stream`` call as one step and
:class:`DurableTool` each tool call; a replay (after a crash, on any worker) takes a finished step's result from
the system database instead of calling the model or the tool again. Outside a workflow both are the plain
model and tool. The graph engine itself runs in the workflow and is deterministic given the steps' results.

Step names say what a step is, so that a replay finds each finished call's result by name whatever order the
run's concurrent tasks reach their steps in (``adk.durable._ledger``): ``<scope><prefix>model.generate``,
``<scope><prefix>model.stream`` and ``<scope><prefix>tool.<tool name>[<call id>]``, where the scope is empty at
the top and names the agent tool call a nested agent runs in (``boss.tool.researcher[c1]/researcher.model.
generate``); in a graph run the name ends with the address of the node the step runs in
(``g.model.generate@runnable:G;node:summarize``), so one ``DurableChatModel`` serves parallel nodes. DBOS checks
a replayed step's name against the recorded one, so a replay that diverges fails with DBOS's error instead of
taking another call's result.

Step ids. Right after a model step answers with tool calls, the model wrapper reserves one step id per call
in call order (``DBOS.reserve_step``); a call that is not recorded yet runs at its reserved id, whatever order
the calls reach their tools in (middlewares, approval checks). A reserved id left unused (a call answered by
the unknown-tools handler, rejected at approval, or found recorded on a replay) is a gap DBOS allows.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

from dbos import DBOS

from adk.durable._ledger import current_ledger
from compose.errors import GraphInterrupt
from compose.interrupt import current_address
from compose.models.base import ChatModel
from compose.schema import Message, ToolInfo, concat_messages
from compose.stream import StreamReader
from compose.tools.base import BaseTool, InvokableTool, StreamableTool, tool_parallel_safe, tool_timeout
from compose.tools.middleware import get_tool_call_id

__all__ = ["DurableChatModel", "DurableTool", "ScopedAgentTool", "durable_step"]

R = TypeVar("R")
P = ParamSpec("P")

_PAUSED = "pyeino.paused"

TokenSink = Callable[[Message], Awaitable[None]]

# Per workflow execution: where a streaming model step sends its chunks as they arrive (the run's event stream).
token_sink: ContextVar[TokenSink | None] = ContextVar("pyeino_durable_token_sink", default=None)
# What the steps started here run inside: "" at the top, "<agent>.tool.<name>[<call id>]/" in an agent tool's
# agent (nested ones accumulate), so that concurrent calls of one agent tool have steps of their own names.
step_scope: ContextVar[str] = ContextVar("pyeino_durable_scope", default="")


def in_workflow() -> bool:
    """Whether the caller is DBOS workflow code (in a workflow, outside any step)."""
    return DBOS.workflow_id is not None and DBOS.step_id is None


def _step_options(name: str) -> Any:
    # pyeino retries model calls itself (ModelRetryConfig); a DBOS retry would hide attempts from it
    return {"name": name, "retries_allowed": False}


async def run_step(name: str, fn: Callable[..., Any], *args: Any, call_id: str | None = None) -> Any:
    """``fn(*args)`` as the DBOS step ``name`` (in scope): through the run's ledger in a ``DurableApp`` run (a
    tool call at the id reserved for ``call_id`` when it is new), else DBOS's next step id (a workflow of the
    user's own: its order is the user's to keep deterministic)."""
    scope = step_scope.get()
    address = current_address()  # a graph run's: the node the step runs in
    name = scope + name + (f"@{address}" if address else "")
    ledger = current_ledger.get()
    if ledger is not None:
        return await ledger.step(name, fn, *args, reserved=scope + call_id if call_id is not None else "")
    return await DBOS.run_step_async(_step_options(name), fn, *args)


def _reserve_tool_steps(answer: Message) -> None:
    """Step ids for the answer's tool calls, in call order, so that calls running in parallel take ids in
    call order whatever order they reach their tools in (a replay finds them by name anyway)."""
    ledger = current_ledger.get()
    if ledger is not None and answer.tool_calls:
        scope = step_scope.get()
        ledger.reserve(scope + call.id for call in answer.tool_calls)


class DurableChatModel:
    """A chat model whose calls are DBOS steps inside a workflow (the plain model outside one).

    ``stream`` runs the whole model stream inside the step: each chunk goes to the run's event stream as it
    arrives (readers in other processes see the tokens live), and the step records the concatenated answer,
    which the caller receives as a one-chunk stream (also on replay).

    Args:
        model: the chat model.
        prefix: put before the step names (``"<prefix>model.generate"``), e.g. the agent's name and a dot.
    """

    def __init__(self, model: ChatModel, *, prefix: str = "") -> None:
        self.model = model
        self.prefix = prefix

    def __repr__(self) -> str:
        return f"DurableChatModel({self.model!r}, prefix={self.prefix!r})"

    def with_tools(self, tools: Sequence[ToolInfo]) -> DurableChatModel:
        return DurableChatModel(self.model.with_tools(tools), prefix=self.prefix)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        if not in_workflow():
            return await self.model.generate(messages, **opts)
        answer = cast(Message, await run_step(f"{self.prefix}model.generate", self._generate, list(messages), opts))
        _reserve_tool_steps(answer)
        return answer

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        if not in_workflow():
            return await self.model.stream(messages, **opts)
        answer = await run_step(f"{self.prefix}model.stream", self._stream_whole, list(messages), opts)
        _reserve_tool_steps(answer)
        return StreamReader.from_iterable([answer])

    async def _generate(self, messages: list[Message], opts: dict[str, Any]) -> Message:
        return await self.model.generate(messages, **opts)

    async def _stream_whole(self, messages: list[Message], opts: dict[str, Any]) -> Message:
        reader = await self.model.stream(messages, **opts)
        sink = token_sink.get()
        chunks: list[Message] = []
        try:
            async for chunk in reader:
                chunks.append(chunk)
                if sink is not None:
                    await sink(chunk)
        finally:
            await reader.aclose()
        return concat_messages(chunks)


class _StepsTool:
    """What the tool wrappers of a durable run share: the wrapped tool's info, ``parallel_safe`` and ``timeout``,
    and the name of a call's step (or step scope), ``"<prefix>tool.<name>[<call id>]"``."""

    def __init__(self, tool: BaseTool, prefix: str) -> None:
        self.tool = tool
        self.prefix = prefix
        self.name = tool.info().name
        self.parallel_safe = tool_parallel_safe(tool)
        self.timeout = tool_timeout(tool)

    def info(self) -> ToolInfo:
        return self.tool.info()

    def _step_name(self, call_id: str) -> str:
        return f"{self.prefix}tool.{self.name}[{call_id}]"


class DurableTool(_StepsTool):
    """A tool whose calls are DBOS steps inside a workflow (the plain tool outside one).

    A call that pauses (the tool raised ``interrupt(...)``) is recorded as a pause, not as a failure; a replay
    calls the tool again, outside the step, to raise the same interrupt (code before an interrupt runs again on
    a replay, as it does on any resume). The step runs the tool with the call id available through
    ``get_tool_call_id()``: a call that was running
    when its worker died runs again on the worker that takes the run over (its step had not finished), so a tool
    with side effects uses the call id to make them idempotent. A streamable tool's stream is read inside the
    step; the call's result is the whole text. The tool's ``parallel_safe`` and ``timeout`` carry over.

    Args:
        tool: the tool (invokable and/or streamable).
        prefix: put before the step names (``"<prefix>tool.<name>[<call id>]"``).
    """

    tool: InvokableTool | StreamableTool

    def __init__(self, tool: BaseTool, *, prefix: str = "") -> None:
        if not isinstance(tool, (InvokableTool, StreamableTool)):
            raise TypeError(f"DurableTool needs an invokable or streamable tool, got {type(tool).__qualname__}")
        super().__init__(tool, prefix)

    def __repr__(self) -> str:
        return f"DurableTool({self.name!r}, prefix={self.prefix!r})"

    async def run(self, arguments: str) -> str:
        if not in_workflow():
            return await self._call(arguments)
        call_id = get_tool_call_id() or ""
        paused: list[GraphInterrupt] = []

        async def step(arguments: str) -> Any:
            try:
                return await self._call(arguments)
            except GraphInterrupt as exc:  # not a failure: recorded as a pause, never as an error
                paused.append(exc)
                return {_PAUSED: True}

        out = await run_step(self._step_name(call_id), step, arguments, call_id=call_id)
        if isinstance(out, dict):
            if paused:
                raise paused[0]
            # a replay of a call that paused: the tool runs again, outside any step, to raise its interrupt
            # again (as a resumed run re-runs an interrupted call anyway)
            return await self._call(arguments)
        return cast(str, out)

    async def _call(self, arguments: str) -> str:
        if isinstance(self.tool, InvokableTool):
            return await self.tool.run(arguments)
        reader = await self.tool.stream(arguments)
        parts: list[str] = []
        try:
            async for part in reader:
                parts.append(part)
        finally:
            await reader.aclose()
        return "".join(parts)


class ScopedAgentTool(_StepsTool):
    """An agent tool in a durable run: no step itself (the model and tool calls of its agent are), but the
    steps of its agent are named in this call's scope (``<prefix>tool.<name>[<call id>]/``), so that two calls
    of one agent tool running at the same time have steps of their own names."""

    tool: InvokableTool

    def __init__(self, tool: InvokableTool, *, prefix: str = "") -> None:
        super().__init__(tool, prefix)

    def __repr__(self) -> str:
        return f"ScopedAgentTool({self.tool!r}, prefix={self.prefix!r})"

    async def run(self, arguments: str) -> str:
        call_id = get_tool_call_id() or ""
        token = step_scope.set(f"{step_scope.get()}{self._step_name(call_id)}/")
        try:
            return await self.tool.run(arguments)
        finally:
            step_scope.reset(token)


class StepMarker(Protocol):
    """What ``durable_step(name=...)`` returns: it marks a function."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> Callable[P, Awaitable[R]]: ...


@overload
def durable_step(fn: Callable[P, Awaitable[R]], *, name: str | None = None) -> Callable[P, Awaitable[R]]: ...
@overload
def durable_step(fn: Callable[P, R], *, name: str | None = None) -> Callable[P, Awaitable[R]]: ...
@overload
def durable_step(fn: None = None, *, name: str | None = None) -> StepMarker: ...
def durable_step(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Mark a function (a lambda node's, a hook) as a DBOS step: inside a workflow each call is one step named
    ``name`` (default: the function's qualified name) whose result, JSON, is recorded; outside it is the
    function. Unmarked lambdas run as workflow code, again on a replay, and must be deterministic. The marked
function is async (a plain function's result is awaited).

    Example::

        @durable_step(name="fetch_profile")
        async def fetch_profile(user_id: str) -> dict[str, str]:
            ...
        graph.add_lambda_node("profile", fetch_profile)
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        step_name = name or f.__qualname__

        @functools.wraps(f)
        async def step(*args: Any, **kwargs: Any) -> Any:
            if not in_workflow():
                out = f(*args, **kwargs)
                return await out if inspect.isawaitable(out) else out
            return await run_step(step_name, functools.partial(f, **kwargs), *args)

        return step

    return mark(fn) if fn is not None else mark
