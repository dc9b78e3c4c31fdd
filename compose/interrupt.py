"""Interrupts and resume (eino-semantics 1.9).

A run can pause:

* statically, before or after listed nodes (``compile(interrupt_before=[...], interrupt_after=[...])``);
* from inside a node, a state handler or a tool: ``interrupt(info)`` or ``stateful_interrupt(info, state)`` raise
  an ``InterruptSignal``; the node is re-run on resume, where ``get_interrupt_state()`` returns what it saved and
  ``get_resume_context()`` tells whether the caller targeted it with data.

The run then raises ``GraphInterrupt`` whose ``info`` is an :class:`InterruptInfo`. With a checkpoint store and a
``checkpoint_id`` the run's state is saved first, and calling the graph again with the same ``checkpoint_id``
resumes it (``resume={interrupt_id: data}`` targets interrupts; ``state_modifier`` edits the restored state).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

from compose.errors import GraphInterrupt

__all__ = [
    "ExternalInterrupt",
    "InterruptCtx",
    "InterruptInfo",
    "InterruptSignal",
    "ResumeContext",
    "StopRequest",
    "get_interrupt_state",
    "get_resume_context",
    "get_resume_data",
    "interrupt",
    "stateful_interrupt",
]


@dataclass(slots=True)
class InterruptCtx:
    """One interrupt as the user sees it: a root cause (or an enclosing composite) with a stable ``id`` to resume
    by and an ``address`` such as ``runnable:root;node:tools;tool:get_weather:call_1``."""

    id: str
    address: str
    info: Any = None
    is_root_cause: bool = True
    parent: InterruptCtx | None = None


@dataclass(slots=True)
class InterruptInfo:
    """Why and where a run paused."""

    state: Any = None
    before_nodes: list[str] = field(default_factory=list)
    after_nodes: list[str] = field(default_factory=list)
    rerun_nodes: list[str] = field(default_factory=list)
    rerun_nodes_extra: dict[str, Any] = field(default_factory=dict)
    sub_graphs: dict[str, InterruptInfo] = field(default_factory=dict)
    interrupt_contexts: list[InterruptCtx] = field(default_factory=list)


class InterruptSignal(GraphInterrupt):
    """Raised inside a node, handler or tool to pause the run there (see ``interrupt``). Composite nodes (a
    ToolsNode) raise one whose ``subs`` are their children's signals."""

    def __init__(
        self,
        info: Any = None,
        *,
        state: Any = None,
        has_state: bool = False,
        subs: list[InterruptSignal] | None = None,
        segment: str = "",
        id: str | None = None,
    ) -> None:
        super().__init__(info)
        self.state = state
        self.has_state = has_state
        self.subs = list(subs or [])
        self.segment = segment  # e.g. "tool:get_weather:call_1", set by the composite that caught it
        self.id = id or str(uuid.uuid4())

    def __str__(self) -> str:
        return f"interrupt({self.info!r})"


class StopRequest:
    """The one way to stop a run from outside (Eino's ``WithGraphInterrupt``): pass it as ``external_interrupt=``
    to a run, then call ``request()`` (Eino's spelling: ``interrupt()``) from any task.

    Three deadlines, one request: ``request()`` lets the running nodes finish and pauses the run at the next step
    boundary (``after_nodes``); ``request(grace_period=d)`` cuts off the nodes still running after ``d`` seconds,
    which re-run on resume with their original input (``rerun_nodes``); ``request(grace_period=0)`` cuts them off
    at once. A run given a stop request keeps every running node's input for that. In DAG mode
    (``all_predecessor``) the run also stops starting new nodes at once.

    The engine asks ``stops_here(last_nodes, next_nodes)`` at each step boundary; a subclass may stop at safe
    points of its own and cut off its own calls (``cuts_nodes = False``: the agent kit's ``run.cancel``,
    ``adk.cancel``). ``ExternalInterrupt`` is the same class.

    Example::

        stop = StopRequest()
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(runnable.invoke, x, checkpoint_id="job-1", external_interrupt=stop))
            ...
            stop.request(grace_period=5)
    """

    __slots__ = ("_events", "grace_period", "requested")
    cuts_nodes: ClassVar[bool] = True  # the engine cuts off running nodes once the grace period is over

    def __init__(self) -> None:
        self.requested = False
        self.grace_period: float | None = None
        self._events: list[Any] = []

    def request(self, grace_period: float | None = None) -> None:
        """Ask the run to stop (idempotent; the first grace period given wins)."""
        if not self.requested:
            self.requested = True
            self.grace_period = grace_period
        for event in self._events:
            event.set()

    interrupt = request

    def stops_here(self, last_nodes: list[str], next_nodes: list[str]) -> bool:
        """At a step boundary (the nodes of the step before, empty before the first; the nodes about to run):
        whether the run pauses here, its waiting inputs kept for the checkpoint (END reached first wins)."""
        return self.requested

    def _event(self) -> Any:
        import anyio

        event = anyio.Event()
        if self.requested:
            event.set()
        self._events.append(event)
        return event

    def __repr__(self) -> str:
        return f"{type(self).__name__}(requested={self.requested}, grace_period={self.grace_period})"


