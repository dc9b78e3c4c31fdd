"""OpenAIChatModel through the real ``openai`` client over real HTTP, against a local scripted server."""

from __future__ import annotations

import anyio
import openai
import pytest

from compose.errors import (
    ChatModelError,
    ModelAuthError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
)
from compose.models.openai_model import OpenAIChatModel, translate_openai_error
from compose.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    ToolCall,
    ToolInfo,
    Usage,
    assistant_message,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)
from compose.stream import StreamReader
from tests.compose.models.openai_server import (
    CLOSES_STREAM_EARLY,
    OpenAIServer,
    Reply,
    completion,
    delta_chunk,
    error_reply,
    json_reply,
    sse,
    text_chunks,
    tool_call_chunks,
)

pytestmark = pytest.mark.anyio

HI = [user_message("hi")]
WEATHER = ToolInfo(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def read_all(reader: StreamReader[Message]) -> list[Message]:
    async with reader:
        return [chunk async for chunk in reader]


def call(index: int, id: str, name: str, args: str) -> ToolCall:
    return ToolCall(id=id, index=index, function=FunctionCall(name=name, arguments=args))


# --- streaming ----------------------------------------------------------------------------------------------


async def test_stream_plain_text_with_usage(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(sse(text_chunks("Hello, world", size=5), usage=(3, 4)))
    chunks = await read_all(await model.stream(HI))
    assert [c.content for c in chunks] == ["Hello", ", wor", "ld", "", ""]
    assert chunks[-2].response_meta == ResponseMeta(finish_reason="stop", model="test-model")
    assert chunks[-1].response_meta == ResponseMeta(
        usage=Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7), model="test-model"
    )
    assert concat_messages(chunks) == Message(
        role="assistant",
        content="Hello, world",
        response_meta=ResponseMeta(
            finish_reason="stop",
            usage=Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7),
            model="test-model",
        ),
    )
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_one_tool_call_split_over_many_chunks(server: OpenAIServer, model: OpenAIChatModel) -> None:
    args = '{"city": "Hangzhou", "date": "tomorrow"}'
    server.push(sse(tool_call_chunks(0, "call_1", "get_weather", args, size=3), finish_reason="tool_calls"))
    chunks = await read_all(await model.with_tools([WEATHER]).stream(HI))
    fragments = [f for c in chunks for f in c.tool_calls]
    assert len(fragments) == 1 + len(range(0, len(args), 3))
    assert all(f.index == 0 for f in fragments)
    assert [f.id for f in fragments[:2]] == ["call_1", ""]
    assert [f.function.name for f in fragments[:2]] == ["get_weather", ""]
    whole = concat_messages(chunks)
    assert whole.tool_calls == [call(0, "call_1", "get_weather", args)]
    assert whole.response_meta == ResponseMeta(finish_reason="tool_calls", model="test-model")
    assert server.requests[0].json["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]


async def test_text_and_reasoning_before_a_tool_call(server: OpenAIServer, model: OpenAIChatModel) -> None:
    events = [
        *text_chunks("think first", size=6, field="reasoning_content"),
        *text_chunks("Let me check.", size=7),
        *tool_call_chunks(0, "call_9", "get_weather", '{"city": "Paris"}'),
    ]
    server.push(sse(events, finish_reason="tool_calls", usage=(10, 20)))
    chunks = await read_all(await model.stream(HI))
    assert chunks[0] == Message(role="assistant", reasoning_content="think ")
    assert concat_messages(chunks) == Message(
        role="assistant",
        content="Let me check.",
        reasoning_content="think first",
        tool_calls=[call(0, "call_9", "get_weather", '{"city": "Paris"}')],
        response_meta=ResponseMeta(
            finish_reason="tool_calls",
            usage=Usage(prompt_tokens=10, completion_tokens=20, total_tokens=30),
            model="test-model",
        ),
    )


async def test_reasoning_field_named_reasoning_is_read(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(sse([delta_chunk({"reasoning": "abc"}), *text_chunks("ok")]))
    whole = concat_messages(await read_all(await model.stream(HI)))
    assert (whole.reasoning_content, whole.content) == ("abc", "ok")


async def test_two_parallel_tool_calls_with_interleaved_fragments(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    a = tool_call_chunks(0, "call_a", "get_weather", '{"city": "Oslo"}', size=5)
    b = tool_call_chunks(1, "call_b", "get_time", '{"tz": "UTC"}', size=5)
    interleaved = [chunk for pair in zip(a, b, strict=False) for chunk in pair]
    interleaved += a[len(b) :] if len(a) > len(b) else b[len(a) :]
    server.push(sse(interleaved, finish_reason="tool_calls"))
    chunks = await read_all(await model.stream(HI))
    assert [f.index for c in chunks for f in c.tool_calls][:4] == [0, 1, 0, 1]
    assert concat_messages(chunks).tool_calls == [
        call(0, "call_a", "get_weather", '{"city": "Oslo"}'),
        call(1, "call_b", "get_time", '{"tz": "UTC"}'),
    ]


async def test_several_tool_call_fragments_in_one_chunk(server: OpenAIServer, model: OpenAIChatModel) -> None:
    both = delta_chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "x", "type": "function", "function": {"name": "f", "arguments": "{"}},
                {"index": 1, "id": "y", "function": {"name": "g", "arguments": "{}"}},
            ]
        }
    )
    rest = delta_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})
    server.push(sse([both, rest], finish_reason="tool_calls"))
    whole = concat_messages(await read_all(await model.stream(HI)))
    assert whole.tool_calls == [call(0, "x", "f", "{}"), call(1, "y", "g", "{}")]


