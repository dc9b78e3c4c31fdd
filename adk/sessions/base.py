"""The session store interface and what every store shares: records, history limits, the JSON codec, leases.

A **session** is one conversation kept between runs under a session id: its messages, in order, and its
session values (the ``adk.session_values`` of its last run). A store appends each finished run's new messages
as one **turn**: one row per message, in one transaction, never rewriting what is stored.

**Leases** (one run at a time per session). A run takes the session's lease before it reads the history and
gives it up when it appends (the append checks, in the same transaction, that the lease is still its own) or
ends without appending. A second run finds the lease taken and fails with ``SessionBusyError`` naming the
session, or waits for it (``wait``). Leases expire, so one held by a process that died does not block the
session for ever: the SQL stores write an expiry ``lease_ttl`` seconds ahead and renew it from a keeper thread
every ``lease_ttl / 3`` seconds while the run is in flight, whatever the event loop or the consumer is doing;
a lease whose holder stopped renewing (the process died or froze) is taken over once expired. A run whose
lease was taken over in the meantime cannot append (``SessionLeaseLostError``): two runs' messages never
interleave. The in-memory store's leases need no expiry (they die with their process).

**Paused runs.** A run that pauses at an interrupt (with a checkpoint) appends nothing: its messages so far are
kept as a pending turn under the checkpoint id and the lease is given up; the resume takes the lease again
and, when it ends successfully, appends the pending messages and its own as one turn, deleting the pending turn
in the same transaction (so a turn is appended once, however often the run paused).
"""

from __future__ import annotations

import builtins
import datetime
import json
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anyio
from pydantic import TypeAdapter
from pydantic_core import PydanticSerializationError

from adk.errors import SessionBusyError, SessionError
from compose.schema import Message, approx_part_tokens

__all__ = [
    "HistoryLimit",
    "PendingTurn",
    "Session",
    "SessionHistory",
    "SessionLease",
    "SessionStore",
    "TokenCounter",
    "Turn",
    "approximate_tokens",
]

TokenCounter = Callable[[Message], int]
"""Counts the tokens of one message (for :class:`HistoryLimit`'s ``max_tokens``)."""


def approximate_tokens(message: Message) -> int:
    """About how many tokens ``message`` takes in a model's context: a quarter of its characters (content,
    reasoning, tool names and arguments), rounded up, plus its content parts'
    (:func:`~compose.schema.approx_part_tokens`: an image is 765), plus 4 for the message's framing.

    The default counter of the stores: no tokenizer, stable across models, within tens of percent of
    OpenAI's tokenizers for English text and JSON; give the store your model's own counter to be exact.

    Example:
        >>> from compose.schema import user_message
        >>> approximate_tokens(user_message("Hello, world!"))
        8
    """
    chars = len(message.content) + len(message.reasoning_content)
    for call in message.tool_calls:
        chars += len(call.function.name) + len(call.function.arguments)
    parts = sum(approx_part_tokens(p) for p in message.parts) if message.parts else 0
    return 4 + math.ceil(chars / 4) + parts


@dataclass(frozen=True, slots=True)
class HistoryLimit:
    """How much history to keep (a store's ``keep=``) or to load (``load(limit=)``): the newest messages
    within ``max_messages`` messages and ``max_tokens`` tokens (each None: no limit).

    The window never starts with a tool result (its tool call was cut): the oldest messages go until the kept
    part starts with a user, assistant or system message, so a tool call is never split from its result.
    """

    max_messages: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"HistoryLimit({name}=...) must be a positive int or None, got {value!r}")

    def start(self, rows: Iterable[tuple[int, str, int]]) -> int | None:
        """The first sequence number to keep, given ``(seq, role, tokens)`` rows newest first; None when
        everything fits (a store may then stop reading rows as soon as this decides)."""
        tokens = 0
        kept: list[tuple[int, str]] = []
        newest: int | None = None
        for seq, role, n in rows:
            if newest is None:
                newest = seq
            over_count = self.max_messages is not None and len(kept) + 1 > self.max_messages
            if over_count or (self.max_tokens is not None and tokens + n > self.max_tokens):
                while kept and kept[-1][1] == "tool":  # never a tool result without its call
                    kept.pop()
                return kept[-1][0] if kept else newest + 1
            tokens += n
            kept.append((seq, role))
        return None

    @property
    def scan(self) -> int | None:
        """How many newest rows :meth:`start` needs at most (None: it may need them all)."""
        return None if self.max_tokens is not None or self.max_messages is None else self.max_messages + 1


