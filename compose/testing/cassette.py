"""Record/replay cassettes: run an agent on a real model once, then replay its model and tool calls offline.

``cassette(path, mode=...)`` opens a cassette (``with`` or ``async with``; the file is written when the block
exits, or by :meth:`Cassette.save`). ``wrap(model)`` and ``wrap_tool(tool)`` return a chat model and a tool that
record their calls at the pyeino level (messages, tools offered and options of a model call with its answer,
streamed chunks, usage and response meta; a tool call's arguments and result) and replay them later: a replayed
model makes no request, a replayed tool is not run. Modes:

* ``"once"`` (the default): record when the file is missing, replay otherwise;
* ``"none"``: replay only (a missing file raises :class:`~compose.errors.CassetteNotFoundError`);
* ``"all"``: record every call (the file is rewritten);
* ``"new"``: replay what is recorded, record what is not.

**Matching.** A model call is matched on its messages, tools and options (``match_on=``, any of ``"messages"``,
``"tools"``, ``"options"``, ``"model"``), a tool call on the tool's name and its arguments (as JSON values). Calls
are found by content, never by position, so parallel tool calls and concurrent agent-tool calls replay whatever
order they arrive in; a request made several times replays its recordings in order (then the last one again). A
call that matches nothing, in a mode that does not record, raises :class:`~compose.errors.CassetteMismatchError`
with a diff against the nearest recorded request, naming the first field that differs.

**Paradigms.** A recorded answer replays in either paradigm: a streamed answer streams as its recorded chunks and
``generate`` returns their concatenation; a whole answer streams as one chunk. The same holds for tools.

**The file** is one JSON object with sorted keys, one interaction after another in the order the calls started
(see ``compose.testing._cassette_data``). Credentials never reach it: values under names such as ``api_key``,
``Authorization``, ``token``, ``refresh_token``, ``private_key``, ``secret``, ``password``, ``cookie`` (any case;
plus ``secret_keys=``), in options and headers and in tool calls' arguments (also nested, also streamed), and
strings that look like keys (``sk-...``, ``Bearer ...``), are written as ``"<redacted>"``; a replay sees them so
(and matches them so). A model's own API key is not part of a call.

A tool that pauses the run itself (``compose.interrupt``) or raises is not recorded: wrap the tools whose results
you want replayed. An agent tool (``AgentTool``) is best left unwrapped with its agent's model and tools wrapped:
the inner agent then runs (and emits its events) on replayed calls.

Example::

    from compose.testing import cassette

    async with cassette("tests/cassettes/trip.json") as tape:
        agent = ChatModelAgent("travel", "plans trips", model=tape.wrap(OpenAIChatModel("gpt-4o-mini")),
                               tools=[tape.wrap_tool(t) for t in TOOLS])
        async for event in Runner(agent).query("A day in Hangzhou?"):
            ...
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar, get_args

import anyio
import anyio.to_thread

from compose.errors import CassetteError, CassetteMismatchError, CassetteNotFoundError, StreamEnd
from compose.models.base import ChatModel, model_identity
from compose.schema import Message, ToolInfo, concat_messages
from compose.stream import StreamReader
from compose.testing._cassette_data import (
    DEFAULT_MATCH_ON,
    MODEL_FIELDS,
    Interaction,
    Kind,
    compared,
    decode,
    diff,
    dump_chunks,
    dump_message,
    dump_tools,
    encode,
    first_difference,
    load_message,
    match_key,
    model_request,
    nearest,
    tool_request,
)
from compose.tools.base import BaseTool

__all__ = ["Cassette", "CassetteChatModel", "CassetteMode", "cassette"]

CassetteMode = Literal["once", "none", "all", "new"]
MODES: tuple[str, ...] = get_args(CassetteMode)


class Cassette:
    """A cassette file and the calls recorded in it (see the module docstring); build one with :func:`cassette`.

    Attributes:
        path: the file.
        mode: ``"once"``, ``"none"``, ``"all"`` or ``"new"``.
        match_on: the fields a model call is matched on.
        replayed: how many calls were answered from the cassette since it was opened.
        recorded: how many calls were recorded since it was opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: CassetteMode = "once",
        *,
        match_on: Sequence[str] = DEFAULT_MATCH_ON,
        secret_keys: Iterable[str] = (),
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"cassette mode must be one of {', '.join(MODES)}; got {mode!r}")
        unknown = [f for f in match_on if f not in MODEL_FIELDS]
        if unknown or not match_on:
            raise ValueError(f"match_on takes some of {list(MODEL_FIELDS)}; got {list(match_on)!r}")
        self.path = Path(path)
        self.mode: CassetteMode = mode
        self.match_on = tuple(match_on)
        self.secret_keys = tuple(secret_keys)
        self.replayed = 0
        self.recorded = 0
        self._open = False
        self._replaying = False
        self._recording = False
        self._kept: list[Interaction] = []
        self._loaded: list[Interaction] = []
        self._new: list[tuple[int, Interaction]] = []
        self._index: dict[str, list[Interaction]] = {}
        self._uses: dict[str, int] = {}
        self._seq = 0
        self._dirty = False

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return (
            f"Cassette({str(self.path)!r}, mode={self.mode!r}, {state}, "
            f"replayed={self.replayed}, recorded={self.recorded})"
        )

    @property
    def is_open(self) -> bool:
        """Whether the cassette is open (inside its ``with`` block)."""
        return self._open

    @property
    def recording(self) -> bool:
        """Whether calls the cassette cannot answer are made and recorded (else they raise)."""
        return self._recording

    @property
    def interactions(self) -> list[Interaction]:
        """What the file holds (or will hold when saved): the kept recordings, then the new ones in start order."""
        return [*self._kept, *(i for _, i in sorted(self._new, key=lambda p: p[0]))]

    # -- opening and saving ----------------------------------------------------------------------------------

    def open(self) -> Cassette:
        """Read the file (as the mode says) and start answering calls; ``with`` calls this.

        Raises:
            CassetteNotFoundError: mode ``"none"`` and no file.
            CassetteError: the file is not a cassette, or the cassette is already open.
        """
        if self._open:
            raise CassetteError(f"cassette {self.path} is already open")
        exists = self.path.exists()
        if self.mode == "none" and not exists:
            raise CassetteNotFoundError(
                f"cassette {self.path} does not exist and mode 'none' only replays: record it first "
                "(mode 'once', or --cassette-mode=once under pytest)"
            )
        loaded = decode(self._read(), str(self.path)) if exists and self.mode != "all" else []
        self._replaying = self.mode in ("none", "new") or (self.mode == "once" and exists)
        self._recording = self.mode in ("all", "new") or (self.mode == "once" and not exists)
        self._kept = loaded if self.mode == "new" else []
        self._index = {}
        for item in loaded:
            self._index.setdefault(match_key(item.kind, item.request, self.match_on), []).append(item)
        self._loaded = loaded
        self._new, self._uses, self._seq, self._dirty = [], {}, 0, self.mode == "all"
        self.replayed = self.recorded = 0
        self._open = True
        return self

    def _read(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CassetteError(f"cassette {self.path} is not UTF-8 text: byte {exc.start}: {exc.reason}") from None
        except OSError as exc:
            raise CassetteError(f"cannot read cassette {self.path}: {exc.strerror or exc}") from None

    def save(self) -> None:
        """Write the file now, if anything was recorded (mode ``"all"``: always); creates its directory."""
        if not (self._recording and self._dirty):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(encode(self.interactions), encoding="utf-8")
        tmp.replace(self.path)
        self._dirty = False

    def close(self) -> None:
        """Save (see :meth:`save`) and stop answering calls; ``with`` calls this (idempotent)."""
        if not self._open:
            return
        try:
            self.save()
        finally:
            self._open = False

    def __enter__(self) -> Cassette:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Cassette:
        return await anyio.to_thread.run_sync(self.open)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)

    # -- wrapping --------------------------------------------------------------------------------------------

    def wrap(self, model: ChatModel, *, name: str | None = None) -> CassetteChatModel:
        """``model`` recorded on (or replayed from) this cassette; ``with_tools`` keeps the wrapping.

        Args:
            model: any chat model.
            name: the model's name in the recorded requests (``match_on`` may include ``"model"``); by default
                the model's ``model_name``.
        """
        if not (callable(getattr(model, "generate", None)) and callable(getattr(model, "stream", None))):
            raise TypeError(f"cassette.wrap(model): not a chat model (async generate() and stream()): {model!r}")
        return CassetteChatModel(model, self, name=name)

    def wrap_tool(self, tool: BaseTool) -> BaseTool:
        """``tool`` recorded on (or replayed from) this cassette: same info, same protocols (``run`` and/or
        ``stream``), same ``parallel_safe`` and ``timeout``; a replayed call does not run the tool."""
        if not callable(getattr(tool, "info", None)):
            raise TypeError(f"cassette.wrap_tool(tool): not a tool (it has no info()): {tool!r}")
        return wrap_tool(tool, self)

    # -- what the wrappers call ------------------------------------------------------------------------------

    def lookup(self, kind: Kind, request: dict[str, Any]) -> Interaction | None:
        """The recorded interaction answering ``request``, or None when the call is to be made and recorded.

        Raises:
            CassetteError: the cassette is not open.
            CassetteMismatchError: nothing recorded matches and this cassette does not record.
        """
        if not self._open:
            raise CassetteError(
                f"cassette {self.path} is not open: make the call inside `with cassette(...)` (or `async with`)"
            )
        if self._replaying:
            key = match_key(kind, request, self.match_on)
            found = self._index.get(key)
            if found:
                n = self._uses.get(key, 0)
                self._uses[key] = n + 1
                self.replayed += 1
                return found[min(n, len(found) - 1)]
        if not self._recording:
            raise self._mismatch(kind, request)
        return None

    def begin(self) -> int:
        """A sequence number for a call about to be made (the file keeps calls in the order they started)."""
        self._seq += 1
        return self._seq

    def record(self, seq: int, kind: Kind, request: dict[str, Any], response: dict[str, Any]) -> None:
        """Keep a call that completed (the file is written on close or ``save()``)."""
        if not self._open:
            return  # the cassette closed while the call ran: nothing is written after close
        self._new.append((seq, Interaction(kind, request, response)))
        self.recorded += 1
        self._dirty = True

    def _mismatch(self, kind: Kind, request: dict[str, Any]) -> CassetteMismatchError:
        where = f"cassette {self.path} (mode {self.mode!r})"
        what = f"{kind} call" if kind == "model" else f"call of tool {request.get('tool')!r}"
        found = nearest(kind, request, self._loaded, self.match_on)
        if found is None:
            return CassetteMismatchError(
                f"{where} has no recorded {kind} calls to replay for this {what}; record it "
                "(mode 'new' adds it, mode 'all' records everything again)",
                kind=kind,
                field=None,
                request=request,
                nearest=None,
                diff="",
            )
        index, item = found
        field = (
            first_difference(compared(kind, item.request, self.match_on), compared(kind, request, self.match_on))
            or "(none: the request was replayed already)"
        )
        text = diff(kind, item.request, request, self.match_on)
        return CassetteMismatchError(
            f"{where}: this {what} matches no recorded request; the nearest (interactions[{index}]) differs at "
            f"{field}:\n{text}",
            kind=kind,
            field=field,
            request=request,
            nearest=item.request,
            diff=text,
        )


def cassette(
    path: str | os.PathLike[str],
    mode: CassetteMode = "once",
    *,
    match_on: Sequence[str] = DEFAULT_MATCH_ON,
    secret_keys: Iterable[str] = (),
) -> Cassette:
    """A cassette at ``path``: open it with ``with`` / ``async with`` (see the module docstring).

    Args:
        path: the JSON file.
        mode: ``"once"`` (record if the file is missing, else replay), ``"none"`` (replay only), ``"all"``
            (record everything again) or ``"new"`` (replay what is recorded, record the rest).
        match_on: the fields a model call must share with a recording: some of ``"messages"``, ``"tools"``,
            ``"options"``, ``"model"``.
        secret_keys: more option or header names whose values are redacted.

    Raises:
        ValueError: an unknown mode or ``match_on`` field.
    """
    return Cassette(path, mode, match_on=match_on, secret_keys=secret_keys)


# ----------------------------------------------------------------------------------------------------------
# The chat model and tools a cassette hands out: each call is answered from the cassette or made and recorded.

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
