"""Checkpoint stores and the checkpoint envelope: where an interrupted run is kept until it resumes.

A store maps a checkpoint id to opaque bytes (eino-semantics 1.9, "Checkpoint store semantics"). A store needs
only Eino's ``get`` and ``set`` (:class:`CheckPointStore`); ``delete``, ``list`` and ``claim``/``release`` enable
retention, :func:`prune` and exclusive resumes. Three stores ship with pyeino, all implementing the whole
interface, :class:`ClaimableCheckPointStore`:

- :class:`InMemoryCheckPointStore`: a dict, for tests and single-process use;
- :class:`SQLiteCheckPointStore`: the standard library's sqlite3 on one file (WAL mode), safe for several
  processes on one machine; the embedded default;
- :class:`PostgresCheckPointStore`: PostgreSQL through a psycopg 3 connection pool (``pip install
  pyeino[postgres]``), for services whose runs resume on another worker.

Every blocking database call runs in a worker thread (``anyio.to_thread``), so the stores work on asyncio and
trio and never block the event loop.

**The envelope.** The engine writes every checkpoint with :func:`encode_checkpoint` and reads it with
:func:`decode_checkpoint`: a one-line JSON header (format version, kind, fingerprint of the writer, time
written, digest) followed by the payload as JSON, both through pydantic (never pickle). The digest is a
SHA-256 of header fields and payload, or an HMAC-SHA256 when a key is configured (``PYEINO_CHECKPOINT_KEY``,
or ``key=``). Bytes that are not a checkpoint, another format version, another kind, a different writer, a
digest mismatch or a payload that fails validation raise :class:`CheckpointError` saying which.

**Claims (exactly one resumer).** :meth:`ClaimableCheckPointStore.claim` marks a checkpoint as being resumed
by one owner; a second claimer gets ``False``. ``set`` clears the claim (a checkpoint just written is
resumable), ``delete`` removes it with the checkpoint, ``release`` gives it up. :func:`claim_checkpoint` is
the engine's one call: claim, then read.

**Retention.** The engine deletes a resumed run's checkpoint when the run completes successfully (a store
without ``delete`` keeps it, as Eino does), so storage does not grow with finished runs; :func:`prune` deletes
old checkpoints under a prefix. A delete that fails is reported as the run's error (``CheckpointStoreError``)
and the claim is released; resume data for a checkpoint that no longer exists is
:class:`CheckpointNotFoundError`, never a fresh run.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar, cast, runtime_checkable

import anyio
import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticSerializationError

from compose._checkpoint_postgres import PostgresCheckPointStore
from compose._checkpoint_sqlite import ClosingStore, SQLiteCheckPointStore
from compose.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointStoreError,
    GraphBuildError,
    InterruptNotFoundError,
)

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "CHECKPOINT_KEY_ENV",
    "CheckPointDeleter",
    "CheckPointStore",
    "CheckpointError",
    "CheckpointHeader",
    "CheckpointNotFoundError",
    "CheckpointStoreError",
    "ClaimableCheckPointStore",
    "InMemoryCheckPointStore",
    "InterruptNotFoundError",
    "PostgresCheckPointStore",
    "SQLiteCheckPointStore",
    "check_store",
    "claim_checkpoint",
    "decode_checkpoint",
    "encode_checkpoint",
    "prune",
    "read_checkpoint_header",
]

M = TypeVar("M", bound=BaseModel)

CHECKPOINT_FORMAT_VERSION = 1
"""The envelope format this pyeino writes and the only one it reads."""

CHECKPOINT_KEY_ENV = "PYEINO_CHECKPOINT_KEY"
"""Environment variable holding the HMAC key for checkpoints (used when ``key=`` is not given)."""

_FORMAT: Final = "pyeino-checkpoint"
_FRESH = "use force_new_run=True to start a fresh run, or delete the checkpoint"

# ---------------------------------------------------------------------------------------------------------------
# Store protocols


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


async def prune(store: CheckPointStore, prefix: str = "", *, keep_latest: int = 0) -> int:
    """Delete the checkpoints under ``prefix`` except the ``keep_latest`` most recently written.

    The engine already deletes a run's checkpoint when the run completes; use this for runs that were
    interrupted and never resumed, e.g. ``await prune(store, "session-42/", keep_latest=1)``. Relies on
    ``store.list`` returning oldest first (true of the built-in stores). Returns how many were deleted.

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
    ids = await full.list(prefix)
    doomed = ids[: max(len(ids) - keep_latest, 0)]
    for checkpoint_id in doomed:
        await full.delete(checkpoint_id)
    return len(doomed)


# ---------------------------------------------------------------------------------------------------------------
# In memory


@dataclass(slots=True)
class _Entry:
    data: bytes
    owner: str | None = None
    claimed_at: float = 0.0


