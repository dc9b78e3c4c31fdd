"""``DurableClient`` and ``DurableHandle``: submit durable runs and follow them from any process.

The client talks to the system database only (``dbos.DBOSClient``): it needs no workflow code and launches
nothing, so a web server, a script or a test submits runs, reads their events and resumes them while the
workers (``DurableApp``) run them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio.to_thread
from dbos import DBOSClient, EnqueueOptions, WorkflowHandleAsync
from pydantic import BaseModel

from adk.durable._app import DEFAULT_QUEUE, WORKFLOW_NAME, check_asyncio
from adk.durable._events import EVENTS_STREAM, RESUME_TOPIC, DurableEvent, DurableInterrupt
from adk.durable._serializer import JsonSerializer, refuse_pickled_rows
from adk.errors import DurableRunError, DurableStepError
from compose.schema import Message

__all__ = ["DurableClient", "DurableHandle", "DurableResult"]


@dataclass(frozen=True)
class DurableResult:
    """How a durable run ended: ``status`` ``"completed"`` (``output``: the agent's last answer, a Message, or
    the graph's output) or ``"interrupted"`` (its resume timed out; ``interrupts`` were pending)."""

    status: str
    output: Any = None
    interrupts: list[DurableInterrupt] = field(default_factory=list)


def _resume_value(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


class DurableHandle:
    """A durable run by id: await its result, read its events as they happen, resume it when it paused."""

    def __init__(self, client: DurableClient, run_id: str) -> None:
        self._client = client
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"DurableHandle({self.run_id!r})"

    async def status(self) -> str:
        """DBOS's status of the run: ``ENQUEUED``, ``PENDING``, ``SUCCESS``, ``ERROR``, ``CANCELLED``, ..."""
        check_asyncio()
        handle: WorkflowHandleAsync[dict[str, Any]] = await self._client._dbos.retrieve_workflow_async(self.run_id)
        return (await handle.get_status()).status

    async def result(self, *, polling_interval: float = 0.1) -> DurableResult:
        """Wait for the run to end.

        Raises:
            DurableRunError: the run failed (its error's type and text).
        """
        check_asyncio()
        handle: WorkflowHandleAsync[dict[str, Any]] = await self._client._dbos.retrieve_workflow_async(self.run_id)
        try:
            out = await handle.get_result(polling_interval_sec=polling_interval)
        except DurableStepError as e:
            raise DurableRunError(self.run_id, e.error_type, e.message) from None
        interrupts = [DurableInterrupt.model_validate(i) for i in out.get("interrupts", ())]
        return DurableResult(status=out["status"], output=out.get("output"), interrupts=interrupts)

    async def events(self, *, offset: int = 0) -> AsyncIterator[DurableEvent]:
        """The run's events from ``offset`` on, as they are published, until the run ends (see ``DurableEvent``)."""
        check_asyncio()
        values = self._client._dbos.read_stream_async(
            self.run_id, EVENTS_STREAM, offset=offset, polling_interval_sec=0.05
        )
        try:
            async for value in values:
                yield DurableEvent.model_validate(value)
        finally:
            await values.aclose()

    async def resume(self, targets: Mapping[str, Any]) -> None:
        """Send the paused run its resume data by interrupt id (``{id: ApprovalDecision(approved=True)}``);
        whichever worker runs it continues. Values are pydantic models or JSON."""
        check_asyncio()
        data = {k: _resume_value(v) for k, v in targets.items()}
        await self._client._dbos.send_async(self.run_id, data, topic=RESUME_TOPIC)


class DurableClient:
    """Submits durable runs to a queue and gives handles to them, from any process.

    Args:
        db: the DBOS system database the workers use.
        queue: the queue to submit to.

    Example::

        async with DurableClient("postgresql://...") as client:
            handle = await client.submit("Plan a day in Hangzhou", streaming=True)
            async for event in handle.events():
                ...
            print((await handle.result()).output)
    """

    def __init__(self, db: str, *, queue: str = DEFAULT_QUEUE) -> None:
        refuse_pickled_rows()
        self.db = db
        self.queue = queue
        self._dbos = DBOSClient(system_database_url=db, serializer=JsonSerializer())

    def __repr__(self) -> str:
        return f"DurableClient(queue={self.queue!r})"

    async def submit(
        self,
        input: str | Sequence[Message] | Any,
        *,
        run_id: str | None = None,
        streaming: bool = False,
        session_values: Mapping[str, Any] | None = None,
    ) -> DurableHandle:
        """Enqueue a run: for an agent, a user message's text or the conversation; for a graph, its input (JSON
        or Messages). ``run_id`` makes submitting idempotent (the same id is the same run)."""
        check_asyncio()
        options: EnqueueOptions = {"queue_name": self.queue, "workflow_name": WORKFLOW_NAME}
        if run_id is not None:
            options["workflow_id"] = run_id
        payload = {
            "input": list(input) if isinstance(input, (list, tuple)) else input,
            "streaming": streaming,
            "session_values": dict(session_values or {}),
        }
        handle: WorkflowHandleAsync[dict[str, Any]] = await self._dbos.enqueue_async(options, payload)
        return DurableHandle(self, handle.get_workflow_id())

    def handle(self, run_id: str) -> DurableHandle:
        """A handle to the run ``run_id`` (submitted by any process)."""
        return DurableHandle(self, run_id)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._dbos.destroy)

    async def __aenter__(self) -> DurableClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
