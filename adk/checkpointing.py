"""Agent checkpoints: how a paused agent run is saved in the runner's store and continued from it
(eino-semantics 4.5-4.6).

**One key per run; the Runner saves.** An agent that pauses ends its events with an interrupt event carrying its
``resume_state`` (JSON data: a ``ChatModelAgent``'s is its ReAct graph's own checkpoint, written to the agent's
private in-memory *bridge* store and read back, with its counters; a workflow agent's is the index or iteration
where it stopped and its paused child's state; an agent tool's state sits inside its caller's). The runner wraps
that state, with everything else it needs to continue, in an :class:`AgentCheckpoint` and writes it, once, under
exactly the caller's ``checkpoint_id``, **before** the interrupt event is yielded. So a checkpoint is one value:
no sibling keys to keep in step, ``prune`` and ``list`` see one id per paused run.

The envelope is compose's (:func:`~compose.checkpoint.encode_checkpoint`: JSON through pydantic, a digest, an
optional HMAC key, never pickle) with kind ``"agent-run"`` and the root agent's name as fingerprint, around:

* the root agent's resume state (a graph checkpoint inside is checked again by the graph with its own kind and
  fingerprint on resume);
* the run's session: streaming mode, session values, token usage, the root input and the recorded history the
  agents still to run will be given;
* the interrupt ids and their addresses, so resuming with an unknown id fails clearly.

**Resume** claims the checkpoint (:func:`~compose.checkpoint.claim_checkpoint`): of concurrent resumes exactly
one gets it, the others raise ``CheckpointClaimedError`` (``reason="claimed"``, naming the holder and the claim's
age). The claim ends when the resumed run pauses
again (a new checkpoint is written under the same id), completes (the checkpoint is **deleted**: retention by
default) or fails or is closed early (the claim is released, so the checkpoint can be resumed again). A store
with only ``get``/``set`` (Eino's interface) works too: its checkpoints are not deleted and concurrent resumes
are not excluded. If deleting fails at the end (the store is down), the run ends with one error event
(``CheckpointStoreError``) and the claim is kept, so the finished run is never resumed as if its tools had not
run: the SQL stores renew it and retry the delete until the store is back (if the process dies first, the claim
expires and the rest of the run runs again: at least once).

Errors of a resume that cannot start (no store, no such checkpoint, claimed, corrupted, foreign, another agent's
or an unknown interrupt id) are raised by the first ``__anext__`` of the returned run, as exceptions: no agent
ran, so there is no event to carry them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict

from adk.errors import CheckpointNotFoundError
from adk.middlewares.approval import as_approval_request
from adk.sessions.base import unsaveable_value
from compose.checkpoint import (
    CheckPointStore,
    check_store,
    claim_checkpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from compose.errors import CheckpointError, InterruptNotFoundError
from compose.interrupt import InterruptCtx
from compose.lowlevel import release_claim, release_claim_after, retire_claim
from compose.schema import Message

__all__ = ["AGENT_CHECKPOINT_KIND", "AgentCheckpoint", "CheckpointBinding", "SavedEvent", "agent_contexts"]

AGENT_CHECKPOINT_KIND = "agent-run"


class SavedEvent(BaseModel):
    """One event of the run's recorded history (see ``adk.agents.history.RecordedEvent``)."""

    model_config = ConfigDict(extra="forbid")

    agent_name: str
    message: Message | None
    role: Literal["assistant", "tool"] | None = None
    transfer: bool = False


class AgentCheckpoint(BaseModel):
    """What the runner stores for a paused agent run (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    agent_name: str
    enable_streaming: bool
    session_values: dict[str, Any]
    total_tokens: int
    root_input: list[Message]
    history: list[SavedEvent]
    """The agents' recorded events (a flow's or workflow's history for the agents still to run)."""
    interrupts: dict[str, str]
    """interrupt id -> address, as shown on the interrupt event."""
    skip_transfer_messages: bool = False
    state: Any
    """The root agent's ``resume_state`` (its interrupt event's), e.g. a ChatModelAgent's graph checkpoint."""


def _segments(address: str) -> list[str]:
    # tool segments, and the agent segments below them (an agent tool's inner agent)
    return [s for s in address.split(";") if s.startswith(("tool:", "agent:"))]


def agent_contexts(contexts: list[InterruptCtx], run_path: tuple[str, ...]) -> list[InterruptCtx]:
    """The graph's interrupt contexts as the agent's caller sees them: the same ids, addresses made of agent
    and tool segments only (``agent:<name>`` for each agent on the run path, then the tool segments).

    The parent chain is Eino's: a context at a tool has the agent's own context (address ``agent:<name>``, not a
    root cause) as its parent, shared by every tool context of the pause, and each agent's context has the
    enclosing agent's as its parent. The graph's composite contexts without a tool segment (the ToolsNode's)
    are engine details: the agent's context stands in for the outermost one and takes its id. Infos saved as
    JSON that are approval requests come back as :class:`~adk.middlewares.approval.ApprovalRequest`. Resume targets are
    the root causes; the agent contexts are there to show where the pause sits.
    """
    prefix = [f"agent:{name}" for name in run_path]
    converted: dict[int, InterruptCtx | None] = {}
    agents: list[InterruptCtx] = []  # the agents' contexts, outermost first, made on first need

    def agent_chain(anchor: str, depth: int) -> InterruptCtx | None:
        """The context of the agent ``depth`` levels down the run path (0: none), its id taken from ``anchor``."""
        if depth <= 0:
            return None
        if not agents:
            parent: InterruptCtx | None = None
            for level in range(1, len(prefix) + 1):
                address = ";".join(prefix[:level])
                ctx_id = anchor if level == len(prefix) else uuid.uuid5(uuid.NAMESPACE_URL, f"{anchor}/{address}").hex
                parent = InterruptCtx(ctx_id, address, None, is_root_cause=False, parent=parent)
                agents.append(parent)
        return agents[depth - 1]

    def convert(ctx: InterruptCtx | None) -> InterruptCtx | None:
        if ctx is None:
            return None
        if id(ctx) in converted:
            return converted[id(ctx)]
        tools = _segments(ctx.address)
        out: InterruptCtx | None
        if tools or ctx.is_root_cause:
            # a root cause without a tool segment sits at the agent itself: its parent is the enclosing agent
            parent = convert(ctx.parent) or agent_chain(ctx.id, len(prefix) - (0 if tools else 1))
            info = as_approval_request(ctx.info)
            address = ";".join([*prefix, *tools])
            out = InterruptCtx(ctx.id, address, info, is_root_cause=ctx.is_root_cause, parent=parent)
        else:
            out = convert(ctx.parent) or agent_chain(ctx.id, len(prefix))
        converted[id(ctx)] = out
        return out

    return [c for c in map(convert, contexts) if c is not None and c.is_root_cause]


