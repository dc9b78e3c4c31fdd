"""MCPTool and MCPToolset: one server's tools as pyeino tools, the list kept current, calls and their errors."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, overload

import anyio
import anyio.abc
import jsonschema
import mcp_types
from mcp import Client, MCPError
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from pydantic import ValidationError

from compose.errors import MCPServerError, MCPToolError, ToolArgumentsError
from compose.mcp._results import result_text, schema_validator
from compose.schema import ToolInfo
from compose.tools.arguments import parse_arguments
from compose.tools.base import _TOOL_NAME_RULE, _valid_tool_name

logger = logging.getLogger("compose.mcp")

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
        self._validator = schema_validator(spec.input_schema)

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
        return result_text(await self.call(self.parse_arguments(arguments)))

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """``arguments`` as a dict, checked against the input schema.

        Raises:
            ToolArgumentsError: not a JSON object, or a schema violation (``field`` is its dotted path).
        """
        value = parse_arguments(self.name, arguments)  # the JSON object; the schema is checked whole below
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
            raise MCPToolError(self.server, mcp_name, result_text(result) or "(no error text)")
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
