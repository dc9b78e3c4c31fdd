"""pyeino's graph runtime: typed graphs of chat models, tools and lambdas, run in four paradigms.

A Python port of CloudWeGo Eino's ``compose``. Build a :class:`Graph`, join nodes with edges and branches,
``compile()`` it into a :class:`Runnable`, and run it with ``invoke``, ``stream``, ``collect`` or ``transform``.

``__all__`` lists what a user reaches for first; the exceptions live in ``compose.errors``, retrieval in
``compose.components``, the scripted model and test helpers in ``compose.testing`` (the names this package listed
before stay importable from it).
"""

import typing

from compose._lazy import lazy_names as _lazy_names
from compose.callbacks import (
    CallbackHandler,
    RunInfo,
    StreamObserver,
    append_global_callbacks,
    clear_global_callbacks,
    observe_stream,
)
from compose.checkpoint import (
    CheckPointStore,
    InMemoryCheckPointStore,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
    StateSnapshot,
    prune,
)
from compose.components import *  # noqa: F403
from compose.errors import *  # noqa: F403
from compose.errors import GraphInterrupt
from compose.graph._field_mapping import (
    FieldMapping,
    from_field,
    from_field_path,
    map_field_paths,
    map_fields,
    to_field,
    to_field_path,
)
from compose.graph.branch import GraphBranch, GraphMultiBranch, StreamGraphBranch, StreamGraphMultiBranch
from compose.graph.builder import END, START, FanInMergeConfig, Graph, NodeOptions, TriggerMode
from compose.graph.chain import Chain, ChainBranch, ChainNodeOptions, Parallel
from compose.graph.info import BranchInfo, CompileCallback, GraphCompileCallback, GraphInfo, NodeInfo
from compose.graph.workflow import Workflow, WorkflowNode
from compose.interrupt import (
    ExternalInterrupt,
    InterruptCtx,
    InterruptInfo,
    InterruptSignal,
    ResumeContext,
    get_interrupt_state,
    get_resume_context,
    get_resume_data,
    interrupt,
    stateful_interrupt,
)
from compose.lambdas import Lambda
from compose.merge import register_values_merge
from compose.models import ChatModel, ChatModelOptions
from compose.models import ScriptedChatModel as ScriptedChatModel
from compose.prompt import ChatTemplate, FormatType, MessagesPlaceholder, MessagesTemplate
from compose.runnable import Runnable
from compose.schema import (
    AudioPart,
    ContentPart,
    FilePart,
    FunctionCall,
    ImageDetail,
    ImagePart,
    Message,
    ResponseMeta,
    Role,
    TextPart,
    ToolCall,
    ToolInfo,
    Usage,
    VideoPart,
    approx_part_tokens,
    assistant_message,
    concat_message_lists,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)
from compose.state import process_state
from compose.stream import (
    SKIP,
    StreamReader,
    StreamWriter,
    concat,
    concat_items,
    merge_named_streams,
    merge_streams,
    pipe,
    register_concat,
)
from compose.stream_modes import StreamMode, StreamPart, get_stream_writer
from compose.tools.base import BaseTool, InvokableTool, StreamableTool, tool
from compose.tools.middleware import (
    StreamToolOutput,
    ToolInput,
    ToolMiddleware,
    ToolOutput,
    get_tool_call_id,
    tool_errors_as_results,
)
from compose.tools.node import ToolsNode

if typing.TYPE_CHECKING:
    from compose.models.json_action import JSONActionChatModel
    from compose.models.openai_model import OpenAIChatModel
    from compose.otel import OTelHandler
else:
    # imported on first use: the openai SDK is more than half of a cold start (see compose._lazy)
    __getattr__, __dir__ = _lazy_names(
        __name__,
        {
            "JSONActionChatModel": "compose.models.json_action",
            "OpenAIChatModel": "compose.models.openai_model",
            "OTelHandler": "compose.otel",  # extra `otel`
        },
    )

__all__ = [
    "END",
    "SKIP",
    "START",
    "AudioPart",
    "BaseTool",
    "BranchInfo",
    "CallbackHandler",
    "Chain",
    "ChainBranch",
    "ChainNodeOptions",
    "ChatModel",
    "ChatModelOptions",
    "ChatTemplate",
    "CheckPointStore",
    "CompileCallback",
    "ContentPart",
    "ExternalInterrupt",
    "FanInMergeConfig",
    "FieldMapping",
    "FilePart",
    "FormatType",
    "FunctionCall",
    "Graph",
    "GraphBranch",
    "GraphCompileCallback",
    "GraphInfo",
    "GraphInterrupt",
    "GraphMultiBranch",
    "ImageDetail",
    "ImagePart",
    "InMemoryCheckPointStore",
    "InterruptCtx",
    "InterruptInfo",
    "InterruptSignal",
    "InvokableTool",
    "JSONActionChatModel",
    "Lambda",
    "Message",
    "MessagesPlaceholder",
    "MessagesTemplate",
    "NodeInfo",
    "NodeOptions",
    "OTelHandler",
    "OpenAIChatModel",
    "Parallel",
    "PostgresCheckPointStore",
    "ResponseMeta",
    "ResumeContext",
    "Role",
    "RunInfo",
    "Runnable",
    "SQLiteCheckPointStore",
    "StateSnapshot",
    "StreamGraphBranch",
    "StreamGraphMultiBranch",
    "StreamMode",
    "StreamObserver",
    "StreamPart",
    "StreamReader",
    "StreamToolOutput",
    "StreamWriter",
    "StreamableTool",
    "TextPart",
    "ToolCall",
    "ToolInfo",
    "ToolInput",
    "ToolMiddleware",
    "ToolOutput",
    "ToolsNode",
    "TriggerMode",
    "Usage",
    "VideoPart",
    "Workflow",
    "WorkflowNode",
    "append_global_callbacks",
    "approx_part_tokens",
    "assistant_message",
    "clear_global_callbacks",
    "concat",
    "concat_items",
    "concat_message_lists",
    "concat_messages",
    "from_field",
    "from_field_path",
    "get_interrupt_state",
    "get_resume_context",
    "get_resume_data",
    "get_stream_writer",
    "get_tool_call_id",
    "interrupt",
    "map_field_paths",
    "map_fields",
    "merge_named_streams",
    "merge_streams",
    "observe_stream",
    "pipe",
    "process_state",
    "prune",
    "register_concat",
    "register_values_merge",
    "stateful_interrupt",
    "system_message",
    "to_field",
    "to_field_path",
    "tool",
    "tool_errors_as_results",
    "tool_message",
    "user_message",
]
