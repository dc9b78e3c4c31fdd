"""What a checkpoint store is (Eino's ``CheckPointStore`` and its optional parts) and the calls the engine makes on
one: :func:`check_store` at compile, :func:`claim_checkpoint` to resume, deleting a resumed run's checkpoint when
it completes, releasing a claim on failure, and :func:`prune`."""

from __future__ import annotations

import builtins
import datetime
from typing import Protocol, cast, runtime_checkable

import anyio

from compose.errors import CheckpointError, CheckpointStoreError, GraphBuildError

HISTORY_ROOT = "~history/"  # the keys of history records (compose.checkpoint._history) start with this

__all__ = [
    "CheckPointDeleter",
    "CheckPointStore",
    "ClaimableCheckPointStore",
    "check_store",
    "claim_checkpoint",
    "prune",
]



@runtime_checkable
class CheckPointStore(Protocol):
    """Where checkpoints are kept: opaque bytes under string ids (Eino's ``CheckPointStore``: ``Get``/``Set``).

    These two methods are all a store must have; the engine never interprets ids beyond prefixes. Further
    methods, when a store has them, enable further features (a store is checked by ``compile()`` and
    ``Runner(...)``, which raise ``GraphBuildError`` naming what is missing):

    * ``delete(id)`` (:class:`CheckPointDeleter`): a resumed run that completes deletes its checkpoint.
      Without it the checkpoint stays (Eino's behaviour), and resuming it again runs its rest again.
    * ``list(prefix)``: needed by :func:`prune`.
    * ``claim`` and ``release`` (both, see :class:`ClaimableCheckPointStore`): of several concurrent resumes
      of one checkpoint exactly one runs. **Without them concurrent resumes are not excluded**: each reads the
      checkpoint and runs, and the last to pause or finish decides what is stored.
    """

    async def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or None when there are none."""
        ...

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id``, replacing what was there."""
        ...


@runtime_checkable
class CheckPointDeleter(Protocol):
    """A store that can delete a checkpoint (Eino's optional ``CheckPointDeleter``)."""

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id``; nothing happens when it does not exist."""
        ...


@runtime_checkable
class ClaimableCheckPointStore(CheckPointStore, CheckPointDeleter, Protocol):
    """The whole store interface, as the built-in stores implement it: get, set, delete, list, and claims that
    hand a checkpoint to exactly one resumer.

    A claim is a mark on a stored checkpoint naming its owner (any string unique per resume attempt, such
    as a uuid). It is cleared by ``set`` (a checkpoint just written is resumable by anyone), by ``delete``
    and by ``release``. Claims are advisory: ``get`` and ``set`` ignore them. ``list`` returns ids in the
    order they were last written (oldest first), which :func:`prune` relies on to keep the newest.
    """

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix`` (all ids for ``""``), oldest write first."""
        ...

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Atomically mark ``checkpoint_id`` as being resumed by ``owner``.

        Returns True when ``owner`` holds the claim afterwards: the checkpoint was unclaimed, was already
        claimed by ``owner`` (so retrying after a lost reply is safe), or was claimed by another owner more
        than ``stale_after`` seconds ago (taking over from a worker that died). Returns False when the
        checkpoint does not exist or another owner holds a live claim. A call that raises (cancelled, or the
        store failed) took no claim: once the claim is made, its result is returned even if the call was
        cancelled meanwhile.
        """
        ...

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim if ``owner`` holds it; return whether it did."""
        ...


def _has(store: object, *methods: str) -> bool:
    return all(callable(getattr(store, m, None)) for m in methods)


def check_store(store: object, *, where: str) -> None:
    """Raise ``GraphBuildError`` when ``store`` cannot serve as a checkpoint store: it lacks ``get`` or ``set``,
    or has only one of ``claim`` / ``release``. ``where`` names the call (``"compile(checkpoint_store=...)"``).

    Example:
        >>> class GetOnly:
        ...     async def get(self, checkpoint_id: str) -> bytes | None: ...
        >>> try:
        ...     check_store(GetOnly(), where="compile(checkpoint_store=...)")
        ... except GraphBuildError as e:
        ...     print(str(e)[:80])
        compile(checkpoint_store=...): GetOnly is not a checkpoint store: it lacks set()
    """
    name = type(store).__qualname__
    missing = [m for m in ("get", "set") if not _has(store, m)]
    if missing:
        raise GraphBuildError(
            f"{where}: {name} is not a checkpoint store: it lacks {', '.join(m + '()' for m in missing)} "
            "(a store needs at least async get(checkpoint_id) -> bytes | None and set(checkpoint_id, data); "
            "delete, list, claim and release are optional, see compose.checkpoint.CheckPointStore)"
        )
    claims = [m for m in ("claim", "release") if _has(store, m)]
    if len(claims) == 1:
        lacking = "release" if claims == ["claim"] else "claim"
        raise GraphBuildError(
            f"{where}: {name} has {claims[0]}() but lacks {lacking}(): claims need both (a claimed checkpoint "
            "must be released when its resume fails); implement both or neither"
        )


