"""mcp_tools(): the session with one MCP server (stdio or streamable HTTP), owned by an async context manager."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from compose.errors import MCPServerError
from compose.mcp._toolset import MCPToolset, _Changes

# "auto" asks a 2026-07-28 server directly and falls back to the initialize handshake of earlier servers
_CLIENT_MODE = "auto"


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
        ValueError: neither or both of ``stdio`` and ``url``, a time limit that is not positive, or a problem with
            the tool names (see the package docstring).
        MCPServerError: the server cannot be started or reached, or did not answer within ``connect_timeout``.
    """
    target, label = _target(stdio, url, headers, env, cwd)
    if tool_timeout is not None and not tool_timeout > 0:
        raise ValueError(f"mcp_tools(tool_timeout={tool_timeout!r}): a time limit is a positive number of seconds")
    if not connect_timeout > 0:
        raise ValueError(f"mcp_tools(connect_timeout={connect_timeout!r}): a positive number of seconds")
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
