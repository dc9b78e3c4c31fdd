"""Session values (issue 14, "The seam"): one session per run, shared by tools and hooks, saved with a pause."""

from __future__ import annotations

from typing import Any

import pytest

from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.react import ChatModelAgentState
from adk.runner import Runner
from adk.session_values import add_session_value, add_session_values, get_session_value, get_session_values
from compose.checkpoint import InMemoryCheckPointStore
from compose.errors import StateError
from compose.interrupt import get_resume_context, interrupt
from compose.models import ScriptedChatModel
from compose.tools import tool
from tests.adk.helpers import call, calling, collect, drain

pytestmark = pytest.mark.anyio


@tool
async def remember(city: str) -> str:
    """Remember a city.

    Args:
        city: the city.
    """
    seen = get_session_value("user", "nobody")
    add_session_value("city", city)
    add_session_values({"visits": get_session_value("visits", 0) + 1})
    return f"{seen} likes {city}"


async def test_tools_and_hooks_share_the_run_session(anyio_backend: Any) -> None:
    hook_saw: list[dict[str, Any]] = []

    def before(state: ChatModelAgentState) -> None:
        hook_saw.append(get_session_values())

    model = ScriptedChatModel([calling(call("remember", '{"city": "Hangzhou"}')), "ok"])
    agent = ChatModelAgent("a", "d", model=model, tools=[remember], before_chat_model=[before], output_key="answer")
    runner = Runner(agent)
    runner.session_values["visits"] = 10  # defaults for every run
    run = runner.query("go", session_values={"user": "alice"})
    seen = await collect(run)
    assert seen[1].content == "alice likes Hangzhou"
    assert hook_saw == [{"visits": 10, "user": "alice"}, {"visits": 11, "user": "alice", "city": "Hangzhou"}]
    assert run.session_values == {"visits": 11, "user": "alice", "city": "Hangzhou", "answer": "ok"}
    assert runner.session_values == {"visits": 10}  # the defaults are untouched
    # a second run starts from the defaults again
    model2 = ScriptedChatModel(["fine"])
    again = Runner(ChatModelAgent("a", "d", model=model2), enable_streaming=True)
    second = again.query("go")
    await collect(second)
    assert second.session_values == {}


async def test_session_values_outside_a_run(anyio_backend: Any) -> None:
    assert get_session_value("x") is None
    assert get_session_value("x", 3) == 3
    assert get_session_values() == {}
    with pytest.raises(StateError, match="add_session_value called outside an agent run"):
        add_session_value("x", 1)
    with pytest.raises(StateError, match="add_session_values called outside an agent run"):
        add_session_values({"x": 1})


def test_session_values_must_be_a_mapping() -> None:
    runner = Runner(ChatModelAgent("a", "d", model=ScriptedChatModel(["x"])))
    with pytest.raises(TypeError, match="session_values must be a mapping"):
        runner.query("q", session_values=[("a", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize("streaming", [False, True])
async def test_session_values_written_before_a_pause_survive_it(streaming: bool) -> None:
    @tool
    async def confirm(what: str) -> str:
        """Confirm.

        Args:
            what: what.
        """
        ctx = get_resume_context()
        if not ctx.is_target:
            add_session_value("asked", what)
            raise interrupt({"confirm": what})
        return f"{get_session_value('asked')} confirmed"

    model = ScriptedChatModel([calling(call("confirm", '{"what": "pay"}', id="c1")), "done"])
    runner = Runner(
        ChatModelAgent("a", "d", model=model, tools=[confirm]),
        enable_streaming=streaming,
        checkpoint_store=InMemoryCheckPointStore(),
    )
    _, paused = await drain(runner.query("go", checkpoint_id="k", session_values={"user": "bob"}))
    assert paused is not None
    resumed = runner.resume("k", targets={paused.ids[0]: None})
    seen, _ = await drain(resumed)
    assert [s.content for s in seen] == ["pay confirmed", "done"]
    assert resumed.session_values == {"user": "bob", "asked": "pay"}


async def test_instruction_placeholders_are_filled_from_session_values(anyio_backend: Any) -> None:
    model = ScriptedChatModel(["hi"])
    agent = ChatModelAgent("guide", "d", "You help {user} in {city}. Use {{braces}}.", model=model)
    await collect(Runner(agent).query("go", session_values={"user": "alice", "city": "Hangzhou"}))
    assert model.calls[0].messages[0].content == "You help alice in Hangzhou. Use {braces}."
    # without session values the instruction is taken as it is (Eino formats only when there are some)
    plain = ScriptedChatModel(["hi"])
    await collect(Runner(ChatModelAgent("guide", "d", "Literal {user}", model=plain)).query("go"))
    assert plain.calls[0].messages[0].content == "Literal {user}"


def test_a_missing_placeholder_names_the_key_and_the_agent() -> None:
    from adk.chat_model.instruction import InstructionFormatError

    agent = ChatModelAgent("guide", "d", "You help {user}.", model=ScriptedChatModel(["x"]))
    with pytest.raises(InstructionFormatError) as info:
        Runner(agent).query("go", session_values={"city": "Hangzhou"})
    assert info.value.key == "user" and info.value.agent_name == "guide"
    assert "user" in str(info.value) and "guide" in str(info.value)
