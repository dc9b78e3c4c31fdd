"""ReAct rules, from the public ``compose.testing`` module only: for any scripted run (k tool-call rounds with
parallel calls, a return-directly tool, streamed chunking, an injected model failure at a call or a chunk) and any
``max_iterations``, the number of model calls, the tool message order, the return-directly output and the error
type are as eino-semantics 4.3a says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk import ChatModelAgent, ExceedMaxIterationsError, Runner, ToolsConfig
from compose import ModelServerError, tool
from compose.testing import ChatScript, assert_no_leaks, chat_scripts

pytestmark = pytest.mark.anyio


@tool
async def echo(key: str) -> str:
    """Answer with the key.

    Args:
        key: the call's key
    """
    return f"echo:{key}"


@tool
async def finish(key: str) -> str:
    """Answer with the key; a return-directly tool.

    Args:
        key: the call's key
    """
    return f"finish:{key}"


def expected_outcome(script: ChatScript, max_iterations: int, streaming: bool) -> tuple[int, str, Any]:
    """(model calls, outcome kind, detail) by the rules: one model call per round while iterations remain; a
    failed call ends the run; a round calling a return-directly tool ends it with that tool's message (the last
    such call wins); after the last round the model answers."""
    i = 0
    while True:
        if i >= max_iterations:
            return max_iterations, "max_iterations", None
        failed_chunk = streaming and script.fail_at_chunk is not None and script.fail_at_chunk[0] == i
        if script.fail_at_call == i or failed_chunk:
            return i + 1, "model_error", None
        if i == len(script.rounds):
            return i + 1, "answer", script.final
        finishing = [cid for cid, name in zip(script.call_ids(i), script.rounds[i], strict=True) if name == "finish"]
        if finishing:
            return i + 1, "return_directly", finishing[-1]
        i += 1


def caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__
    return False


@settings(max_examples=80, deadline=None)
@given(
    script=chat_scripts(("echo", "finish"), max_rounds=4, failures=True),
    max_iterations=st.integers(1, 6),
    streaming=st.booleans(),
)
async def test_react_follows_the_rules(script: ChatScript, max_iterations: int, streaming: bool) -> None:
    model = script.model()
    agent = ChatModelAgent(
        "agent",
        "property",
        model=model,
        tools=ToolsConfig([echo, finish], return_directly={"finish"}),
        max_iterations=max_iterations,
    )
    errors: list[BaseException] = []
    async with assert_no_leaks(), Runner(agent, enable_streaming=streaming).query("go") as run:
        async for event in run:
            if event.error is not None:
                errors.append(event.error)
            elif event.output is not None and event.output.message_output is not None:
                try:
                    await event.output.message_output.get_message()
                except ModelServerError:
                    pass  # the failing attempt's stream carries the injected failure
    calls, kind, detail = expected_outcome(script, max_iterations, streaming)
    assert len(model.calls) == calls
    if kind == "max_iterations":
        assert len(errors) == 1 and caused_by(errors[0], ExceedMaxIterationsError)
    elif kind == "model_error":
        assert len(errors) == 1 and caused_by(errors[0], ModelServerError)
    else:
        assert errors == []
        final = run.final_message
        assert final is not None
        if kind == "answer":
            assert final.role == "assistant" and final.content == detail
        else:
            assert final.role == "tool" and final.tool_call_id == detail and final.content == f"finish:{detail}"
    # each model call after round r sees every earlier round's tool messages, in call order
    for n, recorded in enumerate(model.calls[1:], start=1):
        seen = [m.tool_call_id for m in recorded.messages if m.role == "tool"]
        assert seen == [cid for r in range(min(n, len(script.rounds))) for cid in script.call_ids(r)]
