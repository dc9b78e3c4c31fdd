"""Durable agent runs on DBOS Transact (extra ``dbos``): SQLite embedded, PostgreSQL distributed.

An agent (through the Runner) or a compiled graph runs as a DBOS workflow; every model call and every tool
call is a DBOS step with a stable name, so a replay after a crash takes finished calls from the database.
Workers (``python -m adk.durable worker module:build --db URL``) serve a queue; a worker that dies has its runs
taken over by a live one (heartbeats, then DBOS's recovery for the dead executor id). Everything DBOS stores
is JSON (``JsonSerializer``); pickled rows are refused. DBOS is asyncio-only: under trio these APIs raise
``DurableBackendError``.

Example::

    # worker processes
    python -m adk.durable worker myapp.agents:build --db postgresql://localhost/app

    # any other process
    async with DurableClient("postgresql://localhost/app") as client:
        handle = await client.submit("Plan a day in Hangzhou", streaming=True)
        async for event in handle.events():
            print(event.kind, event.message)
        result = await handle.result()
"""

from adk.durable._app import DurableApp, durable_agent
from adk.durable._client import DurableClient, DurableHandle, DurableResult
from adk.durable._events import DurableEvent, DurableInterrupt
from adk.durable._liveness import DurableWorker
from adk.durable._serializer import JsonSerializer, refuse_pickled_rows
from adk.durable._steps import DurableChatModel, DurableTool, durable_step

__all__ = [
    "DurableApp",
    "DurableChatModel",
    "DurableClient",
    "DurableEvent",
    "DurableHandle",
    "DurableInterrupt",
    "DurableResult",
    "DurableTool",
    "DurableWorker",
    "JsonSerializer",
    "durable_agent",
    "durable_step",
    "refuse_pickled_rows",
]
