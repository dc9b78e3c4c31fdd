"""An agent run's callback handlers: the run reports as ``RunInfo(agent name, agent class, "Agent")`` and its
graph's callbacks nest under it.

The handlers are those of the enclosing run (or the global ones) plus the ``callbacks=`` given to the Runner,
as for a graph (``compose.callbacks``). The run fires ``on_start`` when its first event is asked for, then
exactly one of ``on_end`` (the final message), ``on_error``, ``on_interrupt`` (it paused) or ``on_cancel``
(closed or cancelled before its end); the graph's start and end come between them, in the same task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compose.callbacks import (
    CallbackConfig,
    CallbackHandler,
    RunInfo,
    fire_cancel,
    fire_end,
    fire_failure,
    fire_start,
    make_config,
)

_UNSET = object()


class AgentCallbacks:
    """What an ``AgentRun`` reports, and the ``callbacks`` its graph run gets."""

    __slots__ = ("_info", "_name", "_type", "given", "handlers", "live")

    def __init__(
        self,
        agent_name: str,
        agent_type: str,
        callbacks: Sequence[CallbackHandler] = (),
        config: CallbackConfig | object | None = _UNSET,
    ) -> None:
        self.given = tuple(callbacks)
        if config is _UNSET:
            config = make_config(self.given, None, ())
        self.handlers = config.everywhere if isinstance(config, CallbackConfig) else ()
        self._name = agent_name
        self._type = agent_type
        self._info: RunInfo | None = None
        self.live = False

    @property
    def info(self) -> RunInfo:
        """How the run reports (built when a handler needs it: most runs have none)."""
        if self._info is None:
            self._info = RunInfo(self._name, self._type, "Agent")
        return self._info

    def __repr__(self) -> str:
        return f"AgentCallbacks({self._name!r}, handlers={len(self.handlers)}, live={self.live})"

    def graph_options(self) -> dict[str, Any]:
        """The per-call options that hand the given handlers to the agent's graph run."""
        return {"callbacks": list(self.given)} if self.given else {}

    async def start(self, messages: Any) -> None:
        if self.handlers:
            await fire_start(self.handlers, self.info, messages)
            self.live = True

    async def end(self, output: Any) -> None:
        if self.live:
            self.live = False
            await fire_end(self.handlers, self.info, output)

    async def fail(self, exc: BaseException) -> None:
        """The run ended with ``exc``: an error, an interrupt (a pause) or a cancellation."""
        if self.live:
            self.live = False
            await fire_failure(self.handlers, self.info, exc)

    async def cancel(self) -> None:
        if self.live:
            self.live = False
            await fire_cancel(self.handlers, self.info)


_SILENT = AgentCallbacks("", "", (), None)  # no handler anywhere: it reports nothing and holds no state (never live)


def agent_callbacks(agent_name: str, agent_type: str, callbacks: Sequence[CallbackHandler] = ()) -> AgentCallbacks:
    """The callbacks of one agent run; most runs have no handler anywhere and share one that does nothing."""
    given = tuple(callbacks)
    config = make_config(given, None, ())
    if config is None and not given:
        return _SILENT
    return AgentCallbacks(agent_name, agent_type, given, config)
