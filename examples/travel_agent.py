"""A ReAct travel assistant plans a day trip to Hangzhou (seed 002), streaming the run as it happens.

Run it::

    python examples/travel_agent.py                     # offline: a scripted model plays seed 002's 4 rounds
    python examples/travel_agent.py --trace trace.jsonl # also write the JSON Lines trace
    python examples/travel_agent.py --json-actions      # the same script through the JSON action protocol
    OPENAI_API_KEY=sk-... python examples/travel_agent.py   # a real model (OPENAI_MODEL, OPENAI_BASE_URL)

The agent checks the weather, searches places that fit it, estimates the route, then answers. Model text is
printed as it arrives, then each tool call and its result, then the final answer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio

from adk import ChatModelAgent, JSONLTraceWriter, Runner, TelemetryHandler
from adk.chat_model.config import Limits
from compose.models import JSONActionChatModel, OpenAIChatModel, ScriptedChatModel
from compose.models.base import ChatModel
from compose.schema import FunctionCall, Message, ToolCall, concat_messages
from compose.tools import tool

TASK = "帮我安排明天的杭州一日游，我喜欢喝茶和吃小吃，告诉我带什么。"
INSTRUCTION = "你是杭州旅游助手。如果不确定某个事实，先用工具查；不要编造天气、路线、票价等实时信息。"


@tool
def get_weather(city: str, date: str = "明天") -> str:
    """查询指定城市和日期的天气预报

    Args:
        city: 城市
        date: 日期
    """
    return json.dumps(
        {
            "city": city,
            "date": date,
            "forecast": "上午多云，15点后小雨",
            "temperature_c": "18-23",
            "packing_hint": "带伞和薄外套",
        },
        ensure_ascii=False,
    )


@tool
def search_places(city: str, interests: list[str] | None = None, weather: str = "") -> str:
    """根据城市、兴趣和约束条件搜索旅游景点

    Args:
        city: 城市
        interests: 兴趣
        weather: 天气约束
    """
    return json.dumps(
        {
            "places": [
                {"name": "西湖·断桥", "type": "户外", "best_time": "上午", "note": "避开下午雨"},
                {"name": "中国茶叶博物馆", "type": "室内", "best_time": "下午", "note": "免费，适合雨天"},
                {"name": "河坊街", "type": "半室内", "best_time": "傍晚", "note": "小吃集中"},
            ]
        },
        ensure_ascii=False,
    )


@tool
def estimate_route(places: list[str]) -> str:
    """估算多个景点之间的交通时间

    Args:
        places: 景点列表，按游览顺序
    """
    return json.dumps(
        {"route": " → ".join(places), "total_transit_minutes": 55, "suggestion": "打车或公交均可，路线紧凑"},
        ensure_ascii=False,
    )


TOOLS = [get_weather, search_places, estimate_route]

# Seed 002's four scripted rounds (JSON actions).
SCRIPTED_ACTIONS = [
    '{"type": "tool", "tool": "get_weather", "args": {"city": "杭州", "date": "明天"}}',
    '{"type": "tool", "tool": "search_places", "args": {"city": "杭州", "interests": ["茶", "小吃"], '
    '"weather": "下午有雨"}}',
    '{"type": "tool", "tool": "estimate_route", "args": {"places": ["西湖·断桥", "中国茶叶博物馆", "河坊街"]}}',
    '{"type": "final", "answer": "明天杭州一日游安排：上午去西湖断桥（趁没下雨），下午转中国茶叶博物馆品龙井'
    '（室内躲雨），傍晚逛河坊街吃小吃。全程交通约55分钟。带伞和薄外套，穿舒适的走路鞋。"}',
]

THOUGHTS = ["先查明天杭州的天气。", "下午有雨，找适合雨天的茶和小吃去处。", "估算三个地点之间的交通。"]


def scripted_messages() -> list[Message]:
    """The same four rounds as native tool-calling answers (a short thought streams before each call)."""
    messages = []
    for k, raw in enumerate(SCRIPTED_ACTIONS):
        action = json.loads(raw)
        if action["type"] == "final":
            messages.append(Message(role="assistant", content=action["answer"]))
        else:
            args = json.dumps(action["args"], ensure_ascii=False)
            call = ToolCall(id=f"call_{k}", function=FunctionCall(name=action["tool"], arguments=args))
            messages.append(Message(role="assistant", content=THOUGHTS[k], tool_calls=[call]))
    return messages


def choose_model(json_actions: bool = False) -> ChatModel:
    """OpenAI when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set, else the offline scripted model."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        model: ChatModel = OpenAIChatModel(
            os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
        )
        return JSONActionChatModel(model) if json_actions else model
    if json_actions:
        return JSONActionChatModel(ScriptedChatModel(SCRIPTED_ACTIONS, chunk_size=6))
    return ScriptedChatModel(scripted_messages(), chunk_size=6)


