"""MCP servers' tools as pyeino tools (extra ``mcp``, on the official ``mcp`` SDK, 2.x).

:func:`mcp_tools` connects to one server, a command run over stdio or a streamable-HTTP URL, and yields an
:class:`MCPToolset`: a live sequence of :class:`MCPTool`, each an invokable pyeino tool that a
:class:`~compose.tools.node.ToolsNode` or an ``adk.ChatModelAgent`` takes like any other.

Example:
    >>> async def main():  # doctest: +SKIP
    ...     async with mcp_tools(stdio=["python", "weather_server.py"], prefix="weather_") as tools:
    ...         agent = ChatModelAgent("planner", "plans trips", model=model, tools=tools)
    ...         async with Runner(agent).query("Rain in Rome?") as run:
    ...             async for event in run:
    ...                 ...

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
  :func:`~compose.tools.middleware.tool_errors_as_results` middleware the model reads it as the tool's answer.
- A server that exits, crashes or closes the connection during a call raises
  :class:`~compose.errors.MCPServerError` naming the server (as soon as the SDK sees the pipe or HTTP stream
  close, never a hang), and so does every later call. (Over HTTP, a request that cannot be sent at all is
  answered with a "connection closed" error, where the SDK would tear its transport down and cancel the
  caller's block: python-sdk#3522.)

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

try:
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError("compose.mcp needs the MCP SDK: pip install 'pyeino[mcp]'") from exc

from compose.mcp._connect import mcp_tools
from compose.mcp._toolset import MCPTool, MCPToolset

__all__ = ["MCPTool", "MCPToolset", "mcp_tools"]
