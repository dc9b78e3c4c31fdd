"""What an agent run yields: ``AgentEvent``s carrying model and tool output, actions, or the run's error
(eino-semantics 4.1, 4.4).

Example::

    async for event in runner.query("What's the weather in Hangzhou?"):
        if event.error is not None:
            raise event.error
        msg = await event.output.message_output.get_message()
        print(msg.role, msg.content)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compose.interrupt import InterruptCtx
from compose.schema import Message
from compose.stream import StreamReader, concat

__all__ = [
    "AgentAction",
    "AgentEvent",
    "AgentInput",
    "AgentInterruptInfo",
    "AgentOutput",
    "BreakLoopAction",
    "MessageVariant",
    "TransferToAgentAction",
]


@dataclass(frozen=True, slots=True)
class TransferToAgentAction:
    """Hand the conversation to the agent named ``dest_agent_name``."""

    dest_agent_name: str


@dataclass(slots=True)
class BreakLoopAction:
    """Stop the nearest enclosing loop agent; ``from_agent`` sent it, ``current_iterations`` is filled in by the
    loop, ``done`` once it has acted on it."""

    from_agent: str
    done: bool = False
    current_iterations: int = 0


@dataclass(slots=True)
class AgentInterruptInfo:
    """Where and why an agent run paused (Eino's adk ``InterruptInfo``), on the interrupt event's action.

    Attributes:
        interrupt_contexts: one context per root cause (a tool call waiting for approval, a tool or hook that
            called ``interrupt``), each with the ``id`` to resume it by (``runner.resume(checkpoint_id,
            targets={id: data})``), its ``info`` (an ``ApprovalRequest`` for the approval guard) and an
            ``address`` of agent and tool segments only, e.g. ``agent:ops;tool:pay:call_1`` (the graph's
            ``runnable``/``node`` segments are stripped, as in Eino).
        checkpoint_id: the id the run was saved under (None when the run had no checkpoint, so it cannot be
            resumed).
        resume_state: what the interrupted agent needs to continue (JSON data the Runner saves with the
            checkpoint and gives back to the agent's ``resume``; see ``adk.agent``); not meant to be read.
    """

    interrupt_contexts: list[InterruptCtx] = field(default_factory=list)
    checkpoint_id: str | None = None
    resume_state: Any = field(default=None, repr=False)

    @property
    def ids(self) -> list[str]:
        """The interrupt ids, in order."""
        return [c.id for c in self.interrupt_contexts]


@dataclass(slots=True)
class AgentAction:
    """What an event asks of the framework (Eino's ``AgentAction``).

    Attributes:
        exit: end the run (sent by the exit tool).
        interrupted: set on the last event of a run that paused (:class:`AgentInterruptInfo`).
        transfer_to_agent: hand over to another agent.
        break_loop: stop the nearest loop agent.
        customized: anything a tool wants to attach to its event.
    """

    exit: bool = False
    interrupted: AgentInterruptInfo | None = None
    transfer_to_agent: TransferToAgentAction | None = None
    break_loop: BreakLoopAction | None = None
    customized: Any = None

    @classmethod
    def new_exit(cls) -> AgentAction:
        """An action ending the run (Eino's ``NewExitAction``)."""
        return cls(exit=True)

    @classmethod
    def new_transfer_to_agent(cls, dest_agent_name: str) -> AgentAction:
        """An action handing over to ``dest_agent_name`` (Eino's ``NewTransferToAgentAction``)."""
        return cls(transfer_to_agent=TransferToAgentAction(dest_agent_name))

    @classmethod
    def new_break_loop(cls, agent_name: str) -> AgentAction:
        """An action stopping the nearest loop agent (Eino's ``NewBreakLoopAction``)."""
        return cls(break_loop=BreakLoopAction(agent_name))


@dataclass(slots=True)
class MessageVariant:
    """One message of an event, whole (``message``) or as a stream of chunks (``message_stream``).

    ``role`` is ``"assistant"`` for a model answer and ``"tool"`` for a tool result (then ``tool_name`` names
    the tool). Whoever receives a streaming variant owns its stream: read it (``get_message()`` does) or close it.
    """

    is_streaming: bool
    message: Message | None = None
    message_stream: StreamReader[Message] | None = None
    role: Literal["assistant", "tool"] = "assistant"
    tool_name: str | None = None

    async def get_message(self) -> Message:
        """The whole message; a stream is concatenated (once) and closed.

        Raises:
            Exception: an error item of the stream (a failed model attempt's stream ends with ``WillRetryError``).
        """
        if self.message is not None:
            return self.message
        assert self.message_stream is not None, "a MessageVariant has a message or a message_stream"
        self.message = await concat(self.message_stream)
        return self.message

    async def aclose(self) -> None:
        """Close the stream, if any, without reading it."""
        if self.message_stream is not None:
            await self.message_stream.aclose()


@dataclass(slots=True)
class AgentOutput:
    """An event's output: a message, and/or whatever a custom agent emits.

    ``structured`` is the parsed answer of an agent with an ``output_type`` (a pydantic model, dataclass or
    TypedDict instance), on the event of the valid final answer: the model's answer (set at once for a whole
    message, and when its stream has been read to the end for a streaming one) or the ``final_answer`` tool's
    result. None elsewhere.
    """

    message_output: MessageVariant | None = None
    customized_output: Any = None
    structured: Any = None


@dataclass(slots=True)
class AgentEvent:
    """One thing that happened in an agent run.

    Attributes:
        agent_name: the agent that emitted it.
        run_path: agent names from the root agent to the emitter.
        output: a model answer or a tool result.
        action: an action attached by a tool (exit, transfer, ...).
        error: set on the last event of a failed run; the run ends with it.
        internal: an event of the agent inside an agent tool, handed on with ``emit_internal_events``: not part of
            the conversation (neither the caller's history nor a session's stored messages).
    """

    agent_name: str = ""
    run_path: tuple[str, ...] = ()
    output: AgentOutput | None = None
    action: AgentAction | None = None
    error: BaseException | None = None
    internal: bool = False

    @property
    def message(self) -> MessageVariant | None:
        """Shorthand for ``output.message_output``."""
        return self.output.message_output if self.output is not None else None

    async def aclose(self) -> None:
        """Close the event's message stream, if it has one (for consumers that skip an event)."""
        output = self.output
        if output is not None:
            variant = output.message_output
            if variant is not None and variant.message_stream is not None:
                await variant.message_stream.aclose()  # MessageVariant.aclose, inline (every streamed event)


@dataclass(slots=True)
class AgentInput:
    """The input of an agent run: the conversation so far and whether to stream."""

    messages: Sequence[Message] = field(default_factory=list)
    enable_streaming: bool = False


_MESSAGE_TYPE = {Message}


def checked_messages(messages: Any, where: str) -> list[Message]:
    """``messages`` as a list, or a ``TypeError`` naming ``where`` and the first item that is not a ``Message``."""
    if type(messages) is not list and (isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence)):
        raise TypeError(
            f"{where}: messages must be a list of Message, got {type(messages).__qualname__} "
            "(Runner.query(text) runs one user message)"
        )
    if not set(map(type, messages)) - _MESSAGE_TYPE:  # every item exactly a Message: checked in C
        return list(messages)
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise TypeError(
                f"{where}: messages[{i}] is {type(m).__qualname__}, not a Message (build one with user_message(), "
                "assistant_message(), ... or Message(role=, content=))"
            )
    return list(messages)
