"""MCP servers' tools as pyeino tools (extra ``mcp``, on the official ``mcp`` SDK, 2.x).

:func:`mcp_tools` connects to one server, a command run over stdio or a streamable-HTTP URL, and yields an
:class:`MCPToolset`: a live sequence of :class:`MCPTool`, each an invokable pyeino tool that a
:class:`~compose.tool_node.ToolsNode` or an ``adk.ChatModelAgent`` takes like any other.

Example:
    >>> async def main():  # doctest: +SKIP
    ...     async with mcp_tools(stdio=["python", "weather_server.py"], prefix="weather_") as tools:
    ...         agent = ChatModelAgent("planner", "plans trips", model=model, tools=tools)
    ...         async for event in Runner(agent).query("Rain in Rome?"):
    ...             ...

Lifetime: the context manager owns the session (and the server process it started, which ends when the
context does: stdin closed, then SIGTERM, then SIGKILL, as the SDK shuts a stdio server down). Its two helper
tasks, one listening for ``tools/list_changed`` and one refreshing the list, run in its own task group and end
with it; a call made after it closed raises :class:`~compose.errors.MCPServerError`.

What the model sees:

- Tool infos come from the server's listing: its names (with ``prefix`` in front; a character providers reject,
  such as ``.``, becomes ``_``), descriptions and input JSON Schemas as given. ``allow``/``deny`` select tools
  by the server's names; a name in ``allow`` that the server lacks fails the start with a ``ValueError`` naming
  the server and what it has (``deny`` may name tools the server lacks).
- A result's text blocks, joined with newlines. When the result has no text block, or its one text block only
  repeats the structured content as JSON (the SDK's indented JSON of a returned dict or model), the structured
  content as compact JSON. A tool returning a plain value through the SDK (``-> int``) answers with both the
  text ``"42"`` and the structured ``{"result": 42}``: the model sees ``42``. The full result (structured content
  included) is what :meth:`MCPTool.call` returns. Images, audio and binary resources become a placeholder such as
  ``[image: image/png]``; embedded text resources their text; resource links ``[resource: uri]``.
- Arguments are validated against the tool's input schema before they are sent (nested objects included):
  a failure raises :class:`~compose.errors.ToolArgumentsError` naming the tool and the field, and the server
  is not called.
- A result flagged ``is_error`` (or a JSON-RPC error answering the call) raises
  :class:`~compose.errors.MCPToolError` naming server and tool, with the server's text. A ToolsNode reports it
  as a ``ToolExecutionError`` naming the tool and call id; with the
  :func:`~compose.tool_middleware.tool_errors_as_results` middleware the model reads it as the tool's answer.
- A server that exits, crashes or closes the connection during a call raises
  :class:`~compose.errors.MCPServerError` naming the server (as soon as the SDK sees the pipe or HTTP stream
  close, never a hang), and so does every later call.

Timeouts and cancellation: ``tool_timeout`` becomes each tool's ``timeout``, which the ToolsNode enforces
(:class:`~compose.errors.ToolTimeoutError`); a cancelled call (timeout, a failing sibling, an outer cancel
scope) cancels the request, and the SDK tells the server so. ``connect_timeout`` bounds starting the server,
the handshake and the first listing.

The list changes: when the server announces ``tools/list_changed`` (by a ``subscriptions/listen`` stream on
2026-07-28 servers, by a notification on earlier ones), the toolset lists the tools again in the background:
its items, ``len`` and :meth:`MCPToolset.tool` then show the new list and ``version`` goes up by one.
:meth:`MCPToolset.refresh` lists them on demand. An agent or ToolsNode copies its tools when it is built, so
build it again (cheap) to offer the model the new list; a tool object from an older list still calls the server
by its name.

Stdio servers inherit only a few environment variables (``HOME``, ``PATH``, ``USER``...; not ``PYTHONPATH`` or
API keys): pass ``env`` to add variables, merged over those. The SDK records its own OpenTelemetry spans
through ``opentelemetry-api``; calls run in the caller's task, so those spans nest under the caller's current
span (the ``execute_tool`` span of :mod:`compose.otel`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, overload

import anyio
import anyio.abc

from compose.errors import MCPServerError, MCPToolError, ToolArgumentsError
from compose.schema import ToolInfo
from compose.tools import _TOOL_NAME_RULE, _valid_tool_name

try:
    import httpx2
    import jsonschema
    import mcp_types
    from mcp import Client, MCPError, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError("compose.mcp needs the MCP SDK: pip install 'pyeino[mcp]'") from exc

__all__ = ["MCPTool", "MCPToolset", "mcp_tools"]

logger = logging.getLogger(__name__)

# "auto" asks a 2026-07-28 server directly and falls back to the initialize handshake of earlier servers
_CLIENT_MODE = "auto"
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_LIST_PAGE_LIMIT = 1000  # a server whose pagination never ends cannot hang a listing


class MCPTool:
    """One tool of an MCP server, as a pyeino invokable tool.

    Attributes:
        name: the name the model sees (``prefix`` + the server's name, invalid characters replaced).
        mcp_name: the server's name for the tool.
        server: the server's name, as errors give it.
        timeout: the ToolsNode's time limit for one call, in seconds (``mcp_tools(tool_timeout=...)``), or None.
        parallel_safe: always True: the session multiplexes concurrent calls.
    """

    parallel_safe = True

    def __init__(self, toolset: MCPToolset, spec: mcp_types.Tool, name: str, timeout: float | None) -> None:
        self._toolset = toolset
        self.name = name
        self.mcp_name = spec.name
        self.server = toolset.server
        self.timeout = timeout
        extra: dict[str, Any] = {"mcp_server": toolset.server, "mcp_name": spec.name}
        if timeout is not None:
            extra["timeout"] = timeout
        self._info = ToolInfo(
            name=name, description=spec.description or spec.title or "", parameters=spec.input_schema, extra=extra
        )
        self._validator = _validator(spec.input_schema)

    def info(self) -> ToolInfo:
        """The name, description and input schema the server listed (``extra`` names the server and tool)."""
        return self._info

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.server!r}, mcp_name={self.mcp_name!r})"

    async def run(self, arguments: str) -> str:
        """Validate ``arguments`` (a JSON object as a string; ``""`` counts as ``{}``), call the tool and return
        the text the model sees (see the module docstring).

        Raises:
            ToolArgumentsError: the arguments are not a JSON object or do not match the input schema.
            MCPToolError: the server answered with an error.
            MCPServerError: the server is gone (or answered with something that is not MCP).
        """
        return _result_text(await self.call(self.parse_arguments(arguments)))

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """``arguments`` as a dict, checked against the input schema.

        Raises:
            ToolArgumentsError: not a JSON object, or a schema violation (``field`` is its dotted path).
        """
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(self.name, f"arguments are not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ToolArgumentsError(self.name, f"arguments must be a JSON object, got {type(value).__name__}")
        if self._validator is not None:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
            if error is not None:
                field = ".".join(str(part) for part in error.absolute_path) or None
                raise ToolArgumentsError(self.name, error.message, field=field)
        return value

    async def call(self, arguments: Mapping[str, Any]) -> mcp_types.CallToolResult:
        """Call the tool with ``arguments`` (not validated here) and return the SDK's result, structured content
        included; ``is_error`` results raise.

        Raises:
            MCPToolError: the server answered with an error.
            MCPServerError: the server is gone (or answered with something that is not MCP).
        """
        return await self._toolset._call(self.mcp_name, dict(arguments))


class MCPToolset(Sequence[MCPTool]):
    """The tools of one MCP server, as :func:`mcp_tools` yields them: a live sequence of :class:`MCPTool`.

    Iterating, indexing and ``len`` see the current list (it changes when the server announces
    ``tools/list_changed``); ``list(toolset)`` is a snapshot.

    Attributes:
        server: the server's name in errors: ``mcp_tools(name=...)``, else the name the server gives itself,
            else its command or URL.
        version: how many times the tools were listed (1 once the context is entered).
    """

    def __init__(
        self,
        client: Client,
        server: str,
        *,
        prefix: str,
        allow: Collection[str] | None,
        deny: Collection[str],
        timeout: float | None,
    ) -> None:
        self._client = client
        self.server = server
        self._prefix = prefix
        self._allow = None if allow is None else frozenset(allow)
        self._deny = frozenset(deny)
        self._timeout = timeout
        self._tools: tuple[MCPTool, ...] = ()
        self._by_name: dict[str, MCPTool] = {}
        self.version = 0
        self._changed = anyio.Event()
        self._closed: str | None = None  # why calls fail from now on (the server is gone, the context closed)
        self._refresh_lock = anyio.Lock()

    # -- the sequence ------------------------------------------------------------------------------------------

    @overload
    def __getitem__(self, index: int) -> MCPTool: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[MCPTool]: ...

    def __getitem__(self, index: int | slice) -> MCPTool | Sequence[MCPTool]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[MCPTool]:
        return iter(self._tools)

    def tool(self, name: str) -> MCPTool:
        """The tool the model knows as ``name``.

        Raises:
            KeyError: no such tool (the message lists the tools).
        """
        try:
            return self._by_name[name]
        except KeyError:
            tools = sorted(self._by_name)
            raise KeyError(f"MCP server '{self.server}' has no tool {name!r}; its tools: {tools}") from None

    def __repr__(self) -> str:
        state = "open" if self._closed is None else "closed"
        names = [t.name for t in self._tools]
        return f"MCPToolset(server={self.server!r}, tools={names}, version={self.version}, {state})"

    # -- listing -----------------------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """List the server's tools again (the toolset does so by itself on ``tools/list_changed``).

        Raises:
            MCPServerError: the server is gone.
            ValueError: two tools would get the same name, or a name is not valid (see :func:`mcp_tools`).
        """
        if self._closed is not None:
            raise MCPServerError(self.server, f"{self._closed}; cannot list its tools")
        async with self._refresh_lock:
            specs = await self._list()
            tools = self._select(specs)
            self._tools = tuple(tools)
            self._by_name = {t.name: t for t in tools}
            self.version += 1
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_changed(self, since: int) -> int:
        """Wait until ``version`` is past ``since`` (read ``version`` first, then cause the change) and return it.

        Raises:
            MCPServerError: the toolset closed first.
        """
        while self.version <= since:
            if self._closed is not None:
                raise MCPServerError(self.server, self._closed)
            await self._changed.wait()
        return self.version

    async def _list(self) -> list[mcp_types.Tool]:
        specs: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGE_LIMIT):
            with self._translate_errors("listing its tools"):
                page = await self._client.list_tools(cursor=cursor, cache_mode="refresh")
            specs.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return specs
        raise MCPServerError(self.server, f"its tool listing did not end after {_LIST_PAGE_LIMIT} pages")

    def _select(self, specs: Sequence[mcp_types.Tool]) -> list[MCPTool]:
        names = {spec.name for spec in specs}
        if self._allow is not None and self.version == 0 and not self._allow <= names:
            # only at the start: later a server may remove a tool it had
            raise ValueError(
                f"MCP server '{self.server}' has no tools {sorted(self._allow - names)} (allow=); "
                f"its tools: {sorted(names)}"
            )
        tools: list[MCPTool] = []
        seen: dict[str, str] = {}
        for spec in specs:
            if (self._allow is not None and spec.name not in self._allow) or spec.name in self._deny:
                continue
            name = self._prefix + _INVALID_NAME_CHARS.sub("_", spec.name)
            if not _valid_tool_name(name):
                raise ValueError(
                    f"MCP server '{self.server}' tool {spec.name!r} would be named {name!r}, which chat model "
                    f"providers reject (a tool name is {_TOOL_NAME_RULE}): leave it out with deny=[{spec.name!r}]"
                )
            if name in seen:
                raise ValueError(
                    f"MCP server '{self.server}' tools {seen[name]!r} and {spec.name!r} would both be named "
                    f"{name!r}: leave one out with deny="
                )
            seen[name] = spec.name
            tools.append(MCPTool(self, spec, name, self._timeout))
        return tools

    # -- calls -------------------------------------------------------------------------------------------------

    async def _call(self, mcp_name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        if self._closed is not None:
            raise MCPServerError(self.server, f"{self._closed}; cannot call tool '{mcp_name}'")
        with self._translate_errors(f"calling tool '{mcp_name}'", tool=mcp_name):
            result = await self._client.call_tool(mcp_name, arguments)
        if result.is_error:
            raise MCPToolError(self.server, mcp_name, _result_text(result) or "(no error text)")
        return result

    def _translate_errors(self, doing: str, *, tool: str | None = None) -> _ErrorTranslation:
        return _ErrorTranslation(self, doing, tool)

    def _close(self, why: str) -> None:
        if self._closed is None:
            self._closed = why
        self._changed.set()

    # -- the helper tasks ----------------------------------------------------------------------------------------

    async def _listen(self, changes: _Changes, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Turn the server's ``subscriptions/listen`` events into refresh signals (2026-07-28 servers)."""
        started = False
        try:
            async with self._client.listen(tools_list_changed=True) as subscription:
                changes.subscribed = True
                task_status.started()
                started = True
                async for _ in subscription:
                    changes.nudge()
        except (ListenNotSupportedError, MCPError, SubscriptionLost, TimeoutError) as exc:
            # no subscription (or it broke off): the notification path (or a dead server) takes over
            logger.debug("MCP server '%s': no tools/list_changed subscription: %r", self.server, exc)
        finally:
            changes.subscribed = False
            if not started:
                task_status.started()

    async def _refresh_on_signal(self, changes: _Changes) -> None:
        async for _ in changes.receive:
            try:
                await self.refresh()
            except MCPServerError as exc:
                logger.warning("%s", exc)
                return
            except ValueError as exc:  # the new list cannot be offered: keep the last one
                logger.warning("MCP server '%s': the changed tool list was not taken: %s", self.server, exc)


class _Changes:
    """The signals that the server's tools changed: a ``subscriptions/listen`` event or a ``tools/list_changed``
    notification, coalesced (a refresh already asked for covers later signals)."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[None](1)
        # while a listen stream delivers the changes, the copies of its events teed as notifications are ignored
        self.subscribed = False

    def nudge(self) -> None:
        try:
            self.send.send_nowait(None)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def on_message(self, message: object) -> None:
        """The client's message handler: notifications of servers before 2026-07-28."""
        if not self.subscribed and isinstance(message, mcp_types.ToolListChangedNotification):
            self.nudge()

    def close(self) -> None:
        self.send.close()
        self.receive.close()


class _ErrorTranslation:
    """The one boundary where the SDK's errors become pyeino's, naming the server (and tool)."""

    def __init__(self, toolset: MCPToolset, doing: str, tool: str | None) -> None:
        self._toolset = toolset
        self._doing = doing
        self._tool = tool

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            return
        ts = self._toolset
        if isinstance(exc, MCPError):
            if exc.code == mcp_types.CONNECTION_CLOSED:
                why = "the connection closed (the server exited, crashed or hung up)"
                ts._close(why)
                raise MCPServerError(ts.server, f"{why} while {self._doing}") from exc
            if self._tool is not None:
                raise MCPToolError(ts.server, self._tool, f"{exc.message} (MCP error {exc.code})") from exc
            raise MCPServerError(ts.server, f"{exc.message} (MCP error {exc.code}) while {self._doing}") from exc
        if isinstance(exc, ValidationError):
            raise MCPServerError(ts.server, f"answered with a malformed result while {self._doing}: {exc}") from exc
        if isinstance(exc, (anyio.BrokenResourceError, anyio.ClosedResourceError)):
            why = "the connection is closed"
            ts._close(why)
            raise MCPServerError(ts.server, f"{why} while {self._doing}") from exc


@asynccontextmanager
async def mcp_tools(
    stdio: Sequence[str] | None = None,
    *,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    prefix: str = "",
    allow: Collection[str] | None = None,
    deny: Collection[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    name: str | None = None,
    tool_timeout: float | None = None,
    connect_timeout: float = 30.0,
) -> AsyncIterator[MCPToolset]:
    """Connect to an MCP server and yield its tools; closing the context ends the session and the server.

    Give exactly one of ``stdio`` (a command and its arguments, as a list) and ``url`` (a streamable-HTTP
    endpoint, such as ``http://127.0.0.1:8000/mcp``). See the module docstring for what the model sees.

    Args:
        stdio: the command starting a server that speaks MCP on its stdin and stdout.
        url: the URL of a streamable-HTTP server.
        headers: HTTP headers sent with every request (``url`` only), e.g. ``{"Authorization": "Bearer ..."}``.
        prefix: put in front of every tool name (``"weather_"``), to keep several servers' tools apart.
        allow: take only these tools (the server's names); a name the server lacks is an error.
        deny: leave these tools out (the server's names).
        env: environment variables for a stdio server, over the few the SDK passes on.
        cwd: the working directory of a stdio server.
        name: the server's name in errors (default: the name it gives itself, else its command or URL).
        tool_timeout: each tool's time limit in seconds, enforced by the ToolsNode (None: no limit).
        connect_timeout: seconds to start the server, connect and list the tools.

    Yields:
        The :class:`MCPToolset`.

    Raises:
        TypeError: ``stdio`` is a string (pass ``[command, *args]``), or options of the other transport.
        ValueError: neither or both of ``stdio`` and ``url``, or a problem with the tool names (see above).
        MCPServerError: the server cannot be started or reached, or did not answer within ``connect_timeout``.
    """
    target, label = _target(stdio, url, headers, env, cwd)
    unwrapped: BaseException | None = None
    # One deadline over the start, disarmed once the tools are listed. It encloses the whole context because
    # the client's task groups, entered under it, stay open until the context ends.
    connecting = anyio.CancelScope(deadline=anyio.current_time() + connect_timeout)
    try:
        with connecting:
            async with AsyncExitStack() as stack:
                toolset = await _open(stack, target, label, name, prefix, allow, deny, tool_timeout, headers)
                connecting.deadline = math.inf
                yield toolset
    except BaseExceptionGroup as group:
        # The SDK's task groups (and ours) wrap what the block, or the start, raised: give it back as it was.
        leaves = _leaves(group)
        if len(leaves) != 1:
            raise
        unwrapped = leaves[0]
    if unwrapped is not None:
        raise unwrapped
    if connecting.cancelled_caught:
        raise MCPServerError(label, f"did not start, connect and list its tools within {connect_timeout:g}s")


async def _open(
    stack: AsyncExitStack,
    target: StdioServerParameters | str,
    label: str,
    name: str | None,
    prefix: str,
    allow: Collection[str] | None,
    deny: Collection[str],
    tool_timeout: float | None,
    headers: Mapping[str, str] | None,
) -> MCPToolset:
    """Connect, start the helper tasks and list the tools, everything entered on ``stack``."""
    server: Any = target
    if isinstance(target, str):
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(headers or {}),
                timeout=httpx2.Timeout(30.0, read=300.0),  # the SDK's defaults: a response may be a long stream
                transport=_AnsweringTransport(httpx2.AsyncHTTPTransport()),
            )
        )
        server = streamable_http_client(target, http_client=http)
    changes = _Changes()
    stack.callback(changes.close)
    client = Client(server, mode=_CLIENT_MODE, message_handler=changes.on_message)
    try:
        await stack.enter_async_context(client)
    except Exception as exc:
        leaf = _single_leaf(exc)
        if isinstance(leaf, MCPError):
            raise MCPServerError(label, f"cannot connect: {leaf.message} (MCP error {leaf.code})") from leaf
        if isinstance(leaf, (OSError, anyio.BrokenResourceError, anyio.EndOfStream)):
            raise MCPServerError(label, f"cannot connect: {type(leaf).__name__}: {leaf}") from leaf
        raise
    own_name = client.server_info.name if client.server_info is not None else ""
    toolset = MCPToolset(client, name or own_name or label, prefix=prefix, allow=allow, deny=deny, timeout=tool_timeout)
    tg = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(toolset._close, "the mcp_tools() context closed")
    stack.callback(tg.cancel_scope.cancel)
    capabilities = client.server_capabilities.tools
    if capabilities is not None and capabilities.list_changed:
        await tg.start(toolset._listen, changes)  # subscribed before the listing: no change is missed
    tg.start_soon(toolset._refresh_on_signal, changes)
    await toolset.refresh()
    return toolset


