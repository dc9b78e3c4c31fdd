"""The chat model chain of a ChatModelAgent: options -> retry -> event emitter -> the user's model.

* :class:`EventModel` (innermost, once per attempt): sends one model event per call. ``generate``: an event
  with the message. ``stream``: the model's stream is copied in two; copy 0 becomes the event's
  ``message_stream`` and copy 1 goes on, so the consumer reads tokens while the model generates (the copy the
  consumer reads drives the model; the other buffers). With retries, a failed attempt's event stream ends
  with ``WillRetryError``. It also reports ``model.call.*`` and ``text.delta`` telemetry when handlers exist,
  checks that the model returned a ``Message`` / ``StreamReader`` of ``Message`` chunks (``ModelResponseError``
  naming the agent and the model otherwise, for a chunk as an error item that both copies raise), and
  bounds the reading of the stream by the run's deadline (``timeout``): a read still waiting for the model
  when the deadline passes raises ``AgentTimeoutError``, also while the consumer, not the runner, reads the
  tokens.
* :class:`OptionsModel` (outermost): adds options to every call (``response_format`` for structured output)
  and to the first model call of a run only (``tool_choice``; retries of that call keep it, since retry sits
  inside).
* :class:`ToolBinder` (innermost, below the middlewares' ``wrap_model`` wrappers, only for agents with
  middlewares that may change the tools): offers the model the tools of the run's state
  (``State.tool_infos``), as Eino passes ``model.WithTools(state.ToolInfos)`` per call; the agent's own tools
  stay bound once, and a run's changed list is bound once per list.

With an ``output_type``, :class:`EventModel` also sets ``event.output.structured`` on the
event of an answer without tool calls that parses: at once for ``generate``, at the end of the event's stream
for ``stream``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from adk.chat_model._context import ReactContext, current_react
from adk.chat_model.failover import failover_has_more
from adk.chat_model.retry import ModelRetryConfig, current_attempt
from adk.errors import AgentTimeoutError, WillRetryError
from adk.events import AgentEvent, AgentOutput, MessageVariant
from adk.middlewares.base import same_items
from compose.errors import StreamEnd
from compose.lowlevel import MapReader, ReaderRelay, copies_of_own, ready_mapped
from compose.models.base import ChatModel, checked_chunk, checked_message, checked_stream
from compose.schema import Message, ToolInfo, concat_messages
from compose.stream import StreamReader

if TYPE_CHECKING:
    from adk.chat_model.structured_output import OutputSchema


def _usage(msg: Message) -> dict[str, int] | None:
    meta = msg.response_meta
    if meta is None or meta.usage is None:
        return None
    u = meta.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


class EventModel:
    """Sends a model event per call (per attempt under retry) into the current run. It checks that the model
    returned a ``Message`` / a ``StreamReader`` of ``Message`` chunks (``checks_messages``: the graph's node does
    not check again), naming agent ``agent_name``."""

    checks_messages = True

    def __init__(
        self,
        inner: ChatModel,
        retry: ModelRetryConfig | None = None,
        output: OutputSchema | None = None,
        agent_name: str = "",
    ) -> None:
        self.inner = inner
        self.retry = retry
        self.output = output
        self.agent_name = agent_name
        where = f"agent '{agent_name}': chat model {type(inner).__qualname__}" if agent_name else ""
        self._generate_source = f"{where or f'chat model {type(inner).__qualname__}'}: generate()"
        self._stream_source = f"{where or f'chat model {type(inner).__qualname__}'}: stream()"
        self._check_chunk = partial(checked_chunk, self._stream_source)  # every stream's chunks pass it
        # whether a stream's event copy ends with WillRetryError when the call is retried
        self._retries = retry is not None and retry.max_retries > 0

    def with_tools(self, tools: Sequence[ToolInfo]) -> EventModel:
        return EventModel(self.inner.with_tools(tools), self.retry, self.output, self.agent_name)

    def __repr__(self) -> str:
        return f"EventModel({self.inner!r})"

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        # a run parked in its model call holds this frame: its locals are kept few (telemetry in a helper)
        run = current_react.get()
        if run is None or not (run.telemetry or run.cancel is not None):
            answer: object = await self.inner.generate(messages, **opts)
        else:
            answer = await self._observed(run, messages, opts)
        if not isinstance(answer, Message):
            answer = checked_message(answer, self._generate_source)
        if run is not None:
            self._send(run, answer)
        return answer

    def _send(self, run: ReactContext, msg: Message) -> None:
        """The model event of an answer ``msg`` (its structured answer parsed when the agent has an output type)."""
        output = AgentOutput(MessageVariant(False, msg))
        if self.output is not None and not msg.tool_calls:
            output.structured = self.output.try_parse(msg.content)
        run.events.append(AgentEvent(run.agent_name, run.run_path, output))

    async def _observed(self, run: ReactContext, messages: Sequence[Message], opts: Any) -> Message:
        """The model's ``generate`` guarded by a cancellable run's link (``adk.cancel``) and between the
        ``model.call.*`` telemetry events (no-ops without handlers)."""
        inner = self.inner if run.cancel is None else run.cancel.model(self.inner)
        run.emit("model.call.started", attempt=current_attempt.get(), streaming=False)
        try:
            got: object = await inner.generate(messages, **opts)
            msg = got if isinstance(got, Message) else checked_message(got, self._generate_source)
        except Exception as exc:
            run.emit("model.call.completed", attempt=current_attempt.get(), error=repr(exc), usage=None)
            raise
        run.emit("model.call.completed", attempt=current_attempt.get(), usage=_usage(msg))
        return msg

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        run = current_react.get()
        if run is None:
            return checked_stream(await self.inner.stream(messages, **opts), self._stream_source)
        attempt = current_attempt.get()
        telemetry = bool(run.telemetry)
        if telemetry:
            run.emit("model.call.started", attempt=attempt, streaming=True)
        cancel = run.cancel  # a cancellable run's: the call and the stream's reads are cut off by a cancel
        try:
            started: object = await (self.inner if cancel is None else cancel.model(self.inner)).stream(
                messages, **opts
            )
            reader = started if isinstance(started, StreamReader) else checked_stream(started, self._stream_source)
        except Exception as exc:
            if telemetry:
                run.emit("model.call.completed", attempt=attempt, usage=None, error=repr(exc))
            raise
        # checked before the copy: the event's reader and the graph's see the same ModelResponseError
        reader = ready_mapped(reader, self._check_chunk) or MapReader(reader, self._check_chunk, is_async=False)
        if run.deadline is not None:
            reader = StreamReader.from_async_iterator(_Deadline(reader, run.deadline, run.timeout))
        if telemetry:
            reader = StreamReader.from_async_iterator(_Tap(reader, run, attempt))
        if cancel is not None:
            reader = cancel.model_stream(reader)
        event_copy, out = copies_of_own(reader, 2)  # made here: no husk left for another holder
        if cancel is not None:
            event_copy = cancel.event_stream(event_copy)
        failover = failover_has_more.get()
        if self._retries or failover:
            event_copy = StreamReader.from_async_iterator(_RetryMarker(event_copy, self.retry, attempt, failover))
        output = AgentOutput()
        if self.output is not None:
            event_copy = StreamReader.from_async_iterator(_ParseAtEnd(event_copy, self.output, output))
        output.message_output = MessageVariant(True, None, event_copy)
        run.events.append(AgentEvent(run.agent_name, run.run_path, output))
        return out


class _Tap(ReaderRelay[Message]):
    """Passes a model stream through, reporting ``text.delta`` per content chunk and ``model.call.completed``
    at its end (with the usage of the last chunk that carried one)."""

    __slots__ = ("_attempt", "_done", "_run", "_usage")

    def __init__(self, reader: StreamReader[Message], run: ReactContext, attempt: int) -> None:
        self._reader = reader
        self._run = run
        self._attempt = attempt
        self._usage: dict[str, int] | None = None
        self._done = False

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


class _RetryMarker(ReaderRelay[Message]):
    """An attempt's event stream whose failure becomes ``WillRetryError`` when the call will be retried (or
    another failover attempt follows)."""

    __slots__ = ("_attempt", "_config", "_failed", "_failover")

    def __init__(
        self, reader: StreamReader[Message], config: ModelRetryConfig | None, attempt: int, failover: bool = False
    ) -> None:
        self._reader = reader
        self._config = config
        self._attempt = attempt
        self._failover = failover
        self._failed = False

    async def __anext__(self) -> Message:
        if self._failed:
            raise StopAsyncIteration
        try:
            return await self._reader.recv()
        except StreamEnd:
            raise StopAsyncIteration from None
        except Exception as exc:
            self._failed = True
            if self._failover or (self._config is not None and self._config.will_retry(exc, self._attempt)):
                raise WillRetryError(str(exc), self._attempt) from exc
            raise


class _Deadline(ReaderRelay[Message]):
    """Passes a model stream through; a read still waiting when the run's deadline passes ends the stream with
    ``AgentTimeoutError`` (the runner's own deadline covers only the supersteps it drives, not a consumer
    reading the tokens of a model event between them)."""

    __slots__ = ("_deadline", "_done", "_timeout")

    def __init__(self, reader: StreamReader[Message], deadline: float, timeout: float) -> None:
        self._reader = reader
        self._deadline = deadline
        self._timeout = timeout
        self._done = False

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


class _ParseAtEnd(ReaderRelay[Message]):
    """Passes an event's stream through; at its end, a whole answer without tool calls that parses as the
    output type becomes the event's ``output.structured``."""

    __slots__ = ("_chunks", "_output", "_schema")

    def __init__(self, reader: StreamReader[Message], schema: OutputSchema, output: AgentOutput) -> None:
        self._reader = reader
        self._schema = schema
        self._output = output
        self._chunks: list[Message] = []

    async def __anext__(self) -> Message:
        try:
            chunk = await self._reader.recv()
        except StreamEnd:
            if self._chunks:
                whole = concat_messages(self._chunks)
                self._chunks = []
                if not whole.tool_calls:
                    self._output.structured = self._schema.try_parse(whole.content)
            raise StopAsyncIteration from None
        self._chunks.append(chunk)
        return chunk


