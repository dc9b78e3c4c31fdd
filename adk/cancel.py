"""Cancel a running agent at safe points (Eino's ``adk/cancel.go``; eino-semantics 4.9).

``runner.run(..., cancellable=True)`` (or ``query``/``resume``) starts a run that ``run.cancel(...)`` can stop::

    handle = run.cancel(mode="after_tool_calls", timeout=30)   # from any task, while another iterates the run
    outcome = await handle.wait()     # "cancelled", "timed_out_escalated" or "already_ended"

Modes (combinable as a set: the first safe point reached wins):

* ``"immediate"`` (the default): the model call or the tool calls in flight are cut off (a streaming model's
  event stream ends with :class:`~adk.errors.StreamCancelledError`), and the run stops at once. What finished is
  kept: tool calls that completed before the cancel do not run again on resume, the cut-off ones do.
* ``"after_chat_model"``: the run stops after the next model call that asks for tools, before those tools run.
  As in Eino (``react.go``) this safe point is on the tool-calls path only: a model call that gives the final
  answer ends the run, and the cancel reports ``"already_ended"``.
* ``"after_tool_calls"``: the run stops after the next round of tool calls has finished (all of them), before the
  next model call.

A safe-point cancel with a ``timeout`` escalates to immediate when its safe point is not reached in time (the
calls in flight are cut off when it passes). Calling ``cancel`` again joins the modes (immediate wins), keeps
the earliest deadline and makes the cancel recursive once any call asks.

The run ends with one event whose error is :class:`~adk.errors.AgentCancelledError`, carrying the interrupt
contexts; with a checkpoint store and a ``checkpoint_id`` the run was saved first, and ``runner.resume(id)``
continues it with nothing finished run again. A cancel that comes after the run ended (or while it ends on its
own) reports ``"already_ended"``. Interrupts while a cancel is pending are absorbed into the cancel (Eino): the
business interrupt fires again on resume.

**Recursive.** By default only the root agent stops at its safe points; an agent inside an agent tool or a
workflow agent does not see the cancel (an immediate cancel still cuts the agent tool's call off, and the inner
run starts afresh on resume). With ``recursive=True`` those agents stop at their own safe points (an immediate
cancel cuts off their calls, not the agent tool's), their pauses become the outer run's, and resume continues
each inner run where it stopped.

**One stop request.** Every agent answers the run's :class:`CancelLink` (a ``compose.interrupt.StopRequest``)
through its one hook, ``stops_here``: a ChatModelAgent's graph at each step boundary; a workflow agent between
two children, in any mode; any other agent (custom, ``RemoteA2AAgent``) through :func:`stoppable`, in the layer
that runs it: before its next event in any mode, or at once while it waits for one. Its iterator is then closed (a
remote task is cancelled) and it pauses with :data:`RESTART`: it runs afresh on resume. A hang-up (AG-UI, A2A's
``tasks/cancel``) is ``cancel("immediate", recursive=True)``.

**Cost.** Nothing for runs not started with ``cancellable=True`` (a check per superstep, model call and tool
call); a cancellable run runs each model call, tool call and model stream read in a cancel scope.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncGenerator, Awaitable, Collection, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

import anyio

from adk.errors import StreamCancelledError
from adk.events import AgentAction, AgentEvent, AgentInterruptInfo
from compose.errors import GraphInterrupt, StreamEnd
from compose.interrupt import InterruptCtx, InterruptSignal, StopRequest
from compose.lowlevel import ReaderRelay
from compose.schema import Message
from compose.stream import StreamReader

if TYPE_CHECKING:
    from adk.agent import AgentEvents

__all__ = ["CancelHandle", "CancelMode", "CancelOutcome"]

CancelMode = Literal["immediate", "after_chat_model", "after_tool_calls"]
CancelOutcome = Literal["cancelled", "timed_out_escalated", "already_ended"]
_MODES: frozenset[str] = frozenset(get_args(CancelMode))
_IMMEDIATE = frozenset({"immediate"})

T = TypeVar("T")

_RUNNING, _CANCELLING, _HANDLED, _DONE = range(4)

# the interrupt info of a call cut off by an immediate cancel (Eino names its safe points' interrupts so)
CANCEL_INFO = "CancelImmediate"
# the resume state of an agent a cancel cut off where it kept no state (:func:`stoppable`): it runs afresh
RESTART = {"kind": "pyeino.restart"}


class CancelHandle:
    """What ``run.cancel()`` returns: ``await handle.wait()`` reports how the cancel ended."""

    __slots__ = ("_controller", "_outcome")

    def __init__(self, controller: CancelController, outcome: CancelOutcome | None = None) -> None:
        self._controller = controller
        self._outcome = outcome

    def __repr__(self) -> str:
        return f"CancelHandle({self._outcome or self._controller.outcome()!r})"

    async def wait(self) -> CancelOutcome:
        """Wait until the cancel took effect or the run ended: ``"cancelled"``, ``"timed_out_escalated"`` (the
        safe point was not reached within the timeout: the run was cut off immediately, and still checkpointed)
        or ``"already_ended"`` (the run ended before the cancel took effect: completed, failed or closed)."""
        if self._outcome is not None:
            return self._outcome
        c = self._controller
        await c.finished()
        outcome = c.outcome()
        assert outcome is not None
        return outcome


class _Guard:
    """A call in flight in a cancel scope: a model call, a tool call or a model stream read."""

    __slots__ = ("container", "nested", "scope")

    def __init__(self, scope: anyio.CancelScope, nested: bool) -> None:
        self.scope = scope
        self.nested = nested
        self.container = False  # an agent tool's call: a recursive cancel reaches the agent inside, not the call


_current_guard: ContextVar[_Guard | None] = ContextVar("pyeino_cancel_guard", default=None)


class CancelController:
    """The cancel state of one cancellable Runner run, shared by every agent of the run (Eino's
    ``cancelContext``): running -> cancelling (``request``) -> handled (the root run ended with the cancel's
    error) or done (it ended otherwise)."""

    def __init__(self) -> None:
        self.state = _RUNNING
        self.modes: frozenset[str] = frozenset()
        self.recursive = False
        self.deadline = math.inf
        self.escalated = False
        self.timed_out = False
        self.guards: list[_Guard] = []
        self.nested_prefixes: list[tuple[str, ...]] = []
        self._ended: anyio.Event | None = None
        self.root = CancelLink(self, nested=False)

    def __repr__(self) -> str:
        state = ("running", "cancelling", "handled", "done")[self.state]
        return f"CancelController({state}, modes={sorted(self.modes)}, recursive={self.recursive})"

    # ------------------------------------------------------------------ requests

    def request(
        self, mode: CancelMode | Collection[CancelMode], timeout: float | None, recursive: bool
    ) -> CancelHandle:
        modes = frozenset((mode,) if isinstance(mode, str) else mode)
        unknown = sorted(modes - _MODES)
        if unknown or not modes:
            raise ValueError(f"cancel mode must be one or a set of {sorted(_MODES)}, got {mode!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"cancel timeout must be a positive number of seconds, got {timeout!r}")
        if self.state == _DONE:
            return CancelHandle(self, "already_ended")
        if self.state == _HANDLED:
            return CancelHandle(self, self.outcome())
        if self.state == _RUNNING:
            self.state = _CANCELLING
            self.modes = _IMMEDIATE if "immediate" in modes else modes
        elif "immediate" in modes or "immediate" in self.modes:
            if self.modes != _IMMEDIATE:
                self.escalated = True  # a safe-point cancel made immediate by a later call
            self.modes = _IMMEDIATE
        else:
            self.modes |= modes
        self.recursive |= recursive
        if timeout is not None and self.modes != _IMMEDIATE:
            self.deadline = min(self.deadline, anyio.current_time() + timeout)
        self._sync()
        return CancelHandle(self)

    def escalate(self, *, timed_out: bool) -> None:
        """Make the pending safe-point cancel immediate (its timeout passed)."""
        if self.state != _CANCELLING or self.modes == _IMMEDIATE:
            return
        self.modes = _IMMEDIATE
        self.escalated = True
        self.timed_out = timed_out
        self._sync()

    def applies(self, nested: bool) -> bool:
        """A cancel is pending and reaches an agent at this level."""
        return self.state == _CANCELLING and (self.recursive or not nested)

    def _targets(self, guard: _Guard) -> bool:
        return self.applies(guard.nested) and not (guard.container and self.recursive)

    def _sync(self) -> None:
        """Cut off the calls an immediate cancel reaches; give the others the timeout's deadline."""
        for g in list(self.guards):
            self._sync_guard(g)

    def _sync_guard(self, g: _Guard) -> None:
        if not self._targets(g):
            g.scope.deadline = math.inf
        elif self.modes == _IMMEDIATE:
            g.scope.cancel()
        else:
            g.scope.deadline = self.deadline

    # ------------------------------------------------------------------ the end of the run

    def handled(self) -> bool:
        """The root run ends with the cancel's error (False: no cancel is pending)."""
        if self.state != _CANCELLING:
            return False
        self.state = _HANDLED
        self._set_ended()
        return True

    def finish(self) -> None:
        """The root run ended (completed, failed, closed): a pending cancel came too late."""
        if self.state in (_RUNNING, _CANCELLING):
            self.state = _DONE
            self._set_ended()

    def _set_ended(self) -> None:
        self.guards.clear()
        if self._ended is not None:
            self._ended.set()

    async def finished(self) -> None:
        if self.state in (_HANDLED, _DONE):
            return
        if self._ended is None:
            self._ended = anyio.Event()
        await self._ended.wait()

    def outcome(self) -> CancelOutcome | None:
        if self.state == _DONE:
            return "already_ended"
        if self.state == _HANDLED:
            return "timed_out_escalated" if self.timed_out else "cancelled"
        return None


