"""Reading OpenAI chat-completions JSON (a whole completion, or one stream chunk) into ``Message``s.

Both work on the parsed JSON itself rather than on the SDK's models: those are built without validation, so a
body of the wrong shape would surface later as a bare ``AttributeError`` or ``TypeError``. Here every part is
checked as it is read, and a part of the wrong shape raises :class:`~compose.errors.ModelResponseError`
naming its path in the body (``choices[0].delta``) and quoting it. Missing optional parts and ``null`` read as
empty, as servers differ in what they send.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from compose.errors import ModelBadRequestError, ModelResponseError
from compose.schema import ContentPart, FunctionCall, ImagePart, Message, ResponseMeta, ToolCall, Usage

__all__ = ["chunk_message", "completion_message", "response_format_param", "usage_from"]

_QUOTE_LEN = 200
_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def completion_message(body: Any) -> Message:
    """The assistant message of a ``chat.completion`` body (the first choice)."""
    where = "unexpected response"
    top = _object(body, "", where)
    choices = _list(top.get("choices"), "choices", where)
    if not choices:
        raise ModelResponseError("the response has no choices")
    choice = _object(choices[0], "choices[0]", where)
    msg = _object(choice.get("message"), "choices[0].message", where, required=True)
    calls = [
        ToolCall(
            id=_text(call.get("id"), f"choices[0].message.tool_calls[{i}].id", where),
            index=i,
            type=_text(call.get("type"), f"choices[0].message.tool_calls[{i}].type", where) or "function",
            function=_function(call.get("function"), f"choices[0].message.tool_calls[{i}].function", where),
            extra={},
        )
        for i, call in _calls(msg.get("tool_calls"), "choices[0].message.tool_calls", where)
        if call.get("type") in (None, "function")
    ]
    usage = top.get("usage")
    content, parts = _content(msg.get("content"), "choices[0].message.content", where)
    return _message(
        where,
        content=content,
        parts=parts,
        reasoning_content=_reasoning(msg, "choices[0].message", where),
        tool_calls=calls,
        response_meta=ResponseMeta(
            finish_reason=_text(choice.get("finish_reason"), "choices[0].finish_reason", where),
            usage=None if usage is None else _usage(usage, where),
            model=_text(top.get("model"), "model", where),
        ),
    )


def chunk_message(chunk: dict[str, Any]) -> Message | None:
    """The ``Message`` chunk of one ``chat.completion.chunk`` (None for a chunk that carries nothing, such as a
    server's role-only first chunk)."""
    where = "unexpected chunk in the stream"
    raw_usage = chunk.get("usage")
    usage = _usage(raw_usage, where) if raw_usage else None
    choices = _list(chunk.get("choices"), "choices", where)
    if not choices:
        if usage is None:
            return None
        return Message(role="assistant", response_meta=ResponseMeta(usage=usage, model=_model(chunk, where)))
    choice = _object(choices[0], "choices[0]", where)
    delta = _object(choice.get("delta"), "choices[0].delta", where)
    content, parts = _content(delta.get("content"), "choices[0].delta.content", where)
    reasoning = _reasoning(delta, "choices[0].delta", where)
    calls = [
        _fragment(tc, f"choices[0].delta.tool_calls[{i}]", where)
        for i, tc in _calls(delta.get("tool_calls"), "choices[0].delta.tool_calls", where)
    ]
    finish = _text(choice.get("finish_reason"), "choices[0].finish_reason", where)
    if not (content or parts or reasoning or calls or finish or usage):
        return None
    # the answering model rides on the chunks that carry metadata anyway (the finish, the usage)
    meta = ResponseMeta(finish_reason=finish, usage=usage, model=_model(chunk, where)) if finish or usage else None
    return _message(
        where, content=content, parts=parts, reasoning_content=reasoning, tool_calls=calls, response_meta=meta
    )


def _model(chunk: dict[str, Any], where: str) -> str:
    return _text(chunk.get("model"), "model", where)


def usage_from(values: dict[str, Any]) -> Usage:
    """A ``Usage`` from a usage mapping."""
    return Usage(
        prompt_tokens=values.get("prompt_tokens") or 0,
        completion_tokens=values.get("completion_tokens") or 0,
        total_tokens=values.get("total_tokens") or 0,
    )


# ------------------------------------------------------------------------------------------------------------
# Checked access


def _fragment(value: Any, path: str, where: str) -> ToolCall:
    tc = _object(value, path, where, required=True)
    call_id = _text(tc.get("id"), f"{path}.id", where)
    index = tc.get("index")
    if index is not None and (type(index) is not int):
        raise _wrong(index, f"{path}.index", "a number", where)
    return ToolCall(
        id=call_id,
        index=index,
        # a server may send the type once or never: the first fragment (the one with the id) defaults it
        type=_text(tc.get("type"), f"{path}.type", where) or ("function" if call_id else ""),
        function=_function(tc.get("function"), f"{path}.function", where),
        extra={},
    )


def _function(value: Any, path: str, where: str) -> FunctionCall:
    fn = _object(value, path, where)
    return FunctionCall(
        name=_text(fn.get("name"), f"{path}.name", where),
        arguments=_text(fn.get("arguments"), f"{path}.arguments", where),
    )


def _calls(value: Any, path: str, where: str) -> list[tuple[int, dict[str, Any]]]:
    items = _list(value, path, where)
    return [(i, _object(item, f"{path}[{i}]", where, required=True)) for i, item in enumerate(items)]


def _content(value: Any, path: str, where: str) -> tuple[str, list[ContentPart]]:
    """A content string, or a list of content parts (some servers answer so): its text parts joined into the
    content, its images as ``ImagePart``s; parts of other types carry nothing we read."""
    if not isinstance(value, list):
        return _text(value, path, where), []
    texts: list[str] = []
    parts: list[ContentPart] = []
    for i, item in enumerate(value):
        part = _object(item, f"{path}[{i}]", where, required=True)
        if part.get("type") == "text":
            texts.append(_text(part.get("text"), f"{path}[{i}].text", where))
        elif part.get("type") == "image_url":
            image = _object(part.get("image_url"), f"{path}[{i}].image_url", where, required=True)
            url = _text(image.get("url"), f"{path}[{i}].image_url.url", where)
            if url:
                parts.append(ImagePart(url=url))
    return "".join(texts), parts


def _reasoning(obj: dict[str, Any], path: str, where: str) -> str:
    if obj.get("reasoning_content"):
        return _text(obj["reasoning_content"], f"{path}.reasoning_content", where)
    return _text(obj.get("reasoning"), f"{path}.reasoning", where)


def _usage(value: Any, where: str) -> Usage:
    raw = _object(value, "usage", where, required=True)
    try:
        return usage_from(raw)
    except ValidationError as exc:
        raise ModelResponseError(f"{where}: usage does not fit ({_first(exc)}): {_quote(raw)}") from None


def _message(where: str, **fields: Any) -> Message:
    try:
        return Message(role="assistant", **fields)
    except ValidationError as exc:  # e.g. a tool-call index out of range
        raise ModelResponseError(f"{where}: the message does not fit ({_first(exc)})") from None


def _object(value: Any, path: str, where: str, *, required: bool = False) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if value is None and not required:
        return {}
    raise _wrong(value, path, "an object", where)


def _list(value: Any, path: str, where: str) -> list[Any]:
    if isinstance(value, list):
        return value
    if value is None:
        return []
    raise _wrong(value, path, "a list", where)


def _text(value: Any, path: str, where: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    raise _wrong(value, path, "a string", where)


def _wrong(value: Any, path: str, expected: str, where: str) -> ModelResponseError:
    kind = "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)
    return ModelResponseError(f"{where}: {path or 'the body'} is {kind}, not {expected}: {_quote(value)}")


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else str(err["msg"])


def _quote(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text[:_QUOTE_LEN] + ("..." if len(text) > _QUOTE_LEN else "")


def response_format_param(value: Any) -> dict[str, Any]:
    """The ``response_format`` request field, checked before any request is made: ``{"type": "text"}``,
    ``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"?,
    "description"?}}`` (the shape structured output sends).

    Raises:
        ModelBadRequestError: another shape, naming what is wrong.
    """
    if not isinstance(value, dict):
        raise ModelBadRequestError(f"response_format must be a mapping, got {type(value).__qualname__}")
    kind = value.get("type")
    if kind in ("text", "json_object"):
        return value
    if kind != "json_schema":
        raise ModelBadRequestError(
            f"response_format type must be 'text', 'json_object' or 'json_schema', got {kind!r}"
        )
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise ModelBadRequestError("response_format json_schema needs a 'json_schema' mapping with a 'name'")
    if not isinstance(spec.get("schema"), dict):
        raise ModelBadRequestError(f"response_format json_schema {spec['name']!r} needs a 'schema' mapping")
    if "strict" in spec and not isinstance(spec["strict"], bool):
        raise ModelBadRequestError(f"response_format json_schema {spec['name']!r}: 'strict' must be a boolean")
    return value
