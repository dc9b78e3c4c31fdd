"""Checkpoint history: the snapshots of a run kept per step, under its checkpoint id, on any checkpoint store; and
:func:`prune`, which deletes old checkpoints and histories.

A history record is a checkpoint envelope of kind ``"graph-history"`` (JSON, digest or HMAC as every checkpoint)
stored under its own key beside the run's live checkpoint::

    ~history/<checkpoint id, %-quoted>/<branch>/<step, 8 digits>

so that any store with ``get``/``set`` (and ``list``/``delete`` for listing and pruning) keeps histories without
a schema of its own, and ``list(history_prefix(id))`` returns one run's records in write order (oldest first).
A record holds the ``RunSnapshot`` to continue from (as a pause's checkpoint does), where it sits in the lineage
(``branch``, ``parent``), what the step's nodes produced, the interrupts of a pause and, for the final record,
the run's output.
"""

from __future__ import annotations

import builtins
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote, unquote

from pydantic import BaseModel, Field

from compose.checkpoint._envelope import decode_checkpoint, encode_checkpoint, read_checkpoint_header
from compose.checkpoint._protocol import CheckPointStore, ClaimableCheckPointStore, _has
from compose.checkpoint._snapshot import RunSnapshot
from compose.errors import CheckpointError, CheckpointNotFoundError

__all__ = [
    "HISTORY_KIND",
    "HistoryRecord",
    "StateSnapshot",
    "history_key",
    "history_prefix",
    "list_records",
    "load_record",
    "prune",
    "prune_history",
    "write_record",
]

HISTORY_KIND = "graph-history"
MAIN_BRANCH = "main"
_ROOT = "~history/"  # the keys of history records start with this


class HistoryRecord(BaseModel):
    """One snapshot of a run's history as stored (see :class:`StateSnapshot` for the fields)."""

    checkpoint_id: str
    step: int
    branch: str = MAIN_BRANCH
    parent: tuple[str, int] | None = None
    next_nodes: list[str] = Field(default_factory=list)
    node_outputs: dict[str, Any] = Field(default_factory=dict)
    interrupts: list[dict[str, Any]] = Field(default_factory=list)
    snapshot: RunSnapshot
    final: bool = False
    output: Any = None


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """One step of a run's history (``Runnable.get_state_history`` / ``get_state``).

    Attributes:
        checkpoint_id: the run's checkpoint id.
        step: 0 for the input (before any node ran); after k supersteps (Pregel) or k node completions (DAG).
        branch: ``"main"`` for the original run; a replay or an edit starts a new branch.
        parent: ``(branch, step)`` this snapshot continues from (None for step 0 of ``"main"``).
        next_nodes: the nodes that run next from here (empty in the final snapshot).
        state: the graph state as JSON-able data (None for a graph without state).
        node_outputs: what each node of that step produced, as JSON-able data.
        interrupts: a pause's interrupts: ``{"id", "address", "info"}`` each (empty when the run did not pause).
        created_at: when the snapshot was written (UTC).
        final: the run ended here; ``output`` is its output (JSON-able).
    """

    checkpoint_id: str
    step: int
    branch: str
    parent: tuple[str, int] | None
    next_nodes: tuple[str, ...]
    state: Any
    node_outputs: dict[str, Any]
    interrupts: tuple[dict[str, Any], ...]
    created_at: dt.datetime
    final: bool = False
    output: Any = field(default=None, repr=False)


def history_prefix(checkpoint_id: str) -> str:
    """The key prefix under which ``checkpoint_id``'s records are stored."""
    return f"{_ROOT}{quote(checkpoint_id, safe='')}/"


def history_key(checkpoint_id: str, branch: str, step: int) -> str:
    """The key of one record."""
    return f"{history_prefix(checkpoint_id)}{branch}/{step:08d}"


def _parse_key(key: str) -> tuple[str, str, int] | None:
    if not key.startswith(_ROOT):
        return None
    parts = key[len(_ROOT) :].split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return unquote(parts[0]), parts[1], int(parts[2])


def encode_record(record: HistoryRecord, fingerprint: str) -> bytes:
    return encode_checkpoint(record, kind=HISTORY_KIND, fingerprint=fingerprint)


async def write_record(store: Any, record: HistoryRecord, fingerprint: str) -> str:
    """Store ``record``; return its key."""
    key = history_key(record.checkpoint_id, record.branch, record.step)
    await store.set(key, encode_record(record, fingerprint))
    return key


def _need_list(store: object, what: str) -> None:
    if not _has(store, "list"):
        raise TypeError(f"{what} needs a checkpoint store with list(); {type(store).__qualname__} has none")


async def list_records(store: Any, checkpoint_id: str) -> builtins.list[str]:
    """The keys of ``checkpoint_id``'s records, oldest write first."""
    _need_list(store, "checkpoint history")
    return [k for k in await cast(ClaimableCheckPointStore, store).list(history_prefix(checkpoint_id)) if _parse_key(k)]


