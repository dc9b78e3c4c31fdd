"""Messages and tool descriptions: the data that flows between chat models, tools and graphs.

Pydantic models at the data boundary (DESIGN.md section 2, eino-semantics 3.4).

**Content parts.** A message may carry typed ``parts`` besides its ``content`` text: :class:`TextPart`,
:class:`ImagePart`, :class:`AudioPart`, :class:`VideoPart` and :class:`FilePart` (the :data:`ContentPart` union,
told apart by ``type``). Eino keeps the user's input parts (``UserInputMultiContent``) and the model's output parts
(``AssistantGenMultiContent``) in two fields; here one list serves both, the role says which direction. A media
part holds a ``url`` or inline base64 ``data`` with its ``mime_type`` (Eino's ``URL`` / ``Base64Data`` /
``MIMEType``). Where a model takes a list of parts (``OpenAIChatModel``), a non-empty ``content`` goes first, as
a text part. A message without parts serialises exactly as before the field existed (``parts`` is left out of its
JSON when empty), so stored checkpoints and sessions read and write the same JSON either way.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from compose.errors import ConcatError

__all__ = [
    "AudioPart",
    "ContentPart",
    "FilePart",
    "FunctionCall",
    "ImageDetail",
    "ImagePart",
    "Message",
    "ResponseMeta",
    "Role",
    "TextPart",
    "ToolCall",
    "ToolInfo",
    "Usage",
    "VideoPart",
    "approx_part_tokens",
    "assistant_message",
    "concat_message_lists",
    "concat_messages",
    "system_message",
    "tool_message",
    "user_message",
]

Role = Literal["system", "user", "assistant", "tool"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Usage(_Model):
    """Token usage reported by a chat model."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ResponseMeta(_Model):
    """Metadata of a model answer: why it finished, what it cost, and the model the provider says answered
    (``""`` when it did not say)."""

    finish_reason: str = ""
    usage: Usage | None = None
    model: str = ""


class FunctionCall(_Model):
    """The function part of a tool call: its name and JSON arguments (possibly a fragment, in a stream)."""

    name: str = ""
    arguments: str = ""


class ToolCall(_Model):
    """A tool call requested by an assistant message.

    In a stream, fragments of one call share ``index``; ``id`` and the function name usually come only in the
    first fragment.
    """

    id: str = ""
    index: int | None = None
    type: str = "function"
    function: FunctionCall = Field(default_factory=FunctionCall)
    extra: dict[str, Any] = Field(default_factory=dict)


class ToolInfo(_Model):
    """What a model is told about a tool: its name, description and the JSON schema of its parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    extra: dict[str, Any] = Field(default_factory=dict)


ImageDetail = Literal["auto", "low", "high"]
"""How closely a model looks at an image (OpenAI's ``detail``; Eino's ``ImageURLDetail``)."""


class TextPart(_Model):
    """A text part of a message (Eino's part of type ``text``)."""

    type: Literal["text"] = "text"
    text: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)


class _MediaPart(_Model):
    """A media part: a ``url`` or inline base64 ``data`` (with its ``mime_type``), exactly one of the two."""

    type: str
    url: str | None = None
    data: str | None = None
    mime_type: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> _MediaPart:
        sources = [name for name in self._sources() if getattr(self, name) is not None]
        kind = type(self).__name__
        if len(sources) != 1:
            given = " and ".join(sources) if sources else "neither"
            raise ValueError(f"{kind} takes exactly one of {', '.join(self._sources())} (given: {given})")
        if self.data is not None and not self.mime_type:
            raise ValueError(f"{kind} with inline data needs its mime_type (such as 'image/png')")
        return self

    def _sources(self) -> tuple[str, ...]:
        return ("url", "data")

    @classmethod
    def from_bytes(cls, raw: bytes, mime_type: str, **fields: Any) -> Self:
        """The part holding ``raw`` inline (base64-encoded), e.g. ``ImagePart.from_bytes(png, "image/png")``."""
        return cls(data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type, **fields)

    @property
    def data_url(self) -> str:
        """The ``url``, or the inline data as an RFC 2397 ``data:`` URL (``""`` for a file given by its id)."""
        if self.url is not None:
            return self.url
        if self.data is None:
            return ""
        return f"data:{self.mime_type};base64,{self.data}"


class ImagePart(_MediaPart):
    """An image (Eino's ``image_url`` part, ``MessageInputImage``); ``detail`` is sent where a model takes it."""

    type: Literal["image"] = "image"
    detail: ImageDetail | None = None


