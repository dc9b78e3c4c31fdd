"""The demo, end to end: seed 002's Hangzhou day trip, offline, through JSON actions, and over HTTP."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.compose.models.openai_server import OpenAIServer, sse, text_chunks, tool_call_chunks

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
FINAL = (
    "明天杭州一日游安排：上午去西湖断桥（趁没下雨），下午转中国茶叶博物馆品龙井（室内躲雨），"
    "傍晚逛河坊街吃小吃。全程交通约55分钟。带伞和薄外套，穿舒适的走路鞋。"
)
TOOLS = ["get_weather", "search_places", "estimate_route"]


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("travel_agent_demo", ROOT / "examples" / "travel_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return load_demo()


async def test_offline_demo_answers_and_calls_the_tools_in_order(demo: ModuleType, tmp_path: Path) -> None:
    out = io.StringIO()
    trace = tmp_path / "trace.jsonl"
    result = await demo.amain(["--trace", str(trace)], out=out)
    assert result.answer == FINAL
    assert result.tools == TOOLS
    assert result.events == 7  # 4 model events, 3 tool events
    text = out.getvalue()
    assert "→ get_weather" in text and "← estimate_route" in text and f"Final answer: {FINAL}" in text
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert [r["seq"] for r in records] == list(range(len(records)))
    tool_steps = [(r["tool"], r["step"]) for r in records if r["event"] == "tool.call.completed"]
    assert tool_steps == [("get_weather", 0), ("search_places", 1), ("estimate_route", 2)]
    assert [r["step"] for r in records if r["event"] == "reply.completed"] == [0, 1, 2, 3]


async def test_demo_through_the_json_action_protocol(demo: ModuleType) -> None:
    result = await demo.amain(["--json-actions"], out=io.StringIO())
    assert result.answer == FINAL
    assert result.tools == TOOLS


def round_reply(index: int, name: str, arguments: str) -> object:
    return sse(tool_call_chunks(0, f"call_{index}", name, arguments), finish_reason="tool_calls", usage=(10, 5))


async def test_demo_on_an_openai_compatible_server(demo: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    replies = [
        round_reply(0, "get_weather", '{"city": "杭州", "date": "明天"}'),
        round_reply(1, "search_places", '{"city": "杭州", "interests": ["茶", "小吃"], "weather": "下午有雨"}'),
        round_reply(2, "estimate_route", '{"places": ["西湖·断桥", "中国茶叶博物馆", "河坊街"]}'),
        sse(text_chunks(FINAL, size=5), usage=(20, 30)),
    ]
    with OpenAIServer(replies) as server:  # type: ignore[arg-type]
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = await demo.amain([], out=io.StringIO())
        requests = server.requests
    assert result.answer == FINAL
    assert result.tools == TOOLS
    assert len(requests) == 4
    assert requests[0].json["model"] == "gpt-4o-mini"
    assert [t["function"]["name"] for t in requests[0].json["tools"]] == TOOLS
    last = requests[3].json["messages"]
    assert [m["role"] for m in last] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def test_main_runs_as_a_script(demo: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main([]) == 0
    assert f"Final answer: {FINAL}" in capsys.readouterr().out