class _AnsweringTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport answering a request that cannot be sent (connection refused, the server gone before its
    response) with a JSON-RPC "connection closed" error, instead of raising.

    The SDK's streamable-HTTP client posts each request in a task of its transport's task group; an exception
    there tears the group down, cancelling the caller's whole ``async with`` block and surfacing as an exception
    group at its exit (modelcontextprotocol/python-sdk#3522, #915). An error response at a non-2xx status, the SDK
    reads as the answer to that one request, which then fails with ``MCPError``.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            error = {"code": mcp_types.CONNECTION_CLOSED, "message": f"{type(exc).__name__}: {exc}"}
            return httpx2.Response(502, json={"jsonrpc": "2.0", "id": None, "error": error}, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _target(
    stdio: Sequence[str] | None,
    url: str | None,
    headers: Mapping[str, str] | None,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
) -> tuple[StdioServerParameters | str, str]:
    """What to connect to, and how errors name it until the server names itself."""
    if (stdio is None) == (url is None):
        raise ValueError("mcp_tools() needs exactly one of stdio=[command, *args] and url=...")
    if url is not None:
        if env is not None or cwd is not None:
            raise TypeError("mcp_tools(url=...): env and cwd apply to stdio servers only")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"mcp_tools(url={url!r}): a streamable-HTTP URL starts with http:// or https://")
        return url, url
    assert stdio is not None
    if headers is not None:
        raise TypeError("mcp_tools(stdio=...): headers apply to url servers only")
    if isinstance(stdio, str):
        raise TypeError(
            f"mcp_tools(stdio={stdio!r}): pass the command and its arguments as a list, e.g. "
            f"{stdio.split()!r} (shlex.split() splits a shell line)"
        )
    command = [str(part) for part in stdio]
    if not command or not command[0]:
        raise ValueError("mcp_tools(stdio=[]): the list starts with the command")
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=None if env is None else dict(env),
        cwd=None if cwd is None else os.fspath(cwd),
    )
    return params, " ".join([os.path.basename(command[0]), *command[1:]])


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _single_leaf(exc: BaseException) -> BaseException:
    """``exc``, or the one exception inside nested single-member groups."""
    leaves = _leaves(exc)
    return leaves[0] if len(leaves) == 1 else exc


def _validator(schema: dict[str, Any]) -> Any:
    """A JSON Schema validator of ``schema``, or None when the schema is itself invalid (the server checks)."""
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        logger.warning("an MCP tool's input schema is not a valid JSON Schema; its arguments are not checked here")
        return None
    return cls(schema)


def _result_text(result: mcp_types.CallToolResult) -> str:
    """What the model sees of a result: its text blocks joined, else its structured content as JSON; a text
    block that only repeats the structured content (the SDK's indented JSON of a dict) becomes the compact JSON."""
    structured = result.structured_content
    compact = None if structured is None else json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    parts = [_block_text(block) for block in result.content]
    if not parts:
        return compact or ""
    if compact is not None and len(result.content) == 1 and isinstance(result.content[0], mcp_types.TextContent):
        try:
            repeats = json.loads(parts[0]) == structured
        except ValueError:
            repeats = False
        if repeats:
            return compact
    return "\n".join(parts)


def _block_text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image: {block.mime_type}]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource: {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri} ({resource.mime_type or 'binary'})]"
    return f"[{getattr(block, 'type', type(block).__name__)}]"