ExternalInterrupt = StopRequest


def interrupt(info: Any = None) -> InterruptSignal:
    """Pause the run here; the node runs again on resume. Use as ``raise interrupt(info)``.

    Example::

        async def review(draft: str) -> str:
            ctx = get_resume_context()
            if not ctx.is_target:
                raise interrupt({"draft": draft})
            return ctx.data
    """
    return InterruptSignal(info)


def stateful_interrupt(info: Any, state: Any) -> InterruptSignal:
    """Like ``interrupt`` but saves ``state``; on resume ``get_interrupt_state()`` returns it."""
    return InterruptSignal(info, state=state, has_state=True)


@dataclass(frozen=True, slots=True)
class ResumeContext:
    """What the resuming caller said about this interrupt: targeted or not, and with which data."""

    is_target: bool = False
    has_data: bool = False
    data: Any = None


@dataclass(frozen=True, slots=True)
class _Resumed:
    """Set around a node (or tool) that is re-run after an interrupt."""

    was_interrupted: bool
    has_state: bool
    state: Any
    context: ResumeContext
    record: Any = None  # the saved SignalRecord (a composite reads its children's records)
    resume: Mapping[str, Any] = field(default_factory=dict)  # all resume data of the call


_resumed: ContextVar[_Resumed | None] = ContextVar("pyeino_resumed", default=None)

# The address of the node running now (``runnable:G;node:n``) in runs that track it, "" at the top of such a
# run, None elsewhere: setting it costs per node, so only runs started inside ``track_addresses`` pay.
_node_address: ContextVar[str | None] = ContextVar("pyeino_node_address", default=None)


def current_address() -> str | None:
    """The address of the graph node running now (a sub-graph's nodes nested: ``runnable:G;node:sub;node:n``),
    in a run started inside :func:`track_addresses`; None in other runs. (Eino's ``GetCurrentAddress``; durable
    runs name their steps with it.)"""
    return _node_address.get()


@contextmanager
def track_addresses() -> Iterator[None]:
    """Graph runs started inside track the address of the node running (:func:`current_address`)."""
    token = _node_address.set(_node_address.get() or "")
    try:
        yield
    finally:
        _node_address.reset(token)


def get_interrupt_state() -> tuple[bool, bool, Any]:
    """``(was_interrupted, has_state, state)`` for the node or tool running now."""
    r = _resumed.get()
    if r is None:
        return False, False, None
    return r.was_interrupted, r.has_state, r.state


def get_resume_context() -> ResumeContext:
    """Whether the caller targeted this node's (or a descendant's) interrupt, and the data it gave."""
    r = _resumed.get()
    return r.context if r is not None else ResumeContext()


def get_resume_data() -> Mapping[str, Any]:
    """All the resume data the caller gave, by interrupt id, inside a node or tool that is re-run after an
    interrupt (empty otherwise): for a node or tool that resumes a nested run of its own (an agent tool passes
    its inner agent the data of the inner interrupts)."""
    r = _resumed.get()
    return r.resume if r is not None else {}
