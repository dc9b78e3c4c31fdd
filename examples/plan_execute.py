"""Plan, execute, replan (adk.prebuilt.plan_execute), offline on scripted models.

    python examples/plan_execute.py

The planner makes a two-step plan; the executor carries out a step (calling a tool); the replanner first revises
the plan to the remaining step, then, after the second step, responds, which ends the loop.
"""

from __future__ import annotations

import json

import anyio

from adk import Runner
from adk.prebuilt import EXECUTED_STEPS_SESSION_KEY, Planner, Replanner, new_executor, plan_execute
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall
from compose.tools import tool


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"{city}: light rain, 18°C"


def calls(name: str, arguments: object, call_id: str) -> Message:
    function = FunctionCall(name=name, arguments=json.dumps(arguments))
    return Message(role="assistant", tool_calls=[ToolCall(id=call_id, function=function)])


def build() -> object:
    planner = Planner(ScriptedChatModel([calls("plan", {"steps": ["check the weather", "pick places"]}, "p1")]))
    executor = new_executor(
        ScriptedChatModel(
            [
                calls("get_weather", {"city": "Hangzhou"}, "w1"),
                "It will rain lightly (18°C).",
                "Indoors: the tea museum; evening: Hefang Street.",
            ]
        ),
        tools=[get_weather],
    )
    replanner = Replanner(
        ScriptedChatModel(
            [
                calls("plan", {"steps": ["pick places for a rainy day"]}, "r1"),
                calls("respond", {"response": "Rainy day plan: tea museum, then Hefang Street."}, "r2"),
            ]
        )
    )
    return plan_execute(planner, executor, replanner)


async def main() -> dict[str, object]:
    run = Runner(build()).query("Plan a day in Hangzhou tomorrow.")  # type: ignore[arg-type]
    async with run:
        async for event in run:
            if event.error is not None:
                raise event.error
            if event.message is not None:
                message = await event.message.get_message()
                text = message.content or ", ".join(c.function.name for c in message.tool_calls)
                print(f"{event.agent_name:<10} {event.message.role:<9} {text}")
            elif event.action is not None and event.action.break_loop is not None:
                print(f"{event.agent_name:<10} break loop (done={event.action.break_loop.done})")
    return {"executed_steps": run.session_values[EXECUTED_STEPS_SESSION_KEY]}


if __name__ == "__main__":
    print(anyio.run(main))
