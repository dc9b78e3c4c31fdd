"""Threads: an AG-UI thread is a session of the session store, plus a small record the server keeps.

The record (JSON, in the checkpoint store under ``pyeino.serve/thread/<thread id>``, so every server process
sharing the stores sees it) says which agent and principal the thread belongs to, when it was created and last
saved (ISO 8601 UTC; a record stored before these existed has neither) and, while a run on it is paused, the
checkpoint id and the AG-UI interrupts it waits for. The conversation and session values stay the
session store's; the paused run stays the Runner's checkpoint.

Branches (AG-UI's ``parentRunId``: a run branching from a prior run of the same thread). The record maps each
run id to the session and turn it appended. A run whose ``parentRunId`` is not the thread's last run forks
the session at that run's turn (``Runner.fork``) into a new session ``<thread id>~<run id>``, which becomes the
thread's current branch (``session``): "edit message k and regenerate". The older branch stays in its session,
so a later run may branch from any run of either.

Ownership (one rule, :func:`open_thread`, for every route and both front doors: AG-UI threads and A2A contexts).
Thread ids and session ids share one namespace, so the rule covers every session a thread creates: a branch's
session gets a claim (``pyeino.serve/branch/<session id>``: its thread, agent and principal) before anyone can
name it, and an id is a thread only when it has a thread record owned by the asking principal and agent, or when
it is new: an id without a record that names a branch or an existing session (one the server keeps no record
of) is refused, as another principal's thread is ("not found"). A new thread's record is created by
:func:`claim_thread` holding the session's lease (the session store's atomic step, across processes too), so of
two principals naming one new id at once exactly one gets the thread; the other is refused before anything runs.

This module also turns pyeino's interrupt contexts into AG-UI ``Interrupt``s and AG-UI resume entries back
into the Runner's resume targets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ag_ui.core import Interrupt, ResumeEntry

from adk.errors import InterruptPendingError, SessionBusyError
from adk.errors import ResumePayloadError as ResumePayloadError
from adk.errors import ThreadNotFoundError as ThreadNotFoundError
from adk.middlewares.approval import ApprovalDecision, ApprovalRequest
from adk.serve._client_tools import ClientToolCall
from adk.sessions import SessionStore
from compose.checkpoint import CheckPointStore
from compose.errors import InterruptNotFoundError
from compose.interrupt import InterruptCtx
from compose.schema import Message

_PREFIX = "pyeino.serve/thread/"
_BRANCH_PREFIX = "pyeino.serve/branch/"

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string"},
        "editedArgs": {"type": "object", "description": "Full replacement of the tool args. Not merged."},
    },
    "required": ["approved"],
}


def utc_now() -> str:
    """Now as ISO 8601 UTC to the millisecond (``2025-04-27T08:15:00.123Z``: sorts as text in time order)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class ThreadRecord:
    """What the server keeps about a thread (see the module docstring)."""

    agent: str
    owner: str | None
    checkpoint_id: str | None = None
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    durable: dict[str, Any] | None = None  # the turn a durable run is running (adk.serve._durable)
    durable_last: dict[str, Any] | None = None  # the last one that ended (a reconnect replays it)
    session: str | None = None  # the session holding the thread's current branch (None: the thread id)
    runs: dict[str, list[Any]] = field(default_factory=dict)  # run id -> [session id, turn index it appended]
    turn_runs: list[str] = field(default_factory=list)  # the runs of the turn not appended yet (paused ones)
    cut: bool = False  # the paused run was paused by its client's hang-up (no interrupt to answer)
    created: str | None = field(default_factory=utc_now)  # None: stored before records had times
    updated: str | None = None  # when it was last saved (save_record sets it)

    def pending(self) -> list[Interrupt]:
        return [Interrupt.model_validate(i) for i in self.interrupts]

    def session_of(self, thread_id: str) -> str:
        """The session the thread's runs go on (its current branch)."""
        return self.session or thread_id


def checkpoint_id_for(thread_id: str) -> str:
    """The checkpoint id a thread's runs pause under (one paused run per thread at a time)."""
    return f"pyeino.serve/run/{thread_id}"


