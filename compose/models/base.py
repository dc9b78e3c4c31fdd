"""The ChatModel protocol and the options every chat model understands.

A chat model turns a list of messages into an assistant message, whole (``generate``) or as a stream of
chunks (``stream``) that :func:`compose.schema.concat_messages` joins back into the whole message.
``with_tools`` returns a new model that tells the provider about tools; it never changes the model it is
called on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from compose.errors import ModelResponseError
from compose.schema import Message, ToolInfo
from compose.stream._core import StreamReader

__all__ = [
    "ChatModel",
    "ChatModelOptions",
    "ToolChoice",
    "checked_chunk",
    "checked_message",
    "checked_model_calls",
    "checked_stream",
    "model_identity",
]

ToolChoice = str | Mapping[str, Any]
"""``"auto"``, ``"none"``, ``"required"``, the name of one tool to force (the simplest spelling; OpenAIChatModel
sends it as ``{"type": "function", "function": {"name": ...}}``), or a provider-specific mapping sent as it is."""

_FIELDS = ("temperature", "max_tokens", "top_p", "stop", "tool_choice")


@runtime_checkable
class ChatModel(Protocol):
    """What a chat-model node calls: OpenAIChatModel, ScriptedChatModel, JSONActionChatModel or your own.

    Options arrive as keyword arguments (a graph passes a node's ``node_options`` this way): ``temperature``,
    ``max_tokens``, ``top_p``, ``stop``, ``tool_choice`` and provider extras. Options given per call override
    the ones the model was constructed with (see :class:`ChatModelOptions`).
    """

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        """Answer ``messages`` with one assistant message."""
        ...

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        """Answer ``messages`` with a stream of message chunks; the caller owns (and closes) the reader."""
        ...

    def with_tools(self, tools: Sequence[ToolInfo]) -> ChatModel:
        """A new model that offers ``tools`` to the provider; ``self`` is left unchanged."""
        ...


@dataclass(frozen=True, slots=True)
class ChatModelOptions:
    """The options of one chat model call.

    ``None`` means "not set": the provider's default applies. ``extra`` holds provider-specific options
    (``seed``, ``response_format``, ...), passed through as they are.

    Example:
        >>> base = ChatModelOptions.from_kwargs(temperature=0.2, seed=7)
        >>> call = base.merged(temperature=0.9, top_p=0.5)
        >>> (call.temperature, call.top_p, dict(call.extra))
        (0.9, 0.5, {'seed': 7})
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    tool_choice: ToolChoice | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_kwargs(cls, **opts: Any) -> ChatModelOptions:
        """Build options from keyword arguments; names that are not fields go to ``extra``.

        An ``extra=`` mapping is merged into ``extra`` too. ``stop`` may be one string or a sequence.
        """
        return cls().merged(**opts)

    def merged(self, **opts: Any) -> ChatModelOptions:
        """These options overridden by ``opts`` (values of ``None`` leave a field as it is)."""
        if not opts:
            return self
        changes: dict[str, Any] = {}
        extra: dict[str, Any] | None = None
        for key, value in opts.items():
            if key in _FIELDS:
                if value is not None:
                    changes[key] = _normalise_stop(value) if key == "stop" else value
            else:
                if extra is None:
                    extra = dict(self.extra)
                if key == "extra":
                    extra.update(value or {})
                else:
                    extra[key] = value
        if extra is not None:
            changes["extra"] = extra
        return dataclasses.replace(self, **changes) if changes else self


def _normalise_stop(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


# ------------------------------------------------------------------------------------------------------------
# What a chat model returns, checked where a graph (or an agent) calls it


def checked_message(value: Any, source: str) -> Message:
    """``value`` if it is a ``Message``; else a :class:`~compose.errors.ModelResponseError` naming ``source``
    (``"chat model node 'chat' (MyModel): generate()"``) and what came back instead."""
    if isinstance(value, Message):
        return value
    raise ModelResponseError(f"{source} returned {_describe(value)}, not a Message")


def checked_stream(value: Any, source: str) -> StreamReader[Message]:
    """``value`` if it is a ``StreamReader``; else a :class:`~compose.errors.ModelResponseError` naming
    ``source``. (Its chunks are checked where it is read: a chat model node's output stream, an agent's model
    event, with :func:`checked_chunk`.)"""
    if isinstance(value, StreamReader):
        return value
    raise ModelResponseError(f"{source} returned {_describe(value)}, not a StreamReader of Messages")


def checked_chunk(source: str, chunk: Any) -> Message:
    """``chunk`` of a model's stream if it is a ``Message``; else a :class:`~compose.errors.ModelResponseError`
    naming ``source`` and what the stream yielded (for ``reader.map``: an error item of the stream)."""
    if isinstance(chunk, Message):
        return chunk
    raise ModelResponseError(f"{source} yielded {_describe(chunk)}, not a Message")


GenerateFn = Callable[..., Awaitable[Message]]
StreamFn = Callable[..., Awaitable[StreamReader[Message]]]


def checked_model_calls(key: str, model: Any) -> tuple[GenerateFn, StreamFn]:
    """The ``generate`` and ``stream`` a chat-model node ``key`` calls: ``model``'s, with what they return
    checked (one ``isinstance`` per call), so a model returning ``None`` or a string fails with an error naming
    the node instead of an ``AttributeError`` further on."""
    where = f"chat model node '{key}' ({type(model).__qualname__})"
    generate_fn, stream_fn = model.generate, model.stream

    if getattr(model, "checks_messages", False) is True:
        # it checks what it returns already (an agent's event layer, naming the agent): not twice
        return generate_fn, stream_fn

    async def generate(messages: Sequence[Message], **opts: Any) -> Message:
        return checked_message(await generate_fn(messages, **opts), f"{where}: generate()")

    async def stream(messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return checked_stream(await stream_fn(messages, **opts), f"{where}: stream()")

    return generate, stream


def model_identity(model: Any) -> tuple[str, str]:
    """``(model name, provider name)`` of a chat model, for callbacks and tracing: its ``model_name`` and
    ``provider_name`` attributes (``""`` when it has none). A wrapper model (``JSONActionChatModel``, an agent's
    retry and event layers) that has neither is looked through to the model it keeps as ``inner``."""
    for _ in range(16):  # a chain of wrappers; the bound is only against a cycle
        name = getattr(model, "model_name", None)
        provider = getattr(model, "provider_name", None)
        if isinstance(name, str) or isinstance(provider, str):
            return (name if isinstance(name, str) else "", provider if isinstance(provider, str) else "")
        inner = getattr(model, "inner", None)
        if inner is None:
            break
        model = inner
    return "", ""


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return "None" if value is None else f"{type(value).__qualname__} {text}"
