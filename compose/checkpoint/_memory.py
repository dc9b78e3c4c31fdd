"""InMemoryCheckPointStore: checkpoints in a dict, for tests and single-process use."""

from __future__ import annotations

import builtins
import threading
import time
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from compose._db.keeper import holder_name
from compose._db.store import ClosingStore
from compose.checkpoint._protocol import CheckpointClaim

__all__ = ["InMemoryCheckPointStore"]


@dataclass(slots=True)
class _Entry:
    data: bytes
    owner: str | None = None
    claimed_at: float = 0.0
    holder: str | None = None


class InMemoryCheckPointStore(ClosingStore):
    """Checkpoints in a dict: for tests, notebooks and runs that need not survive the process.

    Thread-safe, so one store may serve several event loops. Its claims need no expiry: they die with the
    process (``stale_after`` still takes one over).

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
            if entry.owner != owner:
                entry.owner, entry.claimed_at, entry.holder = owner, now, holder_name()
            return True

    async def claim_info(self, checkpoint_id: str) -> CheckpointClaim | None:
        """Who holds the claim on ``checkpoint_id`` (None: unclaimed or absent); it never expires."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            entry = self._entries.get(checkpoint_id)
            if entry is None or entry.owner is None:
                return None
            age = time.monotonic() - entry.claimed_at
            return CheckpointClaim(entry.owner, entry.holder, age, age, None)

    async def release(self, checkpoint_id: str, owner: str) -> bool:
        """Clear the claim on ``checkpoint_id`` if ``owner`` holds it."""
        await anyio.lowlevel.checkpoint()
        with self._lock:
            entry = self._entries.get(checkpoint_id)
            if entry is None or entry.owner != owner:
                return False
            entry.owner = None
            return True