async def forget(store: CheckPointStore, key: str) -> None:
    """Delete ``key`` (a store with only Eino's ``get``/``set`` gets an empty value, which reads as nothing)."""
    delete = getattr(store, "delete", None)
    if delete is not None:
        await delete(key)
    else:
        await store.set(key, b"")


async def load_record(store: CheckPointStore, thread_id: str) -> ThreadRecord | None:
    data = await store.get(_PREFIX + thread_id)
    if not data:
        return None
    raw = json.loads(data)
    return ThreadRecord(
        raw["agent"],
        raw.get("owner"),
        raw.get("checkpoint_id"),
        list(raw.get("interrupts", [])),
        raw.get("durable"),
        raw.get("durable_last"),
        raw.get("session"),
        dict(raw.get("runs", {})),
        list(raw.get("turn_runs", [])),
        bool(raw.get("cut", False)),
        raw.get("created"),
        raw.get("updated"),
    )


async def save_record(store: CheckPointStore, thread_id: str, record: ThreadRecord) -> None:
    record.updated = utc_now()
    raw: dict[str, Any] = {
        "agent": record.agent,
        "owner": record.owner,
        "checkpoint_id": record.checkpoint_id,
        "interrupts": record.interrupts,
    }
    if record.durable is not None or record.durable_last is not None:
        raw["durable"], raw["durable_last"] = record.durable, record.durable_last
    if record.session is not None:
        raw["session"] = record.session
    if record.cut:
        raw["cut"] = True
    if record.runs or record.turn_runs:
        raw["runs"], raw["turn_runs"] = record.runs, record.turn_runs
    if record.created is not None:
        raw["created"] = record.created
    raw["updated"] = record.updated
    await store.set(_PREFIX + thread_id, json.dumps(raw).encode())


async def delete_record(store: CheckPointStore, thread_id: str) -> None:
    await forget(store, _PREFIX + thread_id)


async def open_thread(
    sessions: SessionStore, store: CheckPointStore, agent: str, thread_id: str, owner: str | None
) -> ThreadRecord | None:
    """The record of thread ``thread_id`` as ``owner`` may use it through ``agent``: None for a new thread
    (see "Ownership" in the module docstring).

    Raises:
        ThreadNotFoundError: the thread is another principal's or agent's, or the id names a branch of a thread
            or a session without a thread record.
    """
    record = await load_record(store, thread_id)
    if record is not None:
        if record.owner != owner or record.agent != agent:
            raise ThreadNotFoundError(thread_id)
        return record
    if await store.get(_BRANCH_PREFIX + thread_id) or (await sessions.load(thread_id)).turns > 0:
        raise ThreadNotFoundError(thread_id)
    return None


async def claim_thread(
    sessions: SessionStore, store: CheckPointStore, agent: str, thread_id: str, owner: str | None, *, wait: float | None
) -> ThreadRecord:
    """The record of thread ``thread_id`` for a run of ``owner`` through ``agent``: the thread's own
    (:func:`open_thread`), or a new one owned by ``owner``, saved holding the session's lease (``wait``: seconds
    to wait for it) after checking the id again there, so that a concurrent claim of the same id sees it.

    Raises:
        ThreadNotFoundError: as :func:`open_thread` (also when another principal claimed the id meanwhile).
        SessionBusyError: the session has a run in flight and still no thread record (it is being created).
    """
    record = await open_thread(sessions, store, agent, thread_id, owner)
    if record is not None:
        return record
    try:
        lease = await sessions.acquire(thread_id, wait=wait)
    except SessionBusyError:
        record = await open_thread(sessions, store, agent, thread_id, owner)
        if record is None:
            raise
        return record
    try:
        record = await open_thread(sessions, store, agent, thread_id, owner)
        if record is None:
            record = ThreadRecord(agent, owner)
            await save_record(store, thread_id, record)
        return record
    finally:
        await sessions.release(lease)


async def session_taken(sessions: SessionStore, store: CheckPointStore, session_id: str) -> bool:
    """Whether ``session_id`` is a thread, a branch or a stored session already."""
    if await store.get(_PREFIX + session_id) or await store.get(_BRANCH_PREFIX + session_id):
        return True
    return (await sessions.load(session_id)).turns > 0


