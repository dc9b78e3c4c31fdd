"""JSONActionChatModel: seed 002's JSON action protocol over a model without native function calling."""

from __future__ import annotations

import json

import pytest

from compose.errors import ModelResponseError, ModelServerError
from compose.models.json_action import JSONActionChatModel, parse_json_action, render_json_action_prompt
from compose.models.scripted import ScriptedChatModel
from compose.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    ToolCall,
    ToolInfo,
    Usage,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)
from compose.stream import StreamReader

pytestmark = pytest.mark.anyio

WEATHER = ToolInfo(
    name="get_weather",
    description="Weather forecast for a city and a date",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ROUTE = ToolInfo(name="estimate_route", description="Transit time between places")
ASK = [user_message("Plan a day in Hangzhou")]


def model_with(
    *answers: str, tools: tuple[ToolInfo, ...] = (WEATHER, ROUTE)
) -> tuple[JSONActionChatModel, ScriptedChatModel]:
    inner = ScriptedChatModel(list(answers), usage=False)
    return JSONActionChatModel(inner).with_tools(tools), inner


async def read_all(reader: StreamReader[Message]) -> list[Message]:
    async with reader:
        return [chunk async for chunk in reader]


# --- parsing ------------------------------------------------------------------------------------------------

TOOL_JSON = '{"type": "tool", "tool": "get_weather", "args": {"city": "杭州", "date": "明天"}}'


@pytest.mark.parametrize(
    "text",
    [
        TOOL_JSON,
        f"  {TOOL_JSON}\n",
        f"```json\n{TOOL_JSON}\n```",
        f"```\n{TOOL_JSON}\n```",
        f"Sure, let me check the weather first.\n```json\n{TOOL_JSON}\n```\nThen I will plan.",
        f"OK, I will check the weather: {TOOL_JSON} and then continue.",
        f"Here {{not json}} is the action {TOOL_JSON}",
    ],
    ids=["plain", "whitespace", "fenced-json", "fenced", "fence-in-prose", "embedded", "brace-before"],
)
def test_parse_finds_the_action(text: str) -> None:
    assert parse_json_action(text) == {
        "type": "tool",
        "tool": "get_weather",
        "args": {"city": "杭州", "date": "明天"},
    }


def test_parse_handles_deeply_nested_arguments() -> None:
    text = 'Action: {"type": "tool", "tool": "t", "args": {"a": {"b": {"c": [1, {"d": "}"}]}}}} done'
    assert parse_json_action(text)["args"] == {"a": {"b": {"c": [1, {"d": "}"}]}}}


def test_unparseable_output_quotes_the_start_of_the_text() -> None:
    text = "I think the weather is fine. " * 20
    with pytest.raises(ModelResponseError) as info:
        parse_json_action(text)
    assert str(info.value) == f"model answer is not a JSON action: {text[:200] + '...'!r}"
    assert not info.value.retryable


def test_json_without_a_type_is_not_an_action() -> None:
    with pytest.raises(ModelResponseError, match=r"not a JSON action: '\{\"tool\": \"x\"\}'"):
        parse_json_action('{"tool": "x"}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"wrapper": {"type": "final", "answer": "inner"}}', "inner"),
        ('{"not": json, "x": {"type": "final", "answer": "inside a broken one"}}', "inside a broken one"),
        ('He said "hi {there} and {"type": "final", "answer": "after a stray quote"}', "after a stray quote"),
        ('{] {"unbalanced": [} {"type": "final", "answer": "after mismatches"}', "after mismatches"),
        ('{"a": {"type": "final", "answer": "first"}} {"type": "final", "answer": "second"}', "first"),
        ('{"s": "a } or { in a string", "type": "final", "answer": "braces in strings"}', "braces in strings"),
        ('{"s": "escaped \\" quote }", "type": "final", "answer": "escapes"}', "escapes"),
        ('{"open": ' + "[" * 98 + "]" * 98 + ', "type": "final", "answer": "100 levels"}', "100 levels"),
    ],
    ids=["nested", "in-invalid", "stray-quote", "mismatched", "document-order", "strings", "escapes", "depth-100"],
)
def test_parse_finds_embedded_actions(text: str, expected: str) -> None:
    assert parse_json_action(text)["answer"] == expected


