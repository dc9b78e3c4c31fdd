"""``ChatModelAgent``: a chat model and tools on the ReAct graph (eino-semantics 4.2), with the seeds'
capabilities grouped in small options (``adk.chat_model.config``): model failover and first-round
``tool_choice`` (``ModelConfig``), tool execution mode (``ToolsConfig``), token budget, stall detection and timeout
(``Limits``), structured output (``OutputConfig``).

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

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from adk.agent import AgentContext, ResumeInfo
from adk.chat_model._context import DEFAULT_MAX_ITERATIONS, ReactContext, State, current_react
from adk.chat_model._model import EventModel, OptionsModel, ToolBinder
from adk.chat_model._react_run import ReactRun, load_resume_state
from adk.chat_model._tools_nodes import ModeToolsNode, RunTools
from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.config import Limits, ModelConfig, OutputConfig, ToolExecutionMode, ToolsConfig, grouped
from adk.chat_model.failover import FailoverChatModel, FailoverProxy
from adk.chat_model.instruction import (
    TRANSFER_TO_AGENT_TOOL_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_NAME,
    concat_instructions,
    format_instruction,
    transfer_instruction,
    transfer_tool_result,
)
from adk.chat_model.react import ChatModelHook, ChatModelHooks, ReactConfig, build_react, tool_result_collector
from adk.chat_model.retry import ModelRetryConfig, RetryChatModel
from adk.chat_model.structured_output import (
    FINAL_ANSWER_TOOL_NAME,
    FinalAnswerTool,
    OutputSchema,
    ResponseFormatFallback,
    StructuredOutputCheck,
    pick_mode,
)
from adk.events import AgentAction, AgentInput, checked_messages
from adk.middlewares.approval import ApprovalMiddleware
from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext, overrides, same_items, tool_middlewares
from adk.middlewares.limits import LimitsMiddleware
from compose.checkpoint import InMemoryCheckPointStore
from compose.models.base import ChatModel
from compose.runnable import Runnable
from compose.schema import Message, ToolInfo, system_message
from compose.state import process_state
from compose.tools.base import BaseTool, tool, tool_parallel_safe
from compose.tools.node import ToolsNode

__all__ = ["ChatModelAgent", "Limits", "ModelConfig", "OutputConfig", "ToolExecutionMode", "ToolsConfig", "exit_tool"]


@tool(name=TRANSFER_TO_AGENT_TOOL_NAME, description=TRANSFER_TO_AGENT_TOOL_DESCRIPTION)
async def transfer_to_agent_tool(agent_name: str) -> str:
    """Hand the conversation to another agent (the tool an agent with sub-agents or a parent gets).

    Args:
        agent_name: the name of the agent to transfer to
    """
    await send_tool_gen_action(AgentAction.new_transfer_to_agent(agent_name))
    return transfer_tool_result(agent_name)


@tool(name="exit", description="Exit the agent process and return the final result.")
async def exit_tool(final_result: str) -> str:
    """End the run with ``final_result`` as the answer.

    Args:
        final_result: the final result to return.
    """
    await send_tool_gen_action(AgentAction.new_exit())
    return final_result


class ChatModelAgent:
    """An agent that answers with a chat model, calling tools in a ReAct loop until the model answers without
    a tool call (or a return-directly tool ends the run).

    Args:
        name: the agent's name (on every event).
        description: what the agent does (for multi-agent setups).
        instruction: the system message put before the conversation (none when empty).
        model: the chat model; ``with_tools`` is called once with the tools' descriptions (and once per changed
            tool list when middlewares change a run's tools).
        tools: a :class:`ToolsConfig` (tools, return-directly tools, ToolsNode middlewares, execution mode) or a
            plain list of tools; none makes the agent a single model call.
        middlewares: :class:`~adk.middlewares.AgentMiddleware` objects, the first wrapping the others
            (``A(B(C(x)))``; see ``adk.middlewares``), the approval guard among them
            (:class:`~adk.middlewares.approval.ApprovalMiddleware`). ``before_chat_model`` hooks run before them
            and ``after_chat_model`` hooks after them (they are middlewares too).
        max_iterations: the most model calls per run (default 20); one more raises ``ExceedMaxIterationsError``.
        model_retry: retry failed model calls (``ModelRetryConfig``).
        exit_tool: add the ``exit`` tool (argument ``final_result``; sends an exit action; return-directly).
        output_key: after a successful run, store the final answer's content in the session values.
        before_chat_model: hooks ``(ChatModelAgentState) -> None`` run before each model call; they may change
            the messages the model sees (and keeps).
        after_chat_model: hooks run after each model call; the last message is what flows on.
        model_config: model failover and the first call's ``tool_choice`` (:class:`ModelConfig`).
        limits: token budget, stall detection and timeout (:class:`Limits`).
        output: a structured answer (:class:`OutputConfig`).

    The keyword arguments ``model_failover``, ``tool_choice``, ``tool_execution_mode``, ``max_budget_tokens``,
    ``stall_window``, ``timeout``, ``approval``, ``output_type``, ``output_retries`` and ``output_mode`` still work
    for one release, with a ``DeprecationWarning`` naming their new spelling.

    Raises:
        ValueError: a required field is missing or a return-directly tool is unknown.
        TypeError: ``output.type`` is not a pydantic model, dataclass or TypedDict, a middleware is not an
            ``AgentMiddleware``, or an unknown keyword argument.
    """

    fills_instruction: ClassVar[bool] = True
    """Whether the instruction's ``{key}`` placeholders are filled from session values (a subclass may say no:
    the deep agent's instruction is used as it is, as Eino's ``deep`` does)."""

    def __init__(
        self,
        name: str,
        description: str,
        instruction: str = "",
        model: ChatModel | None = None,
        tools: ToolsConfig | Sequence[BaseTool] | None = None,
        *,
        middlewares: Sequence[AgentMiddleware] = (),
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        model_retry: ModelRetryConfig | None = None,
        exit_tool: bool = False,
        output_key: str | None = None,
        before_chat_model: Sequence[ChatModelHook] = (),
        after_chat_model: Sequence[ChatModelHook] = (),
        model_config: ModelConfig | None = None,
        limits: Limits | None = None,
        output: OutputConfig | None = None,
        **deprecated: Any,
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
        if tools is None:
            tools = ToolsConfig()
        elif not isinstance(tools, ToolsConfig):
            tools = ToolsConfig(tools=list(tools))
        approval = None
        if deprecated:
            model_config, tools, limits, output, approval = grouped(deprecated, model_config, tools, limits, output)
        for i, t in enumerate(tools.tools):
            if not callable(getattr(t, "info", None)):
                raise TypeError(
                    f"agent '{name}': tools[{i}] is not a tool: {type(t).__qualname__} (build one from a function "
                    "with @tool)"
                )
        for what, value, cls in (
            ("model_config", model_config, ModelConfig),
            ("limits", limits, Limits),
            ("output", output, OutputConfig),
        ):
            if value is not None and not isinstance(value, cls):
                raise TypeError(f"agent '{name}': {what} must be a {cls.__name__}, got {type(value).__qualname__}")
        self.name = name
        self.description = description
        self.instruction = instruction
        self.model: ChatModel = model
        self.tools_config = tools
        self.max_iterations = max_iterations if max_iterations > 0 else DEFAULT_MAX_ITERATIONS
        self.model_retry = model_retry
        self.model_config = model_config if model_config is not None else ModelConfig()
        self.limits = limits if limits is not None else Limits()
        self.output_config = output if output is not None else OutputConfig()
        self.before_chat_model = tuple(before_chat_model)
        self.after_chat_model = tuple(after_chat_model)
        self.exit_tool = exit_tool
        self.output_key = output_key
        if approval is not None:
            middlewares = [ApprovalMiddleware(approval), *middlewares]
        for i, mw in enumerate(middlewares):
            if not isinstance(mw, AgentMiddleware):
                raise TypeError(
                    f"agent '{name}': middlewares[{i}] is {type(mw).__qualname__}, not an AgentMiddleware (a "
                    "ToolsNode ToolMiddleware goes in ToolsConfig(middlewares=...))"
                )
        lim = self.limits
        checks = lim.max_budget_tokens is not None or lim.stall_window is not None
        # one mechanism: the limits' checks and the hooks are middlewares too; the limits come first (they end a
        # run before any rewrite), the before hooks next, the after hooks last (Eino runs AgentMiddleware's
        # BeforeChatModel before the handlers' rewrites and AfterChatModel after them)
        self.middlewares: tuple[AgentMiddleware, ...] = (
            *([LimitsMiddleware(lim.max_budget_tokens, lim.stall_window)] if checks else []),
            *([ChatModelHooks(before=before_chat_model)] if before_chat_model else []),
            *middlewares,
            *([ChatModelHooks(after=after_chat_model)] if after_chat_model else []),
        )
        self._before_agent = tuple(m for m in self.middlewares if overrides(m, "before_agent"))
        self._output: StructuredOutputCheck | None = None
        out = self.output_config
        if out.type is not None:
            mode = pick_mode(out.mode, model)
            self._output = StructuredOutputCheck(OutputSchema(out.type), out.retries, mode, fallback=out.mode == "auto")
        # the graph's own checkpoints, one per paused run, until the runner moves them to its store
        self._bridge = InMemoryCheckPointStore()
        self._runnable: Runnable[list[Message], Message] | None = None
        self._run_tools: RunTools | None = None
        # multi-agent (adk.agents.flow): the agents it may transfer to, set before its first run
        self._sub_agents: list[tuple[str, str]] = []
        self._parent_agent: tuple[str, str] | None = None
        self._disallow_transfer_to_parent = False
        self._instruction = instruction

    def __repr__(self) -> str:
        names = [t.info().name for t in self._tools()]
        return f"ChatModelAgent({self.name!r}, tools={names}, max_iterations={self.max_iterations})"

    def _tools(self) -> list[BaseTool]:
        tools = list(self.tools_config.tools)
        if self._transfer_targets():
            tools.append(transfer_to_agent_tool)
        if self.exit_tool:
            tools.append(exit_tool)
        if self._output is not None and self._output.mode == "tool":
            tools.append(FinalAnswerTool(self._output))
        return tools

    def _return_directly(self) -> frozenset[str]:
        rd = frozenset(self.tools_config.return_directly) | ({"exit"} if self.exit_tool else frozenset())
        return rd | {TRANSFER_TO_AGENT_TOOL_NAME} if self._transfer_targets() else rd

    def _transfer_targets(self) -> list[tuple[str, str]]:
        targets = list(self._sub_agents)
        if self._parent_agent is not None and not self._disallow_transfer_to_parent:
            targets.append(self._parent_agent)
        return targets

    def _check_not_frozen(self) -> None:
        if self._runnable is not None:
            raise ValueError(f"agent '{self.name}' has been frozen after run: set its sub-agents before running it")

    def on_set_sub_agents(self, sub_agents: Sequence[Any]) -> None:
        """Called by :func:`~adk.agents.flow.set_sub_agents`: the agent gets the ``transfer_to_agent`` tool and
        the transfer instruction listing them (Eino's ``OnSetSubAgents``)."""
        self._check_not_frozen()
        if self._sub_agents:
            raise ValueError(f"agent '{self.name}': its sub-agents have already been set")
        self._sub_agents = [(a.name, a.description) for a in sub_agents]

    def on_set_as_sub_agent(self, parent: Any) -> None:
        """Called when the agent becomes ``parent``'s sub-agent: it may transfer back to it."""
        self._check_not_frozen()
        if self._parent_agent is not None:
            raise ValueError(
                f"agent '{self.name}' has already been set as a sub-agent of agent '{self._parent_agent[0]}' "
                f"(a second parent: '{parent.name}')"
            )
        self._parent_agent = (parent.name, parent.description)

    def add_middleware(self, middleware: AgentMiddleware) -> None:
        """Add ``middleware`` after the agent's others, before its first run (``adk.serve`` adds the one that
        offers a request's client tools and context this way).

        Raises:
            TypeError: ``middleware`` is not an ``AgentMiddleware``.
            ValueError: the agent has run (its graph is built).
        """
        if not isinstance(middleware, AgentMiddleware):
            raise TypeError(f"agent '{self.name}': {type(middleware).__qualname__} is not an AgentMiddleware")
        if self._runnable is not None:
            raise ValueError(f"agent '{self.name}' has been frozen after run: add middlewares before running it")
        self.middlewares = (*self.middlewares, middleware)
        self._before_agent = tuple(m for m in self.middlewares if overrides(m, "before_agent"))

    def on_disallow_transfer_to_parent(self) -> None:
        """The agent must not transfer back to its parent (workflow agents' children)."""
        self._check_not_frozen()
        self._disallow_transfer_to_parent = True

    def _tools_node(self, tools: Sequence[BaseTool]) -> Any:
        """The ToolsNode running ``tools``: the collector outermost, then the ``ToolsConfig`` middlewares, then
        the agent middlewares' tool wrappers (Eino's order)."""
        cfg = self.tools_config
        middlewares = [tool_result_collector(), *cfg.middlewares, *tool_middlewares(self.middlewares)]
        output = self._output
        if output is not None and output.fallback and all(t.info().name != FINAL_ANSWER_TOOL_NAME for t in tools):
            # the tool mode may take over mid-run (ResponseFormatFallback): its final_answer calls must run
            tools = [*tools, FinalAnswerTool(output)]

        def node(sequential: bool) -> ToolsNode:
            return ToolsNode(
                tools,
                execute_sequentially=sequential,
                unknown_tools_handler=cfg.unknown_tools_handler,
                tool_arguments_handler=cfg.tool_arguments_handler,
                middlewares=middlewares,
            )

        if cfg.execution_mode == "serial":
            return node(True)
        if cfg.execution_mode == "parallel":
            return node(False)
        unsafe = frozenset(t.info().name for t in tools if not tool_parallel_safe(t))
        return ModeToolsNode(node(False), node(True), unsafe) if unsafe else node(False)

    def _build(self) -> Runnable[list[Message], Message]:
        """Build the graph once; the agent is frozen afterwards (Eino builds its run function once)."""
        tools = self._tools()
        return_directly = self._return_directly()
        targets = self._transfer_targets()
        self._instruction = (
            concat_instructions(self.instruction, transfer_instruction(targets)) if targets else self.instruction
        )
        names = {t.info().name for t in tools}
        unknown = sorted(return_directly - names)
        if unknown:
            raise ValueError(f"return-directly tools {unknown} are not among the agent's tools {sorted(names)}")
        infos = [t.info() for t in tools]
        mws = self.middlewares
        # tools offered per call only when a middleware may change them; else bound once, as before
        per_call_tools = any(
            overrides(m, hook)
            for m in mws
            for hook in ("before_agent", "before_model_rewrite_state", "after_model_rewrite_state")
        )
        output = self._output
        failover = self.model_config.failover
        # with failover, the innermost model is a proxy calling the attempt's model
        model: ChatModel = FailoverProxy(self.model) if failover is not None else self.model
        if output is not None and output.fallback:
            model = ResponseFormatFallback(model, output)
        base: ChatModel = model
        if per_call_tools:
            base = ToolBinder(model, infos)
        elif tools:
            base = model.with_tools(infos)
        for mw in reversed(mws):
            if overrides(mw, "wrap_model"):
                base = mw.wrap_model(base)
        native = output is not None and output.mode == "native"
        retry = self.model_retry if self.model_retry is not None and self.model_retry.max_retries > 0 else None
        chain: Any = EventModel(base, retry, output.schema if output is not None else None, self.name)
        if retry is not None:
            chain = RetryChatModel(chain, retry)
        if failover is not None:
            chain = FailoverChatModel(chain, failover, self.model)
        options = {"response_format": output.schema.response_format()} if output is not None and native else {}
        tool_choice = self.model_config.tool_choice
        first_call = {"tool_choice": tool_choice} if tool_choice is not None else {}
        if options or first_call:
            chain = OptionsModel(chain, options, first_call)
        tools_node: Any = None
        if self._before_agent:
            # before_agent may add tools to an agent without any: the tools route is always built
            tools_node = self._run_tools = RunTools(self._tools_node(tools), self._resumed_tools)
        elif tools or (output is not None and output.fallback):
            tools_node = self._tools_node(tools)
        return build_react(
            ReactConfig(
                model=chain,
                tools_node=tools_node,
                return_directly=return_directly,
                max_iterations=self.max_iterations,
                agent_name=self.name,
                middlewares=mws,
                tool_infos=tuple(infos),
                before_agent=self._before_agent_node if self._before_agent else None,
                output=output,
                dynamic_return_directly=bool(self._before_agent)
                or (output is not None and (not native or output.fallback)),
                checkpoint_store=self._bridge,
            )
        )

    async def _apply_before_agent(self, run: ReactContext | None, *, resumed: bool = False) -> ChatModelAgentContext:
        """Run the ``before_agent`` hooks; the run's ToolsNode (and, for a fresh run, the state's tool infos and
        return-directly set) follow what they return."""
        tools = self._tools()
        default_rd = self._return_directly()
        context = ChatModelAgentContext(self._instruction, list(tools), set(default_rd))
        for mw in self._before_agent:
            context = await mw.before_agent(context)
            if not isinstance(context, ChatModelAgentContext):
                raise TypeError(
                    f"agent '{self.name}': {type(mw).__qualname__}.before_agent must return a ChatModelAgentContext, "
                    f"got {type(context).__qualname__}"
                )
        changed = not same_items(context.tools, tools)
        if run is None:
            return context
        # called from inside the built graph, so its default ToolsNode exists
        assert self._run_tools is not None
        run.tools_node = self._tools_node(context.tools) if changed else self._run_tools.default
        if not resumed:
            infos: list[ToolInfo] | None = [t.info() for t in context.tools] if changed else None
            rd = sorted(context.return_directly) if set(context.return_directly) != default_rd else None
            async with process_state(State) as st:
                st.tool_infos = infos
                st.return_directly = rd
        return context

    async def _resumed_tools(self, run: ReactContext) -> Any:
        """The ToolsNode of a resumed run (``RunTools``'s callback): its ``before_agent`` hooks run again."""
        await self._apply_before_agent(run, resumed=True)
        return run.tools_node

    async def _before_agent_node(self, messages: list[Message]) -> list[Message]:
        run = current_react.get()
        context = await self._apply_before_agent(run)
        if not context.instruction:
            return messages
        instruction = context.instruction
        values = run.session_values if run is not None else None
        if values and self.fills_instruction:
            instruction = format_instruction(instruction, values, agent_name=self.name)
        return [system_message(instruction), *messages]

    @property
    def runnable(self) -> Runnable[list[Message], Message]:
        """The compiled ReAct graph (built on first use)."""
        if self._runnable is None:
            self._runnable = self._build()
        return self._runnable

    def model_input(self, input: AgentInput, session_values: Mapping[str, Any] | None = None) -> list[Message]:
        """The graph's input: the instruction as a system message, then the conversation (Eino's default
        ``GenModelInput``). With session values, the instruction's ``{key}`` placeholders are filled from them
        (:func:`~adk.chat_model.instruction.format_instruction`: ``{{``/``}}`` for literal braces).

        Raises:
            InstructionFormatError: a placeholder names no session value, or the instruction is malformed.
        """
        messages = list(input.messages)
        self.runnable  # noqa: B018  (built once: the instruction gains the transfer instruction then)
        if self._instruction:
            instruction = self._instruction
            if session_values and self.fills_instruction:
                instruction = format_instruction(instruction, session_values, agent_name=self.name)
            messages.insert(0, system_message(instruction))
        return messages

    def run(self, input: AgentInput, ctx: AgentContext | None = None) -> ReactRun:
        """Start a run; iterate the returned events (the ``Agent`` protocol; ``Runner`` calls this).

        ``ctx`` gives the run's session and run path (a fresh session and ``(name,)`` when omitted).
        """
        agent_ctx = ctx if ctx is not None else AgentContext.root(self.name)
        if input.messages is not agent_ctx.session.root_input:  # the Runner checked its input, that very list
            checked_messages(input.messages, f"agent '{self.name}'")
        run = self._context(agent_ctx)
        runnable = self.runnable
        return ReactRun(
            runnable,
            self._bridge,
            list(input.messages) if self._before_agent else self.model_input(input, run.session_values),
            run,
            agent_ctx,
            streaming=input.enable_streaming,
            timeout=self.limits.timeout,
            output_key=self.output_key,
            agent_type=type(self).__name__,
        )

    def resume(self, info: ResumeInfo, ctx: AgentContext | None = None) -> ReactRun:
        """Continue the run whose interrupt event carried ``info.state`` (the ``ResumableAgent`` protocol; see
        ``Runner.resume``).

        Raises:
            CheckpointError: ``info.state`` is not a paused run of this agent (``reason`` ``"payload"`` or
                ``"fingerprint"``).
        """
        saved = load_resume_state(info.state, self.name)
        agent_ctx = ctx if ctx is not None else AgentContext.root(self.name)
        run = self._context(agent_ctx)
        run.model_calls = saved.model_calls
        run.total_tokens = saved.total_tokens
        run.tool_history = tuple(saved.tool_history)
        known = set(saved.interrupts)
        targets = {k: v for k, v in info.targets.items() if k in known}
        return ReactRun(
            self.runnable,
            self._bridge,
            [],
            run,
            agent_ctx,
            streaming=info.enable_streaming,
            timeout=self.limits.timeout,
            output_key=self.output_key,
            resume=(saved, targets),
            agent_type=type(self).__name__,
        )

    def _context(self, ctx: AgentContext) -> ReactContext:
        session = ctx.session
        return ReactContext(
            self.name, ctx.run_path, session.telemetry, session.values, session, self.tools_config.emit_internal_events
        )