class Cancellable:
    """The ``cancel()`` of a Runner run (``AgentRun``, ``SessionRun``): a run started with ``cancellable=True``
    holds its :class:`CancelController` in ``_cancel`` (None otherwise) and names itself in ``_cancel_subject``."""

    __slots__ = ()

    _cancel: CancelController | None

    def _cancel_subject(self) -> str:
        raise NotImplementedError

    def cancel(
        self,
        mode: CancelMode | Collection[CancelMode] = "immediate",
        *,
        timeout: float | None = None,
        recursive: bool = False,
    ) -> CancelHandle:
        """Cancel the run (from any task, while another iterates it): see ``adk.cancel``.

        Args:
            mode: ``"immediate"`` (default), ``"after_chat_model"``, ``"after_tool_calls"``, or a set of them.
            timeout: seconds a safe-point cancel waits for its safe point before it is made immediate.
            recursive: reach the agents inside agent tools and workflow agents too.

        Returns:
            A :class:`CancelHandle`; ``await handle.wait()`` says how the cancel ended.

        Raises:
            ValueError: the run was not started with ``cancellable=True``; an unknown mode; a timeout not > 0.
        """
        if self._cancel is None:
            raise ValueError(
                f"{self._cancel_subject()} is not cancellable: start it with cancellable=True "
                "(runner.run/query/resume(..., cancellable=True))"
            )
        return self._cancel.request(mode, timeout, recursive)


