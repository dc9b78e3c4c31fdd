"""The ChatModelAgent middleware interface (Eino's ``ChatModelAgentMiddleware``, ``adk/handler.go``; eino-semantics
4.9), named :class:`AgentMiddleware` here.

A middleware subclasses :class:`AgentMiddleware` and overrides the hooks it needs; the others are no-ops the
agent skips (it looks at which methods a class overrides, so an agent without middlewares, or with middlewares
that only wrap tools, runs the same graph as before). ``ChatModelAgent(middlewares=[A, B, C])``: the first wraps
the others, ``A(B(C(x)))``:

* ``before_agent(context)``: once per run, before anything else, in list order; may change the run's
  instruction, tools and return-directly set (:class:`ChatModelAgentContext`). A resumed run calls it again to rebuild
  its tools (the conversation it already has is kept).
* ``before_model_rewrite_state(state)``: before each model call, in list order; sees the conversation and the
  tool infos the model will be offered (:class:`ChatModelAgentState`) and returns the state to use: what it
  returns is kept in the run's graph state (and checkpoints), so later calls see it too.
* ``after_model_rewrite_state(state)``: after each model call, in list order; the answer is the last message,
  and the last message of what it returns is what flows on (rewriting the answer, or adding or dropping tool
  calls, changes the run).
* ``wrap_model(model)``: called once when the agent builds its graph; ``A.wrap_model(B.wrap_model(C.wrap_model(
  m)))`` sits inside the agent's retry and event emitter, so events show what the wrappers return. Tools are
  bound below the wrappers: read or change them in ``before_model_rewrite_state``.
* ``wrap_invokable_tool_call(next)`` / ``wrap_streamable_tool_call(next)``: endpoint wrappers on the ToolsNode's
  one middleware chain (``compose.tools.node.ToolMiddleware``), inside the agent's tool-result collector and the
  ``ToolsConfig`` middlewares; the endpoint's :class:`~compose.tools.node.ToolInput` names the tool and call.
* ``after_agent(state)``: after a successful run (a final answer or a return-directly tool's result), in list
  order, with the final conversation; never after a failed, paused or cancelled run. A failure here fails the
  run.

Hooks run inside the run's graph (:func:`send_event` reaches its event stream; do not call ``process_state``
for the ReAct ``State`` from a rewrite hook: the state lock is held).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adk._run import current_run
from adk.events import AgentEvent
from compose.models.base import ChatModel
from compose.schema import Message, ToolInfo
from compose.stream import StreamReader
from compose.tools.base import BaseTool
from compose.tools.middleware import InvokableToolEndpoint, StreamableToolEndpoint, ToolMiddleware

__all__ = [
    "AgentMiddleware",
    "ChatModelAgentContext",
    "ChatModelAgentState",
    "ModelWrapper",
    "overrides",
    "same_items",
    "send_event",
    "tool_middlewares",
]


@dataclass(slots=True)
class ChatModelAgentState:
    """What the model-state hooks see and return: the conversation and the tools offered to the model.

    Attributes:
        messages: the conversation (the instruction's system message first, when there is one).
        tool_infos: the tools the next model call offers (the agent's tools unless a hook changed them).
    """

    messages: list[Message]
    tool_infos: list[ToolInfo] = field(default_factory=list)


@dataclass(slots=True)
class ChatModelAgentContext:
    """What ``before_agent`` sees and returns (Eino's ``ChatModelAgentContext``).

    Attributes:
        instruction: the run's instruction (before session values fill its placeholders).
        tools: the tools of the run (the agent's, plus its exit / final-answer tools).
        return_directly: names of the tools whose result ends the run.
    """

    instruction: str
    tools: list[BaseTool]
    return_directly: set[str]


class AgentMiddleware:
    """Base class of ChatModelAgent middlewares: every hook is a no-op (see the module docstring).

    Example::

        class Shout(AgentMiddleware):
            async def after_model_rewrite_state(self, state):
                answer = state.messages[-1]
                state.messages[-1] = answer.model_copy(update={"content": answer.content.upper()})
                return state
    """

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        """Change the run's instruction, tools or return-directly set; return the context to use."""
        return context

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        """Before each model call: return the state (messages, tool infos) to keep and call the model with."""
        return state

    async def after_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        """After each model call (the answer is the last message): return the state to keep."""
        return state

    def wrap_model(self, model: ChatModel) -> ChatModel:
        """Wrap the chat model (once, when the agent builds); see :class:`ModelWrapper`."""
        return model

    def wrap_invokable_tool_call(self, next: InvokableToolEndpoint) -> InvokableToolEndpoint:
        """Wrap the endpoint of every invokable tool call."""
        return next

    def wrap_streamable_tool_call(self, next: StreamableToolEndpoint) -> StreamableToolEndpoint:
        """Wrap the endpoint of every streamable tool call."""
        return next

    async def after_agent(self, state: ChatModelAgentState) -> None:
        """After a successful run, with the final conversation."""

    def __repr__(self) -> str:
        hooks = [name for name in _HOOKS if overrides(self, name)]
        return f"{type(self).__qualname__}(hooks={hooks})"


_HOOKS = (
    "before_agent",
    "before_model_rewrite_state",
    "after_model_rewrite_state",
    "wrap_model",
    "wrap_invokable_tool_call",
    "wrap_streamable_tool_call",
    "after_agent",
)


def overrides(middleware: AgentMiddleware, hook: str) -> bool:
    """Does ``middleware``'s class override ``hook`` of :class:`AgentMiddleware`?"""
    return getattr(type(middleware), hook) is not getattr(AgentMiddleware, hook)


def same_items(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """The same objects in the same order (cheap: no ``__eq__`` of pydantic models)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def tool_middlewares(middlewares: Sequence[AgentMiddleware]) -> list[ToolMiddleware]:
    """The middlewares' tool wrappers as ToolsNode middlewares, first outermost; no-op wrappers are left out."""
    out: list[ToolMiddleware] = []
    for mw in middlewares:
        invokable = mw.wrap_invokable_tool_call if overrides(mw, "wrap_invokable_tool_call") else None
        streamable = mw.wrap_streamable_tool_call if overrides(mw, "wrap_streamable_tool_call") else None
        if invokable is not None or streamable is not None:
            out.append(ToolMiddleware(invokable=invokable, streamable=streamable))
    return out


def send_event(event: AgentEvent) -> None:
    """Send ``event`` to the current agent run's event stream (Eino's ``SendEvent``), from a middleware hook,
    a model wrapper or a tool.

    Raises:
        RuntimeError: called outside an agent run.
    """
    run = current_run.get()
    if run is None:
        raise RuntimeError("send_event() must be called inside an agent run (a middleware hook, model or tool)")
    run.send(event)


class ModelWrapper:
    """A convenient base for ``wrap_model``: delegates to ``inner``; override ``generate`` / ``stream``.

    Example::

        class Tagged(ModelWrapper):
            async def generate(self, messages, **opts):
                answer = await self.inner.generate(messages, **opts)
                return answer.model_copy(update={"name": "tagged"})
    """

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self.inner.generate(messages, **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self.inner.stream(messages, **opts)

    def with_tools(self, tools: Sequence[ToolInfo]) -> ChatModel:
        """A copy wrapping ``inner.with_tools(tools)`` (the agent binds tools below the wrappers itself)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.inner = self.inner.with_tools(tools)
        return clone

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({self.inner!r})"