class OptionsModel:
    """Adds ``options`` to every call and ``first_call`` options to a run's first model call (seed 000's
    ``tool_choice``)."""

    def __init__(self, inner: ChatModel, options: dict[str, Any], first_call: dict[str, Any]) -> None:
        self.inner = inner
        self.options = options
        self.first_call = first_call
        self.checks_messages = getattr(inner, "checks_messages", False) is True  # it returns what inner does

    def with_tools(self, tools: Sequence[ToolInfo]) -> OptionsModel:
        return OptionsModel(self.inner.with_tools(tools), self.options, self.first_call)

    def __repr__(self) -> str:
        return f"OptionsModel({self.inner!r}, options={sorted(self.options)}, first_call={sorted(self.first_call)})"

    def _opts(self, opts: dict[str, Any]) -> dict[str, Any]:
        merged = {**self.options, **opts} if self.options else opts
        if self.first_call:
            run = current_react.get()
            if run is not None and run.model_calls == 1:
                return {**merged, **self.first_call}
        return merged

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self.inner.generate(messages, **self._opts(opts))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self.inner.stream(messages, **self._opts(opts))


class ToolBinder:
    """The user's model with the run's tools bound (see the module docstring)."""

    __slots__ = ("_bound", "_last", "defaults", "model")

    def __init__(self, model: ChatModel, defaults: Sequence[ToolInfo]) -> None:
        self.model = model
        self.defaults = tuple(defaults)
        self._bound = model.with_tools(self.defaults) if self.defaults else model
        self._last: tuple[list[ToolInfo], tuple[ToolInfo, ...], ChatModel] | None = None

    def __repr__(self) -> str:
        return f"ToolBinder({self.model!r}, tools={[t.name for t in self.defaults]})"

    def with_tools(self, tools: Sequence[ToolInfo]) -> ToolBinder:
        return ToolBinder(self.model, tools)

    def _pick(self) -> ChatModel:
        run = current_react.get()
        st = run.state if run is not None else None
        infos = st.tool_infos if st is not None else None
        if infos is None:
            return self._bound
        last = self._last
        # the state keeps one list per run: bind it once (a list changed in place is bound again)
        if last is not None and last[0] is infos and same_items(last[1], infos):
            return last[2]
        bound = self.model.with_tools(infos) if infos else self.model
        self._last = (infos, tuple(infos), bound)
        return bound

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._pick().generate(messages, **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self._pick().stream(messages, **opts)
