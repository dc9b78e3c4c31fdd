"""Session values: key-value data shared by everything in one agent run (Eino's ``AddSessionValue`` & co.).

Each :class:`~adk.runner.Runner` run has its own session: it starts from the runner's ``session_values``
(defaults for every run) updated with the ``session_values=`` given to that call, and ends with the run (a
paused run saves its session with its checkpoint; the resume continues it). Agents, tools, hooks and
middlewares read and write it during the run; ``output_key`` writes the agent's final answer into it, and an
instruction's ``{key}`` placeholders are filled from it.

Reading outside a run finds nothing (as in Eino); writing outside a run is an error (Eino ignores it silently,
which hides a misplaced call).

Example::

    @tool
    async def remember(city: str) -> str:
        add_session_value("city", city)
        return "noted"

    async for event in runner.query("plan a day", session_values={"user": "alice"}):
        ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adk._run import current_run, current_session
from compose.errors import StateError

__all__ = ["add_session_value", "add_session_values", "get_session_value", "get_session_values"]


def _values() -> dict[str, Any] | None:
    run = current_run.get()
    if run is not None:
        return run.session_values
    session = current_session.get()
    return session.values if session is not None else None


def _session(what: str) -> dict[str, Any]:
    values = _values()
    if values is None:
        raise StateError(f"{what} called outside an agent run (session values live in a Runner run)")
    return values


def add_session_value(key: str, value: Any) -> None:
    """Set one session value of the current run.

    Raises:
        StateError: called outside an agent run.
    """
    _session("add_session_value")[key] = value


def add_session_values(values: Mapping[str, Any]) -> None:
    """Set several session values of the current run.

    Raises:
        StateError: called outside an agent run.
    """
    _session("add_session_values").update(values)


def get_session_value(key: str, default: Any = None) -> Any:
    """The session value ``key`` of the current run, else ``default`` (also outside a run)."""
    values = _values()
    return default if values is None else values.get(key, default)


def get_session_values() -> dict[str, Any]:
    """A copy of every session value of the current run (empty outside a run)."""
    values = _values()
    return {} if values is None else dict(values)
