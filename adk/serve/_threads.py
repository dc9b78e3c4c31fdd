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

from adk.chat_model.approval import ApprovalDecision, ApprovalRequest
from adk.errors import InterruptPendingError
from adk.serve._client_tools import ClientToolCall
from compose.checkpoint import CheckPointStore
from compose.errors import InterruptNotFoundError
from compose.interrupt import InterruptCtx

_PREFIX = "pyeino.serve/thread/"

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
        ValueError: an approval payload is not ``{approved: bool, ...}`` (names the interrupt).
    """
    by_id = {i.id: i for i in pending}
    unknown = [e.interrupt_id for e in entries if e.interrupt_id not in by_id]
    if unknown:
        raise InterruptNotFoundError(f"thread {thread_id!r}", unknown, list(by_id))
    missing = [i for i in by_id if i not in {e.interrupt_id for e in entries}]
    if missing:
        raise InterruptPendingError(thread_id, missing)
    targets: dict[str, Any] = {}
    for entry in entries:
        interrupt = by_id[entry.interrupt_id]
        targets[entry.interrupt_id] = _target(interrupt, entry)
    return targets


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
        if not isinstance(payload, Mapping) or not isinstance(payload.get("approved"), bool):
            raise ValueError(
                f"resume of interrupt {interrupt.id!r}: the payload of an approval must be "
                f'{{"approved": true|false, "editedArgs"?: {{...}}}}, got {payload!r}'
            )
        edited = payload.get("editedArgs")
        return ApprovalDecision(
            approved=payload["approved"],
            reason=payload.get("reason") if isinstance(payload.get("reason"), str) else None,
            arguments=json.dumps(edited) if isinstance(edited, Mapping) else None,
        )
    return None if cancelled else payload
