"""Properties of messages with content parts (hypothesis): however a message's text and parts are cut into
stream chunks, concatenating them gives its content and its parts with adjacent text parts merged; and every such
message survives a JSON round trip."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compose.schema import ContentPart, FilePart, ImagePart, Message, TextPart, concat_messages

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
urls = st.sampled_from(["https://x/a.png", "https://x/b.png"])
media = st.one_of(
    st.builds(ImagePart, url=urls, detail=st.sampled_from([None, "low"])),
    st.builds(FilePart, file_id=st.sampled_from(["file-1", "file-2"]), name=st.sampled_from(["", "a.pdf"])),
)
parts = st.lists(st.one_of(st.builds(TextPart, text=texts), media), max_size=6)


def merged(items: list[ContentPart]) -> list[ContentPart]:
    out: list[ContentPart] = []
    for part in items:
        last = out[-1] if out else None
        if isinstance(part, TextPart) and isinstance(last, TextPart):
            out[-1] = TextPart(text=last.text + part.text)
        else:
            out.append(part)
    return out


@settings(max_examples=200)
@given(content=texts, items=parts, data=st.data())
def test_any_chunking_concatenates_to_the_merged_parts(
    content: str, items: list[ContentPart], data: st.DataObject
) -> None:
    chunks: list[Message] = []
    cut = data.draw(st.integers(0, len(content)))
    chunks += [Message(role="assistant", content=content[:cut]), Message(role="assistant", content=content[cut:])]
    for part in items:
        if isinstance(part, TextPart) and part.text:
            at = data.draw(st.integers(0, len(part.text)))
            pieces = [part.text[:at], part.text[at:]]
            chunks += [Message(role="assistant", parts=[TextPart(text=p)]) for p in pieces]
        else:
            chunks.append(Message(role="assistant", parts=[part]))
    whole = concat_messages(chunks)
    assert whole.content == content
    assert whole.parts == merged(items)


@settings(max_examples=200)
@given(content=texts, items=parts)
def test_a_message_with_parts_survives_json(content: str, items: list[ContentPart]) -> None:
    message = Message(role="user", content=content, parts=items)
    assert Message.model_validate_json(message.model_dump_json()) == message
