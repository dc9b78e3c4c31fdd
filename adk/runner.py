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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, Protocol

import anyio

from adk._run import RunContext, current_run
from adk.errors import AgentError, AgentTimeoutError
from adk.events import AgentEvent, AgentInput
from adk.telemetry import TelemetryHandler
from compose.runnable import RunHandle, Runnable
from compose.schema import Message, user_message
from compose.stream import StreamReader, concat

__all__ = ["Agent", "AgentRun", "Runner"]


class Agent(Protocol):
    """What a Runner runs: a named agent whose ``run`` returns an ``AgentRun``."""

    name: str
    description: str

    def run(
        self,
        input: AgentInput,
        *,
        telemetry: Sequence[TelemetryHandler] = (),
        session_values: dict[str, Any] | None = None,
        run_path: Sequence[str] | None = None,
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
    ``"max_iterations"``, ``"token_budget"``, ``"stall"``, ``"timeout"``, ``"retry_exhausted"``, ``"error"``),
    and ``total_tokens`` the token usage summed over the model calls.
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
    ) -> None:
        self._runnable = runnable
        self._input: list[Message] | None = messages
        self._ctx = ctx
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
        """The run's session values (``output_key`` writes here)."""
        return self._ctx.session_values

    def __repr__(self) -> str:
        state = "finished" if self._finished else "running" if self._run is not None else "not started"
        return (
            f"AgentRun({self._ctx.agent_name!r}, {state}, model_calls={self._ctx.model_calls}, "
            f"queued={len(self._ctx.events)}, reason={self._ctx.termination_reason!r})"
        )

    def __aiter__(self) -> AgentRun:
        return self

    async def __anext__(self) -> AgentEvent:
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
                with anyio.CancelScope(deadline=self._deadline) as scope:
                    done = await self._step()
                if scope.cancelled_caught:
                    raise AgentTimeoutError(self._timeout)
            self._flush_held()
            if done:
                await self._complete()
        except Exception as exc:
            self._flush_held()
            await self._fail(exc)
        except BaseException:
            await self.aclose()
            raise
        finally:
            current_run.reset(token)

    async def _step(self) -> bool:
        if self._run is None:
            messages, self._input = self._input, None
            x: Any = StreamReader.from_iterable((messages,)) if self._streaming else messages
            self._run = await self._runnable.start_run(x, streaming=self._streaming)
            return False
        return await self._run.step()

    def _flush_held(self) -> None:
        ctx = self._ctx
        if ctx.held is not None:
            ctx.events.append(ctx.held)
            ctx.held = None

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

    async def _fail(self, exc: BaseException) -> None:
        self._finished = True
        if self._run is not None:
            await self._run.aclose()
        error = _agent_error(exc)
        self._ctx.termination_reason = error.reason if isinstance(error, AgentError) else "error"
        self._ctx.events.append(AgentEvent(self._ctx.agent_name, self._ctx.run_path, error=error))

    async def aclose(self) -> None:
        """Stop the run: close the graph run and every event stream not yet handed out (idempotent)."""
        with anyio.CancelScope(shield=True):
            self._finished = True
            if self._run is not None:
                await self._run.aclose()
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
    """Runs an agent: ``run(messages)`` / ``query(text)`` return an :class:`AgentRun`, an async iterator of
    the run's events.

    Args:
        agent: the agent (a ``ChatModelAgent``).
        enable_streaming: stream model output (events carry ``message_stream``s).
        checkpoint_store: not supported yet (interrupts and resume are a later issue).
        telemetry: handlers receiving the runtime events (see ``adk.telemetry``).

    ``session_values`` persists across the runner's runs (``output_key`` writes into it).

    Example::

        runner = Runner(agent, enable_streaming=True)
        async with runner.query("hi") as run:
            async for event in run:
                ...
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        checkpoint_store: Any = None,
        telemetry: Sequence[TelemetryHandler] = (),
    ) -> None:
        if checkpoint_store is not None:
            raise NotImplementedError("checkpoint stores (interrupt and resume) are not supported yet")
        self.agent = agent
        self.enable_streaming = enable_streaming
        self.telemetry = tuple(telemetry)
        self.session_values: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Runner({self.agent!r}, enable_streaming={self.enable_streaming})"

    def run(self, messages: Sequence[Message]) -> AgentRun:
        """Run the agent on ``messages``; iterate the result for the events."""
        return self.agent.run(
            AgentInput(list(messages), self.enable_streaming),
            telemetry=self.telemetry,
            session_values=self.session_values,
        )

    def query(self, text: str) -> AgentRun:
        """Run the agent on one user message."""
        return self.run([user_message(text)])

    def resume(self, checkpoint_id: str, **_kwargs: Any) -> AgentRun:
        """Resume an interrupted run (not supported yet)."""
        raise NotImplementedError("resume needs checkpoints, which are not supported yet")
