"""JSONActionChatModel: tools for a model without native function calling, through a JSON action protocol.

The protocol (seed 002's engineering ReAct): every answer is one JSON object, either
``{"type": "tool", "tool": "<name>", "args": {...}}`` to call a tool or ``{"type": "final", "answer": "..."}``
to finish. The wrapper describes the protocol and the tools in the system prompt, calls the inner model, and
parses its answer into a ``Message`` with a tool call or with the final content, so a ReAct agent drives it
exactly like a model with native tool calls.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compose.errors import ModelResponseError
from compose.models.base import ChatModel, ToolChoice
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, concat_messages
from compose.stream import StreamReader

__all__ = ["JSONActionChatModel", "parse_json_action", "render_json_action_prompt"]

_PROTOCOL = """\
Answer with exactly one JSON object and nothing else, in one of two forms.

To call a tool:
{"type": "tool", "tool": "<tool name>", "args": {"<parameter>": <value>}}

To give the final answer:
{"type": "final", "answer": "<your answer>"}

Available tools:
{tools}

Rules:
- Return one JSON object per answer, with no other text.
- If you are not sure of a fact, call a tool to find out first.
- Do not make up real-time information such as weather, routes or prices."""

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_QUOTE_LEN = 200


class JSONActionChatModel:
    """Lets a model without native function calling drive tools through a JSON action protocol (seed 002).

    ``with_tools`` binds tools to this wrapper (the inner model is never told about them natively). Each call:

    1. puts the protocol and the tool descriptions (name, description, JSON schema of the parameters) into the
       system message (appended to the first system message, or as a new first one);
    2. rewrites the history for a model that knows no tool calls: an assistant message with tool calls
       becomes its JSON action text, a tool result becomes a user message ``Observation from tool ...``;
    3. calls the inner model and parses its answer: plain JSON, JSON in a fenced code block, or the first JSON
       object embedded in prose (any nesting). A tool action becomes an assistant message with one tool call
       (a fresh unique id, ``index`` 0, the arguments as JSON); a final action an assistant message with the
       answer as content. Reasoning content and response meta of the inner answer are kept.

    ``stream`` reads the inner stream to its end and emits the parsed message as one chunk: whether the answer
    is a tool call or a final answer, and what its arguments are, is known only once the whole JSON is there.

    ``tool_choice`` is not sent to the inner model: ``"none"`` drops the tool action from the prompt,
    ``"required"`` asks for a tool action, a tool name asks for that tool. Other options go to the inner
    model.

    Raises (from ``generate``, or through the reader of ``stream``):
        ModelResponseError: the answer is not a JSON action; the message quotes its first 200 characters.

    Example:
        >>> import anyio
        >>> from compose.models.scripted import ScriptedChatModel
        >>> inner = ScriptedChatModel(['{"type": "final", "answer": "42"}'], usage=False)
        >>> anyio.run(JSONActionChatModel(inner).generate, [Message(role="user", content="6*7?")])
        Message(role='assistant', content='42')
    """

    def __init__(self, inner: ChatModel, tools: Sequence[ToolInfo] = ()) -> None:
        self.inner = inner
        self._tools = tuple(tools)

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """The tools described to the inner model."""
        return self._tools

    def with_tools(self, tools: Sequence[ToolInfo]) -> JSONActionChatModel:
        """A wrapper of the same inner model that describes ``tools``."""
        return JSONActionChatModel(self.inner, tools)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        """Call the inner model with the protocol and parse its answer into a tool call or a final answer."""
        prompt, opts = self._prompt(messages, opts)
        return _to_message(await self.inner.generate(prompt, **opts))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        """Like ``generate``, as a stream of one chunk (the inner stream is read to its end first)."""
        prompt, opts = self._prompt(messages, opts)
        reader = await self.inner.stream(prompt, **opts)
        return StreamReader.from_async_iterator(_Parsed(reader))

    def __repr__(self) -> str:
        return f"JSONActionChatModel({self.inner!r}, tools={[t.name for t in self._tools]})"

    def _prompt(
        self, messages: Sequence[Message], opts: dict[str, Any]
    ) -> tuple[list[Message], dict[str, Any]]:
        choice: ToolChoice | None = opts.pop("tool_choice", None)
        protocol = render_json_action_prompt(self._tools, tool_choice=choice)
        out = _for_plain_model(messages)
        if out and out[0].role == "system":
            out[0] = out[0].model_copy(update={"content": f"{out[0].content}\n\n{protocol}"})
        else:
            out.insert(0, Message(role="system", content=protocol))
        return out, opts


def render_json_action_prompt(tools: Sequence[ToolInfo], *, tool_choice: ToolChoice | None = None) -> str:
    """The protocol text and tool descriptions put into the system message."""
    lines = []
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description}".rstrip(": "))
        lines.append(f"  parameters (JSON schema): {json.dumps(tool.parameters, ensure_ascii=False)}")
    text = _PROTOCOL.replace("{tools}", "\n".join(lines) if lines else "(none)")
    if tool_choice == "none" or not tools:
        text += "\n- Do not call a tool now: give the final answer."
    elif tool_choice == "required":
        text += "\n- Call a tool now: answer with a tool action."
    elif isinstance(tool_choice, str) and tool_choice != "auto":
        text += f"\n- Call the tool {tool_choice} now."
    return text


def parse_json_action(text: str) -> dict[str, Any]:
    """The JSON action object in a model's answer.

    Tries the whole text, then each fenced code block, then the JSON objects embedded in prose from the left
    (and the objects nested in them); the first object with a ``"type"`` wins.

    The search takes time linear in the text's length and accepts at most 100 levels of nesting, so a runaway
    or adversarial answer fails fast instead of blocking the event loop (see the comment above ``_match``).

    Raises:
        ModelResponseError: if no JSON object with a ``"type"`` can be found (saying so when brackets nest
            deeper than 100 levels); quotes the start of the text.
    """
    stripped = text.strip()
    scan = _Scan(stripped)
    found = scan.whole(stripped)
    if found is None:
        for m in _FENCE.finditer(stripped):
            found = scan.whole(m.group(1).strip())
            if found is not None:
                break
    if found is None:
        found = scan.embedded()
    if found is not None:
        return found
    if scan.too_deep:
        raise ModelResponseError(f"model answer nests JSON more than {_MAX_DEPTH} levels deep: {_quote(text)}")
    raise ModelResponseError(f"model answer is not a JSON action: {_quote(text)}")


# ------------------------------------------------------------------------------------------------------------
# Finding JSON objects in text, in linear time
#
# A naive search (json.raw_decode at every "{") is quadratic: each failure costs up to the rest of the text,
# and json's error messages count lines up to the failure. Instead one left-to-right pass matches brackets
# (skipping JSON strings) and records each balanced {...} span with the spans nested in it; only spans that
# contain '"type"' are handed to json (each object is parsed once, unless it is not JSON, when the spans
# inside it are tried). A "{" that does not balance (it meets the wrong bracket, the end of the text, or nests
# more than _MAX_DEPTH deep) gives up its attempt: the balanced spans it completed are tried, and the scan goes
# on at the next "{" (a quote in prose may have been taken for the start of a string). Such re-scans are
# budgeted to a multiple of the text's length; past the budget, the scan goes on where the attempt stopped, so
# nothing is scanned twice and the whole search stays linear. Nesting past _MAX_DEPTH ends the search: the
# rest of the text is inside the runaway nesting.

_MAX_DEPTH = 100
_BRACKETS = re.compile(r'[{}\[\]"]')
_RESCAN_FACTOR = 2


@dataclass(slots=True)
class _Span:
    """A balanced ``{...}`` at ``start:end`` and the balanced ``{...}`` spans directly inside it."""

    start: int
    end: int = -1
    children: list[_Span] = field(default_factory=list)


class _Scan:
    """One search of a text for a JSON action (see the comment above)."""

    __slots__ = ("budget", "text", "too_deep")

    def __init__(self, text: str) -> None:
        self.text = text
        self.budget = _RESCAN_FACTOR * len(text) + 1024
        self.too_deep = False

    def whole(self, text: str) -> dict[str, Any] | None:
        """``text`` as one JSON action object, or None."""
        if not text.startswith("{"):
            return None
        span, _, _ = self._match(text, 0)
        if span is None or span.end != len(text):
            return None
        value = _loads(text, span)
        return value if isinstance(value, dict) and "type" in value else None

    def embedded(self) -> dict[str, Any] | None:
        """The first JSON object with a ``"type"`` in the text, nested ones included, in document order."""
        text = self.text
        if '"type"' not in text:
            return None
        pos = 0
        while (start := text.find("{", pos)) != -1:
            span, stop, completed = self._match(text, start)
            if span is not None:
                found = _action_in(text, span)
                pos = span.end
            else:
                found = next((f for c in completed if (f := _action_in(text, c)) is not None), None)
                if self.too_deep:  # whatever follows is inside the runaway nesting
                    return found
                self.budget -= stop - start
                pos = start + 1 if self.budget >= 0 else max(stop, start + 1)
            if found is not None:
                return found
        return None

    def _match(self, text: str, start: int) -> tuple[_Span | None, int, list[_Span]]:
        """Match the ``{`` at ``start``: its balanced span and end, or (None, where the attempt stopped, the
        spans it completed in document order)."""
        spans = [_Span(start)]  # the open {...} spans, outermost first
        closers = ["}"]  # the closing bracket each open bracket needs
        i = start + 1
        search = _BRACKETS.search
        while True:
            m = search(text, i)
            if m is None:
                return None, len(text), _completed(spans)
            j = m.start()
            c = text[j]
            if c == '"':
                i = _string_end(text, j + 1)
                if i < 0:
                    return None, len(text), _completed(spans)
                continue
            if c == "{" or c == "[":
                if len(closers) >= _MAX_DEPTH:
                    self.too_deep = True
                    return None, j, _completed(spans)
                closers.append("}" if c == "{" else "]")
                if c == "{":
                    spans.append(_Span(j))
            elif closers.pop() != c:
                return None, j, _completed(spans)
            elif c == "}":
                done = spans.pop()
                done.end = j + 1
                if not spans:
                    return done, j + 1, []
                spans[-1].children.append(done)
            i = j + 1


def _completed(open_spans: list[_Span]) -> list[_Span]:
    # a span still open started after its parent's completed children, so this is document order
    return [child for span in open_spans for child in span.children]


def _action_in(text: str, span: _Span) -> dict[str, Any] | None:
    if text.find('"type"', span.start, span.end) == -1:
        return None
    value = _loads(text, span)
    if value is not _INVALID:
        return _first_typed(value)
    for child in span.children:  # the span is not JSON, but the objects inside it may be
        found = _action_in(text, child)
        if found is not None:
            return found
    return None


_INVALID: Any = object()


def _loads(text: str, span: _Span) -> Any:
    try:
        return json.loads(text[span.start : span.end])
    except ValueError:
        return _INVALID


def _first_typed(value: Any) -> dict[str, Any] | None:
    """The first dict with a ``"type"`` in ``value``, in document order (its nesting is at most _MAX_DEPTH)."""
    if isinstance(value, dict):
        if "type" in value:
            return value
        items: Any = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return None
    for item in items:
        found = _first_typed(item)
        if found is not None:
            return found
    return None


def _string_end(text: str, i: int) -> int:
    """The index after the closing quote of the JSON string whose content starts at ``i``; -1 if it has none."""
    while True:
        j = text.find('"', i)
        if j < 0:
            return -1
        k = j
        while text[k - 1] == "\\":  # stops at the opening quote at the latest
            k -= 1
        if (j - k) % 2 == 0:  # an even run of backslashes: the quote is not escaped
            return j + 1
        i = j + 1


def _to_message(answer: Message) -> Message:
    action = parse_json_action(answer.content)
    kind = action.get("type")
    if kind == "tool":
        name = action.get("tool") or action.get("name")
        if not isinstance(name, str) or not name:
            raise ModelResponseError(f"JSON tool action without a tool name: {_quote(answer.content)}")
        args = action.get("args", action.get("arguments", {}))
        try:
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            arguments = json.dumps({} if args is None else args, ensure_ascii=False)
        except ValueError:
            raise ModelResponseError(
                f"JSON tool action with arguments that are not JSON: {_quote(answer.content)}"
            ) from None
        except RecursionError:  # arguments given as a string are parsed by json alone: bound them here
            raise ModelResponseError(
                f"JSON tool action with arguments nested too deeply: {_quote(answer.content)}"
            ) from None
        call = ToolCall(
            id=f"call_{uuid.uuid4().hex[:24]}",
            index=0,
            type="function",
            function=FunctionCall(name=name, arguments=arguments),
            extra={},
        )
        return Message(
            role="assistant",
            tool_calls=[call],
            reasoning_content=answer.reasoning_content,
            response_meta=answer.response_meta,
        )
    if kind == "final":
        result = action.get("answer", "")
        content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return Message(
            role="assistant",
            content=content,
            reasoning_content=answer.reasoning_content,
            response_meta=answer.response_meta,
        )
    raise ModelResponseError(f"unknown JSON action type {kind!r}: {_quote(answer.content)}")


def _for_plain_model(messages: Sequence[Message]) -> list[Message]:
    names: dict[str, str] = {}  # tool call id -> tool name, to label observations
    out = []
    for msg in messages:
        if msg.role == "assistant" and msg.tool_calls:
            actions = []
            for call in msg.tool_calls:
                names[call.id] = call.function.name
                try:
                    args = json.loads(call.function.arguments or "{}")
                except ValueError:
                    args = call.function.arguments
                action = {"type": "tool", "tool": call.function.name, "args": args}
                actions.append(json.dumps(action, ensure_ascii=False))
            text = "\n".join(actions)
            content = f"{msg.content}\n{text}" if msg.content else text
            out.append(Message(role="assistant", content=content, parts=list(msg.parts)))
        elif msg.role == "tool":
            label = msg.tool_name or names.get(msg.tool_call_id or "") or msg.name or "?"
            ref = f" (call {msg.tool_call_id})" if msg.tool_call_id else ""
            observation = f"Observation from tool {label}{ref}:\n{msg.content}"
            out.append(Message(role="user", content=observation, parts=list(msg.parts)))  # an image a tool made, ...
        else:
            out.append(msg)
    return out


class _Parsed:
    """Reads the inner stream to its end, then yields the parsed message; ``aclose`` closes the inner one."""

    __slots__ = ("_done", "_reader")

    def __init__(self, reader: StreamReader[Message]) -> None:
        self._reader = reader
        self._done = False

    def __aiter__(self) -> _Parsed:
        return self

    async def __anext__(self) -> Message:
        if self._done:
            raise StopAsyncIteration
        self._done = True
        try:
            chunks = [chunk async for chunk in self._reader]
        finally:
            await self._reader.aclose()
        if not chunks:
            raise ModelResponseError("model answer is not a JSON action: the stream was empty")
        return _to_message(concat_messages(chunks))

    async def aclose(self) -> None:
        self._done = True
        await self._reader.aclose()


def _quote(text: str) -> str:
    return repr(text[:_QUOTE_LEN] + ("..." if len(text) > _QUOTE_LEN else ""))