class InMemoryCheckPointStore(ClosingStore):
    """Checkpoints in a dict: for tests, notebooks and runs that need not survive the process.

    Thread-safe, so one store may serve several event loops.

    Example:
        >>> import anyio
        >>> store = InMemoryCheckPointStore()
        >>> anyio.run(store.set, "run-1", b"{}")
        >>> anyio.run(store.list)
        ['run-1']
    """

    def __init__(self) -> None:
        # insertion order is write order: set() re-inserts
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        claimed = sum(1 for e in self._entries.values() if e.owner is not None)
        return f"<InMemoryCheckPointStore checkpoints={len(self._entries)} claimed={claimed}>"

    async def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes under ``checkpoint_id``, or None."""
        await anyio.lowlevel.checkpoint()
        entry = self._entries.get(checkpoint_id)
        return None if entry is None else entry.data

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id`` (clears any claim)."""
        await anyio.lowlevel.checkpoint()
        data = bytes(data)
        with self._lock:
            self._entries.pop(checkpoint_id, None)
            self._entries[checkpoint_id] = _Entry(data)

    async def delete(self, checkpoint_id: str) -> None:
        """Remove ``checkpoint_id`` if present."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            self._entries.pop(checkpoint_id, None)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the ids starting with ``prefix``, oldest write first."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            return [k for k in self._entries if k.startswith(prefix)]

    async def claim(self, checkpoint_id: str, owner: str, *, stale_after: float | None = None) -> bool:
        """Claim ``checkpoint_id`` for ``owner`` (see :meth:`ClaimableCheckPointStore.claim`)."""
        await anyio.lowlevel.checkpoint()
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(checkpoint_id)
            if entry is None:
                return False
            live = entry.owner is not None and entry.owner != owner
            if live and (stale_after is None or now - entry.claimed_at <= stale_after):
                return False
            entry.owner, entry.claimed_at = owner, now
            return True

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            entry = self._entries.get(checkpoint_id)
            if entry is None or entry.owner != owner:
                return False
            entry.owner = None
            return True


# ---------------------------------------------------------------------------------------------------------------
# The envelope


class CheckpointHeader(BaseModel):
    """The first line of a checkpoint: what wrote it and how to check it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal["pyeino-checkpoint"]
    version: int
    kind: str
    fingerprint: str
    written_at: float
    """Unix time of writing (informational)."""
    digest: str
    """``sha256:<hex>`` or ``hmac-sha256:<hex>`` over the header fields above and the payload bytes."""


def encode_checkpoint(payload: BaseModel, *, kind: str, fingerprint: str, key: bytes | str | None = None) -> bytes:
    """Serialise ``payload`` into a checkpoint envelope.

    Args:
        payload: the pydantic model to store; serialised with ``model_dump_json`` (a value its fields do not
            describe is an error, not a silent loss).
        kind: what the payload is, e.g. ``"graph-run"``; :func:`decode_checkpoint` insists on the same kind.
        fingerprint: identifies the writer (e.g. a hash of the compiled graph's structure); a reader with
            another fingerprint refuses the checkpoint.
        key: HMAC key; defaults to ``$PYEINO_CHECKPOINT_KEY``; without one the digest is a plain SHA-256.

    Raises:
        CheckpointError: (reason ``"encode"``) the payload holds a value pydantic cannot serialise.

    Example:
        >>> from pydantic import BaseModel
        >>> class Run(BaseModel):
        ...     step: int
        >>> data = encode_checkpoint(Run(step=3), kind="graph-run", fingerprint="g1", key=b"k")
        >>> decode_checkpoint(data, Run, kind="graph-run", fingerprint="g1", key=b"k")
        Run(step=3)
    """
    try:
        body = payload.model_dump_json(warnings="error").encode()
    except PydanticSerializationError as e:
        raise CheckpointError(
            f"cannot write a {kind!r} checkpoint: {type(payload).__name__} holds a value pydantic cannot "
            f"serialise ({e}); give the field a concrete pydantic-serialisable type",
            reason="encode",
        ) from e
    secret = _resolve_key(key)
    written_at = time.time()
    digest = _digest(secret, CHECKPOINT_FORMAT_VERSION, kind, fingerprint, written_at, body)
    header = CheckpointHeader(
        format=_FORMAT,
        version=CHECKPOINT_FORMAT_VERSION,
        kind=kind,
        fingerprint=fingerprint,
        written_at=written_at,
        digest=digest,
    )
    return header.model_dump_json().encode() + b"\n" + body


