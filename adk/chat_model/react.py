"""The ReAct graph of a ChatModelAgent (seed 004; eino-semantics 4.3a, Eino v0.7's design).

::

    START -> ChatModel --tool_call_check--> END                 (no tool call: the answer is the output)
                       \\--------------------> ToolNode -> ChatModel   (no return-directly tool configured)
                                               ToolNode --check_return_directly--> ChatModel
                                                                            \\--> ToolNodeToEndConverter -> END

* :class:`State` is graph-local, created fresh per run.
* ``ChatModel``'s pre handler checks and decrements ``remaining_iterations`` (so ``max_iterations`` counts
  model calls), appends its input (the first messages, later the tool messages) to ``state.messages``, runs
  the middlewares' ``before_model_rewrite_state`` hooks (``before_chat_model`` hooks among them) and calls the
  model with all state messages. Its post handler appends the answer, runs the ``after_model_rewrite_state``
  hooks, and passes on the last state message, so a hook can change the flow (add or drop tool calls, rewrite
  the answer). What the hooks return is kept in the state (:class:`ChatModelAgentState`: messages and the tool
  infos offered to the model, ``State.tool_infos``).
* Nodes added only when they have work: ``BeforeAgent`` (START -> BeforeAgent -> ChatModel) runs the
  ``before_agent`` hooks; ``AfterAgent`` (before END, on both routes to it) the ``after_agent`` hooks;
  ``OutputCheck`` (where a final answer would go to END) validates a structured answer and goes on, or to
  ``OutputRetry`` -> ChatModel to ask the model again (``adk.chat_model.structured_output``).
* ``tool_call_check`` reads the model's stream until a chunk has tool calls (-> ``ToolNode``) or the stream
  ends (-> END): models stream text before a tool call, so the first chunk alone decides nothing.
* ``ToolNode``'s pre handler ignores its input and uses the last state message; it records the
  return-directly call (the last matching call wins, as in Eino v0.7.37).
* The tool-result collector middleware is the outermost tool middleware: it pops the action the tool stored
  with :func:`~adk.chat_model.actions.send_tool_gen_action` and sends the tool event; a streamed result is copied in
  two, one copy for the event and one for the node. The return-directly call's event is held and sent when
  the ToolsNode has finished, so it is always the last tool event.

The model pre handler checks ``max_iterations``; the seeds' other limits (stall, token budget) are a middleware
(``adk.middlewares.limits``), the timeout the driver's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from adk.chat_model._context import DEFAULT_MAX_ITERATIONS, ReactContext, State, current_react
from adk.errors import ExceedMaxIterationsError
from adk.events import AgentAction, AgentEvent, AgentOutput, MessageVariant
from adk.middlewares.base import AgentMiddleware, ChatModelAgentState, overrides, same_items
from compose.errors import GraphInterrupt
from compose.graph.branch import StreamGraphBranch
from compose.graph.builder import END, START, Graph
from compose.lambdas import Lambda
from compose.lowlevel import MessageOutput
from compose.models.base import ChatModel
from compose.runnable import Runnable
from compose.schema import Message, ToolInfo, tool_message
from compose.state import is_awaitable, process_state
from compose.stream import SKIP, SkipType, StreamReader, concat
from compose.tools.middleware import (
    InvokableToolEndpoint,
    StreamableToolEndpoint,
    StreamToolOutput,
    ToolInput,
    ToolMiddleware,
    ToolOutput,
    named_tool_stream,
)

__all__ = [
    "AFTER_AGENT_NODE",
    "BEFORE_AGENT_NODE",
    "CHAT_MODEL_NODE",
    "DEFAULT_MAX_ITERATIONS",
    "OUTPUT_CHECK_NODE",
    "OUTPUT_RETRY_NODE",
    "TOOL_NODE",
    "TO_END_CONVERTER_NODE",
    "ChatModelAgentState",
    "ChatModelHook",
    "ChatModelHooks",
    "OutputCheck",
    "ReactConfig",
    "State",
    "build_react",
    "tool_result_collector",
]

CHAT_MODEL_NODE = "ChatModel"
TOOL_NODE = "ToolNode"
TO_END_CONVERTER_NODE = "ToolNodeToEndConverter"
BEFORE_AGENT_NODE = "BeforeAgent"
AFTER_AGENT_NODE = "AfterAgent"
OUTPUT_CHECK_NODE = "OutputCheck"
OUTPUT_RETRY_NODE = "OutputRetry"

ChatModelHook = Callable[[ChatModelAgentState], Awaitable[None] | None]
"""A hook ``(state) -> None``, sync or async, changing ``state.messages`` in place or replacing the list; it runs
under the state lock (do not call ``process_state``). ``before_chat_model`` / ``after_chat_model`` hooks are
sugar for :class:`ChatModelHooks` middlewares."""


class ChatModelHooks(AgentMiddleware):
    """``before_chat_model`` / ``after_chat_model`` hooks as a middleware: ``before`` hooks run in
    ``before_model_rewrite_state``, ``after`` hooks in ``after_model_rewrite_state``.

    The agent puts the ``before`` hooks first among its middlewares and the ``after`` hooks last, as Eino runs
    its ``AgentMiddleware`` hooks around the handlers' rewrites.
    """

    def __init__(self, before: Sequence[ChatModelHook] = (), after: Sequence[ChatModelHook] = ()) -> None:
        self.before = tuple(before)
        self.after = tuple(after)

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        return await _run_hooks(self.before, state)

    async def after_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        return await _run_hooks(self.after, state)


async def _run_hooks(hooks: Sequence[ChatModelHook], state: ChatModelAgentState) -> ChatModelAgentState:
    for hook in hooks:
        result = hook(state)
        if is_awaitable(result):
            await result
    return state


class OutputCheck(Protocol):
    """How the graph checks a final answer when the agent has an ``output_type`` (see
    ``adk.chat_model.structured_output``): ``check`` returns None for a valid answer, else the message asking the model
    again (and raises once the retries are used up)."""

    async def check(self, message: Message, st: State) -> Message | None: ...


BeforeAgentNode = Callable[[list[Message]], Awaitable[list[Message]]]


@dataclass(frozen=True, slots=True)
class ReactConfig:
    """What the ReAct graph is built from.

    ``model`` is the complete model chain (tools bound, events, retry); ``tools_node`` anything a graph
    accepts as a tools node, with the collector middleware already outermost (see
    :func:`tool_result_collector`). ``tools_node=None`` builds the no-tools graph: START -> ChatModel -> END
    with the hooks and no iteration limit.

    ``middlewares`` are the agent's middlewares (their model-state hooks and ``after_agent`` run here);
    ``tool_infos`` the tools offered to the model unless a hook changes them; ``before_agent`` the node
    function that runs the ``before_agent`` hooks first (it also builds the instruction's system message);
    ``output`` checks final answers (structured output); ``dynamic_return_directly`` builds the
    return-directly route even when no tool is configured to return directly (the set may change per run).
    """

    model: ChatModel
    tools_node: Any = None
    return_directly: frozenset[str] = frozenset()
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    agent_name: str = ""
    middlewares: tuple[AgentMiddleware, ...] = ()
    tool_infos: tuple[ToolInfo, ...] = ()
    before_agent: BeforeAgentNode | None = None
    output: OutputCheck | None = None
    dynamic_return_directly: bool = False
    checkpoint_store: Any = None  # the agent's bridge store (see adk.checkpointing)


class _StateRewriter:
    """Runs the middlewares' model-state hooks and writes what they return into the graph state.

    ``st.tool_infos`` stays None while the tools are the agent's own, so a run that changes nothing carries
    (and checkpoints) no copy of them and the model keeps the tools bound when the agent was built.
    """

    __slots__ = ("after", "before", "defaults")

    def __init__(self, middlewares: Sequence[AgentMiddleware], defaults: tuple[ToolInfo, ...]) -> None:
        self.before = tuple(m for m in middlewares if overrides(m, "before_model_rewrite_state"))
        self.after = tuple(m for m in middlewares if overrides(m, "after_model_rewrite_state"))
        self.defaults = defaults

    def _state(self, st: State, messages: list[Message]) -> ChatModelAgentState:
        infos = st.tool_infos if st.tool_infos is not None else self.defaults
        return ChatModelAgentState(messages, list(infos))

    def _keep(self, st: State, state: ChatModelAgentState) -> None:
        st.messages = list(state.messages)
        infos = state.tool_infos
        st.tool_infos = None if same_items(infos, self.defaults) else list(infos)

    async def before_model(self, st: State, messages: list[Message]) -> None:
        state = self._state(st, messages)
        for mw in self.before:
            state = _checked(mw, await mw.before_model_rewrite_state(state), "before_model_rewrite_state")
        self._keep(st, state)

    async def after_model(self, st: State, messages: list[Message]) -> None:
        state = self._state(st, messages)
        for mw in self.after:
            state = _checked(mw, await mw.after_model_rewrite_state(state), "after_model_rewrite_state")
        self._keep(st, state)
        if not st.messages:
            raise ValueError("no messages left in the state after the after_model_rewrite_state middlewares")


def _checked(mw: AgentMiddleware, state: object, hook: str) -> ChatModelAgentState:
    if not isinstance(state, ChatModelAgentState):
        raise TypeError(
            f"{type(mw).__qualname__}.{hook} must return a ChatModelAgentState, got {type(state).__qualname__}"
        )
    return state


def build_react(config: ReactConfig) -> Runnable[list[Message], Message]:
    """Build and compile the ReAct graph (see the module docstring)."""
    max_iterations = config.max_iterations if config.max_iterations > 0 else DEFAULT_MAX_ITERATIONS
    with_tools = config.tools_node is not None
    rewriter = _StateRewriter(config.middlewares, config.tool_infos)
    before = bool(rewriter.before)
    after = bool(rewriter.after)
    after_agent = tuple(m for m in config.middlewares if overrides(m, "after_agent"))
    return_directly = config.return_directly
    dynamic_return_directly = config.dynamic_return_directly
    agent_name = config.agent_name
    output = config.output

    def gen_state() -> State:
        st = State(agent_name=agent_name, remaining_iterations=max_iterations)
        run = current_react.get()
        if run is not None:
            run.state = st
        return st

    async def model_pre_handle(input: list[Message], st: State) -> list[Message]:
        if with_tools:
            if st.remaining_iterations <= 0:
                raise ExceedMaxIterationsError(max_iterations)
            st.remaining_iterations -= 1
        if before:
            await rewriter.before_model(st, [*st.messages, *input])
        else:
            st.messages.extend(input)
        run = current_react.get()
        if run is not None:
            run.model_calls += 1
            if run.telemetry:
                run.emit("reply.started", messages=len(st.messages))
        # a copy: the model may keep the list while the state grows
        return list(st.messages)

    async def model_post_handle(output: Message, st: State) -> Message:
        if after:
            await rewriter.after_model(st, [*st.messages, output])
        else:
            st.messages.append(output)
        last = st.messages[-1]
        run = current_react.get()
        if run is not None:
            meta = output.response_meta
            if meta is not None and meta.usage is not None:
                run.total_tokens += meta.usage.total_tokens
            if run.telemetry:
                run.emit(
                    "reply.completed",
                    content=last.content,
                    tool_calls=[c.function.name for c in last.tool_calls],
                    total_tokens=run.total_tokens,
                )
        return last

    g: Graph[list[Message], Message] = Graph[list[Message], Message](state=gen_state)
    g.add_chat_model_node(CHAT_MODEL_NODE, config.model, pre_handler=model_pre_handle, post_handler=model_post_handle)
    if config.before_agent is not None:
        g.add_lambda_node(
            BEFORE_AGENT_NODE,
            Lambda(invoke=config.before_agent, input_type=list[Message], output_type=list[Message]),
        )
        g.add_edge(START, BEFORE_AGENT_NODE)
        g.add_edge(BEFORE_AGENT_NODE, CHAT_MODEL_NODE)
    else:
        g.add_edge(START, CHAT_MODEL_NODE)

    # where a finished run goes: after_agent hooks (success only), then END
    end: str = END
    if after_agent:

        async def run_after_agent(message: Message) -> Message:
            async with process_state(State) as st:
                messages = list(st.messages)
                infos = list(st.tool_infos if st.tool_infos is not None else config.tool_infos)
            if not messages or messages[-1] is not message:
                messages.append(message)  # a return-directly tool's result is not in the state's conversation
            for mw in after_agent:
                await mw.after_agent(ChatModelAgentState(messages, infos))
            return message

        g.add_lambda_node(AFTER_AGENT_NODE, Lambda(invoke=run_after_agent, input_type=Message, output_type=Message))
        g.add_edge(AFTER_AGENT_NODE, END)
        end = AFTER_AGENT_NODE

    # a final answer (no tool call) goes to the output check when there is one
    answer = end
    if output is not None:
        _add_output_check(g, output, end)
        answer = OUTPUT_CHECK_NODE

    if not with_tools:
        g.add_edge(CHAT_MODEL_NODE, answer)
        return g.compile(
            name=agent_name or "ChatModelAgent", max_run_steps=2**31, checkpoint_store=config.checkpoint_store
        )

    async def tool_pre_handle(_input: Message, st: State) -> Message:
        msg = st.messages[-1]
        calls = msg.tool_calls
        names = return_directly if st.return_directly is None else st.return_directly
        if names:
            for call in calls:
                if call.function.name in names:
                    st.return_directly_tool_call_id = call.id
                    st.has_return_directly = True
        return msg

    g.add_tools_node(TOOL_NODE, config.tools_node, pre_handler=tool_pre_handle)
    if answer == END:
        g.add_branch(
            CHAT_MODEL_NODE,
            StreamGraphBranch(tool_call_check, {END, TOOL_NODE}, value_condition=_tool_call_check_value),
        )
    else:
        g.add_branch(
            CHAT_MODEL_NODE,
            StreamGraphBranch(
                partial(_tool_call_check_to, answer),
                {answer, TOOL_NODE},
                value_condition=partial(_tool_call_check_value_to, answer),
            ),
        )
    if not return_directly and not dynamic_return_directly:
        g.add_edge(TOOL_NODE, CHAT_MODEL_NODE)
    else:
        g.add_lambda_node(
            TO_END_CONVERTER_NODE,
            Lambda(invoke=_to_end_value, transform=_to_end_converter, input_type=list[Message], output_type=Message),
        )
        g.add_branch(
            TOOL_NODE,
            StreamGraphBranch(
                _check_return_directly,
                {CHAT_MODEL_NODE, TO_END_CONVERTER_NODE},
                value_condition=_check_return_directly_value,
            ),
        )
        g.add_edge(TO_END_CONVERTER_NODE, end)
    # iterations, not graph steps, are the limit
    return g.compile(name=agent_name or "ChatModelAgent", max_run_steps=2**31, checkpoint_store=config.checkpoint_store)


def _add_output_check(g: Graph[list[Message], Message], output: OutputCheck, end: str) -> None:
    """``OutputCheck`` validates a final answer: valid -> ``end``; invalid -> ``OutputRetry``, which asks the
    model again (its message goes to the ChatModel node like tool results do)."""

    async def check(message: Message) -> Message:
        async with process_state(State) as st:
            retry = await output.check(message, st)
            st.output_retry = [retry] if retry is not None else []
        return message

    async def route(reader: StreamReader[Message]) -> str:
        await reader.aclose()
        async with process_state(State) as st:
            return OUTPUT_RETRY_NODE if st.output_retry else end

    async def retry(_message: Message) -> list[Message]:
        async with process_state(State) as st:
            messages, st.output_retry = st.output_retry, []
        return messages

    g.add_lambda_node(OUTPUT_CHECK_NODE, Lambda(invoke=check, input_type=Message, output_type=Message))
    g.add_lambda_node(OUTPUT_RETRY_NODE, Lambda(invoke=retry, input_type=Message, output_type=list[Message]))
    g.add_branch(OUTPUT_CHECK_NODE, StreamGraphBranch(route, {end, OUTPUT_RETRY_NODE}))
    g.add_edge(OUTPUT_RETRY_NODE, CHAT_MODEL_NODE)


async def tool_call_check(reader: StreamReader[Message]) -> str:
    """Branch after the model: to the tools as soon as a chunk has tool calls, to END when the stream ends
    without one. Always closes its copy."""
    try:
        async for chunk in reader:
            if chunk.tool_calls:
                return TOOL_NODE
        return END
    finally:
        await reader.aclose()


def _tool_call_check_value(message: Message) -> str:
    """``tool_call_check`` for an invoke run's whole message."""
    return TOOL_NODE if message.tool_calls else END


async def _tool_call_check_to(answer: str, reader: StreamReader[Message]) -> str:
    """``tool_call_check`` when a final answer goes to ``answer`` (the output check or ``after_agent``)."""
    return TOOL_NODE if await tool_call_check(reader) == TOOL_NODE else answer


def _tool_call_check_value_to(answer: str, message: Message) -> str:
    return TOOL_NODE if message.tool_calls else answer


async def _check_return_directly(reader: StreamReader[list[Message | None]]) -> str:
    await reader.aclose()
    async with process_state(State) as st:
        return TO_END_CONVERTER_NODE if st.has_return_directly else CHAT_MODEL_NODE


def _check_return_directly_value(_results: list[Message | None]) -> str | Awaitable[str]:
    """``_check_return_directly`` for a value (an invoke run): the run's state read at once when the run holds it
    (every tool call of the step has finished: nothing writes it now)."""
    run = current_react.get()
    st = run.state if run is not None else None
    if st is None:
        return _check_return_directly(StreamReader.from_iterable((_results,)))
    return TO_END_CONVERTER_NODE if st.has_return_directly else CHAT_MODEL_NODE


def _pick(call_id: str, chunk: list[Message | None]) -> Message | SkipType:
    for msg in chunk:
        if msg is not None and msg.tool_call_id == call_id:
            return msg
    return SKIP


async def _to_end_converter(reader: StreamReader[list[Message | None]]) -> StreamReader[Message]:
    """The return-directly call's message, from the ToolsNode's output.

    When that call finished before the run paused, this (resumed) run never held its event, so the event is
    sent here, after the other tool events, from the saved result and action (as Eino keeps the held event in
    the state): once over both runs, and last.
    """
    async with process_state(State) as st:
        call_id = st.return_directly_tool_call_id
        action = st.return_directly_action
    picked = reader.map(partial(_pick, call_id))
    run = current_react.get()
    if run is None or run.held_call_id == call_id:
        return picked
    message: Message = await concat(picked)
    variant = MessageVariant(False, message=message, role="tool", tool_name=message.tool_name)
    run.send(AgentEvent(output=AgentOutput(variant), action=action))
    return StreamReader.from_iterable((message,))


async def _to_end_value(results: list[Message | None]) -> Message:
    """``_to_end_converter`` for a value (an invoke run): the return-directly call's message itself."""
    async with process_state(State) as st:
        call_id = st.return_directly_tool_call_id
        action = st.return_directly_action
    message = _pick(call_id, results)
    if message is SKIP:
        raise ValueError(f"return-directly tool call '{call_id}' has no result among the tool results")
    assert isinstance(message, Message)
    run = current_react.get()
    if run is not None and run.held_call_id != call_id:
        variant = MessageVariant(False, message=message, role="tool", tool_name=message.tool_name)
        run.send(AgentEvent(output=AgentOutput(variant), action=action))
    return message


# ----------------------------------------------------------------------------------------------------------
# The tool-result collector


def _pop(st: State, inp: ToolInput) -> tuple[AgentAction | None, bool]:
    """Pop the action stored by the call ``inp`` (by call id, else tool name); is it the return-directly call?

    No await between reading and writing the state: the lock could not exclude anyone more than the event loop
    already does, and taking it costs a trip through the scheduler per tool call."""
    call_id = inp.call_id
    action = st.tool_gen_actions.pop(call_id or inp.name, None) if st.tool_gen_actions else None
    held = st.has_return_directly and bool(call_id) and st.return_directly_tool_call_id == call_id
    if held:
        st.return_directly_action = action
    return action, held


async def _pop_locked(inp: ToolInput) -> tuple[AgentAction | None, bool]:
    """``_pop`` for a run whose state is not at hand (found through the graph, under its lock)."""
    async with process_state(State) as st:
        return _pop(st, inp)


def _deliver(run: ReactContext, event: AgentEvent, held: bool, call_id: str) -> None:
    if held:
        structured = run.structured
        if structured is not None and structured[0] == call_id and event.output is not None:
            event.output.structured = structured[1]  # the final-answer tool's parsed answer
        run.held = event
        run.held_call_id = call_id
    else:
        run.events.append(event)  # named by the caller


def _tool_chunk(call_id: str, name: str, chunk: str) -> Message:
    return tool_message(chunk, call_id, tool_name=name)


T = TypeVar("T")


async def _observed(run: ReactContext, inp: ToolInput, call: Awaitable[T]) -> T:
    """Await a tool call, reporting its start and failure to telemetry (an interrupt is a pause, not a failure:
    no event until the call runs on resume)."""
    if run.telemetry:
        run.emit("tool.call.started", tool=inp.name, call_id=inp.call_id, arguments=inp.arguments)
    if run.cancel is not None:  # a cancellable run's: an immediate cancel cuts the call off (adk.cancel)
        call = run.cancel.guard(call)
    try:
        return await call
    except GraphInterrupt:
        raise
    except Exception as exc:
        run.emit("tool.call.failed", tool=inp.name, call_id=inp.call_id, error=repr(exc))
        raise


def tool_result_collector() -> ToolMiddleware:
    """The collector middleware (seed 004): put it first in the ToolsNode's middlewares.

    Invokable tool: after the call, pop its action and send a tool event (tool name, call id, result, action).
    Streamable tool: pop the action, copy the result in two, send one copy as a streaming tool event and
    return the other to the node; a failure inside the stream (the tool raised, a chunk is not a string) is
    the same ``ToolExecutionError`` (``streaming=True``) for both readers. A failing call sends no event (the
    node fails); with telemetry handlers it reports ``tool.call.started`` / ``tool.call.completed`` /
    ``tool.call.failed``.
    """

    def invokable(next_: InvokableToolEndpoint) -> InvokableToolEndpoint:
        async def endpoint(inp: ToolInput) -> ToolOutput:
            run = current_react.get()
            if run is None:
                return await next_(inp)
            if run.telemetry or run.cancel is not None:
                out = await _observed(run, inp, next_(inp))
            else:
                out = await next_(inp)
            st = run.state
            action, held = _pop(st, inp) if st is not None else await _pop_locked(inp)
            if run.telemetry:
                run.emit("tool.call.completed", tool=inp.name, call_id=inp.call_id, result=out.result)
            msg = tool_message(out.result, inp.call_id, tool_name=inp.name)
            output = AgentOutput(MessageVariant(False, msg, None, "tool", inp.name))
            _deliver(run, AgentEvent(run.agent_name, run.run_path, output, action), held, inp.call_id)
            return MessageOutput(out.result, msg)  # the node's output is the event's message, not a copy

        return endpoint

    def streamable(next_: StreamableToolEndpoint) -> StreamableToolEndpoint:
        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            run = current_react.get()
            if run is None:
                return await next_(inp)
            if run.telemetry or run.cancel is not None:
                out = await _observed(run, inp, next_(inp))
            else:
                out = await next_(inp)
            st = run.state
            action, held = _pop(st, inp) if st is not None else await _pop_locked(inp)
            if run.telemetry:
                run.emit("tool.call.completed", tool=inp.name, call_id=inp.call_id, streaming=True)
            # named before the copy: the event's reader and the node's see the same ToolExecutionError
            named = named_tool_stream(out.result, inp.name, inp.call_id)
            event_copy, keep = named.copy(2)
            stream = event_copy.map(partial(_tool_chunk, inp.call_id, inp.name))
            output = AgentOutput(MessageVariant(True, None, stream, "tool", inp.name))
            _deliver(run, AgentEvent(run.agent_name, run.run_path, output, action), held, inp.call_id)
            return StreamToolOutput(keep)

        return endpoint

    return ToolMiddleware(invokable=invokable, streamable=streamable)