class CancelLink(StopRequest):
    """An agent's view of the run's :class:`CancelController`: whether it is nested (inside an agent tool or a
    workflow agent), and the guards and safe points the agent kit's hooks call. It is the stop request of the
    agent's graph run (``compose.interrupt.StopRequest``): the graph asks it at each step boundary
    (``stops_here``), and its guards cut off the calls in flight (the engine does not: ``cuts_nodes``), so that a
    tool call that finished is kept."""

    __slots__ = ("ctl", "nested")
    cuts_nodes = False

    def __init__(self, ctl: CancelController, nested: bool) -> None:
        super().__init__()
        self.ctl = ctl
        self.nested = nested

    def __repr__(self) -> str:
        return f"CancelLink({self.ctl!r}, nested={self.nested})"

    def for_agent(self, addresses: Sequence[str]) -> CancelLink:
        """The view of the agent at ``addresses`` (nested when a workflow agent above it said so)."""
        if self.nested:
            return self
        n = len(addresses)
        for p in self.ctl.nested_prefixes:
            if n > len(p) and tuple(addresses[: len(p)]) == p:
                return CancelLink(self.ctl, nested=True)
        return self

    def for_children(self, addresses: Sequence[str]) -> CancelLink:
        """The view of the workflow agent at ``addresses``, whose children are nested (recursive cancels only)."""
        if tuple(addresses) not in self.ctl.nested_prefixes:
            self.ctl.nested_prefixes.append(tuple(addresses))
        return self.for_agent(addresses)

    def inner(self) -> CancelLink:
        """The view of the run inside an agent tool: nested; the tool's call becomes a container that a recursive
        cancel does not cut off (the inner run stops at its own safe points and pauses the call)."""
        g = _current_guard.get()
        if g is not None:
            g.container = True
            self.ctl._sync_guard(g)
        return CancelLink(self.ctl, nested=True)

    # ------------------------------------------------------------------ guards (cancellable runs only)

    async def guard(self, call: Awaitable[T]) -> T:
        """Await ``call`` in a cancel scope: an immediate cancel (or a safe-point cancel's passed timeout) cuts
        it off, and it raises an interrupt instead (the graph re-runs the node or tool on resume)."""
        ctl = self.ctl
        if ctl.modes == _IMMEDIATE and ctl.applies(self.nested):
            _discard(call)
            raise InterruptSignal(CANCEL_INFO)
        g = _Guard(anyio.CancelScope(), self.nested)
        ctl._sync_guard(g)
        ctl.guards.append(g)
        token = _current_guard.set(g)
        try:
            with g.scope:
                return await call
        finally:
            _current_guard.reset(token)
            if g in ctl.guards:
                ctl.guards.remove(g)
        # only our own cancel lands here: an outer cancellation propagates out of the scope
        ctl.escalate(timed_out=True)  # a deadline passed (a no-op for an immediate cancel)
        raise InterruptSignal(CANCEL_INFO)

    def model(self, model: Any) -> _GuardedModel:
        return _GuardedModel(model, self)

    def model_stream(self, reader: StreamReader[Message]) -> StreamReader[Message]:
        """A model stream whose reads an immediate cancel cuts off (both copies then end with the interrupt)."""
        return StreamReader.from_async_iterator(_GuardedStream(reader, self))

    def event_stream(self, reader: StreamReader[Message]) -> StreamReader[Message]:
        """The event's copy of a guarded model stream: a cut-off ends it with ``StreamCancelledError``."""
        return StreamReader.from_async_iterator(_EventSide(reader))

    # ------------------------------------------------------------------ safe points (between supersteps)

    def stops_here(self, last_nodes: list[str], next_nodes: list[str]) -> bool:
        """At a step boundary, the one check: whether the run stops here. Between agents (``next_nodes`` names one,
        ``agent:<name>``) nothing is in flight: any pending cancel stops. In a ChatModelAgent's graph: immediate at
        once; ``after_chat_model`` when the model just asked for tools; ``after_tool_calls`` after a tool round."""
        ctl = self.ctl
        if not ctl.applies(self.nested):
            return False
        if ctl.deadline != math.inf and ctl.modes != _IMMEDIATE and anyio.current_time() >= ctl.deadline:
            ctl.escalate(timed_out=True)  # the safe point was not reached in time
        modes = ctl.modes
        if modes == _IMMEDIATE or (next_nodes and next_nodes[0].startswith("agent:")):
            return True
        from adk.chat_model.react import CHAT_MODEL_NODE, TOOL_NODE

        return ("after_chat_model" in modes and last_nodes == [CHAT_MODEL_NODE] and next_nodes == [TOOL_NODE]) or (
            "after_tool_calls" in modes and last_nodes == [TOOL_NODE]
        )