def decode_record(data: bytes, fingerprint: str) -> tuple[HistoryRecord, float]:
    """A record and the time it was written."""
    record = decode_checkpoint(data, HistoryRecord, kind=HISTORY_KIND, fingerprint=fingerprint)
    return record, read_checkpoint_header(data).written_at


async def load_record(store: Any, checkpoint_id: str, branch: str, step: int, fingerprint: str) -> HistoryRecord:
    """The record at ``(branch, step)`` of ``checkpoint_id``.

    Raises:
        CheckpointNotFoundError: there is none (naming the steps and branches there are).
        CheckpointError: the record does not pass the envelope checks (digest, fingerprint, ...).
    """
    data = await store.get(history_key(checkpoint_id, branch, step))
    if data is None:
        known: builtins.list[str] = []
        if _has(store, "list"):
            for key in await list_records(store, checkpoint_id):
                parsed = _parse_key(key)
                assert parsed is not None
                known.append(f"{parsed[1]}:{parsed[2]}")
        raise CheckpointNotFoundError(
            f"{checkpoint_id} (history step {step} of branch {branch!r})",
            f"the history has {known or 'no snapshots (was the graph compiled with keep_history=True?)'}",
        )
    return decode_record(data, fingerprint)[0]


async def prune_history(store: Any, *, older_than: dt.datetime | float, prefix: str = "") -> int:
    """Delete whole histories (of checkpoint ids starting with ``prefix``) whose newest record was written
    before ``older_than`` (a datetime, or a Unix time). Returns how many records were deleted."""
    _need_list(store, "prune(older_than=...)")
    if not _has(store, "delete"):
        raise TypeError(f"prune(older_than=...) needs a store with delete(); {type(store).__qualname__} has none")
    limit = older_than.timestamp() if isinstance(older_than, dt.datetime) else float(older_than)
    full = cast(ClaimableCheckPointStore, store)
    by_id: dict[str, builtins.list[tuple[str, float]]] = {}
    for key in await full.list(f"{_ROOT}{quote(prefix, safe='')}"):
        parsed = _parse_key(key)
        if parsed is None:
            continue
        data = await full.get(key)
        if data is not None:
            by_id.setdefault(parsed[0], []).append((key, _written(data)))
    deleted = 0
    for records in by_id.values():
        if max(w for _, w in records) < limit:
            for key, _ in records:
                await full.delete(key)
                deleted += 1
    return deleted


def _written(data: bytes | None) -> float:
    """When a checkpoint or record was written (0.0 for what is missing or not an envelope: as old as can be)."""
    try:
        return read_checkpoint_header(data).written_at if data is not None else 0.0
    except CheckpointError:
        return 0.0


async def prune(
    store: CheckPointStore,
    prefix: str = "",
    *,
    keep_latest: int = 0,
    older_than: dt.datetime | float | None = None,
) -> int:
    """Delete the checkpoints under ``prefix`` except the ``keep_latest`` most recently written.

    The engine already deletes a run's checkpoint when the run completes; use this for runs that were
    interrupted and never resumed, e.g. ``await prune(store, "session-42/", keep_latest=1)``. Relies on
    ``store.list`` returning oldest first (true of the built-in stores). Returns how many were deleted.

    With ``older_than`` (a datetime or a Unix time) only checkpoints written before it are deleted, and so
    are the whole histories (``compile(keep_history=...)``) of ids under ``prefix`` whose newest snapshot is
    older; without it histories are left alone.

    Raises:
        TypeError: the store lacks ``list`` or ``delete`` (a get/set-only store cannot be pruned).
    """
    if keep_latest < 0:
        raise ValueError(f"keep_latest must be >= 0, got {keep_latest}")
    missing = [m + "()" for m in ("list", "delete") if not _has(store, m)]
    if missing:
        raise TypeError(
            f"prune() needs a store with list() and delete(); {type(store).__qualname__} lacks {', '.join(missing)}"
        )
    full = cast(ClaimableCheckPointStore, store)
    ids = [i for i in await full.list(prefix) if not i.startswith(_ROOT)]
    doomed = ids[: max(len(ids) - keep_latest, 0)]
    deleted = 0
    if older_than is not None:
        limit = older_than.timestamp() if isinstance(older_than, dt.datetime) else float(older_than)
        doomed = [i for i in doomed if _written(await full.get(i)) < limit]
        deleted += await prune_history(full, older_than=limit, prefix=prefix)
    for checkpoint_id in doomed:
        await full.delete(checkpoint_id)
    return deleted + len(doomed)


def to_state(record: HistoryRecord, written_at: float) -> StateSnapshot:
    return StateSnapshot(
        checkpoint_id=record.checkpoint_id,
        step=record.step,
        branch=record.branch,
        parent=record.parent,
        next_nodes=tuple(record.next_nodes),
        state=record.snapshot.state if record.snapshot.has_state else None,
        node_outputs=dict(record.node_outputs),
        interrupts=tuple(record.interrupts),
        created_at=dt.datetime.fromtimestamp(written_at, dt.UTC),
        final=record.final,
        output=record.output,
    )
