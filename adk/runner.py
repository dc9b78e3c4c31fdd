"""``Runner`` and ``AgentRun``: run an agent and iterate its events as they happen (eino-semantics 4.5).

No background task: ``AgentRun`` drives the compiled graph one superstep at a time (``GraphRun.step()``) and,
between supersteps, yields the events queued so far (the event-emitting model, the tool-result collector and
the error path append to an unbounded deque synchronously). Consequences:

* a streaming model event is delivered right after the model node returned its stream, so the consumer reads
  tokens live while the model generates (its copy drives the model stream; the graph's copy buffers and is
  concatenated by the post handler at the next superstep);
* events produced inside one superstep (parallel tool results) are delivered when that superstep ends, in
  completion order, the return-directly tool's event last;
* with model retries, an attempt's stream is read to its end before the agent goes on, so a retried model's
  events arrive once the attempt is over;
* an error ends the run with exactly one event whose ``error`` is set (agent errors such as
  ``ExceedMaxIterationsError`` are unwrapped from the graph's ``NodeRunError``), then the iterator ends.

Whoever receives a streaming event owns its stream (read it or close it). ``aclose()`` (or leaving an
``async for`` early, then closing) closes the graph run and every event stream not yet handed out.

**Interrupts** (eino-semantics 4.5-4.6). When the graph pauses (a tool waiting for approval, any
``interrupt()``), the events queued so far are delivered, then one last event whose ``action.interrupted`` is an
:class:`~adk.events.AgentInterruptInfo`, and the run ends (``termination_reason == "interrupted"``). With a
checkpoint store and a ``checkpoint_id`` the run was saved before that event is yielded (see
``adk.checkpointing``); ``runner.resume(checkpoint_id, targets={interrupt_id: data})`` continues it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

import anyio
import anyio.lowlevel

from adk._run import RunContext, current_run
from adk.checkpointing import CheckpointBinding, agent_contexts
from adk.errors import AgentError, AgentTimeoutError
from adk.events import AgentAction, AgentEvent, AgentInput, AgentInterruptInfo, checked_messages
from adk.sessions import SessionRun, SessionStore
from adk.sessions.base import check_session_id
from adk.telemetry import TelemetryHandler
from compose.checkpoint import CheckPointStore, check_store
from compose.errors import GraphInterrupt
from compose.runnable import RunHandle, Runnable
from compose.schema import Message, user_message
from compose.stream import StreamReader, concat

__all__ = ["Agent", "AgentRun", "Runner"]


class Agent(Protocol):
    """What a Runner runs: a named agent whose ``run`` and ``resume`` return an ``AgentRun``."""

    name: str
    description: str

    def run(
        self,
        input: AgentInput,
        *,
        telemetry: Sequence[TelemetryHandler] = (),
        session_values: dict[str, Any] | None = None,
        run_path: Sequence[str] | None = None,
        checkpoint: tuple[CheckPointStore, str] | None = None,
    ) -> AgentRun: ...

    def resume(
        self,
        store: CheckPointStore,
        checkpoint_id: str,
        targets: Mapping[str, Any],
        *,
        telemetry: Sequence[TelemetryHandler] = (),
        session_values: dict[str, Any] | None = None,
        claim_stale_after: float | None = None,
    ) -> AgentRun: ...


def _agent_error(exc: BaseException) -> BaseException:
    """The error to report: an agent error found in the cause chain (under ``NodeRunError``), else ``exc``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AgentError):
            return seen
        seen = seen.__cause__
    return exc