class AudioPart(_MediaPart):
    """Audio (Eino's ``audio_url`` part). OpenAI's chat API takes inline ``data`` in wav or mp3 only."""

    type: Literal["audio"] = "audio"


class VideoPart(_MediaPart):
    """A video (Eino's ``video_url`` part); sent as a ``video_url`` part, which vLLM-style servers take."""

    type: Literal["video"] = "video"


class FilePart(_MediaPart):
    """A file such as a PDF (Eino's ``file_url`` part): inline ``data``, a ``url``, or a provider's ``file_id``
    (an OpenAI upload), exactly one; ``name`` is its file name."""

    type: Literal["file"] = "file"
    file_id: str | None = None
    name: str = ""

    def _sources(self) -> tuple[str, ...]:
        return ("url", "data", "file_id")


ContentPart = Annotated[TextPart | ImagePart | AudioPart | VideoPart | FilePart, Field(discriminator="type")]
"""One part of a message's content, told apart by its ``type``."""

_IMAGE_TOKENS = {"low": 85}
_DEFAULT_IMAGE_TOKENS = 765  # OpenAI's count for a 1024x1024 image at high detail


def approx_part_tokens(part: ContentPart) -> int:
    """An estimate of the tokens of one content part, for the token estimators.

    A text part: a quarter of its characters, rounded up (as content is counted). An image: 765 tokens (85 with
    ``detail="low"``), what OpenAI counts for a 1024x1024 image. Audio, video and files: a quarter of their inline
    data's characters (or of their URL or file id), so large inline media weigh heavily, as they do in a context.

    Example:
        >>> approx_part_tokens(TextPart(text="Hello, world!")), approx_part_tokens(ImagePart(url="https://x/y.png"))
        (4, 765)
    """
    if isinstance(part, TextPart):
        return (len(part.text) + 3) // 4
    if isinstance(part, ImagePart):
        return _IMAGE_TOKENS.get(part.detail or "", _DEFAULT_IMAGE_TOKENS)
    source = part.data if part.data is not None else part.url
    if source is None and isinstance(part, FilePart):
        source = part.file_id
    return (len(source or "") + 3) // 4


def _no_parts(parts: list[Any]) -> bool:
    return not parts


class Message(_Model):
    """A chat message (or a chunk of one, in a stream).

    ``content`` is its text; ``parts`` its typed content parts (images, audio, files, more text), empty for a
    plain text message (see the module docstring).

    Example:
        >>> Message(role="user", content="What is in it?", parts=[ImagePart(url="https://example.com/cat.png")])
        Message(role='user', content='What is in it?', parts=[image])
    """

    role: Role
    content: str = ""
    name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    response_meta: ResponseMeta | None = None
    reasoning_content: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)
    # left out of the JSON when empty: a message without parts serialises as before the field existed
    parts: list[ContentPart] = Field(default_factory=list, exclude_if=_no_parts)

    def __repr__(self) -> str:
        parts = [f"role={self.role!r}"]
        if self.content:
            text = self.content if len(self.content) <= 60 else self.content[:57] + "..."
            parts.append(f"content={text!r}")
        if self.parts:
            parts.append(f"parts=[{', '.join(p.type for p in self.parts)}]")
        if self.reasoning_content:
            parts.append(f"reasoning_content={len(self.reasoning_content)} chars")
        if self.tool_calls:
            calls = ", ".join(f"{c.function.name or '?'}#{c.id or c.index}" for c in self.tool_calls)
            parts.append(f"tool_calls=[{calls}]")
        if self.tool_call_id:
            parts.append(f"tool_call_id={self.tool_call_id!r}")
        if self.name:
            parts.append(f"name={self.name!r}")
        return f"Message({', '.join(parts)})"


def system_message(content: str) -> Message:
    """A system message."""
    return Message(role="system", content=content)


def user_message(content: str, *, parts: Sequence[ContentPart] = ()) -> Message:
    """A user message, optionally with content ``parts`` after its text (an image, a file, ...)."""
    if parts:
        return Message(role="user", content=content, parts=list(parts))
    return Message(role="user", content=content)


def assistant_message(content: str, tool_calls: list[ToolCall] | None = None) -> Message:
    """An assistant message, optionally calling tools."""
    return Message(role="assistant", content=content, tool_calls=list(tool_calls or []))


def tool_message(content: str, tool_call_id: str, tool_name: str | None = None) -> Message:
    """The result of one tool call, answering ``tool_call_id``."""
    return Message(role="tool", content=content, tool_call_id=tool_call_id, tool_name=tool_name)


