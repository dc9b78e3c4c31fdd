"""``DurableApp``: an agent (through the Runner) or a compiled graph as a DBOS workflow, served from a queue.

One ``DurableApp`` per process (DBOS is a process-wide singleton). Its workflow ``pyeino.run`` takes a JSON
payload, runs the target inside the workflow and returns a JSON result; model and tool calls are steps
(``adk.durable._steps``). A worker is a process that launched the app and serves its queue
(:meth:`DurableApp.serve`, or ``python -m adk.durable worker module:build --db URL``).

A run's events (an agent's ``AgentEvent``s, a graph's output) go to the workflow's DBOS stream
``pyeino.events``, each an operation of the workflow found by name on a replay (``adk.durable._ledger``), so
exactly once. When the run pauses (approval, a tool interrupt, an ``interrupt(...)`` in a graph node) the
workflow waits durably in ``DBOS.recv`` for the resume data (``DurableHandle.resume``, from any process); the
paused run keeps its queue slot meanwhile. If its worker dies while it waits, the worker that takes it over
replays it to the same pause and waits there.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, cast

from dbos import DBOS, DBOSConfig

from adk.chat_model.agent import ChatModelAgent
from adk.durable._events import (
    EVENTS_STREAM,
    RESUME_TOPIC,
    DurableEvent,
    DurableInterrupt,
    from_agent_event,
    json_value,
    token_event,
)
from adk.durable._ledger import Ledger, current_ledger, event_name
from adk.durable._liveness import Liveness
from adk.durable._serializer import JsonSerializer, refuse_pickled_rows
from adk.durable._steps import DurableChatModel, DurableTool, ScopedAgentTool, step_scope, token_sink
from adk.errors import DurableRunError
from adk.runner import Agent, Runner
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import GraphInterrupt
from compose.interrupt import track_addresses
from compose.runnable import Runnable
from compose.schema import Message, user_message
from compose.stream import concat_items

__all__ = ["WORKFLOW_NAME", "DurableApp", "check_asyncio", "durable_agent"]

WORKFLOW_NAME = "pyeino.run"
DEFAULT_QUEUE = "pyeino"

_app: DurableApp | None = None


def check_asyncio() -> None:
    """Raise :class:`~adk.errors.DurableBackendError` unless running under asyncio (DBOS is asyncio-only)."""
    import sniffio

    from adk.errors import DurableBackendError

    try:
        backend = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    if backend != "asyncio":
        raise DurableBackendError(backend)


def durable_agent(agent: Any) -> Any:
    """``agent`` with the models and tools of every ChatModelAgent in it wrapped as DBOS steps (named after their
    agent), in place: a ChatModelAgent, and the agents inside agent tools, flow agents (sub-agents and transfer),
    workflow agents and deterministic transfers. The agents must not have run yet (a graph is built on first
    use). Idempotent. Other agents' models and tools are the user's to wrap (``DurableChatModel``,
    ``DurableTool``)."""
    from adk.agents import AgentTool, DeterministicTransfer, FlowAgent

    seen: set[int] = set()

    def walk(node: Any) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, ChatModelAgent):
            _durable_chat_model_agent(node)
            for t in node.tools_config.tools:
                inner = t.tool if isinstance(t, (DurableTool, ScopedAgentTool)) else t
                if isinstance(inner, AgentTool):
                    walk(inner.agent)
        elif isinstance(node, FlowAgent):
            walk(node.agent)
            for child in node.sub_agents:
                walk(child)
        elif isinstance(node, DeterministicTransfer):
            walk(node.agent)
        for child in getattr(node, "sub_agents", ()):  # workflow agents
            walk(child)

    walk(agent)
    return agent


def _durable_chat_model_agent(agent: ChatModelAgent) -> ChatModelAgent:
    if agent._runnable is not None:
        raise ValueError(f"agent '{agent.name}' has already run: wrap it for durable runs before its first run")
    prefix = f"{agent.name}."
    if not isinstance(agent.model, DurableChatModel):
        agent.model = DurableChatModel(agent.model, prefix=prefix)
    cfg = agent.tools_config
    agent.tools_config = replace(cfg, tools=[_durable_tool(t, prefix) for t in cfg.tools])
    return agent


def _durable_tool(t: Any, prefix: str) -> Any:
    from adk.agents import AgentTool

    if isinstance(t, (DurableTool, ScopedAgentTool)):
        return t
    if isinstance(t, AgentTool):  # no step: the calls inside its agent are (wrapped by durable_agent's walk)
        return ScopedAgentTool(t, prefix=prefix)
    return DurableTool(t, prefix=prefix)


def _default_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


async def _workflow(payload: dict[str, Any]) -> dict[str, Any]:
    if _app is None:  # pragma: no cover - DBOS runs workflows only in a launched app
        raise RuntimeError("no DurableApp in this process")
    return await _app._execute(payload)


_registered: Callable[..., Any] | None = None


def _register_workflow() -> Callable[..., Any]:
    global _registered
    if _registered is None:
        _registered = DBOS.workflow(name=WORKFLOW_NAME)(_workflow)
    return _registered


class DurableApp:
    """An agent or a compiled graph run as DBOS workflows, from a queue shared by worker processes.

    Args:
        target: a ``ChatModelAgent`` (its model and tools are wrapped as steps, see :func:`durable_agent`),
            another ``Agent`` or a compiled graph (wrap their models and tools with ``DurableChatModel`` /
            ``DurableTool`` yourself; mark lambdas with ``durable_step``).
        db: the DBOS system database: ``sqlite:///path.db`` (one machine) or ``postgresql://...`` (many).
        name: the DBOS application name.
        queue: the queue runs are submitted to; this worker dequeues from it alone and refuses a run submitted to
            another (several agents share a system database with a queue each).
        worker_concurrency: at most this many runs at once in this worker.
        global_concurrency: at most this many runs at once across all workers (None: no limit).
        executor_id: this worker's DBOS executor id; give a restarted worker its old id to have it recover its
            own runs at launch (default: unique per process; the others take over its runs when it dies).
        heartbeat_interval, dead_after: the liveness mechanism (``adk.durable._liveness``): a worker whose
            heartbeat is older than ``dead_after`` seconds is dead and its runs are taken over.
        resume_timeout: how long a paused run waits for its resume (seconds); then it ends ``interrupted``.
        polling_interval: how often the worker polls the queue (seconds).
        application_version: DBOS's application version (default: DBOS's hash of the workflow code); only
            workers of the same version take over each other's runs.

    Example::

        app = DurableApp(agent, db="sqlite:///runs.db")
        app.launch()
        anyio.run(app.serve)      # a worker: serve the queue until cancelled
    """

    def __init__(
        self,
        target: Agent | Runnable[Any, Any],
        *,
        db: str,
        name: str = "pyeino",
        queue: str = DEFAULT_QUEUE,
        worker_concurrency: int | None = 8,
        global_concurrency: int | None = None,
        executor_id: str | None = None,
        heartbeat_interval: float = 1.0,
        dead_after: float = 5.0,
        resume_timeout: float = 7 * 24 * 3600,
        polling_interval: float = 0.1,
        application_version: str | None = None,
    ) -> None:
        global _app
        if _app is not None:
            raise RuntimeError("one DurableApp per process: DBOS is a process-wide singleton (shut the other down)")
        if not isinstance(target, Runnable):
            durable_agent(target)
        self.target = target
        self.db = db
        self.queue = queue
        self.executor_id = executor_id or _default_executor_id()
        self.resume_timeout = resume_timeout
        refuse_pickled_rows()
        config: DBOSConfig = {
            "name": name,
            "system_database_url": db,
            "executor_id": self.executor_id,
            "serializer": JsonSerializer(),
            "notification_listener_polling_interval_sec": 0.05,
            "log_level": os.environ.get("PYEINO_DBOS_LOG_LEVEL", "WARNING"),
        }
        if application_version is not None:
            config["application_version"] = application_version
        _register_workflow()
        DBOS(config=config)
        # DBOS dequeues from every queue its application registered in the database: a worker that served
        # another agent's queue too would run that agent's runs with this agent. It serves its own queue only.
        DBOS.listen_queues([queue])
        self._queue_options: dict[str, Any] = {
            "worker_concurrency": worker_concurrency,
            "global_concurrency": global_concurrency,
            "polling_interval_sec": polling_interval,
        }
        self.liveness = Liveness(
            db, self.executor_id, recover=self._recover, interval=heartbeat_interval, dead_after=dead_after
        )
        self._launched = False
        _app = self

    def __repr__(self) -> str:
        state = "launched" if self._launched else "not launched"
        return f"DurableApp({type(self.target).__qualname__}, queue={self.queue!r}, {self.executor_id!r}, {state})"

    def launch(self) -> None:
        """Launch DBOS (creating its tables if new, recovering this executor id's own pending runs), write this
        worker's first heartbeat, then start serving the queue.

        The heartbeat comes first: a worker that dies before it has a heartbeat row holds no queued run (the
        others would never see that it died). N workers may launch at once on a new database.
        """
        DBOS.launch()
        self.liveness.setup()
        self.liveness.beat()
        self._launched = True
        DBOS.register_queue(self.queue, **self._queue_options)

    def shutdown(self) -> None:
        """Stop serving, let the other workers take over what is left, and destroy DBOS (idempotent)."""
        global _app
        DBOS.destroy(destroy_registry=False)  # first: no run of this worker goes on once others may take it
        if self._launched:
            self.liveness.leave()
            self._launched = False
        self.liveness.close()
        if _app is self:
            _app = None

    async def serve(self) -> None:
        """Keep the heartbeat and the watch over the other workers until cancelled (the queue is served by
        DBOS's own threads from :meth:`launch` on)."""
        check_asyncio()
        await self.liveness.run()

    def _recover(self, executor_id: str) -> int:
        # DBOS's recovery of another executor's pending workflows (what its admin endpoint calls): back on
        # their queue, dequeued by whichever worker has room
        return len(DBOS._recover_pending_workflows([executor_id]))

    # ------------------------------------------------------------------------------------------------------
    # inside the workflow

    async def _execute(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        run_id = cast(str, DBOS.workflow_id)
        ledger = await Ledger.open()
        queue = payload.get("queue", self.queue)
        if queue != self.queue:  # submitted for another queue's agent: never answered by this one
            message = (
                f"run {run_id!r} was submitted to queue {queue!r} but reached worker {self.executor_id!r}, which "
                f"serves queue {self.queue!r} ({_target_name(self.target)}): refused, give each agent its own queue"
            )
            await _publish(ledger, DurableEvent(kind="error", error_type="DurableQueueError", error=message))
            await ledger.close(EVENTS_STREAM)
            raise DurableRunError(run_id, "DurableQueueError", message)
        ledger_token = current_ledger.set(ledger)
        sink_token = token_sink.set(_write_token)
        try:
            if isinstance(self.target, Runnable):
                with track_addresses():  # steps are named after the node they run in
                    return await self._run_graph(run_id, ledger, payload)
            return await self._run_agent(run_id, ledger, payload)
        finally:
            token_sink.reset(sink_token)
            current_ledger.reset(ledger_token)

    async def _run_agent(self, run_id: str, ledger: Ledger, payload: Mapping[str, Any]) -> dict[str, Any]:
        agent = cast(Agent, self.target)
        raw = payload.get("input")
        messages = [user_message(raw)] if isinstance(raw, str) else list(cast(list[Message], raw))
        # the checkpoint lives as long as this execution: a replay reaches the same pause and saves it again
        streaming = bool(payload.get("streaming"))
        runner = Runner(agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())
        run = runner.run(messages, checkpoint_id=run_id, session_values=payload.get("session_values") or None)
        last: Message | None = None
        while True:
            pending: list[dict[str, Any]] | None = None
            async with run:
                async for event in run:
                    durable = await from_agent_event(event)
                    await _publish(ledger, durable)
                    if durable.kind == "error":
                        await ledger.close(EVENTS_STREAM)
                        raise DurableRunError(run_id, durable.error_type or "Exception", durable.error or "")
                    if durable.kind == "interrupted":
                        pending = [i.model_dump(mode="json") for i in durable.interrupts]
                    elif durable.role == "assistant" and durable.message is not None:
                        last = durable.message
            if pending is None:
                break
            targets = await self._wait_for_resume(ledger, pending)
            if isinstance(targets, list):
                await ledger.close(EVENTS_STREAM)
                return {"status": "interrupted", "interrupts": targets}
            run = runner.resume(run_id, targets=targets)
        await ledger.close(EVENTS_STREAM)
        return {"status": "completed", "output": last, "session_values": json_value(dict(run.session_values))}

    async def _run_graph(self, run_id: str, ledger: Ledger, payload: Mapping[str, Any]) -> dict[str, Any]:
        target = cast(Runnable[Any, Any], self.target)
        # checkpoints for this execution only (as for agents): a replay reaches the same pause and saves it again
        graph: Runnable[Any, Any] = Runnable(replace(target._tables, checkpoint_store=InMemoryCheckPointStore()))
        x = payload.get("input")
        streaming = bool(payload.get("streaming"))
        opts: dict[str, Any] = {"checkpoint_id": run_id}
        while True:
            try:
                output = await _graph_once(graph, x, streaming, ledger, opts)
            except GraphInterrupt as exc:
                interrupts = [
                    DurableInterrupt(id=c.id, address=c.address, info=json_value(c.info))
                    for c in exc.info.interrupt_contexts
                    if c.is_root_cause
                ]
                await _publish(ledger, DurableEvent(kind="interrupted", interrupts=interrupts))
                targets = await self._wait_for_resume(ledger, [i.model_dump(mode="json") for i in interrupts])
                if isinstance(targets, list):
                    await ledger.close(EVENTS_STREAM)
                    return {"status": "interrupted", "interrupts": targets}
                opts = {"checkpoint_id": run_id, "resume": targets}
                continue
            except Exception as exc:
                error = DurableEvent(kind="error", error_type=type(exc).__qualname__, error=str(exc))
                await _publish(ledger, error)
                await ledger.close(EVENTS_STREAM)
                raise DurableRunError(run_id, error.error_type or "Exception", error.error or "") from None
            await ledger.close(EVENTS_STREAM)
            return {"status": "completed", "output": output}

    async def _wait_for_resume(
        self, ledger: Ledger, pending: list[dict[str, Any]]
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """Wait durably for the resume data of a pause; the targets re-keyed by this execution's interrupt ids,
        or the published interrupts when the wait timed out."""
        # interrupt ids are drawn anew by every execution; the ones published (and resumed by) are those of the
        # first, recorded here: a replay maps them to its own by address
        published = cast(list[dict[str, Any]], await ledger.step("pyeino.interrupts", _same, pending))
        targets = await ledger.recv(RESUME_TOPIC, self.resume_timeout)
        if targets is None:
            return published
        return _current_ids(cast(dict[str, Any], targets), published, pending)


def _target_name(target: object) -> str:
    name = getattr(target, "name", None)
    kind = "graph" if isinstance(target, Runnable) else "agent"
    return f"{kind} {name!r}" if isinstance(name, str) and name else f"a {type(target).__qualname__}"


async def _graph_once(
    graph: Runnable[Any, Any], x: Any, streaming: bool, ledger: Ledger, opts: Mapping[str, Any]
) -> Any:
    """One run of the graph to its end or its pause, its output published: each chunk of a streaming run as it
    comes (the output is their concatenation), the whole output of an invoke."""
    if not streaming:
        output = await graph.invoke(x, **opts)
        await _publish(ledger, DurableEvent(kind="output", output=json_value(output)))
        return output
    reader = await graph.stream(x, **opts)
    chunks: list[Any] = []
    try:
        async for chunk in reader:
            chunks.append(chunk)
            await _publish(ledger, DurableEvent(kind="output", output=json_value(chunk)))
    finally:
        await reader.aclose()
    return concat_items(chunks) if chunks else None


async def _publish(ledger: Ledger, event: DurableEvent) -> None:
    """Put ``event`` on the run's stream, once over all executions of the run."""
    value = event.model_dump(mode="json", exclude_none=True)
    source = "/".join(event.run_path) or event.kind
    keyed = value
    if event.interrupts:  # every execution draws new interrupt ids: the same pause is the same addresses
        keyed = {**value, "interrupts": [{k: v for k, v in i.items() if k != "id"} for i in value["interrupts"]]}
    await ledger.write(event_name(source, keyed), EVENTS_STREAM, value)


async def _same(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return value


def _current_ids(
    targets: dict[str, Any], published: list[dict[str, Any]], current: list[dict[str, Any]]
) -> dict[str, Any]:
    """Resume targets keyed by the published interrupt ids, re-keyed by this execution's ids (same addresses)."""
    address_of = {i["id"]: i["address"] for i in published}
    id_at = {i["address"]: i["id"] for i in current}
    return {id_at.get(address_of.get(k, ""), k): v for k, v in targets.items()}


_EXECUTION = uuid.uuid4().hex[:12]  # this process: a model call replayed elsewhere streams under another attempt


async def _write_token(chunk: Message) -> None:
    from adk._run import current_run

    run = current_run.get()
    event = token_event(
        chunk,
        agent_name=run.agent_name if run is not None else "",
        run_path=run.run_path if run is not None else (),
        internal=bool(step_scope.get()),  # inside an agent tool
        attempt=f"{_EXECUTION}:{DBOS.workflow_id}:{DBOS.step_id}",
    )
    await DBOS.write_stream_async(EVENTS_STREAM, event)
