"""Client tools and context: what one AG-UI request adds to the agent's run.

``RunAgentInput.tools`` are tools the client runs. The served ``ChatModelAgent`` gets one middleware
(:class:`RequestExtras`, added by ``create_app`` before the agent's first run) whose ``before_agent`` hook
offers the request's client tools next to the agent's own and adds the request's ``context`` entries to the
instruction as a section of the system message. The request's tools and context reach it through a context
variable the server sets around the run (one request, one task: nothing is shared between requests).

A client tool is a stub: when the model calls it, the call pauses (an interrupt whose info is a
:class:`ClientToolCall`); the server then ends the run as AG-UI says (``RUN_FINISHED`` with the call among
``pendingToolCallIds``) and keeps the turn in the thread, so the client's next run, carrying the tool message,
continues the conversation. A stub given resume data (a client tool paused together with an approval) returns
it as its result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

from ag_ui.core import Context, Tool
from pydantic import BaseModel, ConfigDict

from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext
from compose.interrupt import InterruptSignal, get_resume_context
from compose.schema import ToolInfo
from compose.tools.middleware import get_tool_call_id

__all__ = ["ClientToolCall", "RequestExtras", "request_extras"]


class ClientToolCall(BaseModel):
    """The interrupt info of a call of a client tool: the client runs it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_name: str
    arguments: str
    call_id: str


@dataclass(frozen=True, slots=True)
class Extras:
    """One request's client tools and context entries."""

    tools: tuple[Tool, ...] = ()
    context: tuple[Context, ...] = ()


request_extras: ContextVar[Extras] = ContextVar("pyeino_serve_request", default=Extras())  # noqa: B039


@dataclass(slots=True)
class ClientTool:
    """A tool the client runs (see the module docstring)."""

    tool: Tool
    _info: ToolInfo = field(init=False)

    def __post_init__(self) -> None:
        params = self.tool.parameters if isinstance(self.tool.parameters, dict) else {"type": "object"}
        self._info = ToolInfo(name=self.tool.name, description=self.tool.description, parameters=params)

    def info(self) -> ToolInfo:
        return self._info

    async def run(self, arguments: str) -> str:
        resume = get_resume_context()
        if resume.is_target and resume.has_data:
            data = resume.data
            return data if isinstance(data, str) else json.dumps(data)
        call_id = get_tool_call_id() or ""
        request = ClientToolCall(tool_name=self.tool.name, arguments=arguments, call_id=call_id)
        raise InterruptSignal(request, id=f"client-tool:{call_id}")


def context_section(entries: Sequence[Context]) -> str:
    """The system message section listing the client's context entries."""
    lines = ["Context from the application:"]
    lines += [f"- {c.description}: {c.value}" for c in entries]
    return "\n".join(lines)


class RequestExtras(AgentMiddleware):
    """Offers the current request's client tools and context to the agent (see the module docstring)."""

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        extras = request_extras.get()
        if not extras.tools and not extras.context:
            return context
        own = {t.info().name for t in context.tools}
        tools = [*context.tools, *(ClientTool(t) for t in extras.tools if t.name not in own)]
        instruction = context.instruction
        if extras.context:
            section = context_section(extras.context)
            instruction = f"{instruction}\n\n{section}" if instruction else section
        return ChatModelAgentContext(instruction, tools, set(context.return_directly))
