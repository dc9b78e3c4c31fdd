"""Errors of checkpoints and checkpoint stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from compose.errors._base import ComposeError

__all__ = [
    "CheckpointClaimedError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointProblem",
    "CheckpointStoreError",
    "InterruptNotFoundError",
]


CheckpointProblem = Literal[
    "not_checkpoint",
    "version",
    "kind",
    "digest",
    "fingerprint",
    "payload",
    "encode",
    "claimed",
    "not_found",
    "unknown_interrupt",
    "exists",
]


class CheckpointError(ComposeError, ValueError):
    """A checkpoint cannot be written, read or resumed.

    ``reason`` says which check failed: ``"not_checkpoint"`` (not an envelope, or corrupted beyond reading),
    ``"version"`` (another envelope format version), ``"kind"`` (e.g. an agent checkpoint given to a graph),
    ``"digest"`` (bytes changed after writing, or the wrong key), ``"fingerprint"`` (written by a different
    graph, or the graph's structure, node types or state type changed), ``"payload"`` (the payload, or a value
    in it, does not fit what the graph declares), ``"encode"`` (the payload cannot be serialised), ``"claimed"``
    (another run is resuming it), ``"not_found"`` (nothing is stored under the id: :class:`CheckpointNotFoundError`),
    ``"unknown_interrupt"`` (resume data for an interrupt the checkpoint does not have:
    :class:`InterruptNotFoundError`) or ``"exists"`` (a fork names an id already in use:
    :class:`CheckpointExistsError`).
    """

    def __init__(self, message: str, *, reason: CheckpointProblem) -> None:
        super().__init__(message)
        self.reason: CheckpointProblem = reason


class CheckpointClaimedError(CheckpointError):
    """A resume found its checkpoint claimed by another run (reason ``"claimed"``): one of several concurrent
    resumes of a checkpoint runs, the others get this.

    ``holder`` names the claiming process (``"pid 4242 on host-a"``), ``claim_age`` is how long ago it claimed
    (seconds), ``renewed_ago`` when its owner last renewed the claim and ``expires_in`` when the claim expires
    unless renewed again (None: never, e.g. the in-memory store's claims, which die with their process); each
    None when the store cannot tell. A claim whose owner stopped renewing it (its process died, or the store
    was down when the run ended) expires and is taken over by the next resume.
    """

    def __init__(
        self,
        checkpoint_id: str,
        *,
        holder: str | None = None,
        claim_age: float | None = None,
        renewed_ago: float | None = None,
        expires_in: float | None = None,
    ) -> None:
        facts = []
        if holder:
            facts.append(f"held by {holder}")
        if claim_age is not None:
            facts.append(f"claimed {claim_age:.1f}s ago")
        if renewed_ago is not None:
            facts.append(f"last renewed {renewed_ago:.1f}s ago")
        if expires_in is not None:
            facts.append(f"expires in {max(expires_in, 0.0):.1f}s unless renewed")
        super().__init__(
            f"checkpoint {checkpoint_id!r} is being resumed by another run"
            + (f" ({', '.join(facts)})" if facts else "")
            + "; wait for it to finish or interrupt again, then resume from the checkpoint it leaves",
            reason="claimed",
        )
        self.checkpoint_id = checkpoint_id
        self.holder = holder
        self.claim_age = claim_age
        self.renewed_ago = renewed_ago
        self.expires_in = expires_in


class CheckpointNotFoundError(CheckpointError, LookupError):
    """A resume found nothing under its checkpoint id (Eino's "checkpoint[...] not exist"): the id was never
    written, its run was already resumed to completion (and its checkpoint deleted), or it was pruned.

    Raised by ``invoke(..., checkpoint_id=id, resume={...})`` (resume data for a checkpoint that does not exist
    is never a fresh run) and by the agent runner's ``resume``. ``reason`` is ``"not_found"``.
    """

    def __init__(self, checkpoint_id: str, hint: str = "") -> None:
        super().__init__(
            f"failed to load from checkpoint: checkpoint[{checkpoint_id}] not exist" + (f"; {hint}" if hint else ""),
            reason="not_found",
        )
        self.checkpoint_id = checkpoint_id


class CheckpointExistsError(CheckpointError):
    """A fork (``fork_id=`` of a replay or of ``update_state``) names a checkpoint id that already has a history
    or a saved checkpoint: nothing is written (a fork never overwrites another run). ``reason`` is
    ``"exists"``; ``.checkpoint_id`` is the id forked from, ``.fork_id`` the one refused."""

    def __init__(self, checkpoint_id: str, fork_id: str, what: str) -> None:
        super().__init__(
            f"cannot fork checkpoint {checkpoint_id!r} into fork_id={fork_id!r}: that id already has {what}; "
            "fork into a new id (or prune that one first)",
            reason="exists",
        )
        self.checkpoint_id = checkpoint_id
        self.fork_id = fork_id


class InterruptNotFoundError(CheckpointError, LookupError):
    """Resume data names interrupt ids that the checkpoint does not have (``.unknown``); ``.known`` lists the
    ids it has. Nothing ran and the checkpoint is unchanged. ``reason`` is ``"unknown_interrupt"``."""

    def __init__(self, checkpoint_id: str, unknown: Sequence[str], known: Sequence[str]) -> None:
        super().__init__(
            f"cannot resume checkpoint {checkpoint_id!r}: {sorted(unknown)} are not among its interrupt ids "
            f"{sorted(known)} (ids come from the interrupt's InterruptCtx.id; an id of an earlier pause is "
            "not valid once the run paused again)",
            reason="unknown_interrupt",
        )
        self.checkpoint_id = checkpoint_id
        self.unknown = sorted(unknown)
        self.known = sorted(known)


class CheckpointStoreError(ComposeError):
    """A checkpoint store's database failed (unreachable, locked past its timeout, ...); cause in ``__cause__``."""