@CLOSES_STREAM_EARLY
async def test_closing_the_reader_early_closes_the_response(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(sse(text_chunks("a" * 300, size=1)), sse(text_chunks("next")))
    reader = await model.stream(HI)
    assert (await reader.recv()).content == "a"
    await reader.aclose()
    # the connection was released: the next request goes through
    assert concat_messages(await read_all(await model.stream(HI))).content == "next"


@CLOSES_STREAM_EARLY
async def test_a_reader_closed_before_reading_closes_the_response(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(sse(text_chunks("unread")), sse(text_chunks("read")))
    reader = await model.stream(HI)
    await reader.aclose()
    assert concat_messages(await read_all(await model.stream(HI))).content == "read"


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type", "retryable", "cause"),
    [
        (429, ModelRateLimitError, True, openai.RateLimitError),
        (500, ModelServerError, True, openai.InternalServerError),
        (503, ModelServerError, True, openai.InternalServerError),
        (400, ModelBadRequestError, False, openai.BadRequestError),
        (404, ModelBadRequestError, False, openai.NotFoundError),
        (401, ModelAuthError, False, openai.AuthenticationError),
        (403, ModelAuthError, False, openai.PermissionDeniedError),
        (408, ModelTimeoutError, True, openai.APIStatusError),
    ],
)
@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_http_errors_are_typed(
    server: OpenAIServer,
    model: OpenAIChatModel,
    status: int,
    error_type: type[ChatModelError],
    retryable: bool,
    cause: type[Exception],
    streaming: bool,
) -> None:
    server.push(error_reply(status, "nope"))
    with pytest.raises(error_type) as info:
        if streaming:
            await model.stream(HI)
        else:
            await model.generate(HI)
    err = info.value
    assert type(err) is error_type
    assert err.retryable is retryable
    assert err.status_code == status
    assert isinstance(err.__cause__, cause)
    assert "nope" in str(err)
    assert len(server.requests) == 1  # max_retries=0: the caller decides about retries


async def test_a_stream_without_finish_is_truncated(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(sse(text_chunks("partial"), finish_reason=None, done=False))
    reader = await model.stream(HI)
    got: list[str] = []
    with pytest.raises(ModelServerError) as info:
        async with reader:
            async for chunk in reader:
                got.append(chunk.content)
    assert "".join(got) == "partial"
    assert str(info.value) == "stream truncated: the response ended without a finish reason"
    assert info.value.retryable


async def test_a_connection_dropped_mid_stream_is_a_server_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(sse(text_chunks("abcdefghij", size=2), abort_after=3))
    reader = await model.stream(HI)
    got: list[str] = []
    with pytest.raises(ModelServerError) as info:
        async with reader:
            async for chunk in reader:
                got.append(chunk.content)
    assert got == ["ab", "cd"]
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


@CLOSES_STREAM_EARLY
async def test_an_error_event_in_the_stream_is_a_server_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(sse([*text_chunks("ab"), {"error": {"message": "overloaded", "type": "server_error"}}]))
    reader = await model.stream(HI)
    with pytest.raises(ModelServerError, match="overloaded"):
        await read_all(reader)


async def test_connection_refused_is_a_retryable_server_error() -> None:
    with OpenAIServer() as srv:
        url = srv.base_url
    async with OpenAIChatModel("m", base_url=url, api_key="k") as model:
        with pytest.raises(ModelServerError) as info:
            await model.generate(HI)
    assert info.value.retryable
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


async def test_a_timeout_is_typed(server: OpenAIServer) -> None:
    # the request never gets an answer in time: a read timeout of zero fails at once
    server.push(sse(text_chunks("late")))
    async with OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=1e-9) as model:
        with pytest.raises(ModelTimeoutError) as info:
            await model.generate(HI)
    assert info.value.retryable
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


async def test_an_unreadable_body_is_a_response_error(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(json_reply({"id": "x", "choices": []}))
    with pytest.raises(ModelResponseError, match="no choices"):
        await model.generate(HI)


def test_other_sdk_errors_become_chat_model_errors() -> None:
    exc = openai.OpenAIError("odd")
    err = translate_openai_error(exc)
    assert type(err) is ChatModelError
    assert str(err) == "OpenAIError: odd"
    assert err.__cause__ is exc
    assert not err.retryable


# --- generate and mapping -----------------------------------------------------------------------------------


async def test_generate_maps_the_answer(server: OpenAIServer, model: OpenAIChatModel) -> None:
    tool_calls = [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    server.push(
        json_reply(
            completion(None, tool_calls=tool_calls, finish_reason="tool_calls", reasoning_content="why")
        )
    )
    out = await model.generate(HI)
    assert out == Message(
        role="assistant",
        reasoning_content="why",
        tool_calls=[call(0, "c1", "get_weather", '{"city":"Rome"}'), call(1, "c2", "get_time", "{}")],
        response_meta=ResponseMeta(
            finish_reason="tool_calls",
            usage=Usage(prompt_tokens=5, completion_tokens=7, total_tokens=12),
            model="test-model",
        ),
    )
    assert "stream" not in server.requests[0].json


async def test_messages_tools_and_options_are_mapped(server: OpenAIServer) -> None:
    server.push(json_reply(completion("done")), json_reply(completion("again")))
    history = [
        system_message("be brief"),
        Message(role="user", content="weather?", name="ann"),
        assistant_message("checking", [call(0, "c1", "get_weather", '{"city":"Rome"}')]),
        tool_message("sunny", "c1", "get_weather"),
        assistant_message("", [call(0, "c2", "get_weather", "{}")]),
    ]
    async with OpenAIChatModel(
        "m", base_url=server.base_url, api_key="k", temperature=0.5, max_tokens=9, seed=42
    ) as base:
        model = base.with_tools([WEATHER])
        assert base.tools == ()
        assert (
            await model.generate(history, temperature=0.0, top_p=0.8, stop="END", tool_choice="get_weather")
        ).content == "done"
        await model.generate(HI, tool_choice="required", extra_headers={"x-trace": "t1"})
    first, second = (r.json for r in server.requests)
    assert first["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?", "name": "ann"},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
    ]
    assert {k: v for k, v in first.items() if k != "messages"} == {
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 9,
        "top_p": 0.8,
        "stop": ["END"],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": WEATHER.description,
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "seed": 42,
    }
    assert (second["temperature"], second["tool_choice"], second["seed"]) == (0.5, "required", 42)
    assert server.requests[1].headers["x-trace"] == "t1"


async def test_environment_variables_configure_the_model(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    server.push(json_reply(completion("hi")))
    async with OpenAIChatModel() as model:
        assert (await model.generate(HI)).content == "hi"
    assert server.requests[0].json["model"] == "env-model"
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


def test_missing_model_or_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="no model name: pass model= or set OPENAI_MODEL"):
        OpenAIChatModel(api_key="k")
    with pytest.raises(ValueError, match="no API key: pass api_key= or set OPENAI_API_KEY"):
        OpenAIChatModel("m")


async def test_a_client_passed_in_is_used_and_not_closed(server: OpenAIServer) -> None:
    server.push(json_reply(completion("one")), json_reply(completion("two")))
    async with openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0) as client:
        async with OpenAIChatModel("m", client=client) as model:
            assert (await model.generate(HI)).content == "one"
        assert (await client.chat.completions.create(model="m", messages=[])).choices[
            0
        ].message.content == "two"


def test_repr_shows_model_url_and_tools() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k").with_tools([WEATHER])
    assert (
        repr(model) == "OpenAIChatModel(model='m', base_url='http://127.0.0.1:9/v1/', tools=['get_weather'])"
    )


async def test_generate_plain_text(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(Reply(status=200, body=completion("plain")))
    assert (await model.generate(HI)).content == "plain"


@CLOSES_STREAM_EARLY
async def test_cancelling_a_read_then_closing_releases_the_response(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    held = sse(text_chunks("abcdef", size=2))
    held.hold_after = 2  # the role chunk and "ab" are sent, then the server waits
    server.push(held, sse(text_chunks("after")))
    reader = await model.stream(HI)
    assert (await reader.recv()).content == "ab"
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.recv)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    await reader.aclose()
    held.release.set()
    assert concat_messages(await read_all(await model.stream(HI))).content == "after"


def test_the_package_exports_its_public_names() -> None:
    import compose.models as models

    assert models.__all__ == sorted(models.__all__)
    for name in models.__all__:
        assert getattr(models, name) is not None


# --- stalled streams ----------------------------------------------------------------------------------------


def test_streams_have_an_idle_timeout_by_default() -> None:
    from compose.models.openai_model import DEFAULT_STREAM_IDLE_TIMEOUT

    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert model.stream_idle_timeout == DEFAULT_STREAM_IDLE_TIMEOUT == 120.0
    with pytest.raises(ValueError, match="stream_idle_timeout must be positive"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k", stream_idle_timeout=0)


@pytest.mark.parametrize("hold_after", [1, 2], ids=["before-content", "mid-content"])
@CLOSES_STREAM_EARLY
async def test_a_stalled_stream_is_a_timeout(server: OpenAIServer, hold_after: int) -> None:
    # the server sends `hold_after` events, then nothing (until released at the end of the test)
    stalled = sse(text_chunks("abcdef", size=2))
    stalled.hold_after = hold_after
    server.push(stalled, sse(text_chunks("after")))
    got: list[str] = []
    try:
        async with OpenAIChatModel("m", base_url=server.base_url, api_key="k", stream_idle_timeout=0.2) as model:
            with pytest.raises(ModelTimeoutError) as info:
                async with await model.stream(HI) as reader:
                    async for chunk in reader:
                        got.append(chunk.content)
            assert str(info.value) == "the stream stalled: no data from the server for 0.2 s"
            assert info.value.retryable
            assert isinstance(info.value.__cause__, openai.APITimeoutError)
            # a client's own, shorter read timeout is kept
            assert model._stream_timeout(60.0).read == 60.0
            stalled.release.set()
            assert concat_messages(await read_all(await model.stream(HI))).content == "after"
    finally:
        stalled.release.set()
    assert got == ["ab"][: hold_after - 1]


def test_the_idle_timeout_applies_to_streams_only_and_yields_to_a_timeout_option() -> None:
    url = "http://127.0.0.1:9/v1"
    model = OpenAIChatModel("m", base_url=url, api_key="k")
    streamed = model._request(HI, {}, streaming=True)["timeout"]
    assert (streamed.connect, streamed.read, streamed.write) == (5.0, 120.0, 600.0)  # the SDK's, read cut
    assert "timeout" not in model._request(HI, {})
    assert OpenAIChatModel("m", base_url=url, api_key="k", timeout=30.0)._request(HI, {}, streaming=True)[
        "timeout"
    ] == 30.0
    assert "timeout" not in OpenAIChatModel("m", base_url=url, api_key="k", stream_idle_timeout=None)._request(
        HI, {}, streaming=True
    )


# --- Retry-After ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
async def test_retry_after_is_on_the_error(
    server: OpenAIServer, model: OpenAIChatModel, headers: dict[str, str], expected: float | None
) -> None:
    server.push(error_reply(429, "slow down", headers=headers))
    with pytest.raises(ModelRateLimitError) as info:
        await model.generate(HI)
    assert info.value.retry_after == expected


def test_retry_after_as_an_http_date() -> None:
    from datetime import UTC, datetime

    from compose.models._openai_errors import retry_after_seconds

    now = datetime(2015, 10, 21, 7, 27, 30, tzinfo=UTC)
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=now) == 30.0
    assert retry_after_seconds({"retry-after": "-3"}, now=now) is None