@pytest.fixture
def json_work(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The characters the parser hands to ``json`` to decode (a measure of its work that needs no clock)."""
    offered: list[int] = []
    real_loads, real_raw_decode = json.loads, json.JSONDecoder.raw_decode
    inside = [False]

    def loads(s: str, *args: object, **kwargs: object) -> object:
        offered.append(len(s))
        inside[0] = True
        try:
            return real_loads(s, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            inside[0] = False

    def raw_decode(self: json.JSONDecoder, s: str, idx: int = 0) -> tuple[object, int]:
        if not inside[0]:
            offered.append(len(s) - idx)
        return real_raw_decode(self, s, idx)

    monkeypatch.setattr(json, "loads", loads)
    monkeypatch.setattr(json.JSONDecoder, "raw_decode", raw_decode)
    return offered


FINAL = '{"type": "final", "answer": "ok"}'


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        "{]" * 100_000 + FINAL,
        '{"type" ]' * 25_000 + FINAL,
        "{}" * 100_000 + FINAL,
        '{"a": "' + "x" * 200_000 + FINAL,
        'x "' * 100_000 + FINAL,
        '```json\n{"a": [1]}\n``` ' * 20_000 + FINAL,
        "}" * 200_000 + FINAL,
    ],
    ids=["mismatched", "typed-mismatched", "empty-objects", "unterminated-string", "quotes", "fences", "closers"],
)
def test_parsing_is_linear_in_the_length(json_work: list[int], text: str) -> None:
    assert parse_json_action(text)["answer"] == "ok"
    assert sum(json_work) <= 4 * len(text)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        "{" * 200_000,
        '{"a": ' * 200_000,
        '{"type": "final", "answer": ' + "[" * 200_000,
        'x {"type": ' + '"{' * 100_000,
    ],
    ids=["braces", "objects", "arrays", "in-strings"],
)
def test_deep_nesting_is_a_response_error(json_work: list[int], text: str) -> None:
    with pytest.raises(ModelResponseError) as info:
        parse_json_action(text)
    assert str(info.value).startswith("model answer nests JSON more than 100 levels deep: ")
    assert len(str(info.value)) < 300
    assert sum(json_work) <= 4 * len(text)


async def test_deeply_nested_arguments_in_a_string_are_a_response_error() -> None:
    answer = '{"type": "tool", "tool": "get_weather", "args": "' + "[" * 100_000 + "]" * 100_000 + '"}'
    model, _ = model_with(answer)
    with pytest.raises(ModelResponseError, match="JSON tool action with arguments nested too deeply"):
        await model.generate(ASK)


# --- generate -----------------------------------------------------------------------------------------------


async def test_a_tool_action_becomes_a_tool_call() -> None:
    model, _ = model_with(f"```json\n{TOOL_JSON}\n```")
    out = await model.generate(ASK)
    assert out.content == ""
    [call] = out.tool_calls
    assert call.id.startswith("call_") and len(call.id) == 29
    assert call == ToolCall(
        id=call.id,
        index=0,
        function=FunctionCall(name="get_weather", arguments='{"city": "杭州", "date": "明天"}'),
    )
    assert out.response_meta == ResponseMeta(finish_reason="stop")


async def test_a_final_action_becomes_the_content() -> None:
    model, _ = model_with(
        '{"type": "final", "answer": "Take an umbrella."}', '{"type": "final", "answer": {"k": 1}}'
    )
    assert await model.generate(ASK) == Message(
        role="assistant", content="Take an umbrella.", response_meta=ResponseMeta(finish_reason="stop")
    )
    assert (await model.generate(ASK)).content == '{"k": 1}'


async def test_arguments_may_be_a_json_string_or_missing() -> None:
    model, _ = model_with(
        '{"type": "tool", "tool": "get_weather", "args": "{\\"city\\": \\"Rome\\"}"}',
        '{"type": "tool", "tool": "estimate_route"}',
    )
    assert (await model.generate(ASK)).tool_calls[0].function.arguments == '{"city": "Rome"}'
    assert (await model.generate(ASK)).tool_calls[0].function.arguments == "{}"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ('{"type": "dance"}', "unknown JSON action type 'dance'"),
        ('{"type": "tool", "args": {}}', "JSON tool action without a tool name"),
        (
            '{"type": "tool", "tool": "t", "args": "{broken"}',
            "JSON tool action with arguments that are not JSON",
        ),
        ("no json at all", "model answer is not a JSON action: 'no json at all'"),
    ],
)
async def test_bad_actions_are_typed_errors(answer: str, message: str) -> None:
    model, _ = model_with(answer)
    with pytest.raises(ModelResponseError, match=message):
        await model.generate(ASK)


async def test_tool_call_ids_are_unique() -> None:
    model, _ = model_with(*[TOOL_JSON] * 20)
    ids = {(await model.generate(ASK)).tool_calls[0].id for _ in range(20)}
    assert len(ids) == 20


async def test_reasoning_and_usage_of_the_inner_answer_are_kept() -> None:
    usage = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    inner = ScriptedChatModel(
        [Message(role="assistant", content=TOOL_JSON, reasoning_content="rain later?")], usage=usage
    )
    out = await JSONActionChatModel(inner, [WEATHER]).generate(ASK)
    assert out.reasoning_content == "rain later?"
    assert out.response_meta == ResponseMeta(finish_reason="stop", usage=usage)


# --- the prompt ---------------------------------------------------------------------------------------------


async def test_the_protocol_is_prepended_as_a_system_message() -> None:
    model, inner = model_with('{"type": "final", "answer": "ok"}')
    await model.generate(ASK, temperature=0.3)
    [recorded] = inner.calls
    system, user = recorded.messages
    assert system.role == "system"
    assert system.content == render_json_action_prompt([WEATHER, ROUTE])
    assert user == ASK[0]
    assert recorded.tools == ()
    assert recorded.options.temperature == 0.3


def test_the_prompt_describes_the_protocol_and_each_tool() -> None:
    text = render_json_action_prompt([WEATHER, ROUTE])
    assert '{"type": "tool", "tool": "<tool name>", "args": {"<parameter>": <value>}}' in text
    assert '{"type": "final", "answer": "<your answer>"}' in text
    assert (
        "- get_weather: Weather forecast for a city and a date\n"
        '  parameters (JSON schema): {"type": "object", "properties": {"city": {"type": "string"}}}\n'
        "- estimate_route: Transit time between places\n"
    ) in text


@pytest.mark.parametrize(
    ("choice", "rule"),
    [
        ("none", "- Do not call a tool now: give the final answer."),
        ("required", "- Call a tool now: answer with a tool action."),
        ("get_weather", "- Call the tool get_weather now."),
    ],
)
async def test_tool_choice_becomes_a_rule_and_is_not_sent_on(choice: str, rule: str) -> None:
    model, inner = model_with('{"type": "final", "answer": "ok"}')
    await model.generate(ASK, tool_choice=choice)
    prompt = inner.calls[0].messages[0].content
    assert prompt.endswith(rule)
    assert inner.calls[0].options.tool_choice is None


async def test_an_existing_system_message_is_extended() -> None:
    model, inner = model_with('{"type": "final", "answer": "ok"}')
    await model.generate([system_message("You are a travel assistant."), *ASK])
    system = inner.calls[0].messages[0]
    assert system.content == "You are a travel assistant.\n\n" + render_json_action_prompt([WEATHER, ROUTE])
    assert len(inner.calls[0].messages) == 2


async def test_tool_calls_and_results_in_the_history_are_rewritten_for_a_plain_model() -> None:
    model, inner = model_with('{"type": "final", "answer": "ok"}')
    call = ToolCall(id="c1", index=0, function=FunctionCall(name="get_weather", arguments='{"city": "杭州"}'))
    history = [*ASK, assistant_message("", [call]), tool_message("rain after 3pm", "c1")]
    await model.generate(history)
    _, _, action, observation = inner.calls[0].messages
    assert action == Message(
        role="assistant", content='{"type": "tool", "tool": "get_weather", "args": {"city": "杭州"}}'
    )
    assert observation == Message(
        role="user", content="Observation from tool get_weather (call c1):\nrain after 3pm"
    )


def test_with_tools_returns_a_new_wrapper() -> None:
    inner = ScriptedChatModel([])
    plain = JSONActionChatModel(inner)
    bound = plain.with_tools([WEATHER])
    assert plain.tools == ()
    assert bound.tools == (WEATHER,)
    assert bound.inner is inner
    assert inner.tools == ()


# --- stream -------------------------------------------------------------------------------------------------


async def test_stream_emits_the_parsed_message_as_one_chunk() -> None:
    model, inner = model_with(f"Let me look.\n{TOOL_JSON}")
    chunks = await read_all(await model.stream(ASK))
    assert len(chunks) == 1
    assert chunks[0].tool_calls[0].function.name == "get_weather"
    assert json.loads(chunks[0].tool_calls[0].function.arguments) == {"city": "杭州", "date": "明天"}
    assert inner.calls[0].streaming


async def test_stream_errors_arrive_through_the_reader() -> None:
    model, _ = model_with("not an action")
    reader = await model.stream(ASK)
    async with reader:
        with pytest.raises(ModelResponseError, match="not a JSON action"):
            await reader.recv()


async def test_a_mid_stream_failure_of_the_inner_model_passes_through() -> None:
    inner = ScriptedChatModel([TOOL_JSON], fail_at_chunk={(0, 3): ModelServerError("cut")})
    reader = await JSONActionChatModel(inner, [WEATHER]).stream(ASK)
    with pytest.raises(ModelServerError, match="cut"):
        await read_all(reader)


async def test_closing_the_stream_unread_closes_the_inner_stream() -> None:
    model, _ = model_with(TOOL_JSON)
    reader = await model.stream(ASK)
    await reader.aclose()  # the leak check of conftest fails the test if the inner reader stays open
