"""Workflow agents: ``SequentialAgent``, ``ParallelAgent``, ``LoopAgent`` (eino-semantics 4.7; Eino's
``workflow.go``).

Each runs its sub-agents, wrapped as flow agents that may not transfer to the workflow, on the run's shared
history: a child's input is the root input and everything recorded before it, other agents' messages retold
(``adk.agents.history``). Rules (Eino's):

* **Sequential** runs the children in order. A child's run path accumulates the children before it
  (``(seq, a)``, then ``(seq, a, b)``), its interrupt addresses do not (``agent:seq;agent:b;...``). A child's last
  event carrying an action is held until the child ends: an error stops the workflow (forwarded, last), an
  interrupt pauses it (resume continues at that child), Exit stops it.
* **Loop** repeats the sequence ``max_iterations`` times (0: until something stops it). A ``BreakLoopAction`` not
  yet ``done`` is marked done, with the iteration it stopped at, and stops this loop after the current child:
  only the nearest enclosing loop (an outer loop sees it done).
* **Parallel** runs the children concurrently, each on its own lane of the history (it sees what was recorded
  before the workflow, then its own); their events are handed on as they come, and the lanes are joined after, in
  the order their events were recorded. Pauses of several children become one interrupt; resume continues only
  the children that paused (the others' events are kept with the checkpoint). An error stops the other children
  and ends the workflow with it.

No background task outlives a call: the parallel agent advances its children together inside each step it is
asked for (a task group per step), handing on what they produced in the order it arrived, so a fast child's
events wait at most for its siblings' next events.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any

import anyio

from adk.agent import Agent, AgentContext, AgentEvents, History, ResumeInfo, check_agent
from adk.agents.agent_tool import lineage
from adk.agents.flow import FlowAgent, _dump_record, _load_record, set_sub_agents, to_flow
from adk.agents.history import Retelling
from adk.cancel import cancel_contexts
from adk.events import AgentAction, AgentEvent, AgentInput, AgentInterruptInfo
from compose.errors import CheckpointError

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]

_KIND = "pyeino.workflow"


class _WorkflowAgent:
    """What the three workflow agents share: their children (as flow agents) and their saved state."""

    _is_workflow_agent = True
    runs_agents = True  # its children answer the run's stop request, and it does between them (adk.cancel)
    mode = "workflow"

    def __init__(self, name: str, description: str, sub_agents: Sequence[Agent]) -> None:
        if not name:
            raise ValueError(f"{type(self).__name__}: agent 'Name' is required")
        for i, a in enumerate(sub_agents):
            check_agent(a, f"{type(self).__name__} '{name}': sub_agents[{i}]")
        self.name = name
        self.description = description
        children = [to_flow(a, disallow_transfer_to_parent=True) for a in sub_agents]
        self._flow = set_sub_agents(self, children)  # type: ignore[arg-type]  # run() is the subclasses'
        self.sub_agents: list[FlowAgent] = self._flow.sub_agents

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, sub_agents={[a.name for a in self.sub_agents]})"

    def _state(self, info: ResumeInfo) -> dict[str, Any]:
        state = info.state
        if not isinstance(state, dict) or state.get("kind") != _KIND or state.get("agent") != self.name:
            raise CheckpointError(
                f"agent '{self.name}': the saved run is not this {self.mode} agent's", reason="payload"
            )
        return state

    def _pause(self, event: AgentEvent, state: dict[str, Any]) -> AgentEvent:
        """The child's interrupt event as this agent's (Eino keeps the child's name and run path on it)."""
        assert event.action is not None and event.action.interrupted is not None
        info = event.action.interrupted
        child_state = info.resume_state
        if child_state is not None:
            info.resume_state = {"kind": _KIND, "agent": self.name, **state, "child": child_state}
        return event


class SequentialAgent(_WorkflowAgent):
    """Runs ``sub_agents`` one after the other (see the module docstring)."""

    mode = "sequential"

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        return _run_children(self, ctx, 0, 0, None, _Outcome(), Retelling(), loop=False)

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AgentEvents:
        state = self._state(info)
        return _run_children(self, ctx, 0, int(state["index"]), info, _Outcome(), Retelling(), loop=False)


class LoopAgent(_WorkflowAgent):
    """Runs ``sub_agents`` in order, ``max_iterations`` times (0: until an exit, an error, an interrupt or a
    ``BreakLoopAction`` stops it; see the module docstring)."""

    mode = "loop"

    def __init__(self, name: str, description: str, sub_agents: Sequence[Agent], max_iterations: int = 0) -> None:
        if max_iterations < 0:
            raise ValueError(f"LoopAgent '{name}': max_iterations must be 0 (unbounded) or more, got {max_iterations}")
        super().__init__(name, description, sub_agents)
        self.max_iterations = max_iterations

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        return self._loop(ctx, 0, 0, None)

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AgentEvents:
        state = self._state(info)
        return self._loop(ctx, int(state["iteration"]), int(state["index"]), info)

    async def _loop(
        self, ctx: AgentContext, iteration: int, start: int, resume: ResumeInfo | None
    ) -> AsyncGenerator[AgentEvent, None]:
        if not self.sub_agents:
            return
        i = iteration
        retelling = Retelling()
        while self.max_iterations == 0 or i < self.max_iterations:
            outcome = _Outcome()
            async with aclosing(_run_children(self, ctx, i, start, resume, outcome, retelling, loop=True)) as events:
                async for event in events:
                    yield event
            if outcome.stop:
                return
            resume, start = None, 0
            i += 1


class _Outcome:
    __slots__ = ("stop",)

    def __init__(self) -> None:
        self.stop = False


async def _run_children(
    wf: _WorkflowAgent,
    ctx: AgentContext,
    iteration: int,
    start: int,
    resume: ResumeInfo | None,
    outcome: _Outcome,
    retelling: Retelling,
    *,
    loop: bool,
) -> AsyncGenerator[AgentEvent, None]:
    """One pass over the children from ``start`` (Sequential: the only one; Loop: iteration ``iteration``), the
    history retold in ``retelling`` as it grows."""
    children = wf.sub_agents
    # the run path accumulates every child run before (in earlier iterations too)
    before = [c.name for _ in range(iteration) for c in children] + [c.name for c in children[:start]]
    path = (*ctx.run_path, *before)
    cancel = ctx.session.cancel.for_children(ctx.addresses) if ctx.session.cancel is not None else None
    session, addresses, history = ctx.session, ctx.addresses, ctx.history
    nothing = AgentInput([], session.enable_streaming)  # a child's input is the history (flow agents)
    for j in range(start, len(children)):
        child = children[j]
        name = child.name
        child_path = (*path, name)
        child_ctx = AgentContext(session, child_path, (*addresses, name), history)
        broke = False  # this child's run broke the loop (kept across a pause of the same child)
        if resume is not None and wf._state(resume).get("child") is not None:
            saved = wf._state(resume)
            broke = bool(saved.get("broke"))
            events = child.resume(ResumeInfo(saved["child"], resume.targets, resume.enable_streaming), child_ctx)
            resume = None
        else:
            if cancel is not None and resume is None and cancel.stops_here([], [f"agent:{name}"]):
                # a cancel between two children (any mode: no child is working): resume starts child j
                outcome.stop = True
                state: dict[str, Any] = {"kind": _KIND, "agent": wf.name, "index": j, "child": None}
                if loop:
                    state["iteration"] = iteration
                info = AgentInterruptInfo(cancel_contexts(ctx.addresses, "CancelAtTransition"), None, state)
                yield AgentEvent(wf.name, ctx.run_path, action=AgentAction(interrupted=info))
                return
            resume = None
            events = child.run_retelling(nothing, child_ctx, retelling)
        path = child_path
        held: AgentEvent | None = None
        current: AgentEvent | None = None  # received, neither handed on nor held yet
        try:
            async for event in events:
                current = event
                if event.error is not None:
                    if held is not None:
                        handed, held = held, None
                        yield handed
                    outcome.stop = True
                    current = None
                    yield event
                    return
                if held is not None:
                    broke |= loop and _mark_break(held, iteration)
                    handed, held = held, None
                    yield handed
                current = None
                if event.action is not None:
                    held = event
                    continue
                yield event
        except BaseException:
            # closed (a Parallel sibling failed, the caller stopped) while holding events: their streams are ours
            with anyio.CancelScope(shield=True):
                for dropped in (held, current):
                    if dropped is not None:
                        await dropped.aclose()
            raise
        finally:
            await events.aclose()
        if held is None:
            if broke:
                outcome.stop = True
                return
            continue
        action = held.action
        assert action is not None
        broke |= loop and _mark_break(held, iteration)
        if action.interrupted is not None:
            outcome.stop = True
            state = {"index": j}
            if loop:
                state["iteration"] = iteration
                if broke:
                    state["broke"] = True
            yield wf._pause(held, state)
            return
        yield held
        if action.exit or broke:
            outcome.stop = True
            return


def _mark_break(event: AgentEvent, iteration: int) -> bool:
    """A break-loop action not acted on yet is this loop's: mark it done at ``iteration``."""
    action = event.action
    if action is None or action.break_loop is None or action.break_loop.done:
        return False
    action.break_loop.done = True
    action.break_loop.current_iterations = iteration
    return True


async def _pull(i: int, events: AgentEvents, arrived: list[tuple[int, AgentEvent | None]]) -> None:
    """One child's next event (None at its end), appended in the order the children produce them."""
    try:
        event: AgentEvent = await events.__anext__()
    except StopAsyncIteration:
        arrived.append((i, None))
        return
    arrived.append((i, event))


class ParallelAgent(_WorkflowAgent):
    """Runs ``sub_agents`` concurrently (see the module docstring)."""

    mode = "parallel"

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        return self._parallel(ctx, None)

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AgentEvents:
        return self._parallel(ctx, info)

    async def _parallel(self, ctx: AgentContext, resume: ResumeInfo | None) -> AsyncGenerator[AgentEvent, None]:
        if not self.sub_agents:
            return
        state = self._state(resume) if resume is not None else None
        if ctx.session.cancel is not None:
            ctx.session.cancel.for_children(ctx.addresses)  # a cancellable run: the children are nested
        lanes: list[History] = [ctx.session.track(ctx.records.fork()) for _ in self.sub_agents]
        runs: dict[int, AgentEvents] = {}
        for i, child in enumerate(self.sub_agents):
            child_ctx = AgentContext(ctx.session, (*ctx.run_path, child.name), (*ctx.addresses, child.name), lanes[i])
            if state is not None:
                saved = state["lanes"].get(str(i))
                if saved:
                    lanes[i].restore([_load_record(r) for r in saved])
                paused = state["paused"].get(str(i))
                if paused is None:
                    continue  # it finished before the pause: its events are in its lane
                assert resume is not None
                known = set(paused["ids"])
                targets = {k: v for k, v in resume.targets.items() if k in known}
                runs[i] = child.resume(ResumeInfo(paused["state"], targets, resume.enable_streaming), child_ctx)
            else:
                runs[i] = child.run(AgentInput([], ctx.session.enable_streaming), child_ctx)
        pauses: dict[int, AgentInterruptInfo] = {}
        unsent: list[tuple[int, AgentEvent | None]] = []  # a round's events not handed out (closed if dropped)
        try:
            while runs:
                arrived: list[tuple[int, AgentEvent | None]] = []
                async with anyio.create_task_group() as tg:
                    for i, events in runs.items():
                        tg.start_soon(_pull, i, events, arrived)
                for k, (i, event) in enumerate(arrived):
                    unsent = arrived[k + 1 :]
                    if event is None:
                        await runs.pop(i).aclose()
                        continue
                    action = event.action
                    if action is not None and action.interrupted is not None:
                        pauses[i] = action.interrupted
                        await runs.pop(i).aclose()
                        continue
                    if event.error is not None:
                        yield event
                        return
                    yield event
                unsent = []
        finally:
            with anyio.CancelScope(shield=True):
                for _, dropped in unsent:
                    if dropped is not None:
                        await dropped.aclose()
                for events in runs.values():
                    await events.aclose()
        if not pauses:
            ctx.records.join(lanes)
            return
        contexts = [c for i in sorted(pauses) for c in pauses[i].interrupt_contexts]
        resumable = all(p.resume_state is not None for p in pauses.values())
        new_state: dict[str, Any] | None = None
        if resumable:
            new_state = {
                "kind": _KIND,
                "agent": self.name,
                "lanes": {str(i): [_dump_record(r) for r in await lane.own()] for i, lane in enumerate(lanes)},
                "paused": {
                    str(i): {"state": p.resume_state, "ids": [c.id for c in lineage(p.interrupt_contexts)]}
                    for i, p in pauses.items()
                },
            }
        yield AgentEvent(
            self.name,
            ctx.run_path,
            action=AgentAction(interrupted=AgentInterruptInfo(contexts, None, resume_state=new_state)),
        )
