"""InMemorySessionStore: conversations in a dict, for tests and single-process services."""

from __future__ import annotations

import builtins
import dataclasses
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.lowlevel

from adk.errors import SessionLeaseLostError
from adk.sessions.base import (
    HistoryLimit,
    PendingTurn,
    Session,
    SessionLease,
    TokenCounter,
    Turn,
    acquire_waiting,
    approximate_tokens,
    check_fork,
    check_session_id,
    decode_message,
    decode_messages,
    decode_values,
    encode_message,
    encode_messages,
    encode_values,
    turn_time,
)
from compose.lowlevel import ClosingStore
from compose.schema import Message

__all__ = ["InMemorySessionStore"]


@dataclass(slots=True)
class _Row:
    seq: int
    role: str
    tokens: int
    data: str  # the message as JSON: what a caller later does to a loaded message does not touch the store
    turn: int = 0


@dataclass(slots=True)
class _TurnMeta:
    values: str  # the session values after the turn, as JSON
    pauses: list[str]
    created_at: float


@dataclass(slots=True)
class _Session:
    rows: list[_Row] = field(default_factory=list)
    values: str = "{}"
    next_seq: int = 0
    turns: int = 0
    owner: str | None = None
    updated: int = 0
    meta: list[_TurnMeta] = field(default_factory=list)  # per turn


