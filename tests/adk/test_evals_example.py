"""examples/evals: the five-case dataset runs offline on the committed cassette (through the CLI, exit 0), and the
committed cassette is what recording through the real ``openai`` client against the loopback server gives."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from adk.evals.__main__ import main as cli
from tests.compose.models.openai_server import OpenAIServer, Reply, completion, json_reply

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "evals"
DAY_TRIP = (
    "明天杭州一日游安排：上午去西湖断桥（趁没下雨），下午转中国茶叶博物馆品龙井（室内躲雨），"
    "傍晚逛河坊街吃小吃。全程交通约55分钟。带伞和薄外套，穿舒适的走路鞋。"
)

# what the model answers, by the case's question and the number of tool results so far
SCRIPT: dict[str, list[tuple[str, list[tuple[str, dict[str, Any]]]]]] = {
    "帮我安排明天的杭州一日游，我喜欢喝茶和吃小吃，告诉我带什么。": [
        ("先查明天杭州的天气。", [("get_weather", {"city": "杭州", "date": "明天"})]),
        (
            "下午有雨，找适合雨天的去处。",
            [("search_places", {"city": "杭州", "interests": ["茶", "小吃"], "weather": "下午有雨"})],
        ),
        ("估算交通。", [("estimate_route", {"places": ["西湖·断桥", "中国茶叶博物馆", "河坊街"]})]),
        (DAY_TRIP, []),
    ],
    "明天杭州天气怎么样？": [
        ("", [("get_weather", {"city": "杭州", "date": "明天"})]),
        ("明天杭州上午多云，15点后小雨，18-23度。", []),
    ],
    "杭州下雨天哪里可以喝茶？": [
        ("", [("search_places", {"city": "杭州", "interests": ["茶"], "weather": "雨天"})]),
        ("推荐中国茶叶博物馆：室内、免费，适合雨天品龙井。", []),
    ],
    "从西湖断桥到河坊街要多久？": [
        ("", [("estimate_route", {"places": ["西湖·断桥", "河坊街"]})]),
        ("西湖·断桥 → 河坊街，交通约55分钟，打车或公交均可。", []),
    ],
    "明天去杭州玩要带什么？": [
        ("", [("get_weather", {"city": "杭州", "date": "明天"})]),
        ("明天15点后有小雨：带伞和薄外套，穿舒适的走路鞋。", []),
    ],
}


def answer(payload: Any) -> Reply:
    """The scripted answer to a request, chosen by its content (so concurrent cases get their own answers)."""
    messages = payload["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    text, calls = SCRIPT[question][sum(m["role"] == "tool" for m in messages)]
    wire = [
        {"id": f"call_{n}", "type": "function", "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False)}}
        for n, a in calls
    ]
    finish = "tool_calls" if calls else "stop"
    return json_reply(completion(text, tool_calls=wire or None, finish_reason=finish, usage=(120, 30)))


def load_record() -> Any:
    spec = importlib.util.spec_from_file_location("pyeino_example_evals_record", HERE / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def interactions(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return sorted(json.dumps(i, sort_keys=True, ensure_ascii=False) for i in data["interactions"])


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: a request would fail


def test_the_dataset_passes_offline_on_the_committed_cassette(
    offline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html, report = tmp_path / "report.html", tmp_path / "report.json"
    args = ["run", str(HERE / "dataset.yaml"), "examples.evals.travel:build"]
    args += ["--cassette", str(HERE / "cassette.json"), "--cassette-mode", "none"]
    assert cli([*args, "--html", str(html), "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "hangzhou-travel-agent: 5/5 cases passed" in out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert [c["name"] for c in data["cases"]] == ["day_trip", "weather", "rainy_day_tea", "route", "packing"]
    day_trip = data["cases"][0]["runs"][0]
    assert day_trip["output"] == DAY_TRIP
    assert [t["name"] for t in day_trip["tool_calls"]] == ["get_weather", "search_places", "estimate_route"]
    assert "day_trip" in html.read_text(encoding="utf-8")


def test_the_committed_cassette_is_what_recording_gives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example-RECORDING-KEY")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    out = tmp_path / "cassette.json"
    with OpenAIServer(check=answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert load_record().main(["--out", str(out)]) == 0
        assert len(server.requests) == 12
        assert server.requests[0].headers["authorization"] == "Bearer sk-example-RECORDING-KEY"
    assert "sk-example-RECORDING-KEY" not in out.read_text(encoding="utf-8")
    assert interactions(out) == interactions(HERE / "cassette.json")
