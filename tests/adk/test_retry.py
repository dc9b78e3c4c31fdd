"""Model retry (eino-semantics 4.8): attempts, events per attempt, WillRetryError, exhaustion, backoff."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.retry import ModelRetryConfig, RetryChatModel, default_backoff, default_is_retryable
from adk.errors import AgentTimeoutError, RetryExhaustedError, WillRetryError
from adk.runner import Runner
from compose.errors import (
    ModelAuthError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelServerError,
    NodeRunError,
)
from compose.models import OpenAIChatModel, ScriptedChatModel
from compose.models.base import ChatModel
from compose.schema import Message
from tests.adk.helpers import call, calling, collect, kinds
from tests.compose.models.openai_server import OpenAIServer, completion, error_reply, json_reply, sse, text_chunks

pytestmark = pytest.mark.anyio


def no_wait(waits: list[int]) -> ModelRetryConfig:
    def backoff(attempt: int) -> float:
        waits.append(attempt)
        return 0.0

    return ModelRetryConfig(max_retries=3, backoff=backoff)


def agent(model: ScriptedChatModel, retry: ModelRetryConfig) -> ChatModelAgent:
    return ChatModelAgent("a", "d", model=model, model_retry=retry)


def agent_of(model: ChatModel, retry: ModelRetryConfig) -> ChatModelAgent:
    return ChatModelAgent("a", "d", model=model, model_retry=retry)


async def test_generate_retries_until_success() -> None:
    waits: list[int] = []
    model = ScriptedChatModel(["ok"], fail_at_call={0: ModelServerError("503"), 1: ModelServerError("503")})
    run = Runner(agent(model, no_wait(waits))).query("hi")
    seen = await collect(run)
    assert kinds(seen) == ["assistant"]  # failed generate attempts send no event
    assert seen[0].content == "ok"
    assert len(model.calls) == 3
    assert waits == [1, 2]


async def test_stream_error_events_end_with_will_retry() -> None:
    # Eino's TestChatModelAgentRetry_StreamError: failing twice at chunk 2, MaxRetries=3
    boom = ModelServerError("connection reset")
    waits: list[int] = []
    model = ScriptedChatModel(["a long enough answer"], chunk_size=4, fail_at_chunk={(0, 2): boom, (1, 2): boom})
    events = []
    async with Runner(agent(model, no_wait(waits)), enable_streaming=True).query("hi") as run:
        async for event in run:
            events.append(event)
    assert len(events) == 3
    assert len(model.calls) == 3
    for k, event in enumerate(events[:2]):
        assert event.message is not None and event.message.message_stream is not None
        async with event.message.message_stream as stream:
            chunks = [(await stream.recv()).content for _ in range(2)]
            with pytest.raises(WillRetryError) as info:
                await stream.recv()
            assert [c async for c in stream] == []
        assert chunks == ["a lo", "ng e"]
        assert info.value.retry_attempt == k
        assert info.value.__cause__ is boom
    assert events[2].message is not None
    assert (await events[2].message.get_message()).content == "a long enough answer"
    assert run.final_message is not None and run.final_message.content == "a long enough answer"
    assert waits == [1, 2]


@pytest.mark.parametrize("streaming", [False, True])
async def test_exhausted_retries_end_the_run(streaming: bool) -> None:
    errors = {k: ModelServerError(f"fail {k}") for k in range(3)}
    model = ScriptedChatModel(["never"], fail_at_call=errors)
    config = ModelRetryConfig(max_retries=2, backoff=lambda attempt: 0.0)
    run = Runner(agent(model, config), enable_streaming=streaming).query("hi")
    seen = await collect(run)
    assert kinds(seen) == ["error"]
    error = seen[0].error
    assert isinstance(error, RetryExhaustedError)
    assert error.total_retries == 2
    assert error.last_error is errors[2]
    assert "exceeds max retries" in str(error)
    assert run.termination_reason == "retry_exhausted"
    assert len(model.calls) == 3


async def test_a_non_retryable_error_is_raised_at_once() -> None:
    bad = ModelBadRequestError("bad request", status_code=400)
    model = ScriptedChatModel(["never"], fail_at_call={0: bad})
    config = ModelRetryConfig(max_retries=3, is_retryable=lambda e: getattr(e, "retryable", False))
    seen = await collect(Runner(agent(model, config)).query("hi"))
    assert kinds(seen) == ["error"]
    assert isinstance(seen[0].error, NodeRunError)
    assert seen[0].error.__cause__ is bad
    assert len(model.calls) == 1


async def test_a_non_retryable_stream_error_ends_the_event_stream_with_it() -> None:
    bad = ModelBadRequestError("bad", status_code=400)
    model = ScriptedChatModel(["abcdefgh"], chunk_size=2, fail_at_chunk={(0, 1): bad})
    config = ModelRetryConfig(max_retries=3, is_retryable=lambda e: False)
    events = []
    async with Runner(agent(model, config), enable_streaming=True).query("hi") as run:
        async for event in run:
            events.append(event)
    assert [e.error is None for e in events] == [True, False]
    assert events[0].message is not None and events[0].message.message_stream is not None
    async with events[0].message.message_stream as stream:
        assert (await stream.recv()).content == "ab"
        with pytest.raises(ModelBadRequestError):
            await stream.recv()
    assert len(model.calls) == 1


async def test_retry_model_alone() -> None:
    model = ScriptedChatModel(["x"], fail_at_call={0: ModelServerError("1")})
    retry = RetryChatModel(model, ModelRetryConfig(max_retries=1, backoff=lambda a: 0.0))
    assert (await retry.generate([Message(role="user", content="q")])).content == "x"
    assert "max_retries=1" in repr(retry)
    with pytest.raises(ValueError, match="max_retries"):
        RetryChatModel(model, ModelRetryConfig(max_retries=-1))


async def test_tool_rounds_with_retry_each_attempt_gets_an_event() -> None:
    model = ScriptedChatModel(
        [calling(call("exit", '{"final_result": "bye"}'))], fail_at_chunk={(0, 0): ModelServerError("x")}
    )
    config = ModelRetryConfig(max_retries=1, backoff=lambda a: 0.0)
    events = []
    agent_ = ChatModelAgent("a", "d", model=model, model_retry=config, exit_tool=True)
    async with Runner(agent_, enable_streaming=True).query("hi") as run:
        async for event in run:
            events.append(event)
    assert len(events) == 3  # failed attempt, good attempt, exit tool
    assert events[0].message is not None
    with pytest.raises(WillRetryError):
        await events[0].message.get_message()
    await events[0].aclose()
    assert events[1].message is not None
    assert (await events[1].message.get_message()).tool_calls[0].function.name == "exit"
    assert events[2].action is not None and events[2].action.exit


def test_default_backoff_follows_eino() -> None:
    assert default_backoff(0) == 0.1
    assert default_backoff(-3) == 0.1
    for _ in range(50):
        assert 0.1 <= default_backoff(1) < 0.15
        assert 0.4 <= default_backoff(3) < 0.6
        assert 6.4 <= default_backoff(7) < 9.6
        assert 10.0 <= default_backoff(8) < 15.0


# --- the default policy and Retry-After (through the OpenAI client and a local server) ---------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
@pytest.mark.parametrize("streaming", [False, True])
async def test_the_default_policy_does_not_retry_auth_or_bad_requests(status: int, streaming: bool) -> None:
    with OpenAIServer([error_reply(status, "no")]) as server:
        async with OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model:
            config = ModelRetryConfig(max_retries=3, backoff=lambda attempt: 0.0)
            seen = await collect(Runner(agent_of(model, config), enable_streaming=streaming).query("hi"))
    assert kinds(seen) == ["error"]
    error = seen[0].error
    assert not isinstance(error, RetryExhaustedError)
    assert isinstance(error, NodeRunError)
    assert isinstance(error.__cause__, ModelAuthError if status in (401, 403) else ModelBadRequestError)
    assert error.__cause__.status_code == status
    assert len(server.requests) == 1


def test_default_is_retryable() -> None:
    assert default_is_retryable(ModelServerError("503"))
    assert default_is_retryable(ValueError("anything else"))
    assert not default_is_retryable(ModelAuthError("401"))
    assert not default_is_retryable(ModelBadRequestError("400"))
    assert not default_is_retryable(AgentTimeoutError(1.0))
    assert ModelRetryConfig().retryable(ModelServerError("x"))
    assert not ModelRetryConfig().retryable(ModelAuthError("x"))
    assert ModelRetryConfig(is_retryable=lambda e: True).retryable(ModelAuthError("x"))


def test_retry_after_lengthens_the_backoff_up_to_its_bound() -> None:
    config = ModelRetryConfig(max_retries=1, backoff=lambda attempt: 0.5, max_retry_after=10.0)
    assert config.delay(1) == 0.5
    assert config.delay(1, ModelRateLimitError("429", retry_after=3.0)) == 3.0
    assert config.delay(1, ModelRateLimitError("429", retry_after=0.1)) == 0.5  # the backoff is longer
    assert config.delay(1, ModelRateLimitError("429", retry_after=99.0)) == 10.0
    assert config.delay(1, ModelServerError("503")) == 0.5
    default_bound = ModelRetryConfig(max_retries=1, backoff=lambda a: 0.1)
    assert default_bound.delay(1, ModelRateLimitError("429", retry_after=60.0)) == 10.0


@pytest.mark.parametrize("streaming", [False, True])
async def test_retry_after_is_honoured(streaming: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("adk.chat_model.retry.anyio", SimpleNamespace(sleep=sleep))
    ok = sse(text_chunks("fine")) if streaming else json_reply(completion("fine"))
    replies = [error_reply(429, "slow", headers={"Retry-After": "4"}), error_reply(503, "busy"), ok]
    with OpenAIServer(replies) as server:
        async with OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model:
            config = ModelRetryConfig(max_retries=3, backoff=lambda attempt: 0.25)
            seen = await collect(Runner(agent_of(model, config), enable_streaming=streaming).query("hi"))
    assert kinds(seen)[-1] == "assistant"
    assert seen[-1].content == "fine"
    assert waits == [4.0, 0.25]  # the server's wait, then the backoff
    assert len(server.requests) == 3
