"""What a durable run publishes on its DBOS stream: ``DurableEvent``s, JSON.

Every :class:`~adk.events.AgentEvent` of an agent run becomes one event (``message``, ``interrupted`` or
``error``); a graph run publishes its output (``output``: each chunk of a streaming run as it comes, the whole
output of an invoke), ``interrupted`` and ``error``. A streaming model call also publishes its chunks as
``token`` events while the model generates, before the event of the whole answer. A model call that was in
flight when its worker died runs again on the worker that takes the run over, so its ``token`` events may
repeat; every other event is published exactly once (each is an operation of the workflow, found by its source
and content on a replay: ``adk.durable._ledger``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from adk.events import AgentEvent
from compose.schema import Message

__all__ = ["DurableEvent", "DurableInterrupt", "from_agent_event"]

EVENTS_STREAM = "pyeino.events"
RESUME_TOPIC = "pyeino.resume"


class DurableInterrupt(BaseModel):
    """One interrupt of a paused durable run: the ``id`` to resume it by, its ``address`` and ``info`` (JSON;
    an approval request's fields ``tool_name``, ``arguments``, ``call_id``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    address: str
    info: Any = None


class DurableEvent(BaseModel):
    """One event of a durable run, as any process reads it (``DurableHandle.events()``).

    Attributes:
        kind: ``"token"`` (a chunk of a streaming model answer), ``"message"`` (an agent's model answer or
            tool result, whole), ``"output"`` (a graph's output: each chunk of a streaming run, the whole output of
            an invoke), ``"interrupted"`` (the run paused; ``interrupts`` says for what), ``"error"`` (the run
            failed; ``error_type`` and ``error``).
        agent_name, run_path: who emitted it (for a token event: the agent whose model streams).
        internal: emitted inside an agent tool (the agent tool's ``emit_internal_events``; a token event of a
            model inside an agent tool): not part of the run's own conversation.
        attempt: a token event's model call execution: the tokens of one execution share it (a call run again
            after its worker died streams under another).
        role, tool_name, message: the message of a ``message`` or ``token`` event.
        action: the event's action, JSON (``exit``, ``transfer_to_agent``, ...), if any.
        output: an ``output`` event's value, JSON.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["token", "message", "output", "interrupted", "error"]
    agent_name: str = ""
    run_path: list[str] = Field(default_factory=list)
    internal: bool = False
    attempt: str | None = None
    role: Literal["assistant", "tool"] | None = None
    tool_name: str | None = None
    message: Message | None = None
    interrupts: list[DurableInterrupt] = Field(default_factory=list)
    action: dict[str, Any] | None = None
    output: Any = None
    error_type: str | None = None
    error: str | None = None


def json_value(value: Any) -> Any:
    """``value`` as JSON data (pydantic models dumped; what JSON cannot hold as its ``repr``)."""
    return to_jsonable_python(value, fallback=repr)


async def from_agent_event(event: AgentEvent) -> DurableEvent:
    """The durable form of ``event``; a streaming message is read to its end (and closed) here."""
    common: dict[str, Any] = {
        "agent_name": event.agent_name,
        "run_path": list(event.run_path),
        "internal": event.internal,
    }
    if event.error is not None:
        return DurableEvent(kind="error", error_type=type(event.error).__qualname__, error=str(event.error), **common)
    action = event.action
    if action is not None and action.interrupted is not None:
        interrupts = [
            DurableInterrupt(id=c.id, address=c.address, info=json_value(c.info))
            for c in action.interrupted.interrupt_contexts
        ]
        return DurableEvent(kind="interrupted", interrupts=interrupts, **common)
    action_json: dict[str, Any] | None = None
    if action is not None:
        action_json = {
            "exit": action.exit,
            "transfer_to_agent": action.transfer_to_agent.dest_agent_name if action.transfer_to_agent else None,
            "break_loop": action.break_loop is not None,
            "customized": json_value(action.customized),
        }
    variant = event.message
    if variant is None:
        return DurableEvent(kind="message", action=action_json, **common)
    message = await variant.get_message()
    return DurableEvent(
        kind="message", role=variant.role, tool_name=variant.tool_name, message=message, action=action_json, **common
    )


def token_event(
    chunk: Message, *, agent_name: str = "", run_path: tuple[str, ...] = (), internal: bool = False, attempt: str
) -> dict[str, Any]:
    event = DurableEvent(
        kind="token",
        role="assistant",
        message=chunk,
        agent_name=agent_name,
        run_path=list(run_path),
        internal=internal,
        attempt=attempt,
    )
    return event.model_dump(mode="json", exclude_none=True)
