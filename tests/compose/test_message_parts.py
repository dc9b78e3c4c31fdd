"""Messages with content parts: the part types, concatenation in streams, JSON (old JSON still loads, plain
messages serialise as before), chat templates over text parts, the token estimators, and parts kept by SQLite
checkpoints and sessions across a pause and a new process's store."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from adk import ApprovalDecision, ChatModelAgent, Runner
from adk.middlewares.approval import ApprovalMiddleware
from adk.middlewares.summarization import approx_token_count
from adk.sessions import SQLiteSessionStore, approximate_tokens
from compose.checkpoint import SQLiteCheckPointStore
from compose.errors import TemplateFormatError
from compose.models import JSONActionChatModel, ScriptedChatModel
from compose.prompt import ChatTemplate
from compose.schema import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    VideoPart,
    approx_part_tokens,
    assistant_message,
    concat_messages,
    user_message,
)
from compose.stream import StreamReader, concat
from compose.tools import tool
from tests.adk.helpers import call, calling

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "picture_question.py"

IMAGE = ImagePart(url="https://example.com/cat.png", detail="high")
LOOK = user_message("What is in it?", parts=[IMAGE, TextPart(text="Be brief.")])
# what pyeino wrote for a plain message before messages had parts
OLD_JSON = (
    '{"role":"user","content":"hi","name":null,"tool_calls":[],"tool_call_id":null,"tool_name":null,'
    '"response_meta":null,"reasoning_content":"","extra":{}}'
)


# --- the parts ------------------------------------------------------------------------------------------------


def test_a_media_part_takes_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match=r"ImagePart takes exactly one of url, data \(given: neither\)"):
        ImagePart()
    with pytest.raises(ValidationError, match=r"AudioPart takes exactly one of url, data \(given: url and data\)"):
        AudioPart(url="https://x/a.wav", data="AAAA", mime_type="audio/wav")
    with pytest.raises(ValidationError, match="FilePart with inline data needs its mime_type"):
        FilePart(data="JVBERi0=")
    with pytest.raises(ValidationError, match=r"FilePart takes exactly one of url, data, file_id"):
        FilePart(file_id="file-1", url="https://x/a.pdf")
    assert ImagePart.from_bytes(b"\x00\x01", "image/png").data_url == "data:image/png;base64,AAE="
    assert VideoPart(url="https://x/v.mp4").data_url == "https://x/v.mp4"


def test_parts_in_json_and_repr() -> None:
    assert Message.model_validate_json(LOOK.model_dump_json()) == LOOK
    assert repr(LOOK) == "Message(role='user', content='What is in it?', parts=[image, text])"
    raw = json.loads(LOOK.model_dump_json())
    assert raw["parts"] == [
        {"type": "image", "url": "https://example.com/cat.png", "data": None, "mime_type": "", "extra": {},
         "detail": "high"},
        {"type": "text", "text": "Be brief.", "extra": {}},
    ]  # fmt: skip
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        Message.model_validate({"role": "user", "parts": [{"type": "hologram"}]})


def test_a_message_without_parts_has_the_json_it_had_before() -> None:
    assert Message(role="user", content="hi").model_dump_json() == OLD_JSON
    assert Message.model_validate_json(OLD_JSON) == user_message("hi")
    assert "parts" not in Message(role="assistant", content="x").model_dump()


def test_concat_merges_adjacent_text_parts_and_keeps_the_others() -> None:
    chunks = [
        Message(role="assistant", content="Here", parts=[TextPart(text="A ")]),
        Message(role="assistant", content=" it is", parts=[TextPart(text="cat", extra={"k": "x"})]),
        Message(role="assistant", parts=[IMAGE, ImagePart(url="https://example.com/dog.png")]),
        Message(role="assistant", parts=[TextPart(text="and "), TextPart(text="a dog.", extra={"k": "y"})]),
    ]
    whole = concat_messages(chunks)
    assert whole.content == "Here it is"
    assert whole.parts == [
        TextPart(text="A cat", extra={"k": "x"}),
        IMAGE,
        ImagePart(url="https://example.com/dog.png"),
        TextPart(text="and a dog.", extra={"k": "y"}),
    ]


def test_concat_joins_a_streamed_audio_answer_but_not_user_audio() -> None:
    def audio(data: str) -> AudioPart:
        return AudioPart(data=data, mime_type="audio/wav")

    def two(role: str) -> list[Message]:
        return [Message(role=role, parts=[audio("UklG")]), Message(role=role, parts=[audio("RiQA")])]  # type: ignore[arg-type]

    spoken = concat_messages(two("assistant"))
    assert spoken.parts == [audio("UklGRiQA")]
    clips = concat_messages(two("user"))
    assert clips.parts == [audio("UklG"), audio("RiQA")]


async def test_a_stream_of_chunks_with_parts_concatenates() -> None:
    reader = StreamReader.from_iterable(
        [Message(role="assistant", parts=[TextPart(text=t)]) for t in ("Hel", "lo")]
    )
    whole = await concat(reader)
    assert whole.parts == [TextPart(text="Hello")]


# --- templates ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("format_type", "text", "content"),
    [("f-string", "Describe it for {who}.", "Hi {who}"), ("jinja2", "Describe it for {{ who }}.", "Hi {{ who }}")],
)
async def test_a_chat_template_renders_text_parts_only(format_type: str, text: str, content: str) -> None:
    odd = ImagePart(url="https://example.com/{who}.png")  # not a template: left as it is
    template = ChatTemplate.from_messages(format_type, user_message(content, parts=[TextPart(text=text), odd]))
    [rendered] = await template.format({"who": "Li"})
    assert rendered == user_message("Hi Li", parts=[TextPart(text="Describe it for Li."), odd])
    [again] = await template.format({"who": "Wu"})
    assert again.parts[0] == TextPart(text="Describe it for Wu.") and rendered.parts[0].text == "Describe it for Li."  # type: ignore[union-attr]


async def test_a_bad_text_part_names_its_message_and_part() -> None:
    with pytest.raises(TemplateFormatError, match=r"chat template message 1: parts\[1\]: "):
        ChatTemplate.from_messages("f-string", user_message("ok"), user_message("x", parts=[IMAGE, TextPart(text="{")]))
    template = ChatTemplate.from_messages("f-string", user_message("x", parts=[TextPart(text="{nope}")]))
    with pytest.raises(TemplateFormatError, match=r"message 0: parts\[0\]: the placeholder \{nope\}") as info:
        await template.format({})
    assert info.value.key == "nope" and info.value.index == 0


# --- token estimates --------------------------------------------------------------------------------------------


def test_the_token_estimators_count_parts() -> None:
    plain = user_message("What is in it?")
    assert approx_part_tokens(IMAGE) == 765
    assert approx_part_tokens(ImagePart(url="u", detail="low")) == 85
    assert approx_part_tokens(TextPart(text="12345678")) == 2
    assert approx_part_tokens(AudioPart(data="A" * 400, mime_type="audio/wav")) == 100
    assert approx_part_tokens(FilePart(file_id="file-12345678")) == 4
    # the image and the text part "Be brief." (9 characters: 3 tokens) on top of the plain message's count
    assert approximate_tokens(LOOK) == approximate_tokens(plain) + 765 + 3
    assert approx_token_count([LOOK]) == approx_token_count([plain]) + 765 + 3


# --- checkpoints and sessions on SQLite ---------------------------------------------------------------------------


async def test_parts_survive_a_paused_agent_run_on_sqlite_and_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"

    @tool
    async def zoom(factor: int) -> str:
        """Zoom in.

        Args:
            factor: how much.
        """
        return f"zoomed x{factor}"

    def agent(model: ScriptedChatModel) -> ChatModelAgent:
        guard = ApprovalMiddleware(lambda name, args: True)
        return ChatModelAgent("eye", "looks", model=model, tools=[zoom], middlewares=[guard])

    first = ScriptedChatModel([calling(call("zoom", '{"factor": 2}', id="z1"))])
    async with (
        SQLiteCheckPointStore(path) as store,
        Runner(agent(first), checkpoint_store=store).run([LOOK], checkpoint_id="look") as run,
    ):
        paused = [e.action.interrupted async for e in run if e.action is not None and e.action.interrupted]
    assert first.calls[0].messages[-1] == LOOK
    with sqlite3.connect(path) as db:
        [(data,)] = db.execute("SELECT data FROM pyeino_checkpoints").fetchall()
    assert b'"parts"' in data  # stored as JSON

    second = ScriptedChatModel(["A cat."])
    targets = {paused[0].ids[0]: ApprovalDecision(approved=True)}
    async with (
        SQLiteCheckPointStore(path) as store,  # a new store on the file, as a new process would open it
        Runner(agent(second), checkpoint_store=store).resume("look", targets=targets) as run,
    ):
        [e async for e in run]
    sent = second.calls[0].messages
    assert sent[0] == LOOK and sent[0].parts == [IMAGE, TextPart(text="Be brief.")]


async def test_parts_survive_a_sqlite_session_and_plain_rows_keep_their_json(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    answer = assistant_message("A cat.")
    async with SQLiteSessionStore(path) as store:
        lease = await store.acquire("s1")
        await store.commit(lease, [LOOK, answer, user_message("hi")], {})
    with sqlite3.connect(path) as db:
        rows = [r[0] for r in db.execute("SELECT data FROM pyeino_sessions_messages ORDER BY seq")]
        tokens = [r[0] for r in db.execute("SELECT tokens FROM pyeino_sessions_messages ORDER BY seq")]
        # a row as pyeino wrote it before messages had parts loads too
        db.execute(
            "INSERT INTO pyeino_sessions_messages (session_id, seq, turn, role, tokens, data) "
            "VALUES ('s1', 3, 0, 'user', 5, ?)",
            (OLD_JSON,),
        )
    assert rows[2] == OLD_JSON and tokens[0] == approximate_tokens(LOOK)
    async with SQLiteSessionStore(path) as store:
        session = await store.load("s1")
    assert session.messages == [LOOK, answer, user_message("hi"), user_message("hi")]


async def test_the_json_action_model_keeps_the_parts_of_the_messages_it_rewrites() -> None:
    inner = ScriptedChatModel(['{"type": "final", "answer": "A chart."}'])
    chart = ImagePart(url="https://example.com/chart.png")
    history = [
        LOOK,
        assistant_message("", [call("plot", "{}", id="p1")]),
        Message(role="tool", content="plotted", tool_call_id="p1", tool_name="plot", parts=[chart]),
    ]
    assert (await JSONActionChatModel(inner).generate(history)).content == "A chart."
    sent = inner.calls[0].messages
    assert sent[1].parts == LOOK.parts and sent[-1].role == "user" and sent[-1].parts == [chart]


async def test_a_scripted_answer_with_parts_streams_them() -> None:
    drawn = Message(role="assistant", content="Here:", parts=[IMAGE, TextPart(text="a cat")])
    model = ScriptedChatModel([drawn, drawn], chunk_size=2)
    async with await model.stream([LOOK]) as reader:
        chunks = [c async for c in reader]
    assert [c.parts for c in chunks if c.parts] == [[IMAGE], [TextPart(text="a cat")]]
    whole = concat_messages(chunks)
    assert whole.parts == drawn.parts and whole.content == "Here:"
    assert (await model.generate([LOOK])).parts == drawn.parts


async def test_the_picture_question_example(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("picture_question_demo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    answers = await demo.main(str(tmp_path / "sessions.db"))
    assert answers == ["It is West Lake.", "Still West Lake, from the first turn."]
