"""The deep agent (Eino's ``adk/prebuilt/deep``, ``deep.New``): a ChatModelAgent that plans with a todo list,
delegates to sub-agents through a ``task`` tool, and works on files through a backend.

* **Instruction**: Eino's built-in one when none is given; the deep agent uses its instruction as it is (no
  ``{key}`` placeholders are filled from session values, as in Eino: literal braces survive).
* **write_todos** (argument ``todos``: ``{content, activeForm, status}`` with status ``pending``,
  ``in_progress`` or ``completed``): keeps the list in the session value ``deep_agent_session_key_todos``
  (:data:`SESSION_KEY_TODOS`) and answers ``Updated todo list to [...]``.
* **task** (arguments ``subagent_type``, ``description``): runs the named sub-agent, or the
  ``general-purpose`` clone of the deep agent (same model, tools, middlewares and failover, its own instruction
  and no ``task`` tool), as an :class:`~adk.agents.AgentTool` with the description as its request: inner events
  (with ``ToolsConfig(emit_internal_events=True)``), pauses and resumes work as for any agent tool. Eino's task
  prompt is added to the instruction.
* **backend** / **shell**: :class:`~adk.middlewares.FilesystemMiddleware` (the file tools; ``execute``).

Example::

    agent = deep_agent("coder", "writes code", model, backend=LocalBackend(workdir), sub_agents=[reviewer])
    async for event in Runner(agent).query("Add a README"):
        ...
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from adk.agent import Agent
from adk.agents.agent_tool import AgentTool
from adk.chat_model.agent import ChatModelAgent, ModelConfig, ToolsConfig
from adk.chat_model.failover import ModelFailoverConfig
from adk.chat_model.react import DEFAULT_MAX_ITERATIONS
from adk.chat_model.retry import ModelRetryConfig
from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext
from adk.middlewares.filesystem import Backend, FilesystemMiddleware, Shell
from adk.prebuilt import _deep_prompts as prompts
from adk.session_values import add_session_value
from compose.errors import ToolArgumentsError
from compose.models.base import ChatModel
from compose.schema import ToolInfo
from compose.tools.arguments import SchemaTool, parse_arguments
from compose.tools.base import BaseTool

__all__ = [
    "GENERAL_AGENT_NAME",
    "SESSION_KEY_TODOS",
    "TASK_TOOL_NAME",
    "DeepAgent",
    "Todo",
    "deep_agent",
    "default_task_tool_description",
]

SESSION_KEY_TODOS = "deep_agent_session_key_todos"
"""The session value holding the todo list (a list of ``{content, activeForm, status}`` dicts)."""
GENERAL_AGENT_NAME = "general-purpose"
TASK_TOOL_NAME = "task"


class Todo(BaseModel):
    """One item of the ``write_todos`` list (Eino's ``TODO``)."""

    model_config = ConfigDict(extra="forbid")

    content: str
    activeForm: str
    status: Literal["pending", "in_progress", "completed"]


class _Todos(BaseModel):
    todos: list[Todo]


_TODOS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "activeForm": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                },
                "required": ["content", "activeForm", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


class WriteTodosTool:
    """Eino's ``write_todos``: stores the list in the session and echoes it as compact JSON."""

    def info(self) -> ToolInfo:
        return ToolInfo(name="write_todos", description=prompts.WRITE_TODOS_TOOL_DESCRIPTION, parameters=_TODOS_SCHEMA)

    def __repr__(self) -> str:
        return "WriteTodosTool()"

    async def run(self, arguments: str) -> str:
        todos = [t.model_dump() for t in parse_arguments("write_todos", arguments, _Todos).todos]
        add_session_value(SESSION_KEY_TODOS, todos)
        return "Updated todo list to " + json.dumps(todos, ensure_ascii=False, separators=(",", ":"))


def default_task_tool_description(sub_agents: Sequence[Agent]) -> str:
    """Eino's ``task`` tool description listing ``- name: description`` of every sub-agent."""
    lines = "".join(f"- {a.name}: {getattr(a, 'description', '')}\n" for a in sub_agents)
    return prompts.TASK_TOOL_DESCRIPTION.format(other_agents=lines)


def _task_tool(sub_agents: Sequence[Agent], description: str) -> SchemaTool:
    """Eino's ``task`` tool: ``{"subagent_type", "description"}`` runs that sub-agent as an AgentTool."""
    agents = {a.name: AgentTool(a) for a in sub_agents}

    async def run(args: dict[str, Any]) -> str:
        kind = args.get("subagent_type")  # the arguments' types are checked: str or None
        tool = agents.get(kind or "")
        if tool is None:
            raise ToolArgumentsError(
                TASK_TOOL_NAME, f"subagent type {kind} not found (known: {sorted(agents)})", field="subagent_type"
            )
        return await tool.run(json.dumps({"request": args.get("description") or ""}))

    props = {"subagent_type": {"type": "string"}, "description": {"type": "string"}}
    info = ToolInfo(name=TASK_TOOL_NAME, description=description, parameters={"type": "object", "properties": props})
    return SchemaTool(info, run, not_json="failed to unmarshal task tool input json")


class _AddTool(AgentMiddleware):
    """Adds a tool and appends a prompt to the instruction (Eino's ``appendPromptTool``)."""

    def __init__(self, tool: BaseTool, prompt: str = "") -> None:
        self.tool = tool
        self.prompt = prompt

    def __repr__(self) -> str:
        return f"_AddTool({self.tool.info().name!r})"

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        return ChatModelAgentContext(
            context.instruction + self.prompt, [*context.tools, self.tool], set(context.return_directly)
        )


class DeepAgent(ChatModelAgent):
    """The ChatModelAgent :func:`deep_agent` builds: its instruction is used as it is (never filled from session
    values)."""

    fills_instruction: ClassVar[bool] = False


def deep_agent(
    name: str,
    description: str,
    model: ChatModel,
    *,
    instruction: str | None = None,
    tools: ToolsConfig | Sequence[BaseTool] = (),
    sub_agents: Sequence[Agent] = (),
    backend: Backend | None = None,
    shell: Shell | None = None,
    write_todos: bool = True,
    general_sub_agent: bool = True,
    task_tool_description: str | Callable[[Sequence[Agent]], str] | None = None,
    middlewares: Sequence[AgentMiddleware] = (),
    model_retry: ModelRetryConfig | None = None,
    model_failover: ModelFailoverConfig | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    output_key: str | None = None,
) -> DeepAgent:
    """A deep agent (Eino's ``deep.New`` and ``Config``; see the module docstring).

    Args:
        name: the agent's name.
        description: what it does.
        model: its chat model (also the general-purpose sub-agent's).
        instruction: its instruction (default: Eino's built-in one), used as it is.
        tools: its own tools (a ``ToolsConfig`` or a list), also the general-purpose sub-agent's.
        sub_agents: agents the ``task`` tool can run (by name).
        backend: the files of the filesystem tools (none: no file tools).
        shell: runs the ``execute`` tool (opt-in; ``LocalShell`` is no sandbox).
        write_todos: add the ``write_todos`` tool.
        general_sub_agent: add the ``general-purpose`` sub-agent.
        task_tool_description: the ``task`` tool's description, or ``(sub_agents) -> description`` (default
            :func:`default_task_tool_description`).
        middlewares: more middlewares, after the built-in ones (also the general-purpose sub-agent's).
        model_retry: retry failed model calls.
        model_failover: fail over to other models (also for the general-purpose sub-agent).
        max_iterations: the most model calls per run (also the general-purpose sub-agent's).
        output_key: store the final answer in this session value.

    Raises:
        ValueError: two sub-agents share a name, or a sub-agent is named ``general-purpose`` beside the clone.
    """
    text = instruction if instruction else prompts.BASE_AGENT_INSTRUCTION
    builtins: list[AgentMiddleware] = []
    if write_todos:
        builtins.append(_AddTool(WriteTodosTool()))
    if backend is not None or shell is not None:
        builtins.append(FilesystemMiddleware(backend, shell=shell))
    stack = [*builtins, *middlewares]
    if general_sub_agent or sub_agents:
        agents: list[Agent] = []
        if general_sub_agent:
            agents.append(
                DeepAgent(
                    GENERAL_AGENT_NAME,
                    prompts.GENERAL_AGENT_DESCRIPTION,
                    text,
                    model,
                    tools,
                    max_iterations=max_iterations,
                    middlewares=stack,
                    model_config=ModelConfig(failover=model_failover),
                )
            )
        agents.extend(sub_agents)
        names = [a.name for a in agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"deep agent '{name}': sub-agents share the names {duplicates}")
        listed = [*sub_agents, *agents[:1]] if general_sub_agent else list(sub_agents)
        if callable(task_tool_description):
            tool_description = task_tool_description(listed)
        else:
            tool_description = task_tool_description or default_task_tool_description(listed)
        task = _task_tool(agents, tool_description)
        stack = [*builtins, _AddTool(task, prompts.TASK_PROMPT), *middlewares]
    return DeepAgent(
        name,
        description,
        text,
        model,
        tools,
        max_iterations=max_iterations,
        model_retry=model_retry,
        model_config=ModelConfig(failover=model_failover),
        middlewares=stack,
        output_key=output_key,
    )
