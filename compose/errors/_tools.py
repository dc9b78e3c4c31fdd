"""Errors of tools, the ToolsNode and MCP servers."""

from __future__ import annotations

from compose.errors._base import ComposeError

__all__ = [
    "MCPServerError",
    "MCPToolError",
    "ToolArgumentsError",
    "ToolArgumentsHandlerError",
    "ToolError",
    "ToolExecutionError",
    "ToolInputError",
    "ToolNotFoundError",
    "ToolTimeoutError",
]


class ToolError(ComposeError):
    """Base class of tool and ToolsNode failures."""


class ToolNotFoundError(ToolError, LookupError):
    """Raised when a tool call names a tool the ToolsNode does not have (and no unknown-tools handler answers)."""

    def __init__(self, tool_name: str) -> None:
        super().__init__(f"tool {tool_name} not found in toolsNode indexes")
        self.tool_name = tool_name


class ToolArgumentsError(ToolError, ValueError):
    """Raised when a tool's arguments are not valid JSON or fail validation; names the tool and the field."""

    def __init__(self, tool_name: str, message: str, *, field: str | None = None) -> None:
        where = f" field '{field}'" if field else ""
        super().__init__(f"invalid arguments for tool '{tool_name}'{where}: {message}")
        self.tool_name = tool_name
        self.field = field


class ToolInputError(ToolError, ValueError):
    """Raised when the ToolsNode input is not an assistant message with at least one tool call."""


class ToolExecutionError(ToolError):
    """Raised when a tool fails inside a ToolsNode; names the tool and the call id, the cause is ``__cause__``."""

    def __init__(self, tool_name: str, call_id: str, cause: BaseException, *, streaming: bool = False) -> None:
        if streaming:
            msg = f"failed to stream tool call {call_id} (tool '{tool_name}'): {type(cause).__name__}: {cause}"
        else:
            msg = f"failed to invoke tool[name:{tool_name} id:{call_id}]: {type(cause).__name__}: {cause}"
        super().__init__(msg)
        self.tool_name = tool_name
        self.call_id = call_id
        self.__cause__ = cause


class ToolTimeoutError(ToolError, TimeoutError):
    """Raised when a tool runs (or streams) longer than its ``timeout``."""

    def __init__(self, tool_name: str, timeout: float) -> None:
        super().__init__(f"tool '{tool_name}' timed out after {timeout:g}s")
        self.tool_name = tool_name
        self.timeout = timeout


class ToolArgumentsHandlerError(ToolExecutionError):
    """Raised when ``tool_arguments_handler`` fails for a call; the cause is ``__cause__``."""

    def __init__(self, tool_name: str, call_id: str, arguments: str, cause: BaseException) -> None:
        super().__init__(tool_name, call_id, cause)
        self.args = (
            f"failed to execute tool[name:{tool_name} arguments:{arguments}] arguments handler: "
            f"{type(cause).__name__}: {cause}",
        )
        self.arguments = arguments


class MCPServerError(ToolError, ConnectionError):
    """Raised by ``compose.mcp`` when an MCP server cannot be started or reached, does not answer in time while
    connecting, closes the connection (it exited, crashed or hung up; every later call raises this too), or
    answers with something that is not MCP. ``server`` names it; the SDK's error is ``__cause__``."""

    def __init__(self, server: str, problem: str) -> None:
        super().__init__(f"MCP server '{server}': {problem}")
        self.server = server
        self.problem = problem


class MCPToolError(ToolError):
    """Raised by a ``compose.mcp`` tool when its server answers the call with an error (a result flagged
    ``is_error``, or a JSON-RPC error). ``server``, ``tool_name`` (the server's name for the tool) and ``text``
    (what the server said, which the model reads when tool errors are returned as results)."""

    def __init__(self, server: str, tool_name: str, text: str) -> None:
        super().__init__(f"MCP server '{server}' tool '{tool_name}' failed: {text}")
        self.server = server
        self.tool_name = tool_name
        self.text = text
