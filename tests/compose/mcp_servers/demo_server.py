"""An MCP server for tests/compose/test_mcp.py, written with the official ``mcp`` SDK (2.x).

Run it over stdio (``python demo_server.py``) or streamable HTTP (``python demo_server.py --http``: it binds
127.0.0.1 on a free port, prints ``PORT <n>`` on stdout and serves until killed).
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, ResourceLink
from pydantic import BaseModel, ConfigDict, Field

server = MCPServer("demo", log_level="CRITICAL")


class Counter:
    """A count that calls can wait on (no polling)."""

    def __init__(self) -> None:
        self.value = 0
        self._changed = anyio.Event()

    def bump(self) -> None:
        self.value += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def reach(self, n: int) -> int:
        while self.value < n:
            await self._changed.wait()
        return self.value


started = Counter()
cancelled = Counter()
arrived = Counter()


class Traveler(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    age: int = Field(ge=0)


class Trip(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    nights: int = Field(ge=1)
    travelers: list[Traveler]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


@server.tool()
def book(trip: Trip) -> dict[str, object]:
    """Book a trip for some travelers."""
    return {"city": trip.city, "nights": trip.nights, "names": [t.name for t in trip.travelers]}


@server.tool(name="files.read")
def files_read(path: str) -> str:
    """A tool whose name chat model providers reject (it has a dot)."""
    return f"contents of {path}"


@server.tool()
async def meet(party: str, size: int = 2) -> str:
    """Wait until `size` parties are inside meet() at the same time."""
    arrived.bump()
    await arrived.reach(size)
    return f"{party} met {size - 1} other(s)"


@server.tool()
async def wait_forever() -> str:
    """Block until cancelled."""
    started.bump()
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        cancelled.bump()
        raise
    return "unreachable"


@server.tool()
async def started_calls(at_least: int = 0) -> int:
    """How many wait_forever calls started, once at least `at_least` did."""
    return await started.reach(at_least)


@server.tool()
async def cancelled_calls(at_least: int = 0) -> int:
    """How many wait_forever calls were cancelled, once at least `at_least` were."""
    return await cancelled.reach(at_least)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def env(name: str) -> str:
    """An environment variable of the server process ("" when unset)."""
    return os.environ.get(name, "")


@server.tool()
def header(ctx: Context, name: str) -> str:
    """A header of the HTTP request carrying this call ("" over stdio)."""
    request = ctx.request_context.request
    return "" if request is None else str(request.headers.get(name, ""))


@server.tool()
def structured_only() -> CallToolResult:
    """An answer without a text block: structured content, an image and a resource link."""
    return CallToolResult(
        content=[
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
            ResourceLink(type="resource_link", uri="file:///tmp/report.txt", name="report"),
        ],
        structured_content={"rows": [1, 2], "unit": "m"},
    )


@server.tool()
def data_only() -> CallToolResult:
    """An answer with structured content and no content blocks at all."""
    return CallToolResult(content=[], structured_content={"rows": [1, 2], "unit": "m"})


@server.tool()
def crash() -> str:
    """Kill the server process in the middle of the call."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Add the tool 'late' and tell the clients that the list changed."""

    def late() -> str:
        """A tool added while the server runs."""
        return "late answer"

    server.add_tool(late, name="late")
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "added"


def main() -> None:
    if "--http" not in sys.argv:
        server.run("stdio")
        return
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections made once the port is printed wait in the backlog until uvicorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