async def claim_branch(store: CheckPointStore, session_id: str, thread_id: str, record: ThreadRecord) -> None:
    """Mark ``session_id`` as a branch of thread ``thread_id`` (owned as the thread is)."""
    raw = {"thread": thread_id, "agent": record.agent, "owner": record.owner}
    await store.set(_BRANCH_PREFIX + session_id, json.dumps(raw).encode())


async def drop_branch(store: CheckPointStore, session_id: str) -> None:
    await forget(store, _BRANCH_PREFIX + session_id)


def _tool_call_of(address: str) -> str | None:
    """The call id of the last ``tool:<name>:<call id>`` segment of an interrupt address."""
    call: str | None = None
    for segment in address.split(";"):
        kind, _, rest = segment.partition(":")
        if kind == "tool":
            _, _, call_id = rest.partition(":")
            call = call_id or call
    return call


def describe(ctx: InterruptCtx, checkpoint_id: str) -> Interrupt:
    """The AG-UI interrupt for one of pyeino's root-cause interrupt contexts.

    * the approval guard's ``ApprovalRequest``: ``tool_call`` with the call's id and the approve-with-edits schema;
    * a client tool's call paused with others: ``tool_call`` (resume payload: the tool's result);
    * any other info (``interrupt(info)`` in a tool, hook or agent): ``input_required``, bound to its tool call
      when it paused one; an info mapping may set ``reason`` (``confirmation``, ...), ``message`` and
      ``responseSchema`` itself.
    """
    info = ctx.info
    meta: dict[str, Any] = {"pyeino": {"address": ctx.address, "checkpointId": checkpoint_id}}
    if isinstance(info, ApprovalRequest):
        return Interrupt(
            id=ctx.id,
            reason="tool_call",
            message=f"Approve the call of tool '{info.tool_name}' with arguments {info.arguments}?",
            tool_call_id=info.call_id,
            response_schema=APPROVAL_SCHEMA,
            metadata={**meta, "toolName": info.tool_name, "arguments": info.arguments},
        )
    if isinstance(info, ClientToolCall):
        meta["pyeino"]["clientTool"] = info.tool_name
        return Interrupt(
            id=ctx.id,
            reason="tool_call",
            message=f"Run the client tool '{info.tool_name}' and send its result",
            tool_call_id=info.call_id,
            metadata=meta,
        )
    reason, message, schema = "input_required", None, None
    if isinstance(info, Mapping):
        reason = str(info.get("reason", reason))
        message = info.get("message")
        schema = info.get("responseSchema")
        meta["info"] = _json(info)
    elif isinstance(info, str):
        message = info
    elif info is not None:
        meta["info"] = _json(info)
    return Interrupt(
        id=ctx.id,
        reason=reason,
        message=str(message) if message is not None else None,
        tool_call_id=_tool_call_of(ctx.address),
        response_schema=schema if isinstance(schema, dict) else None,
        metadata=meta,
    )


def _json(value: Any) -> Any:
    from adk.serve._messages import jsonable

    return jsonable(value)


def resume_targets(thread_id: str, pending: Sequence[Interrupt], entries: Sequence[ResumeEntry]) -> dict[str, Any]:
    """The Runner's resume targets for AG-UI resume entries answering the thread's ``pending`` interrupts.

    An approval's ``resolved`` payload ``{approved, reason?, editedArgs?}`` becomes an ``ApprovalDecision``
    (``editedArgs`` its replacement arguments); ``cancelled`` rejects the call. A client tool's payload is its
    result (a string, or ``{"content": ...}``). Any other interrupt gets the payload as its resume data
    (``None`` when cancelled).

    Raises:
        InterruptNotFoundError: an entry names no pending interrupt (or there are none).
        InterruptPendingError: the entries leave a pending interrupt unanswered (AG-UI resumes address all).
        ResumePayloadError: a payload does not fit its interrupt: an approval's is not ``{approved: bool,
            editedArgs?: object}`` (names the entry's field and the interrupt; also a ValueError).
    """
    by_id = {i.id: i for i in pending}
    unknown = [e.interrupt_id for e in entries if e.interrupt_id not in by_id]
    if unknown:
        raise InterruptNotFoundError(f"thread {thread_id!r}", unknown, list(by_id))
    missing = [i for i in by_id if i not in {e.interrupt_id for e in entries}]
    if missing:
        raise InterruptPendingError(thread_id, missing)
    return check_resume(pending, entries)


