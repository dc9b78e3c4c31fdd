"""Shared helpers of the adk tests: tool calls, scripted answers, and collecting a run's events."""

from __future__ import annotations

from dataclasses import dataclass

from adk.events import AgentEvent, AgentInterruptInfo
from adk.runner import AgentRun
from compose.schema import FunctionCall, Message, ToolCall


def call(name: str, args: str = "{}", id: str = "") -> ToolCall:
    return ToolCall(id=id, function=FunctionCall(name=name, arguments=args))


def calling(*calls: ToolCall, content: str = "") -> Message:
    """An assistant answer calling tools."""
    return Message(role="assistant", content=content, tool_calls=list(calls))


@dataclass
class Seen:
    """One event, reduced to what tests compare: kind, role/tool, content, streaming flag, action, error."""

    role: str
    content: str
    streaming: bool = False
    tool_name: str | None = None
    action: object = None
    error: BaseException | None = None
    tool_calls: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        if self.error is not None:
            return "error"
        return f"{self.role}:{self.tool_name}" if self.role == "tool" else self.role


async def reduce(event: AgentEvent) -> Seen:
    """Read the event's message (concatenating and closing a stream)."""
    if event.error is not None:
        return Seen("error", "", error=event.error, action=event.action)
    variant = event.message
    assert variant is not None
    msg = await variant.get_message()
    return Seen(
        variant.role,
        msg.content,
        variant.is_streaming,
        variant.tool_name,
        event.action,
        tool_calls=tuple(c.function.name for c in msg.tool_calls),
    )


async def collect(run: AgentRun) -> list[Seen]:
    """Every event of the run, each read to its end."""
    seen = []
    async with run:
        async for event in run:
            seen.append(await reduce(event))
    return seen


def kinds(seen: list[Seen]) -> list[str]:
    return [s.kind for s in seen]


async def drain(run: AgentRun) -> tuple[list[Seen], AgentInterruptInfo | None]:
    """The run's message events, reduced, and the interrupt info of its last event (if it paused)."""
    seen: list[Seen] = []
    paused: AgentInterruptInfo | None = None
    async with run:
        async for event in run:
            assert paused is None, "the interrupt event is the run's last"
            if event.action is not None and event.action.interrupted is not None:
                assert event.output is None and event.error is None
                assert event.run_path == (event.agent_name,)
                paused = event.action.interrupted
            else:
                seen.append(await reduce(event))
    return seen, paused


async def events_of(run: AgentRun) -> list[AgentEvent]:
    """Every event of the run as it came, each message read (so ``event.message.message`` is set)."""
    out = []
    async with run:
        async for event in run:
            if event.message is not None:
                await event.message.get_message()
            out.append(event)
    return out
