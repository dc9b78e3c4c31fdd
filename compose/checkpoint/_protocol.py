"""What a checkpoint store is (Eino's ``CheckPointStore`` and its optional parts) and the calls the engine makes on
one: :func:`check_store` at compile, :func:`claim_checkpoint` to resume, deleting a resumed run's checkpoint when
it completes, releasing a claim on failure (:func:`~compose.checkpoint._history.prune` is with the histories)."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

import anyio

from compose.errors import CheckpointClaimedError, CheckpointStoreError, GraphBuildError

__all__ = [
    "CheckPointDeleter",
    "CheckPointStore",
    "CheckpointClaim",
    "ClaimableCheckPointStore",
    "check_store",
    "claim_checkpoint",
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
    * ``claim_info(id) -> CheckpointClaim | None``: who holds a claim and since when, for the
      ``CheckpointClaimedError`` a refused resume raises.
    * ``retry_delete(id, owner)`` (a plain method, no I/O): a resumed run completed but ``delete`` failed; the
      store keeps ``owner``'s claim alive and retries the delete until it succeeds. Without it the claim is
      simply kept (the checkpoint is refused as claimed, never resumed as if its run had not completed).
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

    **A claim never outlives its owner.** The SQL stores renew the claims they hold from a keeper thread (every
    ``claim_ttl / 3`` seconds while the resumed run is in flight); a claim not renewed for ``claim_ttl``
    seconds (its process died, froze, or the store was down when its run ended and could not release it) has
    expired and is taken over by the next resume. The in-memory store's claims die with their process. A run that
    completed while its checkpoint could not be deleted keeps its claim: the keeper renews it and retries the
    delete (``retry_delete``) until the store is back, so the checkpoint is never resumed as if the run had not
    completed (if the process dies first, its claim expires: the rest of the run runs again, at least once).
    """

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix`` (all ids for ``""``), oldest write first."""
        ...

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Atomically mark ``checkpoint_id`` as being resumed by ``owner``.

        Returns True when ``owner`` holds the claim afterwards: the checkpoint was unclaimed, was already
        claimed by ``owner`` (so retrying after a lost reply is safe), or another owner's claim has expired
        (not renewed for the store's ``claim_ttl`` seconds, or for ``stale_after`` seconds when given: taking
        over from a worker that died). Returns False when the
        checkpoint does not exist or another owner holds a live claim. A call that raises (cancelled, or the
        store failed) took no claim: once the claim is made, its result is returned even if the call was
        cancelled meanwhile.
        """
        ...

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim if ``owner`` holds it; return whether it did."""
        ...


@dataclass(frozen=True)
class CheckpointClaim:
    """Who holds a checkpoint's claim (``claim_info``): the ``owner`` string, the ``holder`` process
    (``"pid 4242 on host-a"``), seconds since it claimed (``age``) and since its last renewal (``renewed_ago``),
    and seconds until it expires unless renewed (``expires_in``; None: never)."""

    owner: str
    holder: str | None
    age: float
    renewed_ago: float
    expires_in: float | None


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
            "it is no longer renewed, so it expires after the store's claim_ttl and the next resume takes it "
            "over (claim_stale_after= takes it over sooner)"
        )
        return False
    return True


async def _retire(store: object, checkpoint_id: str, owner: str) -> None:
    """A resumed run completed: delete its checkpoint (a store without ``delete`` keeps it; its claim is
    released).

    A delete that fails leaves the checkpoint claimed by ``owner``: resuming it would run again what the run
    already did (a payment), so it is not released. A store with ``retry_delete`` (the SQL stores) keeps the
    claim renewed and retries the delete until the store is back; on another store the claim stays until the
    checkpoint is deleted by hand (or taken over with ``claim_stale_after``).

    Raises:
        CheckpointStoreError: the delete failed (whatever the store raised is its cause). The caller reports it
            and must not release the claim: it belongs to the retry now.
    """
    if not _has(store, "delete"):
        await _release_claim(store, checkpoint_id, owner)
        return
    try:
        with anyio.CancelScope(shield=True):
            await cast(CheckPointDeleter, store).delete(checkpoint_id)
    except Exception as exc:
        kept = "it stays claimed by this run, so it is not resumed as if the run had not completed"
        if not _claims(store):
            after = "it is still stored, so resuming it again runs the nodes after its pause again; delete it once "
            after += "the store works again"
        elif _has(store, "retry_delete"):
            getattr(store, "retry_delete")(checkpoint_id, owner)  # noqa: B009 - an optional method
            after = f"{kept}, and the store retries the delete until it works again (if this process ends first, "
            after += "the claim expires after claim_ttl and the next resume runs the nodes after its pause again)"
        else:
            after = f"{kept}; delete it once the store works again"
        raise CheckpointStoreError(
            f"the resumed run completed, but its checkpoint {checkpoint_id!r} could not be deleted "
            f"({type(exc).__name__}: {exc}): {after}"
        ) from exc


async def claim_checkpoint(
    store: CheckPointStore, checkpoint_id: str, owner: str, *, stale_after: float | None = None
) -> bytes | None:
    """Claim ``checkpoint_id`` for ``owner`` and return its bytes; None when there is no such checkpoint.

    This is how a run resumes: of several concurrent callers with different owners exactly one gets the
    bytes, the others get :class:`~compose.errors.CheckpointClaimedError` (reason ``"claimed"``; it names the
    holder and the claim's age when the store has ``claim_info``). The winner then either writes a
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
        ...     except CheckpointClaimedError as e:
        ...         assert e.reason == "claimed" and e.holder is not None
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
    claim_info = getattr(store, "claim_info", None)
    info = await claim_info(checkpoint_id) if callable(claim_info) else None
    if not isinstance(info, CheckpointClaim):
        raise CheckpointClaimedError(checkpoint_id)
    raise CheckpointClaimedError(
        checkpoint_id,
        holder=info.holder,
        claim_age=info.age,
        renewed_ago=info.renewed_ago,
        expires_in=info.expires_in,
    )
