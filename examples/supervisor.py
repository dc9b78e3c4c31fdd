"""A supervisor and two workers (adk.prebuilt.supervisor), offline on scripted models.

    python examples/supervisor.py

The supervisor transfers to the researcher, who looks the weather up and hands back (deterministically), then to
the writer, who writes the note and hands back, then the supervisor answers. Every event is printed with its run
path, so you can see who spoke when.
"""

from __future__ import annotations

import anyio

from adk import ChatModelAgent, Runner
from adk.prebuilt import supervisor
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


def calls(name: str, arguments: str, call_id: str) -> Message:
    return Message(
        role="assistant", tool_calls=[ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))]
    )


def build() -> object:
    boss = ChatModelAgent(
        "supervisor",
        "coordinates the team",
        "Delegate research to the researcher and writing to the writer, then answer.",
        model=ScriptedChatModel(
            [
                calls("transfer_to_agent", '{"agent_name": "researcher"}', "t1"),
                calls("transfer_to_agent", '{"agent_name": "writer"}', "t2"),
                "Done: the note is written (bring an umbrella).",
            ]
        ),
    )
    researcher = ChatModelAgent(
        "researcher",
        "looks facts up",
        model=ScriptedChatModel([calls("get_weather", '{"city": "Hangzhou"}', "w1"), "Hangzhou: light rain, 18°C."]),
        tools=[get_weather],
    )
    writer = ChatModelAgent(
        "writer", "writes short notes", model=ScriptedChatModel(["Note: rainy day in Hangzhou, take an umbrella."])
    )
    return supervisor(boss, [researcher, writer])


async def main() -> str:
    run = Runner(build()).query("Write a note on tomorrow's weather in Hangzhou.")  # type: ignore[arg-type]
    async with run:
        async for event in run:
            if event.message is None:
                continue
            message = await event.message.get_message()
            text = message.content or ", ".join(
                f"{c.function.name}({c.function.arguments})" for c in message.tool_calls
            )
            print(f"{'/'.join(event.run_path):<40} {event.message.role:<9} {text}")
    assert run.final_message is not None
    return run.final_message.content


if __name__ == "__main__":
    print("answer:", anyio.run(main))
