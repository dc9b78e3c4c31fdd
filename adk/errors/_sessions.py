"""Errors of conversations kept in a session store (``adk.sessions``)."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = ["SessionBusyError", "SessionError", "SessionLeaseLostError", "SessionStoreError"]


class SessionError(AgentError):
    """A conversation kept in a session store (``adk.sessions``) cannot be run, read or stored."""

    reason = "session"


class SessionBusyError(SessionError):
    """A run was started on a session that has a run in flight (its lease is held), and did not wait for it
    (``Runner(session_wait=...)``) or waited in vain; raised by the run's first ``__anext__``, nothing ran.

    ``holder`` describes the lease holder (which process, until when) when the store knows it.
    """

    def __init__(self, session_id: str, holder: str = "", waited: float = 0.0) -> None:
        held = f" (held by {holder})" if holder else ""
        wait = f" after waiting {waited:g}s" if waited else ""
        super().__init__(f"session {session_id!r} has a run in flight{held}: not started{wait}")
        self.session_id = session_id
        self.holder = holder


class SessionLeaseLostError(SessionError):
    """A run's lease on its session was lost before it could append (it expired and another run took it, or the
    session was deleted meanwhile): nothing of the run was appended."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r}: this run's lease was lost (expired and taken by another run, or the session "
            "was deleted): its messages were not appended"
        )
        self.session_id = session_id


class SessionStoreError(SessionError):
    """A session store's database failed (unreachable, locked past its timeout, ...); cause in ``__cause__``."""
