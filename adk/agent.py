"""The ``Agent`` protocol: all the Runner, the workflow agents and ``AgentTool`` know of an agent
(eino-semantics 4.1; Eino's ``adk/interface.go``).

An agent has a ``name``, a ``description`` and ``run(input, ctx)`` returning its events as an async iterator
(:class:`AgentEvents`: ``__anext__`` and ``aclose``). ``ctx`` is the :class:`AgentContext` the caller made for it:
the run's shared :class:`RunSession` (session values, recorded history, usage) and the agent's ``run_path`` (agent
names from the root to this agent, its own last). A :class:`ResumableAgent` also has ``resume(info, ctx)``.

The boundary is one-directional: an agent pauses by ending its events with an interrupt event whose
``action.interrupted.resume_state`` holds what it needs to continue (JSON data: the Runner saves it with the
run's checkpoint); the Runner never looks inside it and hands it back as :attr:`ResumeInfo.state`.

A custom agent is a class with these members; an async generator is a fine ``run``::

    class Greeter:
        name, description = "greeter", "says hello"

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
            yield AgentEvent(output=AgentOutput(MessageVariant(False, assistant_message("hello"))))

    async for event in Runner(Greeter()).query("hi"):
        ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from adk.errors import StreamCancelledError, WillRetryError
from adk.events import AgentEvent, AgentInput, MessageVariant
from compose.schema import Message
from compose.stream import concat

if TYPE_CHECKING:
    from adk.telemetry import TelemetryHandler
    from compose.callbacks import CallbackHandler

__all__ = [
    "Agent",
    "AgentContext",
    "AgentEvents",
    "DirectEvents",
    "History",
    "RecordedEvent",
    "ResumableAgent",
    "ResumeInfo",
    "RunRoot",
    "RunSession",
    "check_agent",
]


@runtime_checkable
class AgentEvents(Protocol):
    """An agent run's events: iterate them; ``aclose()`` stops the run and closes what it holds (also the
    streams of events not handed out yet). An async generator is one."""

    def __aiter__(self) -> AsyncIterator[AgentEvent]: ...

    def __anext__(self) -> Any: ...

    async def aclose(self) -> None: ...


class RunRoot(Protocol):
    """The Runner's run, as an agent run that hands its events out through it sees it (:class:`DirectEvents`)."""

    async def hand_out(self, event: AgentEvent) -> AgentEvent:
        """An event with an error or an action, on its way out: the run's end or pause (saved first)."""
        ...

    async def end_events(self) -> AgentEvent:
        """The agent's events ended: raises ``StopAsyncIteration`` (or returns a last error event)."""
        ...

    async def aclose(self) -> None: ...


class DirectEvents(AgentEvents, Protocol):
    """Agent events that the Runner's run hands out directly: the consumer's ``__anext__`` is theirs, and they
    call the root's ``hand_out`` for events with an error or an action and ``end_events`` at their end (one frame
    of the agent layer per parked run; a ChatModelAgent's run is one). The Runner calls ``bind_root`` first."""

    def __anext__(self) -> Awaitable[AgentEvent]: ...

    @property
    def started(self) -> bool:
        """The first event has been asked for."""
        ...

    def bind_root(self, root: RunRoot) -> None: ...


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """What the history needs of one event recorded in the run's session.

    Attributes:
        agent_name: the agent that emitted it.
        message: its whole message (a stream already concatenated), or ``None`` when it has no message or its
            stream ended with ``WillRetryError`` (a failed model attempt that is retried: Eino skips it).
        role: the role of the event's message variant (``MessageVariant.role``), ``None`` without one.
        transfer: the event carries a transfer-to-agent action.
    """

    agent_name: str
    message: Message | None
    role: Literal["assistant", "tool"] | None = None
    transfer: bool = False

    @classmethod
    def from_event(cls, event: AgentEvent, message: Message | None) -> RecordedEvent:
        """The record of ``event``, given its whole message (``await event.message.get_message()``, or
        ``None`` as described on :attr:`message`)."""
        variant = event.message
        return cls(
            agent_name=event.agent_name,
            message=message,
            role=variant.role if variant is not None else None,
            transfer=event.action is not None and event.action.transfer_to_agent is not None,
        )


