"""``Runner``: run an agent and iterate its events as they happen (eino-semantics 4.5).

The Runner knows an agent only through the ``Agent`` protocol (``adk.agent``): it makes the run's session
(session values, root input, streaming mode) and returns an :class:`~adk.agent_run.AgentRun`, which calls
``agent.run(input, ctx)`` or, for a paused run, ``agent.resume(info, ctx)``, and hands the agent's events on.
Whoever receives a streaming event owns its stream (read it or close it). ``aclose()`` (or leaving an
``async for`` early, then closing) closes the agent's run and every event stream not yet handed out. An error
ends the run with exactly one event whose ``error`` is set.

**Interrupts and checkpoints** (eino-semantics 4.5-4.6). When the root agent pauses, its last event's
``action.interrupted`` is an :class:`~adk.events.AgentInterruptInfo`, and the run ends
(``termination_reason == "interrupted"``). With a checkpoint store and a ``checkpoint_id`` the Runner saves the
run (the agent's ``resume_state``, the session and the interrupt ids; see ``adk.checkpointing``) **before** that
event is yielded, and sets its ``checkpoint_id``; ``runner.resume(checkpoint_id, targets={interrupt_id: data})``
continues it, in this or any other process sharing the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adk.agent import Agent, RunSession, check_agent
from adk.agent_run import AgentRun
from adk.cancel import CancelController
from adk.checkpointing import _UNSET, CheckpointBinding
from adk.events import AgentInput, checked_messages
from adk.sessions import SessionRun, SessionStore
from adk.sessions.base import SessionHistory, Turn, check_session_id
from adk.telemetry import TelemetryHandler
from compose.callbacks import CallbackHandler
from compose.checkpoint import CheckPointStore, check_store
from compose.schema import Message, user_message

__all__ = ["Agent", "AgentRun", "Runner"]


class Runner:
    """Runs an agent: ``run(messages)`` / ``query(text)`` / ``resume(checkpoint_id)`` return an
    :class:`AgentRun`, an async iterator of the run's events.

    Args:
        agent: the agent (a ``ChatModelAgent``).
        enable_streaming: stream model output (events carry ``message_stream``s).
        checkpoint_store: where paused runs are saved (any ``CheckPointStore``: in memory, SQLite,
            PostgreSQL, or a store with only Eino's ``get``/``set``, whose checkpoints are then not deleted and
            whose resumes are not exclusive); needed for ``checkpoint_id=`` and ``resume``. A store lacking
            ``get`` or ``set`` (or having only one of ``claim``/``release``) raises ``GraphBuildError`` here.
        telemetry: handlers receiving the runtime events (see ``adk.telemetry``).
        callbacks: ``compose.callbacks`` handlers for every agent run and graph of a run (``compose.otel.OTelHandler``
            traces them), on top of the global ones.
        session_store: where conversations are kept (``adk.sessions``); needed for ``session_id=``.
        session_wait: seconds a run on a session waits for the run in flight on it to finish (0, the default:
            fail at once with ``SessionBusyError``; None: wait as long as it takes).

    Sessions (``adk.sessions``): ``run(..., session_id=id)`` runs on the conversation stored under ``id``: the
    agent sees its history followed by the new messages, and its session values start from the stored ones
    (under the call's); the run's new messages are appended, with its session values, when it completes, and
    not at all when it fails. A run that pauses keeps its messages with its checkpoint id; ``resume`` appends
    them with the resumed run's when it completes. The returned run is then a ``SessionRun`` (same interface).
        claim_stale_after: ``resume`` takes over a claim on the checkpoint not renewed for this many seconds
            (the worker that held it died mid-resume); None (default): the store's own ``claim_ttl`` (the SQL
            stores' claims expire once their owner stops renewing them; the in-memory store's never do).

    Session values (``adk.session_values``): every run has its own session, which starts from the runner's
    ``session_values`` (defaults for every run) updated with the call's ``session_values=``; agents, tools and
    hooks read and write it during the run, ``output_key`` writes into it, and ``run.session_values`` shows it
    after the run. A resumed run starts from the defaults with the values saved with its checkpoint on top.

    Checkpoints (Eino's runner): ``run(..., checkpoint_id=id)`` always starts a fresh run and, if it pauses,
    saves it under exactly ``id`` (replacing what was there) before yielding the interrupt event;
    ``resume(id, targets=...)`` continues it in this or any other process sharing the store. A resumed run
    that completes deletes its checkpoint; one that pauses again overwrites it; one that fails keeps it.

    Example::

        runner = Runner(agent, checkpoint_store=SQLiteCheckPointStore("runs.db"))
        async with runner.query("pay invoice 7", checkpoint_id="job-7") as run:
            async for event in run:
                if event.action is not None and event.action.interrupted is not None:
                    ids = event.action.interrupted.ids
        decisions = {i: ApprovalDecision(approved=True) for i in ids}
        async with runner.resume("job-7", targets=decisions) as run:
            async for event in run:
                ...
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        checkpoint_store: CheckPointStore | None = None,
        telemetry: Sequence[TelemetryHandler] = (),
        claim_stale_after: float | None = None,
        callbacks: Sequence[CallbackHandler] = (),
        session_store: SessionStore | None = None,
        session_wait: float | None = 0.0,
    ) -> None:
        if checkpoint_store is not None:
            check_store(checkpoint_store, where="Runner(checkpoint_store=...)")
        check_agent(agent, "Runner(agent)")
        self.agent = agent
        self.enable_streaming = enable_streaming
        self.checkpoint_store = checkpoint_store
        self.telemetry = tuple(telemetry)
        self.callbacks = tuple(callbacks)
        # a resume claim older than this (seconds) is taken over: its worker died mid-resume
        self.claim_stale_after = claim_stale_after
        self.session_values: dict[str, Any] = {}
        self.session_store = session_store
        self.session_wait = session_wait

    def __repr__(self) -> str:
        store = type(self.checkpoint_store).__name__ if self.checkpoint_store is not None else None
        return f"Runner({self.agent!r}, enable_streaming={self.enable_streaming}, checkpoint_store={store})"

    def _store(self, what: str) -> CheckPointStore:
        if self.checkpoint_store is None:
            raise ValueError(f"failed to {what}: the runner has no checkpoint store (Runner(checkpoint_store=...))")
        return self.checkpoint_store

    def run(
        self,
        messages: Sequence[Message],
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        skip_transfer_messages: bool = False,
        session_id: str | None = None,
        cancellable: bool = False,
    ) -> AgentRun | SessionRun:
        """Run the agent on ``messages``; iterate the result for the events.

        Args:
            messages: the conversation so far (with ``session_id``: the new messages of this turn).
            checkpoint_id: save the run under this id if it pauses (needs a checkpoint store).
            session_values: this run's session values, on top of the runner's ``session_values``.
            skip_transfer_messages: leave the transfer messages out of the history the agents of a multi-agent
                run are given (Eino's ``WithSkipTransferMessages``).
            session_id: run on the conversation stored under this id in the session store (see ``Runner``).
            cancellable: the run can be cancelled with ``run.cancel(...)`` (``adk.cancel``); on a session, a cancel
                that leaves a checkpoint keeps the turn pending under it, as a pause does.

        Raises:
            ValueError: ``checkpoint_id`` without a checkpoint store, ``session_id`` without a session store.
            TypeError: ``session_values`` is not a mapping.
        """
        new = checked_messages(messages, "Runner.run")
        if session_id is None:
            return self._start(new, checkpoint_id, session_values, skip_transfer_messages, cancellable=cancellable)
        store = self._sessions()
        check_session_id(session_id)
        self._session(session_values)  # a bad mapping fails here, not at the first event
        if checkpoint_id is not None:
            self._store("checkpoint a run")

        cancel = CancelController() if cancellable else None  # the session run's, handed to its agent run

        def start(history: list[Message], stored: dict[str, Any]) -> AgentRun:
            return self._start(
                history, checkpoint_id, session_values, skip_transfer_messages, stored, cancellable=cancel or False
            )

        return SessionRun.starting(
            store, session_id, new, start, wait=self.session_wait, checkpoint_id=checkpoint_id, cancel=cancel
        )

    def _start(
        self,
        messages: list[Message],
        checkpoint_id: str | None,
        session_values: Mapping[str, Any] | None,
        skip_transfer_messages: bool,
        stored: Mapping[str, Any] | None = None,
        *,
        cancellable: bool | CancelController = False,
    ) -> AgentRun:
        checkpoint = (
            CheckpointBinding(self._store("checkpoint a run"), checkpoint_id) if checkpoint_id is not None else None
        )
        # root_input: the Runner's own list (checked_messages or query made it): agents only read it
        session = self._session(session_values, stored, messages, checkpoint is not None, skip_transfer_messages)
        input = AgentInput(messages, self.enable_streaming)
        return AgentRun(self.agent, session, input=input, checkpoint=checkpoint, cancellable=cancellable)

    def _sessions(self) -> SessionStore:
        if self.session_store is None:
            raise ValueError("failed to run on a session: the runner has no session store (Runner(session_store=...))")
        return self.session_store

    def query(
        self,
        text: str,
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        skip_transfer_messages: bool = False,
        session_id: str | None = None,
        cancellable: bool = False,
    ) -> AgentRun | SessionRun:
        """Run the agent on one user message (see :meth:`run`)."""
        if session_id is None:  # the list is the Runner's own, of one Message: nothing to check
            return self._start(
                [user_message(text)], checkpoint_id, session_values, skip_transfer_messages, cancellable=cancellable
            )
        return self.run(
            [user_message(text)],
            checkpoint_id=checkpoint_id,
            session_values=session_values,
            skip_transfer_messages=skip_transfer_messages,
            session_id=session_id,
            cancellable=cancellable,
        )

    async def history(self, session_id: str) -> list[Turn]:
        """The turns of session ``session_id``, oldest first: each with its messages, the session values as they
        were after it, the checkpoint ids it paused under, and when it was appended.

        Raises:
            ValueError: the runner has no session store. TypeError: the store keeps no per-turn history.
        """
        return await self._history_store("history").turns(check_session_id(session_id))

    async def fork(self, session_id: str, *, at_turn: int, new_session_id: str) -> None:
        """Copy the first ``at_turn`` turns of ``session_id`` (messages and session values as of then) to a new
        session ``new_session_id``: "edit message k and regenerate" is ``fork(..., at_turn=k)`` then a query on
        the new session.

        Raises:
            SessionError: ``new_session_id`` exists, or ``at_turn`` is outside 0..the number of turns.
        """
        await self._history_store("fork").fork(
            check_session_id(session_id), at_turn=at_turn, new_session_id=new_session_id
        )

    def _history_store(self, what: str) -> SessionHistory:
        store = self._sessions()
        if not isinstance(store, SessionHistory):
            raise TypeError(f"{what}: {type(store).__qualname__} keeps no per-turn history (turns() and fork())")
        return store

    def _session(
        self,
        values: Mapping[str, Any] | None,
        stored: Mapping[str, Any] | None = None,
        root_input: list[Message] | None = None,
        resumable: bool = False,
        skip_transfer_messages: bool = False,
    ) -> RunSession:
        """A new run's session: the runner's defaults, then the session's stored values, then the call's."""
        session = dict(self.session_values)
        if stored:
            session.update(stored)
        if values is not None:
            if not isinstance(values, Mapping):
                raise TypeError(f"session_values must be a mapping of names to values, got {type(values).__qualname__}")
            session.update(values)
        return RunSession(
            session,
            root_input if root_input is not None else [],
            self.enable_streaming,
            self.telemetry,
            resumable,
            skip_transfer_messages,
            self.callbacks,
        )

    def resume(
        self,
        checkpoint_id: str,
        targets: Mapping[str, Any] | None = None,
        *,
        resume_all: Any = _UNSET,
        cancellable: bool = False,
    ) -> AgentRun | SessionRun:
        """Continue the run paused under ``checkpoint_id``; iterate the result for the rest of its events.

        Args:
            checkpoint_id: the id the run was saved under.
            targets: resume data by interrupt id (e.g. ``{id: ApprovalDecision(approved=True)}``); interrupts
                not named stay pending (they pause the run again). The streaming mode is the checkpoint's.
            resume_all: resume data for every interrupt of the checkpoint that ``targets`` does not name
                ("approve all": ``resume_all=ApprovalDecision(approved=True)``).
            cancellable: the resumed run can be cancelled with ``run.cancel(...)`` (``adk.cancel``).

        Raises:
            ValueError: the runner has no checkpoint store (here). From the first ``__anext__``:
                ``CheckpointNotFoundError`` (nothing under the id), ``CheckpointError`` (``reason`` ``"claimed"``:
                another resume holds it; ``"not_checkpoint"``, ``"digest"``, ``"kind"``, ``"fingerprint"``,
                ``"payload"``: corrupted, foreign or another agent's bytes), ``InterruptNotFoundError`` (also a
                ``ValueError``: a target id that is not one of the checkpoint's interrupts); with a session
                store, ``SessionBusyError`` (a run on the paused run's session is in flight).
        """
        store = self._store("resume")
        cancel = CancelController() if cancellable else None  # shared with the SessionRun, if one wraps the run

        def resume() -> AgentRun:
            binding = CheckpointBinding(
                store,
                checkpoint_id,
                resuming=True,
                targets=dict(targets or {}),
                stale_after=self.claim_stale_after,
                resume_all=resume_all,
            )
            session = self._session(None, resumable=True)
            return AgentRun(self.agent, session, checkpoint=binding, cancellable=cancel or False)

        if self.session_store is None:
            return resume()
        return SessionRun.resuming(self.session_store, checkpoint_id, resume, wait=self.session_wait, cancel=cancel)
