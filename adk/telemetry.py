"""Telemetry: the ReAct loop's runtime events (seed 000) and a JSON Lines trace writer (seed 002).

Handlers are given to the runner (``Runner(agent, telemetry=[handler])``); each is a plain callable receiving
every :class:`TelemetryEvent` of the run as it happens, synchronously (keep handlers quick; an exception
raised by a handler ends the run with that error). The event names are seed 000's:

==========================  ====================================================================
``reply.started``           a model call (one ReAct round) is about to start
``model.call.started``      one attempt of the model call starts (retries start again)
``text.delta``              a piece of streamed model text arrived (streaming runs)
``model.call.completed``    an attempt finished; ``data["usage"]`` holds its token usage
``reply.completed``         the round's answer is complete (``content``, ``tool_calls``)
``tool.call.started``       a tool call starts (``tool``, ``call_id``, ``arguments``)
``tool.call.completed``     a tool call returned (``result``, or ``streaming: true``)
``tool.call.failed``        a tool call raised (``error``)
==========================  ====================================================================

``step`` is the 0-based ReAct round the event belongs to (the model call number), as in seed 002's trace.

Example::

    with JSONLTraceWriter("trace.jsonl") as trace:
        runner = Runner(agent, telemetry=[trace])
        async for event in runner.query("plan a day trip"):
            ...
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = ["TELEMETRY_EVENT_NAMES", "JSONLTraceWriter", "TelemetryEvent", "TelemetryHandler"]

TELEMETRY_EVENT_NAMES = (
    "reply.started",
    "model.call.started",
    "text.delta",
    "model.call.completed",
    "reply.completed",
    "tool.call.started",
    "tool.call.completed",
    "tool.call.failed",
)


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    """One runtime event: ``name`` (one of ``TELEMETRY_EVENT_NAMES``), the ReAct ``step``, the agent, the
    event's ``data`` and the wall-clock ``time`` (``time.time()``)."""

    name: str
    step: int
    agent_name: str
    data: Mapping[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)


TelemetryHandler = Callable[[TelemetryEvent], None]


class JSONLTraceWriter:
    """A telemetry handler writing one JSON object per line: ``seq``, ``step``, ``event``, ``agent``, ``time``
    and the event's data (seed 002's trace: filter it with ``jq``).

    Args:
        target: a path (opened for writing, closed by ``close()``) or an open text file (left open).
    """

    def __init__(self, target: str | Path | IO[str]) -> None:
        if isinstance(target, (str, Path)):
            self._file: IO[str] = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self._owned = True
        else:
            self._file = target
            self._owned = False
        self.count = 0

    def __call__(self, event: TelemetryEvent) -> None:
        record: dict[str, Any] = {
            "seq": self.count,
            "step": event.step,
            "event": event.name,
            "agent": event.agent_name,
            "time": round(event.time, 6),
        }
        record.update(event.data)
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.count += 1

    def close(self) -> None:
        """Flush, and close the file if this writer opened it."""
        self._file.flush()
        if self._owned:
            self._file.close()

    def __enter__(self) -> JSONLTraceWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JSONLTraceWriter({getattr(self._file, 'name', self._file)!r}, lines={self.count})"
