"""One ``ChatModelAgent`` run: its events as they happen, from the compiled ReAct graph (eino-semantics 4.4-4.6).

No background task: ``ReactRun`` drives the graph one superstep at a time (``GraphRun.step()``) and, between
supersteps, yields the events queued so far (the event-emitting model, the tool-result collector and the error
path append to an unbounded list synchronously). Consequences:

* a streaming model event is delivered right after the model node returned its stream, so the consumer reads
  tokens live while the model generates (its copy drives the model stream; the graph's copy buffers and is
  concatenated by the post handler at the next superstep);
* events produced inside one superstep (parallel tool results) are delivered when that superstep ends, in
  completion order, the return-directly tool's event last;
* an error ends the run with exactly one event whose ``error`` is set (agent errors such as
  ``ExceedMaxIterationsError`` are unwrapped from the graph's ``NodeRunError``), then the iterator ends.

**Interrupts.** When the graph pauses, the events queued so far are delivered, then one last event whose
``action.interrupted`` holds the contexts (addresses of agent and tool segments only) and, as
``resume_state``, the graph's checkpoint and the run's counters (:class:`ReactResumeState`, JSON): the Runner
saves it, and :meth:`ChatModelAgent.resume` continues from it. The graph checkpoints into the agent's private
in-memory bridge store under a key of this run's own, which the run removes when it ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, ValidationError

from adk._callbacks import agent_callbacks
from adk._run import current_run
from adk.chat_model._context import ReactContext
from adk.checkpointing import agent_contexts
from adk.errors import AgentError, AgentTimeoutError
from adk.events import AgentAction, AgentEvent, AgentInterruptInfo
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import CheckpointError, GraphInterrupt
from compose.lowlevel import Closing
from compose.runnable import RunHandle, Runnable
from compose.schema import Message
from compose.stream import concat, one_chunk

if TYPE_CHECKING:
    from adk.agent import AgentContext, RunRoot
    from adk.cancel import CancelLink

__all__ = ["ReactResumeState", "ReactRun"]


class ReactResumeState(BaseModel):
    """What a paused ``ChatModelAgent`` run needs to continue (its interrupt event's ``resume_state``)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "chat-model-agent"
    agent_name: str
    graph: str
    """The graph's own checkpoint envelope (JSON text): conversation, ReAct state, finished tool results."""
    model_calls: int
    total_tokens: int
    tool_history: list[str]
    interrupts: list[str]
    """The ids of the pause's interrupt contexts (the targets this run takes)."""


def _agent_error(exc: BaseException) -> BaseException:
    """The error to report: an agent error found in the cause chain (under ``NodeRunError``), else ``exc``. A
    chain that loops back on itself (a tool may set ``__cause__`` as it likes) is walked once."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, AgentError):
            return link
        seen.add(id(link))
        link = link.__cause__
    return exc


def load_resume_state(state: Any, agent_name: str) -> ReactResumeState:
    """``state`` as a :class:`ReactResumeState` of agent ``agent_name``, else ``CheckpointError``."""
    try:
        saved = ReactResumeState.model_validate(state)
    except ValidationError as exc:
        raise CheckpointError(
            f"agent '{agent_name}': the saved run is not a ChatModelAgent's ({exc.error_count()} problems)",
            reason="payload",
        ) from exc
    if saved.agent_name != agent_name:
        raise CheckpointError(
            f"agent '{agent_name}': the saved run belongs to agent '{saved.agent_name}'", reason="fingerprint"
        )
    return saved


class ReactRun(Closing):
    """One ``ChatModelAgent`` run (see the module docstring); an async iterator of its events.

    ``root``: the Runner's run (``adk.agent.RunRoot``) when this is its root agent's run (``adk.agent.DirectEvents``):
    the events are handed out here, through its ``hand_out`` (those with an error or an action) and
    ``end_events``, so that the consumer's ``__anext__`` is this one's (one frame of the agent layer per parked run).
    """

    __slots__ = (
        "_address",
        "_bridge",
        "_callbacks",
        "_closed",
        "_counted",
        "_ctx",
        "_finished",
        "_graph_id",
        "_input",
        "_output_key",
        "_resume",
        "_run",
        "_runnable",
        "_session",
        "_streaming",
        "_timeout",
        "final_message",
        "root",
    )

    def __init__(
        self,
        runnable: Runnable[list[Message], Message],
        bridge: InMemoryCheckPointStore,
        messages: list[Message],
        ctx: ReactContext,
        agent_ctx: AgentContext,
        *,
        streaming: bool,
        timeout: float | None = None,
        output_key: str | None = None,
        resume: tuple[ReactResumeState, Mapping[str, Any]] | None = None,
        agent_type: str = "ChatModelAgent",
    ) -> None:
        self._runnable = runnable
        self._bridge = bridge
        self._input: list[Message] | None = messages
        self._ctx = ctx
        session = self._session = agent_ctx.session
        address = self._address = agent_ctx.addresses
        self._streaming = streaming
        self._timeout = timeout
        self._output_key = output_key
        self._resume = resume
        # the graph checkpoints into the bridge, under a key of this run's, only when the run can be resumed
        # (checkpointing costs a little per step)
        self._graph_id = uuid.uuid4().hex if session.resumable or resume is not None else ""
        self._closed = self._finished = self._counted = False
        # the run reports as RunInfo(name, class, "Agent") to the Runner's callbacks, its graph's nested under it
        self._callbacks = agent_callbacks(ctx.agent_name, agent_type, session.callbacks)
        self._run: RunHandle | None = None
        self.final_message: Message | None = None
        self.root: RunRoot | None = None  # the Runner's run it hands its events out through (``bind_root``)
        cancel = session.cancel
        if cancel is not None:  # a cancellable run: its view of the cancel (adk.cancel), ``ctx.cancel``
            ctx.cancel = cancel.for_agent(address)

    def __repr__(self) -> str:
        state = "finished" if self._finished else "running" if self._run is not None else "not started"
        return (
            f"ReactRun({self._ctx.agent_name!r}, {state}, model_calls={self._ctx.model_calls}, "
            f"queued={len(self._ctx.events)}, reason={self._ctx.termination_reason!r})"
        )

    def bind_root(self, root: RunRoot) -> None:
        """Hand the events out through ``root`` (``adk.agent.DirectEvents``)."""
        self.root = root

    @property
    def started(self) -> bool:
        """Its first event has been asked for."""
        return self._run is not None or self._finished

    def __aiter__(self) -> ReactRun:
        return self

    async def __anext__(self) -> AgentEvent:
        ctx = self._ctx
        events = ctx.events
        if not events and not self._finished:
            if self._run is None:
                # the run's entry: a cancellation point before anything (trio's rule for async APIs), unless the
                # Runner's entry has just been one
                if not self._session.entry_checked:
                    await anyio.lowlevel.checkpoint_if_cancelled()
                self._session.entry_checked = False
            # supersteps until there is an event to hand out (the first starts the run); on the end or an error,
            # finish. One frame and one context-variable pair per event: every event of the run comes this way.
            try:
                outer = current_run.get()  # set back at the end (no Token held while the run is parked)
                current_run.set(ctx)
                try:
                    while True:
                        if self._timeout is not None:
                            done = await self._timed_steps()
                        else:
                            run = self._run if self._run is not None else await self._start()
                            done = await run.step(until=self._has_events)
                        if ctx.held is not None:
                            self._flush_held()
                        if done:
                            await self._complete()
                        if events or self._finished:
                            break
                except GraphInterrupt as exc:
                    if self._session.resumable:
                        # the resumed run sends it, last (see adk.chat_model.react._to_end_converter)
                        await self._drop_held()
                    else:
                        self._flush_held()  # the run cannot resume: this is the event's only chance
                    await self._pause(exc)  # queues the pause's event
                except Exception as exc:
                    self._flush_held()
                    await self._fail(exc)  # queues the failure's event
                finally:
                    current_run.set(outer)
            except BaseException:
                await (self.root.aclose() if self.root is not None else self.aclose())
                raise
        if events:
            event = events.pop(0)
            if (event.error is None and event.action is None) or self.root is None:
                return event
            return await self.root.hand_out(event)
        if self.root is not None:
            return await self.root.end_events()
        raise StopAsyncIteration

    def _capture_state(self, path: list[str], state: Any) -> None:
        # a resumed graph's state is the restored one, not the one its state factory made
        if not path:
            self._ctx.state = state

    async def _timed_steps(self) -> bool:
        """Supersteps (the first starts the run) until there are events, within the run's ``timeout``."""
        timeout = self._timeout
        assert timeout is not None
        ctx = self._ctx
        if ctx.deadline is None:
            # model streams read outside the supersteps honour it too (adk.chat_model._model)
            ctx.deadline, ctx.timeout = anyio.current_time() + timeout, timeout
        done = False
        with anyio.CancelScope(deadline=ctx.deadline) as scope:
            run = self._run if self._run is not None else await self._start()
            done = await run.step(until=self._has_events)
        if scope.cancelled_caught:
            raise AgentTimeoutError(timeout)
        return done

    async def _start(self) -> RunHandle:
        """Start the graph run (its supersteps are the caller's)."""
        messages, self._input = self._input, None
        streaming = self._streaming
        x: Any = one_chunk(messages) if streaming else messages
        callbacks = self._callbacks
        if callbacks.handlers:
            await callbacks.start(messages)
        resume = self._resume
        cancel: CancelLink | None = self._ctx.cancel
        if callbacks.given or self._graph_id or cancel is not None:
            opts: dict[str, Any] = callbacks.graph_options() if callbacks.given else {}
            if cancel is not None:  # a cancellable run stops where its cancel says, before a node runs
                opts["external_interrupt"] = cancel
            if self._graph_id:
                opts["checkpoint_id"] = self._graph_id
            if resume is not None:
                saved, targets = resume
                await self._bridge.set(self._graph_id, saved.graph.encode())
                opts["resume"] = dict(targets)
                opts["state_modifier"] = self._capture_state
            # __anext__ has just checked for cancellation; nothing awaited since unless callbacks fired or the
            # bridge was written
            checked = not callbacks.handlers and resume is None
            run = await self._runnable.start_run(x, streaming=streaming, cancel_checked=checked, **opts)
        else:  # no option to give (no handler given, not resumable, so not a resume, not cancellable)
            run = await self._runnable.start_run(x, streaming=streaming, cancel_checked=not callbacks.handlers)
        self._run = run
        return run

    def _has_events(self) -> bool:
        ctx = self._ctx
        return bool(ctx.events) or ctx.held is not None

    def _flush_held(self) -> None:
        ctx = self._ctx
        if ctx.held is not None:
            ctx.events.append(ctx.held)
            ctx.held = None

    async def _drop_held(self) -> None:
        ctx = self._ctx
        if ctx.held is not None:
            held, ctx.held = ctx.held, None
            await held.aclose()

    def _count(self) -> None:
        if not self._counted:
            self._counted = True
            before = self._resume[0].total_tokens if self._resume is not None else 0
            self._session.total_tokens += self._ctx.total_tokens - before

    async def _forget_graph(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._bridge.delete(self._graph_id)

    async def _complete(self) -> None:
        assert self._run is not None
        result = self._run.result
        self._finished = True
        if self._graph_id:
            await self._forget_graph()
        final: Message = await concat(result) if self._streaming else result
        self.final_message = final
        self._session.final_message = final
        ctx = self._ctx
        if self._output_key is not None:
            ctx.session_values[self._output_key] = final.content
        ctx.termination_reason = "completed"
        self._count()
        if self._callbacks.live:
            await self._callbacks.end(final)

    async def _pause(self, exc: GraphInterrupt) -> None:
        """The graph paused: queue the interrupt event carrying the graph's checkpoint."""
        self._finished = True
        ctx = self._ctx
        if self._run is not None:
            await self._run.aclose()
        contexts = agent_contexts(exc.info.interrupt_contexts, self._address)
        graph = await self._bridge.get(self._graph_id) if self._graph_id else None
        if self._graph_id:
            await self._forget_graph()
        state: dict[str, Any] | None = None
        if graph is not None:  # a run that cannot resume has not checkpointed
            state = ReactResumeState(
                agent_name=ctx.agent_name,
                graph=graph.decode(),
                model_calls=ctx.model_calls,
                total_tokens=ctx.total_tokens,
                tool_history=list(ctx.tool_history),
                interrupts=[c.id for c in _all_contexts(contexts)],
            ).model_dump(mode="json")
        ctx.termination_reason = "interrupted"
        self._count()
        info = AgentInterruptInfo(contexts, None, resume_state=state)
        ctx.send(AgentEvent(action=AgentAction(interrupted=info)))
        await self._callbacks.fail(exc)  # the interrupt: on_interrupt

    async def _fail(self, exc: BaseException) -> None:
        self._finished = True
        if self._run is not None:
            await self._run.aclose()
        if self._graph_id:
            await self._forget_graph()
        error = _agent_error(exc)
        self._ctx.termination_reason = error.reason if isinstance(error, AgentError) else "error"
        self._count()
        self._ctx.events.append(AgentEvent(self._ctx.agent_name, self._ctx.run_path, error=error))
        await self._callbacks.fail(exc)

    async def aclose(self) -> None:
        """Stop the run: close the graph run and every event stream not yet handed out (idempotent).

        No cancel scope: what can suspend (a reader over the model's async iterator, callback handlers, the
        bridge store) is shielded where it runs, so a closer in a cancelled scope closes everything."""
        if self._closed:
            return
        self._closed = True
        ctx = self._ctx
        if self._finished and not ctx.events and ctx.held is None and ctx.termination_reason == "completed":
            return  # a completed run has closed what it held
        self._finished = True
        if self._run is not None:
            await self._run.aclose()
        if self._graph_id:
            await self._forget_graph()
        if self._callbacks.live:
            await self._callbacks.cancel()  # closed before its end
        events = ctx.events
        while events:
            await events.pop(0).aclose()
        if ctx.held is not None:
            await self._drop_held()
        if ctx.termination_reason is None:
            ctx.termination_reason = "closed"
        self._count()


def _all_contexts(contexts: list[Any]) -> list[Any]:
    """The contexts and every ancestor of theirs (each once)."""
    seen: dict[str, Any] = {}
    for c in contexts:
        while c is not None and c.id not in seen:
            seen[c.id] = c
            c = c.parent
    return list(seen.values())
