"""Prompt templates: ``ChatTemplate`` renders variables into the messages a chat model takes, in f-string or
sandboxed Jinja2 format, with ``MessagesPlaceholder`` for runs of messages such as the chat history (Eino's
``components/prompt``).

jinja2 (the ``jinja`` extra) is imported only when a Jinja2 template is built.
"""

from compose.errors import MessagesPlaceholderError, PromptError, TemplateFormatError, TemplateSandboxError
from compose.prompt._callbacks import PromptCallbackInput, PromptCallbackOutput
from compose.prompt._formats import FormatType
from compose.prompt.chat_template import ChatTemplate, MessagesPlaceholder, MessagesTemplate

__all__ = [
    "ChatTemplate",
    "FormatType",
    "MessagesPlaceholder",
    "MessagesPlaceholderError",
    "MessagesTemplate",
    "PromptCallbackInput",
    "PromptCallbackOutput",
    "PromptError",
    "TemplateFormatError",
    "TemplateSandboxError",
]