def check_resume(pending: Sequence[Interrupt], entries: Sequence[ResumeEntry]) -> dict[str, Any]:
    """The resume targets of the ``entries`` that answer one of the ``pending`` interrupts (others are left to
    :func:`resume_targets` to refuse).

    Raises:
        ResumePayloadError: a payload does not fit its interrupt (names the entry's field).
    """
    by_id = {i.id: i for i in pending}
    targets: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        interrupt = by_id.get(entry.interrupt_id)
        if interrupt is not None:
            try:
                targets[entry.interrupt_id] = _target(interrupt, entry)
            except _Misfit as exc:
                raise ResumePayloadError(index, interrupt.id, exc.field, exc.problem) from None
    return targets


class _Misfit(Exception):
    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem


def _target(interrupt: Interrupt, entry: ResumeEntry) -> Any:
    meta = (interrupt.metadata or {}).get("pyeino", {})
    cancelled = entry.status == "cancelled"
    payload = entry.payload
    if meta.get("clientTool"):
        if cancelled:
            return f"The client did not run tool '{meta['clientTool']}'"
        if isinstance(payload, Mapping) and "content" in payload:
            return str(payload["content"])
        return payload if isinstance(payload, str) else json.dumps(payload)
    if interrupt.reason == "tool_call" and interrupt.response_schema == APPROVAL_SCHEMA:
        if cancelled:
            return ApprovalDecision(approved=False, reason="the user cancelled the call")
        shape = '{"approved": true|false, "reason"?: "...", "editedArgs"?: {...}}'
        if not isinstance(payload, Mapping):
            raise _Misfit("", f"the payload of an approval must be {shape}, got {_shown(payload)}")
        if not isinstance(payload.get("approved"), bool):
            raise _Misfit("approved", f"must be true or false, got {_shown(payload.get('approved'))}")
        edited = payload.get("editedArgs")
        if edited is not None and not isinstance(edited, Mapping):
            raise _Misfit("editedArgs", f"must be an object (the tool's arguments), got {_shown(edited)}")
        return ApprovalDecision(
            approved=payload["approved"],
            reason=payload.get("reason") if isinstance(payload.get("reason"), str) else None,
            arguments=json.dumps(edited) if edited is not None else None,
        )
    return None if cancelled else payload


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def edited_calls(pending: Sequence[Interrupt], targets: Mapping[str, Any]) -> dict[str, str]:
    """The tool calls the ``targets`` approve with edited arguments: call id -> the arguments that run."""
    edits: dict[str, str] = {}
    for interrupt in pending:
        target = targets.get(interrupt.id)
        if isinstance(target, ApprovalDecision) and target.approved and target.arguments is not None:
            edits[interrupt.tool_call_id or ""] = target.arguments
    edits.pop("", None)  # an approval always names its call; a payload without one edits nothing
    return edits


async def store_edits(
    sessions: SessionStore, session_id: str, checkpoint_id: str, edits: Mapping[str, str], *, wait: float | None
) -> dict[str, str]:
    """Store what runs: the paused turn's tool calls approved with edited arguments (``edits``: call id ->
    arguments) carry those arguments, so that the thread, its ``MESSAGES_SNAPSHOT`` and the conversation the
    resume appends show the call that ran, not the model's original. Returns the arguments the edited calls had
    (call id -> arguments): a resume that fails, leaving the run paused where it was, stores them back."""
    turn = await sessions.pending(checkpoint_id) if edits else None
    if turn is None:
        return {}
    before = {c.id: c.function.arguments for m in turn.messages for c in m.tool_calls if c.id in edits}
    messages = [_with_edits(m, edits) for m in turn.messages]
    lease = await sessions.acquire(session_id, wait=wait)
    try:
        await sessions.hold(lease, checkpoint_id, messages)
    except BaseException:
        await sessions.release(lease)
        raise
    return before


def _with_edits(message: Message, edits: Mapping[str, str]) -> Message:
    if not any(c.id in edits for c in message.tool_calls):
        return message
    calls = [
        c.model_copy(update={"function": c.function.model_copy(update={"arguments": edits[c.id]})})
        if c.id in edits
        else c
        for c in message.tool_calls
    ]
    return message.model_copy(update={"tool_calls": calls})