@dataclass(frozen=True, slots=True)
class SessionLease:
    """A run's hold on a session (from ``SessionStore.acquire``): ``owner`` is unique per run."""

    session_id: str
    owner: str


@dataclass(slots=True)
class Session:
    """A stored conversation, as ``SessionStore.load`` reads it.

    Attributes:
        session_id: its id.
        messages: the (kept, or loaded within a limit) messages, oldest first.
        values: the session values of its last run, as JSON data (pydantic models come back as dicts).
        turns: how many runs appended to it (0: nothing stored yet).
    """

    session_id: str
    messages: list[Message] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    turns: int = 0


@dataclass(slots=True)
class PendingTurn:
    """The messages of a run paused under ``checkpoint_id`` on ``session_id``, appended when its resume ends."""

    checkpoint_id: str
    session_id: str
    messages: list[Message]


@dataclass(slots=True)
class Turn:
    """One turn of a session (``Runner.history``): what one run appended.

    Attributes:
        index: 0 for the session's first turn.
        messages: the messages it appended (those still stored: a store's ``keep`` trims the oldest).
        values: the session values as they were after it (JSON data).
        checkpoint_ids: the checkpoint ids the run paused under before it completed.
        created_at: when it was appended (UTC; None for a turn stored before turns kept their time).
    """

    index: int
    messages: list[Message]
    values: dict[str, Any]
    checkpoint_ids: list[str]
    created_at: datetime.datetime | None


@runtime_checkable
class SessionHistory(Protocol):
    """A session store that keeps each turn's session values and lists and forks turns (the built-in ones)."""

    async def turns(self, session_id: str) -> builtins.list[Turn]:
        """The session's turns, oldest first (empty for an unknown session)."""
        ...

    async def fork(self, session_id: str, *, at_turn: int, new_session_id: str) -> None:
        """Copy the first ``at_turn`` turns (messages, per-turn values, their pauses) to ``new_session_id``,
        whose session values become those after turn ``at_turn - 1``.

        Raises:
            SessionError: ``new_session_id`` exists already, or ``at_turn`` is not between 0 and the number of
                turns.
        """
        ...


def check_fork(session_id: str, at_turn: int, turns: int, new_session_id: str, new_exists: bool) -> None:
    """The checks of ``SessionHistory.fork``, shared by the stores."""
    check_session_id(new_session_id)
    if isinstance(at_turn, bool) or not isinstance(at_turn, int) or not 0 <= at_turn <= turns:
        raise SessionError(
            f"cannot fork session {session_id!r} at turn {at_turn!r}: it has {turns} turn(s) (at_turn: 0..{turns})"
        )
    if new_exists:
        raise SessionError(f"cannot fork session {session_id!r} into {new_session_id!r}: that session exists already")


def turn_time(seconds: float | None) -> datetime.datetime | None:
    return None if seconds is None else datetime.datetime.fromtimestamp(seconds, datetime.UTC)


def turn_of(
    index: int, count: int, last_vals: str, messages: list[Message], meta: tuple[str, str, float] | None
) -> Turn:
    """A SQL store's turn from its rows (``meta``: its row of the turns table: values, pauses as a JSON list, time;
    None for a turn stored before that table existed, which shows the session's values on its last turn only)."""
    if meta is None:
        return Turn(index, messages, decode_values(last_vals) if index == count - 1 else {}, [], None)
    vals, pauses, created_at = meta
    return Turn(index, messages, decode_values(vals), list(json.loads(pauses)), turn_time(created_at))