@dataclass(slots=True, eq=False)
class _Record:
    """One recorded event: its agent and action flags, its message (a stream copy until first read) and its
    place in the run's order (lanes joined after a parallel agent are merged by it)."""

    agent_name: str
    variant: MessageVariant | None
    transfer: bool
    seq: int
    resolved: RecordedEvent | None = None

    async def resolve(self) -> RecordedEvent:
        if self.resolved is not None:
            return self.resolved
        message: Message | None = None
        variant = self.variant
        if variant is not None:
            if variant.message is None and variant.message_stream is not None:
                stream, variant.message_stream = variant.message_stream, None
                try:
                    variant.message = await concat(stream)
                except (WillRetryError, StreamCancelledError):  # a failed (or cut-off) model attempt: not history
                    variant.message = None
            message = variant.message
        self.resolved = RecordedEvent(self.agent_name, message, variant.role if variant else None, self.transfer)
        return self.resolved


class History:
    """The events recorded for later agents' input (Eino's session events), as a chain of lanes: a lane sees its
    parent's records, then its own (a parallel agent gives each child a lane and joins them afterwards, in the
    order the events were recorded). ``mirror`` also receives every record (an isolated history that still
    feeds its caller's)."""

    __slots__ = ("_counter", "mirror", "parent", "records")

    def __init__(
        self, parent: History | None = None, *, mirror: History | None = None, counter: list[int] | None = None
    ) -> None:
        self.parent = parent
        self.mirror = mirror
        self.records: list[_Record] = []
        root = parent or mirror
        self._counter: list[int] = counter if counter is not None else root._counter if root is not None else [0]

    def fork(self) -> History:
        """A lane on top of this history."""
        return History(self)

    def isolated(self) -> History:
        """A history of its own (seeing none of this one) whose records this one receives too."""
        return History(mirror=self)

    def record(self, event: AgentEvent) -> None:
        """Keep ``event`` (its stream is copied: the caller's event keeps the other copy)."""
        variant = event.message
        transfer = event.action is not None and event.action.transfer_to_agent is not None
        self._counter[0] += 1
        seq = self._counter[0]
        self._keep(event.agent_name, variant, transfer, seq)
        if self.mirror is not None:
            self.mirror._keep(event.agent_name, variant, transfer, seq)

    def _keep(self, agent_name: str, variant: MessageVariant | None, transfer: bool, seq: int) -> None:
        """Append the record of one event: a streamed message keeps a copy of its stream (the event keeps the
        other), a whole message shares the event's variant (nothing in it changes once it is sent)."""
        if variant is not None and variant.message_stream is not None:
            if variant.message is None:
                mine, theirs = variant.message_stream.copy(2)
                variant.message_stream = theirs
                variant = MessageVariant(True, None, mine, variant.role, variant.tool_name)
            else:
                variant = MessageVariant(variant.is_streaming, variant.message, None, variant.role, variant.tool_name)
        self.records.append(_Record(agent_name, variant, transfer, seq))

    def restore(self, records: Sequence[RecordedEvent]) -> None:
        """Put saved records back (a resumed run)."""
        for r in records:
            variant = MessageVariant(False, r.message, None, r.role or "assistant") if r.message is not None else None
            self._counter[0] += 1
            self.records.append(_Record(r.agent_name, variant, r.transfer, self._counter[0]))

    def join(self, lanes: Sequence[History]) -> None:
        """Commit the lanes' own records here, in the order they were recorded."""
        merged = sorted((r for lane in lanes for r in lane.records), key=lambda r: r.seq)
        self.records.extend(merged)
        for lane in lanes:
            lane.records = []

    async def own(self) -> list[RecordedEvent]:
        """This lane's own records, messages whole (what a paused lane saves)."""
        return [await r.resolve() for r in self.records]

    async def events(self) -> list[RecordedEvent]:
        """Every record this lane sees, oldest first, messages whole."""
        above = await self.parent.events() if self.parent is not None else []
        return above + await self.own()

    async def aclose(self) -> None:
        """Close the recorded streams nobody read (the run is over)."""
        for r in self.records:
            if r.variant is not None and r.variant.message_stream is not None:
                stream, r.variant.message_stream = r.variant.message_stream, None
                await stream.aclose()


