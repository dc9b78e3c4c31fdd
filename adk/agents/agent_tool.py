"""``AgentTool``: an agent as a tool another agent calls (eino-semantics 4.7; Eino's ``agent_tool.go``).

The tool is named and described after the agent. By default it takes ``{"request": "..."}`` and gives the agent
that text as one user message; with ``input_schema`` the raw JSON arguments are the user message; with
``full_chat_history_as_input`` the calling agent's conversation is passed instead, retold as Eino does
(:func:`~adk.agents.history.chat_history_for_agent_tool`). It answers with the text of the inner run's last
message.

The inner agent runs as a Runner would run it (one code path: ``adk.runner.AgentRun``) in a session of its own
that shares the caller's session values, telemetry and streaming mode. Its events reach the caller only with
``ToolsConfig(emit_internal_events=True)``, their run path prefixed with the caller's; they are never part of the
caller's history, and their Exit, TransferToAgent and BreakLoop actions are dropped (they do not leak out of the
tool).

**Interrupts.** When the inner agent pauses (a tool waiting for approval, say), the tool pauses its call with a
composite interrupt whose children are the inner interrupts, their ids kept, so the caller's pause shows them
under the tool: ``agent:outer;tool:<agent tool>:<call id>;agent:inner;tool:pay:c1``. Its saved state is the
inner run's checkpoint (JSON). ``Runner.resume(checkpoint_id, targets={inner_id: data})`` re-runs the tool call,
which resumes the inner agent where it stopped, with the targets that are its own: tools that finished inside
it do not run again, also two agent tools deep.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from adk.agent import Agent, RunSession, check_agent
from adk.agents.history import chat_history_for_agent_tool
from adk.chat_model._context import current_react
from adk.checkpointing import CheckpointBinding
from adk.events import AgentAction, AgentEvent, AgentInput, AgentOutput, MessageVariant
from compose.checkpoint import InMemoryCheckPointStore
from compose.interrupt import InterruptCtx, InterruptSignal, get_interrupt_state, get_resume_data
from compose.schema import Message, ToolInfo, user_message
from compose.tools.arguments import parse_arguments

__all__ = ["AgentTool"]

_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": "request to be processed"}},
    "required": ["request"],
}
_KEY = "agent-tool"  # the inner run's checkpoint id in its private store
_STATE_KIND = "pyeino.agent_tool"


class AgentTool:
    """An agent as a tool (see the module docstring).

    Args:
        agent: the agent to run; its name and description (both non-empty) name and describe the tool.
        full_chat_history_as_input: give the agent the calling agent's conversation instead of the request.
        input_schema: the JSON schema of the tool's arguments (a dict, or a pydantic model class); the raw JSON
            arguments become the agent's user message.

    Raises:
        ValueError: the agent's name or description is empty.
        TypeError: ``agent`` is not an agent.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        full_chat_history_as_input: bool = False,
        input_schema: Mapping[str, Any] | type[BaseModel] | None = None,
    ) -> None:
        check_agent(agent, "AgentTool(agent)")
        if not agent.name:
            raise ValueError("agent tool requires a non-empty Name")
        if not getattr(agent, "description", ""):
            raise ValueError(f"agent tool '{agent.name}' requires a non-empty Description")
        self.agent = agent
        self.full_chat_history_as_input = full_chat_history_as_input
        if isinstance(input_schema, type) and issubclass(input_schema, BaseModel):
            schema: dict[str, Any] | None = input_schema.model_json_schema()
        else:
            schema = dict(input_schema) if input_schema is not None else None
        self.input_schema = schema
        self._info = ToolInfo(name=agent.name, description=agent.description, parameters=schema or _REQUEST_SCHEMA)

    def info(self) -> ToolInfo:
        return self._info

    def __repr__(self) -> str:
        return f"AgentTool({self.agent.name!r})"

    def _input(self, arguments: str) -> list[Message]:
        if self.full_chat_history_as_input:
            parent = current_react.get()
            st = parent.state if parent is not None else None
            messages = list(st.messages) if st is not None else []
            caller = parent.agent_name if parent is not None else ""
            return chat_history_for_agent_tool(messages, agent_name=caller, dest_agent_name=self.agent.name)
        if self.input_schema is not None:
            return [user_message(arguments)]
        args = parse_arguments(self.agent.name, arguments, _REQUEST_SCHEMA, required=["request"])
        return [user_message(args["request"])]

    async def run(self, arguments: str) -> str:
        """Run the agent on the call's input and return the text of its last message."""
        from adk.runner import AgentRun

        parent = current_react.get()
        outer = parent.session if parent is not None else None
        session = RunSession(
            values=outer.values if outer is not None else {},
            enable_streaming=outer.enable_streaming if outer is not None else False,
            telemetry=outer.telemetry if outer is not None else (),
            resumable=outer.resumable if outer is not None else False,
        )
        if outer is not None and outer.cancel is not None:  # a cancellable run: the inner agent is nested
            session.cancel = outer.cancel.inner()
        store = InMemoryCheckPointStore() if session.resumable else None
        was_interrupted, has_state, state = get_interrupt_state()
        if was_interrupted and has_state and isinstance(state, dict) and state.get("kind") == _STATE_KIND:
            assert store is not None, "a run that saved an agent tool's state is resumable"
            await store.set(_KEY, str(state["checkpoint"]).encode())
            known = set(state["interrupts"])
            targets = {k: v for k, v in get_resume_data().items() if k in known}
            binding = CheckpointBinding(store, _KEY, resuming=True, targets=targets)
            run = AgentRun(self.agent, session, checkpoint=binding)
        else:
            messages = self._input(arguments)
            session.root_input = list(messages)
            checkpoint = CheckpointBinding(store, _KEY) if store is not None else None
            input = AgentInput(messages, session.enable_streaming)
            run = AgentRun(self.agent, session, input=input, checkpoint=checkpoint)
        emit = parent is not None and parent.emit_internal_events
        last: AgentEvent | None = None
        try:
            async with run:
                async for event in run:
                    if last is not None:
                        await last.aclose()
                    last = None
                    if event.error is not None:
                        raise event.error
                    interrupted = event.action is not None and event.action.interrupted is not None
                    if emit and not interrupted:
                        assert parent is not None
                        event = _forward(event, parent.run_path, parent.events.append)
                    last = event
            if last is not None and last.action is not None and last.action.interrupted is not None:
                raise await self._interrupt(last, store)
            if last is None or last.message is None:
                return ""
            return (await last.message.get_message()).content
        finally:
            if last is not None:
                await last.aclose()

    async def _interrupt(self, event: AgentEvent, store: InMemoryCheckPointStore | None) -> InterruptSignal:
        info = event.action.interrupted if event.action is not None else None
        assert info is not None
        contexts = info.interrupt_contexts
        subs = _signals(contexts)
        if store is None:  # the caller's run cannot resume: no state to keep
            return InterruptSignal("agent tool interrupt", subs=subs)
        data = await store.get(_KEY)
        assert data is not None, "the inner run saved its checkpoint before its interrupt event"
        state = {
            "kind": _STATE_KIND,
            "checkpoint": data.decode(),
            "interrupts": sorted({c.id for c in lineage(contexts)}),
        }
        return InterruptSignal("agent tool interrupt", state=state, has_state=True, subs=subs)