def stoppable(events: AgentEvents, agent: Any, link: CancelLink, addresses: Sequence[str]) -> AgentEvents:
    """The events of the agent at ``addresses`` as a cancellable run drives them: as they are for a ChatModelAgent
    and agents running others (``runs_agents``), cut off as the module docstring says for any other agent."""
    if hasattr(events, "bind_root") or getattr(agent, "runs_agents", False):
        return events
    return _cut(events, link.for_agent(addresses), addresses)


async def _cut(events: AgentEvents, link: CancelLink, addresses: Sequence[str]) -> AsyncGenerator[AgentEvent, None]:
    here = [f"agent:{addresses[-1]}"]
    try:
        while True:
            if link.stops_here(here, here):
                info = "CancelAtTransition"
                break
            try:
                event: AgentEvent = await link.guard(events.__anext__())
            except StopAsyncIteration:
                return
            except InterruptSignal as signal:
                if signal.info != CANCEL_INFO:
                    raise
                info = CANCEL_INFO
                break
            yield event
    finally:
        with anyio.CancelScope(shield=True):
            await events.aclose()  # a remote agent's close cancels its remote task
    pause = AgentInterruptInfo(cancel_contexts(addresses, info), None, dict(RESTART))
    yield AgentEvent(action=AgentAction(interrupted=pause))