@dataclass(slots=True, eq=False)
class RunSession:
    """What every agent of one Runner run shares (Eino's ``runSession`` and ``runContext``).

    Attributes:
        values: the session values (``adk.session_values``; ``output_key`` writes here).
        root_input: the messages the run started with.
        enable_streaming: whether model output streams.
        telemetry: handlers receiving the runtime events.
        resumable: the run is checkpointed when it pauses (it has a checkpoint id and store).
        skip_transfer_messages: leave transfer messages out of the history agents are given.
        callbacks: the ``compose.callbacks`` handlers given to the Runner (each ChatModelAgent run reports to
            them as ``RunInfo(name, class, "Agent")`` and hands them to its graph).
        total_tokens: token usage summed over every agent's model calls.
        final_message: the answer of the agent that ended last.
        history: the recorded events (flow agents record their agent's own events, for the agents after it).
    """

    values: dict[str, Any] = field(default_factory=dict)
    root_input: list[Message] = field(default_factory=list)
    enable_streaming: bool = False
    telemetry: tuple[TelemetryHandler, ...] = ()
    resumable: bool = False
    skip_transfer_messages: bool = False
    callbacks: tuple[CallbackHandler, ...] = ()
    total_tokens: int = 0
    final_message: Message | None = None
    _history: History | None = field(default=None, repr=False)  # made when first asked for (``history``)
    _lanes: list[History] | None = None
    cancel: Any = None  # an ``adk.cancel.CancelLink`` when the run is cancellable (``cancellable=True``)
    # the Runner has just passed its run's entry cancellation check and awaited nothing since: the root agent's
    # own entry need not check again (one check per run); cleared once the first event is out
    entry_checked: bool = field(default=False, repr=False)

    @property
    def history(self) -> History:
        """The recorded events (flow agents record their agent's own events, for the agents after it)."""
        if self._history is None:
            self._history = History()
        return self._history

    def track(self, history: History) -> History:
        """Remember a lane or isolated history so its unread streams are closed with the run."""
        if self._lanes is None:
            self._lanes = []
        self._lanes.append(history)
        return history

    async def aclose(self) -> None:
        """Close the recorded streams nobody read (the run is over)."""
        if self._history is not None:
            await self._history.aclose()
        if self._lanes is not None:
            for lane in self._lanes:
                await lane.aclose()


@dataclass(frozen=True, slots=True)
class AgentContext:
    """What an agent is run with: the run's session, its run path (agent names from the root, its own last),
    its address (the agent segments of its interrupts' addresses: a sequential agent's children have run paths
    that accumulate the children before them, but each its own address) and the history it records into and
    reads (the session's, or a parallel lane's)."""

    session: RunSession
    run_path: tuple[str, ...]
    address: tuple[str, ...] = ()
    history: History | None = None

    @classmethod
    def root(cls, agent_name: str, session: RunSession | None = None) -> AgentContext:
        """The context of the run's root agent (a fresh session when none is given)."""
        path = (agent_name,)
        return cls(session if session is not None else RunSession(), path, path)

    def child(self, agent_name: str, *, run_path: tuple[str, ...] | None = None) -> AgentContext:
        """The context of an agent this one runs (``run_path``: the child's own, when it is not this one's plus
        the child's name)."""
        path = run_path if run_path is not None else (*self.run_path, agent_name)
        return AgentContext(self.session, path, (*self.addresses, agent_name), self.history)

    def with_history(self, history: History) -> AgentContext:
        return AgentContext(self.session, self.run_path, self.address, history)

    @property
    def addresses(self) -> tuple[str, ...]:
        return self.address or self.run_path

    @property
    def records(self) -> History:
        """The history this agent records into and reads."""
        if self.history is not None:
            return self.history
        made = self.session._history  # the session's, once made (``RunSession.history`` makes it)
        return made if made is not None else self.session.history

    @property
    def agent_name(self) -> str:
        return self.run_path[-1] if self.run_path else ""


@dataclass(frozen=True, slots=True)
class ResumeInfo:
    """What a resumed agent is given (Eino's ``ResumeInfo``).

    Attributes:
        state: the ``resume_state`` the agent put on its interrupt event (JSON data, as saved).
        targets: resume data by interrupt id (the ids of the run's interrupts, all of them; an agent passes its
            children the ones that are theirs).
        enable_streaming: the run's streaming mode (the checkpoint's).
    """

    state: Any
    targets: Mapping[str, Any] = field(default_factory=dict)
    enable_streaming: bool = False


class Agent(Protocol):
    """A named agent the Runner, workflow agents and ``AgentTool`` can run."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents: ...


@runtime_checkable
class ResumableAgent(Agent, Protocol):
    """An agent whose paused run can continue: ``resume`` gets back the state of its interrupt event."""

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AgentEvents: ...


def check_agent(agent: Any, where: str) -> None:
    """Raise ``TypeError`` naming ``where`` unless ``agent`` has a non-empty ``name`` and a ``run`` method."""
    name = getattr(agent, "name", None)
    if not isinstance(name, str) or not name or not callable(getattr(agent, "run", None)):
        raise TypeError(
            f"{where}: {type(agent).__qualname__} is not an agent (an agent has a non-empty str name, a description "
            "and run(input, ctx): see adk.agent.Agent)"
        )
