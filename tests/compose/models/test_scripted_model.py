"""ScriptedChatModel, the ChatModel protocol and ChatModelOptions."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compose.errors import ModelRateLimitError, ModelServerError, ScriptExhaustedError, StreamEnd
from compose.models.base import ChatModel, ChatModelOptions
from compose.models.scripted import ScriptedCall, ScriptedChatModel
from compose.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    ToolCall,
    ToolInfo,
    Usage,
    concat_messages,
    user_message,
)
from compose.stream import StreamReader

pytestmark = pytest.mark.anyio

HI = [user_message("hi there")]
ADD = ToolInfo(name="add", description="Add two numbers")


def call(name: str, args: str, *, id: str = "", index: int | None = None) -> ToolCall:
    return ToolCall(id=id, index=index, function=FunctionCall(name=name, arguments=args))


async def read_all(reader: StreamReader[Message]) -> list[Message]:
    async with reader:
        return [chunk async for chunk in reader]


# --- options ------------------------------------------------------------------------------------------------


def test_options_from_kwargs_put_unknown_names_in_extra() -> None:
    opts = ChatModelOptions.from_kwargs(temperature=0.5, stop="END", seed=3, extra={"user": "u"})
    assert opts == ChatModelOptions(temperature=0.5, stop=("END",), extra={"seed": 3, "user": "u"})


def test_options_merged_overrides_and_keeps_the_rest() -> None:
    base = ChatModelOptions.from_kwargs(temperature=0.5, max_tokens=10, seed=3)
    merged = base.merged(
        temperature=0.1, max_tokens=None, top_p=0.9, stop=["a", "b"], tool_choice="add", seed=4
    )
    assert merged == ChatModelOptions(
        temperature=0.1, max_tokens=10, top_p=0.9, stop=("a", "b"), tool_choice="add", extra={"seed": 4}
    )
    assert base == ChatModelOptions(temperature=0.5, max_tokens=10, extra={"seed": 3})
    assert base.merged() is base


def test_all_models_satisfy_the_protocol() -> None:
    from compose.models.json_action import JSONActionChatModel
    from compose.models.openai_model import OpenAIChatModel

    scripted = ScriptedChatModel([])
    assert isinstance(scripted, ChatModel)
    assert isinstance(JSONActionChatModel(scripted), ChatModel)
    assert isinstance(OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9/v1"), ChatModel)
    assert not isinstance(object(), ChatModel)


# --- generate -----------------------------------------------------------------------------------------------


async def test_a_string_answers_as_an_assistant_message_with_usage() -> None:
    model = ScriptedChatModel(["two words"])
    out = await model.generate(HI)
    assert out == Message(
        role="assistant",
        content="two words",
        response_meta=ResponseMeta(
            finish_reason="stop", usage=Usage(prompt_tokens=2, completion_tokens=2, total_tokens=4)
        ),
    )


async def test_tool_calls_get_index_and_id_and_finish_reason_tool_calls() -> None:
    model = ScriptedChatModel(
        ["first", Message(role="assistant", tool_calls=[call("add", "{}"), call("mul", "[]", id="x")])],
        usage=False,
    )
    await model.generate(HI)
    out = await model.generate(HI)
    assert out.tool_calls == [call("add", "{}", id="call_1_0", index=0), call("mul", "[]", id="x", index=1)]
    assert out.response_meta == ResponseMeta(finish_reason="tool_calls", usage=None)


async def test_a_scripted_response_meta_is_kept() -> None:
    meta = ResponseMeta(
        finish_reason="length", usage=Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    )
    msg = Message(role="assistant", content="x", response_meta=meta)
    out = await ScriptedChatModel([msg]).generate(HI)
    assert out is msg


async def test_fixed_usage_is_reported() -> None:
    usage = Usage(prompt_tokens=9, completion_tokens=8, total_tokens=17)
    out = await ScriptedChatModel(["a"], usage=usage).generate(HI)
    assert out.response_meta == ResponseMeta(finish_reason="stop", usage=usage)


async def test_function_responses_see_the_messages() -> None:
    seen: list[list[Message]] = []

    def echo(messages: list[Message]) -> str:
        seen.append(messages)
        return messages[-1].content.upper()

    async def answer(messages: list[Message]) -> Message:
        await anyio.lowlevel.checkpoint()
        return Message(role="assistant", content=f"{len(messages)} messages")

    model = ScriptedChatModel([echo, answer], usage=False)
    assert (await model.generate(HI)).content == "HI THERE"
    assert seen == [HI]
    assert (await model.generate([*HI, *HI])).content == "2 messages"


async def test_calls_are_recorded_with_options_and_tools() -> None:
    model = ScriptedChatModel(["a", "b"], temperature=0.5, seed=1)
    bound = model.with_tools([ADD])
    await model.generate(HI, max_tokens=5)
    reader = await bound.stream(HI, temperature=0.0)
    await read_all(reader)
    assert model.calls == [
        ScriptedCall(HI, ChatModelOptions(temperature=0.5, max_tokens=5, extra={"seed": 1}), (), False),
        ScriptedCall(HI, ChatModelOptions(temperature=0.0, extra={"seed": 1}), (ADD,), True),
    ]
    assert bound.calls is model.calls


def test_with_tools_returns_a_new_model_and_leaves_the_original() -> None:
    model = ScriptedChatModel(["a"])
    bound = model.with_tools([ADD])
    assert bound is not model
    assert model.tools == ()
    assert bound.tools == (ADD,)
    assert repr(bound) == "ScriptedChatModel(calls=0, remaining=1, tools=['add'])"


async def test_running_past_the_script_is_a_clear_error() -> None:
    model = ScriptedChatModel(["only"])
    await model.generate(HI)
    with pytest.raises(ScriptExhaustedError) as info:
        await model.generate(HI)
    assert (
        str(info.value)
        == "ScriptedChatModel has 1 scripted responses and was called past its script (call 1, 0-based)"
    )
    with pytest.raises(ScriptExhaustedError):
        await model.stream(HI)
    assert len(model.calls) == 3


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size must be at least 1, got 0"):
        ScriptedChatModel([], chunk_size=0)


# --- failures -----------------------------------------------------------------------------------------------


async def test_fail_at_call_raises_and_does_not_use_up_the_response() -> None:
    boom = ModelRateLimitError("slow down", status_code=429)
    model = ScriptedChatModel(["ok"], fail_at_call={0: boom, 1: boom}, usage=False)
    with pytest.raises(ModelRateLimitError) as info:
        await model.generate(HI)
    assert info.value is boom
    with pytest.raises(ModelRateLimitError):
        await model.stream(HI)
    assert (await model.generate(HI)).content == "ok"
    assert [c.streaming for c in model.calls] == [False, True, False]


async def test_fail_at_chunk_delivers_the_error_mid_stream() -> None:
    boom = ModelServerError("broke")
    model = ScriptedChatModel(["abcdefgh"], chunk_size=2, fail_at_chunk={(0, 2): boom}, usage=False)
    reader = await model.stream(HI)
    async with reader:
        assert (await reader.recv()).content == "ab"
        assert (await reader.recv()).content == "cd"
        with pytest.raises(ModelServerError) as info:
            await reader.recv()
        assert info.value is boom
        with pytest.raises(StreamEnd):
            await reader.recv()
    # the failed stream did not use up the response: the retry plays it again
    again = concat_messages(await read_all(await model.stream(HI)))
    assert again.content == "abcdefgh"


async def test_fail_past_the_last_chunk_comes_after_all_chunks() -> None:
    boom = ModelServerError("late")
    model = ScriptedChatModel(["abcd"], chunk_size=2, fail_at_chunk={(0, 99): boom})
    reader = await model.stream(HI)
    got: list[str] = []
    with pytest.raises(ModelServerError, match="late"):
        async with reader:
            async for chunk in reader:
                got.append(chunk.content)
    assert got == ["ab", "cd"]


# --- streaming ----------------------------------------------------------------------------------------------


async def test_stream_chunks_like_a_real_server() -> None:
    answer = Message(
        role="assistant",
        content="Let me",
        reasoning_content="hmm",
        tool_calls=[call("add", '{"a":1}', id="c1"), call("neg", "", id="c2")],
    )
    chunks = await read_all(await ScriptedChatModel([answer], chunk_size=4, usage=False).stream(HI))
    fn = FunctionCall
    assert chunks == [
        Message(role="assistant", reasoning_content="hmm"),
        Message(role="assistant", content="Let "),
        Message(role="assistant", content="me"),
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="c1", index=0, function=fn(name="add", arguments='{"a"'))],
        ),
        Message(role="assistant", tool_calls=[ToolCall(index=0, type="", function=fn(arguments=":1}"))]),
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="c2", index=1, function=fn(name="neg"))],
            response_meta=ResponseMeta(finish_reason="tool_calls"),
        ),
    ]


async def test_an_empty_answer_streams_one_chunk() -> None:
    chunks = await read_all(await ScriptedChatModel([""], usage=False).stream(HI))
    assert chunks == [Message(role="assistant", response_meta=ResponseMeta(finish_reason="stop"))]


async def test_stream_is_closed_early_without_error() -> None:
    reader = await ScriptedChatModel(["abcdefgh"], chunk_size=1).stream(HI)
    assert (await reader.recv()).content == "a"
    await reader.aclose()


texts = st.text(max_size=25)
names = st.text(alphabet="abcxyz_", min_size=1, max_size=6)


@st.composite
def answers(draw: st.DrawFn) -> Message:
    calls = [
        ToolCall(id=draw(names), function=FunctionCall(name=draw(names), arguments=draw(texts)))
        for _ in range(draw(st.integers(0, 3)))
    ]
    return Message(
        role="assistant",
        content=draw(texts),
        reasoning_content=draw(texts),
        tool_calls=calls,
        name=draw(st.none() | names),
        extra=draw(st.dictionaries(names, st.integers(), max_size=2)),
    )


@settings(max_examples=60, deadline=None)
@given(answer=answers(), chunk_size=st.integers(1, 7))
def test_stream_concatenates_to_the_generated_message(answer: Message, chunk_size: int) -> None:
    async def check() -> None:
        model = ScriptedChatModel([answer, answer], chunk_size=chunk_size)
        whole = await model.generate(HI)
        chunks = await read_all(await model.stream(HI))
        assert concat_messages(chunks) == whole
        for chunk in chunks:
            for frag in chunk.tool_calls:
                assert frag.index is not None
        first_fragments = {}
        for chunk in chunks:
            for frag in chunk.tool_calls:
                if frag.index not in first_fragments:
                    first_fragments[frag.index] = frag
                    assert frag.id and frag.function.name
                else:
                    assert frag.id == "" and frag.function.name == ""
        assert whole.tool_calls == [
            c.model_copy(update={"index": i}) for i, c in enumerate(answer.tool_calls)
        ]
        assert whole.content == answer.content

    anyio.run(check)
