"""The chat model chain of a ChatModelAgent: options -> retry -> event emitter -> the user's model.

* :class:`EventModel` (innermost, once per attempt): sends one model event per call. ``generate``: an event
  with the message. ``stream``: the model's stream is copied in two; copy 0 becomes the event's
  ``message_stream`` and copy 1 goes on, so the consumer reads tokens while the model generates (the copy the
  consumer reads drives the model; the other buffers). With retries, a failed attempt's event stream ends
  with ``WillRetryError``. It also reports ``model.call.*`` and ``text.delta`` telemetry when handlers exist,
  checks that the model returned a ``Message`` / ``StreamReader`` (``ModelResponseError`` naming the agent and
  the model otherwise), and bounds the reading of the stream by the run's deadline (``timeout``): a read still
  waiting for the model when the deadline passes raises ``AgentTimeoutError``, also while the consumer, not
  the runner, reads the tokens.
* :class:`FirstCallOptionsModel` (outermost): sends ``tool_choice`` on the first model call of a run only
  (retries of that call keep it, since retry sits inside).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from adk._run import RunContext, current_run
from adk.errors import AgentTimeoutError, WillRetryError
from adk.events import AgentEvent, AgentOutput, MessageVariant
from adk.retry import ModelRetryConfig, current_attempt
from compose.errors import StreamEnd
from compose.models.base import ChatModel, ToolChoice, checked_message, checked_stream
from compose.schema import Message, ToolInfo
from compose.stream import StreamReader


def _usage(msg: Message) -> dict[str, int] | None:
    meta = msg.response_meta
    if meta is None or meta.usage is None:
        return None
    u = meta.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


class EventModel:
    """Sends a model event per call (per attempt under retry) into the current run."""

    def __init__(self, inner: ChatModel, retry: ModelRetryConfig | None = None) -> None:
        self.inner = inner
        self.retry = retry

    def with_tools(self, tools: Sequence[ToolInfo]) -> EventModel:
        return EventModel(self.inner.with_tools(tools), self.retry)

    def __repr__(self) -> str:
        return f"EventModel({self.inner!r})"

    def _source(self, run: RunContext, method: str) -> str:
        return f"agent '{run.agent_name}': chat model {type(self.inner).__qualname__}: {method}"

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        run = current_run.get()
        if run is None:
            return await self.inner.generate(messages, **opts)
        if run.telemetry:
            run.emit("model.call.started", attempt=current_attempt.get(), streaming=False)
            try:
                got: object = await self.inner.generate(messages, **opts)
                msg = got if isinstance(got, Message) else checked_message(got, self._source(run, "generate()"))
            except Exception as exc:
                run.emit("model.call.completed", attempt=current_attempt.get(), error=repr(exc), usage=None)
                raise
            run.emit("model.call.completed", attempt=current_attempt.get(), usage=_usage(msg))
        else:
            # the error names the agent: its text is built only when it is needed
            answer: object = await self.inner.generate(messages, **opts)
            msg = answer if isinstance(answer, Message) else checked_message(answer, self._source(run, "generate()"))
        run.send(AgentEvent(output=AgentOutput(MessageVariant(False, message=msg))))
        return msg

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        run = current_run.get()
        if run is None:
            return await self.inner.stream(messages, **opts)
        attempt = current_attempt.get()
        run.emit("model.call.started", attempt=attempt, streaming=True)
        try:
            started: object = await self.inner.stream(messages, **opts)
            reader = (
                started if isinstance(started, StreamReader) else checked_stream(started, self._source(run, "stream()"))
            )
        except Exception as exc:
            run.emit("model.call.completed", attempt=attempt, usage=None, error=repr(exc))
            raise
        if run.deadline is not None:
            reader = StreamReader.from_async_iterator(_Deadline(reader, run.deadline, run.timeout))
        if run.telemetry:
            reader = StreamReader.from_async_iterator(_Tap(reader, run, attempt))
        event_copy, out = reader.copy(2)
        if self.retry is not None and self.retry.max_retries > 0:
            event_copy = StreamReader.from_async_iterator(_RetryMarker(event_copy, self.retry, attempt))
        run.send(AgentEvent(output=AgentOutput(MessageVariant(True, message_stream=event_copy))))
        return out


class _Tap:
    """Passes a model stream through, reporting ``text.delta`` per content chunk and ``model.call.completed``
    at its end (with the usage of the last chunk that carried one)."""

    __slots__ = ("_attempt", "_done", "_reader", "_run", "_usage")

    def __init__(self, reader: StreamReader[Message], run: RunContext, attempt: int) -> None:
        self._reader = reader
        self._run = run
        self._attempt = attempt
        self._usage: dict[str, int] | None = None
        self._done = False

    def __aiter__(self) -> _Tap:
        return self

    async def __anext__(self) -> Message:
        try:
            chunk = await self._reader.recv()
        except StreamEnd:
            self._complete(None)
            raise StopAsyncIteration from None
        except Exception as exc:
            self._complete(exc)
            raise
        if chunk.content:
            self._run.emit("text.delta", text=chunk.content, attempt=self._attempt)
        usage = _usage(chunk)
        if usage is not None:
            self._usage = usage
        return chunk

    def _complete(self, error: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        if error is None:
            self._run.emit("model.call.completed", attempt=self._attempt, usage=self._usage)
        else:
            self._run.emit("model.call.completed", attempt=self._attempt, usage=self._usage, error=repr(error))

    async def aclose(self) -> None:
        await self._reader.aclose()


class _RetryMarker:
    """An attempt's event stream whose failure becomes ``WillRetryError`` when the call will be retried."""

    __slots__ = ("_attempt", "_config", "_failed", "_reader")

    def __init__(self, reader: StreamReader[Message], config: ModelRetryConfig, attempt: int) -> None:
        self._reader = reader
        self._config = config
        self._attempt = attempt
        self._failed = False

    def __aiter__(self) -> _RetryMarker:
        return self

    async def __anext__(self) -> Message:
        if self._failed:
            raise StopAsyncIteration
        try:
            return await self._reader.recv()
        except StreamEnd:
            raise StopAsyncIteration from None
        except Exception as exc:
            self._failed = True
            if self._config.will_retry(exc, self._attempt):
                raise WillRetryError(str(exc), self._attempt) from exc
            raise

    async def aclose(self) -> None:
        await self._reader.aclose()


