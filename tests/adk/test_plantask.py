"""The plantask tools (Eino's ``adk/middlewares/plantask`` tests, ported): tasks as JSON files in a backend, ids
from the high watermark, symmetric dependencies, cycles refused, deletion unlinking, completion clearing the list;
run by an agent on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adk import ChatModelAgent, Runner, TaskListError
from adk.middlewares import Backend, InMemoryBackend, LocalBackend, PlanTaskMiddleware
from adk.middlewares._plantask_prompts import TASK_UPDATE_DESCRIPTION
from adk.middlewares.base import ChatModelAgentContext
from compose.models import ScriptedChatModel
from tests.adk.helpers import call, calling, collect

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return InMemoryBackend() if request.param == "memory" else LocalBackend(tmp_path)


async def tools_of(backend: Backend) -> dict[str, Any]:
    ctx = await PlanTaskMiddleware(backend, "/tasks").before_agent(ChatModelAgentContext("", [], set()))
    return {t.info().name: t for t in ctx.tools}


async def run(tools: dict[str, Any], name: str, **args: Any) -> str:
    result: str = json.loads(await tools[name].run(json.dumps(args)))["result"]
    return result


async def task_file(backend: Backend, task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(await backend.read(f"/tasks/{task_id}.json"))
    return data


async def test_create_get_list(backend: Backend) -> None:
    tools = await tools_of(backend)
    assert list(tools) == ["TaskCreate", "TaskGet", "TaskUpdate", "TaskList"]
    assert tools["TaskUpdate"].info().description == TASK_UPDATE_DESCRIPTION
    assert await run(tools, "TaskList") == "No tasks found."
    assert await run(
        tools, "TaskCreate", subject="Run tests", description="all of them", activeForm="Running tests"
    ) == ("Task #1 created successfully: Run tests")
    assert await run(tools, "TaskCreate", subject="Fix bug", description="the login one") == (
        "Task #2 created successfully: Fix bug"
    )
    assert await backend.read("/tasks/1.json") == (
        '{"id":"1","subject":"Run tests","description":"all of them","status":"pending","blocks":[],"blockedBy":[],'
        '"activeForm":"Running tests"}'
    )
    assert await backend.read("/tasks/.highwatermark") == "2"
    assert await run(tools, "TaskGet", taskId="1") == "Task #1: Run tests\nStatus: pending\nDescription: all of them\n"
    assert await run(tools, "TaskList") == "#1 [pending] Run tests\n#2 [pending] Fix bug"
    with pytest.raises(TaskListError, match=r"TaskGet validate task ID failed, err: invalid format: \.\./x"):
        await run(tools, "TaskGet", taskId="../x")
    with pytest.raises(TaskListError, match="TaskGet get Task #9 failed"):
        await run(tools, "TaskGet", taskId="9")


async def test_update_fields_dependencies_and_metadata(backend: Backend) -> None:
    tools = await tools_of(backend)
    for i in range(1, 6):
        await run(tools, "TaskCreate", subject=f"t{i}", description="d")
    assert await run(tools, "TaskUpdate", taskId="1", status="in_progress", subject="T1", owner="agent1") == (
        "Updated task #1 subject, status, owner"
    )
    assert await run(tools, "TaskUpdate", taskId="1", addBlocks=["2", "3"]) == "Updated task #1 blocks"
    assert await run(tools, "TaskUpdate", taskId="1", addBlockedBy=["4"]) == "Updated task #1 blockedBy"
    one, two = await task_file(backend, "1"), await task_file(backend, "2")
    assert one["blocks"] == ["2", "3"] and one["blockedBy"] == ["4"] and two["blockedBy"] == ["1"]
    assert (await task_file(backend, "4"))["blocks"] == ["1"]
    assert await run(tools, "TaskGet", taskId="1") == (
        "Task #1: T1\nStatus: in_progress\nDescription: d\nBlocked by: #4\nBlocks: #2, #3\nOwner: agent1\n"
    )
    assert "#1 [in_progress] T1 [owner: agent1] [blocked by #4]" in await run(tools, "TaskList")
    await run(tools, "TaskUpdate", taskId="1", metadata={"k1": "v1", "k2": "v2"})
    await run(tools, "TaskUpdate", taskId="1", metadata={"k1": None, "k3": "v3"})
    assert (await task_file(backend, "1"))["metadata"] == {"k2": "v2", "k3": "v3"}
    for bad in ({"addBlocks": ["4"]}, {"addBlockedBy": ["2"]}, {"addBlocks": ["1"]}):
        with pytest.raises(TaskListError, match="cyclic dependency"):
            await run(tools, "TaskUpdate", taskId="1", **bad)
    with pytest.raises(TaskListError, match="validate blocked task ID failed"):
        await run(tools, "TaskUpdate", taskId="1", addBlocks=["x"])
    with pytest.raises(TaskListError, match="validate blocking task ID failed"):
        await run(tools, "TaskUpdate", taskId="1", addBlockedBy=["x"])
    with pytest.raises(TaskListError, match="update Task #1 blocks failed"):
        await run(tools, "TaskUpdate", taskId="1", addBlocks=["99"])


async def test_delete_unlinks_and_completing_everything_clears_the_list(backend: Backend) -> None:
    tools = await tools_of(backend)
    for i in range(1, 4):
        await run(tools, "TaskCreate", subject=f"t{i}", description="d")
    await run(tools, "TaskUpdate", taskId="2", addBlockedBy=["1"], addBlocks=["3"])
    assert await run(tools, "TaskUpdate", taskId="2", status="deleted") == "Updated task #2 deleted"
    assert (await task_file(backend, "1"))["blocks"] == [] and (await task_file(backend, "3"))["blockedBy"] == []
    await run(tools, "TaskUpdate", taskId="1", status="completed")
    assert await run(tools, "TaskList") == "#1 [completed] t1\n#3 [pending] t3"
    await run(tools, "TaskUpdate", taskId="3", status="completed")
    assert await run(tools, "TaskList") == "No tasks found."
    # ids keep growing from the high watermark
    assert await run(tools, "TaskCreate", subject="t4", description="d") == "Task #4 created successfully: t4"


async def test_an_agent_plans_with_the_task_tools(tmp_path: Path) -> None:
    model = ScriptedChatModel(
        [
            calling(call("TaskCreate", json.dumps({"subject": "Write docs", "description": "the README"}), "c1")),
            calling(call("TaskUpdate", json.dumps({"taskId": "1", "status": "in_progress"}), "c2")),
            calling(call("TaskList", "{}", "c3")),
            "Working on it.",
        ]
    )
    mw = PlanTaskMiddleware(LocalBackend(tmp_path), "/plan")
    seen = await collect(Runner(ChatModelAgent("a", "d", model=model, middlewares=[mw])).query("plan"))
    assert [s.content for s in seen if s.role == "tool"] == [
        '{"result":"Task #1 created successfully: Write docs"}',
        '{"result":"Updated task #1 status"}',
        '{"result":"#1 [in_progress] Write docs"}',
    ]
    assert json.loads((tmp_path / "plan" / "1.json").read_text())["status"] == "in_progress"
