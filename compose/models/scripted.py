"""ScriptedChatModel: a deterministic, offline chat model for tests, demos and users' own tests."""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from compose.errors import ScriptExhaustedError
from compose.models.base import ChatModelOptions
from compose.schema import FunctionCall, Message, ResponseMeta, ToolCall, ToolInfo, Usage
from compose.stream import StreamReader

__all__ = ["ScriptedCall", "ScriptedChatModel", "ScriptedResponse"]

ScriptedResponse: TypeAlias = (
    Message
    | str
    | Callable[[list[Message]], Message | str]
    | Callable[[list[Message]], Awaitable[Message | str]]
)
"""A scripted answer: a message, a string (an assistant message with that content), or a function of the
messages returning either (sync or async)."""


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One recorded call of a :class:`ScriptedChatModel`.

    Attributes:
        messages: the messages the model was called with (a copy of the list).
        options: the call's options, after the model's own were overridden by the per-call ones.
        tools: the tools bound to the model that was called.
        streaming: whether the call was ``stream`` (else ``generate``).
    """

    messages: list[Message]
    options: ChatModelOptions
    tools: tuple[ToolInfo, ...]
    streaming: bool


@dataclass(slots=True)
class _Script:
    """The state a model shares with every model derived from it by ``with_tools``."""

    responses: list[ScriptedResponse]
    fail_at_call: dict[int, BaseException]
    fail_at_chunk: dict[tuple[int, int], BaseException]
    calls: list[ScriptedCall] = field(default_factory=list)
    position: int = 0


class ScriptedChatModel:
    """A chat model that plays a script of responses, one per call, and records every call.

    Each call records a :class:`ScriptedCall` in ``calls``, then answers with the next scripted response. Tool
    calls in a response without an ``index`` get their position as index, and those without an ``id`` get
    ``call_<k>_<i>`` (call ``k``, tool call ``i``), so that ``generate`` and the concatenated ``stream`` give
    the same message. The answer's ``response_meta`` is filled in where the scripted message has none:
    ``finish_reason`` is ``"tool_calls"`` or ``"stop"``, and usage is reported as configured.

    ``stream`` splits the answer into chunks as real servers do: reasoning, then content, each in pieces of
    ``chunk_size`` characters, then each content part in a chunk of its own, then each tool call's arguments in
    pieces of ``chunk_size``, every fragment carrying the call's ``index`` and only the first one its id and
    name; the last chunk carries the response meta. Concatenating the chunks with ``concat_messages`` gives
    exactly the ``generate`` answer (adjacent text parts merged, as concatenation does).

    Failures are injected by call number ``k`` (0-based: the call recorded as ``calls[k]``):
    ``fail_at_call={k: exc}`` makes call ``k`` raise ``exc`` (``stream`` raises it before returning a
    reader), and ``fail_at_chunk={(k, j): exc}`` makes the stream of call ``k`` deliver ``exc`` instead of
    chunk ``j`` (0-based; after the last chunk if ``j`` is past it), ending the stream. A failed call does not
    use up its scripted response, so the next call (a retry) plays the same one. A call past the end of the
    script raises :class:`~compose.errors.ScriptExhaustedError`.

    Args:
        responses: the script, one response per call.
        chunk_size: characters per streamed piece of text or arguments (at least 1).
        usage: ``True`` reports a word-count estimate (whitespace-separated words of the input messages'
            content as prompt tokens, of the answer's content, reasoning and arguments as completion tokens);
            a ``Usage`` reports that value on every call; ``False`` reports none.
        fail_at_call: call number to the exception that call raises.
        fail_at_chunk: (call number, chunk number) to the exception the stream delivers there.
        **params: default options for every call (per-call options override them).

    Example:
        >>> import anyio
        >>> model = ScriptedChatModel(["Hello!"], usage=False)
        >>> anyio.run(model.generate, [Message(role="user", content="Hi")])
        Message(role='assistant', content='Hello!')
        >>> len(model.calls)
        1
    """

    def __init__(
        self,
        responses: Iterable[ScriptedResponse],
        *,
        chunk_size: int = 4,
        usage: bool | Usage = True,
        fail_at_call: Mapping[int, BaseException] | None = None,
        fail_at_chunk: Mapping[tuple[int, int], BaseException] | None = None,
        **params: Any,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
        self._script = _Script(list(responses), dict(fail_at_call or {}), dict(fail_at_chunk or {}))
        self._chunk_size = chunk_size
        self._usage = usage
        self._options = ChatModelOptions.from_kwargs(**params)
        self._tools: tuple[ToolInfo, ...] = ()

    model_name = "scripted"
    """The request model callbacks and tracing report."""
    provider_name = "pyeino.scripted"
    """The provider callbacks and tracing report."""

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, of this model and of all models derived from it by ``with_tools``."""
        return self._script.calls

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """The tools bound to this model."""
        return self._tools

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been played yet."""
        return len(self._script.responses) - self._script.position

    def with_tools(self, tools: Sequence[ToolInfo]) -> ScriptedChatModel:
        """A model bound to ``tools`` that shares this model's script and call record."""
        bound = copy.copy(self)
        bound._tools = tuple(tools)
        return bound

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        """Record the call and return the next scripted answer (see the class docstring)."""
        _, answer = await self._next(messages, opts, streaming=False)
        return answer

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        """Record the call and return the next scripted answer as a stream of chunks."""
        k, answer = await self._next(messages, opts, streaming=True)
        chunks = self._chunks(answer)
        failures = {j: exc for (call, j), exc in self._script.fail_at_chunk.items() if call == k}
        if not failures:
            return StreamReader.from_iterable(chunks)
        self._script.position -= 1  # a stream that fails does not use up its response
        return StreamReader.from_async_iterator(_failing(chunks, failures))

    def __repr__(self) -> str:
        tools = f", tools={[t.name for t in self._tools]}" if self._tools else ""
        return f"ScriptedChatModel(calls={len(self.calls)}, remaining={self.remaining}{tools})"

    async def _next(
        self, messages: Sequence[Message], opts: dict[str, Any], *, streaming: bool
    ) -> tuple[int, Message]:
        script = self._script
        k = len(script.calls)
        history = list(messages)
        script.calls.append(ScriptedCall(history, self._options.merged(**opts), self._tools, streaming))
        exc = script.fail_at_call.get(k)
        if exc is not None:
            raise exc
        if script.position >= len(script.responses):
            raise ScriptExhaustedError(
                f"ScriptedChatModel has {len(script.responses)} scripted responses "
                f"and was called past its script (call {k}, 0-based)"
            )
        response = script.responses[script.position]
        script.position += 1
        if callable(response):
            result = response(list(history))
            response = await result if inspect.isawaitable(result) else result
        return k, self._finish(response, history, k)

    def _finish(self, response: Message | str, history: list[Message], k: int) -> Message:
        msg = Message(role="assistant", content=response) if isinstance(response, str) else response
        calls = msg.tool_calls
        if any(c.index is None or not c.id for c in calls):
            calls = [
                c.model_copy(
                    update={"index": i if c.index is None else c.index, "id": c.id or f"call_{k}_{i}"}
                )
                for i, c in enumerate(calls)
            ]
        meta = msg.response_meta
        if meta is None:
            meta = ResponseMeta(
                finish_reason="tool_calls" if calls else "stop", usage=self._usage_for(history, msg)
            )
        if calls is msg.tool_calls and meta is msg.response_meta:
            return msg
        return msg.model_copy(update={"tool_calls": calls, "response_meta": meta})

    def _usage_for(self, history: list[Message], answer: Message) -> Usage | None:
        if self._usage is False:
            return None
        if isinstance(self._usage, Usage):
            return self._usage
        prompt = sum(len(m.content.split()) for m in history)
        completion = len(answer.content.split()) + len(answer.reasoning_content.split())
        completion += sum(len(c.function.arguments.split()) for c in answer.tool_calls)
        return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)

    def _chunks(self, answer: Message) -> list[Message]:
        size = self._chunk_size
        role = answer.role
        chunks = [
            Message(role=role, reasoning_content=part) for part in _pieces(answer.reasoning_content, size)
        ]
        chunks += [Message(role=role, content=part) for part in _pieces(answer.content, size)]
        chunks += [Message(role=role, parts=[part]) for part in answer.parts]  # a chunk per part
        for call in answer.tool_calls:
            args = _pieces(call.function.arguments, size) or [""]
            for n, part in enumerate(args):
                if n == 0:
                    fn = FunctionCall(name=call.function.name, arguments=part)
                    frag = ToolCall(
                        id=call.id, index=call.index, type=call.type, function=fn, extra=call.extra
                    )
                else:
                    fn = FunctionCall(name="", arguments=part)
                    frag = ToolCall(id="", index=call.index, type="", function=fn, extra={})
                chunks.append(Message(role=role, tool_calls=[frag]))
        if not chunks:
            chunks.append(Message(role=role))
        # fields that appear once per message ride on the first and last chunks
        chunks[0] = chunks[0].model_copy(
            update={"name": answer.name, "tool_call_id": answer.tool_call_id, "tool_name": answer.tool_name}
        )
        if answer.extra:
            chunks[0] = chunks[0].model_copy(update={"extra": dict(answer.extra)})
        chunks[-1] = chunks[-1].model_copy(update={"response_meta": answer.response_meta})
        return chunks


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _failing(chunks: list[Message], failures: dict[int, BaseException]) -> AsyncIterator[Message]:
    for j, chunk in enumerate(chunks):
        if j in failures:
            raise failures[j]
        yield chunk
    raise failures[min(failures)]
