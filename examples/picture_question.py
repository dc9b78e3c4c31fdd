"""Asking an agent about a picture, in a conversation that lasts (offline: a scripted model).

Run: ``python examples/picture_question.py``. A chat template renders the question: its text part is a template,
the image part is copied as it is. The agent's model sees the image part (a scripted model here, answering from
the part's URL; ``OpenAIChatModel("gpt-4o-mini")`` would send it as an ``image_url`` content part), and the
conversation, image included, is kept in a SQLite session store, so the second turn's model sees the picture of
the first.
"""

from __future__ import annotations

import os
import tempfile

import anyio

from adk import ChatModelAgent, Runner
from adk.sessions import SQLiteSessionStore
from compose import ChatTemplate, ImagePart, Message, ScriptedChatModel, TextPart, assistant_message, user_message

PICTURE = ImagePart(url="https://example.com/west-lake.jpg", detail="low")

template = ChatTemplate.from_messages(
    "f-string", user_message("What is in this picture?", parts=[PICTURE, TextPart(text="Answer for {reader}.")])
)


def look(messages: list[Message]) -> Message:
    """The scripted model: it names the picture it was shown, and remembers it on the next turn."""
    images = [p for m in messages for p in m.parts if isinstance(p, ImagePart)]
    if not images:
        return assistant_message("I see no picture.")
    place = (images[-1].url or "").rsplit("/", 1)[-1].removesuffix(".jpg").replace("-", " ").title()
    asked = messages[-1].content
    return assistant_message(f"It is {place}." if "picture" in asked else f"Still {place}, from the first turn.")


async def main(path: str) -> list[str]:
    """Two turns in session ``s1`` at ``path``; the answers."""
    agent = ChatModelAgent("eye", "looks at pictures", model=ScriptedChatModel([look, look]))
    answers: list[str] = []
    async with SQLiteSessionStore(path) as store:
        runner = Runner(agent, session_store=store)
        first = await template.format({"reader": "a child"})
        for turn in (first, [user_message("And what did I show you?")]):
            async with runner.run(turn, session_id="s1") as run:
                async for event in run:
                    if event.message is not None:
                        answers.append((await event.message.get_message()).content)
    return answers


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for answer in anyio.run(main, os.path.join(tmp, "sessions.db")):
            print(answer)
