"""The chat model and tools a cassette hands out: each call is answered from the cassette or made and recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from compose.errors import CassetteError, StreamEnd
from compose.models.base import ChatModel, model_identity
from compose.schema import Message, ToolInfo, concat_messages
from compose.stream import StreamReader
from compose.testing._cassette_data import (
    Interaction,
    dump_chunks,
    dump_message,
    dump_tools,
    load_message,
    model_request,
    tool_request,
)
from compose.tools.base import BaseTool

if TYPE_CHECKING:
    from compose.testing.cassette import Cassette

T = TypeVar("T")


class CassetteChatModel:
    """A chat model whose calls a :class:`~compose.testing.cassette.Cassette` records or replays
    (``cassette.wrap(model)``). ``inner`` is the wrapped model; its ``model_name``, ``provider_name`` and
    ``supports_response_format`` show through."""

    def __init__(
        self, inner: ChatModel, cassette: Cassette, *, name: str | None = None, tools: Sequence[ToolInfo] = ()
    ) -> None:
        self.inner = inner
        self.cassette = cassette
        self.name = name if name is not None else model_identity(inner)[0]
        self.tools = tuple(tools)
        self._tool_data = dump_tools(self.tools)  # once per binding, not once per call

    @property
    def supports_response_format(self) -> bool:
        """The wrapped model's (an agent with an ``output_type`` picks its output mode by it)."""
        return getattr(self.inner, "supports_response_format", False) is True

    def __repr__(self) -> str:
        return f"CassetteChatModel({self.inner!r}, cassette={str(self.cassette.path)!r})"

    def with_tools(self, tools: Sequence[ToolInfo]) -> CassetteChatModel:
        """The wrapped model bound to ``tools``, still on the cassette."""
        return CassetteChatModel(self.inner.with_tools(tools), self.cassette, name=self.name, tools=tools)

    def _request(self, messages: Sequence[Message], opts: dict[str, Any]) -> dict[str, Any]:
        return model_request(messages, self._tool_data, opts, self.name, self.cassette.secret_keys)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        """The recorded answer, or the wrapped model's answer (recorded)."""
        request = self._request(messages, opts)
        found = self.cassette.lookup("model", request)
        if found is not None:
            return _recorded_message(found, self.cassette)
        seq = self.cassette.begin()
        answer = await self.inner.generate(messages, **opts)
        self.cassette.record(seq, "model", request, {"message": dump_message(answer, self.cassette.secret_keys)})
        return answer

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        """The recorded chunks (a whole recorded answer as one chunk), or the wrapped model's stream, recorded
        when it has been read to its end (a stream closed early or failing is not recorded)."""
        request = self._request(messages, opts)
        found = self.cassette.lookup("model", request)
        if found is not None:
            chunks = found.response.get("chunks")
            if chunks is None:
                return StreamReader.from_iterable([_recorded_message(found, self.cassette)])
            where = f"cassette {self.cassette.path}: a recorded chunk"
            return StreamReader.from_iterable([load_message(c, where) for c in chunks])
        seq = self.cassette.begin()
        reader = await self.inner.stream(messages, **opts)

        def done(chunks: list[Message]) -> None:
            whole = concat_messages(chunks) if chunks else Message(role="assistant")
            keys = self.cassette.secret_keys
            response = {"chunks": dump_chunks(chunks, keys), "message": dump_message(whole, keys)}
            self.cassette.record(seq, "model", request, response)

        return StreamReader.from_async_iterator(_Recorder(reader, done))

    async def aclose(self) -> None:
        """Close the wrapped model, if it can be closed."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def _recorded_message(item: Interaction, cassette: Cassette) -> Message:
    if "message" not in item.response:
        raise CassetteError(f"cassette {cassette.path}: a recorded model call has no 'message'")
    return load_message(item.response["message"], f"cassette {cassette.path}: a recorded answer")


class _Recorder(Generic[T]):
    """Hands on the chunks of ``reader`` and, once it has ended, gives them all to ``done``. A stream that fails
    or is closed early is not recorded; closing this closes ``reader`` (also before the first chunk)."""

    def __init__(self, reader: StreamReader[T], done: Callable[[list[T]], None]) -> None:
        self._reader = reader
        self._done = done
        self._chunks: list[T] = []

    def __aiter__(self) -> _Recorder[T]:
        return self

    async def __anext__(self) -> T:
        try:
            chunk = await self._reader.recv()
        except StreamEnd:
            await self._reader.aclose()
            self._done(self._chunks)
            raise StopAsyncIteration from None
        except BaseException:
            with anyio.CancelScope(shield=True):  # also when cancelled: the inner stream is closed
                await self._reader.aclose()
            raise
        self._chunks.append(chunk)
        return chunk

    async def aclose(self) -> None:
        await self._reader.aclose()


class _CassetteTool:
    """What the tool wrappers share: the wrapped tool's info and declared attributes."""

    def __init__(self, inner: BaseTool, cassette: Cassette) -> None:
        self.inner = inner
        self.cassette = cassette
        self.name = inner.info().name
        # read by ToolsNode and agents (compose.tools.tool_parallel_safe / tool_timeout)
        self.parallel_safe: bool | None = getattr(inner, "parallel_safe", None)
        self.timeout: float | None = getattr(inner, "timeout", None)

    def info(self) -> ToolInfo:
        return self.inner.info()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, cassette={str(self.cassette.path)!r})"

    def _result(self, item: Interaction) -> str:
        result = item.response.get("result")
        if not isinstance(result, str):
            raise CassetteError(f"cassette {self.cassette.path}: a recorded call of tool {self.name!r} has no result")
        return result


class _InvokableCassetteTool(_CassetteTool):
    async def run(self, arguments: str) -> str:
        request = tool_request(self.name, arguments, self.cassette.secret_keys)
        found = self.cassette.lookup("tool", request)
        if found is not None:
            return self._result(found)
        seq = self.cassette.begin()
        result = await self.inner.run(arguments)  # type: ignore[attr-defined]
        self.cassette.record(seq, "tool", request, {"result": result})
        return str(result)


class _StreamableCassetteTool(_CassetteTool):
    async def stream(self, arguments: str) -> StreamReader[str]:
        request = tool_request(self.name, arguments, self.cassette.secret_keys)
        found = self.cassette.lookup("tool", request)
        if found is not None:
            chunks = found.response.get("chunks")
            return StreamReader.from_iterable(
                [str(c) for c in chunks] if isinstance(chunks, list) else [self._result(found)]
            )
        seq = self.cassette.begin()
        reader: StreamReader[str] = await self.inner.stream(arguments)  # type: ignore[attr-defined]

        def done(chunks: list[str]) -> None:
            self.cassette.record(seq, "tool", request, {"chunks": chunks, "result": "".join(chunks)})

        return StreamReader.from_async_iterator(_Recorder(reader, done))


class _BothCassetteTool(_InvokableCassetteTool, _StreamableCassetteTool):
    pass


def wrap_tool(tool: BaseTool, cassette: Cassette) -> BaseTool:
    """``tool`` on ``cassette``, implementing the protocols ``tool`` implements."""
    invokable = callable(getattr(tool, "run", None))
    streamable = callable(getattr(tool, "stream", None))
    if invokable and streamable:
        return _BothCassetteTool(tool, cassette)
    if invokable:
        return _InvokableCassetteTool(tool, cassette)
    if streamable:
        return _StreamableCassetteTool(tool, cassette)
    raise TypeError(f"cassette.wrap_tool: tool {tool.info().name!r} has neither run() nor stream()")
