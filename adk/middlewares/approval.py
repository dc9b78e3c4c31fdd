"""The approval guard (seed 000): a tool call that needs approval suspends the run until someone decides.

``ChatModelAgent(middlewares=[ApprovalMiddleware(predicate), ...])`` (first among the agent's middlewares, its tool
wrapper sits right inside the ``ToolsConfig`` middlewares; the deprecated ``approval=predicate`` means just that).
For every tool call it asks ``predicate(tool_name, arguments)`` (the raw JSON argument string); when that says the
call needs approval, the call does not run: it interrupts with an :class:`ApprovalRequest`, and the run pauses (the
runner saves a checkpoint and yields an interrupt event). Resuming with an :class:`ApprovalDecision` for that
interrupt's id decides it, in code, not by the model:

* approved: the tool runs, and its result goes to the model as usual;
* rejected: the tool does not run; the model receives a tool message saying the call was rejected, and why.

Calls that need no approval run normally in the same round, and on resume they are not run again (their
results were saved). Several calls needing approval interrupt together; resuming some of them leaves the
others pending, each under the **same interrupt id** as before, so they can be decided one by one.

Example::

    agent = ChatModelAgent(
        "ops", "runs operations", model=model, tools=[pay, delete, lookup],
        # per tool; inspect args for per-call rules
        middlewares=[ApprovalMiddleware(lambda name, args: name in {"pay", "delete"})],
    )
    runner = Runner(agent, checkpoint_store=SQLiteCheckPointStore("runs.db"))
    async for event in runner.query("pay invoice 7", checkpoint_id="job-7"):
        if event.action is not None and event.action.interrupted is not None:
            (ctx,) = event.action.interrupted.interrupt_contexts
            request = ctx.info  # ApprovalRequest(tool_name="pay", arguments='{"invoice": 7}', call_id=...)
    async for event in runner.resume("job-7", targets={ctx.id: ApprovalDecision(approved=False, reason="over budget")}):
        ...
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from adk.middlewares.base import AgentMiddleware
from compose.interrupt import InterruptSignal, get_interrupt_state, get_resume_context
from compose.schema import Message
from compose.state import process_state
from compose.stream import StreamReader
from compose.tools.middleware import (
    InvokableToolEndpoint,
    StreamableToolEndpoint,
    StreamToolOutput,
    ToolInput,
    ToolMiddleware,
    ToolOutput,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalMiddleware",
    "ApprovalPredicate",
    "ApprovalRequest",
    "approval_middleware",
    "rejection_message",
]

ApprovalPredicate = Callable[[str, str], bool]
"""``(tool_name, arguments) -> bool``: does this call need approval? ``arguments`` is the raw JSON string."""


class ApprovalRequest(BaseModel):
    """The interrupt info of a tool call waiting for approval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_name: str
    arguments: str
    call_id: str


