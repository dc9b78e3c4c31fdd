"""The conversation an agent sees when a flow runs it: the root input, then every message recorded in the run's
session, with other agents' messages retold as user messages (eino-semantics 4.7, Eino's flow.go).

Example::

    >>> from compose.schema import assistant_message, user_message
    >>> events = [RecordedEvent("router", assistant_message("Let me ask the weather agent"))]
    >>> [m.content for m in build_agent_input([user_message("Rain?")], events, agent_name="weather")]
    ['Rain?', 'For context: [router] said: Let me ask the weather agent.']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adk.agent import History, RecordedEvent
from adk.chat_model.instruction import gen_transfer_messages
from adk.events import AgentEvent
from compose.schema import Message, user_message

if TYPE_CHECKING:
    from adk.agent import _Record

__all__ = [
    "HistoryEntry",
    "HistoryRewriter",
    "RecordedEvent",
    "build_agent_input",
    "chat_history_for_agent_tool",
    "default_history_rewriter",
    "is_own_event",
    "is_recorded",
    "rewrite_message",
]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message of the history a :data:`HistoryRewriter` turns into an agent's input (Eino's
    ``HistoryEntry``).

    Attributes:
        message: the message.
        agent_name: the agent that produced it ("" for the root input).
        is_user_input: the message is one of the run's root input messages.
    """

    message: Message
    agent_name: str = ""
    is_user_input: bool = False


HistoryRewriter = Callable[[Sequence[HistoryEntry]], list[Message]]
"""Turns the history entries into the messages the next agent is given (Eino's ``HistoryRewriter``); it may
raise to fail the agent's run."""


def is_own_event(event: AgentEvent, run_path: Sequence[str]) -> bool:
    """Whether ``event`` was emitted by the agent running at ``run_path`` itself, not by an agent nested in it
    (an agent tool's inner agent): only such events' actions steer the flow (flow.go ``run``,
    ``exactRunPathMatch``)."""
    return tuple(event.run_path) == tuple(run_path)


def is_recorded(event: AgentEvent, run_path: Sequence[str]) -> bool:
    """Whether the flow agent at ``run_path`` records ``event`` in the session, for later agents' history: its
    own events (:func:`is_own_event`) except an interrupt (flow.go ``run``: "interrupt action are not added to
    session")."""
    interrupted = event.action is not None and event.action.interrupted is not None
    return not interrupted and is_own_event(event, run_path)


def rewrite_message(message: Message, agent_name: str) -> Message:
    """Retell a message of agent ``agent_name`` as a user message for another agent (flow.go
    ``rewriteMessage``).

    The text starts ``For context:``; an assistant message adds `` [A] said: <content>.`` when it has content
    and `` [A] called tool: `name` with arguments: <arguments>.`` per tool call; a tool message with content
    adds `` [A] `tool` tool returned result: <content>.``. Any other message (a user or system message, an
    empty tool result) is retold as a bare ``For context:``. Nothing else is carried over (no name, reasoning
    or extra).

    Example::

        >>> from compose.schema import assistant_message
        >>> rewrite_message(assistant_message("hi"), "A").content
        'For context: [A] said: hi.'
    """
    parts = ["For context:"]
    if message.role == "assistant":
        if message.content:
            parts.append(f" [{agent_name}] said: {message.content}.")
        for call in message.tool_calls:
            parts.append(
                f" [{agent_name}] called tool: `{call.function.name}` with arguments: {call.function.arguments}."
            )
    elif message.role == "tool" and message.content:
        # Go formats a missing tool name as "" too.
        parts.append(f" [{agent_name}] `{message.tool_name or ''}` tool returned result: {message.content}.")
    return user_message("".join(parts))


def default_history_rewriter(agent_name: str) -> HistoryRewriter:
    """The history rewriter of agent ``agent_name`` when none is given (flow.go ``buildDefaultHistoryRewriter``
    and ``genMsg``): root input messages and the agent's own messages are kept as they are, every other
    agent's message is retold by :func:`rewrite_message`. Entries are matched by agent name, not run path.
    """

    def rewrite(entries: Sequence[HistoryEntry]) -> list[Message]:
        return [
            e.message if e.is_user_input or e.agent_name == agent_name else rewrite_message(e.message, e.agent_name)
            for e in entries
        ]

    return rewrite


def build_agent_input(
    root_input: Sequence[Message],
    events: Sequence[RecordedEvent],
    *,
    agent_name: str,
    rewriter: HistoryRewriter | None = None,
    skip_transfer_messages: bool = False,
) -> list[Message]:
    """The messages a flow gives agent ``agent_name``: the run's root input, then the recorded events' messages
    in order, through ``rewriter`` (flow.go ``genAgentInput``).

    Rules (Eino's):

    - Every recorded event counts, whichever agent or branch of the flow emitted it; recording itself keeps only
      each agent's own, non-interrupt events (:func:`is_recorded`).
    - An event without a message (``message is None``) is skipped.
    - With ``skip_transfer_messages`` an event carrying a transfer action is skipped, and when its message
      variant is a tool result the entry before it is dropped as well (the assistant message that called the
      transfer tool; it is dropped whatever it is, even a root input message, as in Eino).

    Args:
        root_input: the messages the run started with.
        events: the session's recorded events, oldest first.
        agent_name: the agent the input is for (the default rewriter keeps its own messages as they are).
        rewriter: turns the history entries into messages; :func:`default_history_rewriter` by default.
        skip_transfer_messages: leave transfer messages out (Eino's ``WithSkipTransferMessages``).

    Returns:
        The agent's input messages.
    """
    retelling = Retelling()
    retelling.start(None, root_input, skip_transfer_messages)
    for event in events:
        retelling.add(event)
    return retelling.input_for(agent_name, rewriter)


