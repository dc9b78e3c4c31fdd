"""examples/mcp_agent.py, offline: the demo agent plans the Hangzhou trip with the tools of a local MCP server."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'pyeino[mcp]')")

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
FINAL = (
    "明天杭州一日游安排：上午去西湖断桥（趁没下雨），下午转中国茶叶博物馆品龙井（室内躲雨），"
    "傍晚逛河坊街吃小吃。全程交通约55分钟。带伞和薄外套，穿舒适的走路鞋。"
)
TOOLS = ["get_weather", "search_places", "estimate_route"]


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    spec = importlib.util.spec_from_file_location("mcp_agent_demo", ROOT / "examples" / "mcp_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def test_the_offline_demo_plans_the_trip_with_the_mcp_servers_tools(demo: ModuleType) -> None:
    out = io.StringIO()
    result = await demo.amain([], out=out)
    assert result.offered == TOOLS
    assert result.called == TOOLS
    assert result.answer == FINAL
    text = out.getvalue()
    assert text.startswith(f"MCP server 'travel' offers {TOOLS}\n")
    weather = json.loads(text.split("← get_weather: ", 1)[1].splitlines()[0])
    assert weather == {
        "city": "杭州",
        "date": "明天",
        "forecast": "上午多云，15点后小雨",
        "temperature_c": "18-23",
        "packing_hint": "带伞和薄外套",
    }
    assert f"Final answer: {FINAL}" in text
