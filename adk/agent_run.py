"""``AgentRun``: one Runner run of an agent, an async iterator of its events (eino-semantics 4.5).

The run calls ``agent.run(input, ctx)`` (or, for a paused run, ``agent.resume(info, ctx)``) and hands the agent's
events on. Whoever receives a streaming event owns its stream (read it or close it). ``aclose()`` (or leaving
an ``async for`` early, then closing) closes the agent's run and every event stream not yet handed out. An error
ends the run with exactly one event whose ``error`` is set.

**Interrupts and checkpoints** (eino-semantics 4.5-4.6). When the root agent pauses, its last event's
``action.interrupted`` is an :class:`~adk.events.AgentInterruptInfo`, and the run ends
(``termination_reason == "interrupted"``). With a checkpoint binding the run saves itself (the agent's
``resume_state``, the session and the interrupt ids; see ``adk.checkpointing``) **before** that event is
yielded, and sets its ``checkpoint_id``.

**A ChatModelAgent at the root** (the common case) hands its events out itself (``adk.agent.DirectEvents``): its
run calls this run's :meth:`AgentRun.hand_out` for the events with an error or an action and
:meth:`AgentRun.end_events` when its events end, so a run parked in a model call holds one frame of the agent
layer, not two, and each event passes one ``__anext__``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

import anyio
import anyio.lowlevel

from adk._run import current_session
from adk.agent import Agent, AgentContext, AgentEvents, DirectEvents, ResumableAgent, ResumeInfo, RunSession
from adk.agents.history import RecordedEvent
from adk.cancel import _CANCELLING, RESTART, CancelController, Cancellable, stoppable
from adk.checkpointing import AgentCheckpoint, CheckpointBinding, SavedEvent
from adk.errors import AgentCancelledError, AgentError
from adk.events import AgentEvent, AgentInput
from compose.lowlevel import Closing
from compose.schema import Message

__all__ = ["AgentRun"]


class AgentRun(Cancellable, Closing):
    """One Runner run: an async iterator of ``AgentEvent``s (see the module docstring).

    After the iteration, ``final_message`` holds the answer (the last agent's final message: the model's last
    message, or the return-directly tool's message), ``termination_reason`` says how the run ended
    (``"completed"``, ``"exit"``, ``"interrupted"``, ``"max_iterations"``, ``"token_budget"``, ``"stall"``,
    ``"timeout"``, ``"retry_exhausted"``, ``"cancelled"``, ``"error"``, ``"closed"``), and ``total_tokens`` the
    token usage summed over every model call of the run.

    A resume loads its checkpoint when the iteration starts; errors doing so are raised by that first
    ``__anext__`` (no agent ran, so there is no event to carry them).
    """

    __slots__ = (
        "_agent",
        "_cancel",
        "_checkpoint",
        "_events",
        "_exit",
        "_finished",
        "_path",
        "_react",
        "_reason",
        "_session",
        "_started",
    )

    def __init__(
        self,
        agent: Agent,
        session: RunSession,
        *,
        input: AgentInput | None = None,
        checkpoint: CheckpointBinding | None = None,
        cancellable: bool | CancelController = False,
    ) -> None:
        self._agent = agent
        self._session = session
        self._checkpoint = checkpoint
        # the root agent's run path (its events' and its error events'), also its address (AgentContext.root)
        path = self._path = (agent.name,)
        ctx = AgentContext(session, path, path)
        self._cancel: CancelController | None = None  # a cancellable run's (``cancel()``)
        if cancellable:  # the run's own cancel (adk.cancel; a SessionRun's, when it made one): its agents see it
            self._cancel = cancellable if isinstance(cancellable, CancelController) else CancelController()
            session.cancel = self._cancel.root
        self._started = False
        self._finished = False
        self._exit = False
        self._reason: str | None = None
        # a fresh run starts the agent's iterator now (a bad input fails the call), a resume on first iteration
        self._events: AgentEvents | None = None
        self._react: DirectEvents | None = None  # a ChatModelAgent's run, handing its events out itself
        if input is not None:
            self._bind(agent.run(input, ctx))

    @property
    def final_message(self) -> Message | None:
        """The answer, once the run completed."""
        return self._session.final_message

    @property
    def termination_reason(self) -> str | None:
        """How the run ended; None while it runs."""
        return self._reason

    @property
    def total_tokens(self) -> int:
        """Token usage summed over the run's model calls."""
        return self._session.total_tokens

    @property
    def session_values(self) -> dict[str, Any]:
        """The run's session values (its own session: see ``Runner``; ``output_key`` writes here)."""
        return self._session.values

    def __repr__(self) -> str:
        started = self._started or (self._react is not None and self._react.started)
        state = "finished" if self._finished else "running" if started else "not started"
        checkpoint = f", {self._checkpoint!r}" if self._checkpoint is not None else ""
        return f"AgentRun({self._agent.name!r}, {state}, reason={self._reason!r}{checkpoint})"

    def _bind(self, events: AgentEvents) -> DirectEvents | None:
        """Take the agent's events; ones that hand themselves out (``DirectEvents``) are bound to this run. In a
        cancellable run, those of an agent that does not answer its cancel itself are cut off (``adk.cancel``)."""
        self._events = events
        bind = getattr(events, "bind_root", None)
        if bind is None:
            if self._session.cancel is not None:
                self._events = stoppable(events, self._agent, self._session.cancel, self._path)
            return None
        bind(self)
        react = self._react = cast(DirectEvents, events)
        return react

    def _cancel_subject(self) -> str:
        return f"run of agent '{self._agent.name}'"

    def __aiter__(self) -> AgentRun:
        return self

    def __anext__(self) -> Awaitable[AgentEvent]:
        react = self._react
        if react is not None:  # it makes the entry's cancellation check and calls hand_out/end_events itself
            return react.__anext__()
        return self._next()

    async def _next(self) -> AgentEvent:
        if self._finished:
            raise StopAsyncIteration
        if not self._started:
            # the run's entry: a cancellation point before anything (trio's rule for async APIs): in a cancelled
            # scope no checkpoint is claimed and no agent runs; the run is left as it was (close it as usual).
            await anyio.lowlevel.checkpoint_if_cancelled()
            self._started = True
            if self._events is None:
                react = self._bind(await self._resume())
                if react is not None:
                    return await react.__anext__()
            else:
                self._session.entry_checked = True  # nothing awaited since: the agent's entry need not check
        assert self._events is not None
        token = current_session.set(self._session)
        try:
            event: AgentEvent = await self._events.__anext__()
        except StopAsyncIteration:
            return await self.end_events()
        except BaseException:
            await self.aclose()
            raise
        finally:
            current_session.reset(token)
            self._session.entry_checked = False
        if not event.run_path:  # a custom agent's event: the framework names its emitter (flow.go)
            event.agent_name, event.run_path = self._agent.name, self._path
        if event.error is None and event.action is None:
            return event
        return await self.hand_out(event)

    async def _resume(self) -> AgentEvents:
        cp = self._checkpoint
        assert cp is not None and cp.resuming
        try:
            saved = await cp.load(self._agent.name)
        except BaseException:
            self._finished = True
            self._reason = "error"
            raise
        session = self._session
        session.values.update(saved.session_values)
        session.enable_streaming = saved.enable_streaming
        session.total_tokens = saved.total_tokens
        session.root_input = list(saved.root_input)
        session.skip_transfer_messages = saved.skip_transfer_messages
        session.history.restore([RecordedEvent(e.agent_name, e.message, e.role, e.transfer) for e in saved.history])
        agent = self._agent
        ctx = AgentContext(session, self._path, self._path)
        try:
            if saved.state == RESTART:  # a cancel cut it off where it kept no state: it runs afresh
                return agent.run(AgentInput(list(session.root_input), saved.enable_streaming), ctx)
            if not isinstance(agent, ResumableAgent):
                raise TypeError(f"agent '{agent.name}' ({type(agent).__qualname__}) cannot resume: it has no resume()")
            return agent.resume(ResumeInfo(saved.state, dict(cp.targets), saved.enable_streaming), ctx)
        except BaseException as exc:
            await cp.release(exc)
            self._finished = True
            self._reason = "error"
            raise

    async def hand_out(self, event: AgentEvent) -> AgentEvent:
        """An event with an error or an action, on its way out: the run's end or pause (saved first)."""
        if event.error is not None:
            error = event.error
            self._reason = error.reason if isinstance(error, AgentError) else "error"
            if self._cancel is not None:
                self._cancel.finish()
            if self._checkpoint is not None:
                await self._checkpoint.release(error)  # a failing release is noted on the error: one error event
            return event
        action = event.action
        if action is None:
            return event
        if action.exit:
            self._exit = True
        info = action.interrupted
        if info is None:
            return event
        # one per run (agents nested in the root's pause fold theirs into its event). While a cancel is pending, a
        # pause (the cancel's, or a business interrupt it absorbs) is saved as any is and ends the run with
        # ``AgentCancelledError`` instead of the interrupt event
        ctl = self._cancel if self._cancel is not None and self._cancel.state == _CANCELLING else None
        self._reason = "interrupted" if ctl is None else "cancelled"
        cp = self._checkpoint
        if cp is not None and (ctl is None or info.resume_state is not None):
            try:
                await cp.save(await self._snapshot(info))
            except Exception as error:  # e.g. a session value pydantic cannot serialise: the pause is lost
                self._reason = "error"
                if self._cancel is not None:
                    self._cancel.finish()
                await cp.release(error)
                await self._close_events()
                return AgentEvent(event.agent_name, event.run_path, error=error)
            info.checkpoint_id = cp.checkpoint_id
        if ctl is None:
            return event
        cancelled = AgentCancelledError(
            ctl.modes,
            escalated=ctl.escalated,
            timed_out=ctl.timed_out,
            interrupt_contexts=info.interrupt_contexts,
            checkpoint_id=info.checkpoint_id,
        )
        ctl.handled()
        return AgentEvent(event.agent_name, event.run_path, error=cancelled)

    async def _snapshot(self, info: Any) -> AgentCheckpoint:
        session = self._session
        history = [
            SavedEvent(agent_name=r.agent_name, message=r.message, role=r.role, transfer=r.transfer)
            for r in await session.history.events()
        ]
        return AgentCheckpoint(
            agent_name=self._agent.name,
            enable_streaming=session.enable_streaming,
            session_values=dict(session.values),
            total_tokens=session.total_tokens,
            root_input=list(session.root_input),
            history=history,
            skip_transfer_messages=session.skip_transfer_messages,
            interrupts={c.id: c.address for c in info.interrupt_contexts},
            state=info.resume_state,
        )

    async def end_events(self) -> AgentEvent:
        """The agent's events ended: a completed resume retires its checkpoint (a failure to is the last event)."""
        self._finished = True
        self._react = None
        if self._reason is None:
            self._reason = "exit" if self._exit else "completed"
            cp = self._checkpoint
            if cp is not None and cp.resuming:
                try:
                    await cp.finish()
                except Exception as error:
                    self._reason = "error"
                    await cp.release(error)
                    await self._close_events()
                    return AgentEvent(self._agent.name, self._path, error=error)
        # the agent's events ended: closing its finished iterator and a session without records waits on
        # nothing, so no shield is needed (the common path of every run)
        if self._cancel is not None:
            self._cancel.finish()
        events, self._events = self._events, None
        if events is not None:
            await events.aclose()
        await self._session.aclose()
        raise StopAsyncIteration

    async def _close_events(self) -> None:
        """Close the agent's run and the session's unread streams. A ChatModelAgent's run and the session close
        without a cancel scope (what can suspend there is shielded where it runs: a reader over the model's
        async iterator, callback handlers, a store); any other agent's iterator may run its own code as it
        closes (a generator's ``finally``), so that close is shielded: a closer in a cancelled scope closes
        everything."""
        self._finished = True
        direct, self._react = self._react, None
        events, self._events = self._events, None
        if direct is not None and events is direct:
            await direct.aclose()
        elif events is not None:
            with anyio.CancelScope(shield=True):
                await events.aclose()
        await self._session.aclose()

    async def aclose(self) -> None:
        """Stop the run: close the agent's run and every event stream not yet handed out (idempotent)."""
        if self._finished and self._events is None and self._checkpoint is None:
            return  # it ended (``_end``) or was closed: its agent's run and its session are closed
        await self._close_events()
        if self._cancel is not None:
            self._cancel.finish()
        if self._checkpoint is not None:
            await self._checkpoint.release()  # shielded
        if self._reason is None:
            self._reason = "closed"
