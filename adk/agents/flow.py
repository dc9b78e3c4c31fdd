"""Sub-agents and transfer (eino-semantics 4.7; Eino's ``flow.go`` and ``deterministic_transfer.go``).

``set_sub_agents(parent, children)`` returns a :class:`FlowAgent`: the parent gets the ``transfer_to_agent`` tool
and Eino's transfer instruction listing the agents it may hand over to (its children and, unless disallowed, its
own parent). A flow agent runs its agent on the history of the run (:func:`~adk.agents.history.build_agent_input`:
the root input, then every recorded event, other agents' messages retold), records its agent's own events for
the agents after it, and when its agent ends, the last action among events of exactly its own run path decides:
Exit or an interrupt stop; ``TransferToAgent`` runs the target (a child, or the parent) with the rebuilt
history, its run path under this one's. Events of nested runs (an agent tool's inner agent) are handed on but
neither recorded nor acted on.

Pauses are resumable: a flow agent's interrupt state says which agent was running (itself, or the one it
transferred to) and that agent's own state; ``resume`` goes back to it, and a resumed agent that then transfers
goes on as a fresh run would.

``agent_with_deterministic_transfer_to(agent, names)``: when ``agent`` ends (not interrupted, not exited), a
transfer to each name follows, as the synthetic assistant/tool event pairs Eino sends; a flow agent wrapped so
reads a history of its own (its caller still records what it does).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any

from adk.agent import Agent, AgentContext, AgentEvents, History, ResumableAgent, ResumeInfo, check_agent
from adk.agents.history import HistoryRewriter, RecordedEvent, Retelling
from adk.cancel import RESTART, stoppable
from adk.chat_model.instruction import gen_transfer_messages
from adk.errors import TransferError
from adk.events import AgentAction, AgentEvent, AgentInput, AgentOutput, MessageVariant
from compose.errors import CheckpointError
from compose.schema import Message

__all__ = [
    "FlowAgent",
    "TransferError",
    "agent_with_deterministic_transfer_to",
    "agent_with_options",
    "set_sub_agents",
]

_FLOW_KIND = "pyeino.flow"
_TRANSFER_KIND = "pyeino.deterministic_transfer"


def is_workflow(agent: Any) -> bool:
    return bool(getattr(agent, "_is_workflow_agent", False))


class _Wrapping:
    """An agent around ``agent``: it goes by the wrapped agent's name and description."""

    agent: Agent
    runs_agents = True  # the agents it runs answer the run's stop request (adk.cancel)

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def description(self) -> str:
        return self.agent.description