# ------------------------------------------------------------------------------------------------------------
# Concatenation of stream chunks (eino-semantics 3.4, Eino's ConcatMessages / ConcatMessageArray)


def concat_messages(msgs: Sequence[Message | None]) -> Message:
    """Concatenate the chunks of a streamed message into one message, with Eino's rules.

    - role, name, tool_call_id, tool_name: the first non-empty value wins; a different non-empty value later
      is an error naming both values.
    - content and reasoning_content are concatenated in order.
    - parts are appended in order, with a run of adjacent text parts merged into one (Eino's rule for input
      and output parts); in an assistant message a run of adjacent inline audio parts (a streamed audio answer)
      is merged into one too, its data concatenated. Other parts are kept as they are.
    - response_meta exists if any chunk has one: ``finish_reason`` is the last non-empty one, each usage
      counter is the maximum over the chunks, ``model`` the last non-empty one.
    - extra maps are merged key-wise: strings are concatenated, any other value is replaced by the later one.
    - tool calls without an ``index`` are kept as they are, first, in their order; fragments sharing an
      ``index`` are merged into one call (id, type and name: first non-empty value, a conflicting one is an
      error; arguments concatenated; the first fragment's ``extra``), placed after them sorted by index.

    A single message is returned as it is (not copied).

    Args:
        msgs: the chunks, in stream order.

    Returns:
        The concatenated message.

    Raises:
        ConcatError: on a ``None`` chunk, an empty sequence, or conflicting values.

    Example:
        >>> concat_messages([assistant_message("Hel"), assistant_message("lo")]).content
        'Hello'
    """
    if len(msgs) == 1 and msgs[0] is not None:
        return msgs[0]
    if not msgs:
        raise ConcatError("cannot concat an empty list of messages")

    first = msgs[0]
    role: Role | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    contents: list[str] = []
    reasoning: list[str] = []
    tool_calls: list[ToolCall] = []
    extras: list[dict[str, Any]] = []
    parts: list[TextPart | _MediaPart] = []
    meta_seen = False
    finish_reason = ""
    model = ""
    usage: list[int] | None = None

    for idx, msg in enumerate(msgs):
        if msg is None:
            raise ConcatError(f"unexpected nil chunk in message stream, index: {idx}")
        role = _first_non_empty(role, msg.role, "messages with different roles")
        name = _first_non_empty(name, msg.name, "messages with different names")
        tool_call_id = _first_non_empty(tool_call_id, msg.tool_call_id, "messages with different toolCallIDs")
        tool_name = _first_non_empty(tool_name, msg.tool_name, "messages with different toolNames")
        if msg.content:
            contents.append(msg.content)
        if msg.reasoning_content:
            reasoning.append(msg.reasoning_content)
        if msg.tool_calls:
            tool_calls.extend(msg.tool_calls)
        if msg.extra:
            extras.append(msg.extra)
        if msg.parts:
            parts.extend(msg.parts)
        meta = msg.response_meta
        if meta is not None:
            meta_seen = True
            if meta.finish_reason:
                finish_reason = meta.finish_reason
            if meta.model:
                model = meta.model
            if meta.usage is not None:
                u = meta.usage
                if usage is None:
                    usage = [u.prompt_tokens, u.completion_tokens, u.total_tokens]
                else:
                    usage[0] = max(usage[0], u.prompt_tokens)
                    usage[1] = max(usage[1], u.completion_tokens)
                    usage[2] = max(usage[2], u.total_tokens)

    assert first is not None and role is not None  # the loop raised on None; role is a required field
    response_meta = None
    if meta_seen:
        response_meta = ResponseMeta.model_construct(
            finish_reason=finish_reason,
            usage=None
            if usage is None
            else Usage.model_construct(
                prompt_tokens=usage[0], completion_tokens=usage[1], total_tokens=usage[2]
            ),
            model=model,
        )
    return Message.model_construct(
        role=role,
        content="".join(contents),
        name=name,
        tool_calls=_concat_tool_calls(tool_calls) if tool_calls else [],
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        response_meta=response_meta,
        reasoning_content="".join(reasoning),
        extra=_concat_extra(extras),
        parts=_concat_parts(parts, role) if parts else [],
    )


