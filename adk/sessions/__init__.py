"""Conversations that last: session stores keeping each session's messages and values between runs.

``Runner(agent, session_store=store)``, then ``runner.query(text, session_id="user-42")``: the agent sees the
session's history followed by the new input, and the run's new messages are appended when it completes (see
:mod:`adk.sessions.base` for leases and paused runs, :mod:`adk.sessions.run` for the recording).

- :class:`InMemorySessionStore`: a dict, for tests and single-process services;
- :class:`SQLiteSessionStore`: one SQLite file shared by the processes of one machine (the embedded default);
- :class:`PostgresSessionStore`: PostgreSQL (``pip install "pyeino[postgres]"``), for services of many workers.
"""

from adk.sessions.base import (
    HistoryLimit,
    PendingTurn,
    Session,
    SessionHistory,
    SessionLease,
    SessionStore,
    TokenCounter,
    Turn,
    approximate_tokens,
)
from adk.sessions.memory import InMemorySessionStore
from adk.sessions.postgres import PostgresSessionStore
from adk.sessions.run import SessionRun
from adk.sessions.sqlite import SQLiteSessionStore

__all__ = [
    "HistoryLimit",
    "InMemorySessionStore",
    "PendingTurn",
    "PostgresSessionStore",
    "SQLiteSessionStore",
    "Session",
    "SessionHistory",
    "SessionLease",
    "SessionRun",
    "SessionStore",
    "TokenCounter",
    "Turn",
    "approximate_tokens",
]