@dataclass
class DemoResult:
    """What the demo printed, for tests: the final answer and the tools called, in order."""

    answer: str
    tools: list[str] = field(default_factory=list)
    events: int = 0


async def run_demo(
    model: ChatModel, *, out: TextIO | None = None, telemetry: Sequence[TelemetryHandler] = ()
) -> DemoResult:
    """Run the travel agent on ``model`` and stream the run to ``out`` (default: standard output)."""
    out = out or sys.stdout
    agent = ChatModelAgent(
        "travel_agent",
        "plans day trips with weather, places and routes",
        INSTRUCTION,
        model=model,
        tools=TOOLS,
        max_iterations=10,
        limits=Limits(stall_window=3, timeout=120),
    )
    runner = Runner(agent, enable_streaming=True, telemetry=telemetry)
    result = DemoResult(answer="")
    print(f"User: {TASK}\n", file=out)
    async with runner.query(TASK) as run:
        async for event in run:
            result.events += 1
            if event.error is not None:
                print(f"\n[run ended with {type(event.error).__name__}] {event.error}", file=out)
                raise event.error
            variant = event.message
            if variant is None:
                continue
            if variant.role == "tool":
                msg = await variant.get_message()
                print(f"  ← {variant.tool_name}: {msg.content}", file=out, flush=True)
                continue
            print("Assistant: ", end="", file=out, flush=True)
            if variant.message_stream is not None:
                chunks = []
                async with variant.message_stream as stream:
                    async for chunk in stream:  # tokens as the model produces them
                        print(chunk.content, end="", file=out, flush=True)
                        chunks.append(chunk)
                msg = concat_messages(chunks)
            else:
                msg = await variant.get_message()
                print(msg.content, end="", file=out)
            print(file=out)
            for call in msg.tool_calls:
                result.tools.append(call.function.name)
                print(f"  → {call.function.name}({call.function.arguments})", file=out, flush=True)
        final = run.final_message
    result.answer = final.content if final is not None else ""
    print(f"\nFinal answer: {result.answer}", file=out)
    return result


async def amain(argv: Sequence[str] | None = None, out: TextIO | None = None) -> DemoResult:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", metavar="FILE", help="write the JSON Lines trace to FILE")
    parser.add_argument("--json-actions", action="store_true", help="drive the tools via the JSON action protocol")
    args = parser.parse_args(argv)
    model = choose_model(args.json_actions)
    telemetry: list[Any] = []
    trace = JSONLTraceWriter(args.trace) if args.trace else None
    if trace is not None:
        telemetry.append(trace)
    try:
        return await run_demo(model, out=out, telemetry=telemetry)
    finally:
        if trace is not None:
            trace.close()
            print(f"trace: {trace.count} events written to {args.trace}", file=out)
        inner = getattr(model, "inner", model)
        if isinstance(inner, OpenAIChatModel):
            await inner.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    anyio.run(amain, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