def concat_message_lists(lists: Sequence[Sequence[Message | None]]) -> list[Message | None]:
    """Concatenate lists of message chunks slot by slot (Eino's ``ConcatMessageArray``).

    Used for streams whose chunks are lists with one slot per tool call (a ToolsNode in stream mode): slot
    ``i`` of the result is the concatenation of the non-``None`` messages in slot ``i`` of every list, or
    ``None`` when no list had a message there.

    Args:
        lists: the chunks, in stream order; all of the same length.

    Returns:
        One message (or ``None``) per slot.

    Raises:
        ConcatError: if the lists differ in length, or a slot's messages cannot be concatenated.

    Example:
        >>> a, b = tool_message("4", "c1"), tool_message("2", "c1")
        >>> [m.content if m else None for m in concat_message_lists([[a, None], [b, None]])]
        ['42', None]
    """
    if not lists:
        return []
    length = len(lists[0])
    slots: list[list[Message]] = [[] for _ in range(length)]
    for chunk in lists:
        if len(chunk) != length:
            raise ConcatError(f"unexpected array length. Got {len(chunk)}, expected {length}")
        for i, msg in enumerate(chunk):
            if msg is not None:
                slots[i].append(msg)
    return [concat_messages(slot) if slot else None for slot in slots]


_T = TypeVar("_T", bound=str | None)


def _first_non_empty(current: _T, value: _T, what: str) -> _T:
    """``value`` unless it is empty, ``current`` unless it is empty; a conflict is a ConcatError naming ``what``."""
    if not value:
        return current
    if not current:
        return value
    if current != value:
        raise ConcatError(f"cannot concat {what}: '{current}' '{value}'")
    return current


def _concat_tool_calls(calls: list[ToolCall]) -> list[ToolCall]:
    unindexed: list[ToolCall] = []
    by_index: dict[int, list[ToolCall]] = {}
    for call in calls:
        if call.index is None:
            unindexed.append(call)
        else:
            by_index.setdefault(call.index, []).append(call)

    merged = unindexed
    for index in sorted(by_index):
        fragments = by_index[index]
        call_id = call_type = call_name = ""
        arguments: list[str] = []
        for frag in fragments:
            call_id = _first_non_empty(call_id, frag.id, "ToolCalls with different tool id")
            call_type = _first_non_empty(call_type, frag.type, "ToolCalls with different tool type")
            call_name = _first_non_empty(call_name, frag.function.name, "ToolCalls with different tool name")
            if frag.function.arguments:
                arguments.append(frag.function.arguments)
        merged.append(
            ToolCall.model_construct(
                id=call_id,
                index=index,
                type=call_type,
                function=FunctionCall.model_construct(name=call_name, arguments="".join(arguments)),
                extra=dict(fragments[0].extra),
            )
        )
    return merged


def _concat_parts(parts: list[TextPart | _MediaPart], role: Role) -> list[TextPart | _MediaPart]:
    merged: list[TextPart | _MediaPart] = []
    run: list[Any] = []  # adjacent parts that merge into one

    def flush() -> None:
        if len(run) <= 1:
            merged.extend(run)
        elif isinstance(run[0], TextPart):
            merged.append(
                TextPart.model_construct(
                    type="text",
                    text="".join(p.text for p in run),
                    extra=_concat_extra([p.extra for p in run if p.extra]),
                )
            )
        else:
            first = run[0]
            merged.append(
                first.model_copy(
                    update={
                        "data": "".join(p.data for p in run),
                        "mime_type": next((p.mime_type for p in run if p.mime_type), ""),
                        "extra": _concat_extra([p.extra for p in run if p.extra]),
                    }
                )
            )
        run.clear()

    for part in parts:
        if run and not _merges(run[0], part, role):
            flush()
        if _merges(part, part, role):
            run.append(part)
        else:
            flush()
            merged.append(part)
    flush()
    return merged


def _merges(first: TextPart | _MediaPart, part: TextPart | _MediaPart, role: Role) -> bool:
    if isinstance(part, TextPart):
        return isinstance(first, TextPart)
    return (
        role == "assistant"
        and isinstance(part, AudioPart)
        and isinstance(first, AudioPart)
        and part.data is not None
        and first.data is not None
    )


def _concat_extra(extras: list[dict[str, Any]]) -> dict[str, Any]:
    if not extras:
        return {}
    if len(extras) == 1:
        return dict(extras[0])
    merged: dict[str, Any] = {}
    text_parts: dict[str, list[str]] = {}  # keys whose values so far are all strings, joined at the end
    for extra in extras:
        for key, value in extra.items():
            if isinstance(value, str) and (key in text_parts or key not in merged):
                text_parts.setdefault(key, []).append(value)
                merged[key] = None  # placeholder keeps the key's first-seen position
            elif isinstance(value, str):
                text_parts[key] = [value]
            else:
                text_parts.pop(key, None)
                merged[key] = value
    for key, parts in text_parts.items():
        merged[key] = "".join(parts)
    return merged