class AgentRun(AsyncIterator[AgentEvent]):
    """One agent run: an async iterator of ``AgentEvent``s (see the module docstring).

    After the iteration, ``final_message`` holds the answer (the model's last message, or the return-directly
    tool's message), ``termination_reason`` says how the run ended (``"completed"``, ``"exit"``,
    ``"interrupted"``, ``"max_iterations"``, ``"token_budget"``, ``"stall"``, ``"timeout"``,
    ``"retry_exhausted"``, ``"error"``), and ``total_tokens`` the token usage summed over the model calls.

    With ``checkpoint``, a pause is saved (see ``adk.checkpointing``); a binding with ``resuming`` set loads
    its checkpoint when the iteration starts, and errors doing so are raised by that first ``__anext__``.
    """

    def __init__(
        self,
        runnable: Runnable[list[Message], Message],
        messages: list[Message],
        ctx: RunContext,
        *,
        streaming: bool,
        timeout: float | None = None,
        output_key: str | None = None,
        checkpoint: CheckpointBinding | None = None,
    ) -> None:
        self._runnable = runnable
        self._input: list[Message] | None = messages
        self._ctx = ctx
        self._checkpoint = checkpoint
        self._loaded = checkpoint is None or not checkpoint.resuming
        self._streaming = streaming
        self._timeout = timeout
        self._deadline: float | None = None
        self._output_key = output_key
        self._run: RunHandle | None = None
        self._finished = False
        self._exit = False
        self.final_message: Message | None = None

    @property
    def termination_reason(self) -> str | None:
        """How the run ended; None while it runs."""
        return self._ctx.termination_reason

    @property
    def total_tokens(self) -> int:
        """Token usage summed over the run's model calls."""
        return self._ctx.total_tokens

    @property
    def session_values(self) -> dict[str, Any]:
        """The run's session values (its own session: see ``Runner``; ``output_key`` writes here)."""
        return self._ctx.session_values

    def __repr__(self) -> str:
        state = "finished" if self._finished else "running" if self._run is not None else "not started"
        checkpoint = f", {self._checkpoint!r}" if self._checkpoint is not None else ""
        return (
            f"AgentRun({self._ctx.agent_name!r}, {state}, model_calls={self._ctx.model_calls}, "
            f"queued={len(self._ctx.events)}, reason={self._ctx.termination_reason!r}{checkpoint})"
        )

    def __aiter__(self) -> AgentRun:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._run is None and not self._finished:
            # the run's entry: a cancellation point before anything (trio's rule for async APIs): in a cancelled
            # scope no checkpoint is claimed and no node runs; the run is left as it was (close it as usual).
            # Later calls hand out queued events or run supersteps, which await inside the graph.
            await anyio.lowlevel.checkpoint_if_cancelled()
        if not self._loaded:
            await self._load()
        events = self._ctx.events
        while not events:
            if self._finished:
                raise StopAsyncIteration
            await self._advance()
        event = events.popleft()
        if event.action is not None and event.action.exit:
            self._exit = True
        return event

    async def _advance(self) -> None:
        """Run one superstep (the first call starts the run); on the end or an error, finish."""
        ctx = self._ctx
        token = current_run.set(ctx)
        try:
            if self._timeout is None:
                done = await self._step()
            else:
                if self._deadline is None:
                    self._deadline = anyio.current_time() + self._timeout
                    # model streams read outside the supersteps honour it too (adk._model)
                    ctx.deadline, ctx.timeout = self._deadline, self._timeout
                with anyio.CancelScope(deadline=self._deadline) as scope:
                    done = await self._step()
                if scope.cancelled_caught:
                    raise AgentTimeoutError(self._timeout)
            self._flush_held()
            if done:
                await self._complete()
        except GraphInterrupt as exc:
            if self._checkpoint is None:
                self._flush_held()  # the run cannot resume: this is the event's only chance
            else:
                await self._drop_held()  # the resumed run sends it, last (see adk.react._to_end_converter)
            await self._pause(exc)
        except Exception as exc:
            self._flush_held()
            await self._fail(exc)
        except BaseException:
            await self.aclose()
            raise
        finally:
            current_run.reset(token)

    async def _load(self) -> None:
        """Claim and read the checkpoint a resume continues from (errors propagate: no run started)."""
        assert self._checkpoint is not None
        self._loaded = True
        try:
            self._streaming = await self._checkpoint.load(self._ctx)
        except BaseException:
            self._finished = True
            self._ctx.termination_reason = "error"
            raise

    def _capture_state(self, path: list[str], state: Any) -> None:
        # a resumed graph's state is the restored one, not the one its state factory made
        if not path:
            self._ctx.state = state

    async def _step(self) -> bool:
        if self._run is None:
            messages, self._input = self._input, None
            x: Any = StreamReader.from_iterable((messages,)) if self._streaming else messages
            opts: dict[str, Any] = {}
            cp = self._checkpoint
            if cp is not None:
                opts["checkpoint_id"] = cp.graph_id
                if cp.resuming:
                    opts["resume"] = dict(cp.targets)
                    opts["state_modifier"] = self._capture_state
            self._run = await self._runnable.start_run(x, streaming=self._streaming, **opts)
        # supersteps that produce no event run back to back: there is nothing to hand out between them
        return await self._run.step(until=self._has_events)

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

    async def _complete(self) -> None:
        assert self._run is not None
        result = self._run.result
        self._finished = True
        final: Message = await concat(result) if self._streaming else result
        self.final_message = final
        ctx = self._ctx
        if self._output_key is not None:
            ctx.session_values[self._output_key] = final.content
        exits = self._exit or any(e.action is not None and e.action.exit for e in ctx.events)
        ctx.termination_reason = "exit" if exits else "completed"
        if self._checkpoint is not None:
            await self._checkpoint.finish()

    async def _pause(self, exc: GraphInterrupt) -> None:
        """The graph paused: save the run (when bound to a store), then queue the interrupt event."""
        self._finished = True
        ctx = self._ctx
        if self._run is not None:
            await self._run.aclose()
        contexts = agent_contexts(exc.info.interrupt_contexts, ctx.run_path)
        cp = self._checkpoint
        if cp is not None:
            try:
                await cp.save(ctx, self._streaming, contexts)
            except Exception as error:  # e.g. a session value pydantic cannot serialise: the pause is lost
                await self._fail(error)
                return
        ctx.termination_reason = "interrupted"
        info = AgentInterruptInfo(contexts, cp.checkpoint_id if cp is not None else None)
        ctx.send(AgentEvent(action=AgentAction(interrupted=info)))

    async def _fail(self, exc: BaseException) -> None:
        self._finished = True
        if self._run is not None:
            await self._run.aclose()
        if self._checkpoint is not None:
            await self._checkpoint.release(exc)  # a failing release is noted on exc: one error event
        error = _agent_error(exc)
        self._ctx.termination_reason = error.reason if isinstance(error, AgentError) else "error"
        self._ctx.events.append(AgentEvent(self._ctx.agent_name, self._ctx.run_path, error=error))

    async def aclose(self) -> None:
        """Stop the run: close the graph run and every event stream not yet handed out (idempotent)."""
        with anyio.CancelScope(shield=True):
            self._finished = True
            if self._run is not None:
                await self._run.aclose()
            if self._checkpoint is not None:
                await self._checkpoint.release()
            ctx = self._ctx
            self._flush_held()
            while ctx.events:
                await ctx.events.popleft().aclose()
            if ctx.termination_reason is None:
                ctx.termination_reason = "closed"

    async def __aenter__(self) -> AgentRun:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class Runner:
    """Runs an agent: ``run(messages)`` / ``query(text)`` / ``resume(checkpoint_id)`` return an
    :class:`AgentRun`, an async iterator of the run's events.

    Args:
        agent: the agent (a ``ChatModelAgent``).
        enable_streaming: stream model output (events carry ``message_stream``s).
        checkpoint_store: where paused runs are saved (any ``CheckPointStore``: in memory, SQLite,
            PostgreSQL, or a store with only Eino's ``get``/``set``, whose checkpoints are then not deleted and
            whose resumes are not exclusive); needed for ``checkpoint_id=`` and ``resume``. A store lacking
            ``get`` or ``set`` (or having only one of ``claim``/``release``) raises ``GraphBuildError`` here.
        telemetry: handlers receiving the runtime events (see ``adk.telemetry``).
        claim_stale_after: ``resume`` takes over a claim on the checkpoint older than this many seconds (the
            worker that held it died mid-resume); None (default) never does.
        session_store: where conversations are kept (``adk.sessions``); needed for ``session_id=``.
        session_wait: seconds a run on a session waits for the run in flight on it to finish (0, the default:
            fail at once with ``SessionBusyError``; None: wait as long as it takes).

    Session values (``adk.session_values``): every run has its own session, which starts from the runner's
    ``session_values`` (defaults for every run) updated with the call's ``session_values=``; agents, tools and
    hooks read and write it during the run, ``output_key`` writes into it, and ``run.session_values`` shows it
    after the run. A resumed run starts from the defaults with the values saved with its checkpoint on top.

    Checkpoints (Eino's runner): ``run(..., checkpoint_id=id)`` always starts a fresh run and, if it pauses,
    saves it under exactly ``id`` (replacing what was there) before yielding the interrupt event;
    ``resume(id, targets=...)`` continues it in this or any other process sharing the store. A resumed run
    that completes deletes its checkpoint; one that pauses again overwrites it; one that fails keeps it.

    Sessions (``adk.sessions``): ``run(..., session_id=id)`` runs on the conversation stored under ``id``: the
    agent sees its history followed by the new messages, and its session values start from the stored ones
    (under the call's); the run's new messages are appended, with its session values, when it completes, and
    not at all when it fails. A run that pauses keeps its messages with its checkpoint id; ``resume`` appends
    them with the resumed run's when it completes. The returned run is then a ``SessionRun`` (same interface).

    Example::

        runner = Runner(agent, checkpoint_store=SQLiteCheckPointStore("runs.db"))
        async with runner.query("pay invoice 7", checkpoint_id="job-7") as run:
            async for event in run:
                if event.action is not None and event.action.interrupted is not None:
                    ids = event.action.interrupted.ids
        decisions = {i: ApprovalDecision(approved=True) for i in ids}
        async with runner.resume("job-7", targets=decisions) as run:
            async for event in run:
                ...
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        checkpoint_store: CheckPointStore | None = None,
        telemetry: Sequence[TelemetryHandler] = (),
        claim_stale_after: float | None = None,
        session_store: SessionStore | None = None,
        session_wait: float | None = 0.0,
    ) -> None:
        if checkpoint_store is not None:
            check_store(checkpoint_store, where="Runner(checkpoint_store=...)")
        self.agent = agent
        self.enable_streaming = enable_streaming
        self.checkpoint_store = checkpoint_store
        self.telemetry = tuple(telemetry)
        # a resume claim older than this (seconds) is taken over: its worker died mid-resume
        self.claim_stale_after = claim_stale_after
        self.session_values: dict[str, Any] = {}
        self.session_store = session_store
        self.session_wait = session_wait

    def __repr__(self) -> str:
        store = type(self.checkpoint_store).__name__ if self.checkpoint_store is not None else None
        return f"Runner({self.agent!r}, enable_streaming={self.enable_streaming}, checkpoint_store={store})"

    def _store(self, what: str) -> CheckPointStore:
        if self.checkpoint_store is None:
            raise ValueError(f"failed to {what}: the runner has no checkpoint store (Runner(checkpoint_store=...))")
        return self.checkpoint_store

    def run(
        self,
        messages: Sequence[Message],
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AgentRun | SessionRun:
        """Run the agent on ``messages``; iterate the result for the events.

        Args:
            messages: the conversation so far (with ``session_id``: the new messages of this turn).
            checkpoint_id: save the run under this id if it pauses (needs a checkpoint store).
            session_values: this run's session values, on top of the runner's ``session_values``.
            session_id: run on the conversation stored under this id in the session store (see ``Runner``).

        Raises:
            ValueError: ``checkpoint_id`` without a checkpoint store, ``session_id`` without a session store.
            TypeError: ``session_values`` is not a mapping.
        """
        new = checked_messages(messages, "Runner.run")
        if session_id is None:
            return self._start(new, checkpoint_id, session_values)
        store = self._sessions()
        check_session_id(session_id)
        self._session(session_values)  # a bad mapping fails here, not at the first event
        if checkpoint_id is not None:
            self._store("checkpoint a run")

        def start(history: list[Message], stored: dict[str, Any]) -> AgentRun:
            return self._start(history, checkpoint_id, session_values, stored)

        return SessionRun.starting(store, session_id, new, start, wait=self.session_wait, checkpoint_id=checkpoint_id)

    def _start(
        self,
        messages: list[Message],
        checkpoint_id: str | None,
        session_values: Mapping[str, Any] | None,
        stored: Mapping[str, Any] | None = None,
    ) -> AgentRun:
        checkpoint = (self._store("checkpoint a run"), checkpoint_id) if checkpoint_id is not None else None
        return self.agent.run(
            AgentInput(messages, self.enable_streaming),
            telemetry=self.telemetry,
            session_values=self._session(session_values, stored),
            checkpoint=checkpoint,
        )

    def _sessions(self) -> SessionStore:
        if self.session_store is None:
            raise ValueError("failed to run on a session: the runner has no session store (Runner(session_store=...))")
        return self.session_store

    def query(
        self,
        text: str,
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AgentRun | SessionRun:
        """Run the agent on one user message (see :meth:`run`)."""
        return self.run(
            [user_message(text)], checkpoint_id=checkpoint_id, session_values=session_values, session_id=session_id
        )

    def _session(self, values: Mapping[str, Any] | None, stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A new run's session: the runner's defaults, then the session's stored values, then the call's."""
        session = dict(self.session_values)
        if stored:
            session.update(stored)
        if values is not None:
            if not isinstance(values, Mapping):
                raise TypeError(f"session_values must be a mapping of names to values, got {type(values).__qualname__}")
            session.update(values)
        return session

    def resume(self, checkpoint_id: str, targets: Mapping[str, Any] | None = None) -> AgentRun | SessionRun:
        """Continue the run paused under ``checkpoint_id``; iterate the result for the rest of its events.

        Args:
            checkpoint_id: the id the run was saved under.
            targets: resume data by interrupt id (e.g. ``{id: ApprovalDecision(approved=True)}``); interrupts
                not named stay pending (they pause the run again). The streaming mode is the checkpoint's.

        Raises:
            ValueError: the runner has no checkpoint store (here). From the first ``__anext__``:
                ``CheckpointNotFoundError`` (nothing under the id), ``CheckpointError`` (``reason`` ``"claimed"``:
                another resume holds it; ``"not_checkpoint"``, ``"digest"``, ``"kind"``, ``"fingerprint"``,
                ``"payload"``: corrupted, foreign or another agent's bytes), ``InterruptNotFoundError`` (also a
                ``ValueError``: a target id that is not one of the checkpoint's interrupts); with a session
                store, ``SessionBusyError`` (a run on the paused run's session is in flight).
        """
        store = self._store("resume")

        def resume() -> AgentRun:
            return self.agent.resume(
                store,
                checkpoint_id,
                dict(targets or {}),
                telemetry=self.telemetry,
                session_values=self._session(None),
                claim_stale_after=self.claim_stale_after,
            )

        if self.session_store is None:
            return resume()
        return SessionRun.resuming(self.session_store, checkpoint_id, resume, wait=self.session_wait)
