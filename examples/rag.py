"""Retrieval-augmented answers, offline: load the text files in ``examples/data/``, split them into chunks,
embed and index the chunks, then answer questions with a graph that retrieves, builds a prompt and asks a model.

Run it::

    python examples/rag.py                                  # the three built-in questions
    python examples/rag.py "When is Longjing tea picked?"   # your own
    python examples/rag.py --top-k 1 "Where to watch the sunrise?"

The model is a ScriptedChatModel that answers with the most relevant retrieved chunk, so the whole run is
deterministic; swap in ``OpenAIChatModel`` for a real one. The answering graph::

    START ──> retrieve (Retriever, output_key="docs") ──┐
      └────> question (passthrough, output_key="question") ──> prompt (lambda) ──> model (ChatModel) ──> END
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from compose import (
    END,
    START,
    Document,
    FileLoader,
    Graph,
    HashingEmbedder,
    InMemoryVectorIndex,
    Message,
    Runnable,
    ScriptedChatModel,
    Source,
    TextSplitter,
    system_message,
    user_message,
)

DATA = Path(__file__).resolve().parent / "data"
QUESTIONS = [
    "What is Longjing tea?",
    "Where can I watch West Lake at sunrise?",
    "Do I need an umbrella in spring?",
]
STOP_WORDS = ["a", "an", "and", "at", "be", "can", "do", "for", "i", "in", "is", "it", "of", "on", "or", "the", "to",
              "what", "when", "where", "which", "who", "why", "with"]


@dataclass
class Answer:
    question: str
    text: str
    sources: list[str] = field(default_factory=list)


async def build_index(data: Path = DATA) -> InMemoryVectorIndex:
    """Load every ``*.txt`` under ``data``, split it into chunks and index them."""
    loader = FileLoader(data)
    docs: list[Document] = []
    for name in sorted(p.name for p in data.glob("*.txt")):  # noqa: ASYNC240 (a demo's three files)
        docs += await loader.load(Source(name))
    chunks = await TextSplitter(chunk_size=200, chunk_overlap=40).transform(docs)
    index = InMemoryVectorIndex(HashingEmbedder(stop_words=STOP_WORDS), top_k=2)
    await index.store(chunks)
    return index


def build_prompt(inputs: dict[str, Any]) -> list[Message]:
    """The chat messages for one question and the chunks retrieved for it."""
    docs: list[Document] = inputs["docs"]
    context = "\n".join(f"[{d.id}] {d.content}" for d in docs)
    return [
        system_message(f"Answer from the context only, and cite the chunk ids.\nContext:\n{context}"),
        user_message(inputs["question"]),
    ]


def scripted_answer(messages: list[Message]) -> str:
    """What the scripted model says: the first retrieved chunk, with its id (a real model would reason)."""
    match = re.search(r"^\[([^\]]+)\] (.*)$", messages[0].content, re.MULTILINE)
    return f"{match.group(2)} [{match.group(1)}]" if match else "I don't know: nothing relevant was retrieved."


def build_graph(index: InMemoryVectorIndex, n_questions: int) -> Runnable[str, Message]:
    g = Graph[str, Message]()
    g.add_retriever_node("retrieve", index, output_key="docs")
    g.add_passthrough_node("question", output_key="question")
    g.add_lambda_node("prompt", build_prompt)
    g.add_chat_model_node("model", ScriptedChatModel([scripted_answer] * n_questions, usage=False))
    for a, b in [(START, "retrieve"), (START, "question"), ("retrieve", "prompt"), ("question", "prompt"),
                 ("prompt", "model"), ("model", END)]:
        g.add_edge(a, b)
    return g.compile(trigger_mode="all_predecessor")  # the prompt waits for both of its inputs


async def amain(argv: Sequence[str] | None = None, out: TextIO | None = None) -> list[Answer]:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("questions", nargs="*", help="questions to answer (default: three built-in ones)")
    parser.add_argument("--top-k", type=int, default=2, help="chunks retrieved per question")
    args = parser.parse_args(argv)
    questions = args.questions or QUESTIONS
    index = await build_index()
    print(f"Indexed {len(index)} chunks from {DATA.name}/", file=out)
    graph = build_graph(index, len(questions))
    answers = []
    for question in questions:
        reply = await graph.invoke(question, node_options={"retrieve": {"top_k": args.top_k}})
        sources = re.findall(r"\[([^\]]+)\]$", reply.content)
        answers.append(Answer(question, reply.content, sources))
        print(f"\nQ: {question}\nA: {reply.content}", file=out)
    return answers


def main(argv: Sequence[str] | None = None) -> int:
    anyio.run(amain, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