class Retelling:
    """:func:`build_agent_input` kept up for one run: a flow gives it to the agents it runs one after the other
    (a Sequential's children, the agents a transfer goes to), and each recorded event becomes a history entry,
    and is retold, once, not once per agent reading it (a Sequential of n agents retells n events, not n²/2).

    It follows one history as it grows (:meth:`input`); another history, another root input or a history that
    did not just grow (records it read are gone) start it afresh. Agents share the retold messages: they are
    model input, never events.
    """

    __slots__ = ("_history", "_last", "_messages", "_names", "_own", "_read", "_retold", "_root", "_root_len", "_skip")

    def __init__(self) -> None:
        self._history: History | None = None
        self._root: Sequence[Message] = ()
        self._root_len = 0
        self._skip = False
        # the history entries: their messages and agent names (None: a root input message)
        self._messages: list[Message] = []
        self._names: list[str | None] = []
        self._retold: list[Message] = []  # the default rewriter's messages of the first entries, made on need
        self._own: dict[str, list[int]] = {}  # each agent's entries (kept as they are for that agent)
        self._read = 0  # records of the history read
        self._last: object = None  # the last of them

    def start(self, history: History | None, root_input: Sequence[Message], skip_transfer_messages: bool) -> None:
        """Start afresh: ``root_input``, no event yet."""
        self._history, self._root, self._root_len = history, root_input, len(root_input)
        self._skip = skip_transfer_messages
        self._messages = list(root_input)
        self._names = [None] * len(root_input)
        self._retold = list(root_input)
        self._own = {}
        self._read, self._last = 0, None

    def add(self, event: RecordedEvent) -> None:
        """The history's next recorded event."""
        messages = self._messages
        if event.transfer and self._skip:
            if event.role == "tool" and messages:
                messages.pop()
                dropped = self._names.pop()
                if len(self._retold) > len(messages):
                    self._retold.pop()
                if dropped is not None:
                    self._own[dropped].pop()  # it was the last entry: that agent's last
            return
        if event.message is None:
            return
        name = event.agent_name
        own = self._own.get(name)
        if own is None:
            own = self._own[name] = []
        own.append(len(messages))
        messages.append(event.message)
        self._names.append(name)

    async def input(
        self,
        history: History,
        root_input: Sequence[Message],
        skip_transfer_messages: bool,
        agent_name: str,
        rewriter: HistoryRewriter | None = None,
    ) -> list[Message]:
        """The messages agent ``agent_name`` is given in a run on ``root_input``, once caught up with
        ``history``'s records (their messages read whole)."""
        if (
            history is not self._history
            or root_input is not self._root
            or len(root_input) != self._root_len
            or skip_transfer_messages != self._skip
        ):
            self.start(history, root_input, skip_transfer_messages)
        records = _records(history)
        read = self._read
        if read > len(records) or (read and records[read - 1] is not self._last):
            self.start(history, root_input, skip_transfer_messages)
            read = 0
        if read < len(records):
            for record in records[read:]:
                self.add(await record.resolve())
            self._read, self._last = len(records), records[-1]
        return self.input_for(agent_name, rewriter)

    def input_for(self, agent_name: str, rewriter: HistoryRewriter | None = None) -> list[Message]:
        """The messages agent ``agent_name`` is given (see :func:`build_agent_input`)."""
        messages, names = self._messages, self._names
        if rewriter is not None:
            return rewriter(
                [
                    HistoryEntry(m, is_user_input=True) if n is None else HistoryEntry(m, agent_name=n)
                    for m, n in zip(messages, names, strict=True)
                ]
            )
        retold = self._retold  # default_history_rewriter's rule, each entry retold once
        for i in range(len(retold), len(messages)):
            name = names[i]
            retold.append(messages[i] if name is None else rewrite_message(messages[i], name))
        given = list(retold)
        for i in self._own.get(agent_name, ()):
            given[i] = messages[i]  # its own messages as they are
        return given


def _records(history: History) -> list[_Record]:
    """Every record ``history`` sees, oldest first (``History.events()`` without reading their messages)."""
    if history.parent is None:
        return history.records
    chain: list[list[_Record]] = []
    h: History | None = history
    while h is not None:
        chain.append(h.records)
        h = h.parent
    return [r for records in reversed(chain) for r in records]


def chat_history_for_agent_tool(
    messages: Sequence[Message], *, agent_name: str, dest_agent_name: str, tool_call_id: str | None = None
) -> list[Message]:
    """The input of an agent tool given the full chat history (agent_tool.go ``getReactChatHistory``):
    ``messages`` (the calling agent's conversation) without its last message (the call of the agent tool), then
    a transfer to ``dest_agent_name`` (:func:`~adk.chat_model.instruction.gen_transfer_messages`); system messages are
    dropped, and every assistant and tool message is retold as coming from ``agent_name``, the calling agent.

    Args:
        messages: the calling agent's conversation, ending with the message that calls the agent tool.
        agent_name: the calling agent.
        dest_agent_name: the agent behind the tool.
        tool_call_id: the id of the synthetic transfer call (a fresh uuid4 when not given).
    """
    # An empty conversation still gets the transfer pair (Eino appends it unconditionally).
    history = [*messages[:-1], *gen_transfer_messages(dest_agent_name, tool_call_id=tool_call_id)]
    return [
        rewrite_message(m, agent_name) if m.role in ("assistant", "tool") else m for m in history if m.role != "system"
    ]