class ApprovalDecision(BaseModel):
    """Resume data deciding an :class:`ApprovalRequest`: ``approved``, and optionally why (shown to the model
    on a rejection). A mapping with the same fields is accepted too (e.g. decoded from an HTTP request).

    ``arguments`` (JSON text) approves with edits: the tool runs with these arguments instead of the model's
    (a full replacement, not a merge); the agent's conversation then shows the call with these arguments, so
    the model goes on from the call that ran.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    approved: bool
    reason: str | None = None
    arguments: str | None = None


def rejection_message(tool_name: str, reason: str | None) -> str:
    """The tool message the model receives for a rejected call."""
    why = f": {reason}" if reason else " (no reason given)"
    return f"The call to tool '{tool_name}' was rejected by the user and was not executed{why}"


def as_approval_request(info: Any) -> Any:
    """``info`` as an :class:`ApprovalRequest` when it is one in its saved (JSON) form, else unchanged."""
    if isinstance(info, dict) and info.keys() == ApprovalRequest.model_fields.keys():
        try:
            return ApprovalRequest.model_validate(info)
        except ValidationError:
            return info
    return info


def _decision(data: Any) -> ApprovalDecision:
    if isinstance(data, ApprovalDecision):
        return data
    try:
        return ApprovalDecision.model_validate(data)
    except ValidationError as e:
        raise TypeError(
            f"resume data for an approval request must be an ApprovalDecision (or a mapping with 'approved', "
            f"'reason' and 'arguments'), got {data!r}"
        ) from e


def _decide(needs_approval: ApprovalPredicate, inp: ToolInput) -> ApprovalDecision | None:
    """None when the call needs no approval; the decision when the resume carries one; else interrupt."""
    if not needs_approval(inp.name, inp.arguments):
        return None
    resume = get_resume_context()
    if resume.is_target and resume.has_data:
        return _decision(resume.data)
    # not decided yet: pause (again). A call that was already waiting keeps its interrupt id (saved as the
    # interrupt's state), so a caller deciding pending calls one by one can keep using the ids it was shown.
    was_interrupted, has_state, saved = get_interrupt_state()
    interrupt_id = saved if was_interrupted and has_state and isinstance(saved, str) else str(uuid.uuid4())
    request = ApprovalRequest(tool_name=inp.name, arguments=inp.arguments, call_id=inp.call_id)
    raise InterruptSignal(request, state=interrupt_id, has_state=True, id=interrupt_id)


async def _edited(inp: ToolInput, decision: ApprovalDecision | None) -> ToolInput:
    """The call as approved: with the decision's replacement arguments, if it has any; the agent's conversation
    (its state, checkpointed with the run) then shows the call with the arguments it ran with."""
    if decision is None or decision.arguments is None:
        return inp
    from adk.chat_model.react import State
    from compose.errors import StateError

    try:
        async with process_state(State) as st:
            st.messages[:] = [_with_arguments(m, inp.call_id, decision.arguments) for m in st.messages]
    except StateError:  # a ToolsNode outside an agent: no conversation to correct
        pass
    return ToolInput(inp.name, decision.arguments, inp.call_id)


def _with_arguments(message: Message, call_id: str, arguments: str) -> Message:
    if not any(c.id == call_id for c in message.tool_calls):
        return message
    calls = [
        c.model_copy(update={"function": c.function.model_copy(update={"arguments": arguments})})
        if c.id == call_id
        else c
        for c in message.tool_calls
    ]
    return message.model_copy(update={"tool_calls": calls})


class ApprovalMiddleware(AgentMiddleware):
    """The approval guard as an agent middleware (see the module docstring): calls for which
    ``needs_approval(tool_name, arguments)`` is true pause the run until an :class:`ApprovalDecision` resumes it.
    """

    def __init__(self, needs_approval: ApprovalPredicate) -> None:
        self.needs_approval = needs_approval

    def __repr__(self) -> str:
        return f"ApprovalMiddleware({self.needs_approval!r})"

    def wrap_invokable_tool_call(self, next: InvokableToolEndpoint) -> InvokableToolEndpoint:
        needs_approval = self.needs_approval

        async def endpoint(inp: ToolInput) -> ToolOutput:
            decision = _decide(needs_approval, inp)
            if decision is None or decision.approved:
                return await next(await _edited(inp, decision))
            return ToolOutput(rejection_message(inp.name, decision.reason))

        return endpoint

    def wrap_streamable_tool_call(self, next: StreamableToolEndpoint) -> StreamableToolEndpoint:
        needs_approval = self.needs_approval

        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            decision = _decide(needs_approval, inp)
            if decision is None or decision.approved:
                return await next(await _edited(inp, decision))
            return StreamToolOutput(StreamReader.from_iterable((rejection_message(inp.name, decision.reason),)))

        return endpoint


def approval_middleware(needs_approval: ApprovalPredicate) -> ToolMiddleware:
    """The approval guard as a plain ToolsNode middleware (for a ToolsNode outside an agent; an agent takes
    :class:`ApprovalMiddleware`)."""
    mw = ApprovalMiddleware(needs_approval)
    return ToolMiddleware(invokable=mw.wrap_invokable_tool_call, streamable=mw.wrap_streamable_tool_call)