class InMemorySessionStore(ClosingStore):
    """Sessions in memory (lost with the process); messages and values are kept as JSON like the other stores.

    Leases never expire here: they live and die with the process that holds them.

    Args:
        keep: trim each session's stored history to this limit at every append (None: keep everything).
        token_counter: counts a message's tokens for ``max_tokens`` limits.

    Example:
        >>> import anyio
        >>> from compose.schema import user_message
        >>> async def main() -> list[str]:
        ...     store = InMemorySessionStore()
        ...     lease = await store.acquire("user-42")
        ...     await store.commit(lease, [user_message("hi")], {"lang": "en"})
        ...     return [m.content for m in (await store.load("user-42")).messages]
        >>> anyio.run(main)
        ['hi']
    """

    def __init__(self, *, keep: HistoryLimit | None = None, token_counter: TokenCounter = approximate_tokens) -> None:
        self.keep = keep
        self.token_counter = token_counter
        self._sessions: dict[str, _Session] = {}
        self._pending: dict[str, tuple[str, str]] = {}  # checkpoint id -> (session id, messages JSON list)
        self._clock = 0

    def __repr__(self) -> str:
        held = sum(1 for s in self._sessions.values() if s.owner is not None)
        return f"<InMemorySessionStore sessions={len(self._sessions)} leased={held} pending={len(self._pending)}>"

    async def acquire(self, session_id: str, *, wait: float | None = 0.0) -> SessionLease:
        """Take the session's lease (see ``SessionStore.acquire``)."""
        check_session_id(session_id)
        owner = uuid.uuid4().hex

        async def attempt() -> str | None:
            await anyio.lowlevel.checkpoint()
            session = self._sessions.setdefault(session_id, _Session())
            if session.owner is None or session.owner == owner:
                session.owner = owner
                return None
            return "another run of this process"

        await acquire_waiting(session_id, wait, attempt)
        return SessionLease(session_id, owner)

    async def release(self, lease: SessionLease) -> None:
        """Give the lease up without appending."""
        await anyio.lowlevel.checkpoint()
        session = self._sessions.get(lease.session_id)
        if session is not None and session.owner == lease.owner:
            session.owner = None
            if session.turns == 0:
                del self._sessions[lease.session_id]

    async def load(self, session_id: str, *, limit: HistoryLimit | None = None) -> Session:
        """The session's messages (the newest within ``limit``) and values."""
        await anyio.lowlevel.checkpoint()
        session = self._sessions.get(session_id)
        if session is None:
            return Session(session_id)
        rows = session.rows
        start = None if limit is None else limit.start((r.seq, r.role, r.tokens) for r in reversed(rows))
        if start is not None:
            rows = [r for r in rows if r.seq >= start]
        return Session(session_id, [decode_message(r.data) for r in rows], decode_values(session.values), session.turns)

    async def commit(
        self,
        lease: SessionLease,
        messages: Sequence[Message],
        values: Mapping[str, Any],
        *,
        pending: str | None = None,
    ) -> None:
        """Append ``messages`` as one turn, store ``values``, release the lease (see ``SessionStore.commit``)."""
        await anyio.lowlevel.checkpoint()
        session = self._owned(lease)
        encoded_values = encode_values(lease.session_id, values)
        rows = [
            _Row(session.next_seq + i, m.role, self.token_counter(m), encode_message(m), session.turns)
            for i, m in enumerate(messages)
        ]
        # everything that can fail is done: the rest cannot, so the turn is appended whole or not at all
        session.rows.extend(rows)
        session.next_seq += len(rows)
        session.turns += 1
        session.values = encoded_values
        session.meta.append(_TurnMeta(encoded_values, [pending] if pending is not None else [], time.time()))
        session.owner = None
        self._clock += 1
        session.updated = self._clock
        if pending is not None:
            self._pending.pop(pending, None)
        if self.keep is not None:
            start = self.keep.start((r.seq, r.role, r.tokens) for r in reversed(session.rows))
            if start is not None:
                session.rows = [r for r in session.rows if r.seq >= start]

    async def hold(self, lease: SessionLease, checkpoint_id: str, messages: Sequence[Message]) -> None:
        """Keep ``messages`` as the pending turn under ``checkpoint_id`` and release the lease."""
        await anyio.lowlevel.checkpoint()
        self._owned(lease)
        self._pending[checkpoint_id] = (lease.session_id, encode_messages(messages))
        await self.release(lease)

    async def pending(self, checkpoint_id: str) -> PendingTurn | None:
        """The pending turn kept under ``checkpoint_id``, or None."""
        await anyio.lowlevel.checkpoint()
        kept = self._pending.get(checkpoint_id)
        if kept is None:
            return None
        return PendingTurn(checkpoint_id, kept[0], decode_messages(kept[1]))

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """The ids of the sessions with at least one turn starting with ``prefix``, least recently updated first."""
        await anyio.lowlevel.checkpoint()
        found = [(s.updated, i) for i, s in self._sessions.items() if s.turns > 0 and i.startswith(prefix)]
        return [i for _, i in sorted(found)]

    async def delete(self, session_id: str) -> None:
        """Delete the session, its messages, values and pending turns."""
        await anyio.lowlevel.checkpoint()
        self._sessions.pop(session_id, None)
        for checkpoint_id in [c for c, (s, _) in self._pending.items() if s == session_id]:
            del self._pending[checkpoint_id]

    async def turns(self, session_id: str) -> builtins.list[Turn]:
        """The session's turns, oldest first (see ``SessionHistory.turns``)."""
        await anyio.lowlevel.checkpoint()
        session = self._sessions.get(session_id)
        if session is None:
            return []
        return [
            Turn(
                t,
                [decode_message(r.data) for r in session.rows if r.turn == t],
                decode_values(m.values),
                list(m.pauses),
                turn_time(m.created_at),
            )
            for t, m in enumerate(session.meta)
        ]

    async def fork(self, session_id: str, *, at_turn: int, new_session_id: str) -> None:
        """Copy the first ``at_turn`` turns to ``new_session_id`` (see ``SessionHistory.fork``)."""
        await anyio.lowlevel.checkpoint()
        source = self._sessions.get(session_id) or _Session()
        check_fork(session_id, at_turn, source.turns, new_session_id, new_session_id in self._sessions)
        if at_turn == 0:
            return
        rows = [dataclasses.replace(r) for r in source.rows if r.turn < at_turn]
        meta = [dataclasses.replace(m, pauses=list(m.pauses)) for m in source.meta[:at_turn]]
        self._clock += 1
        self._sessions[new_session_id] = _Session(
            rows=rows,
            values=meta[-1].values,
            next_seq=max((r.seq for r in rows), default=-1) + 1,
            turns=at_turn,
            updated=self._clock,
            meta=meta,
        )

    def _owned(self, lease: SessionLease) -> _Session:
        session = self._sessions.get(lease.session_id)
        if session is None or session.owner != lease.owner:
            raise SessionLeaseLostError(lease.session_id)
        return session
