"""The step ledger: a durable run's steps found by name on a replay, whatever order its tasks reach them in.

DBOS numbers a workflow's operations in the order they start and a replay must start them in the same order. A
pyeino run is concurrent: parallel graph branches, parallel tool calls, a Parallel agent's children, each
reaching its next step when the previous ones answered; on a replay the answers come from the database in
another order than the model and the tools gave them. So every operation of a durable run has a name that says
what it is (``<scope><prefix>model.generate``, ``...tool.<name>[<call id>]``, an event's source and content) and
a replay runs each at the id its name was recorded at, taken from the recorded steps when the execution starts.
Names the replay does not find (what had not run before the crash) take fresh ids above every recorded one.
Several operations of one name (a node in a loop, the same tool call id in two rounds) are matched in order;
two of one name running at the same time would be matched in the order they start: names carry their scope
(the agent tool call they run in, the graph node's address) so that they do not.

This module holds the DBOS internals a running workflow of pyeino uses (``dbos`` 3.x; the others are the
recovery call of ``_app`` and the serializer hook of ``_serializer``): the execution's context (its step
counter), the recorded steps and the stream write at a given id. ``tests/adk/test_durable.py`` exercises each.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict, deque
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

import anyio.to_thread
from dbos import DBOS, StepReservation, WorkflowSerializationFormat
from dbos._context import DBOSContext, get_local_dbos_context
from dbos._dbos import _get_dbos_instance

__all__ = ["Ledger", "current_ledger", "event_name"]

current_ledger: ContextVar[Ledger | None] = ContextVar("pyeino_durable_ledger", default=None)


def _step_options(name: str) -> Any:
    # pyeino retries model calls itself (ModelRetryConfig); a DBOS retry would hide attempts from it
    return {"name": name, "retries_allowed": False}


def event_name(source: str, value: Any) -> str:
    """The operation name of an event: its source and a digest of its JSON (equal events of one source are
    interchangeable, so matching them in order is exact)."""
    digest = hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
    return f"pyeino.event:{source}:{digest}"


class Ledger:
    """One workflow execution's recorded operations by name (see the module docstring)."""

    def __init__(self, workflow_id: str, recorded: dict[str, deque[int]]) -> None:
        self.workflow_id = workflow_id
        self._recorded = recorded
        self._reserved: dict[str, StepReservation] = {}

    def __repr__(self) -> str:
        return f"Ledger({self.workflow_id!r}, recorded={sum(len(q) for q in self._recorded.values())})"

    @classmethod
    async def open(cls) -> Ledger:
        """The ledger of the calling workflow execution (workflow code, outside any step)."""
        ctx = _workflow_context()
        wid = ctx.workflow_id
        sys_db = _get_dbos_instance()._sys_db
        steps = await anyio.to_thread.run_sync(lambda: sys_db.list_workflow_steps(wid, load_output=False))
        recorded: dict[str, deque[int]] = defaultdict(deque)
        top = ctx.function_id
        for s in steps:  # ordered by id
            recorded[s["function_name"]].append(s["function_id"])
            top = max(top, s["function_id"])
        ctx.function_id = top  # fresh ids start above every recorded one
        return cls(wid, recorded)

    def _claim(self, name: str) -> int | None:
        ids = self._recorded.get(name)
        return ids.popleft() if ids else None

    def reserve(self, keys: Iterable[str]) -> None:
        """Draw fresh step ids now, in this order, for steps that will start later in any order (the calls of a
        model answer, reserved in call order): a step run with ``reserved=key`` that is not recorded runs at
        its key's id. Workflow code only (outside any step)."""
        for key in keys:
            self._reserved[key] = DBOS.reserve_step()

    async def step(self, name: str, fn: Any, *args: Any, reserved: str = "") -> Any:
        """Run ``fn(*args)`` as the step ``name``: at its recorded id on a replay (DBOS returns the recorded
        result), else at the id reserved for ``reserved``, else at a fresh one."""
        fid = self._claim(name)
        reservation = self._reserved.pop(reserved, None) if reserved else None
        if fid is None:
            if reservation is not None:  # a recorded step leaves its reservation unused: a gap DBOS allows
                return await reservation.run_async(_step_options(name), fn, *args)
            return await DBOS.run_step_async(_step_options(name), fn, *args)
        ctx = _workflow_context()
        saved = ctx.function_id
        ctx.function_id = fid - 1
        try:
            reservation = DBOS.reserve_step()  # takes ``fid``
        finally:
            ctx.function_id = saved
        return await reservation.run_async(_step_options(name), fn, *args)

    async def write(self, name: str, stream: str, value: Any) -> None:
        """Write ``value`` to the workflow's stream ``stream`` exactly once, as the operation ``name``."""
        ctx = _workflow_context()
        fid = self._claim(name)
        if fid is None:
            ctx.function_id += 1
            fid = ctx.function_id
        sys_db = _get_dbos_instance()._sys_db
        await anyio.to_thread.run_sync(
            lambda: sys_db.write_stream_from_workflow(
                self.workflow_id,
                fid,
                stream,
                value,
                serialization_type=WorkflowSerializationFormat.DEFAULT,
                function_name=name,
            )
        )

    async def close(self, stream: str) -> None:
        """Close the workflow's stream ``stream`` (once)."""
        await self._at(self._claim("DBOS.closeStream"), DBOS.close_stream_async, stream)

    async def recv(self, topic: str, timeout_seconds: float) -> Any:
        """DBOS's ``recv`` of this execution's next message on ``topic``: the recorded one on a replay. Call it
        from sequential workflow code (nothing else of the run taking ids meanwhile)."""
        return await self._at(self._claim("DBOS.recv"), DBOS.recv_async, topic, timeout_seconds)

    async def _at(self, fid: int | None, fn: Any, *args: Any) -> Any:
        if fid is None:
            return await fn(*args)
        ctx = _workflow_context()
        saved = ctx.function_id
        ctx.function_id = fid - 1  # DBOS draws ``fid`` (and, for recv, ``fid + 1`` for its timeout) on the call
        try:
            return await fn(*args)
        finally:
            ctx.function_id = max(saved, ctx.function_id)


def _workflow_context() -> DBOSContext:
    ctx = get_local_dbos_context()
    if ctx is None or not ctx.is_workflow():  # pragma: no cover - the ledger is only opened by the workflow
        raise RuntimeError("the durable step ledger is used outside a DBOS workflow")
    return ctx