def cancel_contexts(addresses: Sequence[str], info: str) -> list[InterruptCtx]:
    """The one interrupt context of a run stopped where no graph paused (a workflow between children, a custom
    agent between events)."""
    return [InterruptCtx(uuid.uuid4().hex, ";".join(f"agent:{a}" for a in addresses), info)]


def _discard(call: Awaitable[Any]) -> None:
    close = getattr(call, "close", None)
    if close is not None:
        close()  # a coroutine never awaited: no "never awaited" warning


class _GuardedModel:
    """The user's model with each call in a cancel scope (a cancellable run's ``EventModel``)."""

    __slots__ = ("_inner", "_link")

    def __init__(self, inner: Any, link: CancelLink) -> None:
        self._inner = inner
        self._link = link

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Any:
        return await self._link.guard(self._inner.generate(messages, **opts))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> Any:
        return await self._link.guard(self._inner.stream(messages, **opts))


class _GuardedStream(ReaderRelay[Message]):
    """A model stream read in cancel scopes: cut off, it ends with the cancel interrupt (the graph's copy, read by
    the model node's post handler, then makes the node re-run on resume)."""

    __slots__ = ("_done", "_link")

    def __init__(self, reader: StreamReader[Message], link: CancelLink) -> None:
        self._reader = reader
        self._link = link
        self._done = False

    async def __anext__(self) -> Message:
        if self._done:
            raise StopAsyncIteration
        try:
            return await self._link.guard(self._reader.recv())
        except StreamEnd:
            self._done = True
            raise StopAsyncIteration from None
        except GraphInterrupt:
            self._done = True
            await self._reader.aclose()
            raise

    async def aclose(self) -> None:
        self._done = True
        await self._reader.aclose()


class _EventSide(ReaderRelay[Message]):
    """The event's copy of a guarded model stream: the cancel interrupt becomes ``StreamCancelledError``."""

    __slots__ = ()

    def __init__(self, reader: StreamReader[Message]) -> None:
        self._reader = reader

    async def __anext__(self) -> Message:
        try:
            return await self._reader.recv()
        except StreamEnd:
            raise StopAsyncIteration from None
        except GraphInterrupt:
            raise StreamCancelledError() from None