def read_checkpoint_header(data: bytes) -> CheckpointHeader:
    """Return the header of a checkpoint without checking its digest or reading its payload.

    For tools that list or inspect checkpoints. Raises :class:`CheckpointError` (reason ``"not_checkpoint"``
    or ``"version"``) like :func:`decode_checkpoint`.
    """
    return _split(data)[0]


def decode_checkpoint(data: bytes, model: type[M], *, kind: str, fingerprint: str, key: bytes | str | None = None) -> M:
    """Check a checkpoint envelope and return its payload as ``model``.

    Checks, in order: the bytes are an envelope, of format version :data:`CHECKPOINT_FORMAT_VERSION`, of
    ``kind``; the digest matches (an HMAC with ``key`` or ``$PYEINO_CHECKPOINT_KEY`` when one is configured;
    then unsigned checkpoints are refused); it was written by ``fingerprint``; the payload validates as
    ``model``.

    Raises:
        CheckpointError: the first check that failed, as ``reason``, with a message saying what to do.
    """
    header, body = _split(data)
    if header.kind != kind:
        raise CheckpointError(
            f"checkpoint holds a {header.kind!r}, not a {kind!r}: it was written by another kind of runnable; "
            f"resume it with what wrote it, or {_FRESH}",
            reason="kind",
        )
    _check_digest(header, body, _resolve_key(key))
    if header.fingerprint != fingerprint:
        raise CheckpointError(
            f"checkpoint was written by a different {kind} (fingerprint {header.fingerprint!r}, this one is "
            f"{fingerprint!r}): its structure changed since the run was interrupted; resume with the "
            f"{kind} that wrote it, or {_FRESH}",
            reason="fingerprint",
        )
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()[:3]
        )
        more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
        raise CheckpointError(
            f"checkpoint payload does not validate as {model.__name__}: {problems}{more}; it was written by "
            f"an incompatible version of the code; {_FRESH}",
            reason="payload",
        ) from e


def _resolve_key(key: bytes | str | None) -> bytes | None:
    if key is None:
        key = os.environ.get(CHECKPOINT_KEY_ENV) or None
    if isinstance(key, str):
        key = key.encode()
    return key or None


def _digest(key: bytes | None, version: int, kind: str, fingerprint: str, written_at: float, body: bytes) -> str:
    # the header fields are framed as one JSON array so no two field combinations share a byte string
    signed = json.dumps([_FORMAT, version, kind, fingerprint, written_at]).encode() + b"\n" + body
    if key is None:
        return "sha256:" + hashlib.sha256(signed).hexdigest()
    return "hmac-sha256:" + hmac.new(key, signed, hashlib.sha256).hexdigest()


def _not_checkpoint(why: str) -> CheckpointError:
    return CheckpointError(
        f"not a pyeino checkpoint ({why}): the bytes were corrupted or written by something else; {_FRESH}",
        reason="not_checkpoint",
    )


def _split(data: bytes) -> tuple[CheckpointHeader, bytes]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _not_checkpoint(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    line, newline, body = data.partition(b"\n")
    if not newline:
        raise _not_checkpoint("no header line")
    try:
        raw: Any = json.loads(line)
    except ValueError:
        raise _not_checkpoint("the header is not JSON") from None
    if not isinstance(raw, dict) or raw.get("format") != _FORMAT:
        raise _not_checkpoint("the header does not name the pyeino-checkpoint format")
    version = raw.get("version")
    if version != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint format version {version!r} is not supported (this pyeino reads version "
            f"{CHECKPOINT_FORMAT_VERSION}): it was written by another pyeino release; resume it with that "
            f"release, or {_FRESH}",
            reason="version",
        )
    try:
        header = CheckpointHeader.model_validate(raw)
    except ValidationError as e:
        raise _not_checkpoint(f"malformed header: {e.errors()[0]['msg']}") from None
    return header, body


def _check_digest(header: CheckpointHeader, body: bytes, key: bytes | None) -> None:
    signed = header.digest.startswith("hmac-sha256:")
    if signed and key is None:
        raise CheckpointError(
            f"checkpoint is signed (HMAC) but no key is configured: set {CHECKPOINT_KEY_ENV} (or pass key=) "
            "to the key it was written with",
            reason="digest",
        )
    if not signed and key is not None:
        raise CheckpointError(
            "checkpoint is not signed but a key is configured: refusing an unauthenticated checkpoint; "
            f"it was written without {CHECKPOINT_KEY_ENV}; {_FRESH}",
            reason="digest",
        )
    expected = _digest(key, header.version, header.kind, header.fingerprint, header.written_at, body)
    if not hmac.compare_digest(expected, header.digest):
        what = "wrong key, or the checkpoint was tampered with" if signed else "corrupted or tampered with"
        raise CheckpointError(
            f"checkpoint digest mismatch ({what}): its bytes changed after it was written; {_FRESH}",
            reason="digest",
        )
