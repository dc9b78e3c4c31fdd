"""The lease keeper of a SQL session store: a daemon thread renewing the store's live leases.

A thread, not a task: the renewal must go on while the run's consumer does anything at all between events (reads a
long model stream, awaits its own I/O), and a task would need a task group spanning the run's ``yield``s. The
thread runs only while the store holds a lease and renews every held lease in one statement per tick.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["LeaseKeeper"]


class LeaseKeeper:
    """Calls ``renew(owners)`` every ``every`` seconds from a daemon thread while some lease is kept.

    ``renew`` runs a blocking database call; its failures (the database is locked or down) are retried at the
    next tick: a lease that could not be renewed for ``lease_ttl`` seconds expires, and its run's append then
    fails with ``SessionLeaseLostError``.
    """

    def __init__(self, renew: Callable[[list[str]], None], every: float, name: str) -> None:
        self._renew = renew
        self._every = every
        self._name = name
        self._owners: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def __repr__(self) -> str:
        state = "running" if self._thread is not None else "idle"
        return f"<LeaseKeeper {self._name} {state} leases={len(self._owners)}>"

    def keep(self, owner: str) -> None:
        """Renew ``owner``'s lease from now on (starting the thread if idle)."""
        with self._lock:
            if self._stop.is_set():
                return
            self._owners.add(owner)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def drop(self, owner: str) -> None:
        """Stop renewing ``owner``'s lease (the thread ends at its next tick when none is left)."""
        with self._lock:
            self._owners.discard(owner)

    def stop(self) -> None:
        """Stop for good (the store is closing)."""
        with self._lock:
            self._stop.set()
            self._owners.clear()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                owners = sorted(self._owners)
                if not owners:
                    self._thread = None
                    return
            try:
                self._renew(owners)
            except Exception:  # retried next tick; a lease that expires is caught by the fenced append
                continue
        with self._lock:
            self._thread = None
