"""``RemoteA2AAgent``: an agent served by any A2A framework, as a pyeino ``Agent`` (extra ``pyeino[a2a]``).

Its run sends the conversation to the remote agent as one A2A message (a new task in a new context) with the
a2a-sdk client, streaming when the remote's card says it can, and turns what comes back into events:

* each text artifact is one assistant message event: streamed (its ``append`` chunks are the stream's
  chunks) when the run streams, whole otherwise; a final ``append = false`` chunk that repeats the text so
  far (as pyeino's server sends) adds only what is new;
* text in a ``working`` or ``completed`` status message, or a message-only answer, is an assistant message;
* ``completed`` ends the run (the last message is its answer); ``failed``, ``rejected``, ``canceled`` and
  ``auth-required`` end it with a :class:`~adk.errors.RemoteAgentError` naming the URL, the task and its
  state; so do transport and protocol errors (the client's exception is the cause);
* ``input-required`` pauses the run: the interrupt's info is ``{"reason", "message", "url", "taskId",
  "contextId", "interrupts"}`` (a pyeino server's approval keeps its ``reason`` ``tool_call`` and
  ``responseSchema``, so an AG-UI client of ours shows an approval card). ``runner.resume(checkpoint_id,
  targets={id: data})`` sends ``data`` as the next message on the remote task: an ``ApprovalDecision`` as the
  data part ``{"approved", "reason"?, "editedArgs"?}``, a string as text, anything else JSON as a data part.

A cancel (``adk.cancel``) cuts the run off as any custom agent's: closing it cancels the remote task (once its
first response named it), and a resume sends the conversation again as a new task (a canceled task does not go on).

The conversation: a single input message is sent as its text; more (a session's history) as a transcript
("role: text" lines) followed by the last message's text. The card is fetched on the first run (or by
:meth:`RemoteA2AAgent.resolve`); a name or description not given is the card's.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, nullcontext
from typing import Any

import anyio
import httpx

try:
    from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
    from a2a.helpers import get_data_parts, new_data_part, new_text_part
    from a2a.types import (
        AgentCard,
        CancelTaskRequest,
        GetTaskRequest,
        Part,
        Role,
        SendMessageRequest,
        StreamResponse,
        TaskState,
    )
    from a2a.types import Message as A2AMessage
    from a2a.utils.errors import A2AError
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(f'RemoteA2AAgent needs the a2a extra: pip install "pyeino[a2a]" ({exc})') from exc

from adk.agent import AgentContext, ResumeInfo
from adk.errors import RemoteAgentError
from adk.events import AgentAction, AgentEvent, AgentInput, AgentInterruptInfo, AgentOutput, MessageVariant
from adk.middlewares.approval import ApprovalDecision
from compose.interrupt import InterruptCtx
from compose.schema import Message
from compose.stream import StreamReader

__all__ = ["RemoteA2AAgent"]

_KIND = "pyeino.remote_a2a"
_FAILED = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
_ENDED = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_INPUT_REQUIRED, *_FAILED}


def _text(parts: Sequence[Part]) -> str:
    return "".join(p.text for p in parts if p.WhichOneof("content") == "text")


def _valid_name(text: str) -> str:
    """``text`` as a name any model API takes for a tool (``AgentTool``): letters, digits, ``_`` and ``-``, at
    most 64 (other runs of characters become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_")[:64] or "remote_a2a"


def _name_from(url: str) -> str:
    """The last segment of the URL's path, else its host and port (``127.0.0.1:9999`` -> ``127_0_0_1_9999``)."""
    parsed = httpx.URL(url)
    path = [s for s in parsed.path.split("/") if s and not s.startswith(".")]
    if path:
        return _valid_name(path[-1])
    return _valid_name(f"{parsed.host}_{parsed.port}" if parsed.port is not None else parsed.host)


class _Pump:
    """The remote's responses, with one pushed back (an artifact stream stops at the first foreign one)."""

    def __init__(self, responses: AsyncIterator[StreamResponse], url: str) -> None:
        self.responses = responses
        self.url = url
        self.back: StreamResponse | None = None
        self.ended = False
        self.task_id: str | None = None
        self.context_id: str | None = None

    async def finish(self) -> None:
        """Read the rest (the server ends the stream after a final state): the client's nested generators then
        end too, instead of being left suspended (a2a-sdk's ``send_message`` does not close the ones it loops
        over when it is closed early)."""
        while await self.next() is not None:
            pass

    async def next(self) -> StreamResponse | None:
        if self.back is not None:
            response, self.back = self.back, None
            return response
        if self.ended:
            return None
        try:
            response = await self.responses.__anext__()
        except StopAsyncIteration:
            self.ended = True
            return None
        except (A2AError, httpx.HTTPError) as exc:
            self.ended = True
            raise RemoteAgentError(self.url, str(exc) or type(exc).__name__, task_id=self.task_id) from exc
        kind = response.WhichOneof("payload")
        if kind == "task":
            self.task_id, self.context_id = response.task.id, response.task.context_id
        elif kind in ("status_update", "artifact_update"):
            update = getattr(response, kind)
            self.task_id, self.context_id = update.task_id, update.context_id
        return response


class _Artifact:
    """The text of one artifact as it streams: chunks pulled on demand, or drained into ``buffer`` when the
    agent moves on before its reader did."""

    def __init__(self, pump: _Pump, artifact_id: str, first: str, done: bool) -> None:
        self.pump = pump
        self.artifact_id = artifact_id
        self.text = first
        self.buffer = [first] if first else []
        self.done = done

    async def _pull(self) -> str | None:
        response = await self.pump.next()
        if response is None:
            self.done = True
            return None
        update = response.artifact_update
        if response.WhichOneof("payload") != "artifact_update" or update.artifact.artifact_id != self.artifact_id:
            self.pump.back = response
            self.done = True
            return None
        text = _text(update.artifact.parts)
        if update.last_chunk:
            self.done = True
        if not update.append:  # the whole text again: only what is new
            delta = text[len(self.text) :] if text.startswith(self.text) else ""
            self.text = text if text.startswith(self.text) else self.text
            return delta
        self.text += text
        return text

    async def drain(self) -> None:
        while not self.done:
            delta = await self._pull()
            if delta:
                self.buffer.append(delta)

    async def chunks(self) -> AsyncIterator[Message]:
        while True:
            if self.buffer:
                yield Message(role="assistant", content=self.buffer.pop(0))
            elif self.done:
                return
            else:
                delta = await self._pull()
                if delta:
                    yield Message(role="assistant", content=delta)


class RemoteA2AAgent:
    """A remote A2A agent as a pyeino ``Agent`` (see the module docstring): run it with a ``Runner``, in a
    workflow, or as an ``AgentTool`` of a supervisor.

    Args:
        url: the agent's base URL; its card is at ``url`` + ``.well-known/agent-card.json``.
        name: the agent's name here (default: the last segment of the URL's path, else its host and port;
            :meth:`connect` takes the card's), made a valid tool name when it is not given (letters, digits,
            ``_`` and ``-``: ``127_0_0_1_9999``, ``Travel_Agent``), so the agent can be an ``AgentTool``.
        description: what it does (default: the card's, once fetched).
        httpx_client: the HTTP client to call it with (auth headers, timeouts; never closed here). Default: one
            per run, closed when the run ends.
        timeout: the default client's timeout (seconds between bytes of a streamed answer; None: no limit).

    Example::

        remote = await RemoteA2AAgent.connect("https://agents.example/a2a/travel/")
        supervisor = ChatModelAgent("boss", "delegates", model=model, tools=[AgentTool(remote)])
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        httpx_client: httpx.AsyncClient | None = None,
        timeout: float | None = 300.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"RemoteA2AAgent(url): an http(s) URL is needed, got {url!r}")
        self.url = url if url.endswith("/") else url + "/"
        self._name = name or _name_from(self.url)
        self._description = description
        self.httpx_client = httpx_client
        self.timeout = timeout
        self.card: AgentCard | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        if self._description:
            return self._description
        if self.card is not None and self.card.description:
            return self.card.description
        return f"the remote A2A agent at {self.url}"

    def __repr__(self) -> str:
        return f"RemoteA2AAgent({self.url!r}, name={self.name!r}, card={'fetched' if self.card else 'not fetched'})"

    @classmethod
    async def connect(cls, url: str, **options: Any) -> RemoteA2AAgent:
        """The agent at ``url`` with its card fetched (its name and description the card's unless given).

        Raises:
            RemoteAgentError: the card cannot be fetched or is not an agent card.
        """
        agent = cls(url, **options)
        await agent.resolve(rename=options.get("name") is None)
        return agent

    async def resolve(self, *, rename: bool = False) -> AgentCard:
        """Fetch the card (once); ``rename``: take the card's name too (as a valid tool name)."""
        if self.card is None:
            async with self._http() as http:
                self.card = await self._fetch(http)
        if rename and self.card.name:
            self._name = _valid_name(self.card.name)
        return self.card

    def _http(self) -> Any:
        if self.httpx_client is not None:
            return nullcontext(self.httpx_client)  # the caller's: left open
        return httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=self.timeout))

    async def _fetch(self, http: httpx.AsyncClient) -> AgentCard:
        try:
            return await A2ACardResolver(http, self.url).get_agent_card()
        except (A2AError, httpx.HTTPError, ValueError) as exc:
            raise RemoteAgentError(self.url, f"cannot fetch the agent card: {exc}") from exc

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Send ``input``'s conversation as a new task (see the module docstring)."""
        message = A2AMessage(
            role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part(_conversation(input.messages))]
        )
        return self._events(message, input.enable_streaming, ctx)

    def resume(self, info: ResumeInfo, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Answer the remote task's ``input-required`` with this interrupt's resume data."""
        state = info.state if isinstance(info.state, Mapping) else {}
        if state.get("kind") != _KIND:
            raise ValueError(f"RemoteA2AAgent {self.name!r}: resume state is not one of this agent's: {info.state!r}")
        return self._resumed(state, info, ctx)

    async def _resumed(
        self, state: Mapping[str, Any], info: ResumeInfo, ctx: AgentContext
    ) -> AsyncIterator[AgentEvent]:
        interrupt_id = str(state["interrupt"])
        if interrupt_id not in info.targets:  # not answered: still paused
            yield _pause(ctx, interrupt_id, dict(state["info"]), dict(state))
            return
        try:
            part = _resume_part(self.url, info.targets[interrupt_id])
        except RemoteAgentError as exc:
            yield AgentEvent(error=exc)
            return
        message = A2AMessage(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            task_id=str(state["taskId"]),
            context_id=str(state["contextId"]),
            parts=[part],
        )
        async with aclosing(self._events(message, info.enable_streaming, ctx)) as events:
            async for event in events:
                yield event

    async def _events(self, message: A2AMessage, streaming: bool, ctx: AgentContext) -> AsyncGenerator[AgentEvent]:
        pump: _Pump | None = None
        client: Client | None = None
        ended = False
        async with self._http() as http:
            try:
                if self.card is None:
                    self.card = await self._fetch(http)
                client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(self.card)
                if message.task_id:
                    await self._check_waiting(client, message.task_id)
                pump = _Pump(client.send_message(SendMessageRequest(message=message)), self.url)
                async with aclosing(self._read(pump, streaming, ctx)) as events:
                    async for event in events:
                        yield event
                ended = True
            except RemoteAgentError as exc:
                ended = True
                yield AgentEvent(error=exc)
            finally:
                with anyio.CancelScope(shield=True):
                    if pump is not None:
                        if not ended and client is not None and pump.task_id is not None:
                            await _cancel(client, pump, pump.task_id)
                        await pump.responses.aclose()  # type: ignore[attr-defined]

    async def _check_waiting(self, client: Client, task_id: str) -> None:
        """A resume answers a task that still waits for input: say so when it does not (it ended, was canceled
        or is gone) rather than send the answer (an error answer to a stream is the SDK client's worst path)."""
        try:
            task = await client.get_task(GetTaskRequest(id=task_id))
        except (A2AError, httpx.HTTPError) as exc:
            raise RemoteAgentError(self.url, f"cannot resume: {exc}", task_id=task_id) from exc
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
            raise RemoteAgentError(
                self.url, "cannot resume: the task no longer waits for input", task_id=task_id, state=state
            )

    async def _read(self, pump: _Pump, streaming: bool, ctx: AgentContext) -> AsyncGenerator[AgentEvent]:
        final: Message | None = None
        current: _Artifact | None = None
        while True:
            if current is not None:
                await current.drain()
                final = Message(role="assistant", content=current.text)
                current = None
            response = await pump.next()
            if response is None:
                break
            kind = response.WhichOneof("payload")
            if kind == "message":
                text = _text(response.message.parts)
                final = Message(role="assistant", content=text)
                yield _message(final)
                await pump.finish()
                break
            if kind == "artifact_update":
                update = response.artifact_update
                text = _text(update.artifact.parts)
                artifact = _Artifact(pump, update.artifact.artifact_id, text, done=update.last_chunk)
                if streaming:
                    current = artifact
                    reader = StreamReader.from_async_iterator(artifact.chunks())
                    yield AgentEvent(output=AgentOutput(MessageVariant(True, None, reader, "assistant")))
                else:
                    await artifact.drain()
                    final = Message(role="assistant", content=artifact.text)
                    yield _message(final)
                continue
            if kind == "task":
                status, task_id = response.task.status, response.task.id
                for item in response.task.artifacts:  # a whole task (a server that does not stream)
                    if _text(item.parts):
                        final = Message(role="assistant", content=_text(item.parts))
                        yield _message(final)
            elif kind == "status_update":
                status, task_id = response.status_update.status, response.status_update.task_id
            else:
                continue
            said = _text(status.message.parts) if status.HasField("message") else ""
            if status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                remote = _remote_interrupts(status.message) if status.HasField("message") else []
                info: dict[str, Any] = {
                    "reason": "input_required",
                    "message": said or "the remote agent asks for input",
                    "url": self.url,
                    "taskId": task_id,
                    "contextId": pump.context_id,
                    "interrupts": remote,
                }
                if len(remote) == 1 and remote[0].get("responseSchema"):
                    info["reason"] = remote[0].get("reason", "input_required")
                    info["responseSchema"] = remote[0]["responseSchema"]
                interrupt_id = f"a2a-{uuid.uuid4().hex}"
                state: dict[str, Any] = {"kind": _KIND, "interrupt": interrupt_id, "taskId": task_id}
                state.update(contextId=pump.context_id, info=info)
                await pump.finish()
                yield _pause(ctx, interrupt_id, info, state)
                return
            if status.state in _FAILED:
                await pump.finish()
                raise RemoteAgentError(self.url, said or "the task ended", task_id=task_id, state=_FAILED[status.state])
            if said:
                final = Message(role="assistant", content=said)
                yield _message(final)
            if status.state in _ENDED:
                await pump.finish()
                break
        if final is not None:
            ctx.session.final_message = final


async def _cancel(client: Client, pump: _Pump, task_id: str) -> None:
    """Cancel the remote task of a run closed before its end, then read its stream to the end the server gives
    it (best effort, a few seconds: the task may have ended meanwhile, the server may be gone)."""
    with anyio.move_on_after(3):
        try:
            await client.cancel_task(CancelTaskRequest(id=task_id))
            await pump.finish()
        except (A2AError, httpx.HTTPError, RemoteAgentError):
            pass  # already ended, or the server is gone: nothing left to stop


def _message(message: Message) -> AgentEvent:
    return AgentEvent(output=AgentOutput(MessageVariant(False, message, None, "assistant")))


def _pause(ctx: AgentContext, interrupt_id: str, info: dict[str, Any], state: dict[str, Any]) -> AgentEvent:
    address = ";".join(f"agent:{a}" for a in ctx.addresses)
    cause = InterruptCtx(interrupt_id, address, info, is_root_cause=True)
    return AgentEvent(action=AgentAction(interrupted=AgentInterruptInfo([cause], None, resume_state=state)))


def _remote_interrupts(message: A2AMessage) -> list[dict[str, Any]]:
    for data in get_data_parts(message.parts):
        if isinstance(data, Mapping) and isinstance(data.get("interrupts"), list):
            return [dict(i) for i in data["interrupts"] if isinstance(i, Mapping)]
    return []


def _resume_part(url: str, data: Any) -> Part:
    if isinstance(data, ApprovalDecision):
        payload: dict[str, Any] = {"approved": data.approved}
        if data.reason:
            payload["reason"] = data.reason
        if data.arguments:
            payload["editedArgs"] = json.loads(data.arguments)
        return new_data_part(payload)
    if isinstance(data, str):
        return new_text_part(data)
    if isinstance(data, Mapping):
        return new_data_part(dict(data))
    if data is None:
        raise RemoteAgentError(url, "resume data is needed to answer the remote agent's input-required")
    return new_text_part(json.dumps(data))


def _conversation(messages: Sequence[Message]) -> str:
    if not messages:
        return ""
    if len(messages) == 1:
        return messages[0].content
    lines = [f"{m.role}: {m.content}" for m in messages[:-1] if m.content and m.role in ("user", "assistant")]
    transcript = "Conversation so far:\n" + "\n".join(lines) + "\n\n" if lines else ""
    return transcript + messages[-1].content
