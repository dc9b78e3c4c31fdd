"""A long conversation kept within a token budget, ending in a typed answer (offline: scripted models).

Run: ``python examples/long_conversation.py [--turns 40]``. Every turn the agent looks a topic up with a tool;
``SummarizationMiddleware`` folds the older turns into a summary whenever the conversation passes its budget,
``PatchToolCallsMiddleware`` answers a tool call left dangling by an interrupted turn, and the last turn asks for
a ``Report`` (``output_type``): the first answer is invalid, the agent sends the errors back, the second parses.
"""

from __future__ import annotations

import argparse

import anyio
from pydantic import BaseModel

from adk import (
    AgentMiddleware,
    ChatModelAgent,
    ChatModelAgentState,
    PatchToolCallsMiddleware,
    Runner,
    SummarizationMiddleware,
    Summarized,
)
from adk.chat_model.config import OutputConfig
from adk.middlewares import approx_token_count
from compose import FunctionCall, Message, ScriptedChatModel, ToolCall, tool, user_message

BUDGET = 1_500


class Report(BaseModel):
    topics: int
    summary: str


@tool
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up
    """
    return f"{topic}: " + "facts " * 40


def answer(messages: list[Message]) -> Message:
    last = messages[-1]
    if last.role == "user" and "not a valid Report" in last.content:  # the agent sent the errors back
        return Message(role="assistant", content='{"topics": 40, "summary": "Forty topics looked up."}')
    if last.role == "user" and last.content.startswith("Report"):
        return Message(role="assistant", content='{"topics": "many"}')  # invalid: asked again
    if last.role == "user":
        call = ToolCall(id=f"c{len(messages)}", function=FunctionCall(name="lookup", arguments='{"topic": "x"}'))
        return Message(role="assistant", tool_calls=[call])
    return Message(role="assistant", content="Noted. " + "detail " * 20)


class Keep(AgentMiddleware):
    """Carries the conversation, as the agent kept it, from one run to the next."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def after_agent(self, state: ChatModelAgentState) -> None:
        self.messages = [m for m in state.messages if m.role != "system"]


async def main(turns: int) -> Report:
    keep = Keep()
    summarizer = ScriptedChatModel([lambda msgs: "Earlier: many topics were looked up."] * 1_000)
    agent = ChatModelAgent(
        "researcher", "looks topics up", "You look topics up.", ScriptedChatModel([answer] * 1_000), tools=[lookup],
        middlewares=[PatchToolCallsMiddleware(), SummarizationMiddleware(summarizer, max_tokens=BUDGET), keep],
    )  # fmt: skip
    typed = ChatModelAgent("reporter", "reports", model=ScriptedChatModel([answer] * 4), output=OutputConfig(Report))
    summaries = 0
    for turn in range(turns):
        async with Runner(agent).run([*keep.messages, user_message(f"Look up topic {turn}")]) as run:
            async for event in run:
                if event.action is not None and isinstance(event.action.customized, Summarized):
                    summaries += 1
                await event.aclose()
    print(f"{turns} turns, {summaries} summaries, {approx_token_count(keep.messages)} tokens kept (budget {BUDGET})")
    report: Report | None = None
    async with Runner(typed).run([*keep.messages, user_message("Report on the topics as JSON")]) as run:
        async for event in run:
            if event.output is not None and event.output.structured is not None:
                report = event.output.structured
            await event.aclose()
    assert report is not None
    print(report)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=40)
    anyio.run(main, parser.parse_args().turns)