class _Deadline:
    """Passes a model stream through; a read still waiting when the run's deadline passes ends the stream with
    ``AgentTimeoutError`` (the runner's own deadline covers only the supersteps it drives, not a consumer
    reading the tokens of a model event between them)."""

    __slots__ = ("_deadline", "_done", "_reader", "_timeout")

    def __init__(self, reader: StreamReader[Message], deadline: float, timeout: float) -> None:
        self._reader = reader
        self._deadline = deadline
        self._timeout = timeout
        self._done = False

    def __aiter__(self) -> _Deadline:
        return self

    async def __anext__(self) -> Message:
        if self._done:
            raise StopAsyncIteration
        with anyio.CancelScope(deadline=self._deadline) as scope:
            try:
                return await self._reader.recv()
            except StreamEnd:
                self._done = True
                raise StopAsyncIteration from None
        # only our own deadline lands here: an outer cancellation propagates out of the scope
        assert scope.cancelled_caught
        self._done = True
        raise AgentTimeoutError(self._timeout)

    async def aclose(self) -> None:
        self._done = True
        await self._reader.aclose()


class FirstCallOptionsModel:
    """Adds ``tool_choice`` to the options of a run's first model call (seed 000)."""

    def __init__(self, inner: ChatModel, tool_choice: ToolChoice) -> None:
        self.inner = inner
        self.tool_choice = tool_choice

    def with_tools(self, tools: Sequence[ToolInfo]) -> FirstCallOptionsModel:
        return FirstCallOptionsModel(self.inner.with_tools(tools), self.tool_choice)

    def _opts(self, opts: dict[str, Any]) -> dict[str, Any]:
        run = current_run.get()
        if run is not None and run.model_calls == 1:
            return {**opts, "tool_choice": self.tool_choice}
        return opts

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self.inner.generate(messages, **self._opts(opts))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self.inner.stream(messages, **self._opts(opts))
