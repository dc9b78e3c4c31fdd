"""Model failover (Eino's ``failover_chatmodel_test.go``, ``wrappers_failover_test.go`` and
``wrappers_retry_failover_test.go``, ported through ChatModelAgent): the next model takes the failed request,
later calls start with the model that answered last, retries run inside failover, and the answer names the model
that answered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adk import (
    ChatModelAgent,
    FailoverContext,
    FailoverError,
    ModelFailoverConfig,
    ModelRetryConfig,
    RetryExhaustedError,
    Runner,
)
from adk.chat_model.config import ModelConfig
from adk.chat_model.failover import default_should_failover
from adk.errors import AgentTimeoutError
from adk.middlewares import ModelWrapper
from adk.middlewares.base import AgentMiddleware
from adk.prebuilt import deep_agent
from compose.models import ScriptedChatModel
from compose.models.base import ChatModel
from compose.schema import Message
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, events_of

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


def named(name: str, responses: list[Any], **kw: Any) -> ScriptedChatModel:
    model = ScriptedChatModel(responses, **kw)
    model.model_name = name  # type: ignore[misc]
    return model


@tool
def lookup(q: str) -> str:
    """Look up.

    Args:
        q: what.
    """
    return f"found {q}"


async def answers(agent: ChatModelAgent, streaming: bool = False) -> list[Any]:
    return await collect(Runner(agent, enable_streaming=streaming).query("hi"))


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_failed_call_goes_to_the_next_model_and_the_answer_names_it(streaming: bool) -> None:
    primary = named("primary", ["never"], fail_at_call={0: Boom("primary down")})
    backup = named("backup", ["from backup"])
    shown: list[tuple[Message | None, BaseException]] = []
    contexts: list[FailoverContext] = []

    def should(message: Message | None, error: BaseException) -> bool:
        shown.append((message, error))
        return True

    def pick(ctx: FailoverContext) -> ChatModel:
        contexts.append(ctx)
        return backup

    config = ModelFailoverConfig(get_failover_model=pick, should_failover=should, max_retries=1)
    agent = ChatModelAgent("a", "d", model=primary, model_config=ModelConfig(failover=config))
    events = await events_of(Runner(agent, enable_streaming=streaming).query("hi"))
    last = events[-1].message
    assert last is not None and last.message is not None
    assert last.message.content == "from backup"
    assert last.message.response_meta is not None and last.message.response_meta.model == "backup"
    assert len(primary.calls) == 1 and len(backup.calls) == 1
    assert [str(e) for _, e in shown] == ["primary down"]
    (ctx,) = contexts
    assert ctx.failover_attempt == 1 and str(ctx.last_error) == "primary down"
    assert [m.content for m in ctx.input_messages] == ["hi"]


async def test_a_stream_failing_midway_fails_over_with_its_partial_message() -> None:
    primary = named("primary", ["p1p2 and more"], chunk_size=2, fail_at_chunk={(0, 2): Boom("mid error")})
    backup = named("backup", ["final"])
    partials: list[str] = []

    def should(message: Message | None, error: BaseException) -> bool:
        assert isinstance(error, Boom) and message is not None
        partials.append(message.content)
        return True

    config = ModelFailoverConfig(models=[backup], should_failover=should)
    outcomes: list[str] = []
    async with Runner(
        ChatModelAgent("a", "d", model=primary, model_config=ModelConfig(failover=config)), enable_streaming=True
    ).query("hi") as run:
        async for event in run:
            error = await _error_of(event)
            # the failed attempt's event stream ends with WillRetryError: another attempt follows
            outcomes.append(type(error).__name__ if error else (await event.message.get_message()).content)
    assert partials == ["p1p2"]
    assert outcomes == ["WillRetryError", "final"]


async def _error_of(event: Any) -> BaseException | None:
    try:
        await event.message.get_message()
    except BaseException as exc:
        return exc
    return None


@pytest.mark.parametrize("streaming", [False, True])
async def test_should_failover_false_raises_the_error(streaming: bool) -> None:
    primary = named("primary", ["never"], fail_at_call={0: Boom("no")})
    backup = named("backup", ["unused"])
    config = ModelFailoverConfig(models=[backup], should_failover=lambda m, e: False)
    seen = await answers(ChatModelAgent("a", "d", model=primary, model_config=ModelConfig(failover=config)), streaming)
    error = seen[-1].error
    assert error is not None and "no" in str(error) and backup.calls == []


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_failing_or_empty_pick_stops_failover(streaming: bool) -> None:
    primary = named("primary", ["never", "never"], fail_at_call={0: Boom("down"), 1: Boom("down")})

    def broken(ctx: FailoverContext) -> ChatModel:
        raise LookupError("no model for you")

    seen = await answers(
        ChatModelAgent(
            "a",
            "d",
            model=primary,
            model_config=ModelConfig(failover=ModelFailoverConfig(get_failover_model=broken, max_retries=2)),
        ),
        streaming,
    )
    assert seen[-1].error is not None and "no model for you" in str(seen[-1].error)
    seen = await answers(
        ChatModelAgent(
            "a",
            "d",
            model=primary,
            model_config=ModelConfig(failover=ModelFailoverConfig(get_failover_model=lambda ctx: None, max_retries=2)),
        ),
        streaming,
    )
    error = seen[-1].error
    assert isinstance(error, FailoverError) and error.attempt == 1
    assert str(error) == "failover GetFailoverModel returned nil model at attempt 1"


async def test_every_attempt_failing_raises_the_last_error() -> None:
    primary = named("primary", ["x"], fail_at_call={0: Boom("first")})
    b1 = named("b1", ["x"], fail_at_call={0: Boom("second")})
    b2 = named("b2", ["x"], fail_at_call={0: Boom("third")})
    seen = await answers(
        ChatModelAgent("a", "d", model=primary, model_config=ModelConfig(failover=ModelFailoverConfig(models=[b1, b2])))
    )
    assert seen[-1].error is not None and "third" in str(seen[-1].error)
    assert (len(primary.calls), len(b1.calls), len(b2.calls)) == (1, 1, 1)


async def test_later_calls_start_with_the_model_that_answered_last() -> None:
    primary = named("primary", ["never"], fail_at_call={0: Boom("down")})
    backup = named("backup", [calling(call("lookup", '{"q": "x"}', "l1")), "done"])
    agent = ChatModelAgent(
        "a", "d", model=primary, tools=[lookup], model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup]))
    )
    seen = await answers(agent)
    assert seen[-1].content == "done"
    assert len(primary.calls) == 1 and len(backup.calls) == 2  # the second call went to backup first
    # a new run starts with the agent's own model again (Eino: per run)
    again = named("primary2", ["fine"])
    agent2 = ChatModelAgent(
        "a", "d", model=again, model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup]))
    )
    assert (await answers(agent2))[-1].content == "fine"


async def test_the_models_shorthand_tries_the_own_model_then_the_list_skipping_the_current() -> None:
    primary = named("primary", ["p answer"], fail_at_call={0: Boom("p down")})
    b1 = named("b1", [calling(call("lookup", '{"q": "x"}', "l1"))], fail_at_call={1: Boom("b1 down")})
    b2 = named("b2", ["never"], fail_at_call={0: Boom("b2 down")})
    agent = ChatModelAgent(
        "a", "d", model=primary, tools=[lookup], model_config=ModelConfig(failover=ModelFailoverConfig(models=[b1, b2]))
    )
    events = await events_of(Runner(agent).query("hi"))
    final = events[-1].message
    assert final is not None and final.message is not None and final.message.content == "p answer"
    assert final.message.response_meta is not None and final.message.response_meta.model == "primary"
    # call 1: primary fails -> b1 answers; call 2: b1 (current) fails -> primary (first other) answers
    assert (len(primary.calls), len(b1.calls), len(b2.calls)) == (2, 2, 0)


@pytest.mark.parametrize("streaming", [False, True])
async def test_retries_run_inside_failover(streaming: bool) -> None:
    primary = named("primary", ["never"], fail_at_call={0: Boom("a"), 1: Boom("b")})
    backup = named("backup", ["saved"])
    errors: list[BaseException] = []

    def should(message: Message | None, error: BaseException) -> bool:
        errors.append(error)
        return True

    agent = ChatModelAgent(
        "a",
        "d",
        model=primary,
        model_retry=ModelRetryConfig(max_retries=1, backoff=lambda n: 0),
        model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup], should_failover=should)),
    )
    seen = await answers(agent, streaming)
    assert seen[-1].content == "saved"
    assert len(primary.calls) == 2 and len(backup.calls) == 1
    (error,) = errors
    assert isinstance(error, RetryExhaustedError) and str(error.last_error) == "b"
    # a retry that succeeds needs no failover
    flaky = named("flaky", ["ok"], fail_at_call={0: Boom("once")})
    unused = named("unused", ["no"])
    agent = ChatModelAgent(
        "a",
        "d",
        model=flaky,
        model_retry=ModelRetryConfig(max_retries=1, backoff=lambda n: 0),
        model_config=ModelConfig(failover=ModelFailoverConfig(models=[unused])),
    )
    assert (await answers(agent, streaming))[-1].content == "ok" and unused.calls == []


async def test_each_attempt_is_wrapped_by_the_middlewares() -> None:
    class Tag(AgentMiddleware):
        def wrap_model(self, model: ChatModel) -> ChatModel:
            class Tagged(ModelWrapper):
                async def generate(self, messages: Any, **opts: Any) -> Message:
                    answer = await self.inner.generate(messages, **opts)
                    return answer.model_copy(update={"content": "[tagged] " + answer.content})

            return Tagged(model)

    primary = named("primary", ["x"], fail_at_call={0: Boom("down")})
    backup = named("backup", [calling(call("lookup", '{"q": "y"}', "l1")), "done"])
    agent = ChatModelAgent(
        "a",
        "d",
        model=primary,
        tools=[lookup],
        middlewares=[Tag()],
        model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup])),
    )
    seen = await answers(agent)
    assert seen[-1].content == "[tagged] done"
    assert [t.name for t in backup.calls[0].tools] == ["lookup"]  # the attempt's model got the tools bound


async def test_config_checks_and_default_policy() -> None:
    with pytest.raises(ValueError, match="either models"):
        ModelFailoverConfig()
    with pytest.raises(ValueError, match="needs max_retries"):
        ModelFailoverConfig(get_failover_model=lambda ctx: None)
    with pytest.raises(TypeError, match="ModelFailoverConfig"):
        ChatModelAgent("a", "d", model=named("m", []), model_config=ModelConfig(failover=[named("b", [])]))  # type: ignore[arg-type]
    assert ModelFailoverConfig(models=[named("m", [])]).attempts == 1
    assert default_should_failover(None, Boom()) and not default_should_failover(None, AgentTimeoutError(1))


async def test_an_async_pick_may_replace_the_messages() -> None:
    primary = named("primary", ["x"], fail_at_call={0: Boom("down")})
    backup = named("backup", ["short"])

    async def pick(ctx: FailoverContext) -> tuple[ChatModel, list[Message]]:
        return backup, ctx.input_messages[-1:]

    agent = ChatModelAgent(
        "a",
        "d",
        "You are long-winded.",
        model=primary,
        model_config=ModelConfig(failover=ModelFailoverConfig(get_failover_model=pick, max_retries=1)),
    )
    assert (await answers(agent))[-1].content == "short"
    assert [m.role for m in backup.calls[0].messages] == ["user"]


async def test_the_deep_agent_passes_failover_to_its_general_sub_agent() -> None:
    primary = named("primary", ["unused"], fail_at_call={k: Boom("down") for k in range(3)})
    backup = named(
        "backup",
        [
            calling(call("task", json.dumps({"subagent_type": "general-purpose", "description": "sub"}), "t1")),
            "sub answer",
            "top answer",
        ],
    )
    agent = deep_agent("deep", "d", primary, model_failover=ModelFailoverConfig(models=[backup]))
    seen = await collect(Runner(agent).query("go"))
    assert seen[-1].content == "top answer" and seen[1].content == "sub answer"
    # the sub-agent's run is a fresh run: it started with primary too, and failed over to backup
    assert len(primary.calls) == 2 and len(backup.calls) == 3


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_interrupt_is_no_failure_it_pauses_the_run(streaming: bool) -> None:
    from compose.checkpoint import InMemoryCheckPointStore
    from compose.interrupt import interrupt
    from tests.adk.helpers import drain

    pauses: list[int] = []

    class Gate(AgentMiddleware):  # pauses the first model call only
        def wrap_model(self, model: ChatModel) -> ChatModel:
            class Paused(ModelWrapper):
                async def generate(self, messages: Any, **opts: Any) -> Message:
                    if not pauses:
                        pauses.append(1)
                        raise interrupt("wait for a human")
                    return await self.inner.generate(messages, **opts)

                async def stream(self, messages: Any, **opts: Any) -> Any:
                    if not pauses:
                        pauses.append(1)
                        raise interrupt("wait for a human")
                    return await self.inner.stream(messages, **opts)

            return Paused(model)

    backup = named("backup", ["unused"])
    agent = ChatModelAgent(
        "a",
        "d",
        model=named("primary", ["x"]),
        middlewares=[Gate()],
        model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup])),
    )
    runner = Runner(agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())
    _, paused = await drain(runner.query("hi", checkpoint_id="c"))
    assert paused is not None and backup.calls == []
