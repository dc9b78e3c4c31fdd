"""Time travel on a small drafting graph, offline: keep the history of a run on SQLite, look at it, replay a step,
edit a step and continue from the edit, then watch a run with stream modes.

The graph: ``outline`` (a lambda) -> ``write`` (a sub-graph whose chat model drafts the text) -> ``polish``.
A scripted chat model answers, so no API key is needed.

    python examples/time_travel.py [history.db]
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio

from compose import (
    END,
    START,
    Graph,
    Message,
    Runnable,
    ScriptedChatModel,
    SQLiteCheckPointStore,
    assistant_message,
    get_stream_writer,
    process_state,
    user_message,
)


@dataclass
class Notes:
    """The graph's state: what each node noted."""

    log: list[str] = field(default_factory=list)


def drafting_graph(store: SQLiteCheckPointStore) -> Runnable[str, str]:
    writer = Graph[list[Message], Message]()  # typed: values typed Any come back from a snapshot as JSON data
    writer.add_chat_model_node(
        "model", ScriptedChatModel([assistant_message("Tea is calm in a cup.")] * 4, chunk_size=6)
    )
    writer.add_edge(START, "model")
    writer.add_edge("model", END)

    async def outline(topic: str) -> list[Message]:
        async with process_state(Notes) as notes:
            notes.log.append(f"outlined {topic}")
        get_stream_writer()({"progress": "outline done"})
        return [user_message(f"Write one line about {topic}.")]

    async def polish(draft: Message) -> str:
        async with process_state(Notes) as notes:
            notes.log.append("polished")
        return draft.content.upper()

    g = Graph[str, str](state=Notes)
    g.add_lambda_node("outline", outline)
    g.add_graph_node("write", writer)
    g.add_lambda_node("polish", polish)
    for s, e in [(START, "outline"), ("outline", "write"), ("write", "polish"), ("polish", END)]:
        g.add_edge(s, e)
    return g.compile(name="drafting", checkpoint_store=store, keep_history=True)


async def main(db: str, out: IO[str] = sys.stdout) -> dict[str, object]:
    async with SQLiteCheckPointStore(db) as store:
        runnable = drafting_graph(store)
        first = await runnable.invoke("tea", checkpoint_id="draft-1")
        print(f"output: {first}", file=out)
        history = await runnable.get_state_history("draft-1")
        for snap in reversed(history):
            print(f"  step {snap.step}: ran {list(snap.node_outputs)}, next {list(snap.next_nodes)}", file=out)

        replayed = await runnable.invoke(None, checkpoint_id="draft-1", from_step=2)
        print(f"replayed from step 2: {replayed}", file=out)

        # edit: as if the writer had drafted something else after step 1, then continue from the edit
        edit = await runnable.update_state(
            "draft-1", 1, as_node="write", output=assistant_message("Coffee is loud.")
        )
        edited = await runnable.invoke(
            None, checkpoint_id="draft-1", from_step=edit.step, branch=edit.branch
        )
        print(f"edited at step 1 ({edit.branch}): {edited}", file=out)

        tokens: list[str] = []
        updates: list[str] = []
        custom: list[object] = []
        reader = await runnable.stream(
            "tea", stream_mode=["updates", "messages", "custom"], subgraphs=True
        )
        async for part in reader:
            if part.mode == "messages":
                tokens.append(part.data[0].content)
            elif part.mode == "updates":
                updates.append("/".join([*part.namespace, *part.data]))
            else:
                custom.append(part.data)
        print(f"tokens: {tokens}", file=out)
        print(f"updates: {updates}", file=out)
        print(f"custom: {custom}", file=out)
        return {
            "first": first,
            "steps": [s.step for s in history],
            "replayed": replayed,
            "edited": edited,
            "tokens": tokens,
            "updates": updates,
        }


if __name__ == "__main__":
    if len(sys.argv) > 1:
        anyio.run(main, sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            anyio.run(main, str(Path(tmp) / "history.db"))
