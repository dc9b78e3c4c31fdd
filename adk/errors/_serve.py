"""Errors of the AG-UI/A2A server (``adk.serve``): requests it refuses, ids it does not know."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = ["InterruptPendingError", "ResumePayloadError", "RunNotFoundError", "ServeError", "ThreadNotFoundError"]


class ServeError(AgentError):
    """An AG-UI request the server (``adk.serve``) cannot run; sent to the client as ``RUN_ERROR`` with the
    class name as ``code``."""

    reason = "serve"


class InterruptPendingError(ServeError):
    """A run on a thread whose last run paused does not answer every open interrupt in its ``resume`` entries
    (AG-UI's interrupts: pending interrupts block new input, and a resume addresses all of them);
    ``.thread_id`` and ``.pending`` (the unanswered interrupt ids) say which."""

    def __init__(self, thread_id: str, pending: list[str]) -> None:
        super().__init__(
            f"thread {thread_id!r} has open interrupts {sorted(pending)}: send resume entries answering all of "
            "them (status 'resolved' with a payload, or 'cancelled')"
        )
        self.thread_id = thread_id
        self.pending = sorted(pending)


class RunNotFoundError(ServeError):
    """A ``RunAgentInput``'s ``parentRunId`` names no run of its thread that the server knows (AG-UI's branching:
    the parent is a prior run of the same thread); ``.thread_id`` and ``.run_id`` say which."""

    def __init__(self, thread_id: str, run_id: str, known: list[str]) -> None:
        shown = ", ".join(repr(r) for r in known[-10:]) or "none"
        super().__init__(f"thread {thread_id!r} has no run {run_id!r} to branch from (its runs: {shown})")
        self.thread_id = thread_id
        self.run_id = run_id


class ThreadNotFoundError(LookupError):
    """An id the asking principal may not use as a thread (another's thread or branch, a session the server
    keeps no record of); answered as "not found"."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"no thread {thread_id!r}")
        self.thread_id = thread_id


class ResumePayloadError(ValueError):
    """A resume entry's payload does not fit the interrupt it answers; ``.field`` names it
    (``resume[0].payload.editedArgs``), ``.interrupt_id`` the interrupt."""

    def __init__(self, index: int, interrupt_id: str, field: str, problem: str) -> None:
        self.field = f"resume[{index}].payload{'.' + field if field else ''}"
        self.interrupt_id = interrupt_id
        super().__init__(f"{self.field} (resume of interrupt {interrupt_id!r}): {problem}")
