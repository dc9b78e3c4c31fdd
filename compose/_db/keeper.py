"""The lease keeper of the SQL stores: a daemon thread renewing a store's live leases (session leases, checkpoint
claims).

A thread, not a task: the renewal must go on while the run's consumer does anything at all between events (reads a
long model stream, awaits its own I/O), and a task would need a task group spanning the run's ``yield``s. The
thread runs only while the store holds a lease and renews every held lease in one statement per tick.

It also finishes what the database was too far gone to record: a resumed run that completed while its checkpoint
could not be deleted hands the deletion to the keeper (:meth:`LeaseKeeper.retire`), which keeps the run's claim
renewed (so the checkpoint is never resumed as if the run had not completed) and retries the deletion every tick
until the database is back.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

__all__ = ["LeaseKeeper", "holder_name"]


def holder_name() -> str:
    """How a lease or a claim names the process holding it (shown in the errors of those who find it taken)."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


class LeaseKeeper:
    """Calls ``renew(owners)`` every ``every`` seconds from a daemon thread while some lease is kept.

    ``renew`` runs a blocking database call; its failures (the database is locked or down) are retried at the
    next tick: a lease that could not be renewed for its time to live expires (a session run's append then
    fails with ``SessionLeaseLostError``; a checkpoint claim is taken over by the next resume). A lease may be
    kept under a key (a checkpoint id), so that all the leases on it can be dropped at once (:meth:`drop_key`).

    With ``finish``, a lease may be retired (:meth:`retire`): renewed, and ``finish(key, owner)`` called every
    tick until it returns without raising (the finished work is then recorded: the lease is dropped).
    """

    def __init__(
        self,
        renew: Callable[[list[str]], None],
        every: float,
        name: str,
        *,
        finish: Callable[[str, str], None] | None = None,
    ) -> None:
        self._renew = renew
        self._every = every
        self._name = name
        self._finish = finish
        self._owners: dict[str, str] = {}  # owner -> key
        self._retiring: dict[str, str] = {}  # owner -> key: its work is done, ``finish`` still to succeed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def __repr__(self) -> str:
        state = "running" if self._thread is not None else "idle"
        retiring = f" retiring={len(self._retiring)}" if self._retiring else ""
        return f"<LeaseKeeper {self._name} {state} leases={len(self._owners)}{retiring}>"

    def keep(self, owner: str, key: str = "") -> None:
        """Renew ``owner``'s lease (on ``key``) from now on (starting the thread if idle)."""
        with self._lock:
            if self._stop.is_set():
                return
            self._owners[owner] = key
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def retire(self, owner: str, key: str) -> None:
        """``owner``'s work on ``key`` is done but could not be recorded (the database failed): keep its lease
        renewed and call ``finish(key, owner)`` every tick until it succeeds, then drop the lease."""
        if self._finish is None:
            raise TypeError(f"{self!r} was made without finish=: it cannot retire a lease")
        with self._lock:
            if self._stop.is_set():
                return
            self._retiring[owner] = key
        self.keep(owner, key)

    def retiring(self) -> list[tuple[str, str]]:
        """The ``(key, owner)`` pairs whose ``finish`` has not yet succeeded."""
        with self._lock:
            return sorted((k, o) for o, k in self._retiring.items())

    def drop(self, owner: str) -> None:
        """Stop renewing ``owner``'s lease (the thread ends at its next tick when none is left)."""
        with self._lock:
            self._owners.pop(owner, None)
            self._retiring.pop(owner, None)

    def drop_key(self, key: str) -> None:
        """Stop renewing every lease kept on ``key`` (its checkpoint was written or deleted)."""
        with self._lock:
            for owner in [o for o, k in self._owners.items() if k == key]:
                del self._owners[owner]
                self._retiring.pop(owner, None)

    def stop(self) -> list[tuple[str, str]]:
        """Stop for good (the store is closing); return the ``(key, owner)`` pairs still retiring, for the store to
        try once more."""
        with self._lock:
            self._stop.set()
            self._owners.clear()
            left = sorted((k, o) for o, k in self._retiring.items())
            self._retiring.clear()
            return left

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                owners = sorted(self._owners)
                retiring = sorted((k, o) for o, k in self._retiring.items())
                if not owners:
                    self._thread = None
                    return
            try:
                self._renew(owners)
            except Exception:  # retried next tick; a lease that expires is caught by the fenced append
                continue
            for key, owner in retiring:  # renewed just now: the database answers again
                self._try_finish(key, owner)
        with self._lock:
            self._thread = None

    def _try_finish(self, key: str, owner: str) -> None:
        assert self._finish is not None
        try:
            self._finish(key, owner)
        except Exception:  # still failing: the lease stays renewed, the next tick tries again
            return
        with self._lock:
            if self._retiring.get(owner) == key:
                del self._retiring[owner]
                self._owners.pop(owner, None)
