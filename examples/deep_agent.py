"""A deep agent (adk.prebuilt.deep_agent), offline on scripted models, working on files in a temporary directory.

    python examples/deep_agent.py

The agent plans three todos (write_todos), delegates the research to a sub-agent (the task tool), writes a note
and edits it in a LocalBackend (every path kept inside the directory), greps it, and answers. Its first model
fails: failover hands the request to the backup model, which answers the rest of the run.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio

from adk import ChatModelAgent, ModelFailoverConfig, Runner
from adk.middlewares import LocalBackend
from adk.prebuilt import SESSION_KEY_TODOS, deep_agent
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall


def calls(name: str, arguments: object, call_id: str) -> Message:
    function = FunctionCall(name=name, arguments=json.dumps(arguments))
    return Message(role="assistant", tool_calls=[ToolCall(id=call_id, function=function)])


TODOS = [
    {"content": "Find Hangzhou's best rainy-day sight", "activeForm": "Finding a sight", "status": "in_progress"},
    {"content": "Write the note", "activeForm": "Writing the note", "status": "pending"},
    {"content": "Check the note", "activeForm": "Checking the note", "status": "pending"},
]


def build(workdir: Path) -> ChatModelAgent:
    researcher = ChatModelAgent(
        "researcher",
        "finds facts about places",
        "You research travel facts.",
        model=ScriptedChatModel(["On a rainy day: the China National Tea Museum."]),
    )
    primary = ScriptedChatModel(["never"], fail_at_call={0: ConnectionError("primary model is down")})
    backup = ScriptedChatModel(
        [
            calls("write_todos", {"todos": TODOS}, "c1"),
            calls("task", {"subagent_type": "researcher", "description": "Best rainy-day sight in Hangzhou?"}, "c2"),
            calls("write_file", {"file_path": "/notes/hangzhou.md", "content": "# Hangzhou\nRainy day: TBD\n"}, "c3"),
            calls(
                "edit_file",
                {
                    "file_path": "/notes/hangzhou.md",
                    "old_string": "TBD",
                    "new_string": "Tea Museum",
                    "replace_all": False,
                },
                "c4",
            ),
            calls("grep", {"pattern": "Rainy", "output_mode": "content"}, "c5"),
            "Noted in /notes/hangzhou.md: on a rainy day, visit the China National Tea Museum.",
        ]
    )
    backup.model_name = "backup"  # type: ignore[misc]
    return deep_agent(
        "planner",
        "plans trips and keeps notes",
        primary,
        sub_agents=[researcher],
        backend=LocalBackend(workdir),
        model_failover=ModelFailoverConfig(models=[backup]),
    )


async def main() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        run = Runner(build(workdir)).query("Plan a rainy day in Hangzhou and keep a note.")
        tools: list[str] = []
        answer: Message | None = None
        async with run:
            async for event in run:
                if event.error is not None:
                    raise event.error
                assert event.message is not None
                msg = await event.message.get_message()
                if event.message.role == "tool":
                    tools.append(f"{event.message.tool_name}: {msg.content.splitlines()[0]}")
                    print(f"  [{event.message.tool_name}] {msg.content.splitlines()[0]}")
                elif not msg.tool_calls:
                    answer = msg
        assert answer is not None
        note = (workdir / "notes" / "hangzhou.md").read_text()
        model = answer.response_meta.model if answer.response_meta is not None else ""
        print(f"answer ({model}): {answer.content}")
        print(f"note:\n{note}")
        return {
            "answer": answer.content,
            "model": model,
            "note": note,
            "tools": tools,
            "todos": run.session_values[SESSION_KEY_TODOS],
        }


if __name__ == "__main__":
    anyio.run(main)
