"""One projection of a run: its agent events as a flat sequence of JSON-able records, wire-neutral.

A :class:`Projection` reads each ``AgentEvent`` once (a streamed answer chunk by chunk; a failed model attempt
that is retried and a pause folded in) and gives its records, in batches (one per chunk of a streamed answer).
Every consumer reads the records, never the events: the AG-UI mapping (``adk.serve._mapping``), the A2A
executor, and the server's reading of a durable run's journal (fed through :meth:`Projection.journal`). A
record is a ``dict`` with a ``kind``; ``sub`` is the subagent run it belongs to (None: the run's own agents):

* ``step_started{name, path, sub}`` / ``step_finished{name, sub}``: an agent's part (``name`` the agent);
* ``subagent_started{sub, name, parent, call}`` / ``subagent_finished{sub, suspended}``: an agent inside an
  agent tool (``internal`` events), opened by its first event (``call``: the agent tool's call, ``parent``: the
  enclosing invocation), closed when the agent tool's result arrives or, ``suspended``, when the run pauses;
* ``answer_started{id, agent, sub}`` ... ``answer_ended{id, sub}`` around a model answer (``id`` its message
  id), or ``answer_retried{id, sub}`` instead when the attempt failed and is retried (take back what it said:
  the retry is a new answer). Inside: ``message_started{id, role, sub}``, ``message_delta{id, delta, sub}``
  (never empty), ``message_ended{id, sub}`` for its text (the first text takes the answer's id; text after a
  tool call is a message of its own), and per tool call ``tool_call_started{id, name, message, sub}``,
  ``tool_call_args{id, delta, sub}`` fragments, ``tool_call_ended{id, sub}`` (when the answer ends);
* ``tool_result{message, call, name, content, sub}``: a tool's result (``message`` its message id).

Ids come from ``new_id(kind)`` (``"msg"``, ``"call"``, ``"sub"``), random by default; a deterministic one maps a
recorded run to the same records each time. Each message gets the id it is projected under stamped on it
(:func:`stamp`), so that a store holding it shows the id its client saw.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import anyio
from pydantic import TypeAdapter

from adk.errors import WillRetryError
from adk.events import AgentEvent
from compose.schema import Message

__all__ = ["ID_KEY", "Projection", "Record", "jsonable", "message_id", "stamp", "state_of", "state_patch"]

Record = dict[str, Any]
ID_KEY = "agui_id"  # the key of a message's id in its ``extra`` (the name it has had since the AG-UI server)


def message_id(message: Message) -> str | None:
    """The id stamped on ``message``, if any."""
    value = message.extra.get(ID_KEY)
    return value if isinstance(value, str) and value else None


def stamp(message: Message, id: str) -> None:
    """Give ``message`` the id ``id`` (in place: the session's recorded copy is the same object)."""
    message.extra[ID_KEY] = id


_ANY: TypeAdapter[Any] = TypeAdapter(Any)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data (pydantic models and dataclasses dumped; anything else as its text)."""
    try:
        return _ANY.dump_python(value, mode="json")
    except Exception:  # a value pydantic cannot serialise: show it as text rather than fail the stream
        import json

        return json.loads(json.dumps(value, default=str))


def state_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """Session values as a JSON object (the state a client sees)."""
    state = jsonable(dict(values))
    return state if isinstance(state, dict) else {}


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def state_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The RFC 6902 patch from ``old`` to ``new`` (top-level keys)."""
    ops: list[dict[str, Any]] = []
    for key in old:
        if key not in new:
            ops.append({"op": "remove", "path": _pointer(key)})
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": _pointer(key), "value": value})
        elif old[key] != value:
            ops.append({"op": "replace", "path": _pointer(key), "value": value})
    return ops


def _new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


class _Answer:
    """One model answer being projected: its open text message and its tool calls."""

    __slots__ = ("attempt", "calls", "message_id", "new_id", "sub", "text_id")

    def __init__(self, message_id: str, sub: str | None, new_id: Callable[[str], str], attempt: Any = None) -> None:
        self.new_id = new_id
        self.message_id = message_id
        self.sub = sub
        self.attempt = attempt  # a journal's model call execution (its tokens share it)
        self.text_id: str | None = None  # the open text message
        self.calls: dict[Any, tuple[str, str]] = {}  # index (or id) -> (call id, tool name)

    def chunk(self, chunk: Message, out: list[Record]) -> None:
        sub = self.sub
        if chunk.content:
            if self.text_id is None:
                # the answer's first text message takes the answer's id; text after a tool call gets its own
                self.text_id = self.message_id if not self.calls else self.new_id("msg")
                out.append({"kind": "message_started", "id": self.text_id, "role": "assistant", "sub": sub})
            out.append({"kind": "message_delta", "id": self.text_id, "delta": chunk.content, "sub": sub})
        for call in chunk.tool_calls:
            key = call.index if call.index is not None else call.id
            known = self.calls.get(key)
            if known is None:
                if self.text_id is not None:
                    out.append({"kind": "message_ended", "id": self.text_id, "sub": sub})
                    self.text_id = None
                known = (call.id or self.new_id("call"), call.function.name)
                self.calls[key] = known
                call_id, name, parent = *known, self.message_id
                out.append({"kind": "tool_call_started", "id": call_id, "name": name, "message": parent, "sub": sub})
            if call.function.arguments:
                out.append({"kind": "tool_call_args", "id": known[0], "delta": call.function.arguments, "sub": sub})

    def close(self, out: list[Record], kind: str = "answer_ended") -> None:
        sub = self.sub
        if self.text_id is not None:
            out.append({"kind": "message_ended", "id": self.text_id, "sub": sub})
            self.text_id = None
        for call_id, _ in self.calls.values():
            out.append({"kind": "tool_call_ended", "id": call_id, "sub": sub})
        out.append({"kind": kind, "id": self.message_id, "sub": sub})


class Projection:
    """The records of one run (see the module docstring).

    ``project(event)`` yields the records of one agent event (reading its message stream as it goes);
    ``finish(suspended=...)`` closes the open subagents and steps at the run's end, ``abort()`` what an answer
    cut by an error left open. ``structured`` is the structured answer seen (an ``output_type`` agent's), as
    JSON data; ``tool_calls`` maps the ids of the calls started in the run to their tool names.

    Args:
        new_id: makes the ids of messages, tool calls and subagent runs from a kind (``"msg"``, ``"call"``,
            ``"sub"``); default: random.
    """

    def __init__(self, new_id: Callable[[str], str] | None = None) -> None:
        self.new_id = new_id if new_id is not None else _new_id
        self.step: str | None = None
        self.subagents: dict[tuple[str, ...], str] = {}  # run path -> subagent run id, open ones
        self.sub_steps: dict[str, str] = {}  # subagent run id -> the step open in it (its agent's name)
        self.tool_calls: dict[str, str] = {}
        self._last_call: dict[str, str] = {}  # tool name -> its latest call id (an agent tool's parent call)
        self.answer: _Answer | None = None  # the one being projected
        self.structured: Any = None

    def __repr__(self) -> str:
        return f"Projection(step={self.step!r}, subagents={len(self.subagents)}, calls={len(self.tool_calls)})"

    async def project(
        self, event: AgentEvent, convert: Callable[[list[Record]], list[Any]] | None = None
    ) -> AsyncGenerator[list[Any], None]:
        """The records of ``event``, in batches (a streamed answer yields one batch per chunk); with ``convert``,
        each batch converted (a consumer's own events; an empty conversion is not yielded)."""
        out: list[Any] = []
        sub = self.attribute(event.agent_name, event.run_path, event.internal, out)
        variant = event.message
        if variant is None:
            if convert is not None:
                out = convert(out)
            if out:
                yield out
            return
        if variant.role == "tool":
            self.result(event.run_path, variant.tool_name, await variant.get_message(), sub, out)
            yield out if convert is None else convert(out)
            return
        answer = self.open_answer(event.agent_name, sub, out)
        ended = "answer_ended"
        try:
            if variant.message is not None or variant.message_stream is None:
                message = await variant.get_message()
                stamp(message, answer.message_id)
                answer.chunk(message, out)
            else:
                first = True
                try:
                    async for chunk in variant.message_stream:
                        if first:
                            stamp(chunk, answer.message_id)  # the recorded copy concatenates this chunk first
                            first = False
                        answer.chunk(chunk, out)
                        if convert is not None:
                            out = convert(out)
                        if out:
                            yield out
                            out = []
                except WillRetryError:
                    ended = "answer_retried"  # a failed attempt that is retried: the retry is a new answer
                finally:
                    # cancelled (the client went away) or closed mid-answer: the projection's copy is its to close
                    with anyio.CancelScope(shield=True):
                        await variant.message_stream.aclose()
            self.close_answer(out, ended)
        finally:
            self.answer = None
        if event.output is not None and event.output.structured is not None:
            self.structured = jsonable(event.output.structured)
        if convert is not None:
            out = convert(out)
        if out:
            yield out

    # -- the steps of a projection, for a reader of a recorded run (a durable journal) as for ``project``

    def attribute(self, agent_name: str, run_path: tuple[str, ...], internal: bool, out: list[Record]) -> str | None:
        """Open the event's step or subagent as needed; its subagent run id (None for the run's own agents)."""
        if not internal:
            if agent_name != self.step:
                if self.step is not None:
                    out.append({"kind": "step_finished", "name": self.step, "sub": None})
                self.step = agent_name
                out.append({"kind": "step_started", "name": agent_name, "path": list(run_path), "sub": None})
            return None
        sub = self.subagents.get(run_path)
        if sub is None:
            sub = self.new_id("sub")
            out.append(
                {
                    "kind": "subagent_started",
                    "sub": sub,
                    "name": agent_name,
                    "parent": self._parent_subagent(run_path),
                    "call": self._last_call.get(agent_name),
                }
            )
            self.subagents[run_path] = sub
        step = self.sub_steps.get(sub)
        if step != agent_name:  # the agent's step in the invocation (closing the step of the agent before it)
            if step is not None:
                out.append({"kind": "step_finished", "name": step, "sub": sub})
            self.sub_steps[sub] = agent_name
            out.append({"kind": "step_started", "name": agent_name, "path": list(run_path), "sub": sub})
        return sub

    def open_answer(self, agent_name: str, sub: str | None, out: list[Record], attempt: Any = None) -> _Answer:
        """Start a model answer (its chunks go to ``answer.chunk``), after :meth:`attribute`."""
        answer = _Answer(self.new_id("msg"), sub, self.new_id, attempt)
        self.answer = answer
        out.append({"kind": "answer_started", "id": answer.message_id, "agent": agent_name, "sub": sub})
        return answer

    def close_answer(self, out: list[Record], kind: str = "answer_ended") -> None:
        """End the open answer (``answer_retried``: a failed attempt that is retried)."""
        answer = self.answer
        if answer is None:
            return
        self.answer = None
        answer.close(out, kind)
        for call_id, name in answer.calls.values():
            self.tool_calls[call_id] = name
            self._last_call[name] = call_id

    def result(
        self, run_path: tuple[str, ...], tool_name: str | None, message: Message, sub: str | None, out: list[Record]
    ) -> None:
        """A tool's result (after :meth:`attribute`); an agent tool's closes its agent's invocation."""
        message_id = self.new_id("msg")
        stamp(message, message_id)
        if tool_name is not None:
            # an agent tool's result: its agent's invocation (and those nested in it) is over
            n = len(run_path)
            for path, run_id in list(self.subagents.items()):
                if tool_name in path[n:] and path[:n] == run_path:
                    self._end_subagent(run_id, False, out)
                    del self.subagents[path]
        out.append(
            {
                "kind": "tool_result",
                "message": message_id,
                "call": message.tool_call_id or "",
                "name": message.tool_name or tool_name or "",
                "content": message.content,
                "sub": sub,
            }
        )

    def _end_subagent(self, sub: str, suspended: bool, out: list[Record]) -> None:
        step = self.sub_steps.pop(sub, None)
        if step is not None:
            out.append({"kind": "step_finished", "name": step, "sub": sub})
        out.append({"kind": "subagent_finished", "sub": sub, "suspended": suspended})

    def _parent_subagent(self, path: tuple[str, ...]) -> str | None:
        for n in range(len(path) - 1, 0, -1):
            found = self.subagents.get(path[:n])
            if found is not None:
                return found
        return None

    def abort(self) -> list[Record]:
        """Close what an answer cut by an error left open (before the run's error)."""
        out: list[Record] = []
        self.close_answer(out)
        return out

    def finish(self, *, suspended: bool = False) -> list[Record]:
        """Close the open subagents (``suspended`` when the run paused) with their steps, and the run's step."""
        out: list[Record] = []
        for run_id in reversed(list(self.subagents.values())):
            self._end_subagent(run_id, suspended, out)
        self.subagents.clear()
        if self.step is not None:
            out.append({"kind": "step_finished", "name": self.step, "sub": None})
            self.step = None
        return out
