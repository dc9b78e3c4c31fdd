"""Instruction placeholders and the transfer texts (eino-semantics 4.2, 4.7; Eino's chatmodel.go
``defaultGenModelInput`` with pyfmt, instruction.go, chatmodel.go's transfer tool, utils.go).

The brace cases follow pyfmt's own tests (pyfmt_test.go) and its error texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from adk import InstructionFormatError
from adk.chat_model.instruction import (
    TRANSFER_TO_AGENT_ARGUMENT,
    TRANSFER_TO_AGENT_ARGUMENT_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_DESCRIPTION,
    TRANSFER_TO_AGENT_TOOL_NAME,
    concat_instructions,
    format_instruction,
    gen_transfer_messages,
    transfer_instruction,
    transfer_tool_result,
)
from adk.errors import AgentError
from compose.schema import FunctionCall, ToolCall


def fmt(instruction: str, values: dict[str, Any]) -> str:
    return format_instruction(instruction, values, agent_name="planner")


# ---------------------------------------------------------------------------------------------------------------
# format_instruction


def test_placeholders_are_filled_from_session_values() -> None:
    assert fmt("Plan a trip to {city} for {days} days.", {"city": "Hangzhou", "days": 3}) == (
        "Plan a trip to Hangzhou for 3 days."
    )


@pytest.mark.parametrize("instruction", ["Reply as JSON: {}", '{"a": 1}', "{unknown}", "lone { and }"])
def test_nothing_is_formatted_without_session_values(instruction: str) -> None:
    assert fmt(instruction, {}) == instruction


def test_empty_instruction() -> None:
    assert fmt("", {"a": 1}) == ""


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [("{{}}", "{}"), ("{{", "{"), ("}}", "}"), ('{{"city": "{city}"}}', '{"city": "Hangzhou"}')],
)
def test_doubled_braces_are_literal(instruction: str, expected: str) -> None:
    assert fmt(instruction, {"city": "Hangzhou"}) == expected


def test_a_missing_key_names_the_key_and_the_agent() -> None:
    with pytest.raises(InstructionFormatError) as info:
        fmt("Hello {user_name}, you live in {city}.", {"city": "Hangzhou"})
    err = info.value
    assert err.key == "user_name"
    assert err.agent_name == "planner"
    assert "'planner'" in str(err) and "{user_name}" in str(err) and "(session values: city)" in str(err)
    assert isinstance(err, AgentError) and isinstance(err, ValueError)


@pytest.mark.parametrize(
    ("instruction", "message"),
    [
        ("Single } here", "Single '}' encountered in format string"),
        ("Single { here", "expected '}' before end of string"),
        ("Reply as JSON: {}", "positional placeholder {}"),
        ("{0}", "positional placeholder {0}"),
        ('Reply as {"a": 1}', "names no session value '\"a\"'"),
        ("{city!r}", "conversion !r"),
        ("{city:{width}}", "contains a brace"),
        ("{city:d}", "cannot format {city:d} (str)"),
    ],
)
def test_malformed_instructions_fail(instruction: str, message: str) -> None:
    with pytest.raises(InstructionFormatError, match="planner") as info:
        fmt(instruction, {"city": "Hangzhou", "width": 3})
    assert message in str(info.value)


def test_format_spec() -> None:
    assert fmt("[{city:>10}] {ratio:.2f}", {"city": "Hangzhou", "ratio": 0.5}) == "[  Hangzhou] 0.50"


@dataclass
class Profile:
    name: str
    tags: list[str]


def test_nested_lookups_by_key_index_and_attribute() -> None:
    values = {"user": {"name": "Li", "langs": ["zh", "en"]}, "profile": Profile("Wang", ["a", "b"])}
    assert fmt("{user.name} {user[name]} {user[langs][1]} {user.langs.0}", values) == "Li Li en zh"
    assert fmt("{profile.name} {profile.tags[1]}", values) == "Wang b"


@pytest.mark.parametrize("instruction", ["{user.age}", "{user[langs][5]}", "{profile.age}", "{profile._hidden}"])
def test_a_missing_nested_field_fails(instruction: str) -> None:
    values = {"user": {"name": "Li", "langs": ["zh"]}, "profile": Profile("Wang", [])}
    with pytest.raises(InstructionFormatError, match="has no"):
        fmt(instruction, values)


def test_values_are_rendered_with_python_format() -> None:
    assert fmt("{flag} {items} {none}", {"flag": True, "items": ["a"], "none": None}) == "True ['a'] None"


# ---------------------------------------------------------------------------------------------------------------
# transfer texts


def test_transfer_tool_constants() -> None:
    assert TRANSFER_TO_AGENT_TOOL_NAME == "transfer_to_agent"
    assert TRANSFER_TO_AGENT_TOOL_DESCRIPTION == "Transfer the question to another agent."
    assert TRANSFER_TO_AGENT_ARGUMENT == "agent_name"
    assert TRANSFER_TO_AGENT_ARGUMENT_DESCRIPTION == "the name of the agent to transfer to"
    assert transfer_tool_result("ChildAgent") == "successfully transferred to agent [ChildAgent]"


def test_transfer_instruction() -> None:
    text = transfer_instruction([("weather", "knows the weather"), ("root", "routes questions")])
    assert text == (
        "Available other agents: \n"
        "- Agent name: weather\n"
        "  Agent description: knows the weather\n"
        "- Agent name: root\n"
        "  Agent description: routes questions\n"
        "\n"
        "Decision rule:\n"
        "- If you're best suited for the question according to your description: ANSWER\n"
        "- If another agent is better according its description: CALL 'transfer_to_agent' function with their "
        "agent name\n"
        "\n"
        "When transferring: OUTPUT ONLY THE FUNCTION CALL"
    )


def test_transfer_instruction_keeps_braces_in_descriptions() -> None:
    assert "Agent description: returns {json}" in transfer_instruction([("a", "returns {json}")])


def test_concat_instructions() -> None:
    assert concat_instructions("You are a router.", "Available...") == "You are a router.\n\nAvailable..."
    assert concat_instructions("only") == "only"


def test_gen_transfer_messages() -> None:
    # utils.go GenTransferMessages: the arguments are the bare name
    call, result = gen_transfer_messages("Child", tool_call_id="id-1")
    assert call.role == "assistant" and call.content == ""
    assert call.tool_calls == [ToolCall(id="id-1", function=FunctionCall(name="transfer_to_agent", arguments="Child"))]
    assert result.role == "tool"
    assert (result.content, result.tool_call_id, result.tool_name) == (
        "successfully transferred to agent [Child]",
        "id-1",
        "transfer_to_agent",
    )
    first, second = gen_transfer_messages("Child")
    assert first.tool_calls[0].id == second.tool_call_id != "id-1"


@pytest.mark.parametrize("instruction", ["{user.}", "{user[name]x}", "{user..name}", "{user[]}"])
def test_a_malformed_field_name_fails(instruction: str) -> None:
    with pytest.raises(InstructionFormatError, match="cannot read the field name"):
        fmt(instruction, {"user": {"name": "Li"}})