_UNSET: Any = object()


@dataclass(slots=True, eq=False)
class CheckpointBinding:
    """One Runner run's link to the checkpoint store: where it saves when it pauses, what it resumes from.

    With ``resuming`` set, :meth:`load` claims and reads ``checkpoint_id`` before the run starts.
    """

    store: CheckPointStore
    checkpoint_id: str
    resuming: bool = False
    targets: Mapping[str, Any] = field(default_factory=dict)
    owner: str = ""
    stale_after: float | None = None  # take over a claim older than this (its worker died mid-resume)
    unreleased: BaseException | None = None  # the reported error of a failure whose claim release failed
    resume_all: Any = _UNSET  # resume data for every interrupt of the checkpoint that ``targets`` does not name

    def __post_init__(self) -> None:
        check_store(self.store, where="the agent's checkpoint store")

    def __repr__(self) -> str:
        mode = "resume" if self.resuming else "run"
        return f"CheckpointBinding({self.checkpoint_id!r}, {mode}, claimed={bool(self.owner)})"

    async def load(self, agent_name: str) -> AgentCheckpoint:
        """Claim and read the checkpoint of agent ``agent_name``'s run.

        Raises:
            CheckpointNotFoundError: nothing is stored under ``checkpoint_id``.
            CheckpointError: claimed by another resume, corrupted, foreign, or another agent's.
            InterruptNotFoundError: a target id is not one of the checkpoint's interrupts (a ``ValueError``).
        """
        owner = uuid.uuid4().hex
        # when claim_checkpoint raises, no claim is held (it releases one it took): nothing to release here
        data = await claim_checkpoint(self.store, self.checkpoint_id, owner, stale_after=self.stale_after)
        self.owner = owner if data is not None else ""
        try:
            if data is None:
                raise CheckpointNotFoundError(self.checkpoint_id)
            saved = decode_checkpoint(data, AgentCheckpoint, kind=AGENT_CHECKPOINT_KIND, fingerprint=agent_name)
            unknown = sorted(set(self.targets) - saved.interrupts.keys())
            if unknown:
                raise InterruptNotFoundError(self.checkpoint_id, unknown, sorted(saved.interrupts))
            if self.resume_all is not _UNSET:
                self.targets = {**dict.fromkeys(saved.interrupts, self.resume_all), **self.targets}
        except BaseException as exc:
            await self.release(exc)
            raise
        return saved

    async def save(self, saved: AgentCheckpoint) -> None:
        """Write the paused run under ``checkpoint_id`` (clearing this run's claim, if it resumed)."""
        try:
            data = encode_checkpoint(saved, kind=AGENT_CHECKPOINT_KIND, fingerprint=saved.agent_name)
        except CheckpointError as exc:
            key = unsaveable_value(saved.session_values)
            if key is None:
                raise
            value = saved.session_values[key]
            raise CheckpointError(
                f"session value {key!r} ({type(value).__qualname__}) cannot be saved in a checkpoint: keep "
                "JSON-serialisable data (or pydantic models) in session values",
                reason="encode",
            ) from exc
        await self.store.set(self.checkpoint_id, data)
        self.owner = ""

    async def finish(self) -> None:
        """The resumed run completed: its checkpoint is not kept (a store without ``delete`` keeps it).

        Raises:
            CheckpointStoreError: the delete failed; the claim stays with the checkpoint (not released: the
                checkpoint is not resumed as if the run had not completed; the SQL stores retry the delete).
        """
        owner, self.owner = self.owner, ""
        if owner:
            await retire_claim(self.store, self.checkpoint_id, owner)

    async def release(self, error: BaseException | None = None) -> None:
        """The resumed run failed (with ``error``) or was closed: give the checkpoint back, resumable again.

        On the way out of a failure a release that fails too is added to ``error`` as a note (the run's outcome
        is reported once) and retried by the next call (``AgentRun.aclose()``), noting a second failure on the
        same error; without an error (an early close) a failing release raises ``CheckpointStoreError``.
        """
        owner, self.owner = self.owner, ""
        if not owner:
            return
        reported = error if error is not None else self.unreleased
        with anyio.CancelScope(shield=True):
            if reported is None:
                await release_claim(self.store, self.checkpoint_id, owner)
            elif await release_claim_after(reported, self.store, self.checkpoint_id, owner):
                self.unreleased = None
            elif self.unreleased is None:  # retried once more, by aclose()
                self.owner, self.unreleased = owner, reported
            else:
                self.unreleased = None
