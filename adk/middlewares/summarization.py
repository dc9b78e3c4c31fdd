"""Summarization (Eino's ``summarization``): keep a long conversation within the model's context window.

Before each model call, when the conversation passes ``max_tokens`` (counted by ``token_counter``), the older
messages are replaced by one user message holding a summary written by ``model``:

* the leading system messages (the instruction) are kept as they are;
* the newest messages are kept whole, as many as fit in ``keep_tokens``: whole turns (from a user message on)
  when at least one fits, else whole tool rounds: the kept part never starts with a tool result, so a tool call
  and its results are summarized together or kept together;
* an earlier summary is among the older messages, so it is folded into the next one;
* the run's event stream gets an event whose ``action.customized`` is a :class:`Summarized`.

The rewritten conversation is kept in the run's state, so later model calls of the run build on it. The default
token counter, :func:`approx_token_count`, estimates (4 characters a token, plus a little per message); pass
your tokenizer's count for exact budgets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adk.events import AgentAction, AgentEvent
from adk.middlewares.base import AgentMiddleware, ChatModelAgentState, send_event
from compose.models.base import ChatModel
from compose.schema import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    VideoPart,
    approx_part_tokens,
    system_message,
    user_message,
)

__all__ = [
    "DEFAULT_SUMMARY_INSTRUCTION",
    "SUMMARY_PREFIX",
    "SummarizationMiddleware",
    "Summarized",
    "TokenCounter",
    "approx_token_count",
]

TokenCounter = Callable[[Sequence[Message]], int]
"""``(messages) -> tokens``."""

SUMMARY_PREFIX = "Summary of the earlier conversation:"
DEFAULT_SUMMARY_INSTRUCTION = (
    "You summarize conversations between a user and an assistant that uses tools. Write a concise summary of "
    "the conversation below that keeps every fact, decision, open question and tool result the assistant may "
    "still need, so the conversation can continue from the summary alone. Answer with the summary only."
)
_PER_MESSAGE = 4  # role and separators


def approx_token_count(messages: Sequence[Message]) -> int:
    """An estimate of the tokens of ``messages``: 4 characters a token (content, reasoning, tool calls' names
    and arguments), plus each content part's :func:`~compose.schema.approx_part_tokens` (an image is 765), plus
    4 per message."""
    chars = 0
    parts = 0
    for m in messages:
        chars += len(m.content) + len(m.reasoning_content)
        for call in m.tool_calls:
            chars += len(call.function.name) + len(call.function.arguments) + len(call.id)
        if m.parts:
            parts += sum(approx_part_tokens(p) for p in m.parts)
    return (chars + 3) // 4 + parts + _PER_MESSAGE * len(messages)


@dataclass(frozen=True, slots=True)
class Summarized:
    """The ``action.customized`` of the event a summarization sends.

    Attributes:
        summary: the summary's text.
        replaced: how many messages it replaced.
        tokens_before: the conversation's tokens before.
        tokens_after: the conversation's tokens after.
    """

    summary: str
    replaced: int
    tokens_before: int
    tokens_after: int


def _transcript(messages: Sequence[Message]) -> str:
    lines: list[str] = []
    for m in messages:
        if m.role == "tool":
            lines.append(f"[tool `{m.tool_name or ''}` result for {m.tool_call_id}]: {m.content}")
            continue
        if m.content:
            lines.append(f"[{m.role}]: {m.content}")
        for part in m.parts:
            if isinstance(part, TextPart):
                lines.append(f"[{m.role}]: {part.text}")
            else:
                lines.append(f"[{m.role} sent {_media(part)}]")
        for call in m.tool_calls:
            lines.append(f"[{m.role} called tool `{call.function.name}` ({call.id})]: {call.function.arguments}")
    return "\n".join(lines)


def _media(part: ImagePart | AudioPart | VideoPart | FilePart) -> str:
    """A media part as the summarizing model reads it: its kind and its name or URL (never its inline data)."""
    article = "an" if part.type in ("image", "audio") else "a"
    label = part.name if isinstance(part, FilePart) and part.name else (part.url or "")
    return f"{article} {part.type}" + (f" ({label})" if label else "")


class SummarizationMiddleware(AgentMiddleware):
    """Summarizes the older part of a conversation past ``max_tokens`` (see the module docstring).

    Args:
        model: the chat model writing summaries (often a cheaper one than the agent's).
        max_tokens: summarize when the conversation has more tokens than this.
        keep_tokens: the newest messages kept whole fit in this many tokens (default: a quarter of
            ``max_tokens``).
        token_counter: ``(messages) -> tokens`` (default :func:`approx_token_count`).
        instruction: the summarizing model's system message.

    Raises:
        ValueError: ``keep_tokens`` is not below ``max_tokens``, or a limit is not positive.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        max_tokens: int = 100_000,
        keep_tokens: int | None = None,
        token_counter: TokenCounter = approx_token_count,
        instruction: str = DEFAULT_SUMMARY_INSTRUCTION,
    ) -> None:
        keep = keep_tokens if keep_tokens is not None else max_tokens // 4
        if max_tokens < 1 or keep < 1:
            raise ValueError(f"max_tokens and keep_tokens must be positive, got {max_tokens} and {keep}")
        if keep >= max_tokens:
            raise ValueError(f"keep_tokens ({keep}) must be below max_tokens ({max_tokens})")
        self.model = model
        self.max_tokens = max_tokens
        self.keep_tokens = keep
        self.token_counter = token_counter
        self.instruction = instruction

    def __repr__(self) -> str:
        return f"SummarizationMiddleware(max_tokens={self.max_tokens}, keep_tokens={self.keep_tokens})"

    def split(self, messages: Sequence[Message]) -> tuple[int, int]:
        """``(head, cut)``: ``messages[:head]`` are the kept system messages, ``messages[head:cut]`` the ones to
        summarize (none when ``cut == head``), ``messages[cut:]`` the newest, kept whole."""
        head = 0
        while head < len(messages) and messages[head].role == "system":
            head += 1
        kept = 0
        cut = len(messages)
        while cut > head:
            tokens = self.token_counter([messages[cut - 1]])
            if kept + tokens > self.keep_tokens and cut < len(messages):
                break
            kept += tokens
            cut -= 1
        # never start the kept part with a tool result: its call goes with it
        while head < cut < len(messages) and messages[cut].role == "tool":
            cut -= 1
        # whole turns when one fits: start at the first user message of the kept part
        for i in range(cut, len(messages)):
            if messages[i].role == "user":
                cut = i
                break
        return head, cut

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        messages = state.messages
        before = self.token_counter(messages)
        if before <= self.max_tokens:
            return state
        head, cut = self.split(messages)
        if cut <= head:
            return state  # only the newest turn is left: nothing to summarize
        older = messages[head:cut]
        request = [system_message(self.instruction), user_message(_transcript(older))]
        answer = await self.model.generate(request)
        summary = answer.content.strip()
        note = user_message(f"{SUMMARY_PREFIX}\n{summary}")
        rewritten = [*messages[:head], note, *messages[cut:]]
        after = self.token_counter(rewritten)
        send_event(AgentEvent(action=AgentAction(customized=Summarized(summary, len(older), before, after))))
        state.messages = rewritten
        return state
