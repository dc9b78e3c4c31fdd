"""Errors of durable runs (``adk.durable``, extra ``dbos``)."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = [
    "DurableBackendError",
    "DurableError",
    "DurableRunError",
    "DurableSerializationError",
    "DurableStepError",
    "DurableTimeoutError",
]


class DurableError(AgentError):
    """Base of the failures of durable runs (``adk.durable``, extra ``dbos``)."""

    reason = "durable"


class DurableBackendError(DurableError, RuntimeError):
    """A durable-run API was called under an async backend DBOS does not support (DBOS is asyncio-only; under
    trio every other part of pyeino works, ``adk.durable`` raises this)."""

    def __init__(self, backend: str) -> None:
        super().__init__(
            f"adk.durable runs on DBOS, which is asyncio-only: it cannot run under {backend} (run this part of "
            "the program with anyio.run(..., backend='asyncio'))"
        )
        self.backend = backend


class DurableSerializationError(DurableError, TypeError):
    """A value bound for DBOS's system database is not JSON, or a row read from it is not pyeino's JSON (a
    pickled row is refused, never unpickled). ``what`` names the value or row."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what}: {detail}")
        self.what = what
        self.detail = detail


class DurableStepError(DurableError):
    """A step's failure as recorded in DBOS's system database and replayed from it: ``error_type`` is the
    original exception's class name, ``message`` its text."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class DurableRunError(DurableError):
    """A durable run ended with an error (``DurableHandle.result()``): ``run_id``, the error's class name
    ``error_type`` and text ``message``."""

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"durable run {run_id!r} failed: {error_type}: {message}")
        self.run_id = run_id
        self.error_type = error_type
        self.message = message


class DurableTimeoutError(DurableError, TimeoutError):
    """``DurableHandle.result(timeout=...)`` ran out before the run ended: ``run_id``, its DBOS ``status`` then
    (``"ENQUEUED"``: no worker has taken it yet, see ``DurableClient.workers()``) and the ``timeout``. The run
    goes on; wait again or cancel it."""

    def __init__(self, run_id: str, status: str, timeout: float) -> None:
        hint = " (no worker has dequeued it: is one running? DurableClient.workers() lists them)"
        super().__init__(
            f"durable run {run_id!r} did not end within {timeout}s; its status is {status}"
            + (hint if status == "ENQUEUED" else "")
        )
        self.run_id = run_id
        self.status = status
        self.timeout = timeout
