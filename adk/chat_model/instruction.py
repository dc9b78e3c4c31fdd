"""An agent's instruction: ``{key}`` placeholders filled from session values, and the transfer-to-agent texts
(eino-semantics 4.2, 4.7).

Example::

    >>> format_instruction("You plan trips to {city}.", {"city": "Hangzhou"}, agent_name="travel")
    'You plan trips to Hangzhou.'
    >>> format_instruction("Reply as JSON: {}", {}, agent_name="travel")  # no session values: left as it is
    'Reply as JSON: {}'
    >>> transfer_instruction([("weather", "knows the weather")]).splitlines()[:3]
    ['Available other agents: ', '- Agent name: weather', '  Agent description: knows the weather']
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from adk.errors import InstructionFormatError
from compose.errors import TemplateFormatError
from compose.lowlevel import format_fstring
from compose.schema import FunctionCall, Message, ToolCall, assistant_message, tool_message

__all__ = [
    "TRANSFER_TO_AGENT_ARGUMENT",
    "TRANSFER_TO_AGENT_ARGUMENT_DESCRIPTION",
    "TRANSFER_TO_AGENT_TOOL_DESCRIPTION",
    "TRANSFER_TO_AGENT_TOOL_NAME",
    "InstructionFormatError",
    "concat_instructions",
    "format_instruction",
    "gen_transfer_messages",
    "transfer_instruction",
    "transfer_tool_result",
]

TRANSFER_TO_AGENT_TOOL_NAME = "transfer_to_agent"
"""The transfer tool's name (Eino's ``TransferToAgentToolName``, chatmodel.go)."""

TRANSFER_TO_AGENT_TOOL_DESCRIPTION = "Transfer the question to another agent."
"""The transfer tool's description (Eino's ``TransferToAgentToolDesc``, chatmodel.go)."""

TRANSFER_TO_AGENT_ARGUMENT = "agent_name"
"""The transfer tool's one (required, string) argument (Eino's ``toolInfoTransferToAgent``, chatmodel.go)."""

TRANSFER_TO_AGENT_ARGUMENT_DESCRIPTION = "the name of the agent to transfer to"
"""The description of :data:`TRANSFER_TO_AGENT_ARGUMENT`."""

# Eino's TransferToAgentInstruction and agentDescriptionTpl (instruction.go), English; the space after
# "agents:" before the first agent's line is Eino's.
_TRANSFER_INSTRUCTION = """Available other agents: {agents}

Decision rule:
- If you're best suited for the question according to your description: ANSWER
- If another agent is better according its description: CALL '{tool_name}' function with their agent name

When transferring: OUTPUT ONLY THE FUNCTION CALL"""
_AGENT_LINE = "\n- Agent name: {name}\n  Agent description: {description}"


def format_instruction(instruction: str, session_values: Mapping[str, Any], *, agent_name: str) -> str:
    """Fill the ``{key}`` placeholders of ``instruction`` from ``session_values``, as Eino's default
    ``GenModelInput`` does (chatmodel.go ``defaultGenModelInput``: ``prompt.FromMessages(schema.FString, ...)``,
    i.e. ``pyfmt.Fmt(instruction, values)``, PEP 3101 formatting with the values map as the one argument). The
    formatting is ``ChatTemplate``'s f-string format (``compose.prompt``).

    Rules (Eino's, through pyfmt):

    - Nothing is formatted when ``instruction`` is empty or there are no session values: the instruction is
      returned as it is, braces and all.
    - ``{{`` and ``}}`` are literal braces; a lone ``{`` or ``}`` is an error.
    - ``{key}`` is ``session_values[key]``; ``{key.field}`` and ``{key[field]}`` look into the value (a mapping
      by key, a sequence by index, otherwise an attribute); ``{key:spec}`` applies a format spec.
    - A key with no session value is an error naming the key and the agent.

    Where pyeino differs: values are rendered with Python's ``format()`` (``True``, ``['a']``), not Go's ``%v``
    (``true``, ``[a]``); a positional ``{}`` or ``{0}`` is an error (Eino renders the whole values map there with
    Go's ``%v``, which has no Python meaning). A ``!r`` conversion or a nested ``{}`` in a format spec is an
    error, as in Eino.

    Args:
        instruction: the instruction, with ``{key}`` placeholders.
        session_values: the run's session values.
        agent_name: the agent whose instruction it is (for the error).

    Returns:
        The filled instruction.

    Raises:
        InstructionFormatError: see above.
    """
    if not instruction or not session_values:
        return instruction
    try:
        return format_fstring(instruction, session_values, noun="session value")
    except TemplateFormatError as error:
        raise InstructionFormatError(error.problem, agent_name=agent_name, key=error.key) from error


def transfer_instruction(agents: Sequence[tuple[str, str]]) -> str:
    """The instruction added to an agent that can transfer to ``agents`` (``(name, description)`` pairs: its
    sub-agents, then its parent unless transfer to the parent is disallowed), Eino's
    ``genTransferToAgentInstruction`` (instruction.go) in English.

    Example::

        transfer_instruction([("weather", "knows the weather"), ("root", "the router")])
    """
    lines = "".join(_AGENT_LINE.format(name=name, description=description) for name, description in agents)
    return _TRANSFER_INSTRUCTION.format(agents=lines, tool_name=TRANSFER_TO_AGENT_TOOL_NAME)


def transfer_tool_result(dest_agent_name: str) -> str:
    """What the transfer tool returns: ``successfully transferred to agent [dest]`` (chatmodel.go
    ``transferToAgentToolOutput``)."""
    return f"successfully transferred to agent [{dest_agent_name}]"


def concat_instructions(*instructions: str) -> str:
    """Join instructions with a blank line (utils.go ``concatInstructions``), e.g. an agent's own instruction
    and :func:`transfer_instruction`."""
    return "\n\n".join(instructions)


def gen_transfer_messages(dest_agent_name: str, *, tool_call_id: str | None = None) -> tuple[Message, Message]:
    """The assistant message calling the transfer tool and the tool's answer, as a deterministic transfer or an
    agent tool's history records them (utils.go ``GenTransferMessages``): the call's arguments are the bare
    agent name, not JSON (as in Eino).

    Args:
        dest_agent_name: the agent transferred to.
        tool_call_id: the call's id; a fresh uuid4 when not given.
    """
    call_id = tool_call_id if tool_call_id is not None else str(uuid.uuid4())
    call = ToolCall(id=call_id, function=FunctionCall(name=TRANSFER_TO_AGENT_TOOL_NAME, arguments=dest_agent_name))
    return (
        assistant_message("", [call]),
        tool_message(transfer_tool_result(dest_agent_name), call_id, TRANSFER_TO_AGENT_TOOL_NAME),
    )
