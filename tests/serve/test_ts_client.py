"""The real TypeScript client, ``@ag-ui/client``'s ``HttpAgent`` (pinned in tests/serve/js/package.json), driven by a
node script against a live server: it streams text and tool calls, resumes an approval pause, and answers a
client tool."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adk import ChatModelAgent
from adk.serve import create_app
from compose.schema import Message
from tests.serve.helpers import Live, PolicyModel, calling, get_weather, live_server, payer, tool_results

JS = Path(__file__).parent / "js"


def node_ready() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed (the TypeScript client test needs them)")
    if not (JS / "node_modules" / "@ag-ui" / "client").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, capture_output=True, timeout=600)
    return node


@pytest.fixture
def app() -> Iterator[Live]:
    def planner(messages: list[Message]) -> Message | str:
        results = tool_results(messages)
        if not results:
            return calling(("k1", "confirm", '{"what": "trip"}'), content="Let me ask.")
        return f"The user said {results[-1].content}."

    agents: dict[str, Any] = {
        "weather": ChatModelAgent(
            "weather",
            "weather",
            model=PolicyModel(
                lambda m: (
                    calling(("c1", "get_weather", '{"city": "Hangzhou"}'), content="Checking.")
                    if not tool_results(m)
                    else "Sunny in Hangzhou."
                )
            ),
            tools=[get_weather],
        ),
        "payer": payer("Paid."),
        "planner": ChatModelAgent("planner", "plans", model=PolicyModel(planner)),
    }
    with live_server(create_app(agents)) as live:
        yield live


def test_http_agent(app: Live) -> None:
    node = node_ready()
    done = subprocess.run([node, "client.mjs", app.url], cwd=JS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    weather = out["weather"]
    assert weather["text"] == "Checking.Sunny in Hangzhou."
    assert weather["toolCalls"] == [{"id": "c1", "name": "get_weather", "args": {"city": "Hangzhou"}}]
    assert weather["results"] == [{"id": "c1", "content": "sunny in Hangzhou"}]
    assert weather["outcome"] == "success" and weather["result"] == "Sunny in Hangzhou." and weather["errors"] == []
    assert out["weatherMessages"] == ["user", "assistant", "tool", "assistant"]
    paused = out["paused"]
    assert paused["outcome"] == "interrupt" and [i["toolCallId"] for i in paused["interrupts"]] == ["p1"]
    resumed = out["resumed"]
    assert resumed["outcome"] == "success" and resumed["results"] == [{"id": "p1", "content": "paid invoice 7"}]
    assert resumed["toolCalls"] == [] and resumed["result"] == "Paid."
    assert out["client1"]["pending"] == ["k1"] and out["client1"]["toolCalls"][0]["name"] == "confirm"
    assert out["client2"]["result"] == "The user said yes." and out["client2"]["errors"] == []