def _forward(event: AgentEvent, prefix: tuple[str, ...], send: Any) -> AgentEvent:
    """Hand a copy of the inner event to the caller (its run path under the caller's, flow actions dropped);
    return the event the tool keeps (its stream, if any, is the copy the tool may read)."""
    mine = event
    variant = event.message
    if variant is not None and variant.message_stream is not None and variant.message is None:
        ours, theirs = variant.message_stream.copy(2)
        variant.message_stream = theirs
        kept = MessageVariant(True, None, ours, variant.role, variant.tool_name)
        mine = AgentEvent(event.agent_name, event.run_path, AgentOutput(kept), event.action, event.error)
    action = event.action
    if action is not None and (action.exit or action.transfer_to_agent is not None or action.break_loop is not None):
        action = AgentAction(customized=action.customized) if action.customized is not None else None
    send(AgentEvent(event.agent_name, (*prefix, *event.run_path), event.output, action, event.error, internal=True))
    return mine


def lineage(contexts: list[InterruptCtx]) -> list[InterruptCtx]:
    """The contexts and all their ancestors, each once, ancestors first."""
    seen: dict[str, InterruptCtx] = {}
    for leaf in contexts:
        chain: list[InterruptCtx] = []
        c: InterruptCtx | None = leaf
        while c is not None and c.id not in seen:
            chain.append(c)
            c = c.parent
        for item in reversed(chain):
            seen[item.id] = item
    return list(seen.values())


def _signals(contexts: list[InterruptCtx]) -> list[InterruptSignal]:
    """The inner pause as interrupt signals under the tool's: one per context (ids kept), children under their
    parents, each with the part of its address below its parent's as segment."""
    made: dict[str, InterruptSignal] = {}
    tops: list[InterruptSignal] = []
    for ctx in lineage(contexts):
        parent = ctx.parent
        above = parent.address if parent is not None else ""
        segment = ctx.address[len(above) + 1 :] if above and ctx.address.startswith(above + ";") else ctx.address
        sig = InterruptSignal(ctx.info, segment=segment, id=ctx.id)
        made[ctx.id] = sig
        if parent is not None and parent.id in made:
            made[parent.id].subs.append(sig)
        else:
            tops.append(sig)
    return tops