@runtime_checkable
class SessionStore(Protocol):
    """Where conversations are kept between runs (see the module docstring for leases and paused runs).

    ``InMemorySessionStore``, ``SQLiteSessionStore`` and ``PostgresSessionStore`` implement it; the Runner uses
    only these methods. Everything stored is JSON (never pickle).
    """

    async def acquire(self, session_id: str, *, wait: float | None = 0.0) -> SessionLease:
        """Take the session's lease for a run (creating the session if new).

        Args:
            session_id: the session.
            wait: seconds to wait for a run in flight to finish (0: fail at once; None: wait as long as it takes).

        Raises:
            SessionBusyError: another run holds the lease (and ``wait`` ran out).
        """
        ...

    async def release(self, lease: SessionLease) -> None:
        """Give the lease up without appending (the run failed, was closed, or had nothing to append)."""
        ...

    async def load(self, session_id: str, *, limit: HistoryLimit | None = None) -> Session:
        """The session's messages (the newest within ``limit``) and values; an empty session if unknown."""
        ...

    async def commit(
        self,
        lease: SessionLease,
        messages: Sequence[Message],
        values: Mapping[str, Any],
        *,
        pending: str | None = None,
    ) -> None:
        """In one transaction: append ``messages`` as one turn, store ``values``, delete the pending turn under
        checkpoint id ``pending`` (if any), trim the history to the store's ``keep``, release the lease.

        Raises:
            SessionLeaseLostError: the lease is no longer this run's; nothing was written.
            SessionError: a session value cannot be stored as JSON (named); nothing was written.
        """
        ...

    async def hold(self, lease: SessionLease, checkpoint_id: str, messages: Sequence[Message]) -> None:
        """In one transaction: keep ``messages`` as the pending turn of the run paused under ``checkpoint_id``
        (replacing one kept there) and release the lease.

        Raises:
            SessionLeaseLostError: the lease is no longer this run's; nothing was written.
        """
        ...

    async def pending(self, checkpoint_id: str) -> PendingTurn | None:
        """The pending turn kept under ``checkpoint_id``, or None."""
        ...

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """The ids of the sessions with at least one turn that start with ``prefix``, least recently updated
        first."""
        ...

    async def delete(self, session_id: str) -> None:
        """Delete the session: its messages, values and pending turns (nothing happens if it does not exist)."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources."""
        ...


# ---------------------------------------------------------------------------------------------------------------
# What the stores share


def check_session_id(session_id: object) -> str:
    """``session_id`` if it is a non-empty str, else TypeError/ValueError."""
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__qualname__}")
    if not session_id:
        raise ValueError("session_id must not be empty")
    return session_id


def encode_message(message: Message) -> str:
    return message.model_dump_json()


def decode_message(data: str | bytes) -> Message:
    return Message.model_validate_json(data)


def encode_messages(messages: Sequence[Message]) -> str:
    return _MESSAGES.dump_json(list(messages)).decode()


def decode_messages(data: str | bytes) -> list[Message]:
    return _MESSAGES.validate_json(data)


def unsaveable_value(values: Mapping[str, Any]) -> str | None:
    """The key of the first session value pydantic cannot serialise, if any."""
    for key, value in values.items():
        try:
            _ANY.dump_json(value, warnings="error")
        except PydanticSerializationError:
            return key
    return None


def encode_values(session_id: str, values: Mapping[str, Any]) -> str:
    """The session values as JSON; a value pydantic cannot serialise is named in a ``SessionError``."""
    try:
        return _VALUES.dump_json(dict(values), warnings="error").decode()
    except PydanticSerializationError as exc:
        key = unsaveable_value(values)
        if key is not None:
            raise SessionError(
                f"session {session_id!r}: session value {key!r} ({type(values[key]).__qualname__}) cannot be stored "
                "as JSON: keep JSON-serialisable data (or pydantic models) in session values"
            ) from exc
        raise SessionError(f"session {session_id!r}: the session values cannot be stored as JSON: {exc}") from exc


def decode_values(data: str | bytes) -> dict[str, Any]:
    return _VALUES.validate_json(data)


_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_VALUES: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
_ANY: TypeAdapter[Any] = TypeAdapter(Any)

_FIRST_PAUSE = 0.01
_LONGEST_PAUSE = 0.25


async def acquire_waiting(session_id: str, wait: float | None, attempt: Callable[[], Awaitable[str | None]]) -> None:
    """Call ``attempt`` (None: the lease was taken; else who holds it) until it succeeds or ``wait`` runs out.

    Waits between attempts are cancellable sleeps, growing from 10 ms to 250 ms.

    Raises:
        SessionBusyError: the last attempt found the lease held and the wait is over.
    """
    if wait is not None and (wait < 0 or math.isnan(wait)):
        raise ValueError(f"wait must be >= 0 seconds or None, got {wait!r}")
    deadline = None if wait is None else anyio.current_time() + wait
    pause = _FIRST_PAUSE
    while True:
        holder = await attempt()
        if holder is None:
            return
        now = anyio.current_time()
        if deadline is not None and now >= deadline:
            raise SessionBusyError(session_id, holder, waited=wait or 0.0)
        await anyio.sleep(pause if deadline is None else min(pause, deadline - now))
        pause = min(pause * 2, _LONGEST_PAUSE)
