"""Property: for a random scripted agent run (rounds of parallel tool calls, then an answer, invoke or streaming),
recording it on a cassette and replaying it (the model's script empty, the tools not run) gives exactly the same
events, the order of parallel tool events aside (it follows completion)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk.chat_model.agent import ChatModelAgent
from adk.runner import Runner
from compose.errors import CassetteError
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, concat_messages, user_message
from compose.testing import ChatScript, cassette, chat_scripts
from compose.tools import tool

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
async def echo(key: str) -> str:
    """Echo after a few scheduler turns (so parallel calls finish in varying order).

    Args:
        key: key
    """
    for _ in range(sum(map(ord, key)) % 4):
        await anyio.lowlevel.checkpoint()
    ran.append(key)
    return f"echo {key}"


@tool
def ping(key: str) -> str:
    """Ping.

    Args:
        key: key
    """
    ran.append(key)
    return json.dumps({"pong": key})


async def run_events(script: ChatScript | None, path: Path, streaming: bool) -> list[Any]:
    mode = "all" if script is not None else "none"
    async with cassette(path, mode) as tape:
        model = script.model() if script is not None else ScriptedChatModel([])
        tools = [tape.wrap_tool(echo), tape.wrap_tool(ping)]
        agent = ChatModelAgent("agent", "d", "Be brief.", tape.wrap(model), tools)
        out: list[Any] = []
        async with Runner(agent, enable_streaming=streaming).query("go") as run:
            async for event in run:
                msg = await event.message.get_message() if event.message is not None else None
                variant = event.message
                out.append(
                    (
                        event.run_path,
                        variant.role if variant is not None else None,
                        variant.is_streaming if variant is not None else None,
                        msg.model_dump(mode="json") if msg is not None else None,
                        repr(event.action),
                        repr(event.error),
                    )
                )
            out.append(run.final_message)
    return out


def tools_sorted(events: list[Any]) -> list[Any]:
    out: list[Any] = []
    group: list[Any] = []
    for e in events:
        if isinstance(e, tuple) and e[1] == "tool":
            group.append(e)
            continue
        out += sorted(group, key=repr)
        group = []
        out.append(e)
    return out + sorted(group, key=repr)


@settings(max_examples=40, deadline=None)
@given(script=chat_scripts(("echo", "ping"), max_rounds=3, max_parallel=3), streaming=st.booleans())
async def test_record_then_replay_reproduces_the_events(script: ChatScript, streaming: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        ran.clear()
        recorded = await run_events(script, path, streaming)
        calls = len(ran)
        assert calls == sum(len(r) for r in script.rounds)
        replayed = await run_events(None, path, streaming)
        assert len(ran) == calls  # the replay ran no tool
    assert tools_sorted(replayed) == tools_sorted(recorded)


# --- credentials never reach the file; a tampered file fails with a CassetteError --------------------------------

SECRET_NAMES = [
    "token", "refresh_token", "session_token", "private_key", "api_key", "apiKey", "X-Api-Key", "Authorization",
    "password", "client_secret", "credentials", "Cookie", "access_token", "idToken", "x-auth",
]  # fmt: skip
PLAIN_NAMES = ["city", "user", "max_tokens", "key", "note", "tokens", "author"]
leaves = st.one_of(st.integers(), st.text("abc xyz", max_size=6), st.booleans(), st.none())
plain_json = st.recursive(
    leaves, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(PLAIN_NAMES), kids, max_size=3),
    max_leaves=8,
)  # fmt: skip


def dicts_in(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value, *(d for v in value.values() for d in dicts_in(v))]
    if isinstance(value, list):
        return [d for v in value for d in dicts_in(v)]
    return []


@st.composite
def arguments_with_secrets(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON object of plain values with credentials (values "QQ...") under secret names (in any case) at random
    depths."""
    args: dict[str, Any] = draw(st.dictionaries(st.sampled_from(PLAIN_NAMES), plain_json, max_size=3))
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(SECRET_NAMES))
        name = draw(st.sampled_from([name, name.upper(), name.lower()]))
        draw(st.sampled_from(dicts_in(args)))[name] = "QQ" + draw(st.text("0123456789abcdef", min_size=8, max_size=8))
    return args


class AnyArguments:
    def info(self) -> ToolInfo:
        return ToolInfo(name="any", description="takes anything")

    async def run(self, arguments: str) -> str:
        ran.append(arguments)
        return "ok"


@settings(max_examples=40, deadline=None)
@given(args=arguments_with_secrets(), chunk_size=st.integers(1, 9))
async def test_no_credential_reaches_the_file_and_the_replay_matches(args: dict[str, Any], chunk_size: int) -> None:
    text = json.dumps(args)
    call = Message(role="assistant", tool_calls=[ToolCall(id="c", function=FunctionCall(name="any", arguments=text))])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.json"
        async with cassette(path, "all") as tape:
            model = tape.wrap(ScriptedChatModel([call, call], chunk_size=chunk_size))
            await model.generate([user_message("go")], extra_body=args)
            async with await model.stream([user_message("stream")]) as reader:
                assert concat_messages([c async for c in reader]).tool_calls[0].function.arguments == text
            assert await tape.wrap_tool(AnyArguments()).run(text) == "ok"  # type: ignore[attr-defined]
        assert "QQ" not in path.read_text(encoding="utf-8")
        async with cassette(path, "none") as tape:
            model = tape.wrap(ScriptedChatModel([]))
            answer = await model.generate([user_message("go")], extra_body=args)
            async with await model.stream([user_message("stream")]) as reader:
                streamed = concat_messages([c async for c in reader])
            assert streamed.tool_calls[0].function.arguments == answer.tool_calls[0].function.arguments
            redacted = answer.tool_calls[0].function.arguments
            assert "QQ" not in redacted and json.loads(redacted).keys() == args.keys()
            tool = tape.wrap_tool(AnyArguments())
            for arguments in (text, redacted):  # what the live run and what a replay would pass
                assert await tool.run(arguments) == "ok"  # type: ignore[attr-defined]


def places(value: Any, depth: int = 5) -> list[tuple[Any, Any]]:
    """Every (container, key) of a JSON value down to ``depth`` (a recorded chunk's fields)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [p for k, v in items for p in [(value, k), *(places(v, depth - 1) if depth > 1 else ())]]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), junk=leaves | plain_json)
async def test_a_tampered_cassette_fails_with_a_cassette_error(data: st.DataObject, junk: Any) -> None:
    call = Message(role="assistant", tool_calls=[ToolCall(id="c", function=FunctionCall(name="any", arguments="{}"))])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.json"
        async with cassette(path, "all") as tape:
            model = tape.wrap(ScriptedChatModel([call, "done"], chunk_size=2))
            await model.generate([user_message("go")])
            async with await model.stream([user_message("stream")]) as reader:
                _ = [c async for c in reader]
            await tape.wrap_tool(AnyArguments()).run("{}")  # type: ignore[attr-defined]
        content = json.loads(path.read_text(encoding="utf-8"))
        container, key = data.draw(st.sampled_from(places(content)))
        container[key] = junk
        path.write_text(json.dumps(content), encoding="utf-8")
        try:
            async with cassette(path, "none") as tape:
                model = tape.wrap(ScriptedChatModel([]))
                await model.generate([user_message("go")])
                async with await model.stream([user_message("stream")]) as reader:
                    concat_messages([c async for c in reader] or [Message(role="assistant")])
                await tape.wrap_tool(AnyArguments()).run("{}")  # type: ignore[attr-defined]
        except CassetteError as exc:
            assert str(path) in str(exc)
