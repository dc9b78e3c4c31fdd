"""Messages with content parts through OpenAIChatModel, over real HTTP against the local scripted server: the
request carries chat-completions content parts, and answers whose content is a list of parts are read."""

from __future__ import annotations

import base64

import pytest

from compose.errors import ModelBadRequestError
from compose.models.openai_model import OpenAIChatModel
from compose.schema import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    VideoPart,
    concat_messages,
    system_message,
    user_message,
)
from tests.compose.models.openai_server import OpenAIServer, completion, delta_chunk, json_reply, sse, text_chunks

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n-not-really-an-image"
PNG_B64 = base64.b64encode(PNG).decode()


async def test_a_user_message_with_parts_is_sent_as_content_parts(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(json_reply(completion("a cat")))
    question = user_message(
        "What is in these?",
        parts=[
            ImagePart(url="https://example.com/cat.png", detail="low"),
            ImagePart.from_bytes(PNG, "image/png"),
            TextPart(text="Answer briefly."),
            AudioPart.from_bytes(b"RIFF....WAVE", "audio/wav"),
            AudioPart(data="SUQz", mime_type="audio/mpeg"),
            FilePart.from_bytes(b"%PDF-1.7", "application/pdf", name="report.pdf"),
            FilePart(file_id="file-abc123"),
            VideoPart(url="https://example.com/clip.mp4"),
        ],
    )
    answer = await model.generate([system_message("Be brief."), question])
    assert answer.content == "a cat"
    sent = server.requests[0].json["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}  # plain messages are sent as before
    assert sent[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
            {"type": "text", "text": "Answer briefly."},
            {
                "type": "input_audio",
                "input_audio": {"data": base64.b64encode(b"RIFF....WAVE").decode(), "format": "wav"},
            },
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
            {
                "type": "file",
                "file": {
                    "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7").decode(),
                    "filename": "report.pdf",
                },
            },
            {"type": "file", "file": {"file_id": "file-abc123"}},
            {"type": "video_url", "video_url": {"url": "https://example.com/clip.mp4"}},
        ],
    }


async def test_parts_without_content_text_and_in_a_streamed_request(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(sse(text_chunks("seen")))
    message = Message(role="user", parts=[ImagePart(url="https://example.com/a.png")])
    async with await model.stream([message]) as reader:
        chunks = [c async for c in reader]
    assert concat_messages(chunks).content == "seen"
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}
    ]


@pytest.mark.parametrize(
    ("part", "match"),
    [
        (AudioPart(url="https://example.com/a.wav"), r"request message 1: user message: parts\[0\] is audio by URL"),
        (FilePart(url="https://example.com/a.pdf"), r"request message 1: user message: parts\[0\] is a file by URL"),
    ],
)
async def test_a_part_the_api_cannot_take_fails_before_any_request(
    server: OpenAIServer, model: OpenAIChatModel, part: AudioPart | FilePart, match: str
) -> None:
    with pytest.raises(ModelBadRequestError, match=match):
        await model.generate([system_message("s"), Message(role="user", parts=[part])])
    assert server.requests == []


async def test_a_lone_surrogate_in_a_part_names_the_part(server: OpenAIServer, model: OpenAIChatModel) -> None:
    message = Message(role="user", parts=[TextPart(text="ok"), TextPart(text="bad \ud800")])
    with pytest.raises(ModelBadRequestError, match=r"request message 0 .*content\[1\]\.text holds a lone surrogate"):
        await model.generate([message])
    message = Message(role="user", content="see", parts=[ImagePart(url="https://x/\udc00.png")])
    with pytest.raises(ModelBadRequestError, match=r"content\[1\]\.image_url\.url holds a lone surrogate"):
        await model.generate([message])
    assert server.requests == []


async def test_an_answer_whose_content_is_a_list_of_parts(server: OpenAIServer, model: OpenAIChatModel) -> None:
    body = completion(None)
    body["choices"][0]["message"]["content"] = [
        {"type": "text", "text": "Here it is: "},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "a square."},
    ]
    server.push(json_reply(body))
    answer = await model.generate([user_message("draw")])
    assert answer.content == "Here it is: a square."
    assert answer.parts == [ImagePart(url="data:image/png;base64,AAAA")]


async def test_streamed_parts_concatenate(server: OpenAIServer, model: OpenAIChatModel) -> None:
    server.push(
        sse(
            [
                delta_chunk({"content": [{"type": "text", "text": "An "}]}),
                delta_chunk({"content": [{"type": "text", "text": "image:"}]}),
                delta_chunk({"content": [{"type": "image_url", "image_url": {"url": "https://example.com/i.png"}}]}),
            ]
        )
    )
    async with await model.stream([user_message("draw")]) as reader:
        whole = concat_messages([c async for c in reader])
    assert whole.content == "An image:"
    assert whole.parts == [ImagePart(url="https://example.com/i.png")]
