"""OpenTelemetry tracing: a callback handler emitting spans after the GenAI semantic conventions (extra ``otel``).

``OTelHandler`` is a :class:`~compose.callbacks.CallbackHandler`; install it globally
(``append_global_callbacks(OTelHandler())``), per call (``runnable.invoke(x, callbacks=[OTelHandler()])``) or on a
``Runner(agent, callbacks=[...])``. Spans, nested as the runs nest (a node under its graph, a sub-graph under its
node, a tool under its ToolsNode, an agent's graph under the agent):

* ``invoke_agent <agent>`` per agent run (``gen_ai.operation.name``, ``gen_ai.agent.name``);
* ``chat <model>`` per chat-model call (kind CLIENT; ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` /
  ``output_tokens``);
* ``execute_tool <tool>`` per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``);
* ``<Component> <name>`` per graph run and per other node (``Graph react``, ``Lambda format``, ``ToolsNode tools``).

Every span has ``pyeino.component``, ``pyeino.name`` and ``pyeino.type`` (the ``RunInfo``). An error sets the span
status to ERROR, records the exception and sets ``error.type``; an interrupt is not an error (the span ends with
``pyeino.interrupted = true``); a cancelled or abandoned run ends its spans with ``pyeino.cancelled = true``. A span
whose run returned a stream ends when the stream does (read to its end, closed early: ``pyeino.stream.closed_early``,
or failed) and records ``gen_ai.response.time_to_first_chunk`` (seconds). The span of a node or tool is the
current span while its code runs, so a tool's own instrumented HTTP client nests under ``execute_tool``.

Message contents are recorded only on request: ``capture_content=True`` (or a mode string), else the
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable: ``true`` / ``SPAN_ONLY`` (span
attributes), ``EVENT_ONLY`` (a ``gen_ai.client.inference.operation.details`` span event), ``SPAN_AND_EVENT``
(both), ``false`` / ``NO_CONTENT`` / unset (nothing). Contents go to ``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions`` (JSON, in the conventions' parts format),
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``.

Example::

    from opentelemetry.sdk.trace import TracerProvider
    provider = TracerProvider()
    result = await runnable.invoke(x, callbacks=[OTelHandler(tracer_provider=provider)])
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "compose.otel needs the OpenTelemetry API: pip install 'pyeino[otel]' (opentelemetry-api)"
    ) from exc

from compose.callbacks import CallbackHandler, RunInfo, StreamObserver, observe_stream
from compose.errors import GraphInterrupt
from compose.schema import Message, ResponseMeta, concat_messages
from compose.stream import StreamReader

__all__ = ["OTelHandler"]

_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_MODES = {
    "true": (True, False),
    "span_only": (True, False),
    "event_only": (False, True),
    "span_and_event": (True, True),
    "false": (False, False),
    "no_content": (False, False),
    "": (False, False),
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_FRAME = otel_context.create_key("pyeino.otel.frame")


def _content_mode(capture_content: bool | str | None) -> tuple[bool, bool]:
    """(on the span, as a span event) from the flag, else from the environment variable."""
    if isinstance(capture_content, bool):
        return (capture_content, False)
    value = capture_content if capture_content is not None else os.environ.get(_ENV, "")
    mode = _MODES.get(value.strip().lower())
    if mode is None:
        raise ValueError(
            f"capture_content / ${_ENV} is {value!r}; expected true, false, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT "
            "or NO_CONTENT"
        )
    return mode


class _Frame:
    """One open span: what ended it needs, and the context token to give back."""

    __slots__ = ("content", "ctx", "first", "info", "parent", "span", "start", "token")

    def __init__(self, info: RunInfo, span: trace.Span, parent: _Frame | None) -> None:
        self.info = info
        self.span = span
        self.parent = parent
        self.start = time.perf_counter()
        self.first = False  # a stream output's first chunk was seen
        self.content: dict[str, str] = {}  # captured content, for the span event
        self.ctx: Any = None
        self.token: Any = None


class OTelHandler(CallbackHandler):
    """Emits OpenTelemetry spans for graph, node, chat-model, tool and agent runs (see the module docstring).

    Args:
        tracer_provider: the provider to get the tracer from; default the global one (``trace.set_tracer_provider``).
            Without an SDK configured the spans are non-recording: no attribute or content is computed (the run
            still pays for having a callback handler; see ``benchmarks/bench_otel.py``).
        capture_content: record message contents: True / False, or a mode string as the environment variable
            takes; None (default) reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` once, here.

    Raises:
        ValueError: an unknown content-capture mode.
    """

    def __init__(
        self, tracer_provider: trace.TracerProvider | None = None, capture_content: bool | str | None = None
    ) -> None:
        self._tracer = trace.get_tracer("pyeino", tracer_provider=tracer_provider)
        self._content_on_span, self._content_as_event = _content_mode(capture_content)
        self._capture = self._content_on_span or self._content_as_event

    def __repr__(self) -> str:
        mode = {(False, False): "none", (True, False): "span", (False, True): "event", (True, True): "span+event"}
        return f"OTelHandler(content={mode[(self._content_on_span, self._content_as_event)]})"

    # ------------------------------------------------------------------ starts

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        self._open(run_info, input)

    async def on_start_with_stream_input(self, run_info: RunInfo, reader: StreamReader[Any]) -> None:
        await reader.aclose()
        self._open(run_info, None)

    def _open(self, info: RunInfo, input: Any) -> None:
        component = info.component
        attrs: dict[str, Any] = {"pyeino.component": component, "pyeino.name": info.name, "pyeino.type": info.type}
        kind = trace.SpanKind.INTERNAL
        if component == "ChatModel":
            name = f"chat {info.model}" if info.model else "chat"
            kind = trace.SpanKind.CLIENT
            attrs["gen_ai.operation.name"] = "chat"
            if info.provider:
                attrs["gen_ai.provider.name"] = info.provider
            if info.model:
                attrs["gen_ai.request.model"] = info.model
        elif component == "Tool":
            name = f"execute_tool {info.name}"
            attrs["gen_ai.operation.name"] = "execute_tool"
            attrs["gen_ai.tool.name"] = info.name
            attrs["gen_ai.tool.type"] = "function"
            call_id = getattr(input, "call_id", None)
            if call_id:
                attrs["gen_ai.tool.call.id"] = call_id
        elif component == "Agent":
            name = f"invoke_agent {info.name}"
            attrs["gen_ai.operation.name"] = "invoke_agent"
            attrs["gen_ai.agent.name"] = info.name
        else:
            name = f"{component} {info.name}"
        parent_ctx = otel_context.get_current()
        span = self._tracer.start_span(name, context=parent_ctx, kind=kind, attributes=attrs)
        frame = _Frame(info, span, otel_context.get_value(_FRAME, parent_ctx))  # type: ignore[arg-type]
        if self._capture and span.is_recording() and input is not None:
            self._input_content(frame, input)
        ctx = otel_context.set_value(_FRAME, frame, trace.set_span_in_context(span, parent_ctx))
        frame.ctx = ctx
        frame.token = otel_context.attach(ctx)

    def _input_content(self, frame: _Frame, input: Any) -> None:
        component = frame.info.component
        if component == "Tool":
            arguments = getattr(input, "arguments", None)
            if isinstance(arguments, str):
                self._record(frame, "gen_ai.tool.call.arguments", arguments)
        elif component in ("ChatModel", "Agent") and isinstance(input, list):
            messages = [m for m in input if isinstance(m, Message)]
            system = [{"type": "text", "content": m.content} for m in messages if m.role == "system"]
            if system:
                self._record(frame, "gen_ai.system_instructions", _dumps(system))
            self._record(
                frame, "gen_ai.input.messages", _dumps([_message_json(m) for m in messages if m.role != "system"])
            )

    def _record(self, frame: _Frame, key: str, value: str) -> None:
        if self._content_on_span:
            frame.span.set_attribute(key, value)
        if self._content_as_event:
            frame.content[key] = value

    # ------------------------------------------------------------------ ends

    def _pop(self, info: RunInfo) -> _Frame | None:
        """The open frame of ``info`` (the innermost one), made no longer current."""
        frame: _Frame | None = otel_context.get_value(_FRAME)  # type: ignore[assignment]
        while frame is not None and frame.info is not info:
            frame = frame.parent
        if frame is None:
            return None
        # Give the context back only if it is still the current one: a start and its end share a task, but a
        # caller that drives a run from several tasks (or attached a context of its own meanwhile) must not
        # have its context replaced by a stale one.
        if otel_context.get_current() is frame.ctx:
            otel_context.detach(frame.token)
        return frame

    def _close(self, frame: _Frame) -> None:
        if frame.content:
            frame.span.add_event(_DETAILS_EVENT, attributes=frame.content)
        frame.span.end()

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        frame = self._pop(run_info)
        if frame is None:
            return
        if frame.span.is_recording():
            self._output(frame, output)
        self._close(frame)

    def _output(self, frame: _Frame, output: Any) -> None:
        component = frame.info.component
        if component == "ChatModel" and isinstance(output, Message):
            _response_attributes(frame.span, output.response_meta)
        if not self._capture:
            return
        if component == "Tool" and isinstance(output, str):
            self._record(frame, "gen_ai.tool.call.result", output)
        elif component in ("ChatModel", "Agent") and isinstance(output, Message):
            meta = output.response_meta
            out = _message_json(output)
            if meta is not None and meta.finish_reason:
                out["finish_reason"] = meta.finish_reason
            self._record(frame, "gen_ai.output.messages", _dumps([out]))

    async def on_error(self, run_info: RunInfo, error: BaseException) -> None:
        frame = self._pop(run_info)
        if frame is None:
            return
        _fail(frame.span, error)
        self._close(frame)

    async def on_interrupt(self, run_info: RunInfo, interrupt: GraphInterrupt) -> None:
        frame = self._pop(run_info)
        if frame is None:
            return
        frame.span.set_attribute("pyeino.interrupted", True)
        self._close(frame)

    async def on_cancel(self, run_info: RunInfo) -> None:
        frame = self._pop(run_info)
        if frame is None:
            return
        frame.span.set_attribute("pyeino.cancelled", True)
        self._close(frame)

    async def wrap_stream_output(self, run_info: RunInfo, reader: StreamReader[Any]) -> StreamReader[Any]:
        frame = self._pop(run_info)
        if frame is None:
            return reader
        if not frame.span.is_recording():
            frame.span.end()
            return reader
        return observe_stream(reader, _SpanStream(self, frame))


class _SpanStream(StreamObserver):
    """Ends a span when its stream ends; on the way, the time to the first chunk and, for a chat model, what
    the chunks' metadata say (and their content, when captured)."""

    __slots__ = ("chunks", "failed", "frame", "handler", "meta", "metas")

    def __init__(self, handler: OTelHandler, frame: _Frame) -> None:
        self.handler = handler
        self.frame = frame
        self.failed = False
        component = frame.info.component
        self.meta = component == "ChatModel"
        self.metas: list[ResponseMeta] = []
        # the chunks are kept only when their content is recorded at the end
        self.chunks: list[Any] | None = [] if handler._capture and component in ("ChatModel", "Tool") else None

    def on_chunk(self, chunk: Any) -> None:
        frame = self.frame
        if not frame.first:
            frame.first = True
            frame.span.set_attribute("gen_ai.response.time_to_first_chunk", time.perf_counter() - frame.start)
        if self.chunks is not None:
            self.chunks.append(chunk)
        elif self.meta and isinstance(chunk, Message) and chunk.response_meta is not None:
            self.metas.append(chunk.response_meta)

    def on_error(self, error: BaseException) -> None:
        if not self.failed:
            self.failed = True
            _fail(self.frame.span, error)

    def on_finish(self, closed: bool) -> None:
        frame = self.frame
        if closed:
            frame.span.set_attribute("pyeino.stream.closed_early", True)
        chunks = self.chunks
        component = frame.info.component
        if chunks is not None:
            if component == "ChatModel":
                messages = [c for c in chunks if isinstance(c, Message)]
                if messages:
                    try:
                        whole = concat_messages(messages)
                    except Exception:  # a broken stream: its error is on the span already
                        whole = None
                    if whole is not None:
                        self.handler._output(frame, whole)
            elif component == "Tool":
                self.handler._output(frame, "".join(c for c in chunks if isinstance(c, str)))
        elif self.meta:
            _response_attributes(frame.span, _merged_meta(self.metas))
        self.handler._close(frame)


def _merged_meta(metas: Sequence[ResponseMeta]) -> ResponseMeta | None:
    if not metas:
        return None
    finish, model, usage = "", "", None
    for m in metas:
        finish = m.finish_reason or finish
        model = m.model or model
        usage = m.usage or usage
    return ResponseMeta.model_construct(finish_reason=finish, usage=usage, model=model)


def _response_attributes(span: trace.Span, meta: ResponseMeta | None) -> None:
    if meta is None:
        return
    if meta.model:
        span.set_attribute("gen_ai.response.model", meta.model)
    if meta.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [meta.finish_reason])
    if meta.usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", meta.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", meta.usage.completion_tokens)


def _fail(span: trace.Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.set_attribute("error.type", type(error).__qualname__)


def _message_json(m: Message) -> dict[str, Any]:
    """A message in the conventions' format: ``{"role": ..., "parts": [...]}``."""
    parts: list[dict[str, Any]] = []
    if m.role == "tool":
        parts.append({"type": "tool_call_response", "id": m.tool_call_id or "", "response": m.content})
    elif m.content:
        parts.append({"type": "text", "content": m.content})
    for tc in m.tool_calls:
        try:
            arguments: Any = json.loads(tc.function.arguments) if tc.function.arguments else {}
        except ValueError:
            arguments = tc.function.arguments
        parts.append({"type": "tool_call", "id": tc.id, "name": tc.function.name, "arguments": arguments})
    out: dict[str, Any] = {"role": m.role, "parts": parts}
    if m.name:
        out["name"] = m.name
    return out


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
