"""``ChatModelAgent``: a chat model and tools on the ReAct graph, and everything only it uses.

- ``agent``: :class:`ChatModelAgent`; ``config``: its options (:class:`ToolsConfig`, :class:`ModelConfig`,
  :class:`Limits`, :class:`OutputConfig`);
- ``react``: the ReAct graph (model -> tools -> model, return-directly tools, output checks) and its
  :class:`State`; ``_react_run``: one run of it, its events as they happen;
- ``_model``: the chain around the user's model (options, ``retry``, ``failover``, the event emitter);
- ``instruction``: the instruction's ``{key}`` placeholders and the transfer-to-agent texts;
- ``structured_output``: ``output=OutputConfig(type)`` answers, validated;
- ``actions``: :func:`send_tool_gen_action`, a tool's action on its own event.

The approval guard and the limits are middlewares (``adk.middlewares.approval``, ``adk.middlewares.limits``;
``adk.chat_model.approval`` is the approval module's old name). The agent protocol, the runner and events are
``adk``'s (``adk.agent``, ``adk.runner``, ``adk.events``).
"""

from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent, exit_tool
from adk.chat_model.config import Limits, ModelConfig, OutputConfig, ToolExecutionMode, ToolsConfig
from adk.chat_model.failover import FailoverContext, ModelFailoverConfig, default_should_failover
from adk.chat_model.instruction import (
    TRANSFER_TO_AGENT_ARGUMENT,
    TRANSFER_TO_AGENT_ARGUMENT_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_NAME,
    InstructionFormatError,
    concat_instructions,
    format_instruction,
    gen_transfer_messages,
    transfer_instruction,
    transfer_tool_result,
)
from adk.chat_model.react import (
    AFTER_AGENT_NODE,
    BEFORE_AGENT_NODE,
    CHAT_MODEL_NODE,
    OUTPUT_CHECK_NODE,
    OUTPUT_RETRY_NODE,
    TO_END_CONVERTER_NODE,
    TOOL_NODE,
    ChatModelHook,
    ChatModelHooks,
    OutputCheck,
    ReactConfig,
    State,
    build_react,
    tool_result_collector,
)
from adk.chat_model.retry import ModelRetryConfig, RetryChatModel, default_backoff, default_is_retryable
from adk.chat_model.structured_output import (
    FINAL_ANSWER_TOOL_NAME,
    FinalAnswerTool,
    OutputMode,
    OutputSchema,
    ResponseFormatFallback,
    StructuredOutputCheck,
    strict_json_schema,
)
from adk.middlewares.approval import (
    ApprovalDecision,
    ApprovalMiddleware,
    ApprovalPredicate,
    ApprovalRequest,
    approval_middleware,
    rejection_message,
)

__all__ = [
    "AFTER_AGENT_NODE",
    "BEFORE_AGENT_NODE",
    "CHAT_MODEL_NODE",
    "FINAL_ANSWER_TOOL_NAME",
    "OUTPUT_CHECK_NODE",
    "OUTPUT_RETRY_NODE",
    "TOOL_NODE",
    "TO_END_CONVERTER_NODE",
    "TRANSFER_TO_AGENT_ARGUMENT",
    "TRANSFER_TO_AGENT_ARGUMENT_DESCRIPTION",
    "TRANSFER_TO_AGENT_TOOL_DESCRIPTION",
    "TRANSFER_TO_AGENT_TOOL_NAME",
    "ApprovalDecision",
    "ApprovalMiddleware",
    "ApprovalPredicate",
    "ApprovalRequest",
    "ChatModelAgent",
    "ChatModelHook",
    "ChatModelHooks",
    "FailoverContext",
    "FinalAnswerTool",
    "InstructionFormatError",
    "Limits",
    "ModelConfig",
    "ModelFailoverConfig",
    "ModelRetryConfig",
    "OutputCheck",
    "OutputConfig",
    "OutputMode",
    "OutputSchema",
    "ReactConfig",
    "ResponseFormatFallback",
    "RetryChatModel",
    "State",
    "StructuredOutputCheck",
    "ToolExecutionMode",
    "ToolsConfig",
    "approval_middleware",
    "build_react",
    "concat_instructions",
    "default_backoff",
    "default_is_retryable",
    "default_should_failover",
    "exit_tool",
    "format_instruction",
    "gen_transfer_messages",
    "rejection_message",
    "send_tool_gen_action",
    "strict_json_schema",
    "tool_result_collector",
    "transfer_instruction",
    "transfer_tool_result",
]
