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
the engine's one call: claim, then read; a refused resume raises ``CheckpointClaimedError`` naming the holder
(``"pid 4242 on host-a"``) and the claim's age. A claim never outlives its owner: the SQL stores renew their
claims from a keeper thread while the resumed run is in flight, and a claim not renewed for ``claim_ttl``
seconds (the process died, or the store was down when the run ended, so the claim could not be released) has
expired and is taken over by the next resume.

**History.** A graph compiled with ``keep_history=True`` (or ``N``) also keeps a snapshot per step of every run
with a checkpoint id (``~history/<id>/<branch>/<step>`` keys, envelopes of kind ``"graph-history"``), read as
:class:`StateSnapshot` s; ``prune(older_than=...)`` removes whole histories older than a date.

**Retention.** The engine deletes a resumed run's checkpoint when the run completes successfully (a store
without ``delete`` keeps it, as Eino does), so storage does not grow with finished runs; :func:`prune` deletes
old checkpoints under a prefix. A delete that fails is reported as the run's error (``CheckpointStoreError``)
and the claim is released; resume data for a checkpoint that no longer exists is
:class:`CheckpointNotFoundError`, never a fresh run.

The package's private modules: ``_protocol`` (the store protocols, claims), ``_history`` (histories, pruning),
``_envelope``, ``_memory`` and ``_sql`` (the stores; the SQL ones on ``compose._db.core``) and ``_snapshot`` (what
a graph run's checkpoint holds).
"""

from __future__ import annotations

from compose.checkpoint._envelope import (
    CHECKPOINT_FORMAT_VERSION,
    CHECKPOINT_KEY_ENV,
    CheckpointHeader,
    decode_checkpoint,
    encode_checkpoint,
    read_checkpoint_header,
)
from compose.checkpoint._history import StateSnapshot, prune
from compose.checkpoint._memory import InMemoryCheckPointStore
from compose.checkpoint._protocol import (
    CheckpointClaim,
    CheckPointDeleter,
    CheckPointStore,
    ClaimableCheckPointStore,
    check_store,
    claim_checkpoint,
)
from compose.checkpoint._sql import PostgresCheckPointStore, SQLiteCheckPointStore
from compose.errors import (
    CheckpointClaimedError,
    CheckpointError,
    CheckpointExistsError,
    CheckpointNotFoundError,
    CheckpointStoreError,
    InterruptNotFoundError,
)

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "CHECKPOINT_KEY_ENV",
    "CheckPointDeleter",
    "CheckPointStore",
    "CheckpointClaim",
    "CheckpointClaimedError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointHeader",
    "CheckpointNotFoundError",
    "CheckpointStoreError",
    "ClaimableCheckPointStore",
    "InMemoryCheckPointStore",
    "InterruptNotFoundError",
    "PostgresCheckPointStore",
    "SQLiteCheckPointStore",
    "StateSnapshot",
    "check_store",
    "claim_checkpoint",
    "decode_checkpoint",
    "encode_checkpoint",
    "prune",
    "read_checkpoint_header",
]
