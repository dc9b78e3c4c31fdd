"""compose.mcp against real MCP servers written with the official SDK (tests/compose/mcp_servers/demo_server.py),
over stdio and over streamable HTTP on 127.0.0.1, on asyncio and trio."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'pyeino[mcp]')")

import mcp_types

import compose.mcp._connect
import compose.mcp._results
from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.runner import Runner
from compose.errors import (
    MCPServerError,
    MCPToolError,
    NodeRunError,
    ToolArgumentsError,
    ToolExecutionError,
    ToolTimeoutError,
)
from compose.mcp import MCPTool, MCPToolset, mcp_tools
from compose.models import ScriptedChatModel
from compose.schema import Message
from compose.tools.middleware import tool_errors_as_results
from compose.tools.node import ToolsNode
from tests.adk.helpers import call, calling, collect, kinds

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).parent / "mcp_servers" / "demo_server.py")
DEMO = [sys.executable, SERVER]
WAIT = 20  # seconds: a bound turning a hang into a failure, never a timing assertion


async def run(tools: MCPToolset, name: str, arguments: object = None) -> str:
    with anyio.fail_after(WAIT):
        return await tools.tool(name).run("" if arguments is None else json.dumps(arguments))


def error_chain(exc: BaseException | None) -> list[BaseException]:
    chain = []
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    return chain


@pytest.fixture
async def http_url() -> AsyncIterator[str]:
    """The demo server over streamable HTTP, in a subprocess bound to a free port of 127.0.0.1."""
    process = await anyio.open_process([*DEMO, "--http"])
    try:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(WAIT):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
        port = int(line.split()[1])
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):  # a test may have crashed it
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()


# ----------------------------------------------------------------------------------------------------------
# Listing: infos from the server's schemas, prefix, allow and deny


async def test_the_server_tools_become_pyeino_tools_with_the_servers_schemas_and_results() -> None:
    async with mcp_tools(stdio=DEMO) as tools:
        assert tools.server == "demo" and tools.version == 1
        assert isinstance(tools[0], MCPTool) and len(tools) == len(list(tools))
        names = [t.name for t in tools]
        assert names[:4] == ["add", "echo", "divide", "book"]
        assert "files_read" in names  # the server's "files.read": a dot is not a valid tool name
        assert tools.tool("files_read").mcp_name == "files.read"
        info = tools.tool("add").info()
        assert info.description == "Add two numbers."
        assert info.parameters == {
            "type": "object",
            "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}},
            "required": ["a", "b"],
            "title": "addArguments",
        }
        assert info.extra == {"mcp_server": "demo", "mcp_name": "add"}
        book = tools.tool("book").info().parameters
        assert book["properties"]["trip"] == {"$ref": "#/$defs/Trip"}
        assert set(book["$defs"]) == {"Trip", "Traveler"}
        assert repr(tools).startswith("MCPToolset(server='demo', tools=['add', 'echo', ")
        assert repr(tools).endswith(", version=1, open)")
        assert repr(tools.tool("files_read")) == "MCPTool(name='files_read', server='demo', mcp_name='files.read')"
        with pytest.raises(KeyError, match=r"MCP server 'demo' has no tool 'nope'; its tools: \['add', "):
            tools.tool("nope")
        # results: the text blocks joined, else the structured content as JSON
        assert await run(tools, "add", {"a": 1, "b": 2}) == "3"  # the text, not {"result": 3}
        assert await run(tools, "echo", {"text": "hé"}) == "hé"
        booked = await run(
            tools, "book", {"trip": {"city": "Rome", "nights": 2, "travelers": [{"name": "Ann", "age": 9}]}}
        )
        assert booked == '{"city":"Rome","nights":2,"names":["Ann"]}'  # not the SDK's indented JSON text
        assert await run(tools, "structured_only") == "[image: image/png]\n[resource: file:///tmp/report.txt]"
        assert await run(tools, "data_only") == '{"rows":[1,2],"unit":"m"}'
        raw = await tools.tool("add").call({"a": 1, "b": 2})
        assert raw.structured_content == {"result": 3} and not raw.is_error
    assert repr(tools).endswith("closed)")


def spec(name: str) -> mcp_types.Tool:
    return mcp_types.Tool(name=name, input_schema={"type": "object"})


async def test_names_providers_reject_and_unknown_allowed_names_are_refused_with_the_way_out() -> None:
    toolset = MCPToolset(cast(Any, None), "srv", prefix="x" * 62, allow=None, deny=(), timeout=None)
    with pytest.raises(ValueError, match=r"MCP server 'srv' tool 'add' would be named 'x{62}add'.*deny=\['add'\]"):
        toolset._select([spec("ab"), spec("add")])
    toolset = MCPToolset(cast(Any, None), "srv", prefix="", allow=None, deny=(), timeout=None)
    with pytest.raises(ValueError, match=r"MCP server 'srv' tools 'a.b' and 'a_b' would both be named 'a_b'"):
        toolset._select([spec("a.b"), spec("a_b")])
    assert [t.name for t in toolset._select([spec("a.b/c d")])] == ["a_b_c_d"]
    toolset = MCPToolset(cast(Any, None), "srv", prefix="", allow=["ad", "add", "sub"], deny=(), timeout=None)
    with pytest.raises(
        ValueError, match=r"^MCP server 'srv' has no tools \['ad', 'sub'\] \(allow=\); its tools: \['add'\]$"
    ):
        toolset._select([spec("add")])


async def test_what_the_model_sees_of_each_kind_of_content() -> None:
    def text(*content: Any, structured: dict[str, Any] | None = None) -> str:
        return compose.mcp._results.result_text(
            mcp_types.CallToolResult(content=list(content), structured_content=structured)
        )

    audio = mcp_types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")
    note = mcp_types.EmbeddedResource(
        type="resource", resource=mcp_types.TextResourceContents(uri="file:///n.txt", text="the note")
    )
    blob = mcp_types.EmbeddedResource(
        type="resource", resource=mcp_types.BlobResourceContents(uri="file:///b.bin", blob="AAAA")
    )
    assert text(audio, note, blob) == "[audio: audio/wav]\nthe note\n[resource: file:///b.bin (binary)]"
    assert text() == ""
    said = mcp_types.TextContent(type="text", text='{"a": 1}')
    assert text(said, structured={"a": 1}) == '{"a":1}'  # the text only repeats the structured content
    assert text(said, structured={"a": 2}) == '{"a": 1}'  # the text says something else: the text


async def test_an_input_schema_that_is_not_a_json_schema_leaves_the_checking_to_the_server() -> None:
    toolset = MCPToolset(cast(Any, None), "srv", prefix="", allow=None, deny=(), timeout=None)
    broken = mcp_types.Tool(name="odd", input_schema={"type": "object", "properties": {"a": {"type": 5}}})
    (odd,) = toolset._select([broken])
    assert odd.parse_arguments('{"a": "anything"}') == {"a": "anything"}


# ----------------------------------------------------------------------------------------------------------
# Errors and arguments


async def test_tool_errors_name_server_and_tool_and_nested_arguments_are_validated_end_to_end() -> None:
    async with mcp_tools(stdio=DEMO) as tools:
        with pytest.raises(MCPToolError) as caught:
            await run(tools, "divide", {"a": 1, "b": 0})
        assert (
            str(caught.value)
            == "MCP server 'demo' tool 'divide' failed: Error executing tool divide: cannot divide by zero"
        )
        assert (caught.value.server, caught.value.tool_name, caught.value.text) == (
            "demo",
            "divide",
            "Error executing tool divide: cannot divide by zero",
        )
        assert await run(tools, "divide", {"a": 1, "b": 4}) == "0.25"  # the session goes on
        node = ToolsNode(tools)
        good = {
            "trip": {"city": "Oslo", "nights": 1, "travelers": [{"name": "Bo", "age": 30}, {"name": "Cy", "age": 4}]}
        }
        bad_age = {"trip": {"city": "Oslo", "nights": 1, "travelers": [{"name": "Bo", "age": -1}]}}
        extra = {"trip": {"city": "Oslo", "nights": 1, "travelers": [{"name": "Bo", "age": 3, "pet": "cat"}]}}
        missing = {"trip": {"city": "Oslo", "travelers": []}}
        with anyio.fail_after(WAIT):
            (out,) = await node.invoke(calling(call("book", json.dumps(good), "b1")))
        assert json.loads(out.content) == {"city": "Oslo", "nights": 1, "names": ["Bo", "Cy"]}
        assert (out.tool_call_id, out.tool_name) == ("b1", "book")

        with pytest.raises(ToolArgumentsError) as caught:
            await run(tools, "book", bad_age)
        assert caught.value.field == "trip.travelers.0.age"
        assert (
            str(caught.value)
            == "invalid arguments for tool 'book' field 'trip.travelers.0.age': -1 is less than the minimum of 0"
        )
        with pytest.raises(ToolArgumentsError, match=r"'pet' was unexpected") as caught:
            await run(tools, "book", extra)
        assert caught.value.field == "trip.travelers.0"
        with pytest.raises(ToolArgumentsError, match=r"'nights' is a required property") as caught:
            await run(tools, "book", missing)
        assert caught.value.field == "trip"
        with pytest.raises(ToolArgumentsError, match="arguments must be a JSON object, got list"):
            await tools.tool("book").run("[1]")
        with pytest.raises(ToolArgumentsError, match="arguments are not valid JSON"):
            await tools.tool("book").run("{")
        # through the node, the failure names the tool and the call
        with pytest.raises(ToolExecutionError, match=r"tool\[name:book id:b2\].*trip.travelers.0.age"):
            await node.invoke(calling(call("book", json.dumps(bad_age), "b2")))


# ----------------------------------------------------------------------------------------------------------
# An agent calling MCP tools

DIVIDE_FAILED = "MCP server 'demo' tool 'divide' failed: Error executing tool divide: cannot divide by zero"


async def test_an_agent_calls_mcp_tools_in_parallel_and_one_fails(no_task_leaks: None) -> None:
    parallel = ScriptedChatModel(
        [
            calling(
                call("calc_meet", '{"party": "a", "size": 2}', "c1"),
                call("calc_divide", '{"a": 1, "b": 0}', "c2"),
                call("calc_meet", '{"party": "b", "size": 2}', "c3"),
            ),
            "a and b met; dividing by zero failed.",
        ]
    )
    failing = ScriptedChatModel(
        [calling(call("calc_add", '{"a": 1, "b": 1}', "c1"), call("calc_divide", '{"a": 1, "b": 0}', "c2")), "never"]
    )
    select = {"allow": ["add", "divide", "meet", "echo"], "deny": ["echo", "not-a-tool"]}
    async with mcp_tools(stdio=DEMO, prefix="calc_", **select) as tools:
        assert [t.name for t in tools] == ["calc_add", "calc_divide", "calc_meet"]
        # errors returned as results: the model reads the MCP error and answers
        forgiving = ToolsConfig(list(tools), middlewares=[tool_errors_as_results()])
        agent = ChatModelAgent("planner", "plans", "You plan.", model=parallel, tools=forgiving)
        with anyio.fail_after(WAIT):  # the two meet() calls wait for each other: only parallel calls finish
            seen = await collect(Runner(agent).query("go"))
        # errors raised: the run fails, naming the tool, the call, the server and the server's tool
        agent = ChatModelAgent("calc", "calculates", "You calculate.", model=failing, tools=tools)
        with anyio.fail_after(WAIT):
            failed = await collect(Runner(agent).query("go"))

    assert kinds(seen)[0] == "assistant" and kinds(seen)[-1] == "assistant"
    assert sorted(kinds(seen)[1:-1]) == ["tool:calc_divide", "tool:calc_meet", "tool:calc_meet"]  # as they finished
    answers: list[Message] = parallel.calls[1].messages[-3:]
    assert [(m.tool_call_id, m.content) for m in answers] == [
        ("c1", "a met 1 other(s)"),
        ("c2", f"[tool error] tool 'calc_divide' failed: MCPToolError: {DIVIDE_FAILED}"),
        ("c3", "b met 1 other(s)"),
    ]
    assert seen[-1].content == "a and b met; dividing by zero failed."

    assert kinds(failed) == ["assistant", "tool:calc_add", "error"]
    error = failed[-1].error
    assert isinstance(error, NodeRunError)
    chain = error_chain(error)
    (wrapped,) = [e for e in chain if isinstance(e, ToolExecutionError)]
    assert (wrapped.tool_name, wrapped.call_id) == ("calc_divide", "c2")
    assert str(wrapped) == f"failed to invoke tool[name:calc_divide id:c2]: MCPToolError: {DIVIDE_FAILED}"
    (cause,) = [e for e in chain if isinstance(e, MCPToolError)]
    assert (cause.server, cause.tool_name) == ("demo", "divide")
    assert len(failing.calls) == 1


# ----------------------------------------------------------------------------------------------------------
# Servers that die, cancellation, timeouts, the context's end


async def test_a_server_killed_mid_call_is_a_typed_error_naming_it_never_a_hang(no_task_leaks: None) -> None:
    async with mcp_tools(stdio=DEMO, name="calculator") as tools:
        errors: list[BaseException] = []

        async def pending() -> None:  # a call in flight when the server dies fails too
            try:
                await run(tools, "wait_forever")
            except MCPServerError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pending)
            assert await run(tools, "started_calls", {"at_least": 1}) == "1"
            with pytest.raises(MCPServerError) as caught:
                await run(tools, "crash")
        assert caught.value.server == "calculator"
        assert str(caught.value) == (
            "MCP server 'calculator': the connection closed (the server exited, crashed or hung up) "
            "while calling tool 'crash'"
        )
        assert len(errors) == 1 and isinstance(errors[0], MCPServerError)
        closed = r"MCP server 'calculator': the connection closed .*; cannot call tool 'add'"
        with pytest.raises(MCPServerError, match=closed):
            await run(tools, "add", {"a": 1, "b": 2})
        with pytest.raises(MCPServerError):
            await tools.refresh()


async def test_cancellation_and_timeouts_cancel_the_call_on_the_server() -> None:
    async with mcp_tools(stdio=DEMO, tool_timeout=0.5) as tools:
        # an outer cancel scope
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, tools, "wait_forever")
                assert await run(tools, "started_calls", {"at_least": 1}) == "1"
                tg.cancel_scope.cancel()
        assert await run(tools, "cancelled_calls", {"at_least": 1}) == "1"
        # the ToolsNode's timeout
        assert tools.tool("wait_forever").timeout == 0.5
        node = ToolsNode(tools)
        with anyio.fail_after(WAIT), pytest.raises(ToolExecutionError) as caught:
            await node.invoke(calling(call("wait_forever", "{}", "w1")))
        assert isinstance(caught.value.__cause__, ToolTimeoutError)
        assert str(caught.value.__cause__) == "tool 'wait_forever' timed out after 0.5s"
        assert await run(tools, "cancelled_calls", {"at_least": 2}) == "2"


async def test_the_context_ends_the_server_process_and_lets_the_blocks_error_out_as_it_is() -> None:
    with pytest.raises(KeyError, match="boom"):  # not an exception group of the SDK's task groups
        async with mcp_tools(stdio=DEMO, env={"DEMO_SETTING": "on"}) as tools:
            assert await run(tools, "env", {"name": "DEMO_SETTING"}) == "on"
            assert await run(tools, "env", {"name": "PATH"}) != ""  # the SDK's few inherited variables stay
            pid = int(await run(tools, "pid"))
            os.kill(pid, 0)  # alive
            raise KeyError("boom")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    closed = r"MCP server 'demo': the mcp_tools\(\) context closed; cannot call tool 'add'"
    with pytest.raises(MCPServerError, match=closed):
        await run(tools, "add", {"a": 1, "b": 2})
    with pytest.raises(MCPServerError, match=r"^MCP server 'demo': the mcp_tools\(\) context closed$"):
        await tools.wait_changed(tools.version)
    with pytest.raises(MCPServerError, match=r"context closed; cannot list its tools$"):
        await tools.refresh()


async def test_servers_that_cannot_start_are_errors_naming_them() -> None:
    with pytest.raises(MCPServerError, match=r"MCP server 'no-such-mcp-server --x': cannot connect: FileNotFoundError"):
        async with mcp_tools(stdio=["no-such-mcp-server", "--x"]):
            pytest.fail("the context must not be entered")
    with pytest.raises(MCPServerError, match=r"MCP server '.*python.* -c pass': cannot connect: Connection closed"):
        async with mcp_tools(stdio=[sys.executable, "-c", "pass"]):
            pytest.fail("the context must not be entered")
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # never answers, ends when stdin closes
    with pytest.raises(MCPServerError, match=r"did not start, connect and list its tools within 0.5s"):
        async with mcp_tools(stdio=silent, connect_timeout=0.5):
            pytest.fail("the context must not be entered")


async def test_wrong_options_are_refused_before_anything_starts() -> None:
    with pytest.raises(TypeError, match=r"as a list, e.g. \['python', 'server.py'\]"):
        async with mcp_tools(stdio="python server.py"):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValueError, match="exactly one of stdio"):
        async with mcp_tools():
            pass
    with pytest.raises(ValueError, match=r"tool_timeout=0\): a time limit is a positive number of seconds"):
        async with mcp_tools(stdio=DEMO, tool_timeout=0):
            pass
    with pytest.raises(ValueError, match=r"connect_timeout=-1\)"):
        async with mcp_tools(stdio=DEMO, connect_timeout=-1):
            pass
    with pytest.raises(ValueError, match=r"the list starts with the command"):
        async with mcp_tools(stdio=[]):
            pass
    with pytest.raises(ValueError, match="exactly one of stdio"):
        async with mcp_tools(stdio=DEMO, url="http://127.0.0.1:1/mcp"):
            pass
    with pytest.raises(ValueError, match="starts with http:// or https://"):
        async with mcp_tools(url="127.0.0.1:1/mcp"):
            pass
    with pytest.raises(TypeError, match="headers apply to url servers only"):
        async with mcp_tools(stdio=DEMO, headers={"a": "b"}):
            pass
    with pytest.raises(TypeError, match="env and cwd apply to stdio servers only"):
        async with mcp_tools(url="http://127.0.0.1:1/mcp", env={"a": "b"}):
            pass


# ----------------------------------------------------------------------------------------------------------
# tools/list_changed


async def test_list_changed_refreshes_the_list(no_task_leaks: None) -> None:
    async with mcp_tools(stdio=DEMO) as tools:
        before = list(tools)
        version = tools.version
        assert await run(tools, "add_tool") == "added"
        with anyio.fail_after(WAIT):
            assert await tools.wait_changed(version) == version + 1
        assert [t.name for t in tools] == [*(t.name for t in before), "late"]
        assert [t.name for t in before] == [t.name for t in tools][:-1]  # a snapshot taken before stays as it was
        assert await run(tools, "late") == "late answer"
        await tools.refresh()
        assert tools.version == version + 2


async def test_list_changed_refreshes_the_list_on_servers_before_2026(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compose.mcp._connect, "_CLIENT_MODE", "legacy")  # the initialize handshake, and notifications
    async with mcp_tools(stdio=DEMO) as tools:
        version = tools.version
        assert await run(tools, "add_tool") == "added"
        with anyio.fail_after(WAIT):
            await tools.wait_changed(version)
        assert await run(tools, "late") == "late answer"


# ----------------------------------------------------------------------------------------------------------
# Streamable HTTP


async def test_a_streamable_http_server_with_headers_parallel_calls_cancellation_changes_and_death(
    http_url: str,
) -> None:
    async with mcp_tools(url=http_url, headers={"X-Team": "travel"}, prefix="web_") as tools:
        assert tools.server == "demo"
        assert await run(tools, "web_header", {"name": "x-team"}) == "travel"
        assert await run(tools, "web_add", {"a": 40, "b": 2}) == "42"
        node = ToolsNode(tools, middlewares=[tool_errors_as_results()])
        calls = calling(
            call("web_meet", '{"party": "x"}', "m1"),
            call("web_meet", '{"party": "y"}', "m2"),
            call("web_divide", '{"a": 1, "b": 0}', "d"),
        )
        with anyio.fail_after(WAIT):
            out = await node.invoke(calls)
        assert [m.content for m in out] == [
            "x met 1 other(s)",
            "y met 1 other(s)",
            f"[tool error] tool 'web_divide' failed: MCPToolError: {DIVIDE_FAILED}",
        ]
        # cancellation
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, tools, "web_wait_forever")
                assert await run(tools, "web_started_calls", {"at_least": 1}) == "1"
                tg.cancel_scope.cancel()
        assert await run(tools, "web_cancelled_calls", {"at_least": 1}) == "1"
        # tools/list_changed
        version = tools.version
        assert await run(tools, "web_add_tool") == "added"
        with anyio.fail_after(WAIT):
            await tools.wait_changed(version)
        assert await run(tools, "web_late") == "late answer"
        # the server dies mid-call
        with pytest.raises(MCPServerError) as caught:
            await run(tools, "web_crash")
        assert str(caught.value).startswith("MCP server 'demo': the connection closed")
        with pytest.raises(MCPServerError, match="cannot call tool 'add'"):
            await run(tools, "web_add", {"a": 1, "b": 2})


async def test_an_http_server_that_is_not_there_is_an_error_naming_it() -> None:
    with pytest.raises(MCPServerError, match=r"MCP server 'http://127.0.0.1:9/mcp': cannot connect: ConnectError"):
        async with mcp_tools(url="http://127.0.0.1:9/mcp"):
            pytest.fail("the context must not be entered")


async def test_the_public_names_of_compose_mcp() -> None:
    hidden = ("annotations", "mcp")
    public = {name for name in dir(compose.mcp) if not name.startswith(("_", "@")) and name not in hidden}
    assert sorted(compose.mcp.__all__) == sorted(public) == ["MCPTool", "MCPToolset", "mcp_tools"]
    assert compose.MCPServerError is MCPServerError and compose.MCPToolError is MCPToolError