def _claims(store: object) -> bool:
    return _has(store, "claim", "release")


async def _release_claim(store: object, checkpoint_id: str, owner: str) -> None:
    """Give up ``owner``'s claim (shielded: it runs on the way out of a cancelled run too)."""
    if owner and _claims(store):
        with anyio.CancelScope(shield=True):
            await cast(ClaimableCheckPointStore, store).release(checkpoint_id, owner)


async def _release_claim_after(error: BaseException, store: object, checkpoint_id: str, owner: str) -> bool:
    """Release on a failure path; return whether it did. A release that fails too must not replace ``error``
    (the run's outcome, reported once), so it is added to it as a note."""
    try:
        await _release_claim(store, checkpoint_id, owner)
    except Exception as exc:
        error.add_note(
            f"the claim on checkpoint {checkpoint_id!r} could not be released ({type(exc).__name__}: {exc}); "
            "resume it with claim_stale_after= to take the claim over once the store works again"
        )
        return False
    return True


async def _retire(store: object, checkpoint_id: str, owner: str) -> None:
    """A resumed run completed: delete its checkpoint (a store without ``delete`` keeps it; its claim is
    released).

    Raises:
        CheckpointStoreError: the delete failed (whatever the store raised is its cause); the checkpoint is still
            stored and still claimed by ``owner``: the caller reports the error and releases the claim.
    """
    if not _has(store, "delete"):
        await _release_claim(store, checkpoint_id, owner)
        return
    try:
        with anyio.CancelScope(shield=True):
            await cast(CheckPointDeleter, store).delete(checkpoint_id)
    except Exception as exc:
        raise CheckpointStoreError(
            f"the resumed run completed, but its checkpoint {checkpoint_id!r} could not be deleted "
            f"({type(exc).__name__}: {exc}): it is still stored, so resuming it again runs the nodes after its "
            "pause again; delete it once the store works again"
        ) from exc


async def claim_checkpoint(
    store: CheckPointStore, checkpoint_id: str, owner: str, *, stale_after: float | None = None
) -> bytes | None:
    """Claim ``checkpoint_id`` for ``owner`` and return its bytes; None when there is no such checkpoint.

    This is how a run resumes: of several concurrent callers with different owners exactly one gets the
    bytes, the others get :class:`CheckpointError` (reason ``"claimed"``). The winner then either writes a
    new checkpoint (``set``, which clears the claim), deletes it on success, or calls ``release`` on failure.
    When this raises (the store failed, or the call was cancelled) ``owner`` holds no claim: a claim taken
    before the failure is released here.
    A store without ``claim``/``release`` is simply read (concurrent resumes are then not excluded).

    Example:
        >>> import anyio
        >>> from compose.checkpoint import InMemoryCheckPointStore
        >>> async def main() -> None:
        ...     store = InMemoryCheckPointStore()
        ...     await store.set("run-1", b"...")
        ...     assert await claim_checkpoint(store, "run-1", "worker-a") == b"..."
        ...     try:
        ...         await claim_checkpoint(store, "run-1", "worker-b")
        ...     except CheckpointError as e:
        ...         assert e.reason == "claimed"
        >>> anyio.run(main)
    """
    if not _claims(store):
        return await store.get(checkpoint_id)
    claimable = cast(ClaimableCheckPointStore, store)
    if await claimable.claim(checkpoint_id, owner, stale_after=stale_after):
        # the claim is ours: cooperating writers leave the checkpoint alone until we set, delete or release
        try:
            return await store.get(checkpoint_id)
        except BaseException as exc:
            await _release_claim_after(exc, store, checkpoint_id, owner)
            raise
    if await store.get(checkpoint_id) is None:
        return None
    raise CheckpointError(
        f"checkpoint {checkpoint_id!r} is being resumed by another run; wait for it to finish or interrupt "
        "again, then resume from the checkpoint it leaves",
        reason="claimed",
    )


async def prune(
    store: CheckPointStore,
    prefix: str = "",
    *,
    keep_latest: int = 0,
    older_than: datetime.datetime | float | None = None,
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
    ids = [i for i in await full.list(prefix) if not i.startswith(HISTORY_ROOT)]
    doomed = ids[: max(len(ids) - keep_latest, 0)]
    deleted = 0
    if older_than is not None:
        from compose.checkpoint._envelope import read_checkpoint_header
        from compose.checkpoint._history import prune_history

        limit = older_than.timestamp() if isinstance(older_than, datetime.datetime) else float(older_than)
        old = []
        for checkpoint_id in doomed:
            data = await full.get(checkpoint_id)
            try:
                written = read_checkpoint_header(data).written_at if data is not None else 0.0
            except CheckpointError:
                written = 0.0  # not a checkpoint envelope: as old as can be
            if written < limit:
                old.append(checkpoint_id)
        doomed = old
        deleted += await prune_history(full, older_than=limit, prefix=prefix)
    for checkpoint_id in doomed:
        await full.delete(checkpoint_id)
    return deleted + len(doomed)
