"""Chat models: the ChatModel protocol, OpenAIChatModel (openai SDK), ScriptedChatModel (offline, for tests)
and JSONActionChatModel (tools for models without native function calling)."""

from compose.models.base import ChatModel, ChatModelOptions, ToolChoice
from compose.models.json_action import JSONActionChatModel, parse_json_action, render_json_action_prompt
from compose.models.openai_model import OpenAIChatModel, translate_openai_error
from compose.models.scripted import ScriptedCall, ScriptedChatModel, ScriptedResponse

__all__ = [
    "ChatModel",
    "ChatModelOptions",
    "JSONActionChatModel",
    "OpenAIChatModel",
    "ScriptedCall",
    "ScriptedChatModel",
    "ScriptedResponse",
    "ToolChoice",
    "parse_json_action",
    "render_json_action_prompt",
    "translate_openai_error",
]
