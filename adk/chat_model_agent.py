"""``ChatModelAgent``: a chat model and tools on the ReAct graph (eino-semantics 4.2), with the seeds'
capabilities: token budget, first-round ``tool_choice``, tool execution mode, stall detection and timeout.

Example::

    agent = ChatModelAgent(
        name="travel",
        description="plans day trips",
        instruction="You are a travel assistant.",
        model=ScriptedChatModel([...]),
        tools=ToolsConfig([get_weather, search_places]),
    )
    async for event in Runner(agent, enable_streaming=True).query("Plan a day in Hangzhou"):
        ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from adk._callbacks import AgentCallbacks
from adk._model import EventModel, FirstCallOptionsModel
from adk._run import RunContext
from adk.actions import send_tool_gen_action
from adk.approval import ApprovalPredicate, approval_middleware
from adk.checkpointing import CheckpointBinding
from adk.events import AgentAction, AgentInput, checked_messages
from adk.instruction import format_instruction
from adk.react import (
    DEFAULT_MAX_ITERATIONS,
    ChatModelHook,
    ReactConfig,
    build_react,
    tool_result_collector,
)
from adk.retry import ModelRetryConfig, RetryChatModel
from adk.runner import AgentRun
from adk.telemetry import TelemetryHandler
from compose.callbacks import CallbackHandler
from compose.checkpoint import CheckPointStore, InMemoryCheckPointStore
from compose.models.base import ChatModel, ToolChoice
from compose.runnable import Runnable
from compose.schema import Message, system_message
from compose.tool_node import ToolMiddleware, ToolsNode
from compose.tools import BaseTool, tool, tool_parallel_safe

__all__ = ["ChatModelAgent", "ToolExecutionMode", "ToolsConfig", "exit_tool"]

ToolExecutionMode = Literal["auto", "serial", "parallel"]


@dataclass(frozen=True)
class ToolsConfig:
    """The agent's tools.

    Args:
        tools: the tools the model may call.
        return_directly: names of tools whose result ends the run and becomes its output.
        middlewares: ToolsNode middlewares (inside the agent's own event collector, which is outermost).
        unknown_tools_handler: ``async (name, arguments) -> str`` answering calls of unknown tools.
        tool_arguments_handler: ``async (name, arguments) -> str`` rewriting arguments first.
    """

    tools: Sequence[BaseTool] = ()
    return_directly: Iterable[str] = field(default_factory=frozenset)
    middlewares: Sequence[ToolMiddleware] = ()
    unknown_tools_handler: Any = None
    tool_arguments_handler: Any = None


@tool(name="exit", description="Exit the agent process and return the final result.")
async def exit_tool(final_result: str) -> str:
    """End the run with ``final_result`` as the answer.

    Args:
        final_result: the final result to return.
    """
    await send_tool_gen_action(AgentAction.new_exit())
    return final_result


class _ModeToolsNode:
    """``auto`` execution: run a round's calls in parallel only when there are several and every called tool
    is parallel-safe (seed 000); otherwise one after the other."""

    def __init__(self, parallel: ToolsNode, serial: ToolsNode, unsafe: frozenset[str]) -> None:
        self.parallel = parallel
        self.serial = serial
        self.unsafe = unsafe

    def _pick(self, message: Message) -> ToolsNode:
        calls = message.tool_calls
        if len(calls) > 1 and not any(c.function.name in self.unsafe for c in calls):
            return self.parallel
        return self.serial

    async def invoke(self, message: Message, **opts: Any) -> list[Message]:
        return await self._pick(message).invoke(message, **opts)

    async def stream(self, message: Message, **opts: Any) -> Any:
        return await self._pick(message).stream(message, **opts)

    def __repr__(self) -> str:
        return f"ToolsNode(auto, unsafe={sorted(self.unsafe)})"


class ChatModelAgent:
    """An agent that answers with a chat model, calling tools in a ReAct loop until the model answers without
    a tool call (or a return-directly tool ends the run).

    Args:
        name: the agent's name (on every event).
        description: what the agent does (for multi-agent setups).
        instruction: the system message put before the conversation (none when empty).
        model: the chat model; ``with_tools`` is called once with the tools' descriptions.
        tools: a ``ToolsConfig`` or a plain list of tools; none makes the agent a single model call.
        max_iterations: the most model calls per run (default 20); one more raises ``ExceedMaxIterationsError``.
        model_retry: retry failed model calls (``ModelRetryConfig``).
        before_chat_model: hooks ``(ChatModelAgentState) -> None`` run before each model call; they may change
            the messages the model sees (and keeps).
        after_chat_model: hooks run after each model call; the last message is what flows on.
        exit_tool: add the ``exit`` tool (argument ``final_result``; sends an exit action; return-directly).
        output_key: after a successful run, store the final answer's content in the session values.
        max_budget_tokens: end the run with ``TokenBudgetExceededError`` before a model call once the run's total
            token usage has reached this.
        tool_choice: sent to the model on the first model call of a run only: ``"required"``, the name of a tool
            (the simplest way to force one; OpenAIChatModel sends ``{"type": "function", "function": {"name":
            ...}}``, which servers refusing ``"required"`` such as llama.cpp's accept), or a provider mapping.
        tool_execution_mode: ``"auto"`` (parallel only when every called tool is parallel-safe), ``"serial"``,
            or ``"parallel"``.
        stall_window: end the run with ``StallDetectedError`` when the last this-many tool calls all called the
            same tool.
        timeout: end the run with ``AgentTimeoutError`` after this many seconds: a deadline on the supersteps the
            runner drives and on every read of a model stream, so a model that stalls while the consumer reads
            its tokens ends that event's stream with ``AgentTimeoutError`` too.
        approval: ``(tool_name, arguments) -> bool``: calls for which it returns True need approval (seed 000's
            guard, see ``adk.approval``): they pause the run with an ``ApprovalRequest`` and run only when
            resumed with ``ApprovalDecision(approved=True)``; a rejection reaches the model as a tool message.
            Per tool: ``approval=lambda name, args: name in {"pay", "delete"}``; per call: inspect ``args``.

    Raises:
        ValueError: a required field is missing or a return-directly tool is unknown.
    """

    def __init__(
        self,
        name: str,
        description: str,
        instruction: str = "",
        model: ChatModel | None = None,
        tools: ToolsConfig | Sequence[BaseTool] | None = None,
        *,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        model_retry: ModelRetryConfig | None = None,
        before_chat_model: Sequence[ChatModelHook] = (),
        after_chat_model: Sequence[ChatModelHook] = (),
        exit_tool: bool = False,
        output_key: str | None = None,
        max_budget_tokens: int | None = None,
        tool_choice: ToolChoice | None = None,
        tool_execution_mode: ToolExecutionMode = "auto",
        stall_window: int | None = None,
        timeout: float | None = None,
        approval: ApprovalPredicate | None = None,
    ) -> None:
        if not name:
            raise ValueError("agent 'Name' is required")
        if not description:
            raise ValueError("agent 'Description' is required")
        if model is None:
            raise ValueError("agent 'Model' is required")
        if not (callable(getattr(model, "generate", None)) and callable(getattr(model, "stream", None))):
            raise TypeError(
                f"agent '{name}': model must be a chat model (async generate() and stream()), got "
                f"{type(model).__qualname__}"
            )
        if tool_execution_mode not in ("auto", "serial", "parallel"):
            raise ValueError(f"tool_execution_mode must be 'auto', 'serial' or 'parallel', got {tool_execution_mode!r}")
        if stall_window is not None and stall_window < 1:
            raise ValueError(f"stall_window must be at least 1, got {stall_window}")
        self.name = name
        self.description = description
        self.instruction = instruction
        self.model: ChatModel = model
        if tools is None:
            tools = ToolsConfig()
        elif not isinstance(tools, ToolsConfig):
            tools = ToolsConfig(tools=list(tools))
        for i, t in enumerate(tools.tools):
            if not callable(getattr(t, "info", None)):
                raise TypeError(
                    f"agent '{name}': tools[{i}] is not a tool: {type(t).__qualname__} (build one from a function "
                    "with @tool)"
                )
        self.tools_config = tools
        self.max_iterations = max_iterations if max_iterations > 0 else DEFAULT_MAX_ITERATIONS
        self.model_retry = model_retry
        self.before_chat_model = tuple(before_chat_model)
        self.after_chat_model = tuple(after_chat_model)
        self.exit_tool = exit_tool
        self.output_key = output_key
        self.max_budget_tokens = max_budget_tokens
        self.tool_choice = tool_choice
        self.tool_execution_mode = tool_execution_mode
        self.stall_window = stall_window
        self.timeout = timeout
        self.approval = approval
        # the graph's own checkpoints, one per paused run, until the runner moves them to its store
        self._bridge = InMemoryCheckPointStore()
        self._runnable: Runnable[list[Message], Message] | None = None

    def __repr__(self) -> str:
        names = [t.info().name for t in self._tools()]
        return f"ChatModelAgent({self.name!r}, tools={names}, max_iterations={self.max_iterations})"

    def _tools(self) -> list[BaseTool]:
        tools = list(self.tools_config.tools)
        if self.exit_tool:
            tools.append(exit_tool)
        return tools

    def _build(self) -> Runnable[list[Message], Message]:
        """Build the graph once; the agent is frozen afterwards (Eino builds its run function once)."""
        tools = self._tools()
        cfg = self.tools_config
        return_directly = frozenset(cfg.return_directly) | ({"exit"} if self.exit_tool else frozenset())
        names = {t.info().name for t in tools}
        unknown = sorted(return_directly - names)
        if unknown:
            raise ValueError(f"return-directly tools {unknown} are not among the agent's tools {sorted(names)}")
        retry = self.model_retry if self.model_retry is not None and self.model_retry.max_retries > 0 else None
        base = self.model.with_tools([t.info() for t in tools]) if tools else self.model
        chain: Any = EventModel(base, retry)
        if retry is not None:
            chain = RetryChatModel(chain, retry)
        if self.tool_choice is not None:
            chain = FirstCallOptionsModel(chain, self.tool_choice)
        tools_node: Any = None
        if tools:
            guard = [approval_middleware(self.approval)] if self.approval is not None else []
            middlewares = [tool_result_collector(), *guard, *cfg.middlewares]

            def node(sequential: bool) -> ToolsNode:
                return ToolsNode(
                    tools,
                    execute_sequentially=sequential,
                    unknown_tools_handler=cfg.unknown_tools_handler,
                    tool_arguments_handler=cfg.tool_arguments_handler,
                    middlewares=middlewares,
                )

            if self.tool_execution_mode == "serial":
                tools_node = node(True)
            elif self.tool_execution_mode == "parallel":
                tools_node = node(False)
            else:
                unsafe = frozenset(t.info().name for t in tools if not tool_parallel_safe(t))
                tools_node = _ModeToolsNode(node(False), node(True), unsafe) if unsafe else node(False)
        return build_react(
            ReactConfig(
                model=chain,
                tools_node=tools_node,
                return_directly=return_directly,
                max_iterations=self.max_iterations,
                agent_name=self.name,
                before_chat_model=self.before_chat_model,
                after_chat_model=self.after_chat_model,
                max_budget_tokens=self.max_budget_tokens,
                stall_window=self.stall_window,
                checkpoint_store=self._bridge,
            )
        )

    @property
    def runnable(self) -> Runnable[list[Message], Message]:
        """The compiled ReAct graph (built on first use)."""
        if self._runnable is None:
            self._runnable = self._build()
        return self._runnable

    def model_input(self, input: AgentInput, session_values: Mapping[str, Any] | None = None) -> list[Message]:
        """The graph's input: the instruction as a system message, then the conversation (Eino's default
        ``GenModelInput``). With session values, the instruction's ``{key}`` placeholders are filled from them
        (:func:`~adk.instruction.format_instruction`: ``{{``/``}}`` for literal braces).

        Raises:
            InstructionFormatError: a placeholder names no session value, or the instruction is malformed.
        """
        messages = list(input.messages)
        if self.instruction:
            instruction = self.instruction
            if session_values:
                instruction = format_instruction(instruction, session_values, agent_name=self.name)
            messages.insert(0, system_message(instruction))
        return messages

    def run(
        self,
        input: AgentInput,
        *,
        telemetry: Sequence[TelemetryHandler] = (),
        session_values: dict[str, Any] | None = None,
        run_path: Sequence[str] | None = None,
        checkpoint: tuple[CheckPointStore, str] | None = None,
        callbacks: Sequence[CallbackHandler] = (),  # otel
    ) -> AgentRun:
        """Start a run; iterate the returned :class:`~adk.runner.AgentRun` for its events (see ``Runner``).

        ``checkpoint=(store, checkpoint_id)`` saves the run there if it pauses.
        """
        checked_messages(input.messages, f"agent '{self.name}'")
        binding = CheckpointBinding(checkpoint[0], checkpoint[1], self._bridge) if checkpoint is not None else None
        ctx = self._context(telemetry, session_values, run_path)
        return AgentRun(
            self.runnable,
            self.model_input(input, ctx.session_values),
            ctx,
            streaming=input.enable_streaming,
            timeout=self.timeout,
            output_key=self.output_key,
            checkpoint=binding,
            callbacks=AgentCallbacks(self.name, type(self).__name__, callbacks),  # otel
        )

    def resume(
        self,
        store: CheckPointStore,
        checkpoint_id: str,
        targets: Mapping[str, Any],
        *,
        telemetry: Sequence[TelemetryHandler] = (),
        session_values: dict[str, Any] | None = None,
        claim_stale_after: float | None = None,
        callbacks: Sequence[CallbackHandler] = (),  # otel
    ) -> AgentRun:
        """Continue the run saved under ``checkpoint_id`` in ``store`` (see ``Runner.resume``); the checkpoint is
        read when the iteration starts."""
        binding = CheckpointBinding(
            store, checkpoint_id, self._bridge, resuming=True, targets=dict(targets), stale_after=claim_stale_after
        )
        return AgentRun(
            self.runnable,
            [],
            self._context(telemetry, session_values, None),
            streaming=False,  # replaced by the checkpoint's mode when it is loaded
            timeout=self.timeout,
            output_key=self.output_key,
            checkpoint=binding,
            callbacks=AgentCallbacks(self.name, type(self).__name__, callbacks),  # otel
        )

    def _context(
        self,
        telemetry: Sequence[TelemetryHandler],
        session_values: dict[str, Any] | None,
        run_path: Sequence[str] | None,
    ) -> RunContext:
        return RunContext(
            agent_name=self.name,
            run_path=tuple(run_path) if run_path is not None else (self.name,),
            telemetry=tuple(telemetry),
            session_values=session_values if session_values is not None else {},
        )
