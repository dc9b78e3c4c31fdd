"""``DurableClient`` and ``DurableHandle``: submit durable runs and follow them from any process.

The client talks to the system database only (``dbos.DBOSClient``): it needs no workflow code and launches
nothing, so a web server, a script or a test submits runs, reads their events and resumes them while the
workers (``DurableApp``) run them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.to_thread
from dbos import DBOSClient, EnqueueOptions, WorkflowHandleAsync
from dbos._error import DBOSStreamTimeoutError
from pydantic import BaseModel

from adk.durable._app import DEFAULT_QUEUE, WORKFLOW_NAME, check_asyncio
from adk.durable._events import EVENTS_STREAM, RESUME_TOPIC, DurableEvent, DurableInterrupt
from adk.durable._liveness import DurableWorker, read_workers
from adk.durable._serializer import JsonSerializer, refuse_pickled_rows
from adk.errors import DurableRunError, DurableStepError, DurableTimeoutError
from compose.lowlevel import Closing
from compose.schema import Message

__all__ = ["DurableClient", "DurableHandle", "DurableResult", "DurableWorker"]


@dataclass(frozen=True)
class DurableResult:
    """How a durable run ended: ``status`` ``"completed"`` (``output``: the agent's last answer, a Message, or
    the graph's output; ``session_values``: an agent run's session values at its end, JSON) or
    ``"interrupted"`` (its resume timed out; ``interrupts`` were pending)."""

    status: str
    output: Any = None
    interrupts: list[DurableInterrupt] = field(default_factory=list)
    session_values: dict[str, Any] = field(default_factory=dict)


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
        await self._client._ensure_schema()
        handle: WorkflowHandleAsync[dict[str, Any]] = await self._client._dbos.retrieve_workflow_async(self.run_id)
        return (await handle.get_status()).status

    async def result(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - its typed error says the run's status (a cancel scope cannot)
        polling_interval: float = 0.1,
    ) -> DurableResult:
        """Wait for the run to end (at most ``timeout`` seconds; None: as long as it takes).

        Raises:
            DurableRunError: the run failed (its error's type and text).
            DurableTimeoutError: ``timeout`` ran out first (the run goes on); it says the run's status.
        """
        check_asyncio()
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 seconds or None, got {timeout!r}")
        await self._client._ensure_schema()
        handle: WorkflowHandleAsync[dict[str, Any]] = await self._client._dbos.retrieve_workflow_async(self.run_id)
        out: dict[str, Any] | None = None
        try:
            with anyio.move_on_after(timeout if timeout is not None else math.inf):
                out = await handle.get_result(polling_interval_sec=polling_interval)
        except DurableStepError as e:
            raise DurableRunError(self.run_id, e.error_type, e.message) from None
        if out is None:
            raise DurableTimeoutError(self.run_id, await self.status(), cast(float, timeout))
        interrupts = [DurableInterrupt.model_validate(i) for i in out.get("interrupts", ())]
        return DurableResult(
            status=out["status"],
            output=out.get("output"),
            interrupts=interrupts,
            session_values=dict(out.get("session_values") or {}),
        )

    async def events(self, *, offset: int = 0, idle: float | None = None) -> AsyncIterator[DurableEvent]:
        """The run's events from ``offset`` on, as they are published, until the run ends (see ``DurableEvent``);
        with ``idle`` (seconds), also stop when no event comes for that long (what is there now, e.g. up to a
        pause)."""
        check_asyncio()
        await self._client._ensure_schema()
        values = self._client._dbos.read_stream_async(
            self.run_id, EVENTS_STREAM, offset=offset, polling_interval_sec=0.05, timeout_seconds=idle
        )
        try:
            async for value in values:
                yield DurableEvent.model_validate(value)
        except DBOSStreamTimeoutError:
            if idle is None:  # pragma: no cover - DBOS raises it only with a timeout
                raise
        finally:
            await values.aclose()

    async def resume(self, targets: Mapping[str, Any]) -> None:
        """Send the paused run its resume data by interrupt id (``{id: ApprovalDecision(approved=True)}``);
        whichever worker runs it continues. Values are pydantic models or JSON."""
        check_asyncio()
        await self._client._ensure_schema()
        data = {k: _resume_value(v) for k, v in targets.items()}
        await self._client._dbos.send_async(self.run_id, data, topic=RESUME_TOPIC)


class DurableClient(Closing):
    """Submits durable runs to a queue and gives handles to them, from any process.

    The client may come first: on a new system database its first call creates DBOS's tables (as a worker's
    launch would), so runs submitted before any worker started wait on the queue. ``workers()`` tells whether
    one serves it.

    Args:
        db: the DBOS system database the workers use.
        queue: the queue to submit to.
        dead_after: ``workers()`` counts a worker alive while its heartbeat is younger than this (seconds; the
            workers' ``--dead-after``).

    Example::

        async with DurableClient("postgresql://...") as client:
            handle = await client.submit("Plan a day in Hangzhou", streaming=True)
            async for event in handle.events():
                ...
            print((await handle.result(timeout=60)).output)
    """

    def __init__(self, db: str, *, queue: str = DEFAULT_QUEUE, dead_after: float = 5.0) -> None:
        refuse_pickled_rows()
        self.db = db
        self.queue = queue
        self.dead_after = dead_after
        self._dbos = DBOSClient(system_database_url=db, serializer=JsonSerializer())
        self._schema_ready = False
        self._schema_lock = threading.Lock()

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
        await self._ensure_schema()
        options: EnqueueOptions = {"queue_name": self.queue, "workflow_name": WORKFLOW_NAME}
        if run_id is not None:
            options["workflow_id"] = run_id
        payload = {
            "input": list(input) if isinstance(input, (list, tuple)) else input,
            "streaming": streaming,
            "session_values": dict(session_values or {}),
            "queue": self.queue,  # a worker of another queue refuses the run (see DurableApp)
        }
        handle: WorkflowHandleAsync[dict[str, Any]] = await self._dbos.enqueue_async(options, payload)
        return DurableHandle(self, handle.get_workflow_id())

    def handle(self, run_id: str) -> DurableHandle:
        """A handle to the run ``run_id`` (submitted by any process)."""
        return DurableHandle(self, run_id)

    async def workers(self) -> list[DurableWorker]:
        """The workers that ever served this system database, from their heartbeats (sorted by executor id);
        ``[w for w in await client.workers() if w.alive]`` are the ones serving the queue now. A worker writes
        its first heartbeat before it takes any run, so an alive one is ready. Empty before any worker started.

        Example::

            while not any(w.alive for w in await client.workers()):
                await anyio.sleep(0.5)
        """
        return await anyio.to_thread.run_sync(read_workers, self.db, self.dead_after)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._dbos.destroy)

    async def _ensure_schema(self) -> None:
        """DBOS's tables, created on first use if no worker has yet (DBOS serialises concurrent creators)."""
        if not self._schema_ready:
            await anyio.to_thread.run_sync(self._migrate)

    def _migrate(self) -> None:
        with self._schema_lock:
            if not self._schema_ready:
                self._dbos._sys_db.run_migrations()  # idempotent; skips at once when the schema is current
                self._schema_ready = True