class FlowAgent(_Wrapping):
    """An agent in a multi-agent tree (see the module docstring): made by :func:`set_sub_agents` and
    :func:`agent_with_options`, and around every child of a workflow agent."""

    def __init__(
        self,
        agent: Agent,
        *,
        disallow_transfer_to_parent: bool = False,
        history_rewriter: HistoryRewriter | None = None,
    ) -> None:
        check_agent(agent, "FlowAgent(agent)")
        self.agent = agent
        self._workflow = is_workflow(agent)
        self.sub_agents: list[FlowAgent] = []
        self.parent: FlowAgent | None = None
        self.disallow_transfer_to_parent = disallow_transfer_to_parent
        self.history_rewriter = history_rewriter

    def __repr__(self) -> str:
        subs = [a.name for a in self.sub_agents]
        parent = self.parent.name if self.parent is not None else None
        return f"FlowAgent({self.name!r}, sub_agents={subs}, parent={parent!r})"

    def find(self, name: str) -> FlowAgent | None:
        """The agent a transfer to ``name`` goes to: a sub-agent, else the parent (flow.go ``getAgent``)."""
        for sub in self.sub_agents:
            if sub.name == name:
                return sub
        if self.parent is not None and self.parent.name == name:
            return self.parent
        return None

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        return self.run_retelling(input, ctx, None)

    def run_retelling(self, input: AgentInput, ctx: AgentContext, retelling: Retelling | None) -> AgentEvents:
        """:meth:`run`, keeping the run's history retold in ``retelling`` (the one of the agent that ran before
        it in the same run: a Sequential's previous child, the agent that transferred to this one)."""
        if self._workflow:  # a workflow agent runs its children itself (flow.go Run)
            return self.agent.run(input, ctx)
        return self._drive(ctx, None, input, retelling if retelling is not None else Retelling())

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AgentEvents:
        if self._workflow:
            assert isinstance(self.agent, ResumableAgent)
            return self.agent.resume(info, ctx)
        return self._resume(info, ctx)

    async def _input(self, input: AgentInput, ctx: AgentContext, retelling: Retelling) -> AgentInput:
        session = ctx.session
        root = session.root_input if session.root_input else input.messages
        messages = await retelling.input(
            ctx.records, root, session.skip_transfer_messages, self.name, self.history_rewriter
        )
        return AgentInput(messages, session.enable_streaming)

    async def _resume(self, info: ResumeInfo, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
        state = _flow_state(info.state, self.name)
        active = state["active"]
        inner = ResumeInfo(state["state"], info.targets, info.enable_streaming)
        if active:
            dest = self.find(active)
            if dest is None:
                yield AgentEvent(self.name, ctx.run_path, error=TransferError(active, self.name))
                return
            events = dest.resume(inner, ctx.child(dest.name))
            try:
                async for event in events:
                    yield _paused_under(event, self.name, active)
            finally:
                await events.aclose()
            return
        agent = self.agent
        if inner.state == RESTART:  # a cancel cut it off where it kept no state: it runs afresh on the history
            driven = self._drive(ctx, None, AgentInput([], ctx.session.enable_streaming), Retelling())
        elif not isinstance(agent, ResumableAgent):
            error = TypeError(f"agent '{self.name}' ({type(agent).__qualname__}) cannot resume: it has no resume()")
            yield AgentEvent(self.name, ctx.run_path, error=error)
            return
        else:
            driven = self._drive(ctx, agent.resume(inner, ctx), None, None)
        async with aclosing(driven):
            async for event in driven:
                yield event

    async def _drive(
        self, ctx: AgentContext, events: AgentEvents | None, input: AgentInput | None, retelling: Retelling | None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the agent on the history (``events``: the run resumed instead), hand on its events, record its own,
        then act on its last own action: a transfer runs the target here, its pause becoming this agent's."""
        if events is None:
            assert input is not None and retelling is not None
            try:
                events = self.agent.run(await self._input(input, ctx, retelling), ctx)
            except Exception as exc:  # e.g. an instruction placeholder naming no session value: the run's error
                yield AgentEvent(self.name, ctx.run_path, error=exc)
                return
        if ctx.session.cancel is not None:  # a cancellable run: an agent that does not answer it is cut off
            events = stoppable(events, self.agent, ctx.session.cancel, ctx.addresses)
        last: AgentAction | None = None
        path, records = ctx.run_path, ctx.records
        try:
            async for event in events:
                if not event.run_path:  # a custom agent's event: name its emitter (flow.go run)
                    event.agent_name, event.run_path = self.name, path
                action = event.action
                if action is not None and action.interrupted is not None:
                    action.interrupted.resume_state = _wrap(self.name, "", action.interrupted.resume_state)
                    yield event
                    return
                if tuple(event.run_path) == path:
                    records.record(event)
                    last = action
                yield event
        finally:
            await events.aclose()
        if last is None or last.exit or last.transfer_to_agent is None:
            return
        dest_name = last.transfer_to_agent.dest_agent_name
        dest = self.find(dest_name)
        if dest is None:
            yield AgentEvent(self.name, ctx.run_path, error=TransferError(dest_name, self.name))
            return
        # the history is its input (flow.go: nil input)
        events = dest.run_retelling(AgentInput([], ctx.session.enable_streaming), ctx.child(dest_name), retelling)
        try:
            async for event in events:
                yield _paused_under(event, self.name, dest_name)
        finally:
            await events.aclose()


def _paused_under(event: AgentEvent, name: str, active: str) -> AgentEvent:
    """An event of the agent ``active`` that flow agent ``name`` transferred to: its pause becomes ``name``'s."""
    action = event.action
    if action is not None and action.interrupted is not None:
        action.interrupted.resume_state = _wrap(name, active, action.interrupted.resume_state)
    return event


def _wrap(name: str, active: str, state: Any) -> dict[str, Any] | None:
    if state is None:
        return None
    return {"kind": _FLOW_KIND, "agent": name, "active": active, "state": state}


def _flow_state(state: Any, name: str) -> dict[str, Any]:
    if not isinstance(state, dict) or state.get("kind") != _FLOW_KIND or state.get("agent") != name:
        raise CheckpointError(f"agent '{name}': the saved run is not this flow agent's", reason="payload")
    return state


_flows: weakref.WeakKeyDictionary[Any, FlowAgent] = weakref.WeakKeyDictionary()


def to_flow(agent: Agent, *, disallow_transfer_to_parent: bool = False) -> FlowAgent:
    """``agent`` as a flow agent: itself if it is one, else its one wrapper (made on first need)."""
    if isinstance(agent, FlowAgent):
        flow = agent
    else:
        check_agent(agent, "a sub-agent")
        found = _flows.get(agent)
        if found is None:
            found = FlowAgent(agent)
            _flows[agent] = found
        flow = found
    if disallow_transfer_to_parent:
        flow.disallow_transfer_to_parent = True
    return flow


def agent_with_options(
    agent: Agent, *, disallow_transfer_to_parent: bool = False, history_rewriter: HistoryRewriter | None = None
) -> FlowAgent:
    """``agent`` as a flow agent with options (Eino's ``AgentWithOptions``: ``WithDisallowTransferToParent``,
    ``WithHistoryRewriter``)."""
    flow = to_flow(agent, disallow_transfer_to_parent=disallow_transfer_to_parent)
    if history_rewriter is not None:
        flow.history_rewriter = history_rewriter
    return flow


def set_sub_agents(parent: Agent, sub_agents: Sequence[Agent]) -> FlowAgent:
    """Make ``sub_agents`` the agents ``parent`` may transfer to; each gets ``parent`` as its one parent.

    Returns the parent as a :class:`FlowAgent` (run it with a ``Runner``).

    Raises:
        ValueError: ``parent`` already has sub-agents, a child already has a parent, two children share a name,
            or an agent has already run (it is frozen then).
        TypeError: something is not an agent.
    """
    flow = to_flow(parent)
    if flow.sub_agents:
        raise ValueError(f"agent '{flow.name}': its sub-agents have already been set")
    children = [to_flow(a) for a in sub_agents]
    names = [c.name for c in children]
    duplicate = sorted({n for n in names if names.count(n) > 1})
    if duplicate:
        raise ValueError(f"agent '{flow.name}': sub-agents {duplicate} share a name")
    for child in children:
        if child.parent is not None:
            raise ValueError(
                f"agent '{child.name}' has already been set as a sub-agent of agent '{child.parent.name}' (a second "
                f"parent: '{flow.name}')"
            )
    hook = getattr(flow.agent, "on_set_sub_agents", None)
    if hook is not None:
        hook([c.agent for c in children])
    for child in children:
        child.parent = flow
        on_parent = getattr(child.agent, "on_set_as_sub_agent", None)
        if on_parent is not None:
            on_parent(flow.agent)
            if child.disallow_transfer_to_parent:
                child.agent.on_disallow_transfer_to_parent()  # type: ignore[attr-defined]
        flow.sub_agents.append(child)
    return flow


# ---------------------------------------------------------------------------------------------------------------
# Deterministic transfer


class DeterministicTransfer(_Wrapping):
    """``agent``, then a transfer to each of ``to_agent_names`` (see :func:`agent_with_deterministic_transfer_to`)."""

    def __init__(self, agent: Agent, to_agent_names: Sequence[str]) -> None:
        check_agent(agent, "agent_with_deterministic_transfer_to(agent)")
        self.agent = agent
        self.to_agent_names = list(to_agent_names)

    def __repr__(self) -> str:
        return f"DeterministicTransfer({self.agent!r}, to={self.to_agent_names})"

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        if isinstance(self.agent, FlowAgent):
            history = ctx.session.track(ctx.records.isolated())
            return self._forward(self.agent.run(input, ctx.with_history(history)), history)
        return self._forward(self.agent.run(input, ctx), None)

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AgentEvents:
        state = info.state
        if not isinstance(state, dict) or state.get("kind") != _TRANSFER_KIND or state.get("agent") != self.name:
            raise CheckpointError(
                f"agent '{self.name}': the saved run is not a deterministic transfer's", reason="payload"
            )
        inner = ResumeInfo(state["state"], info.targets, info.enable_streaming)
        agent = self.agent
        if not isinstance(agent, ResumableAgent):
            raise TypeError(f"agent '{self.name}' ({type(agent).__qualname__}) cannot resume: it has no resume()")
        if state.get("history") is not None:
            history = ctx.session.track(ctx.records.isolated())
            history.restore([_load_record(r) for r in state["history"]])
            return self._forward(agent.resume(inner, ctx.with_history(history)), history)
        return self._forward(agent.resume(inner, ctx), None)

    async def _forward(self, events: AgentEvents, history: History | None) -> AsyncGenerator[AgentEvent, None]:
        last: AgentEvent | None = None
        try:
            async for event in events:
                action = event.action
                if action is not None and action.interrupted is not None:
                    saved = [_dump_record(r) for r in await history.own()] if history is not None else None
                    inner_state = action.interrupted.resume_state
                    if inner_state is not None:
                        action.interrupted.resume_state = {
                            "kind": _TRANSFER_KIND,
                            "agent": self.name,
                            "state": inner_state,
                            "history": saved,
                        }
                    yield event
                    return
                last = event
                yield event
        finally:
            await events.aclose()
        if last is not None and last.action is not None and last.action.exit:
            return
        if last is not None and last.error is not None:
            return
        for name in self.to_agent_names:
            call, result = gen_transfer_messages(name)
            yield AgentEvent(output=AgentOutput(MessageVariant(False, call, role="assistant")))
            variant = MessageVariant(False, result, role="tool", tool_name=result.tool_name)
            yield AgentEvent(output=AgentOutput(variant), action=AgentAction.new_transfer_to_agent(name))


def _dump_record(r: RecordedEvent) -> dict[str, Any]:
    """A recorded event as JSON data (a paused run's saved history)."""
    message = r.message.model_dump(mode="json") if r.message is not None else None
    return {"agent_name": r.agent_name, "message": message, "role": r.role, "transfer": r.transfer}


def _load_record(data: dict[str, Any]) -> RecordedEvent:
    message = Message.model_validate(data["message"]) if data.get("message") is not None else None
    return RecordedEvent(str(data["agent_name"]), message, data.get("role"), bool(data.get("transfer")))


def agent_with_deterministic_transfer_to(agent: Agent, to_agent_names: Sequence[str]) -> DeterministicTransfer:
    """``agent``, followed, whenever it ends without exiting or pausing, by a transfer to each of
    ``to_agent_names`` (Eino's ``AgentWithDeterministicTransferTo``): the supervisor pattern's way back."""
    return DeterministicTransfer(agent, to_agent_names)
