"""``SessionRun``: a Runner run on a session, recording the run's new messages as its events pass by.

The wrapper sits around the run's event iterator (an ``AgentRun``) and changes nothing the consumer sees:

* before the run starts (its first ``__anext__``) it takes the session's lease (``SessionBusyError`` if another
  run holds it and ``Runner(session_wait=...)`` does not wait long enough) and loads the history; the agent
  gets the history followed by the new input, and the stored session values under the call's;
* it records every message event as it passes: a whole message as is; a streaming one by splitting its
  ``message_stream`` in two (``copy(2)``): the consumer gets one copy, the other is read once the run has
  ended (a failed model attempt's stream, ending with ``WillRetryError``, is not recorded);
* when the run completes (``"completed"`` or ``"exit"``) it appends the input and the recorded messages as one
  turn, with the run's session values, in one transaction, before the iteration ends; if that fails the run
  ends with one error event (``SessionLeaseLostError``, ``SessionStoreError``, ``SessionError``) and nothing
  was appended;
* when the run pauses with a checkpoint it keeps the turn so far as the checkpoint's pending turn before the
  interrupt event is delivered; ``runner.resume(checkpoint_id)`` finds it there, takes the lease again and
  appends the pending and the resumed messages as one turn when the resume completes;
* when the run fails, is closed early or pauses without a checkpoint it appends nothing and gives the lease up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

from adk.cancel import Cancellable
from adk.errors import AgentCancelledError, SessionError, StreamCancelledError, WillRetryError
from adk.events import AgentEvent
from adk.sessions.base import SessionLease, SessionStore
from compose.lowlevel import Closing
from compose.schema import Message
from compose.stream import StreamReader, concat

if TYPE_CHECKING:
    from adk.agent_run import AgentRun
    from adk.cancel import CancelController

__all__ = ["SessionRun"]

StartRun = Callable[[list[Message], dict[str, Any]], "AgentRun"]
"""Starts the agent run on the given messages with the session's stored values (the Runner's ``_start``)."""


class SessionRun(Cancellable, Closing, AsyncIterator[AgentEvent]):
    """A run on a session (``runner.run(..., session_id=...)``): the events of the agent's run, recorded.

    It has ``AgentRun``'s interface (``final_message``, ``termination_reason``, ``total_tokens``,
    ``session_values``, ``cancel()``, ``aclose()``, ``async with``); errors that stop it from starting
    (``SessionBusyError``, a resume's checkpoint errors) are raised by its first ``__anext__``, and nothing ran.
    A cancel that leaves a checkpoint keeps the turn pending under it, as a pause does, and ``runner.resume``
    appends it when it completes.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        wait: float | None,
        session_id: str | None = None,
        input: list[Message] | None = None,
        start: StartRun | None = None,
        checkpoint_id: str | None = None,
        resume: Callable[[], AgentRun] | None = None,
        cancel: CancelController | None = None,
    ) -> None:
        self._store = store
        self._wait = wait
        self.session_id = session_id
        self._input = input or []
        self._start = start
        self._checkpoint_id = checkpoint_id
        self._resume = resume
        self._run: AgentRun | None = None
        self._lease: SessionLease | None = None
        self._turn: list[Message] = []  # what the turn starts with: the input, or a resume's pending messages
        self._recorded: list[Message | StreamReader[Message]] = []
        self._queued: deque[AgentEvent] = deque()
        self._agent: tuple[str, tuple[str, ...]] = ("", ())  # who the last event came from (for an error event)
        self._reason: str | None = None  # set when the session, not the run, decided how it ended
        self._finished = False
        self._cancel = cancel  # a cancellable run's: handed to the agent run it starts (adk.cancel)

    @classmethod
    def starting(
        cls,
        store: SessionStore,
        session_id: str,
        input: list[Message],
        start: StartRun,
        *,
        wait: float | None,
        checkpoint_id: str | None = None,
        cancel: CancelController | None = None,
    ) -> SessionRun:
        """A new run on ``session_id`` with the ``input`` messages (saved under ``checkpoint_id`` if it pauses)."""
        return cls(
            store,
            wait=wait,
            session_id=session_id,
            input=input,
            start=start,
            checkpoint_id=checkpoint_id,
            cancel=cancel,
        )

    @classmethod
    def resuming(
        cls,
        store: SessionStore,
        checkpoint_id: str,
        resume: Callable[[], AgentRun],
        *,
        wait: float | None,
        cancel: CancelController | None = None,
    ) -> SessionRun:
        """The resume of the run paused under ``checkpoint_id``: a session run if the store keeps a pending
        turn under that id, else the plain resume."""
        return cls(store, wait=wait, checkpoint_id=checkpoint_id, resume=resume, cancel=cancel)

    def _cancel_subject(self) -> str:
        where = self.session_id if self.session_id is not None else self._checkpoint_id
        return f"run on session {where!r}"

    # ------------------------------------------------------------------------------------------------------
    # AgentRun's interface

    @property
    def final_message(self) -> Message | None:
        """The run's answer (see ``AgentRun.final_message``)."""
        return self._run.final_message if self._run is not None else None

    @property
    def termination_reason(self) -> str | None:
        """How the run ended (see ``AgentRun.termination_reason``; ``"error"`` when the append failed)."""
        if self._reason is not None:
            return self._reason
        return self._run.termination_reason if self._run is not None else None

    @property
    def total_tokens(self) -> int:
        """Token usage summed over the run's model calls."""
        return self._run.total_tokens if self._run is not None else 0

    @property
    def session_values(self) -> dict[str, Any]:
        """The run's session values (the stored ones, then the call's; what the run wrote)."""
        return self._run.session_values if self._run is not None else {}

    def __repr__(self) -> str:
        state = "finished" if self._finished else "running" if self._run is not None else "not started"
        where = self.session_id if self.session_id is not None else f"checkpoint {self._checkpoint_id!r}"
        return (
            f"SessionRun({where!r}, {state}, leased={self._lease is not None}, recorded={len(self._recorded)}, "
            f"run={self._run!r})"
        )

    def __aiter__(self) -> SessionRun:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._queued:
            return self._queued.popleft()
        if self._finished:
            raise StopAsyncIteration
        try:
            if self._run is None:
                await self._open()
            assert self._run is not None
            try:
                event = await self._run.__anext__()
            except StopAsyncIteration:
                await self._end()
                if self._queued:
                    return self._queued.popleft()
                raise
            return await self._record(event)
        except StopAsyncIteration:
            raise
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Stop the run: close it and the recorded streams, give the lease up; nothing is appended (idempotent)."""
        with anyio.CancelScope(shield=True):
            self._finished = True
            try:
                if self._run is not None:
                    await self._run.aclose()
                elif self._cancel is not None:
                    self._cancel.finish()  # it never started (e.g. the session was busy): a cancel came too late
            finally:
                await self._drop_recorded()
                while self._queued:
                    await self._queued.popleft().aclose()
                lease, self._lease = self._lease, None
                if lease is not None:
                    await self._store.release(lease)

    # ------------------------------------------------------------------------------------------------------

    async def _open(self) -> None:
        """Take the lease and start the run (errors propagate: no run started)."""
        if self._resume is not None:
            assert self._checkpoint_id is not None
            pending = await self._store.pending(self._checkpoint_id)
            if pending is not None:
                self.session_id = pending.session_id
                self._lease = await self._store.acquire(pending.session_id, wait=self._wait)
                self._turn = pending.messages
            self._run = self._resume()
            return
        assert self.session_id is not None and self._start is not None
        self._lease = await self._store.acquire(self.session_id, wait=self._wait)
        session = await self._store.load(self.session_id)
        self._turn = list(self._input)
        self._run = self._start([*session.messages, *self._input], session.values)

    async def _record(self, event: AgentEvent) -> AgentEvent:
        """Note the event's message (splitting a stream); keep the turn of a run that pauses here."""
        if self._lease is None:
            return event  # a plain resume: nothing to record
        self._agent = (event.agent_name, event.run_path)
        variant = event.message
        if variant is not None and not event.internal:  # an agent tool's inner events are not the conversation
            if variant.message is not None:
                self._recorded.append(variant.message)
            elif variant.message_stream is not None:
                mine, theirs = variant.message_stream.copy(2)
                variant.message_stream = theirs
                self._recorded.append(mine)
        paused = event.action.interrupted if event.action is not None else None
        held = paused.checkpoint_id if paused is not None else None
        if held is None and isinstance(event.error, AgentCancelledError):
            held = event.error.checkpoint_id  # a cancel's checkpoint: resumable like a pause
        if held is not None:
            try:
                messages = await self._messages()
                lease, self._lease = self._lease, None  # released by hold, whatever happens
                await self._store.hold(lease, held, [*self._turn, *messages])
            except SessionError as exc:
                await event.aclose()
                return self._failed(exc)
        return event

    async def _end(self) -> None:
        """The run ended: append its turn if it completed, else give the lease up."""
        self._finished = True
        lease = self._lease
        if lease is None:
            return
        assert self._run is not None
        if self._run.termination_reason not in ("completed", "exit"):
            self._lease = None
            await self._drop_recorded()
            await self._store.release(lease)
            return
        try:
            messages = await self._messages()
            self._lease = None
            await self._store.commit(
                lease, [*self._turn, *messages], self._run.session_values, pending=self._checkpoint_id
            )
        except SessionError as exc:
            self._queued.append(self._failed(exc))

    def _failed(self, exc: SessionError) -> AgentEvent:
        self._reason = "error"
        self._finished = True
        return AgentEvent(self._agent[0], self._agent[1], error=exc)

    async def _messages(self) -> list[Message]:
        """The recorded messages, streams concatenated (a retried model attempt's is left out, and so is an answer
        an immediate cancel cut off: its model call runs again on resume)."""
        recorded, self._recorded = self._recorded, []
        messages: list[Message] = []
        try:
            while recorded:
                item = recorded.pop(0)
                if isinstance(item, Message):
                    messages.append(item)
                    continue
                try:
                    messages.append(await concat(item))
                except (WillRetryError, StreamCancelledError):
                    continue
        finally:
            for item in recorded:
                if isinstance(item, StreamReader):
                    await item.aclose()
        return messages

    async def _drop_recorded(self) -> None:
        recorded, self._recorded = self._recorded, []
        for item in recorded:
            if isinstance(item, StreamReader):
                await item.aclose()
