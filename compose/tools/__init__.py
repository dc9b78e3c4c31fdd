"""Tools: what a chat model can call, and the graph node that calls them.

- ``base``: the tool protocols (:class:`BaseTool`, :class:`InvokableTool`, :class:`StreamableTool`) and
  :func:`tool`, which builds one from a typed function (:class:`FunctionTool`, :class:`StreamingFunctionTool`);
- ``arguments``: :func:`parse_arguments`, which reads a call's arguments for any tool with one error shape, and
  :class:`SchemaTool`, a tool made of a hand-written schema and a function of the parsed arguments;
- ``node``: :class:`ToolsNode`, which runs a message's tool calls (in parallel or in order) and answers with
  one tool message per call, in call order;
- ``middleware``: what wraps each call's endpoints (:class:`ToolMiddleware`, the :class:`ToolInput` /
  :class:`ToolOutput` records, :func:`tool_errors_as_results`) and :func:`get_tool_call_id`.
"""

from compose.tools.arguments import SchemaTool, parse_arguments
from compose.tools.base import (
    BaseTool,
    FunctionTool,
    InvokableTool,
    StreamableTool,
    StreamingFunctionTool,
    tool,
    tool_parallel_safe,
    tool_timeout,
)
from compose.tools.middleware import (
    InvokableToolEndpoint,
    InvokableToolMiddleware,
    StreamableToolEndpoint,
    StreamableToolMiddleware,
    StreamToolOutput,
    ToolInput,
    ToolMiddleware,
    ToolOutput,
    get_tool_call_id,
    tool_errors_as_results,
)
from compose.tools.node import ToolArgumentsHandler, ToolsNode, UnknownToolsHandler

__all__ = [
    "BaseTool",
    "FunctionTool",
    "InvokableTool",
    "InvokableToolEndpoint",
    "InvokableToolMiddleware",
    "SchemaTool",
    "StreamToolOutput",
    "StreamableTool",
    "StreamableToolEndpoint",
    "StreamableToolMiddleware",
    "StreamingFunctionTool",
    "ToolArgumentsHandler",
    "ToolInput",
    "ToolMiddleware",
    "ToolOutput",
    "ToolsNode",
    "UnknownToolsHandler",
    "get_tool_call_id",
    "parse_arguments",
    "tool",
    "tool_errors_as_results",
    "tool_parallel_safe",
    "tool_timeout",
]
