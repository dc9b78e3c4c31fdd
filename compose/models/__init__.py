"""Chat models: the ChatModel protocol, OpenAIChatModel (openai SDK), ScriptedChatModel (offline, for tests)
and JSONActionChatModel (tools for models without native function calling).

``OpenAIChatModel`` and ``translate_openai_error`` import the ``openai`` SDK (more than half of a cold start) and
the JSON action model is rarely needed, so their modules are imported on first use of their names.
"""

import typing

from compose._lazy import lazy_names as _lazy_names
from compose.models.base import ChatModel, ChatModelOptions, ToolChoice
from compose.models.scripted import ScriptedCall, ScriptedChatModel, ScriptedResponse

if typing.TYPE_CHECKING:
    from compose.models.json_action import JSONActionChatModel, parse_json_action, render_json_action_prompt
    from compose.models.openai_model import OpenAIChatModel, translate_openai_error
else:
    __getattr__, __dir__ = _lazy_names(
        __name__,
        {
            "JSONActionChatModel": "compose.models.json_action",
            "parse_json_action": "compose.models.json_action",
            "render_json_action_prompt": "compose.models.json_action",
            "OpenAIChatModel": "compose.models.openai_model",
            "translate_openai_error": "compose.models.openai_model",
        },
    )

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
